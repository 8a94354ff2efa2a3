//! `rounds-score`: tcpdx's rounds (`tcpdx::Capture::rounds`, in process) against the
//! kernel's state in truth.json, per round (not per ACK: a burst of ACKs after a timeout
//! does not outweigh the rounds around it).
//!
//! Each round of the main sender is given the label the kernel's state implies at its end:
//! Loss `timeout`, Recovery `recovery`; else the peer's window (`snd_wnd`) below cwnd and a
//! sample of the round with [`CWND_FULL_SHARE`] of that window in flight
//! `receiver_window`; else `cwnd` when a sample of the round had as much in flight as
//! [`CWND_FULL_SHARE`] of cwnd; else `sender`. tcpdx's `pacing` counts as `sender` (both:
//! flight below the windows; the kernel's samples do not say whether the application or
//! the pacing rate held a BBR sender), and the confusion counts keep it apart. The cwnd estimate is scored against the kernel's snd_cwnd at
//! the round's end on rounds the kernel says cwnd limited. "Before" is today's report series:
//! the round's largest flight in segments taken as the window on those rounds.

use crate::truth::{Connection, Truth};
use anyhow::{Context, Result};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::Path;
use tcpdx::{Capture, Limit, Options, RoundRow};

/// In flight at least this share of cwnd: cwnd is what limits (tcpdx choice: the kernel's
/// samples are taken before the ACK frees its share).
pub const CWND_FULL_SHARE: f64 = 0.9;

/// Rounds and errors of one group (a congestion control at a capture point).
#[derive(Debug, Clone, Default, Serialize)]
pub struct Group {
    /// Rounds with a kernel sample.
    pub rounds: usize,
    /// Rounds whose label matches the kernel's.
    pub label_right: usize,
    /// Relative cwnd errors on rounds the kernel says cwnd limited (estimate given).
    pub err: Vec<f64>,
    /// The same rounds, today's series (largest flight).
    pub err_before: Vec<f64>,
    /// Signed relative errors (estimate above the kernel's cwnd: positive).
    pub bias: Vec<f64>,
    /// Kernel-cwnd-limited rounds without an estimate.
    pub no_estimate: usize,
    /// Confusion: `kernel->tcpdx` labels (tcpdx's as given: `pacing` apart) -> rounds.
    pub confusion: BTreeMap<String, usize>,
}

/// The `q` quantile of `v` (None if empty).
pub fn quantile(v: &[f64], q: f64) -> Option<f64> {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    let i = ((v.len() as f64 - 1.0) * q).round() as usize;
    v.get(i).copied()
}

/// The kernel's label of a round ending at `end` that started at `start`.
pub fn kernel_label(c: &Connection, start: i64, end: i64) -> Option<(&'static str, u32)> {
    let at_end = c.samples.iter().rev().find(|s| s.t_ns <= end)?;
    if at_end.t_ns < start {
        return None;
    }
    let state = c
        .cong_states
        .iter()
        .find(|s| s.start_ns <= end && end < s.end_ns)
        .map(|s| s.state.as_str());
    let mss = f64::from(c.mss.max(1));
    let cwnd = f64::from(at_end.cwnd);
    let in_round = || {
        c.samples
            .iter()
            .filter(move |s| s.t_ns >= start && s.t_ns <= end)
    };
    // A window limits only if the flight reached it: with the peer's window below cwnd but
    // the flight far below both, the application held the sender, not the receiver.
    let full = |s: &crate::truth::Sample, w: f64| f64::from(s.inflight) >= CWND_FULL_SHARE * w;
    let label = match state {
        Some("Loss") => "timeout",
        Some("Recovery") => "recovery",
        _ if f64::from(at_end.snd_wnd) < cwnd * mss
            && in_round().any(|s| full(s, f64::from(s.snd_wnd))) =>
        {
            "receiver_window"
        }
        _ if in_round().any(|s| full(s, f64::from(s.cwnd) * mss)) => "cwnd",
        _ => "sender",
    };
    Some((label, at_end.cwnd))
}

/// tcpdx's label as scored (`pacing` is `sender`).
pub fn scored_label(l: Limit) -> &'static str {
    match l {
        Limit::Pacing => "sender",
        other => other.as_str(),
    }
}

/// The data sender is the client.
fn sender_is_client(t: &Truth, c: &Connection) -> bool {
    c.sender.split(':').next() == Some(t.topology.client.as_str())
}

/// The sender's congestion control in the recipe (the workload's `cc`, or the one given
/// for either side).
fn cc_of(t: &Truth, c: &Connection) -> String {
    let w = &t.params["workload"];
    let side = if sender_is_client(t, c) {
        "client_cc"
    } else {
        "server_cc"
    };
    [side, "cc", "client_cc", "server_cc"]
        .iter()
        .find_map(|k| w[*k].as_str())
        .unwrap_or("?")
        .to_string()
}

/// The capture point relative to the data sender: `sender`, `receiver` or `middle`.
fn vantage_of(t: &Truth, c: &Connection, point: &str) -> &'static str {
    match (point, sender_is_client(t, c)) {
        ("client", true) | ("server", false) => "sender",
        ("client", false) | ("server", true) => "receiver",
        _ => "middle",
    }
}

/// Scores every capture of the case in `dir` into `groups` (key: cc, capture point).
pub fn score_case(dir: &Path, groups: &mut BTreeMap<(String, String), Group>) -> Result<()> {
    let text = std::fs::read_to_string(dir.join("truth.json"))
        .with_context(|| format!("reading {}", dir.join("truth.json").display()))?;
    let t: Truth = serde_json::from_str(&text).with_context(|| format!("{}", dir.display()))?;
    let Some(c) = t.connections.iter().max_by_key(|c| c.samples.len()) else {
        return Ok(());
    };
    let cc = cc_of(&t, c);
    for cap in &t.files.captures {
        let path = dir.join(&cap.file);
        let rows = Capture::open(&path)
            .rounds(&Options::default())
            .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        // The main sender: the stream and direction that delivered the most.
        let mut by: BTreeMap<(u32, u8), u64> = BTreeMap::new();
        for r in &rows {
            *by.entry((r.stream, r.direction as u8)).or_default() += r.delivered_bytes;
        }
        let Some((&key, _)) = by.iter().max_by_key(|(_, b)| **b) else {
            continue;
        };
        let main: Vec<&RoundRow> = rows
            .iter()
            .filter(|r| (r.stream, r.direction as u8) == key)
            .collect();
        let point = vantage_of(&t, c, &cap.point).to_string();
        let g = groups.entry((cc.clone(), point)).or_default();
        let mss = f64::from(c.mss.max(1));
        for r in main {
            let Some((want, cwnd)) = kernel_label(c, r.start_ns, r.end_ns) else {
                continue;
            };
            let got = scored_label(r.limit);
            g.rounds += 1;
            g.label_right += usize::from(want == got);
            *g.confusion
                .entry(format!("{want}->{}", r.limit.as_str()))
                .or_default() += 1;
            if want == "cwnd" && cwnd > 0 {
                let k = f64::from(cwnd);
                g.err_before
                    .push((r.flight_bytes as f64 / mss - k).abs() / k);
                match r.cwnd_est {
                    Some(e) => {
                        g.err.push((e - k).abs() / k);
                        g.bias.push((e - k) / k);
                    }
                    None => g.no_estimate += 1,
                }
            }
        }
    }
    Ok(())
}

/// The score of a run directory's cases.
#[derive(Debug, Clone, Default, Serialize)]
pub struct RoundsScore {
    /// Per (cc, capture point).
    pub groups: BTreeMap<String, Group>,
    /// Cases that could not be scored, with why.
    pub errors: Vec<String>,
}

/// Scores the cases `seeds` (all `seed*` directories if none) of `dir`.
pub fn score_run(dir: &Path, seeds: Option<&[u64]>) -> Result<RoundsScore> {
    let dirs: Vec<std::path::PathBuf> = match seeds {
        Some(s) => s
            .iter()
            .map(|&n| dir.join(super::case_dir_name(n)))
            .collect(),
        None => {
            let mut v: Vec<_> = std::fs::read_dir(dir)
                .with_context(|| format!("reading {}", dir.display()))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.join("truth.json").is_file())
                .collect();
            v.sort();
            v
        }
    };
    let mut groups = BTreeMap::new();
    let mut errors = Vec::new();
    for d in dirs {
        if let Err(e) = score_case(&d, &mut groups) {
            errors.push(format!("{}: {e:#}", d.display()));
        }
    }
    Ok(RoundsScore {
        groups: groups
            .into_iter()
            .map(|((cc, point), g)| (format!("{cc} @ {point}"), g))
            .collect(),
        errors,
    })
}

impl RoundsScore {
    /// Every group pooled, those at a capture point matching `point`.
    pub fn pooled(&self, point: impl Fn(&str) -> bool) -> Group {
        let mut all = Group::default();
        for (k, g) in &self.groups {
            if !point(k.rsplit(" @ ").next().unwrap_or("")) {
                continue;
            }
            all.rounds += g.rounds;
            all.label_right += g.label_right;
            all.err.extend(&g.err);
            all.err_before.extend(&g.err_before);
            all.bias.extend(&g.bias);
            all.no_estimate += g.no_estimate;
            for (c, n) in &g.confusion {
                *all.confusion.entry(c.clone()).or_default() += n;
            }
        }
        all
    }

    /// A table: group, rounds, label right, cwnd rounds, median/p90 error after and before.
    pub fn text(&self) -> String {
        let pct = |v: Option<f64>| v.map_or("-".to_string(), |x| format!("{:.0}%", x * 100.0));
        let line = |name: &str, g: &Group| {
            format!(
                "{name:<28} {:>6} {:>7} {:>6} {:>6} {:>6} {:>7} {:>7} {:>6} {:>6}\n",
                g.rounds,
                pct((g.rounds > 0).then(|| g.label_right as f64 / g.rounds as f64)),
                g.err.len(),
                pct(quantile(&g.err, 0.5)),
                pct(quantile(&g.err, 0.9)),
                pct(quantile(&g.err_before, 0.5)),
                pct(quantile(&g.err_before, 0.9)),
                g.no_estimate,
                pct(quantile(&g.bias, 0.5))
            )
        };
        let mut s = format!(
            "{:<28} {:>6} {:>7} {:>6} {:>6} {:>6} {:>7} {:>7} {:>6} {:>6}\n",
            "cc @ capture",
            "rounds",
            "label",
            "cwnd",
            "med",
            "p90",
            "med<-",
            "p90<-",
            "no-est",
            "bias"
        );
        for (k, g) in &self.groups {
            s += &line(k, g);
        }
        s += &line("all @ sender", &self.pooled(|p| p == "sender"));
        s += &line("all @ receiver, middle", &self.pooled(|p| p != "sender"));
        s += &line("all", &self.pooled(|_| true));
        s += "\nmistakes (kernel->tcpdx rounds, most first; pacing scored as sender):\n";
        let mut groups: Vec<(String, Group)> = self
            .groups
            .iter()
            .map(|(k, g)| (k.clone(), g.clone()))
            .collect();
        groups.push(("all @ sender".into(), self.pooled(|p| p == "sender")));
        groups.push((
            "all @ receiver, middle".into(),
            self.pooled(|p| p != "sender"),
        ));
        for (k, g) in &groups {
            s += &format!("{k:<28} {}\n", confusion_line(g));
        }
        s
    }
}

/// The wrong labels of `g`, most rounds first, and how many rounds tcpdx called `pacing`.
pub fn confusion_line(g: &Group) -> String {
    let mut wrong: Vec<(&String, &usize)> = g
        .confusion
        .iter()
        .filter(|(k, _)| {
            let (want, got) = k.split_once("->").unwrap_or(("", ""));
            want != got && !(want == "sender" && got == "pacing")
        })
        .collect();
    wrong.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    let pacing: usize = g
        .confusion
        .iter()
        .filter(|(k, _)| k.ends_with("->pacing"))
        .map(|(_, n)| n)
        .sum();
    let mut s: Vec<String> = wrong.iter().map(|(k, n)| format!("{k} {n}")).collect();
    s.truncate(6);
    format!("pacing {pacing}; {}", s.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::truth::{Sample, StateInterval};

    fn conn() -> Connection {
        let s = |t: i64, cwnd: u32, snd_wnd: u32, inflight: u32| Sample {
            t_ns: t,
            cwnd,
            ssthresh: 2_147_483_647,
            srtt_us: 10_000,
            snd_wnd,
            inflight,
        };
        Connection {
            mss: 1000,
            samples: vec![
                s(10, 10, 100_000, 9_000),
                s(20, 10, 100_000, 8_999),
                s(30, 20, 10_000, 10_000),
                s(40, 20, 100_000, 5_000),
            ],
            cong_states: vec![StateInterval {
                state: "Recovery".into(),
                start_ns: 50,
                end_ns: 60,
            }],
            ..Connection::default()
        }
    }

    #[test]
    fn the_kernel_label_follows_its_state_window_and_flight() {
        let c = conn();
        // In flight at 90% of cwnd: cwnd; just below: sender.
        assert_eq!(kernel_label(&c, 5, 15), Some(("cwnd", 10)));
        assert_eq!(kernel_label(&c, 15, 25), Some(("sender", 10)));
        // The peer's window below cwnd.
        assert_eq!(kernel_label(&c, 25, 35), Some(("receiver_window", 20)));
        // In Recovery at the end (the last sample before it is the window).
        assert_eq!(kernel_label(&c, 35, 55), Some(("recovery", 20)));
        // No sample in the round.
        assert_eq!(kernel_label(&c, 41, 45), None);
        assert_eq!(scored_label(Limit::Pacing), "sender");
    }

    #[test]
    fn the_peers_window_limits_only_when_the_flight_reaches_it() {
        // The peer's window (10 segments) below cwnd (20): 90% of it in flight is the
        // receiver's window; just below, the sender (neither window reached).
        for (inflight, want) in [(9_000, "receiver_window"), (8_999, "sender")] {
            let mut c = conn();
            c.samples = vec![Sample {
                t_ns: 10,
                cwnd: 20,
                ssthresh: 2_147_483_647,
                srtt_us: 10_000,
                snd_wnd: 10_000,
                inflight,
            }];
            assert_eq!(kernel_label(&c, 5, 15), Some((want, 20)), "{inflight}");
        }
    }

    #[test]
    fn the_mistakes_line_counts_pacing_apart_and_sorts_by_rounds() {
        let mut g = Group::default();
        for (k, n) in [
            ("cwnd->cwnd", 9),
            ("sender->pacing", 4),
            ("cwnd->pacing", 2),
            ("cwnd->recovery", 3),
            ("sender->cwnd", 1),
        ] {
            g.confusion.insert(k.to_string(), n);
        }
        assert_eq!(
            confusion_line(&g),
            "pacing 6; cwnd->recovery 3, cwnd->pacing 2, sender->cwnd 1"
        );
    }

    /// The lab fixtures with the kernel's truth (cases 001 and 004, the clean bulk runs):
    /// floors at the figures reached (sender side: label 98%, median 0%, p90 5%; receiver
    /// side and middle, the flight read from the echoed ACKs: label 93%, median 0%, p90
    /// 38%).
    #[test]
    fn lab_fixtures_rounds_against_the_kernel() {
        let lab = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/lab");
        let mut groups = BTreeMap::new();
        for name in [
            "case001_reorder_behind",
            "case001_reorder_count",
            "case001_reorder_time",
            "case004_tbf_burst",
            "clean_bulk_cubic",
            "clean_bulk_reno",
        ] {
            score_case(&lab.join(name), &mut groups).unwrap();
        }
        let s = RoundsScore {
            groups: groups
                .into_iter()
                .map(|((cc, p), g)| (format!("{cc} @ {p}"), g))
                .collect(),
            errors: Vec::new(),
        };
        eprintln!("{}", s.text());
        let at = s.pooled(|p| p == "sender");
        let label = |g: &Group| g.label_right as f64 / g.rounds.max(1) as f64;
        assert!(at.rounds >= 100 && at.err.len() >= 100, "{at:?}");
        assert!(label(&at) >= 0.96, "sender-side label {}", label(&at));
        assert!(quantile(&at.err, 0.5).unwrap() <= 0.02);
        assert!(quantile(&at.err, 0.9).unwrap() <= 0.10);
        let away = s.pooled(|p| p != "sender");
        assert!(label(&away) >= 0.92, "receiver-side label {}", label(&away));
        assert!(quantile(&away.err, 0.5).unwrap() <= 0.02);
        assert!(quantile(&away.err, 0.9).unwrap() <= 0.40);
    }
}
