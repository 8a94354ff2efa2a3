//! Sender window inference scored against the kernel's snd_cwnd (tcp_probe samples in the
//! lab's truth.json): for every sample, the round trip tcpdx inferred at that time from a
//! capture taken at the sender; its largest bytes in flight against `snd_cwnd * mss`.
//! Prints the median relative error overall and in congestion avoidance per scenario
//! (`cargo test -p tcpdx-cli --test cwnd_inference -- --nocapture`) and asserts the issue's
//! bound in congestion avoidance.
//!
//! Samples where the receiver's window (snd_wnd) was below the congestion window are left
//! out and counted: the sender was not window-limited by cwnd there, so cwnd is not what the
//! capture can show.

mod common;

use common::{arr, fixture_dirs, main_conn, median, ns, print_table, truth};

/// Median relative error allowed in congestion avoidance at the sender (issue 4).
const CA_MAX_ERROR: f64 = 0.25;
/// Samples needed in congestion avoidance for a scenario to be scored there.
const CA_MIN_SAMPLES: usize = 20;
/// ssthresh before the first loss.
const SSTHRESH_UNSET: i64 = 2_147_483_647;

struct Score {
    scenario: String,
    all: Vec<f64>,
    ca: Vec<f64>,
    rwnd_limited: usize,
    unmatched: usize,
}

fn score(dir: &std::path::Path) -> Option<Score> {
    let t = truth(dir)?;
    let c = main_conn(&t);
    let samples = arr(c, &["samples"]);
    if samples.is_empty() {
        return None;
    }
    // The capture on the sender's host.
    let sender_ip = c["sender"].as_str()?.rsplit_once(':')?.0.to_string();
    let point = if t["topology"]["client"].as_str() == Some(sender_ip.as_str()) {
        "client"
    } else {
        "server"
    };
    let file = arr(&t, &["files", "captures"])
        .iter()
        .find(|x| x["point"].as_str() == Some(point))?["file"]
        .as_str()?;
    let diag = common::feed(&dir.join(file));
    let tracker = diag
        .trackers()
        .max_by_key(|k| k.senders.iter().map(|s| s.data_bytes).max().unwrap_or(0))?;
    let dir_main = tracker.main_dir();
    let sender = &tracker.senders[dir_main.idx()];
    let mss = c["mss"].as_f64()?;
    let not_open: Vec<(i64, i64)> = arr(c, &["cong_states"])
        .iter()
        .filter(|s| s["state"].as_str() != Some("Open"))
        .map(|s| (ns(s, "start_ns"), ns(s, "end_ns")))
        .collect();
    let mut out = Score {
        scenario: t["scenario"].as_str().unwrap_or("?").to_string(),
        all: Vec::new(),
        ca: Vec::new(),
        rwnd_limited: 0,
        unmatched: 0,
    };
    for s in samples {
        let ts = ns(s, "t_ns");
        let cwnd = s["cwnd"].as_f64().unwrap_or(0.0) * mss;
        if cwnd <= 0.0 {
            continue;
        }
        if s["snd_wnd"].as_f64().unwrap_or(f64::MAX) < cwnd {
            out.rwnd_limited += 1;
            continue;
        }
        let Some(r) = sender.rounds.iter().find(|r| r.start <= ts && ts < r.end) else {
            out.unmatched += 1;
            continue;
        };
        let err = (r.max_in_flight as f64 - cwnd).abs() / cwnd;
        out.all.push(err);
        let ssthresh = ns(s, "ssthresh");
        let open = !not_open.iter().any(|&(a, b)| a <= ts && ts <= b);
        if open && ssthresh != SSTHRESH_UNSET && s["cwnd"].as_i64().unwrap_or(0) >= ssthresh {
            out.ca.push(err);
        }
    }
    Some(out)
}

/// The `q` quantile of `v` (None if empty).
fn quantile(v: &[f64], q: f64) -> Option<f64> {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    let i = ((v.len() as f64 - 1.0) * q).round() as usize;
    v.get(i).copied()
}

#[test]
fn sender_window_matches_the_kernels_cwnd_in_congestion_avoidance() {
    let mut rows = vec![vec![
        "scenario".to_string(),
        "samples".into(),
        "median err".into(),
        "CA samples".into(),
        "CA median err".into(),
        "CA p90 err".into(),
        "rwnd-limited".into(),
        "no round".into(),
    ]];
    let mut failures = Vec::new();
    let mut scored_ca = 0;
    let (mut pooled_all, mut pooled_ca): (Vec<f64>, Vec<f64>) = (Vec::new(), Vec::new());
    for dir in fixture_dirs("lab") {
        let Some(s) = score(&dir) else {
            continue;
        };
        pooled_all.extend(&s.all);
        pooled_ca.extend(&s.ca);
        let pct = |v: Option<f64>| v.map_or("-".into(), |x| format!("{:.1}%", x * 100.0));
        let ca_median = (s.ca.len() >= CA_MIN_SAMPLES)
            .then(|| median(s.ca.clone()))
            .flatten();
        rows.push(vec![
            s.scenario.clone(),
            s.all.len().to_string(),
            pct(median(s.all.clone())),
            s.ca.len().to_string(),
            pct(ca_median),
            pct(quantile(&s.ca, 0.9)),
            s.rwnd_limited.to_string(),
            s.unmatched.to_string(),
        ]);
        if let Some(m) = ca_median {
            scored_ca += 1;
            if m > CA_MAX_ERROR {
                failures.push(format!("{}: CA median error {:.1}%", s.scenario, m * 100.0));
            }
        }
    }
    let pct = |v: Option<f64>| v.map_or("-".into(), |x| format!("{:.1}%", x * 100.0));
    rows.push(vec![
        "all scenarios (pooled)".into(),
        pooled_all.len().to_string(),
        pct(median(pooled_all.clone())),
        pooled_ca.len().to_string(),
        pct(median(pooled_ca.clone())),
        pct(quantile(&pooled_ca, 0.9)),
    ]);
    print_table(&rows);
    assert!(
        scored_ca >= 2,
        "fewer than 2 scenarios with congestion avoidance"
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
