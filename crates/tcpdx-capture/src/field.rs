//! Fixed-size integer fields of file headers, records and blocks, in either byte order.
//!
//! Callers read fields only within a length they checked first; a range outside the slice
//! reads as 0 rather than panicking (unreachable: debug builds, and so the fuzz targets,
//! assert it).

use std::ops::Range;

/// The `u32` at `r` (4 bytes).
#[inline]
pub(crate) fn u32_at(b: &[u8], r: Range<usize>, big_endian: bool) -> u32 {
    debug_assert!(
        r.end <= b.len() && r.len() == 4,
        "field {r:?} of {}",
        b.len()
    );
    let Some(a) = b.get(r).and_then(|s| <[u8; 4]>::try_from(s).ok()) else {
        return 0;
    };
    if big_endian {
        u32::from_be_bytes(a)
    } else {
        u32::from_le_bytes(a)
    }
}

/// The `u16` at `r` (2 bytes).
#[inline]
pub(crate) fn u16_at(b: &[u8], r: Range<usize>, big_endian: bool) -> u16 {
    debug_assert!(
        r.end <= b.len() && r.len() == 2,
        "field {r:?} of {}",
        b.len()
    );
    let Some(a) = b.get(r).and_then(|s| <[u8; 2]>::try_from(s).ok()) else {
        return 0;
    };
    if big_endian {
        u16::from_be_bytes(a)
    } else {
        u16::from_le_bytes(a)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_orders() {
        let b = [1, 2, 3, 4];
        assert_eq!(u32_at(&b, 0..4, true), 0x0102_0304);
        assert_eq!(u32_at(&b, 0..4, false), 0x0403_0201);
        assert_eq!(u16_at(&b, 2..4, true), 0x0304);
        assert_eq!(u16_at(&b, 2..4, false), 0x0403);
    }
}
