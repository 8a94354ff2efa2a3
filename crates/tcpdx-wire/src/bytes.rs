//! Byte-reading helpers shared by every header view.
//!
//! Views check their length once in `from_slice`; after that these helpers index fields
//! that are known to be in bounds, so they cannot panic (smoltcp's `check_len` contract).

use crate::error::StopKind;

/// A byte range of a header, e.g. `4..8` for the TCP sequence number.
pub(crate) type Field = core::ops::Range<usize>;

// Every helper below reads within the length a view checked in `from_slice`; out of range
// (unreachable, asserted in debug builds and so by the fuzz targets) it reads zeros or an
// empty slice instead of panicking.

/// `N` bytes starting at `at`.
#[inline]
pub(crate) fn arr<const N: usize>(buf: &[u8], at: usize) -> [u8; N] {
    debug_assert!(at + N <= buf.len(), "{N} bytes at {at} of {}", buf.len());
    buf.get(at..at + N)
        .and_then(|b| <[u8; N]>::try_from(b).ok())
        .unwrap_or([0; N])
}

/// The byte at `at`.
#[inline]
pub(crate) fn byte(buf: &[u8], at: usize) -> u8 {
    debug_assert!(at < buf.len(), "byte {at} of {}", buf.len());
    buf.get(at).copied().unwrap_or(0)
}

/// The bytes of `field`.
#[inline]
pub(crate) fn sub(buf: &[u8], field: Field) -> &[u8] {
    debug_assert!(
        field.start <= field.end && field.end <= buf.len(),
        "{field:?} of {}",
        buf.len()
    );
    buf.get(field).unwrap_or_default()
}

/// The bytes from `at` on.
#[inline]
pub(crate) fn tail(buf: &[u8], at: usize) -> &[u8] {
    debug_assert!(at <= buf.len(), "tail {at} of {}", buf.len());
    buf.get(at..).unwrap_or_default()
}

/// Reads a big-endian `u16` from a 2-byte field.
#[inline]
pub(crate) fn be16(buf: &[u8], field: Field) -> u16 {
    u16::from_be_bytes(arr(buf, field.start))
}

/// Reads a big-endian `u32` from a 4-byte field.
#[inline]
pub(crate) fn be32(buf: &[u8], field: Field) -> u32 {
    u32::from_be_bytes(arr(buf, field.start))
}

/// Saturating conversion for lengths and offsets reported in 16-bit error fields.
#[inline]
pub(crate) fn sat16(n: usize) -> u16 {
    u16::try_from(n).unwrap_or(u16::MAX)
}

/// "Needs `required` bytes, only `available` were there."
#[inline]
pub(crate) fn truncated(required: usize, available: usize) -> StopKind {
    StopKind::Truncated {
        required: sat16(required),
        available: sat16(available),
    }
}

/// Returns `Err(Truncated)` unless `buf` holds at least `required` bytes.
#[inline]
pub(crate) fn need(buf: &[u8], required: usize) -> Result<(), StopKind> {
    if buf.len() < required {
        Err(truncated(required, buf.len()))
    } else {
        Ok(())
    }
}
