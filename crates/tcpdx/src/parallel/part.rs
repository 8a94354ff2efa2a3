//! What a worker does with the analysis of its connections, one [`Part`] per output:
//! every segment for the merge ([`Replay`]), nothing but the flows ([`FlowsOnly`]),
//! `events` CSV rows ([`CsvRows`]), a TCP diagnoser and a storage tracker ([`Diagnose`]),
//! a storage tracker ([`Storage`]).

use std::path::PathBuf;
use std::sync::Arc;

use tcpdx_core::{FlowSummary, SegmentAnalysis, SegmentDetail, StreamId};
use tcpdx_detect::{Diagnoser, Listing, Spill};
use tcpdx_report::{CsvTail, Line};
use tcpdx_storage::{
    Notice, Recorded, Recorder, Request, StorageConfig, StorageSink, TcpLog, TcpLogs, Tracker,
    Transaction,
};
use tcpdx_wire::{FrameNo, Timestamp};

use super::batch::{BatchOut, Out, RowMeta};
use crate::Filter;
use crate::diagnosis::CaptureDiagnoser;

/// A worker's part of an output. The worker's analyzer pushes each segment of its
/// connections here, in capture order; what the part adds to the batch's output is merged
/// back into capture order on the caller's thread.
pub(crate) trait Part: Send {
    /// The reader passes this part the payloads the storage parsers may read.
    const PAYLOADS: bool = false;
    /// The part holds a TCP diagnoser: the reader broadcasts a single diagnoser's sweeps.
    const DIAGNOSER: bool = false;
    /// One analysed segment.
    fn segment(&mut self, a: &SegmentAnalysis, d: &SegmentDetail, out: &mut BatchOut);
    /// The payload of the segment just given (parts with [`Part::PAYLOADS`]).
    fn payload(&mut self, _a: &SegmentAnalysis, _p: &[u8]) {}
    /// An evicted connection: true if the part took it, else the merge gets it.
    fn evicted(&mut self, _f: &FlowSummary) -> bool {
        false
    }
    /// Whether the part reads the flows' statistics.
    fn needs_flow_stats(&self) -> bool {
        false
    }
    /// A single diagnoser would look for closed connections now.
    fn sweep(&mut self, _ts: Timestamp) {}
    /// After each frame: what the part recorded for the merge goes into `out`.
    fn drain(&mut self, _out: &mut BatchOut) {}
    /// End of input: what the part leaves for the merge's end.
    fn finish(self) -> Option<Box<Tail>>;
}

/// Every segment with its detail, replayed into the caller's sink in capture order.
pub(crate) struct Replay;

impl Part for Replay {
    fn segment(&mut self, a: &SegmentAnalysis, d: &SegmentDetail, out: &mut BatchOut) {
        out.items.push(Out::Seg(*a, *d));
    }
    fn finish(self) -> Option<Box<Tail>> {
        None
    }
}

/// Flow summaries only (no per-segment output).
pub(crate) struct FlowsOnly;

impl Part for FlowsOnly {
    fn segment(&mut self, _a: &SegmentAnalysis, _d: &SegmentDetail, _out: &mut BatchOut) {}
    fn finish(self) -> Option<Box<Tail>> {
        None
    }
}

/// `events` CSV rows, formatted by the workers (all but `frame,stream,`, which the merge
/// knows).
pub(crate) struct CsvRows {
    filter: Filter,
    tail: CsvTail,
    line: Line,
}

impl CsvRows {
    /// Rows of the segments `filter` lets through (but for the stream filter: the merge
    /// applies it).
    pub(crate) fn new(filter: &Filter) -> Self {
        Self {
            filter: filter.clone(),
            tail: CsvTail::default(),
            line: Line::default(),
        }
    }
}

impl Part for CsvRows {
    fn segment(&mut self, a: &SegmentAnalysis, _d: &SegmentDetail, out: &mut BatchOut) {
        if self.filter.segment_here(a) {
            self.line.clear();
            self.tail.format(&mut self.line, a);
            out.rows.extend_from_slice(self.line.as_bytes());
            out.row_meta.push(RowMeta {
                frame: a.frame.0,
                local: a.stream.0,
                // A batch's rows stay far below 4 GiB (BATCH_BYTES bounds it).
                end: u32::try_from(out.rows.len()).unwrap_or(u32::MAX),
            });
        }
    }
    fn finish(self) -> Option<Box<Tail>> {
        None
    }
}

/// What a worker's storage tracker pushes into: events for the merging thread, but the
/// TCP logs of each connection, which depend on it alone, are kept here (`diagnose`) or
/// dropped (`srt`, whose reports do not read them): a per-segment event less to send.
pub(crate) struct WorkerStorage {
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

/// A TCP diagnoser and a storage tracker per worker (`diagnose`). The caller's filter
/// must have no streams (workers do not know the final numbers).
pub(crate) struct Diagnose {
    both: CaptureDiagnoser<WorkerStorage>,
    filter: Filter,
    /// Evicted connections go to the merge too (the caller's sink reads flows).
    share_evicted: bool,
    /// Frame and time of the last segment fed.
    last: Option<(FrameNo, Timestamp)>,
}

impl Diagnose {
    /// A worker's diagnosis: storage port map `cfg`, spill files in `spill_dir`; evicted
    /// connections also to the merge if `share_evicted`.
    pub(crate) fn new(
        cfg: &StorageConfig,
        filter: &Filter,
        spill_dir: Option<&PathBuf>,
        share_evicted: bool,
    ) -> Self {
        Self {
            both: CaptureDiagnoser::with_parts(
                Diagnoser::new()
                    .swept_by_caller()
                    .spilling_to(crate::spill::new_spill(spill_dir)),
                cfg.clone(),
                WorkerStorage {
                    rec: Recorder::default(),
                    logs: Some(TcpLogs::default()),
                },
            ),
            filter: filter.clone(),
            share_evicted,
            last: None,
        }
    }
}

impl Part for Diagnose {
    const PAYLOADS: bool = true;
    const DIAGNOSER: bool = true;
    fn segment(&mut self, a: &SegmentAnalysis, d: &SegmentDetail, _out: &mut BatchOut) {
        use tcpdx_core::EventSink;
        if self.filter.port(a.sport, a.dport) {
            self.both.segment_detail(a, d);
            self.last = Some((a.frame, a.ts));
        }
    }
    fn payload(&mut self, a: &SegmentAnalysis, p: &[u8]) {
        use tcpdx_core::EventSink;
        if self.filter.port(a.sport, a.dport) {
            self.both.payload(a, p);
        }
    }
    fn evicted(&mut self, f: &FlowSummary) -> bool {
        use tcpdx_core::EventSink;
        if self.filter.port(f.dirs[0].src.port, f.dirs[0].dst.port) {
            self.both.flow_evicted(f);
        }
        !self.share_evicted
    }
    fn needs_flow_stats(&self) -> bool {
        use tcpdx_core::EventSink;
        self.both.needs_flow_stats()
    }
    fn sweep(&mut self, ts: Timestamp) {
        self.both.diagnoser_mut().sweep(ts.0);
    }
    fn drain(&mut self, out: &mut BatchOut) {
        let events = &mut self.both.tracker_mut().sink_mut().rec.events;
        out.items.extend(events.drain(..).map(Out::Storage));
    }
    fn finish(self) -> Option<Box<Tail>> {
        let (diag, tracker) = self.both.into_parts();
        let spill = diag.spill().clone();
        Some(Tail::of(
            Some(diag.into_listing()),
            Some(spill),
            tracker,
            self.last,
        ))
    }
}

/// A storage tracker per worker (`srt`). The caller's filter must have no streams.
pub(crate) struct Storage {
    tracker: Tracker<WorkerStorage>,
    filter: Filter,
    /// Frame and time of the last segment fed.
    last: Option<(FrameNo, Timestamp)>,
}

impl Storage {
    /// A worker's tracker with the storage port map `cfg`.
    pub(crate) fn new(cfg: &StorageConfig, filter: &Filter) -> Self {
        Self {
            tracker: Tracker::new(
                cfg.clone(),
                WorkerStorage {
                    rec: Recorder::default(),
                    logs: None,
                },
            ),
            filter: filter.clone(),
            last: None,
        }
    }
}

impl Part for Storage {
    const PAYLOADS: bool = true;
    fn segment(&mut self, a: &SegmentAnalysis, d: &SegmentDetail, _out: &mut BatchOut) {
        use tcpdx_core::EventSink;
        if self.filter.port(a.sport, a.dport) {
            self.tracker.segment_detail(a, d);
            self.last = Some((a.frame, a.ts));
        }
    }
    fn payload(&mut self, a: &SegmentAnalysis, p: &[u8]) {
        use tcpdx_core::EventSink;
        if self.filter.port(a.sport, a.dport) {
            self.tracker.payload(a, p);
        }
    }
    fn evicted(&mut self, f: &FlowSummary) -> bool {
        use tcpdx_core::EventSink;
        if self.filter.port(f.dirs[0].src.port, f.dirs[0].dst.port) {
            self.tracker.flow_evicted(f);
        }
        true
    }
    fn needs_flow_stats(&self) -> bool {
        use tcpdx_core::EventSink;
        self.tracker.needs_flow_stats()
    }
    fn drain(&mut self, out: &mut BatchOut) {
        let events = &mut self.tracker.sink_mut().rec.events;
        out.items.extend(events.drain(..).map(Out::Storage));
    }
    fn finish(self) -> Option<Box<Tail>> {
        Some(Tail::of(None, None, self.tracker, self.last))
    }
}

/// What a worker's diagnoser and storage tracker leave at the end (in global stream
/// numbers once [`Tail::renumber`] ran).
pub(crate) struct Tail {
    pub(super) listing: Option<Listing>,
    /// The diagnoser's spill (to check for errors).
    pub(super) spill: Option<Arc<Spill>>,
    pub(super) tcp_logs: Option<TcpLogs>,
    /// The tracker's last events (unanswered requests), in its stream order.
    pub(super) finish: Vec<Recorded>,
    /// Frame and time of the last segment the tracker saw.
    pub(super) last: Option<(FrameNo, Timestamp)>,
}

impl Tail {
    fn of(
        listing: Option<Listing>,
        spill: Option<Arc<Spill>>,
        mut tracker: Tracker<WorkerStorage>,
        last: Option<(FrameNo, Timestamp)>,
    ) -> Box<Self> {
        tracker.finish();
        let sink = tracker.into_sink();
        Box::new(Tail {
            listing,
            spill,
            tcp_logs: sink.logs,
            finish: sink.rec.events,
            last,
        })
    }

    /// Renumbers every stream from the worker's local numbers to `global[local]`.
    pub(super) fn renumber(&mut self, global: &[u32]) {
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
