//! IP over InfiniBand as pcap files carry it (LINKTYPE_IPOIB, 242), read the way tshark 4.0
//! reads it: a 40-byte pseudo header (a global route header, or, when its first two bytes
//! are zero, the 20-byte destination address at offset 20), then RFC 4391's 4-byte IPoIB
//! header: an EtherType and 2 reserved bytes.

use crate::bytes::{be16, need, tail};
use crate::error::StopKind;

mod field {
    use crate::bytes::Field;
    pub const TYPE: Field = 40..42;
}

/// Length of the pseudo header before the IPoIB header.
pub const PSEUDO_HEADER_LEN: usize = 40;
/// Length of the pseudo header and the IPoIB header.
pub const HEADER_LEN: usize = PSEUDO_HEADER_LEN + 4;

/// A checked view of an IPoIB pseudo header and header.
#[derive(Clone, Copy, Debug)]
pub struct IpoibSlice<'a> {
    buf: &'a [u8],
}

impl<'a> IpoibSlice<'a> {
    /// Checks that both headers are present.
    pub fn from_slice(buf: &'a [u8]) -> Result<Self, StopKind> {
        need(buf, HEADER_LEN)?;
        Ok(Self { buf })
    }
    /// EtherType of the payload (Wireshark follows IPv4, which it sniffs for the version,
    /// and IPv6).
    pub fn ethertype(&self) -> u16 {
        be16(self.buf, field::TYPE)
    }
    /// Bytes after the headers.
    pub fn payload(&self) -> &'a [u8] {
        tail(self.buf, HEADER_LEN)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn type_after_the_pseudo_header() {
        let mut h = [0u8; 45];
        h[40..42].copy_from_slice(&[0x86, 0xdd]);
        h[44] = 0x60;
        let s = IpoibSlice::from_slice(&h).unwrap();
        assert_eq!(s.ethertype(), 0x86dd);
        assert_eq!(s.payload(), &[0x60]);
        // The first bytes (a GRH's version and class) do not change where the type is.
        h[0] = 0x60;
        assert_eq!(IpoibSlice::from_slice(&h).unwrap().ethertype(), 0x86dd);
    }

    #[test]
    fn truncated_headers() {
        let h = [0u8; HEADER_LEN];
        assert!(IpoibSlice::from_slice(&h).is_ok());
        for len in [0, 4, PSEUDO_HEADER_LEN, HEADER_LEN - 1] {
            assert_eq!(
                IpoibSlice::from_slice(&h[..len]).unwrap_err(),
                StopKind::Truncated {
                    required: HEADER_LEN as u16,
                    available: len as u16
                }
            );
        }
    }
}
