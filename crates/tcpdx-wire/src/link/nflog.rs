//! Linux netfilter NFLOG (LINKTYPE_NFLOG): a 4-byte header then type-length-value
//! attributes; attribute 9 (`NFULA_PAYLOAD`) holds the IP packet.
//!
//! TLV length and type are in the logging host's byte order. Like Wireshark, the order is
//! guessed: big-endian if a walk in that order meets a plausible non-zero type first, else
//! little-endian if that works, else big-endian.

use crate::bytes::{byte, need};
use crate::error::StopKind;

mod field {
    pub const FAMILY: usize = 0;
    pub const VERSION: usize = 1;
    pub const TLVS: usize = 4;
}

/// Length of the fixed header.
pub const HEADER_LEN: usize = field::TLVS;
/// Length of a TLV header (length, type).
pub const TLV_HEADER_LEN: usize = 4;
/// `NFULA_PAYLOAD`: the logged packet.
pub const NFULA_PAYLOAD: u16 = 9;
/// Linux `AF_INET`.
pub const AF_INET: u8 = 2;
/// Linux `AF_INET6`.
pub const AF_INET6: u8 = 10;

/// A checked view of an NFLOG record.
#[derive(Clone, Copy, Debug)]
pub struct NflogSlice<'a> {
    buf: &'a [u8],
    big_endian: bool,
}

impl<'a> NflogSlice<'a> {
    /// Checks that `buf` holds the fixed header and guesses the TLV byte order.
    pub fn from_slice(buf: &'a [u8]) -> Result<Self, StopKind> {
        need(buf, HEADER_LEN)?;
        let big_endian = looks_like(buf, true) || !looks_like(buf, false);
        Ok(Self { buf, big_endian })
    }
    /// Address family of the logged packet (`AF_INET` = 2, `AF_INET6` = 10).
    pub fn family(&self) -> u8 {
        byte(self.buf, field::FAMILY)
    }
    /// NFLOG version (0).
    pub fn version(&self) -> u8 {
        byte(self.buf, field::VERSION)
    }
    /// True if the TLV headers were judged big-endian.
    pub fn big_endian(&self) -> bool {
        self.big_endian
    }
    /// The TLVs, in order.
    pub fn tlvs(&self) -> TlvIter<'a> {
        TlvIter {
            buf: self.buf,
            offset: HEADER_LEN,
            big_endian: self.big_endian,
        }
    }
    /// The last payload TLV: `(offset of its value in the record, value length from the TLV)`.
    /// A TLV with a length below 4 ends the walk with `Malformed`, as in Wireshark.
    pub fn payload(&self) -> Result<Option<(usize, usize)>, StopKind> {
        let mut found = None;
        for tlv in self.tlvs() {
            let tlv = tlv?;
            if tlv.kind == NFULA_PAYLOAD {
                found = Some((tlv.value_offset, tlv.value_len));
            }
        }
        Ok(found)
    }
}

/// One NFLOG attribute.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tlv {
    /// Attribute type (the nested-flag bit 15 cleared).
    pub kind: u16,
    /// Offset of the value from the start of the record.
    pub value_offset: usize,
    /// Value length according to the TLV header (may run past the captured bytes).
    pub value_len: usize,
}

/// Iterator over NFLOG TLVs; stops after the first malformed one.
#[derive(Clone, Debug)]
pub struct TlvIter<'a> {
    buf: &'a [u8],
    offset: usize,
    big_endian: bool,
}

impl Iterator for TlvIter<'_> {
    type Item = Result<Tlv, StopKind>;

    fn next(&mut self) -> Option<Self::Item> {
        let (len, kind) = read_tlv(self.buf, self.offset, self.big_endian)?;
        if len < TLV_HEADER_LEN {
            self.offset = self.buf.len();
            return Some(Err(StopKind::Malformed("NFLOG TLV length below 4")));
        }
        let tlv = Tlv {
            kind,
            value_offset: self.offset + TLV_HEADER_LEN,
            value_len: len - TLV_HEADER_LEN,
        };
        // Attributes are padded to 4 bytes.
        self.offset = self.offset.saturating_add((len + 3) & !3);
        Some(Ok(tlv))
    }
}

/// Reads the TLV header at `offset` if 4 bytes are there: `(length, type)`.
fn read_tlv(buf: &[u8], offset: usize, big_endian: bool) -> Option<(usize, u16)> {
    let b: [u8; TLV_HEADER_LEN] = buf
        .get(offset..offset.checked_add(TLV_HEADER_LEN)?)?
        .try_into()
        .ok()?;
    let rd = |x: [u8; 2]| {
        if big_endian {
            u16::from_be_bytes(x)
        } else {
            u16::from_le_bytes(x)
        }
    };
    Some((usize::from(rd([b[0], b[1]])), rd([b[2], b[3]]) & 0x7fff))
}

/// Wireshark's byte-order test: walking TLVs in that order, is a non-zero type below 0x100
/// met before anything implausible?
fn looks_like(buf: &[u8], big_endian: bool) -> bool {
    let mut offset = HEADER_LEN;
    while buf.len().saturating_sub(offset) > TLV_HEADER_LEN {
        let Some((len, kind)) = read_tlv(buf, offset, big_endian) else {
            return false;
        };
        if len < TLV_HEADER_LEN || kind >= 0x100 {
            return false;
        }
        if kind != 0 {
            return true;
        }
        offset += (len + 3) & !3;
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    /// AF_INET record: a prefix TLV "ab" (length 6, padded to 8) then a 4-byte payload.
    static LE: [u8; 20] = [
        2, 0, 0, 0, // family, version, resource id
        6, 0, 10, 0, b'a', b'b', 0, 0, // NFULA_PREFIX
        8, 0, 9, 0, 0x45, 0, 0, 20, // NFULA_PAYLOAD
    ];

    #[test]
    fn little_endian_payload() {
        let n = NflogSlice::from_slice(&LE).unwrap();
        assert!(!n.big_endian());
        assert_eq!(n.family(), AF_INET);
        assert_eq!(n.payload(), Ok(Some((16, 4))));
    }

    #[test]
    fn big_endian_payload() {
        let mut be = LE;
        for at in [4, 6, 12, 14] {
            be.swap(at, at + 1);
        }
        let n = NflogSlice::from_slice(&be).unwrap();
        assert!(n.big_endian());
        assert_eq!(n.payload(), Ok(Some((16, 4))));
    }

    #[test]
    fn impossible_tlv_length() {
        // A valid little-endian prefix TLV, then one of length 2.
        let bad = [2, 0, 0, 0, 8, 0, 10, 0, b'a', b'b', 0, 0, 2, 0, 9, 0, 0, 0];
        let n = NflogSlice::from_slice(&bad).unwrap();
        assert!(matches!(n.payload(), Err(StopKind::Malformed(_))));
    }

    #[test]
    fn truncated_at_every_length() {
        for len in 0..LE.len() {
            match NflogSlice::from_slice(&LE[..len]) {
                Err(e) => assert!(len < HEADER_LEN && matches!(e, StopKind::Truncated { .. })),
                Ok(n) => {
                    let _ = n.payload();
                }
            }
        }
    }
}
