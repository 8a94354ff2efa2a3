//! Retransmission timeouts: silence, then a retransmission.
//!
//! Two ways in. Seen: a retransmission that is not a fast one, after at least
//! [`rto_silence`] without a send or an ACK, opens a stall (`rto_open`); a retransmission of
//! the same sequence number again is a backoff (one more timeout); the next ACK that
//! advances, or the end of the capture, records it. Unseen (the capture is downstream of
//! the loss): data right at the edge after such a silence with nothing in flight is a
//! `SilentRestart` candidate; a hole in the capture within
//! [`SILENT_RESTART_MAX_SEGMENTS`] of it, larger than what was sent since, proves the
//! sender had sent and lost that data and restarted after a timeout; more segments without
//! a hole, and it was an idle sender.

use super::{DelackPause, MAX_EPISODES, SPURIOUS_EARLY_ACK_SHARE, SenderState, take_some};
use tcpdx_core::{AnalysisFlags as F, SegmentAnalysis};

/// Silence before a non-fast retransmission that makes it a retransmission timeout, in
/// path round trips (RFC 6298 RTO >= SRTT + 4 RTTVAR; a tail-loss probe fires after 2 SRTT,
/// RFC 8985 section 7.2, so 3 separates them).
pub const RTO_MIN_SILENCE_RTTS: i64 = 3;
/// Floor of that silence (tcpdx choice: below every stack's minimum RTO in practice, Linux
/// `TCP_RTO_MIN` 200 ms, Windows 300 ms; above tail-loss probes at LAN round trips).
pub const RTO_MIN_SILENCE_NS: i64 = 100_000_000;
/// A retransmission the sender sent less than 1/N of [`rto_silence`] after its previous
/// segment by its own clock is no timeout's, whatever the silence the capture saw (tcpdx
/// choice: the TSval ticks every 1-10 ms; a timer waits the whole RTO).
pub const RTO_SENDER_CLOCK_SHARE: i64 = 2;
/// The sender's clock rate is read over at least this long (tcpdx choice) ...
pub const RTO_CLOCK_MIN_NS: i64 = 100_000_000;
/// ... and this many ticks (tcpdx choice: a 1 ms clock, read to 10%).
pub const RTO_CLOCK_MIN_TICKS: i64 = 10;
/// Segments a restarting sender may send before the hole it left must show (tcpdx choice:
/// slow start from one segment after a timeout sends 1, then 2 (or 3 with F-RTO's new data)
/// before the first duplicate ACK brings the lost data back).
pub const SILENT_RESTART_MAX_SEGMENTS: u64 = 4;

/// The silence before a retransmission (or a restart) that makes it a timeout's, for a path
/// round trip of `path_rtt` ns (0 unknown).
#[inline]
pub fn rto_silence(path_rtt: i64) -> i64 {
    (RTO_MIN_SILENCE_RTTS * path_rtt).max(RTO_MIN_SILENCE_NS)
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

/// Data after a long silence in which, as far as the capture can tell, nothing was in
/// flight: an idle sender, or a timeout after losses the capture never saw (upstream of a
/// capture next to the receiver). The next hole in the capture decides.
#[derive(Clone, Copy, Debug)]
pub(super) struct SilentRestart {
    pub(super) start: i64,
    pub(super) last_ack_frame: u64,
    pub(super) end: i64,
    pub(super) frame: u64,
    pub(super) seq: u64,
    pub(super) segs_after: u64,
    pub(super) lone_pause: Option<DelackPause>,
}

impl SenderState {
    /// Whether the retransmission `a` follows a timeout: not a fast retransmission nor a
    /// probe of the tail, after [`rto_silence`] without a send or an ACK.
    #[inline]
    pub(super) fn is_timeout(&self, a: &SegmentAnalysis, path_rtt: i64) -> bool {
        let silence = a.ts.0 - self.last_send.max(self.last_ack);
        let min = rto_silence(path_rtt);
        // A timeout resends the oldest unacknowledged segment (RFC 6298 section 5.4); a
        // tail-loss probe the newest (RFC 8985 section 7.3), to get SACKs for a fast repair.
        let tail_probe = a.seq > self.snd_una && a.seq + u64::from(a.len) >= self.snd_nxt;
        !a.flags.has(F::FAST_RETRANSMISSION)
            && !tail_probe
            && silence >= min
            && self
                .sender_wait_ns()
                .is_none_or(|w| w * RTO_SENDER_CLOCK_SHARE >= min)
    }

    /// How long the sender waited between its last data segment and this one by its own
    /// clock (the TSval, RFC 7323, at the rate it ran against the capture's): a segment held
    /// in the network arrives after a long silence that the sender never waited (None
    /// without timestamps or enough of a clock to read).
    fn sender_wait_ns(&self) -> Option<i64> {
        self.sender_clock_ns(self.last_send_tsval?, self.data_tsval?, 0)
    }

    /// The time (ns) between the TSvals `from` and `to` of this side's segments, plus
    /// `extra` ticks, by the sender's clock at the rate it ran against the capture's up to
    /// its last segment (None without enough of a clock to read).
    pub(super) fn sender_clock_ns(&self, from: u32, to: u32, extra: i64) -> Option<i64> {
        let (t0, v0) = self.tsval_origin?;
        let prev = self.last_send_tsval?;
        let elapsed = self.last_send - t0;
        let ticks = i64::from(prev.wrapping_sub(v0));
        if elapsed < RTO_CLOCK_MIN_NS || ticks < RTO_CLOCK_MIN_TICKS {
            return None;
        }
        let wait = i64::from(to.wrapping_sub(from) as i32).max(0) + extra;
        Some((i128::from(wait) * i128::from(elapsed) / i128::from(ticks)) as i64)
    }

    /// The timeout retransmission `a`: a backoff of the open stall if it resends the same
    /// data, else a new stall since the last sign of progress.
    pub(super) fn open_rto(&mut self, a: &SegmentAnalysis) {
        let ts = a.ts.0;
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

    /// An ACK advanced, at `ts`: the open stall (if any) is over. An ACK sooner than a
    /// round trip after the timeout retransmission cannot answer it: the peer's answer to
    /// the original ended the silence (a late reply, not a loss), and the timer cost
    /// nothing.
    #[inline]
    pub(super) fn close_rto(&mut self, ts: i64) {
        if let Some(r) = take_some(&mut self.rto_open) {
            let early = (self.downstream_rtt_min)
                .is_some_and(|d| ts - r.end < (d as f64 * SPURIOUS_EARLY_ACK_SHARE) as i64);
            if !early {
                self.rtos.push_capped(*r, MAX_EPISODES);
            }
        }
    }

    /// Tracks data after a silence with nothing in flight (as the capture sees it) until the
    /// capture shows whether data had been sent and lost before it: a hole right after the
    /// restart point, bigger than what was sent since, means the sender had sent that data
    /// before the silence and the silence was its retransmission timeout.
    pub(super) fn check_silent_restart(&mut self, a: &SegmentAnalysis, path_rtt: i64) {
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
        if self.last_send > 0
            && self.idle()
            && a.seq == self.snd_nxt
            && silence >= rto_silence(path_rtt)
        {
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::infer::sender::RecoveryKind;
    use crate::infer::sender::script::{Feed, MS, MSS, T0};
    use tcpdx_core::AnalysisFlags as F;

    #[test]
    fn the_silence_is_three_round_trips_and_at_least_100_ms() {
        // Three round trips cross the floor between 33,333,333 and 33,333,334 ns.
        let cross = RTO_MIN_SILENCE_NS / RTO_MIN_SILENCE_RTTS;
        for (rtt, silence) in [
            (0, RTO_MIN_SILENCE_NS),
            (cross, RTO_MIN_SILENCE_NS),
            (cross + 1, 3 * (cross + 1)),
            (50 * MS, 150 * MS),
        ] {
            assert_eq!(rto_silence(rtt), silence, "RTT {rtt}");
        }
        assert_eq!(3 * (cross + 1), 100_000_002);
    }

    /// A flight of 4, the first segment's ACK one RTT later, then a retransmission of the
    /// second after `silence` with these flags.
    fn retransmit_after(rtt: i64, silence: i64, flags: u16) -> (Feed, u64) {
        let mut f = Feed::new(rtt);
        let end = f.burst(T0, 1, 4);
        let last_ack = f.ack(T0 + rtt, 1001);
        let retx = f.data(T0 + rtt + silence, 1001, MSS, flags);
        f.ack(T0 + rtt + silence + rtt, end);
        if let Some(r) = f.s.rtos.last() {
            assert_eq!(r.last_ack_frame, last_ack);
        }
        (f, retx)
    }

    #[test]
    fn a_retransmission_after_the_silence_is_a_timeout() {
        for rtt in [10 * MS, 50 * MS] {
            let at = rto_silence(rtt);
            for (silence, timeout) in [(at - 1, false), (at, true), (at + 1, true)] {
                let (f, retx) = retransmit_after(rtt, silence, F::RETRANSMISSION);
                let ep = f.s.episodes.get(0).unwrap();
                let why = format!("RTT {rtt}, silence {silence}");
                assert_eq!(f.s.rtos.len(), usize::from(timeout), "{why}");
                let kind = if timeout {
                    RecoveryKind::Timeout
                } else {
                    RecoveryKind::Other
                };
                assert_eq!((ep.kind, ep.timeout), (kind, timeout), "{why}");
                if timeout {
                    let r = f.s.rtos.get(0).unwrap();
                    assert_eq!((r.start, r.end), (T0 + rtt, T0 + rtt + silence));
                    assert_eq!((r.retx_frame, r.seq, r.timeouts), (retx, 1001, 1));
                    assert!(!r.upstream_loss);
                }
            }
        }
    }

    /// A sender with a 1 ms TSval clock: 200 segments 1 ms apart, then 300 ms of silence
    /// and a retransmission whose TSval is `wait_ms` after the last segment's.
    fn held_retransmission(wait_ms: u32) -> Feed {
        let mut f = Feed::new(10 * MS);
        for i in 0..200u32 {
            f.s.data_tsval = Some(5_000 + i);
            f.data(T0 + i64::from(i) * MS, 1 + u64::from(i) * 1000, MSS, 0);
        }
        f.ack(T0 + 200 * MS, 199_001);
        f.s.data_tsval = Some(5_199 + wait_ms);
        f.data(T0 + 500 * MS, 199_001, MSS, F::RETRANSMISSION);
        f.ack(T0 + 510 * MS, 200_001);
        f
    }

    /// The silence is long enough, but by its own clock the sender retransmitted sooner than
    /// half of it: the retransmission was held on the way, no timer fired.
    #[test]
    fn a_retransmission_the_sender_sent_soon_is_no_timeout_after_any_silence() {
        let min = rto_silence(10 * MS);
        let at = (min / RTO_SENDER_CLOCK_SHARE / MS) as u32;
        assert_eq!(at, 50);
        for (wait, timeout) in [(at - 1, 0), (at, 1), (at + 1, 1)] {
            let f = held_retransmission(wait);
            assert_eq!(f.s.rtos.len(), timeout, "sender waited {wait} ms");
        }
    }

    /// The ACK ending the silence sooner than most of the capture-to-receiver round trip
    /// after the timeout retransmission answers the original: a late reply ended the
    /// silence, not the timer (lab seed 2054: an SMB request probed after 256 ms, the reply
    /// 12.6 ms later on a 24 ms path).
    #[test]
    fn an_ack_too_early_to_answer_the_timeout_retransmission_ends_no_timeout_stall() {
        let limit = ((10 * MS) as f64 * SPURIOUS_EARLY_ACK_SHARE) as i64;
        for (after, rtos) in [(limit - 1, 0), (limit, 1), (limit + 1, 1)] {
            let mut f = Feed::new(10 * MS);
            f.s.downstream_rtt_min = Some(10 * MS);
            f.burst(T0, 1, 2);
            let t = T0 + 300 * MS;
            f.data(t, 1, MSS, F::RETRANSMISSION);
            f.ack(t + after, 2001);
            assert_eq!(f.s.rtos.len(), rtos, "ACK {after} ns after");
        }
    }

    /// After the silence the sender resends the last of 4 segments in flight, the first
    /// unacknowledged one or the last with the first acknowledged: the probe of the tail
    /// (lab seed 2010: 108 ms after a full window, the kernel counted no timeout) is no
    /// timeout; the oldest unacknowledged segment is.
    #[test]
    fn a_probe_of_the_tail_is_no_timeout() {
        for (acked, resent, timeouts) in [(1, 3001, 0), (1, 1, 1), (3001, 3001, 1)] {
            let mut f = Feed::new(10 * MS);
            f.burst(T0, 1, 4);
            if acked > 1 {
                f.ack(T0 + 10 * MS, acked);
            }
            f.data(T0 + 300 * MS, resent, MSS, F::RETRANSMISSION);
            f.ack(T0 + 310 * MS, 4001);
            let why = format!("ACK {acked}, resent {resent}");
            assert_eq!(f.s.rtos.len(), timeouts, "{why}");
        }
    }

    #[test]
    fn a_fast_retransmission_is_never_a_timeout() {
        let (f, _) = retransmit_after(10 * MS, 10 * RTO_MIN_SILENCE_NS, F::FAST_RETRANSMISSION);
        assert!(f.s.rtos.is_empty());
        assert_eq!(f.s.episodes.get(0).unwrap().kind, RecoveryKind::Fast);
    }

    #[test]
    fn the_same_data_timed_out_again_is_a_backoff() {
        let mut f = Feed::new(10 * MS);
        f.burst(T0, 1, 2);
        let first = f.data(T0 + 200 * MS, 1, MSS, F::RETRANSMISSION);
        f.data(T0 + 600 * MS, 1, MSS, F::RETRANSMISSION);
        f.ack(T0 + 610 * MS, 2001);
        assert_eq!(f.s.rtos.len(), 1);
        let r = f.s.rtos.get(0).unwrap();
        assert_eq!((r.timeouts, r.retx_frame, r.end), (2, first, T0 + 600 * MS));
    }

    /// A sender idle after its first segment's ACK, restarting after `silence` with a
    /// segment and `after` more, then a segment that leaves `missing` segments unseen.
    fn restart(silence: i64, after: u64, missing: u64) -> Feed {
        restart_by(silence, after, MSS, missing)
    }

    /// [`restart`] with the `after` segments `len` bytes long.
    fn restart_by(silence: i64, after: u64, len: u32, missing: u64) -> Feed {
        let mss = u64::from(MSS);
        let mut f = Feed::new(10 * MS);
        f.data(T0, 1, MSS, 0);
        f.ack(T0 + 10 * MS, 1001);
        let t = T0 + 10 * MS + silence;
        let mut seq = 1001;
        f.data(t, seq, MSS, 0);
        seq += mss;
        for i in 1..=after {
            f.data(t + i as i64 * MS, seq, len, 0);
            seq += u64::from(len);
        }
        f.data(t + 10 * MS, seq + missing * mss, MSS, F::LOST_SEGMENT);
        f
    }

    fn upstream_timeouts(f: &Feed) -> usize {
        f.s.rtos.iter().filter(|r| r.upstream_loss).count()
    }

    #[test]
    fn a_restart_after_the_silence_waits_for_a_hole() {
        let at = rto_silence(10 * MS);
        for (silence, timeouts) in [(at - 1, 0), (at, 1), (at + 1, 1)] {
            let f = restart(silence, 0, 10);
            assert_eq!(upstream_timeouts(&f), timeouts, "silence {silence}");
        }
        let f = restart(at, 0, 10);
        let r = f.s.rtos.get(0).unwrap();
        assert_eq!(
            (r.start, r.end, r.retx_frame, r.seq),
            (T0 + 10 * MS, T0 + 10 * MS + at, 3, 1001)
        );
    }

    #[test]
    fn the_hole_must_show_within_four_segments_of_the_restart() {
        // The restart and `after` more: the hole follows the 4th segment at the latest.
        let last = SILENT_RESTART_MAX_SEGMENTS - 1;
        for (after, timeouts) in [(last - 1, 1), (last, 1), (last + 1, 0)] {
            let f = restart(rto_silence(10 * MS), after, 10);
            assert_eq!(
                upstream_timeouts(&f),
                timeouts,
                "{after} segments after the restart"
            );
        }
    }

    #[test]
    fn the_restart_waits_four_small_segments_for_the_hole() {
        // Small segments stay near the restart point: the count of segments decides.
        let max = SILENT_RESTART_MAX_SEGMENTS;
        for (after, timeouts) in [(max - 1, 1), (max, 1), (max + 1, 0)] {
            let f = restart_by(rto_silence(10 * MS), after, 100, 10);
            assert_eq!(
                upstream_timeouts(&f),
                timeouts,
                "{after} small segments after"
            );
        }
    }

    #[test]
    fn the_hole_must_be_larger_than_what_was_sent_since() {
        // One segment after the restart: more than 2 segments missing.
        for (missing, timeouts) in [(1, 0), (2, 0), (3, 1)] {
            let f = restart(rto_silence(10 * MS), 1, missing);
            assert_eq!(
                upstream_timeouts(&f),
                timeouts,
                "{missing} segments missing"
            );
        }
    }
}
