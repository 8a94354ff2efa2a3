//! tcpdx-detect: findings from TCP analysis events. Never sees bytes.
//!
//! capture -> wire -> core -> **detect** -> report. A [`Diagnoser`] is an [`EventSink`]: the
//! core's analyzer pushes every analysed segment (with its SACK blocks and options) into it;
//! per connection it infers the sender's behaviour (`infer`: round trips, slow start and
//! congestion avoidance, loss-recovery episodes, timeouts, the receiver's delayed ACKs, zero
//! windows, the capture point), divides each connection's time into states
//! (`budget`), and at the end runs the detectors (`detectors`) to produce [`Finding`]s,
//! most costly first, with the capture's [`TimeBudget`].
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod account;
pub mod budget;
pub mod detectors;
pub mod facts;
pub mod finding;
pub mod infer;
pub mod listing;
pub mod spill;
pub mod summary;

use std::collections::BTreeMap;
use std::sync::Arc;

use rustc_hash::FxHashMap;
use serde::Serialize;
use tcpdx_core::{EventSink, FlowSummary, SegmentAnalysis, SegmentDetail};

pub use budget::{ConnBudget, LimitTimes, State, TimeBudget};
pub use facts::CaptureFacts;
pub use finding::{Cost, Episode, Evidence, Finding, FindingKind, Severity, Source};
pub use infer::{CapturePoint, ConnTracker};
pub use listing::Listing;
pub use spill::{ChunkStore, MemStore, Spill, SpillPolicy};
pub use summary::{Group, GroupBy, Summary, Verdict, summarize};

use detectors::{ConnContext, DETECTORS};
use listing::Diagnosed;

/// What tcpdx inferred about one connection (for the JSON `connections` list).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ConnInference {
    /// `tcp.stream`.
    pub stream: u32,
    /// Client `ip:port`.
    pub client: String,
    /// Server `ip:port`.
    pub server: String,
    /// Direction carrying most data: `client_to_server` or `server_to_client`.
    pub main_direction: &'static str,
    /// Where the capture was taken.
    pub capture_point: CapturePoint,
    /// Path round trip in seconds (handshake, else smallest ACK delay), null if unknown.
    pub rtt_s: Option<f64>,
    /// Highest delivery rate over a round trip (bits/s).
    pub path_bps: f64,
    /// Goodput of the main direction: distinct payload bytes over the connection's
    /// lifetime (bits/s); the what-if projections (`cost.goodput_without_bps`) scale it.
    pub goodput_bps: f64,
    /// Round trips of the main sender.
    pub rounds: usize,
    /// Round trips in slow start (window growing by half or more per round).
    pub slow_start_rounds: usize,
    /// Round trips in congestion avoidance (window growing by about one segment per round).
    pub congestion_avoidance_rounds: usize,
    /// Largest number of segments sent in one round trip (the sender's largest window).
    pub max_packets_per_round: u32,
    /// Loss-recovery episodes of the main sender.
    pub loss_episodes: u32,
    /// Segments the receiver acknowledged per ACK (2 = every second segment, RFC 1122).
    pub segments_per_ack: Option<f64>,
    /// Median ACK delay of a lone segment, seconds (the receiver's delayed-ACK behaviour).
    pub lone_segment_ack_delay_s: Option<f64>,
}

/// The result of a diagnosis.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Diagnosis {
    /// Findings, most costly first.
    pub findings: Vec<Finding>,
    /// Where the time went.
    pub time_budget: TimeBudget,
    /// Per-connection inference.
    pub connections: Vec<ConnInference>,
    /// Connections beyond [`MAX_LISTED`] or [`MAX_LISTED_BYTES`], counted instead of listed.
    pub unlisted: Unlisted,
    /// What the capture shows of itself (clock, copies, missing frames, offload, snap
    /// length), over every connection, listed or not.
    pub capture: CaptureFacts,
}

/// Connections listed at most, with their findings, inference and budget (tcpdx choice:
/// a connection without findings takes about 0.6 KB). Beyond it, or beyond
/// [`MAX_LISTED_BYTES`], the least costly are folded into [`Unlisted`], so that memory
/// stays bounded on captures of millions of connections (SYN floods, scans).
pub const MAX_LISTED: usize = 50_000;

/// Bytes of listed connections at most (tcpdx choice: a connection with a finding takes
/// 2 to 6 KB, its evidence frames, episodes and texts; 32 MiB lists about ten thousand).
pub const MAX_LISTED_BYTES: usize = 32 << 20;

/// What was folded away to keep memory bounded: counts and costs, no details.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Unlisted {
    /// Connections not listed (their time still counts in the time budget's totals).
    pub connections: u64,
    /// Findings not listed, per kind: how many and their summed cost in seconds.
    pub findings: BTreeMap<FindingKind, KindTotal>,
}

/// A count of findings of one kind and their cost.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct KindTotal {
    /// Findings.
    pub count: u64,
    /// Summed cost, seconds.
    pub seconds: f64,
}

impl Unlisted {
    /// Adds another count.
    pub fn add(&mut self, o: &Unlisted) {
        self.connections += o.connections;
        for (k, t) in &o.findings {
            let e = self.findings.entry(*k).or_default();
            e.count += t.count;
            e.seconds += t.seconds;
        }
    }
}

impl Diagnosis {
    /// The highest severity among the findings.
    pub fn max_severity(&self) -> Option<Severity> {
        self.findings.iter().map(|f| f.severity).max()
    }
    /// Merges another capture's diagnosis into this one (re-sorted).
    pub fn merge(&mut self, other: Diagnosis) {
        if *self == Diagnosis::default() {
            // The first capture's: already sorted, and re-sorting 10,000s of findings shows.
            *self = other;
            return;
        }
        self.findings.extend(other.findings);
        sort_findings(&mut self.findings);
        // The totals, not a sum of the listed connections: they hold the unlisted ones too.
        let (tb, o) = (&mut self.time_budget, other.time_budget);
        tb.seconds += o.seconds;
        tb.states.add(&o.states);
        tb.connections.extend(o.connections);
        self.connections.extend(other.connections);
        self.unlisted.add(&other.unlisted);
        self.capture.add(&other.capture);
    }
}

/// Orders findings: most costly first, then most severe, then by stream.
pub fn sort_findings(f: &mut [Finding]) {
    // A cached key moves each finding once; a plain stable sort moved them log n times.
    f.sort_by_cached_key(|f| {
        (
            std::cmp::Reverse(total_order(f.cost.seconds)),
            std::cmp::Reverse(f.severity),
            f.stream,
            f.kind,
        )
    });
}

/// An integer that orders as `f64::total_cmp` orders `x` (the same bit trick), for sort keys.
pub(crate) fn total_order(x: f64) -> i64 {
    let bits = x.to_bits() as i64;
    bits ^ (((bits >> 63) as u64) >> 1) as i64
}

/// Consumes the core's events and diagnoses every connection at the end (or when the core
/// evicts it under `--max-flows`, so that its inference state is freed early).
#[derive(Debug)]
pub struct Diagnoser {
    /// Trackers with their stream, in no order (removal moves the last one into the gap).
    /// Boxed: a tracker is 3.4 KB, and growing or cleaning the table moved every one
    /// (a third of the cache misses of `diagnose` on many short connections).
    conns: Vec<(u32, Box<ConnTracker>)>,
    /// Stream -> index in `conns` (Fx: SipHash cost 6% of `diagnose`).
    slots: FxHashMap<u32, usize>,
    /// Recent streams and their indexes in `conns`, by the stream's low bits: bulk traffic
    /// interleaves dozens of connections, and a hash lookup per segment was a tenth of the
    /// diagnoser's time. An index read from it is checked against `conns`.
    recent: Box<[(u32, usize); RECENT]>,
    /// Connections already diagnosed, listed or folded away (bounded memory).
    listing: Listing,
    /// Streams diagnosed early because they closed (a bit per `tcp.stream`): their late
    /// segments (a retransmitted FIN, a last ACK) are ignored.
    closed: Vec<u64>,
    /// Segments since the last look for closed connections.
    since_sweep: u32,
    /// The caller sweeps ([`Diagnoser::sweep`]) instead of every [`CLOSED_SWEEP_EVERY`]
    /// segments.
    caller_sweeps: bool,
    /// Where the live connections' long-term state goes beyond a small budget.
    spill: Arc<Spill>,
}

/// Segments between two looks for closed, idle connections (tcpdx choice: the map walk
/// costs well under a nanosecond per segment at this interval). Every segment fed counts,
/// those of connections already diagnosed too, so the look happens at points a caller that
/// splits the segments among several diagnosers can reproduce.
pub const CLOSED_SWEEP_EVERY: u32 = 16_384;
/// Capture time a closed connection stays idle before it is diagnosed and its inference
/// state freed, so that memory follows the connections alive, not the capture's length
/// (tcpdx choice: well past the last ACK of a FIN; late retransmissions are ignored).
pub const CLOSED_IDLE_NS: i64 = 1_000_000_000;

/// Entries of [`Diagnoser`]'s recent-stream cache (a power of two; 64 KB): streams are
/// numbered in order, so a few thousand connections open at once do not collide (with 256,
/// the 2,000 of the `many` benchmark missed it nearly always: 5% of its `diagnose`).
const RECENT: usize = 4096;

impl Diagnoser {
    /// A new diagnoser.
    pub fn new() -> Self {
        Self::with_max_listed(MAX_LISTED)
    }

    /// A diagnoser listing at most `n` connections (tests; the default is [`MAX_LISTED`]).
    pub fn with_max_listed(n: usize) -> Self {
        Self::with_listing_bounds(n, MAX_LISTED_BYTES)
    }

    /// A diagnoser listing at most `n` connections in `bytes` (tests; the defaults are
    /// [`MAX_LISTED`] and [`MAX_LISTED_BYTES`]).
    pub fn with_listing_bounds(n: usize, bytes: usize) -> Self {
        Self {
            conns: Vec::new(),
            slots: FxHashMap::default(),
            // Stream 0 at index 0 is right if index 0 holds it: the check against `conns`
            // tells.
            recent: Box::new([(0, 0); RECENT]),
            listing: Listing::new(n, bytes),
            closed: Vec::new(),
            since_sweep: 0,
            caller_sweeps: false,
            spill: Arc::default(),
        }
    }

    /// Spills into `spill` (shared by this diagnoser's connections only) instead of memory:
    /// the caller keeps a handle to check [`Spill::take_error`] once it has finished.
    pub fn spilling_to(mut self, spill: Arc<Spill>) -> Self {
        self.spill = spill;
        self
    }

    /// Leaves the looks for closed connections to the caller ([`Diagnoser::sweep`]): one
    /// of several diagnosers that each see a share of the connections, swept at the points
    /// where a single diagnoser fed every segment would sweep.
    pub fn swept_by_caller(mut self) -> Self {
        self.caller_sweeps = true;
        self
    }

    /// Diagnoses and frees the connections closed and idle since `now_ns - CLOSED_IDLE_NS`
    /// (capture time in ns); their later segments are ignored.
    pub fn sweep(&mut self, now_ns: i64) {
        let done: Vec<u32> = self
            .conns
            .iter()
            .filter(|(_, c)| c.is_closed() && now_ns - c.last_ts >= CLOSED_IDLE_NS)
            .map(|(s, _)| *s)
            .collect();
        for s in done {
            if let Some(mut c) = self.remove(s) {
                let i = s as usize / 64;
                if self.closed.len() <= i {
                    self.closed.resize(i + 1, 0);
                }
                if let Some(w) = self.closed.get_mut(i) {
                    *w |= 1 << (s % 64);
                }
                diagnose(&mut c, &mut self.listing);
            }
        }
    }

    /// The tracker of `stream`, opened on its first segment.
    #[inline]
    fn tracker(&mut self, stream: u32) -> &mut ConnTracker {
        let e = self.recent.get(stream as usize % RECENT).copied();
        let slot = match e {
            Some((s, slot)) if s == stream && self.conns.get(slot).is_some_and(|c| c.0 == s) => {
                slot
            }
            _ => self.slot(stream),
        };
        &mut self.conns[slot].1
    }

    /// [`Diagnoser::tracker`]'s index past the recent cache (out of line).
    #[inline(never)]
    fn slot(&mut self, stream: u32) -> usize {
        let slot = match self.slots.get(&stream) {
            Some(&slot) => slot,
            None => {
                self.conns
                    .push((stream, Box::new(ConnTracker::spilling_to(&self.spill))));
                self.slots.insert(stream, self.conns.len() - 1);
                self.conns.len() - 1
            }
        };
        if let Some(e) = self.recent.get_mut(stream as usize % RECENT) {
            *e = (stream, slot);
        }
        slot
    }

    /// Takes the tracker of `stream` out (the last one moves into its place).
    fn remove(&mut self, stream: u32) -> Option<Box<ConnTracker>> {
        let slot = self.slots.remove(&stream)?;
        let (_, c) = self.conns.swap_remove(slot);
        if let Some((moved, _)) = self.conns.get(slot) {
            self.slots.insert(*moved, slot);
        }
        Some(c)
    }

    /// The spill this diagnoser writes to.
    pub fn spill(&self) -> &Arc<Spill> {
        &self.spill
    }

    fn is_closed_stream(&self, s: u32) -> bool {
        self.closed
            .get(s as usize / 64)
            .is_some_and(|w| w & (1 << (s % 64)) != 0)
    }

    /// The connections' inference so far, in no particular order (for tests and tools).
    pub fn trackers(&self) -> impl Iterator<Item = &ConnTracker> {
        self.conns.iter().map(|(_, c)| &**c)
    }

    /// Diagnoses every connection still open; the listing of all, to merge with other
    /// diagnosers' ([`Listing::merge`]) or to finish ([`Listing::into_diagnosis`]).
    pub fn into_listing(mut self) -> Listing {
        // In no particular order: the listing's result does not depend on the order of keeps.
        self.slots.clear();
        for (_, mut c) in std::mem::take(&mut self.conns) {
            diagnose(&mut c, &mut self.listing);
        }
        self.listing
    }

    /// Runs the detectors over every connection seen; findings most costly first.
    pub fn finish(self) -> Diagnosis {
        self.into_listing().into_diagnosis()
    }
}

/// Runs the detectors over one connection (at its end: it is dropped after) into `listing`.
fn diagnose(c: &mut ConnTracker, listing: &mut Listing) {
    c.finish();
    let unseen = c.senders.iter().map(|s| s.ack_unseen_flags).sum();
    let oversize = c.senders.iter().map(|s| s.oversize).sum();
    listing.capture.add(&c.facts.summary(unseen, oversize));
    c.prepare();
    c.keep_round_limits(c.main_dir());
    let pauses = infer::TimerPauses::of(c);
    let budget = budget::connection_budget(c, &pauses);
    let cx = ConnContext::new(c, &budget, &pauses);
    // The first detector's list is taken as it is and the others appended: collecting
    // them grew (reallocated and copied) the list at each detector with a finding.
    let mut findings: Vec<Finding> = Vec::new();
    for (_, d) in DETECTORS {
        let mut f = d(&cx);
        if findings.is_empty() {
            std::mem::swap(&mut findings, &mut f);
        } else {
            findings.append(&mut f);
        }
    }
    account::settle(
        &mut findings,
        cx.rel_s(c.first_ts),
        cx.rel_s(c.last_ts),
        |f, s| f.cost = cx.cost(s),
    );
    if findings.iter().all(|f| f.severity == Severity::Info) {
        findings.extend(detectors::path_limited::detect(&cx));
    }
    let inference = inference(&cx);
    for s in &mut c.senders {
        s.release();
    }
    listing.keep(Diagnosed::new(c.stream, findings, inference, budget));
}

impl Default for Diagnoser {
    fn default() -> Self {
        Self::new()
    }
}

impl EventSink for Diagnoser {
    fn segment(&mut self, a: &SegmentAnalysis) {
        self.segment_detail(a, &SegmentDetail::default());
    }
    fn segment_detail(&mut self, a: &SegmentAnalysis, d: &SegmentDetail) {
        if !self.is_closed_stream(a.stream.0) {
            self.tracker(a.stream.0).on_segment(a, d);
        }
        if d.captured < a.len {
            self.listing.capture.payload(d.captured, a.len);
        }
        self.since_sweep += 1;
        if self.since_sweep >= CLOSED_SWEEP_EVERY {
            self.since_sweep = 0;
            if !self.caller_sweeps {
                self.sweep(a.ts.0);
            }
        }
    }
    fn flow(&mut self, _f: &FlowSummary) {}
    /// Only the stream of an evicted flow is read.
    fn needs_flow_stats(&self) -> bool {
        false
    }
    /// A connection still open at the end is diagnosed by `finish`, not from its summary.
    fn needs_flows(&self) -> bool {
        false
    }
    fn flow_evicted(&mut self, f: &FlowSummary) {
        if let Some(mut c) = self.remove(f.stream.0) {
            diagnose(&mut c, &mut self.listing);
        }
    }
}

fn inference(cx: &ConnContext<'_>) -> ConnInference {
    let s = cx.sender();
    let (ss, ca) = infer::phases(&s.rounds);
    ConnInference {
        stream: cx.stream(),
        client: cx.conn.endpoints[0].clone(),
        server: cx.conn.endpoints[1].clone(),
        main_direction: match cx.dir {
            tcpdx_core::Dir::ClientToServer => "client_to_server",
            tcpdx_core::Dir::ServerToClient => "server_to_client",
        },
        capture_point: cx.capture_point,
        rtt_s: (cx.rtt > 0).then(|| cx.rtt as f64 / 1e9),
        path_bps: cx.path_bps,
        goodput_bps: cx.goodput_bps(),
        rounds: s.rounds.len(),
        slow_start_rounds: ss,
        congestion_avoidance_rounds: ca,
        max_packets_per_round: s.rounds.iter().map(|r| r.pkts).max().unwrap_or(0),
        loss_episodes: s.episode_count,
        segments_per_ack: s.segments_per_ack(),
        lone_segment_ack_delay_s: s.median_lone_ack_delay().map(|d| d as f64 / 1e9),
    }
}

tcpdx_core::codec_struct!(ConnInference {
    stream,
    client,
    server,
    main_direction,
    capture_point,
    rtt_s,
    path_bps,
    goodput_bps,
    rounds,
    slow_start_rounds,
    congestion_avoidance_rounds,
    max_packets_per_round,
    loss_episodes,
    segments_per_ack,
    lone_segment_ack_delay_s,
});

#[cfg(test)]
mod tests {
    use tcpdx_core::{Analyzer, AnalyzerConfig};
    use tcpdx_testkit::{Script, ScriptConfig};

    use super::*;

    #[test]
    fn total_order_orders_as_total_cmp() {
        let v = [
            f64::NEG_INFINITY,
            -3.5,
            -1e-300,
            -0.0,
            0.0,
            5e-324,
            1e-9,
            0.5,
            2.0,
            1e300,
            f64::INFINITY,
            f64::NAN,
        ];
        for a in v {
            for b in v {
                assert_eq!(
                    total_order(a).cmp(&total_order(b)),
                    a.total_cmp(&b),
                    "{a} {b}"
                );
            }
        }
    }

    #[test]
    fn a_tracker_moved_by_a_removal_is_not_read_from_the_recent_cache() {
        // Streams 0, 1, 2 in places 0, 1, 2; stream 0 closes and is swept, stream 2 moves to
        // place 0 and stream 3 opens in place 2, where the cache still places stream 2.
        let mut t = Script::new();
        let mut ids = vec![t.conn()];
        for i in 1..4u16 {
            ids.push(t.add_connection(ScriptConfig {
                client_port: 40000 + i,
                ..ScriptConfig::DEFAULT
            }));
        }
        for &id in &ids[..3] {
            t.on(id).at_ms(1).handshake();
        }
        t.on(ids[0]).at_ms(2).fin_from_client();
        t.at_ms(2).fin_from_server();
        let sweep_at = t.now_ms() + 2000.0;
        t.on(ids[3]).at_ms(sweep_at).handshake();
        for _ in 0..3 {
            t.on(ids[2]).client_sends(tcpdx_testkit::AUTO, 100);
            t.on(ids[3]).client_sends(tcpdx_testkit::AUTO, 100);
        }
        t.on(ids[2]).client_sends(tcpdx_testkit::AUTO, 100);
        let mut a = Analyzer::new(AnalyzerConfig::default());
        let mut d = Diagnoser::new();
        let mut swept = false;
        for f in t.frames() {
            if !swept && f.as_frame().ts.0 >= t.config().start.0 + 1_500_000_000 {
                d.sweep(f.as_frame().ts.0);
                swept = true;
            }
            a.handle_frame(&f.as_frame(), &mut d);
        }
        let mut seen: Vec<_> = d.trackers().map(|c| (c.stream, c.segments)).collect();
        seen.sort();
        // Handshakes: SYN and ACK from the client, SYN-ACK from the server.
        assert_eq!(seen, [(1, [2, 1]), (2, [2 + 4, 1]), (3, [2 + 3, 1])]);
    }

    #[test]
    fn a_long_connections_silent_gaps_go_to_the_spill() {
        // A request every 100 ms, answered at once and acknowledged: every request ends a
        // silent gap with nothing in flight.
        let mut t = Script::new();
        let id = t.conn();
        t.on(id).at_ms(1).handshake();
        let n = 1000u32;
        for i in 0..n {
            let at = 10.0 + 100.0 * f64::from(i);
            t.on(id).at_ms(at).client_sends(tcpdx_testkit::AUTO, 100);
            t.at_ms(at + 1.0).server_sends(tcpdx_testkit::AUTO, 100);
            t.at_ms(at + 1.5).client_acks(tcpdx_testkit::AUTO);
        }
        let spill = Arc::new(Spill::default());
        let mut a = Analyzer::new(AnalyzerConfig::default());
        let (mut spilled, mut plain) = (
            Diagnoser::new().spilling_to(spill.clone()),
            Diagnoser::new(),
        );
        for f in t.frames() {
            a.handle_frame(&f.as_frame(), &mut spilled);
        }
        let mut b = Analyzer::new(AnalyzerConfig::default());
        for f in t.frames() {
            b.handle_frame(&f.as_frame(), &mut plain);
        }
        let c = spilled.trackers().next().expect("the connection's tracker");
        let gaps = c.gaps.len();
        assert!(gaps >= n as usize - 1, "{gaps} gaps");
        // At most one blob's worth stays in memory; the rest went to the store.
        let records = spill.policy().gap_records;
        assert!(
            gaps - c.gaps.spilled() <= records,
            "{} in memory",
            gaps - c.gaps.spilled()
        );
        assert!(spill.live_blobs() as usize >= (gaps - records) / records);
        // Read back for the diagnosis, they give the diagnosis of gaps kept in memory.
        let (s, p) = (spilled.finish(), plain.finish());
        // The idle time of the budget comes from the gaps.
        let idle = s.time_budget.states.get(State::ApplicationIdle);
        assert!(idle > 50.0, "{idle} s idle");
        assert_eq!(s, p);
        assert_eq!(spill.live_blobs(), 0);
    }
}
