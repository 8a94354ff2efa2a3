//! Geneve header (RFC 8926): 8 fixed bytes plus `opt_len * 4` bytes of options, then a
//! payload named by an EtherType (0x6558 Ethernet, 0x0800 IPv4, 0x86dd IPv6).

use crate::bytes::{arr, be16, byte, need, tail};
use crate::error::StopKind;

mod field {
    use crate::bytes::Field;
    pub const VER_OPTLEN: usize = 0;
    pub const FLAGS: usize = 1;
    pub const PROTOCOL: Field = 2..4;
    pub const VNI: Field = 4..7;
}

/// Length of the fixed part.
pub const MIN_HEADER_LEN: usize = 8;

/// A checked view of a Geneve header.
#[derive(Clone, Copy, Debug)]
pub struct GeneveSlice<'a> {
    buf: &'a [u8],
}

impl<'a> GeneveSlice<'a> {
    /// Checks the fixed part and the options.
    pub fn from_slice(buf: &'a [u8]) -> Result<Self, StopKind> {
        need(buf, MIN_HEADER_LEN)?;
        let s = Self { buf };
        need(buf, s.header_len())?;
        Ok(s)
    }
    /// Version (2 bits, 0).
    pub fn version(&self) -> u8 {
        byte(self.buf, field::VER_OPTLEN) >> 6
    }
    /// Flags byte (O and C bits).
    pub fn flags(&self) -> u8 {
        byte(self.buf, field::FLAGS)
    }
    /// Payload protocol (an EtherType).
    pub fn protocol(&self) -> u16 {
        be16(self.buf, field::PROTOCOL)
    }
    /// Virtual network identifier.
    pub fn vni(&self) -> u32 {
        let [a, b, c] = arr(self.buf, field::VNI.start);
        u32::from_be_bytes([0, a, b, c])
    }
    /// Header length, options included.
    pub fn header_len(&self) -> usize {
        MIN_HEADER_LEN + usize::from(byte(self.buf, field::VER_OPTLEN) & 0x3f) * 4
    }
    /// Bytes after the header.
    pub fn payload(&self) -> &'a [u8] {
        tail(self.buf, self.header_len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn with_options() {
        let h = [
            0x01, 0x00, 0x65, 0x58, 0, 0, 7, 0, 0x01, 0x02, 0x03, 0x04, 0xaa,
        ];
        let g = GeneveSlice::from_slice(&h).unwrap();
        assert_eq!((g.version(), g.protocol(), g.vni()), (0, 0x6558, 7));
        assert_eq!(g.header_len(), 12);
        assert_eq!(g.payload(), &[0xaa]);
        for len in 0..12 {
            assert!(GeneveSlice::from_slice(&h[..len]).is_err());
        }
    }
}
