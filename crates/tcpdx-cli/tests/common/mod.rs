//! Shared by the fixture tests: run the TCP diagnoser alone over a capture (to read its
//! per-connection trackers; the whole diagnosis is `tcpdx::Capture::diagnose`), read
//! truth.json.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use serde_json::Value;
use tcpdx_capture::CaptureReader;
use tcpdx_core::{Analyzer, AnalyzerConfig};
use tcpdx_detect::Diagnoser;

/// `tests/data/<sub>` of the repository.
pub fn data_dir(sub: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/data")
        .join(sub)
}

/// Feeds a whole capture into a fresh diagnoser (not finished, so its trackers can be read).
pub fn feed(path: &Path) -> Diagnoser {
    let mut reader = CaptureReader::open(path).expect("open capture");
    let mut analyzer = Analyzer::new(AnalyzerConfig::default());
    let mut diag = Diagnoser::new();
    while let Some(frame) = reader.next_frame().expect("read frame") {
        analyzer.handle_frame(&frame, &mut diag);
    }
    analyzer.handle_end(&mut diag);
    diag
}

/// Parses `dir/truth.json`, if there is one.
pub fn truth(dir: &Path) -> Option<Value> {
    let text = std::fs::read_to_string(dir.join("truth.json")).ok()?;
    Some(serde_json::from_str(&text).expect("truth.json parses"))
}

/// The array at `path` (empty if absent).
pub fn arr<'a>(v: &'a Value, path: &[&str]) -> &'a [Value] {
    let mut x = v;
    for p in path {
        x = &x[*p];
    }
    x.as_array().map_or(&[], Vec::as_slice)
}

/// Integer field `k` (0 if absent).
pub fn ns(v: &Value, k: &str) -> i64 {
    v[k].as_i64().unwrap_or(0)
}

/// The main data connection of the truth (most bytes sent).
pub fn main_conn(t: &Value) -> &Value {
    arr(t, &["connections"])
        .iter()
        .max_by_key(|c| c["bytes_sent"].as_u64().unwrap_or(0))
        .expect("a connection")
}

/// The primary capture's file name.
pub fn primary_capture(t: &Value) -> Option<&str> {
    arr(t, &["files", "captures"])
        .iter()
        .find(|c| c["primary"].as_bool() == Some(true))
        .and_then(|c| c["file"].as_str())
}

/// Fixture directories under `tests/data/<sub>`, sorted.
pub fn fixture_dirs(sub: &str) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(data_dir(sub)) else {
        return Vec::new();
    };
    let mut v: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
    v.sort();
    v
}

/// Median of `v` (None if empty).
pub fn median(mut v: Vec<f64>) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    Some(v[v.len() / 2])
}

/// Prints rows as an aligned table.
pub fn print_table(rows: &[Vec<String>]) {
    let n = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..n)
        .map(|i| {
            rows.iter()
                .filter_map(|r| r.get(i))
                .map(String::len)
                .max()
                .unwrap_or(0)
        })
        .collect();
    for r in rows {
        let line: Vec<String> = r
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        println!("{}", line.join("  ").trim_end());
    }
}

/// Every capture file (pcap, pcapng, optionally compressed) under `dir`, recursively.
pub fn captures_under(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read dir").flatten() {
        let p = entry.path();
        if p.is_dir() {
            captures_under(&p, out);
        } else if let Some(name) = p.file_name().and_then(|n| n.to_str())
            && [".pcap", ".pcapng", ".pcap.gz", ".pcapng.gz", ".pcap.zst"]
                .iter()
                .any(|ext| name.ends_with(ext))
        {
            out.push(p);
        }
    }
}

/// Writes a generated bulk capture `cfg` to a temp file named after `name` (and this
/// process), for the caller to remove.
pub fn bulk_capture(name: &str, cfg: tcpdx_testkit::bulk::BulkConfig) -> PathBuf {
    let path = std::env::temp_dir().join(format!("tcpdx-{name}-{}.pcap", std::process::id()));
    let f = std::fs::File::create(&path).expect("create capture");
    tcpdx_testkit::bulk::write_bulk(std::io::BufWriter::new(f), cfg).expect("write capture");
    path
}
