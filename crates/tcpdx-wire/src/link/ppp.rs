//! PPP (RFC 1661) with optional HDLC-like address/control bytes (RFC 1662), and Cisco HDLC.
//!
//! The protocol field is 1 byte when its low bit is set (protocol-field compression),
//! else 2 bytes.

use crate::bytes::{be16, byte, need, tail};
use crate::error::StopKind;

/// HDLC all-stations address.
pub const HDLC_ADDRESS: u8 = 0xff;
/// HDLC unnumbered-information control byte.
pub const HDLC_CONTROL: u8 = 0x03;
/// Cisco HDLC unicast address byte.
pub const CHDLC_UNICAST: u8 = 0x0f;
/// Cisco HDLC multicast address byte.
pub const CHDLC_MULTICAST: u8 = 0x8f;
/// Length of a Cisco HDLC header (address, control, EtherType).
pub const CHDLC_HEADER_LEN: usize = 4;

/// PPP protocol numbers the decoder follows.
pub mod proto {
    /// IPv4.
    pub const IPV4: u16 = 0x0021;
    /// IPv6.
    pub const IPV6: u16 = 0x0057;
    /// MPLS unicast.
    pub const MPLS: u16 = 0x0281;
    /// MPLS multicast.
    pub const MPLS_MULTICAST: u16 = 0x0283;
}

/// A checked view of a PPP header.
#[derive(Clone, Copy, Debug)]
pub struct PppSlice<'a> {
    buf: &'a [u8],
    header_len: usize,
    protocol: u16,
}

impl<'a> PppSlice<'a> {
    /// PPP with the protocol field at offset 0 (PPPoE, PPP without framing bytes).
    pub fn from_slice(buf: &'a [u8]) -> Result<Self, StopKind> {
        Self::parse(buf, 0)
    }
    /// PPP that may start with `ff 03` (LINKTYPE_PPP, LINKTYPE_PPP_HDLC): as Wireshark
    /// does, a first byte of `ff` means the two framing bytes are there.
    pub fn from_hdlc_slice(buf: &'a [u8]) -> Result<Self, StopKind> {
        need(buf, 1)?;
        let start = if byte(buf, 0) == HDLC_ADDRESS { 2 } else { 0 };
        Self::parse(buf, start)
    }
    fn parse(buf: &'a [u8], start: usize) -> Result<Self, StopKind> {
        need(buf, start + 1)?;
        let first = byte(buf, start);
        let (protocol, header_len) = if first & 0x01 != 0 {
            (u16::from(first), start + 1)
        } else {
            need(buf, start + 2)?;
            (be16(buf, start..start + 2), start + 2)
        };
        Ok(Self {
            buf,
            header_len,
            protocol,
        })
    }
    /// PPP protocol number (a compressed 1-byte field is returned as is, e.g. `0x21`).
    pub fn protocol(&self) -> u16 {
        self.protocol
    }
    /// Header length: framing bytes plus the protocol field.
    pub fn header_len(&self) -> usize {
        self.header_len
    }
    /// Bytes after the header.
    pub fn payload(&self) -> &'a [u8] {
        tail(self.buf, self.header_len)
    }
}

/// True if a PPP-HDLC link frame is really Cisco HDLC (Wireshark hands those to its CHDLC
/// dissector): the first byte is the Cisco unicast or multicast address.
pub fn is_cisco_hdlc(buf: &[u8]) -> bool {
    matches!(buf.first(), Some(&CHDLC_UNICAST | &CHDLC_MULTICAST))
}

/// The EtherType of a Cisco HDLC frame (address, control, 2-byte EtherType).
pub fn cisco_hdlc_ethertype(buf: &[u8]) -> Result<u16, StopKind> {
    need(buf, CHDLC_HEADER_LEN)?;
    Ok(be16(buf, 2..4))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hdlc_framing_and_compression() {
        let full = [0xff, 0x03, 0x00, 0x21, 0x45];
        let p = PppSlice::from_hdlc_slice(&full).unwrap();
        assert_eq!((p.protocol(), p.header_len()), (proto::IPV4, 4));
        assert_eq!(p.payload(), &[0x45]);

        let bare = [0x00, 0x57, 0x60];
        let p = PppSlice::from_hdlc_slice(&bare).unwrap();
        assert_eq!((p.protocol(), p.header_len()), (proto::IPV6, 2));

        let pfc = [0x21, 0x45];
        let p = PppSlice::from_slice(&pfc).unwrap();
        assert_eq!((p.protocol(), p.header_len()), (0x21, 1));
    }

    #[test]
    fn truncated_at_every_length() {
        let full = [0xff, 0x03, 0x00, 0x21];
        for len in 0..full.len() {
            assert!(matches!(
                PppSlice::from_hdlc_slice(&full[..len]),
                Err(StopKind::Truncated { .. })
            ));
        }
    }

    #[test]
    fn cisco_hdlc() {
        let f = [0x0f, 0x00, 0x08, 0x00, 0x45];
        assert!(is_cisco_hdlc(&f));
        assert_eq!(cisco_hdlc_ethertype(&f), Ok(0x0800));
        assert!(cisco_hdlc_ethertype(&f[..3]).is_err());
    }
}
