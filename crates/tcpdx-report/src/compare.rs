//! `tcpdx compare BEFORE AFTER`: a before/after comparison as text or JSON.
//!
//! The figures and the verdict are computed by the library (`tcpdx::compare`); this module
//! holds their shape (what every renderer shows) and writes it.

use std::io::{self, Write};

use serde::Serialize;

use crate::fmt::bps;

/// How a figure moved between the two captures, judged with the library's thresholds
/// (relative and absolute floors, so that noise is not called a change).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Change {
    /// A cost above the floor before, below it after.
    Gone,
    /// Below the floor before, above it after.
    New,
    /// Moved the good way by more than the thresholds.
    Better,
    /// Moved the bad way by more than the thresholds.
    Worse,
    /// Within the thresholds.
    Unchanged,
    /// Only one capture has the figure (an operation or a service seen on one side).
    OneSide,
    /// Too few samples on a side to judge (response-time percentiles of a handful of
    /// replies).
    Few,
}

impl Change {
    /// The serialised name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Gone => "gone",
            Self::New => "new",
            Self::Better => "better",
            Self::Worse => "worse",
            Self::Unchanged => "unchanged",
            Self::OneSide => "one_side",
            Self::Few => "few",
        }
    }
}

/// One finding kind's cost on both sides.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct KindChange {
    /// Catalogue kind (`delack-slowstart-stall`, ...).
    pub kind: String,
    /// Seconds lost to it before (0 when absent).
    pub before_s: f64,
    /// Seconds lost to it after.
    pub after_s: f64,
    /// Its findings before.
    pub findings_before: u64,
    /// Its findings after.
    pub findings_after: u64,
    /// How it moved.
    pub change: Change,
}

/// One storage operation's service response times on both sides.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct OpChange {
    /// `nfs`, `smb2` or `iscsi`.
    pub protocol: String,
    /// The operation (`WRITE`, `Read`, `Read(10)`; NFSv4: the COMPOUND's principal one).
    pub op: String,
    /// Replies before.
    pub count_before: u64,
    /// Replies after.
    pub count_after: u64,
    /// Bytes the replies' requests read or wrote, before.
    pub bytes_before: u64,
    /// The same, after.
    pub bytes_after: u64,
    /// p50/p95/p99 before (s), `None` without replies.
    pub before_s: Option<Percentiles>,
    /// p50/p95/p99 after (s).
    pub after_s: Option<Percentiles>,
    /// How p95 moved.
    pub change: Change,
}

/// Service response time percentiles, seconds (nearest rank, as `tcpdx srt`).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Percentiles {
    /// Median.
    pub p50: f64,
    /// 95th percentile.
    pub p95: f64,
    /// 99th percentile.
    pub p99: f64,
}

/// What one side of a service (or the whole capture) moved.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct SideFigures {
    /// Connections.
    pub connections: u64,
    /// Distinct payload bytes, both directions, summed over the connections.
    pub bytes: u64,
    /// First to last segment of its connections, seconds.
    pub duration_s: f64,
    /// `bytes` * 8 / `duration_s` (0 when the duration is 0).
    pub goodput_bps: f64,
    /// Seconds lost to findings (all kinds but `path-limited`).
    pub seconds_lost: f64,
}

/// One service (server address and port, protocol) on both sides.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ServiceChange {
    /// The server `ip:port` before (else after) and the protocol: `10.0.0.2:2049 nfs`.
    pub service: String,
    /// `tcp`, `nfs`, `smb2` or `iscsi`.
    pub protocol: String,
    /// The server `ip:port` in the before capture, if the service is in it.
    pub server_before: Option<String>,
    /// The server `ip:port` in the after capture.
    pub server_after: Option<String>,
    /// `address` (same server address and port), `port` (the address differs: the only
    /// service of that port and protocol on each side), `before_only`, `after_only`.
    pub matched_by: &'static str,
    /// The before side, if the service is in it.
    pub before: Option<SideFigures>,
    /// The after side.
    pub after: Option<SideFigures>,
    /// How goodput moved.
    pub goodput_change: Change,
    /// (after - before) / before of goodput, when both are non-zero.
    pub goodput_ratio: Option<f64>,
    /// Every finding kind of either side on this service's connections.
    pub kinds: Vec<KindChange>,
    /// Storage operations of either side.
    pub srt: Vec<OpChange>,
}

/// A before/after comparison of two captures (`tcpdx compare --json`; docs/json-format.md).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Comparison {
    /// Format version.
    pub version: u32,
    /// The before capture, as given.
    pub before: String,
    /// The after capture.
    pub after: String,
    /// The answer in one line: what went away or improved, goodput and storage response
    /// times of the main transfer, then what got worse (or "no change").
    pub verdict: String,
    /// What got worse, one phrase each (empty when nothing did).
    pub worse: Vec<String>,
    /// The main transfer: the matched service with the most bytes on both sides together
    /// (`service` of its row), `None` when no service is in both captures.
    pub main_service: Option<String>,
    /// The main transfer's goodput before (bits/s); the whole capture's when no service
    /// matched.
    pub goodput_before_bps: f64,
    /// The main transfer's goodput after.
    pub goodput_after_bps: f64,
    /// The whole capture before.
    pub capture_before: SideFigures,
    /// The whole capture after.
    pub capture_after: SideFigures,
    /// Every finding kind found in either capture, whole capture: most seconds first.
    pub kinds: Vec<KindChange>,
    /// Storage operations over the whole capture.
    pub srt: Vec<OpChange>,
    /// Per service, the main transfer first, then by bytes.
    pub services: Vec<ServiceChange>,
}

/// Writes the comparison as JSON.
pub fn write_comparison_json<W: Write>(out: &mut W, c: &Comparison) -> io::Result<()> {
    serde_json::to_writer_pretty(&mut *out, c)?;
    writeln!(out)
}

/// Bits per second as every report writes them (`63.00 Mb/s`).
pub fn rate(v: f64) -> String {
    bps(v)
}

/// Seconds with 3 decimals.
fn secs(v: f64) -> String {
    format!("{v:.3} s")
}

/// A relative change as `+56%`, or `-` when there is none to give.
pub fn percent(ratio: Option<f64>) -> String {
    match ratio {
        Some(r) if r.is_finite() => format!("{:+.0}%", r * 100.0),
        _ => "-".into(),
    }
}

/// Milliseconds with 3 significant figures or so.
pub fn ms(v: f64) -> String {
    let m = v * 1e3;
    if m >= 100.0 {
        format!("{m:.0} ms")
    } else if m >= 10.0 {
        format!("{m:.1} ms")
    } else {
        format!("{m:.2} ms")
    }
}

fn opt_side<T>(
    s: &Option<SideFigures>,
    f: impl Fn(&SideFigures) -> T,
    fmt: impl Fn(T) -> String,
) -> String {
    s.as_ref().map_or_else(|| "-".into(), |s| fmt(f(s)))
}

fn write_kinds<W: Write>(out: &mut W, kinds: &[KindChange], indent: &str) -> io::Result<()> {
    if kinds.is_empty() {
        return writeln!(out, "{indent}no findings on either side");
    }
    writeln!(
        out,
        "{indent}{:<26} {:>10} {:>10}  change",
        "finding kind", "before", "after"
    )?;
    for k in kinds {
        writeln!(
            out,
            "{indent}{:<26} {:>10} {:>10}  {}",
            k.kind,
            secs(k.before_s),
            secs(k.after_s),
            k.change.as_str()
        )?;
    }
    Ok(())
}

fn write_srt<W: Write>(out: &mut W, ops: &[OpChange], indent: &str) -> io::Result<()> {
    if ops.is_empty() {
        return Ok(());
    }
    writeln!(
        out,
        "{indent}{:<18} {:>7} {:>7}  {:>28}  {:>28}  change",
        "operation", "calls", "calls", "before p50 / p95 / p99", "after p50 / p95 / p99"
    )?;
    let p = |x: &Option<Percentiles>| {
        x.map_or_else(
            || "-".into(),
            |p| format!("{} / {} / {}", ms(p.p50), ms(p.p95), ms(p.p99)),
        )
    };
    for o in ops {
        writeln!(
            out,
            "{indent}{:<18} {:>7} {:>7}  {:>28}  {:>28}  {}",
            format!("{} {}", o.protocol, o.op),
            o.count_before,
            o.count_after,
            p(&o.before_s),
            p(&o.after_s),
            o.change.as_str()
        )?;
    }
    Ok(())
}

fn write_side_line<W: Write>(
    out: &mut W,
    label: &str,
    b: &Option<SideFigures>,
    a: &Option<SideFigures>,
    ratio: Option<f64>,
    indent: &str,
) -> io::Result<()> {
    writeln!(
        out,
        "{indent}{label}: goodput {} -> {} ({}), duration {} -> {}, connections {} -> {}",
        opt_side(b, |s| s.goodput_bps, bps),
        opt_side(a, |s| s.goodput_bps, bps),
        percent(ratio),
        opt_side(b, |s| s.duration_s, secs),
        opt_side(a, |s| s.duration_s, secs),
        opt_side(b, |s| s.connections, |n| n.to_string()),
        opt_side(a, |s| s.connections, |n| n.to_string()),
    )
}

/// Writes the comparison as text: the verdict first, what got worse, then the whole
/// capture and each service, before -> after.
pub fn write_comparison_text<W: Write>(out: &mut W, c: &Comparison) -> io::Result<()> {
    writeln!(out, "Before: {}", c.before)?;
    writeln!(out, "After:  {}", c.after)?;
    writeln!(out)?;
    writeln!(out, "Verdict:")?;
    writeln!(out, "  {}", c.verdict)?;
    if !c.worse.is_empty() {
        writeln!(out, "Worse:")?;
        for w in &c.worse {
            writeln!(out, "  - {w}")?;
        }
    }
    writeln!(out)?;
    let ratio = (c.capture_before.goodput_bps > 0.0)
        .then(|| c.capture_after.goodput_bps / c.capture_before.goodput_bps - 1.0);
    write_side_line(
        out,
        "Whole capture",
        &Some(c.capture_before),
        &Some(c.capture_after),
        ratio,
        "",
    )?;
    write_kinds(out, &c.kinds, "  ")?;
    write_srt(out, &c.srt, "  ")?;
    for s in &c.services {
        writeln!(out)?;
        let main = if c.main_service.as_deref() == Some(s.service.as_str()) {
            " (main transfer: most bytes)"
        } else {
            ""
        };
        let how = match s.matched_by {
            "port" => format!(
                " [matched by port: {} -> {}]",
                s.server_before.as_deref().unwrap_or("-"),
                s.server_after.as_deref().unwrap_or("-")
            ),
            "before_only" => " [before only]".into(),
            "after_only" => " [after only]".into(),
            _ => String::new(),
        };
        write_side_line(
            out,
            &format!("Service {}{main}{how}", s.service),
            &s.before,
            &s.after,
            s.goodput_ratio,
            "",
        )?;
        write_kinds(out, &s.kinds, "  ")?;
        write_srt(out, &s.srt, "  ")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Comparison {
        let side = SideFigures {
            connections: 1,
            bytes: 1000,
            duration_s: 1.0,
            goodput_bps: 8000.0,
            seconds_lost: 0.5,
        };
        let k = KindChange {
            kind: "rto-stall".into(),
            before_s: 0.5,
            after_s: 0.0,
            findings_before: 1,
            findings_after: 0,
            change: Change::Gone,
        };
        Comparison {
            version: 1,
            before: "b.pcap".into(),
            after: "a.pcap".into(),
            verdict: "rto-stall is gone: 0.500 s -> 0 s".into(),
            worse: vec!["x got worse".into()],
            main_service: Some("10.0.0.2:80 tcp".into()),
            goodput_before_bps: 8000.0,
            goodput_after_bps: 16000.0,
            capture_before: side,
            capture_after: side,
            kinds: vec![k.clone()],
            srt: vec![OpChange {
                protocol: "nfs".into(),
                op: "WRITE".into(),
                count_before: 3,
                count_after: 0,
                bytes_before: 0,
                bytes_after: 0,
                before_s: Some(Percentiles {
                    p50: 0.001,
                    p95: 0.0234,
                    p99: 0.234,
                }),
                after_s: None,
                change: Change::OneSide,
            }],
            services: vec![ServiceChange {
                service: "10.0.0.2:80 tcp".into(),
                protocol: "tcp".into(),
                server_before: Some("10.0.0.2:80".into()),
                server_after: Some("10.0.0.3:80".into()),
                matched_by: "port",
                before: Some(side),
                after: None,
                goodput_change: Change::OneSide,
                goodput_ratio: None,
                kinds: vec![k],
                srt: vec![],
            }],
        }
    }

    #[test]
    fn text_puts_the_verdict_first_and_shows_every_row() {
        let mut v = Vec::new();
        write_comparison_text(&mut v, &sample()).unwrap();
        let t = String::from_utf8(v).unwrap();
        let verdict = t.find("rto-stall is gone").unwrap();
        assert!(verdict < t.find("Whole capture").unwrap(), "{t}");
        assert!(t.contains("  - x got worse"), "{t}");
        assert!(t.contains("nfs WRITE"), "{t}");
        assert!(t.contains("1.00 ms / 23.4 ms / 234 ms"), "{t}");
        assert!(t.contains("(main transfer: most bytes)"), "{t}");
        assert!(
            t.contains("matched by port: 10.0.0.2:80 -> 10.0.0.3:80"),
            "{t}"
        );
    }

    #[test]
    fn json_has_the_documented_fields() {
        let mut v = Vec::new();
        write_comparison_json(&mut v, &sample()).unwrap();
        let j: serde_json::Value = serde_json::from_slice(&v).unwrap();
        assert_eq!(j["verdict"], "rto-stall is gone: 0.500 s -> 0 s");
        assert_eq!(j["kinds"][0]["kind"], "rto-stall");
        assert_eq!(j["kinds"][0]["before_s"], 0.5);
        assert_eq!(j["kinds"][0]["change"], "gone");
        assert_eq!(j["goodput_after_bps"], 16000.0);
        assert_eq!(j["services"][0]["matched_by"], "port");
        assert_eq!(j["services"][0]["after"], serde_json::Value::Null);
        assert_eq!(j["srt"][0]["before_s"]["p95"], 0.0234);
    }

    #[test]
    fn percent_and_ms_round_as_shown() {
        assert_eq!(percent(Some(0.556)), "+56%");
        assert_eq!(percent(Some(-0.25)), "-25%");
        assert_eq!(percent(None), "-");
        assert_eq!(ms(0.234), "234 ms");
        assert_eq!(ms(0.0123), "12.3 ms");
        assert_eq!(ms(0.00123), "1.23 ms");
    }
}
