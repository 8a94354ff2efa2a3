//! TCP options: an iterator over the option list and the decoded [`TcpOptions`] summary.
//!
//! Options other than the ones the analysis uses are skipped by their length. A length
//! byte of 0 or 1, or an option running past the header, ends the list as malformed; a
//! known option with a wrong fixed length is skipped and flagged. What was parsed before
//! is kept (lax decoding, as Wireshark does).

use crate::bytes::{be16, be32};
use crate::decode::{MAX_SACK_BLOCKS, TcpOptions};
use crate::seq::SeqNum;

/// Option kinds (IANA).
pub mod kind {
    /// End of option list.
    pub const EOL: u8 = 0;
    /// No operation (padding).
    pub const NOP: u8 = 1;
    /// Maximum segment size.
    pub const MSS: u8 = 2;
    /// Window scale.
    pub const WINDOW_SCALE: u8 = 3;
    /// SACK permitted.
    pub const SACK_PERMITTED: u8 = 4;
    /// SACK blocks.
    pub const SACK: u8 = 5;
    /// Timestamps.
    pub const TIMESTAMPS: u8 = 8;
}

/// One decoded option.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TcpOption<'a> {
    /// End of the option list (kind 0).
    EndOfList,
    /// Padding (kind 1).
    NoOperation,
    /// Maximum segment size (kind 2).
    MaxSegmentSize(u16),
    /// Window scale shift count (kind 3).
    WindowScale(u8),
    /// SACK permitted (kind 4).
    SackPermitted,
    /// SACK blocks (kind 5): the first `count` entries are valid.
    Sack {
        /// `(left edge, right edge)` pairs.
        blocks: [(SeqNum, SeqNum); MAX_SACK_BLOCKS],
        /// Number of valid blocks.
        count: u8,
    },
    /// Timestamps (kind 8).
    Timestamps {
        /// TSval.
        tsval: u32,
        /// TSecr.
        tsecr: u32,
    },
    /// Any other option.
    Unknown {
        /// Option kind.
        kind: u8,
        /// Option data (after kind and length).
        data: &'a [u8],
    },
}

/// Why an option could not be decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TcpOptionError {
    /// Length byte of 0 or 1: the rest of the list cannot be walked.
    ImpossibleLength {
        /// Option kind.
        kind: u8,
        /// Offset of the option in the option list.
        offset: usize,
    },
    /// The option (or its length byte) runs past the header.
    Overrun {
        /// Option kind.
        kind: u8,
        /// Offset of the option in the option list.
        offset: usize,
    },
    /// A known option with a length its definition does not allow; skipped.
    BadLength {
        /// Option kind.
        kind: u8,
        /// The length byte.
        len: u8,
    },
}

/// Iterator over the option list of a TCP header. Ends after `EndOfList` or after an
/// error that makes the rest unreadable.
#[derive(Clone, Debug)]
pub struct TcpOptionsIter<'a> {
    buf: &'a [u8],
    offset: usize,
}

impl<'a> TcpOptionsIter<'a> {
    /// Iterates over raw option bytes (the header after its 20 fixed bytes).
    pub fn new(buf: &'a [u8]) -> Self {
        Self { buf, offset: 0 }
    }
}

impl<'a> Iterator for TcpOptionsIter<'a> {
    type Item = Result<TcpOption<'a>, TcpOptionError>;

    fn next(&mut self) -> Option<Self::Item> {
        let offset = self.offset;
        let kind = *self.buf.get(offset)?;
        match kind {
            kind::EOL => {
                self.offset = self.buf.len();
                return Some(Ok(TcpOption::EndOfList));
            }
            kind::NOP => {
                self.offset += 1;
                return Some(Ok(TcpOption::NoOperation));
            }
            _ => {}
        }
        let Some(&len) = self.buf.get(offset + 1) else {
            self.offset = self.buf.len();
            return Some(Err(TcpOptionError::Overrun { kind, offset }));
        };
        let len_usize = usize::from(len);
        if len_usize < 2 {
            self.offset = self.buf.len();
            return Some(Err(TcpOptionError::ImpossibleLength { kind, offset }));
        }
        let Some(opt) = self.buf.get(offset..offset + len_usize) else {
            self.offset = self.buf.len();
            return Some(Err(TcpOptionError::Overrun { kind, offset }));
        };
        self.offset += len_usize;
        let data = opt.get(2..).unwrap_or_default();
        let bad = Err(TcpOptionError::BadLength { kind, len });
        Some(match kind {
            kind::MSS if data.len() == 2 => Ok(TcpOption::MaxSegmentSize(be16(data, 0..2))),
            kind::WINDOW_SCALE if let [shift] = data => Ok(TcpOption::WindowScale(*shift)),
            kind::SACK_PERMITTED if data.is_empty() => Ok(TcpOption::SackPermitted),
            kind::SACK if !data.is_empty() && data.len() % 8 == 0 => {
                let mut blocks = [(SeqNum(0), SeqNum(0)); MAX_SACK_BLOCKS];
                let mut count = 0;
                for (slot, b) in blocks.iter_mut().zip(data.chunks_exact(8)) {
                    *slot = (SeqNum(be32(b, 0..4)), SeqNum(be32(b, 4..8)));
                    count += 1;
                }
                Ok(TcpOption::Sack { blocks, count })
            }
            kind::TIMESTAMPS if data.len() == 8 => Ok(TcpOption::Timestamps {
                tsval: be32(data, 0..4),
                tsecr: be32(data, 4..8),
            }),
            kind::MSS
            | kind::WINDOW_SCALE
            | kind::SACK_PERMITTED
            | kind::SACK
            | kind::TIMESTAMPS => bad,
            _ => Ok(TcpOption::Unknown { kind, data }),
        })
    }
}

impl TcpOptions {
    /// Decodes an option list laxly: keeps every option read before a problem and sets
    /// `malformed` if there was one.
    pub fn parse(options: &[u8]) -> Self {
        let mut out = TcpOptions::default();
        for opt in TcpOptionsIter::new(options) {
            match opt {
                Ok(TcpOption::EndOfList) => break,
                Ok(TcpOption::NoOperation | TcpOption::Unknown { .. }) => {}
                Ok(TcpOption::MaxSegmentSize(mss)) => out.mss = Some(mss),
                Ok(TcpOption::WindowScale(shift)) => out.window_scale = Some(shift),
                Ok(TcpOption::SackPermitted) => out.sack_permitted = true,
                Ok(TcpOption::Sack { blocks, count }) => {
                    out.sack = blocks;
                    out.sack_count = count;
                }
                Ok(TcpOption::Timestamps { tsval, tsecr }) => out.timestamps = Some((tsval, tsecr)),
                Err(_) => out.malformed = true,
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_syn_options() {
        let raw = [
            0x02, 0x04, 0x05, 0xb4, 0x04, 0x02, 0x08, 0x0a, 0, 0, 0, 1, 0, 0, 0, 2, 0x01, 0x03,
            0x03, 0x07,
        ];
        let o = TcpOptions::parse(&raw);
        assert_eq!(o.mss, Some(1460));
        assert!(o.sack_permitted);
        assert_eq!(o.timestamps, Some((1, 2)));
        assert_eq!(o.window_scale, Some(7));
        assert!(!o.malformed);
        assert_eq!(TcpOptionsIter::new(&raw).count(), 5);
    }

    #[test]
    fn sack_blocks() {
        let raw = [
            0x01, 0x01, 0x05, 0x12, 0, 0, 0, 10, 0, 0, 0, 20, 0, 0, 0, 30, 0, 0, 0, 40,
        ];
        let o = TcpOptions::parse(&raw);
        assert_eq!(
            o.sack_blocks(),
            &[(SeqNum(10), SeqNum(20)), (SeqNum(30), SeqNum(40))]
        );
        assert!(!o.malformed);
    }

    #[test]
    fn four_sack_blocks_fill_the_header() {
        let mut raw = vec![0x01, 0x01, 0x05, 34];
        for i in 0..8u32 {
            raw.extend_from_slice(&i.to_be_bytes());
        }
        let o = TcpOptions::parse(&raw);
        assert_eq!(o.sack_count, 4);
        assert_eq!(o.sack_blocks()[3], (SeqNum(6), SeqNum(7)));
    }

    #[test]
    fn eol_stops_and_unknown_is_skipped() {
        let raw = [
            0xfd, 0x04, 0xaa, 0xbb, 0x02, 0x04, 0x01, 0x00, 0x00, 0x02, 0x04,
        ];
        let o = TcpOptions::parse(&raw);
        assert_eq!(o.mss, Some(256));
        assert!(!o.malformed);
        let mut it = TcpOptionsIter::new(&raw);
        assert_eq!(
            it.next(),
            Some(Ok(TcpOption::Unknown {
                kind: 0xfd,
                data: &[0xaa, 0xbb]
            }))
        );
    }

    #[test]
    fn impossible_lengths_keep_what_was_parsed() {
        // MSS, then an option of length 0.
        let raw = [0x02, 0x04, 0x05, 0xb4, 0x08, 0x00, 0x03, 0x03, 0x07];
        let o = TcpOptions::parse(&raw);
        assert_eq!(o.mss, Some(1460));
        assert_eq!(o.window_scale, None);
        assert!(o.malformed);
        // Length 1.
        assert!(TcpOptions::parse(&[0x03, 0x01, 0x07]).malformed);
        // Overrun: timestamps claiming 10 bytes with 6 left.
        let o = TcpOptions::parse(&[0x04, 0x02, 0x08, 0x0a, 0, 0, 0, 1]);
        assert!(o.sack_permitted && o.timestamps.is_none() && o.malformed);
        // Length byte missing.
        assert!(TcpOptions::parse(&[0x01, 0x02]).malformed);
        // Known option with a wrong length: skipped, flagged, rest still read.
        let o = TcpOptions::parse(&[0x02, 0x03, 0x05, 0x03, 0x03, 0x07]);
        assert_eq!((o.mss, o.window_scale, o.malformed), (None, Some(7), true));
    }

    #[test]
    fn truncated_option_lists_never_panic() {
        let raw = [
            0x02, 0x04, 0x05, 0xb4, 0x04, 0x02, 0x08, 0x0a, 0, 0, 0, 1, 0, 0, 0, 2, 0x01, 0x03,
            0x03, 0x07,
        ];
        for len in 0..raw.len() {
            let _ = TcpOptions::parse(&raw[..len]);
        }
    }
}
