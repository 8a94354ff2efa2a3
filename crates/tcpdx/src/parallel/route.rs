//! The reader thread: reads and decodes every frame, routes it to the worker of its
//! connection (by a hash of its endpoints, the same both ways), with the payloads the
//! workers' storage parsers may read, and broadcasts the sweeps a single analyzer and
//! diagnoser would make, at the same frames.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, SyncSender};

use tcpdx_capture::{CaptureError, Frames};
use tcpdx_core::{FlowKey, FrameInput, InputStats};
use tcpdx_detect::CLOSED_SWEEP_EVERY;
use tcpdx_storage::StorageConfig;
use tcpdx_wire::Timestamp;

use super::batch::{
    BATCH, BATCH_BYTES, Batch, COPIED, Payload, SHARE_FROM, SHARE_MAPPED_FROM, Work,
};
use crate::{Filter, Progress};

/// What the reader thread hands back at the end.
pub(crate) struct ReaderEnd<R> {
    /// The reader (for its warnings; none when fed from shards).
    pub(crate) reader: Option<R>,
    /// Counters of the frames no worker saw.
    pub(crate) stats: InputStats,
    /// First frame's time.
    pub(crate) first_ts: Option<Timestamp>,
    /// The read error that ended the input early, if any.
    pub(crate) error: Option<CaptureError>,
    /// The progress callback asked to stop ([`Progress::cancelled`]).
    pub(crate) cancelled: bool,
}

/// What the reader does besides routing frames.
pub(crate) struct Routing {
    pub(crate) sweep_every: u64,
    /// Copy the payloads these parsers may read.
    pub(crate) payloads: Option<StorageConfig>,
    /// Count the segments a diagnoser sees (those passing this filter's ports) to
    /// broadcast its sweeps.
    pub(crate) diagnosed: Option<Filter>,
}

/// The worker of a connection: both directions hash alike.
pub(crate) fn worker_of(input: &FrameInput, n: usize) -> Option<usize> {
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

/// The reader thread's loop: batches of frames to `workers` until the input ends or
/// `stop` is set.
pub(crate) fn read_and_route<R: Frames>(
    mut reader: R,
    workers: Vec<SyncSender<Batch>>,
    recycled: Receiver<Batch>,
    stop: &AtomicBool,
    progress: Option<Arc<dyn Progress>>,
    routing: Routing,
) -> ReaderEnd<R> {
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
    let mut cancelled = false;
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
                let diagnosed = match (&routing.diagnosed, &input) {
                    (Some(filter), FrameInput::Segment(seg)) => {
                        filter.port(seg.src.port, seg.dst.port)
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
                cancelled = p.cancelled();
            }
            if !flush(&mut bufs) || stop.load(Ordering::Relaxed) || cancelled {
                break;
            }
        }
    }
    flush(&mut bufs);
    if let Some(p) = progress {
        p.finish();
    }
    ReaderEnd {
        reader: Some(reader),
        stats,
        first_ts,
        error,
        cancelled,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
    use tcpdx_core::{Endpoint, Segment};
    use tcpdx_wire::FrameNo;
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
