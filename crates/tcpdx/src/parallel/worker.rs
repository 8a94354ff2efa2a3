//! A worker thread: its own analyzer over the connections routed to it, and the output's
//! [`Part`] beside it; what they produce goes back to the merge batch by batch.

use std::sync::mpsc::{Receiver, SyncSender};

use tcpdx_core::{
    Analyzer, AnalyzerConfig, EventSink, FlowSummary, InputStats, SegmentAnalysis, SegmentDetail,
    StreamId, Warning,
};
use tcpdx_wire::FrameNo;

use super::batch::{Batch, BatchOut, FrameEnd, Out, Work};
use super::part::{Part, Tail};

/// What a worker sends to the merge.
pub(super) enum WorkerMsg {
    Batch(BatchOut),
    /// Every batch was analysed (the worker waits for the global stream numbers).
    Drained,
    End {
        flows: Vec<FlowSummary>,
        stats: InputStats,
        tail: Option<Box<Tail>>,
    },
}

/// Collects a worker's output for the merge.
struct WorkerSink<'a, P> {
    /// Someone reads the flow summaries' statistics: the merging thread's sink (which gets
    /// the summaries) or the part (which gets the evicted ones).
    flow_stats: bool,
    out: &'a mut BatchOut,
    part: &'a mut P,
}

impl<P: Part> EventSink for WorkerSink<'_, P> {
    fn segment_detail(&mut self, a: &SegmentAnalysis, d: &SegmentDetail) {
        self.part.segment(a, d, self.out);
    }
    fn payload(&mut self, a: &SegmentAnalysis, payload: &[u8]) {
        self.part.payload(a, payload);
    }
    fn warning(&mut self, w: &Warning) {
        self.out.items.push(Out::Warning(w.clone()));
    }
    fn flow_evicted(&mut self, f: &FlowSummary) {
        if !self.part.evicted(f) {
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
pub(super) struct Channels {
    pub(super) rx: Receiver<Batch>,
    pub(super) tx: SyncSender<WorkerMsg>,
    pub(super) recycle: SyncSender<Batch>,
    pub(super) spent: Receiver<BatchOut>,
    /// The global stream numbers of this worker's local ones, sent once every batch is
    /// merged (see [`work`]).
    pub(super) numbers: Receiver<Vec<u32>>,
}

/// What the merging thread's sink reads of the flows.
#[derive(Clone, Copy)]
pub(super) struct FlowNeeds {
    /// Flow statistics ([`EventSink::needs_flow_stats`]).
    pub(super) stats: bool,
    /// The summaries at the end ([`EventSink::needs_flows`]).
    pub(super) summaries: bool,
}

/// A worker: analyses the frames routed to it. At the end it renumbers what it leaves to
/// the global stream numbers itself, beside the other workers: on the merging thread, after
/// every worker had ended, that took 6-8 ms of a 300 ms `diagnose` on many connections.
pub(super) fn work<P: Part>(cfg: AnalyzerConfig, ch: Channels, mut part: P, needs: FlowNeeds) {
    let mut an = Analyzer::new(cfg);
    let flow_stats = needs.stats || part.needs_flow_stats();
    for mut batch in ch.rx {
        // Reuse the merger's spent outputs: fresh large vectors per batch cost page faults.
        let mut out = ch.spent.try_recv().unwrap_or_default();
        out.items.clear();
        out.row_meta.clear();
        out.ends.clear();
        out.rows.clear();
        let mut sink = WorkerSink {
            flow_stats,
            out: &mut out,
            part: &mut part,
        };
        for w in &batch.work {
            match w {
                Work::Origin(ts) => an.set_origin(*ts),
                Work::Sweep(ts) => an.sweep(*ts),
                Work::DiagnoserSweep(ts) => sink.part.sweep(*ts),
                Work::Input(input, at) => {
                    let payload = batch.payload(*at);
                    an.handle_input_with_payload(input, payload, &mut sink);
                    sink.part.drain(sink.out);
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
    // The parts read no summaries at the end (a single diagnoser would get them from the
    // analyzer, so they would have to be handed over here).
    let mut flows = FlowCollector {
        flows: Vec::new(),
        wanted: needs.summaries,
    };
    an.handle_end(&mut flows);
    let mut tail = part.finish();
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
