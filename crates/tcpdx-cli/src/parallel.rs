//! Multi-core analysis.
//!
//! A reader thread reads the capture and hands out batches of frames as they lie in its
//! buffers ([`CaptureReader::next_frame_at`], [`CaptureReader::share_buffer`]): no frame is
//! decoded or copied there. Every one of the N workers walks every batch; each frame belongs
//! to the worker picked by a hash of its connection's 4-tuple, read cheaply for the common
//! Ethernet/IPv4/TCP frame ([`fast_tcp_tuple`]) and by a full decode otherwise, so all
//! workers agree on the owner; the owner decodes and analyses it. Every worker sees every
//! frame, so each runs the single analyzer's expiry sweeps, and the single diagnoser's looks
//! for closed connections, at the same frames itself. The caller's thread merges the
//! workers' output back into capture order; workers number streams locally and the merge
//! renumbers them in order of first appearance, which is how a single analyzer numbers them,
//! so every output is identical whatever the thread count
//! (crates/tcpdx-cli/tests/threads.rs checks it).
//!
//! `diagnose` and `srt` ([`Plan::Diagnose`], [`Plan::Storage`]) run the per-connection work
//! in the workers too: each has its own TCP diagnoser and storage tracker beside its
//! analyzer, which read the payloads where they lie. The trackers' events are recorded and
//! replayed on the merging thread in capture order, and the diagnosers' listings are
//! renumbered and merged at the end ([`tcpdx_detect::Listing`]), so the result is the
//! single-thread one.
//!
//! Why not a reader that decodes and routes: it cost as much per frame as a worker's
//! analysis of `events`, and the decoded frames crossing cores cost more, so two workers
//! ran `events` and `flows` only 1.2-1.4x faster than one.

use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::thread;

use anyhow::Result;
use tcpdx_capture::{CaptureError, CaptureReader, FrameAt};
use tcpdx_core::{
    Analyzer, AnalyzerConfig, Endpoint, EventSink, FlowSummary, FrameInput, InputStats,
    SegmentAnalysis, SegmentDetail, StreamId, Warning,
};
use tcpdx_detect::{CLOSED_SWEEP_EVERY, Diagnoser, Listing, Spill};
use tcpdx_report::{CsvTail, Line};
use tcpdx_storage::findings::TcpLogs;
use tcpdx_storage::{
    Diagnosing, Notice, Recorded, Recorder, Request, StorageConfig, StorageSink, Tracker,
    Transaction,
};
use tcpdx_wire::{FrameNo, LinkType, Timestamp, decode, fast_tcp_tuple};

use crate::progress::Progress;

/// Frames per batch: large enough that channel costs vanish, small enough to stay in cache.
const BATCH: usize = 4096;
/// Batches in flight per channel (bounds memory whatever the capture holds).
const DEPTH: usize = 4;
/// Captured bytes per batch: a batch is sent early when its frames hold this much, so the
/// buffers the batches in flight keep alive stay few (4096 full 9000-byte frames would
/// keep 37 MB of buffers alive per batch), and the reader's spare buffers are reused.
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

/// A frame of a batch: the record's fields and where its bytes are in the batch's buffers.
struct Meta {
    no: FrameNo,
    ts: Timestamp,
    orig_len: u32,
    link: LinkType,
    /// Index in [`Batch::bufs`].
    buf: u16,
    /// The worker that owns it, if the reader could tell ([`fast_owner`]; else
    /// [`UNKNOWN`]: every worker decodes it to know).
    owner: u8,
    /// A TCP segment the diagnoser counts (when `owner` is known).
    diagnosed: bool,
    start: usize,
    len: usize,
}

/// [`Meta::owner`] when the reader could not tell.
const UNKNOWN: u8 = u8::MAX;

/// Consecutive frames, as they lie in the reader's buffers; every worker reads all of it.
#[derive(Default)]
struct Batch {
    /// The buffers the frames lie in (the reader no longer writes into them).
    bufs: Vec<Arc<Vec<u8>>>,
    frames: Vec<Meta>,
}

impl Batch {
    /// The captured bytes of `m`.
    fn data(&self, m: &Meta) -> &[u8] {
        self.bufs
            .get(usize::from(m.buf))
            .and_then(|b| b.get(m.start..m.start + m.len))
            .unwrap_or_default()
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

/// One worker's output for one batch: `owned[k]` is the index in the batch of the k-th frame
/// it analysed, `ends[k]` where that frame's items and rows end (a frame's items come
/// before its row).
#[derive(Default)]
struct BatchOut {
    /// Frames in the batch.
    frames: usize,
    owned: Vec<u32>,
    items: Vec<Out>,
    row_meta: Vec<RowMeta>,
    ends: Vec<(usize, usize)>,
    rows: Vec<u8>,
}

enum WorkerMsg {
    Batch(BatchOut),
    End {
        flows: Vec<FlowSummary>,
        stats: InputStats,
        tail: Option<Box<Tail>>,
    },
}

/// What a worker's diagnoser and storage tracker leave at the end.
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
        if let Some(logs) = &mut self.logs {
            logs.request(r.stream);
        }
    }
    fn start(&mut self, ts: Timestamp) {
        self.rec.start(ts);
    }
    fn tcp_segment(&mut self, a: &SegmentAnalysis) {
        if let Some(logs) = &mut self.logs {
            logs.segment(a);
        }
    }
}

/// What the reader thread hands back at the end.
pub struct ReaderEnd {
    /// The reader (for its warnings).
    pub reader: CaptureReader,
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

/// The single analyzer's and diagnoser's periodic work, which every worker runs at the
/// same frames.
#[derive(Clone)]
struct Sweeps {
    /// The analyzer sweeps after every this many frames.
    every: u64,
    /// `diagnose`: the diagnoser looks for closed connections after every
    /// `CLOSED_SWEEP_EVERY` segments it is fed, those between these ports (all if empty).
    diagnoser_ports: Option<Vec<u16>>,
}

/// True if a connection between these ports passes `--port`.
fn port_ok(ports: &[u16], a: u16, b: u16) -> bool {
    ports.is_empty() || ports.contains(&a) || ports.contains(&b)
}

/// The worker of a connection between `a` and `b` (address folded by [`fold`], port):
/// both directions hash alike, and a frame's tuple read by the fast path and by a full
/// decode give the same worker. Written for the walk every worker makes over every frame:
/// a few instructions, where building a `FlowKey` cost several times more.
#[inline]
fn worker_of((a, pa): (u64, u16), (b, pb): (u64, u16), n: usize) -> usize {
    let ka = (a << 16) | u64::from(pa);
    let kb = (b << 16) | u64::from(pb);
    let (lo, hi) = if ka < kb { (ka, kb) } else { (kb, ka) };
    // Mixed fully, so that sequential addresses and ports (a few bulk transfers) still
    // spread evenly; multiply-shift: the high bits pick the worker, no division.
    let h = mix(lo.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ hi);
    ((u128::from(h) * n as u128) >> 64) as usize
}

/// An address as [`worker_of`] takes it (IPv6 folded to 64 bits: only the spread matters).
#[inline]
fn fold(addr: IpAddr) -> u64 {
    match addr {
        IpAddr::V4(a) => u64::from(u32::from(a)),
        IpAddr::V6(a) => {
            let x = u128::from(a);
            (x as u64) ^ ((x >> 64) as u64)
        }
    }
}

/// [`worker_of`] for two endpoints.
fn worker_of_endpoints(src: Endpoint, dst: Endpoint, n: usize) -> usize {
    worker_of((fold(src.addr), src.port), (fold(dst.addr), dst.port), n)
}

/// MurmurHash3's 64-bit finalizer: every input bit moves every output bit.
fn mix(mut x: u64) -> u64 {
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    x ^ (x >> 33)
}

/// Reads frames into batches that every worker (`workers`) reads; `recycled` hands back
/// the vectors of batches the workers are done with.
fn read_and_share(
    mut reader: CaptureReader,
    workers: Vec<SyncSender<Arc<Batch>>>,
    recycled: Receiver<Batch>,
    diagnoser_ports: Option<&[u16]>,
    stop: &AtomicBool,
    progress: Option<Progress>,
) -> ReaderEnd {
    let n = workers.len();
    let mut first_ts = None;
    let mut error = None;
    let mut frames = 0u64;
    let mut batch = Batch::default();
    // The buffer of the batch's last frame.
    let mut buffer = None;
    let mut bytes = 0usize;
    let send = |batch: Batch| -> bool {
        let batch = Arc::new(batch);
        workers.iter().all(|tx| tx.send(Arc::clone(&batch)).is_ok())
    };
    loop {
        let f: FrameAt = match reader.next_frame_at() {
            Ok(Some(f)) => f,
            Ok(None) => break,
            Err(e) => {
                error = Some(e);
                break;
            }
        };
        first_ts.get_or_insert(f.ts);
        if buffer != Some(f.buffer) {
            // The batch keeps the buffer alive, so the reader writes into another one.
            batch.bufs.push(reader.share_buffer());
            buffer = Some(f.buffer);
        }
        let data = batch
            .bufs
            .last()
            .and_then(|b| b.get(f.range()))
            .unwrap_or_default();
        let (owner, diagnosed) = match fast_owner(f.link, data, f.orig_len, n) {
            Some((w, (a, b))) => (w, diagnoser_ports.is_some_and(|p| port_ok(p, a, b))),
            None => (UNKNOWN, false),
        };
        batch.frames.push(Meta {
            no: f.no,
            ts: f.ts,
            orig_len: f.orig_len,
            link: f.link,
            // BATCH_BYTES keeps a batch's buffers far below 65,536.
            buf: u16::try_from(batch.bufs.len() - 1).unwrap_or(u16::MAX),
            owner,
            diagnosed,
            start: f.start,
            len: f.len,
        });
        bytes += f.len;
        frames += 1;
        if batch.frames.len() >= BATCH || bytes >= BATCH_BYTES {
            if let Some(p) = &progress {
                p.update(reader.input_bytes_read(), frames);
            }
            // Reuse the vectors of a batch every worker is done with: a fresh large one
            // per batch costs page faults.
            let next = recycled.try_recv().unwrap_or_default();
            if !send(std::mem::replace(&mut batch, next)) || stop.load(Ordering::Relaxed) {
                break;
            }
            buffer = None;
            bytes = 0;
        }
    }
    if !batch.frames.is_empty() {
        send(batch);
    }
    if let Some(p) = progress {
        p.finish();
    }
    ReaderEnd {
        reader,
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
}

/// Collects the summaries of `handle_end`.
#[derive(Default)]
struct FlowCollector(Vec<FlowSummary>);

impl EventSink for FlowCollector {
    fn flow(&mut self, f: &FlowSummary) {
        self.0.push(f.clone());
    }
}

/// A worker's channels.
struct Channels {
    rx: Receiver<Arc<Batch>>,
    tx: SyncSender<WorkerMsg>,
    recycle: SyncSender<Batch>,
    spent: Receiver<BatchOut>,
}

/// The worker that owns a frame the fast path reads (see [`fast_tcp_tuple`]), and its
/// segment ports; `None`: decode it to know ([`decoded_owner`]). The reader finds these,
/// so that workers skip each other's frames at the cost of a compare.
#[inline]
fn fast_owner(link: LinkType, data: &[u8], orig_len: u32, n: usize) -> Option<(u8, (u16, u16))> {
    let t = fast_tcp_tuple(link, data, orig_len)?;
    let src = (u64::from(u32::from(t.src)), t.src_port);
    let dst = (u64::from(u32::from(t.dst)), t.dst_port);
    // n <= 255 workers.
    Some((worker_of(src, dst, n) as u8, (t.src_port, t.dst_port)))
}

/// The worker that owns a decoded frame (the one [`fast_owner`] names for the frames it
/// reads), and its ports if it is a TCP segment (`FrameInput::Segment`). Frames with no
/// TCP header go to worker 0, whose analyzer counts them.
fn decoded_owner(input: &FrameInput, n: usize) -> (usize, Option<(u16, u16)>) {
    match input {
        FrameInput::Segment(s) => (
            worker_of_endpoints(s.src, s.dst, n),
            Some((s.src.port, s.dst.port)),
        ),
        FrameInput::Partial(s) => (worker_of_endpoints(s.src, s.dst, n), None),
        FrameInput::Other { .. } => (0, None),
    }
}

/// Worker `me` of `n`: walks every batch, analyses the frames it owns.
fn work(
    (me, n): (usize, usize),
    cfg: AnalyzerConfig,
    ch: Channels,
    plan: Plan,
    ports: Vec<u16>,
    storage: StorageConfig,
    sweeps: Sweeps,
) {
    let mut an = Analyzer::new(cfg);
    let mut tail = CsvTail::default();
    let mut line = Line::default();
    let mut local = Local::new(plan, &storage);
    let mut last = None;
    let mut since_sweep = 0u64;
    let mut since_diagnoser_sweep = 0u32;
    let mut origin = false;
    for batch in ch.rx {
        // Reuse the merger's spent outputs: fresh large vectors per batch cost page faults.
        let mut out = ch.spent.try_recv().unwrap_or_default();
        out.owned.clear();
        out.items.clear();
        out.row_meta.clear();
        out.ends.clear();
        out.rows.clear();
        out.frames = batch.frames.len();
        let mut sink = WorkerSink {
            plan,
            out: &mut out,
            ports: &ports,
            tail: &mut tail,
            line: &mut line,
            local: &mut local,
            last: &mut last,
        };
        for (i, m) in batch.frames.iter().enumerate() {
            if !origin {
                an.set_origin(m.ts);
                origin = true;
            }
            let data = batch.data(m);
            let mut decoded = None;
            let (worker, diagnosed) = if m.owner == UNKNOWN {
                let view = decode(m.link, data, m.orig_len);
                let input = FrameInput::from_view(m.no, m.ts, &view);
                let (w, ports) = decoded_owner(&input, n);
                let diagnosed = match (&sweeps.diagnoser_ports, ports) {
                    (Some(dports), Some((a, b))) => port_ok(dports, a, b),
                    _ => false,
                };
                decoded = Some((input, view.tcp.map_or(&[][..], |t| t.payload)));
                (w, diagnosed)
            } else {
                (usize::from(m.owner), m.diagnosed)
            };
            if worker == me {
                let input;
                let (input, payload) = match &decoded {
                    Some((i, p)) => (i, *p),
                    None => {
                        let view = decode(m.link, data, m.orig_len);
                        input = FrameInput::from_view(m.no, m.ts, &view);
                        (&input, view.tcp.map_or(&[][..], |t| t.payload))
                    }
                };
                an.handle_input_with_payload(input, payload, &mut sink);
                if !matches!(input, FrameInput::Other { .. }) {
                    if let Some(events) = sink.local.events() {
                        sink.out.items.extend(events.drain(..).map(Out::Storage));
                    }
                    // A batch holds at most BATCH frames.
                    sink.out.owned.push(i as u32);
                    sink.out
                        .ends
                        .push((sink.out.items.len(), sink.out.row_meta.len()));
                }
            }
            // A single diagnoser looks for closed connections after every
            // `CLOSED_SWEEP_EVERY` segments it is fed: every one looks at the same one.
            if diagnosed {
                since_diagnoser_sweep += 1;
                if since_diagnoser_sweep >= CLOSED_SWEEP_EVERY {
                    since_diagnoser_sweep = 0;
                    if let Local::Diagnose(d) = sink.local {
                        d.diagnoser_mut().sweep(m.ts.0);
                    }
                }
            }
            // The single analyzer sweeps after every `every` frames: same frames here.
            since_sweep += 1;
            if since_sweep >= sweeps.every {
                since_sweep = 0;
                an.sweep(m.ts);
            }
        }
        if ch.tx.send(WorkerMsg::Batch(out)).is_err() {
            return;
        }
        // The last worker done with a batch sends its vectors back to the reader, emptied
        // (a buffer it still held would keep the reader from reusing it).
        if let Some(mut b) = Arc::into_inner(batch) {
            b.bufs.clear();
            b.frames.clear();
            let _ = ch.recycle.try_send(b);
        }
    }
    let mut flows = FlowCollector::default();
    an.handle_end(&mut flows);
    if let Some(sink) = local.sink() {
        // What a single diagnoser gets at the end (it ignores them today).
        for f in flows
            .0
            .iter()
            .filter(|f| port_ok(&ports, f.dirs[0].src.port, f.dirs[0].dst.port))
        {
            sink.flow(f);
        }
    }
    let _ = ch.tx.send(WorkerMsg::End {
        flows: flows.0,
        stats: an.stats().clone(),
        tail: local.finish(last),
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
    let sweeps = Sweeps {
        every: cfg.sweep_every_frames,
        diagnoser_ports: (plan == Plan::Diagnose).then(|| job.ports.to_vec()),
    };
    // Each worker tracks its share of the connections; which ones get evicted when the
    // limit is reached therefore depends on the thread count (documented in --help).
    let mut worker_cfg = cfg.clone();
    worker_cfg.sweep_every_frames = u64::MAX; // the worker loop sweeps (`Sweeps`)
    worker_cfg.max_flows = cfg.max_flows.div_ceil(n).max(1);
    worker_cfg.max_evicted_remembered = cfg.max_evicted_remembered.div_ceil(n).max(1);
    let stop_flag = AtomicBool::new(false);
    thread::scope(|scope| {
        let (recycle_tx, recycle_rx) = sync_channel::<Batch>(DEPTH + 1);
        let mut to_workers = Vec::with_capacity(n);
        let mut from_workers = Vec::with_capacity(n);
        let mut spent_to = Vec::with_capacity(n);
        for me in 0..n {
            let (tx, rx) = sync_channel::<Arc<Batch>>(DEPTH);
            let (otx, orx) = sync_channel::<WorkerMsg>(DEPTH);
            let ports = job.ports.to_vec();
            let (spent_tx, spent_rx) = sync_channel::<BatchOut>(DEPTH);
            let ch = Channels {
                rx,
                tx: otx,
                recycle: recycle_tx.clone(),
                spent: spent_rx,
            };
            let cfg = worker_cfg.clone();
            let storage_cfg = job.storage.clone();
            let sweeps = sweeps.clone();
            scope.spawn(move || work((me, n), cfg, ch, plan, ports, storage_cfg, sweeps));
            spent_to.push(spent_tx);
            to_workers.push(tx);
            from_workers.push(orx);
        }
        drop(recycle_tx);
        let stop_ref = &stop_flag;
        let progress = job.progress;
        let diagnoser_ports = sweeps.diagnoser_ports.as_deref();
        let reader_thread = scope.spawn(move || {
            read_and_share(
                reader,
                to_workers,
                recycle_rx,
                diagnoser_ports,
                stop_ref,
                progress,
            )
        });

        let mut ids = Renumber {
            maps: vec![Vec::new(); n],
            next: 0,
        };
        let keep_stream = |s: u32| streams.is_empty() || streams.contains(&s);
        let mut stopped = false;
        let mut started = false;
        let mut outs: Vec<BatchOut> = Vec::with_capacity(n);
        let mut ends: Vec<WorkerMsg> = Vec::with_capacity(n);
        // The worker of each frame of a batch (NOBODY: a frame no worker reported).
        const NOBODY: u8 = u8::MAX;
        let mut route: Vec<u8> = Vec::with_capacity(BATCH);
        loop {
            outs.clear();
            for rx in &from_workers {
                match rx.recv() {
                    Ok(WorkerMsg::Batch(b)) if ends.is_empty() => outs.push(b),
                    Ok(end @ WorkerMsg::End { .. }) if outs.is_empty() => ends.push(end),
                    _ => anyhow::bail!("an analysis worker stopped unexpectedly"),
                }
            }
            if !ends.is_empty() {
                break;
            }
            route.clear();
            route.resize(outs.first().map_or(0, |o| o.frames), NOBODY);
            for (w, out) in outs.iter().enumerate() {
                for &i in &out.owned {
                    if let Some(r) = route.get_mut(i as usize) {
                        // n <= 255 workers.
                        *r = w as u8;
                    }
                }
            }
            // Once stopped, drain so the reader and workers can finish; only the stream
            // numbers are still followed (the workers' last flows name every stream).
            let mut item_at = vec![0usize; n];
            let mut frame_at = vec![0usize; n];
            let mut meta_at = vec![0usize; n];
            let mut row_at = vec![0usize; n];
            for &w in route.iter().filter(|&&w| w != NOBODY) {
                let w = usize::from(w);
                let out = &mut outs[w];
                let (end, meta_end) = out.ends[frame_at[w]];
                frame_at[w] += 1;
                for item in &mut out.items[item_at[w]..end] {
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
                item_at[w] = end;
                // The frame's row after its items (a connection's `Opened` comes first).
                for m in &out.row_meta[meta_at[w]..meta_end] {
                    let end = m.end as usize;
                    if !stopped {
                        let g = ids.get(w, m.local);
                        if keep_stream(g) {
                            row(sink, m.frame, g, &out.rows[row_at[w]..end]);
                        }
                    }
                    row_at[w] = end;
                }
                meta_at[w] = meta_end;
            }
            for (out, tx) in outs.drain(..).zip(&spent_to) {
                let _ = tx.try_send(out);
            }
            if !stopped && stop(sink, storage) {
                stopped = true;
                stop_flag.store(true, Ordering::Relaxed);
            }
        }
        let end = reader_thread
            .join()
            .map_err(|_| anyhow::anyhow!("the capture reader thread panicked"))?;
        let mut stats = InputStats::default();
        let mut flows = Vec::new();
        let mut parts = Parts::default();
        let mut finish = Vec::new();
        let mut last: Option<(FrameNo, Timestamp)> = None;
        for (w, msg) in ends.into_iter().enumerate() {
            let WorkerMsg::End {
                flows: f,
                stats: s,
                tail,
            } = msg
            else {
                continue;
            };
            stats.add(&s);
            for mut flow in f {
                flow.stream = StreamId(ids.get(w, flow.stream.0));
                flows.push(flow);
            }
            let Some(tail) = tail else { continue };
            let Tail {
                listing: l,
                spill,
                tcp_logs,
                finish: events,
                last: l_last,
            } = *tail;
            if let Some(mut l) = l {
                l.renumber(|s| ids.get(w, s));
                match &mut parts.listing {
                    Some(all) => all.merge(l),
                    None => parts.listing = Some(l),
                }
            }
            parts.spills.extend(spill);
            if let Some(mut logs) = tcp_logs {
                logs.renumber(|s| StreamId(ids.get(w, s.0)));
                parts
                    .tcp_logs
                    .get_or_insert_with(TcpLogs::default)
                    .merge(logs);
            }
            for mut e in events {
                e.renumber(|s| StreamId(ids.get(w, s.0)));
                finish.push(e);
            }
            if l_last.is_some_and(|(f, _)| last.is_none_or(|(g, _)| f > g)) {
                last = l_last;
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

    fn v4(a: u8, b: u8, port: u16) -> Endpoint {
        Endpoint {
            addr: IpAddr::V4(Ipv4Addr::new(10, 1, a, b)),
            port,
        }
    }

    /// Connections per worker for `conns` clients numbered like tcpdx-synth's (address and
    /// port both counting up) talking to one server.
    fn spread(conns: u32, n: usize) -> Vec<usize> {
        let server = v4(0, 1, 445);
        let mut counts = vec![0usize; n];
        for i in 0..conns {
            let client = v4((4 + i / 256) as u8, (1 + i % 256) as u8, (1025 + i) as u16);
            counts[worker_of_endpoints(client, server, n)] += 1;
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
                    assert_eq!(worker_of_endpoints(a, b, n), worker_of_endpoints(b, a, n));
                    assert!(worker_of_endpoints(a, b, n) < n);
                }
            }
        }
    }

    #[test]
    fn sequential_connections_spread_evenly() {
        // (The old hash put 13 of tcpdx-synth's 16 bulk connections on one of two workers;
        // with so few, a hash spreads them only as evenly as chance allows.)
        // Many connections: within 3 % of an even share.
        for n in 2..=4 {
            let c = spread(25_000, n);
            let share = 25_000 / n;
            assert!(
                c.iter().all(|&k| k.abs_diff(share) * 33 < share),
                "{n} workers: {c:?}"
            );
        }
    }

    /// A frame's owner and segment ports as the reader finds them (`true`: its fast path
    /// took it), or as a worker finds them by decoding it.
    fn route(f: &tcpdx_testkit::FrameSpec, n: usize) -> (usize, Option<(u16, u16)>, bool) {
        let bytes = f.build();
        let len = bytes.len() as u32;
        if let Some((w, ports)) = fast_owner(f.link, &bytes, len, n) {
            return (usize::from(w), Some(ports), true);
        }
        let view = decode(f.link, &bytes, len);
        let (w, ports) = decoded_owner(&FrameInput::from_view(FrameNo(1), Timestamp(0), &view), n);
        (w, ports, false)
    }

    #[test]
    fn fast_and_decoded_frames_of_a_connection_go_to_one_worker() {
        use tcpdx_testkit::FrameSpec;
        for i in 0..300u16 {
            let plain = FrameSpec {
                src: IpAddr::V4(Ipv4Addr::new(10, 1, (i / 256) as u8, i as u8)),
                src_port: 1025 + i,
                dst_port: 445,
                ..FrameSpec::TEMPL
            };
            // The same connection read by the full decode: a VLAN tag, the other direction,
            // a Linux cooked header.
            let tagged = FrameSpec {
                vlan: Some(7),
                ..plain.clone()
            };
            let back = FrameSpec {
                src: plain.dst,
                dst: plain.src,
                src_port: plain.dst_port,
                dst_port: plain.src_port,
                vlan: Some(7),
                ..plain.clone()
            };
            let cooked = FrameSpec {
                link: LinkType::LINUX_SLL,
                ..plain.clone()
            };
            for n in 1..=4 {
                let (w, ports, fast) = route(&plain, n);
                assert!(fast, "a plain Ethernet/IPv4/TCP frame takes the fast path");
                assert_eq!(ports, Some((1025 + i, 445)));
                for (other, expect_ports) in [
                    (&tagged, Some((1025 + i, 445))),
                    (&back, Some((445, 1025 + i))),
                    (&cooked, Some((1025 + i, 445))),
                ] {
                    let (w2, p2, fast2) = route(other, n);
                    assert!(!fast2, "decoded by the general walk");
                    assert_eq!((w2, p2), (w, expect_ports), "{n} workers, client {i}");
                }
            }
        }
        // A frame without TCP goes to worker 0, with no segment ports.
        let mut udp = FrameSpec::TEMPL.build();
        udp[23] = 17;
        let len = udp.len() as u32;
        assert_eq!(fast_owner(LinkType::ETHERNET, &udp, len, 3), None);
        let view = decode(LinkType::ETHERNET, &udp, len);
        let input = FrameInput::from_view(FrameNo(1), Timestamp(0), &view);
        assert_eq!(decoded_owner(&input, 3), (0, None));
    }
}
