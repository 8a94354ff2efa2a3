//! One account of each connection's time (issue 38): over every capture of the public
//! corpus (../shared/corpus) and of tests/data, `tcpdx diagnose --json` never counts a
//! second twice. On every connection the findings' costs add up to at most its life, and
//! no two findings with a cost list episodes that overlap.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

use serde_json::Value;

/// Rounding allowed: costs and episodes are f64 seconds derived from nanoseconds.
const EPS_S: f64 = 1e-6;

fn corpus_captures() -> Vec<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus");
    let manifest = dir.join("MANIFEST.tsv");
    assert!(
        manifest.exists(),
        "the public corpus is missing at {} (see the README)",
        dir.display()
    );
    let text = std::fs::read_to_string(&manifest).unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split('\t').collect();
    let c_path = header.iter().position(|h| *h == "local_path").unwrap();
    lines
        .filter_map(|l| l.split('\t').nth(c_path).map(|p| dir.join(p)))
        .collect()
}

/// Seconds two episode lists have in common.
fn overlap(a: &[Value], b: &[Value]) -> f64 {
    let span = |e: &Value| {
        let s = e["start_s"].as_f64().unwrap_or(0.0);
        (s, s + e["duration_s"].as_f64().unwrap_or(0.0))
    };
    let mut sum = 0.0;
    for x in a.iter().map(span) {
        for y in b.iter().map(span) {
            sum += (x.1.min(y.1) - x.0.max(y.0)).max(0.0);
        }
    }
    sum
}

/// The connections of `d` that break the account: (stream, why).
fn violations(d: &Value) -> Vec<(u64, String)> {
    let life: BTreeMap<u64, f64> = d["time_budget"]["connections"]
        .as_array()
        .map(|v| {
            v.iter()
                .filter_map(|c| Some((c["stream"].as_u64()?, c["seconds"].as_f64()?)))
                .collect()
        })
        .unwrap_or_default();
    let mut by: BTreeMap<u64, Vec<&Value>> = BTreeMap::new();
    for f in d["findings"].as_array().into_iter().flatten() {
        if let Some(s) = f["stream"].as_u64() {
            by.entry(s).or_default().push(f);
        }
    }
    let cost = |f: &Value| f["cost"]["seconds"].as_f64().unwrap_or(0.0);
    let mut out = Vec::new();
    for (s, fs) in by {
        let total: f64 = fs.iter().map(|f| cost(f)).sum();
        let kinds: Vec<String> = fs
            .iter()
            .map(|f| format!("{} {:.3} s", f["kind"].as_str().unwrap_or("?"), cost(f)))
            .collect();
        if let Some(&l) = life.get(&s)
            && total > l + EPS_S
        {
            out.push((s, format!("costs {total:.3} s > life {l:.3} s: {kinds:?}")));
        }
        let costly: Vec<&&Value> = fs.iter().filter(|f| cost(f) > EPS_S).collect();
        for (i, a) in costly.iter().enumerate() {
            for b in &costly[i + 1..] {
                let empty = Vec::new();
                let ov = overlap(
                    a["episode_list"].as_array().unwrap_or(&empty),
                    b["episode_list"].as_array().unwrap_or(&empty),
                );
                if ov > EPS_S {
                    out.push((
                        s,
                        format!(
                            "{} and {} share {ov:.3} s",
                            a["kind"].as_str().unwrap_or("?"),
                            b["kind"].as_str().unwrap_or("?")
                        ),
                    ));
                }
            }
        }
    }
    out
}

fn diagnose(path: &Path) -> Option<Value> {
    let out = Command::new(env!("CARGO_BIN_EXE_tcpdx"))
        .args(["diagnose", "--json", "--no-progress"])
        .arg(path)
        .output()
        .unwrap();
    // Bad input (exit 2: fuzz cases, malformed files) has nothing to account.
    serde_json::from_slice(&out.stdout).ok()
}

#[test]
fn no_second_is_counted_twice_on_the_corpus_and_the_fixtures() {
    let mut files = corpus_captures();
    common::captures_under(&common::data_dir(""), &mut files);
    let next = Mutex::new(files.iter());
    let found: Mutex<Vec<String>> = Mutex::new(Vec::new());
    let diagnosed = Mutex::new(0usize);
    std::thread::scope(|sc| {
        for _ in 0..2 {
            sc.spawn(|| {
                loop {
                    let Some(p) = next.lock().unwrap().next() else {
                        return;
                    };
                    let Some(d) = diagnose(p) else {
                        continue;
                    };
                    *diagnosed.lock().unwrap() += 1;
                    for (s, why) in violations(&d) {
                        found
                            .lock()
                            .unwrap()
                            .push(format!("{} stream {s}: {why}", p.display()));
                    }
                }
            });
        }
    });
    let (found, diagnosed) = (found.into_inner().unwrap(), diagnosed.into_inner().unwrap());
    println!(
        "{diagnosed} of {} captures diagnosed; {} connection(s) with time counted twice",
        files.len(),
        found.len()
    );
    assert!(diagnosed >= 1000, "only {diagnosed} captures diagnosed");
    assert!(
        found.is_empty(),
        "{} connection(s) count time twice:\n{}",
        found.len(),
        found.join("\n")
    );
}

#[test]
fn the_check_sees_double_counting() {
    let d: Value = serde_json::json!({
        "time_budget": {"connections": [{"stream": 0, "seconds": 1.0}]},
        "findings": [
            {"stream": 0, "kind": "rto-stall", "cost": {"seconds": 0.6},
             "episode_list": [{"start_s": 0.1, "duration_s": 0.6}]},
            {"stream": 0, "kind": "application-limited", "cost": {"seconds": 0.5},
             "episode_list": [{"start_s": 0.5, "duration_s": 0.5}]},
        ]
    });
    let v = violations(&d);
    assert_eq!(v.len(), 2, "{v:?}");
    assert!(v[0].1.contains("> life"));
    assert!(v[1].1.contains("share 0.200 s"));
}
