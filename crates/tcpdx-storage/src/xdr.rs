//! A bounds-checked big-endian reader over a borrowed slice (XDR, RFC 4506, and the
//! fixed-layout headers of SMB2 and iSCSI through [`le16`]/[`le32`]/[`le64`]).
//!
//! Every read returns `None` past the end instead of panicking; parsers chain them with `?`.

/// Cursor over XDR data.
#[derive(Clone, Copy, Debug)]
pub struct Xdr<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Xdr<'a> {
    /// A cursor at the start of `buf`.
    pub fn new(buf: &'a [u8]) -> Self {
        Self { buf, pos: 0 }
    }
    /// Bytes consumed so far.
    pub fn pos(&self) -> usize {
        self.pos
    }
    /// The bytes not read yet.
    pub fn rest(&self) -> &'a [u8] {
        self.buf.get(self.pos..).unwrap_or_default()
    }
    /// Next `n` bytes.
    pub fn bytes(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.pos.checked_add(n)?;
        let b = self.buf.get(self.pos..end)?;
        self.pos = end;
        Some(b)
    }
    /// Skips `n` bytes.
    pub fn skip(&mut self, n: usize) -> Option<()> {
        self.bytes(n).map(|_| ())
    }
    /// An unsigned 32-bit integer.
    pub fn u32(&mut self) -> Option<u32> {
        let b = self.bytes(4)?.first_chunk::<4>()?;
        Some(u32::from_be_bytes(*b))
    }
    /// An unsigned 64-bit integer (hyper).
    pub fn u64(&mut self) -> Option<u64> {
        let hi = self.u32()?;
        let lo = self.u32()?;
        Some(u64::from(hi) << 32 | u64::from(lo))
    }
    /// Variable-length opaque data of at most `max` bytes (padded to 4).
    pub fn opaque(&mut self, max: usize) -> Option<&'a [u8]> {
        let n = self.u32()? as usize;
        if n > max {
            return None;
        }
        let b = self.bytes(n)?;
        self.skip(pad4(n) - n)?;
        Some(b)
    }
    /// Skips variable-length opaque data of at most `max` bytes.
    pub fn skip_opaque(&mut self, max: usize) -> Option<()> {
        self.opaque(max).map(|_| ())
    }
    /// Skips a bitmap (count + words), at most `max` words.
    pub fn skip_bitmap(&mut self, max: usize) -> Option<()> {
        let n = self.u32()? as usize;
        if n > max {
            return None;
        }
        self.skip(n.checked_mul(4)?)
    }
}

/// `n` rounded up to a multiple of 4.
pub fn pad4(n: usize) -> usize {
    n.saturating_add(3) & !3
}

/// Big-endian u32 at `off`, if there.
pub fn be32(b: &[u8], off: usize) -> Option<u32> {
    Some(u32::from_be_bytes(array_at(b, off)?))
}

/// Little-endian u16 at `off`, if there.
pub fn le16(b: &[u8], off: usize) -> Option<u16> {
    Some(u16::from_le_bytes(array_at(b, off)?))
}

/// Little-endian u32 at `off`, if there.
pub fn le32(b: &[u8], off: usize) -> Option<u32> {
    Some(u32::from_le_bytes(array_at(b, off)?))
}

/// Little-endian u64 at `off`, if there.
pub fn le64(b: &[u8], off: usize) -> Option<u64> {
    Some(u64::from_le_bytes(array_at(b, off)?))
}

/// The `N` bytes at `off`, if there.
pub fn array_at<const N: usize>(b: &[u8], off: usize) -> Option<[u8; N]> {
    b.get(off..)?.first_chunk::<N>().copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_and_stops_at_the_end() {
        let b = [
            0, 0, 0, 5, b'h', b'e', b'l', b'l', b'o', 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 2,
        ];
        let mut x = Xdr::new(&b);
        assert_eq!(x.opaque(16), Some(&b"hello"[..]));
        assert_eq!(x.u64(), Some(1 << 32 | 2));
        assert_eq!(x.u32(), None);
        let mut y = Xdr::new(&b);
        assert_eq!(y.opaque(4), None); // longer than allowed
        assert_eq!(pad4(5), 8);
        assert_eq!(be32(&b, 17), None);
        assert_eq!(le16(&b, 0), Some(0));
        assert_eq!(le64(&b, 12), Some(0x0200_0000_0100_0000));
        assert_eq!(le32(&b, usize::MAX), None);
    }
}
