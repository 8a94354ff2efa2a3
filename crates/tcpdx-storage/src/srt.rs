//! Service response time statistics: a [`StorageSink`] that aggregates transactions into
//! Wireshark-style SRT tables (count, min, mean, max, total, plus p50/p95/p99), the slowest
//! requests, and per-interval timelines (latency percentiles, outstanding requests and
//! bytes, throughput per operation type, SMB2 credit balance).
//!
//! Memory is bounded: percentiles come from at most `samples_per_op` samples per row
//! (reservoir sampling beyond, deterministic), and a timeline row holds at most
//! `samples_per_interval`. Count, min, max, mean and total are always exact.

use std::collections::BTreeMap;

use rustc_hash::FxHashMap;
use serde::Serialize;
use tcpdx_core::StreamId;
use tcpdx_wire::Timestamp;

use crate::transaction::{IoKind, Notice, Proto, Request, StorageSink, Transaction};

/// Aggregation settings.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct SrtConfig {
    /// Timeline interval in nanoseconds (default 1 s).
    pub interval_ns: i64,
    /// How many of the slowest requests to keep.
    pub slowest: usize,
    /// Samples kept per table row for percentiles.
    pub samples_per_op: usize,
    /// Samples kept per timeline row.
    pub samples_per_interval: usize,
}

impl Default for SrtConfig {
    fn default() -> Self {
        Self {
            interval_ns: 1_000_000_000,
            slowest: 10,
            samples_per_op: 1 << 20,
            samples_per_interval: 1 << 14,
        }
    }
}

impl SrtConfig {
    /// With this timeline interval (nanoseconds, at least 1 µs).
    pub fn with_interval_ns(mut self, ns: i64) -> Self {
        self.interval_ns = ns.max(1_000);
        self
    }
    /// Keeping this many slowest requests.
    pub fn with_slowest(mut self, n: usize) -> Self {
        self.slowest = n;
        self
    }
}

/// A bounded, deterministic reservoir of nanosecond samples.
#[derive(Clone, Debug)]
struct Samples {
    v: Vec<i64>,
    seen: u64,
    cap: usize,
    rng: u64,
}

impl Samples {
    fn new(cap: usize) -> Self {
        Self {
            v: Vec::new(),
            seen: 0,
            cap: cap.max(1),
            rng: 0x2545_f491_4f6c_dd1d,
        }
    }
    fn add(&mut self, x: i64) {
        self.seen += 1;
        if self.v.len() < self.cap {
            self.v.push(x);
            return;
        }
        // Algorithm R with a xorshift generator: deterministic output for a given input.
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        let j = self.rng % self.seen;
        if (j as usize) < self.cap
            && let Some(slot) = self.v.get_mut(j as usize)
        {
            *slot = x;
        }
    }
    /// Nearest-rank percentiles of the kept samples.
    fn percentiles(&self, qs: [f64; 3]) -> [i64; 3] {
        let mut v = self.v.clone();
        v.sort_unstable();
        qs.map(|q| nearest_rank(&v, q))
    }
}

/// Nearest-rank percentile `q` (0..=1) of sorted `v` (0 when empty).
pub fn nearest_rank(v: &[i64], q: f64) -> i64 {
    if v.is_empty() {
        return 0;
    }
    let rank = (q * v.len() as f64).ceil() as usize;
    v.get(rank.clamp(1, v.len()) - 1).copied().unwrap_or(0)
}

/// Running statistics of one set of response times.
#[derive(Clone, Debug)]
struct Acc {
    count: u64,
    min: i64,
    max: i64,
    total: i128,
    samples: Samples,
}

impl Acc {
    fn new(cap: usize) -> Self {
        Self {
            count: 0,
            min: i64::MAX,
            max: i64::MIN,
            total: 0,
            samples: Samples::new(cap),
        }
    }
    fn add(&mut self, ns: i64) {
        self.count += 1;
        self.min = self.min.min(ns);
        self.max = self.max.max(ns);
        self.total += i128::from(ns);
        self.samples.add(ns);
    }
    fn row(&self, op: &str, code: u16) -> SrtRow {
        let [p50, p95, p99] = self.samples.percentiles([0.50, 0.95, 0.99]);
        let n = self.count.max(1) as f64;
        SrtRow {
            op: op.to_string(),
            code,
            count: self.count,
            min_s: secs(self.min),
            max_s: secs(self.max),
            mean_s: self.total as f64 / n / 1e9,
            p50_s: secs(p50),
            p95_s: secs(p95),
            p99_s: secs(p99),
            total_s: self.total as f64 / 1e9,
            min_ns: self.min,
            max_ns: self.max,
            total_ns: self.total,
        }
    }
}

fn secs(ns: i64) -> f64 {
    ns as f64 / 1e9
}

/// How a table's rows are keyed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum By {
    /// NFS procedure / SMB2 command / SCSI opcode (Wireshark's SRT tables).
    Procedure,
    /// NFSv4: the COMPOUND's principal operation.
    Operation,
}

type TableKey = (Proto, Option<u8>, By);

/// One row of an SRT table.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SrtRow {
    /// Wireshark's name.
    pub op: String,
    /// Procedure / command / opcode number (Wireshark's "Index").
    pub code: u16,
    /// Replies matched to a request.
    pub count: u64,
    /// Minimum (s).
    pub min_s: f64,
    /// Maximum (s).
    pub max_s: f64,
    /// Mean (s).
    pub mean_s: f64,
    /// Median (s).
    pub p50_s: f64,
    /// 95th percentile (s).
    pub p95_s: f64,
    /// 99th percentile (s).
    pub p99_s: f64,
    /// Sum (s).
    pub total_s: f64,
    /// Exact minimum (ns).
    #[serde(skip)]
    pub min_ns: i64,
    /// Exact maximum (ns).
    #[serde(skip)]
    pub max_ns: i64,
    /// Exact sum (ns).
    #[serde(skip)]
    pub total_ns: i128,
}

/// One SRT table.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SrtTable {
    /// `nfs`, `smb2` or `iscsi`.
    pub protocol: &'static str,
    /// NFS version, else null.
    pub version: Option<u8>,
    /// What the rows are.
    pub by: By,
    /// Rows in code order.
    pub rows: Vec<SrtRow>,
}

/// Requests without a reply by the end of the capture.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Unanswered {
    /// Protocol.
    pub protocol: &'static str,
    /// NFS version.
    pub version: Option<u8>,
    /// Operation.
    pub op: &'static str,
    /// How many.
    pub count: u64,
}

/// One of the slowest requests.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Slow {
    /// Service response time (s).
    pub srt_s: f64,
    /// Protocol.
    pub protocol: &'static str,
    /// Operation (NFSv4: `COMPOUND(READ)`).
    pub op: String,
    /// tcp.stream.
    pub stream: u32,
    /// Frame where the request completed.
    pub request_frame: u64,
    /// Frame where the reply completed.
    pub reply_frame: u64,
    /// Request time since the capture start (s).
    pub time_s: f64,
    /// XID / MessageId / ITT.
    pub id: u64,
    /// Data offset (bytes; SCSI: LBA).
    pub offset: Option<u64>,
    /// Data length (bytes).
    pub len: Option<u64>,
    /// Reply status.
    pub status: Option<u32>,
    #[serde(skip)]
    srt_ns: i64,
}

/// Per-interval numbers of one protocol.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct IntervalRow {
    /// Protocol.
    pub protocol: &'static str,
    /// Interval start since the capture start (s).
    pub start_s: f64,
    /// Replies in the interval.
    pub count: u64,
    /// Median SRT of those replies (s).
    pub p50_s: f64,
    /// 95th percentile (s).
    pub p95_s: f64,
    /// 99th percentile (s).
    pub p99_s: f64,
    /// Maximum (s).
    pub max_s: f64,
    /// Time-weighted mean of requests in flight.
    pub outstanding_mean: f64,
    /// Most requests in flight.
    pub outstanding_max: u64,
    /// Time-weighted mean of requested bytes in flight (READ/WRITE lengths).
    pub bytes_outstanding_mean: f64,
    /// Most requested bytes in flight.
    pub bytes_outstanding_max: u64,
    /// Bytes read by the replies of the interval.
    pub read_bytes: u64,
    /// Bytes written.
    pub write_bytes: u64,
    /// Read replies.
    pub reads: u64,
    /// Write replies.
    pub writes: u64,
    /// Commit/flush replies.
    pub commits: u64,
    /// SMB2: lowest credit balance of any connection in the interval.
    pub credits_min: Option<i64>,
}

/// Per-connection summary (what the diagnosis uses).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct StreamSummary {
    /// tcp.stream.
    pub stream: u32,
    /// Protocol.
    pub protocol: &'static str,
    /// Transactions answered.
    pub transactions: u64,
    /// Mean SRT (s).
    pub srt_mean_s: f64,
    /// First request to last reply (s).
    pub active_s: f64,
    /// Time-weighted mean of requests in flight while active.
    pub outstanding_mean: f64,
    /// Most requests in flight.
    pub outstanding_max: u64,
    /// Time-weighted mean of requested data bytes in flight while active.
    pub bytes_outstanding_mean: f64,
    /// Most requested data bytes in flight.
    pub bytes_outstanding_max: u64,
    /// Mean READ/WRITE size (bytes).
    pub io_size_mean: f64,
    /// Data bytes read.
    pub read_bytes: u64,
    /// Data bytes written.
    pub write_bytes: u64,
    /// Mean SRT of data operations (s).
    pub data_srt_mean_s: f64,
    /// Data operations (READ/WRITE) answered.
    pub data_transactions: u64,
    /// Mean time from a data reply's first byte to its last (s): its transfer time.
    pub data_reply_transfer_mean_s: f64,
}

/// SMB2 credits of one connection.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CreditSummary {
    /// tcp.stream.
    pub stream: u32,
    /// The balance starts at the Negotiate (absolute); otherwise it is relative to the
    /// first request seen.
    pub absolute: bool,
    /// Lowest balance.
    pub min: i64,
    /// Highest balance.
    pub max: i64,
    /// Balance at the end.
    pub last: i64,
    /// Credits charged by requests.
    pub charged: u64,
    /// Credits requested.
    pub requested: u64,
    /// Credits granted (interim and final responses).
    pub granted: u64,
    /// Times the balance reached zero (the client could not send).
    pub starved_episodes: u64,
    /// Time spent at zero (s).
    pub starved_s: f64,
}

/// Counts of notices.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct NoticeCounts {
    /// Encrypted SMB3 messages.
    pub smb3_encrypted: u64,
    /// Streams with encrypted SMB3.
    pub smb3_encrypted_streams: Vec<u32>,
    /// Compressed SMB3 messages.
    pub smb3_compressed: u64,
    /// Times a parser lost the message framing.
    pub framing_lost: u64,
    /// Connections whose outstanding-request table overflowed.
    pub too_many_outstanding: u64,
}

/// Everything `tcpdx srt` reports.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SrtReport {
    /// Format version.
    pub version: u32,
    /// SRT tables.
    pub tables: Vec<SrtTable>,
    /// Unanswered requests.
    pub unanswered: Vec<Unanswered>,
    /// The slowest requests, slowest first.
    pub slowest: Vec<Slow>,
    /// Timeline interval (s).
    pub interval_s: f64,
    /// Timeline rows, by protocol then time.
    pub intervals: Vec<IntervalRow>,
    /// Per-connection summaries.
    pub connections: Vec<StreamSummary>,
    /// SMB2 credits per connection.
    pub credits: Vec<CreditSummary>,
    /// Notices.
    pub notices: NoticeCounts,
}

/// One protocol's timeline being built.
#[derive(Debug, Default)]
struct Timeline {
    rows: BTreeMap<i64, IntervalAcc>,
    outstanding: u64,
    bytes: u64,
    last_ts: Option<i64>,
}

#[derive(Debug)]
struct IntervalAcc {
    srt: Acc,
    out_area: i128,
    out_max: u64,
    bytes_area: i128,
    bytes_max: u64,
    read_bytes: u64,
    write_bytes: u64,
    reads: u64,
    writes: u64,
    commits: u64,
    credits_min: Option<i64>,
}

impl IntervalAcc {
    fn new(cap: usize) -> Self {
        Self {
            srt: Acc::new(cap),
            out_area: 0,
            out_max: 0,
            bytes_area: 0,
            bytes_max: 0,
            read_bytes: 0,
            write_bytes: 0,
            reads: 0,
            writes: 0,
            commits: 0,
            credits_min: None,
        }
    }
}

/// In-flight accounting of one connection.
#[derive(Debug, Default)]
struct StreamAcc {
    proto: Option<Proto>,
    count: u64,
    srt_total: i128,
    data_count: u64,
    data_srt_total: i128,
    first_req: Option<i64>,
    last_reply: Option<i64>,
    outstanding: u64,
    bytes: u64,
    last_ts: Option<i64>,
    out_area: i128,
    bytes_area: i128,
    out_max: u64,
    bytes_max: u64,
    io_count: u64,
    io_bytes: u64,
    read_bytes: u64,
    write_bytes: u64,
    reply_xfer_total: i128,
}

impl StreamAcc {
    fn advance(&mut self, ts: i64) {
        if let Some(last) = self.last_ts
            && ts > last
        {
            let d = i128::from(ts - last);
            self.out_area += i128::from(self.outstanding) * d;
            self.bytes_area += i128::from(self.bytes) * d;
        }
        self.last_ts = Some(self.last_ts.map_or(ts, |l| l.max(ts)));
    }
}

/// SMB2 credit balance of one connection.
#[derive(Debug)]
struct CreditAcc {
    absolute: bool,
    balance: i64,
    min: i64,
    max: i64,
    charged: u64,
    requested: u64,
    granted: u64,
    starved_since: Option<i64>,
    starved_episodes: u64,
    starved_ns: i64,
}

/// The aggregator. Feed it as a [`StorageSink`], then call [`SrtCollector::report`].
#[derive(Debug)]
pub struct SrtCollector {
    cfg: SrtConfig,
    origin: Option<i64>,
    tables: BTreeMap<TableKey, BTreeMap<(u16, &'static str), Acc>>,
    unanswered: BTreeMap<(Proto, Option<u8>, &'static str), u64>,
    slowest: Vec<Slow>,
    timelines: BTreeMap<Proto, Timeline>,
    streams: FxHashMap<StreamId, StreamAcc>,
    credits: FxHashMap<StreamId, CreditAcc>,
    notices: NoticeCounts,
}

impl SrtCollector {
    /// A new collector.
    pub fn new(cfg: SrtConfig) -> Self {
        Self {
            cfg,
            origin: None,
            tables: BTreeMap::new(),
            unanswered: BTreeMap::new(),
            slowest: Vec::new(),
            timelines: BTreeMap::new(),
            streams: FxHashMap::default(),
            credits: FxHashMap::default(),
            notices: NoticeCounts::default(),
        }
    }

    /// The capture start, once known.
    pub fn origin_ns(&self) -> Option<i64> {
        self.origin
    }

    fn origin(&mut self, ts: i64) -> i64 {
        *self.origin.get_or_insert(ts)
    }

    fn idx(&self, ts: i64) -> i64 {
        (ts - self.origin.unwrap_or(ts)).div_euclid(self.cfg.interval_ns)
    }

    /// Integrates the protocol's in-flight counts up to `ts`.
    fn advance(&mut self, proto: Proto, ts: i64) {
        let cap = self.cfg.samples_per_interval;
        let iv = self.cfg.interval_ns;
        let origin = self.origin.unwrap_or(ts);
        let tl = self.timelines.entry(proto).or_default();
        let Some(mut t) = tl.last_ts else {
            tl.last_ts = Some(ts);
            return;
        };
        if tl.outstanding > 0 || tl.bytes > 0 {
            while t < ts {
                let i = (t - origin).div_euclid(iv);
                let end = (origin + (i + 1) * iv).min(ts);
                let d = i128::from(end - t);
                let row = tl.rows.entry(i).or_insert_with(|| IntervalAcc::new(cap));
                row.out_area += i128::from(tl.outstanding) * d;
                row.bytes_area += i128::from(tl.bytes) * d;
                row.out_max = row.out_max.max(tl.outstanding);
                row.bytes_max = row.bytes_max.max(tl.bytes);
                t = end;
            }
        }
        tl.last_ts = Some(tl.last_ts.map_or(ts, |l| l.max(ts)));
    }

    fn row(&mut self, proto: Proto, ts: i64) -> &mut IntervalAcc {
        let i = self.idx(ts);
        let cap = self.cfg.samples_per_interval;
        // advance() has created the timeline already; or_default() just avoids a panic path.
        let tl = self.timelines.entry(proto).or_default();
        tl.rows.entry(i).or_insert_with(|| IntervalAcc::new(cap))
    }

    fn credit_event(&mut self, stream: StreamId, ts: i64, delta: i64, first_op: &str) {
        let c = self.credits.entry(stream).or_insert_with(|| CreditAcc {
            // The client starts with one credit for its Negotiate (MS-SMB2 3.2.4.1.1).
            absolute: first_op == "Negotiate Protocol",
            balance: 1,
            min: 1,
            max: 1,
            charged: 0,
            requested: 0,
            granted: 0,
            starved_since: None,
            starved_episodes: 0,
            starved_ns: 0,
        });
        c.balance += delta;
        c.min = c.min.min(c.balance);
        c.max = c.max.max(c.balance);
        if c.balance <= 0 && c.starved_since.is_none() {
            c.starved_since = Some(ts);
            c.starved_episodes += 1;
        } else if c.balance > 0
            && let Some(since) = c.starved_since.take()
        {
            c.starved_ns += ts - since;
        }
        let bal = c.balance;
        let row = self.row(Proto::Smb2, ts);
        row.credits_min = Some(row.credits_min.map_or(bal, |m| m.min(bal)));
    }

    /// The report. `end` closes open starvation periods (the capture's last frame time).
    pub fn report(&self, end: Option<Timestamp>) -> SrtReport {
        let origin = self.origin.unwrap_or(0);
        let iv = self.cfg.interval_ns;
        let tables = self
            .tables
            .iter()
            .map(|(&(proto, version, by), rows)| SrtTable {
                protocol: proto.name(),
                version,
                by,
                rows: rows
                    .iter()
                    .map(|(&(code, name), acc)| acc.row(name, code))
                    .collect(),
            })
            .collect();
        let unanswered = self
            .unanswered
            .iter()
            .map(|(&(p, version, op), &count)| Unanswered {
                protocol: p.name(),
                version,
                op,
                count,
            })
            .collect();
        let mut intervals = Vec::new();
        for (&proto, tl) in &self.timelines {
            for (&i, r) in &tl.rows {
                let [p50, p95, p99] = r.srt.samples.percentiles([0.50, 0.95, 0.99]);
                intervals.push(IntervalRow {
                    protocol: proto.name(),
                    start_s: (i * iv) as f64 / 1e9,
                    count: r.srt.count,
                    p50_s: secs(p50),
                    p95_s: secs(p95),
                    p99_s: secs(p99),
                    max_s: if r.srt.count > 0 {
                        secs(r.srt.max)
                    } else {
                        0.0
                    },
                    outstanding_mean: r.out_area as f64 / iv as f64,
                    outstanding_max: r.out_max,
                    bytes_outstanding_mean: r.bytes_area as f64 / iv as f64,
                    bytes_outstanding_max: r.bytes_max,
                    read_bytes: r.read_bytes,
                    write_bytes: r.write_bytes,
                    reads: r.reads,
                    writes: r.writes,
                    commits: r.commits,
                    credits_min: r.credits_min,
                });
            }
        }
        let mut connections: Vec<StreamSummary> = self
            .streams
            .iter()
            .filter(|(_, s)| s.count > 0)
            .map(|(&stream, s)| {
                let active = match (s.first_req, s.last_reply) {
                    (Some(a), Some(b)) if b > a => b - a,
                    _ => 0,
                };
                let per = |area: i128| {
                    if active > 0 {
                        area as f64 / active as f64
                    } else {
                        0.0
                    }
                };
                StreamSummary {
                    stream: stream.0,
                    protocol: s.proto.map_or("", Proto::name),
                    transactions: s.count,
                    srt_mean_s: s.srt_total as f64 / s.count.max(1) as f64 / 1e9,
                    active_s: secs(active),
                    outstanding_mean: per(s.out_area),
                    outstanding_max: s.out_max,
                    bytes_outstanding_mean: per(s.bytes_area),
                    bytes_outstanding_max: s.bytes_max,
                    io_size_mean: s.io_bytes as f64 / s.io_count.max(1) as f64,
                    read_bytes: s.read_bytes,
                    write_bytes: s.write_bytes,
                    data_srt_mean_s: s.data_srt_total as f64 / s.data_count.max(1) as f64 / 1e9,
                    data_transactions: s.data_count,
                    data_reply_transfer_mean_s: s.reply_xfer_total as f64
                        / s.data_count.max(1) as f64
                        / 1e9,
                }
            })
            .collect();
        connections.sort_by_key(|c| c.stream);
        let end_ns = end.map(|t| t.0);
        let mut credits: Vec<CreditSummary> = self
            .credits
            .iter()
            .map(|(&stream, c)| {
                let open = match (c.starved_since, end_ns) {
                    (Some(s), Some(e)) if e > s => e - s,
                    _ => 0,
                };
                CreditSummary {
                    stream: stream.0,
                    absolute: c.absolute,
                    min: c.min,
                    max: c.max,
                    last: c.balance,
                    charged: c.charged,
                    requested: c.requested,
                    granted: c.granted,
                    starved_episodes: c.starved_episodes,
                    starved_s: secs(c.starved_ns + open),
                }
            })
            .collect();
        credits.sort_by_key(|c| c.stream);
        let mut slowest = self.slowest.clone();
        for s in &mut slowest {
            s.time_s -= secs(origin);
        }
        SrtReport {
            version: 1,
            tables,
            unanswered,
            slowest,
            interval_s: secs(iv),
            intervals,
            connections,
            credits,
            notices: self.notices.clone(),
        }
    }
}

/// The op label of a slow request (`COMPOUND(READ)` for NFSv4).
fn label(t: &Transaction) -> String {
    match t.sub_op {
        Some(sub) => format!("{}({sub})", t.op),
        None => t.op.to_string(),
    }
}

impl StorageSink for SrtCollector {
    fn start(&mut self, ts: Timestamp) {
        self.origin(ts.0);
    }

    fn request(&mut self, r: &Request) {
        let ts = r.at.ts.0;
        self.origin(ts);
        self.advance(r.proto, ts);
        let bytes = r.io.map_or(0, |io| io_bytes(io.kind, io.len));
        if let Some(tl) = self.timelines.get_mut(&r.proto) {
            tl.outstanding += 1;
            tl.bytes += bytes;
        }
        let row = self.row(r.proto, ts);
        let _ = row; // creates the interval so a burst of requests shows even without replies
        let s = self.streams.entry(r.stream).or_default();
        s.proto = Some(r.proto);
        s.advance(ts);
        s.first_req.get_or_insert(ts);
        s.outstanding += 1;
        s.bytes += bytes;
        s.out_max = s.out_max.max(s.outstanding);
        s.bytes_max = s.bytes_max.max(s.bytes);
        if let Some(tl) = self.timelines.get_mut(&r.proto) {
            let (o, b) = (tl.outstanding, tl.bytes);
            let i = (ts - self.origin.unwrap_or(ts)).div_euclid(self.cfg.interval_ns);
            if let Some(row) = tl.rows.get_mut(&i) {
                row.out_max = row.out_max.max(o);
                row.bytes_max = row.bytes_max.max(b);
            }
        }
        if let Some(c) = r.credits {
            let charge = i64::from(c.charge.max(1));
            self.credit_event(r.stream, ts, -charge, r.op);
            if let Some(acc) = self.credits.get_mut(&r.stream) {
                acc.charged += charge as u64;
                acc.requested += u64::from(c.requested);
            }
        }
    }

    fn transaction(&mut self, t: &Transaction) {
        let Some(srt) = t.srt_ns() else {
            *self
                .unanswered
                .entry((t.proto, t.version, t.op))
                .or_default() += 1;
            return;
        };
        let ts = t.reply.map_or(0, |r| r.last.ts.0);
        self.origin(ts);
        let cap = self.cfg.samples_per_op;
        self.tables
            .entry((t.proto, t.version, By::Procedure))
            .or_default()
            .entry((t.op_code, t.op))
            .or_insert_with(|| Acc::new(cap))
            .add(srt);
        if let (Some(sub), Some(ops)) = (t.sub_op, t.ops) {
            let code = crate::nfs::principal(ops.codes());
            self.tables
                .entry((t.proto, t.version, By::Operation))
                .or_default()
                .entry((code, sub))
                .or_insert_with(|| Acc::new(cap))
                .add(srt);
        }
        // The slowest requests, slowest first (ties: earlier request first).
        if self.cfg.slowest > 0 {
            let pos = self
                .slowest
                .iter()
                .position(|s| s.srt_ns < srt)
                .unwrap_or(self.slowest.len());
            if pos < self.cfg.slowest {
                self.slowest.insert(
                    pos,
                    Slow {
                        srt_s: secs(srt),
                        protocol: t.proto.name(),
                        op: label(t),
                        stream: t.stream.0,
                        request_frame: t.request.last.frame.0,
                        reply_frame: t.reply.map_or(0, |r| r.last.frame.0),
                        time_s: secs(t.request.last.ts.0),
                        id: t.id,
                        offset: t.io.map(|io| io.offset),
                        len: t.io.map(|io| io.len),
                        status: t.status,
                        srt_ns: srt,
                    },
                );
                self.slowest.truncate(self.cfg.slowest);
            }
        }
        // Timeline.
        self.advance(t.proto, ts);
        let bytes = t.io.map_or(0, |io| io_bytes(io.kind, io.len));
        if let Some(tl) = self.timelines.get_mut(&t.proto) {
            tl.outstanding = tl.outstanding.saturating_sub(1);
            tl.bytes = tl.bytes.saturating_sub(bytes);
        }
        let row = self.row(t.proto, ts);
        row.srt.add(srt);
        if let Some(io) = t.io {
            let moved = io.done_len.unwrap_or(io.len);
            match io.kind {
                IoKind::Read => {
                    row.reads += 1;
                    row.read_bytes += moved;
                }
                IoKind::Write => {
                    row.writes += 1;
                    row.write_bytes += moved;
                }
                IoKind::Commit => row.commits += 1,
            }
        }
        // Per connection.
        let s = self.streams.entry(t.stream).or_default();
        s.proto = Some(t.proto);
        s.advance(ts);
        s.count += 1;
        s.srt_total += i128::from(srt);
        s.last_reply = Some(s.last_reply.map_or(ts, |l| l.max(ts)));
        s.outstanding = s.outstanding.saturating_sub(1);
        s.bytes = s.bytes.saturating_sub(bytes);
        if let Some(io) = t.io
            && io.kind != IoKind::Commit
        {
            let moved = io.done_len.unwrap_or(io.len);
            s.io_count += 1;
            s.io_bytes += io.len;
            s.data_count += 1;
            s.data_srt_total += i128::from(srt);
            if let Some(r) = t.reply {
                s.reply_xfer_total += i128::from(r.last.ts.since(r.first.ts));
            }
            match io.kind {
                IoKind::Read => s.read_bytes += moved,
                _ => s.write_bytes += moved,
            }
        }
        if let Some(c) = t.credits {
            let granted = i64::from(c.granted) + i64::from(c.interim_granted);
            self.credit_event(t.stream, ts, granted, t.op);
            if let Some(acc) = self.credits.get_mut(&t.stream) {
                acc.granted += granted as u64;
            }
        }
    }

    fn notice(&mut self, n: &Notice) {
        match *n {
            Notice::Smb3Encrypted { stream, .. } => {
                self.notices.smb3_encrypted += 1;
                if !self.notices.smb3_encrypted_streams.contains(&stream.0) {
                    self.notices.smb3_encrypted_streams.push(stream.0);
                }
            }
            Notice::Smb3Compressed { .. } => self.notices.smb3_compressed += 1,
            Notice::FramingLost { .. } => self.notices.framing_lost += 1,
            Notice::TooManyOutstanding { .. } => self.notices.too_many_outstanding += 1,
        }
    }
}

/// Bytes a data operation keeps in flight (commits move none).
fn io_bytes(kind: IoKind, len: u64) -> u64 {
    match kind {
        IoKind::Commit => 0,
        _ => len,
    }
}

#[cfg(test)]
mod tests;

/// A time as tshark's SRT tables print it: seconds and microseconds rounded half up from
/// the nanoseconds part (`%d.%06d` of `secs, (nsecs + 500) / 1000`).
pub fn wireshark_time(ns: i64) -> String {
    let secs = ns.div_euclid(1_000_000_000);
    let nsecs = ns.rem_euclid(1_000_000_000);
    format!("{secs}.{:06}", (nsecs + 500) / 1000)
}

/// A mean as tshark's SRT tables print it: integer nanoseconds `total / count`, rounded
/// half up to microseconds.
pub fn wireshark_mean(total_ns: i128, count: u64) -> String {
    let td = (total_ns / i128::from(count.max(1)) + 500) / 1000;
    format!("{}.{:06}", td / 1_000_000, td % 1_000_000)
}

/// A sum as tshark's SRT tables print it (rounded half up to microseconds).
pub fn wireshark_sum(total_ns: i128) -> String {
    let sum = (total_ns + 500) / 1000;
    format!("{}.{:06}", sum / 1_000_000, sum % 1_000_000)
}
