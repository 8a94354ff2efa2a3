//! Differential test against tshark over the public corpus (../shared/corpus).
//!
//! For every capture with a tshark reference (`reference/<id>.tcp.csv.gz`, made by tshark
//! 4.0 with default preferences), tcpdx's per-segment analysis must agree: same frames,
//! same `tcp.stream`, and per `tcp.analysis.*` flag precision and recall >= 0.99 on every
//! file where tshark reports the flag at least 10 times; `bytes_in_flight` and
//! `dup_ack_num` equal on >= 99% of the packets where tshark gives them. The agreement
//! table is printed (run with `--nocapture`) and written to
//! `target/wireshark-agreement.md`. Deliberate differences are listed in
//! docs/wireshark-differences.md and in `DELIBERATE` below.

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

use flate2::read::GzDecoder;
use tcpdx_capture::CaptureReader;
use tcpdx_core::{AnalysisFlags, Analyzer, AnalyzerConfig, EventSink, SegmentAnalysis};
use tcpdx_testkit::encap::Fixture;
use tcpdx_testkit::tshark_fields_with;
use tcpdx_wire::{Layer, StopKind, decode};

/// Flags where tcpdx deliberately decides differently from Wireshark (none yet).
const DELIBERATE: &[&str] = &[];

/// Captures whose `tcp.stream` numbering Wireshark shifts through an application
/// dissector's side effect, not TCP (docs/wireshark-differences.md, "Stream indexes after
/// SOCKS and VNC"): those dissectors create conversations of their own, which consume a
/// stream index (SOCKS) or split a connection in two (VNC). tcpdx numbers TCP connections
/// only. Frame numbers, flags and everything else are still compared for these files.
const STREAM_SHIFTED_BY_DISSECTORS: &[(&str, &str)] = &[
    (
        "NDPI-0418",
        "SOCKS (port 1080) creates a conversation: stream 2 never appears",
    ),
    (
        "NDPI-0488",
        "SOCKS (port 1080) creates a conversation: stream 2 never appears",
    ),
    (
        "NDPI-0489",
        "SOCKS (port 1080) creates a conversation: stream 2 never appears",
    ),
    (
        "NDPI-0518",
        "VNC creates a conversation at frame 5: one connection becomes streams 0 and 1",
    ),
];

/// Single frames where Wireshark finds TCP somewhere tcpdx does not look.
const MISSING_DOCUMENTED: &[(&str, u64, &str)] = &[(
    "TCPD-0651",
    1,
    "a TCP header inside an sFlow flow sample (Wireshark dissects sampled headers)",
)];

fn corpus_dir() -> PathBuf {
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    manifest.join("../../../shared/corpus")
}

struct RefRow {
    stream: u32,
    seq: u64,
    ack: u64,
    len: u32,
    flags: u16,
    dup_ack_num: Option<u32>,
    bif: Option<u32>,
}

fn parse_opt<T: std::str::FromStr>(s: &str) -> Option<T> {
    if s.is_empty() { None } else { s.parse().ok() }
}

/// Reads tshark's reference; rows with two TCP layers (comma-separated values) are skipped.
fn read_reference(path: &Path) -> BTreeMap<u64, RefRow> {
    parse_reference(BufReader::new(GzDecoder::new(File::open(path).unwrap())))
}

/// [`read_reference`] of the CSV text in `r`.
fn parse_reference(r: impl BufRead) -> BTreeMap<u64, RefRow> {
    let mut rows = BTreeMap::new();
    for line in r.lines().skip(1) {
        let line = line.unwrap();
        // frame,stream,time,seq,ack,len,win,flags,dup_ack_num,bytes_in_flight,ack_rtt
        if line.matches(',').count() != 10 {
            continue;
        }
        let f: Vec<&str> = line.split(',').collect();
        // tshark sometimes dissects a TCP header without a stream (a header cut by the
        // snaplen inside a tunnel); there is nothing to compare.
        if f[1].is_empty() {
            continue;
        }
        let mut flags = 0u16;
        for name in f[7].split('|').filter(|s| !s.is_empty()) {
            flags |=
                AnalysisFlags::from_name(name).unwrap_or_else(|| panic!("unknown flag {name}"));
        }
        rows.insert(
            f[0].parse().unwrap(),
            RefRow {
                stream: f[1].parse().unwrap(),
                seq: f[3].parse().unwrap_or(0),
                ack: f[4].parse().unwrap_or(0),
                len: f[5].parse().unwrap_or(0),
                flags,
                dup_ack_num: parse_opt(f[8]),
                bif: parse_opt(f[9]),
            },
        );
    }
    rows
}

#[derive(Default)]
struct Rows(HashMap<u64, SegmentAnalysis>, HashMap<u64, Excuse>);

/// Why tcpdx has no row for a frame where tshark dissects TCP: the documented classes of
/// docs/wireshark-differences.md ("Frames tcpdx does not analyse").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Excuse {
    /// An IP fragment (Wireshark reassembles).
    Fragment,
    /// TCP quoted inside an ICMP error.
    IcmpQuoted,
    /// A TCP header that is cut by the snaplen or has an impossible data offset.
    BrokenTcpHeader,
}

fn excuse(frame: &tcpdx_capture::Frame<'_>) -> Option<Excuse> {
    let view = decode(frame.link, frame.data, frame.orig_len);
    if view.tcp.is_some() {
        return None;
    }
    let stop = view.stop?;
    match (stop.layer, stop.kind) {
        (_, StopKind::Fragment) => Some(Excuse::Fragment),
        (_, StopKind::NotTcp { proto: 1 | 58 }) => Some(Excuse::IcmpQuoted),
        (Layer::Tcp, _) => Some(Excuse::BrokenTcpHeader),
        _ => None,
    }
}

impl EventSink for Rows {
    fn segment(&mut self, a: &SegmentAnalysis) {
        self.0.insert(a.frame.0, *a);
    }
}

/// Analyses a capture; a read error mid-file keeps what was analysed before it (tshark
/// does the same for the files it calls damaged).
fn analyse(path: &Path) -> (Rows, Option<String>) {
    let mut rows = Rows::default();
    let mut reader = match CaptureReader::open(path) {
        Ok(r) => r,
        Err(e) => return (rows, Some(e.to_string())),
    };
    let mut analyzer = Analyzer::new(AnalyzerConfig::default());
    loop {
        match reader.next_frame() {
            Ok(Some(frame)) => {
                if let Some(e) = excuse(&frame) {
                    rows.1.insert(frame.no.0, e);
                }
                analyzer.handle_frame(&frame, &mut rows)
            }
            Ok(None) => return (rows, None),
            Err(e) => return (rows, Some(e.to_string())),
        }
    }
}

#[derive(Default, Clone, Copy)]
struct Counts {
    tp: u64,
    fp: u64,
    fn_: u64,
}

impl Counts {
    fn precision(&self) -> f64 {
        if self.tp + self.fp == 0 {
            1.0
        } else {
            self.tp as f64 / (self.tp + self.fp) as f64
        }
    }
    fn recall(&self) -> f64 {
        if self.tp + self.fn_ == 0 {
            1.0
        } else {
            self.tp as f64 / (self.tp + self.fn_) as f64
        }
    }
}

#[derive(Default)]
struct FileResult {
    ref_frames: u64,
    missing: u64,
    extra: u64,
    stream_mismatch: u64,
    stream_excused: u64,
    seq_mismatch: u64,
    len_mismatch: u64,
    flags: BTreeMap<&'static str, Counts>,
    bif_total: u64,
    bif_equal: u64,
    dup_total: u64,
    dup_equal: u64,
    examples: Vec<String>,
    excused: BTreeMap<String, u64>,
}

fn compare(id: &str, reference: &BTreeMap<u64, RefRow>, ours: &Rows) -> FileResult {
    let mut r = FileResult {
        ref_frames: reference.len() as u64,
        ..Default::default()
    };
    for (&frame, want) in reference {
        let Some(got) = ours.0.get(&frame) else {
            if MISSING_DOCUMENTED
                .iter()
                .any(|(i, f, _)| *i == id && *f == frame)
            {
                *r.excused.entry("Documented".into()).or_default() += 1;
                continue;
            }
            if let Some(e) = ours.1.get(&frame) {
                *r.excused.entry(format!("{e:?}")).or_default() += 1;
                continue;
            }
            r.missing += 1;
            if r.examples.len() < 5 {
                r.examples
                    .push(format!("frame {frame}: tshark has TCP, tcpdx has none"));
            }
            continue;
        };
        if got.stream.0 != want.stream {
            r.stream_mismatch += 1;
            if r.examples.len() < 5 {
                r.examples.push(format!(
                    "frame {frame}: stream {} vs tshark {}",
                    got.stream, want.stream
                ));
            }
        }
        if got.seq as u32 as u64 != want.seq || got.ack as u32 as u64 != want.ack {
            r.seq_mismatch += 1;
        }
        if got.len != want.len {
            r.len_mismatch += 1;
        }
        for &(bit, name) in AnalysisFlags::NAMES {
            let (w, g) = (want.flags & bit != 0, got.flags.0 & bit != 0);
            let c = r.flags.entry(name).or_default();
            match (w, g) {
                (true, true) => c.tp += 1,
                (false, true) => c.fp += 1,
                (true, false) => c.fn_ += 1,
                _ => {}
            }
            if w != g && r.examples.len() < 5 {
                r.examples
                    .push(format!("frame {frame}: {name} tshark={w} tcpdx={g}"));
            }
        }
        if let Some(b) = want.bif {
            r.bif_total += 1;
            r.bif_equal += u64::from(got.bytes_in_flight == Some(b));
        }
        if let Some(d) = want.dup_ack_num {
            r.dup_total += 1;
            r.dup_equal += u64::from(got.dup_ack_num == Some(d));
        }
    }
    r.extra = ours.0.keys().filter(|f| !reference.contains_key(f)).count() as u64;
    r
}

#[test]
fn agrees_with_tshark_on_public_corpus() {
    let dir = corpus_dir();
    let manifest = dir.join("MANIFEST.tsv");
    if !manifest.exists() {
        eprintln!("corpus not found at {}: skipping", dir.display());
        return;
    }
    let text = std::fs::read_to_string(&manifest).unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split('\t').collect();
    let col = |n: &str| header.iter().position(|h| *h == n).unwrap();
    let (c_id, c_path, c_format) = (col("id"), col("local_path"), col("format"));

    let mut total = FileResult::default();
    let mut per_file_fail = Vec::new();
    let mut files = 0;
    let mut read_errors = Vec::new();
    let mut damaged_agree = 0;
    for line in lines {
        let f: Vec<&str> = line.split('\t').collect();
        let reference = dir
            .join("reference")
            .join(format!("{}.tcp.csv.gz", f[c_id]));
        if !reference.exists() {
            continue;
        }
        files += 1;
        let want = read_reference(&reference);
        let (ours, err) = analyse(&dir.join(f[c_path]));
        if let Some(e) = err {
            // Files tshark itself calls damaged must fail for us too, after the same frames.
            if !f[c_format].contains("unreadable by wiretap") {
                read_errors.push(format!("{}: {e}", f[c_id]));
            } else {
                damaged_agree += 1;
            }
        }
        let r = compare(f[c_id], &want, &ours);
        for (name, c) in &r.flags {
            let n = c.tp + c.fn_;
            if n >= 10 && !DELIBERATE.contains(name) && (c.precision() < 0.99 || c.recall() < 0.99)
            {
                per_file_fail.push(format!(
                    "{} {name}: tshark {n}, precision {:.3} recall {:.3}; {}",
                    f[c_id],
                    c.precision(),
                    c.recall(),
                    r.examples.join("; ")
                ));
            }
        }
        let stream_excused = STREAM_SHIFTED_BY_DISSECTORS
            .iter()
            .any(|(id, _)| *id == f[c_id]);
        if r.missing > 0 || (r.stream_mismatch > 0 && !stream_excused) {
            per_file_fail.push(format!(
                "{}: {} frames missing, {} stream mismatches of {}; {}",
                f[c_id],
                r.missing,
                r.stream_mismatch,
                r.ref_frames,
                r.examples.join("; ")
            ));
        }
        for (k, v) in &r.excused {
            *total.excused.entry(k.clone()).or_default() += v;
        }
        total.ref_frames += r.ref_frames;
        total.missing += r.missing;
        total.extra += r.extra;
        if stream_excused {
            total.stream_excused += r.stream_mismatch;
        } else {
            total.stream_mismatch += r.stream_mismatch;
        }
        total.seq_mismatch += r.seq_mismatch;
        total.len_mismatch += r.len_mismatch;
        total.bif_total += r.bif_total;
        total.bif_equal += r.bif_equal;
        total.dup_total += r.dup_total;
        total.dup_equal += r.dup_equal;
        for (name, c) in r.flags {
            let t = total.flags.entry(name).or_default();
            t.tp += c.tp;
            t.fp += c.fp;
            t.fn_ += c.fn_;
        }
    }

    let mut report = String::new();
    report += &format!(
        "files {files}, tshark TCP frames {}, missing {}, extra {}, stream mismatches {} (+{} in files where a Wireshark dissector shifts tcp.stream), seq/ack mismatches {}, len mismatches {}, unreadable {} (plus {} damaged files that tshark also rejects)\n\n",
        total.ref_frames,
        total.missing,
        total.extra,
        total.stream_mismatch,
        total.stream_excused,
        total.seq_mismatch,
        total.len_mismatch,
        read_errors.len(),
        damaged_agree
    );
    report += &format!(
        "frames tshark dissects as TCP that tcpdx does not analyse (documented): {:?}\n\n",
        total.excused
    );
    report += "| flag | tshark | tcpdx | both | precision | recall |\n|---|---|---|---|---|---|\n";
    for (name, c) in &total.flags {
        report += &format!(
            "| {name} | {} | {} | {} | {:.4} | {:.4} |\n",
            c.tp + c.fn_,
            c.tp + c.fp,
            c.tp,
            c.precision(),
            c.recall()
        );
    }
    let bif = total.bif_equal as f64 / total.bif_total.max(1) as f64;
    let dup = total.dup_equal as f64 / total.dup_total.max(1) as f64;
    report += &format!(
        "\nbytes_in_flight equal on {}/{} ({:.4}); dup_ack_num equal on {}/{} ({:.4})\n",
        total.bif_equal, total.bif_total, bif, total.dup_equal, total.dup_total, dup
    );
    println!("{report}");
    let out = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/wireshark-agreement.md");
    if let Ok(mut f) = File::create(out) {
        let _ = f.write_all(report.as_bytes());
        for l in &per_file_fail {
            let _ = writeln!(f, "- {l}");
        }
    }
    for l in per_file_fail.iter().take(40) {
        println!("FAIL {l}");
    }
    assert!(
        read_errors.is_empty(),
        "unreadable captures: {read_errors:?}"
    );
    assert!(
        per_file_fail.is_empty(),
        "{} per-file failures (see above)",
        per_file_fail.len()
    );
    assert!(bif >= 0.99, "bytes_in_flight agreement {bif:.4} < 0.99");
    assert!(dup >= 0.99, "dup_ack_num agreement {dup:.4} < 0.99");
}

/// tshark's analysis of every TCP frame of `path`, in the corpus references' CSV format;
/// `None` when tshark is not installed.
fn tshark_reference(path: &Path) -> Option<String> {
    let mut fields = vec![
        "frame.number",
        "tcp.stream",
        "frame.time_relative",
        "tcp.seq",
        "tcp.ack",
        "tcp.len",
        "tcp.window_size",
        "tcp.analysis.duplicate_ack_num",
        "tcp.analysis.bytes_in_flight",
        "tcp.analysis.ack_rtt",
    ];
    let flag_fields: Vec<String> = AnalysisFlags::NAMES
        .iter()
        .map(|(_, n)| format!("tcp.analysis.{n}"))
        .collect();
    fields.extend(flag_fields.iter().map(String::as_str));
    let rows = tshark_fields_with(path, &fields, &["-Y", "tcp"])?;
    let mut out = String::from(
        "frame,stream,time,seq,ack,len,win,flags,dup_ack_num,bytes_in_flight,ack_rtt\n",
    );
    for r in rows {
        let flags: Vec<&str> = AnalysisFlags::NAMES
            .iter()
            .zip(&r[10..])
            .filter(|(_, v)| !v.is_empty())
            .map(|((_, n), _)| *n)
            .collect();
        out += &format!(
            "{},{},{},{},{},{},{},{},{},{},{}\n",
            r[0],
            r[1],
            r[2],
            r[3],
            r[4],
            r[5],
            r[6],
            flags.join("|"),
            r[7],
            r[8],
            r[9]
        );
    }
    Some(out)
}

/// The encapsulation fixtures (`tests/data/encap/`, written by tcpdx-testkit's `encap`
/// module: GRE with transparent Ethernet bridging, ERSPAN type I, IP over InfiniBand, 6in4)
/// against tshark's analysis of them, frame by frame: the same frames, streams, relative
/// seq/ack, lengths, every analysis flag, bytes in flight and duplicate-ACK numbers. The
/// committed reference (`<name>.tcp.csv`) is what tshark 4.0 printed; with tshark installed
/// it is checked against a fresh run. `TCPDX_WRITE_FIXTURES=1` rewrites both files.
#[test]
fn agrees_with_tshark_on_encapsulation_fixtures() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/encap");
    let write = std::env::var_os("TCPDX_WRITE_FIXTURES").is_some();
    let mut report = String::from(
        "| fixture | tshark TCP frames | compared | flags tshark | flags tcpdx | both |\n|---|---|---|---|---|---|\n",
    );
    for fx in Fixture::ALL {
        let pcap = dir.join(format!("{}.pcapng", fx.name()));
        let csv = dir.join(format!("{}.tcp.csv", fx.name()));
        let bytes = fx.pcapng();
        if write {
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(&pcap, &bytes).unwrap();
            let live = tshark_reference(&pcap).expect("writing fixtures needs tshark");
            std::fs::write(&csv, live).unwrap();
        }
        assert!(
            std::fs::read(&pcap).unwrap() == bytes,
            "{}: the committed fixture differs from what the kit builds; rewrite it with \
             TCPDX_WRITE_FIXTURES=1",
            pcap.display()
        );
        let committed = std::fs::read_to_string(&csv).unwrap();
        match tshark_reference(&pcap) {
            Some(live) => assert_eq!(live, committed, "{}: tshark now says otherwise", fx.name()),
            None => eprintln!(
                "tshark not installed: {} compared with its committed reference",
                fx.name()
            ),
        }
        let want = parse_reference(committed.as_bytes());
        let (ours, err) = analyse(&pcap);
        assert_eq!(err, None, "{}", fx.name());
        let r = compare(fx.name(), &want, &ours);
        let (mut tshark_flags, mut ours_flags, mut both) = (0, 0, 0);
        for c in r.flags.values() {
            tshark_flags += c.tp + c.fn_;
            ours_flags += c.tp + c.fp;
            both += c.tp;
        }
        report += &format!(
            "| {} | {} | {} | {tshark_flags} | {ours_flags} | {both} |\n",
            fx.name(),
            r.ref_frames,
            r.ref_frames - r.missing
        );
        // The story has every kind of flag, so agreement is not agreement on nothing.
        assert!(
            r.ref_frames >= 40 && tshark_flags >= 15,
            "{}: {report}",
            fx.name()
        );
        assert_eq!(
            (
                r.missing,
                r.extra,
                r.stream_mismatch,
                r.seq_mismatch,
                r.len_mismatch
            ),
            (0, 0, 0, 0, 0),
            "{}: missing, extra, stream, seq/ack, len; {:?}",
            fx.name(),
            r.examples
        );
        assert!(r.excused.is_empty(), "{}: {:?}", fx.name(), r.excused);
        assert_eq!(
            (tshark_flags, ours_flags),
            (both, both),
            "{}: flags differ; {:?}",
            fx.name(),
            r.examples
        );
        assert_eq!(
            (r.bif_equal, r.dup_equal),
            (r.bif_total, r.dup_total),
            "{}: bytes in flight / dup ACK numbers",
            fx.name()
        );
    }
    println!("{report}");
}
