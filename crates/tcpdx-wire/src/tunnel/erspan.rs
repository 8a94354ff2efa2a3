//! ERSPAN headers carried in GRE: type II (GRE protocol 0x88be, 8 bytes) and type III
//! (0x22eb, 12 bytes plus an 8-byte platform sub-header when the O bit is set). Both are
//! followed by a mirrored Ethernet frame.
//!
//! Like Wireshark, a 0x88be packet whose GRE header has no sequence number is ERSPAN
//! type I: no ERSPAN header at all, the Ethernet frame starts right after GRE. Otherwise
//! Wireshark picks the header by its version field whatever the GRE protocol said (1: type
//! II, 2: type III) and stops at any other version; [`ErspanSlice::from_slice`] does the same.

use crate::bytes::{be16, byte, need, tail};
use crate::error::StopKind;

mod field {
    use crate::bytes::Field;
    pub const VER_VLAN: Field = 0..2;
    pub const SESSION: Field = 2..4;
    /// Type III: the byte holding the O (optional sub-header) flag in its low bit.
    pub const III_FLAGS: usize = 11;
}

/// Version field of a type II header.
pub const VERSION_II: u16 = 1;
/// Version field of a type III header.
pub const VERSION_III: u16 = 2;
/// Length of a type II header.
pub const TYPE_II_HEADER_LEN: usize = 8;
/// Length of a type III header without the platform sub-header.
pub const TYPE_III_HEADER_LEN: usize = 12;
/// Length of the type III platform-specific sub-header.
pub const TYPE_III_SUBHEADER_LEN: usize = 8;

/// A checked view of an ERSPAN type II or III header.
#[derive(Clone, Copy, Debug)]
pub struct ErspanSlice<'a> {
    buf: &'a [u8],
    header_len: usize,
}

impl<'a> ErspanSlice<'a> {
    /// The header its version field names: type II (version 1) or type III (version 2).
    pub fn from_slice(buf: &'a [u8]) -> Result<Self, StopKind> {
        need(buf, 2)?;
        match be16(buf, field::VER_VLAN) >> 12 {
            VERSION_II => Self::type_ii(buf),
            VERSION_III => Self::type_iii(buf),
            _ => Err(StopKind::Malformed("ERSPAN version is not 1 or 2")),
        }
    }
    /// Type II: 8 bytes.
    pub fn type_ii(buf: &'a [u8]) -> Result<Self, StopKind> {
        need(buf, TYPE_II_HEADER_LEN)?;
        Ok(Self {
            buf,
            header_len: TYPE_II_HEADER_LEN,
        })
    }
    /// Type III: 12 bytes, 20 with the platform sub-header.
    pub fn type_iii(buf: &'a [u8]) -> Result<Self, StopKind> {
        need(buf, TYPE_III_HEADER_LEN)?;
        let mut header_len = TYPE_III_HEADER_LEN;
        if byte(buf, field::III_FLAGS) & 0x01 != 0 {
            header_len += TYPE_III_SUBHEADER_LEN;
        }
        need(buf, header_len)?;
        Ok(Self { buf, header_len })
    }
    /// ERSPAN version field (1 for type II, 2 for type III).
    pub fn version(&self) -> u8 {
        (be16(self.buf, field::VER_VLAN) >> 12) as u8
    }
    /// Original VLAN of the mirrored frame.
    pub fn vlan(&self) -> u16 {
        be16(self.buf, field::VER_VLAN) & 0x0fff
    }
    /// Session identifier (10 bits).
    pub fn session(&self) -> u16 {
        be16(self.buf, field::SESSION) & 0x03ff
    }
    /// Header length.
    pub fn header_len(&self) -> usize {
        self.header_len
    }
    /// The mirrored frame.
    pub fn payload(&self) -> &'a [u8] {
        tail(self.buf, self.header_len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn type_ii() {
        let h = [0x10, 0x64, 0x00, 0x05, 0, 0, 0, 0, 0xaa];
        let e = ErspanSlice::type_ii(&h).unwrap();
        assert_eq!((e.version(), e.vlan(), e.session()), (1, 100, 5));
        assert_eq!(e.payload(), &[0xaa]);
        for len in 0..8 {
            assert!(ErspanSlice::type_ii(&h[..len]).is_err());
        }
    }

    #[test]
    fn version_field_picks_the_header() {
        // Version 1: 8 bytes; version 2: 12 bytes, whichever GRE protocol announced it.
        let mut h = [0u8; 21];
        h[0] = 0x10;
        assert_eq!(ErspanSlice::from_slice(&h).unwrap().header_len(), 8);
        h[0] = 0x20;
        assert_eq!(ErspanSlice::from_slice(&h).unwrap().header_len(), 12);
        h[11] = 0x01;
        assert_eq!(ErspanSlice::from_slice(&h).unwrap().header_len(), 20);
        // Versions 0 and 3..15 are not ERSPAN headers Wireshark follows.
        for v in [0u8, 3, 15] {
            h[0] = v << 4;
            assert_eq!(
                ErspanSlice::from_slice(&h).unwrap_err(),
                StopKind::Malformed("ERSPAN version is not 1 or 2")
            );
        }
        // Truncated before the version, and inside each header.
        assert!(matches!(
            ErspanSlice::from_slice(&[0x10]),
            Err(StopKind::Truncated { .. })
        ));
        h[0] = 0x10;
        assert!(matches!(
            ErspanSlice::from_slice(&h[..7]),
            Err(StopKind::Truncated { .. })
        ));
        h[0] = 0x20;
        assert!(matches!(
            ErspanSlice::from_slice(&h[..19]),
            Err(StopKind::Truncated { .. })
        ));
    }

    #[test]
    fn type_iii_with_and_without_subheader() {
        let mut h = [0u8; 21];
        h[0] = 0x20;
        assert_eq!(ErspanSlice::type_iii(&h).unwrap().header_len(), 12);
        h[11] = 0x01;
        let e = ErspanSlice::type_iii(&h).unwrap();
        assert_eq!((e.version(), e.header_len()), (2, 20));
        for len in 0..20 {
            assert!(ErspanSlice::type_iii(&h[..len]).is_err());
        }
    }
}
