//! `SenderState`: what one side's data and the peer's ACKs say about the sender.
//!
//! Fed in capture order with the data segments of one direction ([`SenderState::on_data`])
//! and the segments of the other direction that acknowledge them ([`SenderState::on_ack`]),
//! it infers round trips (packets and bytes per round, the sender's effective window), loss
//! recovery episodes (first duplicate ACK or retransmission to the ACK covering the recovery
//! point), retransmission timeouts, lone segments whose ACK the receiver delayed, zero-window
//! periods, spurious retransmissions (D-SACK, Wireshark's flag) and the receiver's ACK
//! behaviour. Memory is bounded: every list is capped (the counts stay exact).
//!
//! One state type (its fields laid out for the per-segment path), one module per episode
//! kind, each with that kind's records, thresholds and transitions: [`round`], [`recovery`],
//! [`timeout`], [`delay`] (the receiver's delayed ACKs, Nagle), [`spurious`],
//! [`zero_window`]. `on_data` and `on_ack` here call them in a fixed order.

use std::sync::Arc;

use super::Rounds;
use super::retx::{RecentRetx, Retx};
use crate::spill::{Spill, SpillList};
use tcpdx_core::{AnalysisFlags as F, SegmentAnalysis, SegmentDetail};

pub mod delay;
pub mod recovery;
pub mod round;
pub mod spurious;
pub mod timeout;
pub mod train;
pub mod zero_window;

#[cfg(test)]
mod script;

pub use delay::{
    DELACK_MIN_HOLD_NS, DelackPause, LONE_AFTER_RECOVERY_RTTS, MAX_LONE_SAMPLES,
    NAGLE_RELEASE_MAX_RTTS, NAGLE_RELEASE_RTT_DIVISOR, NAGLE_RELEASE_SLACK_NS, NaglePause,
};
pub use recovery::{DUPACK_THRESHOLD, LossEpisode, RecoveryKind};
pub use round::{
    MAX_ECHOES, MAX_ROUNDS, RATE_MIN_PKTS, RATE_MIN_RTT_SHARE, ROUND_MIN_RTT_SHARE, Round,
};
use spurious::TsRetx;
pub use spurious::{
    MAX_RECENT_RETX, PROOF_ACKED, PROOF_DSACK, PROOF_EARLY_ACK, PROOF_EARLY_SACK, PROOF_ECHO,
    PROOF_LATE_ORIGINAL, SPURIOUS_EARLY_ACK_SHARE, Spurious,
};
pub use timeout::{
    RTO_MIN_SILENCE_NS, RTO_MIN_SILENCE_RTTS, RtoStall, SILENT_RESTART_MAX_SEGMENTS, rto_silence,
};
pub use zero_window::ZeroWindow;

use delay::{HeldAck, Lone, NagleCandidate};
use round::RoundAcc;
use timeout::SilentRestart;

/// Episodes of each kind kept per direction (tcpdx choice; counts stay exact).
pub const MAX_EPISODES: usize = 10_000;
/// Example frames kept for counters shown as evidence (tcpdx choice).
pub const MAX_SAMPLE_FRAMES: usize = 20;
/// Unseen sequence ranges (holes in the capture) remembered per direction (tcpdx choice).
pub const MAX_UNSEEN: usize = 1024;

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
    /// Largest payload sent: with TCP options on every segment a full one is shorter than
    /// the MSS option.
    pub largest: u32,
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
    /// The peer's `downstream_rtt_min` (capture -> this side -> capture), as of this side's
    /// last data segment.
    pub upstream_rtt_min: Option<i64>,
    /// The handshake placed the capture next to the receiver of this side's data.
    pub capture_near_receiver: bool,
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
    /// A held ACK of a lone segment in recovery, until the sender's next segment shows
    /// whether it waited for it.
    delack_pending: Option<Box<HeldAck>>,
    silent_restart: Option<Box<SilentRestart>>,
    rto_open: Option<Box<RtoStall>>,
    round: RoundAcc,
    pending_retx: std::collections::VecDeque<Retx>,
    /// Retransmissions with their TSval, until the first ACK that covers them (Eifel).
    pending_tsval: std::collections::VecDeque<TsRetx>,
    /// TSval of the data segment being recorded (set by the connection before `on_data`).
    pub data_tsval: Option<u32>,
    /// TSecr of the data segment being recorded (set by the connection before `on_data`).
    pub data_tsecr: Option<u32>,
    /// The capture is away from this side (next to its receiver or in the middle: set by
    /// the connection once the handshake says so): its flight is read from the ACKs its
    /// data echoes ([`round::Echoes`]), the capture's own being only what lies between the
    /// capture and the receiver.
    pub far: bool,
    /// Highest ACK this side has sent (set by the connection): a peer segment beyond it
    /// does not move the TSval this side echoes (RFC 7323's `Last.ACK.sent` rule).
    pub ack_sent: u64,
    /// Data segments whose flight was read from the ACK their TSecr echoes
    /// ([`round::Echoes`]).
    pub echo_flights: u64,
    /// TSval of the last data segment sent.
    last_send_tsval: Option<u32>,
    /// The latest TSval on this side's data.
    latest_tsval: Option<u32>,
    /// The first data segment with a TSval: when it was captured and its TSval (the
    /// sender's clock rate, against the capture's).
    tsval_origin: Option<(i64, u32)>,
    /// The peer's ACKs by TSval, for the flight their echoes show.
    echoes: round::Echoes,
    /// Round trips, in order (capped at [`MAX_ROUNDS`]).
    pub rounds: Rounds,
    /// ACK trains: the path's capacity as the ACK spacing shows it.
    pub trains: train::AckTrains,
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
    /// The capture's holes in this side's data, each with the TSval of the segment that
    /// showed it.
    unseen: std::collections::VecDeque<(u64, u64, Option<u32>)>,
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
        self.largest = self.largest.max(a.len);
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
            self.unseen.push_back((self.snd_nxt, seq, self.data_tsval));
        }
        let filled = if seq < self.snd_nxt {
            self.fill_hole(seq, end)
        } else {
            None
        };
        let first_sighting = filled.is_some();
        // Wireshark calls a resent segment "out of order" when it comes soon after the
        // previous one (within the handshake RTT); if the capture had already seen that data,
        // it is a retransmission all the same (a capture next to the receiver sees fast
        // retransmissions this way).
        let ooo_resend = a.flags.has(F::OUT_OF_ORDER) && !first_sighting && end <= self.snd_nxt;
        // Data filling a hole is an original that came late, or (stamped after everything
        // sent since) the retransmission of one lost before the capture.
        let ooo_resend = ooo_resend
            || (a.flags.has(F::OUT_OF_ORDER)
                && first_sighting
                && (self.stamped_after_latest() || self.stamped_after(filled.flatten())));
        // A "retransmission" stamped before the latest segment sent was sent before it: an
        // original that came late (a retransmission carries the clock of its sending).
        let late_original = (a.flags.any(RETX_FLAGS) || ooo_resend) && self.stamped_before_latest();
        if (a.flags.has(F::OUT_OF_ORDER) && !ooo_resend) || late_original {
            self.out_of_order += 1;
        }
        if late_original {
            self.prove_by_late_original(a);
        }
        self.count_window_probe(a);
        if self.idle() && end > self.snd_nxt {
            self.flight_start = ts;
        }
        let retx = (a.flags.any(RETX_FLAGS) || ooo_resend) && !late_original;
        self.check_nagle_tail(a, retx, path_rtt);
        if retx && self.on_retransmission(a, path_rtt, first_sighting) {
            // After a timeout the sender treats everything in flight as lost: the
            // retransmission starts a new flight, lone from the receiver's point of view,
            // and a new round.
            self.segs_since_ack = 0;
            self.round_timeout(a, end);
        }
        self.count_in_round(a, end, retx);
        self.note_lone(a, end, path_rtt);
        self.snd_nxt = self.snd_nxt.max(end);
        self.last_send = ts;
        self.last_send_tsval = self.data_tsval;
        if !self.stamped_before_latest() {
            self.latest_tsval = self.data_tsval.or(self.latest_tsval);
        }
        if self.tsval_origin.is_none() {
            self.tsval_origin = self.data_tsval.map(|v| (ts, v));
        }
        self.last_data = ts;
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
        self.note_echo(a, d);
        // Karn's rule: the ACK delay of data that was retransmitted, or that waited behind
        // a retransmitted hole, is not a round trip (Wireshark's ack_rtt still gives it: 21 ms
        // for the 10 ms path of tests/data/fast-retransmission.pcapng, which then made the
        // repair's own ACK look too early, a "spurious" retransmission).
        let karn = ack > self.snd_una && self.snd_una < self.retx_high;
        if let Some(rtt) = a.ack_rtt_ns.filter(|&r| r > 0 && !karn) {
            self.downstream_rtt_min = Some(self.downstream_rtt_min.map_or(rtt, |m| m.min(rtt)));
        }
        self.check_dsack(a, d);
        self.check_early_sacks(a, d);
        if a.len > 0 && self.nagle_candidate.is_some() {
            // The receiver had something to say after all: it was not waiting for a tail.
            self.nagle_candidate = None;
        }
        self.check_lone_ack(a, path_rtt);
        self.segs_since_ack = 0;
        if ack > self.snd_una {
            self.check_early_acks(a);
            self.check_echoed_timestamps(a, d);
            self.advancing_acks += 1;
            self.trains
                .on_ack(ts, ack - self.snd_una, karn, path_rtt, self.mss);
            if self.mss > 0 {
                self.acked_pkts += (ack - self.snd_una).div_ceil(u64::from(self.mss));
            }
            self.snd_una = ack;
            self.close_rto(ts);
        }
        self.track_episode(a, d);
        self.close_round(a, path_rtt);
        self.last_ack = ts;
        self.last_ack_frame = a.frame.0;
    }

    /// Removes `[seq, end)` from the capture's holes; if it filled (part of) one, i.e. the
    /// capture sees this data for the first time, the TSval of the segment that showed the
    /// hole.
    fn fill_hole(&mut self, seq: u64, end: u64) -> Option<Option<u32>> {
        let i = self
            .unseen
            .iter()
            .position(|&(l, r, _)| seq < r && end > l)?;
        let (l, r, shown) = self.unseen[i];
        match (seq <= l, end >= r) {
            (true, true) => {
                self.unseen.remove(i);
            }
            (true, false) => self.unseen[i].0 = end,
            (false, true) => self.unseen[i].1 = seq,
            (false, false) => {
                self.unseen[i].1 = seq;
                if self.unseen.len() < MAX_UNSEEN {
                    self.unseen.insert(i + 1, (end, r, shown));
                }
            }
        }
        Some(shown)
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
        self.finish_delack();
        self.finish_zero_window(last_ts);
        self.trains.finish(self.mss);
    }
}
