//! L2TP version 2 header (RFC 2661, UDP port 1701): flags and version, then optional
//! length (L), tunnel and session IDs, optional Ns/Nr (S), optional offset size and
//! padding (O). Data messages (T clear) carry a PPP frame.

use crate::bytes::{be16, need, tail};
use crate::error::StopKind;

mod field {
    use crate::bytes::Field;
    pub const FLAGS_VERSION: Field = 0..2;
}

const FLAG_TYPE: u16 = 0x8000;
const FLAG_LENGTH: u16 = 0x4000;
const FLAG_SEQUENCE: u16 = 0x0800;
const FLAG_OFFSET: u16 = 0x0200;
/// The only version this module reads.
pub const VERSION_2: u16 = 2;

/// A checked view of an L2TPv2 header.
#[derive(Clone, Copy, Debug)]
pub struct L2tpSlice<'a> {
    buf: &'a [u8],
    header_len: usize,
}

impl<'a> L2tpSlice<'a> {
    /// Checks version 2 and every field the flags announce.
    pub fn from_slice(buf: &'a [u8]) -> Result<Self, StopKind> {
        need(buf, 2)?;
        let flags = be16(buf, field::FLAGS_VERSION);
        if flags & 0x000f != VERSION_2 {
            return Err(StopKind::NotIp);
        }
        let mut len = 2;
        if flags & FLAG_LENGTH != 0 {
            len += 2;
        }
        len += 4; // tunnel ID, session ID
        if flags & FLAG_SEQUENCE != 0 {
            len += 4;
        }
        if flags & FLAG_OFFSET != 0 {
            need(buf, len + 2)?;
            len += 2 + usize::from(be16(buf, len..len + 2));
        }
        need(buf, len)?;
        Ok(Self {
            buf,
            header_len: len,
        })
    }
    /// True for a control message (T flag).
    pub fn is_control(&self) -> bool {
        be16(self.buf, field::FLAGS_VERSION) & FLAG_TYPE != 0
    }
    /// The length field (whole message, header included), when the L flag is set.
    pub fn length(&self) -> Option<u16> {
        (be16(self.buf, field::FLAGS_VERSION) & FLAG_LENGTH != 0).then(|| be16(self.buf, 2..4))
    }
    /// Header length.
    pub fn header_len(&self) -> usize {
        self.header_len
    }
    /// The PPP frame.
    pub fn payload(&self) -> &'a [u8] {
        tail(self.buf, self.header_len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_decide_the_length() {
        let plain = [0x00, 0x02, 0, 1, 0, 1, 0xff];
        let l = L2tpSlice::from_slice(&plain).unwrap();
        assert_eq!(
            (l.header_len(), l.length(), l.is_control()),
            (6, None, false)
        );
        let with_len = [0x40, 0x02, 0, 56, 0, 1, 0, 1];
        assert_eq!(L2tpSlice::from_slice(&with_len).unwrap().length(), Some(56));
        let seq_off = [0x0a, 0x02, 0, 1, 0, 1, 0, 0, 0, 0, 0, 2, 0, 0, 0xff];
        let l = L2tpSlice::from_slice(&seq_off).unwrap();
        assert_eq!(l.header_len(), 14);
        for len in 0..14 {
            assert!(L2tpSlice::from_slice(&seq_off[..len]).is_err());
        }
        let v3 = [0x00, 0x03, 0, 0, 0, 1];
        assert_eq!(L2tpSlice::from_slice(&v3).unwrap_err(), StopKind::NotIp);
    }
}
