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

/// Round trips limited by a window the receiver no longer grows.
fn stuck(s: &crate::infer::SenderState) -> impl Iterator<Item = crate::infer::Round> + '_ {
    let cap = s.max_rcv_window as f64 * AT_MAX_WINDOW_SHARE;
    s.rounds
        .iter()
        .filter(move |r| r.rwnd_limited && !r.in_recovery && r.rcv_window as f64 >= cap)
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
        .filter(|_| free_bps > 0.0)
        .map(|r| r.duration() as f64 / 1e9 * (1.0 - (r.delivery_bps() / free_bps).min(1.0)))
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
