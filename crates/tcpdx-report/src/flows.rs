//! `tcpdx flows`: one row per connection and direction, as a table or JSON.
//!
//! JSON (`--json`): `{"version": 1, "flows": [{"stream": int, "duration_s": float,
//! "first_time": float, "saw_syn": bool, "directions": [{"dir": "c2s"|"s2c", "src": str,
//! "dst": str, "packets": int, "bytes": int, "unique_bytes": int, "retrans_bytes": int,
//! "retrans_packets": int, "goodput_bps": float, "duration_s": float, "rtt_min_s",
//! "rtt_median_s", "rtt_p95_s", "rtt_max_s": float|null, "rtt_samples": int, "mss":
//! int|null, "window_scale": int|null, "sack_permitted": bool, "max_window": int,
//! "zero_window_count": int, "zero_window_s": float}]}]}`. Times are seconds; `first_time`
//! is relative to the first frame of the capture. When `--max-flows` evicted connections,
//! a top-level `"evicted": {"connections": int, "packets": int, "bytes": int, "resumed": int,
//! "max_flows": int}` gives their totals (they are not listed one by one; a connection that
//! resumed after eviction is listed with its stream number, for the part after it resumed).

use std::io::{self, Write};

use serde::Serialize;
use tcpdx_core::{DirSummary, FlowSummary};

use crate::fmt::{bps, bytes, ms};

#[derive(Serialize)]
struct JsonDir {
    dir: &'static str,
    src: String,
    dst: String,
    packets: u64,
    bytes: u64,
    unique_bytes: u64,
    retrans_bytes: u64,
    retrans_packets: u64,
    goodput_bps: f64,
    duration_s: f64,
    rtt_min_s: Option<f64>,
    rtt_median_s: Option<f64>,
    rtt_p95_s: Option<f64>,
    rtt_max_s: Option<f64>,
    rtt_samples: u64,
    mss: Option<u16>,
    window_scale: Option<u8>,
    sack_permitted: bool,
    max_window: u64,
    zero_window_count: u64,
    zero_window_s: f64,
}

#[derive(Serialize)]
struct JsonFlow {
    stream: u32,
    first_time: f64,
    duration_s: f64,
    saw_syn: bool,
    directions: Vec<JsonDir>,
}

#[derive(Serialize)]
struct JsonFlows {
    version: u32,
    flows: Vec<JsonFlow>,
    #[serde(skip_serializing_if = "EvictedTotals::is_empty")]
    evicted: EvictedTotals,
}

/// Connections evicted by `--max-flows`, summed (they are not listed one by one).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct EvictedTotals {
    /// Evictions.
    pub connections: u64,
    /// Packets of the evicted connections up to their eviction.
    pub packets: u64,
    /// Payload bytes of the evicted connections up to their eviction.
    pub bytes: u64,
    /// Evicted connections that came back (listed, with their stream number).
    pub resumed: u64,
    /// The `--max-flows` limit in force.
    pub max_flows: u64,
}

impl EvictedTotals {
    /// Adds one evicted connection's summary.
    pub fn add(&mut self, f: &FlowSummary) {
        self.connections += 1;
        for d in &f.dirs {
            self.packets += d.packets;
            self.bytes += d.bytes;
        }
    }
    /// True when nothing was evicted.
    pub fn is_empty(&self) -> bool {
        self.connections == 0
    }
}

fn endpoint(d: &DirSummary, src: bool) -> String {
    let e = if src { d.src } else { d.dst };
    match e.addr {
        std::net::IpAddr::V6(a) => format!("[{a}]:{}", e.port),
        std::net::IpAddr::V4(a) => format!("{a}:{}", e.port),
    }
}

fn json_dir(d: &DirSummary, dir: &'static str) -> JsonDir {
    let s = |ns: i64| ns as f64 / 1e9;
    JsonDir {
        dir,
        src: endpoint(d, true),
        dst: endpoint(d, false),
        packets: d.packets,
        bytes: d.bytes,
        unique_bytes: d.unique_bytes,
        retrans_bytes: d.retrans_bytes,
        retrans_packets: d.retrans_packets,
        goodput_bps: d.goodput_bps,
        duration_s: d.duration_s,
        rtt_min_s: d.rtt.map(|r| s(r.min_ns)),
        rtt_median_s: d.rtt.map(|r| s(r.median_ns)),
        rtt_p95_s: d.rtt.map(|r| s(r.p95_ns)),
        rtt_max_s: d.rtt.map(|r| s(r.max_ns)),
        rtt_samples: d.rtt.map_or(0, |r| r.count),
        mss: d.mss,
        window_scale: d.window_scale,
        sack_permitted: d.sack_permitted,
        max_window: d.max_window,
        zero_window_count: d.zero_window_count,
        zero_window_s: d.zero_window_s,
    }
}

/// Writes the flows as the versioned JSON document. `capture_start_ns` is the first frame's time.
pub fn write_flows_json<W: Write>(
    out: &mut W,
    flows: &[FlowSummary],
    capture_start_ns: i64,
    evicted: &EvictedTotals,
) -> io::Result<()> {
    let doc = JsonFlows {
        version: 1,
        flows: flows
            .iter()
            .map(|f| JsonFlow {
                stream: f.stream.0,
                first_time: (f.first_ts.0 - capture_start_ns) as f64 / 1e9,
                duration_s: f.duration_s,
                saw_syn: f.saw_syn,
                directions: vec![json_dir(&f.dirs[0], "c2s"), json_dir(&f.dirs[1], "s2c")],
            })
            .collect(),
        evicted: *evicted,
    };
    serde_json::to_writer_pretty(&mut *out, &doc).map_err(io::Error::other)?;
    writeln!(out)
}

/// Writes a readable table: one line per direction that sent anything.
pub fn write_flows_table<W: Write>(
    out: &mut W,
    flows: &[FlowSummary],
    evicted: &EvictedTotals,
) -> io::Result<()> {
    write_flows_table_header(out)?;
    write_flows_table_rows(out, flows)?;
    write_flows_table_footer(out, evicted)
}

/// The table's header line ([`write_flows_table`] in parts, so that rows of consecutive
/// slices of flows can be formatted apart, on several threads, and concatenated).
pub fn write_flows_table_header<W: Write>(out: &mut W) -> io::Result<()> {
    writeln!(
        out,
        "{:>6}  {:<45}  {:>7}  {:>9}  {:>9}  {:>8}  {:>11}  {:>8}  {:>23}  {:>5} {:>3} {:>4}  {:>9}  zero win",
        "stream",
        "direction",
        "packets",
        "bytes",
        "unique",
        "retrans",
        "goodput",
        "duration",
        "rtt ms min/med/p95/max",
        "mss",
        "ws",
        "sack",
        "max win",
    )
}

/// The table's rows for `flows` (each row depends on its flow alone).
pub fn write_flows_table_rows<W: Write>(out: &mut W, flows: &[FlowSummary]) -> io::Result<()> {
    for f in flows {
        for d in &f.dirs {
            if d.packets == 0 {
                continue;
            }
            let dir = format!("{} -> {}", endpoint(d, true), endpoint(d, false));
            let rtt = d.rtt.map_or_else(
                || "-".to_string(),
                |r| {
                    format!(
                        "{}/{}/{}/{}",
                        ms(r.min_ns),
                        ms(r.median_ns),
                        ms(r.p95_ns),
                        ms(r.max_ns)
                    )
                },
            );
            let zw = if d.zero_window_count > 0 {
                format!("{} ({:.3} s)", d.zero_window_count, d.zero_window_s)
            } else {
                "-".to_string()
            };
            writeln!(
                out,
                "{:>6}  {:<45}  {:>7}  {:>9}  {:>9}  {:>8}  {:>11}  {:>7.3}s  {:>23}  {:>5} {:>3} {:>4}  {:>9}  {}",
                f.stream.0,
                dir,
                d.packets,
                bytes(d.bytes),
                bytes(d.unique_bytes),
                bytes(d.retrans_bytes),
                bps(d.goodput_bps),
                d.duration_s,
                rtt,
                d.mss.map_or("-".into(), |m| m.to_string()),
                d.window_scale.map_or("-".into(), |w| w.to_string()),
                if d.sack_permitted { "yes" } else { "no" },
                bytes(d.max_window),
                zw
            )?;
        }
    }
    Ok(())
}

/// The table's last line (evicted connections), if any.
pub fn write_flows_table_footer<W: Write>(out: &mut W, evicted: &EvictedTotals) -> io::Result<()> {
    if !evicted.is_empty() {
        writeln!(
            out,
            "evicted: {} connections ({} packets, {}) not listed: more than {} tracked at once \
             (--max-flows); {} of them resumed and are listed under their stream number",
            evicted.connections,
            evicted.packets,
            bytes(evicted.bytes),
            evicted.max_flows,
            evicted.resumed
        )?;
    }
    Ok(())
}
