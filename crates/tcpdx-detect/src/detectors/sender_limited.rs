//! `sender-limited` (Linux `tcpi_sndbuf_limited` wording): the sender kept less in flight
//! than both its congestion window and the receiver's window allowed, while it kept
//! sending: its send buffer, not the network or the receiver, set the pace.
//!
//! Told apart from `application-limited` by continuity: an application's pauses are idle
//! gaps with nothing in flight (that kind's time); a send buffer keeps a flight below the
//! windows round after round with no gap. A round counts here when the round limits
//! (`infer::limit`) say the sender held it, it lasted a few round trips at most, and no
//! idle gap fell in it.

use super::{ConnContext, DEFICIT_ROUND_MAX_RTTS, ms, rate};
use crate::finding::{Finding, FindingKind};
use crate::infer::Round;
use crate::infer::limit::{Limit, RoundLimit, Vantage};
use crate::infer::sender::{RATE_MIN_PKTS, RATE_MIN_RTT_SHARE};

/// Share of the main sender's round-trip time in sender-held rounds needed for a finding
/// (tcpdx choice: the sender's own limit must be the connection's usual state, not a
/// phase of it such as the end of a transfer).
pub const SENDER_MIN_SHARE: f64 = 0.5;

/// Sender-held rounds needed for a finding (tcpdx choice: a flight is taken as held only
/// after five flat rounds, `infer::limit::FLAT_ROUNDS`; twice that is a steady state).
pub const MIN_ROUNDS: usize = 10;

/// A sender-held round costs time only when the path showed a delivery rate at least
/// this much above the round's (tcpdx choice: a round's rate varies by a tenth or two with
/// ACK timing and a paced sender's gain cycle; a quarter is the sender's own doing).
pub const RATE_ROOM: f64 = 1.25;

/// One sender-held round: counted when the limits say so and nothing else explains it. A
/// round that an idle gap ends at was started by the application after its pause.
fn held(r: &Round, l: &RoundLimit, rtt: i64, idle: &[(i64, i64)]) -> bool {
    l.limit == Limit::Sender
        && r.pkts >= RATE_MIN_PKTS
        && rtt > 0
        && r.duration() <= DEFICIT_ROUND_MAX_RTTS * rtt
        && !idle.iter().any(|&(a, b)| a < r.end && b >= r.start)
}

/// Seconds a sender-held round lost against `ceiling_bps`, the fastest delivery the path
/// showed in rounds the sender did not hold (0: none, the room above is unknown).
pub fn round_cost_s(r: &Round, ceiling_bps: f64) -> f64 {
    let rate = r.delivery_bps();
    if ceiling_bps <= 0.0 || rate * RATE_ROOM > ceiling_bps {
        return 0.0;
    }
    r.duration() as f64 / 1e9 * (1.0 - rate / ceiling_bps)
}

/// The main sender's rounds as this finding reads them.
#[derive(Debug, Default)]
pub struct Tally {
    /// Sender-held rounds with their flight (bytes).
    pub held: Vec<(Round, u64)>,
    /// Every round's time and the idle time, ns.
    pub total_ns: i64,
    /// The held rounds' time, ns.
    pub held_ns: i64,
    /// Fastest delivery in rounds a window limited (bits/s, 0 none): what the path carried.
    pub ceiling_bps: f64,
}

impl Tally {
    /// Reads `rounds` of a path of `rtt` ns with the application's `idle` gaps.
    pub fn new(
        rounds: impl IntoIterator<Item = (Round, RoundLimit)>,
        rtt: i64,
        idle: &[(i64, i64)],
    ) -> Self {
        let mut t = Self {
            total_ns: idle.iter().map(|(a, b)| b - a).sum(),
            ..Self::default()
        };
        let min_dur = (rtt as f64 * RATE_MIN_RTT_SHARE) as i64;
        for (r, l) in rounds {
            t.total_ns += r.duration();
            if held(&r, &l, rtt, idle) {
                t.held_ns += r.duration();
                t.held.push((r, l.flight_bytes));
            } else if matches!(l.limit, Limit::Cwnd | Limit::ReceiverWindow)
                && r.pkts >= RATE_MIN_PKTS
                && r.duration() >= min_dur
            {
                t.ceiling_bps = t.ceiling_bps.max(r.delivery_bps());
            }
        }
        t
    }
    /// Share of the round-trip and idle time the sender held.
    pub fn share(&self) -> f64 {
        self.held_ns as f64 / self.total_ns.max(1) as f64
    }
    /// Enough held rounds, for a large enough share of the time, for a finding.
    pub fn enough(&self) -> bool {
        self.held.len() >= MIN_ROUNDS && self.share() >= SENDER_MIN_SHARE
    }
}

/// What the path could carry, against which held rounds are priced.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Ceiling {
    /// The fastest round a window limited (bits/s).
    WindowRound(f64),
    /// The median ACK-train rate: the bottleneck's spacing of back-to-back data (bits/s).
    AckTrains(f64),
    /// The receiver's window per round trip (bits/s): what the receiver offered.
    ReceiverWindow(f64),
    /// Nothing known.
    Unknown,
}

impl Ceiling {
    /// The faster of the fastest window-limited round (`round_bps`) and the ACK trains
    /// (`train_bps`): slow start's rounds below the held flight are no measure of the path;
    /// with neither, the receiver's largest window (`rcv_window` bytes) per `rtt` ns.
    pub fn pick(round_bps: f64, train_bps: f64, rcv_window: u64, rtt: i64) -> Self {
        if round_bps > 0.0 && round_bps >= train_bps {
            Self::WindowRound(round_bps)
        } else if train_bps > 0.0 {
            Self::AckTrains(train_bps)
        } else if rcv_window > 0 && rtt > 0 {
            Self::ReceiverWindow(rcv_window as f64 * 8e9 / rtt as f64)
        } else {
            Self::Unknown
        }
    }
    /// Its rate (bits/s; 0 unknown).
    pub fn bps(&self) -> f64 {
        match *self {
            Self::WindowRound(b) | Self::AckTrains(b) | Self::ReceiverWindow(b) => b,
            Self::Unknown => 0.0,
        }
    }
    /// Where the rate comes from, for the explanation.
    fn source(&self) -> &'static str {
        match self {
            Self::WindowRound(_) => "in rounds the windows limited",
            Self::AckTrains(_) => {
                "in the spacing of its ACKs (the bottleneck's pace of back-to-back segments)"
            }
            Self::ReceiverWindow(_) => "as the receiver's window per round trip",
            Self::Unknown => "",
        }
    }
}

/// Finds a main sender that held its own flight below both windows.
pub fn detect(cx: &ConnContext<'_>) -> Vec<Finding> {
    let s = cx.sender();
    // From the receiver's side a flat arrival rate cannot tell a send buffer from the
    // path; a connection that moved little is chatter, application-limited's.
    if cx.conn.vantage(cx.dir) != Vantage::Sender
        || s.data_bytes < super::handshake_and_setup::BULK_BYTES
        || cx.rtt <= 0
    {
        return Vec::new();
    }
    let idle: Vec<(i64, i64)> = cx
        .conn
        .gaps
        .iter()
        .filter_map(|g| {
            let i = g.idle_ns(cx.rtt);
            (i > 0).then_some((g.end - i, g.end))
        })
        .collect();
    let t = Tally::new(cx.conn.round_limits(cx.dir), cx.rtt, &idle);
    if !t.enough() {
        return Vec::new();
    }
    let (rounds, share) = (&t.held, t.share());
    let max_window = s.max_rcv_window;
    // The buffer may hold the whole transfer (no window-limited round, or only slow
    // start's below the held flight): the path's capacity from the ACK spacing.
    let source = Ceiling::pick(t.ceiling_bps, s.trains.median_bps(), max_window, cx.rtt);
    let ceiling = source.bps();
    let cost: f64 = rounds.iter().map(|(r, _)| round_cost_s(r, ceiling)).sum();
    let mut f = cx.finding(FindingKind::SenderLimited, cost);
    // Back-to-back held rounds are one episode.
    let mut stretches: Vec<(i64, i64)> = Vec::new();
    for (r, _) in rounds {
        match stretches.last_mut() {
            Some(last) if r.start <= last.1 => last.1 = last.1.max(r.end),
            _ => stretches.push((r.start, r.end)),
        }
    }
    f.episodes = stretches.len() as u32;
    for &(a, b) in &stretches {
        f.episode(cx.rel_s(a), (b - a) as f64 / 1e9);
    }
    let mut flights: Vec<u64> = rounds.iter().map(|&(_, b)| b).collect();
    flights.sort_unstable();
    let flight = flights[flights.len() / 2];
    let rcv_window = rounds.iter().map(|(r, _)| r.rcv_window).max().unwrap_or(0);
    let held_bps = rounds.iter().map(|(r, _)| r.acked).sum::<u64>() as f64 * 8e9
        / rounds.iter().map(|(r, _)| r.duration()).sum::<i64>().max(1) as f64;
    let bdp = send_buffer_bytes(ceiling, held_bps, cx.rtt, rcv_window.max(max_window));
    f.wireshark_filter = format!("tcp.stream == {} && tcp.len > 0", cx.stream());
    f.confidence = if cost > 0.0 { 0.7 } else { 0.5 };
    let (sender, receiver) = cx.endpoints();
    let room = if ceiling > held_bps * RATE_ROOM {
        format!(
            "the path showed {} {}, so the sender's own limit cost {cost:.3} s",
            rate(ceiling),
            source.source()
        )
    } else {
        "no round delivered faster, so how much more the path could carry is not shown \
         by the capture"
            .to_string()
    };
    f.explanation = format!(
        "{sender} kept about {flight} bytes in flight in {n} of its round trips ({pct:.0}% \
         of its round-trip time), below its congestion window (the flight stayed flat \
         without a loss) and below {receiver}'s window ({rcv_window} bytes), while sending \
         without idle gaps: the sender itself held it back (its send buffer, or an application \
         writing no faster), not the network. It delivered \
         {got} at a {rtt} round trip; {room}.",
        n = rounds.len(),
        pct = share * 100.0,
        got = rate(held_bps),
        rtt = ms(cx.rtt),
    );
    f.recommendations = vec![
        format!(
            "On {sender}: a send buffer of at least {what} bytes (Linux: `sysctl -w \
             net.ipv4.tcp_wmem='4096 16384 {max}'`, the buffer also holding unsent data and \
             overhead, hence twice the product; or `setsockopt(SO_SNDBUF, {bdp})` in the \
             application, which Linux doubles for that overhead, caps at \
             net.core.wmem_max and no longer autotunes).",
            what = if ceiling > held_bps {
                format!(
                    "the bandwidth-delay product, BDP = {} x {} = {bdp}",
                    rate(ceiling),
                    ms(cx.rtt)
                )
            } else {
                format!("the receiver's window, {bdp}")
            },
            max = (bdp.saturating_mul(2)).max(4_194_304),
        )
        .into(),
        "If the buffer is already large, the sending application writes too little at a \
         time (small writes, a rate limit of its own)."
            .into(),
    ];
    vec![f]
}

/// The send buffer (bytes) the advice asks for: the bandwidth-delay product at the path's
/// rate `ceiling_bps` over `rtt` ns where that is above the held rate `held_bps`; else (no
/// faster rate shown) at least what the receiver offers, `rcv_window`.
pub fn send_buffer_bytes(ceiling_bps: f64, held_bps: f64, rtt: i64, rcv_window: u64) -> u64 {
    if ceiling_bps > held_bps {
        (ceiling_bps * rtt as f64 / 8e9) as u64
    } else {
        rcv_window
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: i64 = 1_000_000;

    fn round(acked: u64, dur_ms: i64) -> Round {
        Round {
            start: 0,
            end: dur_ms * MS,
            pkts: 10,
            acked,
            ..Round::default()
        }
    }

    #[test]
    fn the_ceiling_is_the_faster_of_rounds_and_trains_else_the_receiver() {
        let rtt = 10 * MS;
        assert_eq!(
            Ceiling::pick(100e6, 50e6, 1_000, rtt),
            Ceiling::WindowRound(100e6)
        );
        assert_eq!(
            Ceiling::pick(100e6, 100e6, 1_000, rtt),
            Ceiling::WindowRound(100e6)
        );
        assert_eq!(
            Ceiling::pick(100e6, 100e6 + 1.0, 1_000, rtt),
            Ceiling::AckTrains(100e6 + 1.0)
        );
        assert_eq!(
            Ceiling::pick(0.0, 50e6, 1_000, rtt),
            Ceiling::AckTrains(50e6)
        );
        // Neither: 125 kB per 10 ms = 100 Mbit/s.
        let c = Ceiling::pick(0.0, 0.0, 125_000, rtt);
        assert_eq!(c, Ceiling::ReceiverWindow(100e6));
        assert_eq!(Ceiling::pick(0.0, 0.0, 0, rtt), Ceiling::Unknown);
        assert_eq!(Ceiling::pick(0.0, 0.0, 125_000, 0), Ceiling::Unknown);
        assert_eq!(Ceiling::Unknown.bps(), 0.0);
    }

    #[test]
    fn the_buffer_asked_for_is_the_bdp_above_the_held_rate() {
        // 100 Mbit/s x 10 ms = 125 kB.
        assert_eq!(send_buffer_bytes(100e6, 50e6, 10 * MS, 9), 125_000);
        // Not above the held rate: the receiver's window.
        assert_eq!(send_buffer_bytes(50e6, 50e6, 10 * MS, 9), 9);
        assert_eq!(send_buffer_bytes(0.0, 50e6, 10 * MS, 9), 9);
    }

    #[test]
    fn a_round_costs_only_below_the_rate_room() {
        // 125 kB in 10 ms = 100 Mbit/s.
        let r = round(125_000, 10);
        // The path showed exactly RATE_ROOM times that: priced.
        let c = round_cost_s(&r, 100e6 * RATE_ROOM);
        assert!((c - 0.010 * (1.0 - 1.0 / RATE_ROOM)).abs() < 1e-9, "{c}");
        // Just below the room: rate variation, not the sender.
        assert_eq!(round_cost_s(&r, 100e6 * RATE_ROOM * 0.999), 0.0);
        // Well above: the shortfall.
        let c = round_cost_s(&r, 400e6);
        assert!((c - 0.0075).abs() < 1e-9, "{c}");
        // No ceiling known.
        assert_eq!(round_cost_s(&r, 0.0), 0.0);
    }

    fn limit(limit: Limit) -> RoundLimit {
        RoundLimit {
            limit,
            flight_bytes: 14_480,
            cwnd_est: None,
        }
    }

    /// `held` sender-held rounds and `other` window-limited ones, 10 ms each.
    fn tally(held: usize, other: usize) -> Tally {
        let rounds = (0..held + other).map(|i| {
            let r = Round {
                start: i as i64 * 10 * MS,
                end: (i as i64 + 1) * 10 * MS,
                ..round(14_480, 10)
            };
            let l = if i < other {
                Limit::Cwnd
            } else {
                Limit::Sender
            };
            (r, limit(l))
        });
        Tally::new(rounds, 10 * MS, &[])
    }

    #[test]
    fn a_finding_needs_min_rounds_for_the_min_share() {
        // Half the time held is the line (SENDER_MIN_SHARE), with MIN_ROUNDS rounds.
        assert!(tally(MIN_ROUNDS * 2, MIN_ROUNDS * 2).enough());
        assert!(!tally(MIN_ROUNDS * 2 - 1, MIN_ROUNDS * 2).enough());
        assert!(tally(MIN_ROUNDS * 2 + 1, MIN_ROUNDS * 2).enough());
        // Below MIN_ROUNDS held rounds, whatever the share.
        assert!(!tally(MIN_ROUNDS - 1, 0).enough());
        assert!(tally(MIN_ROUNDS, 0).enough());
        assert!(tally(MIN_ROUNDS + 1, 0).enough());
        // The window-limited rounds give the path's rate.
        let t = tally(MIN_ROUNDS, 1);
        assert!((t.ceiling_bps - 14_480.0 * 8.0 / 0.010).abs() < 1e-6);
        assert!((t.share() - MIN_ROUNDS as f64 / (MIN_ROUNDS + 1) as f64).abs() < 1e-9);
    }

    #[test]
    fn a_held_round_is_the_senders_not_an_idle_gap_or_a_long_pause() {
        let l = RoundLimit {
            limit: Limit::Sender,
            flight_bytes: 10_000,
            cwnd_est: None,
        };
        let rtt = 10 * MS;
        let r = round(10_000, 10);
        assert!(held(&r, &l, rtt, &[]));
        // An idle gap inside it: the application's pause.
        assert!(!held(&r, &l, rtt, &[(5 * MS, 6 * MS)]));
        assert!(held(&r, &l, rtt, &[(10 * MS, 12 * MS)]));
        assert!(!held(&r, &l, rtt, &[(-5 * MS, 0)]));
        assert!(held(&r, &l, rtt, &[(-5 * MS, -1)]));
        // At DEFICIT_ROUND_MAX_RTTS round trips still the sender's, above it a pause.
        let long = round(10_000, 10 * DEFICIT_ROUND_MAX_RTTS);
        assert!(held(&long, &l, rtt, &[]));
        let longer = Round {
            end: long.end + 1,
            ..long
        };
        assert!(!held(&longer, &l, rtt, &[]));
        // Other limits, too few segments, or no round trip known.
        let cw = RoundLimit {
            limit: Limit::Cwnd,
            ..l
        };
        assert!(!held(&r, &cw, rtt, &[]));
        let few = Round {
            pkts: RATE_MIN_PKTS - 1,
            ..r
        };
        assert!(!held(&few, &l, rtt, &[]));
        let at = Round {
            pkts: RATE_MIN_PKTS,
            ..r
        };
        assert!(held(&at, &l, rtt, &[]));
        assert!(!held(&r, &l, 0, &[]));
    }
}
