//! Spurious retransmissions: a retransmission later shown unnecessary.
//!
//! Three proofs, each recorded once per retransmission (the recent retransmissions remember
//! which were proven): Wireshark's `spurious_retransmission` flag on the retransmission
//! itself ([`PROOF_ACKED`]); a D-SACK block covering it (RFC 2883, [`PROOF_DSACK`]); a
//! cumulative ACK covering it sooner than [`SPURIOUS_EARLY_ACK_SHARE`] of the smallest
//! capture-to-receiver round trip after it ([`PROOF_EARLY_ACK`]). Retransmissions wait in
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

/// Proof roles of [`Spurious`].
pub const PROOF_DSACK: &str = "D-SACK: the data had arrived";
/// The ACK came sooner than a round trip after the retransmission.
pub const PROOF_EARLY_ACK: &str = "ACK too early to answer the retransmission";
/// Wireshark's `spurious_retransmission`: the data was already acknowledged.
pub const PROOF_ACKED: &str = "retransmission of acknowledged data";

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

    /// Retransmissions this cumulative ACK covers: spurious if it came too early to be
    /// answering them (only when the ACK is not also the first after a timeout).
    pub(super) fn check_early_acks(&mut self, a: &SegmentAnalysis) {
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

    /// A first round trip measured at 10 ms (capture to receiver and back), then a flight
    /// of 3 whose first segment is retransmitted and acknowledged `after` later.
    fn acked_after(after: i64) -> (Feed, u64, u64) {
        let mut f = Feed::new(10 * MS);
        f.data(T0, 1, MSS, 0);
        let mut a = ack_row(T0 + 10 * MS, 1001);
        a.ack_rtt_ns = Some(10 * MS);
        f.receive(a, &[]);
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

    #[test]
    fn a_timeout_retransmission_is_never_proven_by_an_early_ack() {
        let mut f = Feed::new(10 * MS);
        f.data(T0, 1, MSS, 0);
        let mut a = ack_row(T0 + 10 * MS, 1001);
        a.ack_rtt_ns = Some(10 * MS);
        f.receive(a, &[]);
        f.data(T0 + 20 * MS, 1001, MSS, 0);
        f.data(T0 + 500 * MS, 1001, MSS, F::RETRANSMISSION);
        f.ack(T0 + 501 * MS, 2001);
        assert_eq!((f.s.rtos.len(), f.s.spurious_count), (1, 0));
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
