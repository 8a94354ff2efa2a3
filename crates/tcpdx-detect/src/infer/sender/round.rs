//! Round trips: the segments the sender sends between two ACKs one round trip apart.
//!
//! States: no round open (`round.active` false) or one open since its first segment,
//! waiting for the ACK of the data sent when it opened (`end_seq`). A data segment opens a
//! round when none is open and is counted in the open one; an ACK at or above `end_seq` at
//! least [`ROUND_MIN_RTT_SHARE`] of the path round trip after the round's start closes it
//! and opens the next if data is still in flight.
//!
//! A retransmission timeout closes the open round (the silence ends it) and opens one
//! that ends at the ACK of the retransmission; until the ACK covers what was in flight at
//! the timeout (the kernel's Loss state), each round ends at the ACK of the highest byte
//! sent since, so the window's collapse to one segment and its regrowth (1, 2, 4 ...)
//! show round by round instead of as one long round.
//!
//! The flight of each segment is read two ways, the larger kept: the capture's own
//! (exact next to the sender) and the echo's ([`Echoes`]: from anywhere on the path, with
//! TCP timestamps), so that a capture next to the receiver or in the middle sees the
//! sender's window and not the few segments between it and the receiver.

use std::collections::VecDeque;

use super::{MAX_SAMPLE_FRAMES, SenderState, push_capped};
use tcpdx_core::{AnalysisFlags as F, SegmentAnalysis, SegmentDetail};

/// Rounds kept per direction (tcpdx choice: a 1-hour transfer at 36 ms RTT).
pub const MAX_ROUNDS: usize = 100_000;
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
/// A burst (a segment this long after the previous one) that starts this long after the
/// latest ACK was not released by an ACK: a pacing timer's (tcpdx choice: an ACK-clocked
/// Linux sender answers an ACK within tens of microseconds; BBR's pacing spaces its bursts
/// by about a millisecond's worth of data).
pub const PACE_GAP_NS: i64 = 200_000;
/// Bursts a round needs before its departures say whether it is paced (tcpdx choice: a few
/// ACK-clocked bursts late behind a delayed ACK would otherwise look paced).
pub const PACED_MIN_BURSTS: u32 = 4;

/// The peer's ACKs remembered for the echo's flight (tcpdx choice: a second of round trip
/// at Linux's 1 ms timestamp clock; older ones are dropped first).
pub const MAX_ECHOES: usize = 1024;

/// The peer's ACKs by TSval, oldest first: each TSval with the highest ACK that carried it
/// (a run of TSvals with the same ACK is one entry). A data segment echoing TSval `e` was
/// sent once the sender had an ACK carrying `e` and none carrying a later one, so its end
/// minus the highest ACK carrying `e` or earlier is the sender's flight when it sent it
/// (the sender's own view, not the capture's): the largest of a round is the window that
/// let it out, from wherever on the path the capture sits.
#[derive(Clone, Debug, Default)]
pub(super) struct Echoes {
    acks: VecDeque<(u32, u64)>,
}

/// `a` is before `b` on the wrapping 32-bit timestamp clock.
#[inline]
fn ts_before(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) < 0
}

impl Echoes {
    /// The peer's ACK of `ack` carrying TSval `tsval`.
    #[inline]
    pub(super) fn note(&mut self, tsval: u32, ack: u64) {
        match self.acks.back_mut() {
            Some((t, a)) if *t == tsval || *a >= ack => {
                // The same tick, or no new data acknowledged: the entry stands for both.
                *a = (*a).max(ack);
            }
            _ => {
                if self.acks.len() >= MAX_ECHOES {
                    self.acks.pop_front();
                }
                self.acks.push_back((tsval, ack));
            }
        }
    }

    /// The highest ACK the sender had when it sent a segment echoing `tsecr` (none if the
    /// capture did not see the ACK it echoes). Echoes only move forward, so older entries
    /// are dropped as they are passed.
    #[inline]
    pub(super) fn acked_at(&mut self, tsecr: u32) -> Option<u64> {
        while let Some(&(t, _)) = self.acks.get(1) {
            if ts_before(tsecr, t) {
                break;
            }
            self.acks.pop_front();
        }
        let &(t, a) = self.acks.front()?;
        (!ts_before(tsecr, t)).then_some(a)
    }
}

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
    /// The round ended in a retransmission timeout or retransmitted after one (the
    /// sender's Loss state).
    pub timeout: bool,
    /// The sender was in loss recovery at the round's end: an episode with a retransmission
    /// was open until the ACK that closed the round (the kernel's Recovery state then).
    pub recovery_at_end: bool,
    /// The receiver's advertised window at the end of the round (bytes).
    pub rcv_window: u64,
    /// Largest number of bytes in flight (sent, not yet acknowledged, as the capture sees
    /// it) when a segment of the round was sent: the sender's effective window.
    pub max_in_flight: u64,
    /// Most of the round's bursts (at least [`PACED_MIN_BURSTS`]) left the sender neither
    /// right after an ACK nor right after another segment ([`PACE_GAP_NS`]): a pacing rate,
    /// not the ACK clock, released them.
    pub paced: bool,
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

/// The round being counted.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct RoundAcc {
    pub(super) active: bool,
    start: i64,
    end_seq: u64,
    ack_at_start: u64,
    pkts: u32,
    bytes: u64,
    retx: u32,
    rwnd_limited: bool,
    in_recovery: bool,
    timeout: bool,
    max_in_flight: u64,
    /// Bursts started in the round, and those not released by an ACK ([`PACE_GAP_NS`]).
    bursts: u32,
    paced_bursts: u32,
    /// After a timeout: what was in flight then (its ACK ends the Loss state), 0 outside.
    loss_point: u64,
    /// After a timeout: the highest sequence end sent since.
    loss_high: u64,
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
        self.timeout = self.loss_point != 0;
        self.max_in_flight = 0;
        self.bursts = 0;
        self.paced_bursts = 0;
    }
}

impl SenderState {
    /// The data segment `a` (ending at `end`, `retx` if a retransmission) counted in the
    /// open round, which it opens if none is.
    #[inline]
    pub(super) fn count_in_round(&mut self, a: &SegmentAnalysis, end: u64, retx: bool) {
        // A round opens with the first segment sent while none is open; after a timeout
        // it ends at the ACK of that segment, not of everything sent before.
        if self.round.loss_point != 0 {
            self.round.loss_high = self.round.loss_high.max(end);
        }
        if !self.round.active {
            let end_seq = if self.round.loss_point != 0 {
                end
            } else {
                end.max(self.snd_nxt)
            };
            self.round.open(a.ts.0, end_seq, self.snd_una);
        }
        self.round.pkts += 1;
        self.round.bytes += u64::from(a.len);
        let ts = a.ts.0;
        if ts - self.last_send > PACE_GAP_NS {
            self.round.bursts += 1;
            self.round.paced_bursts += u32::from(ts - self.last_ack > PACE_GAP_NS);
        }
        if !retx {
            let bif = a.bytes_in_flight.map_or(0, u64::from);
            let echo = if self.far { self.echo_flight(end) } else { 0 };
            self.round.max_in_flight = self.round.max_in_flight.max(bif.max(echo));
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
    }

    /// The sender's flight as it sent the data ending at `end`, from the ACK its TSecr
    /// echoes ([`Echoes`]); 0 without timestamps or that ACK.
    #[inline]
    fn echo_flight(&mut self, end: u64) -> u64 {
        let Some(tsecr) = self.data_tsecr else {
            return 0;
        };
        match self.echoes.acked_at(tsecr) {
            Some(acked) => {
                self.echo_flights += 1;
                end.saturating_sub(acked)
            }
            None => 0,
        }
    }

    /// The peer's segment `a` (ACK flag set): remembers its TSval with its ACK (or the
    /// highest byte it SACKs), if it is
    /// one this side will echo (it starts at or before what this side has acknowledged:
    /// RFC 7323 and Linux's `tcp_replace_ts_recent` take no TSval from beyond it).
    #[inline]
    pub(super) fn note_echo(&mut self, a: &SegmentAnalysis, d: &SegmentDetail) {
        if let Some((tsval, _)) = d.timestamps
            && self.far
            && a.seq <= self.ack_sent
        {
            // Data the receiver holds above a hole is out of the sender's flight too.
            let sacked = d.sack_blocks().iter().fold(a.ack, |m, b| m.max(b.1));
            self.echoes.note(tsval, sacked);
        }
    }

    /// The timeout retransmission `a` (ending at `end`): the open round ends now, and the
    /// sender is in its Loss state until the ACK covers what it had sent (`snd_nxt`).
    #[inline(never)]
    pub(super) fn round_timeout(&mut self, a: &SegmentAnalysis, end: u64) {
        let ts = a.ts.0;
        if self.round.active && self.round.pkts > 0 {
            self.round.timeout = true;
            let r = self.round_until(ts, self.snd_una, self.rcv_window.unwrap_or(0));
            if self.rounds.len() < MAX_ROUNDS {
                self.rounds.push(&r);
            }
        }
        self.round.loss_point = self.snd_nxt.max(end);
        self.round.loss_high = end;
        self.round.open(ts, end, self.snd_una);
    }

    /// The open round as it ends at `ts` with `ack` acknowledged and `window` advertised.
    #[inline]
    fn round_until(&self, ts: i64, ack: u64, window: u64) -> Round {
        Round {
            start: self.round.start,
            end: ts,
            pkts: self.round.pkts,
            bytes: self.round.bytes,
            acked: ack.saturating_sub(self.round.ack_at_start),
            retx: self.round.retx,
            rwnd_limited: self.round.rwnd_limited,
            in_recovery: self.round.in_recovery || self.episode.is_some(),
            timeout: self.round.timeout,
            recovery_at_end: self.in_recovery_state(ts),
            rcv_window: window,
            max_in_flight: self.round.max_in_flight,
            paced: self.round.bursts >= PACED_MIN_BURSTS
                && 2 * self.round.paced_bursts > self.round.bursts,
        }
    }

    /// Whether the sender was in its Recovery state just before the event at `ts`: an
    /// episode had retransmitted (duplicate ACKs alone are the kernel's Disorder), or the
    /// ACK at `ts` has just ended such an episode (the kernel leaves Recovery on it: the
    /// round it closes was sent in Recovery).
    #[inline]
    fn in_recovery_state(&self, ts: i64) -> bool {
        self.episode.as_ref().is_some_and(|e| e.retx > 0) || self.last_episode_end == Some(ts)
    }

    /// The ACK `a` of the peer: closes the open round if it covers the round's first data
    /// and the round lasted long enough to be one.
    #[inline]
    pub(super) fn close_round(&mut self, a: &SegmentAnalysis, path_rtt: i64) {
        let (ts, ack) = (a.ts.0, a.ack);
        let min_round = (path_rtt as f64 * ROUND_MIN_RTT_SHARE) as i64;
        if self.round.loss_point != 0 && ack >= self.round.loss_point {
            self.round.loss_point = 0;
        }
        if self.round.active && ack >= self.round.end_seq && ts - self.round.start >= min_round {
            let r = self.round_until(ts, ack, a.window);
            // A round in which nothing was sent says nothing about the window.
            if r.pkts > 0 && self.rounds.len() < MAX_ROUNDS {
                self.rounds.push(&r);
            }
            // In the Loss state the sender's front is what it resent, not `snd_nxt`.
            let front = if self.round.loss_point != 0 {
                self.round.loss_high
            } else {
                self.snd_nxt
            };
            if front > ack {
                self.round.open(ts, front, ack);
            } else {
                // The other fields are read only while a round is open.
                self.round.active = false;
            }
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::infer::sender::script::{Feed, MS, MSS, T0, ack_row, row};
    use tcpdx_core::Dir;

    /// The shortest round the code accepts for `rtt`, as it computes it.
    fn share(rtt: i64, s: f64) -> i64 {
        (rtt as f64 * s) as i64
    }

    #[test]
    fn an_ack_closes_a_round_only_after_half_the_path_rtt() {
        let rtt = 10 * MS;
        let min = share(rtt, ROUND_MIN_RTT_SHARE);
        for (after, rounds) in [(min - 1, 0), (min, 1), (min + 1, 1)] {
            let mut f = Feed::new(rtt);
            let end = f.burst(T0, 1, 4);
            f.ack(T0 + after, end);
            assert_eq!(
                f.s.rounds.len(),
                rounds,
                "ACK {after} ns after the round's start"
            );
            if rounds == 1 {
                let r = f.s.rounds.iter().next().unwrap();
                assert_eq!((r.pkts, r.bytes, r.acked), (4, 4000, 4000));
                assert_eq!(r.duration(), after);
            }
        }
    }

    #[test]
    fn the_delivery_rate_needs_rounds_of_four_segments() {
        let rtt = 10 * MS;
        for (pkts, counted) in [(RATE_MIN_PKTS - 1, false), (RATE_MIN_PKTS, true), (5, true)] {
            let mut f = Feed::new(0);
            let end = f.burst(T0, 1, pkts);
            f.ack(T0 + rtt, end);
            let want = if counted {
                f64::from(pkts * MSS) * 8e9 / rtt as f64
            } else {
                0.0
            };
            assert_eq!(f.s.max_delivery_bps(rtt), want, "{pkts} segments");
        }
    }

    #[test]
    fn the_delivery_rate_needs_rounds_of_most_of_a_round_trip() {
        let rtt = 10 * MS;
        let min = share(rtt, RATE_MIN_RTT_SHARE);
        for (dur, counted) in [(min - 1, false), (min, true), (min + 1, true)] {
            let mut f = Feed::new(0);
            let end = f.burst(T0, 1, 4);
            f.ack(T0 + dur, end);
            assert_eq!(f.s.rounds.len(), 1);
            assert_eq!(
                f.s.max_delivery_bps(rtt) > 0.0,
                counted,
                "round of {dur} ns"
            );
        }
    }

    #[test]
    fn a_round_is_window_limited_when_one_more_segment_would_overfill_the_window() {
        let window = 10_000;
        let fits = window - u64::from(MSS);
        for (in_flight, limited) in [(fits - 1, false), (fits, false), (fits + 1, true)] {
            let mut f = Feed::new(0);
            let mut a = ack_row(T0, 1);
            a.window = window;
            f.receive(a, &[]);
            let mut d = row(T0 + MS, Dir::ClientToServer, 1, 1, MSS);
            d.bytes_in_flight = Some(in_flight as u32);
            f.send(d);
            f.ack(T0 + 11 * MS, 1001);
            let r = f.s.rounds.iter().next().unwrap();
            assert_eq!(r.rwnd_limited, limited, "{in_flight} bytes in flight");
            assert_eq!(r.max_in_flight, in_flight);
        }
    }

    #[test]
    fn an_ack_short_of_the_rounds_first_data_leaves_it_open() {
        let mut f = Feed::new(0);
        f.burst(T0, 1, 3);
        f.ack(T0 + 10 * MS, 1000);
        assert_eq!(f.s.rounds.len(), 0, "one byte short of the first segment");
        f.ack(T0 + 11 * MS, 1001);
        assert_eq!(f.s.rounds.len(), 1);
        // Data still in flight: the next round opened at that ACK, until the ACK of what
        // was in flight then.
        f.data(T0 + 12 * MS, 3001, MSS, 0);
        f.ack(T0 + 21 * MS, 3000);
        assert_eq!(f.s.rounds.len(), 1);
        f.ack(T0 + 22 * MS, 3001);
        let second = f.s.rounds.iter().nth(1).unwrap();
        assert_eq!(
            (second.start, second.pkts, second.acked),
            (T0 + 11 * MS, 1, 2000)
        );
        // Nothing was sent in the third round: not kept.
        f.ack(T0 + 40 * MS, 4001);
        assert_eq!(f.s.rounds.len(), 2);
    }

    #[test]
    fn after_a_timeout_each_retransmission_round_is_its_own() {
        use tcpdx_core::AnalysisFlags as F;
        let rtt = 10 * MS;
        let mut f = Feed::new(rtt);
        // Ten segments; the first ACK closes the first round, then all else is lost.
        let end = f.burst(T0, 1, 10);
        f.ack(T0 + rtt, 1001);
        assert_eq!(f.s.rounds.len(), 1);
        // The timeout: one segment, its ACK, then two, then four.
        let t = T0 + rtt + 300 * MS;
        f.data(t, 1001, MSS, F::RETRANSMISSION);
        f.ack(t + rtt, 2001);
        f.data(t + rtt, 2001, MSS, F::RETRANSMISSION);
        f.data(t + rtt, 3001, MSS, F::RETRANSMISSION);
        f.ack(t + 2 * rtt, 4001);
        for i in 0..4 {
            f.data(
                t + 2 * rtt,
                4001 + i * u64::from(MSS),
                MSS,
                F::RETRANSMISSION,
            );
        }
        f.ack(t + 3 * rtt, end);
        let got: Vec<(u32, bool)> = f.s.rounds.iter().map(|r| (r.pkts, r.timeout)).collect();
        // The round open at the timeout ends there (no segment of it was sent since its
        // start: kept only when it sent one).
        assert_eq!(got, [(10, false), (1, true), (2, true), (4, true)]);
        let last = f.s.rounds.iter().last().unwrap();
        assert_eq!((last.start, last.end), (t + 2 * rtt, t + 3 * rtt));
        // The ACK of all that was in flight at the timeout ends the Loss state.
        f.data(t + 3 * rtt, end, MSS, 0);
        f.ack(t + 4 * rtt, end + u64::from(MSS));
        assert!(!f.s.rounds.iter().last().unwrap().timeout);
    }

    #[test]
    fn a_round_is_paced_when_most_bursts_leave_between_acks() {
        // PACED_MIN_BURSTS segments spaced by `gap`, no ACK between: bursts of their own
        // only above PACE_GAP_NS.
        for (gap, paced) in [(PACE_GAP_NS, false), (PACE_GAP_NS + 1, true)] {
            let mut f = Feed::new(10 * MS);
            let mut seq = 1;
            for i in 0..i64::from(PACED_MIN_BURSTS) {
                f.data(T0 + i * gap, seq, MSS, 0);
                seq += u64::from(MSS);
            }
            f.ack(T0 + 20 * MS, seq);
            let r = f.s.rounds.iter().next().unwrap();
            assert_eq!(r.paced, paced, "bursts {gap} ns apart");
        }
        // One burst fewer than PACED_MIN_BURSTS: too few to say.
        let mut f = Feed::new(10 * MS);
        for i in 0..i64::from(PACED_MIN_BURSTS - 1) {
            f.data(T0 + i * MS, 1 + i as u64 * u64::from(MSS), MSS, 0);
        }
        f.ack(T0 + 20 * MS, 1 + u64::from(3 * MSS));
        assert!(!f.s.rounds.iter().next().unwrap().paced);
    }

    #[test]
    fn bursts_that_follow_acks_are_the_ack_clock() {
        // Bursts a millisecond apart, each 10 µs after an ACK (of nothing new), and the
        // same bursts without the ACKs.
        for (acks, paced) in [(true, false), (false, true)] {
            let mut f = Feed::new(10 * MS);
            let mut seq = 1;
            for i in 0..i64::from(PACED_MIN_BURSTS) + 2 {
                let t = T0 + i * MS;
                if acks {
                    f.ack(t, 1);
                }
                f.data(t + 10_000, seq, MSS, 0);
                seq += u64::from(MSS);
            }
            f.ack(T0 + 20 * MS, seq);
            let r = f.s.rounds.iter().next().unwrap();
            assert_eq!(r.paced, paced, "ACKs before the bursts: {acks}");
        }
    }

    #[test]
    fn a_round_ends_in_recovery_after_a_retransmission_until_the_episode_ends() {
        use tcpdx_core::AnalysisFlags as F;
        let rtt = 10 * MS;
        // (retransmit, ACK closing the round) -> Recovery at the round's end.
        for (retx, to_end, want) in [
            // Duplicate ACKs alone: the kernel's Disorder, not Recovery.
            (false, false, false),
            // A retransmission, the episode still open at the round's end.
            (true, false, true),
            // The ACK that closes the round also ends the episode: sent in Recovery.
            (true, true, true),
        ] {
            let mut f = Feed::new(rtt);
            let end = f.burst(T0, 1, 10);
            f.dupack(T0 + 6 * MS, 1, 1, &[(1001, 2001)]);
            if retx {
                f.data(T0 + 6 * MS + 100_000, 1, MSS, F::RETRANSMISSION);
            }
            f.ack(T0 + rtt, if to_end { end } else { 1001 });
            let r = f.s.rounds.iter().next().unwrap();
            assert_eq!(
                r.recovery_at_end, want,
                "retransmitted {retx}, to the end {to_end}"
            );
        }
    }

    #[test]
    fn an_echo_gives_the_ack_the_sender_had_and_older_ones_are_dropped() {
        let mut e = Echoes::default();
        e.note(100, 5_000);
        e.note(100, 6_000);
        // No new data acknowledged: one entry for both ticks.
        e.note(101, 6_000);
        e.note(102, 9_000);
        assert_eq!(e.acks.len(), 2);
        // Before the first remembered tick: unknown.
        assert_eq!(e.acked_at(99), None);
        // The highest ACK carrying the tick or an earlier one.
        assert_eq!(e.acked_at(100), Some(6_000));
        assert_eq!(e.acked_at(101), Some(6_000));
        assert_eq!(e.acked_at(102), Some(9_000));
        assert_eq!(e.acked_at(105), Some(9_000));
        // Passed entries are gone.
        assert_eq!(e.acks.len(), 1);
        assert_eq!(e.acked_at(100), None);
        // Across the 32-bit wrap.
        let mut e = Echoes::default();
        e.note(u32::MAX, 1_000);
        e.note(0, 2_000);
        assert_eq!(e.acked_at(u32::MAX), Some(1_000));
        assert_eq!(e.acked_at(1), Some(2_000));
    }

    #[test]
    fn echoes_keep_at_most_max_echoes_ticks() {
        let mut e = Echoes::default();
        for t in 0..=MAX_ECHOES as u32 {
            e.note(t, u64::from(t) + 1);
        }
        assert_eq!(e.acks.len(), MAX_ECHOES);
        // The oldest tick went first.
        assert_eq!(e.acked_at(0), None);
        assert_eq!(e.acked_at(1), Some(2));
    }

    /// The peer's ACK of `ack` at `t` carrying TSval `tsval`.
    fn echo_ack(f: &mut Feed, t: i64, ack: u64, tsval: u32) {
        let d = SegmentDetail {
            timestamps: Some((tsval, 0)),
            ..SegmentDetail::default()
        };
        f.s.on_ack(&ack_row(t, ack), &d, f.rtt);
    }

    /// A segment of `MSS` at `seq` at `t` echoing `tsecr`, with the capture's own flight
    /// `bif` (away from the sender: a segment or so).
    fn echo_data(f: &mut Feed, t: i64, seq: u64, tsecr: u32, bif: Option<u32>) {
        let mut a = row(t, Dir::ClientToServer, seq, 1, MSS);
        a.bytes_in_flight = bif;
        f.s.data_tsecr = Some(tsecr);
        f.send(a);
    }

    #[test]
    fn away_from_the_sender_the_flight_is_read_from_the_echoed_ack() {
        let rtt = 10 * MS;
        let mss = u64::from(MSS);
        for (far, acked_by_us, want) in [
            // 10 segments sent after the ACK of 1 + 5 segments: 10 in flight.
            (true, 1, 10 * mss),
            // The capture next to the sender: its own flight.
            (false, 1, mss),
            // The peer's segment lies beyond what this side acknowledged: its TSval is not
            // the one echoed (RFC 7323), so nothing is known.
            (true, 0, mss),
        ] {
            let mut f = Feed::new(rtt);
            f.s.far = far;
            f.s.ack_sent = acked_by_us;
            let first = f.burst(T0, 1, 5);
            echo_ack(&mut f, T0 + rtt, first, 7);
            for i in 0..10 {
                echo_data(&mut f, T0 + rtt + 2 * MS, first + i * mss, 7, Some(MSS));
            }
            echo_ack(&mut f, T0 + 2 * rtt, first + 10 * mss, 8);
            let r = f.s.rounds.iter().nth(1).expect("second round");
            assert_eq!(r.max_in_flight, want, "far {far}, acked {acked_by_us}");
            assert_eq!(f.s.echo_flights > 0, far && acked_by_us >= 1);
        }
    }

    #[test]
    fn a_sacked_byte_is_out_of_the_echoed_flight() {
        let rtt = 10 * MS;
        let mss = u64::from(MSS);
        let mut f = Feed::new(rtt);
        f.s.far = true;
        f.s.ack_sent = 1;
        let first = f.burst(T0, 1, 5);
        // The ACK of 1 segment SACKs up to the 5th's end.
        let mut d = SegmentDetail {
            timestamps: Some((7, 0)),
            ..SegmentDetail::default()
        };
        d.sack[0] = (1 + 2 * mss, first);
        d.sack_count = 1;
        f.s.on_ack(&ack_row(T0 + rtt, 1 + mss), &d, rtt);
        echo_data(&mut f, T0 + rtt + MS, first, 7, None);
        echo_ack(&mut f, T0 + 2 * rtt, first + mss, 8);
        // The second round's echoed flight is the segment above the SACKed ones, not the
        // five above the cumulative ACK.
        let r = f.s.rounds.iter().nth(1).expect("second round");
        assert_eq!(r.max_in_flight, mss);
    }
}
