//! The graphs' data: a sans-IO recorder of decimated per-connection series.
//!
//! A [`GraphRecorder`] is an [`EventSink`] fed with the analysed segments of the
//! connections chosen for the report (the caller filters). For each it keeps, in
//! [`Bins`] of bounded size, the time-sequence graph (data segments, retransmissions,
//! ACK line, receive-window line, SACK blocks), throughput, RTT, bytes in flight and the
//! inferred sender window (from tcpdx-detect's round trips); for storage connections the
//! response times and outstanding requests. Memory per connection is bounded by
//! [`SeriesConfig::max_bins`] per series (plus the inference's own caps), whatever the
//! capture's size.

use std::collections::HashMap;

use serde::Serialize;
use tcpdx_core::{AnalysisFlags as F, Dir, EventSink, FlowSummary, SegmentAnalysis, SegmentDetail};
use tcpdx_detect::ConnTracker;
use tcpdx_storage::{Request, StorageConfig, StorageSink, Tracker, Transaction};
use tcpdx_wire::Timestamp;

use super::bins::{Bins, Extremes, Range, Sum};

/// How the series are decimated.
#[derive(Clone, Copy, Debug)]
pub struct SeriesConfig {
    /// Most bins kept per series (a line series draws up to two points per bin).
    pub max_bins: usize,
    /// Throughput bin width before any widening (case 001's 100 ms).
    pub throughput_bin_ns: i64,
    /// First bin width of the other series (1 µs: short captures keep every sample).
    pub fine_bin_ns: i64,
}

impl Default for SeriesConfig {
    fn default() -> Self {
        Self {
            // tcpdx choice: ~2 bins per pixel column of a wide screen; with the
            // time-sequence graph's five series a graph stays under 20k points.
            max_bins: 2048,
            throughput_bin_ns: 100_000_000,
            fine_bin_ns: 1_000,
        }
    }
}

const ACK: u16 = 0x10;
const RETRANSMITTED: u16 = F::RETRANSMISSION | F::FAST_RETRANSMISSION | F::SPURIOUS_RETRANSMISSION;

/// A line: times (s since the capture's first frame) and values.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Line<V> {
    /// Times in seconds.
    pub t: Vec<f64>,
    /// Values.
    pub v: Vec<V>,
}

impl<V> Line<V> {
    /// Number of points.
    pub fn len(&self) -> usize {
        self.t.len()
    }
    /// True if there are no points.
    pub fn is_empty(&self) -> bool {
        self.t.is_empty()
    }
}

/// Vertical extents (sequence ranges) at times.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Ranges {
    /// Times in seconds.
    pub t: Vec<f64>,
    /// Lowest sequence number.
    pub lo: Vec<u64>,
    /// Highest sequence number (end of the segment).
    pub hi: Vec<u64>,
}

/// The time-sequence graph (tcptrace / Stevens style), in the sender's relative
/// sequence space.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct TimeSeq {
    /// Data segments (not retransmissions).
    pub data: Ranges,
    /// Retransmitted segments.
    pub retx: Ranges,
    /// SACK blocks of the receiver's ACKs.
    pub sack: Ranges,
    /// Cumulative ACK.
    pub ack: Line<u64>,
    /// ACK + advertised window: the highest sequence the receiver allows.
    pub rwnd: Line<u64>,
}

/// Throughput of the main direction.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Throughput {
    /// Bin width in seconds (100 ms unless the connection was too long for the cap).
    pub bin_s: f64,
    /// Bin start times in seconds.
    pub t: Vec<f64>,
    /// All payload, bits/s.
    pub total_bps: Vec<f64>,
    /// Payload not retransmitted, bits/s.
    pub goodput_bps: Vec<f64>,
}

/// Everything graphed for one connection.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ConnGraphs {
    /// `tcp.stream`.
    pub stream: u32,
    /// Direction graphed (`client_to_server` or `server_to_client`).
    pub dir: &'static str,
    /// Time-sequence graph.
    pub tseq: TimeSeq,
    /// Throughput over time.
    pub tput: Throughput,
    /// ACK RTT over time, milliseconds.
    pub rtt_ms: Line<f64>,
    /// Bytes in flight at each data segment.
    pub in_flight: Line<u64>,
    /// The sender's window inferred per round trip (largest bytes in flight of the round).
    pub sender_window: Line<u64>,
    /// What limited the sender, as stretches of rounds with one limit (shaded behind the
    /// window).
    pub limits: Vec<LimitBand>,
    /// Storage response times (ms) at each reply, if this is a storage connection.
    pub srt_ms: Line<f64>,
    /// Storage requests outstanding.
    pub outstanding: Line<u64>,
}

/// Consecutive rounds with one limit (`infer::limit::Limit`), seconds since the first frame.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LimitBand {
    /// Start.
    pub s: f64,
    /// End.
    pub e: f64,
    /// `cwnd`, `receiver_window`, `sender`, `pacing`, `recovery` or `timeout`.
    pub limit: &'static str,
}

/// The rounds `(start, end, limit)` (ns, in order) as bands: back-to-back rounds with one
/// limit merged; at most about `max` bands, a band shorter than the span over `max` taken
/// into the one before it.
pub fn limit_bands(rounds: &[(i64, i64, &'static str)], max: usize) -> Vec<LimitBand> {
    let mut out: Vec<(i64, i64, &'static str)> = Vec::new();
    for &(a, b, l) in rounds {
        match out.last_mut() {
            Some(last) if last.2 == l && a <= last.1 => last.1 = last.1.max(b),
            _ => out.push((a, b, l)),
        }
    }
    if out.len() > max.max(1)
        && let (Some(first), Some(last)) = (out.first().copied(), out.last().copied())
    {
        let width = (last.1 - first.0) / max.max(1) as i64;
        let mut kept: Vec<(i64, i64, &'static str)> = Vec::new();
        for band in out {
            match kept.last_mut() {
                Some(k) if band.1 - band.0 < width || (k.2 == band.2 && band.0 <= k.1) => {
                    k.1 = k.1.max(band.1)
                }
                _ => kept.push(band),
            }
        }
        out = kept;
    }
    out.into_iter()
        .map(|(a, b, l)| LimitBand {
            s: secs(a),
            e: secs(b),
            limit: l,
        })
        .collect()
}

impl ConnGraphs {
    /// Points in the time-sequence graph.
    pub fn tseq_points(&self) -> usize {
        let s = &self.tseq;
        s.data.t.len() + s.retx.t.len() + s.sack.t.len() + s.ack.len() + s.rwnd.len()
    }
}

/// One connection's bins.
#[derive(Debug)]
struct ConnSeries {
    main: Dir,
    data: Bins<Range>,
    retx: Bins<Range>,
    sack: Bins<Range>,
    ack: Bins<Extremes>,
    rwnd: Bins<Extremes>,
    tput: Bins<Sum>,
    rtt: Bins<Extremes>,
    in_flight: Bins<Extremes>,
    tracker: ConnTracker,
}

impl ConnSeries {
    fn new(main: Dir, cfg: &SeriesConfig) -> Self {
        fn fine<A: super::bins::Agg>(cfg: &SeriesConfig) -> Bins<A> {
            Bins::new(cfg.fine_bin_ns, cfg.max_bins)
        }
        Self {
            main,
            data: fine(cfg),
            retx: fine(cfg),
            sack: fine(cfg),
            ack: fine(cfg),
            rwnd: fine(cfg),
            tput: Bins::new(cfg.throughput_bin_ns, cfg.max_bins),
            rtt: fine(cfg),
            in_flight: fine(cfg),
            tracker: ConnTracker::default(),
        }
    }

    fn on_segment(&mut self, a: &SegmentAnalysis, d: &SegmentDetail) {
        self.tracker.on_segment(a, d);
        let t = a.rel_time_ns;
        if a.dir == self.main {
            if a.len == 0 {
                return;
            }
            let len = u64::from(a.len);
            let r = Range {
                t,
                lo: a.seq,
                hi: a.seq + len,
            };
            let retx = a.flags.any(RETRANSMITTED);
            if retx {
                self.retx.add(t, r);
            } else {
                self.data.add(t, r);
            }
            let new = if retx { 0 } else { len };
            self.tput.add(t, Sum { total: len, new });
            if let Some(f) = a.bytes_in_flight {
                self.in_flight.add(t, Extremes::at(t, f64::from(f)));
            }
        } else if a.tcp_flags & ACK != 0 {
            self.ack.add(t, Extremes::at(t, a.ack as f64));
            self.rwnd
                .add(t, Extremes::at(t, a.ack.saturating_add(a.window) as f64));
            for &(lo, hi) in d.sack_blocks() {
                self.sack.add(t, Range { t, lo, hi });
            }
            if let Some(rtt) = a.ack_rtt_ns {
                self.rtt.add(t, Extremes::at(t, rtt as f64 / 1e6));
            }
        }
    }

    fn finish(mut self, stream: u32, cfg: &SeriesConfig) -> ConnGraphs {
        self.tracker.finish();
        // The sender's flight per round: as it leaves next to the sender, the data arriving
        // per round trip from the receiver's side (`infer::limit`).
        let mut window = Bins::new(cfg.fine_bin_ns, cfg.max_bins);
        let mut rounds = Vec::new();
        for (r, l) in self.tracker.round_limits(self.main) {
            let t = r.start - self.tracker.capture_start;
            window.add(t, Extremes::at(t, l.flight_bytes as f64));
            rounds.push((t, r.end - self.tracker.capture_start, l.limit.as_str()));
        }
        ConnGraphs {
            stream,
            dir: match self.main {
                Dir::ClientToServer => "client_to_server",
                Dir::ServerToClient => "server_to_client",
            },
            tseq: TimeSeq {
                data: ranges(&self.data),
                retx: ranges(&self.retx),
                sack: ranges(&self.sack),
                ack: line(&self.ack, |v| v as u64),
                rwnd: line(&self.rwnd, |v| v as u64),
            },
            tput: throughput(&self.tput),
            rtt_ms: line(&self.rtt, |v| (v * 1e3).round() / 1e3),
            in_flight: line(&self.in_flight, |v| v as u64),
            sender_window: line(&window, |v| v as u64),
            limits: limit_bands(&rounds, cfg.max_bins),
            srt_ms: Line::default(),
            outstanding: Line::default(),
        }
    }
}

/// Seconds with microsecond precision (the shortest decimal that round-trips, so the
/// page stays small).
fn secs(ns: i64) -> f64 {
    (ns as f64 / 1e3).round() / 1e6
}

fn ranges(b: &Bins<Range>) -> Ranges {
    let mut out = Ranges::default();
    for (_, r) in b.iter() {
        let t = secs(r.t);
        // Two bins rounding to the same microsecond become one bar (the page aligns
        // series by time, so times within a series must be distinct).
        if out.t.last() == Some(&t) {
            let i = out.t.len() - 1;
            out.lo[i] = out.lo[i].min(r.lo);
            out.hi[i] = out.hi[i].max(r.hi);
            continue;
        }
        out.t.push(t);
        out.lo.push(r.lo);
        out.hi.push(r.hi);
    }
    out
}

fn line<V>(b: &Bins<Extremes>, conv: impl Fn(f64) -> V) -> Line<V> {
    let mut out = Line {
        t: Vec::new(),
        v: Vec::new(),
    };
    for (_, e) in b.iter() {
        for (t, v) in e.points() {
            let t = secs(t);
            // Two values at one microsecond: the page aligns series by time, so keep the
            // later one.
            if out.t.last() == Some(&t) {
                out.t.pop();
                out.v.pop();
            }
            out.t.push(t);
            out.v.push(conv(v));
        }
    }
    out
}

fn throughput(b: &Bins<Sum>) -> Throughput {
    let w = b.width_ns();
    let ws = w as f64 / 1e9;
    let mut out = Throughput {
        bin_s: ws,
        ..Throughput::default()
    };
    let mut push = |t: i64, s: &Sum| {
        out.t.push(secs(t));
        out.total_bps.push(s.total as f64 * 8.0 / ws);
        out.goodput_bps.push(s.new as f64 * 8.0 / ws);
    };
    let zero = Sum::default();
    let mut prev: Option<i64> = None;
    for (t, s) in b.iter() {
        // Idle bins are zero: one zero bin after a burst and one before the next keep
        // the plot honest without listing every empty bin.
        if let Some(p) = prev
            && t > p + w
        {
            push(p + w, &zero);
            if t > p + 2 * w {
                push(t - w, &zero);
            }
        }
        push(t, s);
        prev = Some(t);
    }
    out
}

/// One storage connection's bins.
#[derive(Debug)]
struct StorageConn {
    srt: Bins<Extremes>,
    outstanding: Bins<Extremes>,
    n: u64,
}

/// Storage response times and outstanding requests per connection (a [`StorageSink`]).
#[derive(Debug)]
pub struct StorageSeries {
    cfg: SeriesConfig,
    origin_ns: i64,
    conns: HashMap<u32, StorageConn>,
}

impl StorageSeries {
    fn conn(&mut self, stream: u32) -> &mut StorageConn {
        let cfg = self.cfg;
        self.conns.entry(stream).or_insert_with(|| StorageConn {
            srt: Bins::new(cfg.fine_bin_ns, cfg.max_bins),
            outstanding: Bins::new(cfg.fine_bin_ns, cfg.max_bins),
            n: 0,
        })
    }
}

impl StorageSink for StorageSeries {
    fn start(&mut self, ts: Timestamp) {
        self.origin_ns = ts.0;
    }
    fn request(&mut self, r: &Request) {
        let t = r.at.ts.0 - self.origin_ns;
        let c = self.conn(r.stream.0);
        c.n += 1;
        let n = c.n as f64;
        c.outstanding.add(t, Extremes::at(t, n));
    }
    fn transaction(&mut self, tr: &Transaction) {
        let (Some(reply), Some(srt)) = (tr.reply, tr.srt_ns()) else {
            return;
        };
        let t = reply.last.ts.0 - self.origin_ns;
        let c = self.conn(tr.stream.0);
        c.n = c.n.saturating_sub(1);
        let n = c.n as f64;
        c.outstanding.add(t, Extremes::at(t, n));
        c.srt.add(t, Extremes::at(t, srt as f64 / 1e6));
    }
}

/// Records the series of the chosen connections: feed it their segments (and payloads,
/// for the storage series), then call [`GraphRecorder::finish`].
pub struct GraphRecorder {
    cfg: SeriesConfig,
    order: Vec<u32>,
    conns: HashMap<u32, ConnSeries>,
    storage: Tracker<StorageSeries>,
}

impl GraphRecorder {
    /// A recorder for `chosen` connections: (stream, direction to graph).
    pub fn new(chosen: &[(u32, Dir)], cfg: SeriesConfig) -> Self {
        let sink = StorageSeries {
            cfg,
            origin_ns: 0,
            conns: HashMap::new(),
        };
        Self {
            cfg,
            order: chosen.iter().map(|c| c.0).collect(),
            conns: chosen
                .iter()
                .map(|&(s, d)| (s, ConnSeries::new(d, &cfg)))
                .collect(),
            storage: Tracker::new(StorageConfig::default(), sink),
        }
    }

    /// The graphs, in the order the connections were chosen (those never seen are left
    /// out).
    pub fn finish(mut self) -> Vec<ConnGraphs> {
        self.storage.finish();
        let mut storage = std::mem::take(&mut self.storage.sink_mut().conns);
        let mut out = Vec::new();
        for s in &self.order {
            let Some(c) = self.conns.remove(s) else {
                continue;
            };
            if c.tracker.segments == [0, 0] {
                continue;
            }
            let mut g = c.finish(*s, &self.cfg);
            if let Some(st) = storage.remove(s) {
                g.srt_ms = line(&st.srt, |v| (v * 1e3).round() / 1e3);
                g.outstanding = line(&st.outstanding, |v| v as u64);
            }
            out.push(g);
        }
        out
    }
}

impl EventSink for GraphRecorder {
    fn segment_detail(&mut self, a: &SegmentAnalysis, d: &SegmentDetail) {
        if let Some(c) = self.conns.get_mut(&a.stream.0) {
            c.on_segment(a, d);
            self.storage.segment_detail(a, d);
        }
    }
    fn payload(&mut self, a: &SegmentAnalysis, p: &[u8]) {
        if self.conns.contains_key(&a.stream.0) {
            self.storage.payload(a, p);
        }
    }
    fn flow_evicted(&mut self, f: &FlowSummary) {
        self.storage.flow_evicted(f);
    }
}

#[cfg(test)]
mod tests {
    use std::net::{IpAddr, Ipv4Addr};

    use tcpdx_core::{AnalysisFlags, StreamId};
    use tcpdx_wire::FrameNo;

    use super::*;

    const MS: i64 = 1_000_000;

    fn seg(frame: u64, t: i64, dir: Dir, seq: u64, ack: u64, len: u32) -> SegmentAnalysis {
        let (a, b) = (
            IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)),
            IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)),
        );
        let (src, dst) = if dir == Dir::ClientToServer {
            (a, b)
        } else {
            (b, a)
        };
        SegmentAnalysis {
            frame: FrameNo(frame),
            stream: StreamId(0),
            ts: Timestamp(1_000 * 1_000_000_000 + t),
            rel_time_ns: t,
            dir,
            src,
            sport: 1000,
            dst,
            dport: 2000,
            seq,
            ack,
            tcp_flags: ACK,
            len,
            window_raw: 100,
            window: 65_000,
            flags: AnalysisFlags::default(),
            dup_ack_num: None,
            bytes_in_flight: None,
            ack_rtt_ns: None,
            acks_frame: None,
        }
    }

    fn record(segs: &[(SegmentAnalysis, SegmentDetail)], cfg: SeriesConfig) -> ConnGraphs {
        let mut r = GraphRecorder::new(&[(0, Dir::ClientToServer)], cfg);
        for (a, d) in segs {
            r.segment_detail(a, d);
        }
        r.finish().pop().expect("stream 0 graphed")
    }

    #[test]
    fn a_short_transfer_keeps_every_segment_and_ack() {
        let c2s = Dir::ClientToServer;
        let s2c = Dir::ServerToClient;
        let mut a = seg(1, 0, c2s, 1, 1, 1000);
        a.bytes_in_flight = Some(1000);
        let mut b = seg(2, MS, c2s, 1001, 1, 1000);
        b.bytes_in_flight = Some(2000);
        let mut c = seg(3, 2 * MS, s2c, 1, 2001, 0);
        c.ack_rtt_ns = Some(2 * MS);
        let mut retx = seg(4, 3 * MS, c2s, 1001, 1, 1000);
        retx.flags.set(AnalysisFlags::RETRANSMISSION);
        let mut d = SegmentDetail::default();
        d.sack[0] = (3001, 4001);
        d.sack_count = 1;
        let segs = [
            (a, SegmentDetail::default()),
            (b, SegmentDetail::default()),
            (c, d),
            (retx, SegmentDetail::default()),
        ];
        let g = record(&segs, SeriesConfig::default());
        assert_eq!(g.tseq.data.t, vec![0.0, 0.001]);
        assert_eq!(g.tseq.data.lo, vec![1, 1001]);
        assert_eq!(g.tseq.data.hi, vec![1001, 2001]);
        assert_eq!(g.tseq.retx.t, vec![0.003]);
        assert_eq!(g.tseq.ack.v, vec![2001]);
        assert_eq!(g.tseq.rwnd.v, vec![2001 + 65_000]);
        assert_eq!((g.tseq.sack.lo[0], g.tseq.sack.hi[0]), (3001, 4001));
        assert_eq!(g.rtt_ms.v, vec![2.0]);
        assert_eq!(g.in_flight.v, vec![1000, 2000]);
        // 3000 bytes in the first 100 ms bin, 1000 of them retransmitted.
        assert_eq!(g.tput.t, vec![0.0]);
        assert_eq!(g.tput.total_bps, vec![3000.0 * 8.0 / 0.1]);
        assert_eq!(g.tput.goodput_bps, vec![2000.0 * 8.0 / 0.1]);
        assert_eq!(g.dir, "client_to_server");
    }

    #[test]
    fn a_long_transfer_stays_under_the_cap() {
        let cfg = SeriesConfig {
            max_bins: 64,
            ..SeriesConfig::default()
        };
        let mut segs = Vec::new();
        for i in 0..10_000u64 {
            let t = i as i64 * MS;
            let mut a = seg(2 * i, t, Dir::ClientToServer, 1 + i * 100, 1, 100);
            a.bytes_in_flight = Some((i % 37) as u32 * 100);
            segs.push((a, SegmentDetail::default()));
            let mut ack = seg(
                2 * i + 1,
                t + MS / 2,
                Dir::ServerToClient,
                1,
                1 + i * 100,
                0,
            );
            ack.ack_rtt_ns = Some(MS / 2 + (i as i64 % 7) * 1000);
            segs.push((ack, SegmentDetail::default()));
        }
        let g = record(&segs, cfg);
        assert!(g.tseq.data.t.len() <= 64, "{}", g.tseq.data.t.len());
        assert!(g.tseq.ack.len() <= 128 && g.rtt_ms.len() <= 128);
        assert!(g.tput.t.len() <= 3 * 64);
        // The ranges still span the whole transfer.
        assert_eq!(g.tseq.data.lo.first(), Some(&1));
        assert_eq!(g.tseq.data.hi.last(), Some(&(1 + 10_000 * 100)));
        // Min/max decimation keeps the extremes of bytes in flight.
        assert_eq!(g.in_flight.v.iter().max(), Some(&3600));
        assert_eq!(g.in_flight.v.iter().min(), Some(&0));
        let bytes: f64 = g
            .tput
            .total_bps
            .iter()
            .map(|b| b / 8.0 * g.tput.bin_s)
            .sum();
        assert!((bytes - 1_000_000.0).abs() < 1e-3, "{bytes}");
    }

    #[test]
    fn idle_time_shows_as_zero_throughput() {
        let segs = [
            (
                seg(1, 0, Dir::ClientToServer, 1, 1, 100),
                SegmentDetail::default(),
            ),
            (
                seg(2, 1000 * MS, Dir::ClientToServer, 101, 1, 100),
                SegmentDetail::default(),
            ),
        ];
        let g = record(&segs, SeriesConfig::default());
        assert_eq!(g.tput.t, vec![0.0, 0.1, 0.9, 1.0]);
        assert_eq!(g.tput.total_bps[1], 0.0);
        assert_eq!(g.tput.total_bps[2], 0.0);
    }

    #[test]
    fn back_to_back_rounds_with_one_limit_are_one_band_and_bands_stay_bounded() {
        const MS: i64 = 1_000_000;
        let rounds = [
            (0, 10 * MS, "cwnd"),
            (10 * MS, 20 * MS, "cwnd"),
            (20 * MS, 30 * MS, "receiver_window"),
            // after an idle gap: a band of its own, even with the same limit
            (50 * MS, 60 * MS, "receiver_window"),
        ];
        let b = limit_bands(&rounds, 100);
        let got: Vec<(f64, f64, &str)> = b.iter().map(|x| (x.s, x.e, x.limit)).collect();
        assert_eq!(
            got,
            [
                (0.0, 0.02, "cwnd"),
                (0.02, 0.03, "receiver_window"),
                (0.05, 0.06, "receiver_window")
            ]
        );
        // Alternating limits on every round: at most about `max` bands.
        let many: Vec<(i64, i64, &'static str)> = (0..10_000)
            .map(|i| {
                let l = if i % 2 == 0 { "cwnd" } else { "sender" };
                (i * MS, (i + 1) * MS, l)
            })
            .collect();
        let b = limit_bands(&many, 100);
        assert!(b.len() <= 101, "{}", b.len());
        assert!(b.windows(2).all(|w| w[0].e <= w[1].s));
        assert_eq!(limit_bands(&many, 20_000).len(), 10_000);
    }

    #[test]
    fn unseen_streams_are_left_out() {
        let r = GraphRecorder::new(&[(7, Dir::ClientToServer)], SeriesConfig::default());
        assert!(r.finish().is_empty());
    }
}
