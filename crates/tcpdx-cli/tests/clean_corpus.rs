//! Clean connections of the public corpus get no finding above "info" (issue 4): the
//! detectors must not invent trouble on connections where Wireshark sees none.
//!
//! A connection is clean when tshark's reference (`../shared/corpus/reference/ID.tcp.csv.gz`)
//! flags none of its packets with any `tcp.analysis.*` flag, it starts with its SYN, it has
//! at least 4 packets and no silence of 200 ms or more, and the file is not a fuzz case or
//! malformed (MANIFEST.tsv notes).
//!
//! Asserted for every kind whose signature tshark's analysis would show (loss, timeouts,
//! spurious retransmissions, reordering, window collapse, window limits, receiver drops,
//! delayed-ACK stalls after recovery, setup). Timing-only kinds (equal stalls from a timer,
//! Nagle's interaction with delayed ACKs, idle time) and the one-direction capture check
//! see what tshark does not analyse: they are counted and printed, and a sample was checked
//! by hand (e.g. ZEEK-0790: a 41 ms Nagle/delayed-ACK turn on loopback).

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

use flate2::read::GzDecoder;
use tcpdx_detect::{FindingKind as K, Severity};

/// Kinds whose evidence tshark does not analyse (timers, idle time, a missing direction):
/// reported, not asserted.
const TIMING_ONLY: &[K] = &[
    K::FixedDurationStall,
    K::NagleDelackStall,
    K::ApplicationLimited,
    K::CaptureQuality,
];

/// Longest silence in a clean connection (a longer one is a stall to explain, not clean).
const MAX_GAP_S: f64 = 0.2;

fn corpus_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus")
}

/// Per stream: (packets, any flag, starts with a SYN, largest gap).
#[derive(Default)]
struct Stream {
    packets: u32,
    flagged: bool,
    syn_first: bool,
    last_t: Option<f64>,
    max_gap: f64,
}

/// The clean streams of a file, from tshark's reference.
fn clean_streams(reference: &Path) -> BTreeSet<u32> {
    let mut streams: BTreeMap<u32, Stream> = BTreeMap::new();
    let r = BufReader::new(GzDecoder::new(std::fs::File::open(reference).unwrap()));
    for line in r.lines().skip(1) {
        let line = line.unwrap();
        // frame,stream,time,seq,ack,len,win,flags,dup_ack_num,bytes_in_flight,ack_rtt;
        // rows with two TCP layers (more commas) are not a plain connection.
        let f: Vec<&str> = line.split(',').collect();
        if f.len() != 11 {
            continue;
        }
        let Ok(stream) = f[1].parse::<u32>() else {
            continue;
        };
        let s = streams.entry(stream).or_default();
        let t: f64 = f[2].parse().unwrap_or(0.0);
        if s.packets == 0 {
            s.syn_first = f[3] == "0" && f[4] == "0";
        }
        if let Some(last) = s.last_t {
            s.max_gap = s.max_gap.max(t - last);
        }
        s.last_t = Some(t);
        s.packets += 1;
        s.flagged |= !f[7].is_empty();
    }
    streams
        .into_iter()
        .filter(|(_, s)| !s.flagged && s.syn_first && s.packets >= 4 && s.max_gap < MAX_GAP_S)
        .map(|(id, _)| id)
        .collect()
}

#[test]
fn clean_corpus_connections_get_nothing_above_info() {
    let dir = corpus_dir();
    let manifest = dir.join("MANIFEST.tsv");
    assert!(
        manifest.exists(),
        "the public corpus is missing at {} (see the README)",
        dir.display()
    );
    let text = std::fs::read_to_string(&manifest).unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split('\t').collect();
    let col = |n: &str| header.iter().position(|h| *h == n).unwrap();
    let (c_id, c_path, c_notes) = (col("id"), col("local_path"), col("notes"));
    let (mut files, mut clean) = (0, 0);
    let mut wrong = Vec::new();
    let mut timing: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for line in lines {
        let f: Vec<&str> = line.split('\t').collect();
        let notes = f[c_notes].to_ascii_lowercase();
        if ["fuzz", "malformed", "truncat", "corrupt", "crash"]
            .iter()
            .any(|n| notes.contains(n))
        {
            continue;
        }
        let reference = dir
            .join("reference")
            .join(format!("{}.tcp.csv.gz", f[c_id]));
        if !reference.exists() {
            continue;
        }
        let streams = clean_streams(&reference);
        if streams.is_empty() {
            continue;
        }
        files += 1;
        clean += streams.len();
        let d = common::feed(&dir.join(f[c_path])).finish();
        for x in &d.findings {
            let Some(s) = x.stream.filter(|s| streams.contains(s)) else {
                continue;
            };
            if x.severity <= Severity::Info {
                continue;
            }
            let what = format!("{} stream {s} ({:?})", f[c_id], x.severity);
            if TIMING_ONLY.contains(&x.kind) {
                timing.entry(x.kind.as_str()).or_default().push(what);
            } else {
                wrong.push(format!("{} on {what}: {}", x.kind.as_str(), x.explanation));
            }
        }
    }
    println!("{clean} clean connections in {files} files of the corpus");
    for (k, v) in &timing {
        println!(
            "  {k} (not in tshark's analysis) above info on {} of them, e.g. {}",
            v.len(),
            v.iter().take(3).cloned().collect::<Vec<_>>().join(", ")
        );
    }
    assert!(clean >= 1000, "only {clean} clean connections found");
    assert!(
        wrong.is_empty(),
        "{} finding(s) above info on clean connections:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}
