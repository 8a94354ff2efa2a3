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

use crate::fmt::{Fixed, Human, bps, bps_human, bytes, bytes_human, ms, ms_fixed, write_endpoint};
use crate::line::{Line, ROW, Row, width};

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
    crate::fmt::endpoint(e.addr, e.port)
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
    serde_json::to_writer_pretty(&mut *out, &doc).map_err(io::Error::from)?;
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

/// The table's header line.
fn write_flows_table_header<W: Write>(out: &mut W) -> io::Result<()> {
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

/// Rows are gathered into batches of at least this many bytes before they are written.
const BATCH: usize = 1 << 16;

/// The table's rows for `flows`, streamed in batches.
// Not inlined: keeps the row cost apart in profiles (it runs once per table).
#[inline(never)]
fn write_flows_table_rows<W: Write>(out: &mut W, flows: &[FlowSummary]) -> io::Result<()> {
    let mut line = Line::with_capacity(BATCH + ROW);
    for f in flows {
        for d in &f.dirs {
            if d.packets == 0 {
                continue;
            }
            if !line.row_if(|r| fast_row(r, f.stream.0, d).is_some()) {
                out.write_all(line.as_bytes())?;
                line.clear();
                write_row_fmt(out, f.stream.0, d)?;
            }
            if line.len() >= BATCH {
                out.write_all(line.as_bytes())?;
                line.clear();
            }
        }
    }
    out.write_all(line.as_bytes())
}

/// Writes a row as [`write_row_fmt`] does, each column padded by its text's length (ASCII:
/// one byte per column), with no allocation; `None` (the row is dropped) if a number needs
/// `core::fmt`, which never happens for values from a capture (a float would have to be
/// infinite, NaN or beyond 10^16). Such a row is far shorter than a [`Row`] window.
/// The spaces between columns are written together with the next column's padding.
#[inline]
fn fast_row(r: &mut Row<'_>, stream: u32, d: &DirSummary) -> Option<()> {
    num(r, 0, u64::from(stream), 6);
    r.spaces(2);
    let start = r.len();
    write_endpoint(r, d.src.addr, d.src.port);
    r.bytes8(b" -> \0\0\0\0", 4);
    write_endpoint(r, d.dst.addr, d.dst.port);
    let dir_pad = 45usize.saturating_sub(r.len() - start);
    num(r, dir_pad + 2, d.packets, 7);
    human(r, 2, bytes_human(d.bytes)?, 9);
    human(r, 2, bytes_human(d.unique_bytes)?, 9);
    human(r, 2, bytes_human(d.retrans_bytes)?, 8);
    human(r, 2, bps_human(d.goodput_bps)?, 11);
    let duration = Fixed::new(d.duration_s, 3)?;
    align(r, 2, duration.len(), 7);
    duration.write(r);
    r.byte(b's');
    match d.rtt {
        Some(t) => {
            let ms = [
                ms_fixed(t.min_ns)?,
                ms_fixed(t.median_ns)?,
                ms_fixed(t.p95_ns)?,
                ms_fixed(t.max_ns)?,
            ];
            let len: usize = ms.iter().map(Fixed::len).sum::<usize>() + 3;
            align(r, 2, len, 23);
            for (i, m) in ms.iter().enumerate() {
                if i > 0 {
                    r.byte(b'/');
                }
                m.write(r);
            }
        }
        None => dash(r, 2, 23),
    }
    match d.mss {
        Some(m) => num(r, 2, u64::from(m), 5),
        None => dash(r, 2, 5),
    }
    match d.window_scale {
        Some(w) => num(r, 1, u64::from(w), 3),
        None => dash(r, 1, 3),
    }
    r.bytes8(
        if d.sack_permitted {
            b"  yes\0\0\0"
        } else {
            b"   no\0\0\0"
        },
        5,
    );
    human(r, 2, bytes_human(d.max_window)?, 9);
    r.spaces(2);
    if d.zero_window_count > 0 {
        let secs = Fixed::new(d.zero_window_s, 3)?;
        r.u64(d.zero_window_count);
        r.bytes8(b" (\0\0\0\0\0\0", 2);
        secs.write(r);
        r.bytes8(b" s)\n\0\0\0\0", 4);
    } else {
        r.bytes8(b"-\n\0\0\0\0\0\0", 2);
    }
    Some(())
}

/// Moves to a column right-aligned in `w` for a text of `len` bytes, after `gap` spaces.
#[inline(always)]
fn align(r: &mut Row<'_>, gap: usize, len: usize, w: usize) {
    r.spaces(gap + w.saturating_sub(len));
}

/// `n` right-aligned in `w` columns after `gap` spaces.
#[inline(always)]
fn num(r: &mut Row<'_>, gap: usize, n: u64, w: usize) {
    align(r, gap, width(n), w);
    r.u64(n);
}

/// `h` right-aligned in `w` columns after `gap` spaces.
#[inline(always)]
fn human(r: &mut Row<'_>, gap: usize, h: Human, w: usize) {
    align(r, gap, h.len(), w);
    h.write(r);
}

/// `-` right-aligned in `w` columns after `gap` spaces.
#[inline(always)]
fn dash(r: &mut Row<'_>, gap: usize, w: usize) {
    align(r, gap, 1, w);
    r.byte(b'-');
}

/// One row with `format!` (for values [`fast_row`] leaves to `core::fmt`).
#[cold]
fn write_row_fmt<W: Write>(out: &mut W, stream: u32, d: &DirSummary) -> io::Result<()> {
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
        stream,
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
    )
}

/// The table's last line (evicted connections), if any.
fn write_flows_table_footer<W: Write>(out: &mut W, evicted: &EvictedTotals) -> io::Result<()> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
    use tcpdx_core::{Endpoint, RttSummary, StreamId};
    use tcpdx_wire::Timestamp;

    /// The rows as they were written with `format!` per field: the reference.
    fn reference_rows(flows: &[FlowSummary]) -> String {
        use crate::fmt::reference::{bps, bytes, ms};
        fn endpoint(e: Endpoint) -> String {
            match e.addr {
                IpAddr::V6(a) => format!("[{a}]:{}", e.port),
                IpAddr::V4(a) => format!("{a}:{}", e.port),
            }
        }
        let mut out = String::new();
        for f in flows {
            for d in &f.dirs {
                if d.packets == 0 {
                    continue;
                }
                let dir = format!("{} -> {}", endpoint(d.src), endpoint(d.dst));
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
                out += &format!(
                    "{:>6}  {:<45}  {:>7}  {:>9}  {:>9}  {:>8}  {:>11}  {:>7.3}s  {:>23}  {:>5} {:>3} {:>4}  {:>9}  {}\n",
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
                );
            }
        }
        out
    }

    use crate::fmt::reference::Rng;

    /// Random flow fields for the comparison with the reference.
    impl Rng {
        /// Mostly small numbers, sometimes any (shifting by a random amount).
        fn any(&mut self) -> u64 {
            let s = self.next() % 64;
            self.next() >> s
        }
        fn f64(&mut self) -> f64 {
            match self.next() % 8 {
                0 => f64::from_bits(self.next()),
                1 => 0.0,
                2 => -(self.any() as f64) / 1e9,
                _ => self.any() as f64 / 1e9,
            }
        }
        fn endpoint(&mut self) -> Endpoint {
            let addr = match self.next() % 4 {
                0 => IpAddr::V6(Ipv6Addr::from(
                    u128::from(self.next()) << (self.next() % 65),
                )),
                1 => IpAddr::V6(Ipv4Addr::from(self.next() as u32).to_ipv6_mapped()),
                _ => IpAddr::V4(Ipv4Addr::from(self.next() as u32)),
            };
            Endpoint {
                addr,
                port: self.next() as u16,
            }
        }
        fn dir(&mut self) -> DirSummary {
            let ns = |r: &mut Rng| r.any() as i64 * if r.one_in(9) { -1 } else { 1 };
            DirSummary {
                src: self.endpoint(),
                dst: self.endpoint(),
                packets: self.any() * u64::from(!self.one_in(5)),
                bytes: self.any(),
                unique_bytes: self.any(),
                retrans_bytes: self.any(),
                retrans_packets: self.any(),
                goodput_bps: self.f64() * 1e9,
                duration_s: self.f64(),
                rtt: (!self.one_in(4)).then(|| RttSummary {
                    count: self.any(),
                    min_ns: ns(self),
                    median_ns: ns(self),
                    p95_ns: ns(self),
                    max_ns: ns(self),
                }),
                mss: (!self.one_in(3)).then(|| self.next() as u16),
                window_scale: (!self.one_in(3)).then(|| self.next() as u8),
                sack_permitted: self.one_in(2),
                max_window: self.any(),
                zero_window_count: self.any() * u64::from(self.one_in(2)),
                zero_window_s: self.f64(),
            }
        }
    }

    #[test]
    fn table_rows_like_format() {
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        let flows: Vec<FlowSummary> = (0..100_000)
            .map(|_| FlowSummary {
                stream: StreamId(rng.next() as u32 >> (rng.next() % 32)),
                first_ts: Timestamp(0),
                last_ts: Timestamp(0),
                duration_s: 0.0,
                saw_syn: true,
                dirs: [rng.dir(), rng.dir()],
            })
            .collect();
        let mut out = Vec::new();
        write_flows_table_rows(&mut out, &flows).unwrap();
        let want = reference_rows(&flows);
        for (got, want) in String::from_utf8(out).unwrap().lines().zip(want.lines()) {
            assert_eq!(got, want);
        }
        let mut out = Vec::new();
        write_flows_table_rows(&mut out, &flows).unwrap();
        assert_eq!(out, want.as_bytes());
        for d in flows.iter().flat_map(|f| &f.dirs) {
            let text = |e: Endpoint| match e.addr {
                IpAddr::V6(a) => format!("[{a}]:{}", e.port),
                IpAddr::V4(a) => format!("{a}:{}", e.port),
            };
            assert_eq!(endpoint(d, true), text(d.src));
            assert_eq!(endpoint(d, false), text(d.dst));
        }
    }
}
