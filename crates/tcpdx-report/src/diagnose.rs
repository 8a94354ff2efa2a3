//! `tcpdx diagnose`: findings as a terminal summary or JSON.
//!
//! JSON (`--json`, documented field by field in docs/json-format.md): `{"version": 1,
//! "findings": [...], "time_budget": {...}, "connections": [...]}`; each finding has `kind`,
//! `severity`, `stream`, `episodes`, `cost {seconds, share, goodput_without_bps}`,
//! `confidence`, `evidence [{frame, role}]`, `wireshark_filter`, `explanation`,
//! `recommendations`, `episode_list [{start_s, duration_s}]` and, with several input files,
//! `file`; then `verdict` and `groups` (`tcpdx_detect::summary`). Fields are only ever added.
//!
//! Text: the verdict, the findings grouped by pattern across connections and the time
//! budget (bounded whatever the capture's size); each finding in full with
//! [`write_diagnosis_text_all`] (`--all`, `--stream N`).

use std::io::{self, Write};

use serde::Serialize;
use tcpdx_detect::summary::{Group, GroupBy, Summary, describe, secs};
use tcpdx_detect::{Diagnosis, Finding, FindingKind, Severity, State, TimeBudget, summarize};

use crate::fmt::bps;

/// Version of the `diagnose --json` format.
pub const DIAGNOSE_JSON_VERSION: u32 = 1;

#[derive(Serialize)]
struct JsonDiagnosis<'a> {
    version: u32,
    findings: &'a [Finding],
    time_budget: &'a TimeBudget,
    connections: &'a [tcpdx_detect::ConnInference],
    /// Present only when connections were folded away (beyond `MAX_LISTED` or `MAX_LISTED_BYTES`).
    #[serde(skip_serializing_if = "Option::is_none")]
    unlisted: Option<&'a tcpdx_detect::Unlisted>,
    /// The capture's facts (clock resolution, copies, missing frames, offload, snap length).
    capture: &'a tcpdx_detect::CaptureFacts,
    verdict: &'a tcpdx_detect::Verdict,
    groups: &'a [Group],
}

/// Writes the diagnosis as one JSON document (pretty-printed, newline-terminated).
pub fn write_diagnosis_json(w: &mut dyn Write, d: &Diagnosis) -> io::Result<()> {
    let summary = summarize(d);
    let doc = JsonDiagnosis {
        version: DIAGNOSE_JSON_VERSION,
        findings: &d.findings,
        time_budget: &d.time_budget,
        connections: &d.connections,
        unlisted: (d.unlisted.connections > 0).then_some(&d.unlisted),
        capture: &d.capture,
        verdict: &summary.verdict,
        groups: &summary.groups,
    };
    serde_json::to_writer_pretty(&mut *w, &doc).map_err(io::Error::from)?;
    writeln!(w)
}

/// Evidence frames shown per finding in the terminal (the JSON has them all).
const TERMINAL_EVIDENCE: usize = 8;
/// Findings shown in full in the terminal; the rest get one line each.
const TERMINAL_FULL: usize = 10;

/// Patterns whose worst finding the default text prints in full (tcpdx choice: three keep
/// the output of any capture near 100 lines).
const EXAMPLES: usize = 3;

/// Groups shown in the terminal with their worst connections; the rest are counted on one
/// line (the JSON has them all). With the verdict and the budget, the output stays within
/// about 90 lines whatever the capture.
const TERMINAL_GROUPS: usize = 10;
/// Groups shown with their recommendation (the costliest ones; one can take six lines).
const TERMINAL_GROUP_ADVICE: usize = 3;
/// Kinds named on the line of groups that lost no time.
const TERMINAL_FREE_KINDS: usize = 8;

/// Writes the terminal summary: the verdict, the findings grouped by pattern (most time
/// lost first) and the time budget. Bounded in length whatever the capture.
pub fn write_diagnosis_text(w: &mut dyn Write, d: &Diagnosis) -> io::Result<()> {
    let summary = summarize(d);
    write_verdict(w, &summary)?;
    write_groups(w, &summary)?;
    write_examples(w, d, &summary)?;
    write_unlisted(w, d)?;
    write_budget(w, &d.time_budget, d.unlisted.connections)?;
    if let Some(g) = summary.groups.iter().find(|g| !g.worst.is_empty()) {
        writeln!(w)?;
        wrap(
            w,
            "",
            &format!(
                "One connection in full: tcpdx diagnose --stream N (e.g. --stream {}); every \
                 finding in full: --all.",
                g.worst[0].stream
            ),
        )?;
    }
    Ok(())
}

/// The worst connection's finding of each of the [`EXAMPLES`] costliest groups, in full, so
/// that the default output shows the evidence frames of what cost most.
fn write_examples(w: &mut dyn Write, d: &Diagnosis, s: &Summary) -> io::Result<()> {
    let examples: Vec<&Finding> = (s.groups.iter())
        .filter(|g| g.seconds > 0.0)
        .take(EXAMPLES)
        .filter_map(|g| {
            let worst = g.worst.first()?;
            (d.findings.iter()).find(|f| f.kind == g.kind && f.stream == Some(worst.stream))
        })
        .collect();
    if examples.is_empty() {
        return Ok(());
    }
    writeln!(
        w,
        "The worst connection of each of the costliest patterns, in full:"
    )?;
    for (i, f) in examples.into_iter().enumerate() {
        write_finding(w, i, f)?;
    }
    Ok(())
}

/// Writes the verdict and the groups, then every finding in full (today's listing: the
/// first [`TERMINAL_FULL`] in full, the rest one line each) and the time budget.
pub fn write_diagnosis_text_all(w: &mut dyn Write, d: &Diagnosis) -> io::Result<()> {
    let summary = summarize(d);
    write_verdict(w, &summary)?;
    write_groups(w, &summary)?;
    write_findings(w, d)
}

fn write_verdict(w: &mut dyn Write, s: &Summary) -> io::Result<()> {
    writeln!(w, "Verdict:")?;
    for l in &s.verdict.lines {
        wrap(w, "  ", l)?;
    }
    writeln!(w)
}

/// The groups that lost time, then one line naming the kinds that lost none.
fn write_groups(w: &mut dyn Write, s: &Summary) -> io::Result<()> {
    let (costly, free): (Vec<&Group>, Vec<&Group>) = s
        .groups
        .iter()
        .partition(|g| g.seconds > 0.0 && g.kind != FindingKind::PathLimited);
    if !costly.is_empty() {
        writeln!(
            w,
            "Findings by pattern, most time lost first ({} pattern(s)):",
            costly.len()
        )?;
    }
    for (i, g) in costly.iter().take(TERMINAL_GROUPS).enumerate() {
        let mut head = format!(
            "{}, {} in all ({:.1}% of the connection-seconds)",
            describe(g),
            secs(g.seconds),
            g.share * 100.0
        );
        if g.episodes > 0 {
            head.push_str(&format!(", {} episode(s)", g.episodes));
        }
        let sev = if g.by == GroupBy::Unlisted {
            String::new()
        } else {
            format!("[{}] ", g.severity.as_str().to_uppercase())
        };
        wrap(w, &format!("{:>3}. ", i + 1), &format!("{sev}{head}"))?;
        if !g.worst.is_empty() {
            let ex: Vec<String> = g
                .worst
                .iter()
                .map(|e| {
                    let file = e
                        .file
                        .as_ref()
                        .map_or(String::new(), |f| format!(" in {f}"));
                    format!(
                        "stream {}{file} ({}, {:.0}% of its life)",
                        e.stream,
                        secs(e.seconds),
                        e.share * 100.0
                    )
                })
                .collect();
            let label = if g.connections > 1 { "worst: " } else { "" };
            wrap(w, "     ", &format!("{label}{}", ex.join(", ")))?;
        }
        if i < TERMINAL_GROUP_ADVICE
            && let Some(r) = &g.recommendation
        {
            wrap(w, "     - ", r)?;
        }
    }
    if costly.len() > TERMINAL_GROUPS {
        let rest = &costly[TERMINAL_GROUPS..];
        let secs_rest: f64 = rest.iter().map(|g| g.seconds).sum();
        let conns: u64 = rest.iter().map(|g| g.connections).sum();
        wrap(
            w,
            "     ",
            &format!(
                "and {} more pattern(s) on {conns} connection(s), {} in all (--json lists \
                 every one)",
                rest.len(),
                secs(secs_rest)
            ),
        )?;
    }
    if !free.is_empty() {
        // Per kind: connections, or capture-wide.
        let mut kinds: Vec<(FindingKind, u64)> = Vec::new();
        for g in &free {
            match kinds.iter_mut().find(|k| k.0 == g.kind) {
                Some(k) => k.1 += g.connections,
                None => kinds.push((g.kind, g.connections)),
            }
        }
        let mut names: Vec<String> = kinds
            .iter()
            .take(TERMINAL_FREE_KINDS)
            .map(|(k, n)| format!("{} ({n})", k.as_str()))
            .collect();
        if kinds.len() > TERMINAL_FREE_KINDS {
            names.push(format!(
                "{} more kind(s)",
                kinds.len() - TERMINAL_FREE_KINDS
            ));
        }
        wrap(
            w,
            "",
            &format!("No time lost (connections): {}.", names.join(", ")),
        )?;
    }
    if !s.groups.is_empty() {
        writeln!(w)?;
    }
    Ok(())
}

/// Every finding in full (the first [`TERMINAL_FULL`]; the rest one line each), the
/// connections not listed and the time budget.
fn write_findings(w: &mut dyn Write, d: &Diagnosis) -> io::Result<()> {
    let shown: Vec<&Finding> = d.findings.iter().collect();
    if shown.is_empty() {
        let n = d.connections.len() as u64 + d.unlisted.connections;
        if n == 0 {
            writeln!(w, "No TCP connections with data to diagnose.")?;
        } else {
            writeln!(w, "No findings on {n} connection(s).")?;
        }
    }
    for (i, f) in shown.iter().enumerate() {
        if i >= TERMINAL_FULL {
            writeln!(
                w,
                "{:>3}. [{}] {} stream {} ({} episodes, {:.3} s)",
                i + 1,
                f.severity.as_str(),
                f.kind.as_str(),
                stream(f),
                f.episodes,
                f.cost.seconds
            )?;
            continue;
        }
        write_finding(w, i, f)?;
    }
    write_unlisted(w, d)?;
    write_budget(w, &d.time_budget, d.unlisted.connections)
}

/// One finding in full: its line, explanation, evidence frames, Wireshark filter and
/// recommendations, then a blank line.
fn write_finding(w: &mut dyn Write, i: usize, f: &Finding) -> io::Result<()> {
    writeln!(
        w,
        "{:>3}. [{}] {}  stream {}  {} episode(s)  cost {:.3} s ({:.1}% of the connection){}",
        i + 1,
        f.severity.as_str().to_uppercase(),
        f.kind.as_str(),
        stream(f),
        f.episodes,
        f.cost.seconds,
        f.cost.share * 100.0,
        f.cost
            .goodput_without_bps
            .filter(|_| f.cost.seconds > 0.0)
            .map_or(String::new(), |g| format!("; without it: {}", bps(g)))
    )?;
    if let Some(file) = &f.file {
        writeln!(w, "     file: {file}")?;
    }
    wrap(w, "     ", &f.explanation)?;
    if !f.evidence.is_empty() {
        let ev: Vec<String> = f
            .evidence
            .iter()
            .take(TERMINAL_EVIDENCE)
            .map(|e| match &e.source {
                // A capture of several files: where the frame lies.
                Some(src) => format!("#{} ({} #{}) {}", e.frame, src.file, src.frame, e.role),
                None => format!("#{} {}", e.frame, e.role),
            })
            .collect();
        let more = f.evidence.len().saturating_sub(TERMINAL_EVIDENCE);
        let tail = if more > 0 {
            format!(" (+{more} more)")
        } else {
            String::new()
        };
        wrap(w, "     evidence: ", &format!("{}{tail}", ev.join(", ")))?;
    }
    if !f.wireshark_filter.is_empty() {
        writeln!(w, "     wireshark: {}", f.wireshark_filter)?;
    }
    for r in &f.recommendations {
        wrap(w, "     - ", r)?;
    }
    writeln!(w)
}

/// The line counting the connections folded away to bound memory, if any.
fn write_unlisted(w: &mut dyn Write, d: &Diagnosis) -> io::Result<()> {
    if d.unlisted.connections > 0 {
        let kinds: Vec<String> = d
            .unlisted
            .findings
            .iter()
            .map(|(k, t)| format!("{} {} ({:.3} s)", t.count, k.as_str(), t.seconds))
            .collect();
        writeln!(
            w,
            "{} more connection(s) not listed (only the {} costliest are kept, to bound memory){}{}",
            d.unlisted.connections,
            d.connections.len(),
            if kinds.is_empty() {
                ""
            } else {
                "; their findings: "
            },
            kinds.join(", ")
        )?;
    }
    Ok(())
}

fn stream(f: &Finding) -> String {
    f.stream.map_or_else(|| "-".into(), |s| s.to_string())
}

fn write_budget(w: &mut dyn Write, b: &TimeBudget, unlisted: u64) -> io::Result<()> {
    if b.seconds <= 0.0 {
        return Ok(());
    }
    writeln!(
        w,
        "Time budget ({:.3} connection-seconds over {} connection(s)):",
        b.seconds,
        b.connections.len() as u64 + unlisted
    )?;
    for s in State::ALL {
        let secs = b.states.get(s);
        if secs <= 0.0 {
            continue;
        }
        let share = secs / b.seconds;
        let bar = "#".repeat((share * 40.0).round() as usize);
        writeln!(
            w,
            "  {:<24} {:>9.3} s {:>5.1}%  {bar}",
            s.as_str().replace('_', " "),
            secs,
            share * 100.0
        )?;
    }
    Ok(())
}

/// Writes `text` wrapped at 100 columns, the first line after `first`, the rest indented.
fn wrap(w: &mut dyn Write, first: &str, text: &str) -> io::Result<()> {
    const WIDTH: usize = 100;
    let indent = " ".repeat(first.chars().count());
    let mut line = first.to_string();
    let mut empty = true;
    for word in text.split_whitespace() {
        if !empty && line.chars().count() + 1 + word.chars().count() > WIDTH {
            writeln!(w, "{line}")?;
            line = indent.clone();
            empty = true;
        }
        if !empty {
            line.push(' ');
        }
        line.push_str(word);
        empty = false;
    }
    writeln!(w, "{line}")
}

/// True if any finding is at or above `level` (for `--fail-on`).
pub fn fails(d: &Diagnosis, level: Severity) -> bool {
    d.findings.iter().any(|f| f.severity >= level)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tcpdx_detect::FindingKind;

    fn sample() -> Diagnosis {
        let mut f = Finding::new(FindingKind::RtoStall, Some(0));
        f.severity = Severity::Major;
        f.episodes = 1;
        f.cost.seconds = 0.25;
        f.cost.share = 0.2;
        f.evidence(7, "timeout retransmission");
        f.explanation = "a timeout".into();
        f.recommendations = vec!["fix it".into()];
        Diagnosis {
            findings: vec![f],
            ..Diagnosis::default()
        }
    }

    #[test]
    fn json_has_the_contract_fields() {
        let mut out = Vec::new();
        write_diagnosis_json(&mut out, &sample()).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["version"], 1);
        let f = &v["findings"][0];
        assert_eq!(f["kind"], "rto-stall");
        assert_eq!(f["severity"], "major");
        assert_eq!(f["stream"], 0);
        assert_eq!(f["episodes"], 1);
        assert_eq!(f["cost"]["seconds"], 0.25);
        assert!(f["cost"]["goodput_without_bps"].is_null());
        assert_eq!(f["evidence"][0]["frame"], 7);
        assert_eq!(f["evidence"][0]["role"], "timeout retransmission");
        for key in [
            "confidence",
            "wireshark_filter",
            "explanation",
            "recommendations",
        ] {
            assert!(f.get(key).is_some(), "{key}");
        }
        assert!(v["time_budget"].is_object());
    }

    #[test]
    fn text_lists_the_finding_and_fail_on_compares_severity() {
        let d = sample();
        let mut out = Vec::new();
        write_diagnosis_text_all(&mut out, &d).unwrap();
        let s = String::from_utf8(out).unwrap();
        assert!(s.starts_with("Verdict:\n"), "{s}");
        assert!(s.contains("rto-stall") && s.contains("#7 timeout retransmission"));
        assert!(fails(&d, Severity::Minor));
        assert!(!fails(&d, Severity::Critical));
    }

    /// `n` connections to one service, each with a costly finding, and one capture-wide
    /// finding that cost nothing.
    fn many(n: u32) -> Diagnosis {
        let mut d = Diagnosis::default();
        for i in 0..n {
            let mut f = Finding::new(FindingKind::NetworkLoss, Some(i));
            f.severity = Severity::Minor;
            f.episodes = 1;
            f.cost.seconds = 0.01 + f64::from(i % 7) * 0.001;
            f.cost.share = 0.05;
            f.evidence(u64::from(i) + 1, "fast retransmission");
            f.explanation = "a segment was lost".into();
            f.recommendations = vec!["look for the drop".into()];
            d.findings.push(f);
            d.connections.push(tcpdx_detect::ConnInference {
                stream: i,
                client: format!("10.0.{}.{}:40000", i / 200, i % 200),
                server: "10.98.0.2:8080".into(),
                main_direction: "server_to_client",
                capture_point: tcpdx_detect::CapturePoint::Unknown,
                rtt_s: None,
                path_bps: 0.0,
                goodput_bps: 0.0,
                rounds: 0,
                slow_start_rounds: 0,
                congestion_avoidance_rounds: 0,
                max_packets_per_round: 0,
                loss_episodes: 0,
                segments_per_ack: None,
                lone_segment_ack_delay_s: None,
            });
            d.time_budget.seconds += 0.2;
        }
        d.findings
            .push(Finding::new(FindingKind::CaptureQuality, None));
        tcpdx_detect::sort_findings(&mut d.findings);
        d
    }

    #[test]
    fn default_text_is_the_verdict_and_the_groups_bounded_in_length() {
        let d = many(3000);
        let mut out = Vec::new();
        write_diagnosis_text(&mut out, &d).unwrap();
        let s = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = s.lines().collect();
        assert_eq!(lines[0], "Verdict:");
        assert!(lines.len() <= 45, "{s}");
        assert!(
            s.contains("network-loss on 3000 connection(s) to 10.98.0.2:8080"),
            "{s}"
        );
        assert!(
            s.contains("worst: stream 6 (0.016 s, 5% of its life)"),
            "{s}"
        );
        assert!(
            s.contains("No time lost (connections): capture-quality (1)."),
            "{s}"
        );
        assert!(s.contains("--stream 6"), "{s}");
        // The worst connection of the one pattern in full, and no other.
        assert!(s.contains("costliest patterns, in full:"), "{s}");
        assert!(s.contains("network-loss  stream 6"), "{s}");
        assert!(!s.contains("network-loss  stream 13"), "{s}");
        // --all lists the findings too.
        let mut all = Vec::new();
        write_diagnosis_text_all(&mut all, &d).unwrap();
        let all = String::from_utf8(all).unwrap();
        let groups_end = s.find("The worst connection of each").unwrap();
        assert!(all.starts_with(&s[..groups_end]));
        assert!(all.contains("evidence: #7 fast retransmission"), "{all}");
        assert!(all.lines().count() > 3000);
    }

    #[test]
    fn groups_beyond_the_shown_ones_are_counted() {
        let mut d = many(1);
        // Patterns on TERMINAL_GROUPS + 2 services.
        for i in 1..(TERMINAL_GROUPS as u32 + 2) {
            let mut m = many(1);
            m.connections[0].stream = i;
            m.connections[0].server = format!("10.99.0.{i}:80");
            m.connections[0].client = format!("10.7.0.{i}:40000");
            m.findings.retain(|f| f.stream.is_some());
            m.findings[0].stream = Some(i);
            d.findings.extend(m.findings);
            d.connections.extend(m.connections);
        }
        let mut out = Vec::new();
        write_diagnosis_text(&mut out, &d).unwrap();
        let s = String::from_utf8(out).unwrap();
        assert!(
            s.contains(&format!("({} pattern(s))", TERMINAL_GROUPS + 2)),
            "{s}"
        );
        assert!(s.contains(&format!("{:>3}. ", TERMINAL_GROUPS)), "{s}");
        assert!(!s.contains(&format!("{:>3}. ", TERMINAL_GROUPS + 1)), "{s}");
        assert!(
            s.contains("and 2 more pattern(s) on 2 connection(s), 0.020 s in all"),
            "{s}"
        );
    }

    #[test]
    fn json_adds_the_verdict_and_the_groups_after_the_existing_keys() {
        let mut out = Vec::new();
        write_diagnosis_json(&mut out, &many(2)).unwrap();
        // The top-level keys in this order: the new ones last.
        let text = String::from_utf8(out.clone()).unwrap();
        let at: Vec<usize> = [
            "version",
            "findings",
            "time_budget",
            "connections",
            "verdict",
            "groups",
        ]
        .iter()
        .map(|k| text.find(&format!("\n  \"{k}\": ")).expect(k))
        .collect();
        assert!(at.windows(2).all(|w| w[0] < w[1]), "{at:?}");
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["groups"][0]["kind"], "network-loss");
        assert_eq!(v["groups"][0]["by"], "service");
        assert_eq!(v["groups"][0]["key"], "10.98.0.2:8080");
        assert_eq!(v["groups"][0]["connections"], 2);
        assert_eq!(v["groups"][0]["worst"][0]["stream"], 1);
        assert!(v["groups"][1]["key"].is_null());
        assert_eq!(v["verdict"]["healthy"], false);
        assert_eq!(v["verdict"]["top_group"], 0);
        assert!(
            v["verdict"]["lines"]
                .as_array()
                .is_some_and(|l| (2..=4).contains(&l.len()))
        );
    }
}
