//! Hand-built segment scenarios for every analysis flag (smoltcp-style: templates, explicit
//! times, tiny helpers). Each scenario is also written as pcapng and, when tshark is
//! installed (CI installs it), checked frame by frame against Wireshark's flags.

mod close;
mod detail;
mod dup_ack;
mod handshake;
mod keep_alive;
mod lost;
mod metrics;
mod retransmission;
mod window;
mod wrap;

use tcpdx_testkit::{Script, tshark_available, tshark_fields};

use crate::analyzer::Analyzer;
use crate::config::AnalyzerConfig;
use crate::event::{AnalysisFlags, Event, SegmentAnalysis};

/// Runs a script through the analyzer; returns one row per frame (index = frame - 1).
#[track_caller]
pub(super) fn analyze(t: &Script) -> Vec<SegmentAnalysis> {
    let mut a = Analyzer::new(AnalyzerConfig::default());
    let mut events: Vec<Event> = Vec::new();
    for f in t.frames() {
        a.handle_frame(&f.as_frame(), &mut events);
    }
    a.handle_end(&mut events);
    events
        .into_iter()
        .filter_map(|e| match e {
            Event::Segment(s) => Some(s),
            _ => None,
        })
        .collect()
}

/// The flag names of frame `n` (1-based).
#[track_caller]
pub(super) fn flags_of(rows: &[SegmentAnalysis], n: u64) -> String {
    rows.iter()
        .find(|r| r.frame.0 == n)
        .unwrap_or_else(|| panic!("no TCP row for frame {n}"))
        .flags
        .to_string()
}

/// Asserts the flags of each listed frame, and that every other frame has none.
#[track_caller]
pub(super) fn assert_flags(rows: &[SegmentAnalysis], expected: &[(u64, &str)]) {
    for r in rows {
        let want = expected
            .iter()
            .find(|(f, _)| *f == r.frame.0)
            .map_or("", |(_, s)| *s);
        assert_eq!(r.flags.to_string(), want, "frame {}: flags", r.frame);
    }
}

/// Writes the scenario as pcapng and compares every frame's flags, stream, relative
/// seq/ack, dup-ACK number and bytes in flight with tshark's, when tshark is installed.
#[track_caller]
pub(super) fn check_tshark(t: &Script, name: &str) {
    if !tshark_available() {
        eprintln!("tshark not installed: {name} not cross-checked");
        return;
    }
    let dir = std::env::temp_dir().join(format!("tcpdx-scenario-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{name}.pcapng"));
    t.write_pcapng(&path).unwrap();
    let fields = [
        "frame.number",
        "tcp.stream",
        "tcp.seq",
        "tcp.ack",
        "tcp.analysis.flags",
        "tcp.analysis.duplicate_ack_num",
        "tcp.analysis.bytes_in_flight",
    ];
    let mut names: Vec<&str> = AnalysisFlags::NAMES.iter().map(|(_, n)| *n).collect();
    names.sort();
    let flag_fields: Vec<String> = names.iter().map(|n| format!("tcp.analysis.{n}")).collect();
    let mut all: Vec<&str> = fields.to_vec();
    all.extend(flag_fields.iter().map(String::as_str));
    let rows = tshark_fields(&path, &all).expect("tshark ran");
    let ours = analyze(t);
    for row in rows {
        let frame: u64 = row[0].parse().unwrap();
        let got = ours
            .iter()
            .find(|r| r.frame.0 == frame)
            .unwrap_or_else(|| panic!("{name}: no row for frame {frame}"));
        assert_eq!(
            row[1],
            got.stream.0.to_string(),
            "{name} frame {frame}: stream"
        );
        assert_eq!(
            row[2],
            (got.seq as u32).to_string(),
            "{name} frame {frame}: seq"
        );
        let mut want: Vec<&str> = names
            .iter()
            .zip(&row[7..])
            .filter(|(_, v)| !v.is_empty())
            .map(|(n, _)| *n)
            .collect();
        want.sort();
        let mut have: Vec<&str> = got.flags.names().collect();
        have.sort();
        assert_eq!(have, want, "{name} frame {frame}: flags (tcpdx vs tshark)");
        assert_eq!(
            row[5],
            got.dup_ack_num.map_or(String::new(), |d| d.to_string()),
            "{name} frame {frame}: dup_ack_num"
        );
        assert_eq!(
            row[6],
            got.bytes_in_flight.map_or(String::new(), |d| d.to_string()),
            "{name} frame {frame}: bytes_in_flight"
        );
    }
}
