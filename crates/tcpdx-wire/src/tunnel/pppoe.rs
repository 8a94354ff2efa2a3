//! PPPoE session header (RFC 2516), 6 bytes, followed by a PPP protocol field.

use crate::bytes::{be16, byte, need, tail};
use crate::error::StopKind;

mod field {
    use crate::bytes::Field;
    pub const VER_TYPE: usize = 0;
    pub const CODE: usize = 1;
    pub const SESSION: Field = 2..4;
    pub const LENGTH: Field = 4..6;
}

/// Length of the header.
pub const HEADER_LEN: usize = 6;

/// A checked view of a PPPoE header.
#[derive(Clone, Copy, Debug)]
pub struct PppoeSlice<'a> {
    buf: &'a [u8],
}

impl<'a> PppoeSlice<'a> {
    /// Checks that the header was captured.
    pub fn from_slice(buf: &'a [u8]) -> Result<Self, StopKind> {
        need(buf, HEADER_LEN)?;
        Ok(Self { buf })
    }
    /// Version and type nibbles (0x11).
    pub fn ver_type(&self) -> u8 {
        byte(self.buf, field::VER_TYPE)
    }
    /// Code (0 for session data).
    pub fn code(&self) -> u8 {
        byte(self.buf, field::CODE)
    }
    /// Session identifier.
    pub fn session(&self) -> u16 {
        be16(self.buf, field::SESSION)
    }
    /// Payload length (the PPP frame, protocol field included).
    pub fn length(&self) -> u16 {
        be16(self.buf, field::LENGTH)
    }
    /// Bytes after the header.
    pub fn payload(&self) -> &'a [u8] {
        tail(self.buf, HEADER_LEN)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deconstruct_and_truncate() {
        let h = [0x11, 0x00, 0x12, 0x34, 0x00, 0x16, 0x00, 0x21];
        let p = PppoeSlice::from_slice(&h).unwrap();
        assert_eq!(
            (p.ver_type(), p.code(), p.session(), p.length()),
            (0x11, 0, 0x1234, 22)
        );
        assert_eq!(p.payload(), &[0x00, 0x21]);
        for len in 0..HEADER_LEN {
            assert!(PppoeSlice::from_slice(&h[..len]).is_err());
        }
    }
}
