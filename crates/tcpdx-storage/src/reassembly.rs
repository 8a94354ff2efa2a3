//! In-order byte delivery for one direction of a TCP connection.
//!
//! Segments arrive in capture order with their relative (unwrapped, 64-bit) sequence
//! numbers; the [`Reassembler`] hands the bytes to a [`ByteSink`] in sequence order, each
//! byte once. Bytes that will never be seen are delivered as a *gap* (their length only),
//! so the parser above knows exactly how much of the stream it missed:
//! - bytes the snaplen cut off a segment (`captured < len`);
//! - a hole the receiver acknowledged although the capture never saw it (capture drop, or
//!   a capture that began mid-stream): declared when the peer's ACK passes a buffered segment;
//! - a hole still open when the out-of-order buffer exceeds its cap, or at the end of input.
//!
//! Memory is bounded by `cap` bytes of out-of-order data per direction. Retransmitted
//! bytes already delivered are dropped (the first copy wins, as the receiver sees it).

use std::collections::BTreeMap;

use tcpdx_wire::{FrameNo, Timestamp};

/// Where a piece of the byte stream became available: the frame and its capture time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct At {
    /// Wireshark frame number.
    pub frame: FrameNo,
    /// Capture time.
    pub ts: Timestamp,
}

/// Receives one direction's bytes in sequence order.
pub trait ByteSink {
    /// The next `bytes` of the stream, available at `at`. `repaired`: they did not arrive
    /// in order (released from the out-of-order buffer, or carried by a retransmission
    /// that filled a hole), which Wireshark 4.0 does not dissect by default.
    fn data(&mut self, bytes: &[u8], at: At, repaired: bool);
    /// The next `len` bytes of the stream will never be seen.
    fn gap(&mut self, len: u64, at: At);
}

/// Counters of one direction's reassembly.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ReassemblyStats {
    /// Bytes delivered as data.
    pub delivered_bytes: u64,
    /// Number of gaps.
    pub gaps: u64,
    /// Bytes delivered as gaps.
    pub gap_bytes: u64,
    /// Times the out-of-order buffer hit its cap and a hole was given up.
    pub cap_hits: u64,
}

/// A segment waiting for the hole before it to be filled.
#[derive(Debug)]
struct Pending {
    data: Vec<u8>,
    /// Bytes of the segment beyond the captured ones (snaplen).
    missing_tail: u64,
    at: At,
}

impl Pending {
    fn len(&self) -> u64 {
        self.data.len() as u64 + self.missing_tail
    }
}

/// In-order delivery for one direction. See the module doc.
#[derive(Debug)]
pub struct Reassembler {
    /// Next sequence number to deliver; `None` until the first SYN or data segment.
    next: Option<u64>,
    pending: BTreeMap<u64, Pending>,
    pending_bytes: usize,
    cap: usize,
    /// Highest acknowledgement the peer sent for this direction.
    peer_ack: u64,
    /// Where the last delivered byte or gap became available.
    latest: Option<At>,
    stats: ReassemblyStats,
}

/// Largest hole an acknowledgement may declare at once: a larger jump is a broken ACK
/// field, not a capture drop.
const MAX_ACK_JUMP: u64 = 1 << 30;

impl Reassembler {
    /// A reassembler buffering at most `cap` bytes of out-of-order data.
    pub fn new(cap: usize) -> Self {
        Self {
            next: None,
            pending: BTreeMap::new(),
            pending_bytes: 0,
            cap,
            peer_ack: 0,
            latest: None,
            stats: ReassemblyStats::default(),
        }
    }

    /// Counters so far.
    pub fn stats(&self) -> ReassemblyStats {
        self.stats
    }

    /// Bytes buffered out of order right now.
    pub fn buffered(&self) -> usize {
        self.pending_bytes
    }

    /// The earliest capture time of the segments held out of order (ns), if any: bytes
    /// delivered later become available at it or after (see `available`).
    pub fn oldest_held_ts(&self) -> Option<i64> {
        self.pending.values().map(|p| p.at.ts.0).min()
    }

    /// True if every byte before `seq` was delivered and nothing is held out of order.
    pub fn delivered_up_to(&self, seq: u64) -> bool {
        self.pending.is_empty() && self.next.is_none_or(|n| i128::from(n) >= self.near(seq))
    }

    /// `seq`, a relative number from the core, as a position in this direction's stream.
    /// The core unwraps sequence numbers from the first segment it saw, so a retransmission
    /// of bytes sent before the capture began (and every segment after it) can come out
    /// 2^32 away from the acknowledgements: positions are taken at their 32-bit distance
    /// from the next byte to deliver, as TCP compares them. Negative: before the first
    /// byte seen.
    fn near(&self, seq: u64) -> i128 {
        match self.next {
            None => i128::from(seq),
            Some(next) => i128::from(next) + i128::from(seq.wrapping_sub(next) as u32 as i32),
        }
    }

    /// A SYN at relative sequence `seq`: data starts right after it.
    pub fn syn(&mut self, seq: u64) {
        if self.next.is_none() {
            self.next = Some(seq + 1);
        }
    }

    /// One segment: `len` bytes at `seq`, of which the first `captured.len()` were captured.
    pub fn segment(&mut self, seq: u64, len: u32, captured: &[u8], at: At, out: &mut dyn ByteSink) {
        if len == 0 {
            return;
        }
        let mut captured = captured.get(..len as usize).unwrap_or(captured);
        let pos = self.near(seq);
        let mut len = u64::from(len);
        let next = *self.next.get_or_insert(seq);
        if pos + i128::from(len) <= i128::from(next) {
            return; // everything already delivered (retransmission)
        }
        // Bytes before the first one seen (next > 0 here): only the rest is new.
        let seq = u64::try_from(pos).unwrap_or_else(|_| {
            let cut = pos.unsigned_abs() as u64;
            captured = captured.get(cut as usize..).unwrap_or_default();
            len -= cut;
            0
        });
        if seq > next {
            self.hold(seq, captured, len, at);
            self.resolve_acked_holes(out);
            if self.pending_bytes > self.cap {
                self.stats.cap_hits += 1;
                self.skip_first_hole(out);
            }
            return;
        }
        let repaired = seq < next || !self.pending.is_empty();
        self.deliver(seq, captured, len, at, repaired, out);
        self.drain(Some(at), out);
    }

    /// True if a segment of `len` bytes at `seq`, of which `captured` were captured,
    /// continues the stream with nothing held out of order, and the snap length cut it:
    /// [`Reassembler::segment`] would deliver its captured bytes, then one gap, and nothing
    /// else.
    pub fn continues_cut(&self, seq: u64, len: u32, captured: usize) -> bool {
        self.next.is_some_and(|n| i128::from(n) == self.near(seq))
            && self.pending.is_empty()
            && (captured as u64) < u64::from(len)
    }

    /// Such a segment (see [`Reassembler::continues_cut`]) whose bytes the sink had no use
    /// for: the stream and the counters move on as [`Reassembler::segment`] would move them,
    /// without delivering anything.
    pub fn pass_cut(&mut self, len: u32, captured: usize, at: At) {
        let Some(next) = self.next else { return };
        let (cap, len) = (captured as u64, u64::from(len));
        self.available(at);
        self.stats.delivered_bytes += cap;
        self.stats.gaps += 1;
        self.stats.gap_bytes += len.saturating_sub(cap);
        self.next = Some(next + len);
    }

    /// [`Reassembler::peer_acked`] when nothing is held out of order (there is then nothing
    /// to deliver, so no sink): returns false, changing nothing, if something is.
    pub fn peer_acked_idle(&mut self, ack: u64) -> bool {
        if !self.pending.is_empty() {
            return false;
        }
        if let Some(next) = self.next
            && let Ok(ack) = u64::try_from(self.near(ack))
            && ack > self.peer_ack
            && ack.saturating_sub(next) <= MAX_ACK_JUMP
        {
            self.peer_ack = ack;
        }
        true
    }

    /// The peer acknowledged up to `ack` in this direction's sequence space.
    pub fn peer_acked(&mut self, ack: u64, out: &mut dyn ByteSink) {
        let Some(next) = self.next else { return };
        let Ok(ack) = u64::try_from(self.near(ack)) else {
            return;
        };
        if ack > self.peer_ack && ack.saturating_sub(next) <= MAX_ACK_JUMP {
            self.peer_ack = ack;
            self.resolve_acked_holes(out);
        }
    }

    /// End of input: buffered segments are delivered behind gaps.
    pub fn finish(&mut self, out: &mut dyn ByteSink) {
        while !self.pending.is_empty() {
            self.skip_first_hole(out);
        }
    }

    /// Buffers an out-of-order segment (a longer copy at the same start replaces a shorter).
    fn hold(&mut self, seq: u64, captured: &[u8], len: u64, at: At) {
        let p = Pending {
            data: captured.to_vec(),
            missing_tail: len - captured.len() as u64,
            at,
        };
        match self.pending.get(&seq) {
            Some(old) if old.len() >= len => {}
            Some(old) => {
                self.pending_bytes -= old.data.len();
                self.pending_bytes += p.data.len();
                self.pending.insert(seq, p);
            }
            None => {
                self.pending_bytes += p.data.len();
                self.pending.insert(seq, p);
            }
        }
    }

    /// Delivers the part of `[seq, seq+len)` beyond `next` (requires `seq <= next`).
    fn deliver(
        &mut self,
        seq: u64,
        captured: &[u8],
        len: u64,
        at: At,
        repaired: bool,
        out: &mut dyn ByteSink,
    ) {
        let next = self.next.unwrap_or(seq);
        let skip = next - seq;
        let end = seq + len;
        if end <= next {
            return;
        }
        let at = self.available(at);
        let cap_len = captured.len() as u64;
        if skip < cap_len {
            let bytes = captured.get(skip as usize..).unwrap_or_default();
            self.stats.delivered_bytes += bytes.len() as u64;
            out.data(bytes, at, repaired);
        }
        let tail_from = skip.max(cap_len);
        if len > tail_from {
            self.gap(len - tail_from, at, out);
        }
        self.next = Some(end);
    }

    /// Delivers buffered segments that now continue the stream. `release` is the frame that
    /// filled the hole (the bytes became available then, out of order); `None`: the hole
    /// was declared lost, each segment keeps its own frame and counts as repaired only if
    /// it arrived before bytes ahead of it (a segment after a capture drop arrived in order:
    /// Wireshark dissects it).
    fn drain(&mut self, release: Option<At>, out: &mut dyn ByteSink) {
        while let Some(entry) = self.pending.first_entry() {
            let next = self.next.unwrap_or(0);
            if *entry.key() > next {
                break;
            }
            let seq = *entry.key();
            let p = entry.remove();
            self.pending_bytes -= p.data.len();
            let len = p.len();
            let repaired = release.is_some() || self.latest.is_some_and(|l| l.frame > p.at.frame);
            self.deliver(seq, &p.data, len, release.unwrap_or(p.at), repaired, out);
        }
    }

    /// Declares the hole before the first buffered segment lost and delivers what follows.
    fn skip_first_hole(&mut self, out: &mut dyn ByteSink) {
        let Some((&seq, p)) = self.pending.first_key_value() else {
            return;
        };
        let at = p.at;
        let next = self.next.unwrap_or(seq);
        if seq > next {
            self.gap(seq - next, at, out);
            self.next = Some(seq);
        }
        self.drain(None, out);
    }

    /// Holes the peer has acknowledged were received but never captured.
    fn resolve_acked_holes(&mut self, out: &mut dyn ByteSink) {
        while let Some((&seq, _)) = self.pending.first_key_value() {
            if seq > self.peer_ack {
                break;
            }
            self.skip_first_hole(out);
        }
    }

    /// When bytes held since `at` become available: not before the bytes ahead of them in
    /// the stream (a segment buffered early but released after a later frame filled or
    /// skipped the hole before it belongs to that later frame).
    fn available(&mut self, at: At) -> At {
        let at = match self.latest {
            Some(l) if l.frame > at.frame => l,
            _ => at,
        };
        self.latest = Some(at);
        at
    }

    fn gap(&mut self, len: u64, at: At, out: &mut dyn ByteSink) {
        let at = self.available(at);
        self.stats.gaps += 1;
        self.stats.gap_bytes += len;
        out.gap(len, at);
    }
}

tcpdx_core::codec_struct!(At { frame, ts });

#[cfg(test)]
mod tests {
    use super::*;

    /// Records what was delivered: bytes, and gaps as `None` runs.
    #[derive(Default)]
    struct Rec {
        out: Vec<Option<u8>>,
        frames: Vec<u64>,
        repaired: Vec<bool>,
    }
    impl ByteSink for Rec {
        fn data(&mut self, bytes: &[u8], at: At, repaired: bool) {
            self.out.extend(bytes.iter().map(|&b| Some(b)));
            self.frames.push(at.frame.0);
            self.repaired.push(repaired);
        }
        fn gap(&mut self, len: u64, at: At) {
            self.out.extend(std::iter::repeat_n(None, len as usize));
            self.frames.push(at.frame.0);
        }
    }

    fn at(n: u64) -> At {
        At {
            frame: FrameNo(n),
            ts: Timestamp(n as i64 * 1000),
        }
    }

    fn stream(n: usize) -> Vec<u8> {
        (0..n).map(|i| (i * 7 + 3) as u8).collect()
    }

    fn bytes_of(r: &Rec) -> Vec<u8> {
        r.out.iter().map(|b| b.expect("no gap")).collect()
    }

    #[test]
    fn in_order_segments_pass_through() {
        let s = stream(300);
        let mut r = Reassembler::new(1 << 20);
        let mut rec = Rec::default();
        r.syn(0);
        r.segment(1, 100, &s[..100], at(1), &mut rec);
        r.segment(101, 200, &s[100..], at(2), &mut rec);
        assert_eq!(bytes_of(&rec), s);
        assert_eq!(r.stats().delivered_bytes, 300);
    }

    #[test]
    fn retransmission_is_delivered_once() {
        let s = stream(200);
        let mut r = Reassembler::new(1 << 20);
        let mut rec = Rec::default();
        r.segment(1000, 100, &s[..100], at(1), &mut rec);
        r.segment(1000, 100, &s[..100], at(2), &mut rec);
        r.segment(1050, 150, &s[50..], at(3), &mut rec); // overlapping retransmission
        assert_eq!(bytes_of(&rec), s);
        assert_eq!(rec.repaired, vec![false, true]);
    }

    #[test]
    fn out_of_order_is_released_by_the_filling_segment() {
        let s = stream(300);
        let mut r = Reassembler::new(1 << 20);
        let mut rec = Rec::default();
        r.segment(0, 100, &s[..100], at(1), &mut rec);
        r.segment(200, 100, &s[200..], at(2), &mut rec);
        assert_eq!(rec.out.len(), 100);
        assert_eq!(r.buffered(), 100);
        r.segment(100, 100, &s[100..200], at(3), &mut rec);
        assert_eq!(bytes_of(&rec), s);
        assert_eq!(rec.frames, vec![1, 3, 3]);
        assert_eq!(rec.repaired, vec![false, true, true]);
        assert_eq!(r.buffered(), 0);
    }

    #[test]
    fn bytes_held_early_become_available_with_the_bytes_before_them() {
        // Found by the `storage` fuzz target: frame 1 arrives ahead of a hole, frame 2 fills
        // part of it, the peer's ACK declares the rest lost. Frame 1's bytes follow frame
        // 2's in the stream, so they cannot be available before frame 2 (a message spanning
        // both would otherwise end before it starts).
        let s = stream(300);
        let mut r = Reassembler::new(1 << 20);
        let mut rec = Rec::default();
        r.syn(0);
        r.segment(201, 100, &s[200..], at(1), &mut rec);
        r.segment(1, 100, &s[..100], at(2), &mut rec);
        r.peer_acked(301, &mut rec);
        assert_eq!(rec.out.len(), 300);
        assert_eq!(rec.frames, vec![2, 2, 2], "data, gap, released data");
    }

    #[test]
    fn snaplen_cut_is_a_gap() {
        let s = stream(100);
        let mut r = Reassembler::new(1 << 20);
        let mut rec = Rec::default();
        r.segment(0, 100, &s[..60], at(1), &mut rec);
        r.segment(100, 10, &[], at(2), &mut rec);
        assert_eq!(rec.out.len(), 110);
        assert!(rec.out[..60].iter().all(Option::is_some));
        assert!(rec.out[60..].iter().all(Option::is_none));
        assert_eq!(r.stats().gap_bytes, 50);
    }

    #[test]
    fn a_cut_segment_passed_leaves_what_delivering_it_leaves() {
        let s = stream(400);
        let (mut fed, mut passed) = (Reassembler::new(1 << 20), Reassembler::new(1 << 20));
        let (mut rec_fed, mut rec_passed) = (Rec::default(), Rec::default());
        fed.syn(0);
        passed.syn(0);
        fed.segment(1, 100, &s[..40], at(5), &mut rec_fed);
        assert!(passed.continues_cut(1, 100, 40));
        passed.pass_cut(100, 40, at(5));
        assert_eq!(fed.stats(), passed.stats());
        // Both go on from the same place, and date what follows alike (not before frame 5).
        fed.segment(101, 100, &s[100..200], at(4), &mut rec_fed);
        passed.segment(101, 100, &s[100..200], at(4), &mut rec_passed);
        assert_eq!(rec_passed.out, rec_fed.out[100..]);
        assert_eq!(rec_passed.frames, rec_fed.frames[2..]);
        assert_eq!(fed.stats(), passed.stats());
        // Only an in-order segment that was cut, with nothing held, continues that way.
        assert!(!passed.continues_cut(201, 100, 100), "whole");
        assert!(!passed.continues_cut(251, 100, 10), "beyond a hole");
        assert!(!passed.continues_cut(101, 100, 10), "already delivered");
        passed.segment(301, 100, &s[300..], at(3), &mut rec_passed);
        assert!(
            !passed.continues_cut(201, 100, 10),
            "fills the hole before held data, which it releases"
        );
    }

    #[test]
    fn acked_hole_is_a_capture_gap() {
        let s = stream(300);
        let mut r = Reassembler::new(1 << 20);
        let mut rec = Rec::default();
        r.segment(0, 100, &s[..100], at(1), &mut rec);
        r.segment(200, 100, &s[200..], at(3), &mut rec);
        r.peer_acked(150, &mut rec); // not past the buffered segment yet
        assert_eq!(rec.out.len(), 100);
        r.peer_acked(300, &mut rec);
        assert_eq!(rec.out.len(), 300);
        assert!(rec.out[100..200].iter().all(Option::is_none));
        assert_eq!(
            &rec.out[200..],
            &s[200..].iter().map(|&b| Some(b)).collect::<Vec<_>>()
        );
        // The released segment keeps its own frame, and arrived in order after the drop.
        assert_eq!(rec.frames, vec![1, 3, 3]);
        assert_eq!(rec.repaired, vec![false, false]);
    }

    #[test]
    fn after_a_declared_hole_only_segments_that_overtook_others_are_repaired() {
        // A hole at 100..200 never filled; 300..400 arrives before 200..300.
        let s = stream(400);
        let mut r = Reassembler::new(1 << 20);
        let mut rec = Rec::default();
        r.segment(0, 100, &s[..100], at(1), &mut rec);
        r.segment(300, 100, &s[300..], at(2), &mut rec);
        r.segment(200, 100, &s[200..300], at(3), &mut rec);
        r.peer_acked(400, &mut rec);
        assert_eq!(rec.out.len(), 400);
        assert!(rec.out[100..200].iter().all(Option::is_none));
        assert_eq!(
            rec.frames,
            vec![1, 3, 3, 3],
            "data, gap, 200.., 300.. (after 3)"
        );
        assert_eq!(rec.repaired, vec![false, false, true]);
    }

    #[test]
    fn ack_before_the_data_declares_the_hole_when_data_arrives() {
        let s = stream(300);
        let mut r = Reassembler::new(1 << 20);
        let mut rec = Rec::default();
        r.segment(0, 100, &s[..100], at(1), &mut rec);
        r.peer_acked(300, &mut rec);
        assert_eq!(rec.out.len(), 100);
        r.segment(200, 100, &s[200..], at(4), &mut rec);
        assert_eq!(rec.out.len(), 300);
        assert_eq!(r.stats().gaps, 1);
    }

    #[test]
    fn an_ack_with_nothing_held_needs_no_sink() {
        let s = stream(410);
        let mut r = Reassembler::new(1 << 20);
        let mut rec = Rec::default();
        r.segment(0, 100, &s[..100], at(1), &mut rec);
        assert!(r.peer_acked_idle(300));
        // As if `peer_acked` had taken it: the hole up to the ACK is declared at once.
        r.segment(200, 100, &s[200..300], at(4), &mut rec);
        assert_eq!(rec.out.len(), 300);
        assert_eq!(r.stats().gaps, 1);
        // With a segment held, the ACK may release it: it needs the sink.
        r.segment(400, 10, &s[400..], at(5), &mut rec);
        assert!(!r.peer_acked_idle(410));
        assert_eq!(rec.out.len(), 300);
        r.peer_acked(410, &mut rec);
        assert_eq!(rec.out.len(), 410);
    }

    #[test]
    fn cap_bounds_memory() {
        let s = stream(10_000);
        let mut r = Reassembler::new(1000);
        let mut rec = Rec::default();
        r.segment(0, 100, &s[..100], at(1), &mut rec);
        // Hole at 100..200, then 10 segments of 100 bytes: the cap is hit.
        for i in 2..20u64 {
            let a = (i * 100) as usize;
            r.segment(i * 100, 100, &s[a..a + 100], at(i), &mut rec);
            assert!(r.buffered() <= 1000);
        }
        assert_eq!(r.stats().cap_hits, 1);
        assert_eq!(rec.out.len(), 2000);
        assert!(rec.out[100..200].iter().all(Option::is_none));
    }

    #[test]
    fn finish_flushes_behind_gaps() {
        let s = stream(400);
        let mut r = Reassembler::new(1 << 20);
        let mut rec = Rec::default();
        r.segment(0, 100, &s[..100], at(1), &mut rec);
        r.segment(300, 100, &s[300..], at(2), &mut rec);
        r.segment(200, 50, &s[200..250], at(3), &mut rec);
        r.finish(&mut rec);
        assert_eq!(rec.out.len(), 400);
        assert_eq!(r.stats().gaps, 2);
        assert_eq!(r.stats().gap_bytes, 150);
    }

    #[test]
    fn numbers_2_to_the_32_away_are_the_same_place() {
        // The core unwraps from the first segment seen: a retransmission of bytes sent
        // before it (at -50) comes out at 2^32 - 50, and the segments after it 2^32 ahead,
        // while the ACKs stay in the first numbering.
        const WRAP: u64 = 1 << 32;
        let s = stream(300);
        let mut r = Reassembler::new(1 << 20);
        let mut rec = Rec::default();
        r.segment(100, 100, &s[100..200], at(1), &mut rec);
        r.segment(WRAP - 50, 50, &[9; 50], at(2), &mut rec);
        assert_eq!(r.buffered(), 0, "old bytes, not a 4 GB hole");
        r.segment(WRAP + 250, 50, &s[250..], at(3), &mut rec);
        assert_eq!(r.buffered(), 50);
        // The hole at 200..250, acknowledged in the first numbering.
        r.peer_acked(300, &mut rec);
        assert_eq!(rec.out.len(), 200);
        assert!(rec.out[100..150].iter().all(Option::is_none));
        assert_eq!(r.stats().gap_bytes, 50);
        assert!(r.delivered_up_to(WRAP + 300) && r.delivered_up_to(300));
        assert!(!r.delivered_up_to(301));
        // A segment straddling the first byte seen delivers only what follows it.
        let mut r = Reassembler::new(1 << 20);
        let mut rec = Rec::default();
        r.segment(10, 10, &s[10..20], at(1), &mut rec);
        r.segment(WRAP - 5, 35, &[7; 35], at(2), &mut rec);
        assert_eq!(bytes_of(&rec), [&s[10..20], &[7u8; 10][..]].concat());
        assert!(r.continues_cut(WRAP + 30, 10, 5) && r.continues_cut(30, 10, 5));
    }

    #[test]
    fn absurd_ack_is_ignored() {
        let s = stream(100);
        let mut r = Reassembler::new(1 << 20);
        let mut rec = Rec::default();
        r.segment(0, 50, &s[..50], at(1), &mut rec);
        r.segment(80, 20, &s[80..], at(2), &mut rec);
        r.peer_acked(u64::MAX / 2, &mut rec);
        assert_eq!(rec.out.len(), 50);
    }
}
