//! Differential test of storage service response times against tshark.
//!
//! For every NFS, SMB2 and iSCSI capture of ../shared/corpus (the MANIFEST rows with RPC,
//! SMB2 or iSCSI replies) and every storage fixture of the lab (client and server side),
//! tcpdx's call/reply counts and min/max/mean/sum per procedure must equal tshark's
//! `-z rpc,srt,100003,3` / `-z rpc,srt,100003,4` / `-z smb2,srt` / `-z scsi,srt,0`
//! (restricted to TCP) as tshark prints them (microseconds), apart from the documented
//! deliberate differences (docs/wireshark-differences.md, "Storage response times"):
//!
//! - transactions whose request or reply spans several frames and has a capture gap
//!   inside (bytes never captured), and NFS calls or replies whose record was completed out of order (a retransmission
//!   filled a hole): Wireshark 4.0 does not dissect them, tcpdx does (they are left out
//!   of the comparison and counted);
//! - SCSI commands completed with CHECK CONDITION: Wireshark dissects their sense data
//!   instead of a SCSI response and leaves them out of scsi,srt; tcpdx counts them;
//! - NFS over UDP, which tcpdx does not analyse (the tshark tables are restricted to TCP).
//!
//! A second test deletes frames from each of these captures with `editcap` (every 23rd
//! frame: capture drops; the first third: a capture that starts mid-stream) and compares
//! the copies the same way, row by row: at least 98% of the rows must be equal, rows that
//! only tcpdx has counting against it. Wireshark looks for a lost message start only at
//! the start of a segment; tcpdx anywhere, so it finds messages that start inside a
//! segment after a gap that tshark misses (and none where tshark took data for an NBSS
//! header and lost the rest of the direction).
//!
//! tshark runs on the fly; the tests fail (skip nothing) when tshark, editcap or the corpus
//! is missing. The comparison tables are printed (`--nocapture`) and written to
//! `target/storage-srt-agreement.md` and `target/storage-srt-gappy.md`.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::Command;

use tcpdx_capture::CaptureReader;
use tcpdx_core::{Analyzer, AnalyzerConfig};
use tcpdx_storage::srt::{wireshark_mean, wireshark_sum, wireshark_time};
use tcpdx_storage::{Collect, Proto, StorageConfig, Tracker, Transaction};

fn corpus_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus")
}

fn lab_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/lab")
}

/// The lab scenarios with storage traffic.
const LAB_STORAGE: &[&str] = &[
    "nfs3_read_clean",
    "nfs3_write_loss1pct",
    "nfs4_read_clean",
    "smb3_read_clean",
    "smb3_write_loss1pct",
    "iscsi_read_clean",
    "iscsi_read_slow_server",
    "iscsi_read_qd1",
    "case003_nfs_write_stall",
];

/// SCSI status CHECK CONDITION (SAM-5).
const CHECK_CONDITION: u32 = 0x02;

/// One table row as tshark prints it: name, calls, min, max, avg, sum.
type Row = (String, u64, String, String, String, String);
/// Tables by name (`nfs3`, `nfs4`, `smb2`, `iscsi`), rows by index.
type Tables = BTreeMap<&'static str, BTreeMap<u16, Row>>;

fn tshark_tables(path: &Path) -> Tables {
    let out = Command::new("tshark")
        .args(["-n", "--disable-protocol", "ncp", "-q", "-r"])
        .arg(path)
        .args([
            "-z",
            "rpc,srt,100003,3,tcp",
            "-z",
            "rpc,srt,100003,4,tcp",
            "-z",
            "smb2,srt,tcp",
            "-z",
            "scsi,srt,0,tcp",
        ])
        .output()
        .expect("tshark must be installed for this test");
    let text = String::from_utf8_lossy(&out.stdout);
    let mut tables = Tables::new();
    let mut cur = None;
    for line in text.lines() {
        if let Some(f) = line.strip_prefix("Filter: ") {
            cur = match f.split(' ').next().unwrap_or("") {
                "nfs.procedure_v3" => Some("nfs3"),
                "nfs.procedure_v4" => Some("nfs4"),
                "smb2.cmd" => Some("smb2"),
                "scsi_sbc.opcode" => Some("iscsi"),
                _ => None,
            };
            continue;
        }
        let (Some(t), Some(row)) = (cur, parse_row(line)) else {
            continue;
        };
        tables.entry(t).or_default().insert(row.0, row.1);
    }
    tables
}

/// `  index  name (may have spaces)  calls min max avg sum`.
fn parse_row(line: &str) -> Option<(u16, Row)> {
    let f: Vec<&str> = line.split_whitespace().collect();
    if f.len() < 7 || !line.starts_with(' ') {
        return None;
    }
    let idx = f[0].parse().ok()?;
    let n = f.len();
    let calls = f[n - 5].parse().ok()?;
    let name = f[1..n - 5].join(" ");
    Some((
        idx,
        (
            name,
            calls,
            f[n - 4].into(),
            f[n - 3].into(),
            f[n - 2].into(),
            f[n - 1].into(),
        ),
    ))
}

/// Why a transaction is left out of the comparison (the documented differences).
fn excluded(t: &Transaction) -> Option<&'static str> {
    let reply = t.reply?;
    // A gap inside a message spanning several frames defeats Wireshark's reassembly; a
    // single frame cut by the snaplen is still dissected (its header is there).
    let gap = |s: &tcpdx_storage::Span| s.damaged && s.first.frame != s.last.frame;
    if gap(&t.request) || gap(&reply) {
        return Some("capture gap inside");
    }
    // Wireshark's RPC-over-TCP record reassembly loses a record completed by a
    // retransmission that filled a hole (or by out-of-order segments); its SMB2 and iSCSI
    // reassembly (tcp_dissect_pdus) does not.
    if t.proto == Proto::Nfs && (t.request.repaired || reply.repaired) {
        return Some("RPC record out of order");
    }
    if t.proto == Proto::Iscsi && t.status == Some(CHECK_CONDITION) {
        return Some("check condition");
    }
    None
}

/// Name, count, min, max, total (ns) of one procedure.
type Acc = (&'static str, u64, i64, i64, i128);

#[derive(Default)]
struct Ours {
    tables: Tables,
    excluded: BTreeMap<&'static str, u64>,
    transactions: u64,
    /// Protocol, operation and id of the answered transactions with no gap inside.
    found: BTreeSet<(String, &'static str, u64)>,
}

fn tcpdx_tables(path: &Path) -> Ours {
    let mut reader = CaptureReader::open(path).expect("open capture");
    let mut analyzer = Analyzer::new(AnalyzerConfig::default());
    let mut tracker = Tracker::new(StorageConfig::default(), Collect::default());
    // Damaged corpus files end early for tshark too: keep what was read.
    while let Ok(Some(frame)) = reader.next_frame() {
        analyzer.handle_frame(&frame, &mut tracker);
    }
    analyzer.handle_end(&mut tracker);
    tracker.finish();
    let collected = tracker.into_sink();
    let mut acc: BTreeMap<(&'static str, u16), Acc> = BTreeMap::new();
    let mut ours = Ours::default();
    for t in &collected.transactions {
        let Some(srt) = t.srt_ns() else { continue };
        ours.transactions += 1;
        if !t.request.damaged && t.reply.is_some_and(|r| !r.damaged) {
            ours.found.insert((format!("{:?}", t.proto), t.op, t.id));
        }
        if let Some(why) = excluded(t) {
            *ours.excluded.entry(why).or_default() += 1;
            continue;
        }
        let table = match (t.proto, t.version) {
            (Proto::Nfs, Some(3)) => "nfs3",
            (Proto::Nfs, Some(4)) => "nfs4",
            (Proto::Nfs, _) => continue, // NFSv2: not compared (no TCP v2 in the corpus)
            (Proto::Smb2, _) => "smb2",
            (Proto::Iscsi, _) => "iscsi",
        };
        let e = acc
            .entry((table, t.op_code))
            .or_insert((t.op, 0, i64::MAX, i64::MIN, 0));
        e.1 += 1;
        e.2 = e.2.min(srt);
        e.3 = e.3.max(srt);
        e.4 += i128::from(srt);
    }
    for ((table, code), (name, n, min, max, total)) in acc {
        ours.tables.entry(table).or_default().insert(
            code,
            (
                name.to_string(),
                n,
                wireshark_time(min),
                wireshark_time(max),
                wireshark_mean(total, n),
                wireshark_sum(total),
            ),
        );
    }
    ours
}

/// Captures to compare: (label, path).
fn captures() -> Vec<(String, PathBuf)> {
    let corpus = corpus_dir();
    assert!(
        corpus.join("MANIFEST.tsv").is_file(),
        "the capture corpus is missing at {} (this test skips nothing)",
        corpus.display()
    );
    let mut out = Vec::new();
    let manifest = BufReader::new(File::open(corpus.join("MANIFEST.tsv")).unwrap());
    let mut cols: Vec<String> = Vec::new();
    for (i, line) in manifest.lines().enumerate() {
        let line = line.unwrap();
        let f: Vec<&str> = line.split('\t').collect();
        if i == 0 {
            cols = f.iter().map(|s| s.to_string()).collect();
            continue;
        }
        let get = |name: &str| {
            let idx = cols.iter().position(|c| c == name).unwrap();
            f.get(idx).copied().unwrap_or("")
        };
        let replies = ["rpc_replies", "smb2_replies", "iscsi_replies"]
            .iter()
            .any(|c| get(c).parse::<u64>().unwrap_or(0) > 0);
        if replies {
            out.push((get("id").to_string(), corpus.join(get("local_path"))));
        }
    }
    for s in LAB_STORAGE {
        for side in ["client", "server"] {
            out.push((
                format!("lab:{s}/{side}"),
                lab_dir().join(s).join(format!("{side}.pcap.gz")),
            ));
        }
    }
    out
}

/// Copies of `path` with capture gaps, made with `editcap` in `dir`: `drop` lacks every
/// 23rd frame from the 11th (data, ACKs and handshakes alike: capture drops), `mid` lacks
/// the first third of the frames (a capture that starts mid-stream).
fn gappy_copies(label: &str, path: &Path, dir: &Path) -> Vec<(String, PathBuf)> {
    let mut reader = CaptureReader::open(path).expect("open capture");
    let mut frames = 0u64;
    while let Ok(Some(_)) = reader.next_frame() {
        frames += 1;
    }
    let name = label.replace([':', '/'], "_");
    let drop: Vec<String> = (11..=frames).step_by(23).map(|n| n.to_string()).collect();
    let mut out = Vec::new();
    for (kind, del) in [("drop", drop), ("mid", vec![format!("1-{}", frames / 3)])] {
        if frames < 3 || del.is_empty() {
            continue;
        }
        let copy = dir.join(format!("{name}-{kind}.pcap"));
        let ok = Command::new("editcap")
            .arg(path)
            .arg(&copy)
            .args(&del)
            .output()
            .expect("editcap (installed with tshark) must be installed for this test")
            .status
            .success();
        assert!(ok, "editcap failed on {}", path.display());
        out.push((format!("{label} ({kind})"), copy));
    }
    out
}

/// Rows of one capture: (tshark rows, rows equal in tcpdx's tables, rows only tcpdx has).
fn row_agreement(ws: &Tables, ours: &Tables) -> (usize, usize, usize) {
    let empty = BTreeMap::new();
    let (mut rows, mut equal, mut extra) = (0, 0, 0);
    for (t, w) in ws {
        let o = ours.get(t).unwrap_or(&empty);
        rows += w.len();
        equal += w.iter().filter(|(k, r)| o.get(k) == Some(r)).count();
    }
    for (t, o) in ours {
        let w = ws.get(t).unwrap_or(&empty);
        extra += o.keys().filter(|k| !w.contains_key(k)).count();
    }
    (rows, equal, extra)
}

/// Capture gaps: every storage capture above with frames deleted (see [`gappy_copies`]).
/// tcpdx must find the framing again after each gap as Wireshark does: at least 98% of
/// tshark's rows equal (the documented differences left out as above), and tcpdx rows that
/// tshark does not have (transactions made up by a false resynchronisation) count
/// against it too.
#[test]
fn storage_srt_agrees_with_tshark_on_gappy_captures() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("storage-srt-gappy");
    std::fs::create_dir_all(&dir).expect("create the directory of gappy copies");
    let mut report = String::from(
        "| capture | tshark rows | equal | tcpdx-only rows | calls (tshark) | calls (tcpdx) | made up | left out (documented) |\n|---|---|---|---|---|---|---|---|\n",
    );
    let (mut rows, mut equal, mut extra, mut copies) = (0, 0, 0, 0);
    let mut made_up = Vec::new();
    let mut differ = Vec::new();
    for (label, path) in captures() {
        // A transaction of a copy that tcpdx does not find in the whole capture was made up
        // by a false resynchronisation.
        let whole = tcpdx_tables(&path).found;
        for (label, copy) in gappy_copies(&label, &path, &dir) {
            copies += 1;
            let ws = tshark_tables(&copy);
            let ours = tcpdx_tables(&copy);
            let fake: Vec<_> = ours.found.difference(&whole).collect();
            if !fake.is_empty() {
                made_up.push(format!("{label}: {fake:?}"));
            }
            let (r, e, x) = row_agreement(&ws, &ours.tables);
            let calls = |t: &Tables| {
                t.values()
                    .flat_map(|m| m.values())
                    .map(|r| r.1)
                    .sum::<u64>()
            };
            let left_out: Vec<String> = ours
                .excluded
                .iter()
                .map(|(k, v)| format!("{v} {k}"))
                .collect();
            report.push_str(&format!(
                "| {label} | {r} | {e} | {x} | {} | {} | {} | {} |\n",
                calls(&ws),
                calls(&ours.tables),
                fake.len(),
                left_out.join(", ")
            ));
            (rows, equal, extra) = (rows + r, equal + e, extra + x);
            for (t, w) in &ws {
                for (k, row) in w {
                    let o = ours.tables.get(t).and_then(|m| m.get(k));
                    if o != Some(row) {
                        differ.push(format!("{label} {t} #{k}: tshark {row:?} tcpdx {o:?}"));
                    }
                }
            }
            for (t, o) in &ours.tables {
                for (k, row) in o {
                    if ws.get(t).is_none_or(|w| !w.contains_key(k)) {
                        differ.push(format!("{label} {t} #{k}: tshark None tcpdx {row:?}"));
                    }
                }
            }
        }
    }
    report.push_str(&format!(
        "| all ({copies} copies) | {rows} | {equal} | {extra} | | | {} | |\n",
        made_up.len()
    ));
    println!("{report}");
    println!("rows that differ:\n{}", differ.join("\n"));
    let target = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target");
    if std::fs::create_dir_all(&target).is_ok()
        && let Ok(mut f) = File::create(target.join("storage-srt-gappy.md"))
    {
        let _ = f.write_all(report.as_bytes());
    }
    assert!(copies >= 100, "too few gappy copies: {copies}");
    assert!(
        made_up.is_empty(),
        "transactions not in the whole capture:\n{}",
        made_up.join("\n")
    );
    assert!(rows >= 300, "too few tshark rows on gappy copies: {rows}");
    // Agreement over the rows either tool has.
    let agreement = equal as f64 / (rows + extra) as f64;
    assert!(
        agreement >= 0.98,
        "{equal} of {rows} tshark rows equal, {extra} rows only tcpdx has: {:.1}% < 98%\n{}",
        agreement * 100.0,
        differ.join("\n")
    );
}

#[test]
fn storage_srt_equals_tshark() {
    let caps = captures();
    assert!(
        caps.len() >= 60,
        "expected the corpus and lab storage captures, got {}",
        caps.len()
    );
    let mut report = String::from(
        "| capture | table | procedures | calls (tshark) | calls (tcpdx) | counts equal | times equal | left out (documented) |\n|---|---|---|---|---|---|---|---|\n",
    );
    let mut failures = Vec::new();
    let mut compared_tables = 0;
    for (label, path) in &caps {
        let ws = tshark_tables(path);
        let ours = tcpdx_tables(path);
        let left_out: Vec<String> = ours
            .excluded
            .iter()
            .map(|(k, v)| format!("{v} {k}"))
            .collect();
        let names: Vec<&&str> = ws.keys().chain(ours.tables.keys()).collect();
        let mut names: Vec<&str> = names.into_iter().copied().collect();
        names.sort_unstable();
        names.dedup();
        if names.is_empty() {
            report.push_str(&format!(
                "| {label} | (none over TCP) | 0 | 0 | 0 | yes | yes | {} |\n",
                left_out.join(", ")
            ));
        }
        for t in names {
            compared_tables += 1;
            let empty = BTreeMap::new();
            let w = ws.get(t).unwrap_or(&empty);
            let o = ours.tables.get(t).unwrap_or(&empty);
            let calls = |m: &BTreeMap<u16, Row>| m.values().map(|r| r.1).sum::<u64>();
            let counts_equal = w.len() == o.len()
                && w.iter()
                    .all(|(k, r)| o.get(k).is_some_and(|x| x.0 == r.0 && x.1 == r.1));
            let times_equal = counts_equal && w == o;
            report.push_str(&format!(
                "| {label} | {t} | {} | {} | {} | {} | {} | {} |\n",
                w.len().max(o.len()),
                calls(w),
                calls(o),
                if counts_equal { "yes" } else { "NO" },
                if times_equal { "yes" } else { "NO" },
                left_out.join(", ")
            ));
            if !times_equal {
                for k in w.keys().chain(o.keys()) {
                    if w.get(k) != o.get(k) {
                        failures.push(format!(
                            "{label} {t} #{k}: tshark {:?} tcpdx {:?}",
                            w.get(k),
                            o.get(k)
                        ));
                    }
                }
            }
        }
    }
    println!("{report}");
    let target = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target");
    if std::fs::create_dir_all(&target).is_ok()
        && let Ok(mut f) = File::create(target.join("storage-srt-agreement.md"))
    {
        let _ = f.write_all(report.as_bytes());
    }
    assert!(
        compared_tables >= 40,
        "too few tables compared: {compared_tables}"
    );
    failures.dedup();
    assert!(
        failures.is_empty(),
        "differences from tshark:\n{}",
        failures.join("\n")
    );
}
