//! Rewrites every file of the public corpus as pcapng with a comment on every packet
//! ([`RawReader`] + [`PcapNgWriter`], what `tcpdx annotate` does) and reads the result back:
//! the same frames, numbered alike, with the same timestamps, lengths and bytes. Covers
//! both pcapng byte orders, several sections, SPBs, OPBs, custom blocks and packets that
//! already carry options.
//!
//! The corpus lives outside the repository (`/work/shared/corpus`, `TCPDX_CORPUS`
//! overrides); when it is absent the test says so and passes, like `corpus.rs`.
//! `TCPDX_REWRITE_KEEP=DIR` keeps the rewritten files there, to compare them with tshark.

use std::fmt::Write as _;
use std::io::Cursor;
use std::path::{Path, PathBuf};

use tcpdx_capture::{BlockKind, CaptureReader, PcapNgWriter, RawItem, RawReader};

fn corpus_dir() -> PathBuf {
    std::env::var_os("TCPDX_CORPUS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/work/shared/corpus"))
}

/// Frame number, timestamp (None for SPBs: they have none), original length, bytes.
type Row = (u64, Option<i64>, u32, Vec<u8>);

/// The frames the frame reader gives, up to its end or its first error.
fn frames(mut r: CaptureReader) -> (Vec<Row>, bool) {
    let mut v = Vec::new();
    loop {
        match r.next_frame() {
            Ok(Some(f)) => v.push((f.no.0, Some(f.ts.0), f.orig_len, f.data.to_vec())),
            Ok(None) => return (v, false),
            Err(_) => return (v, true),
        }
    }
}

/// The pcapng rewrite with one comment per packet, and the frames that were SPBs.
fn rewrite(path: &Path) -> (Vec<u8>, Vec<u64>) {
    let mut r = RawReader::open(path).unwrap();
    let mut w = PcapNgWriter::new(Vec::new());
    let header = r.pcap_header();
    if let Some(h) = &header {
        w.section_header("test").unwrap();
        w.pcap_interface(h).unwrap();
    }
    let nanos = header.is_some_and(|h| h.nanos);
    let mut simple = Vec::new();
    while let Ok(Some(item)) = r.next_item() {
        match item {
            RawItem::Record(rec) => {
                let c = format!("tcpdx: frame {}", rec.frame.0);
                w.pcap_record(&rec, nanos, &[c]).unwrap();
            }
            RawItem::Block(b) => {
                let c = match (b.frame, b.caplen) {
                    (Some(f), Some(_)) => vec![format!("tcpdx: frame {}", f.0)],
                    _ => Vec::new(),
                };
                if b.kind() == BlockKind::Simple {
                    simple.extend(b.frame.map(|f| f.0));
                }
                w.copy_block(&b, &c).unwrap();
            }
        }
    }
    (w.into_inner(), simple)
}

#[test]
fn rewritten_corpus_reads_back_the_same_frames() {
    let dir = corpus_dir();
    let Ok(text) = std::fs::read_to_string(dir.join("MANIFEST.tsv")) else {
        eprintln!(
            "rewrite corpus test skipped: no corpus at {}",
            dir.display()
        );
        return;
    };
    let keep = std::env::var_os("TCPDX_REWRITE_KEEP").map(PathBuf::from);
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split('\t').collect();
    let col = |n: &str| header.iter().position(|h| *h == n).unwrap();
    let (c_id, c_path) = (col("id"), col("local_path"));
    let (mut files, mut rows, mut failures) = (0, 0, String::new());
    for line in lines {
        let cols: Vec<&str> = line.split('\t').collect();
        let path = dir.join(cols[c_path]);
        let Ok(reader) = CaptureReader::open(&path) else {
            continue;
        };
        let (want, bad) = frames(reader);
        if bad {
            continue; // a capture bad in the middle: annotate refuses it in its first pass
        }
        let (out, simple) = rewrite(&path);
        if let Some(k) = &keep {
            std::fs::write(k.join(format!("{}.pcapng", cols[c_id])), &out).unwrap();
        }
        let back = CaptureReader::from_reader("rewritten", Box::new(Cursor::new(out)));
        let (mut got, bad) = frames(back.unwrap());
        // SPBs become EPBs with a zero timestamp (Wireshark shows none for an SPB).
        let strip = |v: &mut Vec<Row>| {
            for r in v.iter_mut().filter(|r| simple.contains(&r.0)) {
                r.1 = None;
            }
        };
        let mut want = want;
        strip(&mut want);
        strip(&mut got);
        files += 1;
        rows += want.len();
        if bad || got != want {
            let first = want.iter().zip(&got).position(|(a, b)| a != b);
            let _ = writeln!(
                failures,
                "{} {}: {} frames, {} back (error: {bad}), first difference at {first:?}",
                cols[c_id],
                cols[c_path],
                want.len(),
                got.len()
            );
        }
    }
    eprintln!("rewrote {files} corpus files, {rows} frames");
    assert!(failures.is_empty(), "{failures}");
    assert!(files > 2000, "the corpus has more than 2000 readable files");
}
