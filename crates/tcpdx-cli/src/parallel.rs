//! Multi-core analysis.
//!
//! A reader thread reads and decodes frames ([`FrameInput::from_view`]) and routes each to
//! one of N worker analyzers by a hash of its connection's 4-tuple, in batches. The
//! caller's thread merges the workers' output back into capture order, by frame number
//! (each worker lists only the frames that brought output, so the merge of a command with
//! little per-packet output walks little; see [`BatchOut`]). Workers number
//! streams locally; the merge renumbers them in order of first appearance, which is how a
//! single analyzer numbers them, and broadcasts the single analyzer's expiry sweeps to every
//! worker at the same frames, so every output is identical whatever the thread count
//! (crates/tcpdx-cli/tests/threads.rs checks it).
//!
//! `diagnose` and `srt` ([`Plan::Diagnose`], [`Plan::Storage`]) run the per-connection work
//! in the workers too: each has its own TCP diagnoser and storage tracker beside its
//! analyzer. The reader passes them the payloads the storage parsers may read: short ones
//! copied into the batch, long ones (full frames) where they lie in its read buffer (or in
//! the mapped file), which it shares with the batch instead of copying
//! ([`CaptureReader::share_buffer`]).
//! The trackers' events are recorded and replayed on the merging thread in capture order,
//! and the diagnosers' listings are renumbered and merged at the end
//! ([`tcpdx_detect::Listing`]); their looks for closed connections are broadcast at the
//! segments where a single diagnoser would look, so the result is the single-thread one.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::thread;

use anyhow::Result;
use tcpdx_capture::{Buffer, CaptureError, CaptureReader};
use tcpdx_core::{
    Analyzer, AnalyzerConfig, EventSink, FlowKey, FlowSummary, FrameInput, InputStats,
    SegmentAnalysis, SegmentDetail, StreamId, Warning,
};
use tcpdx_detect::{CLOSED_SWEEP_EVERY, Diagnoser, Listing, Spill};
use tcpdx_report::{CsvTail, Line};
use tcpdx_storage::{
    Diagnosing, Notice, Recorded, Recorder, Request, StorageConfig, StorageSink, TcpLog, TcpLogs,
    Tracker, Transaction,
};
use tcpdx_wire::{FrameNo, Timestamp};

use crate::progress::Progress;

/// Frames per batch: large enough that channel costs vanish, small enough to stay in cache.
/// 8192 against 4096: 3-8% faster with two threads on 2 cores (fewer hand-overs and
/// wake-ups, each a context switch there), for 2-6 MB more memory.
const BATCH: usize = 8192;
/// Batches in flight per channel (bounds memory whatever the capture holds).
const DEPTH: usize = 4;
/// Payload bytes a batch refers to (all workers): a batch is sent early when its payloads
/// hold this much, so that the reader's buffers the batches in flight keep alive stay few
/// (4096 full 9000-byte frames would keep 37 MB of them alive per batch).
const BATCH_BYTES: usize = 2 << 20;

/// What the workers send back per segment, chosen by the command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Plan {
    /// No workers: everything on one thread. For sinks that need segment payloads
    /// (`srt`), which the reader does not copy for workers.
    Serial,
    /// Every segment with its detail, replayed into the command's sink in capture order.
    Replay,
    /// Flow summaries only (no per-segment output).
    FlowsOnly,
    /// `events` CSV rows, formatted by the workers (all but `frame,stream,`).
    CsvRows {
        /// Only rows with at least one analysis flag.
        flagged: bool,
    },
    /// A TCP diagnoser and a storage tracker per worker (`diagnose`); needs the storage
    /// configuration, and no `--stream` filter (workers do not know the global numbers).
    Diagnose,
    /// A storage tracker per worker (`srt`); same needs.
    Storage,
}

impl Plan {
    fn storage(self) -> bool {
        matches!(self, Plan::Diagnose | Plan::Storage)
    }
}

enum Work {
    Origin(Timestamp),
    /// A frame, and where its payload lies in the batch's buffers (empty if not passed).
    Input(FrameInput, Payload),
    Sweep(Timestamp),
    /// Look for closed connections in the diagnosers.
    DiagnoserSweep(Timestamp),
}

/// Where a segment's captured payload is: `len` bytes from `start` of the batch's buffer
/// `buf`, or of its copied bytes when `buf` is [`COPIED`] (a buffer may be a whole mapped
/// file, so `start` is 64-bit; a payload is a record at most).
#[derive(Clone, Copy, Default)]
struct Payload {
    buf: u32,
    len: u32,
    start: u64,
}

/// [`Payload::buf`] of a payload copied into [`Batch::bytes`].
const COPIED: u32 = u32::MAX;

/// Payloads from this size on are read by the workers where they lie in the reader's
/// buffer; shorter ones are copied. Sharing a buffer makes the reader move to another one
/// for its next reads (a cold one: the copy from the page cache then runs slower), which
/// only pays when the copies it saves are large (full jumbo frames: 20% of a `diagnose`
/// run, where headers cut by the snap length cost 15% more when shared).
const SHARE_FROM: usize = 512;
/// [`SHARE_FROM`] for a file read mapped: one buffer that sharing never makes the reader
/// leave, so only payloads shorter than a cache line are copied. Read where they lie, those
/// cost a worker a cache miss each for a copy of a few bytes (the many-connection capture,
/// 30-byte payloads, 2 threads: 4% less CPU copied); longer ones are cheaper shared
/// (storage mix, 2 threads: -4 to -8% time against copying those under 512 bytes).
const SHARE_MAPPED_FROM: usize = 64;

/// One worker's share of a batch of frames.
#[derive(Default)]
struct Batch {
    work: Vec<Work>,
    /// Short payloads of the segments the storage parsers may read.
    bytes: Vec<u8>,
    /// The reader's buffers the long payloads lie in (shared: the reader no longer writes
    /// into them).
    bufs: Vec<Arc<Buffer>>,
    /// The reader buffer that `bufs`' last one is ([`FrameAt::buffer`]).
    last_buf: Option<u64>,
}

impl Batch {
    /// The bytes of `p`.
    fn payload(&self, p: Payload) -> &[u8] {
        let (start, end) = (p.start as usize, p.start as usize + p.len as usize);
        let from = if p.buf == COPIED {
            self.bytes.get(start..end)
        } else {
            self.bufs
                .get(p.buf as usize)
                .and_then(|b| b.get(start..end))
        };
        from.unwrap_or_default()
    }
}

// Unboxed: boxing would allocate per segment; the item vectors are recycled per batch.
#[allow(clippy::large_enum_variant)]
enum Out {
    Opened(u32),
    Seg(SegmentAnalysis, SegmentDetail),
    Warning(Warning),
    Evicted(Box<FlowSummary>),
    Storage(Recorded),
}

/// An `events` CSV row formatted by a worker: its frame, local stream and where its bytes
/// end in [`BatchOut::rows`]. Kept apart from the items (16 bytes, not an `Out`'s 240),
/// so a batch's rows stay in cache between the worker and the merging thread.
struct RowMeta {
    frame: u64,
    local: u32,
    end: u32,
}

/// Where the items and rows of a frame that has some end in a worker's [`BatchOut`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct FrameEnd {
    frame: u64,
    /// End in [`BatchOut::items`] (a batch holds far fewer than 4 G).
    items: u32,
    /// End in [`BatchOut::row_meta`].
    rows: u32,
}

/// One worker's output for one batch: `ends` lists, in capture order, the frames that
/// brought items or a row, and where those end (a frame's items come before its row).
/// Frames that brought nothing (most, but under `Replay` and `events`) are left out, so
/// the merge does not walk them: it orders the workers' frames by number instead.
#[derive(Default)]
struct BatchOut {
    items: Vec<Out>,
    row_meta: Vec<RowMeta>,
    ends: Vec<FrameEnd>,
    rows: Vec<u8>,
}

impl BatchOut {
    /// The number of the i-th frame with output, [`u64::MAX`] past the last.
    fn frame_of(&self, i: usize) -> u64 {
        self.ends.get(i).map_or(u64::MAX, |e| e.frame)
    }
}

enum WorkerMsg {
    Batch(BatchOut),
    /// Every batch was analysed (the worker waits for the global stream numbers).
    Drained,
    End {
        flows: Vec<FlowSummary>,
        stats: InputStats,
        tail: Option<Box<Tail>>,
    },
}

/// What a worker's diagnoser and storage tracker leave at the end (in global stream
/// numbers once [`Tail::renumber`] ran).
struct Tail {
    listing: Option<Listing>,
    /// The diagnoser's spill (to check for errors).
    spill: Option<Arc<Spill>>,
    tcp_logs: Option<TcpLogs>,
    /// The tracker's last events (unanswered requests), in its stream order.
    finish: Vec<Recorded>,
    /// Frame and time of the last segment the tracker saw.
    last: Option<(FrameNo, Timestamp)>,
}

impl Tail {
    /// Renumbers every stream from the worker's local numbers to `global[local]`.
    fn renumber(&mut self, global: &[u32]) {
        let to = |s: StreamId| StreamId(global[s.0 as usize]);
        if let Some(l) = &mut self.listing {
            l.renumber(|s| global[s as usize]);
        }
        if let Some(logs) = &mut self.tcp_logs {
            logs.renumber(to);
        }
        for e in &mut self.finish {
            e.renumber(to);
        }
    }
}

/// What a worker's storage tracker pushes into: events for the merging thread, but the
/// TCP logs of each connection, which depend on it alone, are kept here (`diagnose`) or
/// dropped (`srt`, whose reports do not read them): a per-segment event less to send.
struct WorkerStorage {
    rec: Recorder,
    logs: Option<TcpLogs>,
}

impl StorageSink for WorkerStorage {
    fn transaction(&mut self, t: &Transaction) {
        self.rec.transaction(t);
    }
    fn notice(&mut self, n: &Notice) {
        self.rec.notice(n);
    }
    fn request(&mut self, r: &Request) {
        self.rec.request(r);
    }
    fn start(&mut self, ts: Timestamp) {
        self.rec.start(ts);
    }
    fn tcp_log(&mut self, stream: StreamId, log: TcpLog) {
        if let Some(logs) = &mut self.logs {
            logs.add(stream, log);
        }
    }
    fn tcp_last(&mut self, frame: FrameNo, ts: Timestamp) {
        if let Some(logs) = &mut self.logs {
            logs.saw(frame, ts);
        }
    }
}

/// What the reader thread hands back at the end.
pub struct ReaderEnd {
    /// The reader (for its warnings).
    pub reader: CaptureReader,
    /// Counters of the frames no worker saw.
    pub stats: InputStats,
    /// First frame's time.
    pub first_ts: Option<Timestamp>,
    /// The read error that ended the input early, if any.
    pub error: Option<CaptureError>,
}

/// The result of a parallel run.
pub struct Parallel {
    /// The reader's end state.
    pub reader: ReaderEnd,
    /// Input counters over every analyzer.
    pub stats: InputStats,
    /// What the storage plans' workers leave, merged.
    pub parts: Parts,
}

/// The merged results of the storage plans' workers, in global stream numbers.
#[derive(Default)]
pub struct Parts {
    /// [`Plan::Diagnose`]: the TCP diagnosis of every connection.
    pub listing: Option<Listing>,
    /// [`Plan::Diagnose`]: the storage connections' TCP logs (for the storage evidence).
    pub tcp_logs: Option<TcpLogs>,
    /// [`Plan::Diagnose`]: the workers' spills (check them for errors).
    pub spills: Vec<Arc<Spill>>,
    /// Time of the last segment the storage trackers saw (a single tracker's `last_ts`).
    pub last_segment_ts: Option<Timestamp>,
}

/// What the run does besides the analysis.
pub struct Job<'a> {
    /// Analysis threads.
    pub threads: usize,
    /// What the workers send back.
    pub plan: Plan,
    /// `--stream` (applied on the merging thread; empty under the storage plans).
    pub streams: &'a [u32],
    /// `--port` (applied in the workers).
    pub ports: &'a [u16],
    /// The storage parsers' configuration (storage plans).
    pub storage: StorageConfig,
    /// Progress bar.
    pub progress: Option<Progress>,
}

/// What the reader does besides routing frames.
struct Routing {
    sweep_every: u64,
    /// Copy the payloads these parsers may read.
    payloads: Option<StorageConfig>,
    /// Count the segments a diagnoser sees (these ports, all if empty) to broadcast its
    /// sweeps.
    diagnoser_ports: Option<Vec<u16>>,
}

/// True if a connection between these ports passes `--port`.
fn port_ok(ports: &[u16], a: u16, b: u16) -> bool {
    ports.is_empty() || ports.contains(&a) || ports.contains(&b)
}

/// The worker of a connection: both directions hash alike.
fn worker_of(input: &FrameInput, n: usize) -> Option<usize> {
    let (FrameInput::Segment(s) | FrameInput::Partial(s)) = input else {
        return None;
    };
    // The same for both directions without sorting the endpoints into a flow key first
    // (with the key, the reader executed 415 instructions a frame, 375 without); mixed
    // fully, so that sequential addresses and ports (a few bulk transfers) still spread
    // evenly.
    let h = mix(FlowKey::symmetric_word(s.src, s.dst));
    // Multiply-shift: the high bits of the mixed word pick the worker, no division.
    Some(((u128::from(h) * n as u128) >> 64) as usize)
}

/// MurmurHash3's 64-bit finalizer: every input bit moves every output bit.
fn mix(mut x: u64) -> u64 {
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    x ^ (x >> 33)
}

fn read_and_route(
    mut reader: CaptureReader,
    workers: Vec<SyncSender<Batch>>,
    recycled: Receiver<Batch>,
    stop: &AtomicBool,
    progress: Option<Progress>,
    routing: Routing,
) -> ReaderEnd {
    let n = workers.len();
    let share_from = if reader.is_mapped() {
        SHARE_MAPPED_FROM
    } else {
        SHARE_FROM
    };
    let fresh = || Batch {
        work: Vec::with_capacity(BATCH),
        ..Batch::default()
    };
    let mut bufs: Vec<Batch> = (0..n).map(|_| fresh()).collect();
    let mut stats = InputStats::default();
    let mut first_ts = None;
    let mut error = None;
    let mut since_sweep = 0u64;
    let mut since_diag_sweep = 0u32;
    let mut in_batch = 0usize;
    let mut batch_bytes = 0usize;
    let mut frames = 0u64;
    // Every frame is decoded here, in place (`FrameInput::decode_from`).
    let mut input = FrameInput::EMPTY;
    // Every worker gets a batch at each flush, empty or not: the merge takes one from each.
    let flush = |bufs: &mut Vec<Batch>| -> bool {
        for (tx, buf) in workers.iter().zip(bufs.iter_mut()) {
            // Reuse the vectors workers hand back: a fresh large one per batch costs page faults.
            let next = recycled.try_recv().unwrap_or_else(|_| fresh());
            if tx.send(std::mem::replace(buf, next)).is_err() {
                return false;
            }
        }
        true
    };
    loop {
        let frame = match reader.next_frame_at() {
            Ok(Some(f)) => f,
            Ok(None) => break,
            Err(e) => {
                error = Some(e);
                break;
            }
        };
        let (worker, mut at, long) = {
            let f = reader.frame_of(&frame);
            let payload = input.decode_from(&f);
            let worker = worker_of(&input, n);
            // The storage parsers' payload: copied if short, else its range in the buffer.
            let mut at = Payload::default();
            let mut long = None;
            if let (Some(cfg), FrameInput::Segment(seg), Some(w)) =
                (&routing.payloads, &input, worker)
                && !payload.is_empty()
                && cfg.may_parse(seg.src.port, seg.dst.port)
            {
                batch_bytes += payload.len();
                if payload.len() < share_from {
                    let b = &mut bufs[w];
                    at = Payload {
                        buf: COPIED,
                        start: b.bytes.len() as u64,
                        len: payload.len() as u32,
                    };
                    b.bytes.extend_from_slice(payload);
                } else {
                    // The payload is a part of the frame's bytes.
                    let offset = payload.as_ptr().addr() - f.data.as_ptr().addr();
                    long = Some((frame.start + offset, payload.len()));
                }
            }
            (worker, at, long)
        };
        let ts = input.ts();
        if first_ts.is_none() {
            first_ts = Some(ts);
            for b in &mut bufs {
                b.work.push(Work::Origin(ts));
            }
        }
        match worker {
            Some(w) => {
                let b = &mut bufs[w];
                if let Some((start, len)) = long {
                    if b.last_buf != Some(frame.buffer) {
                        // The batch keeps the buffer alive: the reader writes into another.
                        b.bufs.push(reader.share_buffer());
                        b.last_buf = Some(frame.buffer);
                    }
                    // Buffers are far below 4 GiB (a record at most); a batch holds few.
                    at = Payload {
                        buf: (b.bufs.len() - 1) as u32,
                        start: start as u64,
                        len: len as u32,
                    };
                }
                let diagnosed = match (&routing.diagnoser_ports, &input) {
                    (Some(ports), FrameInput::Segment(seg)) => {
                        port_ok(ports, seg.src.port, seg.dst.port)
                    }
                    _ => false,
                };
                b.work.push(Work::Input(input, at));
                // A single diagnoser looks for closed connections after every
                // `CLOSED_SWEEP_EVERY` segments it is fed: every one looks at the same one.
                if diagnosed {
                    since_diag_sweep += 1;
                    if since_diag_sweep >= CLOSED_SWEEP_EVERY {
                        since_diag_sweep = 0;
                        for b in &mut bufs {
                            b.work.push(Work::DiagnoserSweep(ts));
                        }
                    }
                }
            }
            None => {
                if let FrameInput::Other {
                    fragment,
                    undecodable,
                    ..
                } = input
                {
                    stats.frames += 1;
                    stats.fragments += u64::from(fragment);
                    stats.undecodable += u64::from(undecodable);
                }
            }
        }
        // The single analyzer sweeps after every `sweep_every` frames: same frames here.
        since_sweep += 1;
        if since_sweep >= routing.sweep_every {
            since_sweep = 0;
            for b in &mut bufs {
                b.work.push(Work::Sweep(ts));
            }
        }
        in_batch += 1;
        frames += 1;
        if in_batch >= BATCH || batch_bytes >= BATCH_BYTES {
            in_batch = 0;
            batch_bytes = 0;
            if let Some(p) = &progress {
                p.update(reader.input_bytes_read(), frames);
            }
            if !flush(&mut bufs) || stop.load(Ordering::Relaxed) {
                break;
            }
        }
    }
    flush(&mut bufs);
    if let Some(p) = progress {
        p.finish();
    }
    ReaderEnd {
        reader,
        stats,
        first_ts,
        error,
    }
}

/// A worker's own diagnoser and storage tracker (storage plans).
enum Local {
    None,
    Diagnose(Box<Diagnosing<WorkerStorage>>),
    Storage(Box<Tracker<WorkerStorage>>),
}

impl Local {
    fn new(plan: Plan, cfg: &StorageConfig) -> Self {
        match plan {
            Plan::Diagnose => Local::Diagnose(Box::new(Diagnosing::with_parts(
                Diagnoser::new()
                    .swept_by_caller()
                    .spilling_to(crate::spill::new_spill()),
                cfg.clone(),
                WorkerStorage {
                    rec: Recorder::default(),
                    logs: Some(TcpLogs::default()),
                },
            ))),
            Plan::Storage => Local::Storage(Box::new(Tracker::new(
                cfg.clone(),
                WorkerStorage {
                    rec: Recorder::default(),
                    logs: None,
                },
            ))),
            _ => Local::None,
        }
    }

    /// Whether the local diagnoser or tracker reads flow statistics.
    fn needs_flow_stats(&self) -> bool {
        match self {
            Local::None => false,
            Local::Diagnose(d) => d.needs_flow_stats(),
            Local::Storage(t) => t.needs_flow_stats(),
        }
    }

    fn sink(&mut self) -> Option<&mut dyn EventSink> {
        match self {
            Local::None => None,
            Local::Diagnose(d) => Some(d.as_mut()),
            Local::Storage(t) => Some(t.as_mut()),
        }
    }

    /// The storage events recorded so far.
    fn events(&mut self) -> Option<&mut Vec<Recorded>> {
        match self {
            Local::None => None,
            Local::Diagnose(d) => Some(&mut d.tracker_mut().sink_mut().rec.events),
            Local::Storage(t) => Some(&mut t.sink_mut().rec.events),
        }
    }

    /// End of input: the diagnoser's listing and the tracker's last events.
    fn finish(self, last: Option<(FrameNo, Timestamp)>) -> Option<Box<Tail>> {
        let (listing, spill, mut tracker) = match self {
            Local::None => return None,
            Local::Diagnose(d) => {
                let (diag, tracker) = (*d).into_parts();
                let spill = diag.spill().clone();
                (Some(diag.into_listing()), Some(spill), tracker)
            }
            Local::Storage(t) => (None, None, *t),
        };
        tracker.finish();
        let sink = tracker.into_sink();
        Some(Box::new(Tail {
            listing,
            spill,
            tcp_logs: sink.logs,
            finish: sink.rec.events,
            last,
        }))
    }
}

/// Collects a worker's output for the merge.
struct WorkerSink<'a> {
    plan: Plan,
    /// Someone reads the flow summaries' statistics: the merging thread's sink (which gets
    /// the summaries) or the local diagnoser and tracker (which get the evicted ones).
    flow_stats: bool,
    out: &'a mut BatchOut,
    ports: &'a [u16],
    tail: &'a mut CsvTail,
    line: &'a mut Line,
    local: &'a mut Local,
    /// Frame and time of the last segment fed to `local`.
    last: &'a mut Option<(FrameNo, Timestamp)>,
}

impl EventSink for WorkerSink<'_> {
    fn segment_detail(&mut self, a: &SegmentAnalysis, d: &SegmentDetail) {
        match self.plan {
            Plan::Replay | Plan::Serial => self.out.items.push(Out::Seg(*a, *d)),
            Plan::FlowsOnly => {}
            Plan::CsvRows { flagged } => {
                if port_ok(self.ports, a.sport, a.dport) && (!flagged || !a.flags.is_empty()) {
                    self.line.clear();
                    self.tail.format(self.line, a);
                    self.out.rows.extend_from_slice(self.line.as_bytes());
                    self.out.row_meta.push(RowMeta {
                        frame: a.frame.0,
                        local: a.stream.0,
                        // A batch's rows stay far below 4 GiB (BATCH_BYTES bounds it).
                        end: u32::try_from(self.out.rows.len()).unwrap_or(u32::MAX),
                    });
                }
            }
            Plan::Diagnose | Plan::Storage => {
                if port_ok(self.ports, a.sport, a.dport)
                    && let Some(local) = self.local.sink()
                {
                    local.segment_detail(a, d);
                    *self.last = Some((a.frame, a.ts));
                }
            }
        }
    }
    fn payload(&mut self, a: &SegmentAnalysis, payload: &[u8]) {
        if port_ok(self.ports, a.sport, a.dport)
            && let Some(local) = self.local.sink()
        {
            local.payload(a, payload);
        }
    }
    fn warning(&mut self, w: &Warning) {
        self.out.items.push(Out::Warning(w.clone()));
    }
    fn flow_evicted(&mut self, f: &FlowSummary) {
        if self.plan.storage() {
            if port_ok(self.ports, f.dirs[0].src.port, f.dirs[0].dst.port)
                && let Some(local) = self.local.sink()
            {
                local.flow_evicted(f);
            }
        } else {
            self.out.items.push(Out::Evicted(Box::new(f.clone())));
        }
    }
    fn stream_opened(&mut self, stream: StreamId, _frame: FrameNo) {
        self.out.items.push(Out::Opened(stream.0));
    }
    fn needs_flow_stats(&self) -> bool {
        self.flow_stats
    }
}

/// Collects the summaries of `handle_end`, if someone reads them.
struct FlowCollector {
    flows: Vec<FlowSummary>,
    wanted: bool,
}

impl EventSink for FlowCollector {
    fn flow(&mut self, f: &FlowSummary) {
        self.flows.push(f.clone());
    }
    fn needs_flows(&self) -> bool {
        self.wanted
    }
}

/// A worker's channels.
struct Channels {
    rx: Receiver<Batch>,
    tx: SyncSender<WorkerMsg>,
    recycle: SyncSender<Batch>,
    spent: Receiver<BatchOut>,
    /// The global stream numbers of this worker's local ones, sent once every batch is
    /// merged (see [`work`]).
    numbers: Receiver<Vec<u32>>,
}

/// What the merging thread's sink reads of the flows.
#[derive(Clone, Copy)]
struct FlowNeeds {
    /// Flow statistics ([`EventSink::needs_flow_stats`]).
    stats: bool,
    /// The summaries at the end ([`EventSink::needs_flows`]).
    summaries: bool,
}

/// A worker: analyses the frames routed to it. At the end it renumbers what it leaves to
/// the global stream numbers itself, beside the other workers: on the merging thread, after
/// every worker had ended, that took 6-8 ms of a 300 ms `diagnose` on many connections.
fn work(
    cfg: AnalyzerConfig,
    ch: Channels,
    plan: Plan,
    ports: Vec<u16>,
    storage: StorageConfig,
    needs: FlowNeeds,
) {
    let mut an = Analyzer::new(cfg);
    let mut tail = CsvTail::default();
    let mut line = Line::default();
    let mut local = Local::new(plan, &storage);
    let flow_stats = needs.stats || local.needs_flow_stats();
    let mut last = None;
    for mut batch in ch.rx {
        // Reuse the merger's spent outputs: fresh large vectors per batch cost page faults.
        let mut out = ch.spent.try_recv().unwrap_or_default();
        out.items.clear();
        out.row_meta.clear();
        out.ends.clear();
        out.rows.clear();
        let mut sink = WorkerSink {
            plan,
            flow_stats,
            out: &mut out,
            ports: &ports,
            tail: &mut tail,
            line: &mut line,
            local: &mut local,
            last: &mut last,
        };
        for w in &batch.work {
            match w {
                Work::Origin(ts) => an.set_origin(*ts),
                Work::Sweep(ts) => an.sweep(*ts),
                Work::DiagnoserSweep(ts) => {
                    if let Local::Diagnose(d) = sink.local {
                        d.diagnoser_mut().sweep(ts.0);
                    }
                }
                Work::Input(input, at) => {
                    let payload = batch.payload(*at);
                    an.handle_input_with_payload(input, payload, &mut sink);
                    if let Some(events) = sink.local.events() {
                        sink.out.items.extend(events.drain(..).map(Out::Storage));
                    }
                    let out = &mut *sink.out;
                    // Far below 4 G items or rows a batch (BATCH frames, BATCH_BYTES).
                    let (items, rows) = (out.items.len() as u32, out.row_meta.len() as u32);
                    if out.ends.last().map_or((0, 0), |e| (e.items, e.rows)) != (items, rows) {
                        out.ends.push(FrameEnd {
                            frame: input.frame().0,
                            items,
                            rows,
                        });
                    }
                }
            }
        }
        if ch.tx.send(WorkerMsg::Batch(out)).is_err() {
            return;
        }
        batch.work.clear();
        batch.bytes.clear();
        // Let go of the reader's buffers now, so it can reuse them.
        batch.bufs.clear();
        batch.last_buf = None;
        let _ = ch.recycle.try_send(batch);
    }
    if ch.tx.send(WorkerMsg::Drained).is_err() {
        return;
    }
    // The local diagnoser and tracker read no summaries at the end (a single one would get
    // them from the analyzer, so they would have to be handed over here).
    debug_assert!(!local.sink().is_some_and(|s| s.needs_flows()));
    let mut flows = FlowCollector {
        flows: Vec::new(),
        wanted: needs.summaries,
    };
    an.handle_end(&mut flows);
    let mut tail = local.finish(last);
    // Every stream this worker opened is numbered once the merging thread has merged its
    // last batch (it hangs up instead if it stopped early on an error).
    let Ok(global) = ch.numbers.recv() else {
        return;
    };
    for f in &mut flows.flows {
        f.stream = StreamId(global[f.stream.0 as usize]);
    }
    if let Some(t) = &mut tail {
        t.renumber(&global);
    }
    let _ = ch.tx.send(WorkerMsg::End {
        flows: flows.flows,
        stats: an.stats().clone(),
        tail,
    });
}

/// Local stream index -> global, per worker, in order of first appearance.
#[derive(Default)]
struct Renumber {
    maps: Vec<Vec<u32>>,
    next: u32,
}

impl Renumber {
    fn open(&mut self, w: usize, local: u32) {
        debug_assert_eq!(self.maps[w].len(), local as usize);
        self.maps[w].push(self.next);
        self.next += 1;
    }
    fn get(&self, w: usize, local: u32) -> u32 {
        self.maps[w][local as usize]
    }
    fn warning(&self, w: usize, warn: &mut Warning) {
        if let Some(stream) = warn.stream_mut() {
            *stream = StreamId(self.get(w, stream.0));
        }
    }
}

/// How far the merge has come in one worker's [`BatchOut`].
#[derive(Clone, Copy, Default)]
struct At {
    /// Next of its [`BatchOut::ends`].
    frame: usize,
    /// Next item.
    item: usize,
    /// Next row's meta.
    meta: usize,
    /// Next row's first byte.
    row: usize,
}

/// The merge's walk through one batch of every worker: their frames with output, in
/// capture order.
#[derive(Default)]
struct Merge {
    /// How far it has come in each worker's output.
    at: Vec<At>,
    /// Each worker's next frame number ([`u64::MAX`] once it has none), kept apart from
    /// `at` so that picking the next worker reads one small array.
    heads: Vec<u64>,
}

impl Merge {
    /// Starts on a new batch of every worker.
    fn reset(&mut self, outs: &[BatchOut]) {
        self.at.clear();
        self.at.resize(outs.len(), At::default());
        self.heads.clear();
        self.heads.extend(outs.iter().map(|o| o.frame_of(0)));
    }

    /// The next frame with output in capture order: its worker and where its output
    /// ends; moves past it. A linear scan for the first: the workers are as many as the
    /// cores, and on few cores it costs less than keeping a heap.
    // Always inlined: once a frame with output (every segment for `events`), and left
    // out of line it cost 1.4% more instructions there.
    #[inline(always)]
    fn next(&mut self, outs: &[BatchOut]) -> Option<(usize, FrameEnd)> {
        let (mut w, mut first) = (0, *self.heads.first()?);
        for (i, &h) in self.heads.iter().enumerate().skip(1) {
            if h < first {
                (w, first) = (i, h);
            }
        }
        if first == u64::MAX {
            return None;
        }
        let at = &mut self.at[w];
        let end = outs[w].ends[at.frame];
        at.frame += 1;
        self.heads[w] = outs[w].frame_of(at.frame);
        Some((w, end))
    }
}

/// Runs the analysis on `job.threads` workers; replays results into `sink` in capture
/// order (the caller filters them), and the storage plans' storage events into `storage`.
/// `row` receives CSV rows under [`Plan::CsvRows`] (`frame`, global stream, row tail),
/// already filtered by `streams` and (in the workers) `ports`.
pub fn run<S: EventSink, T: StorageSink>(
    reader: CaptureReader,
    cfg: AnalyzerConfig,
    job: Job<'_>,
    sink: &mut S,
    storage: &mut T,
    stop: impl Fn(&S, &T) -> bool,
    mut row: impl FnMut(&mut S, u64, u32, &[u8]),
) -> Result<Parallel> {
    let n = job.threads.clamp(1, 255);
    let plan = job.plan;
    let streams = job.streams;
    let routing = Routing {
        sweep_every: cfg.sweep_every_frames,
        payloads: plan.storage().then(|| job.storage.clone()),
        diagnoser_ports: (plan == Plan::Diagnose).then(|| job.ports.to_vec()),
    };
    // Each worker tracks its share of the connections; which ones get evicted when the
    // limit is reached therefore depends on the thread count (documented in --help).
    let mut worker_cfg = cfg.clone();
    worker_cfg.sweep_every_frames = u64::MAX; // the reader sends the sweeps
    worker_cfg.max_flows = cfg.max_flows.div_ceil(n).max(1);
    worker_cfg.max_evicted_remembered = cfg.max_evicted_remembered.div_ceil(n).max(1);
    let stop_flag = AtomicBool::new(false);
    let needs = FlowNeeds {
        stats: sink.needs_flow_stats(),
        summaries: sink.needs_flows(),
    };
    thread::scope(|scope| {
        let (recycle_tx, recycle_rx) = sync_channel::<Batch>(DEPTH * n + n);
        let mut to_workers = Vec::with_capacity(n);
        let mut from_workers = Vec::with_capacity(n);
        let mut spent_to = Vec::with_capacity(n);
        let mut numbers_to = Vec::with_capacity(n);
        for _ in 0..n {
            let (tx, rx) = sync_channel::<Batch>(DEPTH);
            let (otx, orx) = sync_channel::<WorkerMsg>(DEPTH);
            let ports = job.ports.to_vec();
            let (spent_tx, spent_rx) = sync_channel::<BatchOut>(DEPTH);
            let (numbers_tx, numbers_rx) = sync_channel::<Vec<u32>>(1);
            let ch = Channels {
                rx,
                tx: otx,
                recycle: recycle_tx.clone(),
                spent: spent_rx,
                numbers: numbers_rx,
            };
            let cfg = worker_cfg.clone();
            let storage_cfg = job.storage.clone();
            // Named threads: profilers and `top -H` then tell them apart.
            thread::Builder::new()
                .name(format!("tcpdx-worker-{}", to_workers.len()))
                .spawn_scoped(scope, move || {
                    work(cfg, ch, plan, ports, storage_cfg, needs)
                })?;
            spent_to.push(spent_tx);
            numbers_to.push(numbers_tx);
            to_workers.push(tx);
            from_workers.push(orx);
        }
        drop(recycle_tx);
        let stop_ref = &stop_flag;
        let progress = job.progress;
        let reader_thread = thread::Builder::new()
            .name("tcpdx-route".into())
            .spawn_scoped(scope, move || {
                read_and_route(reader, to_workers, recycle_rx, stop_ref, progress, routing)
            })?;

        let mut ids = Renumber {
            maps: vec![Vec::new(); n],
            next: 0,
        };
        let keep_stream = |s: u32| streams.is_empty() || streams.contains(&s);
        let mut stopped = false;
        let mut started = false;
        let mut outs: Vec<BatchOut> = Vec::with_capacity(n);
        let mut merge = Merge::default();
        loop {
            // One batch from every worker (the reader sends each one at every flush), or
            // the end from every one.
            outs.clear();
            let mut drained = 0;
            for rx in &from_workers {
                match rx.recv() {
                    Ok(WorkerMsg::Batch(b)) => outs.push(b),
                    Ok(WorkerMsg::Drained) => drained += 1,
                    _ => anyhow::bail!("an analysis worker stopped unexpectedly"),
                }
            }
            match drained {
                0 => {}
                d if d == n => break,
                _ => anyhow::bail!("the analysis workers got different numbers of batches"),
            }
            // Once stopped, drain so the reader and workers can finish; only the stream
            // numbers are still followed (the workers' last flows name every stream).
            merge.reset(&outs);
            while let Some((w, e)) = merge.next(&outs) {
                let out = &mut outs[w];
                let at = &mut merge.at[w];
                let (end, meta_end) = (e.items as usize, e.rows as usize);
                for item in &mut out.items[at.item..end] {
                    if stopped && !matches!(item, Out::Opened(_)) {
                        continue;
                    }
                    match item {
                        Out::Opened(local) => ids.open(w, *local),
                        Out::Seg(a, d) => {
                            a.stream = StreamId(ids.get(w, a.stream.0));
                            sink.segment_detail(a, d);
                        }
                        Out::Warning(warn) => {
                            ids.warning(w, warn);
                            sink.warning(warn);
                        }
                        Out::Evicted(f) => {
                            f.stream = StreamId(ids.get(w, f.stream.0));
                            sink.flow_evicted(f);
                        }
                        Out::Storage(e) => {
                            // Every tracker starts at its first segment: the first is the
                            // single tracker's start.
                            if matches!(e, Recorded::Start(_)) {
                                if started {
                                    continue;
                                }
                                started = true;
                            }
                            e.renumber(|s| StreamId(ids.get(w, s.0)));
                            e.replay(storage);
                        }
                    }
                }
                at.item = end;
                // The frame's row after its items (a connection's `Opened` comes first).
                for m in &out.row_meta[at.meta..meta_end] {
                    let end = m.end as usize;
                    if !stopped {
                        let g = ids.get(w, m.local);
                        if keep_stream(g) {
                            row(sink, m.frame, g, &out.rows[at.row..end]);
                        }
                    }
                    at.row = end;
                }
                at.meta = meta_end;
            }
            for (out, tx) in outs.drain(..).zip(&spent_to) {
                let _ = tx.try_send(out);
            }
            if !stopped && stop(sink, storage) {
                stopped = true;
                stop_flag.store(true, Ordering::Relaxed);
            }
        }
        // Every batch is merged: each worker's streams all have their global numbers.
        for (tx, map) in numbers_to.iter().zip(ids.maps) {
            let _ = tx.send(map);
        }
        let end = reader_thread
            .join()
            .map_err(|_| anyhow::anyhow!("the capture reader thread panicked"))?;
        let mut stats = end.stats.clone();
        let mut flows = Vec::new();
        let mut parts = Parts::default();
        let mut finish = Vec::new();
        let mut last: Option<(FrameNo, Timestamp)> = None;
        for rx in &from_workers {
            for msg in rx {
                if let WorkerMsg::End {
                    flows: f,
                    stats: s,
                    tail,
                } = msg
                {
                    stats.add(&s);
                    flows.extend(f);
                    let Some(tail) = tail else { continue };
                    let Tail {
                        listing: l,
                        spill,
                        tcp_logs,
                        finish: events,
                        last: l_last,
                    } = *tail;
                    if let Some(l) = l {
                        match &mut parts.listing {
                            Some(all) => all.merge(l),
                            None => parts.listing = Some(l),
                        }
                    }
                    parts.spills.extend(spill);
                    if let Some(logs) = tcp_logs {
                        parts
                            .tcp_logs
                            .get_or_insert_with(TcpLogs::default)
                            .merge(logs);
                    }
                    finish.extend(events);
                    if l_last.is_some_and(|(f, _)| last.is_none_or(|(g, _)| f > g)) {
                        last = l_last;
                    }
                }
            }
        }
        if end.error.is_none() && !stopped {
            flows.sort_by_key(|f| f.stream.0);
            for f in &flows {
                sink.flow(f);
            }
        }
        if end.error.is_none() {
            // A single tracker ends its connections in stream order; each worker's come in
            // its own stream order, which the global numbering keeps (stable sort).
            finish.sort_by_key(Recorded::stream);
            for e in &finish {
                e.replay(storage);
            }
        }
        parts.last_segment_ts = last.map(|(_, ts)| ts);
        Ok(Parallel {
            reader: end,
            stats,
            parts,
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
    use tcpdx_core::{Endpoint, Segment};
    use tcpdx_wire::{SeqNum, TcpFlags, TcpOptions};

    fn seg(src: Endpoint, dst: Endpoint) -> FrameInput {
        FrameInput::Segment(Segment {
            frame: FrameNo(1),
            ts: Timestamp(0),
            src,
            dst,
            seq: SeqNum(0),
            ack: SeqNum(0),
            flags: TcpFlags::default(),
            window: 0,
            len: 0,
            ip_id: 0,
            ttl: 64,
            captured: 0,
            options: TcpOptions::default(),
        })
    }

    fn v4(a: u8, b: u8, port: u16) -> Endpoint {
        Endpoint {
            addr: IpAddr::V4(Ipv4Addr::new(10, 1, a, b)),
            port,
        }
    }

    /// Connections per worker for `conns` clients numbered like tcpdx-synth's (address and
    /// port both counting up) talking to one server, over IPv4 or IPv6.
    fn spread(conns: u32, n: usize, v6: bool) -> Vec<usize> {
        let (server, mut counts) = (v4(0, 1, 445), vec![0usize; n]);
        for i in 0..conns {
            let (hi, lo, port) = ((4 + i / 256) as u8, (1 + i % 256) as u8, (1025 + i) as u16);
            let client = if v6 {
                let addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, hi.into(), lo.into());
                Endpoint {
                    addr: IpAddr::V6(addr),
                    port,
                }
            } else {
                v4(hi, lo, port)
            };
            counts[worker_of(&seg(client, server), n).unwrap()] += 1;
        }
        counts
    }

    #[test]
    fn both_directions_go_to_the_same_worker() {
        let v6 = |last: u16, port| Endpoint {
            addr: IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 1, last)),
            port,
        };
        for i in 0..200u16 {
            for (a, b) in [
                (v4(4, i as u8, 1025 + i), v4(0, 1, 445)),
                (v6(i, 40000 + i), v6(1, 2049)),
            ] {
                for n in 1..=4 {
                    assert_eq!(worker_of(&seg(a, b), n), worker_of(&seg(b, a), n));
                    assert!(worker_of(&seg(a, b), n).unwrap() < n);
                }
            }
        }
    }

    #[test]
    fn the_merge_takes_frames_in_capture_order() {
        let out = |frames: &[u64]| BatchOut {
            ends: frames
                .iter()
                .map(|&frame| FrameEnd {
                    frame,
                    items: 0,
                    rows: 0,
                })
                .collect(),
            ..BatchOut::default()
        };
        // Three workers' frames with output; one worker has none in this batch.
        let outs = [out(&[2, 3, 9]), out(&[]), out(&[1, 5, 6, 10])];
        let mut merge = Merge::default();
        merge.reset(&outs);
        let mut order = Vec::new();
        while let Some((w, e)) = merge.next(&outs) {
            order.push((w, e.frame));
        }
        let frames: Vec<u64> = order.iter().map(|&(_, f)| f).collect();
        assert_eq!(frames, [1, 2, 3, 5, 6, 9, 10]);
        assert_eq!(order[0].0, 2);
        assert_eq!(order[1].0, 0);
        // Past the end, and with no workers at all, there is nothing.
        assert_eq!(merge.next(&outs), None);
        merge.reset(&[]);
        assert_eq!(merge.next(&[]), None);
    }

    #[test]
    fn sequential_connections_spread_evenly() {
        // (The old hash put 13 of tcpdx-synth's 16 bulk connections on one of two workers;
        // with so few, a hash spreads them only as evenly as chance allows.)
        // Many connections: within 3 % of an even share.
        for (n, v6) in (2..=4).flat_map(|n| [(n, false), (n, true)]) {
            let c = spread(25_000, n, v6);
            let share = 25_000 / n;
            assert!(
                c.iter().all(|&k| k.abs_diff(share) * 33 < share),
                "{n} workers (IPv6: {v6}): {c:?}"
            );
        }
    }
}
