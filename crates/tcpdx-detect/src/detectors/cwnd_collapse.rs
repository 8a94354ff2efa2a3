//! `cwnd-collapse`: a burst loss (speed mismatch into a shallow buffer), recovery, the
//! window back near one segment, then additive increase (+1 segment per round trip) far
//! below the bandwidth-delay product. See: ../shared/cases/004_*.txt. Modern stacks halve
//! rather than restart from one segment; with a buffer shallower than the path's BDP, even a
//! single overflow (a loss after the round trip grew as the queue filled) drops the window
//! far below the BDP, and the slow regrowth costs the same way.
//!
//! Cost: the burst's whole cost, as network-loss would count it (half the recovery plus
//! the window deficit until the window is back to its size before the loss, capped at the
//! path's bandwidth-delay product), or, if larger, the ramp's time beyond what the same
//! bytes need at the path rate. Network-loss leaves these episodes' cost to this finding:
//! the collapse is the reason the loss cost so much.

use super::{ConnContext, episode_cost_s, rate};
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

/// The ramp after an episode: (rounds, seconds, bytes, first and last window). The
/// sender's last round is left out: the end of the capture or of the data cuts it short.
fn ramp(s: &SenderState, e: &LossEpisode, bdp: f64, until: i64) -> (usize, f64, u64, u32, u32) {
    let mut n = 0;
    let (mut secs, mut bytes) = (0.0, 0u64);
    let (mut first, mut last) = (0, 0);
    let complete = s.rounds.len().saturating_sub(1);
    for r in s
        .rounds
        .iter_from(e.next_round)
        .take(complete.saturating_sub(e.next_round))
    {
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

/// Rounds before a loss whose round-trip time shows the bottleneck queue filling.
pub const QUEUE_ROUNDS: usize = 3;
/// Round-trip growth over the path's that means a standing queue (tcpdx choice: 10%, well
/// above the jitter of the lab's clean runs).
pub const QUEUE_RTT_GROWTH: f64 = 1.10;
/// A ramp starting at or below this share of the BDP starts "far below" it (after a queue
/// overflow, Reno's halving lands here when the buffer is under half the BDP).
pub const FAR_BELOW_BDP_SHARE: f64 = 0.75;

/// Smallest window after a single overflow, as a share of the window before it, for the
/// cut to be a multiplicative decrease (Reno 0.5, CUBIC 0.7; tcpdx choice: 0.3 leaves room
/// for PRR's undershoot).
pub const DECREASE_MIN_SHARE: f64 = 0.3;

/// True if the loss of `e` was a queue overflow: the rounds just before it took clearly
/// longer than the path's round trip (the sender's window had filled the bottleneck buffer).
fn queue_overflow(s: &SenderState, e: &LossEpisode, path_rtt: i64) -> bool {
    if path_rtt <= 0 {
        return false;
    }
    let before: Vec<i64> = s
        .rounds
        .iter()
        .take_while(|r| r.end <= e.start)
        .filter(|r| !r.in_recovery)
        .map(|r| r.duration())
        .collect();
    if before.len() < QUEUE_ROUNDS {
        return false;
    }
    let last = &before[before.len() - QUEUE_ROUNDS..];
    let mean = last.iter().sum::<i64>() as f64 / QUEUE_ROUNDS as f64;
    mean >= QUEUE_RTT_GROWTH * path_rtt as f64
}

/// One collapse: a burst-loss episode followed by an additive ramp.
#[derive(Clone, Copy, Debug)]
pub struct Collapse {
    /// Index of the episode in the sender's episodes.
    pub index: usize,
    /// The loss episode.
    pub episode: LossEpisode,
    /// Seconds it cost (see the module doc).
    pub cost_s: f64,
    /// Rounds of the ramp.
    pub rounds: usize,
    /// Window (segments per round) at the ramp's start and end.
    pub first: u32,
    /// See `first`.
    pub last: u32,
    /// Average growth per round, segments.
    pub growth: f64,
    /// Seconds of the ramp.
    pub ramp_s: f64,
}

/// The main sender's loss episodes that collapsed the window.
pub fn collapses(cx: &ConnContext<'_>) -> Vec<Collapse> {
    let s = cx.sender();
    if cx.path_bps <= 0.0 {
        return Vec::new();
    }
    let bdp = cx.bdp_segments();
    let mut hits = Vec::new();
    for (i, e) in s.episodes.iter().enumerate() {
        if e.real_losses() == 0 {
            continue;
        }
        let until = s.episodes.get(i + 1).map_or(i64::MAX, |n| n.start);
        let (n, secs, bytes, first, last) = ramp(s, &e, bdp, until);
        if n < RAMP_MIN_ROUNDS {
            continue;
        }
        // A burst, or a single overflow of a buffer too shallow for the path: the window cut
        // lands far below the BDP and regrows one segment per round.
        let burst = e.real_losses() >= BURST_MIN_LOSSES;
        // A single loss must also look like a multiplicative decrease (a restart from one
        // segment is slow start again, and the delayed-ACK detectors cost it).
        // The walk over the rounds before the loss comes last: it is the costly test.
        let shallow = !burst
            && bdp > 0.0
            && f64::from(first) <= FAR_BELOW_BDP_SHARE * bdp
            && f64::from(first) >= DECREASE_MIN_SHARE * f64::from(e.window_before)
            && queue_overflow(s, &e, cx.rtt);
        if !burst && !shallow {
            continue;
        }
        let growth = (f64::from(last) - f64::from(first)) / (n - 1) as f64;
        if !(ADDITIVE_MIN_GROWTH..=ADDITIVE_MAX_GROWTH).contains(&growth) {
            continue;
        }
        let ideal = bytes as f64 * 8.0 / cx.path_bps;
        hits.push(Collapse {
            index: i,
            episode: e,
            cost_s: (secs - ideal).max(episode_cost_s(cx, i)).max(0.0),
            rounds: n,
            first,
            last,
            growth,
            ramp_s: secs,
        });
    }
    hits
}

/// Finds window collapses after burst losses.
pub fn detect(cx: &ConnContext<'_>) -> Vec<Finding> {
    let hits = collapses(cx);
    // The explanation tells the costliest one.
    let Some(h) = hits
        .iter()
        .copied()
        .max_by(|a, b| a.cost_s.total_cmp(&b.cost_s))
    else {
        return Vec::new();
    };
    let cost: f64 = hits.iter().map(|h| h.cost_s).sum();
    let mut f = cx.finding(FindingKind::CwndCollapse, cost);
    f.episodes = hits.len() as u32;
    for e in hits.iter().map(|h| h.episode) {
        f.evidence(e.start_frame, "first sign of the loss");
        if let Some(x) = e.first_retx_frame {
            f.evidence(x, "first retransmission");
        }
        if e.end_frame > 0 {
            f.evidence(e.end_frame, "recovery complete; additive ramp starts");
        }
        // The episode is the recovery; the ramp after it is in the explanation and the cost.
        f.episode(cx.rel_s(e.start), e.duration() as f64 / 1e9);
    }
    f.wireshark_filter = f.frames_filter();
    f.confidence = 0.75;
    let (e, n, first, last, growth, secs) =
        (h.episode, h.rounds, h.first, h.last, h.growth, h.ramp_s);
    let (sender, _) = cx.endpoints();
    let what = if e.real_losses() >= BURST_MIN_LOSSES {
        format!(
            "A burst of {} segment(s) from {sender} was lost in one round trip (the sender's \
             window of {} segments overran the path)",
            e.real_losses(),
            e.window_before
        )
    } else {
        format!(
            "{} segment(s) from {sender} were lost when the bottleneck queue overflowed (the \
             round trip had grown as the sender's window of {} segments filled a buffer \
             shallower than the path's BDP)",
            e.real_losses(),
            e.window_before
        )
    };
    let others = if hits.len() > 1 {
        format!(
            " ({} such episodes in all; the costliest is described)",
            hits.len()
        )
    } else {
        String::new()
    };
    f.explanation = format!(
        "{what}. The path carries {path}, a BDP of about {bdp:.0} segments{others}. After {rec:.0} ms of \
         recovery the window restarted at {first} segments per round trip and grew by only \
         {growth:.1} per round ({first} -> {last} over {n} rounds, {secs:.2} s): congestion \
         avoidance far below what the path carries. In all, the recoveries and the slow \
         regrowth cost about {cost:.3} s of the connection's {life:.3} s.",
        life = cx.lifetime_s(),
        path = rate(cx.path_bps),
        rec = e.duration() as f64 / 1e6,
        bdp = cx.bdp_segments(),
    );
    f.recommendations = vec![
        format!(
            "Pace the sender ({sender}) to the path rate so slow start cannot overrun the \
             bottleneck buffer: Linux `tc qdisc replace dev <if> root fq` (+ `maxrate {path}`), \
             or a congestion control that paces and probes the bottleneck: \
             `sysctl -w net.ipv4.tcp_congestion_control=bbr`.",
            path = rate(cx.path_bps)
        )
        .into(),
        "Or shape/police at the speed mismatch (10G into 1G): QoS shaping to the slow link's \
         rate, deeper buffers or ECN/AQM on the switch; avoid old Reno stacks that reset the \
         window to one segment (storage vendors: ask for CUBIC/BBR or RFC 6937 PRR)."
            .into(),
    ];
    vec![f]
}
