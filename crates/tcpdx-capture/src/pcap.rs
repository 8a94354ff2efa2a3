//! Classic libpcap files: the 24-byte file header and the per-record headers.
//!
//! Owns the pcap layout (microsecond, nanosecond and Kuznetzov's "modified" variants, in both
//! byte orders) and its sanity rules. Byte order and variant are resolved once, at open; the
//! per-record path reads one fixed-size header and hands back where the data lies in the
//! window, without copying or allocating.
//!
//! Hand-written rather than wrapping pcap-parser: see the reasons in `pcapng.rs`; the pcap
//! side is small and shares the window and the error offsets with it.

use tcpdx_wire::{LinkType, Timestamp};

use crate::error::{Bad, CaptureErrorKind};
use crate::field::{u16_at, u32_at};
use crate::raw::PcapHeader;
use crate::sniff::Container;
use crate::window::Window;
use crate::{Next, Packet, max_caplen};

/// Length of the pcap file header.
pub(crate) const FILE_HEADER_LEN: usize = 24;

/// Byte ranges of the file header.
mod file_field {
    use std::ops::Range;
    pub(super) const VERSION_MAJOR: Range<usize> = 4..6;
    pub(super) const VERSION_MINOR: Range<usize> = 6..8;
    // 8..12 thiszone and 12..16 sigfigs are always 0 in practice. The snaplen is only
    // carried over to pcapng output (Wireshark does not check records against it either).
    pub(super) const SNAPLEN: Range<usize> = 16..20;
    pub(super) const LINKTYPE: Range<usize> = 20..24;
}

/// Byte ranges of a record header (the modified format appends 8 bytes we do not use).
mod record_field {
    use std::ops::Range;
    pub(super) const TS_SEC: Range<usize> = 0..4;
    pub(super) const TS_FRAC: Range<usize> = 4..8;
    pub(super) const INCL_LEN: Range<usize> = 8..12;
    pub(super) const ORIG_LEN: Range<usize> = 12..16;
}

/// Record header length of the standard formats.
const RECORD_HEADER_LEN: usize = 16;
/// Record header length of the modified format (+ ifindex u32, protocol u16, pkt_type u8, pad).
const MODIFIED_RECORD_HEADER_LEN: usize = 24;

/// Whether the captured and original lengths are stored in the other order.
///
/// Wireshark (`wiretap/libpcap.c`, `libpcap_read_header`): files before version 2.3 have them
/// swapped; some 2.3 files do too, recognisable by caplen > orig_len; DG/UX tcpdump wrote
/// version 543.0 files, swapped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum LengthOrder {
    Normal,
    Swapped,
    SwappedIfCaplenLarger,
}

/// The pcap variant, from the magic number.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PcapVariant {
    /// Header and records are big-endian.
    pub big_endian: bool,
    /// Nanosecond timestamps.
    pub nanos: bool,
    /// Kuznetzov's modified record header (24 bytes).
    pub modified: bool,
}

impl PcapVariant {
    /// The variant of a pcap container; `None` for pcapng.
    pub(crate) fn of(container: Container) -> Option<Self> {
        match container {
            Container::Pcap { nanos, big_endian } => Some(Self {
                big_endian,
                nanos,
                modified: false,
            }),
            Container::PcapModified { big_endian } => Some(Self {
                big_endian,
                nanos: false,
                modified: true,
            }),
            Container::PcapNg => None,
        }
    }
}

/// State of an open pcap file.
#[derive(Debug)]
pub(crate) struct PcapFile {
    big_endian: bool,
    /// Nanoseconds per unit of the fractional timestamp field.
    ns_per_frac: i64,
    record_header_len: usize,
    link: LinkType,
    max_caplen: u32,
    lengths: LengthOrder,
    /// The header's snaplen and whole link-type field (FCS bits included), for rewriting.
    snaplen: u32,
    link_field: u32,
}

impl PcapFile {
    /// Parses the file header (`header` holds at least [`FILE_HEADER_LEN`] bytes) of the
    /// pcap variant found by the sniffer.
    pub(crate) fn parse_header(header: &[u8], variant: PcapVariant) -> Result<Self, Bad> {
        let PcapVariant {
            big_endian,
            nanos,
            modified,
        } = variant;
        let major = u16_at(header, file_field::VERSION_MAJOR, big_endian);
        let minor = u16_at(header, file_field::VERSION_MINOR, big_endian);
        // Wireshark accepts major version 2 and later ("We only support version 2.0 and
        // later"); libpcap writes 2.4.
        if major < 2 {
            let kind = CaptureErrorKind::UnsupportedVersion {
                format: "pcap",
                major,
                minor,
            };
            return Err(Bad::at(0, kind));
        }
        let lengths = match (major, minor) {
            (2, 0..=2) | (543, _) => LengthOrder::Swapped,
            (2, 3) => LengthOrder::SwappedIfCaplenLarger,
            _ => LengthOrder::Normal,
        };
        // The upper 16 bits carry FCS length and reserved bits (pcap-linktype(7)).
        let link_field = u32_at(header, file_field::LINKTYPE, big_endian);
        let link = LinkType(link_field as u16);
        Ok(Self {
            big_endian,
            ns_per_frac: if nanos { 1 } else { 1_000 },
            record_header_len: if modified {
                MODIFIED_RECORD_HEADER_LEN
            } else {
                RECORD_HEADER_LEN
            },
            link,
            max_caplen: max_caplen(link),
            lengths,
            snaplen: u32_at(header, file_field::SNAPLEN, big_endian),
            link_field,
        })
    }

    /// What the file header says, for writing the same capture in another format.
    pub(crate) fn header(&self) -> PcapHeader {
        // Bits 28..31: FCS length in 16-bit words, valid when bit 26 is set (pcap-linktype(7)).
        let fcs_len =
            (self.link_field & 0x0400_0000 != 0).then(|| (self.link_field >> 28) as u8 * 2);
        PcapHeader {
            link: self.link,
            snaplen: self.snaplen,
            nanos: self.ns_per_frac == 1,
            fcs_len,
        }
    }

    /// Length of a record header.
    pub(crate) fn record_header_len(&self) -> usize {
        self.record_header_len
    }

    /// The seconds of the record header `h`.
    pub(crate) fn ts_sec(&self, h: &[u8]) -> u32 {
        u32_at(h, record_field::TS_SEC, self.big_endian)
    }

    /// The whole length of the record whose header `h` may be (for finding a record
    /// boundary in the middle of a file): `None` unless its fraction of a second is below a
    /// second, its captured length within the link type's maximum, and its original length
    /// neither 0 nor far above any packet's (a run of zero bytes is no record).
    pub(crate) fn plausible(&self, h: &[u8]) -> Option<usize> {
        let be = self.big_endian;
        let frac = u32_at(h, record_field::TS_FRAC, be);
        let (caplen, orig_len) = self.lengths_of(h);
        let second = 1_000_000_000 / self.ns_per_frac;
        let ok = i64::from(frac) < second
            && caplen <= self.max_caplen
            && orig_len >= 1
            && orig_len <= self.max_caplen.max(1 << 20);
        ok.then_some(self.record_header_len + caplen as usize)
    }

    /// The captured and original lengths of the record header `h`, in the order the file's
    /// writer meant them.
    #[inline(always)]
    fn lengths_of(&self, h: &[u8]) -> (u32, u32) {
        let be = self.big_endian;
        let caplen = u32_at(h, record_field::INCL_LEN, be);
        let orig_len = u32_at(h, record_field::ORIG_LEN, be);
        let swap = match self.lengths {
            LengthOrder::Normal => false,
            LengthOrder::Swapped => true,
            LengthOrder::SwappedIfCaplenLarger => caplen > orig_len,
        };
        if swap {
            (orig_len, caplen)
        } else {
            (caplen, orig_len)
        }
    }

    /// Reads the next record header and makes its data available in `w`.
    // Always inlined: once a packet (see `CaptureReader::next_frame`).
    #[inline(always)]
    pub(crate) fn next(&mut self, w: &mut Window) -> Result<Next, Bad> {
        let offset = w.offset();
        let io_err = |w: &Window, e| Bad::at(w.received(), CaptureErrorKind::Io(e));
        let hlen = self.record_header_len;
        if !w.fill(hlen).map_err(|e| io_err(w, e))? {
            return Ok(if w.bytes().is_empty() {
                Next::End
            } else {
                Next::Cut {
                    offset,
                    record: true,
                }
            });
        }
        // fill(hlen) succeeded: the window holds the whole record header.
        let h = w.bytes().get(..hlen).unwrap_or_default();
        let be = self.big_endian;
        let sec = u32_at(h, record_field::TS_SEC, be);
        let frac = u32_at(h, record_field::TS_FRAC, be);
        let (caplen, orig_len) = self.lengths_of(h);
        // Wireshark: "pcap: File has %u-byte packet, bigger than maximum of %u" is an error.
        // caplen > orig_len is accepted (some writers do it) and the data kept as caplen.
        if caplen > self.max_caplen {
            let kind = CaptureErrorKind::AbsurdCaplen {
                caplen,
                max: self.max_caplen,
            };
            return Err(Bad::at(offset, kind));
        }
        let total = hlen + caplen as usize;
        if !w.fill(total).map_err(|e| io_err(w, e))? {
            return Ok(Next::Cut {
                offset,
                record: true,
            });
        }
        // ts_sec is unsigned (files reach past 2038); u32::MAX * 1e9 fits in i64.
        let ts = i64::from(sec) * 1_000_000_000 + i64::from(frac) * self.ns_per_frac;
        Ok(Next::Packet(Packet {
            ts: Timestamp(ts),
            link: self.link,
            orig_len,
            interface: 0,
            data_start: hlen,
            caplen: caplen as usize,
            total,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(major: u16, minor: u16, linktype: u32, be: bool) -> Vec<u8> {
        let mut h = Vec::new();
        let put16 =
            |h: &mut Vec<u8>, v: u16| h.extend(if be { v.to_be_bytes() } else { v.to_le_bytes() });
        let put32 =
            |h: &mut Vec<u8>, v: u32| h.extend(if be { v.to_be_bytes() } else { v.to_le_bytes() });
        put32(&mut h, 0xa1b2_c3d4);
        put16(&mut h, major);
        put16(&mut h, minor);
        put32(&mut h, 0);
        put32(&mut h, 0);
        put32(&mut h, 65535);
        put32(&mut h, linktype);
        h
    }

    #[test]
    fn linktype_keeps_low_16_bits() {
        // FCS bits set in the upper half (pcap-linktype(7)): link type is still Ethernet.
        let h = header(2, 4, 0x1400_0001, true);
        let c = PcapVariant {
            big_endian: true,
            nanos: false,
            modified: false,
        };
        let p = PcapFile::parse_header(&h, c).unwrap();
        assert_eq!(p.link, LinkType::ETHERNET);
        assert_eq!(p.max_caplen, 262_144);
        assert_eq!(p.lengths, LengthOrder::Normal);
    }

    #[test]
    fn versions() {
        let c = PcapVariant {
            big_endian: false,
            nanos: false,
            modified: false,
        };
        let err = PcapFile::parse_header(&header(1, 0, 1, false), c).unwrap_err();
        assert!(matches!(
            err.kind,
            CaptureErrorKind::UnsupportedVersion {
                major: 1,
                minor: 0,
                ..
            }
        ));
        let p = PcapFile::parse_header(&header(2, 2, 1, false), c).unwrap();
        assert_eq!(p.lengths, LengthOrder::Swapped);
        let p = PcapFile::parse_header(&header(2, 3, 1, false), c).unwrap();
        assert_eq!(p.lengths, LengthOrder::SwappedIfCaplenLarger);
        let p = PcapFile::parse_header(&header(543, 0, 1, false), c).unwrap();
        assert_eq!(p.lengths, LengthOrder::Swapped);
    }
}
