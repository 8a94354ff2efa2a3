//! What limited the sender in each round trip ([`Limit`]), and its congestion window where
//! the capture shows it ([`RoundLimit::cwnd_est`]).
//!
//! Read from the rounds alone, in order ([`Classifier`]): a timeout or a loss episode
//! first; then a flight at the receiver's advertised window; then the flight's trend. A
//! Linux sender grows its congestion window only while that window limits it
//! (`tcp_is_cwnd_limited`): a flight that grows round after round is the window; one that
//! stays flat for [`FLAT_ROUNDS`] rounds, or shrinks without a loss, is held by the sender
//! itself (its send buffer or application), or by its pacing rate when it is paced.
//!
//! Where the estimate comes from ([`Vantage`]): next to the sender the largest flight of
//! a round is what its window let out; from the receiver's side or the middle, the flight
//! is not visible (the data is acknowledged as it arrives) and the estimate is the data
//! that arrives per round trip.

use super::Round;

/// Rounds of a flat flight after which the sender, not its window, is taken to hold it
/// (tcpdx choice: a window-limited sender grows at least a segment in five rounds, even
/// CUBIC near its plateau and rounds cut at half a round trip).
pub const FLAT_ROUNDS: u32 = 5;

/// A flight within this share of a segment of the previous round's is flat (tcpdx choice:
/// a segment's worth of change is growth).
pub const FLAT_SEGMENTS: f64 = 0.5;

/// A flight this many segments below the previous round's, without a loss, is the
/// sender's own (tcpdx choice: a window does not shrink without a loss).
pub const SHRINK_SEGMENTS: f64 = 2.0;

/// What held the sender back in a round.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Limit {
    /// Its congestion window: the flight grew to it.
    Cwnd,
    /// The receiver's advertised window: the flight reached it.
    ReceiverWindow,
    /// The sender itself (send buffer or application): the flight stayed below both
    /// windows.
    Sender,
    /// Its pacing rate, not a window (a paced sender: BBR).
    Pacing,
    /// Loss recovery (retransmissions repair the window).
    Recovery,
    /// A retransmission timeout, and the window's regrowth from one segment after it.
    Timeout,
}

impl Limit {
    /// Every limit, in the order above.
    pub const ALL: [Limit; 6] = [
        Limit::Cwnd,
        Limit::ReceiverWindow,
        Limit::Sender,
        Limit::Pacing,
        Limit::Recovery,
        Limit::Timeout,
    ];

    /// The name used in exports: `cwnd`, `receiver_window`, `sender`, `pacing`, `recovery`,
    /// `timeout`.
    pub fn as_str(self) -> &'static str {
        match self {
            Limit::Cwnd => "cwnd",
            Limit::ReceiverWindow => "receiver_window",
            Limit::Sender => "sender",
            Limit::Pacing => "pacing",
            Limit::Recovery => "recovery",
            Limit::Timeout => "timeout",
        }
    }
}

/// Where the capture sits relative to the data's sender, which says how exact the window
/// estimate can be.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Vantage {
    /// Next to the sender: the flight is seen as it leaves (exact to a segment).
    Sender,
    /// Next to the receiver or in the middle: the flight is the data arriving per round
    /// trip (exact to the round trip's measure, within a quarter in the lab).
    Receiver,
}

/// One round's limit and window estimate.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RoundLimit {
    /// What held the sender back.
    pub limit: Limit,
    /// Bytes in flight: the largest seen at the sender, or the data arriving per round
    /// trip from the receiver's side.
    pub flight_bytes: u64,
    /// The congestion window (segments) where the round shows it: rounds the window
    /// limits, and recovery and timeout rounds; none where the flight was held below it.
    pub cwnd_est: Option<f64>,
}

/// One round trip of one direction's sender.
#[derive(Clone, Debug, PartialEq)]
pub struct RoundRow {
    /// `tcp.stream`.
    pub stream: u32,
    /// The data's direction.
    pub direction: tcpdx_core::Dir,
    /// Start and end, seconds since the first frame.
    pub start_s: f64,
    /// End: the ACK of the round's first data.
    pub end_s: f64,
    /// Start and end, ns since the epoch (to line up with other clocks).
    pub start_ns: i64,
    /// End, ns since the epoch.
    pub end_ns: i64,
    /// Segments sent in the round (retransmissions included).
    pub segments: u32,
    /// Retransmitted segments.
    pub retransmissions: u32,
    /// Bytes in flight: the largest at the sender, or the data arriving per round trip seen
    /// from the receiver's side ([`RoundRow::vantage`]).
    pub flight_bytes: u64,
    /// Bytes newly acknowledged in the round.
    pub delivered_bytes: u64,
    /// The sender's congestion window (segments) where the round shows it.
    pub cwnd_est: Option<f64>,
    /// What held the sender back.
    pub limit: Limit,
    /// Where the estimate comes from.
    pub vantage: Vantage,
}

/// Classifies rounds in order (see the module's description).
#[derive(Clone, Debug)]
pub struct Classifier {
    mss: f64,
    rtt: i64,
    vantage: Vantage,
    prev_flight: Option<f64>,
    prev_limit: Option<Limit>,
    flat: u32,
}

impl Classifier {
    /// A sender of `mss`-byte segments on a path of `rtt_ns` (0 unknown), seen from
    /// `vantage`.
    pub fn new(mss: u32, rtt_ns: i64, vantage: Vantage) -> Self {
        Self {
            mss: f64::from(mss.max(1)),
            rtt: rtt_ns,
            vantage,
            prev_flight: None,
            prev_limit: None,
            flat: 0,
        }
    }

    /// The round's flight in bytes from this vantage.
    fn flight(&self, r: &Round) -> f64 {
        match self.vantage {
            Vantage::Sender => {
                // Retransmissions do not count in the largest flight: a round of them only
                // has its segments.
                if r.max_in_flight > 0 {
                    r.max_in_flight as f64
                } else {
                    r.bytes as f64
                }
            }
            Vantage::Receiver => {
                let d = r.duration();
                if d <= 0 || self.rtt <= 0 || d < self.rtt {
                    r.bytes as f64
                } else {
                    r.bytes as f64 * self.rtt as f64 / d as f64
                }
            }
        }
    }

    /// Whether the round is one of loss recovery. Next to the sender: the episode was open
    /// at its end, or it retransmitted in it (the kernel leaves Recovery at the ACK that ends
    /// the episode). From the receiver's side the episode's times are the capture's, half a
    /// round trip off the sender's: any overlap.
    fn in_recovery(&self, r: &Round) -> bool {
        match self.vantage {
            Vantage::Sender => r.recovery_at_end || (r.in_recovery && r.retx > 0),
            Vantage::Receiver => r.in_recovery,
        }
    }

    /// The next round's limit.
    pub fn next(&mut self, r: &Round) -> RoundLimit {
        let flight = self.flight(r);
        let segs = flight / self.mss;
        let prev = self.prev_flight.replace(flight);
        let after_loss = matches!(self.prev_limit, Some(Limit::Recovery | Limit::Timeout));
        let limit = if r.timeout {
            Limit::Timeout
        } else if self.in_recovery(r) {
            Limit::Recovery
        } else if r.rwnd_limited {
            Limit::ReceiverWindow
        } else {
            match prev {
                None => Limit::Cwnd,
                Some(_) if after_loss => Limit::Cwnd,
                Some(p) => {
                    let delta = (flight - p) / self.mss;
                    if delta > FLAT_SEGMENTS {
                        self.flat = 0;
                        Limit::Cwnd
                    } else if delta < -SHRINK_SEGMENTS {
                        self.flat = FLAT_ROUNDS;
                        Limit::Sender
                    } else {
                        self.flat += 1;
                        if self.flat >= FLAT_ROUNDS || self.prev_limit == Some(Limit::Sender) {
                            Limit::Sender
                        } else {
                            Limit::Cwnd
                        }
                    }
                }
            }
        };
        if !matches!(limit, Limit::Cwnd | Limit::Sender) {
            self.flat = 0;
        }
        self.prev_limit = Some(limit);
        let cwnd_est = match limit {
            Limit::Cwnd | Limit::Recovery | Limit::Timeout => Some(segs.max(1.0)),
            Limit::ReceiverWindow | Limit::Sender | Limit::Pacing => None,
        };
        RoundLimit {
            limit,
            flight_bytes: flight as u64,
            cwnd_est,
        }
    }
}

/// Every round's limit, in order.
pub fn classify<'a>(
    rounds: impl IntoIterator<Item = Round> + 'a,
    mss: u32,
    rtt_ns: i64,
    vantage: Vantage,
) -> impl Iterator<Item = (Round, RoundLimit)> + 'a {
    let mut c = Classifier::new(mss, rtt_ns, vantage);
    rounds.into_iter().map(move |r| {
        let l = c.next(&r);
        (r, l)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const MSS: u32 = 1000;

    fn round(i: i64, flight_segs: u64) -> Round {
        Round {
            start: i * 10_000_000,
            end: (i + 1) * 10_000_000,
            pkts: flight_segs as u32,
            bytes: flight_segs * u64::from(MSS),
            acked: flight_segs * u64::from(MSS),
            max_in_flight: flight_segs * u64::from(MSS),
            rcv_window: 1 << 20,
            ..Round::default()
        }
    }

    fn limits(rounds: &[Round]) -> Vec<Limit> {
        classify(rounds.iter().copied(), MSS, 10_000_000, Vantage::Sender)
            .map(|(_, l)| l.limit)
            .collect()
    }

    #[test]
    fn a_growing_flight_is_the_window_and_gives_its_size() {
        let rounds: Vec<Round> = [10, 20, 40, 41, 42]
            .iter()
            .enumerate()
            .map(|(i, &f)| round(i as i64, f))
            .collect();
        let got: Vec<RoundLimit> = classify(rounds, MSS, 10_000_000, Vantage::Sender)
            .map(|(_, l)| l)
            .collect();
        assert!(got.iter().all(|l| l.limit == Limit::Cwnd));
        assert_eq!(got[2].cwnd_est, Some(40.0));
    }

    #[test]
    fn a_flight_flat_for_flat_rounds_is_the_sender() {
        // Growth, then flat: the window until FLAT_ROUNDS flat rounds, then the sender.
        let n = FLAT_ROUNDS as usize;
        let flights: Vec<u64> = [10, 20, 30].into_iter().chain([30; 7]).collect();
        let rounds: Vec<Round> = flights
            .iter()
            .enumerate()
            .map(|(i, &f)| round(i as i64, f))
            .collect();
        let got = limits(&rounds);
        for (i, l) in got.iter().enumerate() {
            let want = if i >= 2 + n {
                Limit::Sender
            } else {
                Limit::Cwnd
            };
            assert_eq!(*l, want, "round {i}: {got:?}");
        }
    }

    #[test]
    fn a_small_dip_is_flat_and_a_larger_one_the_sender() {
        for (dip, sender) in [(SHRINK_SEGMENTS, false), (SHRINK_SEGMENTS + 0.1, true)] {
            let mut c = Classifier::new(MSS, 0, Vantage::Sender);
            let mut r = round(0, 20);
            c.next(&r);
            r.max_in_flight = (20_000.0 - dip * f64::from(MSS)) as u64;
            assert_eq!(
                c.next(&r).limit == Limit::Sender,
                sender,
                "{dip} segments less"
            );
        }
    }

    #[test]
    fn half_a_segment_of_growth_is_flat_and_more_is_growth() {
        let mss = f64::from(MSS);
        for (grow, flat) in [(0.5, true), (0.51, false)] {
            let mut c = Classifier::new(MSS, 0, Vantage::Sender);
            let mut f = 20_000.0;
            let mut last = None;
            for i in 0..6 {
                let mut r = round(i, 0);
                r.max_in_flight = f as u64;
                last = Some(c.next(&r).limit);
                f += grow * mss;
            }
            assert_eq!(last == Some(Limit::Sender), flat, "{grow} segment a round");
        }
    }

    #[test]
    fn a_shrinking_flight_without_loss_is_the_sender_and_after_a_loss_the_window() {
        let mut rounds: Vec<Round> = [10, 20, 12]
            .iter()
            .enumerate()
            .map(|(i, &f)| round(i as i64, f))
            .collect();
        assert_eq!(limits(&rounds)[2], Limit::Sender);
        rounds[1].in_recovery = true;
        rounds[1].recovery_at_end = true;
        assert_eq!(limits(&rounds), [Limit::Cwnd, Limit::Recovery, Limit::Cwnd]);
        // Next to the sender, a round that saw the episode end without retransmitting is
        // not one of recovery; from the receiver's side it is.
        rounds[1].recovery_at_end = false;
        assert_eq!(limits(&rounds)[1], Limit::Cwnd);
        rounds[1].retx = 1;
        assert_eq!(limits(&rounds)[1], Limit::Recovery);
        rounds[1].retx = 0;
        let mut c = Classifier::new(MSS, 10_000_000, Vantage::Receiver);
        let got: Vec<Limit> = rounds.iter().map(|r| c.next(r).limit).collect();
        assert_eq!(got[1], Limit::Recovery);
    }

    #[test]
    fn loss_states_and_the_receiver_window_come_first() {
        let mut r = round(0, 10);
        r.timeout = true;
        r.in_recovery = true;
        r.recovery_at_end = true;
        r.max_in_flight = 0;
        r.pkts = 1;
        r.bytes = 1000;
        let l = Classifier::new(MSS, 0, Vantage::Sender).next(&r);
        assert_eq!((l.limit, l.cwnd_est), (Limit::Timeout, Some(1.0)));
        let mut r = round(0, 10);
        r.rwnd_limited = true;
        let l = Classifier::new(MSS, 0, Vantage::Sender).next(&r);
        assert_eq!((l.limit, l.cwnd_est), (Limit::ReceiverWindow, None));
    }

    #[test]
    fn from_the_receiver_the_flight_is_the_data_per_round_trip() {
        let mut r = round(0, 40);
        r.max_in_flight = 2000;
        r.end = r.start + 20_000_000;
        // 40 segments over two round trips of 10 ms: 20 per round trip.
        let l = Classifier::new(MSS, 10_000_000, Vantage::Receiver).next(&r);
        assert_eq!(l.flight_bytes, 20_000);
        // A round shorter than the round trip, or no round trip known: its bytes as they
        // are.
        r.end = r.start + 5_000_000;
        let l = Classifier::new(MSS, 10_000_000, Vantage::Receiver).next(&r);
        assert_eq!(l.flight_bytes, 40_000);
        let l = Classifier::new(MSS, 0, Vantage::Receiver).next(&r);
        assert_eq!(l.flight_bytes, 40_000);
        assert!(Limit::ALL.iter().all(|l| !l.as_str().is_empty()));
    }
}
