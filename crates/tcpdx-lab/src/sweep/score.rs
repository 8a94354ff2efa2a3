//! Scoring: runs `tcpdx diagnose --json` on each case's primary capture and counts, per
//! kind, findings at minor or above that meet a requirement (TP), that the labels do not
//! permit (FP), and requirements no finding met (FN, charged to the requirement's first kind).

use super::labels::{self, Labels};
use crate::scenario::Scenario;
use crate::truth::Truth;
use anyhow::{Context, Result, bail};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Kinds reported at minor or above in a `tcpdx diagnose --json` document, with the
/// highest severity of each.
pub fn found_kinds(diag: &serde_json::Value) -> BTreeMap<String, String> {
    const RANK: [&str; 4] = ["info", "minor", "major", "critical"];
    let rank = |s: &str| RANK.iter().position(|r| *r == s).unwrap_or(0);
    let mut out: BTreeMap<String, String> = BTreeMap::new();
    for f in diag["findings"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
    {
        let (Some(kind), Some(sev)) = (f["kind"].as_str(), f["severity"].as_str()) else {
            continue;
        };
        if rank(sev) == 0 {
            continue;
        }
        let e = out
            .entry(kind.to_string())
            .or_insert_with(|| sev.to_string());
        if rank(sev) > rank(e) {
            *e = sev.to_string();
        }
    }
    out
}

/// One case's outcome.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct CaseScore {
    /// Reported kinds that met a requirement.
    pub tp: Vec<String>,
    /// Reported kinds the labels do not permit.
    pub fp: Vec<String>,
    /// Requirements no reported kind met (by their first kind).
    pub fn_: Vec<String>,
    /// Reported kinds that were allowed but not required (neutral).
    pub allowed: Vec<String>,
}

impl CaseScore {
    /// No false positive and no miss.
    pub fn ok(&self) -> bool {
        self.fp.is_empty() && self.fn_.is_empty()
    }
}

/// Scores the kinds `found` (minor or above) against `l`.
pub fn score_case(l: &Labels, found: &BTreeSet<String>) -> CaseScore {
    let mut s = CaseScore::default();
    let mut tp = BTreeSet::new();
    for r in &l.required {
        let hits: Vec<&String> = r.kinds.iter().filter(|k| found.contains(*k)).collect();
        if hits.is_empty() {
            s.fn_.push(r.kinds[0].clone());
        }
        tp.extend(hits.into_iter().cloned());
    }
    for k in found {
        if tp.contains(k) {
            continue;
        }
        if l.permits(k) {
            s.allowed.push(k.clone());
        } else {
            s.fp.push(k.clone());
        }
    }
    s.tp = tp.into_iter().collect();
    s
}

/// Counts of one kind over the cases.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Tally {
    /// True positives.
    pub tp: u32,
    /// False positives.
    pub fp: u32,
    /// False negatives.
    pub fn_: u32,
    /// Allowed, not required (neutral).
    pub allowed: u32,
    /// tp / (tp + fp); None without reports.
    pub precision: Option<f64>,
    /// tp / (tp + fn); None without requirements.
    pub recall: Option<f64>,
}

/// Per-kind tallies of `cases` (every catalogue kind listed, plus unknown ones reported).
pub fn tally<'a>(cases: impl IntoIterator<Item = &'a CaseScore>) -> BTreeMap<String, Tally> {
    let mut m: BTreeMap<String, Tally> = labels::KINDS
        .iter()
        .map(|k| (k.to_string(), Tally::default()))
        .collect();
    for c in cases {
        for k in &c.tp {
            m.entry(k.clone()).or_default().tp += 1;
        }
        for k in &c.fp {
            m.entry(k.clone()).or_default().fp += 1;
        }
        for k in &c.fn_ {
            m.entry(k.clone()).or_default().fn_ += 1;
        }
        for k in &c.allowed {
            m.entry(k.clone()).or_default().allowed += 1;
        }
    }
    for t in m.values_mut() {
        let ratio = |a: u32, b: u32| (a + b > 0).then(|| f64::from(a) / f64::from(a + b));
        t.precision = ratio(t.tp, t.fp);
        t.recall = ratio(t.tp, t.fn_);
    }
    m
}

/// One scored case of a run directory.
#[derive(Debug, Clone, Serialize)]
pub struct ScoredCase {
    /// Seed.
    pub seed: u64,
    /// The recipe's description.
    pub description: String,
    /// Facts from the truth.
    pub facts: labels::Facts,
    /// Labels.
    pub labels: Labels,
    /// Kinds found at minor or above, with their highest severity.
    pub found: BTreeMap<String, String>,
    /// Outcome.
    pub score: CaseScore,
}

/// The whole report of `sweep-score`.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The tcpdx binary scored.
    pub tcpdx: String,
    /// Run directory.
    pub dir: String,
    /// Cases scored.
    pub cases: Vec<ScoredCase>,
    /// Seeds asked for that have no finished case in the directory.
    pub missing: Vec<u64>,
    /// Cases that could not be scored (tcpdx failed on the capture, unreadable truth), with
    /// the reason; not in the tallies.
    pub errors: Vec<(u64, String)>,
    /// Per-kind tallies.
    pub kinds: BTreeMap<String, Tally>,
    /// Cases with no false positive and no miss.
    pub cases_ok: usize,
}

/// The case directories of `dir` (`seedNNNNN` with a truth.json), by seed.
pub fn case_dirs(dir: &Path) -> Result<BTreeMap<u64, PathBuf>> {
    let mut m = BTreeMap::new();
    for e in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let e = e?;
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(seed) = name
            .strip_prefix("seed")
            .and_then(|s| s.parse::<u64>().ok())
        else {
            continue;
        };
        if e.path().join("truth.json").is_file() {
            m.insert(seed, e.path());
        }
    }
    Ok(m)
}

/// Runs `bin diagnose --json capture`.
pub fn diagnose(bin: &Path, capture: &Path) -> Result<serde_json::Value> {
    let out = std::process::Command::new(bin)
        .args(["diagnose", "--json"])
        .arg(capture)
        .output()
        .with_context(|| format!("running {}", bin.display()))?;
    if !out.status.success() {
        bail!(
            "{} diagnose {} failed ({}): {}",
            bin.display(),
            capture.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    serde_json::from_slice(&out.stdout)
        .with_context(|| format!("parsing the JSON of {} diagnose", bin.display()))
}

/// Labels and scores one case directory.
pub fn score_dir_case(bin: &Path, seed: u64, dir: &Path) -> Result<ScoredCase> {
    let t: Truth = serde_json::from_slice(
        &std::fs::read(dir.join("truth.json"))
            .with_context(|| format!("reading {}/truth.json", dir.display()))?,
    )
    .with_context(|| format!("parsing {}/truth.json", dir.display()))?;
    let sc: Scenario = serde_json::from_value(t.params.clone())
        .with_context(|| format!("{}: the recipe in truth.json", dir.display()))?;
    let primary = t
        .files
        .captures
        .iter()
        .find(|c| c.primary)
        .with_context(|| format!("{}: no primary capture", dir.display()))?;
    let mut facts = labels::facts(&sc, &t);
    // the end hosts' own captures (always taken at both)
    let host_pkts = |point: &str| -> Result<Option<Vec<crate::capture::Pkt>>> {
        match t.files.captures.iter().find(|c| c.point == point) {
            Some(f) => Ok(Some(crate::capture::read_pcap(&dir.join(&f.file))?)),
            None => Ok(None),
        }
    };
    let (client, server) = (host_pkts("client")?, host_pkts("server")?);
    let at_sender = |sender: &std::net::SocketAddrV4| {
        if sender.ip().to_string() == t.topology.client {
            client.as_deref()
        } else {
            server.as_deref()
        }
    };
    // zero windows as each sender's capture shows them
    let mut held = Some(0.0);
    for c in t
        .connections
        .iter()
        .filter(|c| !c.episodes.zero_windows.is_empty())
    {
        let seen = c
            .sender
            .parse()
            .ok()
            .and_then(|s| Some(labels::zero_window_held_s(at_sender(&s)?, s)));
        held = held.zip(seen).map(|(a, b)| a + b);
    }
    facts.zero_window_held_s = held;
    if let Some(main) = t.connections.iter().max_by_key(|c| c.bytes_sent)
        && let Ok(sender) = main.sender.parse::<std::net::SocketAddrV4>()
    {
        if let Some(pkts) = at_sender(&sender) {
            facts.sender_idle_s = labels::sender_idle_s(pkts, sender);
        }
        // the server stall as the server host's capture shows it
        if let (Some(w), Ok(receiver), Some(pkts)) = (
            facts.stall_window,
            main.receiver.parse::<std::net::SocketAddrV4>(),
            server.as_deref(),
        ) {
            facts.server_held_s = labels::held_s(pkts, sender, receiver, w);
        }
    }
    let labels = labels::label(&facts);
    let found = found_kinds(&diagnose(bin, &dir.join(&primary.file))?);
    let set: BTreeSet<String> = found.keys().cloned().collect();
    let score = score_case(&labels, &set);
    Ok(ScoredCase {
        seed,
        description: sc.description,
        facts,
        labels,
        found,
        score,
    })
}

/// Scores the cases of `dir` (only `seeds` if given) with the tcpdx binary `bin`.
pub fn score_run(dir: &Path, bin: &Path, seeds: Option<&[u64]>) -> Result<Report> {
    let all = case_dirs(dir)?;
    let mut missing = Vec::new();
    let want: Vec<u64> = match seeds {
        Some(s) => {
            missing = s.iter().copied().filter(|x| !all.contains_key(x)).collect();
            s.iter().copied().filter(|x| all.contains_key(x)).collect()
        }
        None => all.keys().copied().collect(),
    };
    let mut cases = Vec::new();
    let mut errors = Vec::new();
    for seed in want {
        match score_dir_case(bin, seed, &all[&seed]) {
            Ok(c) => cases.push(c),
            Err(e) => errors.push((seed, format!("{e:#}"))),
        }
    }
    let kinds = tally(cases.iter().map(|c| &c.score));
    let cases_ok = cases.iter().filter(|c| c.score.ok()).count();
    Ok(Report {
        tcpdx: bin.display().to_string(),
        dir: dir.display().to_string(),
        cases,
        missing,
        errors,
        kinds,
        cases_ok,
    })
}

fn fmt_ratio(x: Option<f64>) -> String {
    x.map_or("-".into(), |v| format!("{v:.2}"))
}

impl Report {
    /// The per-kind table and the per-case table, as text.
    pub fn text(&self) -> String {
        let mut s = format!(
            "sweep-score: {} cases in {} with {} ({} without false positive or miss){}{}\n\n",
            self.cases.len(),
            self.dir,
            self.tcpdx,
            self.cases_ok,
            if self.errors.is_empty() {
                String::new()
            } else {
                format!("; {} cases NOT SCORED (errors below)", self.errors.len())
            },
            if self.missing.is_empty() {
                String::new()
            } else {
                format!("; {} seeds not run", self.missing.len())
            }
        );
        s += &format!(
            "{:<26} {:>4} {:>4} {:>4} {:>7} {:>9} {:>6}\n",
            "kind", "TP", "FP", "FN", "allowed", "precision", "recall"
        );
        for (k, t) in &self.kinds {
            s += &format!(
                "{:<26} {:>4} {:>4} {:>4} {:>7} {:>9} {:>6}\n",
                k,
                t.tp,
                t.fp,
                t.fn_,
                t.allowed,
                fmt_ratio(t.precision),
                fmt_ratio(t.recall)
            );
        }
        s += "\nseed   ok  required | found (minor+) | FP | FN | case\n";
        for (seed, e) in &self.errors {
            s += &format!("{seed:<6} ERROR {e}\n");
        }
        for c in &self.cases {
            let req: Vec<String> = c
                .labels
                .required
                .iter()
                .map(|r| r.kinds.join("|"))
                .collect();
            let found: Vec<String> = c.found.iter().map(|(k, v)| format!("{k}:{v}")).collect();
            s += &format!(
                "{:<6} {:<3} {} | {} | {} | {} | {}\n",
                c.seed,
                if c.score.ok() { "ok" } else { "-" },
                if req.is_empty() {
                    "-".into()
                } else {
                    req.join(", ")
                },
                if found.is_empty() {
                    "-".into()
                } else {
                    found.join(", ")
                },
                if c.score.fp.is_empty() {
                    "-".into()
                } else {
                    c.score.fp.join(", ")
                },
                if c.score.fn_.is_empty() {
                    "-".into()
                } else {
                    c.score.fn_.join(", ")
                },
                c.description
            );
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels_req(kinds: &[&[&str]], allowed: &[&str]) -> Labels {
        Labels {
            required: kinds
                .iter()
                .map(|ks| labels::Requirement {
                    kinds: ks.iter().map(|k| k.to_string()).collect(),
                    why: String::new(),
                })
                .collect(),
            allowed: allowed.iter().map(|k| k.to_string()).collect(),
        }
    }

    fn set(v: &[&str]) -> BTreeSet<String> {
        v.iter().map(|k| k.to_string()).collect()
    }

    #[test]
    fn info_findings_never_count() {
        let j = serde_json::json!({"findings": [
            {"kind": "network-loss", "severity": "info"},
            {"kind": "rto-stall", "severity": "minor"},
            {"kind": "rto-stall", "severity": "critical"},
            {"kind": "reordering", "severity": "major"},
        ]});
        let f = found_kinds(&j);
        assert_eq!(f.len(), 2);
        assert_eq!(f["rto-stall"], "critical");
        assert_eq!(f["reordering"], "major");
        assert!(found_kinds(&serde_json::json!({})).is_empty());
    }

    #[test]
    fn requirement_met_by_any_of_its_kinds() {
        let l = labels_req(&[&["network-loss", "cwnd-collapse"]], &["path-limited"]);
        let s = score_case(&l, &set(&["cwnd-collapse", "path-limited"]));
        assert_eq!(s.tp, vec!["cwnd-collapse"]);
        assert!(s.fn_.is_empty() && s.fp.is_empty());
        assert_eq!(s.allowed, vec!["path-limited"]);
        let s = score_case(&l, &set(&["rto-stall"]));
        assert_eq!(s.fn_, vec!["network-loss"]);
        assert_eq!(s.fp, vec!["rto-stall"]);
        assert!(!s.ok());
        // both kinds of one requirement reported: both true positives
        let s = score_case(&l, &set(&["network-loss", "cwnd-collapse"]));
        assert_eq!(s.tp.len(), 2);
        assert!(s.ok());
    }

    #[test]
    fn unknown_kinds_are_false_positives() {
        let l = labels_req(&[], &[]);
        let s = score_case(&l, &set(&["server-stall"]));
        assert_eq!(s.fp, vec!["server-stall"]);
        let t = tally([&s]);
        assert_eq!(t["server-stall"].fp, 1);
        assert_eq!(t["server-stall"].precision, Some(0.0));
    }

    #[test]
    fn tally_precision_and_recall() {
        let l = labels_req(&[&["rto-stall"]], &[]);
        let a = score_case(&l, &set(&["rto-stall"]));
        let b = score_case(&l, &set(&[]));
        let c = score_case(&labels_req(&[], &[]), &set(&["rto-stall"]));
        let t = tally([&a, &b, &c]);
        let r = &t["rto-stall"];
        assert_eq!((r.tp, r.fp, r.fn_), (1, 1, 1));
        assert_eq!(r.precision, Some(0.5));
        assert_eq!(r.recall, Some(0.5));
        assert_eq!(t["network-loss"].precision, None);
        assert_eq!(t["network-loss"].recall, None);
    }
}
