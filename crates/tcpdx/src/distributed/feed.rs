//! Stage 2's feeder: in place of the multi-core driver's reader thread, reads each
//! partition's shards (the files in capture order) and hands worker `p` the records of
//! partition `p` in batches, with their global frame numbers and the planned sweeps, as
//! the reader would have for the concatenated files.

use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, SyncSender};

use tcpdx_core::FrameInput;
use tcpdx_wire::FrameNo;

use super::codec::Decoder;
use super::plan::Plan;
use super::shard_path;
use crate::Error;
use crate::parallel::ReaderEnd;
use crate::parallel::batch::{BATCH, BATCH_BYTES, Batch, COPIED, Payload, Work};

/// One partition's records, file after file.
pub(super) struct PartReader<'a> {
    plan: &'a Plan,
    dir: &'a Path,
    p: u16,
    /// Index in the plan of the file being read.
    file: usize,
    dec: Option<(Decoder<BufReader<File>>, PathBuf)>,
    /// The next record (global frame number set) and its payload.
    pub(super) head: Option<FrameInput>,
    pub(super) payload: Vec<u8>,
}

impl<'a> PartReader<'a> {
    /// The reader of partition `p` of the files of `plan` in `dir`, at its first record.
    pub(super) fn new(plan: &'a Plan, dir: &'a Path, p: u16) -> Result<Self, Error> {
        let mut r = PartReader {
            plan,
            dir,
            p,
            file: 0,
            dec: None,
            head: None,
            payload: Vec::new(),
        };
        r.advance()?;
        Ok(r)
    }

    /// The next record's global frame ([`u64::MAX`] past the last).
    pub(super) fn frame(&self) -> u64 {
        self.head.as_ref().map_or(u64::MAX, |h| h.frame().0)
    }

    /// Reads the next record into `head`.
    pub(super) fn advance(&mut self) -> Result<(), Error> {
        loop {
            if self.dec.is_none() {
                let Some((m, _)) = self.plan.files.get(self.file) else {
                    self.head = None;
                    return Ok(());
                };
                let path = shard_path(self.dir, m.index, self.p);
                let f = File::open(&path).map_err(|e| super::io_err(&path, e))?;
                self.dec = Some((Decoder::new(BufReader::with_capacity(1 << 16, f)), path));
            }
            let (dec, path) = self.dec.as_mut().expect("opened above");
            match dec.next(&mut self.payload) {
                Ok(Some(mut input)) => {
                    let offset = self.plan.files[self.file].1;
                    if let FrameInput::Segment(s) | FrameInput::Partial(s) = &mut input {
                        s.frame = FrameNo(offset + s.frame.0);
                    }
                    self.head = Some(input);
                    return Ok(());
                }
                Ok(None) => {
                    self.dec = None;
                    self.file += 1;
                }
                Err(e) => {
                    return Err(Error::Shard(format!(
                        "{}: {e} (a shard cut short or damaged)",
                        path.display()
                    )));
                }
            }
        }
    }
}

/// Feeds `workers` (one per partition) as the reader thread would; a shard that cannot be
/// read stops the run, its error left in `failed`.
pub(crate) fn feed<R>(
    plan: &Plan,
    dir: &Path,
    workers: Vec<SyncSender<Batch>>,
    recycled: Receiver<Batch>,
    stop: &AtomicBool,
    failed: &Mutex<Option<Error>>,
) -> ReaderEnd<R> {
    let fresh = || Batch {
        work: Vec::with_capacity(BATCH),
        ..Batch::default()
    };
    let mut bufs: Vec<Batch> = workers.iter().map(|_| fresh()).collect();
    let flush = |bufs: &mut Vec<Batch>| -> bool {
        for (tx, buf) in workers.iter().zip(bufs.iter_mut()) {
            let next = recycled.try_recv().unwrap_or_else(|_| fresh());
            if tx.send(std::mem::replace(buf, next)).is_err() {
                return false;
            }
        }
        true
    };
    let end = ReaderEnd {
        reader: None,
        stats: plan.other.clone(),
        first_ts: plan.first_ts,
        error: None,
        cancelled: false,
    };
    let fail = |e: Error| {
        *failed.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
    };
    let mut parts = match (0..plan.partitions)
        .map(|p| PartReader::new(plan, dir, p))
        .collect::<Result<Vec<_>, _>>()
    {
        Ok(parts) => parts,
        Err(e) => {
            fail(e);
            flush(&mut bufs);
            return end;
        }
    };
    if let Some(ts) = plan.first_ts {
        for b in &mut bufs {
            b.work.push(Work::Origin(ts));
        }
    }
    let (mut next_sweep, mut in_batch, mut batch_bytes) = (0usize, 0usize, 0usize);
    loop {
        // The partition whose next record comes first (a few partitions: a linear scan).
        let (mut w, mut first) = (0, u64::MAX);
        for (i, part) in parts.iter().enumerate() {
            let f = part.frame();
            if f < first {
                (w, first) = (i, f);
            }
        }
        // A sweep after frame s goes after every record up to s, in every worker.
        while let Some(s) = plan.sweeps.get(next_sweep).filter(|s| s.frame < first) {
            for b in &mut bufs {
                b.work.push(if s.diagnoser {
                    Work::DiagnoserSweep(s.ts)
                } else {
                    Work::Sweep(s.ts)
                });
            }
            next_sweep += 1;
        }
        if first == u64::MAX {
            break;
        }
        let part = &mut parts[w];
        let input = part.head.take().expect("a record is there");
        let b = &mut bufs[w];
        let at = copy_payload(b, &part.payload);
        batch_bytes += part.payload.len();
        b.work.push(Work::Input(input, at));
        if let Err(e) = part.advance() {
            fail(e);
            break;
        }
        in_batch += 1;
        if in_batch >= BATCH || batch_bytes >= BATCH_BYTES {
            (in_batch, batch_bytes) = (0, 0);
            if !flush(&mut bufs) || stop.load(Ordering::Relaxed) {
                break;
            }
        }
    }
    flush(&mut bufs);
    end
}

/// Global frames per batch of a partition fed alone ([`feed_one`]): the cut every
/// partition's batches share, so that the merge of partitions analysed apart walks batch
/// k of each before any batch k + 1 (the batch of [`feed`], in frames of the capture).
pub(super) const ALONE_BATCH_FRAMES: u64 = BATCH as u64;

/// Batches every partition fed alone gets for `plan`: one per [`ALONE_BATCH_FRAMES`]
/// global frames, at least one.
/// Copies a record's storage payload into the batch's bytes (none: an empty payload).
fn copy_payload(b: &mut Batch, payload: &[u8]) -> Payload {
    if payload.is_empty() {
        return Payload::default();
    }
    let at = Payload {
        buf: COPIED,
        start: b.bytes.len() as u64,
        len: payload.len() as u32,
    };
    b.bytes.extend_from_slice(payload);
    at
}

fn alone_batches(plan: &Plan) -> u64 {
    let frames = plan.files.last().map_or(0, |(m, offset)| offset + m.frames);
    frames.div_ceil(ALONE_BATCH_FRAMES).max(1)
}

/// Feeds the worker of partition `p` alone, as [`feed`] feeds it among the others (the
/// same work in the same order: its records, and every sweep before the first record
/// after its frame), but in batches cut at global frame multiples of
/// [`ALONE_BATCH_FRAMES`], empty ones included: each partition can then run as a task of
/// its own and the merge still meets their frames in capture order. A shard that cannot
/// be read ends the feed, its error left in `failed`.
pub(crate) fn feed_one(
    plan: &Plan,
    dir: &Path,
    p: u16,
    worker: SyncSender<Batch>,
    recycled: Receiver<Batch>,
    failed: &Mutex<Option<Error>>,
) {
    let fresh = || Batch {
        work: Vec::with_capacity(BATCH),
        ..Batch::default()
    };
    let fail = |e: Error| {
        *failed.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
    };
    let mut part = match PartReader::new(plan, dir, p) {
        Ok(part) => part,
        Err(e) => return fail(e),
    };
    let batches = alone_batches(plan);
    let mut b = fresh();
    if let Some(ts) = plan.first_ts {
        b.work.push(Work::Origin(ts));
    }
    let (mut window, mut next_sweep) = (0u64, 0usize);
    let send = |b: &mut Batch, window: &mut u64| -> bool {
        *window += 1;
        let next = recycled.try_recv().unwrap_or_else(|_| fresh());
        worker.send(std::mem::replace(b, next)).is_ok()
    };
    loop {
        let first = part.frame();
        // Frames are numbered from 1: frame f is in window (f - 1) / ALONE_BATCH_FRAMES.
        let at = if first == u64::MAX {
            batches - 1
        } else {
            (first.max(1) - 1) / ALONE_BATCH_FRAMES
        };
        while let Some(s) = plan.sweeps.get(next_sweep).filter(|s| s.frame < first) {
            // A sweep goes in the window of its frame (or a later one: the worker's order
            // is what counts; the window only keeps the batches aligned).
            while window < at.min((s.frame.max(1) - 1) / ALONE_BATCH_FRAMES) {
                if !send(&mut b, &mut window) {
                    return;
                }
            }
            b.work.push(if s.diagnoser {
                Work::DiagnoserSweep(s.ts)
            } else {
                Work::Sweep(s.ts)
            });
            next_sweep += 1;
        }
        while window < at {
            if !send(&mut b, &mut window) {
                return;
            }
        }
        if first == u64::MAX {
            break;
        }
        let input = part.head.take().expect("a record is there");
        let payload = copy_payload(&mut b, &part.payload);
        b.work.push(Work::Input(input, payload));
        if let Err(e) = part.advance() {
            fail(e);
            break;
        }
    }
    // The last window's batch, sent even when empty: every partition sends as many.
    send(&mut b, &mut window);
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;
    use std::sync::mpsc::sync_channel;

    use super::*;
    use crate::Options;
    use crate::drive::{Reader, Source};
    use crate::parallel::Routing;
    use crate::parallel::route::read_and_route;

    /// What one worker is told, batch boundaries left out.
    #[derive(Debug, PartialEq)]
    enum Told {
        Origin(i64),
        Input(u64, Vec<u8>),
        Sweep(i64),
        DiagnoserSweep(i64),
    }

    /// Runs a feeder with `n` workers and collects each one's work.
    fn collect(
        n: usize,
        run: impl FnOnce(Vec<SyncSender<Batch>>, Receiver<Batch>),
    ) -> Vec<Vec<Told>> {
        let (txs, rxs): (Vec<_>, Vec<_>) = (0..n).map(|_| sync_channel::<Batch>(100_000)).unzip();
        let (_recycle_tx, recycle_rx) = sync_channel::<Batch>(1);
        run(txs, recycle_rx);
        rxs.into_iter()
            .map(|rx| {
                let mut told = Vec::new();
                for b in rx.try_iter() {
                    for w in &b.work {
                        told.push(match w {
                            Work::Origin(ts) => Told::Origin(ts.0),
                            Work::Input(i, at) => Told::Input(i.frame().0, b.payload(*at).to_vec()),
                            Work::Sweep(ts) => Told::Sweep(ts.0),
                            Work::DiagnoserSweep(ts) => Told::DiagnoserSweep(ts.0),
                        });
                    }
                }
                told
            })
            .collect()
    }

    #[test]
    fn workers_are_told_what_the_reader_tells_them() {
        let dir = tempfile::tempdir().unwrap();
        let whole = dir.path().join("storage.pcap");
        // The storage mix: payloads travel; 40,000 frames: over two diagnoser sweeps.
        let cfg = tcpdx_testkit::storage_mix::StorageMixConfig {
            packets: 40_000,
            ..Default::default()
        };
        tcpdx_testkit::storage_mix::write_storage_mix(File::create(&whole).unwrap(), cfg).unwrap();
        // Cut into 3 consecutive files.
        let mut r = tcpdx_capture::CaptureReader::open(&whole).unwrap();
        let mut frames = Vec::new();
        while let Some(f) = r.next_frame().unwrap() {
            frames.push(tcpdx_testkit::frame::OwnedFrame {
                no: f.no,
                ts: f.ts,
                link: f.link,
                orig_len: f.orig_len,
                data: f.data.to_vec(),
            });
        }
        let files: Vec<PathBuf> = frames
            .chunks(frames.len().div_ceil(3))
            .enumerate()
            .map(|(i, c)| {
                let p = dir.path().join(format!("ring{i}.pcap"));
                let mut f = File::create(&p).unwrap();
                tcpdx_testkit::pcap_writer::write_pcap(&mut f, c, true).unwrap();
                p
            })
            .collect();
        let o = Options::default();
        let (n, sweep_every) = (3u16, 5_000);
        let shards = dir.path().join("shards");
        for (i, f) in files.iter().enumerate() {
            super::super::shard(f, &shards, i as u32, n, &o).unwrap();
        }
        let routing = || Routing {
            sweep_every,
            payloads: Some(o.storage_config()),
            diagnosed: Some(o.filter.clone()),
        };
        let stop = AtomicBool::new(false);
        let want = collect(usize::from(n), |txs, rx| {
            let Reader::One(reader) = Source::Path(whole.clone()).open(1).unwrap() else {
                panic!("one file")
            };
            read_and_route(reader, txs, rx, &stop, None, routing());
        });
        let metas = super::super::shard_metas(&shards).unwrap();
        let plan = Plan::new(&shards, metas, sweep_every).unwrap();
        let failed = Mutex::new(None);
        let got = collect(usize::from(n), |txs, rx| {
            feed::<tcpdx_capture::CaptureReader>(&plan, &shards, txs, rx, &stop, &failed);
        });
        assert!(failed.lock().unwrap().is_none());
        let count = |k: fn(&Told) -> bool| want.iter().flatten().filter(|t| k(t)).count();
        // The test sees what it is about: sweeps of both kinds, payloads, every worker busy.
        assert!(count(|t| matches!(t, Told::Sweep(_))) >= 3 * 7);
        assert!(count(|t| matches!(t, Told::DiagnoserSweep(_))) >= 3 * 2);
        assert!(count(|t| matches!(t, Told::Input(_, p) if !p.is_empty())) > 1_000);
        assert!(want.iter().all(|w| w.len() > 1_000));
        for (w, (g, e)) in got.iter().zip(&want).enumerate() {
            assert_eq!(g.len(), e.len(), "worker {w}");
            for (i, (g, e)) in g.iter().zip(e).enumerate() {
                assert_eq!(g, e, "worker {w}, item {i}");
            }
        }
        // Each partition fed alone: the same work, in as many batches as every other.
        assert!(
            alone_batches(&plan) >= 4,
            "several batches: {}",
            alone_batches(&plan)
        );
        for p in 0..n {
            let (tx, rx) = sync_channel::<Batch>(100_000);
            let (_recycle_tx, recycle_rx) = sync_channel::<Batch>(1);
            feed_one(&plan, &shards, p, tx, recycle_rx, &failed);
            assert!(failed.lock().unwrap().is_none());
            let batches: Vec<Batch> = rx.try_iter().collect();
            assert_eq!(batches.len() as u64, alone_batches(&plan), "partition {p}");
            // Batch k holds the records of global frames k * B + 1 to (k + 1) * B.
            for (k, b) in batches.iter().enumerate() {
                for w in &b.work {
                    if let Work::Input(i, _) = w {
                        assert_eq!((i.frame().0 - 1) / ALONE_BATCH_FRAMES, k as u64);
                    }
                }
            }
            let told = collect(1, |txs, _| {
                for b in batches {
                    txs[0].send(b).unwrap();
                }
            });
            assert_eq!(told[0], want[usize::from(p)], "partition {p}");
        }
    }
}
