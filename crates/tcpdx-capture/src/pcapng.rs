//! pcapng: sections, interfaces and packet blocks.
//!
//! Owns the pcapng block layout (draft-ietf-opsawg-pcapng): section header blocks (either
//! byte order, several per file, each one resetting the interfaces), interface description
//! blocks (link type, snaplen, `if_tsresol`, `if_tsoffset`), and the three packet blocks:
//! enhanced (EPB), simple (SPB) and the obsolete packet block (OPB). Every other block type is
//! skipped without being buffered (the few that Wireshark numbers as records are counted). Every block's total length is checked (multiple of 4, at
//! least the block's minimum, equal to its trailing copy) before its content is used.
//!
//! Why hand-written rather than a wrapper over pcap-parser 0.17 (STYLE.md section 2):
//! - error offsets: pcap-parser's errors carry no file offset and its `ReadError` drops the
//!   `io::Error`; we report the exact byte where the bad block starts, and tell a cut-off
//!   last block (a warning, frames before it kept) from a corrupt one;
//! - allocation: its `EnhancedPacketBlock` collects options into a `Vec` per packet, and
//!   its fixed circular buffer fails on blocks larger than the buffer; here frames borrow one
//!   window that grows only to the largest record, and skipped blocks are never buffered;
//! - semantics we need exactly: SPB captured length (min of original length, IDB 0 snaplen and
//!   block room), OPB, trailing length check, timestamp resolutions finer than 1 ns or given
//!   as powers of 2, `if_tsoffset`, frame numbering across sections.
//!
//! The format is small (six block layouts), so the code stays short and is tested against
//! the public corpus (`tests/corpus.rs`).

use tcpdx_wire::{LinkType, Timestamp};

use crate::error::{Bad, BlockLengthProblem, CaptureErrorKind};
use crate::field::{u16_at, u32_at};
use crate::sniff::PCAPNG_SHB;
use crate::window::Window;
use crate::{Next, Packet, max_caplen};

/// Block types we read (the SHB type is [`PCAPNG_SHB`]).
pub(crate) mod block_type {
    pub(crate) const IDB: u32 = 1;
    pub(crate) const OPB: u32 = 2;
    pub(crate) const SPB: u32 = 3;
    pub(crate) const EPB: u32 = 6;
    /// systemd journal export block.
    pub(crate) const JOURNAL: u32 = 9;
    /// Custom blocks (copyable or not) and Sysdig event blocks.
    pub(crate) const CB_COPY: u32 = 0x0000_0BAD;
    pub(crate) const CB_NO_COPY: u32 = 0x4000_0BAD;
    pub(crate) const SYSDIG_EVENT: u32 = 0x0204;
    pub(crate) const SYSDIG_EVENT_V2: u32 = 0x0216;
    pub(crate) const SYSDIG_EVENT_V2_LARGE: u32 = 0x0221;
}

/// Blocks that are not packets but that Wireshark shows as records of their own, each with
/// a `frame.number`: we skip them but count them, so that our frame numbers stay
/// Wireshark's (checked with tshark 4.0 on hand-made files: custom blocks, systemd journal
/// entries and these three Sysdig event types are numbered; NRB, ISB, DSB and unknown
/// blocks are not).
pub(crate) fn is_non_packet_record(t: u32) -> bool {
    use block_type::*;
    matches!(
        t,
        JOURNAL | CB_COPY | CB_NO_COPY | SYSDIG_EVENT | SYSDIG_EVENT_V2 | SYSDIG_EVENT_V2_LARGE
    )
}

/// Byte ranges common to every block.
mod field {
    use std::ops::Range;
    pub(super) const TYPE: Range<usize> = 0..4;
    pub(super) const TOTAL_LEN: Range<usize> = 4..8;
    /// Block type + total length.
    pub(super) const HEADER_LEN: usize = 8;
    /// Header + trailing total length.
    pub(super) const OVERHEAD: usize = 12;
}

/// Byte ranges of a section header block.
mod shb {
    use std::ops::Range;
    pub(super) const BYTE_ORDER_MAGIC: Range<usize> = 8..12;
    pub(super) const MAJOR: Range<usize> = 12..14;
    pub(super) const MINOR: Range<usize> = 14..16;
    /// Up to and including the version (the section length after it is not used).
    pub(super) const READ_LEN: usize = 16;
    pub(super) const MIN_LEN: u32 = 28;
}

/// Byte ranges of an interface description block.
mod idb {
    use std::ops::Range;
    pub(super) const LINKTYPE: Range<usize> = 8..10;
    pub(super) const SNAPLEN: Range<usize> = 12..16;
    pub(super) const OPTIONS: usize = 16;
    pub(super) const MIN_LEN: u32 = 20;
    /// `if_tsresol`: 1 byte, 10^-n, or 2^-n when the top bit is set.
    pub(super) const OPT_TSRESOL: u16 = 9;
    /// `if_tsoffset`: i64 seconds to add to every timestamp.
    pub(super) const OPT_TSOFFSET: u16 = 14;
}

/// Byte ranges of an enhanced packet block (the obsolete packet block is the same with a
/// u16 interface id and a u16 drop count in place of the u32 interface id).
mod epb {
    use std::ops::Range;
    pub(super) const INTERFACE: Range<usize> = 8..12;
    pub(super) const OPB_INTERFACE: Range<usize> = 8..10;
    pub(super) const TS_HIGH: Range<usize> = 12..16;
    pub(super) const TS_LOW: Range<usize> = 16..20;
    pub(super) const CAPLEN: Range<usize> = 20..24;
    pub(super) const ORIG_LEN: Range<usize> = 24..28;
    pub(super) const DATA: usize = 28;
    pub(super) const MIN_LEN: u32 = 32;
}

/// Byte ranges of a simple packet block.
mod spb {
    use std::ops::Range;
    pub(super) const ORIG_LEN: Range<usize> = 8..12;
    pub(super) const DATA: usize = 12;
    pub(super) const MIN_LEN: u32 = 16;
}

/// Option code that ends an option list.
const OPT_ENDOFOPT: u16 = 0;

/// Largest block accepted. Wireshark (`wiretap/pcapng.c`, `MAX_BLOCK_SIZE`): the minimum EPB
/// plus the largest packet of any link type (D-Bus, 128 MiB) plus 128 KiB of options.
const MAX_BLOCK_LEN: u32 = 32 + 128 * 1024 * 1024 + 131_072;

const NANOS_PER_SEC: i128 = 1_000_000_000;

/// How to turn an interface's timestamp units into nanoseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum TsUnit {
    /// Units of 10^-n s with n <= 9: multiply.
    Mul(i128),
    /// Units of 10^-n s with n > 9: divide.
    Div(i128),
    /// Units of 2^-n s: times 10^9, shifted right by n.
    Shift(u32),
}

impl TsUnit {
    /// Default resolution: microseconds.
    const MICROS: Self = Self::Mul(1_000);

    /// From the `if_tsresol` option byte.
    fn from_tsresol(r: u8) -> Self {
        let n = u32::from(r & 0x7f);
        if r & 0x80 != 0 {
            return Self::Shift(n);
        }
        match n {
            0..=9 => Self::Mul(10i128.pow(9 - n)),
            // 10^38 is the largest power of 10 in an i128; finer units all give 0 ns.
            _ => Self::Div(10i128.checked_pow(n - 9).unwrap_or(i128::MAX)),
        }
    }

    /// Nanoseconds for `units` of this resolution.
    #[inline]
    fn to_nanos(self, units: u64) -> i128 {
        let units = i128::from(units);
        match self {
            Self::Mul(m) => units * m,
            Self::Div(d) => units / d,
            // units * 10^9 < 2^94 and n < 128: no overflow.
            Self::Shift(n) => (units * NANOS_PER_SEC) >> n,
        }
    }
}

/// What a section says about one interface.
#[derive(Clone, Copy, Debug)]
struct Interface {
    link: LinkType,
    snaplen: u32,
    max_caplen: u32,
    ts_unit: TsUnit,
    /// `if_tsoffset` in nanoseconds.
    ts_offset: i128,
}

/// State of an open pcapng file: the current section's byte order and interfaces.
#[derive(Debug)]
pub(crate) struct PcapNg {
    big_endian: bool,
    interfaces: Vec<Interface>,
    /// Timestamp of the last packet, given to SPBs (which carry none).
    last_ts: Timestamp,
}

/// Saturates a nanosecond count into a [`Timestamp`].
fn timestamp(ns: i128) -> Timestamp {
    Timestamp(ns.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64)
}

fn io_err(w: &Window, e: std::io::Error) -> Bad {
    Bad::at(w.received(), CaptureErrorKind::Io(e))
}

/// Smallest valid total length for a block type.
fn min_len(block_type: u32) -> u32 {
    match block_type {
        PCAPNG_SHB => shb::MIN_LEN,
        block_type::IDB => idb::MIN_LEN,
        block_type::EPB | block_type::OPB => epb::MIN_LEN,
        block_type::SPB => spb::MIN_LEN,
        _ => field::OVERHEAD as u32,
    }
}

/// Checks a block's total length against the rules that do not need its trailer.
pub(crate) fn check_len(block_type: u32, length: u32, offset: u64) -> Result<(), Bad> {
    let problem = if length < field::OVERHEAD as u32 {
        BlockLengthProblem::TooShort {
            min: field::OVERHEAD as u32,
        }
    } else if length & 3 != 0 {
        BlockLengthProblem::NotMultipleOf4
    } else if length > MAX_BLOCK_LEN {
        BlockLengthProblem::TooLong { max: MAX_BLOCK_LEN }
    } else if length < min_len(block_type) {
        BlockLengthProblem::TooShort {
            min: min_len(block_type),
        }
    } else {
        return Ok(());
    };
    Err(Bad::at(
        offset,
        CaptureErrorKind::BadBlockLength {
            block_type,
            length,
            problem,
        },
    ))
}

/// Checks that the trailing copy of the total length in `block` equals `length`.
pub(crate) fn check_trailer(
    trailer: u32,
    block_type: u32,
    length: u32,
    offset: u64,
) -> Result<(), Bad> {
    if trailer == length {
        return Ok(());
    }
    let problem = BlockLengthProblem::TrailerMismatch { trailer };
    Err(Bad::at(
        offset,
        CaptureErrorKind::BadBlockLength {
            block_type,
            length,
            problem,
        },
    ))
}

/// How reading one block ended.
enum Block {
    /// Read and checked entirely.
    Done,
    /// The input ends inside it.
    Cut,
}

impl PcapNg {
    /// Reads the first section header block (the sniffer saw its block type).
    pub(crate) fn open(w: &mut Window) -> Result<Self, Bad> {
        // What the header says its length is, for the message if the input ends inside it.
        w.fill(shb::BYTE_ORDER_MAGIC.end)
            .map_err(|e| io_err(w, e))?;
        let declared = match w.bytes().get(shb::BYTE_ORDER_MAGIC) {
            Some([0x4d, 0x3c, 0x2b, 0x1a]) => u32_at(w.bytes(), field::TOTAL_LEN, false),
            Some([0x1a, 0x2b, 0x3c, 0x4d]) => u32_at(w.bytes(), field::TOTAL_LEN, true),
            _ => shb::MIN_LEN,
        };
        let mut ng = Self {
            big_endian: false,
            interfaces: Vec::new(),
            last_ts: Timestamp::default(),
        };
        match ng.section_header(w)? {
            Block::Done => Ok(ng),
            Block::Cut => {
                let what = "pcapng section header block";
                let needed = declared.max(shb::MIN_LEN);
                // The input ended: everything it had was received.
                let got = u32::try_from(w.received()).unwrap_or(u32::MAX);
                Err(Bad::at(
                    0,
                    CaptureErrorKind::TruncatedHeader { what, needed, got },
                ))
            }
        }
    }

    /// Reads blocks up to the next packet block (or non-packet record).
    pub(crate) fn next(&mut self, w: &mut Window) -> Result<Next, Bad> {
        loop {
            let offset = w.offset();
            if !w.fill(field::HEADER_LEN).map_err(|e| io_err(w, e))? {
                return Ok(if w.bytes().is_empty() {
                    Next::End
                } else {
                    Next::Cut {
                        offset,
                        record: true,
                    }
                });
            }
            let h = w.bytes();
            // The SHB type is a palindrome: recognisable before its byte order is known.
            let block_type = u32_at(h, field::TYPE, self.big_endian);
            if block_type == PCAPNG_SHB {
                match self.section_header(w)? {
                    Block::Done => continue,
                    Block::Cut => {
                        return Ok(Next::Cut {
                            offset,
                            record: false,
                        });
                    }
                }
            }
            let length = u32_at(h, field::TOTAL_LEN, self.big_endian);
            check_len(block_type, length, offset)?;
            let len = length as usize;
            match block_type {
                block_type::EPB | block_type::OPB | block_type::SPB => {
                    if !w.fill(len).map_err(|e| io_err(w, e))? {
                        return Ok(Next::Cut {
                            offset,
                            record: true,
                        });
                    }
                    // fill(len) succeeded: the window holds the whole block.
                    let b = w.bytes().get(..len).unwrap_or_default();
                    check_trailer(
                        u32_at(b, len - 4..len, self.big_endian),
                        block_type,
                        length,
                        offset,
                    )?;
                    return self.packet(block_type, b, offset).map(Next::Packet);
                }
                block_type::IDB => {
                    if !w.fill(len).map_err(|e| io_err(w, e))? {
                        return Ok(Next::Cut {
                            offset,
                            record: false,
                        });
                    }
                    // fill(len) succeeded: the window holds the whole block.
                    let b = w.bytes().get(..len).unwrap_or_default();
                    check_trailer(
                        u32_at(b, len - 4..len, self.big_endian),
                        block_type,
                        length,
                        offset,
                    )?;
                    let interface = self.interface(b, offset)?;
                    self.interfaces.push(interface);
                    w.consume(len);
                }
                _ => {
                    w.consume(field::HEADER_LEN);
                    let record = is_non_packet_record(block_type);
                    if let Block::Cut = self.skip_rest(w, block_type, length, offset)? {
                        return Ok(Next::Cut { offset, record });
                    }
                    if record {
                        return Ok(Next::OtherRecord);
                    }
                }
            }
        }
    }

    /// Skips the body of a block whose 8-byte header was consumed, then checks its trailer.
    fn skip_rest(
        &self,
        w: &mut Window,
        block_type: u32,
        length: u32,
        offset: u64,
    ) -> Result<Block, Bad> {
        // The caller consumed the header (and for an SHB, the fields it read).
        let body = u64::from(length) - (w.offset() - offset) - 4;
        if w.skip(body).map_err(|e| io_err(w, e))? < body || !w.fill(4).map_err(|e| io_err(w, e))? {
            return Ok(Block::Cut);
        }
        check_trailer(
            u32_at(w.bytes(), 0..4, self.big_endian),
            block_type,
            length,
            offset,
        )?;
        w.consume(4);
        Ok(Block::Done)
    }

    /// Reads a section header block at the start of the window: new byte order, no interfaces.
    fn section_header(&mut self, w: &mut Window) -> Result<Block, Bad> {
        let offset = w.offset();
        if !w
            .fill(shb::BYTE_ORDER_MAGIC.end)
            .map_err(|e| io_err(w, e))?
        {
            return Ok(Block::Cut);
        }
        let h = w.bytes();
        let big_endian = match u32_at(h, shb::BYTE_ORDER_MAGIC, false) {
            0x1A2B_3C4D => false,
            0x4D3C_2B1A => true,
            byte_order_magic => {
                return Err(Bad::at(
                    offset,
                    CaptureErrorKind::BadSectionHeader { byte_order_magic },
                ));
            }
        };
        let length = u32_at(h, field::TOTAL_LEN, big_endian);
        check_len(PCAPNG_SHB, length, offset)?;
        if !w.fill(shb::READ_LEN).map_err(|e| io_err(w, e))? {
            return Ok(Block::Cut);
        }
        let h = w.bytes();
        let major = u16_at(h, shb::MAJOR, big_endian);
        let minor = u16_at(h, shb::MINOR, big_endian);
        // Wireshark and libpcap read versions 1.0 and 1.2 (1.2 only marks newer block types).
        if !(major == 1 && (minor == 0 || minor == 2)) {
            let kind = CaptureErrorKind::UnsupportedVersion {
                format: "pcapng",
                major,
                minor,
            };
            return Err(Bad::at(offset, kind));
        }
        // Section options (hardware, OS, application) are not needed.
        w.consume(shb::READ_LEN);
        self.big_endian = big_endian;
        if let Block::Cut = self.skip_rest(w, PCAPNG_SHB, length, offset)? {
            return Ok(Block::Cut);
        }
        self.interfaces.clear();
        Ok(Block::Done)
    }

    /// Parses an interface description block (`b` is the whole, checked block).
    fn interface(&self, b: &[u8], offset: u64) -> Result<Interface, Bad> {
        let be = self.big_endian;
        let link = LinkType(u16_at(b, idb::LINKTYPE, be));
        let mut interface = Interface {
            link,
            snaplen: u32_at(b, idb::SNAPLEN, be),
            max_caplen: max_caplen(link),
            ts_unit: TsUnit::MICROS,
            ts_offset: 0,
        };
        // The block is at least idb::MIN_LEN long: options end before the trailer.
        let options = b
            .get(idb::OPTIONS..b.len().saturating_sub(4))
            .unwrap_or_default();
        let mut pos = 0;
        while pos + 4 <= options.len() {
            let code = u16_at(options, pos..pos + 2, be);
            let length = u16_at(options, pos + 2..pos + 4, be);
            if code == OPT_ENDOFOPT {
                break;
            }
            let value_start = pos + 4;
            let value_end = value_start + usize::from(length);
            let Some(value) = options.get(value_start..value_end) else {
                let kind = CaptureErrorKind::BadOption {
                    block_type: block_type::IDB,
                    code,
                    length,
                };
                return Err(Bad::at(offset, kind));
            };
            match (code, value) {
                (idb::OPT_TSRESOL, [r, ..]) => interface.ts_unit = TsUnit::from_tsresol(*r),
                (idb::OPT_TSOFFSET, v) => {
                    if let Some(bytes) = v.first_chunk::<8>() {
                        let secs = if be {
                            i64::from_be_bytes(*bytes)
                        } else {
                            i64::from_le_bytes(*bytes)
                        };
                        interface.ts_offset = i128::from(secs) * NANOS_PER_SEC;
                    }
                }
                _ => {}
            }
            pos = value_end.next_multiple_of(4);
        }
        Ok(interface)
    }

    /// Turns a checked EPB, OPB or SPB (`b` is the whole block) into a packet.
    #[inline]
    fn packet(&mut self, block_type: u32, b: &[u8], offset: u64) -> Result<Packet, Bad> {
        let be = self.big_endian;
        let len = b.len();
        if block_type == block_type::SPB {
            let Some(interface) = self.interfaces.first() else {
                return Err(Bad::at(
                    offset,
                    CaptureErrorKind::UnknownInterface {
                        interface: 0,
                        count: 0,
                    },
                ));
            };
            let orig_len = u32_at(b, spb::ORIG_LEN, be);
            let room = (len - spb::MIN_LEN as usize) as u32;
            let mut caplen = orig_len.min(room);
            if interface.snaplen != 0 {
                caplen = caplen.min(interface.snaplen);
            }
            // An SPB has no timestamp. Wireshark shows the epoch; we repeat the previous
            // packet's time so that capture time never runs backwards in the analysis.
            return Ok(Packet {
                ts: self.last_ts,
                link: interface.link,
                orig_len,
                interface: 0,
                data_start: spb::DATA,
                caplen: caplen as usize,
                total: len,
            });
        }
        let interface_id = if block_type == block_type::EPB {
            u32_at(b, epb::INTERFACE, be)
        } else {
            u32::from(u16_at(b, epb::OPB_INTERFACE, be))
        };
        let caplen = u32_at(b, epb::CAPLEN, be);
        let room = (len - epb::MIN_LEN as usize) as u32;
        if caplen > room {
            return Err(Bad::at(
                offset,
                CaptureErrorKind::CaplenExceedsBlock {
                    block_type,
                    caplen,
                    room,
                },
            ));
        }
        let Some(interface) = self.interfaces.get(interface_id as usize) else {
            let kind = CaptureErrorKind::UnknownInterface {
                interface: interface_id,
                count: self.interfaces.len() as u32,
            };
            return Err(Bad::at(offset, kind));
        };
        // Wireshark: "pcapng: cap_len %u is larger than %u" is an error.
        if caplen > interface.max_caplen {
            let kind = CaptureErrorKind::AbsurdCaplen {
                caplen,
                max: interface.max_caplen,
            };
            return Err(Bad::at(offset, kind));
        }
        let units =
            u64::from(u32_at(b, epb::TS_HIGH, be)) << 32 | u64::from(u32_at(b, epb::TS_LOW, be));
        let ts = timestamp(interface.ts_unit.to_nanos(units) + interface.ts_offset);
        self.last_ts = ts;
        Ok(Packet {
            ts,
            link: interface.link,
            orig_len: u32_at(b, epb::ORIG_LEN, be),
            interface: interface_id,
            data_start: epb::DATA,
            caplen: caplen as usize,
            total: len,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tsresol_decimal() {
        assert_eq!(TsUnit::from_tsresol(6), TsUnit::MICROS);
        assert_eq!(TsUnit::from_tsresol(0).to_nanos(3), 3_000_000_000);
        assert_eq!(
            TsUnit::from_tsresol(9).to_nanos(1_234_567_890_123),
            1_234_567_890_123
        );
        assert_eq!(
            TsUnit::from_tsresol(12).to_nanos(1_234_567_890_123_456),
            1_234_567_890_123
        );
        // Finer than anything an i128 power of 10 holds: every timestamp is 0 ns.
        assert_eq!(TsUnit::from_tsresol(100).to_nanos(u64::MAX), 0);
        assert_eq!(TsUnit::from_tsresol(47).to_nanos(u64::MAX), 0);
        // No overflow at the top of the range.
        assert_eq!(
            TsUnit::from_tsresol(0).to_nanos(u64::MAX),
            i128::from(u64::MAX) * 1_000_000_000
        );
    }

    #[test]
    fn tsresol_binary() {
        // 2^-20 s: 1 s is 1 << 20 units; half a unit of ns precision is truncated.
        let u = TsUnit::from_tsresol(0x80 | 20);
        assert_eq!(u.to_nanos(1 << 20), 1_000_000_000);
        assert_eq!(u.to_nanos((5 << 20) + (1 << 19)), 5_500_000_000);
        assert_eq!(u.to_nanos(1), 953); // 10^9 / 2^20 = 953.67
        assert_eq!(TsUnit::from_tsresol(0x80).to_nanos(7), 7_000_000_000);
        assert_eq!(TsUnit::from_tsresol(0xff).to_nanos(u64::MAX), 0);
    }

    #[test]
    fn timestamp_saturates() {
        assert_eq!(timestamp(i128::MAX), Timestamp(i64::MAX));
        assert_eq!(timestamp(-5), Timestamp(-5));
    }

    #[test]
    fn length_rules() {
        let epb = block_type::EPB;
        assert!(check_len(epb, 32, 0).is_ok());
        let problem = |r: Result<(), Bad>| match r.unwrap_err().kind {
            CaptureErrorKind::BadBlockLength { problem, .. } => problem,
            k => panic!("{k:?}"),
        };
        assert_eq!(
            problem(check_len(epb, 8, 0)),
            BlockLengthProblem::TooShort { min: 12 }
        );
        assert_eq!(
            problem(check_len(epb, 34, 0)),
            BlockLengthProblem::NotMultipleOf4
        );
        assert_eq!(
            problem(check_len(epb, 28, 0)),
            BlockLengthProblem::TooShort { min: 32 }
        );
        assert_eq!(
            problem(check_len(99, u32::MAX - 3, 0)),
            BlockLengthProblem::TooLong { max: MAX_BLOCK_LEN }
        );
        assert!(check_len(99, 12, 0).is_ok());
    }
}
