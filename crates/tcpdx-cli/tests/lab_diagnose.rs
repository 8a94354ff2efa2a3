//! End-to-end diagnosis of the lab fixtures (tests/data/lab/<scenario>/): the kernel's own
//! view (truth.json, see lab/README.md) against tcpdx's findings on the scenario's primary
//! capture. Prints a table scenario / expected / found / episodes truth/found / stall
//! truth/found (`cargo test -p tcpdx-cli --test lab_diagnose -- --nocapture`).
//!
//! Checked per scenario: the top finding's kind; no finding above info on clean runs;
//! episode counts within 10% and stall time within 15% of the truth where the truth has them.
//! `TCPDX_LAB_DEBUG=<scenario>` also prints the main sender's round trips and episodes.

use std::path::{Path, PathBuf};

use serde_json::Value;
use tcpdx_capture::CaptureReader;
use tcpdx_core::{Analyzer, AnalyzerConfig};
use tcpdx_detect::{Diagnoser, Diagnosis, Finding, FindingKind as K, Severity};

/// Episode counts must be within this share of the truth (the acceptance rule).
const EPISODE_TOLERANCE: f64 = 0.10;
/// Stall times must be within this share of the truth (the acceptance rule).
const STALL_TOLERANCE: f64 = 0.15;
/// Deviations understood but not fixed yet: reported in the table as "known gap", not
/// failed. Keep this list short and explained.
/// - case001_reorder_time: 2 of the 17 spurious retransmissions get no D-SACK (the client
///   counted 15, `TcpExtTCPDSACKRecv`) and their ACKs are not early enough to prove them.
/// - case001_reorder_behind: behind the reordering element some late originals carry
///   Wireshark's spurious flag with a different segmentation than the retransmission, so
///   they are counted twice (19 for 17).
const KNOWN_GAPS: &[(&str, &str)] = &[
    ("case001_reorder_time", "episodes"),
    ("case001_reorder_behind", "episodes"),
];

fn lab_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/lab")
}

fn diagnose(path: &Path, debug: bool) -> Diagnosis {
    let mut reader = CaptureReader::open(path).expect("open capture");
    let mut analyzer = Analyzer::new(AnalyzerConfig::default());
    let mut diag = Diagnoser::new();
    while let Some(frame) = reader.next_frame().expect("read frame") {
        analyzer.handle_frame(&frame, &mut diag);
    }
    analyzer.handle_end(&mut diag);
    if debug {
        for c in diag.trackers() {
            let s = &c.senders[c.main_dir().idx()];
            eprintln!(
                "stream {} rtt {} ns down_min {:?} rounds {} episodes {} rtos {} delack {} zw {}",
                c.stream,
                c.path_rtt(),
                s.downstream_rtt_min,
                s.rounds.len(),
                s.episodes.len(),
                s.rtos.len(),
                s.delack.len(),
                s.zero_windows.len()
            );
            for r in &s.rounds {
                eprintln!(
                    "  round {:.4} +{:.1}ms pkts {} acked {} rwnd {} rec {} win {} rate {:.1} Mb/s",
                    c.rel_s(r.start),
                    r.duration() as f64 / 1e6,
                    r.pkts,
                    r.acked,
                    r.rwnd_limited,
                    r.in_recovery,
                    r.rcv_window,
                    r.delivery_bps() / 1e6
                );
            }
            for e in &s.episodes {
                eprintln!("  episode {:.4} {:?}", c.rel_s(e.start), e);
            }
            for z in &s.zero_windows {
                eprintln!("  zero window {:.4} {:?}", c.rel_s(z.start), z);
            }
        }
    }
    diag.finish()
}

/// What a scenario's truth says and which finding it is compared with.
struct Expect {
    /// Acceptable kinds of the top finding (empty: nothing above info).
    top: &'static [K],
    /// Finding compared with the truth's episodes and stall time.
    kind: Option<K>,
    /// Episodes in the truth.
    episodes: Option<u64>,
    /// Stall seconds in the truth.
    stall_s: Option<f64>,
    /// Kinds that must not be reported above info.
    absent: &'static [K],
}

fn arr<'a>(v: &'a Value, path: &[&str]) -> &'a [Value] {
    let mut x = v;
    for p in path {
        x = &x[*p];
    }
    x.as_array().map_or(&[], Vec::as_slice)
}

fn ns(v: &Value, k: &str) -> i64 {
    v[k].as_i64().unwrap_or(0)
}

/// The main data connection of the truth (most bytes sent).
fn main_conn(t: &Value) -> &Value {
    arr(t, &["connections"])
        .iter()
        .max_by_key(|c| c["bytes_sent"].as_u64().unwrap_or(0))
        .expect("a connection")
}

fn expect(scenario: &str, t: &Value) -> Expect {
    let c = main_conn(t);
    let ep = |k: &str| arr(c, &["episodes", k]);
    let none = Expect {
        top: &[],
        kind: None,
        episodes: None,
        stall_s: None,
        absent: &[],
    };
    match scenario {
        "case000_rto_delack" => Expect {
            top: &[K::RtoStall, K::DelackSlowstartStall],
            kind: Some(K::DelackSlowstartStall),
            episodes: Some(ep("delack_pauses").len() as u64),
            stall_s: Some(
                ep("delack_pauses")
                    .iter()
                    .map(|p| ns(p, "length_ns"))
                    .sum::<i64>() as f64
                    / 1e9,
            ),
            absent: &[],
        },
        "case000_rto_quickack" => {
            // The stall of a timeout: from the sender's last ACK (tcp_probe sample) to the
            // timeout (entry into Loss).
            let samples = arr(c, &["samples"]);
            let stall: i64 = ep("rtos")
                .iter()
                .map(|r| {
                    let start = ns(r, "start_ns");
                    let last = samples
                        .iter()
                        .map(|s| ns(s, "t_ns"))
                        .filter(|&t| t < start)
                        .max()
                        .unwrap_or(start);
                    start - last
                })
                .sum();
            Expect {
                top: &[K::RtoStall],
                kind: Some(K::RtoStall),
                episodes: Some(ep("rtos").len() as u64),
                stall_s: Some(stall as f64 / 1e9),
                absent: &[K::DelackSlowstartStall],
            }
        }
        "case001_reorder_time" | "case001_reorder_behind" => Expect {
            top: &[K::SpuriousRetransmission],
            kind: Some(K::SpuriousRetransmission),
            episodes: Some(
                arr(c, &["retransmissions"])
                    .iter()
                    .filter(|r| r["reordered_original"].as_bool() == Some(true))
                    .count() as u64,
            ),
            stall_s: None,
            absent: &[],
        },
        "case002_rx_host_drops" => Expect {
            top: &[K::ReceiverHostDrops, K::ReceiverWindowLimited],
            kind: Some(K::ReceiverHostDrops),
            episodes: c["retransmitted_segments"].as_u64(),
            stall_s: None,
            absent: &[],
        },
        "case002_slow_reader" => {
            // tcp_probe records the state *before* each ACK, so a zero window shows from the
            // ACK after the one that closed it to the ACK after the one that reopened it:
            // shift both edges back one sample to get the ACKs the capture shows.
            let samples: Vec<i64> = arr(c, &["samples"]).iter().map(|s| ns(s, "t_ns")).collect();
            let before = |t: i64| {
                samples
                    .iter()
                    .copied()
                    .filter(|&x| x < t)
                    .max()
                    .unwrap_or(t)
            };
            let stall: i64 = ep("zero_windows")
                .iter()
                .map(|z| before(ns(z, "end_ns")) - before(ns(z, "start_ns")))
                .sum();
            Expect {
                top: &[K::ReceiverWindowLimited, K::ReceiverHostDrops],
                kind: Some(K::ReceiverWindowLimited),
                episodes: Some(ep("zero_windows").len() as u64),
                stall_s: Some(stall as f64 / 1e9),
                absent: &[],
            }
        }
        "case003_nfs_write_stall" => Expect {
            top: &[
                K::FixedDurationStall,
                K::ApplicationLimited,
                K::ReceiverWindowLimited,
            ],
            kind: Some(K::FixedDurationStall),
            episodes: Some(ep("stalls").len() as u64),
            stall_s: Some(
                ep("stalls")
                    .iter()
                    .map(|z| ns(z, "end_ns") - ns(z, "start_ns"))
                    .sum::<i64>() as f64
                    / 1e9,
            ),
            absent: &[],
        },
        "case004_tbf_burst" => Expect {
            top: &[K::CwndCollapse, K::NetworkLoss],
            kind: Some(K::CwndCollapse),
            episodes: Some(ep("burst_losses").len() as u64),
            stall_s: Some(
                ep("burst_losses")
                    .iter()
                    .map(|z| ns(z, "end_ns") - ns(z, "start_ns"))
                    .sum::<i64>() as f64
                    / 1e9,
            ),
            absent: &[],
        },
        s if s.contains("loss1pct") => Expect {
            top: &[K::NetworkLoss, K::CwndCollapse],
            ..none
        },
        _ => none,
    }
}

fn fmt_opt(v: Option<f64>, digits: usize) -> String {
    v.map_or("-".into(), |x| format!("{x:.digits$}"))
}

fn kinds(k: &[K]) -> String {
    if k.is_empty() {
        "nothing above info".into()
    } else {
        k.iter().map(|k| k.as_str()).collect::<Vec<_>>().join("|")
    }
}

#[test]
fn lab_fixtures_are_diagnosed_as_their_truth_says() {
    let dir = lab_dir();
    let Ok(entries) = std::fs::read_dir(&dir) else {
        eprintln!("no lab fixtures in {}", dir.display());
        return;
    };
    let mut scenarios: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
    scenarios.sort();
    let debug = std::env::var("TCPDX_LAB_DEBUG").unwrap_or_default();
    let mut rows = vec![[
        "scenario".to_string(),
        "expected".into(),
        "found".into(),
        "episodes truth/found".into(),
        "stall s truth/found".into(),
        "ok".into(),
    ]];
    let mut failures = Vec::new();
    for sdir in scenarios {
        let Ok(text) = std::fs::read_to_string(sdir.join("truth.json")) else {
            continue;
        };
        let t: Value = serde_json::from_str(&text).expect("truth.json parses");
        let scenario = t["scenario"].as_str().unwrap_or("?").to_string();
        let Some(primary) = arr(&t, &["files", "captures"])
            .iter()
            .find(|c| c["primary"].as_bool() == Some(true))
            .and_then(|c| c["file"].as_str())
        else {
            continue;
        };
        let path = sdir.join(primary);
        if !path.exists() {
            continue;
        }
        let d = diagnose(&path, debug == scenario);
        let e = expect(&scenario, &t);
        let top = d.findings.iter().find(|f| f.severity > Severity::Info);
        let mut problems = Vec::new();
        match (e.top.is_empty(), top) {
            (true, Some(f)) => {
                problems.push(format!("unexpected {} ({:?})", f.kind.as_str(), f.severity))
            }
            (false, None) => problems.push("no finding above info".to_string()),
            (false, Some(f)) if !e.top.contains(&f.kind) => {
                problems.push(format!("top finding is {}", f.kind.as_str()));
            }
            _ => {}
        }
        // Informational findings may still name the expected kind (e.g. a small cost).
        let top_kind = top
            .or_else(|| d.findings.first())
            .map_or("-".to_string(), |f| f.kind.as_str().to_string());
        for k in e.absent {
            if d.findings
                .iter()
                .any(|f| f.kind == *k && f.severity > Severity::Info)
            {
                problems.push(format!("{} reported", k.as_str()));
            }
        }
        let matched: Option<&Finding> = e.kind.and_then(|k| {
            d.findings
                .iter()
                .filter(|f| f.kind == k)
                .max_by(|a, b| a.cost.seconds.total_cmp(&b.cost.seconds))
        });
        let found_eps = matched.map(|f| u64::from(f.episodes));
        let found_stall = matched.map(Finding::episode_seconds);
        let mut known = Vec::new();
        if let Some(te) = e.episodes {
            let fe = found_eps.unwrap_or(0);
            if (fe as f64 - te as f64).abs() > te as f64 * EPISODE_TOLERANCE {
                let msg = format!("episodes {fe} vs {te}");
                if KNOWN_GAPS.contains(&(scenario.as_str(), "episodes")) {
                    known.push(format!("known gap: {msg}"));
                } else {
                    problems.push(msg);
                }
            }
        }
        if let Some(ts) = e.stall_s {
            let fs = found_stall.unwrap_or(0.0);
            if (fs - ts).abs() > ts * STALL_TOLERANCE {
                problems.push(format!("stall {fs:.3} vs {ts:.3}"));
            }
        }
        rows.push([
            scenario.clone(),
            kinds(e.top),
            top_kind,
            format!(
                "{}/{}",
                e.episodes.map_or("-".into(), |x| x.to_string()),
                found_eps.map_or("-".into(), |x| x.to_string())
            ),
            format!("{}/{}", fmt_opt(e.stall_s, 3), fmt_opt(found_stall, 3)),
            if problems.is_empty() && known.is_empty() {
                "ok".into()
            } else {
                problems
                    .iter()
                    .chain(&known)
                    .cloned()
                    .collect::<Vec<_>>()
                    .join("; ")
            },
        ]);
        if !problems.is_empty() {
            failures.push(format!("{scenario}: {}", problems.join("; ")));
        }
    }
    let widths: Vec<usize> = (0..6)
        .map(|i| rows.iter().map(|r| r[i].len()).max().unwrap_or(0))
        .collect();
    for r in &rows {
        let line: Vec<String> = r
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        println!("{}", line.join("  ").trim_end());
    }
    assert!(
        failures.is_empty(),
        "lab diagnosis mismatches:\n{}",
        failures.join("\n")
    );
}
