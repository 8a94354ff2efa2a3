//! Multi-core analysis.
//!
//! A reader thread reads and decodes frames ([`FrameInput::classify`]) and routes each to
//! one of N worker analyzers by a hash of its connection's 4-tuple, in batches. The
//! caller's thread merges the workers' output back into capture order. Workers number
//! streams locally; the merge renumbers them in order of first appearance, which is how a
//! single analyzer numbers them, and broadcasts the single analyzer's expiry sweeps to every
//! worker at the same frames, so every output is identical whatever the thread count
//! (crates/tcpdx-cli/tests/threads.rs checks it).

use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::thread;

use anyhow::Result;
use rustc_hash::FxHasher;
use tcpdx_capture::{CaptureError, CaptureReader};
use tcpdx_core::{
    Analyzer, AnalyzerConfig, EventSink, FlowSummary, FrameInput, InputStats, SegmentAnalysis,
    SegmentDetail, StreamId, Warning,
};
use tcpdx_report::{CsvTail, Line};
use tcpdx_wire::{FrameNo, Timestamp};

use crate::progress::Progress;

/// Frames per batch: large enough that channel costs vanish, small enough to stay in cache.
const BATCH: usize = 4096;
/// Batches in flight per channel (bounds memory whatever the capture holds).
const DEPTH: usize = 4;

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
}

enum Work {
    Origin(Timestamp),
    Input(FrameInput),
    Sweep(Timestamp),
}

// Unboxed: boxing would allocate per segment; the item vectors are recycled per batch.
#[allow(clippy::large_enum_variant)]
enum Out {
    Opened(u32),
    Seg(SegmentAnalysis, SegmentDetail),
    Row { frame: u64, local: u32, end: usize },
    Warning(Warning),
    Evicted(Box<FlowSummary>),
}

/// One worker's output for one batch: `ends[i]` is where the items of its i-th frame end.
#[derive(Default)]
struct BatchOut {
    items: Vec<Out>,
    ends: Vec<usize>,
    rows: Vec<u8>,
}

enum WorkerMsg {
    Batch(BatchOut),
    End {
        flows: Vec<FlowSummary>,
        stats: InputStats,
    },
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
}

/// The worker of a connection: both directions hash alike.
fn worker_of(input: &FrameInput, n: usize) -> Option<usize> {
    let (FrameInput::Segment(s) | FrameInput::Partial(s)) = input else {
        return None;
    };
    // Symmetric (both directions alike) without building the canonical key.
    let hash = |e: &tcpdx_core::Endpoint| {
        let mut h = FxHasher::default();
        e.hash(&mut h);
        h.finish()
    };
    let h = hash(&s.src).wrapping_add(hash(&s.dst));
    Some(((h ^ (h >> 29)) >> 16) as usize % n)
}

fn read_and_route(
    mut reader: CaptureReader,
    workers: Vec<SyncSender<Vec<Work>>>,
    recycled: Receiver<Vec<Work>>,
    routes: SyncSender<Vec<u8>>,
    stop: &AtomicBool,
    progress: Option<Progress>,
    sweep_every: u64,
) -> ReaderEnd {
    let n = workers.len();
    let mut bufs: Vec<Vec<Work>> = (0..n).map(|_| Vec::with_capacity(BATCH)).collect();
    let mut route: Vec<u8> = Vec::with_capacity(BATCH);
    let mut stats = InputStats::default();
    let mut first_ts = None;
    let mut error = None;
    let mut since_sweep = 0u64;
    let mut in_batch = 0usize;
    let mut frames = 0u64;
    let flush = |bufs: &mut Vec<Vec<Work>>, route: &mut Vec<u8>| -> bool {
        for (tx, buf) in workers.iter().zip(bufs.iter_mut()) {
            // Reuse the vectors workers hand back: a fresh large one per batch costs page faults.
            let fresh = recycled
                .try_recv()
                .unwrap_or_else(|_| Vec::with_capacity(BATCH));
            if tx.send(std::mem::replace(buf, fresh)).is_err() {
                return false;
            }
        }
        routes
            .send(std::mem::replace(route, Vec::with_capacity(BATCH)))
            .is_ok()
    };
    loop {
        let frame = match reader.next_frame() {
            Ok(Some(f)) => f,
            Ok(None) => break,
            Err(e) => {
                error = Some(e);
                break;
            }
        };
        let input = FrameInput::classify(&frame);
        let ts = input.ts();
        if first_ts.is_none() {
            first_ts = Some(ts);
            for b in &mut bufs {
                b.push(Work::Origin(ts));
            }
        }
        match worker_of(&input, n) {
            Some(w) => {
                bufs[w].push(Work::Input(input));
                route.push(w as u8);
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
        if since_sweep >= sweep_every {
            since_sweep = 0;
            for b in &mut bufs {
                b.push(Work::Sweep(ts));
            }
        }
        in_batch += 1;
        frames += 1;
        if in_batch >= BATCH {
            in_batch = 0;
            if let Some(p) = &progress {
                p.update(reader.input_bytes_read(), frames);
            }
            if !flush(&mut bufs, &mut route) || stop.load(Ordering::Relaxed) {
                break;
            }
        }
    }
    flush(&mut bufs, &mut route);
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

/// Collects a worker's output for the merge.
struct WorkerSink<'a> {
    plan: Plan,
    out: &'a mut BatchOut,
    ports: &'a [u16],
    tail: &'a mut CsvTail,
    line: &'a mut Line,
}

impl EventSink for WorkerSink<'_> {
    fn segment_detail(&mut self, a: &SegmentAnalysis, d: &SegmentDetail) {
        match self.plan {
            Plan::Replay | Plan::Serial => self.out.items.push(Out::Seg(*a, *d)),
            Plan::FlowsOnly => {}
            Plan::CsvRows { flagged } => {
                let port_ok = self.ports.is_empty()
                    || self.ports.contains(&a.sport)
                    || self.ports.contains(&a.dport);
                if port_ok && (!flagged || !a.flags.is_empty()) {
                    self.line.clear();
                    self.tail.format(self.line, a);
                    self.out.rows.extend_from_slice(self.line.as_bytes());
                    self.out.items.push(Out::Row {
                        frame: a.frame.0,
                        local: a.stream.0,
                        end: self.out.rows.len(),
                    });
                }
            }
        }
    }
    fn warning(&mut self, w: &Warning) {
        self.out.items.push(Out::Warning(w.clone()));
    }
    fn flow_evicted(&mut self, f: &FlowSummary) {
        self.out.items.push(Out::Evicted(Box::new(f.clone())));
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

fn work(
    cfg: AnalyzerConfig,
    rx: Receiver<Vec<Work>>,
    tx: SyncSender<WorkerMsg>,
    recycle: SyncSender<Vec<Work>>,
    spent: Receiver<BatchOut>,
    plan: Plan,
    ports: Vec<u16>,
) {
    let mut an = Analyzer::new(cfg);
    let mut tail = CsvTail::default();
    let mut line = Line::default();
    for mut batch in rx {
        // Reuse the merger's spent outputs: fresh large vectors per batch cost page faults.
        let mut out = spent.try_recv().unwrap_or_default();
        out.items.clear();
        out.ends.clear();
        out.rows.clear();
        let mut sink = WorkerSink {
            plan,
            out: &mut out,
            ports: &ports,
            tail: &mut tail,
            line: &mut line,
        };
        for w in &batch {
            match w {
                Work::Origin(ts) => an.set_origin(*ts),
                Work::Sweep(ts) => an.sweep(*ts),
                Work::Input(input) => {
                    an.handle_input(input, &mut sink);
                    sink.out.ends.push(sink.out.items.len());
                }
            }
        }
        if tx.send(WorkerMsg::Batch(out)).is_err() {
            return;
        }
        batch.clear();
        let _ = recycle.try_send(batch);
    }
    let mut flows = FlowCollector::default();
    an.handle_end(&mut flows);
    let _ = tx.send(WorkerMsg::End {
        flows: flows.0,
        stats: an.stats().clone(),
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

/// Runs the analysis on `threads` workers; replays results into `sink` in capture order
/// (the caller filters them). `row` receives CSV rows under [`Plan::CsvRows`] (`frame`,
/// global stream, row tail), already filtered by `streams` and (in the workers) `ports`.
#[allow(clippy::too_many_arguments)]
pub fn run<S: EventSink>(
    reader: CaptureReader,
    cfg: AnalyzerConfig,
    threads: usize,
    plan: Plan,
    sink: &mut S,
    streams: &[u32],
    ports: &[u16],
    progress: Option<Progress>,
    stop: impl Fn(&S) -> bool,
    mut row: impl FnMut(&mut S, u64, u32, &[u8]),
) -> Result<Parallel> {
    let n = threads.clamp(1, 255);
    let sweep_every = cfg.sweep_every_frames;
    // Each worker tracks its share of the connections; which ones get evicted when the
    // limit is reached therefore depends on the thread count (documented in --help).
    let mut worker_cfg = cfg.clone();
    worker_cfg.sweep_every_frames = u64::MAX; // the reader sends the sweeps
    worker_cfg.max_flows = cfg.max_flows.div_ceil(n).max(1);
    worker_cfg.max_evicted_remembered = cfg.max_evicted_remembered.div_ceil(n).max(1);
    let stop_flag = AtomicBool::new(false);
    thread::scope(|scope| {
        let (route_tx, route_rx) = sync_channel::<Vec<u8>>(DEPTH * 2);
        let (recycle_tx, recycle_rx) = sync_channel::<Vec<Work>>(DEPTH * n + n);
        let mut to_workers = Vec::with_capacity(n);
        let mut from_workers = Vec::with_capacity(n);
        let mut spent_to = Vec::with_capacity(n);
        for _ in 0..n {
            let (tx, rx) = sync_channel::<Vec<Work>>(DEPTH);
            let (otx, orx) = sync_channel::<WorkerMsg>(DEPTH);
            let ports = ports.to_vec();
            let recycle = recycle_tx.clone();
            let (spent_tx, spent_rx) = sync_channel::<BatchOut>(DEPTH);
            let cfg = worker_cfg.clone();
            scope.spawn(move || work(cfg, rx, otx, recycle, spent_rx, plan, ports));
            spent_to.push(spent_tx);
            to_workers.push(tx);
            from_workers.push(orx);
        }
        drop(recycle_tx);
        let stop_ref = &stop_flag;
        let reader_thread = scope.spawn(move || {
            read_and_route(
                reader,
                to_workers,
                recycle_rx,
                route_tx,
                stop_ref,
                progress,
                sweep_every,
            )
        });

        let mut ids = Renumber {
            maps: vec![Vec::new(); n],
            next: 0,
        };
        let keep_stream = |s: u32| streams.is_empty() || streams.contains(&s);
        let mut stopped = false;
        let mut outs: Vec<BatchOut> = Vec::with_capacity(n);
        for route in route_rx {
            outs.clear();
            for rx in &from_workers {
                match rx.recv() {
                    Ok(WorkerMsg::Batch(b)) => outs.push(b),
                    _ => anyhow::bail!("an analysis worker stopped unexpectedly"),
                }
            }
            if stopped {
                continue; // drain so the reader and workers can finish
            }
            let mut item_at = vec![0usize; n];
            let mut frame_at = vec![0usize; n];
            let mut row_at = vec![0usize; n];
            for &w in &route {
                let w = usize::from(w);
                let out = &mut outs[w];
                let end = out.ends[frame_at[w]];
                frame_at[w] += 1;
                let mut row_start = row_at[w];
                for item in &mut out.items[item_at[w]..end] {
                    match item {
                        Out::Opened(local) => ids.open(w, *local),
                        Out::Seg(a, d) => {
                            a.stream = StreamId(ids.get(w, a.stream.0));
                            sink.segment_detail(a, d);
                        }
                        Out::Row { frame, local, end } => {
                            let g = ids.get(w, *local);
                            if keep_stream(g) {
                                row(sink, *frame, g, &out.rows[row_start..*end]);
                            }
                            row_start = *end;
                        }
                        Out::Warning(warn) => {
                            ids.warning(w, warn);
                            sink.warning(warn);
                        }
                        Out::Evicted(f) => {
                            f.stream = StreamId(ids.get(w, f.stream.0));
                            sink.flow_evicted(f);
                        }
                    }
                }
                item_at[w] = end;
                row_at[w] = row_start;
            }
            for (out, tx) in outs.drain(..).zip(&spent_to) {
                let _ = tx.try_send(out);
            }
            if stop(sink) {
                stopped = true;
                stop_flag.store(true, Ordering::Relaxed);
            }
        }
        let end = reader_thread
            .join()
            .map_err(|_| anyhow::anyhow!("the capture reader thread panicked"))?;
        let mut stats = end.stats.clone();
        let mut flows = Vec::new();
        for (w, rx) in from_workers.iter().enumerate() {
            for msg in rx {
                if let WorkerMsg::End { flows: f, stats: s } = msg {
                    stats.add(&s);
                    for mut flow in f {
                        flow.stream = StreamId(ids.get(w, flow.stream.0));
                        flows.push(flow);
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
        Ok(Parallel { reader: end, stats })
    })
}
