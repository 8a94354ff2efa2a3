//! The merge, on the caller's thread: takes one batch from every worker, walks their
//! frames with output in capture order (by frame number), renumbers streams in order of
//! first appearance (how a single analyzer numbers them) and replays every item into the
//! caller's sinks.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, SyncSender};

use tcpdx_core::{EventSink, StreamId, Warning};
use tcpdx_storage::{Recorded, StorageSink};

use super::batch::{BatchOut, FrameEnd, Out};
use super::worker::WorkerMsg;
use crate::{Error, Filter};

/// Merges every batch of the workers into `sink` and `storage` in capture order; `row`
/// receives the CSV rows (frame, global stream, row tail) that pass the stream filter.
/// `stop` is polled after each batch: once true, the rest is only drained (so the reader
/// and workers can finish), following the stream numbers. Returns the numbering, and
/// whether it stopped.
#[allow(clippy::too_many_arguments)]
pub(super) fn merge<S: EventSink, T: StorageSink>(
    from_workers: &[Receiver<WorkerMsg>],
    spent_to: &[SyncSender<BatchOut>],
    filter: &Filter,
    sink: &mut S,
    storage: &mut T,
    stop: impl Fn(&S, &T) -> bool,
    mut row: impl FnMut(&mut S, u64, u32, &[u8]),
    stop_flag: &AtomicBool,
) -> Result<(Renumber, bool), Error> {
    let n = from_workers.len();
    let mut ids = Renumber {
        maps: vec![Vec::new(); n],
        next: 0,
    };
    let mut stopped = false;
    let mut started = false;
    let mut outs: Vec<BatchOut> = Vec::with_capacity(n);
    let mut merge = Merge::default();
    loop {
        // One batch from every worker (the reader sends each one at every flush), or
        // the end from every one.
        outs.clear();
        let mut drained = 0;
        for rx in from_workers {
            match rx.recv() {
                Ok(WorkerMsg::Batch(b)) => outs.push(b),
                Ok(WorkerMsg::Drained) => drained += 1,
                _ => {
                    return Err(Error::Thread(
                        "an analysis worker stopped unexpectedly".into(),
                    ));
                }
            }
        }
        match drained {
            0 => {}
            d if d == n => break,
            _ => {
                return Err(Error::Thread(
                    "the analysis workers got different numbers of batches".into(),
                ));
            }
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
                    if filter.stream(g) {
                        row(sink, m.frame, g, &out.rows[at.row..end]);
                    }
                }
                at.row = end;
            }
            at.meta = meta_end;
        }
        for (out, tx) in outs.drain(..).zip(spent_to) {
            let _ = tx.try_send(out);
        }
        if !stopped && stop(sink, storage) {
            stopped = true;
            stop_flag.store(true, Ordering::Relaxed);
        }
    }
    Ok((ids, stopped))
}

/// Local stream index -> global, per worker, in order of first appearance.
#[derive(Default)]
pub(super) struct Renumber {
    pub(super) maps: Vec<Vec<u32>>,
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
pub(super) struct Merge {
    /// How far it has come in each worker's output.
    at: Vec<At>,
    /// Each worker's next frame number ([`u64::MAX`] once it has none), kept apart from
    /// `at` so that picking the next worker reads one small array.
    heads: Vec<u64>,
}

impl Merge {
    /// Starts on a new batch of every worker.
    pub(super) fn reset(&mut self, outs: &[BatchOut]) {
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
    pub(super) fn next(&mut self, outs: &[BatchOut]) -> Option<(usize, FrameEnd)> {
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
