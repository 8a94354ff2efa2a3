//! The time budget: each connection's lifetime divided among states that add up to 100%.
//!
//! Every inferred episode paints its interval with a state; where episodes overlap the
//! more specific state wins ([`State::ALL`] is in priority order); time no episode covers is
//! "sending". The capture's budget is the sum over connections (connection-seconds).

use serde::ser::{Serialize, SerializeMap, Serializer};

use crate::infer::idle::IdleTime;
use crate::infer::limit::Limit;
use crate::infer::{ConnTracker, TimerPauses};
use tcpdx_core::Dir;

/// Where a connection's time went.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum State {
    /// Silence ending in a timeout retransmission.
    RetransmissionTimeout,
    /// A lone segment waiting for the receiver's delayed ACK (during recovery, or with a
    /// small segment held by Nagle).
    DelayedAckStall,
    /// The receiver advertised a zero window.
    ZeroWindow,
    /// Repairing a loss (first duplicate ACK to the ACK covering the recovery point).
    LossRecovery,
    /// Nothing in flight; the server answering a request.
    ServerThinkTime,
    /// Nothing in flight; the application not sending.
    ApplicationIdle,
    /// The sender filled the receiver's advertised window.
    ReceiverWindowLimited,
    /// Sending (at the rate the path and the sender's window allow).
    Sending,
}

impl State {
    /// Every state, highest painting priority first.
    pub const ALL: [State; 8] = [
        State::RetransmissionTimeout,
        State::DelayedAckStall,
        State::ZeroWindow,
        State::LossRecovery,
        State::ServerThinkTime,
        State::ApplicationIdle,
        State::ReceiverWindowLimited,
        State::Sending,
    ];
    /// Stable snake_case name (JSON key).
    pub const fn as_str(self) -> &'static str {
        match self {
            State::RetransmissionTimeout => "retransmission_timeout",
            State::DelayedAckStall => "delayed_ack_stall",
            State::ZeroWindow => "zero_window",
            State::LossRecovery => "loss_recovery",
            State::ServerThinkTime => "server_think_time",
            State::ApplicationIdle => "application_idle",
            State::ReceiverWindowLimited => "receiver_window_limited",
            State::Sending => "sending",
        }
    }
    fn idx(self) -> usize {
        Self::ALL.iter().position(|s| *s == self).unwrap_or(7)
    }
}

/// Seconds per state.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct StateTimes(pub [f64; 8]);

impl StateTimes {
    /// Seconds in `s`.
    pub fn get(&self, s: State) -> f64 {
        self.0[s.idx()]
    }
    /// Total seconds.
    pub fn total(&self) -> f64 {
        self.0.iter().sum()
    }
    pub(crate) fn add(&mut self, o: &StateTimes) {
        for (a, b) in self.0.iter_mut().zip(o.0) {
            *a += b;
        }
    }
}

impl Serialize for StateTimes {
    fn serialize<S: Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        #[derive(serde::Serialize)]
        struct Entry {
            seconds: f64,
            share: f64,
        }
        let total = self.total();
        let mut m = ser.serialize_map(Some(8))?;
        for s in State::ALL {
            let seconds = self.get(s);
            let share = if total > 0.0 { seconds / total } else { 0.0 };
            m.serialize_entry(s.as_str(), &Entry { seconds, share })?;
        }
        m.end()
    }
}

/// Seconds of [`State::Sending`] per limit of the main sender's round covering them
/// ([`Limit`]: what held the sender back while it sent); sending time no round covers is in
/// none.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct LimitTimes(pub [f64; 6]);

impl LimitTimes {
    /// Seconds under `l`.
    pub fn get(&self, l: Limit) -> f64 {
        self.0[Self::idx(l)]
    }
    /// Total seconds.
    pub fn total(&self) -> f64 {
        self.0.iter().sum()
    }
    fn idx(l: Limit) -> usize {
        Limit::ALL.iter().position(|x| *x == l).unwrap_or(0)
    }
    pub(crate) fn add(&mut self, o: &LimitTimes) {
        for (a, b) in self.0.iter_mut().zip(o.0) {
            *a += b;
        }
    }
}

impl Serialize for LimitTimes {
    fn serialize<S: Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        let mut m = ser.serialize_map(Some(Limit::ALL.len()))?;
        for l in Limit::ALL {
            m.serialize_entry(l.as_str(), &self.get(l))?;
        }
        m.end()
    }
}

/// One connection's budget.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct ConnBudget {
    /// `tcp.stream`.
    pub stream: u32,
    /// Lifetime in seconds (first to last segment).
    pub seconds: f64,
    /// Seconds per state (they add up to `seconds`).
    pub states: StateTimes,
    /// The `sending` seconds split by what limited the main sender's round then.
    pub sending_limits: LimitTimes,
    /// Start, seconds since the capture's first frame (where the findings' episodes are
    /// placed when time is accounted again, [`crate::account::settle_diagnosis`]).
    #[serde(skip)]
    pub start_s: f64,
}

/// The capture's budget: the sum over connections, and each connection's.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct TimeBudget {
    /// Connection-seconds in total.
    pub seconds: f64,
    /// Connection-seconds per state.
    pub states: StateTimes,
    /// Connection-seconds of `sending` per round limit.
    pub sending_limits: LimitTimes,
    /// Per connection, in stream order.
    pub connections: Vec<ConnBudget>,
}

impl TimeBudget {
    /// Adds a connection's budget.
    pub fn push(&mut self, b: ConnBudget) {
        self.seconds += b.seconds;
        self.states.add(&b.states);
        self.sending_limits.add(&b.sending_limits);
        self.connections.push(b);
    }
}

/// Paints `c`'s lifetime with its episodes (a silence one of `pauses` covers is that timer's;
/// the idle part of the others is [`IdleTime`]'s, as `application-limited` counts it).
pub fn connection_budget(c: &ConnTracker, pauses: &TimerPauses) -> ConnBudget {
    let mut iv: Vec<(i64, i64, State)> = Vec::new();
    for s in &c.senders {
        iv.extend(
            s.rtos
                .iter()
                .map(|r| (r.start, r.end, State::RetransmissionTimeout)),
        );
        iv.extend(
            s.delack
                .iter()
                .map(|d| (d.start, d.end, State::DelayedAckStall)),
        );
        iv.extend(
            s.nagle
                .iter()
                .map(|n| (n.start, n.end, State::DelayedAckStall)),
        );
        iv.extend(
            s.zero_windows
                .iter()
                .map(|z| (z.start, z.end, State::ZeroWindow)),
        );
        iv.extend(
            s.episodes
                .iter()
                .map(|e| (e.start, e.end, State::LossRecovery)),
        );
        iv.extend(
            s.rounds
                .iter()
                .filter(|r| r.rwnd_limited)
                .map(|r| (r.start, r.end, State::ReceiverWindowLimited)),
        );
    }
    let mut idle = IdleTime::new(c, c.path_rtt());
    for g in c.gaps.iter().filter(|g| !pauses.explain(g.start, g.end)) {
        let n = idle.of(&g);
        if n == 0 {
            continue;
        }
        // The side that breaks the silence with data was the one everybody waited for.
        let state = match g.last_data_dir {
            Some(d) if g.next_has_data && g.next_dir != d && g.next_dir == Dir::ServerToClient => {
                State::ServerThinkTime
            }
            _ => State::ApplicationIdle,
        };
        iv.push((g.end - n, g.end, state));
    }
    let dir = c.main_dir();
    let rounds: Vec<(i64, i64, Limit)> = c
        .round_limits(dir)
        .map(|(r, l)| (r.start, r.end, l.limit))
        .collect();
    ConnBudget {
        stream: c.stream,
        seconds: c.lifetime() as f64 / 1e9,
        states: paint(c.first_ts, c.last_ts, &iv),
        sending_limits: split_sending(&uncovered(c.first_ts, c.last_ts, &iv), &rounds),
        start_s: c.rel_s(c.first_ts),
    }
}

/// The parts of `[from, to]` no interval covers (the budget's `sending` time), in order.
pub fn uncovered(from: i64, to: i64, intervals: &[(i64, i64, State)]) -> Vec<(i64, i64)> {
    let mut v: Vec<(i64, i64)> = intervals
        .iter()
        .map(|&(a, b, _)| (a.max(from), b.min(to)))
        .filter(|(a, b)| b > a)
        .collect();
    v.sort_unstable();
    let mut out = Vec::new();
    let mut at = from;
    for (a, b) in v {
        if a > at {
            out.push((at, a));
        }
        at = at.max(b);
    }
    if to > at {
        out.push((at, to));
    }
    out
}

/// Seconds of `sending` (sorted, disjoint) inside each round, by the round's limit. Rounds
/// follow one another (each starts at or after the previous one's start); where two
/// overlap, the later one's limit takes the overlap.
pub fn split_sending(sending: &[(i64, i64)], rounds: &[(i64, i64, Limit)]) -> LimitTimes {
    let mut out = LimitTimes::default();
    let mut j = 0;
    for (k, &(a, b, l)) in rounds.iter().enumerate() {
        // A round's time up to the next round's start is its own.
        let b = rounds.get(k + 1).map_or(b, |n| b.min(n.0.max(a)));
        while j < sending.len() && sending[j].1 <= a {
            j += 1;
        }
        let mut i = j;
        while i < sending.len() && sending[i].0 < b {
            let (lo, hi) = (sending[i].0.max(a), sending[i].1.min(b));
            if hi > lo {
                out.0[LimitTimes::idx(l)] += (hi - lo) as f64 / 1e9;
            }
            i += 1;
        }
    }
    out
}

/// Seconds per state over `[from, to]`, highest-priority state winning where intervals
/// overlap; uncovered time is [`State::Sending`].
pub fn paint(from: i64, to: i64, intervals: &[(i64, i64, State)]) -> StateTimes {
    let mut points: Vec<(i64, bool, usize)> = Vec::with_capacity(intervals.len() * 2);
    for &(a, b, s) in intervals {
        let (a, b) = (a.max(from), b.min(to));
        if b > a {
            points.push((a, true, s.idx()));
            points.push((b, false, s.idx()));
        }
    }
    points.sort_unstable_by_key(|p| (p.0, p.1));
    let mut active = [0u32; 8];
    let mut out = StateTimes::default();
    let mut t = from;
    for (x, open, i) in points {
        if x > t {
            let top = active.iter().position(|&n| n > 0).unwrap_or(7);
            out.0[top] += (x - t) as f64 / 1e9;
            t = x;
        }
        if open {
            active[i] += 1;
        } else {
            active[i] = active[i].saturating_sub(1);
        }
    }
    if to > t {
        let top = active.iter().position(|&n| n > 0).unwrap_or(7);
        out.0[top] += (to - t) as f64 / 1e9;
    }
    out
}

impl tcpdx_core::codec::Codec for StateTimes {
    fn enc(&self, w: &mut Vec<u8>) {
        tcpdx_core::codec::Codec::enc(&self.0, w);
    }
    fn dec(r: &mut tcpdx_core::codec::Dec<'_>) -> Result<Self, tcpdx_core::codec::DecodeError> {
        tcpdx_core::codec::Codec::dec(r).map(Self)
    }
}

impl tcpdx_core::codec::Codec for LimitTimes {
    fn enc(&self, w: &mut Vec<u8>) {
        tcpdx_core::codec::Codec::enc(&self.0, w);
    }
    fn dec(r: &mut tcpdx_core::codec::Dec<'_>) -> Result<Self, tcpdx_core::codec::DecodeError> {
        tcpdx_core::codec::Codec::dec(r).map(Self)
    }
}

tcpdx_core::codec_struct!(ConnBudget {
    stream,
    seconds,
    states,
    sending_limits,
    start_s
});

#[cfg(test)]
mod tests {
    use super::*;

    const MS: i64 = 1_000_000;

    #[test]
    fn states_add_up_and_priority_wins() {
        let iv = [
            (100 * MS, 400 * MS, State::LossRecovery),
            (200 * MS, 300 * MS, State::RetransmissionTimeout),
            (350 * MS, 500 * MS, State::ApplicationIdle),
        ];
        let t = paint(0, 1000 * MS, &iv);
        assert!((t.total() - 1.0).abs() < 1e-9);
        assert!((t.get(State::RetransmissionTimeout) - 0.1).abs() < 1e-9);
        assert!((t.get(State::LossRecovery) - 0.2).abs() < 1e-9);
        assert!((t.get(State::ApplicationIdle) - 0.1).abs() < 1e-9);
        assert!((t.get(State::Sending) - 0.6).abs() < 1e-9);
    }

    #[test]
    fn sending_time_is_split_by_the_rounds_limits() {
        let iv = [(200 * MS, 300 * MS, State::LossRecovery)];
        let sending = uncovered(0, 1000 * MS, &iv);
        assert_eq!(sending, [(0, 200 * MS), (300 * MS, 1000 * MS)]);
        let rounds = [
            (100 * MS, 250 * MS, Limit::Cwnd),
            // overlaps the next round: cut at its start
            (250 * MS, 450 * MS, Limit::Recovery),
            (400 * MS, 600 * MS, Limit::Sender),
            (700 * MS, 800 * MS, Limit::ReceiverWindow),
        ];
        let t = split_sending(&sending, &rounds);
        assert!((t.get(Limit::Cwnd) - 0.1).abs() < 1e-9, "{t:?}");
        assert!((t.get(Limit::Recovery) - 0.1).abs() < 1e-9, "{t:?}");
        assert!((t.get(Limit::Sender) - 0.2).abs() < 1e-9, "{t:?}");
        assert!((t.get(Limit::ReceiverWindow) - 0.1).abs() < 1e-9, "{t:?}");
        // Sending time no round covers stays out: never more than the sending state.
        let paint_sending = paint(0, 1000 * MS, &iv).get(State::Sending);
        assert!(t.total() < paint_sending);
        let json = serde_json::to_string(&t).unwrap();
        assert!(json.starts_with("{\"cwnd\":0.1"), "{json}");
        assert!(json.contains("\"receiver_window\":0.1") && json.contains("\"timeout\":0.0"));
    }

    #[test]
    fn intervals_are_clipped_to_the_lifetime() {
        let t = paint(
            0,
            10,
            &[(-5, 5, State::ZeroWindow), (8, 20, State::ZeroWindow)],
        );
        assert!((t.get(State::ZeroWindow) - 7e-9).abs() < 1e-15);
        assert!((t.total() - 10e-9).abs() < 1e-15);
    }
}
