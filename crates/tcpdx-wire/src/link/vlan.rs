//! IEEE 802.1Q / 802.1ad VLAN tag (4 bytes after the tag's EtherType).

use crate::bytes::{be16, need, tail};
use crate::error::StopKind;

mod field {
    use crate::bytes::Field;
    pub const TCI: Field = 0..2;
    pub const TYPE_LEN: Field = 2..4;
}

/// Length of the tag (TCI + inner type/length).
pub const HEADER_LEN: usize = 4;

/// A checked view of a VLAN tag.
#[derive(Clone, Copy, Debug)]
pub struct VlanSlice<'a> {
    buf: &'a [u8],
}

impl<'a> VlanSlice<'a> {
    /// Checks that `buf` holds a full tag.
    pub fn from_slice(buf: &'a [u8]) -> Result<Self, StopKind> {
        need(buf, HEADER_LEN)?;
        Ok(Self { buf })
    }
    /// Priority code point (3 bits).
    pub fn pcp(&self) -> u8 {
        (be16(self.buf, field::TCI) >> 13) as u8
    }
    /// VLAN identifier (12 bits).
    pub fn vid(&self) -> u16 {
        be16(self.buf, field::TCI) & 0x0fff
    }
    /// Inner EtherType, or an 802.3 length when `<= 1500`.
    pub fn type_len(&self) -> u16 {
        be16(self.buf, field::TYPE_LEN)
    }
    /// Bytes after the tag.
    pub fn payload(&self) -> &'a [u8] {
        tail(self.buf, HEADER_LEN)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    static TAG: [u8; 5] = [0xa0, 0x64, 0x86, 0xdd, 0x60];

    #[test]
    fn deconstruct() {
        let v = VlanSlice::from_slice(&TAG).unwrap();
        assert_eq!(v.pcp(), 5);
        assert_eq!(v.vid(), 100);
        assert_eq!(v.type_len(), 0x86dd);
        assert_eq!(v.payload(), &[0x60]);
    }

    #[test]
    fn truncated_at_every_length() {
        for len in 0..HEADER_LEN {
            assert!(matches!(
                VlanSlice::from_slice(&TAG[..len]),
                Err(StopKind::Truncated { required: 4, .. })
            ));
        }
    }
}
