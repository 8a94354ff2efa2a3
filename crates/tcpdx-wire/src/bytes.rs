//! Byte-reading helpers shared by every header view.
//!
//! Views check their length once in `from_slice`; after that these helpers index fields
//! that are known to be in bounds, so they cannot panic (smoltcp's `check_len` contract).

use crate::error::StopKind;

/// A byte range of a header, e.g. `4..8` for the TCP sequence number.
pub(crate) type Field = core::ops::Range<usize>;

/// Reads a big-endian `u16` from a 2-byte field.
#[inline]
pub(crate) fn be16(buf: &[u8], field: Field) -> u16 {
    let b = &buf[field];
    u16::from_be_bytes([b[0], b[1]])
}

/// Reads a big-endian `u32` from a 4-byte field.
#[inline]
pub(crate) fn be32(buf: &[u8], field: Field) -> u32 {
    let b = &buf[field];
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
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
