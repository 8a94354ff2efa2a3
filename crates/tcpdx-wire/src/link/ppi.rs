//! Per-Packet Information header (LINKTYPE_PPI) and radiotap header
//! (LINKTYPE_IEEE802_11_RADIOTAP): metadata of a given little-endian length, then a frame
//! of another link type (PPI names it; radiotap is always 802.11).

use crate::bytes::{arr, need, tail};
use crate::error::StopKind;

mod field {
    use crate::bytes::Field;
    pub const LEN: Field = 2..4;
    pub const PPI_DLT: Field = 4..8;
}

/// Length of the fixed PPI header.
pub const PPI_MIN_HEADER_LEN: usize = 8;
/// Length of the fixed radiotap header.
pub const RADIOTAP_MIN_HEADER_LEN: usize = 8;

/// A checked view of a PPI or radiotap header.
#[derive(Clone, Copy, Debug)]
pub struct MetaHeaderSlice<'a> {
    buf: &'a [u8],
    header_len: usize,
    inner: u32,
}

impl<'a> MetaHeaderSlice<'a> {
    /// PPI: the header length and the inner link type are in the header.
    pub fn ppi(buf: &'a [u8]) -> Result<Self, StopKind> {
        need(buf, PPI_MIN_HEADER_LEN)?;
        let header_len = usize::from(le16(buf, field::LEN.start));
        if header_len < PPI_MIN_HEADER_LEN {
            return Err(StopKind::Malformed("PPI header length below 8"));
        }
        need(buf, header_len)?;
        let inner = u32::from_le_bytes(arr(buf, field::PPI_DLT.start));
        Ok(Self {
            buf,
            header_len,
            inner,
        })
    }
    /// Radiotap: the header length is in the header, an 802.11 frame follows.
    pub fn radiotap(buf: &'a [u8]) -> Result<Self, StopKind> {
        need(buf, RADIOTAP_MIN_HEADER_LEN)?;
        let header_len = usize::from(le16(buf, field::LEN.start));
        if header_len < RADIOTAP_MIN_HEADER_LEN {
            return Err(StopKind::Malformed("radiotap header length below 8"));
        }
        need(buf, header_len)?;
        Ok(Self {
            buf,
            header_len,
            inner: 105,
        })
    }
    /// LINKTYPE of the frame after the header.
    pub fn inner_link_type(&self) -> u32 {
        self.inner
    }
    /// Header length.
    pub fn header_len(&self) -> usize {
        self.header_len
    }
    /// The inner frame.
    pub fn payload(&self) -> &'a [u8] {
        tail(self.buf, self.header_len)
    }
}

fn le16(buf: &[u8], at: usize) -> u16 {
    u16::from_le_bytes(arr(buf, at))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ppi_and_radiotap() {
        let p = [0, 0, 8, 0, 105, 0, 0, 0, 0x88];
        let m = MetaHeaderSlice::ppi(&p).unwrap();
        assert_eq!((m.inner_link_type(), m.header_len()), (105, 8));
        assert_eq!(m.payload(), &[0x88]);
        for len in 0..8 {
            assert!(MetaHeaderSlice::ppi(&p[..len]).is_err());
        }
        let bad = [0, 0, 4, 0, 1, 0, 0, 0];
        assert!(matches!(
            MetaHeaderSlice::ppi(&bad),
            Err(StopKind::Malformed(_))
        ));
        let r = [0, 0, 12, 0, 0, 0, 0, 0, 1, 2, 3, 4, 0x08];
        let m = MetaHeaderSlice::radiotap(&r).unwrap();
        assert_eq!((m.inner_link_type(), m.header_len()), (105, 12));
    }
}
