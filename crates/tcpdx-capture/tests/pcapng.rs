//! pcapng: sections, interfaces, timestamp resolutions, the three packet blocks, skipped
//! blocks, and every bad-length and cut-off case with its exact offset.

mod common;

use common::*;
use tcpdx_capture::{BlockLengthProblem, CaptureErrorKind, Container};

/// 2023-11-14T22:13:20Z in microseconds.
const T_US: u64 = 1_700_000_000_000_000;
const T_NS: i64 = 1_700_000_000_000_000_000;

#[test]
fn both_byte_orders() {
    for be in [false, true] {
        let mut ng = PcapNg::new(be);
        ng.idb(1, 0, None, None);
        ng.epb(0, T_US, 60, &payload(60, 1));
        ng.epb(0, T_US + 1_500_000, 1514, &payload(61, 2));
        let out = read_all(ng.bytes);
        assert!(out.error.is_none() && out.warnings.is_empty(), "{out:?}");
        assert_eq!(out.format.unwrap().container, Container::PcapNg);
        assert_eq!(out.numbers(), [1, 2]);
        let f = &out.frames;
        assert_eq!(
            (f[0].ts, f[0].link, f[0].orig_len, f[0].interface),
            (T_NS, 1, 60, 0)
        );
        assert_eq!(f[0].data, payload(60, 1));
        // 61 bytes of data: padded to 64 in the block, 61 in the frame.
        assert_eq!((f[1].ts, f[1].orig_len), (T_NS + 1_500_000_000, 1514));
        assert_eq!(f[1].data, payload(61, 2));
    }
}

#[test]
fn sections_reset_interfaces_and_frame_numbers_go_on() {
    let mut ng = PcapNg::new(false);
    ng.idb(1, 0, None, None);
    ng.idb(101, 0, None, None);
    ng.epb(0, T_US, 60, &payload(60, 0));
    ng.epb(1, T_US, 40, &payload(40, 0));
    ng.shb(true); // second section, other byte order
    ng.idb(113, 0, Some(9), None);
    ng.epb(0, 5, 50, &payload(50, 0));
    let after_shb3 = ng.shb(false); // third section: no interface yet
    let bad = ng.epb(0, 5, 50, &payload(50, 0));
    let out = read_all(ng.bytes);
    assert_eq!(out.numbers(), [1, 2, 3]);
    let links: Vec<u16> = out.frames.iter().map(|f| f.link).collect();
    assert_eq!(links, [1, 101, 113]);
    assert_eq!(out.frames[2].ts, 5);
    // The third section has no IDB: the EPB naming interface 0 is an error at that EPB.
    let e = out.err();
    assert!(after_shb3 < bad);
    assert_eq!(e.offset, bad as u64);
    assert!(matches!(
        e.kind,
        CaptureErrorKind::UnknownInterface {
            interface: 0,
            count: 0
        }
    ));
}

#[test]
fn interfaces_with_their_own_link_types_and_resolutions() {
    let mut ng = PcapNg::new(false);
    ng.idb(1, 0, Some(9), None); // nanoseconds
    ng.idb(101, 0, Some(0x80 | 20), Some(1_000)); // 2^-20 s, +1000 s
    ng.idb(113, 0, Some(3), Some(-1)); // milliseconds, -1 s
    ng.epb(0, 1_700_000_000_123_456_789, 60, &payload(60, 0));
    ng.epb(1, (1_700_000_000 << 20) + (1 << 19), 40, &payload(40, 0));
    ng.epb(2, 1_700_000_000_250, 40, &payload(40, 0));
    ng.epb(1, 1, 40, &payload(40, 0));
    let out = read_all(ng.bytes);
    assert!(out.error.is_none(), "{:?}", out.error);
    let got: Vec<(i64, u16, u32)> = out
        .frames
        .iter()
        .map(|f| (f.ts, f.link, f.interface))
        .collect();
    assert_eq!(
        got,
        [
            (1_700_000_000_123_456_789, 1, 0),
            (1_700_001_000_500_000_000, 101, 1),
            (1_699_999_999_250_000_000, 113, 2),
            // One unit of 2^-20 s is 953.67 ns: truncated like Wireshark.
            (1_000_000_000_953, 101, 1),
        ]
    );
}

#[test]
fn resolution_finer_than_a_nanosecond() {
    let mut ng = PcapNg::new(true);
    ng.idb(1, 0, Some(12), None); // picoseconds
    ng.epb(0, 10_000_000_123_456_789_999, 60, &payload(60, 0));
    let out = read_all(ng.bytes);
    assert_eq!(out.frames[0].ts, 10_000_000_123_456_789);
}

#[test]
fn simple_packet_blocks() {
    let mut ng = PcapNg::new(false);
    ng.idb(1, 64, None, None); // snaplen 64
    ng.epb(0, T_US, 60, &payload(60, 0));
    ng.spb(1514, &payload(64, 1)); // cut by snaplen: caplen 64
    ng.spb(42, &payload(44, 2)); // block room 44 (padding), orig_len 42: caplen 42
    ng.spb(300, &payload(20, 3)); // block too small for snaplen and orig_len: room wins
    let out = read_all(ng.bytes);
    assert!(out.error.is_none(), "{:?}", out.error);
    let f = &out.frames;
    assert_eq!(out.numbers(), [1, 2, 3, 4]);
    assert_eq!((f[1].orig_len, f[1].data.clone()), (1514, payload(64, 1)));
    assert_eq!((f[2].orig_len, f[2].data.clone()), (42, payload(42, 2)));
    assert_eq!((f[3].orig_len, f[3].data.clone()), (300, payload(20, 3)));
    // No timestamp in an SPB: the previous packet's time is repeated.
    assert!(
        f[1..]
            .iter()
            .all(|x| x.ts == T_NS && x.interface == 0 && x.link == 1)
    );
}

#[test]
fn simple_packet_block_before_any_interface_is_an_error() {
    let mut ng = PcapNg::new(false);
    let bad = ng.spb(60, &payload(60, 0));
    let out = read_all(ng.bytes);
    let e = out.err();
    assert_eq!(e.offset, bad as u64);
    assert!(matches!(
        e.kind,
        CaptureErrorKind::UnknownInterface {
            interface: 0,
            count: 0
        }
    ));
}

#[test]
fn obsolete_packet_blocks() {
    for be in [false, true] {
        let mut ng = PcapNg::new(be);
        ng.idb(1, 0, None, None);
        ng.idb(105, 0, Some(9), None);
        ng.opb(1, 77, 1500, &payload(70, 5));
        ng.epb(0, T_US, 60, &payload(60, 0));
        let out = read_all(ng.bytes);
        assert!(out.error.is_none(), "{:?}", out.error);
        let f = &out.frames[0];
        assert_eq!(
            (f.no, f.ts, f.link, f.interface, f.orig_len),
            (1, 77, 105, 1, 1500)
        );
        assert_eq!(f.data, payload(70, 5));
        assert_eq!(out.frames[1].no, 2);
    }
}

#[test]
fn other_blocks_are_skipped_and_wireshark_records_numbered() {
    let mut ng = PcapNg::new(true);
    ng.block(NRB, &[0, 0, 0, 0]);
    ng.idb(1, 0, None, None);
    ng.block(0x1234_5678, &payload(4000, 0)); // unknown
    ng.epb(0, T_US, 60, &payload(60, 0));
    ng.block(ISB, &[0; 12]);
    ng.block(0x0A, &payload(20, 0)); // decryption secrets
    // A custom block and a systemd journal entry: records in Wireshark, numbered 2 and 3.
    ng.block(0x0BAD, &payload(16, 0));
    ng.block(9, b"MESSAGE=hi\n");
    ng.epb(0, T_US, 60, &payload(60, 1));
    let out = read_all(ng.bytes);
    assert!(out.error.is_none() && out.warnings.is_empty(), "{out:?}");
    assert_eq!(out.numbers(), [1, 4]);
    assert_eq!(out.frames[1].data, payload(60, 1));
}

#[test]
fn large_unknown_block_is_skipped_without_buffering_trouble() {
    let mut ng = PcapNg::new(false);
    ng.idb(1, 0, None, None);
    ng.block(0x7777, &payload(3 << 20, 1)); // larger than the 1 MiB window
    ng.epb(0, T_US, 60, &payload(60, 4));
    let out = read_all(ng.bytes);
    assert!(out.error.is_none(), "{:?}", out.error);
    assert_eq!(out.frames[0].data, payload(60, 4));
}

/// Asserts a BadBlockLength at `offset`.
#[track_caller]
fn assert_bad_length(
    out: &Outcome,
    offset: usize,
    block_type: u32,
    length: u32,
    problem: BlockLengthProblem,
) {
    let e = out.err();
    assert_eq!(e.offset, offset as u64, "{e}");
    match &e.kind {
        CaptureErrorKind::BadBlockLength {
            block_type: t,
            length: l,
            problem: p,
        } => {
            assert_eq!((*t, *l, *p), (block_type, length, problem), "{e}");
        }
        k => panic!("not a block length error: {k:?}"),
    }
}

#[test]
fn block_length_not_a_multiple_of_4() {
    let mut ng = PcapNg::new(false);
    ng.idb(1, 0, None, None);
    ng.epb(0, T_US, 60, &payload(60, 0));
    let bad = ng.block_with_lengths(EPB, 45, &payload(33, 0), 45);
    let out = read_all(ng.bytes);
    assert_eq!(out.frames.len(), 1);
    assert_bad_length(&out, bad, EPB, 45, BlockLengthProblem::NotMultipleOf4);
    assert_eq!(
        out.err().to_string(),
        format!(
            "test: byte {bad}: pcapng block EPB (type 0x00000006) has bad total length 45: \
             not a multiple of 4"
        )
    );
}

#[test]
fn block_length_below_12() {
    let mut ng = PcapNg::new(true);
    let bad = ng.block_with_lengths(0x99, 8, &[], 8);
    let out = read_all(ng.bytes);
    assert_bad_length(&out, bad, 0x99, 8, BlockLengthProblem::TooShort { min: 12 });
}

#[test]
fn block_length_below_the_minimum_of_its_type() {
    let mut ng = PcapNg::new(false);
    ng.idb(1, 0, None, None);
    let bad = ng.block_with_lengths(EPB, 28, &[0; 16], 28);
    let out = read_all(ng.bytes);
    assert_bad_length(&out, bad, EPB, 28, BlockLengthProblem::TooShort { min: 32 });
}

#[test]
fn trailer_mismatch_on_packet_and_other_blocks() {
    let mut ng = PcapNg::new(false);
    ng.idb(1, 0, None, None);
    let bad = ng.block_with_lengths(
        EPB,
        92,
        &{
            let mut b = Vec::new();
            for v in [0u32, 0, 0, 60, 60] {
                b.extend(v.to_le_bytes());
            }
            b.extend(payload(60, 0));
            b
        },
        96,
    );
    let out = read_all(ng.bytes);
    assert_eq!(out.frames.len(), 0);
    assert_bad_length(
        &out,
        bad,
        EPB,
        92,
        BlockLengthProblem::TrailerMismatch { trailer: 96 },
    );

    let mut ng = PcapNg::new(true);
    ng.idb(1, 0, None, None);
    ng.epb(0, T_US, 60, &payload(60, 0));
    let bad = ng.block_with_lengths(0x55, 20, &[1; 8], 24);
    let out = read_all(ng.bytes);
    assert_eq!(out.frames.len(), 1);
    assert_bad_length(
        &out,
        bad,
        0x55,
        20,
        BlockLengthProblem::TrailerMismatch { trailer: 24 },
    );
}

#[test]
fn section_header_errors() {
    // Byte-order magic of neither order, in a second section.
    let mut ng = PcapNg::new(false);
    let bad = ng.bytes.len();
    ng.block(
        SHB,
        &[0xde, 0xad, 0xbe, 0xef, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
    );
    let out = read_all(ng.bytes);
    let e = out.err();
    assert_eq!(e.offset, bad as u64);
    assert!(matches!(
        e.kind,
        CaptureErrorKind::BadSectionHeader {
            byte_order_magic: 0xefbe_adde
        }
    ));

    // Version 0.1 (libpcap's pcapng-invalid-vers-1 test case).
    let mut ng = PcapNg::new(true);
    let bad = ng.shb_version(true, 0, 1);
    let out = read_all(ng.bytes);
    let e = out.err();
    assert_eq!(e.offset, bad as u64);
    assert!(matches!(
        e.kind,
        CaptureErrorKind::UnsupportedVersion {
            major: 0,
            minor: 1,
            ..
        }
    ));
    assert!(
        e.to_string().ends_with("unsupported pcapng version 0.1"),
        "{e}"
    );

    // In the first section the error is at byte 0 and no reader is made.
    let mut ng = PcapNg::empty(false);
    ng.shb_version(false, 2, 0);
    let out = read_all(ng.bytes);
    assert!(out.format.is_none());
    assert_eq!(out.err().offset, 0);
}

#[test]
fn file_shorter_than_the_section_header_is_an_error() {
    let full = PcapNg::new(false).bytes;
    for n in [4, 11, 12, 20, full.len() - 1] {
        let out = read_all(full[..n].to_vec());
        let e = out.err();
        assert_eq!(e.offset, 0);
        match e.kind {
            CaptureErrorKind::TruncatedHeader { got, needed, .. } => {
                assert_eq!(got as usize, n);
                // Once the byte order is known, the needed length is the block's own.
                let want = if n >= 12 { full.len() } else { 28 };
                assert_eq!(needed as usize, want);
            }
            ref k => panic!("{n}: {k:?}"),
        }
    }
}

#[test]
fn packet_block_cut_off_ends_with_a_warning() {
    let mut ng = PcapNg::new(false);
    ng.idb(1, 0, None, None);
    ng.epb(0, T_US, 60, &payload(60, 0));
    ng.spb(60, &payload(60, 0));
    let cut = ng.epb(0, T_US, 60, &payload(60, 0));
    for keep in [1, 7, 8, 30, 60, 95] {
        let out = read_all(ng.bytes[..cut + keep].to_vec());
        assert!(out.error.is_none(), "{keep}: {:?}", out.error);
        assert_eq!(out.numbers(), [1, 2]);
        assert_eq!(out.warnings.len(), 1);
        assert_eq!(out.warnings[0].offset, cut as u64);
        assert_eq!(
            out.warnings[0].message,
            format!("record cut off at byte {cut} (frame 3): analysed up to there")
        );
    }
}

#[test]
fn other_block_cut_off_ends_with_a_warning() {
    let mut ng = PcapNg::new(true);
    ng.idb(1, 0, None, None);
    ng.epb(0, T_US, 60, &payload(60, 0));
    let cut = ng.block(ISB, &[0; 24]);
    ng.bytes.truncate(ng.bytes.len() - 2);
    let out = read_all(ng.bytes);
    assert_eq!(out.numbers(), [1]);
    assert_eq!(out.warnings[0].offset, cut as u64);
    assert_eq!(
        out.warnings[0].message,
        format!("block cut off at byte {cut} (after frame 1): analysed up to there")
    );
}

#[test]
fn captured_length_larger_than_the_block() {
    let mut ng = PcapNg::new(false);
    ng.idb(1, 0, None, None);
    let bad = ng.epb_raw(0, T_US, 2000, 2000, &payload(64, 0));
    let out = read_all(ng.bytes);
    let e = out.err();
    assert_eq!(e.offset, bad as u64);
    assert!(matches!(
        e.kind,
        CaptureErrorKind::CaplenExceedsBlock {
            block_type: 6,
            caplen: 2000,
            room: 64
        }
    ));
}

#[test]
fn absurd_captured_length() {
    let mut ng = PcapNg::new(false);
    ng.idb(1, 0, None, None);
    let big = payload(300_000, 0);
    let bad = ng.epb(0, T_US, 300_000, &big);
    let out = read_all(ng.bytes);
    let e = out.err();
    assert_eq!(e.offset, bad as u64);
    assert!(matches!(
        e.kind,
        CaptureErrorKind::AbsurdCaplen {
            caplen: 300_000,
            max: 262_144
        }
    ));
}

#[test]
fn interface_option_running_past_its_block() {
    let mut ng = PcapNg::new(false);
    let mut body = vec![1, 0, 0, 0, 0, 0, 0, 0];
    body.extend([9, 0, 40, 0, 6, 0, 0, 0]); // if_tsresol claiming 40 bytes
    let bad = ng.block(IDB, &body);
    let out = read_all(ng.bytes);
    let e = out.err();
    assert_eq!(e.offset, bad as u64);
    assert!(matches!(
        e.kind,
        CaptureErrorKind::BadOption {
            block_type: 1,
            code: 9,
            length: 40
        }
    ));
}

#[test]
fn unknown_interface_in_an_enhanced_packet_block() {
    let mut ng = PcapNg::new(false);
    ng.idb(1, 0, None, None);
    let bad = ng.epb(3, T_US, 60, &payload(60, 0));
    let out = read_all(ng.bytes);
    let e = out.err();
    assert_eq!(e.offset, bad as u64);
    assert!(matches!(
        e.kind,
        CaptureErrorKind::UnknownInterface {
            interface: 3,
            count: 1
        }
    ));
    assert_eq!(
        e.to_string(),
        format!(
            "test: byte {bad}: pcapng packet block names interface 3 but its section describes \
             1 interface(s)"
        )
    );
}
