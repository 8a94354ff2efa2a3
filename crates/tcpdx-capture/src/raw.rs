//! Raw access to a capture, record by record and block by block, for rewriting it.
//!
//! Owns the second way through a capture: where [`crate::CaptureReader`] hands out decoded
//! frames and skips what is not a packet, [`RawReader`] hands out every pcapng block as
//! stored (section headers, interfaces, statistics, name resolution, custom blocks...) and
//! every pcap record with its header fields, numbered exactly like the frames
//! (Wireshark's `frame.number`). It is a separate walk so the frame reader's hot path stays
//! as it is; it shares the decompression, the window, the pcap record parser and the pcapng
//! length rules. Memory is bounded by the largest block.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tcpdx_wire::{FrameNo, LinkType, Timestamp};

use crate::error::{Bad, CaptureError, CaptureErrorKind};
use crate::field::u32_at;
use crate::pcap::{PcapFile, PcapVariant};
use crate::pcapng::{block_type, check_len, check_trailer, is_non_packet_record};
use crate::sniff::PCAPNG_SHB;
use crate::window::Window;
use crate::{CaptureFormat, Next, Opened, open_path, open_stream, pcap_header};

/// What a classic pcap file header says (for writing the capture as pcapng).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PcapHeader {
    /// Link type (low 16 bits of the header's field).
    pub link: LinkType,
    /// Snapshot length.
    pub snaplen: u32,
    /// Nanosecond timestamps (else microseconds).
    pub nanos: bool,
    /// Bytes of FCS at the end of every packet, when the header says (pcap-linktype(7)).
    pub fcs_len: Option<u8>,
}

/// One pcap packet record.
#[derive(Clone, Copy, Debug)]
pub struct RawRecord<'a> {
    /// Wireshark's frame number.
    pub frame: FrameNo,
    /// Timestamp (exact: the file's microseconds or nanoseconds).
    pub ts: Timestamp,
    /// Original length on the wire.
    pub orig_len: u32,
    /// The captured bytes.
    pub data: &'a [u8],
}

/// One whole pcapng block, from its type to its trailing length, as stored.
#[derive(Clone, Copy, Debug)]
pub struct RawBlock<'a> {
    /// The block's bytes.
    pub bytes: &'a [u8],
    /// Its offset in the (decompressed) capture.
    pub offset: u64,
    /// Byte order of its section.
    pub big_endian: bool,
    /// Wireshark's frame number, for blocks Wireshark numbers (packets and a few others).
    pub frame: Option<FrameNo>,
    /// Captured length of a packet block (EPB, OPB, or SPB as Wireshark computes it).
    pub caplen: Option<u32>,
}

/// The kinds of pcapng blocks a rewriter treats apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BlockKind {
    /// Section header block.
    SectionHeader,
    /// Enhanced packet block.
    Enhanced,
    /// Obsolete packet block (same layout as the EPB but a 16-bit interface id).
    Obsolete,
    /// Simple packet block (no timestamp, interface 0).
    Simple,
    /// Anything else (copied as is).
    Other,
}

impl RawBlock<'_> {
    /// The block's type code.
    pub fn block_type(&self) -> u32 {
        u32_at(self.bytes, 0..4, self.big_endian)
    }

    /// What kind of block it is.
    pub fn kind(&self) -> BlockKind {
        match self.block_type() {
            PCAPNG_SHB => BlockKind::SectionHeader,
            block_type::EPB => BlockKind::Enhanced,
            block_type::OPB => BlockKind::Obsolete,
            block_type::SPB => BlockKind::Simple,
            _ => BlockKind::Other,
        }
    }
}

/// One item of a capture, in file order.
#[derive(Clone, Copy, Debug)]
pub enum RawItem<'a> {
    /// pcapng: a block.
    Block(RawBlock<'a>),
    /// pcap: a record.
    Record(RawRecord<'a>),
}

/// The per-format walk.
#[derive(Debug)]
enum Walk {
    Pcap(PcapFile),
    PcapNg {
        big_endian: bool,
        /// Snaplen of the section's first interface (the one SPBs belong to).
        snaplen0: Option<u32>,
    },
}

/// Reads a capture (pcap or pcapng, plain, gzip or zstd) as raw records or blocks.
pub struct RawReader {
    name: String,
    window: Window,
    walk: Walk,
    format: CaptureFormat,
    pcap_header: Option<PcapHeader>,
    raw_bytes: Arc<AtomicU64>,
    input_len: Option<u64>,
    frames: u64,
    pending: usize,
    done: bool,
    cut_at: Option<u64>,
}

impl RawReader {
    /// Opens a file ("-" means stdin), like [`crate::CaptureReader::open`].
    pub fn open(path: &Path) -> Result<RawReader, CaptureError> {
        let (name, raw, input_len) = open_path(path)?;
        let Opened {
            mut window,
            container,
            compression,
            raw_bytes,
        } = open_stream(&name, raw, false)?;
        let (walk, header) = match PcapVariant::of(container) {
            Some(variant) => {
                let file = pcap_header(&mut window, variant, &name)?;
                let header = file.header();
                (Walk::Pcap(file), Some(header))
            }
            None => (
                Walk::PcapNg {
                    big_endian: false,
                    snaplen0: None,
                },
                None,
            ),
        };
        Ok(RawReader {
            name,
            window,
            walk,
            format: CaptureFormat {
                container,
                compression,
            },
            pcap_header: header,
            raw_bytes,
            input_len,
            frames: 0,
            pending: 0,
            done: false,
            cut_at: None,
        })
    }

    /// The pcap file header, for a pcap capture.
    pub fn pcap_header(&self) -> Option<PcapHeader> {
        self.pcap_header
    }

    /// Format detected.
    pub fn format(&self) -> CaptureFormat {
        self.format
    }

    /// Records numbered so far (the last frame number handed out).
    pub fn frames(&self) -> u64 {
        self.frames
    }

    /// Bytes consumed from the underlying (possibly compressed) input, for progress bars.
    pub fn input_bytes_read(&self) -> u64 {
        self.raw_bytes.load(Ordering::Relaxed)
    }

    /// Size of the input file, if known.
    pub fn input_len(&self) -> Option<u64> {
        self.input_len
    }

    /// Offset of a record or block cut off at the end of the input (not handed out).
    pub fn cut_at(&self) -> Option<u64> {
        self.cut_at
    }

    /// The next record or block; `Ok(None)` at the end, or before a record or block cut off
    /// at the end (see [`RawReader::cut_at`]). After an error every call returns `Ok(None)`.
    pub fn next_item(&mut self) -> Result<Option<RawItem<'_>>, CaptureError> {
        self.window.consume(self.pending);
        self.pending = 0;
        if self.done {
            return Ok(None);
        }
        let step = match &mut self.walk {
            Walk::Pcap(p) => pcap_step(p, &mut self.window),
            Walk::PcapNg {
                big_endian,
                snaplen0,
            } => block_step(&mut self.window, big_endian, snaplen0),
        };
        let step = match step {
            Ok(s) => s,
            Err(bad) => {
                self.done = true;
                return Err(bad.with_path(&self.name));
            }
        };
        match step {
            Step::End => {
                self.done = true;
                Ok(None)
            }
            Step::Cut(offset) => {
                self.done = true;
                self.cut_at = Some(offset);
                Ok(None)
            }
            Step::Record {
                ts,
                orig_len,
                data,
                total,
            } => {
                self.frames += 1;
                self.pending = total;
                Ok(Some(RawItem::Record(RawRecord {
                    frame: FrameNo(self.frames),
                    ts,
                    orig_len,
                    data: self.window.bytes().get(data).unwrap_or_default(),
                })))
            }
            Step::Block {
                len,
                offset,
                numbered,
                caplen,
                big_endian,
            } => {
                let frame = numbered.then(|| {
                    self.frames += 1;
                    FrameNo(self.frames)
                });
                self.pending = len;
                Ok(Some(RawItem::Block(RawBlock {
                    bytes: self.window.bytes().get(..len).unwrap_or_default(),
                    offset,
                    big_endian,
                    frame,
                    caplen,
                })))
            }
        }
    }
}

/// What one step of a walk found (positions in the window, so the window can be borrowed
/// again for the item).
enum Step {
    End,
    Cut(u64),
    Record {
        ts: Timestamp,
        orig_len: u32,
        data: std::ops::Range<usize>,
        total: usize,
    },
    Block {
        len: usize,
        offset: u64,
        numbered: bool,
        caplen: Option<u32>,
        big_endian: bool,
    },
}

fn pcap_step(p: &mut PcapFile, w: &mut Window) -> Result<Step, Bad> {
    let offset = w.offset();
    Ok(match p.next(w)? {
        Next::Packet(pk) => Step::Record {
            ts: pk.ts,
            orig_len: pk.orig_len,
            data: pk.data_start..pk.data_start + pk.caplen,
            total: pk.total,
        },
        Next::End if w.stream_was_cut() => Step::Cut(w.offset()),
        Next::End | Next::OtherRecord => Step::End,
        Next::Cut { .. } => Step::Cut(offset),
    })
}

/// Byte ranges used here (the full layouts are in `pcapng.rs`).
const TOTAL_LEN: std::ops::Range<usize> = 4..8;
const SHB_BYTE_ORDER_MAGIC: std::ops::Range<usize> = 8..12;
const IDB_SNAPLEN: std::ops::Range<usize> = 12..16;
const EPB_CAPLEN: std::ops::Range<usize> = 20..24;
const EPB_HEADER_AND_TRAILER: u32 = 32;
const SPB_ORIG_LEN: std::ops::Range<usize> = 8..12;
const SPB_HEADER_AND_TRAILER: u32 = 16;

fn block_step(w: &mut Window, be: &mut bool, snaplen0: &mut Option<u32>) -> Result<Step, Bad> {
    let offset = w.offset();
    let io_err = |w: &Window, e| Bad::at(w.received(), CaptureErrorKind::Io(e));
    let cut = |w: &Window| {
        if w.bytes().is_empty() && !w.stream_was_cut() {
            Step::End
        } else {
            Step::Cut(offset)
        }
    };
    if !w.fill(8).map_err(|e| io_err(w, e))? {
        return Ok(cut(w));
    }
    // The SHB type is a palindrome: recognisable before its byte order is known.
    let t = u32_at(w.bytes(), 0..4, *be);
    let mut block_be = *be;
    if t == PCAPNG_SHB {
        if !w.fill(SHB_BYTE_ORDER_MAGIC.end).map_err(|e| io_err(w, e))? {
            return Ok(Step::Cut(offset));
        }
        block_be = match u32_at(w.bytes(), SHB_BYTE_ORDER_MAGIC, false) {
            0x1A2B_3C4D => false,
            0x4D3C_2B1A => true,
            byte_order_magic => {
                let kind = CaptureErrorKind::BadSectionHeader { byte_order_magic };
                return Err(Bad::at(offset, kind));
            }
        };
    }
    let length = u32_at(w.bytes(), TOTAL_LEN, block_be);
    check_len(t, length, offset)?;
    let len = length as usize;
    if !w.fill(len).map_err(|e| io_err(w, e))? {
        return Ok(Step::Cut(offset));
    }
    let b = w.bytes().get(..len).unwrap_or_default();
    check_trailer(u32_at(b, len - 4..len, block_be), t, length, offset)?;
    let room = length.saturating_sub(EPB_HEADER_AND_TRAILER);
    let caplen = match t {
        PCAPNG_SHB => {
            *be = block_be;
            *snaplen0 = None;
            None
        }
        block_type::IDB => {
            snaplen0.get_or_insert(u32_at(b, IDB_SNAPLEN, block_be));
            None
        }
        block_type::EPB | block_type::OPB => {
            let caplen = u32_at(b, EPB_CAPLEN, block_be);
            if caplen > room {
                let kind = CaptureErrorKind::CaplenExceedsBlock {
                    block_type: t,
                    caplen,
                    room,
                };
                return Err(Bad::at(offset, kind));
            }
            Some(caplen)
        }
        block_type::SPB => {
            // As the frame reader: min of original length, block room and IDB 0's snaplen.
            let room = length - SPB_HEADER_AND_TRAILER;
            let mut caplen = u32_at(b, SPB_ORIG_LEN, block_be).min(room);
            if let Some(s) = snaplen0.filter(|&s| s != 0) {
                caplen = caplen.min(s);
            }
            Some(caplen)
        }
        _ => None,
    };
    Ok(Step::Block {
        len,
        offset,
        numbered: caplen.is_some() || is_non_packet_record(t),
        caplen,
        big_endian: block_be,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::CaptureReader;
    use std::io::Write;

    fn tmp(name: &str, bytes: &[u8]) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("tcpdx-raw-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        let p = d.join(name);
        std::fs::File::create(&p).unwrap().write_all(bytes).unwrap();
        p
    }

    fn block(t: u32, body: &[u8], be: bool) -> Vec<u8> {
        let len = (12 + body.len()) as u32;
        let put = |v: u32| if be { v.to_be_bytes() } else { v.to_le_bytes() };
        let mut b = Vec::new();
        b.extend(put(t));
        b.extend(put(len));
        b.extend(body);
        b.extend(put(len));
        b
    }

    fn pcapng(be: bool) -> Vec<u8> {
        let put32 = |v: u32| if be { v.to_be_bytes() } else { v.to_le_bytes() };
        let put16 = |v: u16| if be { v.to_be_bytes() } else { v.to_le_bytes() };
        let mut shb = Vec::new();
        shb.extend(put32(0x1A2B_3C4D));
        shb.extend(put16(1));
        shb.extend(put16(0));
        shb.extend([0xff; 8]);
        let mut idb = Vec::new();
        idb.extend(put16(1));
        idb.extend(put16(0));
        idb.extend(put32(100));
        let mut epb = Vec::new();
        epb.extend(put32(0));
        epb.extend(put32(0));
        epb.extend(put32(7));
        epb.extend(put32(3));
        epb.extend(put32(60));
        epb.extend([1, 2, 3, 0]);
        let mut spb = Vec::new();
        spb.extend(put32(200)); // orig_len above the snaplen: 100 captured bytes
        spb.extend([9; 100]);
        let mut out = Vec::new();
        out.extend(block(PCAPNG_SHB, &shb, be));
        out.extend(block(block_type::IDB, &idb, be));
        out.extend(block(5, &[0; 8], be)); // interface statistics: not numbered
        out.extend(block(block_type::EPB, &epb, be));
        out.extend(block(block_type::CB_COPY, &[0; 4], be)); // numbered, not a packet
        out.extend(block(block_type::SPB, &spb, be));
        out
    }

    #[test]
    fn pcapng_blocks_are_numbered_like_frames_in_both_byte_orders() {
        for be in [false, true] {
            let bytes = pcapng(be);
            let path = tmp(&format!("ng-{be}.pcapng"), &bytes);
            let mut r = RawReader::open(&path).unwrap();
            let mut seen = Vec::new();
            let mut copy = Vec::new();
            while let Some(item) = r.next_item().unwrap() {
                let RawItem::Block(b) = item else {
                    panic!("pcapng gives blocks")
                };
                assert_eq!(b.big_endian, be);
                copy.extend_from_slice(b.bytes);
                seen.push((b.kind(), b.frame.map(|f| f.0), b.caplen));
            }
            assert_eq!(copy, bytes, "blocks cover the file");
            use BlockKind::*;
            assert_eq!(
                seen,
                [
                    (SectionHeader, None, None),
                    (Other, None, None),
                    (Other, None, None),
                    (Enhanced, Some(1), Some(3)),
                    (Other, Some(2), None),
                    (Simple, Some(3), Some(100)),
                ]
            );
            // The frame reader numbers the same packets alike.
            let mut fr = CaptureReader::open(&path).unwrap();
            let mut nos = Vec::new();
            while let Some(f) = fr.next_frame().unwrap() {
                nos.push((f.no.0, f.data.len()));
            }
            assert_eq!(nos, [(1, 3), (3, 100)]);
        }
    }

    #[test]
    fn cut_last_block_is_not_handed_out() {
        let mut bytes = pcapng(false);
        bytes.truncate(bytes.len() - 10);
        let path = tmp("cut.pcapng", &bytes);
        let mut r = RawReader::open(&path).unwrap();
        let mut n = 0;
        while r.next_item().unwrap().is_some() {
            n += 1;
        }
        assert_eq!(n, 5);
        assert!(r.cut_at().is_some());
    }

    #[test]
    fn pcap_records_and_header() {
        let mut f = Vec::new();
        f.extend(0xA1B2_3C4Du32.to_le_bytes()); // nanoseconds
        f.extend(2u16.to_le_bytes());
        f.extend(4u16.to_le_bytes());
        f.extend([0; 8]);
        f.extend(96u32.to_le_bytes());
        f.extend((1u32 | 0x0400_0000 | 2 << 28).to_le_bytes()); // Ethernet, 4-byte FCS
        for (sec, ns) in [(5u32, 7u32), (6, 999_999_999)] {
            f.extend(sec.to_le_bytes());
            f.extend(ns.to_le_bytes());
            f.extend(2u32.to_le_bytes());
            f.extend(80u32.to_le_bytes());
            f.extend([0xab, 0xcd]);
        }
        let path = tmp("ns.pcap", &f);
        let mut r = RawReader::open(&path).unwrap();
        assert_eq!(
            r.pcap_header(),
            Some(PcapHeader {
                link: LinkType::ETHERNET,
                snaplen: 96,
                nanos: true,
                fcs_len: Some(4),
            })
        );
        let mut got = Vec::new();
        while let Some(RawItem::Record(rec)) = r.next_item().unwrap() {
            got.push((rec.frame.0, rec.ts.0, rec.orig_len, rec.data.to_vec()));
        }
        assert_eq!(
            got,
            [
                (1, 5_000_000_007, 80, vec![0xab, 0xcd]),
                (2, 6_999_999_999, 80, vec![0xab, 0xcd]),
            ]
        );
    }
}
