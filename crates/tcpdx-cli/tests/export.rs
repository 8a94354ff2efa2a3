//! `tcpdx export`: the Parquet tables as DuckDB (the Python package) reads them hold the
//! same rows as `tcpdx events`, `flows --json`, `srt --transactions` and `diagnose --json`.
//!
//! Needs `python3` with `duckdb` (.ci/run installs it); without them the test fails.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

fn data(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/data")
        .join(rel)
}

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("tcpdx-export-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn tcpdx(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tcpdx"))
        .args(args)
        .output()
        .unwrap()
}

#[track_caller]
fn stdout(args: &[&str]) -> String {
    let out = tcpdx(args);
    assert!(
        out.status.success(),
        "tcpdx {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Reads every table with DuckDB and prints what the test compares, as one JSON document.
const DUCKDB_SCRIPT: &str = r#"
import json, sys
import duckdb
d = sys.argv[1]
con = duckdb.connect()
q = lambda sql: con.execute(sql.replace("T(", "read_parquet('" + d + "/").replace(".pq)", ".parquet')")).fetchall()
out = {"counts": {}}
for t in ["segments", "flows", "transactions", "findings", "evidence", "episodes", "time_budget"]:
    out["counts"][t] = q("select count(*) from T(" + t + ".pq)")[0][0]
out["segments"] = q("""select frame, stream, time_ns, src, sport, dst, dport, seq, ack, len, flags,
    dup_ack_num, bytes_in_flight, ack_rtt from T(segments.pq) order by frame""")
out["len_by_stream"] = q("select stream, sum(len)::bigint from T(segments.pq) group by 1 order by 1")
out["flows"] = q("select stream, dir, packets, bytes, rtt_samples from T(flows.pq) order by stream, dir")
out["transactions"] = q("select stream, op, request_frame, reply_frame from T(transactions.pq)")
out["findings"] = q("""select f.kind, f.stream, len(f.recommendations),
    (select count(*) from T(evidence.pq) e where e.finding_id = f.finding_id),
    (select count(*) from T(episodes.pq) e where e.finding_id = f.finding_id)
    from T(findings.pq) f order by f.finding_id""")
out["budget"] = q("select state, sum(seconds) from T(time_budget.pq) group by 1 order by 1")
out["ts_type"] = q("select typeof(ts) from T(segments.pq) limit 1")
print(json.dumps(out))
"#;

fn duckdb(dir: &Path) -> Value {
    let out = Command::new("python3")
        .arg("-c")
        .arg(DUCKDB_SCRIPT)
        .arg(dir)
        .output()
        .unwrap_or_else(|e| {
            panic!("python3 is needed to check the export with DuckDB (.ci/run installs it): {e}")
        });
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !err.contains("No module named 'duckdb'"),
        "the duckdb Python package is needed: python3 -m pip install duckdb"
    );
    assert!(
        out.status.success(),
        "DuckDB could not read the tables: {err}"
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn int(v: &Value) -> i64 {
    v.as_i64().unwrap_or_else(|| panic!("not an integer: {v}"))
}

/// `12.000000001` as nanoseconds.
fn csv_ns(s: &str) -> i64 {
    let (a, b) = s.split_once('.').unwrap();
    let neg = a.starts_with('-');
    let ns = a.trim_start_matches('-').parse::<i64>().unwrap() * 1_000_000_000
        + b.parse::<i64>().unwrap();
    if neg { -ns } else { ns }
}

/// Compares one DuckDB segment row with one events CSV line, field by field.
#[track_caller]
fn same_segment(db: &Value, csv: &str) {
    let f: Vec<&str> = csv.split(',').collect();
    let r = db.as_array().unwrap();
    assert_eq!(f.len(), 14, "{csv}");
    let num = |i: usize| -> Option<i64> { (!r[i].is_null()).then(|| int(&r[i])) };
    let csv_num = |s: &str| -> Option<i64> { (!s.is_empty()).then(|| s.parse().unwrap()) };
    assert_eq!(num(0), csv_num(f[0]), "frame: {csv} / {db}");
    assert_eq!(num(1), csv_num(f[1]), "stream: {csv} / {db}");
    assert_eq!(num(2), Some(csv_ns(f[2])), "time: {csv} / {db}");
    assert_eq!(r[3].as_str(), Some(f[3]), "src: {csv} / {db}");
    assert_eq!(num(4), csv_num(f[4]), "sport: {csv} / {db}");
    assert_eq!(r[5].as_str(), Some(f[5]), "dst: {csv} / {db}");
    for (i, name) in [(6, "dport"), (7, "seq"), (8, "ack"), (9, "len")] {
        assert_eq!(num(i), csv_num(f[i]), "{name}: {csv} / {db}");
    }
    assert_eq!(r[10].as_str(), Some(f[10]), "flags: {csv} / {db}");
    assert_eq!(num(11), csv_num(f[11]), "dup_ack_num: {csv} / {db}");
    assert_eq!(num(12), csv_num(f[12]), "bytes_in_flight: {csv} / {db}");
    let rtt = r[13].as_f64().map(|s| (s * 1e9).round() as i64);
    assert_eq!(
        rtt,
        (!f[13].is_empty()).then(|| csv_ns(f[13])),
        "ack_rtt: {csv} / {db}"
    );
}

/// Exports `capture` and checks every table against the other commands' output.
fn check(capture: &str) {
    check_with(capture, &[]);
}

/// [`check`] with options (filters) given to every command.
fn check_with(capture: &str, opts: &[&str]) {
    let path = data(capture);
    let file = path.to_str().unwrap();
    let dir = scratch(&format!("{}{}", capture.replace('/', "_"), opts.join("_")));
    let with = |args: &[&'static str]| -> Vec<String> {
        args.iter()
            .map(|a| a.to_string())
            .chain(opts.iter().map(|o| o.to_string()))
            .chain([file.to_string()])
            .collect()
    };
    let stdout = |args: &[&'static str]| -> String {
        let v = with(args);
        let v: Vec<&str> = v.iter().map(String::as_str).collect();
        stdout(&v)
    };
    let mut export = with(&["export", "-o"]);
    export.insert(2, dir.to_str().unwrap().to_string());
    let export: Vec<&str> = export.iter().map(String::as_str).collect();
    let out = tcpdx(&export);
    assert!(
        out.status.success(),
        "{capture}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let db = duckdb(&dir);
    let counts = |t: &str| int(&db["counts"][t]);

    // segments == `tcpdx events --format csv`, row for row.
    let events = stdout(&["events", "--format", "csv"]);
    let rows: Vec<&str> = events.lines().skip(1).collect();
    assert!(!rows.is_empty(), "{capture}: no segments");
    assert_eq!(counts("segments"), rows.len() as i64, "{capture}: segments");
    let seg = db["segments"].as_array().unwrap();
    for (d, c) in seg.iter().zip(&rows) {
        same_segment(d, c);
    }
    let mut len_by_stream: BTreeMap<i64, i64> = BTreeMap::new();
    for r in &rows {
        let f: Vec<&str> = r.split(',').collect();
        *len_by_stream.entry(f[1].parse().unwrap()).or_default() += f[9].parse::<i64>().unwrap();
    }
    let db_len: BTreeMap<i64, i64> = db["len_by_stream"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (int(&r[0]), int(&r[1])))
        .collect();
    assert_eq!(db_len, len_by_stream, "{capture}: sum(len) per stream");
    let ts = db["ts_type"][0][0].as_str().unwrap_or_default();
    assert!(ts.contains("TIMESTAMP"), "{capture}: ts is {ts}");

    // flows == `tcpdx flows --json`, one row per direction.
    let flows: Value = serde_json::from_str(&stdout(&["flows", "--json"])).unwrap();
    let mut want = Vec::new();
    for f in flows["flows"].as_array().unwrap() {
        for d in f["directions"].as_array().unwrap() {
            want.push((
                int(&f["stream"]),
                d["dir"].as_str().unwrap().to_string(),
                int(&d["packets"]),
                int(&d["bytes"]),
                int(&d["rtt_samples"]),
            ));
        }
    }
    want.sort();
    assert_eq!(counts("flows"), want.len() as i64, "{capture}: flows");
    let got: Vec<_> = db["flows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                int(&r[0]),
                r[1].as_str().unwrap().to_string(),
                int(&r[2]),
                int(&r[3]),
                int(&r[4]),
            )
        })
        .collect();
    assert_eq!(
        got, want,
        "{capture}: flows (stream, dir, packets, bytes, rtt samples)"
    );

    // transactions == `tcpdx srt --transactions`, in the same order.
    let srt = stdout(&["srt", "--transactions"]);
    let want: Vec<(i64, String, i64, Option<i64>)> = srt
        .lines()
        .skip(1)
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            (
                f[0].parse().unwrap(),
                f[3].to_string(),
                f[6].parse().unwrap(),
                (!f[8].is_empty()).then(|| f[8].parse().unwrap()),
            )
        })
        .collect();
    assert_eq!(
        counts("transactions"),
        want.len() as i64,
        "{capture}: transactions"
    );
    let got: Vec<_> = db["transactions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                int(&r[0]),
                r[1].as_str().unwrap().to_string(),
                int(&r[2]),
                r[3].as_i64(),
            )
        })
        .collect();
    assert_eq!(got, want, "{capture}: transactions");

    // findings, evidence, episodes, time budget == `tcpdx diagnose --json`.
    let diag: Value = serde_json::from_str(&stdout(&["diagnose", "--json"])).unwrap();
    let findings = diag["findings"].as_array().unwrap();
    assert_eq!(
        counts("findings"),
        findings.len() as i64,
        "{capture}: findings"
    );
    let want: Vec<_> = findings
        .iter()
        .map(|f| {
            (
                f["kind"].as_str().unwrap().to_string(),
                f["stream"].as_i64(),
                f["recommendations"].as_array().unwrap().len() as i64,
                f["evidence"].as_array().unwrap().len() as i64,
                f["episode_list"].as_array().unwrap().len() as i64,
            )
        })
        .collect();
    let got: Vec<_> = db["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r[0].as_str().unwrap().to_string(),
                r[1].as_i64(),
                int(&r[2]),
                int(&r[3]),
                int(&r[4]),
            )
        })
        .collect();
    assert_eq!(
        got, want,
        "{capture}: findings (kind, stream, recommendations, evidence, episodes)"
    );
    let evidence: i64 = want.iter().map(|w| w.3).sum();
    let episodes: i64 = want.iter().map(|w| w.4).sum();
    assert_eq!(counts("evidence"), evidence, "{capture}: evidence");
    assert_eq!(counts("episodes"), episodes, "{capture}: episodes");
    let budget = &diag["time_budget"];
    let conns = budget["connections"].as_array().unwrap().len() as i64;
    assert_eq!(counts("time_budget"), 8 * conns, "{capture}: time_budget");
    for r in db["budget"].as_array().unwrap() {
        let state = r[0].as_str().unwrap();
        let want = budget["states"][state]["seconds"].as_f64().unwrap();
        let got = r[1].as_f64().unwrap();
        assert!(
            (got - want).abs() < 1e-6,
            "{capture}: time budget {state}: {got} vs {want}"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn fast_retransmission_fixture() {
    check("fast-retransmission.pcapng");
}

#[test]
fn zero_window_fixture() {
    check("zero-window.pcapng");
}

#[test]
fn lab_rto_delack() {
    check("lab/case000_rto_delack/client.pcap.gz");
}

#[test]
fn lab_nfs_write_stall() {
    check("lab/case003_nfs_write_stall/client.pcap.gz");
}

#[test]
fn lab_nfs_write_stall_one_stream() {
    check_with(
        "lab/case003_nfs_write_stall/client.pcap.gz",
        &["--stream", "3"],
    );
}

#[test]
fn lab_smb3_write_loss() {
    check("lab/smb3_write_loss1pct/client.pcap.gz");
}

#[test]
fn lab_iscsi_slow_server() {
    check("lab/iscsi_read_slow_server/client.pcap.gz");
}

#[test]
fn output_that_is_a_file_is_a_usage_error() {
    let dir = scratch("is-a-file");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("out");
    std::fs::write(&file, b"x").unwrap();
    let out = tcpdx(&[
        "export",
        data("zero-window.pcapng").to_str().unwrap(),
        "-o",
        file.to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("not a directory"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bad_input_leaves_no_table() {
    let dir = scratch("bad-input");
    let bad = data("malformed/pcapng-interface-7-of-1.pcapng");
    let out = tcpdx(&["export", bad.to_str().unwrap(), "-o", dir.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("pcapng-interface-7-of-1.pcapng") && err.contains("byte 136"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
    let left: Vec<_> = std::fs::read_dir(&dir)
        .map(|d| d.map(|e| e.unwrap().file_name()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "files left behind: {left:?}");
    let _ = std::fs::remove_dir_all(&dir);
}
