//! Linux "cooked" capture header, version 1 (LINKTYPE_LINUX_SLL, 16 bytes).

use crate::bytes::{be16, need, sub, tail};
use crate::error::StopKind;

mod field {
    use crate::bytes::Field;
    pub const PKTTYPE: Field = 0..2;
    pub const HATYPE: Field = 2..4;
    pub const HALEN: Field = 4..6;
    pub const ADDR: Field = 6..14;
    pub const PROTOCOL: Field = 14..16;
}

/// Length of the header.
pub const HEADER_LEN: usize = 16;

/// `sll_protocol` values at or below this are Linux `ETH_P_*` codes, not EtherTypes.
pub const MAX_LINUX_PROTO: u16 = 1536;
/// `ETH_P_802_2`: an 802.2 LLC header follows.
pub const PROTO_802_2: u16 = 0x0004;
/// `ETH_P_802_3`-style Ethernet frame follows (Wireshark's `LINUX_SLL_P_ETHERNET`).
pub const PROTO_ETHERNET: u16 = 0x0003;
/// `ETH_P_PPP_MP`-style PPP in HDLC-like framing (Wireshark's `LINUX_SLL_P_PPPHDLC`).
pub const PROTO_PPPHDLC: u16 = 0x0007;
/// `ARPHRD_NETLINK`: the payload is a netlink message, never IP.
pub const ARPHRD_NETLINK: u16 = 824;

/// A checked view of an SLL header.
#[derive(Clone, Copy, Debug)]
pub struct SllSlice<'a> {
    buf: &'a [u8],
}

impl<'a> SllSlice<'a> {
    /// Checks that `buf` holds a full header.
    pub fn from_slice(buf: &'a [u8]) -> Result<Self, StopKind> {
        need(buf, HEADER_LEN)?;
        Ok(Self { buf })
    }
    /// Packet type (0 to us, 4 sent by us, ...).
    pub fn packet_type(&self) -> u16 {
        be16(self.buf, field::PKTTYPE)
    }
    /// ARPHRD_* hardware type.
    pub fn hatype(&self) -> u16 {
        be16(self.buf, field::HATYPE)
    }
    /// Link-layer address length.
    pub fn halen(&self) -> u16 {
        be16(self.buf, field::HALEN)
    }
    /// The 8-byte link-layer address field (first `halen` bytes meaningful).
    pub fn addr(&self) -> &'a [u8] {
        sub(self.buf, field::ADDR)
    }
    /// Protocol: an EtherType, or a Linux `ETH_P_*` code when `<= 1536`.
    pub fn protocol(&self) -> u16 {
        be16(self.buf, field::PROTOCOL)
    }
    /// Bytes after the header.
    pub fn payload(&self) -> &'a [u8] {
        tail(self.buf, HEADER_LEN)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    static HDR: [u8; 17] = [
        0x00, 0x04, 0x00, 0x01, 0x00, 0x06, 1, 2, 3, 4, 5, 6, 0, 0, 0x08, 0x00, 0x45,
    ];

    #[test]
    fn deconstruct() {
        let s = SllSlice::from_slice(&HDR).unwrap();
        assert_eq!(s.packet_type(), 4);
        assert_eq!(s.hatype(), 1);
        assert_eq!(s.halen(), 6);
        assert_eq!(&s.addr()[..6], &[1, 2, 3, 4, 5, 6]);
        assert_eq!(s.protocol(), 0x0800);
        assert_eq!(s.payload(), &[0x45]);
    }

    #[test]
    fn truncated_at_every_length() {
        for len in 0..HEADER_LEN {
            assert!(SllSlice::from_slice(&HDR[..len]).is_err());
        }
    }
}
