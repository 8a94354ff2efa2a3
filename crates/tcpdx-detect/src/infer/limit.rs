//! What limited the sender in each round trip ([`Limit`]), and its congestion window where
//! the capture shows it ([`RoundLimit::cwnd_est`]).
//!
//! Read from the rounds alone, in order ([`Classifier`]): a timeout or the Recovery state
//! at the round's end first; then a flight at the receiver's advertised window; then, next
//! to the sender, a flight below the smallest window the sender can have (the initial
//! window before any loss, the largest flight since the last loss: a window does not
//! shrink without one) is the sender's own, and the flight's trend decides the rest. A
//! Linux sender grows its congestion window only while that window limits it
//! (`tcp_is_cwnd_limited`): a flight that grows round after round is the window; one that
//! stays flat for [`FLAT_ROUNDS`] rounds, or shrinks without a loss, is held by the sender
//! itself (its send buffer or application), or by its pacing rate when its departures are
//! paced ([`Round::paced`]: BBR).
//!
//! Where the estimate comes from ([`Vantage`]): next to the sender the largest flight of
//! a round is what its window let out; from the receiver's side or the middle, the flight
//! is not visible (the data is acknowledged as it arrives). There, with TCP timestamps,
//! each segment's flight is its end minus the ACK its TSecr echoes (the sender's own view,
//! [`Classifier::echoed`]), and a window growing fast is read from the next round, which
//! carries what the sender had out as the round ended; without timestamps the estimate is
//! the data that arrives per handshake round trip. From there a round is the window's
//! unless loss, the receiver's window or a round below the initial window (before a loss)
//! says otherwise: the sender's pacing is not visible.

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

/// Segments of a Linux sender's initial window (RFC 6928): a sender that has lost nothing
/// has a window at least this large.
pub const INITIAL_WINDOW_SEGMENTS: f64 = 10.0;

/// A flight below this share of the smallest window the sender can have (the initial
/// window, or the largest flight since its last loss: a window does not shrink without a
/// loss) is the sender's own (tcpdx choice: the kernel counts a window as the limit from
/// 90% of it in flight; a little below, for the capture's view of the flight).
pub const BELOW_WINDOW_SHARE: f64 = 0.85;

/// A flight within this many segments of the receiver's advertised window is at it (tcpdx
/// choice: Linux holds a segment back that does not fit whole, and waits for room for a
/// larger burst with segmentation offload).
pub const RWND_SEGMENTS: f64 = 3.0;

/// A pause between rounds this long (Linux's smallest retransmission timeout) lets the
/// window restart from the initial one (`tcp_slow_start_after_idle`).
pub const IDLE_RESTART_NS: i64 = 200_000_000;

/// Away from the sender, a next round's flight more than this many times the round's own
/// is a window growing fast, read from the next round (`Classifier::window_at_end`; tcpdx
/// choice: a Reno or CUBIC slow start with delayed ACKs grows about 1.2 times in the half
/// round trip a round lasts there, BBR's startup 1.4 to 2 times).
pub const GROWING_SHARE: f64 = 1.5;

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
    /// Next to the receiver or in the middle: the flight is read from the ACKs the data
    /// echoes (TCP timestamps: within a few segments), else the data arriving per round
    /// trip scaled by the handshake's round trip (which misses the queue: within about a
    /// half), and the limit is the window's unless loss, the receiver's window or a round
    /// below the initial window (before a loss) says otherwise.
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
    /// The largest flight since the last loss or idle restart (bytes).
    high: f64,
    /// A loss was seen (the initial window no longer bounds the window from below).
    lost: bool,
    /// The previous round had a loss.
    lossy_prev: bool,
    /// The previous round's end (ns).
    prev_end: Option<i64>,
    /// Away from the sender, the rounds' largest flight is the sender's own, read from the
    /// ACKs its data echoes (TCP timestamps, [`Classifier::echoed`]).
    echoed: bool,
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
            high: 0.0,
            lost: false,
            lossy_prev: false,
            prev_end: None,
            echoed: false,
        }
    }

    /// Away from the sender, whether the rounds' largest flight was read from the ACKs the
    /// sender's data echoes (its own view of its flight) rather than the capture's.
    pub fn echoed(mut self, echoed: bool) -> Self {
        self.echoed = echoed;
        self
    }

    /// The smallest window the sender can have now (bytes): the largest flight since its
    /// last loss, and the initial window before any.
    fn window_floor(&self) -> f64 {
        if self.lost {
            self.high
        } else {
            self.high.max(INITIAL_WINDOW_SEGMENTS * self.mss)
        }
    }

    /// The flight reached the receiver's window: within [`RWND_SEGMENTS`] of the window
    /// advertised at the round's end. (A window full for a moment early in a round, while
    /// the receiver still opens it in slow start, leaves the congestion window the limit.)
    fn at_receiver_window(&self, r: &Round, flight: f64) -> bool {
        r.rcv_window > 0 && flight + RWND_SEGMENTS * self.mss >= r.rcv_window as f64
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
            Vantage::Receiver if self.echoed && r.max_in_flight > 0 => r.max_in_flight as f64,
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

    /// Whether the round is one of loss recovery: the sender was in Recovery at its end
    /// ([`Round::recovery_at_end`]; a round that saw a whole episode start and end is the
    /// window's again).
    fn in_recovery(&self, r: &Round) -> bool {
        match self.vantage {
            Vantage::Sender => r.recovery_at_end,
            Vantage::Receiver => r.recovery_at_end,
        }
    }

    /// The next round's limit.
    pub fn next(&mut self, r: &Round) -> RoundLimit {
        let flight = self.flight(r);
        let segs = flight / self.mss;
        let prev = self.prev_flight.replace(flight);
        let lossy = r.retx > 0 || r.in_recovery || r.timeout;
        let after_loss =
            self.lossy_prev || matches!(self.prev_limit, Some(Limit::Recovery | Limit::Timeout));
        // After a pause the window restarts: the rounds before say nothing of it.
        let idle = self
            .prev_end
            .is_some_and(|e| r.start - e >= IDLE_RESTART_NS);
        let prev = if idle {
            self.high = self.high.min(INITIAL_WINDOW_SEGMENTS * self.mss);
            self.flat = 0;
            None
        } else {
            prev
        };
        let floor = self.window_floor();
        // Departures spaced by a pacing timer are seen only next to the sender.
        let paced = self.vantage == Vantage::Sender && r.paced;
        // Below the windows: the sender's pacing rate, or else the sender itself.
        let own = if paced { Limit::Pacing } else { Limit::Sender };
        let limit = if r.timeout {
            Limit::Timeout
        } else if self.in_recovery(r) {
            Limit::Recovery
        } else if self.at_receiver_window(r, flight) {
            Limit::ReceiverWindow
        } else if lossy || after_loss {
            self.flat = 0;
            Limit::Cwnd
        } else if self.vantage == Vantage::Receiver {
            // The data arriving per round trip follows the window too loosely to show the
            // sender holding back below it, except below the initial window before a loss.
            if !self.lost
                && (r.bytes as f64) < BELOW_WINDOW_SHARE * INITIAL_WINDOW_SEGMENTS * self.mss
            {
                Limit::Sender
            } else {
                Limit::Cwnd
            }
        } else if flight < BELOW_WINDOW_SHARE * floor {
            own
        } else {
            match prev {
                None => Limit::Cwnd,
                Some(p) => {
                    let delta = (flight - p) / self.mss;
                    if delta > FLAT_SEGMENTS {
                        self.flat = 0;
                        Limit::Cwnd
                    } else if paced {
                        // Paced and not growing: the rate, not a window, sets the flight.
                        Limit::Pacing
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
        if !matches!(limit, Limit::Cwnd | Limit::Sender | Limit::Pacing) {
            self.flat = 0;
        }
        // A loss cuts the window: what it lets out is known again from the next rounds.
        if lossy {
            self.lost = true;
            self.high = 0.0;
        } else {
            self.high = self.high.max(flight);
        }
        self.lossy_prev = lossy;
        self.prev_end = Some(r.end);
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

impl Classifier {
    /// Away from the sender, a window growing fast (slow start, BBR's startup) at the end
    /// of round `r` (limit `l`) is the flight of the data arriving next (`next`, the
    /// following round, without loss): what the sender had out as the round ended reaches
    /// the capture about half a round trip later, as the next round does. (A window growing
    /// slowly is the round's own flight: the next round's adds its queue's swings.)
    fn window_at_end(&self, r: &Round, l: &mut RoundLimit, next: &Round) {
        if self.vantage != Vantage::Receiver
            || !self.echoed
            || l.limit != Limit::Cwnd
            || next.timeout
            || next.retx > 0
            || next.in_recovery
            || next.max_in_flight == 0
            || next.start - r.end >= self.rtt.max(1)
        {
            return;
        }
        let n = next.max_in_flight as f64 / self.mss;
        if n > GROWING_SHARE * l.cwnd_est.unwrap_or(0.0) {
            l.cwnd_est = Some(n.max(1.0));
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
    classify_with(rounds, Classifier::new(mss, rtt_ns, vantage))
}

/// Every round's limit, in order, by the classifier `c` (as set up for the capture).
pub fn classify_with<'a>(
    rounds: impl IntoIterator<Item = Round> + 'a,
    mut c: Classifier,
) -> impl Iterator<Item = (Round, RoundLimit)> + 'a {
    let mut rounds = rounds.into_iter().peekable();
    std::iter::from_fn(move || {
        let r = rounds.next()?;
        let mut l = c.next(&r);
        if let Some(n) = rounds.peek() {
            c.window_at_end(&r, &mut l, n);
        }
        Some((r, l))
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
        // A round that saw an episode start and end (retransmissions included) is not one
        // of recovery: the kernel was out of Recovery at its end; nor is the one after it
        // held by the sender.
        rounds[1].recovery_at_end = false;
        rounds[1].retx = 1;
        assert_eq!(limits(&rounds), [Limit::Cwnd; 3]);
        // From the receiver's side too.
        rounds[1].recovery_at_end = true;
        let mut c = Classifier::new(MSS, 10_000_000, Vantage::Receiver);
        let got: Vec<Limit> = rounds.iter().map(|r| c.next(r).limit).collect();
        assert_eq!(got, [Limit::Cwnd, Limit::Recovery, Limit::Cwnd]);
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
        r.rcv_window = 10_000;
        let l = Classifier::new(MSS, 0, Vantage::Sender).next(&r);
        assert_eq!((l.limit, l.cwnd_est), (Limit::ReceiverWindow, None));
    }

    #[test]
    fn a_flight_within_rwnd_segments_of_the_window_is_at_it() {
        let mss = f64::from(MSS);
        for (window, at) in [
            (20.0 + RWND_SEGMENTS, true),
            (20.0 + RWND_SEGMENTS + 0.01, false),
        ] {
            let mut r = round(0, 20);
            r.rcv_window = (window * mss) as u64;
            // The round's own sign of a full window does not count once the receiver has
            // opened it further.
            r.rwnd_limited = true;
            let l = Classifier::new(MSS, 0, Vantage::Sender).next(&r);
            assert_eq!(l.limit == Limit::ReceiverWindow, at, "window {window}");
        }
    }

    #[test]
    fn below_the_initial_window_without_a_loss_is_the_sender() {
        let iw = INITIAL_WINDOW_SEGMENTS * BELOW_WINDOW_SHARE * f64::from(MSS);
        for vantage in [Vantage::Sender, Vantage::Receiver] {
            for (bytes, want) in [(iw - 1.0, Limit::Sender), (iw, Limit::Cwnd)] {
                let mut r = round(0, 0);
                (r.bytes, r.max_in_flight, r.acked) = (bytes as u64, bytes as u64, bytes as u64);
                let l = Classifier::new(MSS, 10_000_000, vantage).next(&r);
                assert_eq!(l.limit, want, "{vantage:?} {bytes}");
            }
        }
        // After a loss the window may be smaller: a small flight is the window's again.
        for vantage in [Vantage::Sender, Vantage::Receiver] {
            let mut c = Classifier::new(MSS, 10_000_000, vantage);
            let mut lossy = round(0, 20);
            lossy.retx = 2;
            c.next(&lossy);
            c.next(&round(1, 5));
            assert_eq!(c.next(&round(2, 6)).limit, Limit::Cwnd, "{vantage:?}");
        }
    }

    #[test]
    fn below_the_largest_flight_since_a_loss_is_the_sender() {
        // 20, 19, 18, 17.1 segments: flat (a segment less each round); then just below
        // BELOW_WINDOW_SHARE of the 20 the sender, at it still the window.
        let floor = 20.0 * BELOW_WINDOW_SHARE;
        for (last, want) in [(floor - 0.01, Limit::Sender), (floor, Limit::Cwnd)] {
            let mut c = Classifier::new(MSS, 10_000_000, Vantage::Sender);
            for (i, f) in [20.0, 19.0, 18.0, 17.1].into_iter().enumerate() {
                let mut r = round(i as i64, 0);
                r.max_in_flight = (f * f64::from(MSS)) as u64;
                assert_eq!(c.next(&r).limit, Limit::Cwnd, "round {i}");
            }
            let mut r = round(4, 0);
            r.max_in_flight = (last * f64::from(MSS)).round() as u64;
            assert_eq!(c.next(&r).limit, want, "{last} segments");
        }
    }

    #[test]
    fn after_a_pause_the_window_restarts() {
        // 30 segments, then 9 after a pause: the restarted window (the kernel's cwnd is the
        // initial one), but the sender's own after a shorter one.
        for (gap, want) in [
            (IDLE_RESTART_NS, Limit::Cwnd),
            (IDLE_RESTART_NS - 1, Limit::Sender),
        ] {
            let mut c = Classifier::new(MSS, 10_000_000, Vantage::Sender);
            let first = round(0, 30);
            c.next(&first);
            let mut r = round(0, 9);
            r.start = first.end + gap;
            r.end = r.start + 10_000_000;
            assert_eq!(c.next(&r).limit, want, "pause {gap}");
        }
    }

    #[test]
    fn paced_departures_without_growth_are_pacing() {
        let paced = |i: i64, f: u64| Round {
            paced: true,
            ..round(i, f)
        };
        // Growing (BBR's startup): the window; flat: the pacing rate.
        let mut c = Classifier::new(MSS, 10_000_000, Vantage::Sender);
        assert_eq!(c.next(&paced(0, 20)).limit, Limit::Cwnd);
        assert_eq!(c.next(&paced(1, 40)).limit, Limit::Cwnd);
        let l = c.next(&paced(2, 40));
        assert_eq!((l.limit, l.cwnd_est), (Limit::Pacing, None));
        // Below the windows: pacing, not the sender.
        assert_eq!(c.next(&paced(3, 20)).limit, Limit::Pacing);
        // From the receiver's side departures are not seen.
        let mut c = Classifier::new(MSS, 10_000_000, Vantage::Receiver);
        c.next(&paced(0, 40));
        assert_eq!(c.next(&paced(1, 40)).limit, Limit::Cwnd);
    }

    #[test]
    fn from_the_receiver_a_flat_flight_stays_the_window() {
        let mut c = Classifier::new(MSS, 10_000_000, Vantage::Receiver);
        for i in 0..(FLAT_ROUNDS as i64 + 3) {
            assert_eq!(c.next(&round(i, 30)).limit, Limit::Cwnd, "round {i}");
        }
        // A shrinking one too.
        assert_eq!(c.next(&round(20, 15)).limit, Limit::Cwnd);
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

    #[test]
    fn from_the_receiver_an_echoed_flight_is_the_rounds_largest() {
        // 40 segments arrive over two round trips, the echoes show 30 in flight.
        let mut r = round(0, 40);
        r.max_in_flight = 30_000;
        r.end = r.start + 20_000_000;
        let c = || Classifier::new(MSS, 10_000_000, Vantage::Receiver);
        assert_eq!(c().echoed(true).next(&r).flight_bytes, 30_000);
        // Without echoes: the data per round trip.
        assert_eq!(c().next(&r).flight_bytes, 20_000);
        // The receiver's window reached by the echoed flight.
        r.rcv_window = 30_000 + 3 * u64::from(MSS);
        assert_eq!(c().echoed(true).next(&r).limit, Limit::ReceiverWindow);
        assert_eq!(c().next(&r).limit, Limit::Cwnd);
    }

    #[test]
    fn from_the_receiver_a_fast_growing_window_is_read_from_the_next_round() {
        let mss = f64::from(MSS);
        let est = |next_segs: f64, vantage: Vantage, echoed: bool| {
            let first = round(0, 20);
            let mut next = round(1, 0);
            next.max_in_flight = (next_segs * mss) as u64;
            let c = Classifier::new(MSS, 10_000_000, vantage).echoed(echoed);
            classify_with([first, next], c)
                .next()
                .and_then(|(_, l)| l.cwnd_est)
        };
        let at = 20.0 * GROWING_SHARE;
        // Just above GROWING_SHARE times the round's flight: the next round's; at it, the
        // round's own.
        assert_eq!(est(at + 1.0, Vantage::Receiver, true), Some(at + 1.0));
        assert_eq!(est(at, Vantage::Receiver, true), Some(20.0));
        // Next to the sender, or without echoes, the round's own.
        assert_eq!(est(at + 1.0, Vantage::Sender, true), Some(20.0));
        assert_eq!(est(at + 1.0, Vantage::Receiver, false), Some(20.0));
        // Not across a loss in the next round.
        let first = round(0, 20);
        let mut next = round(1, 40);
        next.retx = 1;
        let c = Classifier::new(MSS, 10_000_000, Vantage::Receiver).echoed(true);
        let got = classify_with([first, next], c).next().unwrap().1;
        assert_eq!(got.cwnd_est, Some(20.0));
    }
}
