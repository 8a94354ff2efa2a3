//! Capture facts, established before any inference: how fine the capture's clock is,
//! which frames it saw twice (a mirror port's copies, a router forwarding a frame back past
//! the capture point), which frames it never saw (the senders' IPv4 IDs skip), which
//! originals came late (an ID older than one already seen), offload super-segments and the
//! snap length. Per connection ([`ConnFacts`], fed every segment before the inference) and
//! summed per capture ([`CaptureFacts`], the `capture` object of `diagnose --json`).
//!
//! The inference then uses them: a copy is not fed to it at all (it is neither a
//! retransmission nor a loss), a late original is an out-of-order segment, not a
//! retransmission, an interval shorter than the clock's tick is no evidence, and a wait
//! during which the waiting side's frames are missing from the capture is no timer.

use serde::Serialize;
use tcpdx_core::{AnalysisFlags as F, Dir, SegmentAnalysis, SegmentDetail};

/// A copy of a frame (same IPv4 ID, sequence, length, ACK and flags) within this long of
/// the original is the same packet seen twice, even where the round trip is shorter
/// (tcpdx choice, Linux's minimum RTO: a mirror port's copy can come tens of ms late; a
/// stack that varies its IDs gives a retransmission a new one, so the ID, not the delay,
/// tells them apart, and the bound only keeps a wrapped ID from matching).
pub const DUP_MIN_WINDOW_NS: i64 = 200_000_000;
/// Recent frames remembered per direction for finding copies (a power of two; a copy
/// more than this many frames of its direction after the original is not recognised).
const RECENT_SLOTS: usize = 64;
/// A jump of the IPv4 ID larger than this is another counter's doing (a host-wide
/// counter shared with other connections, a wrap), not frames missing from the capture.
pub const ID_MAX_JUMP: u16 = 1024;
/// Steps between frames' IDs needed before a direction's IDs count as a per-connection
/// counter whose skips are missing frames.
pub const ID_MIN_STEPS: u32 = 8;
/// Share of those steps that must be exactly the expected increment (tcpdx choice:
/// Linux and Windows increment by one per packet; random IDs almost never do).
pub const ID_SEQUENTIAL_SHARE: f64 = 0.75;
/// ID gaps remembered per direction (the count stays exact).
const MAX_ID_GAPS: usize = 1024;
/// A clock is coarse when at least this many frames share their predecessor's timestamp...
pub const COARSE_MIN_TIES: u64 = 10;
/// ...making at least this share of the frames...
pub const COARSE_TIE_SHARE: f64 = 0.1;
/// ...and every other difference is a multiple of a tick of at least this (1 ms: a clock
/// of a kernel tick, a Windows or a 10 ms timer; a microsecond clock is not coarse).
pub const COARSE_MIN_TICK_NS: i64 = 1_000_000;
/// Frames of a connection whose times are divided to find the clock's tick and unit (a
/// division per frame is costly; the first frames show the clock as well as all do).
pub const CLOCK_SAMPLE_FRAMES: u64 = 1024;
/// An interval is evidence only if it spans at least this many ticks of the clock (one
/// tick measured may be anything from zero to two ticks).
pub const MIN_TICKS: i64 = 2;

/// What the facts make of one segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Seen {
    /// A segment to infer from as the core analysed it.
    New,
    /// A copy of a frame already seen: not fed to the inference.
    Copy,
    /// An original that came after later-sent segments (its ID is older than one already
    /// seen): out of order, not a retransmission.
    LateOriginal,
}

/// One recent frame, packed so that a lookup compares two words: a frame is a copy of
/// another only if all of `key` is equal. (An empty slot's key, all zero, is a frame
/// without data or an ID, which is never taken for a copy.)
#[derive(Clone, Copy, Debug, Default)]
struct Recent {
    /// Sequence and ACK number; length, IPv4 ID and TCP flags.
    key: [u64; 2],
    ts: i64,
    tsval: u32,
    ttl: u8,
    used: bool,
}

impl Recent {
    /// The key of segment `a`.
    #[inline]
    fn key_of(a: &SegmentAnalysis, d: &SegmentDetail) -> [u64; 2] {
        [
            u64::from(a.seq as u32) | u64::from(a.ack as u32) << 32,
            u64::from(a.len) | u64::from(d.ip_id) << 32 | u64::from(a.tcp_flags) << 48,
        ]
    }

    /// The slot of this frame in the recent table.
    fn slot(&self) -> usize {
        let [sa, rest] = self.key;
        slot_of((rest >> 32) as u16, sa as u32, (sa >> 32) as u32)
    }
}

/// The slot of a frame in the recent table: by its ID, by its sequence without one.
#[inline]
fn slot_of(id: u16, seq: u32, ack: u32) -> usize {
    let key = if id != 0 { u32::from(id) } else { seq ^ ack };
    key as usize % RECENT_SLOTS
}

/// A skip in a direction's IPv4 IDs: frames sent between two captured ones.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IdGap {
    /// The captured frame before.
    pub before: i64,
    /// The captured frame after.
    pub after: i64,
    /// IDs skipped.
    pub missing: u16,
}

/// One direction's IPv4 IDs and copies.
#[derive(Clone, Debug, Default)]
pub struct DirFacts {
    /// The direction's first frame; the table holds it and the next ones from the second
    /// on (a connection of one frame, as in a SYN flood, allocates none).
    first: Recent,
    recent: Option<Box<[Recent; RECENT_SLOTS]>>,
    /// The ID the next frame should carry.
    next_id: u16,
    /// Highest ID seen (in wrapping order).
    last_id: u16,
    last_ts: i64,
    have_id: bool,
    /// Frames with an ID.
    ids: u32,
    id_steps: u32,
    id_expected: u32,
    id_skipped: u64,
    /// Skips of the IDs (capped at [`MAX_ID_GAPS`]).
    pub gaps: Vec<IdGap>,
    /// Frames seen twice.
    pub copies: u64,
    /// Of those, the copy with a lower TTL (forwarded again by a router past the capture).
    pub reforwarded: u64,
    /// Originals that came late.
    pub late: u64,
    /// MSS this direction may send (the peer's SYN option), 0 unknown.
    mss: u32,
}

impl DirFacts {
    /// The IDs follow a per-connection counter, so their skips are frames not captured.
    pub fn sequential_ids(&self) -> bool {
        self.id_steps >= ID_MIN_STEPS
            && f64::from(self.id_expected) >= ID_SEQUENTIAL_SHARE * f64::from(self.id_steps)
    }

    /// Frames the IDs say were sent but not captured (late arrivals deducted).
    pub fn missing(&self) -> u64 {
        if self.sequential_ids() {
            self.id_skipped.saturating_sub(self.late)
        } else {
            0
        }
    }

    /// True if the IDs skip between `start` (exclusive) and `end` (inclusive): frames of
    /// this direction sent then are missing from the capture.
    pub fn missing_within(&self, start: i64, end: i64) -> bool {
        self.sequential_ids() && self.gaps.iter().any(|g| g.after > start && g.after <= end)
    }

    /// Whether segment `a`, equal in every field of the key to the earlier frame `old`,
    /// is a copy of it: within the copy window of it (`rtt` the round trip so far).
    #[cold]
    fn is_copy(
        &self,
        a: &SegmentAnalysis,
        d: &SegmentDetail,
        old: &Recent,
        rtt: impl FnOnce() -> i64,
    ) -> bool {
        let rtt = rtt();
        // A stack that sends one ID on every frame says nothing with it.
        let constant_id = self.ids >= 3 && self.id_steps == 0;
        let delay = a.ts.0 - old.ts;
        if d.ip_id != 0 && !constant_id {
            delay <= rtt.max(DUP_MIN_WINDOW_NS)
        } else {
            // Without an ID, only data with the same timestamp option within a round trip:
            // the sender could not have retransmitted it sooner.
            a.len > 0 && d.timestamps.is_some_and(|t| t.0 == old.tsval) && delay < rtt
        }
    }

    /// The first two frames: the second allocates the table (a connection of one frame
    /// per direction, as in a SYN flood, allocates none).
    #[cold]
    fn remember_early(&mut self, slot: usize, e: Recent) {
        if !self.first.used {
            self.first = e;
            return;
        }
        // Filled on the heap: `Box::new` of the array built it on the stack and copied it.
        let table: Result<Box<[Recent; RECENT_SLOTS]>, _> = vec![Recent::default(); RECENT_SLOTS]
            .into_boxed_slice()
            .try_into();
        if let Ok(mut r) = table {
            r[self.first.slot()] = self.first;
            r[slot] = e;
            self.recent = Some(r);
        }
    }

    /// Follows the ID counter; true if this frame's ID is older than one already seen.
    #[inline]
    fn count_id(&mut self, a: &SegmentAnalysis, id: u16) -> bool {
        let ts = a.ts.0;
        self.ids = self.ids.saturating_add(1);
        // Offload: a super-segment used one ID per MSS-sized packet on the wire.
        let used = if self.mss > 0 && a.len > self.mss {
            a.len.div_ceil(self.mss).min(u32::from(ID_MAX_JUMP)) as u16
        } else {
            1
        };
        if !self.have_id {
            self.have_id = true;
            (self.last_id, self.next_id, self.last_ts) = (id, id.wrapping_add(used), ts);
            return false;
        }
        let ahead = id.wrapping_sub(self.next_id) as i16;
        if ahead >= 0 {
            if id != self.last_id {
                self.id_steps += 1;
            }
            if ahead == 0 {
                self.id_expected += 1;
            } else if (ahead as u16) <= ID_MAX_JUMP {
                self.id_skipped += ahead as u64;
                if self.gaps.len() < MAX_ID_GAPS {
                    self.gaps.push(IdGap {
                        before: self.last_ts,
                        after: ts,
                        missing: ahead as u16,
                    });
                }
            }
            (self.last_id, self.next_id, self.last_ts) = (id, id.wrapping_add(used), ts);
            return false;
        }
        let behind = self.last_id.wrapping_sub(id);
        behind > 0 && behind <= ID_MAX_JUMP
    }
}

/// The capture clock as one connection's frames show it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Clock {
    last: i64,
    frames: u64,
    ties: u64,
    /// Greatest common divisor of the positive differences, in µs (0: none yet).
    gcd_us: i64,
    /// Largest power of ten of ns dividing every timestamp (0: none yet).
    unit: i64,
}

impl Clock {
    #[inline]
    fn tick(&mut self, ts: i64) {
        let dt = ts - self.last;
        if self.frames < CLOCK_SAMPLE_FRAMES {
            self.sample(ts, dt);
        } else if dt == 0 {
            self.ties += 1;
        }
        self.last = ts;
        self.frames += 1;
    }

    /// One of the first frames: its time refines the tick and the unit.
    #[inline]
    fn sample(&mut self, ts: i64, dt: i64) {
        if self.frames > 0 {
            if dt == 0 {
                self.ties += 1;
            } else if dt > 0 && self.gcd_us != 1 {
                // (A divisor of one stays one: no division.)
                let us = (dt + 500) / 1000;
                if us > 0 && (self.gcd_us == 0 || us % self.gcd_us != 0) {
                    self.gcd_us = gcd(self.gcd_us, us);
                }
            }
        }
        if self.unit == 0 {
            self.unit = 1_000_000_000;
        }
        while self.unit > 1 && ts % self.unit != 0 {
            self.unit /= 10;
        }
    }

    fn add(&mut self, o: &Clock) {
        self.frames += o.frames;
        self.ties += o.ties;
        self.gcd_us = gcd(self.gcd_us, o.gcd_us);
        self.unit = match (self.unit, o.unit) {
            (0, u) | (u, 0) => u,
            (a, b) => a.min(b),
        };
    }

    /// The clock's tick in ns when its frames show a coarse one (many frames share a
    /// timestamp and every other difference is a multiple of at least 1 ms), else 0.
    pub fn coarse_tick_ns(&self) -> i64 {
        let tick = self.gcd_us * 1000;
        let tied = self.ties >= COARSE_MIN_TIES
            && self.ties as f64 >= COARSE_TIE_SHARE * self.frames as f64;
        if tied && tick >= COARSE_MIN_TICK_NS {
            tick
        } else {
            0
        }
    }

    /// The clock's resolution in ns: the coarse tick, else the finest unit the
    /// timestamps are written in (0 unknown).
    pub fn resolution_ns(&self) -> i64 {
        match self.coarse_tick_ns() {
            0 if self.gcd_us > 0 => self.unit.min(self.gcd_us * 1000),
            0 => self.unit,
            t => t,
        }
    }
}

fn gcd(mut a: i64, mut b: i64) -> i64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a.abs()
}

/// The facts of one connection.
#[derive(Clone, Debug, Default)]
pub struct ConnFacts {
    /// Client to server, server to client (by `Dir::idx()`).
    pub dirs: [DirFacts; 2],
    /// The clock over this connection's frames.
    pub clock: Clock,
}

impl ConnFacts {
    /// Looks at one segment before the inference does; `rtt` gives the round trip known
    /// so far (ns, 0 unknown), asked only of a frame equal to an earlier one.
    #[inline]
    pub fn observe(
        &mut self,
        a: &SegmentAnalysis,
        d: &SegmentDetail,
        rtt: impl FnOnce() -> i64,
    ) -> Seen {
        self.clock.tick(a.ts.0);
        let i = a.dir.idx();
        if a.tcp_flags & 0x02 != 0
            && let (Some(m), Some(peer)) = (d.mss, self.dirs.get_mut(1 - i))
        {
            peer.mss = u32::from(m);
        }
        let Some(f) = self.dirs.get_mut(i) else {
            return Seen::New;
        };
        // Every frame, not only those the core flagged: a copy that comes late repeats an
        // old ACK, which is no duplicate ACK.
        // A copy can only be of the frame in its slot (or of the first frame, before the
        // table exists); the frame then takes the slot.
        let key = Recent::key_of(a, d);
        let slot = slot_of(d.ip_id, a.seq as u32, a.ack as u32);
        let old = match &f.recent {
            Some(r) => &r[slot],
            None => &f.first,
        };
        if old.key == key && f.is_copy(a, d, old, rtt) {
            let reforwarded = d.ttl < old.ttl;
            f.copies += 1;
            f.reforwarded += u64::from(reforwarded);
            return Seen::Copy;
        }
        let e = Recent {
            key,
            ts: a.ts.0,
            tsval: d.timestamps.map_or(0, |t| t.0),
            ttl: d.ttl,
            used: true,
        };
        match &mut f.recent {
            Some(r) => r[slot] = e,
            None => f.remember_early(slot, e),
        }
        let older = d.ip_id != 0 && f.count_id(a, d.ip_id);
        // One flagged spurious (its data already acknowledged) the sender's inference
        // already counts once per sequence number as reordering.
        let resent = a.flags.any(F::RETRANSMISSION | F::FAST_RETRANSMISSION)
            && !a.flags.has(F::SPURIOUS_RETRANSMISSION);
        if older && f.sequential_ids() {
            f.late += 1;
            if resent {
                return Seen::LateOriginal;
            }
        }
        Seen::New
    }

    /// The connection's coarse clock tick (ns, 0 when the clock is fine).
    pub fn tick_ns(&self) -> i64 {
        self.clock.coarse_tick_ns()
    }

    /// `interval` (ns) if the clock can measure it, else 0 (unknown): shorter than
    /// [`MIN_TICKS`] ticks of a coarse clock it is no evidence.
    pub fn measurable(&self, interval: i64) -> i64 {
        if interval < MIN_TICKS * self.tick_ns() {
            0
        } else {
            interval
        }
    }

    /// Whether a wait from `start` to `end` (ns) for a frame of `waiting_on`, held `hold`
    /// beyond the round trip, can be a timer of that side: the clock measures it and none
    /// of that side's frames are missing from the capture meanwhile.
    pub fn timer_wait_credible(&self, waiting_on: Dir, start: i64, end: i64, hold: i64) -> bool {
        self.measurable(hold) > 0 && !self.dirs[waiting_on.idx()].missing_within(start, end)
    }

    /// Frames seen twice, both directions.
    pub fn copies(&self) -> u64 {
        self.dirs.iter().map(|d| d.copies).sum()
    }

    /// This connection's share of the capture's facts.
    pub fn summary(&self, acked_unseen: u64, over_mss: u64) -> CaptureFacts {
        let mut c = CaptureFacts {
            clock: self.clock,
            duplicate_frames: self.copies(),
            reforwarded_frames: self.dirs.iter().map(|d| d.reforwarded).sum(),
            late_originals: self.dirs.iter().map(|d| d.late).sum(),
            capture_drops: CaptureDrops {
                ip_id_missing: self.dirs.iter().map(DirFacts::missing).sum(),
                acked_unseen,
            },
            offload: Offload {
                segments_over_mss: over_mss,
            },
            ..CaptureFacts::default()
        };
        c.settle();
        c
    }

    /// One line per fact that matters on this connection, for the `capture-quality`
    /// finding (`endpoints` are the client's and the server's `ip:port`).
    pub fn notes(&self, endpoints: &[String; 2]) -> Vec<String> {
        let mut out = Vec::new();
        let copies = self.copies();
        if copies > 0 {
            let re: u64 = self.dirs.iter().map(|d| d.reforwarded).sum();
            let how = if re * 2 > copies {
                "forwarded past the capture point a second time, with a TTL one lower (a \
                 routing loop or a router on a stick)"
            } else {
                "copied (a mirror port or a tap seeing both sides of a device)"
            };
            out.push(format!(
                "{copies} frame(s) were captured twice (same IPv4 ID, sequence, length and \
                 ACK), {how}: the copies are not counted as retransmissions or losses"
            ));
        }
        for (i, d) in self.dirs.iter().enumerate() {
            let m = d.missing();
            if m > 0 {
                out.push(format!(
                    "the IPv4 IDs of {} skip {m} frame(s) the capture never saw: timings that \
                     wait on that side's frames are not taken as timers",
                    endpoints.get(i).map_or("", String::as_str)
                ));
            }
        }
        let late: u64 = self.dirs.iter().map(|d| d.late).sum();
        if late > 0 {
            out.push(format!(
                "{late} segment(s) came after segments sent later (their IPv4 ID is older): \
                 reordering, not retransmissions"
            ));
        }
        let tick = self.tick_ns();
        if tick > 0 {
            out.push(format!(
                "the capture's timestamps tick every {:.1} ms ({} of {} frames share their \
                 predecessor's time): intervals under {:.1} ms are not measured",
                tick as f64 / 1e6,
                self.clock.ties,
                self.clock.frames,
                (MIN_TICKS * tick) as f64 / 1e6
            ));
        }
        out
    }
}

/// Frames missing from the capture.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct CaptureDrops {
    /// Frames the senders' IPv4 IDs say were sent but not captured (directions whose IDs
    /// follow a per-connection counter only; late arrivals deducted).
    pub ip_id_missing: u64,
    /// ACKs that acknowledge data the capture never saw (`tcp.analysis.ack_lost_segment`).
    pub acked_unseen: u64,
}

/// Segmentation offload at the capture host.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Offload {
    /// Segments longer than the MSS (TSO/GSO/GRO super-segments).
    pub segments_over_mss: u64,
}

/// Payloads cut by the capture's snap length.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct SnapLen {
    /// Segments whose payload was not captured whole.
    pub truncated_segments: u64,
    /// Largest payload captured of such a segment (bytes): the snap length less the
    /// headers.
    pub captured_payload_max: u32,
}

/// The capture's facts (the `capture` object of `diagnose --json`), summed over its
/// connections.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct CaptureFacts {
    #[serde(skip)]
    clock: Clock,
    /// The clock's resolution, seconds: its tick when the timestamps show a coarse one,
    /// else the unit they are written in; null with too few frames to tell.
    pub resolution_s: Option<f64>,
    /// The tick is coarse (at least 1 ms, many frames sharing a timestamp): intervals
    /// under two ticks are not evidence.
    pub coarse_clock: bool,
    /// Frames sharing the previous frame's timestamp (within their connection).
    pub timestamp_ties: u64,
    /// Frames captured twice (same IPv4 ID, sequence, length, ACK), not analysed as
    /// retransmissions.
    pub duplicate_frames: u64,
    /// Of those, copies with a TTL lower than the first (forwarded past the capture again).
    pub reforwarded_frames: u64,
    /// Segments whose IPv4 ID was older than one already seen: reordered originals.
    pub late_originals: u64,
    /// Frames missing from the capture.
    pub capture_drops: CaptureDrops,
    /// Offload super-segments.
    pub offload: Offload,
    /// Snap length.
    pub snaplen: SnapLen,
}

impl CaptureFacts {
    /// Adds another connection's or capture's facts.
    pub fn add(&mut self, o: &CaptureFacts) {
        self.clock.add(&o.clock);
        self.duplicate_frames += o.duplicate_frames;
        self.reforwarded_frames += o.reforwarded_frames;
        self.late_originals += o.late_originals;
        self.capture_drops.ip_id_missing += o.capture_drops.ip_id_missing;
        self.capture_drops.acked_unseen += o.capture_drops.acked_unseen;
        self.offload.segments_over_mss += o.offload.segments_over_mss;
        self.snaplen.truncated_segments += o.snaplen.truncated_segments;
        self.snaplen.captured_payload_max = self
            .snaplen
            .captured_payload_max
            .max(o.snaplen.captured_payload_max);
        self.settle();
    }

    /// Counts a segment whose payload was captured `captured` of `len` bytes.
    #[inline]
    pub fn payload(&mut self, captured: u32, len: u32) {
        if captured < len {
            self.snaplen.truncated_segments += 1;
            self.snaplen.captured_payload_max = self.snaplen.captured_payload_max.max(captured);
        }
    }

    /// The clock's coarse tick in ns (0 for a fine clock).
    pub fn tick_ns(&self) -> i64 {
        self.clock.coarse_tick_ns()
    }

    fn settle(&mut self) {
        let r = self.clock.resolution_ns();
        self.resolution_s = (self.clock.frames >= 2 && r > 0).then(|| r as f64 / 1e9);
        self.coarse_clock = self.clock.coarse_tick_ns() > 0;
        self.timestamp_ties = self.clock.ties;
    }
}

tcpdx_core::codec_struct!(Clock {
    last,
    frames,
    ties,
    gcd_us,
    unit
});
tcpdx_core::codec_struct!(CaptureDrops {
    ip_id_missing,
    acked_unseen
});
tcpdx_core::codec_struct!(Offload { segments_over_mss });
tcpdx_core::codec_struct!(SnapLen {
    truncated_segments,
    captured_payload_max
});
tcpdx_core::codec_struct!(CaptureFacts {
    clock,
    resolution_s,
    coarse_clock,
    timestamp_ties,
    duplicate_frames,
    reforwarded_frames,
    late_originals,
    capture_drops,
    offload,
    snaplen,
});

#[cfg(test)]
mod tests;
