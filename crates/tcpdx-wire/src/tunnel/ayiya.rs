//! AYIYA ("Anything In Anything", UDP port 5072) header: 8 fixed bytes, an identity of
//! `2^idlen` bytes and a signature of `siglen * 4` bytes; a forward message (opcode 1)
//! carries the IP protocol named by its next-header byte.

use crate::bytes::{byte, need, tail};
use crate::error::StopKind;

mod field {
    pub const ID_LEN_TYPE: usize = 0;
    pub const SIG_LEN_HASH: usize = 1;
    pub const AUTH_OPCODE: usize = 2;
    pub const NEXT_HEADER: usize = 3;
}

/// Length of the fixed part.
pub const MIN_HEADER_LEN: usize = 8;
/// Opcode of a message that forwards a packet.
pub const OPCODE_FORWARD: u8 = 1;

/// A checked view of an AYIYA header.
#[derive(Clone, Copy, Debug)]
pub struct AyiyaSlice<'a> {
    buf: &'a [u8],
    header_len: usize,
}

impl<'a> AyiyaSlice<'a> {
    /// Checks the fixed part, the identity and the signature.
    pub fn from_slice(buf: &'a [u8]) -> Result<Self, StopKind> {
        need(buf, MIN_HEADER_LEN)?;
        let id_len = 1usize << (byte(buf, field::ID_LEN_TYPE) >> 4);
        let sig_len = usize::from(byte(buf, field::SIG_LEN_HASH) >> 4) * 4;
        let header_len = MIN_HEADER_LEN + id_len + sig_len;
        need(buf, header_len)?;
        Ok(Self { buf, header_len })
    }
    /// Operation code (1 = forward).
    pub fn opcode(&self) -> u8 {
        byte(self.buf, field::AUTH_OPCODE) & 0x0f
    }
    /// IP protocol number of the payload.
    pub fn next_header(&self) -> u8 {
        byte(self.buf, field::NEXT_HEADER)
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
    fn forward_ipv6() {
        // idlen 4 (16-byte identity), siglen 5 (20-byte signature).
        let mut h = vec![0x41, 0x52, 0x11, 41, 0, 0, 0, 0];
        h.extend_from_slice(&[0; 36]);
        h.push(0x60);
        let a = AyiyaSlice::from_slice(&h).unwrap();
        assert_eq!((a.opcode(), a.next_header(), a.header_len()), (1, 41, 44));
        assert_eq!(a.payload(), &[0x60]);
        for len in 0..44 {
            assert!(AyiyaSlice::from_slice(&h[..len]).is_err());
        }
    }
}
