//! `receiver-window-limited`: the receiver cannot or will not accept more. Zero windows
//! (the application stopped reading), and round trips in which the sender filled the
//! advertised window (a buffer smaller than the bandwidth-delay product, a slow reader):
//! next to the sender a segment fills it; from the receiver's side or the middle a window's
//! worth of data arrives per round trip.
//! See: ../shared/cases/002_*.txt, 003_*.txt.

use super::{ConnContext, ms, rate};
use crate::budget::State;
use crate::finding::{Finding, FindingKind};
use crate::infer::Round;
use crate::infer::limit::{Limit, RoundLimit, Vantage};

/// Share of the main sender's round trips that must be window-full for a finding without
/// zero windows (tcpdx choice: a window that is full now and then is normal flow control).
pub const RWND_MIN_ROUND_SHARE: f64 = 0.2;

/// A full window counts as a limit only when the receiver had stopped growing it: at least
/// this share of its largest advertised window (tcpdx choice: while receive-buffer
/// autotuning is still opening the window, Linux RFC 1323-style DRS, a full window is the
/// normal start of a transfer, not a receiver problem).
pub const AT_MAX_WINDOW_SHARE: f64 = 0.9;

/// Windows of data a round seen from the receiver's side can hold: it ends at the first
/// ACK half a round trip after it opened, so it can take in the window sent in one round
/// trip and the next one's arriving at its end. More than this per round trip means the
/// round trip it is measured with is not the path's (a handshake delayed on its way), and
/// says nothing about the window.
pub const MAX_WINDOWS_PER_ROUND: u64 = 2;

/// Whether the receiver's window held round `r` (its limit `l`, seen from `vantage`, of a
/// sender of `mss`-byte segments). Next to the sender a segment filled the window the
/// capture saw. From the receiver's side or the middle the sender's flight is not visible
/// (the receiver acknowledges data as it arrives): the window held the round when the data
/// arriving per round trip came within a segment of it, as a segment next to the sender
/// fills it, and no more than [`MAX_WINDOWS_PER_ROUND`] windows arrived.
fn at_window(r: &Round, l: &RoundLimit, vantage: Vantage, mss: u64) -> bool {
    l.limit == Limit::ReceiverWindow
        || (vantage == Vantage::Receiver
            && !r.in_recovery
            && r.rcv_window > 0
            && l.flight_bytes + mss > r.rcv_window
            && l.flight_bytes <= MAX_WINDOWS_PER_ROUND * r.rcv_window)
}

/// The window that held round `r` (its limit `l`): next to the sender, the flight the round
/// reached when the window advertised at its end is smaller (a window closed for a moment
/// after the flight went out, a reader a moment late, did not hold it); from the receiver's
/// side or the middle the flight is the data arriving per round trip, which may be two
/// windows, so the window at the round's end.
fn held_window(r: &Round, l: &RoundLimit, vantage: Vantage) -> u64 {
    match vantage {
        Vantage::Sender => r.rcv_window.max(l.flight_bytes),
        Vantage::Receiver => r.rcv_window,
    }
}

/// Round trips limited by a window the receiver no longer grows, each with the largest
/// window advertised before it and the window that held it ([`held_window`]): the window
/// at its largest (autotuning done), or closed below what it was before (autotuning never
/// shrinks a window: the application stopped reading, a slow reader's window opens and
/// closes).
fn stuck<'a>(cx: &ConnContext<'a>) -> impl Iterator<Item = (Round, u64, u64)> + 'a {
    let s = cx.sender();
    let cap = s.max_rcv_window as f64 * AT_MAX_WINDOW_SHARE;
    let vantage = cx.conn.vantage(cx.dir);
    let mss = u64::from(if s.largest > 0 { s.largest } else { s.mss }.max(1));
    cx.conn
        .round_limits(cx.dir)
        .scan(0u64, |before, (r, l)| {
            let prev = *before;
            *before = prev.max(r.rcv_window);
            Some((r, l, prev))
        })
        .filter_map(move |(r, l, before)| {
            let held = held_window(&r, &l, vantage);
            (at_window(&r, &l, vantage, mss)
                && !r.in_recovery
                && (held as f64 >= cap || shrunk(held, before)))
            .then_some((r, before, held))
        })
}

/// The window is below what the receiver advertised before.
fn shrunk(window: u64, before: u64) -> bool {
    (window as f64) < before as f64 * AT_MAX_WINDOW_SHARE
}

/// The pace of a round the window held (bits/s): a window per round trip.
fn window_pace_bps(r: &Round) -> f64 {
    let d = r.duration();
    if d <= 0 {
        0.0
    } else {
        r.rcv_window as f64 * 8e9 / d as f64
    }
}

/// The fastest pace at which the path carried the receiver's window in a round trip
/// (bits/s, 0 none): over window-limited rounds of at least [`RATE_MIN_PKTS`] segments
/// lasting at least [`RATE_MIN_RTT_SHARE`] of the shortest round trip the capture shows
/// (`base_rtt`, shorter rounds are ACK-timing artefacts). A window-limited sender's
/// throughput is its window over the round trip: rounds at the same window that took longer
/// (jitter, delayed ACKs, a slow receiver) lost the difference, which a larger window would
/// have filled; a path at its own limit keeps the round trip of a constant flight constant.
///
/// [`RATE_MIN_PKTS`]: crate::infer::sender::RATE_MIN_PKTS
/// [`RATE_MIN_RTT_SHARE`]: crate::infer::sender::RATE_MIN_RTT_SHARE
fn window_ceiling_bps(rounds: impl Iterator<Item = Round>, base_rtt: i64) -> f64 {
    let min_dur = (base_rtt as f64 * crate::infer::sender::RATE_MIN_RTT_SHARE) as i64;
    rounds
        .filter(|r| {
            r.pkts >= crate::infer::sender::RATE_MIN_PKTS && base_rtt > 0 && r.duration() >= min_dur
        })
        .map(|r| window_pace_bps(&r))
        .fold(0.0, f64::max)
}

/// Seconds a window-limited round `r` lost against the rate the path showed in rounds the
/// window did not limit (`free_bps`, 0 none), against the fastest round trip at the window
/// (`window_bps`, its pace compared with this round's), or, if the window that held it
/// (`held`) had shrunk from `before`, against that larger window at the round's pace (the
/// path carried it before).
fn round_cost_s(r: &Round, held: u64, before: u64, free_bps: f64, window_bps: f64) -> f64 {
    let rate = r.delivery_bps();
    let reopened = if held > 0 && shrunk(held, before) {
        rate * before as f64 / held as f64
    } else {
        0.0
    };
    let d = r.duration() as f64 / 1e9;
    let mut lost: f64 = 0.0;
    let ceiling = free_bps.max(reopened);
    if ceiling > 0.0 {
        lost = d * (1.0 - (rate / ceiling).min(1.0));
    }
    let pace = window_pace_bps(r);
    if window_bps > 0.0 && pace > 0.0 {
        lost = lost.max(d * (1.0 - (pace / window_bps).min(1.0)));
    }
    lost
}

/// Finds receiver-window limits of the main sender.
pub fn detect(cx: &ConnContext<'_>) -> Vec<Finding> {
    let s = cx.sender();
    let zw_ns: i64 = s.zero_windows.iter().map(|z| z.end - z.start).sum();
    let limited = stuck(cx).count();
    let share = limited as f64 / s.rounds.len().max(1) as f64;
    if s.zero_windows.is_empty() && (limited == 0 || share < RWND_MIN_ROUND_SHARE) {
        return Vec::new();
    }
    // Zero windows are pure stall; a full window costs what the path could have added.
    let vantage = cx.conn.vantage(cx.dir);
    let mss = u64::from(if s.largest > 0 { s.largest } else { s.mss }.max(1));
    let free_bps = cx
        .conn
        .round_limits(cx.dir)
        .filter(|(r, l)| !at_window(r, l, vantage, mss))
        .map(|(r, _)| r)
        .filter(|r| {
            !r.rwnd_limited
                && !r.in_recovery
                && r.pkts >= crate::infer::sender::RATE_MIN_PKTS
                && r.duration() as f64 >= cx.rtt as f64 * crate::infer::sender::RATE_MIN_RTT_SHARE
        })
        .map(|r| r.delivery_bps())
        .fold(0.0, f64::max);
    // The shortest round trip the capture shows: next to the sender its smallest ACK delay.
    let base_rtt = match s.downstream_rtt_min {
        Some(d) if cx.capture_near_sender() && d > 0 => d,
        _ => cx.rtt,
    };
    let window_bps = window_ceiling_bps(stuck(cx).map(|(r, ..)| r), base_rtt);
    let rwnd_cost: f64 = stuck(cx)
        .map(|(r, before, held)| round_cost_s(&r, held, before, free_bps, window_bps))
        .sum();
    let zw_s = cx.budget_s(State::ZeroWindow);
    let mut f = cx.finding(FindingKind::ReceiverWindowLimited, zw_s + rwnd_cost);
    f.episodes = if s.zero_windows.is_empty() {
        limited as u32
    } else {
        s.zero_windows.len() as u32
    };
    for z in &s.zero_windows {
        f.evidence(z.start_frame, "zero window");
        if z.end_frame > 0 {
            f.evidence(z.end_frame, "window update");
        }
        f.episode(cx.rel_s(z.start), (z.end - z.start) as f64 / 1e9);
    }
    for &x in &s.window_full_frames {
        f.evidence(x, "sender filled the receiver's window");
    }
    f.wireshark_filter = format!(
        "tcp.stream == {} && (tcp.analysis.zero_window || tcp.analysis.window_full || \
         tcp.analysis.zero_window_probe || tcp.analysis.window_update)",
        cx.stream()
    );
    f.confidence = if s.zero_windows.is_empty() { 0.7 } else { 0.9 };
    let (sender, receiver) = cx.endpoints();
    let bdp_bytes = cx.path_bps * cx.rtt as f64 / 8e9;
    f.explanation = format!(
        "{receiver} limited {sender}: {nz} zero-window period(s) totalling {zw} (the receiving \
         application stopped reading and its buffer filled), and {limited} of {rounds} round \
         trip(s) in which the sender filled the advertised window (largest window {maxw} \
         bytes; the path showed {path} at {rtt} RTT, a bandwidth-delay product of about \
         {bdp:.0} bytes).",
        nz = s.zero_windows.len(),
        zw = ms(zw_ns),
        rounds = s.rounds.len(),
        maxw = s.max_rcv_window,
        path = rate(cx.path_bps),
        rtt = ms(cx.rtt),
        bdp = bdp_bytes,
    );
    let buffer = format!(
        "On {receiver}: let the receive buffer grow to at least the bandwidth-delay product \
         (Linux `sysctl -w net.ipv4.tcp_rmem='4096 131072 {max}'` and no fixed SO_RCVBUF in \
         the application; Windows `netsh int tcp set global autotuninglevel=normal`).",
        max = (bdp_bytes * 2.0).max(6_291_456.0) as u64
    );
    let reading = format!(
        "If the window closes to zero, the receiving application is not reading fast \
         enough: look at its CPU, its disk, or (VMs) CPU ready time on {receiver}."
    );
    f.recommendations = vec![buffer.into(), reading.into()];
    vec![f]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::infer::Round;

    /// A 100 ms window-limited round that delivered `acked` bytes under `window`.
    fn round(acked: u64, window: u64) -> Round {
        Round {
            start: 0,
            end: 100_000_000,
            acked,
            rwnd_limited: true,
            rcv_window: window,
            ..Round::default()
        }
    }

    #[test]
    fn a_window_shrunk_below_the_share_of_an_earlier_one_is_a_limit() {
        // 90% of 100 000 is the line: below it the receiver closed its window.
        assert!(shrunk(89_999, 100_000));
        assert!(!shrunk(90_000, 100_000));
        assert!(!shrunk(90_001, 100_000));
        assert!(!shrunk(50_000, 0));
    }

    #[test]
    fn a_faster_free_round_prices_a_steady_window() {
        // 125 kB in 100 ms = 10 Mbit/s against a path that showed 40 Mbit/s.
        let c = round_cost_s(&round(125_000, 64_000), 64_000, 64_000, 40e6, 0.0);
        assert!((c - 0.075).abs() < 1e-9, "{c}");
        // No faster round: the path's room above a steady window is unknown.
        assert_eq!(
            round_cost_s(&round(125_000, 64_000), 64_000, 64_000, 5e6, 0.0),
            0.0
        );
        assert_eq!(
            round_cost_s(&round(125_000, 64_000), 64_000, 64_000, 0.0, 0.0),
            0.0
        );
    }

    #[test]
    fn a_shrunk_window_is_priced_against_the_window_it_had() {
        // Closed to a quarter of what it advertised: the earlier window, at the same pace,
        // delivers four times as much, with no faster free round to show it.
        let c = round_cost_s(&round(125_000, 16_000), 16_000, 64_000, 0.0, 0.0);
        assert!((c - 0.075).abs() < 1e-9, "{c}");
        // Just not shrunk (at 90%): nothing beyond the free rate.
        assert_eq!(
            round_cost_s(&round(125_000, 57_600), 57_600, 64_000, 0.0, 0.0),
            0.0
        );
        // The faster of the two ceilings holds.
        let c = round_cost_s(&round(125_000, 32_000), 32_000, 64_000, 40e6, 0.0);
        assert!((c - 0.075).abs() < 1e-9, "{c}");
    }

    /// A window-limited round of `ms` milliseconds with `pkts` segments under a 64 kB window.
    fn held_round(ms: i64, pkts: u32) -> Round {
        Round {
            start: 0,
            end: ms * 1_000_000,
            pkts,
            acked: 64_000,
            rwnd_limited: true,
            rcv_window: 64_000,
            ..Round::default()
        }
    }

    #[test]
    fn the_window_ceiling_comes_from_full_round_trips_of_enough_segments() {
        let base = 10_000_000;
        let min_ms = 8; // RATE_MIN_RTT_SHARE of 10 ms
        assert_eq!(
            (base as f64 * crate::infer::sender::RATE_MIN_RTT_SHARE) as i64,
            min_ms * 1_000_000
        );
        let pkts = crate::infer::sender::RATE_MIN_PKTS;
        // Rounded to a bit/s: the pace is a window over a duration in ns.
        let ceiling = |ms: i64, pkts: u32| {
            window_ceiling_bps([held_round(20, 44), held_round(ms, pkts)].into_iter(), base).round()
        };
        let pace = |ms: f64| (64_000.0 * 8.0 / (ms / 1e3)).round();
        // Below the share of the round trip: an ACK-timing artefact, the 20 ms round counts.
        assert_eq!(ceiling(min_ms - 1, pkts), pace(20.0));
        // At and above it: the window in that round trip is the path's pace.
        assert_eq!(ceiling(min_ms, pkts), pace(8.0));
        assert_eq!(ceiling(min_ms + 1, pkts), pace(9.0));
        // Too few segments to measure a pace.
        assert_eq!(ceiling(min_ms, pkts - 1), pace(20.0));
        // No round trip known: no ceiling.
        assert_eq!(window_ceiling_bps([held_round(20, 44)].into_iter(), 0), 0.0);
    }

    #[test]
    fn a_round_at_the_window_that_took_longer_than_the_fastest_lost_the_difference() {
        let fastest = 64_000.0 * 8.0 / 0.010;
        // 25 ms where the same window once took 10 ms: 15 ms lost.
        let c = round_cost_s(&held_round(25, 44), 64_000, 64_000, 0.0, fastest);
        assert!((c - 0.015).abs() < 1e-9, "{c}");
        // The fastest round itself, or one as fast, lost nothing.
        assert_eq!(
            round_cost_s(&held_round(10, 44), 64_000, 64_000, 0.0, fastest),
            0.0
        );
        assert_eq!(
            round_cost_s(&held_round(9, 44), 64_000, 64_000, 0.0, fastest),
            0.0
        );
        // The larger of the two ceilings holds: a free round at 4 times the rate.
        let c = round_cost_s(
            &held_round(25, 44),
            64_000,
            64_000,
            4.0 * 64_000.0 * 8.0 / 0.025,
            fastest,
        );
        assert!((c - 0.025 * 0.75).abs() < 1e-9, "{c}");
    }

    #[test]
    fn next_to_the_sender_the_window_that_held_a_round_is_its_flight_when_larger() {
        let r = Round {
            rcv_window: 300_000,
            ..Round::default()
        };
        let l = |flight: u64| RoundLimit {
            limit: Limit::ReceiverWindow,
            flight_bytes: flight,
            cwnd_est: None,
        };
        // 1.6 MB out, 300 kB advertised at the round's end: the window that held it was
        // the 1.6 MB, not the moment's dip after it.
        assert_eq!(held_window(&r, &l(1_600_000), Vantage::Sender), 1_600_000);
        assert!(!shrunk(
            held_window(&r, &l(1_600_000), Vantage::Sender),
            1_680_000
        ));
        // a flight held at the smaller window: that window
        assert_eq!(held_window(&r, &l(290_000), Vantage::Sender), 300_000);
        assert!(shrunk(
            held_window(&r, &l(290_000), Vantage::Sender),
            1_680_000
        ));
        // from the receiver's side the data per round trip may be two windows: the window
        assert_eq!(held_window(&r, &l(600_000), Vantage::Receiver), 300_000);
        // priced against the earlier window from the window that held the round
        let rr = round(125_000, 16_000);
        let c = round_cost_s(&rr, 32_000, 64_000, 0.0, 0.0);
        assert!((c - 0.050).abs() < 1e-9, "{c}");
    }

    #[test]
    fn from_the_receiver_data_per_round_trip_within_a_segment_of_the_window_is_at_it() {
        let r = Round {
            rcv_window: 64_000,
            ..Round::default()
        };
        let l = |flight: u64, limit: Limit| RoundLimit {
            limit,
            flight_bytes: flight,
            cwnd_est: None,
        };
        let mss = 1_000;
        // A segment short of the window is at it; one more byte short is not.
        assert!(at_window(
            &r,
            &l(63_001, Limit::Cwnd),
            Vantage::Receiver,
            mss
        ));
        assert!(!at_window(
            &r,
            &l(63_000, Limit::Cwnd),
            Vantage::Receiver,
            mss
        ));
        assert!(at_window(
            &r,
            &l(64_000, Limit::Cwnd),
            Vantage::Receiver,
            mss
        ));
        // Next to the sender the flight is seen: only a segment that filled the window
        // (the round's limit) counts.
        assert!(!at_window(
            &r,
            &l(64_000, Limit::Cwnd),
            Vantage::Sender,
            mss
        ));
        assert!(at_window(
            &r,
            &l(0, Limit::ReceiverWindow),
            Vantage::Sender,
            mss
        ));
        // Loss recovery, or no window known: not the window's.
        let rec = Round {
            in_recovery: true,
            ..r
        };
        assert!(!at_window(
            &rec,
            &l(64_000, Limit::Cwnd),
            Vantage::Receiver,
            mss
        ));
        let none = Round::default();
        assert!(!at_window(
            &none,
            &l(64_000, Limit::Cwnd),
            Vantage::Receiver,
            mss
        ));
    }

    #[test]
    fn a_round_that_delivered_nothing_against_no_ceiling_costs_nothing_here() {
        // Zero windows are priced as their own state, not as window-full rounds.
        assert_eq!(round_cost_s(&round(0, 0), 0, 64_000, 0.0, 0.0), 0.0);
    }
}
