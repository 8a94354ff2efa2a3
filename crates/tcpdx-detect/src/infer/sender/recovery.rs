//! Loss recovery: from the first sign of loss to the ACK covering the recovery point.
//!
//! States: no episode (`episode` is `None`), suspected (duplicate ACKs or SACK above the
//! cumulative ACK while data is in flight opened one, no retransmission yet) and recovering
//! (at least one retransmission; the start moves to the first). An ACK at or above the
//! recovery point (the highest sequence sent when the episode opened) ends it, as does the
//! end of the capture. A suspected episode that ends without a retransmission was
//! reordering; a recovering one is recorded with how it was repaired ([`RecoveryKind`]).

use super::{MAX_EPISODES, SenderState};
use tcpdx_core::{AnalysisFlags as F, SegmentAnalysis, SegmentDetail};

/// Duplicate ACKs that make a fast retransmission (RFC 5681 section 3.2: the third
/// duplicate ACK; Wireshark's `duplicate_ack_num` counts them).
pub const DUPACK_THRESHOLD: u32 = 3;

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

impl SenderState {
    /// Records a retransmission (`unseen`: the capture sees its data for the first time);
    /// true if it followed a retransmission timeout.
    pub(super) fn on_retransmission(
        &mut self,
        a: &SegmentAnalysis,
        path_rtt: i64,
        unseen: bool,
    ) -> bool {
        let ts = a.ts.0;
        let end = a.seq + u64::from(a.len);
        self.retx_pkts += 1;
        let timeout = self.is_timeout(a, path_rtt);
        let (frame, recovery_point) = (a.frame.0, self.snd_nxt.max(end));
        let window_before = self.rounds.last_pkts();
        let before = self.capture_to_sender_rtt(path_rtt);
        let ep = self.episode.get_or_insert_with(|| {
            Box::new(LossEpisode::open(ts, frame, recovery_point, window_before))
        });
        ep.retx += 1;
        if ep.retx == 1 {
            // The sender enters recovery when it first retransmits (the kernel's Recovery or
            // Loss state); duplicate ACKs before that are only a suspicion. A capture away
            // from the sender sees that retransmission up to a round trip after the sender
            // decided on it: the ACK that made it left the capture that much earlier.
            ep.start = (ts - before).max(ep.start);
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
            self.open_rto(a);
        }
        self.remember_retx(a, timeout);
        timeout
    }

    /// The peer's segment `a` acknowledging `ack`: counts duplicate ACKs in the open
    /// episode and ends it at the recovery point, or opens one on a first sign of loss.
    #[inline]
    pub(super) fn track_episode(&mut self, a: &SegmentAnalysis, d: &SegmentDetail) {
        let (ts, ack) = (a.ts.0, a.ack);
        let dupack = a.flags.has(F::DUPLICATE_ACK);
        let sack_above = d.sack_blocks().iter().any(|&(l, _)| l > ack);
        let third = a.dup_ack_num == Some(DUPACK_THRESHOLD);
        if let Some(ep) = &mut self.episode {
            if dupack {
                ep.dupacks += 1;
                if third {
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
                third_dupack_frame: third.then_some(a.frame.0),
                dupacks: u32::from(dupack),
                ..LossEpisode::open(ts, a.frame.0, self.snd_nxt, self.rounds.last_pkts())
            }));
        }
    }

    /// Records the ended episode `ep` (at `ts`) with how it was repaired, or counts it as
    /// reordering if nothing was retransmitted.
    pub(super) fn close_episode(&mut self, mut ep: LossEpisode, ts: i64) {
        if ep.retx == 0 {
            // Duplicate ACKs that resolved without a retransmission: reordering absorbed.
            self.dupack_runs_without_retx += 1;
            return;
        }
        ep.kind = if ep.timeout {
            RecoveryKind::Timeout
        } else if ep.fast_retx_frame.is_some() || ep.dupacks >= DUPACK_THRESHOLD {
            RecoveryKind::Fast
        } else {
            RecoveryKind::Other
        };
        ep.next_round = self.rounds.len() + 1;
        self.episode_count += 1;
        self.last_episode_end = Some(ts);
        self.episodes.push_capped(ep, MAX_EPISODES);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::infer::sender::script::{Feed, MS, MSS, T0};
    use tcpdx_core::AnalysisFlags as F;

    #[test]
    fn the_third_duplicate_ack_makes_a_fast_recovery() {
        let below = DUPACK_THRESHOLD - 1;
        for (dupacks, kind, third) in [
            (below, RecoveryKind::Other, false),
            (DUPACK_THRESHOLD, RecoveryKind::Fast, true),
            (DUPACK_THRESHOLD + 1, RecoveryKind::Fast, true),
        ] {
            let mut f = Feed::new(10 * MS);
            let end = f.burst(T0, 1, 10);
            let mut frames = Vec::new();
            for n in 1..=dupacks {
                let t = T0 + 10 * MS + i64::from(n) * 10_000;
                frames.push(f.dupack(t, 1, n, &[(1001, 1001 + u64::from(n) * 1000)]));
            }
            // Not flagged fast: only the duplicate ACKs can make the episode a fast one.
            let retx = f.data(T0 + 11 * MS, 1, MSS, F::RETRANSMISSION);
            f.ack(T0 + 21 * MS, end);
            assert_eq!(f.s.episode_count, 1, "{dupacks} duplicate ACKs");
            let ep = f.s.episodes.get(0).unwrap();
            assert_eq!(ep.kind, kind, "{dupacks} duplicate ACKs");
            assert_eq!(ep.dupacks, dupacks);
            assert_eq!(ep.third_dupack_frame, third.then(|| frames[2]));
            // Opened by the first sign of loss, started by the first retransmission.
            assert_eq!(
                (ep.start_frame, ep.first_retx_frame),
                (frames[0], Some(retx))
            );
            assert_eq!(ep.start, T0 + 11 * MS);
            assert_eq!(ep.fast_retx_frame, None);
        }
    }

    /// Next to the receiver (its ACKs at once, a 10 ms path): the retransmission arrives a
    /// round trip after the duplicate ACK that made it left; the sender's recovery started
    /// when that ACK reached it, a round trip before the capture sees the retransmission,
    /// but not before the first duplicate ACK.
    #[test]
    fn next_to_the_receiver_recovery_starts_a_round_trip_before_the_retransmission() {
        let retx_at = T0 + 30 * MS;
        let at = retx_at - 10 * MS;
        for (dupack_at, start) in [(at - 1, at), (at, at), (at + 1, at + 1)] {
            let mut f = Feed::new(10 * MS);
            f.s.downstream_rtt_min = Some(0);
            let end = f.burst(T0, 1, 10);
            f.dupack(dupack_at, 1, 1, &[(1001, 2001)]);
            f.data(retx_at, 1, MSS, F::RETRANSMISSION);
            f.ack(retx_at + 10_000, end);
            let ep = f.s.episodes.get(0).unwrap();
            assert_eq!(ep.start, start, "duplicate ACK at {dupack_at}");
        }
        // Next to the sender (its ACKs a round trip away) the retransmission starts it.
        let mut f = Feed::new(10 * MS);
        f.s.downstream_rtt_min = Some(10 * MS);
        let end = f.burst(T0, 1, 10);
        f.dupack(T0 + 10 * MS, 1, 1, &[(1001, 2001)]);
        f.data(retx_at, 1, MSS, F::RETRANSMISSION);
        f.ack(retx_at + 10 * MS, end);
        assert_eq!(f.s.episodes.get(0).unwrap().start, retx_at);
    }

    /// Next to the receiver, after data lost before the capture: the segment filling the
    /// hole is a retransmission when stamped after the segment that showed the hole (its
    /// original was sent before that one), else an original that came late. Stamped the
    /// same as the latest segment it is a retransmission all the same (lab seed 3047: a 1 ms
    /// clock, the repair in the same tick as new data).
    #[test]
    fn a_hole_filled_by_a_segment_stamped_after_the_one_that_showed_it_was_a_retransmission() {
        for (stamp, retx) in [(99, 0), (100, 0), (101, 1), (102, 1)] {
            let mut f = Feed::new(10 * MS);
            f.s.data_tsval = Some(100);
            f.data(T0, 1, MSS, 0);
            f.data(T0 + 10_000, 2001, MSS, F::LOST_SEGMENT);
            f.s.data_tsval = Some(101);
            f.data(T0 + 20_000, 3001, MSS, 0);
            f.s.data_tsval = Some(stamp);
            f.data(T0 + 10 * MS, 1001, MSS, F::OUT_OF_ORDER);
            f.s.finish(T0 + 20 * MS);
            assert_eq!(f.s.retx_pkts, retx, "stamped {stamp}");
            assert_eq!(f.s.out_of_order, 1 - retx, "stamped {stamp}");
            let unseen = f.s.episodes.iter().map(|e| e.retx_unseen).sum::<u32>();
            assert_eq!(u64::from(unseen), retx, "stamped {stamp}");
        }
    }

    #[test]
    fn a_flagged_fast_retransmission_makes_a_fast_recovery_without_duplicate_acks() {
        let mut f = Feed::new(10 * MS);
        let end = f.burst(T0, 1, 10);
        let retx = f.data(T0 + 11 * MS, 1, MSS, F::FAST_RETRANSMISSION);
        f.ack(T0 + 21 * MS, end);
        let ep = f.s.episodes.get(0).unwrap();
        assert_eq!(
            (ep.kind, ep.fast_retx_frame),
            (RecoveryKind::Fast, Some(retx))
        );
    }

    #[test]
    fn an_episode_ends_with_the_ack_of_its_recovery_point() {
        for (ack, ended) in [(10_000, false), (10_001, true), (10_002, true)] {
            let mut f = Feed::new(10 * MS);
            let recovery_point = f.burst(T0, 1, 10);
            assert_eq!(recovery_point, 10_001);
            f.data(T0 + 11 * MS, 1, MSS, F::RETRANSMISSION);
            let frame = f.ack(T0 + 21 * MS, ack);
            assert_eq!(f.s.episode_count, u32::from(ended), "ACK of {ack}");
            if ended {
                let ep = f.s.episodes.get(0).unwrap();
                assert_eq!((ep.end, ep.end_frame), (T0 + 21 * MS, frame));
                assert_eq!(ep.recovery_point, recovery_point);
                assert_eq!((ep.retx, ep.real_losses()), (1, 1));
            } else {
                // The end of the capture closes it at the last frame.
                f.s.finish(T0 + 30 * MS);
                let ep = f.s.episodes.get(0).unwrap();
                assert_eq!((ep.end, ep.end_frame), (T0 + 30 * MS, 0));
            }
        }
    }

    #[test]
    fn duplicate_acks_that_end_without_a_retransmission_were_reordering() {
        let mut f = Feed::new(10 * MS);
        let end = f.burst(T0, 1, 10);
        for n in 1..=DUPACK_THRESHOLD {
            f.dupack(T0 + 10 * MS, 1, n, &[(1001, 2001)]);
        }
        f.ack(T0 + 11 * MS, end);
        assert_eq!((f.s.episode_count, f.s.dupack_runs_without_retx), (0, 1));
        assert!(f.s.episodes.is_empty());
    }

    #[test]
    fn sack_above_the_ack_opens_an_episode_only_with_data_in_flight() {
        for (sent, opened) in [(1, false), (2, true)] {
            let mut f = Feed::new(10 * MS);
            let end = f.burst(T0, 1, sent);
            let a = crate::infer::sender::script::ack_row(T0 + 10 * MS, 1001);
            f.receive(a, &[(2001, 3001)]);
            assert_eq!(f.s.episode.is_some(), opened, "{sent} segments sent");
            f.ack(T0 + 11 * MS, end);
        }
    }
}
