//! BSD null / loopback header (LINKTYPE_NULL, LINKTYPE_LOOP): a 4-byte address family.
//!
//! For NULL the family is in the byte order of the capturing host, so both orders are
//! accepted. The value is normalised the way Wireshark's null dissector does it on a
//! little-endian machine: a few old systems put an EtherType or a 16-bit family there, and
//! a frame starting with `ff 03` is PPP in HDLC-like framing.

use crate::bytes::{arr, need, tail};
use crate::error::StopKind;

mod field {
    use crate::bytes::Field;
    pub const FAMILY: Field = 0..4;
}

/// Length of the header.
pub const HEADER_LEN: usize = 4;

/// BSD `AF_INET`.
pub const AF_INET: u32 = 2;
/// Linux `AF_INET6`: not followed, as in Wireshark's null dissector (no BSD uses it).
pub const AF_INET6_LINUX: u32 = 10;
/// NetBSD/OpenBSD/BSD/OS `AF_INET6`.
pub const AF_INET6_BSD: u32 = 24;
/// FreeBSD/DragonFly `AF_INET6`.
pub const AF_INET6_FREEBSD: u32 = 28;
/// Darwin (macOS, iOS) `AF_INET6`.
pub const AF_INET6_DARWIN: u32 = 30;

/// What the 4-byte header announces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NullNext {
    /// An address family (`AF_*`), normalised to the capturing host's order.
    Family(u32),
    /// An EtherType (value above 1500).
    EtherType(u16),
    /// The frame is PPP in HDLC-like framing starting at offset 0 (`ff 03`).
    PppHdlc,
}

/// A checked view of a null/loopback header.
#[derive(Clone, Copy, Debug)]
pub struct NullSlice<'a> {
    buf: &'a [u8],
}

impl<'a> NullSlice<'a> {
    /// Checks that `buf` holds a full header.
    pub fn from_slice(buf: &'a [u8]) -> Result<Self, StopKind> {
        need(buf, HEADER_LEN)?;
        Ok(Self { buf })
    }
    /// The raw family bytes.
    pub fn raw(&self) -> [u8; 4] {
        arr(self.buf, field::FAMILY.start)
    }
    /// LINKTYPE_NULL: the family in host order, whichever that was.
    pub fn next_host_order(&self) -> NullNext {
        let raw = self.raw();
        if raw[0] == 0xff && raw[1] == 0x03 {
            return NullNext::PppHdlc;
        }
        // Wireshark reads the header as a little-endian value, then repairs it.
        let mut v = u32::from_le_bytes(raw);
        if v & 0xffff_0000 != 0 {
            if v & 0xff00_0000 == 0 && v & 0x00ff_0000 < 0x0006_0000 {
                // IRIX / UNICOS 16-bit family in the upper half.
                v >>= 16;
            } else {
                v = v.swap_bytes();
            }
        } else if v & 0xff == 0 && v & 0xff00 < 0x0600 {
            // IRIX / UNICOS 16-bit family, byte-swapped.
            v = u32::from((v as u16).swap_bytes());
        }
        classify(v)
    }
    /// LINKTYPE_LOOP: the family in network (big-endian) order.
    pub fn next_big_endian(&self) -> NullNext {
        classify(u32::from_be_bytes(self.raw()))
    }
    /// Bytes after the header.
    pub fn payload(&self) -> &'a [u8] {
        tail(self.buf, HEADER_LEN)
    }
}

fn classify(v: u32) -> NullNext {
    if v > u32::from(super::ethertype::MAX_802_3_LEN) {
        NullNext::EtherType(v as u16)
    } else {
        NullNext::Family(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn next(bytes: [u8; 4]) -> NullNext {
        NullSlice::from_slice(&bytes).unwrap().next_host_order()
    }

    #[test]
    fn both_byte_orders() {
        assert_eq!(next([2, 0, 0, 0]), NullNext::Family(AF_INET));
        assert_eq!(next([0, 0, 0, 2]), NullNext::Family(AF_INET));
        assert_eq!(next([30, 0, 0, 0]), NullNext::Family(AF_INET6_DARWIN));
        assert_eq!(next([0, 0, 0, 24]), NullNext::Family(AF_INET6_BSD));
    }

    #[test]
    fn irix_and_ethertype_and_ppp() {
        assert_eq!(next([0, 2, 0, 0]), NullNext::Family(AF_INET));
        // Linux DLT_NULL: an EtherType in network order in the low half.
        assert_eq!(next([0, 0, 0x08, 0x00]), NullNext::EtherType(0x0800));
        assert_eq!(next([0xff, 0x03, 0x00, 0x21]), NullNext::PppHdlc);
    }

    #[test]
    fn loop_is_big_endian() {
        let h = NullSlice::from_slice(&[0, 0, 0, 2, 0x45]).unwrap();
        assert_eq!(h.next_big_endian(), NullNext::Family(AF_INET));
        assert_eq!(h.payload(), &[0x45]);
    }

    #[test]
    fn truncated_at_every_length() {
        for len in 0..HEADER_LEN {
            assert!(NullSlice::from_slice(&[2, 0, 0, 0][..len]).is_err());
        }
    }
}
