//! Storage findings for the diagnosis layer: what the transactions add to tcpdx-detect's
//! TCP findings.
//!
//! - `application-limited` with storage numbers: outstanding I/O versus the path's
//!   bandwidth-delay product ("the client keeps 4 x 64 KiB outstanding; the path needs
//!   391 KB"), and server time versus network time per data operation, which tells a
//!   request-limited client from a slow server.
//! - `fixed-duration-stall` on response times: operations the server held (no
//!   retransmission and no full window meanwhile) clustered at one duration in at least
//!   three separate holds. See: ../shared/cases/003_a555277df593d0fd.txt.
//! - the other held operations, named with their service times on the connection's
//!   `application-limited` finding (one hold, however long, shows no repeating timer).
//!
//! [`StorageEvidence`] is the [`StorageSink`] that collects what these need (bounded);
//! [`add_findings`] merges the findings into a [`Diagnosis`]: it enriches a finding of the
//! same kind and stream when tcpdx-detect already made one, else it adds its own.

use rustc_hash::FxHashMap;
use tcpdx_core::StreamId;
use tcpdx_detect::account::settle_diagnosis;
use tcpdx_detect::detectors::fixed_duration_stall::{MIN_REPEATS, SAME_DURATION_TOLERANCE};
use tcpdx_detect::{CapturePoint, Diagnosis, Finding, FindingKind, Severity};
use tcpdx_wire::{FrameNo, Timestamp};

use crate::srt::{SrtCollector, SrtConfig, SrtReport, StreamSummary};
use crate::tcplog::{TcpDuring, TcpLog, TcpLogs};
use crate::transaction::{Notice, Request, StorageSink, Transaction};

/// Slowest response time considered for a stall (tcpdx choice: well above LAN and WAN
/// service times, below the 200 ms minimum RTO).
pub const STALL_MIN_NS: i64 = 100_000_000;
/// A stall is that many times the operation's median response time or more (tcpdx choice).
pub const STALL_OVER_MEDIAN: f64 = 10.0;
/// Slow transactions remembered (bounded memory).
const MAX_SLOW: usize = 4096;
/// Data operations needed before judging a connection's request pattern (tcpdx choice).
pub const MIN_DATA_OPS: u64 = 8;
/// Outstanding bytes below this share of the bandwidth-delay product leave the path idle
/// part of each round trip (tcpdx choice).
pub const BDP_SHARE: f64 = 0.8;
/// Server time above this share of the response time makes the server the bottleneck
/// (tcpdx choice).
pub const SERVER_SHARE: f64 = 0.5;

/// Collects what the storage findings need: the SRT aggregation, slow transactions, and
/// each storage connection's silences and TCP trouble.
#[derive(Debug)]
pub struct StorageEvidence {
    srt: SrtCollector,
    slow: Vec<Transaction>,
    tcp: TcpLogs,
}

impl Default for StorageEvidence {
    fn default() -> Self {
        Self::new()
    }
}

impl StorageEvidence {
    /// Empty.
    pub fn new() -> Self {
        Self {
            srt: SrtCollector::new(SrtConfig::default()),
            slow: Vec::new(),
            tcp: TcpLogs::default(),
        }
    }

    /// Adds TCP logs collected elsewhere (the trackers' `tcp_log` and `tcp_last` calls went
    /// there).
    pub fn add_tcp_logs(&mut self, logs: TcpLogs) {
        self.tcp.merge(logs);
    }

    /// The SRT report.
    pub fn report(&self) -> SrtReport {
        self.srt.report(self.tcp.last().map(|(_, ts)| ts))
    }
}

impl StorageSink for StorageEvidence {
    fn start(&mut self, ts: Timestamp) {
        self.srt.start(ts);
    }
    fn request(&mut self, r: &Request) {
        self.srt.request(r);
    }
    fn notice(&mut self, n: &Notice) {
        self.srt.notice(n);
    }
    fn transaction(&mut self, t: &Transaction) {
        self.srt.transaction(t);
        if t.srt_ns().is_some_and(|s| s >= STALL_MIN_NS) && self.slow.len() < MAX_SLOW {
            self.slow.push(*t);
        }
    }
    fn tcp_log(&mut self, stream: StreamId, log: TcpLog) {
        self.tcp.add(stream, log);
    }
    fn tcp_last(&mut self, frame: FrameNo, ts: Timestamp) {
        self.tcp.saw(frame, ts);
    }
}

impl StorageEvidence {
    fn during(&self, stream: StreamId, from: i64, to: i64) -> TcpDuring {
        self.tcp
            .get(stream)
            .map_or_else(TcpDuring::default, |log| log.during(from, to))
    }
}

/// Merges the storage findings into `diag` (re-sorted, most costly first).
pub fn add_findings(ev: &StorageEvidence, diag: &mut Diagnosis) {
    let report = ev.report();
    let origin = ev.srt_origin();
    for f in stall_findings(ev, &report, origin) {
        // A held operation's note goes on the TCP finding that counts its silence, if any.
        if f.kind == FindingKind::ApplicationLimited && f.cost.seconds == 0.0 {
            if diag
                .findings
                .iter()
                .any(|o| o.kind == f.kind && o.stream == f.stream && o.file.is_none())
            {
                merge(diag, f);
            }
            continue;
        }
        merge(diag, f);
    }
    for c in &report.connections {
        if let Some(f) = request_pattern(c, diag) {
            merge(diag, f);
        }
    }
    // One account of each connection's time: an operation's wait is counted once, under
    // the stall that names the operation, not again as TCP idle time.
    settle_diagnosis(diag);
}

impl StorageEvidence {
    fn srt_origin(&self) -> i64 {
        self.srt.origin_ns().unwrap_or(0)
    }
}

/// Adds `f`, or folds its text and evidence into the finding of the same kind and stream.
fn merge(diag: &mut Diagnosis, f: Finding) {
    if let Some(old) = diag
        .findings
        .iter_mut()
        .find(|o| o.kind == f.kind && o.stream == f.stream && o.file.is_none())
    {
        old.explanation.push_str(" Storage: ");
        old.explanation.push_str(&f.explanation);
        for e in f.evidence {
            old.evidence(e.frame, e.role);
        }
        for r in f.recommendations {
            if !old.recommendations.contains(&r) {
                old.recommendations.push(r);
            }
        }
        old.confidence = old.confidence.max(f.confidence);
        return;
    }
    // A connection with a storage problem is no longer "healthy, limited by the path".
    if f.severity > Severity::Info {
        diag.findings
            .retain(|o| !(o.kind == FindingKind::PathLimited && o.stream == f.stream));
    }
    diag.findings.push(f);
}

fn median_of(report: &SrtReport, t: &Transaction) -> f64 {
    report
        .tables
        .iter()
        .filter(|tb| tb.protocol == t.proto.name() && tb.version == t.version)
        .flat_map(|tb| tb.rows.iter())
        .find(|r| r.code == t.op_code && r.op == t.op)
        .map_or(0.0, |r| r.p50_s)
}

fn op_label(t: &Transaction) -> String {
    match t.sub_op {
        Some(s) => format!("{}({s})", t.op),
        None => t.op.to_string(),
    }
}

/// Most held operations named on a connection's `application-limited` finding (tcpdx
/// choice: the longest; the rest are counted).
pub const MAX_HELD_NAMED: usize = 3;

/// A held operation: its service time (ns) and the retransmissions meanwhile.
type Held<'a> = (&'a Transaction, i64, u32);

/// An operation's request and reply instants (the reply's, the request's when none).
fn span(t: &Transaction) -> (i64, i64) {
    let req = t.request.last.ts.0;
    (req, t.reply.map_or(req, |r| r.last.ts.0))
}

/// How many separate holds `g` holds: operations whose waits overlap were held by one
/// stop of the server (on one connection or several), not by a repeating timer.
fn separate_holds(g: &[(&Transaction, i64)]) -> usize {
    let mut v: Vec<(i64, i64)> = g.iter().map(|x| span(x.0)).collect();
    v.sort_unstable();
    let mut n = 0;
    let mut end = i64::MIN;
    for (a, b) in v {
        if a > end {
            n += 1;
        }
        end = end.max(b);
    }
    n
}

/// Slow operations the server held (no full window meanwhile: a receiver not reading is
/// the window's finding): those far beyond their operation's usual time with no
/// retransmission meanwhile (the network's waits are its findings') clustered at one
/// duration in at least [`MIN_REPEATS`] separate holds are a timer (`fixed-duration-stall`);
/// the others are the server's service time, named on the connection's
/// `application-limited` finding ([`held_notes`]).
fn stall_findings(ev: &StorageEvidence, report: &SrtReport, origin: i64) -> Vec<Finding> {
    // The operations the server held: slow, with no full window meanwhile.
    let held: Vec<Held<'_>> = ev
        .slow
        .iter()
        .filter_map(|t| {
            let srt = t.srt_ns()?;
            let (from, to) = span(t);
            let d = ev.during(t.stream, from, to);
            (d.window_limited == 0).then_some((t, srt, d.retransmissions))
        })
        .collect();
    // A timer's candidates: far beyond the operation's usual time, with no retransmission.
    let mut slow: Vec<(&Transaction, i64)> = held
        .iter()
        .filter(|&&(t, srt, retx)| {
            retx == 0 && srt as f64 >= STALL_OVER_MEDIAN * median_of(report, t) * 1e9
        })
        .map(|&(t, srt, _)| (t, srt))
        .collect();
    slow.sort_by_key(|x| x.1);
    let mut best: &[(&Transaction, i64)] = &[];
    let mut j = 0;
    for (i, &(_, lo)) in slow.iter().enumerate() {
        j = j.max(i);
        let lo = lo as f64;
        while slow
            .get(j + 1)
            .is_some_and(|x| x.1 as f64 <= lo * (1.0 + SAME_DURATION_TOLERANCE))
        {
            j += 1;
        }
        if j + 1 - i > best.len() {
            best = slow.get(i..=j).unwrap_or_default();
        }
    }
    let group: Vec<(&Transaction, i64)> = if separate_holds(best) >= MIN_REPEATS {
        best.to_vec()
    } else {
        Vec::new()
    };
    let mut out = held_notes(&held, &group, report);
    // One finding per connection.
    let mut by_stream: FxHashMap<StreamId, Vec<(&Transaction, i64)>> = FxHashMap::default();
    for x in group {
        by_stream.entry(x.0.stream).or_default().push(x);
    }
    let mut by_stream: Vec<(StreamId, Vec<(&Transaction, i64)>)> = by_stream.into_iter().collect();
    by_stream.sort_unstable_by_key(|x| x.0);
    for (stream, g) in &by_stream {
        let stream = *stream;
        let mut f = Finding::new(FindingKind::FixedDurationStall, Some(stream.0));
        // The server held these replies: the cause of the TCP silence meanwhile.
        f.claim_first();
        let total: i64 = g.iter().map(|x| x.1).sum();
        let mut parts = Vec::new();
        for (t, srt) in g {
            let req = t.request.last;
            let rep = t.reply.map_or(req, |r| r.last);
            f.evidence(req.frame.0, format!("{} request", op_label(t)));
            f.evidence(
                rep.frame.0,
                format!("{} reply after {:.3} s", op_label(t), *srt as f64 / 1e9),
            );
            f.episode((req.ts.0 - origin) as f64 / 1e9, *srt as f64 / 1e9);
            let d = ev.during(stream, req.ts.0, rep.ts.0);
            let median = median_of(report, t);
            parts.push(format!(
                "{} (id {:#x}, frames {} -> {}) took {:.3} s where its median is {:.1} ms; the connection was silent for {:.3} s of it, with no retransmission and no window limit meanwhile: the server held the reply (server time).",
                op_label(t),
                t.id,
                req.frame,
                rep.frame,
                *srt as f64 / 1e9,
                median * 1e3,
                d.silent_s,
            ));
        }
        f.episodes = g.len() as u32;
        let active = report
            .connections
            .iter()
            .find(|c| c.stream == stream.0)
            .map_or(0.0, |c| c.active_s);
        f.cost.seconds = total as f64 / 1e9;
        f.cost.share = if active > 0.0 {
            (f.cost.seconds / active).min(1.0)
        } else {
            1.0
        };
        f.severity = Severity::from_share(f.cost.share);
        f.confidence = 0.8;
        f.wireshark_filter = f.frames_filter();
        f.explanation = format!(
            "{} storage operation(s) stalled for about the same time ({:.3} s): {}",
            g.len(),
            g.get(g.len() / 2).map_or(0, |x| x.1) as f64 / 1e9,
            parts.join(" ")
        );
        f.recommendations = vec![
            "A response time equal to a timer (1 s, 5 s, ...) is a timeout somewhere: check the server's logs and its storage (fsync/commit latency, lock or lease recalls, a paused VM or process) at those instants.".into(),
        ];
        out.push(f);
    }
    out
}

/// The held operations outside a timer cluster, per connection: a note for its
/// `application-limited` finding naming the longest ([`MAX_HELD_NAMED`]) with their
/// service times, at zero cost (the TCP finding counts the silence; [`add_findings`]
/// adds a note only to a finding that exists).
fn held_notes(
    held: &[Held<'_>],
    group: &[(&Transaction, i64)],
    report: &SrtReport,
) -> Vec<Finding> {
    let mut by_stream: FxHashMap<StreamId, Vec<Held<'_>>> = FxHashMap::default();
    for &x in held {
        if !group.iter().any(|g| std::ptr::eq(g.0, x.0)) {
            by_stream.entry(x.0.stream).or_default().push(x);
        }
    }
    let mut by_stream: Vec<(StreamId, Vec<Held<'_>>)> = by_stream.into_iter().collect();
    by_stream.sort_unstable_by_key(|x| x.0);
    let mut out = Vec::new();
    for (stream, mut v) in by_stream {
        v.sort_by_key(|x| std::cmp::Reverse(x.1));
        let mut f = Finding::new(FindingKind::ApplicationLimited, Some(stream.0));
        let mut parts = Vec::new();
        for &(t, srt, retx) in v.iter().take(MAX_HELD_NAMED) {
            let req = t.request.last;
            let rep = t.reply.map_or(req, |r| r.last);
            f.evidence(req.frame.0, format!("{} request", op_label(t)));
            f.evidence(
                rep.frame.0,
                format!("{} reply after {:.3} s", op_label(t), srt as f64 / 1e9),
            );
            parts.push(format!(
                "{} (id {:#x}, frames {} -> {}) {:.3} s where its median is {:.1} ms{}",
                op_label(t),
                t.id,
                req.frame,
                rep.frame,
                srt as f64 / 1e9,
                median_of(report, t) * 1e3,
                if retx > 0 {
                    format!(" ({retx} retransmission(s) meanwhile)")
                } else {
                    String::new()
                }
            ));
        }
        let more = v.len().saturating_sub(MAX_HELD_NAMED);
        f.explanation = format!(
            "the server held {} operation(s) of {} ms or more with no window limit meanwhile: {}{}.",
            v.len(),
            STALL_MIN_NS / 1_000_000,
            parts.join("; "),
            if more > 0 {
                format!(" and {more} more")
            } else {
                String::new()
            }
        );
        out.push(f);
    }
    out
}

/// Request-limited client or slow server, from a connection's data operations.
fn request_pattern(c: &StreamSummary, diag: &Diagnosis) -> Option<Finding> {
    if c.data_transactions < MIN_DATA_OPS || c.active_s <= 0.0 {
        return None;
    }
    let conn = diag.connections.iter().find(|x| x.stream == c.stream)?;
    let rtt = conn.rtt_s?;
    let path_bps = conn.path_bps;
    if path_bps <= 0.0 {
        return None;
    }
    let bdp = path_bps / 8.0 * rtt;
    // Network part of one data operation at this capture point: the reply's transfer, plus
    // a round trip unless the capture sits next to the server (which sees no round trip).
    let rtt_part = if conn.capture_point == CapturePoint::NearServer {
        0.0
    } else {
        rtt
    };
    let network = rtt_part + c.data_reply_transfer_mean_s;
    // Next to the server a request is outstanding only while the server holds it; the
    // client keeps it outstanding a round trip longer (Little's law: same throughput).
    let client_view = if conn.capture_point == CapturePoint::NearServer && c.data_srt_mean_s > 0.0 {
        (c.data_srt_mean_s + rtt) / c.data_srt_mean_s
    } else {
        1.0
    };
    let outstanding = c.outstanding_mean * client_view;
    let outstanding_bytes = c.bytes_outstanding_mean * client_view;
    let server = (c.data_srt_mean_s - network).max(0.0);
    let moved = (c.read_bytes + c.write_bytes) as f64;
    let achieved_bps = moved * 8.0 / c.active_s;
    let at_path_s = moved * 8.0 / path_bps;
    let cost = (c.active_s - at_path_s).max(0.0);
    let proto = c.protocol;
    let per_op = format!(
        "{proto} data operations take {:.1} ms on average: about {:.1} ms of network (round trip and transfer) and {:.1} ms at the server",
        c.data_srt_mean_s * 1e3,
        network * 1e3,
        server * 1e3
    );
    let mut f = Finding::new(FindingKind::ApplicationLimited, Some(c.stream));
    f.episodes = 1;
    f.cost.seconds = cost;
    f.cost.share = (cost / c.active_s).min(1.0);
    f.cost.goodput_without_bps = Some(path_bps);
    f.severity = Severity::from_share(f.cost.share);
    f.wireshark_filter = format!("tcp.stream == {}", c.stream);
    if server > SERVER_SHARE * c.data_srt_mean_s && server > 0.002 {
        f.confidence = 0.7;
        f.explanation = format!(
            "Slow server: {per_op}. The server's time dominates; keeping more requests outstanding only queues them there (mean {outstanding:.1} in flight)."
        );
        f.recommendations = vec![
            "Look at the server: its storage latency, CPU, locks or throttling; the network is not the bottleneck.".into(),
        ];
        return Some(f);
    }
    if outstanding_bytes < BDP_SHARE * bdp {
        f.confidence = 0.7;
        f.explanation = format!(
            "Request-limited client: it keeps {:.1} request(s) of {} outstanding on average ({} in flight), while the path needs at least {} (bandwidth-delay product at {:.1} Mb/s and {:.1} ms round trip): {:.1} Mb/s achieved. {per_op}.",
            outstanding,
            human_bytes(c.io_size_mean),
            human_bytes(outstanding_bytes),
            human_bytes(bdp),
            path_bps / 1e6,
            rtt * 1e3,
            achieved_bps / 1e6,
        );
        let cover = format!(
            "Outstanding bytes should cover the bandwidth-delay product ({}).",
            human_bytes(bdp)
        );
        f.recommendations = vec![
            match proto {
                "nfs" => "Keep more READ/WRITE requests in flight: larger rsize/wsize, more RPC slots, `nconnect`, read-ahead.",
                "smb2" => "Keep more Read/Write requests in flight: larger I/O sizes, more credits, SMB multichannel.",
                _ => "Raise the initiator's queue depth or I/O size (iSCSI: more outstanding commands, larger MaxBurstLength).",
            }
            .into(),
            cover.into(),
        ];
        return Some(f);
    }
    None
}

fn human_bytes(b: f64) -> String {
    if b >= 1_048_576.0 {
        format!("{:.1} MiB", b / 1_048_576.0)
    } else if b >= 1024.0 {
        format!("{:.0} KiB", b / 1024.0)
    } else {
        format!("{b:.0} B")
    }
}

#[cfg(test)]
mod tests;
