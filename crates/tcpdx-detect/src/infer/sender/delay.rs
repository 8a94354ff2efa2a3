//! Receiver delays: how long the receiver held the ACK of a lone segment.
//!
//! A lone segment is the only one sent since the receiver's last ACK; a receiver that ACKs
//! every second segment (RFC 1122 section 4.2.3.2) holds its ACK until the delayed-ACK
//! timer fires. States: `lone` holds the last lone segment until an ACK covers it; its hold
//! (ACK delay minus the capture-to-receiver round trip) at least [`DELACK_MIN_HOLD_NS`] is a
//! delayed ACK. During or right after loss recovery that is a [`DelackPause`]; otherwise a
//! late pure ACK covering everything sent makes a Nagle candidate (`nagle_candidate`), and
//! the next data segment decides: a sub-MSS segment at the acknowledged edge sent as soon as
//! the ACK could reach the sender is a [`NaglePause`]. A lone segment that restarted a
//! silent sender keeps its pause with the restart until a hole proves a timeout.

use super::{MAX_EPISODES, SenderState, take_some};
use tcpdx_core::SegmentAnalysis;

/// A receiver that holds the ACK of a lone segment this much longer than the round trip is
/// delaying it (lab truth.json: "ACK >= RTT + 20 ms"; Linux's shortest delayed-ACK timer is
/// 40 ms, `TCP_DELACK_MIN`; ESXi's NFS client 100 ms; Windows 200 ms).
pub const DELACK_MIN_HOLD_NS: i64 = 20_000_000;
/// Lone-segment ACK delays kept for the receiver's delayed-ACK profile (tcpdx choice).
pub const MAX_LONE_SAMPLES: usize = 4096;
/// A lone segment sent within this many path round trips (and at least
/// [`DELACK_MIN_HOLD_NS`]) after a loss episode ended belongs to its recovery (tcpdx choice:
/// the recovery's last ACK and the sender's answer to it take one round trip each).
pub const LONE_AFTER_RECOVERY_RTTS: i64 = 2;
/// A segment sent this long after the ACK that released it, beyond the capture-to-sender
/// share of the round trip, is not the tail that ACK released (tcpdx choice: scheduling and
/// ACK processing take well under a millisecond).
pub const NAGLE_RELEASE_SLACK_NS: i64 = 1_000_000;
/// The capture-to-sender-and-back time allowed for the Nagle tail is at least this
/// fraction (1/N) of that round trip less than the smallest measured (tcpdx choice: clocks
/// and scheduling).
pub const NAGLE_RELEASE_RTT_DIVISOR: i64 = 4;
/// ... and at most this many times it (the path's round trip when the capture shows nothing
/// of it; tcpdx choice: the estimate is the smallest seen; on a loaded host or path a turn's
/// round trip was 1-3 times it, lab seed 30).
pub const NAGLE_RELEASE_MAX_RTTS: i64 = 3;

/// TCP options take at most 40 bytes of a segment: a sender whose largest segment comes
/// within that of the MSS option sends full segments of that size (tcpdx choice).
pub const OPTIONS_MAX: u32 = 40;

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
pub(super) struct NagleCandidate {
    lone_ts: i64,
    lone_frame: u64,
    ack_ts: i64,
    ack_frame: u64,
    hold: i64,
    end: u64,
}

/// The only segment sent since the receiver's last ACK.
#[derive(Clone, Copy, Debug)]
pub(super) struct Lone {
    frame: u64,
    ts: i64,
    end: u64,
    in_recovery: bool,
    tsval: Option<u32>,
}

/// A held ACK of a lone segment in recovery, until the sender's next segment shows whether
/// the sender waited for it.
#[derive(Clone, Copy, Debug)]
pub(super) struct HeldAck {
    pause: DelackPause,
    /// The lone segment's TSval (the sender's clock).
    lone_tsval: Option<u32>,
}

impl SenderState {
    /// The data segment `a` ending at `end`, counted since the receiver's last ACK: the
    /// first one is lone until more follow.
    #[inline]
    pub(super) fn note_lone(&mut self, a: &SegmentAnalysis, end: u64, path_rtt: i64) {
        let ts = a.ts.0;
        self.check_delack_release(a, path_rtt);
        self.segs_since_ack += 1;
        let after = (LONE_AFTER_RECOVERY_RTTS * path_rtt).max(DELACK_MIN_HOLD_NS);
        self.lone = (self.segs_since_ack == 1).then(|| Lone {
            frame: a.frame.0,
            ts,
            end,
            in_recovery: self.episode.is_some()
                || self
                    .last_episode_end
                    .is_some_and(|e| ts - e <= after && ts >= e),
            tsval: self.data_tsval,
        });
    }

    /// The ACK `a` of the lone segment (if it covers it, and nothing else was sent): records
    /// its delay and, if the receiver held it, the pause it made.
    pub(super) fn check_lone_ack(&mut self, a: &SegmentAnalysis, path_rtt: i64) {
        let ts = a.ts.0;
        let ack = a.ack;
        let Some(l) = take_some(&mut self.lone) else {
            return;
        };
        if self.segs_since_ack != 1 || ack < l.end {
            return;
        }
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
            let rto_frame = (self.rto_open.as_deref().copied())
                .or(self.rtos.last().copied())
                .and_then(|r| {
                    (r.end <= l.ts && l.ts - r.end <= delay.max(1)).then_some(r.retx_frame)
                });
            // During fast recovery an ACK beyond the lone segment answers one that filled a
            // hole below data the receiver holds: it ACKs that at once (RFC 5681 section
            // 4.2), so a late one was held on the way, not by its timer. (After a timeout
            // the restart segment is the stall itself, whatever the receiver held.)
            let filled_hole = ack > l.end && rto_frame.is_none();
            if !filled_hole {
                // A stall only if the sender waited for it: its next segment decides.
                self.delack_pending = Some(Box::new(HeldAck {
                    pause: DelackPause {
                        start: l.ts,
                        end: ts,
                        hold,
                        lone_frame: l.frame,
                        ack_frame: a.frame.0,
                        third_dupack_frame: ep.and_then(|e| e.third_dupack_frame),
                        fast_retx_frame: ep.and_then(|e| e.fast_retx_frame),
                        rto_frame,
                    },
                    lone_tsval: l.tsval,
                }));
            }
        }
    }

    /// The data segment `a` after a held ACK of a lone segment in recovery: the hold was a
    /// stall of the sender only if this segment answers that ACK at once (a sender held by
    /// its window after recovery sends as soon as the ACK reaches it; one limited by the
    /// receiver's window or its application sends later, whatever the ACK).
    #[inline]
    pub(super) fn check_delack_release(&mut self, a: &SegmentAnalysis, rtt: i64) {
        // Nearly always nothing pending: kept inline, the rest out of line.
        if let Some(h) = take_some(&mut self.delack_pending) {
            self.decide_delack_release(*h, a, rtt);
        }
    }

    /// End of the capture: a held ACK the sender sent no more data after (its FIN, or
    /// nothing) delayed the end of the transfer; it counts.
    pub(super) fn finish_delack(&mut self) {
        if let Some(h) = take_some(&mut self.delack_pending) {
            self.delack.push_capped(h.pause, MAX_EPISODES);
        }
    }

    #[inline(never)]
    fn decide_delack_release(&mut self, h: HeldAck, a: &SegmentAnalysis, rtt: i64) {
        let p = h.pause;
        // The same bound as a Nagle tail's release: the ACK's way from the capture to the
        // sender and the answer's back.
        let up = self.capture_to_sender_rtt_known(rtt.max(0));
        let limit = NAGLE_RELEASE_MAX_RTTS * up.unwrap_or(rtt.max(0)) + NAGLE_RELEASE_SLACK_NS;
        // By its own clock (a tick more, to be safe) the sender sent this segment sooner
        // after the lone one than the ACK took to come back even to the capture: it did not
        // wait for that ACK (the segment was held on the way).
        let sent_before_ack = h
            .lone_tsval
            .zip(self.data_tsval)
            .and_then(|(from, to)| self.sender_clock_ns(from, to, 1))
            .is_some_and(|w| w < p.end - p.start);
        if a.ts.0 - p.end <= limit && !sent_before_ack {
            self.delack.push_capped(p, MAX_EPISODES);
        }
    }

    /// The first data segment after a late pure ACK of a lone segment: a new sub-MSS segment
    /// right at the acknowledged edge, sent as soon as the ACK could reach the sender, is a
    /// tail Nagle held (RFC 896; RFC 1122 section 4.2.3.4).
    #[inline]
    pub(super) fn check_nagle_tail(&mut self, a: &SegmentAnalysis, retx: bool, rtt: i64) {
        // Nearly always no candidate: kept inline, the rest out of line.
        if let Some(c) = take_some(&mut self.nagle_candidate) {
            self.decide_nagle_tail(*c, a, retx, rtt);
        }
    }

    #[inline(never)]
    fn decide_nagle_tail(&mut self, c: NagleCandidate, a: &SegmentAnalysis, retx: bool, rtt: i64) {
        // From the capture to the sender and back: up to one round trip when the capture is
        // next to the receiver, about nothing next to the sender.
        let rtt = rtt.max(0);
        // Of the capture-to-sender round trip where the capture shows it (nothing next to
        // the sender), else of the path's.
        let up = self.capture_to_sender_rtt_known(rtt);
        let limit = NAGLE_RELEASE_MAX_RTTS * up.unwrap_or(rtt) + NAGLE_RELEASE_SLACK_NS;
        // And at least the capture-to-sender round trip: a segment the capture sees sooner
        // left the sender before the ACK reached it (an answer to something else, not a tail
        // the ACK released). That round trip is the peer's smallest ACK delay, or what the
        // path's leaves beyond this side's (the handshake's may be long: the first packet).
        let upstream = up.unwrap_or(0);
        let earliest = upstream - upstream / NAGLE_RELEASE_RTT_DIVISOR - NAGLE_RELEASE_SLACK_NS;
        let small = a.len < self.full_segment();
        let gap = a.ts.0 - c.ack_ts;
        if retx || !small || a.seq != c.end || gap > limit || gap < earliest {
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

    /// The smallest time from the capture to this side and back, as far as the capture
    /// shows it (0 unknown): the peer's smallest ACK delay, or what the path round trip
    /// `rtt` leaves beyond this side's (the handshake's may be long: its first packets).
    pub(super) fn capture_to_sender_rtt(&self, rtt: i64) -> i64 {
        self.capture_to_sender_rtt_known(rtt).unwrap_or(0)
    }

    /// [`Self::capture_to_sender_rtt`], None when the capture shows nothing of it.
    pub(super) fn capture_to_sender_rtt_known(&self, rtt: i64) -> Option<i64> {
        let rest = self
            .downstream_rtt_min
            .map(|d| rtt - d.clamp(0, rtt.max(0)));
        match (rest, self.upstream_rtt_min) {
            (Some(r), Some(u)) => Some(r.min(u).max(0)),
            (r, u) => r.or(u).map(|x| x.max(0)),
        }
    }

    /// The size of a full segment: the largest sent when it is within the options' room of
    /// the MSS option (timestamps make 1,448 of 1,460), else the MSS option (0 unknown).
    pub(super) fn full_segment(&self) -> u32 {
        if self.largest > 0 && self.largest + OPTIONS_MAX >= self.mss {
            self.largest
        } else {
            self.mss
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::infer::sender::script::{Feed, MS, MSS, T0};
    use crate::infer::sender::timeout::rto_silence as rto_silence_of;
    use tcpdx_core::AnalysisFlags as F;

    /// A fast recovery on the path's 10 ms round trip, then a lone new segment whose ACK is
    /// held `hold` beyond the round trip, and the sender's next segment `answer` after that
    /// ACK (None: nothing more). Returns the feed, the fast retransmission's and the lone
    /// segment's frames.
    fn held_after_fast_recovery(hold: i64, answer: Option<i64>) -> (Feed, u64, u64) {
        let mut f = Feed::new(10 * MS);
        let end = f.burst(T0, 1, 3);
        f.dupack(T0 + 10 * MS, 1, 1, &[(1001, end)]);
        let t = T0 + 10 * MS + 100_000;
        let retx = f.data(t, 1, MSS, F::FAST_RETRANSMISSION);
        f.ack(t + 10 * MS, end);
        let lone = f.data(t + 10 * MS + 100_000, end, MSS, 0);
        let ack_ts = t + 20 * MS + 100_000 + hold;
        f.ack(ack_ts, end + u64::from(MSS));
        if let Some(gap) = answer {
            f.data(ack_ts + gap, end + u64::from(MSS), MSS, 0);
        }
        (f, retx, lone)
    }

    #[test]
    fn a_lone_segment_in_recovery_held_20_ms_is_a_delayed_ack() {
        let at = DELACK_MIN_HOLD_NS;
        for (hold, pauses) in [(at - 1, 0), (at, 1), (at + 1, 1)] {
            let (f, retx, lone) = held_after_fast_recovery(hold, Some(0));
            assert_eq!(f.s.delack.len(), pauses, "hold {hold}");
            if let Some(p) = f.s.delack.last() {
                assert_eq!(
                    (p.lone_frame, p.hold, p.fast_retx_frame),
                    (lone, hold, Some(retx))
                );
                assert_eq!((p.third_dupack_frame, p.rto_frame), (None, None));
            }
        }
    }

    /// Without a view of the capture's place (no ACK delay measured), the sender's answer
    /// may take three path round trips and the slack.
    #[test]
    fn the_sender_answers_the_held_ack_within_three_round_trips() {
        let at = NAGLE_RELEASE_MAX_RTTS * 10 * MS + NAGLE_RELEASE_SLACK_NS;
        for (gap, pauses) in [(at - 1, 1), (at, 1), (at + 1, 0)] {
            let (f, _, _) = held_after_fast_recovery(25 * MS, Some(gap));
            assert_eq!(
                f.s.delack.len(),
                pauses,
                "next segment {gap} ns after the ACK"
            );
        }
    }

    /// Next to the sender (its ACKs a whole round trip away) a sender waiting for the ACK
    /// answers it at once: a sender held by the receiver's window or its application (lab
    /// seeds 1113, 2092, 3060) sends later, and its hold was no stall of the sender.
    #[test]
    fn next_to_the_sender_the_held_ack_is_answered_at_once() {
        let at = NAGLE_RELEASE_SLACK_NS;
        for (gap, pauses) in [(at - 1, 1), (at, 1), (at + 1, 0)] {
            let mut f = Feed::new(10 * MS);
            f.s.downstream_rtt_min = Some(10 * MS);
            let end = f.burst(T0, 1, 2);
            f.data(T0 + 11 * MS, 1, MSS, F::RETRANSMISSION);
            f.ack(T0 + 21 * MS, end);
            f.data(T0 + 21 * MS, end, MSS, 0);
            let ack_ts = T0 + 31 * MS + 25 * MS;
            f.ack(ack_ts, end + u64::from(MSS));
            f.data(ack_ts + gap, end + u64::from(MSS), MSS, 0);
            assert_eq!(
                f.s.delack.len(),
                pauses,
                "next segment {gap} ns after the ACK"
            );
        }
    }

    /// A sender with a 1 ms TSval clock (150 segments 1 ms apart, next to the capture), a
    /// fast recovery, then a lone segment whose ACK comes back 35 ms later and the next
    /// segment at once, stamped `ticks` after the lone one.
    fn answered_by_the_clock(ticks: u32) -> Feed {
        let mut f = Feed::new(10 * MS);
        f.s.downstream_rtt_min = Some(10 * MS);
        for i in 0..150u32 {
            f.s.data_tsval = Some(1000 + i);
            f.data(T0 + i64::from(i) * MS, 1 + u64::from(i) * 1000, MSS, 0);
        }
        let t = T0 + 150 * MS;
        f.ack(t, 148_001);
        f.dupack(t + 100_000, 148_001, 1, &[(149_001, 150_001)]);
        f.s.data_tsval = Some(1150);
        f.data(t + 200_000, 148_001, MSS, F::FAST_RETRANSMISSION);
        f.ack(t + 10 * MS, 150_001);
        f.s.data_tsval = Some(1160);
        let lone_ts = t + 10 * MS + 100_000;
        f.data(lone_ts, 150_001, MSS, 0);
        f.ack(lone_ts + 35 * MS, 151_001);
        f.s.data_tsval = Some(1160 + ticks);
        f.data(lone_ts + 35 * MS, 151_001, MSS, 0);
        f
    }

    /// By its clock, the sender sent its next segment (a tick more, to be safe) sooner after
    /// the lone one than the ACK took to come back to the capture: that segment was held on
    /// the way and the sender never waited for the ACK (lab seed 3060: 24 ticks, the ACK 28.7
    /// ms). With the clock at 160.1 ms per 160 ticks, 34 ticks and one more exceed 35 ms.
    #[test]
    fn a_segment_the_sender_sent_before_the_ack_came_back_answers_nothing() {
        for (ticks, pauses) in [(33, 0), (34, 1), (35, 1)] {
            let f = answered_by_the_clock(ticks);
            assert_eq!(
                f.s.delack.len(),
                pauses,
                "{ticks} ticks after the lone segment"
            );
        }
    }

    /// The transfer's last segment: the sender sends nothing after its held ACK (a FIN at
    /// most), and the hold delayed the end of the transfer.
    #[test]
    fn a_held_ack_of_the_last_segment_counts_at_the_end() {
        let (mut f, _, _) = held_after_fast_recovery(25 * MS, None);
        assert!(f.s.delack.is_empty(), "undecided until the end");
        f.s.finish(T0 + 200 * MS);
        assert_eq!(f.s.delack.len(), 1);
    }

    /// During fast recovery, the lone fast retransmission fills a hole below data the
    /// receiver holds (the ACK goes beyond it): the receiver ACKs that at once, so a late
    /// ACK was held on the way (lab seed 25: the receiver's capture shows the ACK 20 us after
    /// the segment). After a timeout the restart segment's held ACK is the stall.
    #[test]
    fn a_late_ack_of_a_repair_below_received_data_is_no_delayed_ack_in_fast_recovery() {
        for (silence, pauses) in [(0, 0), (rto_silence_of(10 * MS), 1)] {
            let mut f = Feed::new(10 * MS);
            let end = f.burst(T0, 1, 3);
            f.dupack(T0 + 10 * MS, 1, 1, &[(1001, end)]);
            let t = T0 + 10 * MS + 100_000 + silence;
            let flags = if silence > 0 {
                F::RETRANSMISSION
            } else {
                F::FAST_RETRANSMISSION
            };
            f.data(t, 1, MSS, flags);
            let ack_ts = t + 10 * MS + 25 * MS;
            f.ack(ack_ts, end);
            f.data(ack_ts, end, MSS, 0);
            assert_eq!(f.s.delack.len(), pauses, "silence {silence}");
            assert_eq!(f.s.rtos.len(), pauses, "silence {silence}");
        }
    }

    #[test]
    fn the_smallest_ack_delay_measured_is_the_round_trip_when_shorter() {
        // Measured 4 ms to the receiver and back, under the 10 ms path estimate: the hold
        // is counted from 4 ms.
        let mut f = Feed::new(10 * MS);
        f.data(T0, 1, MSS, 0);
        let mut a = crate::infer::sender::script::ack_row(T0 + 4 * MS, 1001);
        a.ack_rtt_ns = Some(4 * MS);
        f.receive(a, &[]);
        assert_eq!(f.s.downstream_rtt_min, Some(4 * MS));
        f.data(T0 + 5 * MS, 1001, MSS, 0);
        f.ack(T0 + 5 * MS + 4 * MS + DELACK_MIN_HOLD_NS, 2001);
        // The tail, 6 ms later: the ACK's way to the sender and the tail's back.
        f.data(T0 + 35 * MS, 2001, 10, 0);
        assert_eq!(f.s.nagle.last().map(|p| p.hold), Some(DELACK_MIN_HOLD_NS));
    }

    /// A loss episode on a path of `rtt` ending at `end`, then a lone segment `after` it
    /// whose ACK is held 25 ms. Returns the feed.
    fn lone_after_recovery(rtt: i64, after: i64) -> Feed {
        let mut f = Feed::new(rtt);
        f.burst(T0, 1, 2);
        f.data(T0 + rtt + MS, 1, MSS, F::RETRANSMISSION);
        let end = T0 + 2 * rtt + MS;
        f.ack(end, 2001);
        assert_eq!(f.s.last_episode_end, Some(end));
        f.data(end + after, 2001, MSS, 0);
        let ack_ts = end + after + rtt + 25 * MS;
        f.ack(ack_ts, 3001);
        f.data(ack_ts, 3001, MSS, 0);
        f
    }

    #[test]
    fn a_lone_segment_two_round_trips_after_recovery_still_belongs_to_it() {
        // Two round trips of 30 ms; at least 20 ms on a 5 ms path.
        for (rtt, at) in [(30 * MS, 60 * MS), (5 * MS, DELACK_MIN_HOLD_NS)] {
            assert_eq!(at, (LONE_AFTER_RECOVERY_RTTS * rtt).max(DELACK_MIN_HOLD_NS));
            for (after, pauses) in [(at - 1, 1), (at, 1), (at + 1, 0)] {
                let f = lone_after_recovery(rtt, after);
                assert_eq!(f.s.delack.len(), pauses, "RTT {rtt}, {after} ns after");
            }
        }
    }

    /// A lone full segment whose pure ACK comes `hold` beyond the 10 ms round trip, then
    /// `len` bytes at the acknowledged edge `gap` after that ACK. Returns the feed and the
    /// last frame.
    fn nagle(hold: i64, gap: i64, len: u32) -> (Feed, u64) {
        let mut f = Feed::new(10 * MS);
        f.data(T0, 1, MSS, 0);
        let ack_ts = T0 + 10 * MS + hold;
        f.ack(ack_ts, 1001);
        let tail = f.data(ack_ts + gap, 1001, len, 0);
        (f, tail)
    }

    #[test]
    fn a_late_pure_ack_releases_a_nagle_tail() {
        let at = DELACK_MIN_HOLD_NS;
        for (hold, pauses) in [(at - 1, 0), (at, 1), (at + 1, 1)] {
            let (f, tail) = nagle(hold, 0, 100);
            assert_eq!(f.s.nagle.len(), pauses, "hold {hold}");
            if let Some(p) = f.s.nagle.last() {
                assert_eq!((p.lone_frame, p.ack_frame, p.tail_frame), (1, 2, tail));
                assert_eq!((p.start, p.hold), (T0, hold));
            }
        }
    }

    #[test]
    fn the_nagle_tail_follows_its_ack_within_three_round_trips() {
        let rtt = 10 * MS;
        let at = NAGLE_RELEASE_MAX_RTTS * rtt + NAGLE_RELEASE_SLACK_NS;
        assert_eq!(at, 31_000_000);
        for (gap, pauses) in [(at - 1, 1), (at, 1), (at + 1, 0)] {
            let (f, _) = nagle(25 * MS, gap, 100);
            assert_eq!(f.s.nagle.len(), pauses, "tail {gap} ns after the ACK");
        }
    }

    /// The capture 4 ms (there and back) from the receiver on a 10 ms path is 6 ms from the
    /// sender: the tail the ACK released comes at least 6 ms less a quarter and 1 ms after
    /// it; a segment seen sooner left the sender before the ACK reached it.
    #[test]
    fn the_nagle_tail_comes_no_sooner_than_the_ack_can_reach_the_sender() {
        let up = 6 * MS;
        let at = up - up / NAGLE_RELEASE_RTT_DIVISOR - NAGLE_RELEASE_SLACK_NS;
        assert_eq!(at, 3_500_000);
        for (gap, pauses) in [(at - 1, 0), (at, 1), (at + 1, 1)] {
            let mut f = Feed::new(10 * MS);
            f.data(T0, 1, 100, 0);
            let mut a = crate::infer::sender::script::ack_row(T0 + 4 * MS, 101);
            a.ack_rtt_ns = Some(4 * MS);
            f.receive(a, &[]);
            f.data(T0 + 5 * MS, 101, 100, 0);
            let ack_ts = T0 + 5 * MS + 4 * MS + 25 * MS;
            f.ack(ack_ts, 201);
            f.data(ack_ts + gap, 201, 100, 0);
            assert_eq!(f.s.nagle.len(), pauses, "tail {gap} ns after the ACK");
        }
    }

    /// Next to the sender (the receiver's ACKs a whole round trip away), the tail goes out
    /// as soon as the ACK is captured: within three times nothing and the slack.
    #[test]
    fn next_to_the_sender_the_nagle_tail_follows_its_ack_at_once() {
        let at = NAGLE_RELEASE_SLACK_NS;
        for (gap, pauses) in [(at - 1, 1), (at, 1), (at + 1, 0)] {
            let mut f = Feed::new(10 * MS);
            f.s.downstream_rtt_min = Some(10 * MS);
            f.data(T0, 1, 100, 0);
            let ack_ts = T0 + 10 * MS + 25 * MS;
            f.ack(ack_ts, 101);
            f.data(ack_ts + gap, 101, 100, 0);
            assert_eq!(f.s.nagle.len(), pauses, "tail {gap} ns after the ACK");
        }
    }

    /// A handshake round trip longer than the path's (its first packets were slow) leaves
    /// more than the capture-to-sender time: the peer's ACK delay bounds it.
    #[test]
    fn the_capture_to_sender_time_is_at_most_the_peers_ack_delay() {
        let up = 6 * MS;
        let at = up - up / NAGLE_RELEASE_RTT_DIVISOR - NAGLE_RELEASE_SLACK_NS;
        for (gap, pauses) in [(at - 1, 0), (at, 1), (at + 1, 1)] {
            let mut f = Feed::new(30 * MS);
            f.s.upstream_rtt_min = Some(up);
            f.data(T0, 1, 100, 0);
            let ack_ts = T0 + 30 * MS + 25 * MS;
            f.ack(ack_ts, 101);
            f.data(ack_ts + gap, 101, 100, 0);
            assert_eq!(f.s.nagle.len(), pauses, "tail {gap} ns after the ACK");
        }
    }

    /// A receiver that sends data of its own after the late ACK was not waiting for the
    /// rest of a message: the next small segment is no tail Nagle held.
    #[test]
    fn no_nagle_tail_after_the_receiver_sent_data() {
        for (peer_len, pauses) in [(0, 1), (1, 0)] {
            let mut f = Feed::new(10 * MS);
            f.data(T0, 1, 100, 0);
            let ack_ts = T0 + 10 * MS + 25 * MS;
            f.ack(ack_ts, 101);
            let mut a = crate::infer::sender::script::ack_row(ack_ts + 10_000, 101);
            a.len = peer_len;
            f.receive(a, &[]);
            f.data(ack_ts + 20_000, 101, 100, 0);
            assert_eq!(f.s.nagle.len(), pauses, "peer sent {peer_len} bytes");
        }
    }

    #[test]
    fn the_nagle_tail_is_smaller_than_the_mss() {
        for (len, pauses) in [(MSS - 1, 1), (MSS, 0), (MSS + 1, 0)] {
            let (f, _) = nagle(25 * MS, 0, len);
            assert_eq!(f.s.nagle.len(), pauses, "tail of {len} bytes");
        }
    }

    /// With TCP timestamps a full segment is 12 bytes short of the MSS option: the next full
    /// segment after a late ACK is no Nagle tail; a shorter one still is, and a sender that
    /// never came near the MSS is measured against the option.
    #[test]
    fn the_nagle_tail_is_shorter_than_a_full_segment_of_the_sender() {
        let full = MSS - 12;
        for (lone, tail, pauses) in [
            (full, full, 0),
            (full, full - 1, 1),
            (MSS - OPTIONS_MAX, MSS - OPTIONS_MAX, 0),
            (MSS - OPTIONS_MAX - 1, MSS - OPTIONS_MAX - 1, 1),
            (100, 150, 1),
        ] {
            let mut f = Feed::new(10 * MS);
            f.data(T0, 1, lone, 0);
            let ack_ts = T0 + 10 * MS + 25 * MS;
            f.ack(ack_ts, 1 + u64::from(lone));
            f.data(ack_ts, 1 + u64::from(lone), tail, 0);
            assert_eq!(f.s.nagle.len(), pauses, "lone {lone}, tail {tail}");
        }
    }

    #[test]
    fn the_receivers_ack_ratio_counts_segments_per_advancing_ack() {
        let mut f = Feed::new(10 * MS);
        assert_eq!(f.s.segments_per_ack(), None);
        let end = f.burst(T0, 1, 4);
        f.ack(T0 + 10 * MS, 2001);
        f.ack(T0 + 10 * MS, 2001);
        f.ack(T0 + 11 * MS, end);
        assert_eq!(f.s.segments_per_ack(), Some(2.0));
    }
}
