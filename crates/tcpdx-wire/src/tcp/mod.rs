//! TCP header view (RFC 9293): 20 fixed bytes plus options, `data offset * 4` in all.
//!
//! `TcpSlice::from_slice` checks the data offset (at least 5) and that the whole header
//! was captured; accessors then read named field ranges and cannot panic. Options are
//! read by [`option::TcpOptionsIter`].

pub mod option;

use crate::bytes::{be16, be32, byte, need, sub, tail};
use crate::decode::TcpFlags;
use crate::error::StopKind;
use crate::seq::SeqNum;

pub use option::{TcpOption, TcpOptionError, TcpOptionsIter};

mod field {
    use crate::bytes::Field;
    pub const SRC_PORT: Field = 0..2;
    pub const DST_PORT: Field = 2..4;
    pub const SEQ_NUM: Field = 4..8;
    pub const ACK_NUM: Field = 8..12;
    pub const OFFSET_FLAGS: Field = 12..14;
    pub const WINDOW: Field = 14..16;
    pub const CHECKSUM: Field = 16..18;
    pub const URGENT: Field = 18..20;
    pub const fn options(header_len: usize) -> Field {
        URGENT.end..header_len
    }
}

/// Length of a header without options.
pub const MIN_HEADER_LEN: usize = 20;
/// Length of the longest header (data offset 15).
pub const MAX_HEADER_LEN: usize = 60;

/// A checked view of a TCP header and the captured bytes after it.
#[derive(Clone, Copy, Debug)]
pub struct TcpSlice<'a> {
    buf: &'a [u8],
}

impl<'a> TcpSlice<'a> {
    /// Checks that 20 bytes are there, that the data offset is at least 5, and that the
    /// whole header (options included) was captured.
    pub fn from_slice(buf: &'a [u8]) -> Result<Self, StopKind> {
        need(buf, MIN_HEADER_LEN)?;
        let header_len = usize::from(byte(buf, field::OFFSET_FLAGS.start) >> 4) * 4;
        if header_len < MIN_HEADER_LEN {
            return Err(StopKind::Malformed("TCP data offset below 5"));
        }
        need(buf, header_len)?;
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
    /// Sequence number.
    pub fn seq(&self) -> SeqNum {
        SeqNum(be32(self.buf, field::SEQ_NUM))
    }
    /// Acknowledgement number.
    pub fn ack(&self) -> SeqNum {
        SeqNum(be32(self.buf, field::ACK_NUM))
    }
    /// Header length in bytes (data offset * 4, 20..=60).
    pub fn header_len(&self) -> usize {
        usize::from(byte(self.buf, field::OFFSET_FLAGS.start) >> 4) * 4
    }
    /// The 9 flag bits (NS/AE, CWR, ECE, URG, ACK, PSH, RST, SYN, FIN).
    pub fn flags(&self) -> TcpFlags {
        TcpFlags(be16(self.buf, field::OFFSET_FLAGS) & 0x01ff)
    }
    /// Window field (unscaled).
    pub fn window(&self) -> u16 {
        be16(self.buf, field::WINDOW)
    }
    /// Checksum (not verified).
    pub fn checksum(&self) -> u16 {
        be16(self.buf, field::CHECKSUM)
    }
    /// Urgent pointer.
    pub fn urgent(&self) -> u16 {
        be16(self.buf, field::URGENT)
    }
    /// Raw option bytes.
    pub fn options_raw(&self) -> &'a [u8] {
        sub(self.buf, field::options(self.header_len()))
    }
    /// Iterator over the options.
    pub fn options_iter(&self) -> TcpOptionsIter<'a> {
        TcpOptionsIter::new(self.options_raw())
    }
    /// Captured bytes after the header.
    pub fn rest(&self) -> &'a [u8] {
        tail(self.buf, self.header_len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// SYN with MSS 1460, SACK-permitted, timestamps, NOP, window scale 7 (header 40 bytes).
    pub(crate) static SYN: [u8; 41] = [
        0xc3, 0x50, 0x00, 0x50, // ports 50000 -> 80
        0x00, 0x00, 0x00, 0x64, // seq 100
        0x00, 0x00, 0x00, 0x00, // ack 0
        0xa0, 0x02, 0xfa, 0xf0, // offset 10, SYN, window 64240
        0x12, 0x34, 0x00, 0x00, // checksum, urgent
        0x02, 0x04, 0x05, 0xb4, // MSS 1460
        0x04, 0x02, // SACK permitted
        0x08, 0x0a, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, // TS 1, 0
        0x01, // NOP
        0x03, 0x03, 0x07, // WS 7
        0xee, // one payload byte
    ];

    #[test]
    fn deconstruct() {
        let t = TcpSlice::from_slice(&SYN).unwrap();
        assert_eq!(t.src_port(), 50000);
        assert_eq!(t.dst_port(), 80);
        assert_eq!(t.seq(), SeqNum(100));
        assert_eq!(t.ack(), SeqNum(0));
        assert_eq!(t.header_len(), 40);
        assert!(t.flags().syn() && !t.flags().ack());
        assert_eq!(t.window(), 64240);
        assert_eq!(t.checksum(), 0x1234);
        assert_eq!(t.urgent(), 0);
        assert_eq!(t.options_raw().len(), 20);
        assert_eq!(t.rest(), &[0xee]);
    }

    #[test]
    fn truncated_at_every_length() {
        for len in 0..MIN_HEADER_LEN {
            assert_eq!(
                TcpSlice::from_slice(&SYN[..len]).unwrap_err(),
                StopKind::Truncated {
                    required: 20,
                    available: len as u16
                }
            );
        }
        for len in MIN_HEADER_LEN..40 {
            assert_eq!(
                TcpSlice::from_slice(&SYN[..len]).unwrap_err(),
                StopKind::Truncated {
                    required: 40,
                    available: len as u16
                }
            );
        }
        assert!(TcpSlice::from_slice(&SYN[..40]).is_ok());
    }

    #[test]
    fn impossible_data_offset() {
        let mut h = SYN;
        for off in 0..5u8 {
            h[12] = off << 4;
            assert!(matches!(
                TcpSlice::from_slice(&h),
                Err(StopKind::Malformed(_))
            ));
        }
        h[12] = 0xf0; // 60 bytes, only 41 there
        assert!(matches!(
            TcpSlice::from_slice(&h),
            Err(StopKind::Truncated {
                required: 60,
                available: 41
            })
        ));
    }
}
