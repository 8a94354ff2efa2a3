//! MPLS label stack (RFC 3032): 4-byte entries until the bottom-of-stack bit.
//!
//! What follows the stack is not announced; like Wireshark, the first nibble decides
//! (4: IPv4, 6: IPv6, 0: a pseudowire control word then Ethernet).

use crate::bytes::{be32, byte, need, tail};
use crate::error::StopKind;

/// Length of one label stack entry.
pub const ENTRY_LEN: usize = 4;
/// Length of a pseudowire control word (RFC 4385).
pub const CONTROL_WORD_LEN: usize = 4;

/// A checked view of a whole label stack.
#[derive(Clone, Copy, Debug)]
pub struct MplsSlice<'a> {
    buf: &'a [u8],
    depth: usize,
}

impl<'a> MplsSlice<'a> {
    /// Walks entries until the bottom-of-stack bit; every entry must be captured.
    pub fn from_slice(buf: &'a [u8]) -> Result<Self, StopKind> {
        let mut depth = 0;
        loop {
            let at = depth * ENTRY_LEN;
            need(buf, at + ENTRY_LEN)?;
            depth += 1;
            if byte(buf, at + 2) & 0x01 != 0 {
                break;
            }
        }
        Ok(Self { buf, depth })
    }
    /// Number of entries.
    pub fn depth(&self) -> usize {
        self.depth
    }
    /// Label of entry `i` (0 = top), if it exists.
    pub fn label(&self, i: usize) -> Option<u32> {
        (i < self.depth).then(|| be32(self.buf, i * 4..i * 4 + 4) >> 12)
    }
    /// Header length (all entries).
    pub fn header_len(&self) -> usize {
        self.depth * ENTRY_LEN
    }
    /// Bytes after the stack.
    pub fn payload(&self) -> &'a [u8] {
        tail(self.buf, self.header_len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_labels() {
        let h = [0x00, 0x01, 0x00, 0x40, 0x00, 0x02, 0x01, 0x40, 0x45];
        let m = MplsSlice::from_slice(&h).unwrap();
        assert_eq!(m.depth(), 2);
        assert_eq!(m.label(0), Some(16));
        assert_eq!(m.label(1), Some(32));
        assert_eq!(m.label(2), None);
        assert_eq!(m.payload(), &[0x45]);
        for len in 0..8 {
            assert!(MplsSlice::from_slice(&h[..len]).is_err());
        }
    }
}
