//! [`TimerPauses`]: the pauses of a connection that a specific timer explains, indexed so
//! that asking whether one covers a silence costs a binary search.

use super::ConnTracker;

/// Tolerance for the capture's view of a pause's edges (tcpdx choice: well below any timer).
pub const EDGE_NS: i64 = 1_000_000;

/// Both senders' delayed-ACK stalls (after loss recovery or Nagle's) and retransmission
/// timeouts, for [`TimerPauses::explain`]. Built once per diagnosis: asking each silence of
/// a connection with a silence every few segments walked six lists, 244 instructions a
/// silence and 3% of `diagnose` on many short connections.
#[derive(Debug)]
pub struct TimerPauses {
    /// The pauses' starts, ascending.
    starts: Vec<i64>,
    /// `ends[i]`: the latest end among the pauses `0..=i` (in the order of `starts`).
    ends: Vec<i64>,
}

impl TimerPauses {
    /// The timer pauses of `c`'s senders.
    pub fn of(c: &ConnTracker) -> Self {
        let mut v: Vec<(i64, i64)> = Vec::new();
        for s in &c.senders {
            v.extend(s.delack.iter().map(|d| (d.start, d.end)));
            v.extend(s.nagle.iter().map(|n| (n.start, n.end)));
            v.extend(s.rtos.iter().map(|r| (r.start, r.end)));
        }
        v.sort_unstable();
        let starts = v.iter().map(|p| p.0).collect();
        let ends = v
            .iter()
            .scan(i64::MIN, |max, p| {
                *max = (*max).max(p.1);
                Some(*max)
            })
            .collect();
        Self { starts, ends }
    }

    /// True if the silence `[start, end]` lies within one of the pauses, give or take
    /// [`EDGE_NS`] at each edge: that timer's finding explains it.
    pub fn explain(&self, start: i64, end: i64) -> bool {
        // The pauses starting early enough are a prefix; one of them ends late enough if the
        // latest end among them does.
        let n = self.starts.partition_point(|&a| start + EDGE_NS >= a);
        n.checked_sub(1)
            .and_then(|i| self.ends.get(i))
            .is_some_and(|&b| end <= b + EDGE_NS)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::infer::{DelackPause, NaglePause, RtoStall};

    /// The definition: some pause covers the silence, edges within the tolerance.
    fn covered(pauses: &[(i64, i64)], start: i64, end: i64) -> bool {
        pauses
            .iter()
            .any(|&(a, b)| start + EDGE_NS >= a && end <= b + EDGE_NS)
    }

    #[test]
    fn answers_as_the_walk_of_every_pause_does() {
        // A small deterministic generator: pauses that overlap, nest, touch and stand apart,
        // asked about silences around each edge.
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        let mut next = |m: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % m) as i64
        };
        for round in 0..200 {
            let mut c = ConnTracker::default();
            let mut all = Vec::new();
            for i in 0..(round % 9) {
                let start = next(50) * 1_000_000;
                let end = start + next(30) * 1_000_000;
                all.push((start, end));
                let s = &mut c.senders[i % 2];
                match i % 3 {
                    0 => s.rtos.push(RtoStall {
                        start,
                        last_ack_frame: 0,
                        end,
                        retx_frame: 0,
                        timeouts: 1,
                        seq: 0,
                        upstream_loss: false,
                    }),
                    1 => s.delack.push(DelackPause {
                        start,
                        end,
                        hold: 0,
                        lone_frame: 0,
                        ack_frame: 0,
                        third_dupack_frame: None,
                        fast_retx_frame: None,
                        rto_frame: None,
                    }),
                    _ => s.nagle.push(NaglePause {
                        start,
                        end,
                        hold: 0,
                        lone_frame: 0,
                        ack_frame: 0,
                        tail_frame: 0,
                    }),
                }
            }
            let p = TimerPauses::of(&c);
            for _ in 0..50 {
                let start = next(60) * 1_000_000 + next(3) * 500_000 - 500_000;
                let end = start + next(35) * 1_000_000 + next(3) * 500_000;
                assert_eq!(
                    p.explain(start, end),
                    covered(&all, start, end),
                    "{all:?} [{start}, {end}]"
                );
            }
        }
    }

    #[test]
    fn a_connection_without_pauses_explains_nothing() {
        let p = TimerPauses::of(&ConnTracker::default());
        assert!(!p.explain(0, 0));
        assert!(!p.explain(i64::MIN / 2, i64::MAX / 2));
    }
}
