//! The discrete-event simulation behind [`super::run`]: two TCP endpoints and the path.
//!
//! Time is an `i64` of nanoseconds on the capture's clock. Events (packet arrivals, timers,
//! the server's answer after its think time) sit in a heap ordered by (time, insertion), so
//! equal times keep their causal order and every run is identical. Sequence numbers are
//! relative (the SYN is 0, data starts at 1) until frames are built.

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::net::{IpAddr, Ipv4Addr};

use tcpdx_wire::{FrameNo, Timestamp};

use super::truth::{
    BurstLoss, CaGrowth, CaptureFile, CaptureStats, Clock, CongState, Connection, Counters,
    DelackPause, Drop, Episodes, Files, Health, Injected, NagleStall, Params, Retransmission, Rto,
    Sample, SsthreshChange, Topology, Truth, WorkloadResult, WorkloadSide,
};
use super::{CAPTURE_FILE, CaptureAt, DropSite, Recovery, SynthConfig, SynthRun, Workload};
use crate::builder::{ACK, FIN, FrameSpec, OptionsSpec, PSH, Payload, SYN};

/// Start of every trace (ns since the epoch; 2023-11-14, far from any wrap).
const START_NS: i64 = 1_700_000_000_000_000_000;
/// Nanoseconds per millisecond.
const NS_PER_MS: f64 = 1e6;
/// Client (data sender) address and port.
const CLIENT: (Ipv4Addr, u16) = (Ipv4Addr::new(10, 77, 1, 2), 40_000);
/// Server (data receiver) address and port (NFS, as in case 000).
const SERVER: (Ipv4Addr, u16) = (Ipv4Addr::new(10, 77, 2, 2), 2049);
/// Initial sequence numbers (client, server): the server's wraps during long traces.
const ISN: [u32; 2] = [1_000_000, 4_294_000_000];
/// Window scale both ends offer (RFC 7323).
const WSCALE: u8 = 7;
/// Delayed-ACK timer of the client when it receives (Linux `TCP_DELACK_MIN`).
const CLIENT_DELACK_MS: f64 = 40.0;
/// `ssthresh` before the first loss, as the kernel reports it.
const SSTHRESH_UNSET: u32 = 2_147_483_647;
/// A lone segment (or a Nagle-held tail) counts as a pause when its ACK comes this much
/// later than one RTT (the lab's delack_pauses rule, lab/README.md).
const HOLD_MIN_NS: i64 = 20_000_000;
/// Samples kept in truth.json (the lab's decimation bound).
const MAX_SAMPLES: usize = 4000;
/// Initial retransmission timeout (RFC 6298 section 2.1).
const INITIAL_RTO_NS: i64 = 1_000_000_000;
/// SACK blocks per ACK (with no timestamps 4 would fit; Linux sends at most 3 with them).
const MAX_SACK_BLOCKS: usize = 3;
/// Ethernet + IPv4 + TCP header bytes on the wire (options come on top).
const HEADER_BYTES: u64 = 14 + 20 + 20;
/// Time from a packet's arrival at a host (where a host-side capture stamps it) to its
/// processing by TCP (softirq latency; without it a receiver-side capture would show ACKs
/// 0 ns after the data they answer).
const HOST_DELAY_NS: i64 = 10_000;
/// Events processed before the model is declared stuck (a bug in a scenario or the model).
const MAX_EVENTS: u64 = 50_000_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Side {
    Client = 0,
    Server = 1,
}

impl Side {
    fn peer(self) -> Self {
        match self {
            Self::Client => Self::Server,
            Self::Server => Self::Client,
        }
    }
}

#[derive(Clone, Debug)]
struct Packet {
    from: Side,
    seq: u64,
    ack: u64,
    len: u32,
    flags: u16,
    win: u64,
    sack: Vec<(u64, u64)>,
    retx: bool,
}

#[derive(Debug)]
enum Ev {
    Arrive(Packet),
    Rto(Side, u64),
    Delack(Side, u64),
    Respond,
    SynRetry,
}

struct Queued {
    t: i64,
    n: u64,
    ev: Ev,
}

impl PartialEq for Queued {
    fn eq(&self, o: &Self) -> bool {
        (self.t, self.n) == (o.t, o.n)
    }
}
impl Eq for Queued {}
impl PartialOrd for Queued {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Queued {
    // Reversed: BinaryHeap is a max-heap, the earliest event must come first.
    fn cmp(&self, o: &Self) -> Ordering {
        (o.t, o.n).cmp(&(self.t, self.n))
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cc {
    Open,
    Recovery,
    Loss,
}

impl Cc {
    fn name(self) -> &'static str {
        match self {
            Self::Open => "Open",
            Self::Recovery => "Recovery",
            Self::Loss => "Loss",
        }
    }
}

/// One endpoint: its sending half (window, recovery, timers) and receiving half (ACK policy).
#[derive(Debug)]
struct Endpoint {
    // Sending.
    snd_una: u64,
    snd_nxt: u64,
    snd_max: u64,
    app_end: u64,
    cwnd: f64,
    ssthresh: f64,
    cc: Cc,
    recover: u64,
    dupacks: u32,
    srtt: Option<f64>,
    rttvar: f64,
    backoff: u32,
    rto_gen: u64,
    rto_armed: bool,
    rtt_probe: Option<(u64, i64)>,
    peer_wnd: u64,
    sacked: Vec<(u64, u64)>,
    nagle_since: Option<i64>,
    nagle: bool,
    close_when_done: bool,
    fin_sent: bool,
    // Receiving.
    delack_ms: Option<f64>,
    ack_every: u32,
    rwnd: u64,
    rcv_nxt: u64,
    ooo: Vec<(u64, u64)>,
    last_block: Option<(u64, u64)>,
    dsack: Option<(u64, u64)>,
    unacked_segs: u32,
    ack_now: bool,
    delack_gen: u64,
    ip_id: u16,
}

impl Endpoint {
    fn new(
        delack_ms: Option<f64>,
        ack_every: u32,
        rwnd: u64,
        (iw, ssthresh): (u32, Option<u32>),
        nagle: bool,
    ) -> Self {
        Self {
            snd_una: 0,
            snd_nxt: 0,
            snd_max: 0,
            app_end: 1,
            cwnd: f64::from(iw),
            ssthresh: ssthresh.map_or(f64::INFINITY, f64::from),
            cc: Cc::Open,
            recover: 0,
            dupacks: 0,
            srtt: None,
            rttvar: 0.0,
            backoff: 0,
            rto_gen: 0,
            rto_armed: false,
            rtt_probe: None,
            peer_wnd: 65_535,
            sacked: Vec::new(),
            nagle_since: None,
            nagle,
            close_when_done: false,
            fin_sent: false,
            delack_ms,
            ack_every: ack_every.max(1),
            rwnd,
            rcv_nxt: 0,
            ooo: Vec::new(),
            last_block: None,
            dsack: None,
            unacked_segs: 0,
            ack_now: false,
            delack_gen: 0,
            ip_id: 0,
        }
    }

    fn outstanding(&self) -> bool {
        self.snd_max > self.snd_una
    }
}

/// Internal per-ACK record of the sender (before decimation).
#[derive(Clone, Copy, Debug)]
struct RawSample {
    s: Sample,
    open: bool,
}

/// Labels collected while the model runs (the data sender's view).
#[derive(Debug, Default)]
struct Rec {
    retx: Vec<Retransmission>,
    samples: Vec<RawSample>,
    cong: Vec<CongState>,
    cong_open: Option<(Cc, i64, u32)>,
    rtos: Vec<Rto>,
    delack: Vec<DelackPause>,
    bursts: Vec<BurstLoss>,
    ssthresh: Vec<SsthreshChange>,
    nagle: Vec<NagleStall>,
    drops: Vec<Drop>,
    lone: Option<(u64, i64)>,
    bytes_sent: u64,
    first_data: Option<i64>,
    all_acked: Option<i64>,
    min_rtt: Option<i64>,
    min_srtt: Option<i64>,
    last_ack: i64,
    captured: u64,
    missed: u64,
}

/// The model.
pub(super) struct Sim<'a> {
    cfg: &'a SynthConfig,
    now: i64,
    n: u64,
    heap: BinaryHeap<Queued>,
    ep: [Endpoint; 2],
    link_free: [i64; 2],
    frames: Vec<(i64, u64, Packet)>,
    rng: u64,
    data_tx: u64,
    syns_sent: u32,
    requests_sent: u32,
    responses_scheduled: u32,
    rec: Rec,
}

impl<'a> Sim<'a> {
    pub(super) fn new(cfg: &'a SynthConfig) -> Self {
        let r = &cfg.receiver;
        let s = &cfg.sender;
        let client = Endpoint::new(
            Some(CLIENT_DELACK_MS),
            2,
            u64::from(r.rwnd_bytes),
            (s.initial_cwnd, s.initial_ssthresh),
            s.nagle,
        );
        let server = Endpoint::new(
            r.delayed_ack_ms,
            r.ack_every,
            u64::from(r.rwnd_bytes),
            (10, None),
            true,
        );
        Self {
            cfg,
            now: START_NS,
            n: 0,
            heap: BinaryHeap::new(),
            ep: [client, server],
            link_free: [START_NS; 2],
            frames: Vec::new(),
            rng: cfg.seed,
            data_tx: 0,
            syns_sent: 0,
            requests_sent: 0,
            responses_scheduled: 0,
            rec: Rec::default(),
        }
    }

    fn at(&mut self, t: i64, ev: Ev) {
        self.n += 1;
        self.heap.push(Queued { t, n: self.n, ev });
    }

    /// splitmix64 (Steele et al. 2014): five lines keep the fixtures byte-stable without
    /// depending on a random crate's stream staying the same across releases.
    fn random(&mut self) -> f64 {
        self.rng = self.rng.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        (z >> 11) as f64 / (1u64 << 53) as f64
    }

    fn mss(&self) -> u64 {
        u64::from(self.cfg.mss)
    }

    pub(super) fn run(mut self) -> SynthRun {
        self.send_syn();
        let mut events = 0u64;
        while let Some(q) = self.heap.pop() {
            events += 1;
            assert!(
                events < MAX_EVENTS,
                "synth {}: the model makes no progress",
                self.cfg.name
            );
            self.now = q.t;
            match q.ev {
                Ev::Arrive(p) => self.on_arrive(p),
                Ev::Rto(side, generation) => self.on_rto(side, generation),
                Ev::Delack(side, generation) => self.on_delack(side, generation),
                Ev::Respond => {
                    self.write_response();
                    self.try_send(Side::Server);
                    self.flush_ack(Side::Server);
                }
                Ev::SynRetry => self.send_syn(),
            }
        }
        self.finish()
    }

    // ---- path and capture -------------------------------------------------------------

    /// Puts `p` on the path at `now`: capture, drops, bottleneck queue, delay.
    fn emit(&mut self, mut p: Packet) {
        let side = p.from;
        let e = &mut self.ep[side as usize];
        if p.flags & ACK != 0 {
            p.ack = e.rcv_nxt;
            p.win = e.rwnd;
            p.sack = if self.cfg.sack {
                sack_blocks(e)
            } else {
                Vec::new()
            };
            e.unacked_segs = 0;
            e.ack_now = false;
            e.dsack = None;
            e.delack_gen += 1;
        }
        e.ip_id = e.ip_id.wrapping_add(1);
        let half = (self.cfg.path.owd_ms * NS_PER_MS / 2.0) as i64;
        let wire = HEADER_BYTES + 4 + 8 * p.sack.len() as u64 + u64::from(p.len);
        let ser = (wire as f64 * 8.0 / self.cfg.path.rate_bps * 1e9) as i64;
        let depart = (self.now + half).max(self.link_free[side as usize]) + ser;
        self.link_free[side as usize] = depart;
        let arrive = depart + half;
        let (mut dropped, mut missed) = (false, false);
        if side == Side::Client && p.len > 0 {
            self.data_tx += 1;
            let n = self.data_tx;
            let chosen = self.cfg.path.drop_nth.contains(&n);
            let random = self.cfg.path.drop_prob > 0.0 && self.random() < self.cfg.path.drop_prob;
            dropped = chosen || random;
            missed = self.cfg.capture_miss_nth.contains(&n);
            if dropped {
                self.rec.drops.push(Drop {
                    t_ns: self.now,
                    ev: match self.cfg.path.drop_site {
                        DropSite::Network => "drop",
                        DropSite::ReceiverHost => "drop_host",
                    },
                    n,
                    dir: "c2s",
                    sport: CLIENT.1,
                    dport: SERVER.1,
                    seq: abs(Side::Client, p.seq),
                    len: p.len,
                });
            }
        }
        if side == Side::Client && p.flags & SYN != 0 && self.syns_sent <= self.cfg.path.drop_syns {
            dropped = true;
        }
        let seen_at = match (self.cfg.capture, side) {
            (CaptureAt::Sender, Side::Client) | (CaptureAt::Receiver, Side::Server) => {
                Some(self.now)
            }
            (CaptureAt::Sender, Side::Server) => Some(arrive),
            (CaptureAt::Receiver, Side::Client) => {
                (!dropped || self.cfg.path.drop_site == DropSite::ReceiverHost).then_some(arrive)
            }
        };
        let seen_at = seen_at.filter(|_| !missed);
        if missed {
            self.rec.missed += 1;
        }
        if let Some(t) = seen_at {
            self.n += 1;
            self.frames.push((t, self.n, p.clone()));
        }
        if side == Side::Client && p.retx {
            self.rec.retx.push(Retransmission {
                t_ns: self.now,
                seq: abs(Side::Client, p.seq),
                segments: 1,
                pcap_t_ns: seen_at,
                reordered_original: false,
            });
            if let Some((_, _, n)) = &mut self.rec.cong_open {
                *n += 1;
            }
        }
        if !dropped {
            self.at(arrive + HOST_DELAY_NS, Ev::Arrive(p));
        }
    }

    // ---- connection setup and close --------------------------------------------------

    fn send_syn(&mut self) {
        self.syns_sent += 1;
        let e = &mut self.ep[0];
        e.snd_max = 1;
        e.snd_nxt = 1;
        self.emit(Packet {
            from: Side::Client,
            seq: 0,
            ack: 0,
            len: 0,
            flags: SYN,
            win: self.ep[0].rwnd,
            sack: Vec::new(),
            retx: false,
        });
        // RFC 6298 section 5.7: the SYN's timer doubles on each retry.
        let wait = INITIAL_RTO_NS << (self.syns_sent - 1);
        if self.syns_sent <= self.cfg.path.drop_syns {
            let t = self.now + wait;
            self.at(t, Ev::SynRetry);
        }
    }

    fn on_arrive(&mut self, p: Packet) {
        let to = p.from.peer();
        if p.flags & SYN != 0 {
            self.on_syn(to, &p);
            return;
        }
        if p.flags & ACK != 0 {
            self.on_ack(to, &p);
        }
        if p.len > 0 {
            self.on_data(to, &p);
        }
        if p.flags & FIN != 0 {
            self.on_fin(to, &p);
        }
        self.app(to);
        self.try_send(to);
        self.flush_ack(to);
    }

    fn on_syn(&mut self, to: Side, p: &Packet) {
        let e = &mut self.ep[to as usize];
        e.rcv_nxt = 1;
        e.peer_wnd = p.win;
        match to {
            Side::Server => {
                e.snd_una = 0;
                e.snd_nxt = 1;
                e.snd_max = 1;
                self.emit(Packet {
                    from: Side::Server,
                    seq: 0,
                    ack: 1,
                    len: 0,
                    flags: SYN | ACK,
                    win: 0,
                    sack: Vec::new(),
                    retx: false,
                });
            }
            Side::Client => {
                e.snd_una = 1;
                let rtt = self.now - self.syn_departure();
                self.rtt_sample(Side::Client, rtt);
                self.ep[1].snd_una = 1;
                self.emit(Packet {
                    from: Side::Client,
                    seq: 1,
                    ack: 1,
                    len: 0,
                    flags: ACK,
                    win: 0,
                    sack: Vec::new(),
                    retx: false,
                });
                self.start_workload();
                self.try_send(Side::Client);
            }
        }
    }

    /// When the last SYN left the client (the capture may be elsewhere).
    fn syn_departure(&self) -> i64 {
        let wait: i64 = (0..self.syns_sent.saturating_sub(1))
            .map(|i| INITIAL_RTO_NS << i)
            .sum();
        START_NS + wait
    }

    fn on_fin(&mut self, to: Side, p: &Packet) {
        let e = &mut self.ep[to as usize];
        if p.seq + u64::from(p.len) == e.rcv_nxt {
            e.rcv_nxt += 1;
            e.ack_now = true;
        }
        if to == Side::Server && !e.fin_sent {
            e.close_when_done = true;
        }
    }

    fn start_workload(&mut self) {
        match self.cfg.workload {
            Workload::Bulk { bytes } => {
                self.ep[0].app_end = 1 + bytes;
                self.ep[0].close_when_done = true;
            }
            Workload::RequestResponse { request_bytes, .. } => {
                self.ep[0].app_end += u64::from(request_bytes);
                self.requests_sent = 1;
            }
        }
    }

    /// The applications react to what arrived: the server answers complete requests, the
    /// client sends its next request when a whole response is in.
    fn app(&mut self, side: Side) {
        let Workload::RequestResponse {
            requests,
            request_bytes,
            response_bytes,
            think_ms,
        } = self.cfg.workload
        else {
            return;
        };
        match side {
            Side::Server => {
                let complete = (self.ep[1].rcv_nxt.saturating_sub(1)) / u64::from(request_bytes);
                let answered = u64::from(self.responses_scheduled);
                for _ in answered..complete.min(u64::from(requests)) {
                    self.responses_scheduled += 1;
                    if think_ms > 0.0 {
                        let t = self.now + (think_ms * NS_PER_MS) as i64;
                        self.at(t, Ev::Respond);
                    } else {
                        self.write_response();
                    }
                }
            }
            Side::Client => {
                let got = self.ep[0].rcv_nxt.saturating_sub(1) / u64::from(response_bytes.max(1));
                if got >= u64::from(self.requests_sent) {
                    if self.requests_sent < requests {
                        self.ep[0].app_end += u64::from(request_bytes);
                        self.requests_sent += 1;
                    } else {
                        self.ep[0].close_when_done = true;
                    }
                }
            }
        }
    }

    fn write_response(&mut self) {
        if let Workload::RequestResponse { response_bytes, .. } = self.cfg.workload {
            self.ep[1].app_end += u64::from(response_bytes);
        }
    }

    // ---- receiving ---------------------------------------------------------------------

    /// A data segment arrives at `to`: in order, out of order, or old (RFC 5681 section 4.2:
    /// out-of-order and hole-filling segments are ACKed at once, others per the ACK policy).
    fn on_data(&mut self, to: Side, p: &Packet) {
        let now = self.now;
        let e = &mut self.ep[to as usize];
        let (s, end) = (p.seq, p.seq + u64::from(p.len));
        if end <= e.rcv_nxt {
            e.dsack = Some((s, end));
            e.ack_now = true;
            return;
        }
        if s > e.rcv_nxt {
            insert_range(&mut e.ooo, (s, end));
            e.last_block = Some((s, end));
            e.ack_now = true;
            return;
        }
        let had_ooo = !e.ooo.is_empty();
        e.rcv_nxt = end;
        while let Some(&(l, r)) = e.ooo.first() {
            if l > e.rcv_nxt {
                break;
            }
            e.rcv_nxt = e.rcv_nxt.max(r);
            e.ooo.remove(0);
        }
        if had_ooo {
            e.ack_now = true;
            return;
        }
        e.unacked_segs += 1;
        match e.delack_ms {
            None => e.ack_now = true,
            Some(_) if e.unacked_segs >= e.ack_every => e.ack_now = true,
            Some(ms) => {
                if e.unacked_segs == 1 {
                    let generation = e.delack_gen;
                    self.at(now + (ms * NS_PER_MS) as i64, Ev::Delack(to, generation));
                }
            }
        }
    }

    fn on_delack(&mut self, side: Side, generation: u64) {
        let e = &self.ep[side as usize];
        if generation == e.delack_gen && e.unacked_segs > 0 {
            self.send_ack(side);
        }
    }

    fn flush_ack(&mut self, side: Side) {
        if self.ep[side as usize].ack_now {
            self.send_ack(side);
        }
    }

    fn send_ack(&mut self, side: Side) {
        let seq = self.ep[side as usize].snd_nxt;
        self.emit(Packet {
            from: side,
            seq,
            ack: 0,
            len: 0,
            flags: ACK,
            win: 0,
            sack: Vec::new(),
            retx: false,
        });
    }

    // ---- sending -----------------------------------------------------------------------

    fn rtt_sample(&mut self, side: Side, rtt: i64) {
        let e = &mut self.ep[side as usize];
        let r = rtt as f64;
        // RFC 6298 section 2.
        match e.srtt {
            None => {
                e.srtt = Some(r);
                e.rttvar = r / 2.0;
            }
            Some(s) => {
                e.rttvar = 0.75 * e.rttvar + 0.25 * (s - r).abs();
                e.srtt = Some(0.875 * s + 0.125 * r);
            }
        }
        if side == Side::Client {
            let srtt = e.srtt.unwrap_or(r) as i64;
            self.rec.min_rtt = Some(self.rec.min_rtt.map_or(rtt, |m| m.min(rtt)));
            self.rec.min_srtt = Some(self.rec.min_srtt.map_or(srtt, |m| m.min(srtt)));
        }
    }

    fn rto_ns(&self, side: Side) -> i64 {
        let e = &self.ep[side as usize];
        let base = match e.srtt {
            Some(s) => (s + (4.0 * e.rttvar).max(1e6)) as i64,
            None => INITIAL_RTO_NS,
        };
        let min = (self.cfg.sender.rto_min_ms * NS_PER_MS) as i64;
        base.max(min) << e.backoff.min(6)
    }

    fn arm_rto(&mut self, side: Side) {
        let t = self.now + self.rto_ns(side);
        let e = &mut self.ep[side as usize];
        e.rto_gen += 1;
        e.rto_armed = true;
        let generation = e.rto_gen;
        self.at(t, Ev::Rto(side, generation));
    }

    fn disarm_rto(&mut self, side: Side) {
        let e = &mut self.ep[side as usize];
        e.rto_gen += 1;
        e.rto_armed = false;
    }

    fn set_ssthresh(&mut self, side: Side, to: f64) {
        let e = &mut self.ep[side as usize];
        let from = e.ssthresh;
        e.ssthresh = to;
        if side == Side::Client {
            self.rec.ssthresh.push(SsthreshChange {
                t_ns: self.now,
                from: seg_count(from),
                to: seg_count(to),
                cwnd: seg_count(e.cwnd),
                after_spurious: false,
            });
        }
    }

    fn set_cc(&mut self, side: Side, cc: Cc) {
        self.ep[side as usize].cc = cc;
        if side != Side::Client {
            return;
        }
        let now = self.now;
        if let Some((old, start, retx)) = self.rec.cong_open.take() {
            self.rec.cong.push(CongState {
                state: old.name(),
                start_ns: start,
                end_ns: now,
            });
            if old != Cc::Open && retx >= 3 {
                self.rec.bursts.push(BurstLoss {
                    start_ns: start,
                    end_ns: now,
                    retransmitted_segments: retx,
                    state: old.name(),
                });
            }
            if old == Cc::Loss
                && let Some(r) = self.rec.rtos.last_mut()
            {
                r.end_ns = now;
            }
        }
        self.rec.cong_open = Some((cc, now, 0));
    }

    /// Half the flight, at least 2 segments (RFC 5681 equation 4).
    fn half_flight(&self, side: Side) -> f64 {
        let e = &self.ep[side as usize];
        let flight = (e.snd_max - e.snd_una).div_ceil(self.mss()) as f64;
        (flight / 2.0).floor().max(2.0)
    }

    fn on_ack(&mut self, side: Side, p: &Packet) {
        let i = side as usize;
        let a = p.ack;
        let mss = self.mss() as f64;
        if side == Side::Client && self.rec.first_data.is_some() {
            let e = &self.ep[0];
            self.rec.samples.push(RawSample {
                s: Sample {
                    t_ns: self.now,
                    cwnd: seg_count(e.cwnd),
                    ssthresh: seg_count(e.ssthresh),
                    srtt_us: e.srtt.map_or(0, |s| (s / 1e3) as u64),
                    snd_wnd: e.peer_wnd,
                    inflight: e.snd_max - e.snd_una,
                },
                open: e.cc == Cc::Open,
            });
        }
        let e = &mut self.ep[i];
        e.peer_wnd = p.win;
        for &b in &p.sack {
            if b.0 >= e.snd_una {
                insert_range(&mut e.sacked, b);
            }
        }
        if a > e.snd_una {
            self.on_new_ack(side, a, mss);
        } else if a == e.snd_una && p.len == 0 && p.flags & FIN == 0 && e.outstanding() {
            e.dupacks += 1;
            let restart = self.cfg.sender.recovery == Recovery::RestartFromOne;
            match (e.cc, e.dupacks) {
                (Cc::Open, 3) => {
                    let half = self.half_flight(side);
                    self.set_ssthresh(side, half);
                    let e = &mut self.ep[i];
                    e.recover = e.snd_max;
                    // The restarting sender sends nothing new until the recovery completes
                    // (case 000: "fast retransmit of B: caught up", then one segment).
                    e.cwnd = if restart { 1.0 } else { half + 3.0 };
                    e.rtt_probe = None;
                    let seq = e.snd_una;
                    self.set_cc(side, Cc::Recovery);
                    self.retransmit(side, seq);
                }
                // RFC 5681 section 3.2 step 4: each further duplicate inflates the window.
                (Cc::Recovery, _) if !restart => e.cwnd += 1.0,
                _ => {}
            }
        }
    }

    /// An ACK advancing snd_una to `a`.
    fn on_new_ack(&mut self, side: Side, a: u64, mss: f64) {
        let i = side as usize;
        let e = &mut self.ep[i];
        let acked = a - e.snd_una;
        e.snd_una = a;
        e.snd_nxt = e.snd_nxt.max(a);
        e.sacked.retain(|r| r.1 > a);
        e.dupacks = 0;
        e.backoff = 0;
        let probe = e.rtt_probe.filter(|&(end, _)| a >= end);
        if probe.is_some() {
            e.rtt_probe = None;
        }
        if let Some((_, t)) = probe {
            self.rtt_sample(side, self.now - t);
        }
        if side == Side::Client {
            self.rec.last_ack = self.now;
            self.check_lone(a);
            let cwnd = seg_count(self.ep[0].cwnd);
            if let Some(r) = self.rec.rtos.last_mut()
                && r.first_ack_ns.is_none()
            {
                r.first_ack_ns = Some(self.now);
                r.cwnd_at_ack = Some(cwnd);
            }
            if a >= self.ep[0].app_end && self.rec.all_acked.is_none() {
                self.rec.all_acked = Some(self.now);
            }
        }
        let (cc, recover) = (self.ep[i].cc, self.ep[i].recover);
        match cc {
            Cc::Open => grow(&mut self.ep[i], acked as f64 / mss),
            Cc::Recovery if a >= recover => {
                let e = &mut self.ep[i];
                e.cwnd = match self.cfg.sender.recovery {
                    Recovery::NewReno => e.ssthresh,
                    Recovery::RestartFromOne => 1.0,
                };
                self.set_cc(side, Cc::Open);
            }
            Cc::Recovery => {
                // RFC 6582 section 3.2 step 5: partial ACK, retransmit the next hole, deflate
                // by the amount acknowledged.
                let e = &mut self.ep[i];
                if self.cfg.sender.recovery == Recovery::NewReno {
                    e.cwnd = (e.cwnd - acked as f64 / mss + 1.0).max(1.0);
                }
                self.retransmit(side, a);
            }
            Cc::Loss => {
                if a >= recover {
                    self.set_cc(side, Cc::Open);
                }
                grow(&mut self.ep[i], acked as f64 / mss);
            }
        }
        if self.ep[i].outstanding() {
            self.arm_rto(side);
        } else {
            self.disarm_rto(side);
        }
    }

    /// The ACK of a lone segment sent with a window of one: how long did it take?
    fn check_lone(&mut self, ack: u64) {
        let Some((end, t)) = self.rec.lone else {
            return;
        };
        if ack < end {
            return;
        }
        self.rec.lone = None;
        let length = self.now - t;
        let rtt = self.rec.min_rtt.unwrap_or(0);
        if length >= rtt + HOLD_MIN_NS {
            self.rec.delack.push(DelackPause {
                start_ns: t,
                end_ns: self.now,
                length_ns: length,
                excess_ns: length - rtt,
                inflight_segments: 1,
            });
        }
    }

    fn on_rto(&mut self, side: Side, generation: u64) {
        let e = &self.ep[side as usize];
        if generation != e.rto_gen || !e.outstanding() {
            return;
        }
        // RFC 5681 section 3.1 equation 4: ssthresh only on the first timeout of the data.
        if e.cc != Cc::Loss {
            let half = self.half_flight(side);
            self.set_ssthresh(side, half);
            if side == Side::Client {
                self.rec.rtos.push(Rto {
                    start_ns: self.now,
                    end_ns: self.now,
                    first_ack_ns: None,
                    cwnd_at_ack: None,
                    last_ack_ns: self.rec.last_ack,
                });
            }
            self.set_cc(side, Cc::Loss);
        }
        let e = &mut self.ep[side as usize];
        e.cwnd = 1.0;
        e.recover = e.snd_max;
        e.snd_nxt = e.snd_una;
        e.dupacks = 0;
        e.rtt_probe = None;
        e.backoff += 1;
        self.try_send(side);
        self.arm_rto(side);
    }

    /// Sends one segment at `seq` again (fast retransmission, NewReno partial ACK).
    fn retransmit(&mut self, side: Side, seq: u64) {
        let e = &self.ep[side as usize];
        let len = self.mss().min(e.snd_max - seq);
        if len == 0 {
            return;
        }
        self.send_data(side, seq, len);
        if !self.ep[side as usize].rto_armed {
            self.arm_rto(side);
        }
    }

    /// Sends what the window, the peer's window and Nagle allow; then the FIN if done.
    fn try_send(&mut self, side: Side) {
        let mss = self.mss();
        loop {
            let e = &mut self.ep[side as usize];
            if e.snd_nxt < e.snd_max
                && let Some(&(_, r)) = e
                    .sacked
                    .iter()
                    .find(|x| x.0 <= e.snd_nxt && e.snd_nxt < x.1)
            {
                // RFC 6675: do not resend what the receiver reported holding.
                e.snd_nxt = r.min(e.snd_max);
                continue;
            }
            let avail = e.app_end.saturating_sub(e.snd_nxt);
            if avail == 0 {
                break;
            }
            let mut len = mss.min(avail);
            if e.snd_nxt < e.snd_max {
                len = len.min(e.snd_max - e.snd_nxt);
                if let Some(next) = e
                    .sacked
                    .iter()
                    .map(|x| x.0)
                    .filter(|&l| l > e.snd_nxt)
                    .min()
                {
                    len = len.min(next - e.snd_nxt);
                }
            }
            let flight = e.snd_nxt - e.snd_una;
            let wnd = ((e.cwnd.floor() as u64) * mss).min(e.peer_wnd);
            if flight > 0 && flight + len > wnd {
                break;
            }
            let new_data = e.snd_nxt >= e.snd_max;
            if e.nagle && new_data && len < mss && e.snd_una < e.snd_nxt {
                e.nagle_since.get_or_insert(self.now);
                break;
            }
            let held = if new_data { e.nagle_since.take() } else { None };
            if let Some(t) = held
                && side == Side::Client
            {
                let length = self.now - t;
                let rtt = self.rec.min_rtt.unwrap_or(0);
                if length >= rtt + HOLD_MIN_NS {
                    self.rec.nagle.push(NagleStall {
                        start_ns: t,
                        end_ns: self.now,
                        length_ns: length,
                        excess_ns: length - rtt,
                    });
                }
            }
            let e = &self.ep[side as usize];
            if side == Side::Client {
                self.rec.lone =
                    (flight == 0 && e.cwnd < 2.0).then_some((e.snd_nxt + len, self.now));
            }
            let seq = e.snd_nxt;
            self.send_data(side, seq, len);
            let e = &mut self.ep[side as usize];
            e.snd_nxt = seq + len;
            if !e.rto_armed {
                self.arm_rto(side);
            }
        }
        let e = &self.ep[side as usize];
        if e.close_when_done && !e.fin_sent && e.snd_una >= e.app_end && e.snd_nxt >= e.app_end {
            self.send_fin(side);
        }
    }

    fn send_data(&mut self, side: Side, seq: u64, len: u64) {
        let now = self.now;
        let e = &mut self.ep[side as usize];
        let end = seq + len;
        let retx = seq < e.snd_max;
        if retx {
            // Karn's rule (RFC 6298 section 3): no RTT sample across a retransmission.
            e.rtt_probe = None;
        } else if e.rtt_probe.is_none() {
            e.rtt_probe = Some((end, now));
        }
        e.snd_max = e.snd_max.max(end);
        let push = end == e.app_end;
        if side == Side::Client {
            self.rec.first_data.get_or_insert(now);
            self.rec.bytes_sent += len;
        }
        self.emit(Packet {
            from: side,
            seq,
            ack: 0,
            len: len as u32,
            flags: if push { PSH | ACK } else { ACK },
            win: 0,
            sack: Vec::new(),
            retx,
        });
    }

    fn send_fin(&mut self, side: Side) {
        let e = &mut self.ep[side as usize];
        e.fin_sent = true;
        let seq = e.app_end;
        e.snd_nxt = seq + 1;
        e.snd_max = e.snd_max.max(seq + 1);
        self.emit(Packet {
            from: side,
            seq,
            ack: 0,
            len: 0,
            flags: FIN | ACK,
            win: 0,
            sack: Vec::new(),
            retx: false,
        });
    }
}

impl Sim<'_> {
    /// Builds the frames and the labels once the model has run out of events.
    fn finish(mut self) -> SynthRun {
        if let Some((cc, _, _)) = self.rec.cong_open {
            // Close the last state interval at the end of the trace.
            let end = self.frames.iter().map(|f| f.0).max().unwrap_or(self.now);
            self.now = end;
            self.set_cc(Side::Client, cc);
            self.rec.cong.pop();
            self.rec.cong_open = None;
            self.rec.cong.push(CongState {
                state: cc.name(),
                start_ns: self.rec.cong.last().map_or(START_NS, |c| c.end_ns),
                end_ns: end,
            });
        }
        self.frames.sort_by_key(|f| (f.0, f.1));
        let cfg = self.cfg;
        let mut ip_id = [0u16; 2];
        let frames = self
            .frames
            .iter()
            .enumerate()
            .map(|(i, (t, _, p))| {
                let id = &mut ip_id[p.from as usize];
                *id = id.wrapping_add(1);
                frame_spec(cfg, p, *id).to_frame(FrameNo(i as u64 + 1), Timestamp::from_nanos(*t))
            })
            .collect::<Vec<_>>();
        self.rec.captured = frames.len() as u64;
        let truth = self.truth();
        SynthRun { frames, truth }
    }

    fn truth(&self) -> Truth {
        let cfg = self.cfg;
        let rec = &self.rec;
        let point = match cfg.capture {
            CaptureAt::Sender => "client",
            CaptureAt::Receiver => "server",
        };
        let first = rec.first_data.unwrap_or(START_NS);
        let secs = (rec.all_acked.unwrap_or(self.now) - first) as f64 / 1e9;
        let bytes = self.ep[0].app_end - 1;
        let min_rtt = rec.min_rtt.unwrap_or(0);
        let samples_total = rec.samples.len() as u64;
        let samples = decimate(&rec.samples);
        Truth {
            schema: "tcpdx-lab-truth/1",
            scenario: cfg.name.clone(),
            short: false,
            params: Params {
                name: cfg.name.clone(),
                capture: point,
                synth: true,
                seed: cfg.seed,
                snaplen: cfg.snaplen,
                model: cfg.clone(),
            },
            clock: Clock {
                trace_clock: "synth",
                tai_minus_realtime_ns: 0,
                time_base: "model ns since the epoch (the capture's clock), at the data sender",
            },
            topology: Topology {
                client: CLIENT.0.to_string(),
                server: SERVER.0.to_string(),
                mtu: cfg.mss + 40,
                prefix: "synth",
            },
            files: Files {
                captures: vec![CaptureFile {
                    file: CAPTURE_FILE,
                    point,
                    primary: true,
                    snaplen: cfg.snaplen,
                    stats: CaptureStats {
                        captured: rec.captured,
                        dropped_by_kernel: rec.missed,
                    },
                }],
                relay_log: None,
                trace: None,
            },
            workload: WorkloadResult {
                send: WorkloadSide {
                    role: "send",
                    bytes,
                    secs,
                    mbit_s: if secs > 0.0 {
                        bytes as f64 * 8.0 / secs / 1e6
                    } else {
                        0.0
                    },
                },
            },
            counters: Counters {
                model_drops: rec.drops.len() as u64,
                tbf_drops: None,
                nft_drops: None,
            },
            health: Health {
                ok: true,
                problems: Vec::new(),
            },
            injected: Injected {
                drops: rec.drops.clone(),
                ..Injected::default()
            },
            connections: vec![Connection {
                sender: format!("{}:{}", CLIENT.0, CLIENT.1),
                receiver: format!("{}:{}", SERVER.0, SERVER.1),
                bytes_sent: rec.bytes_sent,
                mss: cfg.mss,
                retransmissions: rec.retx.clone(),
                retransmitted_segments: rec.retx.len() as u64,
                failed_retransmit_attempts: 0,
                cong_states: rec.cong.clone(),
                samples: samples.clone(),
                samples_total,
                min_srtt_us: rec.min_srtt.map_or(0, |s| (s / 1000) as u64),
                episodes: Episodes {
                    rtos: rec.rtos.clone(),
                    delack_pauses: rec.delack.clone(),
                    burst_losses: rec.bursts.clone(),
                    ca_growth: ca_growth(&rec.samples, min_rtt),
                    zero_windows: Vec::new(),
                    ssthresh_changes: rec.ssthresh.clone(),
                    stalls: Vec::new(),
                    nagle_stalls: rec.nagle.clone(),
                },
            }],
        }
    }
}

/// Absolute sequence number of relative `rel` sent by `side`.
fn abs(side: Side, rel: u64) -> u32 {
    ISN[side as usize].wrapping_add(rel as u32)
}

/// A window in segments as the kernel reports it (whole segments; unset = 2^31 - 1).
fn seg_count(w: f64) -> u32 {
    if w.is_finite() {
        w.floor() as u32
    } else {
        SSTHRESH_UNSET
    }
}

/// Slow start below ssthresh (byte counting, RFC 3465), +1 segment per window above it.
fn grow(e: &mut Endpoint, mut segs: f64) {
    if e.cwnd < e.ssthresh {
        let room = e.ssthresh - e.cwnd;
        let ss = segs.min(room);
        e.cwnd += ss;
        segs -= ss;
    }
    if segs > 0.0 {
        e.cwnd += segs / e.cwnd.max(1.0);
    }
}

/// Adds `r` to a sorted list of disjoint ranges, merging.
fn insert_range(v: &mut Vec<(u64, u64)>, r: (u64, u64)) {
    v.push(r);
    v.sort_unstable();
    let mut out: Vec<(u64, u64)> = Vec::with_capacity(v.len());
    for &(l, h) in v.iter() {
        match out.last_mut() {
            Some(last) if l <= last.1 => last.1 = last.1.max(h),
            _ => out.push((l, h)),
        }
    }
    *v = out;
}

/// SACK blocks of `e`'s next ACK (RFC 2018 section 4: the block with the most recent segment
/// first; RFC 2883: a D-SACK block before all).
fn sack_blocks(e: &Endpoint) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    if let Some(d) = e.dsack {
        out.push(d);
    }
    let recent = e
        .last_block
        .and_then(|b| e.ooo.iter().copied().find(|r| r.0 <= b.0 && b.1 <= r.1));
    if let Some(r) = recent {
        out.push(r);
    }
    for r in e.ooo.iter().rev() {
        if Some(*r) != recent {
            out.push(*r);
        }
    }
    out.truncate(MAX_SACK_BLOCKS);
    out
}

/// The frame of captured packet `p`.
fn frame_spec(cfg: &SynthConfig, p: &Packet, ip_id: u16) -> FrameSpec {
    let (src, dst) = match p.from {
        Side::Client => (CLIENT, SERVER),
        Side::Server => (SERVER, CLIENT),
    };
    let peer = p.from.peer();
    let syn = p.flags & SYN != 0;
    let options = if syn {
        OptionsSpec {
            mss: Some(cfg.mss as u16),
            wscale: Some(WSCALE),
            sack_perm: cfg.sack,
            ..OptionsSpec::NONE
        }
    } else {
        OptionsSpec {
            sack: p
                .sack
                .iter()
                .map(|&(l, r)| (abs(peer, l), abs(peer, r)))
                .collect(),
            ..OptionsSpec::NONE
        }
    };
    let win = if syn {
        p.win.min(65_535)
    } else {
        (p.win >> WSCALE).min(65_535)
    };
    FrameSpec {
        src: IpAddr::V4(src.0),
        dst: IpAddr::V4(dst.0),
        src_port: src.1,
        dst_port: dst.1,
        src_mac: [0x02, 0, 0, 0, 0x77, 1 + p.from as u8],
        dst_mac: [0x02, 0, 0, 0, 0x77, 1 + peer as u8],
        ip_id,
        seq: abs(p.from, p.seq),
        ack: if p.flags & ACK != 0 {
            abs(peer, p.ack)
        } else {
            0
        },
        flags: p.flags,
        window: win as u16,
        options,
        payload_len: p.len,
        payload: Payload::Zeros,
        snaplen: Some(cfg.snaplen),
        ..FrameSpec::TEMPL
    }
}

/// At most [`MAX_SAMPLES`] samples: every change of cwnd or ssthresh first, then evenly
/// spaced others (the lab's rule).
fn decimate(all: &[RawSample]) -> Vec<Sample> {
    if all.len() <= MAX_SAMPLES {
        return all.iter().map(|r| r.s).collect();
    }
    let mut keep = vec![false; all.len()];
    let mut kept = 0;
    for i in 0..all.len() {
        let changed = i == 0
            || all[i].s.cwnd != all[i - 1].s.cwnd
            || all[i].s.ssthresh != all[i - 1].s.ssthresh;
        if changed && kept < MAX_SAMPLES {
            keep[i] = true;
            kept += 1;
        }
    }
    let rest = all.len() - kept;
    let budget = MAX_SAMPLES - kept;
    if budget > 0 {
        let stride = rest.div_ceil(budget).max(1);
        let mut seen = 0;
        for k in keep.iter_mut() {
            if !*k {
                if seen % stride == 0 {
                    *k = true;
                }
                seen += 1;
            }
        }
    }
    all.iter()
        .zip(keep)
        .filter(|(_, k)| *k)
        .map(|(r, _)| r.s)
        .take(MAX_SAMPLES)
        .collect()
}

/// Congestion-avoidance stretches of at least 4 RTTs (cwnd >= ssthresh, state Open).
fn ca_growth(all: &[RawSample], rtt: i64) -> Vec<CaGrowth> {
    let mut out = Vec::new();
    if rtt <= 0 {
        return out;
    }
    let in_ca =
        |r: &RawSample| r.open && r.s.ssthresh != SSTHRESH_UNSET && r.s.cwnd >= r.s.ssthresh;
    let mut i = 0;
    while i < all.len() {
        if !in_ca(&all[i]) {
            i += 1;
            continue;
        }
        let mut j = i;
        while j + 1 < all.len() && in_ca(&all[j + 1]) {
            j += 1;
        }
        let (a, b) = (&all[i].s, &all[j].s);
        let rtts = (b.t_ns - a.t_ns) as f64 / rtt as f64;
        if rtts >= 4.0 {
            out.push(CaGrowth {
                start_ns: a.t_ns,
                end_ns: b.t_ns,
                cwnd_start: a.cwnd,
                cwnd_end: b.cwnd,
                rtts,
                segments_per_rtt: (f64::from(b.cwnd) - f64::from(a.cwnd)) / rtts,
            });
        }
        i = j + 1;
    }
    out
}
