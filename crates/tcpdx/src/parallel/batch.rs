//! What travels between the threads: a worker's share of a batch of frames ([`Batch`]),
//! and its output for the merge ([`BatchOut`]).

use std::sync::Arc;

use tcpdx_capture::Buffer;
use tcpdx_core::{FlowSummary, FrameInput, SegmentAnalysis, SegmentDetail, Warning};
use tcpdx_storage::Recorded;
use tcpdx_wire::Timestamp;

/// Frames per batch: large enough that channel costs vanish, small enough to stay in cache.
/// 8192 against 4096: 3-8% faster with two threads on 2 cores (fewer hand-overs and
/// wake-ups, each a context switch there), for 2-6 MB more memory.
pub(crate) const BATCH: usize = 8192;
/// Batches in flight per channel (bounds memory whatever the capture holds).
pub(crate) const DEPTH: usize = 4;
/// Payload bytes a batch refers to (all workers): a batch is sent early when its payloads
/// hold this much, so that the reader's buffers the batches in flight keep alive stay few
/// (4096 full 9000-byte frames would keep 37 MB of them alive per batch).
pub(crate) const BATCH_BYTES: usize = 2 << 20;

/// What a worker is told to do, in capture order.
pub(crate) enum Work {
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
pub(crate) struct Payload {
    pub(crate) buf: u32,
    pub(crate) len: u32,
    pub(crate) start: u64,
}

/// [`Payload::buf`] of a payload copied into [`Batch::bytes`].
pub(crate) const COPIED: u32 = u32::MAX;

/// Payloads from this size on are read by the workers where they lie in the reader's
/// buffer; shorter ones are copied. Sharing a buffer makes the reader move to another one
/// for its next reads (a cold one: the copy from the page cache then runs slower), which
/// only pays when the copies it saves are large (full jumbo frames: 20% of a `diagnose`
/// run, where headers cut by the snap length cost 15% more when shared).
pub(crate) const SHARE_FROM: usize = 512;
/// [`SHARE_FROM`] for a file read mapped: one buffer that sharing never makes the reader
/// leave, so only payloads shorter than a cache line are copied. Read where they lie, those
/// cost a worker a cache miss each for a copy of a few bytes (the many-connection capture,
/// 30-byte payloads, 2 threads: 4% less CPU copied); longer ones are cheaper shared
/// (storage mix, 2 threads: -4 to -8% time against copying those under 512 bytes).
pub(crate) const SHARE_MAPPED_FROM: usize = 64;

/// One worker's share of a batch of frames.
#[derive(Default)]
pub(crate) struct Batch {
    pub(crate) work: Vec<Work>,
    /// Short payloads of the segments the storage parsers may read.
    pub(crate) bytes: Vec<u8>,
    /// The reader's buffers the long payloads lie in (shared: the reader no longer writes
    /// into them).
    pub(crate) bufs: Vec<Arc<Buffer>>,
    /// The reader buffer that `bufs`' last one is (`FrameAt::buffer`).
    pub(crate) last_buf: Option<u64>,
}

impl Batch {
    /// The bytes of `p`.
    pub(crate) fn payload(&self, p: Payload) -> &[u8] {
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
pub(crate) enum Out {
    Opened(u32),
    Seg(SegmentAnalysis, SegmentDetail),
    Warning(Warning),
    Evicted(Box<FlowSummary>),
    Storage(Recorded),
}

/// An `events` CSV row formatted by a worker: its frame, local stream and where its bytes
/// end in [`BatchOut::rows`]. Kept apart from the items (16 bytes, not an `Out`'s 240),
/// so a batch's rows stay in cache between the worker and the merging thread.
pub(crate) struct RowMeta {
    pub(crate) frame: u64,
    pub(crate) local: u32,
    pub(crate) end: u32,
}

/// Where the items and rows of a frame that has some end in a worker's [`BatchOut`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FrameEnd {
    pub(crate) frame: u64,
    /// End in [`BatchOut::items`] (a batch holds far fewer than 4 G).
    pub(crate) items: u32,
    /// End in [`BatchOut::row_meta`].
    pub(crate) rows: u32,
}

/// One worker's output for one batch: `ends` lists, in capture order, the frames that
/// brought items or a row, and where those end (a frame's items come before its row).
/// Frames that brought nothing (most, but for outputs of every segment) are left out, so
/// the merge does not walk them: it orders the workers' frames by number instead.
#[derive(Default)]
pub(crate) struct BatchOut {
    pub(crate) items: Vec<Out>,
    pub(crate) row_meta: Vec<RowMeta>,
    pub(crate) ends: Vec<FrameEnd>,
    pub(crate) rows: Vec<u8>,
}

impl BatchOut {
    /// The number of the i-th frame with output, [`u64::MAX`] past the last.
    pub(crate) fn frame_of(&self, i: usize) -> u64 {
        self.ends.get(i).map_or(u64::MAX, |e| e.frame)
    }
}
