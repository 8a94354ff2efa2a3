//! CAPWAP data channel header (RFC 5415, UDP port 5247): `HLEN * 4` bytes, preamble
//! included; the T flag says whether the payload is in the native format of the wireless
//! binding (802.11 when WBID is 1) or an Ethernet frame.

use crate::bytes::{be32, byte, need, tail};
use crate::error::StopKind;

mod field {
    use crate::bytes::Field;
    pub const PREAMBLE: usize = 0;
    pub const HEADER_WORD: Field = 0..4;
}

/// Length of the fixed header.
pub const MIN_HEADER_LEN: usize = 8;
/// Wireless binding ID of IEEE 802.11.
pub const WBID_IEEE80211: u8 = 1;
const FLAG_T: u32 = 1 << 8;
const FLAG_F: u32 = 1 << 7;

/// A checked view of a CAPWAP data header.
#[derive(Clone, Copy, Debug)]
pub struct CapwapSlice<'a> {
    buf: &'a [u8],
}

impl<'a> CapwapSlice<'a> {
    /// Checks preamble type 0 (a CAPWAP header, not DTLS) and `HLEN * 4` bytes.
    pub fn from_slice(buf: &'a [u8]) -> Result<Self, StopKind> {
        need(buf, MIN_HEADER_LEN)?;
        if byte(buf, field::PREAMBLE) != 0 {
            return Err(StopKind::NotIp);
        }
        let s = Self { buf };
        if s.header_len() < MIN_HEADER_LEN {
            return Err(StopKind::Malformed("CAPWAP header length below 8"));
        }
        need(buf, s.header_len())?;
        Ok(s)
    }
    fn word(&self) -> u32 {
        be32(self.buf, field::HEADER_WORD)
    }
    /// Header length (HLEN * 4).
    pub fn header_len(&self) -> usize {
        ((self.word() >> 19) & 0x1f) as usize * 4
    }
    /// Wireless binding ID.
    pub fn wbid(&self) -> u8 {
        ((self.word() >> 9) & 0x1f) as u8
    }
    /// T flag: payload in the binding's native format (else Ethernet).
    pub fn native_frame(&self) -> bool {
        self.word() & FLAG_T != 0
    }
    /// F flag: this is a fragment.
    pub fn is_fragment(&self) -> bool {
        self.word() & FLAG_F != 0
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
    fn native_80211() {
        // HLEN 2, WBID 1, T set.
        let h = [0x00, 0x10, 0x03, 0x00, 0, 0, 0, 0, 0x08];
        let c = CapwapSlice::from_slice(&h).unwrap();
        assert_eq!((c.header_len(), c.wbid(), c.native_frame()), (8, 1, true));
        assert!(!c.is_fragment());
        assert_eq!(c.payload(), &[0x08]);
        for len in 0..8 {
            assert!(CapwapSlice::from_slice(&h[..len]).is_err());
        }
        let dtls = [0x01, 0, 0, 0, 0, 0, 0, 0];
        assert_eq!(CapwapSlice::from_slice(&dtls).unwrap_err(), StopKind::NotIp);
    }
}
