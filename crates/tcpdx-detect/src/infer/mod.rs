//! Sender-side inference per connection: both directions' [`SenderState`], the handshake
//! (RTT, its split around the capture point, options, SYN retransmissions) and the
//! connection's silent gaps.

pub mod idle;
pub mod limit;
pub mod pauses;
mod records;
pub mod retx;
pub mod rounds;
pub mod sender;

pub use pauses::TimerPauses;
pub use rounds::Rounds;
pub use sender::{
    DelackPause, LossEpisode, NaglePause, RecoveryKind, Round, RtoStall, SenderState, Spurious,
    ZeroWindow,
};

use tcpdx_core::{Dir, SegmentAnalysis, SegmentDetail};

use crate::facts::{ConnFacts, Seen};
use crate::spill::SpillList;

/// `a` flagged out of order instead of retransmitted: an original that came late.
fn out_of_order(a: &SegmentAnalysis) -> SegmentAnalysis {
    use tcpdx_core::AnalysisFlags as F;
    let mut b = *a;
    b.flags.0 &= !(F::RETRANSMISSION | F::FAST_RETRANSMISSION | F::SPURIOUS_RETRANSMISSION);
    b.flags.set(F::OUT_OF_ORDER);
    b
}

/// Gaps kept per connection (tcpdx choice; the count stays exact).
pub const MAX_GAPS: usize = 10_000;
/// Gaps a connection first makes room for (40 bytes each).
const FIRST_GAPS: usize = 32;
/// A silence at least this long is a gap worth attributing (tcpdx choice: above timer
/// granularity and ACK jitter, below the shortest delayed-ACK timer of 40 ms).
pub const GAP_MIN_NS: i64 = 10_000_000;
/// The capture is "near" an end when the other end's half of the handshake RTT is at
/// least this share of it (tcpdx choice: a tap a few percent of the RTT away still sees
/// the end's own timing).
pub const NEAR_SHARE: f64 = 0.9;

/// Where the capture was taken, from the handshake's RTT split.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CapturePoint {
    /// Next to the client (the SYN sender).
    NearClient,
    /// Next to the server.
    NearServer,
    /// Somewhere in the path.
    Middle,
    /// No handshake seen.
    Unknown,
}

/// A silence in the connection (no segment in either direction).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Gap {
    /// Last segment before it.
    pub start: i64,
    /// First segment after it.
    pub end: i64,
    /// Frame before.
    pub frame_before: u64,
    /// Frame after.
    pub frame_after: u64,
    /// Data was unacknowledged in some direction during the gap.
    pub in_flight: bool,
    /// Direction of the last data segment before the gap.
    pub last_data_dir: Option<Dir>,
    /// Direction of the segment ending the gap.
    pub next_dir: Dir,
    /// The segment ending the gap carries data.
    pub next_has_data: bool,
    /// The handshake was not complete: a SYN or SYN-ACK was waiting (retransmission).
    pub setup: bool,
}

impl Gap {
    /// Length in ns.
    pub fn duration(&self) -> i64 {
        self.end - self.start
    }
    /// Idle time in the gap: nothing in flight, beyond the one round trip any turn of a
    /// conversation takes (a request and its answer crossing the path), and at least
    /// [`GAP_MIN_NS`]; 0 if the gap is not idle.
    pub fn idle_ns(&self, rtt: i64) -> i64 {
        let idle = self.duration() - rtt.max(0);
        if self.in_flight || self.setup || idle < GAP_MIN_NS {
            0
        } else {
            idle
        }
    }
}

/// Handshake facts of a connection.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Handshake {
    /// First SYN.
    pub syn: Option<i64>,
    /// Frame of the first SYN.
    pub syn_frame: u64,
    /// SYNs sent (retransmissions = count - 1).
    pub syn_count: u32,
    /// Frame of the last SYN.
    pub last_syn_frame: u64,
    /// Last SYN.
    pub last_syn: Option<i64>,
    /// First SYN-ACK.
    pub synack: Option<i64>,
    /// SYN-ACKs seen.
    pub synack_count: u32,
    /// First ACK of the client after the SYN-ACK.
    pub ack: Option<i64>,
    /// Client's window scale / SACK-permitted / MSS.
    pub client_opts: (Option<u8>, bool, Option<u16>),
    /// Server's window scale / SACK-permitted / MSS.
    pub server_opts: (Option<u8>, bool, Option<u16>),
}

impl Handshake {
    /// Full round trip seen at the capture: SYN-ACK after the (last) SYN plus ACK after it.
    pub fn rtt(&self) -> Option<i64> {
        Some(self.ack? - self.last_syn?).filter(|&r| r > 0)
    }
    /// Where the capture was taken.
    pub fn capture_point(&self) -> CapturePoint {
        let (Some(syn), Some(synack), Some(ack)) = (self.last_syn, self.synack, self.ack) else {
            return CapturePoint::Unknown;
        };
        let total = (ack - syn) as f64;
        if total <= 0.0 {
            return CapturePoint::Unknown;
        }
        let server_side = (synack - syn) as f64 / total;
        if server_side >= NEAR_SHARE {
            CapturePoint::NearClient
        } else if server_side <= 1.0 - NEAR_SHARE {
            CapturePoint::NearServer
        } else {
            CapturePoint::Middle
        }
    }
}

/// Everything inferred about one connection.
#[derive(Clone, Debug, Default)]
#[repr(C)]
pub struct ConnTracker {
    // Declared hot first (`repr(C)` keeps this order): what every segment reads or writes
    // here shares a cache line or two, ahead of the senders' state (see `SenderState`).
    started: bool,
    /// A FIN was sent in each direction.
    fin: [bool; 2],
    /// A RST was sent.
    rst: bool,
    last_data_dir: Option<Dir>,
    /// `tcp.stream`.
    pub stream: u32,
    /// Last segment.
    pub last_ts: i64,
    /// Last frame.
    pub last_frame: u64,
    /// Segments seen per direction.
    pub segments: [u64; 2],
    /// Handshake.
    pub handshake: Handshake,
    /// Silent gaps of at least [`GAP_MIN_NS`] (capped). Spilled like a sender's lists, in
    /// blobs of [`SpillPolicy::gap_records`](crate::spill::SpillPolicy::gap_records): a
    /// long connection with a silence every few segments (a poll, a keep-alive, a client
    /// waiting on each answer) kept up to 400 KB of them in memory, and 2,000 such
    /// connections 0.8 GB.
    pub gaps: SpillList<Gap>,
    // Each sender's state, then what only the start and the diagnosis read.
    /// Data sent by the client, by the server (indexed by `Dir::idx()`).
    pub senders: [SenderState; 2],
    /// First segment.
    pub first_ts: i64,
    /// Capture start (ns since epoch), for relative times.
    pub capture_start: i64,
    /// Client and server as `ip:port`.
    pub endpoints: [String; 2],
    /// What the capture shows of itself on this connection (copies, missing frames, the
    /// clock), established before the inference sees a segment.
    pub facts: ConnFacts,
    /// One direction's round limits, classified once for a diagnosis
    /// ([`ConnTracker::keep_round_limits`]): the budget and the detectors each walk them.
    limits: Option<(Dir, Vec<limit::RoundLimit>)>,
}

impl ConnTracker {
    /// A new connection whose senders' rounds and lists spill into `spill` beyond its policy.
    pub fn spilling_to(spill: &std::sync::Arc<crate::spill::Spill>) -> Self {
        let mut c = Self {
            gaps: SpillList::spilling_in_blobs_of(spill.clone(), spill.policy().gap_records),
            ..Self::default()
        };
        for s in &mut c.senders {
            *s = SenderState::spilling_to(spill);
        }
        c
    }

    /// Before a diagnosis: the senders' rounds and lists and the gaps read back from the
    /// spill ([`SenderState::prepare`], [`SpillList::prepare`]).
    pub fn prepare(&mut self) {
        for s in &mut self.senders {
            s.prepare();
        }
        self.gaps.prepare();
    }

    /// Best estimate of the path round trip so far: the handshake's, else the smallest
    /// ACK delay seen (exact when the capture is next to the data sender), else 0.
    pub fn path_rtt(&self) -> i64 {
        path_rtt(&self.handshake, &self.senders)
    }

    /// Where the capture sits relative to the data `dir`'s sender: next to it unless the
    /// handshake places the capture next to the receiver or in the middle.
    pub fn vantage(&self, dir: Dir) -> limit::Vantage {
        let near_sender = match (self.handshake.capture_point(), dir) {
            (CapturePoint::NearClient, Dir::ClientToServer)
            | (CapturePoint::NearServer, Dir::ServerToClient)
            | (CapturePoint::Unknown, _) => true,
            (CapturePoint::NearClient | CapturePoint::NearServer | CapturePoint::Middle, _) => {
                false
            }
        };
        if near_sender {
            limit::Vantage::Sender
        } else {
            limit::Vantage::Receiver
        }
    }

    /// The rounds of the data `dir`'s sender, each with what limited it
    /// ([`limit::classify`]).
    pub fn round_limits(&self, dir: Dir) -> impl Iterator<Item = (Round, limit::RoundLimit)> + '_ {
        let s = &self.senders[dir.idx()];
        match &self.limits {
            Some((d, l)) if *d == dir && l.len() == s.rounds.len() => {
                RoundLimits::Kept(s.rounds.iter().zip(l.iter()))
            }
            _ => RoundLimits::Fresh(self.classify_rounds(dir)),
        }
    }

    /// The rounds of `dir`'s sender classified afresh.
    fn classify_rounds(&self, dir: Dir) -> impl Iterator<Item = (Round, limit::RoundLimit)> + '_ {
        let s = &self.senders[dir.idx()];
        let mss = if s.largest > 0 { s.largest } else { s.mss };
        limit::classify(&s.rounds, mss, self.path_rtt(), self.vantage(dir))
    }

    /// [`ConnTracker::round_limits`] with the flight away from the sender read from the
    /// ACKs the data echoes where the capture has them ([`limit::Classifier::echoed`]): the
    /// rounds' export. (The findings still read the data per round trip: their thresholds
    /// were set on it.)
    pub fn round_limits_echoed(
        &self,
        dir: Dir,
    ) -> impl Iterator<Item = (Round, limit::RoundLimit)> + '_ {
        let s = &self.senders[dir.idx()];
        let mss = if s.largest > 0 { s.largest } else { s.mss };
        let c = limit::Classifier::new(mss, self.path_rtt(), self.vantage(dir))
            .echoed(s.echo_flights > 0);
        limit::classify_with(&s.rounds, c)
    }

    /// Keeps the limits of `dir`'s rounds for the walks of a diagnosis (after
    /// [`ConnTracker::prepare`], once no segment comes any more): only rounds decoded into
    /// a list, whose memory the limits add less than half to; longer ones are classified on each
    /// walk, as they are decoded on each.
    pub fn keep_round_limits(&mut self, dir: Dir) {
        self.limits = None;
        if !self.senders[dir.idx()].rounds.is_decoded() {
            return;
        }
        // Sized once: collected, the list grew (and was copied) as a Vec does.
        let mut l = Vec::with_capacity(self.senders[dir.idx()].rounds.len());
        l.extend(self.classify_rounds(dir).map(|(_, l)| l));
        self.limits = Some((dir, l));
    }

    /// Closed: both sides sent a FIN, or one sent a RST.
    pub fn is_closed(&self) -> bool {
        self.rst || self.fin == [true, true]
    }

    /// One analysed segment of this connection.
    pub fn on_segment(&mut self, a: &SegmentAnalysis, d: &SegmentDetail) {
        const FIN: u16 = 0x01;
        const SYN: u16 = 0x02;
        const RST: u16 = 0x04;
        const ACK: u16 = 0x10;
        let ts = a.ts.0;
        let first = !self.started;
        if first {
            self.started = true;
            self.stream = a.stream.0;
            self.first_ts = ts;
            self.capture_start = ts - a.rel_time_ns;
            let endpoint = |addr, port| tcpdx_core::Endpoint { addr, port }.text();
            let (src, dst) = (endpoint(a.src, a.sport), endpoint(a.dst, a.dport));
            self.endpoints = match a.dir {
                Dir::ClientToServer => [src, dst],
                Dir::ServerToClient => [dst, src],
            };
        }
        let late;
        let (h, senders) = (&self.handshake, &self.senders);
        let a = match self.facts.observe(a, d, || path_rtt(h, senders)) {
            Seen::New => a,
            Seen::Copy => return,
            Seen::LateOriginal => {
                late = out_of_order(a);
                &late
            }
        };
        if !first {
            self.maybe_gap(a);
        }
        let dir = a.dir;
        self.segments[dir.idx()] += 1;
        let syn = a.tcp_flags & SYN != 0;
        let ack = a.tcp_flags & ACK != 0;
        self.fin[dir.idx()] |= a.tcp_flags & FIN != 0;
        self.rst |= a.tcp_flags & RST != 0;
        let h = &mut self.handshake;
        if syn && !ack && dir == Dir::ClientToServer {
            h.syn.get_or_insert(ts);
            if h.syn_count == 0 {
                h.syn_frame = a.frame.0;
            }
            h.syn_count += 1;
            h.last_syn = Some(ts);
            h.last_syn_frame = a.frame.0;
            h.client_opts = (d.window_scale, d.sack_permitted, d.mss);
        } else if syn && ack && dir == Dir::ServerToClient {
            h.synack.get_or_insert(ts);
            h.synack_count += 1;
            h.server_opts = (d.window_scale, d.sack_permitted, d.mss);
        } else if !syn && ack && dir == Dir::ClientToServer && h.synack.is_some() && h.ack.is_none()
        {
            h.ack = Some(ts);
            let point = h.capture_point();
            // The handshake places the capture: away from a sender, its flight is read
            // from the ACKs its data echoes.
            for d in [Dir::ClientToServer, Dir::ServerToClient] {
                self.senders[d.idx()].capture_near_receiver = matches!(
                    (point, d),
                    (CapturePoint::NearServer, Dir::ClientToServer)
                        | (CapturePoint::NearClient, Dir::ServerToClient)
                );
                self.senders[d.idx()].far = self.vantage(d) == limit::Vantage::Receiver;
            }
        }
        if syn {
            self.senders[dir.idx()].on_syn(d);
        }
        let rtt = self.path_rtt();
        if ack {
            let s = &mut self.senders[dir.idx()];
            s.ack_sent = s.ack_sent.max(a.ack);
        }
        if a.len > 0 {
            self.senders[dir.idx()].upstream_rtt_min =
                self.senders[dir.rev().idx()].downstream_rtt_min;
            self.senders[dir.idx()].data_tsval = d.timestamps.map(|t| t.0);
            self.senders[dir.idx()].data_tsecr = d.timestamps.map(|t| t.1);
            self.senders[dir.idx()].on_data(a, rtt);
            self.last_data_dir = Some(dir);
        }
        if ack {
            self.senders[dir.rev().idx()].on_ack(a, d, rtt);
        }
        self.last_ts = ts;
        self.last_frame = a.frame.0;
    }

    fn maybe_gap(&mut self, a: &SegmentAnalysis) {
        let gap = a.ts.0 - self.last_ts;
        if gap < GAP_MIN_NS || self.gaps.len() >= MAX_GAPS {
            return;
        }
        let in_flight = self.senders.iter().any(|s| !s.idle());
        if self.gaps.is_empty() {
            // A connection with one silence mostly has more: growing the list from four,
            // one at a time, was 2% of `diagnose` on many short connections with a silence
            // every few segments (a realloc and copy each).
            self.gaps.reserve(FIRST_GAPS);
        }
        self.gaps.push(Gap {
            start: self.last_ts,
            end: a.ts.0,
            frame_before: self.last_frame,
            frame_after: a.frame.0,
            in_flight,
            last_data_dir: self.last_data_dir,
            next_dir: a.dir,
            next_has_data: a.len > 0,
            setup: self.handshake.syn.is_some() && self.handshake.ack.is_none(),
        });
    }

    /// End of input: closes open episodes.
    pub fn finish(&mut self) {
        for s in &mut self.senders {
            s.finish(self.last_ts);
        }
    }

    /// The direction carrying most data (the "sender" of the connection).
    pub fn main_dir(&self) -> Dir {
        if self.senders[1].data_bytes > self.senders[0].data_bytes {
            Dir::ServerToClient
        } else {
            Dir::ClientToServer
        }
    }

    /// Seconds since the capture's first frame.
    pub fn rel_s(&self, ts: i64) -> f64 {
        (ts - self.capture_start) as f64 / 1e9
    }

    /// Lifetime in ns.
    pub fn lifetime(&self) -> i64 {
        (self.last_ts - self.first_ts).max(0)
    }
}

/// [`ConnTracker::round_limits`]: the limits kept for a diagnosis, or classified afresh.
enum RoundLimits<K, F> {
    Kept(K),
    Fresh(F),
}

impl<'a, K, F> Iterator for RoundLimits<K, F>
where
    K: Iterator<Item = (Round, &'a limit::RoundLimit)>,
    F: Iterator<Item = (Round, limit::RoundLimit)>,
{
    type Item = (Round, limit::RoundLimit);

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        match self {
            Self::Kept(k) => k.next().map(|(r, l)| (r, *l)),
            Self::Fresh(f) => f.next(),
        }
    }
}

/// [`ConnTracker::path_rtt`] of these parts of a tracker.
fn path_rtt(handshake: &Handshake, senders: &[SenderState; 2]) -> i64 {
    if let Some(r) = handshake.rtt() {
        return r;
    }
    senders
        .iter()
        .filter_map(|s| s.downstream_rtt_min)
        .min()
        .unwrap_or(0)
}

/// Growth factor per round at or above which a round is slow start (RFC 5681 section 3.1:
/// slow start doubles per round; with delayed ACKs it grows by 1.5x).
pub const SLOW_START_MIN_GROWTH: f64 = 1.4;
/// Growth per round, in segments, within which a round is congestion avoidance (RFC 5681:
/// about one segment per round; a little more for CUBIC's concave region).
pub const CA_MAX_GROWTH_SEGMENTS: i64 = 3;

/// Counts slow-start and congestion-avoidance rounds (rounds in recovery, limited by the
/// receiver's window, or too small to say are skipped).
pub fn phases(rounds: &Rounds) -> (usize, usize) {
    let (mut ss, mut ca) = (0, 0);
    let mut prev: Option<Round> = None;
    for c in rounds {
        let Some(p) = prev.replace(c) else {
            continue;
        };
        if p.in_recovery || c.in_recovery || c.rwnd_limited || p.pkts < 2 {
            continue;
        }
        let growth = f64::from(c.pkts) / f64::from(p.pkts);
        let delta = i64::from(c.pkts) - i64::from(p.pkts);
        if growth >= SLOW_START_MIN_GROWTH {
            ss += 1;
        } else if (-1..=CA_MAX_GROWTH_SEGMENTS).contains(&delta) {
            ca += 1;
        }
    }
    (ss, ca)
}

tcpdx_core::codec_unit_enum!(CapturePoint {
    NearClient,
    NearServer,
    Middle,
    Unknown
});
