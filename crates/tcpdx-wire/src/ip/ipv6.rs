//! IPv6 fixed header (RFC 8200), 40 bytes. Extension headers are in [`super::ext`].

use std::net::Ipv6Addr;

use crate::bytes::{be16, be32, byte, need, sub, tail};
use crate::error::StopKind;

mod field {
    use crate::bytes::Field;
    pub const VER_TC_FLOW: Field = 0..4;
    pub const PAYLOAD_LEN: Field = 4..6;
    pub const NEXT_HEADER: usize = 6;
    pub const HOP_LIMIT: usize = 7;
    pub const SRC: Field = 8..24;
    pub const DST: Field = 24..40;
}

/// Length of the fixed header.
pub const HEADER_LEN: usize = 40;

/// A checked view of an IPv6 header and what follows it.
#[derive(Clone, Copy, Debug)]
pub struct Ipv6Slice<'a> {
    buf: &'a [u8],
}

impl<'a> Ipv6Slice<'a> {
    /// Checks version 6 and that the fixed header is present.
    pub fn from_slice(buf: &'a [u8]) -> Result<Self, StopKind> {
        need(buf, 1)?;
        if byte(buf, 0) >> 4 != 6 {
            return Err(StopKind::Malformed("IPv6 version is not 6"));
        }
        need(buf, HEADER_LEN)?;
        Ok(Self { buf })
    }
    /// Traffic class.
    pub fn traffic_class(&self) -> u8 {
        (be32(self.buf, field::VER_TC_FLOW) >> 20) as u8
    }
    /// Flow label (20 bits).
    pub fn flow_label(&self) -> u32 {
        be32(self.buf, field::VER_TC_FLOW) & 0x000f_ffff
    }
    /// Payload length field (extension headers included; 0 for jumbograms and some TSO).
    pub fn payload_len(&self) -> u16 {
        be16(self.buf, field::PAYLOAD_LEN)
    }
    /// First next-header value.
    pub fn next_header(&self) -> u8 {
        byte(self.buf, field::NEXT_HEADER)
    }
    /// Hop limit.
    pub fn hop_limit(&self) -> u8 {
        byte(self.buf, field::HOP_LIMIT)
    }
    /// Source address.
    pub fn src(&self) -> Ipv6Addr {
        addr(sub(self.buf, field::SRC))
    }
    /// Destination address.
    pub fn dst(&self) -> Ipv6Addr {
        addr(sub(self.buf, field::DST))
    }
    /// Captured bytes after the fixed header.
    pub fn rest(&self) -> &'a [u8] {
        tail(self.buf, HEADER_LEN)
    }
}

fn addr(b: &[u8]) -> Ipv6Addr {
    let mut a = [0u8; 16];
    a.copy_from_slice(b);
    Ipv6Addr::from(a)
}

#[cfg(test)]
mod tests {
    use super::*;

    static HDR: [u8; 41] = [
        0x6a, 0xb1, 0x23, 0x45, 0x00, 0x14, 0x06, 0x40, // ver/tc/flow, plen 20, TCP, hlim 64
        0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, // src
        0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, // dst
        0xee,
    ];

    #[test]
    fn deconstruct() {
        let ip = Ipv6Slice::from_slice(&HDR).unwrap();
        assert_eq!(ip.traffic_class(), 0xab);
        assert_eq!(ip.flow_label(), 0x12345);
        assert_eq!(ip.payload_len(), 20);
        assert_eq!(ip.next_header(), 6);
        assert_eq!(ip.hop_limit(), 64);
        assert_eq!(ip.src(), "2001:db8::1".parse::<Ipv6Addr>().unwrap());
        assert_eq!(ip.dst(), "2001:db8::2".parse::<Ipv6Addr>().unwrap());
        assert_eq!(ip.rest(), &[0xee]);
    }

    #[test]
    fn truncated_at_every_length() {
        for len in 0..HEADER_LEN {
            assert!(matches!(
                Ipv6Slice::from_slice(&HDR[..len]),
                Err(StopKind::Truncated { .. })
            ));
        }
    }

    #[test]
    fn wrong_version() {
        let mut h = HDR;
        h[0] = 0x45;
        assert!(matches!(
            Ipv6Slice::from_slice(&h),
            Err(StopKind::Malformed(_))
        ));
    }
}
