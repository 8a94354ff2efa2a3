//! Spurious retransmissions: a retransmission later shown unnecessary.
//!
//! Three proofs, each recorded once per retransmission (the recent retransmissions remember
//! which were proven): Wireshark's `spurious_retransmission` flag on the retransmission
//! itself ([`PROOF_ACKED`]); a D-SACK block covering it (RFC 2883, [`PROOF_DSACK`]); a
//! cumulative ACK covering it sooner than [`SPURIOUS_EARLY_ACK_SHARE`] of the smallest
//! capture-to-receiver round trip after it ([`PROOF_EARLY_ACK`]), or a SACK block covering
//! it as soon ([`PROOF_EARLY_SACK`]). Retransmissions wait in
//! `pending_retx` for the ACK that covers them; timeout retransmissions do not wait there
//! (the first ACK after a timeout may answer the original).

use super::{MAX_EPISODES, SenderState};
use crate::infer::retx::{Match, Retx};
use tcpdx_core::{AnalysisFlags as F, SegmentAnalysis, SegmentDetail};

/// Recent retransmissions remembered for D-SACK matching (tcpdx choice: more than one
/// window of 4096 segments is rarely retransmitted at once).
pub const MAX_RECENT_RETX: usize = 4096;
/// An ACK covering a retransmission that arrives sooner than this share of the smallest
/// capture-to-receiver round trip after it cannot be answering it: the original had
/// arrived (tcpdx choice; the idea of Eifel detection, RFC 3522, applied from the outside).
pub const SPURIOUS_EARLY_ACK_SHARE: f64 = 0.8;

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

/// A retransmission and the TSval it carried (RFC 7323), waiting for the first ACK that
/// covers it.
#[derive(Clone, Copy, Debug)]
pub(super) struct TsRetx {
    end: u64,
    tsval: u32,
    ts: i64,
    frame: u64,
}

/// The original of the retransmission came after it (stamped before it).
pub const PROOF_LATE_ORIGINAL: &str = "original that came after the retransmission";

/// Proof roles of [`Spurious`].
pub const PROOF_DSACK: &str = "D-SACK: the data had arrived";
/// The ACK came sooner than a round trip after the retransmission.
pub const PROOF_EARLY_ACK: &str = "ACK too early to answer the retransmission";
/// A SACK block covering the retransmission came sooner than a round trip after it.
pub const PROOF_EARLY_SACK: &str = "SACK too early to answer the retransmission";
/// Wireshark's `spurious_retransmission`: the data was already acknowledged.
pub const PROOF_ACKED: &str = "retransmission of acknowledged data";
/// The first ACK covering the retransmission echoes an older TSval (RFC 3522, Eifel): the
/// original filled the hole.
pub const PROOF_ECHO: &str = "ACK echoing the original's timestamp";

impl SenderState {
    /// The retransmission `a`, counted in the open loss episode: records Wireshark's
    /// spurious flag as a proof and remembers the retransmission for the later proofs.
    pub(super) fn remember_retx(&mut self, a: &SegmentAnalysis, timeout: bool) {
        let ts = a.ts.0;
        let end = a.seq + u64::from(a.len);
        // Behind a reordering element the late original is flagged spurious too: count
        // each sequence number once.
        let already = self.recent_retx.any_proven(Match::Seq(a.seq));
        let spurious_flag = a.flags.has(F::SPURIOUS_RETRANSMISSION) && !already;
        if spurious_flag {
            self.recent_retx.prove(Match::Seq(a.seq), false);
            if let Some(ep) = &mut self.episode {
                ep.spurious += 1;
            }
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
        if let Some(tsval) = self.data_tsval
            && !spurious_flag
            && !already
            && self.pending_tsval.len() < MAX_RECENT_RETX
        {
            self.pending_tsval.push_back(TsRetx {
                end,
                tsval,
                ts,
                frame: a.frame.0,
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
    }

    /// How soon after a retransmission an answer to it is too early to be one (None: no
    /// answer is). Next to the receiver the capture-to-receiver round trip is the receiver's
    /// own turnaround, which varies by more than itself: no answer is too early there.
    fn early_limit(&self) -> Option<i64> {
        let down = self
            .downstream_rtt_min
            .filter(|_| !self.capture_near_receiver)?;
        Some((down as f64 * SPURIOUS_EARLY_ACK_SHARE) as i64)
    }

    /// Retransmissions this cumulative ACK covers: spurious if it came too early to be
    /// answering them (only when the ACK is not also the first after a timeout).
    pub(super) fn check_early_acks(&mut self, a: &SegmentAnalysis) {
        // Nearly always nothing was retransmitted: no walk to set up.
        if self.pending_retx.is_empty() {
            return;
        }
        let Some(limit) = self.early_limit() else {
            self.pending_retx.retain(|x| x.end > a.ack);
            return;
        };
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

    /// Retransmissions a SACK block of `a` covers sooner than they could have reached the
    /// receiver and been answered: the receiver had an earlier copy (a sender that takes the
    /// originals held in a queue for lost resends them while they arrive).
    #[inline]
    pub(super) fn check_early_sacks(&mut self, a: &SegmentAnalysis, d: &SegmentDetail) {
        if !self.pending_retx.is_empty() && d.sack_count > 0 {
            self.prove_by_early_sack(a, d);
        }
    }

    #[inline(never)]
    fn prove_by_early_sack(&mut self, a: &SegmentAnalysis, d: &SegmentDetail) {
        let Some(limit) = self.early_limit() else {
            return;
        };
        let ts = a.ts.0;
        let blocks = d.sack_blocks();
        // Pending in sending order: only the latest, sent less than `limit` ago, can be early.
        let mut early = Vec::new();
        for x in self.pending_retx.iter().rev() {
            if ts - x.ts >= limit {
                break;
            }
            if blocks.iter().any(|&(l, r)| l <= x.seq && x.end <= r) {
                early.push(*x);
            }
        }
        if early.is_empty() {
            return;
        }
        self.pending_retx
            .retain(|x| !early.iter().any(|e| e.frame == x.frame));
        for x in early.into_iter().rev() {
            if !(self.recent_retx)
                .prove(Match::Frame(x.frame), false)
                .is_empty()
            {
                self.record_spurious(x.frame, x.ts, a.frame.0, PROOF_EARLY_SACK);
            }
        }
    }

    /// The first retransmission this cumulative ACK covers first: spurious if it echoes a
    /// TSval older than its own. A receiver echoes the segment that last moved its left edge (RFC 7323
    /// section 4.3): a retransmission that filled a hole, or the original that got there
    /// first.
    #[inline]
    pub(super) fn check_echoed_timestamps(&mut self, a: &SegmentAnalysis, d: &SegmentDetail) {
        if !self.pending_tsval.is_empty() {
            self.prove_by_echo(a, d);
        }
    }

    #[inline(never)]
    fn prove_by_echo(&mut self, a: &SegmentAnalysis, d: &SegmentDetail) {
        let echo = d.timestamps.map(|t| t.1);
        let mut covered = Vec::new();
        self.pending_tsval.retain(|x| {
            let done = x.end <= a.ack;
            if done {
                covered.push(*x);
            }
            !done
        });
        // Only the first retransmission covered: a receiver whose ACK covers several echoes
        // the one that first moved its edge, older than the others whether or not they filled
        // holes.
        if let Some(x) = covered.first() {
            // Older in the wrapping 32-bit clock; an equal tick proves nothing.
            let older = echo.is_some_and(|e| (x.tsval.wrapping_sub(e) as i32) > 0);
            if older
                && !(self.recent_retx)
                    .prove(Match::Frame(x.frame), false)
                    .is_empty()
            {
                self.record_spurious(x.frame, x.ts, a.frame.0, PROOF_ECHO);
            }
        }
    }

    /// True if the data segment being recorded carries a TSval older than the latest one
    /// this side sent (wrapping 32-bit clock; an equal tick proves nothing).
    pub(super) fn stamped_before_latest(&self) -> bool {
        self.data_tsval
            .zip(self.latest_tsval)
            .is_some_and(|(v, m)| (m.wrapping_sub(v) as i32) > 0)
    }

    /// True if the data segment being recorded carries a TSval newer than `tsval`: a
    /// segment filling a hole stamped after the segment that showed the hole was sent after
    /// it, so it is no original (sent before it) but a retransmission.
    pub(super) fn stamped_after(&self, tsval: Option<u32>) -> bool {
        self.data_tsval
            .zip(tsval)
            .is_some_and(|(v, m)| (v.wrapping_sub(m) as i32) > 0)
    }

    /// True if the data segment being recorded carries a TSval newer than every one this
    /// side sent before.
    pub(super) fn stamped_after_latest(&self) -> bool {
        self.data_tsval
            .zip(self.latest_tsval)
            .is_some_and(|(v, m)| (v.wrapping_sub(m) as i32) > 0)
    }

    /// The original `a` arrived after a retransmission of it: that retransmission was not
    /// needed.
    pub(super) fn prove_by_late_original(&mut self, a: &SegmentAnalysis) {
        for x in self.recent_retx.prove(Match::Seq(a.seq), false) {
            self.record_spurious(x.frame, x.ts, a.frame.0, PROOF_LATE_ORIGINAL);
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
        // The proof may come after the retransmission's episode ended and others opened
        // and ended too: the episode is the latest that started before the retransmission.
        if let Some(ep) = &mut self.episode
            && ts >= ep.start
        {
            ep.spurious += 1;
        } else {
            self.episodes
                .update_last_where(|e| ts >= e.start, |e| e.spurious += 1);
        }
    }

    /// D-SACK blocks in the peer's segment `a`: every recent retransmission they cover was
    /// spurious.
    pub(super) fn check_dsack(&mut self, a: &SegmentAnalysis, d: &SegmentDetail) {
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::infer::sender::script::{Feed, MS, MSS, T0, ack_row};

    /// A sender whose first round trip was measured at 10 ms (capture to receiver and back).
    fn measured() -> Feed {
        let mut f = Feed::new(10 * MS);
        f.data(T0, 1, MSS, 0);
        let mut a = ack_row(T0 + 10 * MS, 1001);
        a.ack_rtt_ns = Some(10 * MS);
        f.receive(a, &[]);
        f
    }

    /// A first round trip measured at 10 ms (capture to receiver and back), then a flight
    /// of 3 whose first segment is retransmitted and acknowledged `after` later.
    fn acked_after(after: i64) -> (Feed, u64, u64) {
        let mut f = measured();
        let end = f.burst(T0 + 20 * MS, 1001, 3);
        let t = T0 + 21 * MS;
        let retx = f.data(t, 1001, MSS, F::RETRANSMISSION);
        let ack = f.ack(t + after, end);
        (f, retx, ack)
    }

    #[test]
    fn an_ack_sooner_than_most_of_a_round_trip_after_a_retransmission_proves_it_spurious() {
        let limit = ((10 * MS) as f64 * SPURIOUS_EARLY_ACK_SHARE) as i64;
        for (after, spurious) in [(limit - 1, 1), (limit, 0), (limit + 1, 0)] {
            let (f, retx, ack) = acked_after(after);
            assert_eq!(f.s.spurious_count, spurious, "ACK {after} ns after");
            assert_eq!(f.s.episodes.get(0).unwrap().spurious, spurious);
            if spurious == 1 {
                let s = f.s.spurious.get(0).unwrap();
                assert_eq!(
                    (s.retx_frame, s.proof_frame, s.proof),
                    (retx, ack, PROOF_EARLY_ACK)
                );
            }
        }
    }

    /// Next to the receiver an answer 1 ms after a retransmission, on a capture-to-receiver
    /// round trip of 10 ms, is no proof; elsewhere it is one.
    #[test]
    fn no_answer_is_too_early_next_to_the_receiver() {
        for near in [true, false] {
            let mut f = Feed::new(10 * MS);
            f.s.capture_near_receiver = near;
            f.data(T0, 1, MSS, 0);
            let mut a = ack_row(T0 + 10 * MS, 1001);
            a.ack_rtt_ns = Some(10 * MS);
            f.receive(a, &[]);
            let end = f.burst(T0 + 20 * MS, 1001, 4);
            f.data(T0 + 21 * MS, 2001, MSS, F::RETRANSMISSION);
            f.dupack(T0 + 22 * MS, 1001, 1, &[(2001, end)]);
            f.data(T0 + 23 * MS, 1001, MSS, F::RETRANSMISSION);
            f.ack(T0 + 24 * MS, end);
            assert_eq!(f.s.spurious_count, if near { 0 } else { 2 }, "near {near}");
        }
    }

    /// A flight of 4 from 1001 (1001 lost), 2001 resent at `t`, then a duplicate ACK of 1001
    /// whose SACK block covers 2001 `after` ns later.
    fn sacked_after(after: i64) -> (Feed, u64, u64) {
        let mut f = measured();
        f.burst(T0 + 20 * MS, 1001, 4);
        let t = T0 + 21 * MS;
        let retx = f.data(t, 2001, MSS, F::RETRANSMISSION);
        let sack = f.dupack(t + after, 1001, 1, &[(2001, 5001)]);
        (f, retx, sack)
    }

    #[test]
    fn a_sack_block_sooner_than_most_of_a_round_trip_after_a_retransmission_proves_it_spurious() {
        let limit = ((10 * MS) as f64 * SPURIOUS_EARLY_ACK_SHARE) as i64;
        for (after, spurious) in [(limit - 1, 1), (limit, 0), (limit + 1, 0)] {
            let (mut f, retx, sack) = sacked_after(after);
            f.s.finish(T0 + 40 * MS);
            let ep = f.s.episodes.get(0).unwrap();
            assert_eq!((ep.retx, ep.real_losses()), (1, 1 - spurious));
            assert_eq!(f.s.spurious_count, spurious, "SACK {after} ns after");
            assert_eq!(f.s.dsacks, 0);
            if spurious == 1 {
                let s = f.s.spurious.get(0).unwrap();
                assert_eq!(
                    (s.retx_frame, s.proof_frame, s.proof),
                    (retx, sack, PROOF_EARLY_SACK)
                );
            }
        }
        // A block that covers only part of the retransmission proves nothing.
        let mut f = measured();
        f.burst(T0 + 20 * MS, 1001, 4);
        f.data(T0 + 21 * MS, 2001, MSS, F::RETRANSMISSION);
        f.dupack(T0 + 22 * MS, 1001, 1, &[(2501, 5001)]);
        assert_eq!(f.s.spurious_count, 0);
    }

    #[test]
    fn a_timeout_retransmission_is_never_proven_by_an_early_ack() {
        let mut f = measured();
        f.data(T0 + 20 * MS, 1001, MSS, 0);
        f.data(T0 + 500 * MS, 1001, MSS, F::RETRANSMISSION);
        f.ack(T0 + 501 * MS, 2001);
        // Nor is it a timeout stall: that ACK answered the original (see timeout.rs).
        assert_eq!((f.s.rtos.len(), f.s.spurious_count), (0, 0));
    }

    /// A flight of 3 and a retransmission of `retx_seq`, then an ACK of `ack` with `sack`.
    fn dsack(retx_seq: u64, ack: u64, sack: &[(u64, u64)]) -> Feed {
        let mut f = Feed::new(10 * MS);
        f.burst(T0, 1, 3);
        f.data(T0 + 11 * MS, retx_seq, MSS, F::RETRANSMISSION);
        f.receive(ack_row(T0 + 21 * MS, ack), sack);
        f
    }

    #[test]
    fn a_first_sack_block_at_or_below_the_ack_is_a_dsack() {
        // The block [1, 1001) reported with a cumulative ACK of 1000, 1001, 1002.
        for (ack, dsacks) in [(1000, 0), (1001, 1), (1002, 1)] {
            let f = dsack(1, ack, &[(1, 1001)]);
            assert_eq!(f.s.dsacks, dsacks, "ACK {ack}");
            assert_eq!(f.s.spurious_count, dsacks as u32, "ACK {ack}");
            if dsacks == 1 {
                assert_eq!(f.s.spurious.get(0).unwrap().proof, PROOF_DSACK);
            }
        }
    }

    #[test]
    fn a_first_sack_block_inside_the_second_is_a_dsack() {
        // The block [2001, r) beside [1001, 3001), the cumulative ACK still at 1.
        for (right, dsacks) in [(3000, 1), (3001, 1), (3002, 0)] {
            let f = dsack(2001, 1, &[(2001, right), (1001, 3001)]);
            assert_eq!(f.s.dsacks, dsacks, "first block ending at {right}");
            assert_eq!(
                f.s.spurious_count, dsacks as u32,
                "first block ending at {right}"
            );
        }
        // Starting below the second block: a plain SACK block.
        let f = dsack(2001, 1, &[(1000, 3001), (1001, 3001)]);
        assert_eq!(f.s.dsacks, 0);
    }

    /// A D-SACK that arrives after the retransmission's episode ended, while the next one is
    /// open, clears the first: its loss was none, the second's retransmission is still one.
    #[test]
    fn a_late_dsack_is_charged_to_the_retransmissions_own_episode() {
        let mut f = Feed::new(10 * MS);
        let end = f.burst(T0, 1, 6);
        f.data(T0 + 11 * MS, 1, MSS, F::RETRANSMISSION);
        f.ack(T0 + 21 * MS, end); // the first episode ends
        f.data(T0 + 22 * MS, end, MSS, 0);
        let end2 = f.burst(T0 + 22 * MS, end + 1000, 3);
        f.data(T0 + 30 * MS, end, MSS, F::RETRANSMISSION); // the second opens
        // The D-SACK of the first retransmission comes now.
        f.receive(ack_row(T0 + 31 * MS, end), &[(1, 1001)]);
        f.ack(T0 + 40 * MS, end2);
        assert_eq!(f.s.spurious_count, 1);
        let (a, b) = (f.s.episodes.get(0).unwrap(), f.s.episodes.get(1).unwrap());
        assert_eq!((a.retx, a.real_losses()), (1, 0));
        assert_eq!((b.retx, b.real_losses()), (1, 1));
    }

    /// Behind a reordering path the D-SACK may come after later episodes ended too: it is
    /// still the first episode's retransmission that repaired nothing (lab seed 2111: three
    /// of four "lost" segments were D-SACKed after the next episode had ended).
    #[test]
    fn a_dsack_after_later_episodes_ended_is_charged_to_its_own() {
        let mut f = Feed::new(10 * MS);
        let end = f.burst(T0, 1, 6);
        f.data(T0 + 11 * MS, 1, MSS, F::RETRANSMISSION);
        f.ack(T0 + 21 * MS, end);
        let (mut seq, mut t) = (end, T0 + 22 * MS);
        for _ in 0..2 {
            let e = f.burst(t, seq, 3);
            f.data(t + MS, seq, MSS, F::RETRANSMISSION);
            f.ack(t + 11 * MS, e);
            (seq, t) = (e, t + 20 * MS);
        }
        f.receive(ack_row(t, seq), &[(1, 1001)]);
        assert_eq!(f.s.spurious_count, 1);
        let real: Vec<u32> = (0..3)
            .map(|i| f.s.episodes.get(i).unwrap().real_losses())
            .collect();
        assert_eq!(real, vec![0, 1, 1]);
    }

    /// A flight of 3 sent at TSval 100, the first segment retransmitted at TSval 130, then
    /// the first ACK covering it echoing `echo` (or no timestamps).
    fn echoed(echo: Option<u32>) -> Feed {
        let mut f = Feed::new(10 * MS);
        f.s.data_tsval = Some(100);
        let end = f.burst(T0, 1, 3);
        f.s.data_tsval = Some(130);
        f.data(T0 + 30 * MS, 1, MSS, F::RETRANSMISSION);
        let mut a = ack_row(T0 + 40 * MS, end);
        a.frame = tcpdx_wire::FrameNo(6);
        let d = SegmentDetail {
            timestamps: echo.map(|e| (7, e)),
            ..SegmentDetail::default()
        };
        f.s.on_ack(&a, &d, 10 * MS);
        f
    }

    #[test]
    fn an_ack_echoing_an_older_timestamp_than_the_retransmissions_proves_it_spurious() {
        for (echo, spurious) in [(Some(129), 1), (Some(130), 0), (Some(131), 0), (None, 0)] {
            let f = echoed(echo);
            assert_eq!(f.s.spurious_count, spurious, "echo {echo:?}");
            assert_eq!(f.s.episodes.get(0).unwrap().real_losses(), 1 - spurious);
            if spurious == 1 {
                let s = f.s.spurious.get(0).unwrap();
                assert_eq!((s.retx_frame, s.proof_frame, s.proof), (4, 6, PROOF_ECHO));
            }
        }
        // An ACK covering two retransmissions echoing an older TSval proves the first one
        // only: the second may have filled a hole after the original of the first arrived.
        let mut f = Feed::new(10 * MS);
        f.s.data_tsval = Some(100);
        let end = f.burst(T0, 1, 3);
        f.s.data_tsval = Some(130);
        f.data(T0 + 30 * MS, 1, MSS, F::RETRANSMISSION);
        f.s.data_tsval = Some(131);
        f.data(T0 + 31 * MS, 1001, MSS, F::RETRANSMISSION);
        let d = SegmentDetail {
            timestamps: Some((7, 129)),
            ..SegmentDetail::default()
        };
        f.s.on_ack(&ack_row(T0 + 41 * MS, end), &d, 10 * MS);
        assert_eq!(f.s.spurious_count, 1);
        assert_eq!(f.s.spurious.get(0).unwrap().retx_frame, 4);
        // The 32-bit clock wraps: 2^32 - 1 is one tick before 0.
        let mut f = Feed::new(10 * MS);
        f.s.data_tsval = Some(0);
        f.data(T0, 1, MSS, F::RETRANSMISSION);
        let d = SegmentDetail {
            timestamps: Some((7, u32::MAX)),
            ..SegmentDetail::default()
        };
        f.s.on_ack(&ack_row(T0 + 10 * MS, 1001), &d, 10 * MS);
        assert_eq!(f.s.spurious_count, 1);
    }

    /// Behind a reordering element the retransmission arrives first, the original (stamped
    /// before it) later, flagged a retransmission of acknowledged data: it is no second
    /// retransmission, and it proves the first unnecessary.
    #[test]
    fn an_original_stamped_before_the_latest_segment_came_late() {
        for (stamp, late) in [(129, true), (130, false)] {
            let mut f = Feed::new(10 * MS);
            f.s.data_tsval = Some(100);
            let end = f.burst(T0, 1, 3);
            f.s.data_tsval = Some(130);
            let retx = f.data(T0 + 30 * MS, 1, MSS, F::RETRANSMISSION);
            f.ack(T0 + 31 * MS, end);
            f.s.data_tsval = Some(stamp);
            let orig = f.data(T0 + 40 * MS, 1, MSS, F::SPURIOUS_RETRANSMISSION);
            let why = format!("stamped {stamp}");
            assert_eq!(f.s.retx_pkts, if late { 1 } else { 2 }, "{why}");
            assert_eq!(f.s.spurious_count, 1, "{why}");
            let s = f.s.spurious.get(0).unwrap();
            let proof = if late {
                (retx, orig, PROOF_LATE_ORIGINAL)
            } else {
                (orig, orig, PROOF_ACKED)
            };
            assert_eq!((s.retx_frame, s.proof_frame, s.proof), proof, "{why}");
            if late {
                assert_eq!(f.s.episodes.get(0).unwrap().real_losses(), 0, "{why}");
            }
        }
    }

    #[test]
    fn wiresharks_spurious_flag_counts_each_sequence_once() {
        let mut f = Feed::new(10 * MS);
        f.burst(T0, 1, 3);
        f.ack(T0 + 10 * MS, 3001);
        let first = f.data(T0 + 11 * MS, 1, MSS, F::SPURIOUS_RETRANSMISSION);
        f.data(T0 + 12 * MS, 1, MSS, F::SPURIOUS_RETRANSMISSION);
        f.data(T0 + 13 * MS, 1001, MSS, F::SPURIOUS_RETRANSMISSION);
        assert_eq!(f.s.spurious_count, 2);
        let s = f.s.spurious.get(0).unwrap();
        assert_eq!(
            (s.retx_frame, s.proof_frame, s.proof),
            (first, first, PROOF_ACKED)
        );
        assert_eq!(f.s.retx_pkts, 3);
    }
}
