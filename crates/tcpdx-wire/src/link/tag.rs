//! Vendor and bridging tags that sit between an EtherType and the next one:
//! IEEE 802.1BR E-Tag (EtherType 0x893f, 6 bytes + EtherType), Cisco VN-Tag (0x8926,
//! 4 bytes + EtherType) and Cisco FabricPath (0x8903: 2 bytes of FTag/TTL, then a whole
//! inner Ethernet frame, then a 4-byte FCS).

use crate::bytes::{be16, need, tail};
use crate::error::StopKind;

/// E-Tag length including the inner EtherType.
pub const ETAG_LEN: usize = 8;
/// VN-Tag length including the inner EtherType.
pub const VNTAG_LEN: usize = 6;
/// FabricPath FTag/TTL field length (an Ethernet header follows).
pub const FABRICPATH_LEN: usize = 2;
/// FabricPath frames end with their own 4-byte FCS, outside the inner frame.
pub const FABRICPATH_FCS_LEN: usize = 4;

/// A checked view of a tag that ends with the inner EtherType.
#[derive(Clone, Copy, Debug)]
pub struct TagSlice<'a> {
    buf: &'a [u8],
    len: usize,
}

impl<'a> TagSlice<'a> {
    /// Checks that a tag of `len` bytes (inner EtherType included) was captured.
    pub fn from_slice(buf: &'a [u8], len: usize) -> Result<Self, StopKind> {
        need(buf, len.max(2))?;
        Ok(Self { buf, len })
    }
    /// The EtherType in the tag's last two bytes.
    pub fn inner_ethertype(&self) -> u16 {
        be16(self.buf, self.len - 2..self.len)
    }
    /// Tag length.
    pub fn header_len(&self) -> usize {
        self.len
    }
    /// Bytes after the tag.
    pub fn payload(&self) -> &'a [u8] {
        tail(self.buf, self.len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn etag_and_vntag() {
        let e = [0, 0, 0, 1, 0, 0, 0x08, 0x00, 0x45];
        let t = TagSlice::from_slice(&e, ETAG_LEN).unwrap();
        assert_eq!((t.inner_ethertype(), t.header_len()), (0x0800, 8));
        assert_eq!(t.payload(), &[0x45]);
        let v = [0x80, 0x01, 0x00, 0x02, 0x81, 0x00];
        assert_eq!(
            TagSlice::from_slice(&v, VNTAG_LEN)
                .unwrap()
                .inner_ethertype(),
            0x8100
        );
        for len in 0..ETAG_LEN {
            assert!(TagSlice::from_slice(&e[..len], ETAG_LEN).is_err());
        }
    }
}
