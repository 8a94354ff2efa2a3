//! Linux "cooked" capture header, version 2 (LINKTYPE_LINUX_SLL2, 20 bytes).

use crate::bytes::{be16, be32, byte, need, sub, tail};
use crate::error::StopKind;

mod field {
    use crate::bytes::Field;
    pub const PROTOCOL: Field = 0..2;
    pub const IFINDEX: Field = 4..8;
    pub const HATYPE: Field = 8..10;
    pub const PKTTYPE: usize = 10;
    pub const HALEN: usize = 11;
    pub const ADDR: Field = 12..20;
}

/// Length of the header.
pub const HEADER_LEN: usize = 20;

/// A checked view of an SLL2 header.
#[derive(Clone, Copy, Debug)]
pub struct Sll2Slice<'a> {
    buf: &'a [u8],
}

impl<'a> Sll2Slice<'a> {
    /// Checks that `buf` holds a full header.
    pub fn from_slice(buf: &'a [u8]) -> Result<Self, StopKind> {
        need(buf, HEADER_LEN)?;
        Ok(Self { buf })
    }
    /// Protocol: an EtherType, or a Linux `ETH_P_*` code when `<= 1536` (as in SLL).
    pub fn protocol(&self) -> u16 {
        be16(self.buf, field::PROTOCOL)
    }
    /// Interface index.
    pub fn ifindex(&self) -> u32 {
        be32(self.buf, field::IFINDEX)
    }
    /// ARPHRD_* hardware type.
    pub fn hatype(&self) -> u16 {
        be16(self.buf, field::HATYPE)
    }
    /// Packet type (0 to us, 4 sent by us, ...).
    pub fn packet_type(&self) -> u8 {
        byte(self.buf, field::PKTTYPE)
    }
    /// Link-layer address length.
    pub fn halen(&self) -> u8 {
        byte(self.buf, field::HALEN)
    }
    /// The 8-byte link-layer address field.
    pub fn addr(&self) -> &'a [u8] {
        sub(self.buf, field::ADDR)
    }
    /// Bytes after the header.
    pub fn payload(&self) -> &'a [u8] {
        tail(self.buf, HEADER_LEN)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    static HDR: [u8; 21] = [
        0x86, 0xdd, 0, 0, 0, 0, 0, 3, 0x00, 0x01, 4, 6, 1, 2, 3, 4, 5, 6, 0, 0, 0x60,
    ];

    #[test]
    fn deconstruct() {
        let s = Sll2Slice::from_slice(&HDR).unwrap();
        assert_eq!(s.protocol(), 0x86dd);
        assert_eq!(s.ifindex(), 3);
        assert_eq!(s.hatype(), 1);
        assert_eq!(s.packet_type(), 4);
        assert_eq!(s.halen(), 6);
        assert_eq!(&s.addr()[..6], &[1, 2, 3, 4, 5, 6]);
        assert_eq!(s.payload(), &[0x60]);
    }

    #[test]
    fn truncated_at_every_length() {
        for len in 0..HEADER_LEN {
            assert!(Sll2Slice::from_slice(&HDR[..len]).is_err());
        }
    }
}
