//! ARCNET header as Linux captures it (LINKTYPE_ARCNET_LINUX): source, destination, a
//! 2-byte offset, protocol ID, then for RFC 1201 protocols a split flag (plus 4 bytes for
//! an exception packet) and a 2-byte sequence number.

use crate::bytes::{byte, need, tail};
use crate::error::StopKind;

mod field {
    pub const PROTOCOL: usize = 4;
    pub const SPLIT_FLAG: usize = 5;
}

/// Length up to and including the protocol ID.
pub const BASE_HEADER_LEN: usize = 5;
/// RFC 1201 IPv4.
pub const PROTO_IP_RFC1201: u8 = 0xd4;
/// RFC 1051 IPv4 (no split flag).
pub const PROTO_IP_RFC1051: u8 = 0xf0;
/// IPv6 over ARCNET (RFC 2497, RFC 1201 framing).
pub const PROTO_IPV6: u8 = 0xc4;

/// Protocol IDs without the RFC 1201 fragmentation fields (Wireshark's list).
fn has_split_flag(proto: u8) -> bool {
    !matches!(proto, 0xf0 | 0xf1 | 0x80 | 0xcd | 0xfa)
}

/// A checked view of a Linux ARCNET header.
#[derive(Clone, Copy, Debug)]
pub struct ArcnetSlice<'a> {
    buf: &'a [u8],
    header_len: usize,
}

impl<'a> ArcnetSlice<'a> {
    /// Checks the header, including the RFC 1201 fields when the protocol has them.
    pub fn from_slice(buf: &'a [u8]) -> Result<Self, StopKind> {
        need(buf, BASE_HEADER_LEN)?;
        let mut header_len = BASE_HEADER_LEN;
        if has_split_flag(byte(buf, field::PROTOCOL)) {
            need(buf, header_len + 1)?;
            if byte(buf, field::SPLIT_FLAG) == 0xff {
                // Exception packet: flag, 2 pad bytes, protocol again, then the real flag.
                header_len += 4;
            }
            header_len += 3;
            need(buf, header_len)?;
        }
        Ok(Self { buf, header_len })
    }
    /// Protocol ID.
    pub fn protocol(&self) -> u8 {
        byte(self.buf, field::PROTOCOL)
    }
    /// Header length.
    pub fn header_len(&self) -> usize {
        self.header_len
    }
    /// Bytes after the header.
    pub fn payload(&self) -> &'a [u8] {
        tail(self.buf, self.header_len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc1201_ip() {
        let h = [0xbe, 0x50, 0xc0, 0x00, 0xd4, 0x00, 0x01, 0x6b, 0x45];
        let a = ArcnetSlice::from_slice(&h).unwrap();
        assert_eq!((a.protocol(), a.header_len()), (PROTO_IP_RFC1201, 8));
        assert_eq!(a.payload(), &[0x45]);
        for len in 0..8 {
            assert!(ArcnetSlice::from_slice(&h[..len]).is_err());
        }
    }

    #[test]
    fn rfc1051_ip_and_exception_packet() {
        let h = [1, 2, 0, 0, 0xf0, 0x45];
        assert_eq!(ArcnetSlice::from_slice(&h).unwrap().header_len(), 5);
        let e = [
            1, 2, 0, 0, 0xd4, 0xff, 0xff, 0xff, 0xd4, 0x00, 0x00, 0x01, 0x45,
        ];
        assert_eq!(ArcnetSlice::from_slice(&e).unwrap().header_len(), 12);
    }
}
