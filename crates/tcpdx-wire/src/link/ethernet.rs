//! Ethernet II / IEEE 802.3 MAC header (14 bytes).
//!
//! The type/length field is an EtherType when above 1500, else an 802.3 length followed by
//! an LLC header (see [`super::llc`]).

use crate::bytes::{Field, arr, be16, need, tail};
use crate::error::StopKind;

mod field {
    use crate::bytes::Field;
    pub const DST: Field = 0..6;
    pub const SRC: Field = 6..12;
    pub const TYPE_LEN: Field = 12..14;
}

/// Length of the MAC header.
pub const HEADER_LEN: usize = 14;

/// A checked view of an Ethernet header and what follows it.
#[derive(Clone, Copy, Debug)]
pub struct EthernetSlice<'a> {
    buf: &'a [u8],
}

impl<'a> EthernetSlice<'a> {
    /// Checks that `buf` holds a full header.
    pub fn from_slice(buf: &'a [u8]) -> Result<Self, StopKind> {
        need(buf, HEADER_LEN)?;
        Ok(Self { buf })
    }
    /// Destination MAC address.
    pub fn dst(&self) -> [u8; 6] {
        mac(self.buf, field::DST)
    }
    /// Source MAC address.
    pub fn src(&self) -> [u8; 6] {
        mac(self.buf, field::SRC)
    }
    /// The type/length field: an EtherType, or an 802.3 length when `<= 1500`.
    pub fn type_len(&self) -> u16 {
        be16(self.buf, field::TYPE_LEN)
    }
    /// Bytes after the header.
    pub fn payload(&self) -> &'a [u8] {
        tail(self.buf, HEADER_LEN)
    }
}

fn mac(buf: &[u8], f: Field) -> [u8; 6] {
    arr(buf, f.start)
}

#[cfg(test)]
mod tests {
    use super::*;

    static FRAME: [u8; 16] = [
        0x00, 0x11, 0x22, 0x33, 0x44, 0x55, // dst
        0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, // src
        0x08, 0x00, // IPv4
        0x45, 0x00,
    ];

    #[test]
    fn deconstruct() {
        let eth = EthernetSlice::from_slice(&FRAME).unwrap();
        assert_eq!(eth.dst(), [0x00, 0x11, 0x22, 0x33, 0x44, 0x55]);
        assert_eq!(eth.src(), [0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb]);
        assert_eq!(eth.type_len(), 0x0800);
        assert_eq!(eth.payload(), &[0x45, 0x00]);
    }

    #[test]
    fn truncated_at_every_length() {
        for len in 0..HEADER_LEN {
            assert_eq!(
                EthernetSlice::from_slice(&FRAME[..len]).unwrap_err(),
                StopKind::Truncated {
                    required: 14,
                    available: len as u16
                }
            );
        }
        assert!(EthernetSlice::from_slice(&FRAME[..HEADER_LEN]).is_ok());
    }
}
