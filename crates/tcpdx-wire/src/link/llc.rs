//! IEEE 802.2 LLC header with the SNAP extension (`AA AA 03` + OUI + EtherType).
//!
//! Only SNAP is followed: it is how IP travels in 802.3-length frames.

use crate::bytes::{arr, be16, byte, need, tail};
use crate::error::StopKind;

mod field {
    use crate::bytes::Field;
    pub const DSAP: usize = 0;
    pub const SSAP: usize = 1;
    pub const CONTROL: usize = 2;
    pub const OUI: Field = 3..6;
    pub const ETHERTYPE: Field = 6..8;
}

/// Length of an LLC + SNAP header.
pub const SNAP_HEADER_LEN: usize = 8;
/// The SAP value announcing SNAP.
pub const SAP_SNAP: u8 = 0xaa;
/// LLC control field of an unnumbered information frame.
pub const CONTROL_UI: u8 = 0x03;

/// A checked view of an LLC/SNAP header.
#[derive(Clone, Copy, Debug)]
pub struct SnapSlice<'a> {
    buf: &'a [u8],
}

impl<'a> SnapSlice<'a> {
    /// Checks that `buf` starts with a full LLC/SNAP header. An LLC header that is not
    /// SNAP gives `NotIp`.
    pub fn from_slice(buf: &'a [u8]) -> Result<Self, StopKind> {
        need(buf, field::CONTROL + 1)?;
        if byte(buf, field::DSAP) != SAP_SNAP
            || byte(buf, field::SSAP) != SAP_SNAP
            || byte(buf, field::CONTROL) != CONTROL_UI
        {
            return Err(StopKind::NotIp);
        }
        need(buf, SNAP_HEADER_LEN)?;
        Ok(Self { buf })
    }
    /// Organisationally unique identifier (0 for encapsulated EtherTypes).
    pub fn oui(&self) -> u32 {
        let [a, b, c] = arr(self.buf, field::OUI.start);
        u32::from_be_bytes([0, a, b, c])
    }
    /// Protocol identifier (an EtherType when the OUI is 0).
    pub fn ethertype(&self) -> u16 {
        be16(self.buf, field::ETHERTYPE)
    }
    /// Bytes after the header.
    pub fn payload(&self) -> &'a [u8] {
        tail(self.buf, SNAP_HEADER_LEN)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    static SNAP: [u8; 9] = [0xaa, 0xaa, 0x03, 0x00, 0x00, 0x00, 0x08, 0x00, 0x45];

    #[test]
    fn deconstruct() {
        let s = SnapSlice::from_slice(&SNAP).unwrap();
        assert_eq!(s.oui(), 0);
        assert_eq!(s.ethertype(), 0x0800);
        assert_eq!(s.payload(), &[0x45]);
    }

    #[test]
    fn not_snap() {
        let stp = [0x42, 0x42, 0x03, 0, 0, 0, 0, 0];
        assert_eq!(SnapSlice::from_slice(&stp).unwrap_err(), StopKind::NotIp);
    }

    #[test]
    fn truncated_at_every_length() {
        for len in 0..SNAP_HEADER_LEN {
            assert!(matches!(
                SnapSlice::from_slice(&SNAP[..len]),
                Err(StopKind::Truncated { .. })
            ));
        }
    }
}
