//! The bounded list of a direction's unacknowledged segments: ACK RTT and bytes in flight.
//!
//! Same semantics as Wireshark's `tcp_unacked_t` list (an ACK deletes every segment it
//! covers; one it covers partly is trimmed; the oldest segment whose end equals the ACK
//! gives the RTT), but stored in a `VecDeque` in sending order: in the common in-order
//! case an ACK pops a prefix and bytes in flight is `back.end - front.seq`, O(1) instead
//! of Wireshark's walk over the whole list. Out-of-order inserts (retransmissions) switch
//! to a full scan until the list is in order again.

use std::collections::VecDeque;

use tcpdx_wire::{FrameNo, SeqNum, Timestamp};

/// One unacknowledged segment (or SYN/FIN).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Unacked {
    /// First sequence number not yet acknowledged.
    pub seq: SeqNum,
    /// Sequence number after the segment (SYN/FIN count one).
    pub end: SeqNum,
    /// Frame that sent it.
    pub frame: FrameNo,
    /// When it was sent.
    pub ts: Timestamp,
    /// Sent more than once (or overlapped by a retransmission): not a valid RTT sample (Karn).
    pub ambiguous: bool,
}

/// The segment an ACK matched exactly.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AckedMatch {
    /// The acknowledged segment's frame.
    pub frame: FrameNo,
    /// When that segment was sent.
    pub sent: Timestamp,
    /// Whether Karn's rule rejects it as an RTT sample.
    pub ambiguous: bool,
}

/// A direction's unacked segments, capped at `cap` entries.
#[derive(Clone, Debug, Default)]
pub struct UnackedList {
    segs: VecDeque<Unacked>,
    /// True while every entry starts at or after the previous entry's end.
    in_order: bool,
}

impl UnackedList {
    /// An empty list.
    pub fn new() -> Self {
        Self {
            segs: VecDeque::new(),
            in_order: true,
        }
    }
    /// Number of entries.
    pub fn len(&self) -> usize {
        self.segs.len()
    }
    /// True if empty.
    pub fn is_empty(&self) -> bool {
        self.segs.is_empty()
    }
    /// Adds a newly sent segment.
    pub fn push(&mut self, u: Unacked) {
        if let Some(last) = self.segs.back() {
            if u.seq.is_before(last.end) {
                self.in_order = false;
            }
        } else {
            self.in_order = true;
            // Room for one entry first (a SYN that is never answered: a flood's connections
            // keep it for their life), not the four a first push reserves.
            if self.segs.capacity() == 0 {
                self.segs.reserve_exact(1);
            }
        }
        self.segs.push_back(u);
    }
    /// Marks every entry overlapping `[seq, end)` as ambiguous for RTT (Karn's rule).
    pub fn mark_retransmitted(&mut self, seq: SeqNum, end: SeqNum) {
        for s in self.segs.iter_mut() {
            if s.seq.is_before(end) && seq.is_before(s.end) {
                s.ambiguous = true;
            }
        }
    }
    /// Applies a cumulative ACK: removes covered segments, trims a partly covered one, and
    /// returns the oldest segment whose end equals `ack` (Wireshark's `acks_frame`).
    pub fn ack(&mut self, ack: SeqNum) -> Option<AckedMatch> {
        if self.segs.is_empty() {
            return None;
        }
        if self.in_order {
            self.ack_in_order(ack)
        } else {
            let m = self.ack_scan(ack);
            self.recheck_order();
            m
        }
    }

    fn ack_in_order(&mut self, ack: SeqNum) -> Option<AckedMatch> {
        let mut found = None;
        while let Some(front) = self.segs.front_mut() {
            if front.end == ack {
                found = Some(AckedMatch {
                    frame: front.frame,
                    sent: front.ts,
                    ambiguous: front.ambiguous,
                });
                self.segs.pop_front();
            } else if ack.is_after(front.seq) && ack.is_at_or_before(front.end) {
                front.seq = ack;
                break;
            } else if front.end.is_after(ack) {
                break;
            } else {
                self.segs.pop_front();
            }
        }
        // Exact-match segments later in an in-order list are impossible: ends increase.
        found
    }

    fn ack_scan(&mut self, ack: SeqNum) -> Option<AckedMatch> {
        // Wireshark walks newest-first and the last match wins: the oldest match.
        let mut found = None;
        self.segs.retain_mut(|s| {
            if s.end == ack {
                if found.is_none() {
                    found = Some(AckedMatch {
                        frame: s.frame,
                        sent: s.ts,
                        ambiguous: s.ambiguous,
                    });
                }
                false
            } else if ack.is_after(s.seq) && ack.is_at_or_before(s.end) {
                s.seq = ack;
                true
            } else {
                s.end.is_after(ack)
            }
        });
        found
    }

    fn recheck_order(&mut self) {
        self.in_order = self
            .segs
            .iter()
            .zip(self.segs.iter().skip(1))
            .all(|(a, b)| !b.seq.is_before(a.end));
    }

    /// Bytes in flight as Wireshark computes them: highest end minus lowest start, each
    /// taken relative to `base` as 32-bit values.
    pub fn in_flight(&self, base: SeqNum) -> u32 {
        let (Some(front), Some(back)) = (self.segs.front(), self.segs.back()) else {
            return 0;
        };
        let rel = |s: SeqNum| s.0.wrapping_sub(base.0);
        if self.in_order {
            return rel(back.end).wrapping_sub(rel(front.seq));
        }
        // Wireshark seeds with the newest entry, then takes min/max over all.
        let mut first = rel(back.seq);
        let mut last = rel(back.end);
        for s in &self.segs {
            last = last.max(rel(s.end));
            first = first.min(rel(s.seq));
        }
        last.wrapping_sub(first)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seg(seq: u32, end: u32, frame: u64) -> Unacked {
        Unacked {
            seq: SeqNum(seq),
            end: SeqNum(end),
            frame: FrameNo(frame),
            ts: Timestamp(frame as i64),
            ambiguous: false,
        }
    }

    #[test]
    fn in_order_ack_pops_prefix_and_trims() {
        let mut l = UnackedList::new();
        l.push(seg(100, 200, 1));
        l.push(seg(200, 300, 2));
        l.push(seg(300, 400, 3));
        assert_eq!(l.in_flight(SeqNum(99)), 300);
        let m = l.ack(SeqNum(200)).unwrap();
        assert_eq!(m.frame, FrameNo(1));
        assert_eq!(l.ack(SeqNum(250)), None);
        assert_eq!(l.in_flight(SeqNum(99)), 150);
        assert_eq!(l.len(), 2);
        assert_eq!(l.ack(SeqNum(400)).unwrap().frame, FrameNo(3));
        assert!(l.is_empty());
    }

    #[test]
    fn retransmission_switches_to_scan_and_oldest_match_wins() {
        let mut l = UnackedList::new();
        l.push(seg(100, 200, 1));
        l.push(seg(200, 300, 2));
        l.push(seg(100, 200, 3)); // retransmission of frame 1
        l.mark_retransmitted(SeqNum(100), SeqNum(200));
        let m = l.ack(SeqNum(200)).unwrap();
        assert_eq!(m.frame, FrameNo(1));
        assert!(m.ambiguous);
        assert_eq!(l.len(), 1);
        assert_eq!(l.in_flight(SeqNum(99)), 100);
    }

    #[test]
    fn a_first_entry_reserves_one_slot() {
        let mut l = UnackedList::new();
        l.push(seg(100, 101, 1));
        assert_eq!(l.segs.capacity(), 1);
        l.push(seg(101, 201, 2));
        assert_eq!(l.len(), 2);
        assert_eq!(l.ack(SeqNum(201)).unwrap().frame, FrameNo(2));
        assert!(l.is_empty());
    }

    #[test]
    fn wraps_around_zero() {
        let mut l = UnackedList::new();
        l.push(seg(u32::MAX - 99, 50, 1));
        l.push(seg(50, 150, 2));
        assert_eq!(l.in_flight(SeqNum(u32::MAX - 100)), 250);
        assert_eq!(l.ack(SeqNum(50)).unwrap().frame, FrameNo(1));
        assert_eq!(l.len(), 1);
    }
}
