//! The input side: files and readers, gzip and zstd, sniffing bad inputs, progress counters,
//! streaming through the bounded buffer whatever the read sizes.

mod common;

use std::io::Cursor;
use std::path::Path;

use common::*;
use tcpdx_capture::{CaptureErrorKind, CaptureReader, Compression, Container};

/// A pcapng capture with both byte orders, two interfaces and every packet block type.
fn mixed_capture() -> Vec<u8> {
    let mut ng = PcapNg::new(false);
    ng.idb(1, 0, None, None);
    ng.idb(101, 0, Some(9), None);
    for i in 0..50u32 {
        ng.epb(
            i % 2,
            u64::from(i) * 1000,
            1000 + i,
            &payload(37 + i as usize, i as u8),
        );
    }
    ng.shb(true);
    ng.idb(113, 128, None, None);
    ng.spb(200, &payload(128, 9));
    ng.opb(0, 5, 80, &payload(80, 8));
    ng.bytes
}

/// A pcap capture of `n` records of 1500 bytes.
fn big_pcap(n: u32) -> Vec<u8> {
    let mut p = Pcap::new(MAGIC_NS, false, 1);
    for i in 0..n {
        p.record(i, i, 1500, &payload(1500, i as u8));
    }
    p.bytes
}

#[test]
fn gzip_and_zstd_are_transparent() {
    for plain in [mixed_capture(), big_pcap(10)] {
        let want = read_all(plain.clone());
        assert!(want.error.is_none() && want.warnings.is_empty());
        for (compressed, compression) in [
            (gzip(&plain), Compression::Gzip),
            (zstd(&plain), Compression::Zstd),
        ] {
            let len = compressed.len() as u64;
            let mut reader =
                CaptureReader::from_reader("test", Box::new(Cursor::new(compressed))).unwrap();
            assert_eq!(reader.format().compression, compression);
            assert_eq!(reader.input_len(), None);
            let mut n = 0;
            while let Some(f) = reader.next_frame().unwrap() {
                assert_eq!(f.data, want.frames[n].data);
                assert_eq!(f.ts.0, want.frames[n].ts);
                n += 1;
            }
            assert_eq!(n, want.frames.len());
            assert!(reader.warnings().is_empty());
            assert_eq!(reader.input_bytes_read(), len);
        }
    }
}

#[test]
fn multi_member_gzip_is_one_capture() {
    let plain = big_pcap(20);
    let (a, b) = plain.split_at(1000);
    let mut two = gzip(a);
    two.extend(gzip(b));
    let out = read_all(two);
    assert!(out.error.is_none());
    assert_eq!(out.frames.len(), 20);
    assert_eq!(out.format.unwrap().compression, Compression::Gzip);
}

#[test]
fn corrupt_gzip_is_an_io_error_with_an_offset() {
    let plain = big_pcap(100);
    let mut gz = gzip(&plain);
    // Damage the CRC in the trailer: every byte decompresses, then the check fails.
    let n = gz.len();
    gz[n - 8] ^= 0xff;
    let out = read_all(gz);
    let e = out.err();
    assert!(matches!(e.kind, CaptureErrorKind::Io(_)), "{e:?}");
    assert!(std::error::Error::source(e).is_some());
    assert_eq!(e.offset, plain.len() as u64);
    assert_eq!(out.frames.len(), 100);

    // Damage the deflate data itself.
    let mut gz = gzip(&plain);
    for b in &mut gz[40..60] {
        *b = 0xff;
    }
    let out = read_all(gz);
    let e = out.err();
    assert!(matches!(e.kind, CaptureErrorKind::Io(_)), "{e:?}");
    assert!(e.offset < plain.len() as u64);
    assert!(
        e.to_string()
            .starts_with(&format!("test: byte {}: read error: ", e.offset)),
        "{e}"
    );
}

#[test]
fn cut_off_compressed_stream_is_a_warning() {
    // Incompressible data, so that half the compressed stream holds whole blocks.
    let mut p = Pcap::new(MAGIC_NS, false, 1);
    for i in 0..200 {
        p.record(i, i, 1500, &noise(1500, u64::from(i)));
    }
    let plain = p.bytes;
    for compressed in [gzip(&plain), zstd(&plain)] {
        let half = compressed[..compressed.len() / 2].to_vec();
        let out = read_all(half);
        assert!(out.error.is_none(), "{:?}", out.error);
        assert!(
            !out.frames.is_empty() && out.frames.len() < 200,
            "{}",
            out.frames.len()
        );
        assert_eq!(out.warnings.len(), 1, "{:?}", out.warnings);
        let w = &out.warnings[0];
        let k = out.frames.len();
        // The cut record starts right after the last whole one.
        assert_eq!(w.offset, 24 + k as u64 * (16 + 1500));
        assert_eq!(
            w.message,
            format!(
                "record cut off at byte {} (frame {}): analysed up to there",
                w.offset,
                k + 1
            )
        );
    }
}

#[test]
fn compressed_stream_cut_before_any_output_is_an_io_error() {
    let gz = gzip(&big_pcap(10));
    let out = read_all(gz[..12].to_vec());
    let e = out.err();
    assert!(matches!(e.kind, CaptureErrorKind::Io(_)), "{e:?}");
    assert_eq!(e.offset, 0);
}

#[test]
fn empty_input() {
    for bytes in [Vec::new(), gzip(&[]), zstd(&[])] {
        let out = read_all(bytes);
        let e = out.err();
        assert!(matches!(e.kind, CaptureErrorKind::Empty), "{e:?}");
        assert_eq!(e.offset, 0);
        assert_eq!(e.to_string(), "test: byte 0: empty input, not a capture");
    }
}

#[test]
fn not_a_capture() {
    let out = read_all(b"Hello, world\n".to_vec());
    let e = out.err();
    assert!(
        matches!(&e.kind, CaptureErrorKind::NotACapture { magic, inside: Compression::None } if magic == b"Hell")
    );
    assert_eq!(
        e.to_string(),
        r#"test: byte 0: not a pcap or pcapng capture: starts with 48 65 6c 6c (text "Hell")"#
    );
    let out = read_all(vec![0x00, 0xff, 0x13, 0x37, 0x99, 0x98]);
    assert_eq!(
        out.err().to_string(),
        "test: byte 0: not a pcap or pcapng capture: starts with 00 ff 13 37"
    );
    let out = read_all(gzip(b"<html>"));
    assert_eq!(
        out.err().to_string(),
        r#"test: byte 0: not a pcap or pcapng capture (inside gzip compression): starts with 3c 68 74 6d (text "<htm")"#
    );
    // Too short for a magic number, and not the start of one.
    let out = read_all(vec![0x42]);
    assert!(matches!(
        out.err().kind,
        CaptureErrorKind::NotACapture { .. }
    ));
}

#[test]
fn start_of_a_magic_number_only() {
    let out = read_all(vec![0xd4, 0xc3, 0xb2]);
    let e = out.err();
    assert!(matches!(
        e.kind,
        CaptureErrorKind::TruncatedHeader {
            needed: 4,
            got: 3,
            ..
        }
    ));
    assert_eq!(
        e.to_string(),
        "test: byte 0: input ends inside the capture magic number (3 of 4 bytes)"
    );
}

#[test]
fn read_sizes_do_not_matter() {
    // A pipe may return a few bytes per read: same frames, same warnings.
    let mut bytes = mixed_capture();
    bytes.truncate(bytes.len() - 3);
    let want = read_all(bytes.clone());
    assert_eq!(want.frames.len(), 51);
    assert_eq!(want.warnings.len(), 1);
    for step in [1, 2, 3, 5, 64, 4093] {
        let got = read_from(Box::new(Trickle::new(bytes.clone(), step)));
        assert_eq!(got.frames, want.frames, "step {step}");
        assert_eq!(got.warnings, want.warnings, "step {step}");
    }
    let gz = gzip(&bytes);
    let got = read_from(Box::new(Trickle::new(gz, 7)));
    assert_eq!(got.frames, want.frames);
}

#[test]
fn many_frames_cross_buffer_boundaries() {
    // 20 MB: records straddle the 1 MiB buffer many times over.
    let n = 13_000;
    let out = read_all(big_pcap(n));
    assert!(out.error.is_none() && out.warnings.is_empty());
    assert_eq!(out.frames.len(), n as usize);
    for (i, f) in out.frames.iter().enumerate() {
        assert_eq!(f.no, i as u64 + 1);
        assert_eq!(f.ts, i as i64 * 1_000_000_001);
        assert_eq!(f.data, payload(1500, i as u8), "frame {}", f.no);
    }
}

#[test]
fn open_a_file() {
    let dir = std::env::temp_dir().join(format!("tcpdx-capture-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("t.pcapng.zst");
    let compressed = zstd(&mixed_capture());
    std::fs::write(&path, &compressed).unwrap();
    let mut reader = CaptureReader::open(&path).unwrap();
    assert_eq!(reader.input_len(), Some(compressed.len() as u64));
    assert_eq!(reader.format().container, Container::PcapNg);
    assert_eq!(reader.format().to_string(), "pcapng, zstd-compressed");
    let mut n = 0;
    while reader.next_frame().unwrap().is_some() {
        n += 1;
    }
    assert_eq!(n, 52);
    assert_eq!(reader.input_bytes_read(), compressed.len() as u64);
    std::fs::remove_dir_all(&dir).unwrap();

    let missing = dir.join("missing.pcap");
    let e = CaptureReader::open(&missing).unwrap_err();
    assert!(matches!(e.kind, CaptureErrorKind::Open(_)));
    assert!(std::error::Error::source(&e).is_some());
    assert!(
        e.to_string()
            .starts_with(&format!("{}: cannot open: ", missing.display())),
        "{e}"
    );

    // A directory opens but cannot be read.
    let e = CaptureReader::open(Path::new("/")).unwrap_err();
    assert!(matches!(e.kind, CaptureErrorKind::Io(_)), "{e:?}");
    assert_eq!(e.offset, 0);
}

#[test]
fn frame_numbers_count_every_record() {
    let out = read_all(mixed_capture());
    assert_eq!(out.numbers(), (1..=52).collect::<Vec<u64>>());
}
