//! `receiver-window-limited`: the receiver cannot or will not accept more. Zero windows
//! (the application stopped reading), and round trips in which the sender filled the
//! advertised window (a buffer smaller than the bandwidth-delay product, a slow reader).
//! See: ../shared/cases/002_*.txt, 003_*.txt.

use super::{ConnContext, ms, rate};
use crate::budget::State;
use crate::finding::{Finding, FindingKind};

/// Share of the main sender's round trips that must be window-full for a finding without
/// zero windows (tcpdx choice: a window that is full now and then is normal flow control).
pub const RWND_MIN_ROUND_SHARE: f64 = 0.2;

/// A full window counts as a limit only when the receiver had stopped growing it: at least
/// this share of its largest advertised window (tcpdx choice: while receive-buffer
/// autotuning is still opening the window, Linux RFC 1323-style DRS, a full window is the
/// normal start of a transfer, not a receiver problem).
pub const AT_MAX_WINDOW_SHARE: f64 = 0.9;

/// Round trips limited by a window the receiver no longer grows, each with the largest
/// window advertised before it: the window at its largest (autotuning done), or closed
/// below what it was before (autotuning never shrinks a window: the application stopped
/// reading, a slow reader's window opens and closes).
fn stuck(s: &crate::infer::SenderState) -> impl Iterator<Item = (crate::infer::Round, u64)> + '_ {
    let cap = s.max_rcv_window as f64 * AT_MAX_WINDOW_SHARE;
    s.rounds
        .iter()
        .scan(0u64, |before, r| {
            let prev = *before;
            *before = prev.max(r.rcv_window);
            Some((r, prev))
        })
        .filter(move |(r, before)| {
            r.rwnd_limited
                && !r.in_recovery
                && (r.rcv_window as f64 >= cap || shrunk(r.rcv_window, *before))
        })
}

/// The window is below what the receiver advertised before.
fn shrunk(window: u64, before: u64) -> bool {
    (window as f64) < before as f64 * AT_MAX_WINDOW_SHARE
}

/// Seconds a window-limited round `r` lost against the rate the path showed in rounds the
/// window did not limit (`free_bps`, 0 none) or, if the window had shrunk from `before`,
/// against that larger window at the round's pace (the path carried it before).
fn round_cost_s(r: &crate::infer::Round, before: u64, free_bps: f64) -> f64 {
    let rate = r.delivery_bps();
    let reopened = if r.rcv_window > 0 && shrunk(r.rcv_window, before) {
        rate * before as f64 / r.rcv_window as f64
    } else {
        0.0
    };
    let ceiling = free_bps.max(reopened);
    if ceiling <= 0.0 {
        return 0.0;
    }
    r.duration() as f64 / 1e9 * (1.0 - (rate / ceiling).min(1.0))
}

/// Finds receiver-window limits of the main sender.
pub fn detect(cx: &ConnContext<'_>) -> Vec<Finding> {
    let s = cx.sender();
    let zw_ns: i64 = s.zero_windows.iter().map(|z| z.end - z.start).sum();
    let limited = stuck(s).count();
    let share = limited as f64 / s.rounds.len().max(1) as f64;
    if s.zero_windows.is_empty() && (limited == 0 || share < RWND_MIN_ROUND_SHARE) {
        return Vec::new();
    }
    // Zero windows are pure stall; a full window costs what the path could have added.
    let free_bps = s
        .rounds
        .iter()
        .filter(|r| {
            !r.rwnd_limited
                && !r.in_recovery
                && r.pkts >= crate::infer::sender::RATE_MIN_PKTS
                && r.duration() as f64 >= cx.rtt as f64 * crate::infer::sender::RATE_MIN_RTT_SHARE
        })
        .map(|r| r.delivery_bps())
        .fold(0.0, f64::max);
    let rwnd_cost: f64 = stuck(s)
        .map(|(r, before)| round_cost_s(&r, before, free_bps))
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
        let c = round_cost_s(&round(125_000, 64_000), 64_000, 40e6);
        assert!((c - 0.075).abs() < 1e-9, "{c}");
        // No faster round: the path's room above a steady window is unknown.
        assert_eq!(round_cost_s(&round(125_000, 64_000), 64_000, 5e6), 0.0);
        assert_eq!(round_cost_s(&round(125_000, 64_000), 64_000, 0.0), 0.0);
    }

    #[test]
    fn a_shrunk_window_is_priced_against_the_window_it_had() {
        // Closed to a quarter of what it advertised: the earlier window, at the same pace,
        // delivers four times as much, with no faster free round to show it.
        let c = round_cost_s(&round(125_000, 16_000), 64_000, 0.0);
        assert!((c - 0.075).abs() < 1e-9, "{c}");
        // Just not shrunk (at 90%): nothing beyond the free rate.
        assert_eq!(round_cost_s(&round(125_000, 57_600), 64_000, 0.0), 0.0);
        // The faster of the two ceilings holds.
        let c = round_cost_s(&round(125_000, 32_000), 64_000, 40e6);
        assert!((c - 0.075).abs() < 1e-9, "{c}");
    }

    #[test]
    fn a_round_that_delivered_nothing_against_no_ceiling_costs_nothing_here() {
        // Zero windows are priced as their own state, not as window-full rounds.
        assert_eq!(round_cost_s(&round(0, 0), 64_000, 0.0), 0.0);
    }
}
