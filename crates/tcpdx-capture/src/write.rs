//! Writes pcapng: new blocks for a pcap capture, copies of a pcapng capture's blocks, and
//! packet comments (`opt_comment`) on the packets asked for.
//!
//! Hand-written (a few block layouts) rather than pcap-file's or pcap-parser's writers:
//! those re-encode parsed blocks, while here every block is copied byte for byte in its
//! section's byte order and options are only spliced into the commented packet blocks.

use std::io::{self, Write};

use crate::raw::{BlockKind, PcapHeader, RawBlock, RawRecord};

/// Block types written.
const SHB: u32 = 0x0A0D_0D0A;
const IDB: u32 = 1;
const EPB: u32 = 6;
/// Option codes (draft-ietf-opsawg-pcapng; `opt_endofopt` is 0, written as a zero u32).
const OPT_COMMENT: u16 = 1;
const OPT_SHB_USERAPPL: u16 = 4;
const OPT_IF_TSRESOL: u16 = 9;
const OPT_IF_FCSLEN: u16 = 13;
/// Offset of an EPB's (and OPB's) packet data; header + trailer of an EPB.
const EPB_DATA: usize = 28;
/// Offset of an SHB's section length field (8 bytes).
const SHB_SECTION_LEN: std::ops::Range<usize> = 16..24;
/// Offset of an SPB's original length and data.
const SPB_ORIG_LEN: std::ops::Range<usize> = 8..12;
const SPB_DATA: usize = 12;
/// Longest option value (its length is a u16).
const MAX_OPTION_LEN: usize = u16::MAX as usize;

/// Writes a pcapng stream to `W`.
pub struct PcapNgWriter<W: Write> {
    out: W,
    /// Reused block buffer.
    buf: Vec<u8>,
}

/// Appends `v` in the chosen byte order.
fn put16(buf: &mut Vec<u8>, v: u16, be: bool) {
    buf.extend_from_slice(&if be { v.to_be_bytes() } else { v.to_le_bytes() });
}

/// Appends `v` in the chosen byte order.
fn put32(buf: &mut Vec<u8>, v: u32, be: bool) {
    buf.extend_from_slice(&if be { v.to_be_bytes() } else { v.to_le_bytes() });
}

/// Pads `buf` with zeros to a multiple of 4 bytes.
fn pad(buf: &mut Vec<u8>) {
    buf.resize(buf.len().next_multiple_of(4), 0);
}

/// Appends one option (value padded to 4 bytes; longer values are cut at a UTF-8 boundary).
fn push_option(buf: &mut Vec<u8>, code: u16, value: &[u8], be: bool) {
    let value = value.get(..MAX_OPTION_LEN).unwrap_or(value);
    put16(buf, code, be);
    put16(buf, value.len() as u16, be);
    buf.extend_from_slice(value);
    pad(buf);
}

/// Appends `text` as an `opt_comment` (at most 65535 bytes, cut at a character boundary).
fn push_comment(buf: &mut Vec<u8>, text: &str, be: bool) {
    let mut end = text.len().min(MAX_OPTION_LEN);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    push_option(
        buf,
        OPT_COMMENT,
        text.get(..end).unwrap_or_default().as_bytes(),
        be,
    );
}

/// Turns `buf` (type, placeholder length, body) into a block: sets the length, adds the trailer.
fn close_block(buf: &mut Vec<u8>, be: bool) {
    pad(buf);
    let len = (buf.len() + 4) as u32;
    let bytes = if be {
        len.to_be_bytes()
    } else {
        len.to_le_bytes()
    };
    if let Some(field) = buf.get_mut(4..8) {
        field.copy_from_slice(&bytes);
    }
    buf.extend_from_slice(&bytes);
}

/// Starts a block of type `t` in `buf` (length filled in by [`close_block`]).
fn open_block(buf: &mut Vec<u8>, t: u32, be: bool) {
    buf.clear();
    put32(buf, t, be);
    put32(buf, 0, be);
}

impl<W: Write> PcapNgWriter<W> {
    /// A writer over `out` (buffer it: blocks are written one `write_all` each).
    pub fn new(out: W) -> Self {
        Self {
            out,
            buf: Vec::new(),
        }
    }

    /// The underlying output.
    pub fn into_inner(self) -> W {
        self.out
    }

    /// A little-endian section header, version 1.0, length unknown, naming the writer.
    pub fn section_header(&mut self, userappl: &str) -> io::Result<()> {
        let b = &mut self.buf;
        open_block(b, SHB, false);
        put32(b, 0x1A2B_3C4D, false);
        put16(b, 1, false);
        put16(b, 0, false);
        b.extend_from_slice(&[0xff; 8]);
        push_option(b, OPT_SHB_USERAPPL, userappl.as_bytes(), false);
        put32(b, 0, false); // opt_endofopt
        close_block(b, false);
        self.out.write_all(b)
    }

    /// The interface of a pcap file: its link type and snaplen, timestamps in its units
    /// (`if_tsresol` 6 or 9, so they stay exact), its FCS length if it gives one.
    pub fn pcap_interface(&mut self, h: &PcapHeader) -> io::Result<()> {
        let b = &mut self.buf;
        open_block(b, IDB, false);
        put16(b, h.link.0, false);
        put16(b, 0, false);
        put32(b, h.snaplen, false);
        push_option(b, OPT_IF_TSRESOL, &[if h.nanos { 9 } else { 6 }], false);
        if let Some(fcs) = h.fcs_len {
            push_option(b, OPT_IF_FCSLEN, &[fcs], false);
        }
        put32(b, 0, false);
        close_block(b, false);
        self.out.write_all(b)
    }

    /// A pcap record as an enhanced packet block on interface 0, with `comments`.
    /// `nanos`: the interface's units (as given to [`Self::pcap_interface`]).
    pub fn pcap_record<S: AsRef<str>>(
        &mut self,
        r: &RawRecord,
        nanos: bool,
        comments: &[S],
    ) -> io::Result<()> {
        // pcap timestamps are non-negative: seconds and fraction are unsigned.
        let ns = u64::try_from(r.ts.0).unwrap_or(0);
        let units = if nanos { ns } else { ns / 1_000 };
        self.epb(false, 0, units, r.orig_len, r.data, comments)
    }

    fn epb<S: AsRef<str>>(
        &mut self,
        be: bool,
        interface: u32,
        units: u64,
        orig_len: u32,
        data: &[u8],
        comments: &[S],
    ) -> io::Result<()> {
        let b = &mut self.buf;
        open_block(b, EPB, be);
        put32(b, interface, be);
        put32(b, (units >> 32) as u32, be);
        put32(b, units as u32, be);
        put32(b, data.len() as u32, be);
        put32(b, orig_len, be);
        b.extend_from_slice(data);
        pad(b);
        if !comments.is_empty() {
            for c in comments {
                push_comment(b, c.as_ref(), be);
            }
            put32(b, 0, be);
        }
        close_block(b, be);
        self.out.write_all(b)
    }

    /// Copies a pcapng block. Packet blocks with `comments` get them as `opt_comment`
    /// options ahead of their own options (an SPB, which has no options, becomes an EPB on
    /// interface 0 with a zero timestamp, as Wireshark shows it). Section headers get an
    /// unknown section length, since commented blocks change it.
    pub fn copy_block<S: AsRef<str>>(
        &mut self,
        block: &RawBlock,
        comments: &[S],
    ) -> io::Result<()> {
        let bytes = block.bytes;
        let be = block.big_endian;
        match block.kind() {
            BlockKind::SectionHeader => {
                let b = &mut self.buf;
                b.clear();
                b.extend_from_slice(bytes);
                if let Some(len) = b.get_mut(SHB_SECTION_LEN) {
                    len.fill(0xff);
                }
                self.out.write_all(b)
            }
            BlockKind::Enhanced | BlockKind::Obsolete if !comments.is_empty() => {
                let caplen = block.caplen.unwrap_or(0) as usize;
                let data_end = (EPB_DATA + caplen).next_multiple_of(4);
                let (Some(head), Some(options)) = (
                    bytes.get(..data_end),
                    bytes.get(data_end..bytes.len().saturating_sub(4)),
                ) else {
                    return self.out.write_all(bytes);
                };
                let b = &mut self.buf;
                b.clear();
                b.extend_from_slice(head);
                for c in comments {
                    push_comment(b, c.as_ref(), be);
                }
                if options.is_empty() {
                    put32(b, 0, be);
                } else {
                    b.extend_from_slice(options);
                }
                close_block(b, be);
                self.out.write_all(b)
            }
            BlockKind::Simple if !comments.is_empty() => {
                let caplen = block.caplen.unwrap_or(0) as usize;
                let orig_len = crate::field::u32_at(bytes, SPB_ORIG_LEN, be);
                let data = bytes.get(SPB_DATA..SPB_DATA + caplen).unwrap_or_default();
                self.epb(be, 0, 0, orig_len, data, comments)
            }
            _ => self.out.write_all(bytes),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{FrameNo, LinkType, Timestamp};

    fn u32le(b: &[u8], at: usize) -> u32 {
        u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
    }

    #[test]
    fn pcap_record_becomes_epb_with_exact_units_and_comments() {
        let mut w = PcapNgWriter::new(Vec::new());
        let r = RawRecord {
            frame: FrameNo(1),
            ts: Timestamp(1_700_000_000_123_456_000),
            orig_len: 60,
            data: &[1, 2, 3],
        };
        w.pcap_record(&r, false, &["tcpdx: x", "tcpdx: é"]).unwrap();
        let b = w.into_inner();
        assert_eq!(u32le(&b, 0), EPB);
        assert_eq!(u32le(&b, 4) as usize, b.len());
        assert_eq!(u32le(&b, b.len() - 4) as usize, b.len());
        let units = u64::from(u32le(&b, 12)) << 32 | u64::from(u32le(&b, 16));
        assert_eq!(units, 1_700_000_000_123_456);
        assert_eq!((u32le(&b, 20), u32le(&b, 24)), (3, 60));
        assert_eq!(&b[28..31], &[1, 2, 3]);
        // Options: comment "tcpdx: x" (8 bytes), comment "tcpdx: é" (9 bytes, padded), end.
        assert_eq!(&b[32..36], &[1, 0, 8, 0]);
        assert_eq!(&b[36..44], b"tcpdx: x");
        assert_eq!(&b[44..48], &[1, 0, 9, 0]);
        assert_eq!(&b[48..57], "tcpdx: é".as_bytes());
        assert_eq!(&b[60..64], &[0; 4]);
        assert_eq!(b.len(), 68);
    }

    #[test]
    fn big_endian_epb_keeps_its_options_after_the_comment() {
        // EPB, BE, caplen 1, one option (epb_flags) and opt_endofopt.
        let mut blk = Vec::new();
        for v in [6u32, 0, 0, 0, 9, 1, 1] {
            blk.extend(v.to_be_bytes());
        }
        blk.extend([0xaa, 0, 0, 0]);
        blk.extend([0, 2, 0, 4, 0, 0, 0, 1, 0, 0, 0, 0]);
        let len = (blk.len() + 4) as u32;
        blk[4..8].copy_from_slice(&len.to_be_bytes());
        blk.extend(len.to_be_bytes());
        let raw = RawBlock {
            bytes: &blk,
            offset: 0,
            big_endian: true,
            frame: Some(FrameNo(1)),
            caplen: Some(1),
        };
        let mut w = PcapNgWriter::new(Vec::new());
        w.copy_block(&raw, &["tcpdx: ab"]).unwrap();
        let out = w.into_inner();
        let be32 = |at: usize| u32::from_be_bytes(out[at..at + 4].try_into().unwrap());
        assert_eq!(be32(4) as usize, out.len());
        assert_eq!(be32(out.len() - 4) as usize, out.len());
        assert_eq!((&out[..4], &out[8..32]), (&blk[..4], &blk[8..32]));
        assert_eq!(&out[32..36], &[0, 1, 0, 9]);
        assert_eq!(&out[36..45], b"tcpdx: ab");
        assert_eq!(&out[48..60], &blk[32..44], "own options kept");
        // Without comments: unchanged.
        let mut w = PcapNgWriter::new(Vec::new());
        w.copy_block::<&str>(&raw, &[]).unwrap();
        assert_eq!(w.into_inner(), blk);
    }

    #[test]
    fn interface_units_follow_the_pcap_file() {
        let mut w = PcapNgWriter::new(Vec::new());
        let h = PcapHeader {
            link: LinkType::ETHERNET,
            snaplen: 128,
            nanos: true,
            fcs_len: None,
        };
        w.pcap_interface(&h).unwrap();
        let b = w.into_inner();
        assert_eq!((u32le(&b, 0), u32le(&b, 12)), (IDB, 128));
        assert_eq!(&b[16..21], &[9, 0, 1, 0, 9]);
    }
}
