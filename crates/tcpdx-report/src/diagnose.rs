//! `tcpdx diagnose`: findings as a terminal summary or JSON.
//!
//! JSON (`--json`, documented field by field in docs/json-format.md): `{"version": 1,
//! "findings": [...], "time_budget": {...}, "connections": [...]}`; each finding has `kind`,
//! `severity`, `stream`, `episodes`, `cost {seconds, share, goodput_without_bps}`,
//! `confidence`, `evidence [{frame, role}]`, `wireshark_filter`, `explanation`,
//! `recommendations`, `episode_list [{start_s, duration_s}]` and, with several input files,
//! `file`. Fields are only ever added.

use std::io::{self, Write};

use serde::Serialize;
use tcpdx_detect::{Diagnosis, Finding, Severity, State, TimeBudget};

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
}

/// Writes the diagnosis as one JSON document (pretty-printed, newline-terminated).
pub fn write_diagnosis_json(w: &mut dyn Write, d: &Diagnosis) -> io::Result<()> {
    let doc = JsonDiagnosis {
        version: DIAGNOSE_JSON_VERSION,
        findings: &d.findings,
        time_budget: &d.time_budget,
        connections: &d.connections,
        unlisted: (d.unlisted.connections > 0).then_some(&d.unlisted),
        capture: &d.capture,
    };
    serde_json::to_writer_pretty(&mut *w, &doc).map_err(io::Error::from)?;
    writeln!(w)
}

/// Evidence frames shown per finding in the terminal (the JSON has them all).
const TERMINAL_EVIDENCE: usize = 8;
/// Findings shown in full in the terminal; the rest get one line each.
const TERMINAL_FULL: usize = 10;

/// Writes the terminal summary: findings most costly first, then the time budget.
pub fn write_diagnosis_text(w: &mut dyn Write, d: &Diagnosis) -> io::Result<()> {
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
                .map(|e| format!("#{} {}", e.frame, e.role))
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
        writeln!(w)?;
    }
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
    write_budget(w, &d.time_budget, d.unlisted.connections)
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
        write_diagnosis_text(&mut out, &d).unwrap();
        let s = String::from_utf8(out).unwrap();
        assert!(s.contains("rto-stall") && s.contains("#7 timeout retransmission"));
        assert!(fails(&d, Severity::Minor));
        assert!(!fails(&d, Severity::Critical));
    }
}
