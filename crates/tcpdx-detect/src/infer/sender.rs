//! `SenderState`: what one side's data and the peer's ACKs say about the sender.
//!
//! Fed in capture order with the data segments of one direction ([`SenderState::on_data`])
//! and the segments of the other direction that acknowledge them ([`SenderState::on_ack`]),
//! it infers round trips (packets and bytes per round, the sender's effective window), loss
//! recovery episodes (first duplicate ACK or retransmission to the ACK covering the recovery
//! point), retransmission timeouts, lone segments whose ACK the receiver delayed, zero-window
//! periods, spurious retransmissions (D-SACK, Wireshark's flag) and the receiver's ACK
//! behaviour. Memory is bounded: every list is capped (the counts stay exact).

use std::sync::Arc;

use super::Rounds;
use super::retx::{Match, RecentRetx, Retx};
use crate::spill::{Spill, SpillList};
use tcpdx_core::{AnalysisFlags as F, SegmentAnalysis, SegmentDetail};

/// Rounds kept per direction (tcpdx choice: a 1-hour transfer at 36 ms RTT).
pub const MAX_ROUNDS: usize = 100_000;
/// Episodes of each kind kept per direction (tcpdx choice; counts stay exact).
pub const MAX_EPISODES: usize = 10_000;
/// Recent retransmissions remembered for D-SACK matching (tcpdx choice: more than one
/// window of 4096 segments is rarely retransmitted at once).
pub const MAX_RECENT_RETX: usize = 4096;
/// Lone-segment ACK delays kept for the receiver's delayed-ACK profile (tcpdx choice).
pub const MAX_LONE_SAMPLES: usize = 4096;
/// An ACK covering a retransmission that arrives sooner than this share of the smallest
/// capture-to-receiver round trip after it cannot be answering it: the original had
/// arrived (tcpdx choice; the idea of Eifel detection, RFC 3522, applied from the outside).
pub const SPURIOUS_EARLY_ACK_SHARE: f64 = 0.8;
/// Example frames kept for counters shown as evidence (tcpdx choice).
pub const MAX_SAMPLE_FRAMES: usize = 20;
/// Unseen sequence ranges (holes in the capture) remembered per direction (tcpdx choice).
pub const MAX_UNSEEN: usize = 1024;

/// A receiver that holds the ACK of a lone segment this much longer than the round trip is
/// delaying it (lab truth.json: "ACK >= RTT + 20 ms"; Linux's shortest delayed-ACK timer is
/// 40 ms, `TCP_DELACK_MIN`; ESXi's NFS client 100 ms; Windows 200 ms).
pub const DELACK_MIN_HOLD_NS: i64 = 20_000_000;
/// Silence before a non-fast retransmission that makes it a retransmission timeout, in
/// path round trips (RFC 6298 RTO >= SRTT + 4 RTTVAR; a tail-loss probe fires after 2 SRTT,
/// RFC 8985 section 7.2, so 3 separates them).
pub const RTO_MIN_SILENCE_RTTS: i64 = 3;
/// Floor of that silence (tcpdx choice: below every stack's minimum RTO in practice, Linux
/// `TCP_RTO_MIN` 200 ms, Windows 300 ms; above tail-loss probes at LAN round trips).
pub const RTO_MIN_SILENCE_NS: i64 = 100_000_000;

/// One round trip of the sender: segments sent between two ACKs one RTT apart.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Round {
    /// Start (ns since epoch).
    pub start: i64,
    /// End: the ACK covering the round's first data.
    pub end: i64,
    /// Data segments sent in the round (retransmissions included).
    pub pkts: u32,
    /// Payload bytes sent.
    pub bytes: u64,
    /// Bytes newly acknowledged during the round (delivery).
    pub acked: u64,
    /// Retransmitted segments.
    pub retx: u32,
    /// The receiver's window was full at least once in the round.
    pub rwnd_limited: bool,
    /// A loss episode was open during the round.
    pub in_recovery: bool,
    /// The receiver's advertised window at the end of the round (bytes).
    pub rcv_window: u64,
    /// Largest number of bytes in flight (sent, not yet acknowledged, as the capture sees
    /// it) when a segment of the round was sent: the sender's effective window.
    pub max_in_flight: u64,
}

impl Round {
    /// Duration in ns.
    pub fn duration(&self) -> i64 {
        (self.end - self.start).max(0)
    }
    /// Delivery rate in bits/s (acknowledged bytes over the round's duration).
    pub fn delivery_bps(&self) -> f64 {
        let d = self.duration();
        if d <= 0 {
            0.0
        } else {
            self.acked as f64 * 8e9 / d as f64
        }
    }
}

/// How a loss was repaired.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecoveryKind {
    /// Fast retransmission after duplicate ACKs / SACK.
    Fast,
    /// Retransmission timeout.
    Timeout,
    /// Retransmissions without duplicate ACKs or a timeout (tail-loss probe, go-back-N).
    Other,
}

/// A loss-recovery episode: first retransmission to the ACK covering the recovery point.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LossEpisode {
    /// First retransmission.
    pub start: i64,
    /// Frame of the first sign of loss (duplicate ACK, SACK or retransmission).
    pub start_frame: u64,
    /// The ACK covering the recovery point (or the last frame seen).
    pub end: i64,
    /// Frame of that ACK (0 if the capture ended first).
    pub end_frame: u64,
    /// Highest sequence sent when the episode began.
    pub recovery_point: u64,
    /// Third duplicate ACK, if any.
    pub third_dupack_frame: Option<u64>,
    /// First retransmission.
    pub first_retx_frame: Option<u64>,
    /// First fast retransmission.
    pub fast_retx_frame: Option<u64>,
    /// Duplicate ACKs in the episode.
    pub dupacks: u32,
    /// Retransmitted segments.
    pub retx: u32,
    /// Retransmissions later shown spurious (D-SACK or Wireshark's flag).
    pub spurious: u32,
    /// Retransmissions of segments the capture never saw (lost before the capture point).
    pub retx_unseen: u32,
    /// A retransmission timeout happened in the episode.
    pub timeout: bool,
    /// Packets per round before the episode (0 unknown).
    pub window_before: u32,
    /// How it was repaired.
    pub kind: RecoveryKind,
    /// Index of the first round that started after the episode ended.
    pub next_round: usize,
}

impl LossEpisode {
    /// An episode opened at `ts` by frame `frame`, until `recovery_point` is acknowledged;
    /// the sender's last round had `window_before` segments.
    fn open(ts: i64, frame: u64, recovery_point: u64, window_before: u32) -> Self {
        LossEpisode {
            start: ts,
            start_frame: frame,
            end: ts,
            end_frame: 0,
            recovery_point,
            third_dupack_frame: None,
            first_retx_frame: None,
            fast_retx_frame: None,
            dupacks: 0,
            retx: 0,
            spurious: 0,
            retx_unseen: 0,
            timeout: false,
            window_before,
            kind: RecoveryKind::Other,
            next_round: 0,
        }
    }

    /// Duration in ns.
    pub fn duration(&self) -> i64 {
        (self.end - self.start).max(0)
    }
    /// Retransmissions that repaired real losses.
    pub fn real_losses(&self) -> u32 {
        self.retx.saturating_sub(self.spurious)
    }
}

/// A retransmission timeout: silence, then a retransmission.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RtoStall {
    /// Last sign of progress: the last ACK (or the send that started the flight).
    pub start: i64,
    /// Frame of the last ACK before the silence (0 if none).
    pub last_ack_frame: u64,
    /// The (last) timeout retransmission.
    pub end: i64,
    /// Frame of the first timeout retransmission.
    pub retx_frame: u64,
    /// Timeouts in a row for the same data (exponential backoff), 1 = no backoff.
    pub timeouts: u32,
    /// Sequence number retransmitted.
    pub seq: u64,
    /// Inferred from a capture that never saw the lost data (lost upstream of it): the
    /// "retransmission" looked like new data; the hole it left proved the timeout later.
    pub upstream_loss: bool,
}

/// A lone segment whose ACK the receiver held (delayed ACK) during or right after recovery.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DelackPause {
    /// The lone segment was sent.
    pub start: i64,
    /// Its ACK arrived.
    pub end: i64,
    /// Hold time: ACK delay minus the capture-to-receiver round trip.
    pub hold: i64,
    /// The lone segment.
    pub lone_frame: u64,
    /// The delayed ACK.
    pub ack_frame: u64,
    /// Third duplicate ACK of the loss episode, if it was a fast recovery.
    pub third_dupack_frame: Option<u64>,
    /// Fast retransmission of the loss episode, if any.
    pub fast_retx_frame: Option<u64>,
    /// Timeout retransmission of the loss episode, if any.
    pub rto_frame: Option<u64>,
}

/// A sub-MSS segment that Nagle's algorithm (RFC 896) held until the receiver's delayed ACK
/// of the data before it: the lone segment waits for the delayed-ACK timer, the pure ACK
/// releases the small tail at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NaglePause {
    /// The lone segment whose ACK was held was sent.
    pub start: i64,
    /// The held tail was sent.
    pub end: i64,
    /// Hold time of the ACK: its delay minus the capture-to-receiver round trip.
    pub hold: i64,
    /// The lone segment.
    pub lone_frame: u64,
    /// The delayed (pure) ACK.
    pub ack_frame: u64,
    /// The sub-MSS tail released by that ACK.
    pub tail_frame: u64,
}

/// Candidate Nagle stall: a lone segment's ACK came late, without data, and covered
/// everything sent; the next segment decides.
#[derive(Clone, Copy, Debug)]
struct NagleCandidate {
    lone_ts: i64,
    lone_frame: u64,
    ack_ts: i64,
    ack_frame: u64,
    hold: i64,
    end: u64,
}

/// Data after a long silence in which, as far as the capture can tell, nothing was in
/// flight: an idle sender, or a timeout after losses the capture never saw (upstream of a
/// capture next to the receiver). The next hole in the capture decides.
#[derive(Clone, Copy, Debug)]
struct SilentRestart {
    start: i64,
    last_ack_frame: u64,
    end: i64,
    frame: u64,
    seq: u64,
    segs_after: u64,
    lone_pause: Option<DelackPause>,
}

/// Segments a restarting sender may send before the hole it left must show (tcpdx choice:
/// slow start from one segment after a timeout sends 1, then 2 (or 3 with F-RTO's new data)
/// before the first duplicate ACK brings the lost data back).
pub const SILENT_RESTART_MAX_SEGMENTS: u64 = 4;

/// A segment sent this long after the ACK that released it, beyond the capture-to-sender
/// share of the round trip, is not the tail that ACK released (tcpdx choice: scheduling and
/// ACK processing take well under a millisecond).
pub const NAGLE_RELEASE_SLACK_NS: i64 = 1_000_000;

/// A period during which the receiver advertised a zero window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ZeroWindow {
    /// First zero-window advertisement.
    pub start: i64,
    /// Its frame.
    pub start_frame: u64,
    /// First non-zero window after it (or the last frame seen).
    pub end: i64,
    /// Frame of the window update (0 if the capture ended first).
    pub end_frame: u64,
    /// Zero-window probes the sender sent meanwhile.
    pub probes: u32,
}

/// A retransmission later shown unnecessary.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Spurious {
    /// The retransmission.
    pub retx_frame: u64,
    /// The proof: a D-SACK, or the retransmission itself when Wireshark flagged it.
    pub proof_frame: u64,
    /// When the retransmission was sent.
    pub ts: i64,
    /// What the proof frame shows.
    pub proof: &'static str,
}

/// Proof roles of [`Spurious`].
pub const PROOF_DSACK: &str = "D-SACK: the data had arrived";
/// The ACK came sooner than a round trip after the retransmission.
pub const PROOF_EARLY_ACK: &str = "ACK too early to answer the retransmission";
/// Wireshark's `spurious_retransmission`: the data was already acknowledged.
pub const PROOF_ACKED: &str = "retransmission of acknowledged data";

#[derive(Clone, Copy, Debug)]
struct Lone {
    frame: u64,
    ts: i64,
    end: u64,
    in_recovery: bool,
}

#[derive(Clone, Copy, Debug, Default)]
struct RoundAcc {
    active: bool,
    start: i64,
    end_seq: u64,
    ack_at_start: u64,
    pkts: u32,
    bytes: u64,
    retx: u32,
    rwnd_limited: bool,
    in_recovery: bool,
    max_in_flight: u64,
}

impl RoundAcc {
    /// Opens a new round at `start` that the ACK of `end_seq` closes.
    ///
    /// Field by field: assigning a whole struct built its value on the stack and copied
    /// it, with wide loads of the narrow stores just made, which the CPU cannot forward.
    #[inline]
    fn open(&mut self, start: i64, end_seq: u64, ack_at_start: u64) {
        self.active = true;
        self.start = start;
        self.end_seq = end_seq;
        self.ack_at_start = ack_at_start;
        self.pkts = 0;
        self.bytes = 0;
        self.retx = 0;
        self.rwnd_limited = false;
        self.in_recovery = false;
        self.max_in_flight = 0;
    }
}

/// The sender-side inference of one direction of one connection.
#[derive(Clone, Debug, Default)]
#[repr(C)]
pub struct SenderState {
    // Declared hot first (`repr(C)` keeps this order): the fields every segment reads or
    // writes share a few cache lines. In the compiler's order they were spread over the
    // struct's 25 lines among the lists, and with a few dozen connections interleaved
    // each segment missed the L1 cache on about ten of them (cachegrind).
    started: bool,
    /// MSS: the SYN option, raised by any larger segment seen.
    pub mss: u32,
    segs_since_ack: u32,
    /// Highest ACK received.
    pub snd_una: u64,
    /// Highest sequence end sent.
    pub snd_nxt: u64,
    /// Sequence number of the first data byte seen.
    pub first_seq: u64,
    /// First data segment.
    pub first_data: Option<i64>,
    /// Last data segment.
    pub last_data: i64,
    /// Data segments (payload > 0) sent.
    pub data_pkts: u64,
    /// Payload bytes sent.
    pub data_bytes: u64,
    last_send: i64,
    last_ack: i64,
    last_ack_frame: u64,
    flight_start: i64,
    /// One past the highest byte ever retransmitted: an ACK that moves `snd_una` while this
    /// lies above it acknowledges retransmitted data (or a hole's repair) and times nothing.
    retx_high: u64,
    /// Smallest ACK delay of this side's data (capture -> receiver -> capture), ns; from
    /// ACKs that acknowledge no retransmitted data (Karn's rule).
    pub downstream_rtt_min: Option<i64>,
    /// ACKs from the receiver that advanced `snd_una`.
    pub advancing_acks: u64,
    /// Segments acknowledged by those ACKs (for segments per ACK).
    pub acked_pkts: u64,
    /// Last window the receiver advertised (bytes).
    pub rcv_window: Option<u64>,
    /// Largest window the receiver advertised.
    pub max_rcv_window: u64,
    last_episode_end: Option<i64>,
    pending_dupacks: u32,
    lone: Option<Lone>,
    zw: Option<Box<ZeroWindow>>,
    nagle_candidate: Option<Box<NagleCandidate>>,
    silent_restart: Option<Box<SilentRestart>>,
    rto_open: Option<Box<RtoStall>>,
    round: RoundAcc,
    pending_retx: std::collections::VecDeque<Retx>,
    /// Round trips, in order (capped at [`MAX_ROUNDS`]).
    pub rounds: Rounds,
    episode: Option<Box<LossEpisode>>,
    // Rarely touched: counters of unusual events, lists of episodes, evidence.
    /// Retransmitted segments (Wireshark's retransmission flags).
    pub retx_pkts: u64,
    /// Out-of-order arrivals (Wireshark's flag on this side's data).
    pub out_of_order: u64,
    /// Segments after a hole in the capture (Wireshark `lost_segment`).
    pub lost_segment_flags: u64,
    /// ACKs of data the capture never saw (Wireshark `ack_lost_segment`).
    pub ack_unseen_flags: u64,
    /// Segments longer than the MSS (segmentation offload at the capture point).
    pub oversize: u64,
    /// First frame of a segment longer than the MSS.
    pub oversize_frame: Option<u64>,
    /// D-SACK blocks received.
    pub dsacks: u64,
    /// Duplicate-ACK runs that ended without a retransmission (reordering absorbed).
    pub dupack_runs_without_retx: u32,
    /// Loss-recovery episodes (capped).
    pub episodes: SpillList<LossEpisode>,
    /// Number of loss-recovery episodes (exact).
    pub episode_count: u32,
    /// Retransmission timeouts (capped).
    pub rtos: SpillList<RtoStall>,
    /// Delayed ACKs of lone segments during or right after recovery (capped).
    pub delack: SpillList<DelackPause>,
    /// ACK delays (ns) of every lone segment, for the receiver's profile (capped).
    pub lone_ack_delays: SpillList<i64>,
    /// Sub-MSS segments held by Nagle until a delayed ACK (capped).
    pub nagle: SpillList<NaglePause>,
    /// Zero-window periods (capped).
    pub zero_windows: SpillList<ZeroWindow>,
    /// Spurious retransmissions (capped).
    pub spurious: SpillList<Spurious>,
    /// Spurious retransmissions (exact).
    pub spurious_count: u32,
    /// Segments flagged `window_full` (the sender filled the receiver's window).
    pub window_full: u64,
    /// The first few of those frames (capped at [`MAX_SAMPLE_FRAMES`]).
    pub window_full_frames: Vec<u64>,
    recent_retx: RecentRetx,
    unseen: std::collections::VecDeque<(u64, u64)>,
}

/// `o.take()`, reading only `o`'s tag when it is `None`: `take` copies the whole option
/// whatever it holds, and these options of large records, taken on every segment and
/// nearly always `None`, were a tenth of the diagnoser's cache misses (cachegrind).
#[inline(always)]
fn take_some<T>(o: &mut Option<T>) -> Option<T> {
    if o.is_some() { o.take() } else { None }
}

fn push_capped<T>(v: &mut Vec<T>, x: T, cap: usize) {
    if v.len() < cap {
        v.push(x);
    }
}

const RETX_FLAGS: u16 = F::RETRANSMISSION | F::FAST_RETRANSMISSION | F::SPURIOUS_RETRANSMISSION;

impl SenderState {
    /// A sender whose rounds and episode lists spill into `spill` beyond its policy.
    pub fn spilling_to(spill: &Arc<Spill>) -> Self {
        Self {
            rounds: Rounds::spilling_to(spill.clone()),
            episodes: SpillList::spilling_to(spill.clone()),
            rtos: SpillList::spilling_to(spill.clone()),
            delack: SpillList::spilling_to(spill.clone()),
            lone_ack_delays: SpillList::spilling_to(spill.clone()),
            nagle: SpillList::spilling_to(spill.clone()),
            zero_windows: SpillList::spilling_to(spill.clone()),
            spurious: SpillList::spilling_to(spill.clone()),
            recent_retx: RecentRetx::spilling_to(spill.clone()),
            ..Self::default()
        }
    }

    /// Before a diagnosis: the rounds and lists read back from the spill as needed
    /// ([`Rounds::prepare`], [`SpillList::prepare`]).
    pub fn prepare(&mut self) {
        self.rounds.prepare();
        self.episodes.prepare();
        self.rtos.prepare();
        self.delack.prepare();
        self.lone_ack_delays.prepare();
        self.nagle.prepare();
        self.zero_windows.prepare();
        self.spurious.prepare();
    }

    /// After a diagnosis: frees what is left in the spill (the rounds', the recent
    /// retransmissions').
    pub fn release(&mut self) {
        self.rounds.release();
        self.recent_retx.release();
    }

    /// Records the MSS option of this side's SYN.
    pub fn on_syn(&mut self, d: &SegmentDetail) {
        if let Some(m) = d.mss {
            self.mss = self.mss.max(u32::from(m));
        }
    }

    /// Distinct payload bytes sent (highest sequence reached minus the first).
    pub fn unique_bytes(&self) -> u64 {
        self.snd_nxt.saturating_sub(self.first_seq)
    }

    /// True while nothing this side sent is unacknowledged.
    pub fn idle(&self) -> bool {
        self.snd_una >= self.snd_nxt
    }

    /// The data segment `a` (payload > 0) sent by this side. `path_rtt` is the best round-trip
    /// estimate so far (0 unknown).
    pub fn on_data(&mut self, a: &SegmentAnalysis, path_rtt: i64) {
        let ts = a.ts.0;
        let len = u64::from(a.len);
        let seq = a.seq;
        let end = seq + len;
        if !self.started {
            self.started = true;
            self.snd_una = seq;
            self.snd_nxt = seq;
            self.first_seq = seq;
        }
        self.first_data.get_or_insert(ts);
        self.data_pkts += 1;
        self.data_bytes += len;
        if self.mss > 0 && a.len > self.mss {
            self.oversize += 1;
            self.oversize_frame.get_or_insert(a.frame.0);
        }
        self.check_silent_restart(a, path_rtt);
        if a.flags.has(F::LOST_SEGMENT) && seq > self.snd_nxt {
            self.lost_segment_flags += 1;
            if self.unseen.len() == MAX_UNSEEN {
                self.unseen.pop_front();
            }
            self.unseen.push_back((self.snd_nxt, seq));
        }
        let first_sighting = seq < self.snd_nxt && self.fill_hole(seq, end);
        // Wireshark calls a resent segment "out of order" when it comes soon after the
        // previous one (within the handshake RTT); if the capture had already seen that data,
        // it is a retransmission all the same (a capture next to the receiver sees fast
        // retransmissions this way).
        let ooo_resend = a.flags.has(F::OUT_OF_ORDER) && !first_sighting && end <= self.snd_nxt;
        if a.flags.has(F::OUT_OF_ORDER) && !ooo_resend {
            self.out_of_order += 1;
        }
        if a.flags.has(F::ZERO_WINDOW_PROBE)
            && let Some(z) = &mut self.zw
        {
            z.probes += 1;
        }
        if self.idle() && end > self.snd_nxt {
            self.flight_start = ts;
        }
        let retx = a.flags.any(RETX_FLAGS) || ooo_resend;
        if let Some(c) = take_some(&mut self.nagle_candidate) {
            self.check_nagle_tail(*c, a, retx, path_rtt);
        }
        if retx && self.on_retransmission(a, path_rtt, first_sighting) {
            // After a timeout the sender treats everything in flight as lost: the
            // retransmission starts a new flight, lone from the receiver's point of view.
            self.segs_since_ack = 0;
        }
        // Round accounting: a round opens with the first segment sent while none is open.
        if !self.round.active {
            self.round.open(ts, end.max(self.snd_nxt), self.snd_una);
        }
        self.round.pkts += 1;
        self.round.bytes += len;
        if !retx {
            let bif = a.bytes_in_flight.map_or(0, u64::from);
            self.round.max_in_flight = self.round.max_in_flight.max(bif);
        }
        self.round.retx += u32::from(retx);
        self.round.in_recovery |= self.episode.is_some();
        if a.flags.has(F::WINDOW_FULL) {
            self.window_full += 1;
            push_capped(&mut self.window_full_frames, a.frame.0, MAX_SAMPLE_FRAMES);
        }
        let bif = a.bytes_in_flight.map_or(0, u64::from);
        if a.flags.has(F::WINDOW_FULL)
            || self
                .rcv_window
                .is_some_and(|w| w > 0 && bif + u64::from(self.mss.max(1)) > w)
        {
            self.round.rwnd_limited = true;
        }
        // Lone segment: the only one sent since the receiver's last ACK.
        self.segs_since_ack += 1;
        self.lone = (self.segs_since_ack == 1).then(|| Lone {
            frame: a.frame.0,
            ts,
            end,
            in_recovery: self.episode.is_some()
                || self
                    .last_episode_end
                    .is_some_and(|e| ts - e <= (2 * path_rtt).max(DELACK_MIN_HOLD_NS) && ts >= e),
        });
        self.snd_nxt = self.snd_nxt.max(end);
        self.last_send = ts;
        self.last_data = ts;
    }

    /// Records a retransmission; true if it followed a retransmission timeout.
    fn on_retransmission(&mut self, a: &SegmentAnalysis, path_rtt: i64, unseen: bool) -> bool {
        let ts = a.ts.0;
        let end = a.seq + u64::from(a.len);
        self.retx_pkts += 1;
        let silence = ts - self.last_send.max(self.last_ack);
        let threshold = (RTO_MIN_SILENCE_RTTS * path_rtt).max(RTO_MIN_SILENCE_NS);
        let timeout = !a.flags.has(F::FAST_RETRANSMISSION) && silence >= threshold;
        let (frame, recovery_point) = (a.frame.0, self.snd_nxt.max(end));
        let window_before = self.rounds.last_pkts();
        let ep = self.episode.get_or_insert_with(|| {
            Box::new(LossEpisode::open(ts, frame, recovery_point, window_before))
        });
        ep.retx += 1;
        if ep.retx == 1 {
            // The sender enters recovery when it first retransmits (the kernel's Recovery or
            // Loss state); duplicate ACKs before that are only a suspicion.
            ep.start = ts;
        }
        ep.first_retx_frame.get_or_insert(a.frame.0);
        if a.flags.has(F::FAST_RETRANSMISSION) {
            ep.fast_retx_frame.get_or_insert(a.frame.0);
        }
        if unseen {
            ep.retx_unseen += 1;
        }
        if timeout {
            ep.timeout = true;
            match &mut self.rto_open {
                Some(r) if r.seq == a.seq => {
                    r.timeouts += 1;
                    r.end = ts;
                }
                _ => {
                    self.rto_open = Some(Box::new(RtoStall {
                        start: self.last_ack.max(self.flight_start),
                        last_ack_frame: self.last_ack_frame,
                        end: ts,
                        retx_frame: a.frame.0,
                        timeouts: 1,
                        seq: a.seq,
                        upstream_loss: false,
                    }));
                }
            }
        }
        // Behind a reordering element the late original is flagged spurious too: count
        // each sequence number once.
        let already = self.recent_retx.any_proven(Match::Seq(a.seq));
        let spurious_flag = a.flags.has(F::SPURIOUS_RETRANSMISSION) && !already;
        if spurious_flag {
            self.recent_retx.prove(Match::Seq(a.seq), false);
        }
        if spurious_flag {
            ep.spurious += 1;
            self.spurious_count += 1;
            self.spurious.push_capped(
                Spurious {
                    retx_frame: a.frame.0,
                    proof_frame: a.frame.0,
                    ts,
                    proof: PROOF_ACKED,
                },
                MAX_EPISODES,
            );
        }
        if self.pending_retx.len() < MAX_RECENT_RETX && !timeout && !spurious_flag && !already {
            self.pending_retx.push_back(Retx {
                seq: a.seq,
                end,
                ts,
                frame: a.frame.0,
                spurious: false,
            });
        }
        self.retx_high = self.retx_high.max(end);
        self.recent_retx.push(
            Retx {
                seq: a.seq,
                end,
                ts,
                frame: a.frame.0,
                spurious: spurious_flag,
            },
            MAX_RECENT_RETX,
        );
        timeout
    }

    /// A segment of the peer (`a`, ACK flag set) acknowledging this side's data.
    pub fn on_ack(&mut self, a: &SegmentAnalysis, d: &SegmentDetail, path_rtt: i64) {
        let ts = a.ts.0;
        let ack = a.ack;
        if a.flags.has(F::ACK_LOST_SEGMENT) {
            self.ack_unseen_flags += 1;
        }
        self.rcv_window = Some(a.window);
        self.max_rcv_window = self.max_rcv_window.max(a.window);
        self.track_zero_window(a);
        if !self.started {
            return;
        }
        // Karn's rule: the ACK delay of data that was retransmitted, or that waited behind
        // a retransmitted hole, is not a round trip (Wireshark's ack_rtt still gives it: 21 ms
        // for the 10 ms path of tests/data/fast-retransmission.pcapng, which then made the
        // repair's own ACK look too early, a "spurious" retransmission).
        let karn = ack > self.snd_una && self.snd_una < self.retx_high;
        if let Some(rtt) = a.ack_rtt_ns.filter(|&r| r > 0 && !karn) {
            self.downstream_rtt_min = Some(self.downstream_rtt_min.map_or(rtt, |m| m.min(rtt)));
        }
        self.check_dsack(a, d);
        // The lone segment's ACK: how long did the receiver hold it?
        if let Some(l) = take_some(&mut self.lone)
            && self.segs_since_ack == 1
            && ack >= l.end
        {
            let delay = ts - l.ts;
            self.lone_ack_delays.push_capped(delay, MAX_LONE_SAMPLES);
            // The first ACK delay seen may be this very delayed ACK: the handshake's round
            // trip bounds the capture-to-receiver one too.
            let base = match (self.downstream_rtt_min, path_rtt > 0) {
                (Some(d), true) => d.min(path_rtt),
                (Some(d), false) => d,
                (None, true) => path_rtt,
                (None, false) => 0,
            };
            let hold = delay - base;
            if !l.in_recovery && hold >= DELACK_MIN_HOLD_NS && a.len == 0 && ack >= self.snd_nxt {
                // The receiver sent nothing but the late ACK: if a small segment follows at
                // once, Nagle was holding it (see `check_nagle_tail`).
                self.nagle_candidate = Some(Box::new(NagleCandidate {
                    lone_ts: l.ts,
                    lone_frame: l.frame,
                    ack_ts: ts,
                    ack_frame: a.frame.0,
                    hold,
                    end: ack,
                }));
            }
            if let Some(sr) = &mut self.silent_restart
                && sr.frame == l.frame
                && hold >= DELACK_MIN_HOLD_NS
            {
                // Kept until the capture shows the restart was a timeout's.
                sr.lone_pause = Some(DelackPause {
                    start: l.ts,
                    end: ts,
                    hold,
                    lone_frame: l.frame,
                    ack_frame: a.frame.0,
                    third_dupack_frame: None,
                    fast_retx_frame: None,
                    rto_frame: Some(l.frame),
                });
            }
            if l.in_recovery && hold >= DELACK_MIN_HOLD_NS {
                let ep = self.episode.as_deref().or(self.episodes.last());
                self.delack.push_capped(
                    DelackPause {
                        start: l.ts,
                        end: ts,
                        hold,
                        lone_frame: l.frame,
                        ack_frame: a.frame.0,
                        third_dupack_frame: ep.and_then(|e| e.third_dupack_frame),
                        fast_retx_frame: ep.and_then(|e| e.fast_retx_frame),
                        rto_frame: self
                            .rto_open
                            .as_deref()
                            .copied()
                            .or(self.rtos.last().copied())
                            .and_then(|r| {
                                (r.end <= l.ts && l.ts - r.end <= delay.max(1))
                                    .then_some(r.retx_frame)
                            }),
                    },
                    MAX_EPISODES,
                );
            }
        }
        self.segs_since_ack = 0;
        let advanced = ack > self.snd_una;
        if advanced {
            self.check_early_acks(a);
        }
        if advanced {
            self.advancing_acks += 1;
            if self.mss > 0 {
                self.acked_pkts += (ack - self.snd_una).div_ceil(u64::from(self.mss));
            }
            self.snd_una = ack;
            if let Some(r) = take_some(&mut self.rto_open) {
                self.rtos.push_capped(*r, MAX_EPISODES);
            }
        }
        let dupack = a.flags.has(F::DUPLICATE_ACK);
        let sack_above = d.sack_blocks().iter().any(|&(l, _)| l > ack);
        // Loss episode bookkeeping.
        if let Some(ep) = &mut self.episode {
            if dupack {
                ep.dupacks += 1;
                if a.dup_ack_num == Some(3) {
                    ep.third_dupack_frame.get_or_insert(a.frame.0);
                }
            }
            if ack >= ep.recovery_point {
                ep.end = ts;
                ep.end_frame = a.frame.0;
                let done = **ep;
                self.episode = None;
                self.close_episode(done, ts);
            }
        } else if (dupack || sack_above) && self.snd_nxt > ack {
            self.pending_dupacks += 1;
            self.episode = Some(Box::new(LossEpisode {
                third_dupack_frame: (a.dup_ack_num == Some(3)).then_some(a.frame.0),
                dupacks: u32::from(dupack),
                ..LossEpisode::open(ts, a.frame.0, self.snd_nxt, self.rounds.last_pkts())
            }));
        }
        // Round accounting: the ACK covering the round's first data closes it.
        let min_round = (path_rtt as f64 * ROUND_MIN_RTT_SHARE) as i64;
        if self.round.active && ack >= self.round.end_seq && ts - self.round.start >= min_round {
            let r = Round {
                start: self.round.start,
                end: ts,
                pkts: self.round.pkts,
                bytes: self.round.bytes,
                acked: ack.saturating_sub(self.round.ack_at_start),
                retx: self.round.retx,
                rwnd_limited: self.round.rwnd_limited,
                in_recovery: self.round.in_recovery || self.episode.is_some(),
                rcv_window: a.window,
                max_in_flight: self.round.max_in_flight,
            };
            // A round in which nothing was sent says nothing about the window.
            if r.pkts > 0 && self.rounds.len() < MAX_ROUNDS {
                self.rounds.push(&r);
            }
            if self.snd_nxt > ack {
                self.round.open(ts, self.snd_nxt, ack);
            } else {
                // The other fields are read only while a round is open.
                self.round.active = false;
            }
        }
        self.last_ack = ts;
        self.last_ack_frame = a.frame.0;
    }

    /// Tracks data after a silence with nothing in flight (as the capture sees it) until the
    /// capture shows whether data had been sent and lost before it: a hole right after the
    /// restart point, bigger than what was sent since, means the sender had sent that data
    /// before the silence and the silence was its retransmission timeout.
    fn check_silent_restart(&mut self, a: &SegmentAnalysis, path_rtt: i64) {
        let ts = a.ts.0;
        let mss = u64::from(self.mss.max(1));
        if let Some(mut sr) = take_some(&mut self.silent_restart) {
            let hole = a.flags.has(F::LOST_SEGMENT) && a.seq > self.snd_nxt;
            if hole {
                let near = self.snd_nxt <= sr.seq + SILENT_RESTART_MAX_SEGMENTS * mss;
                let missing = (a.seq - self.snd_nxt).div_ceil(mss);
                if near && missing > sr.segs_after + 1 {
                    self.rtos.push_capped(
                        RtoStall {
                            start: sr.start,
                            last_ack_frame: sr.last_ack_frame,
                            end: sr.end,
                            retx_frame: sr.frame,
                            timeouts: 1,
                            seq: sr.seq,
                            upstream_loss: true,
                        },
                        MAX_EPISODES,
                    );
                    if let Some(p) = sr.lone_pause {
                        self.delack.push_capped(p, MAX_EPISODES);
                    }
                }
                return;
            }
            sr.segs_after += 1;
            if sr.segs_after <= SILENT_RESTART_MAX_SEGMENTS {
                self.silent_restart = Some(sr);
            }
            return;
        }
        let silence = ts - self.last_send.max(self.last_ack);
        let threshold = (RTO_MIN_SILENCE_RTTS * path_rtt).max(RTO_MIN_SILENCE_NS);
        if self.last_send > 0 && self.idle() && a.seq == self.snd_nxt && silence >= threshold {
            self.silent_restart = Some(Box::new(SilentRestart {
                start: self.last_send.max(self.last_ack),
                last_ack_frame: self.last_ack_frame,
                end: ts,
                frame: a.frame.0,
                seq: a.seq,
                segs_after: 0,
                lone_pause: None,
            }));
        }
    }

    /// The first data segment after a late pure ACK of a lone segment: a new sub-MSS segment
    /// right at the acknowledged edge, sent as soon as the ACK could reach the sender, is a
    /// tail Nagle held (RFC 896; RFC 1122 section 4.2.3.4).
    fn check_nagle_tail(&mut self, c: NagleCandidate, a: &SegmentAnalysis, retx: bool, rtt: i64) {
        // From the capture to the sender and back: up to one round trip when the capture is
        // next to the receiver, about nothing next to the sender.
        let limit = rtt.max(0) + rtt.max(0) / 4 + NAGLE_RELEASE_SLACK_NS;
        let small = self.mss > 0 && a.len < self.mss;
        if retx || !small || a.seq != c.end || a.ts.0 - c.ack_ts > limit {
            return;
        }
        self.nagle.push_capped(
            NaglePause {
                start: c.lone_ts,
                end: a.ts.0,
                hold: c.hold,
                lone_frame: c.lone_frame,
                ack_frame: c.ack_frame,
                tail_frame: a.frame.0,
            },
            MAX_EPISODES,
        );
    }

    /// Removes `[seq, end)` from the capture's holes; true if it filled (part of) one, i.e.
    /// the capture sees this data for the first time.
    fn fill_hole(&mut self, seq: u64, end: u64) -> bool {
        let Some(i) = self.unseen.iter().position(|&(l, r)| seq < r && end > l) else {
            return false;
        };
        let (l, r) = self.unseen[i];
        match (seq <= l, end >= r) {
            (true, true) => {
                self.unseen.remove(i);
            }
            (true, false) => self.unseen[i].0 = end,
            (false, true) => self.unseen[i].1 = seq,
            (false, false) => {
                self.unseen[i].1 = seq;
                if self.unseen.len() < MAX_UNSEEN {
                    self.unseen.insert(i + 1, (end, r));
                }
            }
        }
        true
    }

    fn close_episode(&mut self, mut ep: LossEpisode, ts: i64) {
        if ep.retx == 0 {
            // Duplicate ACKs that resolved without a retransmission: reordering absorbed.
            self.dupack_runs_without_retx += 1;
            return;
        }
        ep.kind = if ep.timeout {
            RecoveryKind::Timeout
        } else if ep.fast_retx_frame.is_some() || ep.dupacks >= 3 {
            RecoveryKind::Fast
        } else {
            RecoveryKind::Other
        };
        ep.next_round = self.rounds.len() + 1;
        self.episode_count += 1;
        self.last_episode_end = Some(ts);
        self.episodes.push_capped(ep, MAX_EPISODES);
    }

    /// Retransmissions this cumulative ACK covers: spurious if it came too early to be
    /// answering them (only when the ACK is not also the first after a timeout).
    fn check_early_acks(&mut self, a: &SegmentAnalysis) {
        // Nearly always nothing was retransmitted: no walk to set up.
        if self.pending_retx.is_empty() {
            return;
        }
        let Some(down) = self.downstream_rtt_min else {
            self.pending_retx.retain(|x| x.end > a.ack);
            return;
        };
        let limit = (down as f64 * SPURIOUS_EARLY_ACK_SHARE) as i64;
        let ts = a.ts.0;
        let mut covered = Vec::new();
        self.pending_retx.retain(|x| {
            if x.end <= a.ack {
                covered.push(*x);
                false
            } else {
                true
            }
        });
        for x in covered {
            if ts - x.ts >= limit {
                continue;
            }
            if self
                .recent_retx
                .prove(Match::Frame(x.frame), false)
                .is_empty()
            {
                continue;
            }
            self.record_spurious(x.frame, x.ts, a.frame.0, PROOF_EARLY_ACK);
        }
    }

    /// Counts one retransmission proven spurious and charges it to its loss episode.
    fn record_spurious(&mut self, retx_frame: u64, ts: i64, proof_frame: u64, proof: &'static str) {
        self.spurious_count += 1;
        self.spurious.push_capped(
            Spurious {
                retx_frame,
                proof_frame,
                ts,
                proof,
            },
            MAX_EPISODES,
        );
        if let Some(ep) = &mut self.episode {
            ep.spurious += 1;
        } else if let Some(ep) = self.episodes.last_mut()
            && ts >= ep.start
        {
            ep.spurious += 1;
        }
    }

    fn check_dsack(&mut self, a: &SegmentAnalysis, d: &SegmentDetail) {
        let blocks = d.sack_blocks();
        let Some(&(l, r)) = blocks.first() else {
            return;
        };
        // RFC 2883 section 4: a first block below the cumulative ACK, or inside the second
        // block, reports a duplicate segment.
        let dsack = r <= a.ack || blocks.get(1).is_some_and(|&(l2, r2)| l >= l2 && r <= r2);
        if !dsack {
            return;
        }
        self.dsacks += 1;
        // A D-SACK block may cover several retransmitted segments: all were spurious.
        for x in self.recent_retx.prove(Match::Overlap(l, r), true) {
            self.record_spurious(x.frame, x.ts, a.frame.0, PROOF_DSACK);
        }
    }

    fn track_zero_window(&mut self, a: &SegmentAnalysis) {
        const SYN_RST: u16 = 0x02 | 0x04;
        if a.tcp_flags & SYN_RST != 0 {
            return;
        }
        if a.window == 0 {
            if self.zw.is_none() {
                self.zw = Some(Box::new(ZeroWindow {
                    start: a.ts.0,
                    start_frame: a.frame.0,
                    end: a.ts.0,
                    end_frame: 0,
                    probes: 0,
                }));
            }
        } else if let Some(mut z) = take_some(&mut self.zw) {
            z.end = a.ts.0;
            z.end_frame = a.frame.0;
            self.zero_windows.push_capped(*z, MAX_EPISODES);
        }
    }

    /// End of input at `last_ts`: closes open episodes at the last frame.
    pub fn finish(&mut self, last_ts: i64) {
        if let Some(mut ep) = self.episode.take() {
            ep.end = last_ts;
            self.close_episode(*ep, last_ts);
        }
        if let Some(r) = self.rto_open.take() {
            self.rtos.push_capped(*r, MAX_EPISODES);
        }
        if let Some(mut z) = self.zw.take() {
            z.end = last_ts;
            self.zero_windows.push_capped(*z, MAX_EPISODES);
        }
    }

    /// Highest delivery rate over rounds of at least [`RATE_MIN_PKTS`] segments, outside
    /// recovery and lasting at least [`RATE_MIN_RTT_SHARE`] of `rtt` (shorter rounds are
    /// ACK-compression artefacts, e.g. a cumulative ACK jumping over SACKed data), bits/s.
    pub fn max_delivery_bps(&self, rtt: i64) -> f64 {
        let min_dur = (rtt as f64 * RATE_MIN_RTT_SHARE) as i64;
        self.rounds
            .iter()
            .filter(|r| r.pkts >= RATE_MIN_PKTS && !r.in_recovery && r.duration() >= min_dur)
            .map(|r| r.delivery_bps())
            .fold(0.0, f64::max)
    }

    /// Median ACK delay of lone segments, ns.
    pub fn median_lone_ack_delay(&self) -> Option<i64> {
        let mut v: Vec<i64> = self.lone_ack_delays.iter().collect();
        if v.is_empty() {
            return None;
        }
        v.sort_unstable();
        Some(v[v.len() / 2])
    }

    /// Segments per advancing ACK (2 = the receiver ACKs every second segment, RFC 1122).
    pub fn segments_per_ack(&self) -> Option<f64> {
        (self.advancing_acks > 0).then(|| self.acked_pkts as f64 / self.advancing_acks as f64)
    }
}

/// A round trip lasts at least this share of the path RTT (tcpdx choice): next to the
/// receiver, data and its ACK are microseconds apart and only the RTT separates one flight of
/// the sender from the next.
pub const ROUND_MIN_RTT_SHARE: f64 = 0.5;
/// Rounds shorter than this share of the path RTT do not measure the path rate (tcpdx
/// choice: a round lasts one RTT by definition; much shorter ones are measurement artefacts).
pub const RATE_MIN_RTT_SHARE: f64 = 0.8;
/// Rounds shorter than this many segments do not measure the path rate (tcpdx choice: a
/// handful of segments is dominated by ACK timing, not by the bottleneck).
pub const RATE_MIN_PKTS: u32 = 4;
