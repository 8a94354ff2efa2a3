//! VXLAN header (RFC 7348), 8 bytes, then an Ethernet frame; VXLAN-GPE (UDP port 4790)
//! uses the same 8 bytes with a next-protocol byte at offset 3.

use crate::bytes::{arr, byte, need, tail};
use crate::error::StopKind;

mod field {
    use crate::bytes::Field;
    pub const FLAGS: usize = 0;
    pub const GPE_NEXT_PROTOCOL: usize = 3;
    pub const VNI: Field = 4..7;
}

/// Length of the header.
pub const HEADER_LEN: usize = 8;

/// VXLAN-GPE next-protocol values.
pub mod gpe {
    /// IPv4.
    pub const IPV4: u8 = 1;
    /// IPv6.
    pub const IPV6: u8 = 2;
    /// Ethernet.
    pub const ETHERNET: u8 = 3;
    /// MPLS.
    pub const MPLS: u8 = 5;
}

/// A checked view of a VXLAN header.
#[derive(Clone, Copy, Debug)]
pub struct VxlanSlice<'a> {
    buf: &'a [u8],
}

impl<'a> VxlanSlice<'a> {
    /// Checks that the header was captured.
    pub fn from_slice(buf: &'a [u8]) -> Result<Self, StopKind> {
        need(buf, HEADER_LEN)?;
        Ok(Self { buf })
    }
    /// Flags byte (0x08: VNI valid).
    pub fn flags(&self) -> u8 {
        byte(self.buf, field::FLAGS)
    }
    /// VXLAN network identifier (24 bits).
    pub fn vni(&self) -> u32 {
        let [a, b, c] = arr(self.buf, field::VNI.start);
        u32::from_be_bytes([0, a, b, c])
    }
    /// VXLAN-GPE: the next-protocol byte.
    pub fn gpe_next_protocol(&self) -> u8 {
        byte(self.buf, field::GPE_NEXT_PROTOCOL)
    }
    /// The inner Ethernet frame.
    pub fn payload(&self) -> &'a [u8] {
        tail(self.buf, HEADER_LEN)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deconstruct_and_truncate() {
        let h = [0x08, 0, 0, 0x03, 0x00, 0x12, 0x34, 0, 0xaa];
        let v = VxlanSlice::from_slice(&h).unwrap();
        assert_eq!((v.flags(), v.vni()), (0x08, 0x1234));
        assert_eq!(v.gpe_next_protocol(), gpe::ETHERNET);
        assert_eq!(v.payload(), &[0xaa]);
        for len in 0..HEADER_LEN {
            assert!(VxlanSlice::from_slice(&h[..len]).is_err());
        }
    }
}
