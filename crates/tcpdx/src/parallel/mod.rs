//! Multi-core analysis.
//!
//! A reader thread reads and decodes frames ([`route`]) and routes each to one of N worker
//! analyzers by a hash of its connection's endpoints, in batches ([`batch`]). Each worker
//! ([`worker`]) runs its analyzer and the output's [`Part`] over its connections. The
//! caller's thread merges the workers' output back into capture order, by frame number
//! ([`merge`]; each worker lists only the frames that brought output, so the merge of an
//! output with little per-packet output walks little). Workers number streams locally; the
//! merge renumbers them in order of first appearance, which is how a single analyzer
//! numbers them, and the reader broadcasts the single analyzer's expiry sweeps to every
//! worker at the same frames, so every output is identical whatever the thread count
//! (crates/tcpdx-cli/tests/threads.rs checks it).
//!
//! `diagnose` and `srt` ([`part::Diagnose`], [`part::Storage`]) run the per-connection
//! work in the workers too: each has its own TCP diagnoser and storage tracker beside its
//! analyzer. The reader passes them the payloads the storage parsers may read: short ones
//! copied into the batch, long ones (full frames) where they lie in its read buffer (or in
//! the mapped file), which it shares with the batch instead of copying
//! ([`CaptureReader::share_buffer`]). The trackers' events are recorded and replayed on the
//! merging thread in capture order, and the diagnosers' listings are renumbered and merged
//! at the end ([`tcpdx_detect::Listing`]); their looks for closed connections are broadcast
//! at the segments where a single diagnoser would look, so the result is the single-thread
//! one.

pub(crate) mod batch;
mod codec;
mod merge;
pub(crate) mod part;
pub(crate) mod route;
mod worker;

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::thread;

use tcpdx_capture::Frames;
use tcpdx_core::{AnalyzerConfig, EventSink, FlowSummary, InputStats};
use tcpdx_detect::{Listing, Spill};
use tcpdx_storage::{Recorded, StorageConfig, StorageSink, TcpLogs};
use tcpdx_wire::{FrameNo, Timestamp};

use batch::{Batch, BatchOut, DEPTH};
pub(crate) use part::Part;
use part::Tail;
pub(crate) use route::ReaderEnd;
pub(crate) use route::Routing;
use route::read_and_route;
use worker::{Channels, FlowNeeds, WorkerMsg, work};

use crate::{Error, Filter, Progress};

/// The result of a parallel run.
pub(crate) struct Parallel<R> {
    /// The reader's end state.
    pub(crate) reader: ReaderEnd<R>,
    /// Input counters over every analyzer.
    pub(crate) stats: InputStats,
    /// What the parts leave, merged.
    pub(crate) parts: Parts,
}

/// The merged ends of the workers' parts, in global stream numbers.
#[derive(Default)]
pub(crate) struct Parts {
    /// [`part::Diagnose`]: the TCP diagnosis of every connection.
    pub(crate) listing: Option<Listing>,
    /// [`part::Diagnose`]: the storage connections' TCP logs (for the storage evidence).
    pub(crate) tcp_logs: Option<TcpLogs>,
    /// [`part::Diagnose`]: the workers' spills (check them for errors).
    pub(crate) spills: Vec<Arc<Spill>>,
    /// Time of the last segment the storage trackers saw (a single tracker's `last_ts`).
    pub(crate) last_segment_ts: Option<Timestamp>,
}

/// What the run does besides the analysis.
pub(crate) struct Job<'a> {
    /// Analysis threads.
    pub(crate) threads: usize,
    /// `--stream` applied by the merge to rows, `--port` and `--flagged` by the parts.
    pub(crate) filter: &'a Filter,
    /// The storage parsers' configuration (parts with payloads).
    pub(crate) storage: StorageConfig,
    /// Told how far reading has come.
    pub(crate) progress: Option<Arc<dyn Progress>>,
}

/// Runs the analysis on `job.threads` workers, each with a part made by `new_part`;
/// replays results into `sink` in capture order (the caller filters them), and the parts'
/// storage events into `storage`. `row` receives the CSV rows of [`part::CsvRows`]
/// (`frame`, global stream, row tail), already filtered.
#[allow(clippy::too_many_arguments)]
pub(crate) fn run<R: Frames, P: Part, S: EventSink, T: StorageSink>(
    reader: R,
    cfg: AnalyzerConfig,
    job: Job<'_>,
    new_part: impl Fn() -> P,
    sink: &mut S,
    storage: &mut T,
    stop: impl Fn(&S, &T) -> bool,
    row: impl FnMut(&mut S, u64, u32, &[u8]),
) -> Result<Parallel<R>, Error> {
    run_fed(
        move |workers, recycled, stop, progress, routing| {
            read_and_route(reader, workers, recycled, stop, progress, routing)
        },
        cfg,
        job,
        new_part,
        sink,
        storage,
        stop,
        row,
    )
}

/// What feeds the workers their batches: the reader thread ([`read_and_route`]) or the
/// shards of a distributed run.
pub(crate) trait Feed<R>:
    FnOnce(
        Vec<SyncSender<Batch>>,
        Receiver<Batch>,
        &AtomicBool,
        Option<Arc<dyn Progress>>,
        Routing,
    ) -> ReaderEnd<R>
    + Send
{
}

impl<R, F> Feed<R> for F where
    F: FnOnce(
            Vec<SyncSender<Batch>>,
            Receiver<Batch>,
            &AtomicBool,
            Option<Arc<dyn Progress>>,
            Routing,
        ) -> ReaderEnd<R>
        + Send
{
}

/// [`run`] with the workers' batches from `feed`, which sends each worker one at every
/// flush (empty or not), in capture order, with the sweeps a single analyzer would make.
#[allow(clippy::too_many_arguments)]
pub(crate) fn run_fed<R: Frames, P: Part, S: EventSink, T: StorageSink>(
    feed: impl Feed<R>,
    cfg: AnalyzerConfig,
    job: Job<'_>,
    new_part: impl Fn() -> P,
    sink: &mut S,
    storage: &mut T,
    stop: impl Fn(&S, &T) -> bool,
    row: impl FnMut(&mut S, u64, u32, &[u8]),
) -> Result<Parallel<R>, Error> {
    let n = job.threads.clamp(1, 255);
    let routing = Routing {
        sweep_every: cfg.sweep_every_frames,
        payloads: P::PAYLOADS.then(|| job.storage.clone()),
        diagnosed: P::DIAGNOSER.then(|| job.filter.clone()),
    };
    let worker_cfg = worker_config(&cfg, n);
    let stop_flag = AtomicBool::new(false);
    let needs = FlowNeeds {
        stats: sink.needs_flow_stats(),
        summaries: sink.needs_flows(),
    };
    let spawn_error = |e: std::io::Error| Error::Thread(format!("cannot start a thread: {e}"));
    thread::scope(|scope| {
        let (recycle_tx, recycle_rx) = sync_channel::<Batch>(DEPTH * n + n);
        let mut to_workers = Vec::with_capacity(n);
        let mut from_workers = Vec::with_capacity(n);
        let mut spent_to = Vec::with_capacity(n);
        let mut numbers_to = Vec::with_capacity(n);
        for _ in 0..n {
            let (tx, rx) = sync_channel::<Batch>(DEPTH);
            let (otx, orx) = sync_channel::<WorkerMsg>(DEPTH);
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
            let part = new_part();
            // Named threads: profilers and `top -H` then tell them apart.
            thread::Builder::new()
                .name(format!("tcpdx-worker-{}", to_workers.len()))
                .spawn_scoped(scope, move || work(cfg, ch, part, needs))
                .map_err(spawn_error)?;
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
                feed(to_workers, recycle_rx, stop_ref, progress, routing)
            })
            .map_err(spawn_error)?;

        let (ids, stopped) = merge::merge(
            &from_workers,
            &spent_to,
            job.filter,
            sink,
            storage,
            stop,
            row,
            &stop_flag,
        )?;
        // Every batch is merged: each worker's streams all have their global numbers.
        for (tx, map) in numbers_to.iter().zip(ids.maps) {
            let _ = tx.send(map);
        }
        let end = reader_thread
            .join()
            .map_err(|_| Error::Thread("the capture reader thread panicked".into()))?;
        let mut stats = end.stats.clone();
        let ends = from_workers.iter().flat_map(|rx| {
            rx.iter().filter_map(|msg| match msg {
                WorkerMsg::End { flows, stats, tail } => Some((flows, stats, tail)),
                _ => None,
            })
        });
        let parts = gather(
            ends,
            &mut stats,
            sink,
            storage,
            (end.error.is_none() && !stopped, end.error.is_none()),
        );
        Ok(Parallel {
            reader: end,
            stats,
            parts,
        })
    })
}

/// A worker's analyzer configuration among `n`: each tracks its share of the connections
/// (which ones get evicted when the limit is reached therefore depends on the thread
/// count, documented in --help), and sweeps only when the reader says.
fn worker_config(cfg: &AnalyzerConfig, n: usize) -> AnalyzerConfig {
    let mut worker_cfg = cfg.clone();
    worker_cfg.sweep_every_frames = u64::MAX;
    worker_cfg.max_flows = cfg.max_flows.div_ceil(n).max(1);
    worker_cfg.max_evicted_remembered = cfg.max_evicted_remembered.div_ceil(n).max(1);
    worker_cfg
}

/// The workers' ends (in global stream numbers), merged: the flows into `sink` if
/// `replay.0`, the trackers' last events into `storage` if `replay.1`; the counters added
/// to `stats`.
fn gather<S: EventSink, T: StorageSink>(
    ends: impl IntoIterator<Item = (Vec<FlowSummary>, InputStats, Option<Box<Tail>>)>,
    stats: &mut InputStats,
    sink: &mut S,
    storage: &mut T,
    replay: (bool, bool),
) -> Parts {
    let mut flows = Vec::new();
    let mut parts = Parts::default();
    let mut finish = Vec::new();
    let mut last: Option<(FrameNo, Timestamp)> = None;
    for (f, s, tail) in ends {
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
    if replay.0 {
        flows.sort_by_key(|f| f.stream.0);
        for f in &flows {
            sink.flow(f);
        }
    }
    if replay.1 {
        // A single tracker ends its connections in stream order; each worker's come in
        // its own stream order, which the global numbering keeps (stable sort).
        finish.sort_by_key(Recorded::stream);
        for e in &finish {
            e.replay(storage);
        }
    }
    parts.last_segment_ts = last.map(|(_, ts)| ts);
    parts
}

/// One worker's whole output when it runs apart from the others (a distributed run's
/// stage 2 task, one per partition): its batches for the merge, and its end in its own
/// stream numbers (the merge renumbers it, [`merge_alone`]).
pub(crate) struct Alone {
    pub(crate) batches: Vec<BatchOut>,
    pub(crate) flows: Vec<FlowSummary>,
    pub(crate) stats: InputStats,
    pub(crate) tail: Option<Box<Tail>>,
}

/// Runs one worker of `n` with `part` over the batches `feed` sends it (as many as every
/// other worker of the run gets, cut at the same frames: see [`merge_alone`]); what the
/// sink `needs` of the flows is that of the merge's sink.
pub(crate) fn run_alone<P: Part>(
    feed: impl FnOnce(SyncSender<Batch>, Receiver<Batch>) + Send,
    cfg: &AnalyzerConfig,
    n: usize,
    part: P,
    needs: &impl EventSink,
) -> Result<Alone, Error> {
    let cfg = worker_config(cfg, n.clamp(1, 255));
    let needs = FlowNeeds {
        stats: needs.needs_flow_stats(),
        summaries: needs.needs_flows(),
    };
    let spawn_error = |e: std::io::Error| Error::Thread(format!("cannot start a thread: {e}"));
    thread::scope(|scope| {
        let (recycle_tx, recycle_rx) = sync_channel::<Batch>(DEPTH + 1);
        let (tx, rx) = sync_channel::<Batch>(DEPTH);
        let (otx, orx) = sync_channel::<WorkerMsg>(DEPTH);
        // Every output is kept: nothing comes back to reuse.
        let (_spent_tx, spent_rx) = sync_channel::<BatchOut>(1);
        let (numbers_tx, numbers_rx) = sync_channel::<Vec<u32>>(1);
        let ch = Channels {
            rx,
            tx: otx,
            recycle: recycle_tx,
            spent: spent_rx,
            numbers: numbers_rx,
        };
        thread::Builder::new()
            .name("tcpdx-worker".into())
            .spawn_scoped(scope, move || work(cfg, ch, part, needs))
            .map_err(spawn_error)?;
        thread::Builder::new()
            .name("tcpdx-route".into())
            .spawn_scoped(scope, move || feed(tx, recycle_rx))
            .map_err(spawn_error)?;
        let mut batches = Vec::new();
        let mut opened = 0u32;
        let stopped = || Error::Thread("the analysis worker stopped unexpectedly".into());
        loop {
            match orx.recv().map_err(|_| stopped())? {
                WorkerMsg::Batch(b) => {
                    opened += b
                        .items
                        .iter()
                        .filter(|i| matches!(i, batch::Out::Opened(_)))
                        .count() as u32;
                    batches.push(b);
                }
                WorkerMsg::Drained => break,
                WorkerMsg::End { .. } => return Err(stopped()),
            }
        }
        // Its own numbers: the merge maps them to the run's.
        let _ = numbers_tx.send((0..opened).collect());
        match orx.recv().map_err(|_| stopped())? {
            WorkerMsg::End { flows, stats, tail } => Ok(Alone {
                batches,
                flows,
                stats,
                tail,
            }),
            _ => Err(stopped()),
        }
    })
}

/// The merge of workers run apart ([`run_alone`], in partition order), as [`run_fed`]
/// merges its threads': items into `sink` and `storage` in capture order, streams numbered
/// in order of first appearance, then the ends. Their batches must be cut at the same
/// frames (batch k of every worker holds frames before those of any batch k + 1).
/// `other`: counters of the frames no worker saw.
pub(crate) fn merge_alone<S: EventSink, T: StorageSink>(
    alone: Vec<Alone>,
    other: InputStats,
    filter: &Filter,
    sink: &mut S,
    storage: &mut T,
) -> Result<(InputStats, Parts), Error> {
    let mut from_workers = Vec::with_capacity(alone.len());
    let mut spent_to = Vec::with_capacity(alone.len());
    let mut ends = Vec::with_capacity(alone.len());
    for a in alone {
        let (tx, rx) = std::sync::mpsc::channel();
        for b in a.batches {
            let _ = tx.send(WorkerMsg::Batch(b));
        }
        let _ = tx.send(WorkerMsg::Drained);
        from_workers.push(rx);
        spent_to.push(sync_channel::<BatchOut>(0).0);
        ends.push((a.flows, a.stats, a.tail));
    }
    let stop_flag = AtomicBool::new(false);
    let (ids, _) = merge::merge(
        &from_workers,
        &spent_to,
        filter,
        sink,
        storage,
        |_, _| false,
        |_, _, _, _| {},
        &stop_flag,
    )?;
    for ((flows, _, tail), global) in ends.iter_mut().zip(&ids.maps) {
        for f in flows.iter_mut() {
            f.stream = tcpdx_core::StreamId(global[f.stream.0 as usize]);
        }
        if let Some(t) = tail {
            t.renumber(global);
        }
    }
    let mut stats = other;
    let parts = gather(ends, &mut stats, sink, storage, (true, true));
    Ok((stats, parts))
}
