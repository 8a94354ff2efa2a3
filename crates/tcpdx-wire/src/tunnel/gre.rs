//! GRE header (RFC 2784, RFC 2890 key/sequence, RFC 1701 routing, RFC 2637 enhanced GRE).
//!
//! 4 fixed bytes, then optional checksum+offset (C or R flag), key (K), sequence (S),
//! acknowledgement (A, version 1 only) and, with R, source route entries until a null one.

use crate::bytes::{be16, byte, need, tail};
use crate::error::StopKind;

mod field {
    use crate::bytes::Field;
    pub const FLAGS_VERSION: Field = 0..2;
    pub const PROTOCOL: Field = 2..4;
}

/// Length of the fixed part.
pub const MIN_HEADER_LEN: usize = 4;
/// Checksum present.
pub const FLAG_CHECKSUM: u16 = 0x8000;
/// Routing present.
pub const FLAG_ROUTING: u16 = 0x4000;
/// Key present.
pub const FLAG_KEY: u16 = 0x2000;
/// Sequence number present.
pub const FLAG_SEQUENCE: u16 = 0x1000;
/// Acknowledgement number present (enhanced GRE, version 1).
pub const FLAG_ACK: u16 = 0x0080;
/// GRE protocol type for PPP (PPTP).
pub const PROTO_PPP: u16 = 0x880b;

/// A checked view of a GRE header.
#[derive(Clone, Copy, Debug)]
pub struct GreSlice<'a> {
    buf: &'a [u8],
    header_len: usize,
}

impl<'a> GreSlice<'a> {
    /// Checks the fixed part and every optional field its flags announce.
    pub fn from_slice(buf: &'a [u8]) -> Result<Self, StopKind> {
        need(buf, MIN_HEADER_LEN)?;
        let flags = be16(buf, field::FLAGS_VERSION);
        let mut len = MIN_HEADER_LEN;
        if flags & (FLAG_CHECKSUM | FLAG_ROUTING) != 0 {
            len += 4;
        }
        if flags & FLAG_KEY != 0 {
            len += 4;
        }
        if flags & FLAG_SEQUENCE != 0 {
            len += 4;
        }
        if flags & 0x0007 == 1 && flags & FLAG_ACK != 0 {
            len += 4;
        }
        need(buf, len)?;
        if flags & FLAG_ROUTING != 0 {
            // Source route entries: address family (2), offset (1), length (1), data.
            loop {
                need(buf, len + 4)?;
                let family = be16(buf, len..len + 2);
                let sre_len = usize::from(byte(buf, len + 3));
                len += 4 + sre_len;
                if family == 0 && sre_len == 0 {
                    break;
                }
            }
            need(buf, len)?;
        }
        Ok(Self {
            buf,
            header_len: len,
        })
    }
    /// Flag bits (upper 13 bits of the first word).
    pub fn flags(&self) -> u16 {
        be16(self.buf, field::FLAGS_VERSION) & 0xfff8
    }
    /// GRE version (0, or 1 for PPTP's enhanced GRE).
    pub fn version(&self) -> u8 {
        (be16(self.buf, field::FLAGS_VERSION) & 0x0007) as u8
    }
    /// Protocol type of the payload (an EtherType).
    pub fn protocol(&self) -> u16 {
        be16(self.buf, field::PROTOCOL)
    }
    /// Header length including optional fields.
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
    fn plain_and_optional_fields() {
        let plain = [0x00, 0x00, 0x08, 0x00, 0x45];
        let g = GreSlice::from_slice(&plain).unwrap();
        assert_eq!((g.protocol(), g.header_len(), g.version()), (0x0800, 4, 0));
        assert_eq!(g.payload(), &[0x45]);

        // C + K + S: 4 + 4 + 4 + 4.
        let full = [
            0xb0, 0x00, 0x65, 0x58, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 2, 0xee,
        ];
        let g = GreSlice::from_slice(&full).unwrap();
        assert_eq!((g.protocol(), g.header_len()), (0x6558, 16));
        assert_eq!(g.flags(), FLAG_CHECKSUM | FLAG_KEY | FLAG_SEQUENCE);
        for len in 0..16 {
            assert!(GreSlice::from_slice(&full[..len]).is_err());
        }
    }

    #[test]
    fn pptp_enhanced_gre() {
        // Version 1, K + S + A: 4 + 4 + 4 + 4.
        let h = [0x30, 0x81, 0x88, 0x0b, 0, 4, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0];
        let g = GreSlice::from_slice(&h).unwrap();
        assert_eq!(
            (g.version(), g.protocol(), g.header_len()),
            (1, PROTO_PPP, 16)
        );
    }

    #[test]
    fn routing_entries() {
        // R: checksum/offset word, one 4-byte SRE then the null SRE.
        let h = [
            0x40, 0x00, 0x08, 0x00, 0, 0, 0, 0, 0x08, 0x00, 0, 4, 1, 2, 3, 4, 0, 0, 0, 0, 0x45,
        ];
        let g = GreSlice::from_slice(&h).unwrap();
        assert_eq!(g.header_len(), 20);
        for len in 0..20 {
            assert!(GreSlice::from_slice(&h[..len]).is_err());
        }
    }
}
