//! Reading a file mapped into memory: the same frames, warnings and errors as reading it,
//! pages let go on the way, and a file truncated while mapped ends the process with one
//! line and exit code 2 (when the program asked for it).

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;
use tcpdx_capture::CaptureReader;

/// Everything a reader hands out: frames (number, time, bytes), warnings, the error.
#[derive(Debug, PartialEq)]
struct Read {
    frames: Vec<(u64, i64, Vec<u8>)>,
    warnings: Vec<String>,
    error: Option<String>,
}

fn read(mut r: CaptureReader) -> Read {
    let mut frames = Vec::new();
    let error = loop {
        match r.next_frame() {
            Ok(Some(f)) => frames.push((f.no.0, f.ts.nanos(), f.data.to_vec())),
            Ok(None) => break None,
            Err(e) => break Some(e.to_string()),
        }
    };
    Read {
        frames,
        warnings: r.warnings().iter().map(|w| w.to_string()).collect(),
        error,
    }
}

fn temp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tcpdx-mapped-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

/// A pcap of `n` records of 1500 bytes.
fn pcap(n: u32) -> Vec<u8> {
    let mut p = Pcap::new(MAGIC_NS, false, 1);
    for i in 0..n {
        p.record(i, i, 1500, &payload(1500, i as u8));
    }
    p.bytes
}

fn both_ways(path: &Path) -> (Read, Read, bool) {
    let plain = read(CaptureReader::open(path).unwrap());
    let mapped = CaptureReader::open_mapped(path, true).unwrap();
    let is_mapped = mapped.is_mapped();
    (plain, read(mapped), is_mapped)
}

#[test]
fn mapped_files_read_as_read_files() {
    let mut ng = PcapNg::new(false);
    ng.idb(1, 0, None, None);
    for i in 0..300u32 {
        ng.epb(
            0,
            u64::from(i) * 1000,
            1000 + i,
            &payload(60 + i as usize, i as u8),
        );
    }
    // 20 MB: past two of the points where read pages are let go (every 8 MiB).
    let big = pcap(13_000);
    let mut cut = pcap(20);
    cut.truncate(cut.len() - 700);
    let mut bad = pcap(5);
    // The fourth record's caplen field: far above any link type's maximum.
    let at = 24 + 3 * (16 + 1500) + 8;
    bad[at..at + 4].copy_from_slice(&u32::MAX.to_le_bytes());
    for (name, bytes) in [
        ("ng.pcapng", ng.bytes),
        ("big.pcap", big),
        ("cut.pcap", cut),
        ("bad.pcap", bad),
    ] {
        let path = temp(name);
        std::fs::write(&path, &bytes).unwrap();
        let (plain, mapped, is_mapped) = both_ways(&path);
        assert!(is_mapped, "{name}");
        assert_eq!(plain, mapped, "{name}");
        assert!(!plain.frames.is_empty(), "{name}");
        match name {
            "big.pcap" => assert_eq!(plain.frames.len(), 13_000),
            "cut.pcap" => assert_eq!(plain.warnings.len(), 1, "{plain:?}"),
            "bad.pcap" => assert!(plain.error.is_some()),
            _ => {}
        }
        std::fs::remove_file(&path).unwrap();
    }
}

#[test]
fn progress_counts_the_bytes_read_of_a_mapped_file() {
    let path = temp("progress.pcap");
    let bytes = pcap(100);
    std::fs::write(&path, &bytes).unwrap();
    let mut r = CaptureReader::open_mapped(&path, false).unwrap();
    assert!(r.is_mapped());
    let mut n = 0;
    while r.next_frame().unwrap().is_some() {
        n += 1;
        // Up to the start of the frame just handed out.
        assert_eq!(r.input_bytes_read(), 24 + (n - 1) * (16 + 1500));
    }
    assert_eq!(r.input_bytes_read(), bytes.len() as u64);
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn inputs_that_cannot_be_mapped_are_read() {
    // Compressed: decompressed as always.
    let path = temp("c.pcap.gz");
    let plain = pcap(30);
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    std::io::Write::write_all(&mut gz, &plain).unwrap();
    std::fs::write(&path, gz.finish().unwrap()).unwrap();
    let (read_, mapped, is_mapped) = both_ways(&path);
    assert!(!is_mapped);
    assert_eq!(read_, mapped);
    assert_eq!(mapped.frames.len(), 30);
    std::fs::remove_file(&path).unwrap();
    // Empty: the same error as reading it.
    let path = temp("empty.pcap");
    std::fs::write(&path, b"").unwrap();
    let a = CaptureReader::open(&path).unwrap_err().to_string();
    let b = CaptureReader::open_mapped(&path, true)
        .unwrap_err()
        .to_string();
    assert_eq!(a, b);
    std::fs::remove_file(&path).unwrap();
}

/// Run by [`a_file_truncated_while_mapped_ends_with_one_line_and_exit_2`] in a child
/// process (it dies of the truncation).
#[test]
fn truncated_while_mapped_child() {
    let Some(path) = std::env::var_os("TCPDX_TEST_TRUNCATE") else {
        return;
    };
    let path = PathBuf::from(path);
    tcpdx_capture::exit_on_sigbus("test: ", "; hint");
    let mut r = CaptureReader::open_mapped(&path, false).unwrap();
    assert!(r.is_mapped());
    assert!(r.next_frame().unwrap().is_some());
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(0)
        .unwrap();
    while r.next_frame().unwrap().is_some() {}
    // Reached only if the bytes past the cut could still be read.
    std::process::exit(0);
}

#[test]
fn a_file_truncated_while_mapped_ends_with_one_line_and_exit_2() {
    let path = temp("truncated.pcap");
    std::fs::write(&path, pcap(20_000)).unwrap();
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "truncated_while_mapped_child", "--nocapture"])
        .env("TCPDX_TEST_TRUNCATE", &path)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    let want = format!(
        "test: {}: the file could not be read where it is mapped (another program truncated it, or its storage failed); hint\n",
        path.display()
    );
    assert!(stderr.ends_with(&want), "{stderr}");
    std::fs::remove_file(&path).unwrap();
}
