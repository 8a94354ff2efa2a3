//! GTP-U version 1 header (3GPP TS 29.281): 8 bytes; 4 more (sequence number, N-PDU
//! number, next extension type) when any of E, S, PN is set; then extension headers, each
//! `4 * n` bytes long with the next type in its last byte. A G-PDU (type 255) carries an
//! IP packet.

use crate::bytes::{be16, be32, byte, need, tail};
use crate::error::StopKind;

mod field {
    use crate::bytes::Field;
    pub const FLAGS: usize = 0;
    pub const MSG_TYPE: usize = 1;
    pub const LENGTH: Field = 2..4;
    pub const TEID: Field = 4..8;
    pub const NEXT_EXT: usize = 11;
}

/// Length of the mandatory part.
pub const MIN_HEADER_LEN: usize = 8;
/// Length with the optional sequence/N-PDU/next-extension word.
pub const OPT_HEADER_LEN: usize = 12;
/// Message type of a G-PDU (user data).
pub const MSG_G_PDU: u8 = 0xff;
/// Extension-header flag.
const FLAG_E: u8 = 0x04;
/// Sequence-number flag.
const FLAG_S: u8 = 0x02;
/// N-PDU-number flag.
const FLAG_PN: u8 = 0x01;

/// A checked view of a GTP-U header.
#[derive(Clone, Copy, Debug)]
pub struct GtpUSlice<'a> {
    buf: &'a [u8],
    header_len: usize,
}

impl<'a> GtpUSlice<'a> {
    /// Checks version 1, then the optional word and every extension header.
    pub fn from_slice(buf: &'a [u8]) -> Result<Self, StopKind> {
        need(buf, MIN_HEADER_LEN)?;
        if byte(buf, field::FLAGS) >> 5 != 1 {
            return Err(StopKind::Malformed("GTP version is not 1"));
        }
        let flags = byte(buf, field::FLAGS);
        let mut len = MIN_HEADER_LEN;
        if flags & (FLAG_E | FLAG_S | FLAG_PN) != 0 {
            need(buf, OPT_HEADER_LEN)?;
            len = OPT_HEADER_LEN;
            if flags & FLAG_E != 0 {
                let mut next = byte(buf, field::NEXT_EXT);
                while next != 0 {
                    need(buf, len + 1)?;
                    let ext_len = usize::from(byte(buf, len)) * 4;
                    if ext_len == 0 {
                        return Err(StopKind::Malformed("GTP extension header length 0"));
                    }
                    need(buf, len + ext_len)?;
                    next = byte(buf, len + ext_len - 1);
                    len += ext_len;
                }
            }
        }
        Ok(Self {
            buf,
            header_len: len,
        })
    }
    /// Message type (255 = G-PDU).
    pub fn message_type(&self) -> u8 {
        byte(self.buf, field::MSG_TYPE)
    }
    /// Length field: bytes after the mandatory 8-byte part.
    pub fn length(&self) -> u16 {
        be16(self.buf, field::LENGTH)
    }
    /// Tunnel endpoint identifier.
    pub fn teid(&self) -> u32 {
        be32(self.buf, field::TEID)
    }
    /// Header length including the optional word and extension headers.
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
    fn plain_g_pdu() {
        let h = [0x30, 0xff, 0x00, 0x01, 0, 0, 0, 9, 0x45];
        let g = GtpUSlice::from_slice(&h).unwrap();
        assert_eq!((g.message_type(), g.length(), g.teid()), (0xff, 1, 9));
        assert_eq!(g.header_len(), 8);
        assert_eq!(g.payload(), &[0x45]);
    }

    #[test]
    fn extension_headers() {
        // E set, next type 0x85 (PDU session container, 4 bytes, then no more).
        let h = [
            0x34, 0xff, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0x85, 0x01, 0x00, 0x01, 0x00, 0x45,
        ];
        let g = GtpUSlice::from_slice(&h).unwrap();
        assert_eq!(g.header_len(), 16);
        for len in 0..16 {
            assert!(GtpUSlice::from_slice(&h[..len]).is_err());
        }
        let mut bad = h;
        bad[12] = 0;
        assert!(matches!(
            GtpUSlice::from_slice(&bad),
            Err(StopKind::Malformed(_))
        ));
    }

    #[test]
    fn wrong_version() {
        let h = [0x50, 0xff, 0, 0, 0, 0, 0, 0];
        assert!(matches!(
            GtpUSlice::from_slice(&h),
            Err(StopKind::Malformed(_))
        ));
    }
}
