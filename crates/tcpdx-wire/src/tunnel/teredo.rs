//! Teredo (RFC 4380, UDP port 3544): IPv6 in UDP, optionally preceded by an
//! authentication indicator (type 0x0001) and/or an origin indication (type 0x0000).

use crate::bytes::{be16, byte, need, tail};
use crate::error::StopKind;

/// Type value of the authentication indicator.
const AUTH_TYPE: u16 = 0x0001;
/// Type value of the origin indication.
const ORIGIN_TYPE: u16 = 0x0000;
/// Fixed part of the authentication indicator: type, ID length, auth length.
const AUTH_FIXED_LEN: usize = 4;
/// Nonce (8) and confirmation byte (1) after the ID and authentication value.
const AUTH_TRAILER_LEN: usize = 9;
/// Length of the origin indication.
const ORIGIN_LEN: usize = 8;

/// A checked view of the Teredo indicators before the IPv6 packet.
#[derive(Clone, Copy, Debug)]
pub struct TeredoSlice<'a> {
    buf: &'a [u8],
    header_len: usize,
}

impl<'a> TeredoSlice<'a> {
    /// Steps over the optional indicators; the rest should be an IPv6 packet.
    pub fn from_slice(buf: &'a [u8]) -> Result<Self, StopKind> {
        need(buf, 2)?;
        let mut len = 0;
        if be16(buf, 0..2) == AUTH_TYPE {
            need(buf, AUTH_FIXED_LEN)?;
            len += AUTH_FIXED_LEN
                + usize::from(byte(buf, 2))
                + usize::from(byte(buf, 3))
                + AUTH_TRAILER_LEN;
            need(buf, len + 2)?;
        }
        if be16(buf, len..len + 2) == ORIGIN_TYPE {
            len += ORIGIN_LEN;
        }
        need(buf, len)?;
        Ok(Self {
            buf,
            header_len: len,
        })
    }
    /// Length of the indicators (0 when there are none).
    pub fn header_len(&self) -> usize {
        self.header_len
    }
    /// The encapsulated packet.
    pub fn payload(&self) -> &'a [u8] {
        tail(self.buf, self.header_len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indicators() {
        assert_eq!(TeredoSlice::from_slice(&[0x60, 0]).unwrap().header_len(), 0);
        let oi = [0, 0, 1, 2, 3, 4, 5, 6, 0x60];
        let t = TeredoSlice::from_slice(&oi).unwrap();
        assert_eq!((t.header_len(), t.payload()), (8, &[0x60][..]));
        // Auth with a 1-byte ID and no auth value, then an origin indication.
        let mut both = vec![0, 1, 1, 0, 0xaa];
        both.extend_from_slice(&[0; 9]);
        both.extend_from_slice(&[0, 0, 1, 2, 3, 4, 5, 6, 0x60]);
        assert_eq!(TeredoSlice::from_slice(&both).unwrap().header_len(), 22);
        for len in 0..22 {
            assert!(TeredoSlice::from_slice(&both[..len]).is_err());
        }
    }
}
