//! UDP header (RFC 768), 8 bytes: only followed to reach tunnels (VXLAN, Geneve, GTP-U).

use crate::bytes::{be16, need};
use crate::error::StopKind;

mod field {
    use crate::bytes::Field;
    pub const SRC_PORT: Field = 0..2;
    pub const DST_PORT: Field = 2..4;
    pub const LENGTH: Field = 4..6;
    pub const CHECKSUM: Field = 6..8;
}

/// Length of the header.
pub const HEADER_LEN: usize = 8;

/// A checked view of a UDP header.
#[derive(Clone, Copy, Debug)]
pub struct UdpSlice<'a> {
    buf: &'a [u8],
}

impl<'a> UdpSlice<'a> {
    /// Checks that the header was captured.
    pub fn from_slice(buf: &'a [u8]) -> Result<Self, StopKind> {
        need(buf, HEADER_LEN)?;
        Ok(Self { buf })
    }
    /// Source port.
    pub fn src_port(&self) -> u16 {
        be16(self.buf, field::SRC_PORT)
    }
    /// Destination port.
    pub fn dst_port(&self) -> u16 {
        be16(self.buf, field::DST_PORT)
    }
    /// Length field (header included; 0 for jumbograms / TSO).
    pub fn length(&self) -> u16 {
        be16(self.buf, field::LENGTH)
    }
    /// Checksum (not verified).
    pub fn checksum(&self) -> u16 {
        be16(self.buf, field::CHECKSUM)
    }
    /// Captured bytes after the header.
    pub fn payload(&self) -> &'a [u8] {
        &self.buf[HEADER_LEN..]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    static HDR: [u8; 9] = [0xc0, 0x00, 0x12, 0xb5, 0x00, 0x09, 0xab, 0xcd, 0x08];

    #[test]
    fn deconstruct() {
        let u = UdpSlice::from_slice(&HDR).unwrap();
        assert_eq!(u.src_port(), 0xc000);
        assert_eq!(u.dst_port(), 4789);
        assert_eq!(u.length(), 9);
        assert_eq!(u.checksum(), 0xabcd);
        assert_eq!(u.payload(), &[0x08]);
    }

    #[test]
    fn truncated_at_every_length() {
        for len in 0..HEADER_LEN {
            assert!(UdpSlice::from_slice(&HDR[..len]).is_err());
        }
    }
}
