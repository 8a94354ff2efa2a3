//! Classic pcap: the four variants (+ modified), record checks, bad and cut-off files.

mod common;

use common::*;
use tcpdx_capture::{CaptureErrorKind, Compression, Container};

const SEC: u32 = 1_700_000_000;
const SEC_NS: i64 = SEC as i64 * 1_000_000_000;

#[test]
fn all_variants_read_the_same_frames() {
    let cases = [
        (
            MAGIC_US,
            false,
            Container::Pcap {
                nanos: false,
                big_endian: false,
            },
        ),
        (
            MAGIC_US,
            true,
            Container::Pcap {
                nanos: false,
                big_endian: true,
            },
        ),
        (
            MAGIC_NS,
            false,
            Container::Pcap {
                nanos: true,
                big_endian: false,
            },
        ),
        (
            MAGIC_NS,
            true,
            Container::Pcap {
                nanos: true,
                big_endian: true,
            },
        ),
        (
            MAGIC_MODIFIED,
            false,
            Container::PcapModified { big_endian: false },
        ),
        (
            MAGIC_MODIFIED,
            true,
            Container::PcapModified { big_endian: true },
        ),
    ];
    for (magic, be, container) in cases {
        let nanos = magic == MAGIC_NS;
        let mut p = Pcap::new(magic, be, 1);
        p.record(
            SEC,
            if nanos { 123_456_789 } else { 123_456 },
            60,
            &payload(60, 1),
        );
        p.record(SEC + 1, 0, 1514, &payload(96, 2)); // snaplen cut: orig_len > caplen
        p.record(SEC + 2, 999_999, 0, &[]); // empty record
        let out = read_all(p.bytes);
        assert!(
            out.error.is_none() && out.warnings.is_empty(),
            "{container:?}: {out:?}"
        );
        assert_eq!(out.format.unwrap().container, container);
        assert_eq!(out.format.unwrap().compression, Compression::None);
        let f = &out.frames;
        assert_eq!(out.numbers(), [1, 2, 3], "{container:?}");
        let frac_ns = if nanos { 123_456_789 } else { 123_456_000 };
        assert_eq!(f[0].ts, SEC_NS + frac_ns, "{container:?}");
        assert_eq!(f[1].ts, SEC_NS + 1_000_000_000);
        let last_frac = if nanos { 999_999 } else { 999_999_000 };
        assert_eq!(f[2].ts, SEC_NS + 2_000_000_000 + last_frac);
        assert_eq!((f[0].link, f[0].interface, f[0].orig_len), (1, 0, 60));
        assert_eq!(f[0].data, payload(60, 1));
        assert_eq!((f[1].orig_len, f[1].data.len()), (1514, 96));
        assert_eq!(f[1].data, payload(96, 2));
        assert!(f[2].data.is_empty());
    }
}

#[test]
fn link_type_is_the_low_16_bits() {
    // Upper bits: FCS length present, 4 bytes (pcap-linktype(7)).
    let mut p = Pcap::new(MAGIC_US, false, 0x1400_0071);
    p.record(SEC, 0, 40, &payload(40, 0));
    assert_eq!(read_all(p.bytes).frames[0].link, 113);
}

#[test]
fn timestamps_after_2038_are_unsigned() {
    let mut p = Pcap::new(MAGIC_US, true, 1);
    p.record(0x8000_0000, 5, 1, &[0]);
    assert_eq!(
        read_all(p.bytes).frames[0].ts,
        0x8000_0000_i64 * 1_000_000_000 + 5_000
    );
}

#[test]
fn caplen_above_orig_len_is_kept() {
    let mut p = Pcap::new(MAGIC_US, false, 1);
    p.record(SEC, 0, 10, &payload(64, 3));
    let out = read_all(p.bytes);
    assert_eq!((out.frames[0].orig_len, out.frames[0].data.len()), (10, 64));
}

#[test]
fn lengths_swapped_in_old_versions() {
    // Version 2.2 stores orig_len where 2.4 stores caplen (Wireshark, libpcap).
    let mut p = Pcap::with_version(MAGIC_US, false, 1, 2, 2);
    p.record_raw(SEC, 0, 1514, 20, &payload(20, 0));
    let out = read_all(p.bytes);
    assert_eq!(
        (out.frames[0].orig_len, out.frames[0].data.len()),
        (1514, 20)
    );
    // Version 2.3 swaps only when caplen > orig_len.
    let mut p = Pcap::with_version(MAGIC_US, false, 1, 2, 3);
    p.record_raw(SEC, 0, 20, 1514, &payload(20, 0));
    p.record_raw(SEC, 0, 1514, 20, &payload(20, 0));
    let out = read_all(p.bytes);
    assert_eq!(out.frames.len(), 2);
    assert!(
        out.frames
            .iter()
            .all(|f| f.orig_len == 1514 && f.data.len() == 20)
    );
}

#[test]
fn version_1_is_unsupported() {
    let p = Pcap::with_version(MAGIC_US, false, 1, 1, 0);
    let out = read_all(p.bytes);
    let e = out.err();
    assert_eq!(e.offset, 0);
    assert!(matches!(
        e.kind,
        CaptureErrorKind::UnsupportedVersion {
            major: 1,
            minor: 0,
            ..
        }
    ));
    assert_eq!(e.to_string(), "test: byte 0: unsupported pcap version 1.0");
}

#[test]
fn absurd_caplen_is_an_error_at_its_record() {
    let mut p = Pcap::new(MAGIC_US, false, 1);
    p.record(SEC, 0, 60, &payload(60, 0));
    let bad = p.record_raw(SEC, 1, 4_325_376, 4_325_376, &payload(100, 0));
    let out = read_all(p.bytes);
    assert_eq!(out.frames.len(), 1);
    let e = out.err();
    assert_eq!(e.offset, bad as u64);
    assert_eq!(bad, 24 + 16 + 60);
    assert!(matches!(
        e.kind,
        CaptureErrorKind::AbsurdCaplen {
            caplen: 4_325_376,
            max: 262_144
        }
    ));
    assert_eq!(
        e.to_string(),
        "test: byte 100: record has captured length 4325376, more than the maximum of 262144 \
         (corrupt capture?)"
    );
}

#[test]
fn largest_standard_caplen_is_accepted() {
    let mut p = Pcap::new(MAGIC_NS, false, 1);
    p.record(SEC, 0, 262_144, &payload(262_144, 9));
    p.record(SEC, 1, 60, &payload(60, 0));
    let out = read_all(p.bytes);
    assert!(out.error.is_none());
    assert_eq!(out.frames[0].data, payload(262_144, 9));
    assert_eq!(out.frames.len(), 2);
}

#[test]
fn usb_records_may_be_larger() {
    // Wireshark allows 128 MiB for USB link types; this record also outgrows the 1 MiB buffer.
    let big = payload(3 << 20, 7);
    let mut p = Pcap::new(MAGIC_US, false, 189);
    p.record(SEC, 0, 64, &payload(64, 0));
    p.record(SEC, 1, big.len() as u32, &big);
    p.record(SEC, 2, 64, &payload(64, 1));
    let out = read_all(p.bytes);
    assert!(out.error.is_none(), "{:?}", out.error);
    assert_eq!(out.frames.len(), 3);
    assert_eq!(out.frames[1].data, big);
    assert_eq!(out.frames[2].data, payload(64, 1));
}

#[test]
fn file_shorter_than_the_header_is_an_error() {
    let mut bytes = Pcap::new(MAGIC_US, false, 1).bytes;
    bytes.truncate(10);
    let out = read_all(bytes);
    let e = out.err();
    assert_eq!(e.offset, 0);
    assert!(matches!(
        e.kind,
        CaptureErrorKind::TruncatedHeader {
            needed: 24,
            got: 10,
            ..
        }
    ));
    assert_eq!(
        e.to_string(),
        "test: byte 0: input ends inside the pcap file header (10 of 24 bytes)"
    );
}

#[test]
fn header_only_is_an_empty_capture() {
    let out = read_all(Pcap::new(MAGIC_US, false, 1).bytes);
    assert!(out.error.is_none() && out.warnings.is_empty() && out.frames.is_empty());
}

#[test]
fn record_cut_off_in_its_header_ends_with_a_warning() {
    let mut p = Pcap::new(MAGIC_US, false, 1);
    p.record(SEC, 0, 60, &payload(60, 0));
    p.record(SEC, 1, 60, &payload(60, 1));
    let cut = p.record(SEC, 2, 60, &payload(60, 2));
    p.bytes.truncate(cut + 7);
    let out = read_all(p.bytes);
    assert!(out.error.is_none());
    assert_eq!(out.numbers(), [1, 2]);
    assert_eq!(out.warnings.len(), 1);
    let w = &out.warnings[0];
    assert_eq!(w.offset, cut as u64);
    assert_eq!(
        w.message,
        format!("record cut off at byte {cut} (frame 3): analysed up to there")
    );
    assert_eq!(w.to_string(), format!("test: {}", w.message));
}

#[test]
fn record_cut_off_in_its_data_ends_with_a_warning() {
    for modified in [false, true] {
        let magic = if modified { MAGIC_MODIFIED } else { MAGIC_US };
        let mut p = Pcap::new(magic, true, 1);
        p.record(SEC, 0, 60, &payload(60, 0));
        let cut = p.record(SEC, 1, 1000, &payload(1000, 1));
        p.bytes.truncate(p.bytes.len() - 1);
        let out = read_all(p.bytes);
        assert!(out.error.is_none());
        assert_eq!(out.numbers(), [1]);
        assert_eq!(out.warnings[0].offset, cut as u64);
        assert_eq!(cut, if modified { 24 + 24 + 60 } else { 24 + 16 + 60 });
    }
}
