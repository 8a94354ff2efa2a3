//! FDDI MAC header (LINKTYPE_FDDI, 13 bytes): frame control, destination, source; LLC
//! frames (frame control 0x50..=0x5f) carry an 802.2 LLC header.

use crate::bytes::{byte, need, tail};
use crate::error::StopKind;

mod field {
    pub const FRAME_CONTROL: usize = 0;
}

/// Length of the header.
pub const HEADER_LEN: usize = 13;

/// A checked view of an FDDI header.
#[derive(Clone, Copy, Debug)]
pub struct FddiSlice<'a> {
    buf: &'a [u8],
}

impl<'a> FddiSlice<'a> {
    /// Checks that the header was captured.
    pub fn from_slice(buf: &'a [u8]) -> Result<Self, StopKind> {
        need(buf, HEADER_LEN)?;
        Ok(Self { buf })
    }
    /// Frame control byte.
    pub fn frame_control(&self) -> u8 {
        byte(self.buf, field::FRAME_CONTROL)
    }
    /// True if the frame carries LLC (asynchronous LLC frame, any priority).
    pub fn is_llc(&self) -> bool {
        self.frame_control() & 0xf0 == 0x50
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
        let h = [0x50, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 0xaa];
        let f = FddiSlice::from_slice(&h).unwrap();
        assert!(f.is_llc());
        assert_eq!(f.payload(), &[0xaa]);
        for len in 0..HEADER_LEN {
            assert!(FddiSlice::from_slice(&h[..len]).is_err());
        }
    }
}
