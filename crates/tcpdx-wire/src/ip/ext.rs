//! IPv6 extension headers: hop-by-hop (0), routing (43), fragment (44), destination
//! options (60), AH (51) and Shim6 (140).
//!
//! The mobility header (135) is deliberately not stepped over: Wireshark's mobility
//! dissector never hands on what follows it (RFC 6275 requires "no next header" there),
//! so TCP after it is not TCP for tshark either. [`ExtSlice`] still measures it.
//!
//! [`ExtSlice::from_slice`] checks one header; the walk over a chain lives in the decoder,
//! which needs each header's offset for its error reports.

use crate::bytes::{be16, be32, byte, need};
use crate::error::StopKind;
use crate::ip::proto;

mod field {
    use crate::bytes::Field;
    pub const NEXT_HEADER: usize = 0;
    pub const LEN: usize = 1;
    pub const FRAG_OFFSET_FLAGS: Field = 2..4;
}

/// Smallest extension header (fragment header, or any `(len + 1) * 8` one with len 0).
pub const MIN_HEADER_LEN: usize = 8;
/// Hop-by-hop option type of the jumbo payload option (RFC 2675).
pub const OPT_JUMBO: u8 = 0xc2;
/// Hop-by-hop Pad1 option (a single zero byte).
pub const OPT_PAD1: u8 = 0x00;

/// True if `next_header` is an extension header this module can step over.
pub fn is_extension(next_header: u8) -> bool {
    matches!(
        next_header,
        proto::HOPOPTS
            | proto::ROUTING
            | proto::FRAGMENT
            | proto::DSTOPTS
            | proto::AH
            | proto::SHIM6
    )
}

/// A checked view of one extension header.
#[derive(Clone, Copy, Debug)]
pub struct ExtSlice<'a> {
    kind: u8,
    buf: &'a [u8],
}

impl<'a> ExtSlice<'a> {
    /// Checks that the header of type `kind` (an [`is_extension`] value) was captured whole.
    pub fn from_slice(kind: u8, buf: &'a [u8]) -> Result<Self, StopKind> {
        need(buf, 2)?;
        let len = match kind {
            proto::FRAGMENT => MIN_HEADER_LEN,
            // RFC 4302: length in 4-byte units, minus 2.
            proto::AH => (usize::from(byte(buf, field::LEN)) + 2) * 4,
            _ => (usize::from(byte(buf, field::LEN)) + 1) * 8,
        };
        need(buf, len)?;
        Ok(Self {
            kind,
            buf: buf.get(..len).unwrap_or(buf),
        })
    }
    /// Header type (the next-header value that announced it).
    pub fn kind(&self) -> u8 {
        self.kind
    }
    /// The next-header value this header announces.
    pub fn next_header(&self) -> u8 {
        byte(self.buf, field::NEXT_HEADER)
    }
    /// Length of this header in bytes.
    pub fn header_len(&self) -> usize {
        self.buf.len()
    }
    /// For a fragment header: true if it is a real fragment (offset != 0 or M set);
    /// false for an atomic fragment and for every other header type.
    pub fn is_fragment(&self) -> bool {
        self.kind == proto::FRAGMENT && be16(self.buf, field::FRAG_OFFSET_FLAGS) & 0xfff9 != 0
    }
    /// For a hop-by-hop header: the jumbo payload length option, if present.
    pub fn jumbo_len(&self) -> Option<u32> {
        if self.kind != proto::HOPOPTS {
            return None;
        }
        let mut at = 2;
        while at < self.buf.len() {
            let opt = byte(self.buf, at);
            if opt == OPT_PAD1 {
                at += 1;
                continue;
            }
            let len = usize::from(*self.buf.get(at + 1)?);
            if opt == OPT_JUMBO && len == 4 && at + 6 <= self.buf.len() {
                return Some(be32(self.buf, at + 2..at + 6));
            }
            at += 2 + len;
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hop_by_hop_with_jumbo() {
        let h = [6, 0, OPT_JUMBO, 4, 0x00, 0x01, 0x00, 0x00];
        let e = ExtSlice::from_slice(proto::HOPOPTS, &h).unwrap();
        assert_eq!(e.next_header(), 6);
        assert_eq!(e.header_len(), 8);
        assert_eq!(e.jumbo_len(), Some(65536));
        assert!(!e.is_fragment());
    }

    #[test]
    fn fragment_header() {
        let first = [6, 0, 0x00, 0x01, 0, 0, 0, 1]; // offset 0, M set
        assert!(
            ExtSlice::from_slice(proto::FRAGMENT, &first)
                .unwrap()
                .is_fragment()
        );
        let later = [6, 0, 0x00, 0x08, 0, 0, 0, 1]; // offset 1, M clear
        assert!(
            ExtSlice::from_slice(proto::FRAGMENT, &later)
                .unwrap()
                .is_fragment()
        );
        let atomic = [6, 0, 0, 0, 0, 0, 0, 1];
        assert!(
            !ExtSlice::from_slice(proto::FRAGMENT, &atomic)
                .unwrap()
                .is_fragment()
        );
    }

    #[test]
    fn lengths_per_kind() {
        let ah = [
            6, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        ];
        assert_eq!(
            ExtSlice::from_slice(proto::AH, &ah).unwrap().header_len(),
            24
        );
        let dst = [6, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
        assert_eq!(
            ExtSlice::from_slice(proto::DSTOPTS, &dst)
                .unwrap()
                .header_len(),
            16
        );
    }

    #[test]
    fn truncated_at_every_length() {
        let dst = [6, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
        for len in 0..dst.len() {
            assert!(matches!(
                ExtSlice::from_slice(proto::DSTOPTS, &dst[..len]),
                Err(StopKind::Truncated { .. })
            ));
        }
        assert!(is_extension(proto::ROUTING) && !is_extension(proto::TCP));
        assert!(!is_extension(proto::MOBILITY));
    }
}
