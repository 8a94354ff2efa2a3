//! `cwnd-collapse`: a burst loss (speed mismatch into a shallow buffer), recovery, the
//! window back near one segment, then additive increase (+1 segment per round trip) far
//! below the bandwidth-delay product. See: ../shared/cases/004_*.txt.
//!
//! Cost: over the ramp after the loss, the time taken minus the time the same bytes need
//! at the path rate measured before the loss.

use super::{ConnContext, rate};
use crate::finding::{Finding, FindingKind};
use crate::infer::{LossEpisode, SenderState};

/// Segments retransmitted in one episode for it to be a burst loss (tcpdx choice: matches
/// the lab's `burst_losses`, "an episode with >= 3 retransmitted segments").
pub const BURST_MIN_LOSSES: u32 = 3;
/// Rounds of ramp needed to call the growth additive (tcpdx choice: the lab verifies
/// "+1 segment per RTT over >= 5 RTTs").
pub const RAMP_MIN_ROUNDS: usize = 5;
/// Average growth per round at or below which the ramp is additive, in segments (Reno/CUBIC
/// congestion avoidance grow about 1 per round, RFC 5681 section 3.1; slow start doubles).
pub const ADDITIVE_MAX_GROWTH: f64 = 3.0;
/// Average growth per round below which the window is flat, not ramping (tcpdx choice:
/// Reno grows 1 per round, 0.5 with delayed ACKs and no RFC 3465 byte counting).
pub const ADDITIVE_MIN_GROWTH: f64 = 0.2;
/// The ramp counts as "far below the BDP" while the window is below this share of it.
pub const BELOW_BDP_SHARE: f64 = 0.9;

/// The ramp after an episode: (rounds, seconds, bytes, first and last window).
fn ramp(s: &SenderState, e: &LossEpisode, bdp: f64, until: i64) -> (usize, f64, u64, u32, u32) {
    let mut n = 0;
    let (mut secs, mut bytes) = (0.0, 0u64);
    let (mut first, mut last) = (0, 0);
    for r in s.rounds.iter().skip(e.next_round) {
        if r.start >= until || r.in_recovery || r.rwnd_limited {
            break;
        }
        if bdp > 0.0 && f64::from(r.pkts) >= BELOW_BDP_SHARE * bdp {
            break;
        }
        if n == 0 {
            first = r.pkts;
        }
        last = r.pkts;
        n += 1;
        secs += r.duration() as f64 / 1e9;
        bytes += r.bytes;
    }
    (n, secs, bytes, first, last)
}

/// Finds window collapses after burst losses.
pub fn detect(cx: &ConnContext<'_>) -> Vec<Finding> {
    let s = cx.sender();
    if cx.path_bps <= 0.0 {
        return Vec::new();
    }
    let bdp = cx.bdp_segments();
    let mut hits = Vec::new();
    for (i, e) in s.episodes.iter().enumerate() {
        if e.real_losses() < BURST_MIN_LOSSES {
            continue;
        }
        let until = s.episodes.get(i + 1).map_or(i64::MAX, |n| n.start);
        let (n, secs, bytes, first, last) = ramp(s, e, bdp, until);
        if n < RAMP_MIN_ROUNDS {
            continue;
        }
        let growth = (f64::from(last) - f64::from(first)) / (n - 1) as f64;
        if !(ADDITIVE_MIN_GROWTH..=ADDITIVE_MAX_GROWTH).contains(&growth) {
            continue;
        }
        let ideal = bytes as f64 * 8.0 / cx.path_bps;
        hits.push((e, (secs - ideal).max(0.0), n, first, last, growth, secs));
    }
    if hits.is_empty() {
        return Vec::new();
    }
    let cost: f64 = hits.iter().map(|h| h.1).sum();
    let mut f = cx.finding(FindingKind::CwndCollapse, cost);
    f.episodes = hits.len() as u32;
    for (e, _, _, _, _, _, secs) in &hits {
        f.evidence(e.start_frame, "first sign of the burst loss");
        if let Some(x) = e.first_retx_frame {
            f.evidence(x, "first retransmission");
        }
        if e.end_frame > 0 {
            f.evidence(e.end_frame, "recovery complete; additive ramp starts");
        }
        // The episode is the recovery; the ramp after it is in the explanation and the cost.
        let _ = secs;
        f.episode(cx.rel_s(e.start), e.duration() as f64 / 1e9);
    }
    f.wireshark_filter = f.frames_filter();
    f.confidence = 0.75;
    let (e, _, n, first, last, growth, secs) = hits[0];
    let (sender, _) = cx.endpoints();
    f.explanation = format!(
        "A burst of {lost} segment(s) from {sender} was lost in one round trip (the sender's \
         window of {before} segments overran the path, {path} measured, BDP about {bdp:.0} \
         segments). After {rec:.0} ms of recovery the window restarted at {first} segments per \
         round trip and grew by only {growth:.1} per round ({first} -> {last} over {n} rounds, \
         {secs:.2} s): congestion avoidance far below what the path carries. At the path rate \
         the same data would have taken {cost:.3} s less.",
        lost = e.real_losses(),
        before = e.window_before,
        path = rate(cx.path_bps),
        rec = e.duration() as f64 / 1e6,
    );
    f.recommendations = vec![
        format!(
            "Pace the sender ({sender}) to the path rate so slow start cannot overrun the \
             bottleneck buffer: Linux `tc qdisc replace dev <if> root fq` (+ `maxrate {path}`), \
             or a congestion control that paces and probes the bottleneck: \
             `sysctl -w net.ipv4.tcp_congestion_control=bbr`.",
            path = rate(cx.path_bps)
        ),
        "Or shape/police at the speed mismatch (10G into 1G): QoS shaping to the slow link's \
         rate, deeper buffers or ECN/AQM on the switch; avoid old Reno stacks that reset the \
         window to one segment (storage vendors: ask for CUBIC/BBR or RFC 6937 PRR)."
            .into(),
    ];
    vec![f]
}
