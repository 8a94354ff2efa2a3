//! The detectors: one module per catalogue kind, each a pure function from a connection's
//! inference ([`ConnContext`]) to findings. They never see bytes or frames, only what
//! `crate::infer` derived from the core's events.

pub mod application_limited;
pub mod capture_quality;
pub mod cwnd_collapse;
pub mod delack_slowstart_stall;
pub mod fixed_duration_stall;
pub mod handshake_and_setup;
pub mod nagle_delack_stall;
pub mod network_loss;
pub mod path_limited;
pub mod receiver_host_drops;
pub mod receiver_window_limited;
pub mod rto_stall;
pub mod sender_limited;
pub mod spurious_retransmission;

#[cfg(test)]
mod tests;

use tcpdx_core::Dir;

use crate::budget::{ConnBudget, State};
use crate::finding::{Cost, Finding, FindingKind, Severity};
use crate::infer::{CapturePoint, ConnTracker, LossEpisode, SenderState, TimerPauses};

/// A detector: the findings it makes about one connection.
pub type Detector = fn(&ConnContext<'_>) -> Vec<Finding>;

/// Every detector of a connection, in catalogue order. The healthy "path-limited" finding
/// is added afterwards, only when nothing above info was found.
pub const DETECTORS: &[(FindingKind, Detector)] = &[
    (
        FindingKind::DelackSlowstartStall,
        delack_slowstart_stall::detect,
    ),
    (FindingKind::NagleDelackStall, nagle_delack_stall::detect),
    (FindingKind::RtoStall, rto_stall::detect),
    (FindingKind::NetworkLoss, network_loss::detect),
    (
        FindingKind::SpuriousRetransmission,
        spurious_retransmission::detect,
    ),
    (FindingKind::CwndCollapse, cwnd_collapse::detect),
    (
        FindingKind::ReceiverWindowLimited,
        receiver_window_limited::detect,
    ),
    (FindingKind::ReceiverHostDrops, receiver_host_drops::detect),
    (
        FindingKind::FixedDurationStall,
        fixed_duration_stall::detect,
    ),
    (FindingKind::ApplicationLimited, application_limited::detect),
    (FindingKind::SenderLimited, sender_limited::detect),
    (FindingKind::HandshakeAndSetup, handshake_and_setup::detect),
    (FindingKind::CaptureQuality, capture_quality::detect),
];

/// One connection as the detectors see it, from the point of view of its main data sender.
#[derive(Clone, Copy, Debug)]
pub struct ConnContext<'a> {
    /// The inference.
    pub conn: &'a ConnTracker,
    /// Its time budget.
    pub budget: &'a ConnBudget,
    /// Its timer pauses: a silence one covers is that timer finding's.
    pub pauses: &'a TimerPauses,
    /// Direction carrying most data.
    pub dir: Dir,
    /// Path round trip (ns, 0 unknown).
    pub rtt: i64,
    /// Highest delivery rate measured over a round trip (bits/s, 0 unknown): the path's
    /// capacity as far as this connection showed it.
    pub path_bps: f64,
    /// Where the capture was taken.
    pub capture_point: CapturePoint,
}

impl<'a> ConnContext<'a> {
    /// Builds the context of a finished connection.
    pub fn new(conn: &'a ConnTracker, budget: &'a ConnBudget, pauses: &'a TimerPauses) -> Self {
        let dir = conn.main_dir();
        // A round trip shorter than the capture clock can measure is unknown.
        let rtt = conn.facts.measurable(conn.path_rtt());
        Self {
            conn,
            budget,
            pauses,
            dir,
            rtt,
            path_bps: conn.senders[dir.idx()].max_delivery_bps(rtt),
            capture_point: conn.handshake.capture_point(),
        }
    }
    /// The main data sender.
    pub fn sender(&self) -> &'a SenderState {
        &self.conn.senders[self.dir.idx()]
    }
    /// `tcp.stream`.
    pub fn stream(&self) -> u32 {
        self.conn.stream
    }
    /// Lifetime in seconds.
    pub fn lifetime_s(&self) -> f64 {
        self.budget.seconds
    }
    /// Goodput of the main direction over the lifetime, bits/s.
    pub fn goodput_bps(&self) -> f64 {
        let life = self.lifetime_s();
        if life > 0.0 {
            self.sender().unique_bytes() as f64 * 8.0 / life
        } else {
            0.0
        }
    }
    /// The cost of `seconds` lost on this connection, with the what-if goodput.
    pub fn cost(&self, seconds: f64) -> Cost {
        let life = self.lifetime_s();
        // Not `clamp`: an empty sum is -0.0, which would print as "-0.000 s".
        let seconds = if seconds > 0.0 {
            seconds.min(life.max(0.0))
        } else {
            0.0
        };
        let share = if life > 0.0 { seconds / life } else { 0.0 };
        let without = life - seconds;
        let goodput_without_bps = (self.sender().data_bytes > 0 && without > 0.0)
            .then(|| self.goodput_bps() * life / without);
        Cost {
            seconds,
            share,
            goodput_without_bps,
        }
    }
    /// A finding of `kind` for this connection with `cost_s` seconds of cost, its severity
    /// from the share.
    pub fn finding(&self, kind: FindingKind, cost_s: f64) -> Finding {
        let mut f = Finding::new(kind, Some(self.stream()));
        f.cost = self.cost(cost_s);
        f.severity = Severity::from_share(f.cost.share);
        f
    }
    /// Seconds since the capture's first frame.
    pub fn rel_s(&self, ts: i64) -> f64 {
        self.conn.rel_s(ts)
    }
    /// Sender and receiver addresses of the main direction, `ip:port`.
    pub fn endpoints(&self) -> (String, String) {
        self.endpoints_of(self.dir)
    }
    /// Sender and receiver addresses of the data flowing in `dir`, `ip:port`.
    pub fn endpoints_of(&self, dir: Dir) -> (String, String) {
        let e = &self.conn.endpoints;
        let (c, s) = (e[0].clone(), e[1].clone());
        match dir {
            Dir::ClientToServer => (c, s),
            Dir::ServerToClient => (s, c),
        }
    }
    /// True if the capture was taken next to the data receiver.
    pub fn capture_near_receiver(&self) -> bool {
        matches!(
            (self.capture_point, self.dir),
            (CapturePoint::NearServer, Dir::ClientToServer)
                | (CapturePoint::NearClient, Dir::ServerToClient)
        )
    }
    /// True if the capture was taken next to the data sender.
    pub fn capture_near_sender(&self) -> bool {
        matches!(
            (self.capture_point, self.dir),
            (CapturePoint::NearClient, Dir::ClientToServer)
                | (CapturePoint::NearServer, Dir::ServerToClient)
        )
    }
    /// Seconds of `state` in this connection's budget.
    pub fn budget_s(&self, state: State) -> f64 {
        self.budget.states.get(state)
    }
    /// The path bandwidth-delay product in segments (0 unknown).
    pub fn bdp_segments(&self) -> f64 {
        let mss = self.sender().mss.max(1) as f64;
        self.path_bps * self.rtt as f64 / 8e9 / mss
    }
}

/// Loss episodes with real (not spurious) losses.
pub fn real_loss_episodes(s: &SenderState) -> impl Iterator<Item = LossEpisode> + '_ {
    s.episodes.iter().filter(|e| e.real_losses() > 0)
}

/// Window deficit after an episode: the time the sender's window spent below `target`
/// segments, weighted by how far below, over the rounds from `first_round` until it regains
/// the target, the next episode starts, or a round lasts longer than `max_round_ns` (0: no
/// bound). Seconds.
pub fn window_deficit_s(
    s: &SenderState,
    first_round: usize,
    target: f64,
    until: i64,
    max_round_ns: i64,
) -> f64 {
    if target <= 0.0 {
        return 0.0;
    }
    let mut lost = 0.0;
    for r in s.rounds.iter_from(first_round) {
        if r.start >= until || r.in_recovery {
            break;
        }
        // A round waiting for a delayed ACK is that stall's cost (delack-slowstart-stall),
        // not the window's.
        if in_delack_stall(s, r.start, r.end) {
            continue;
        }
        let w = f64::from(r.pkts);
        // A round of many round trips is a pause (the application, a timer): the window
        // did not hold the sender back then, and that time is another finding's.
        if w >= target || r.rwnd_limited || (max_round_ns > 0 && r.duration() > max_round_ns) {
            break;
        }
        lost += r.duration() as f64 / 1e9 * (1.0 - w / target);
    }
    lost
}

/// True if `[start, end]` lies within one of the sender's delayed-ACK stalls (after loss
/// recovery) or Nagle pauses: time those findings already cost. (Retransmission timeouts
/// are not looked at here.)
pub fn in_delack_stall(s: &SenderState, start: i64, end: i64) -> bool {
    let within = |a: i64, b: i64| start >= a && end <= b;
    s.delack.iter().any(|d| within(d.start, d.end))
        || s.nagle.iter().any(|n| within(n.start, n.end))
}

/// A round lasting more than this many path round trips ends a window deficit (tcpdx
/// choice: queueing stretches a loaded round to a few round trips; a pause is longer).
pub const DEFICIT_ROUND_MAX_RTTS: i64 = 4;

/// Share of a recovery episode's duration counted as lost: during fast recovery the sender
/// still sends, at about half its rate (RFC 5681 section 3.2 halves the window; RFC 6937 PRR
/// spreads the reduction over the episode).
pub const RECOVERY_LOST_SHARE: f64 = 0.5;

/// What episode `i` of the main sender cost: half its duration, plus the window deficit
/// afterwards (until the window regains its size before the loss, capped at the path's
/// bandwidth-delay product, or the next episode starts). Seconds.
pub fn episode_cost_s(cx: &ConnContext<'_>, i: usize) -> f64 {
    let s = cx.sender();
    let Some(e) = s.episodes.get(i) else {
        return 0.0;
    };
    let until = s.episodes.get(i + 1).map_or(i64::MAX, |n| n.start);
    let bdp = cx.bdp_segments();
    let mut target = f64::from(e.window_before);
    if bdp > 0.0 {
        target = target.min(bdp);
    }
    e.duration() as f64 / 1e9 * RECOVERY_LOST_SHARE
        + window_deficit_s(
            s,
            e.next_round,
            target,
            until,
            DEFICIT_ROUND_MAX_RTTS * cx.rtt.max(0),
        )
}

/// Milliseconds, for prose.
pub fn ms(ns: i64) -> String {
    format!("{:.1} ms", ns as f64 / 1e6)
}

/// Bits per second, for prose (`123.4 Mb/s`).
pub fn rate(bps: f64) -> String {
    if bps >= 1e9 {
        format!("{:.2} Gb/s", bps / 1e9)
    } else if bps >= 1e6 {
        format!("{:.1} Mb/s", bps / 1e6)
    } else {
        format!("{:.1} kb/s", bps / 1e3)
    }
}
