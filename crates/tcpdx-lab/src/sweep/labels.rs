//! Expected finding kinds of a sweep case, from the kernel's truth and the injected
//! impairments (docs/validation.md, "Lab sweep", has the same rules as a table).
//!
//! Each kind is required, allowed or forbidden for a case. A requirement may be met by one
//! of several kinds (loss that also collapsed the window may be told as either); a finding
//! at minor or above of a kind neither required nor allowed is a false positive, and so is
//! any kind these rules do not know.

use crate::capture::Pkt;
use crate::scenario::{NftHook, Scenario, Workload};
use crate::truth::{Connection, Truth};
use serde::Serialize;
use std::collections::BTreeSet;
use std::net::SocketAddrV4;

/// Every kind of tcpdx's catalogue (docs/json-format.md).
pub const KINDS: &[&str] = &[
    "delack-slowstart-stall",
    "nagle-delack-stall",
    "rto-stall",
    "network-loss",
    "spurious-retransmission",
    "reordering",
    "cwnd-collapse",
    "receiver-window-limited",
    "receiver-host-drops",
    "fixed-duration-stall",
    "application-limited",
    "sender-limited",
    "handshake-and-setup",
    "capture-quality",
    "path-limited",
];

/// Share of the connection's life at and above which a cost must be reported (the truth's
/// estimate of a cost is rough, so well above tcpdx's 2% `minor` line).
pub const REQUIRED_SHARE: f64 = 0.05;
/// Share of the life spent in loss recovery (Recovery/Loss states) at and above which the
/// loss must be reported: recovery time overstates the cost (the sender keeps sending).
pub const REQUIRED_RECOVERY_SHARE: f64 = 0.10;
/// Share of the sender's ACK samples with the flight within 3 segments of the peer's
/// window at and above which the receiver window is the limit that must be reported.
pub const REQUIRED_RWND_SHARE: f64 = 0.5;
/// Share of such samples at and above which a receiver-window finding is allowed.
pub const ALLOWED_RWND_SHARE: f64 = 0.05;
/// Spurious retransmissions (of segments the relay held back) and window cuts they caused,
/// at and above which reordering must be reported.
pub const REQUIRED_SPURIOUS: u32 = 5;
/// Window cuts after spurious retransmissions for the same.
pub const REQUIRED_SPURIOUS_CUTS: usize = 2;
/// A request/response turn slower than the round trip by this much (ms) is a Nagle stall.
pub const NAGLE_EXCESS_MS: f64 = 20.0;
/// Nagle stalls at and above which the Nagle finding is required (with their time share).
pub const REQUIRED_NAGLE_STALLS: usize = 3;
/// Longest hold beyond the round trip that is a delayed ACK (Linux's cap is 200 ms).
pub const MAX_DELACK_EXCESS_NS: i64 = 250_000_000;
/// A server stall at least this long (s), overlapping the transfer, must be reported.
pub const REQUIRED_STALL_S: f64 = 0.2;
/// Share of the life a bulk sender sat idle (everything acknowledged, nothing new sent) at
/// and above which `application-limited` is allowed: tcpdx's `minor` line.
pub const ALLOWED_IDLE_SHARE: f64 = 0.02;

/// Share of the main sender's time (between its first and last ACK sample, with data in
/// flight) with the flight at least [`SENDER_MARGIN_SEGMENTS`] below both its congestion
/// window and the peer's window, at and above which `sender-limited` is allowed: the
/// kernel says neither window held the sender for most of the transfer (the detector's own
/// line, `SENDER_MIN_SHARE`).
pub const ALLOWED_SENDER_SHARE: f64 = 0.5;
/// Share of the bulk sender's busy time the kernel counted as send-buffer limited
/// (`tcpi_sndbuf_limited / tcpi_busy_time`) at and above which `sender-limited` is required
/// from the sender's capture: the buffer held it for most of the transfer.
pub const REQUIRED_SNDBUF_SHARE: f64 = 0.5;
/// Segments below a window that a flight must be for that window not to be its limit (the
/// margin the receiver-window share uses).
pub const SENDER_MARGIN_SEGMENTS: u32 = 3;

/// What the truth and the recipe say about a case (the inputs of the rules).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Facts {
    /// Workload family: "bulk", "reqresp" or "storage".
    pub family: String,
    /// Primary capture point (client, server, router_s, router_c).
    pub capture: String,
    /// Life of the main connection (s): its sender's first to last ACK.
    pub life_s: f64,
    /// Data segments dropped in the network: relay, tbf, nft in the router, unintended.
    pub net_drops: u64,
    /// Of `net_drops`, those of the bottleneck's queue (tbf): the path's own limit.
    pub queue_drops: u64,
    /// The data sender runs BBR, whose rate loss barely changes: time in recovery is no cost.
    pub bbr: bool,
    /// Data segments dropped inside the receiving host (nft input hook).
    pub host_drops: u64,
    /// Pure ACKs dropped on purpose.
    pub ack_drops: u64,
    /// Segments the kernel retransmitted, spurious ones of reordered data excluded.
    pub retx_segments: u32,
    /// Retransmissions of segments the relay had held back (spurious).
    pub spurious_retx: u32,
    /// Window cuts within 2 RTTs after such a spurious retransmission.
    pub spurious_cuts: usize,
    /// Of those, cuts the kernel undid (the next ssthresh change restored it: a D-SACK or
    /// timestamp undo).
    pub spurious_cuts_undone: usize,
    /// D-SACKs received by the data senders, or sent by the receivers (data that arrived
    /// twice: a retransmission was not needed, whether or not its D-SACK got back).
    pub dsacks: u64,
    /// Segments the relay held back.
    pub reorders_injected: u64,
    /// Reordering the senders' kernels detected (TCPSACKReorder + TCPTSReorder + TCPRenoReorder).
    pub kernel_reorder: u64,
    /// Retransmission timeouts (entries into Loss).
    pub rtos: usize,
    /// Silence before the timeouts (s): last ACK before each RTO to the RTO.
    pub rto_stall_s: f64,
    /// Time in Recovery or Loss (s).
    pub recovery_s: f64,
    /// Delayed-ACK pauses after a lone post-RTO segment (held at most
    /// [`MAX_DELACK_EXCESS_NS`] beyond the round trip).
    pub delack_pauses: usize,
    /// Their total length (s).
    pub delack_s: f64,
    /// ACKs at the sender that came >= 20 ms later than the round trip after the previous
    /// one while the sender had at most one segment out and a window of at most 2 (a lone
    /// segment's delayed ACK, after a fast retransmission as well as after an RTO).
    pub lone_delayed_acks: usize,
    /// Zero-window intervals seen by the sender.
    pub zero_windows: usize,
    /// Their total length (s).
    pub zero_window_s: f64,
    /// Zero-window time of the senders with zero windows in the truth, by their own captures
    /// ([`zero_window_held_s`]), when those were read: the kernel's samples show each ACK's
    /// window one ACK late, so a truth interval runs from the update to the next sample.
    pub zero_window_held_s: Option<f64>,
    /// Share of the sender's ACK samples with the flight within 3 segments of the peer's window.
    pub rwnd_share: f64,
    /// Server stall overlapping the exchange (s): the recipe's SIGSTOP .. SIGCONT.
    pub stall_s: f64,
    /// That stall's part of the exchange (ns, SIGSTOP .. SIGCONT clipped to the exchange).
    pub stall_window: Option<(i64, i64)>,
    /// Longest silence of the main connection inside `stall_window` (s), both directions, in
    /// the server host's capture ([`held_s`]): the stall as the server's packets show it.
    pub server_held_s: f64,
    /// Slow server (stopped and resumed over and over).
    pub duty_cycle: bool,
    /// Request/response turns slower than the round trip by [`NAGLE_EXCESS_MS`].
    pub nagle_stalls: usize,
    /// Their excess over the round trip (s).
    pub nagle_s: f64,
    /// Request/response life (s).
    pub reqresp_s: f64,
    /// TCP_NODELAY set by the request/response client.
    pub nodelay: bool,
    /// Window scaling off.
    pub no_window_scaling: bool,
    /// Packets the primary capture lost (kernel drops) or any unintended drop.
    pub capture_or_health_problem: bool,
    /// Time (s) the main sender had everything acknowledged and sent nothing new, by its own
    /// capture (a bulk sender starved of CPU on this shared machine).
    pub sender_idle_s: f64,
    /// Share of the main sender's time in flight held below both windows by the sender
    /// itself ([`sender_share`]).
    pub sender_share: f64,
    /// Share of the bulk sender's busy time its kernel counted as send-buffer limited
    /// (`tcp_info` at the end of the transfer; 0 where the truth does not have it).
    pub sndbuf_share: f64,
    /// The recipe capped the bulk sender's send buffer (tcp_wmem max) below the path's
    /// bandwidth-delay product, its application always writing: data was pending.
    pub send_buffer_capped: bool,
}

/// One requirement: met when any of `kinds` is reported (the first names it).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Requirement {
    /// Kinds that meet it.
    pub kinds: Vec<String>,
    /// Why it is required.
    pub why: String,
}

/// A case's labels.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Labels {
    /// Kinds that must be reported (at minor or above).
    pub required: Vec<Requirement>,
    /// Kinds that may be reported without counting as false positives.
    pub allowed: BTreeSet<String>,
}

impl Labels {
    fn require(&mut self, kinds: &[&str], why: String) {
        self.required.push(Requirement {
            kinds: kinds.iter().map(|k| k.to_string()).collect(),
            why,
        });
    }
    fn allow(&mut self, k: &str) {
        self.allowed.insert(k.to_string());
    }
    /// Whether `kind` is required or allowed (a finding of it is not a false positive).
    pub fn permits(&self, kind: &str) -> bool {
        self.allowed.contains(kind)
            || self
                .required
                .iter()
                .any(|r| r.kinds.iter().any(|k| k == kind))
    }
    /// Kinds neither required nor allowed (of the catalogue).
    pub fn forbidden(&self) -> Vec<&'static str> {
        KINDS.iter().copied().filter(|k| !self.permits(k)).collect()
    }
}

fn share(s: f64, life: f64) -> f64 {
    if life > 0.0 { s / life } else { 0.0 }
}

/// The labelling rules (docs/validation.md, "Lab sweep").
pub fn label(f: &Facts) -> Labels {
    let mut l = Labels::default();
    let life = f.life_s;
    // network-loss / cwnd-collapse: data really lost before the receiver
    let rec = share(f.recovery_s, life);
    // Loss costs time when it is not the bottleneck queue's overflow (the path's limit)
    // and the sender's window follows it (not BBR).
    let costly = !f.bbr && rec >= REQUIRED_RECOVERY_SHARE;
    if f.net_drops > 0 && f.retx_segments > 0 {
        if costly && f.net_drops > f.queue_drops {
            l.require(
                &["network-loss", "cwnd-collapse"],
                format!(
                    "{} segments dropped in the network, {:.0}% of the life in recovery",
                    f.net_drops,
                    rec * 100.0
                ),
            );
        }
        l.allow("network-loss");
        l.allow("cwnd-collapse");
    }
    // receiver-host-drops: dropped inside the receiver, after a capture that saw them arrive
    if f.host_drops > 0 && f.retx_segments > 0 {
        let saw_arrive = f.capture != "client";
        if saw_arrive && costly {
            l.require(
                &["receiver-host-drops"],
                format!(
                    "{} segments dropped inside the receiving host after the {} capture",
                    f.host_drops, f.capture
                ),
            );
        }
        l.allow("receiver-host-drops");
        l.allow("cwnd-collapse");
        if !saw_arrive {
            // a capture before the drop cannot tell the host from the network
            l.allow("network-loss");
        }
    }
    // rto-stall
    if f.rtos > 0 {
        if share(f.rto_stall_s, life) >= REQUIRED_SHARE {
            l.require(
                &["rto-stall"],
                format!(
                    "{} RTOs in the kernel, {:.0} ms of silence",
                    f.rtos,
                    f.rto_stall_s * 1e3
                ),
            );
        }
        l.allow("rto-stall");
        l.allow("cwnd-collapse");
    }
    // delack-slowstart-stall
    if f.delack_pauses > 0 && share(f.delack_s, life) >= REQUIRED_SHARE {
        l.require(
            &["delack-slowstart-stall"],
            format!("{} delayed-ACK pauses after an RTO", f.delack_pauses),
        );
    }
    if f.delack_pauses > 0 || f.lone_delayed_acks > 0 {
        l.allow("delack-slowstart-stall");
    }
    // spurious retransmission / reordering
    // A cut the kernel undid costs nothing after its recovery: with fewer than
    // REQUIRED_SPURIOUS_CUTS cuts kept, the cost is at most the time in recovery, which must
    // reach REQUIRED_SHARE as any other cost.
    let kept_cuts = f.spurious_cuts.saturating_sub(f.spurious_cuts_undone);
    if f.spurious_retx >= REQUIRED_SPURIOUS
        && f.spurious_cuts >= REQUIRED_SPURIOUS_CUTS
        && (kept_cuts >= REQUIRED_SPURIOUS_CUTS || rec >= REQUIRED_SHARE)
        && f.net_drops == 0
        && f.host_drops == 0
    {
        l.require(
            &["spurious-retransmission", "reordering"],
            format!(
                "{} retransmissions of held-back segments, {} window cuts after them ({} kept), \
                 {:.0}% of the life in recovery, no drop",
                f.spurious_retx,
                f.spurious_cuts,
                kept_cuts,
                rec * 100.0
            ),
        );
    }
    if f.spurious_retx > 0 || f.dsacks > 0 || (f.ack_drops > 0 && f.retx_segments > 0) {
        l.allow("spurious-retransmission");
    }
    if f.reorders_injected > 0 || f.kernel_reorder > 0 {
        l.allow("reordering");
    }
    // receiver-window-limited
    let zw = share(f.zero_window_held_s.unwrap_or(f.zero_window_s), life);
    if zw >= REQUIRED_SHARE || f.rwnd_share >= REQUIRED_RWND_SHARE {
        l.require(
            &["receiver-window-limited"],
            format!(
                "zero window {:.0}% of the life, flight at the window in {:.0}% of the ACKs",
                zw * 100.0,
                f.rwnd_share * 100.0
            ),
        );
    }
    if f.zero_windows > 0 || f.rwnd_share >= ALLOWED_RWND_SHARE {
        l.allow("receiver-window-limited");
    }
    // a bulk sender that really sat idle (starved of CPU): the capture shows an idle sender
    if f.family == "bulk" && share(f.sender_idle_s, life) >= ALLOWED_IDLE_SHARE {
        l.allow("application-limited");
    }
    // storage server stall: the server holding its replies. The SIGSTOP is the recipe's;
    // a stop that did not reach the process serving the connection (smbd forks one per
    // client) held nothing, and the server's own capture, which sees every reply it sends,
    // shows no silence: required only when that capture shows the hold.
    if f.family == "storage" {
        l.allow("application-limited");
        if f.stall_s >= REQUIRED_STALL_S && f.server_held_s >= REQUIRED_STALL_S {
            l.require(
                &["application-limited"],
                format!(
                    "server stopped {:.0} ms during the transfer, the connection silent {:.0} ms of it",
                    f.stall_s * 1e3,
                    f.server_held_s * 1e3
                ),
            );
        }
    }
    // sender-limited: the kernel's flight below both windows for most of the transfer
    // (allowed: its samples cannot say the send buffer, rather than TCP small queues or
    // pacing, held it), or the kernel's own send-buffer accounting (required where the
    // capture is the sender's: from the receiver's side a held flight looks like the path).
    if f.sender_share >= ALLOWED_SENDER_SHARE || f.sndbuf_share >= REQUIRED_SNDBUF_SHARE {
        l.allow("sender-limited");
    }
    let held_with_data = f.send_buffer_capped && f.sender_share >= ALLOWED_SENDER_SHARE;
    if f.family == "bulk"
        && f.capture == "client"
        && (f.sndbuf_share >= REQUIRED_SNDBUF_SHARE || held_with_data)
    {
        l.require(
            &["sender-limited"],
            format!(
                "the sender's kernel counted {:.0}% of its busy time send-buffer limited and \
                 its flight below both windows {:.0}% of it{}",
                f.sndbuf_share * 100.0,
                f.sender_share * 100.0,
                if f.send_buffer_capped {
                    " with its send buffer capped"
                } else {
                    ""
                }
            ),
        );
    }
    if f.duty_cycle {
        l.allow("fixed-duration-stall");
    }
    // request/response
    if f.family == "reqresp" {
        l.allow("application-limited");
        if !f.nodelay {
            l.allow("nagle-delack-stall");
            if f.nagle_stalls >= REQUIRED_NAGLE_STALLS
                && share(f.nagle_s, f.reqresp_s) >= REQUIRED_SHARE
            {
                l.require(
                    &["nagle-delack-stall"],
                    format!(
                        "{} turns slower than the round trip by >= {NAGLE_EXCESS_MS} ms, {:.0} ms in all",
                        f.nagle_stalls,
                        f.nagle_s * 1e3
                    ),
                );
            }
        }
    }
    if f.no_window_scaling {
        l.allow("handshake-and-setup");
    }
    if f.capture_or_health_problem {
        l.allow("capture-quality");
    }
    // the healthy verdict is never a false alarm
    l.allow("path-limited");
    l
}

/// Time (s) `sender` had all its data acknowledged and sent no new data, in its own capture
/// `pkts`: from the ACK of everything sent to the next new data segment (the wait for the
/// FIN at the end does not count).
pub fn sender_idle_s(pkts: &[Pkt], sender: SocketAddrV4) -> f64 {
    let seq_le = |a: u32, b: u32| (b.wrapping_sub(a) as i32) >= 0;
    let (ip, port) = (sender.ip().octets(), sender.port());
    let mut high: Option<u32> = None;
    let mut idle_since: Option<i64> = None;
    let mut total = 0i64;
    for p in pkts {
        if p.src == ip && p.sport == port {
            if p.syn() {
                high = Some(p.seq.wrapping_add(1));
                continue;
            }
            if p.len == 0 {
                continue;
            }
            let end = p.seq.wrapping_add(p.len);
            if let Some(h) = high
                && !seq_le(end, h)
            {
                if let Some(t0) = idle_since.take() {
                    total += p.t_ns - t0;
                }
                high = Some(end);
            }
        } else if p.dst == ip
            && p.dport == port
            && p.len == 0
            && !p.syn()
            && high.is_some_and(|h| seq_le(h, p.ack))
            && idle_since.is_none()
        {
            idle_since = Some(p.t_ns);
        }
    }
    total as f64 / 1e9
}

/// Longest time (s) inside `window` (ns) in which the connection between `a` and `b` carried
/// no payload in either direction, in the capture `pkts`: a stopped server shows as such a
/// silence (a read's data or a write's reply held, the client's writes stopped by the full
/// window). Silences are the gaps between consecutive payload segments, clipped to `window`.
pub fn held_s(pkts: &[Pkt], a: SocketAddrV4, b: SocketAddrV4, window: (i64, i64)) -> f64 {
    let (w0, w1) = window;
    let end = |x: SocketAddrV4| (x.ip().octets(), x.port());
    let (ea, eb) = (end(a), end(b));
    let mut prev: Option<i64> = None;
    let mut longest = 0i64;
    for p in pkts.iter().filter(|p| {
        let (s, d) = ((p.src, p.sport), (p.dst, p.dport));
        p.len > 0 && ((s, d) == (ea, eb) || (s, d) == (eb, ea))
    }) {
        if let Some(t0) = prev {
            longest = longest.max(p.t_ns.min(w1) - t0.max(w0));
        }
        prev = Some(p.t_ns);
    }
    longest.max(0) as f64 / 1e9
}

/// Zero-window time (s) of `sender` in its own capture `pkts`: from the first ACK to it
/// advertising a zero window to the next one opening it (a window still closed when the
/// capture ends does not count). The kernel's samples are taken as an ACK arrives, before
/// it is processed: a sample shows the window the previous ACK left, so the truth's
/// intervals start at the update and last to the next sample.
pub fn zero_window_held_s(pkts: &[Pkt], sender: SocketAddrV4) -> f64 {
    let (ip, port) = (sender.ip().octets(), sender.port());
    let mut since: Option<i64> = None;
    let mut total = 0i64;
    for p in pkts
        .iter()
        .filter(|p| p.dst == ip && p.dport == port && !p.syn() && p.flags & 0x04 == 0)
    {
        if p.win == 0 {
            since.get_or_insert(p.t_ns);
        } else if let Some(t0) = since.take() {
            total += p.t_ns - t0;
        }
    }
    total as f64 / 1e9
}

/// `tcpi_sndbuf_limited / tcpi_busy_time` of a bulk sender's report (0 without them).
pub fn sndbuf_share(send: &serde_json::Value) -> f64 {
    let us = |k: &str| send[k].as_f64().unwrap_or(0.0);
    let busy = us("busy_us");
    if busy > 0.0 {
        (us("sndbuf_limited_us") / busy).min(1.0)
    } else {
        0.0
    }
}

/// Share of `c`'s time with data in flight (each ACK sample to the next) in which the flight
/// was at least [`SENDER_MARGIN_SEGMENTS`] below both the congestion window and the peer's
/// window.
pub fn sender_share(c: &Connection) -> f64 {
    let mss = u64::from(c.mss.max(536));
    let margin = u64::from(SENDER_MARGIN_SEGMENTS) * mss;
    let (mut busy, mut held) = (0i64, 0i64);
    for w in c.samples.windows(2) {
        let s = &w[0];
        if s.inflight == 0 {
            continue;
        }
        let dt = w[1].t_ns - s.t_ns;
        busy += dt;
        let inflight = u64::from(s.inflight);
        if inflight + margin <= u64::from(s.cwnd) * mss && inflight + margin <= u64::from(s.snd_wnd)
        {
            held += dt;
        }
    }
    if busy > 0 {
        held as f64 / busy as f64
    } else {
        0.0
    }
}

/// ACK samples of `c` that came >= [`NAGLE_EXCESS_MS`] later than the round trip after the
/// previous ACK, with at most one segment out and a window of at most 2 segments before them.
pub fn lone_delayed_acks(c: &Connection) -> usize {
    let mss = c.mss.max(536);
    c.samples
        .windows(2)
        .filter(|w| {
            let s = &w[1];
            s.inflight <= mss
                && s.cwnd <= 2
                && w[1].t_ns - w[0].t_ns
                    >= i64::from(s.srtt_us) * 1000 + (NAGLE_EXCESS_MS * 1e6) as i64
        })
        .count()
}

fn nstat_sum(t: &Truth, keys: &[&str]) -> u64 {
    t.counters
        .nstat
        .values()
        .flat_map(|m| keys.iter().filter_map(|k| m.get(*k)))
        .sum()
}

fn span_s(c: &Connection) -> f64 {
    match (c.samples.first(), c.samples.last()) {
        (Some(a), Some(b)) => (b.t_ns - a.t_ns) as f64 / 1e9,
        _ => 0.0,
    }
}

/// The facts of a case from its recipe and its truth.
pub fn facts(sc: &Scenario, t: &Truth) -> Facts {
    let mut f = Facts {
        capture: sc.capture.stem().into(),
        no_window_scaling: sc.no_window_scaling,
        ..Default::default()
    };
    f.family = match &sc.workload {
        Workload::Bulk { .. } => "bulk",
        Workload::ReqResp { .. } => "reqresp",
        Workload::Storage { .. } => "storage",
    }
    .into();
    let main = t.connections.iter().max_by_key(|c| c.bytes_sent);
    f.life_s = main.map_or(0.0, span_s);
    let c = &t.counters;
    let unintended = c.softnet_dropped
        + c.veth_dropped
        + c.tun_tx_dropped.unwrap_or(0)
        + c.tun_qdisc_drops.unwrap_or(0)
        + c.relay
            .as_ref()
            .map_or(0, |r| r.pool_overflow + r.write_errors);
    let nft = c.nft_drops.unwrap_or(0);
    let (nft_net, nft_host) = match sc.nft_loss.as_ref().map(|l| l.hook) {
        Some(NftHook::ServerInput) => (0, nft),
        _ => (nft, 0),
    };
    f.net_drops = t.injected.drops.len() as u64 + c.tbf_drops.unwrap_or(0) + nft_net + unintended;
    f.host_drops = nft_host;
    f.queue_drops = c.tbf_drops.unwrap_or(0);
    f.bbr = match &sc.workload {
        Workload::Bulk { cc, .. } | Workload::ReqResp { cc, .. } => cc == "bbr",
        // reads: the server sends (its netns default); writes: the client (reno)
        Workload::Storage { op, server_cc, .. } => {
            !crate::storage::is_write(*op) && server_cc == "bbr"
        }
    };
    f.ack_drops = c.ack_drops.unwrap_or(0);
    f.dsacks = nstat_sum(
        t,
        &[
            "TcpExtTCPDSACKRecv",
            "TcpExtTCPDSACKOfoRecv",
            "TcpExtTCPDSACKOldSent",
            "TcpExtTCPDSACKOfoSent",
        ],
    );
    f.kernel_reorder = nstat_sum(
        t,
        &[
            "TcpExtTCPSACKReorder",
            "TcpExtTCPTSReorder",
            "TcpExtTCPRenoReorder",
        ],
    );
    f.reorders_injected = t.injected.reorders.len() as u64;
    for conn in &t.connections {
        for r in &conn.retransmissions {
            if r.reordered_original {
                f.spurious_retx += r.segments;
            } else {
                f.retx_segments += r.segments;
            }
        }
        let changes = &conn.episodes.ssthresh_changes;
        for (i, s) in changes.iter().enumerate() {
            if s.after_spurious && s.to < s.from {
                f.spurious_cuts += 1;
                if changes.get(i + 1).is_some_and(|n| n.to >= s.from) {
                    f.spurious_cuts_undone += 1;
                }
            }
        }
        f.rtos += conn.episodes.rtos.len();
        for r in &conn.episodes.rtos {
            let last = conn
                .samples
                .iter()
                .map(|s| s.t_ns)
                .filter(|&x| x < r.start_ns)
                .max()
                .unwrap_or(r.start_ns);
            f.rto_stall_s += (r.start_ns - last) as f64 / 1e9;
        }
        f.recovery_s += conn
            .cong_states
            .iter()
            .filter(|s| s.state == "Recovery" || s.state == "Loss")
            .map(|s| (s.end_ns - s.start_ns) as f64 / 1e9)
            .sum::<f64>();
        // A Linux receiver holds an ACK at most 200 ms: a longer "pause" after an RTO waited
        // for something else (a closed window, a lost ACK).
        for p in conn
            .episodes
            .delack_pauses
            .iter()
            .filter(|p| p.excess_ns <= MAX_DELACK_EXCESS_NS)
        {
            f.delack_pauses += 1;
            f.delack_s += p.length_ns as f64 / 1e9;
        }
        f.lone_delayed_acks += lone_delayed_acks(conn);
        f.zero_windows += conn.episodes.zero_windows.len();
        f.zero_window_s += conn
            .episodes
            .zero_windows
            .iter()
            .map(|z| (z.end_ns - z.start_ns) as f64 / 1e9)
            .sum::<f64>();
    }
    if let Some(m) = main {
        let mss = m.mss.max(536);
        let n = m.samples.len().max(1);
        let at_window = m
            .samples
            .iter()
            .filter(|s| {
                s.snd_wnd > 0 && u64::from(s.inflight) + 3 * u64::from(mss) >= u64::from(s.snd_wnd)
            })
            .count();
        f.rwnd_share = at_window as f64 / n as f64;
        f.sender_share = sender_share(m);
        // A stall counts when the exchange was under way on both sides of it: the main
        // sender's samples and its peer's (a read's request and the hold of its reply come
        // before the server's first data).
        let peer = t
            .connections
            .iter()
            .find(|c| c.sender == m.receiver && c.receiver == m.sender);
        let ts = m
            .samples
            .iter()
            .chain(peer.iter().flat_map(|c| c.samples.iter()))
            .map(|s| s.t_ns);
        if let (Some(a), Some(b)) = (ts.clone().min(), ts.max()) {
            for s in m
                .episodes
                .stalls
                .iter()
                .filter(|s| s.start_ns < b && s.end_ns > a)
            {
                let w = (s.start_ns.max(a), s.end_ns.min(b));
                let len = (w.1 - w.0) as f64 / 1e9;
                if len > f.stall_s {
                    f.stall_s = len;
                    f.stall_window = Some(w);
                }
            }
        }
    }
    match &sc.workload {
        Workload::Storage { server_duty_ms, .. } => f.duty_cycle = server_duty_ms.is_some(),
        Workload::ReqResp { nodelay, .. } => {
            f.nodelay = *nodelay;
            let rtt_ms = sc.relay.as_ref().map_or(0.0, |r| {
                r.delay_c2s_ms.unwrap_or(r.delay_ms) + r.delay_s2c_ms.unwrap_or(r.delay_ms)
            });
            let cl = &t.workload["client"];
            f.reqresp_s = cl["secs"].as_f64().unwrap_or(0.0);
            for l in cl["latencies_ms"]
                .as_array()
                .map(Vec::as_slice)
                .unwrap_or_default()
                .iter()
                .filter_map(|x| x.as_f64())
            {
                if l >= rtt_ms + NAGLE_EXCESS_MS {
                    f.nagle_stalls += 1;
                    f.nagle_s += (l - rtt_ms) / 1e3;
                }
            }
        }
        Workload::Bulk { .. } => {
            f.sndbuf_share = sndbuf_share(&t.workload["send"]);
            f.send_buffer_capped = sc.sender_wmem_max.is_some();
        }
    }
    let primary_drops: u64 = t
        .files
        .captures
        .iter()
        .filter(|c| c.primary)
        .map(|c| c.stats.dropped_by_kernel)
        .sum();
    f.capture_or_health_problem = primary_drops > 0 || !t.health.ok;
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    fn clean() -> Facts {
        Facts {
            family: "bulk".into(),
            capture: "client".into(),
            life_s: 2.0,
            ..Default::default()
        }
    }

    fn req_kinds(l: &Labels) -> Vec<String> {
        l.required.iter().map(|r| r.kinds[0].clone()).collect()
    }

    #[test]
    fn clean_transfer_requires_nothing_and_forbids_every_problem() {
        let l = label(&clean());
        assert!(l.required.is_empty());
        assert_eq!(l.allowed, BTreeSet::from(["path-limited".to_string()]));
        let forb = l.forbidden();
        for k in [
            "network-loss",
            "rto-stall",
            "fixed-duration-stall",
            "application-limited",
        ] {
            assert!(forb.contains(&k), "{k}");
        }
        assert!(!l.permits("some-new-kind"));
    }

    #[test]
    fn network_loss_required_at_the_recovery_share() {
        let mut f = clean();
        f.net_drops = 20;
        f.retx_segments = 20;
        // just below: allowed, not required
        f.recovery_s = REQUIRED_RECOVERY_SHARE * f.life_s * 0.99;
        let l = label(&f);
        assert!(l.required.is_empty());
        assert!(l.permits("network-loss") && l.permits("cwnd-collapse"));
        // at the share: required, met by either kind
        f.recovery_s = REQUIRED_RECOVERY_SHARE * f.life_s;
        let l = label(&f);
        assert_eq!(req_kinds(&l), vec!["network-loss"]);
        assert_eq!(l.required[0].kinds, vec!["network-loss", "cwnd-collapse"]);
        // a BBR sender, or drops of the bottleneck's queue only: allowed, not required
        f.bbr = true;
        assert!(label(&f).required.is_empty());
        f.bbr = false;
        f.queue_drops = 20;
        let l = label(&f);
        assert!(l.required.is_empty() && l.permits("network-loss"));
        f.queue_drops = 19;
        assert_eq!(req_kinds(&label(&f)), vec!["network-loss"]);
        // no drop injected, even with retransmissions: network-loss is a false positive
        f.net_drops = 0;
        f.queue_drops = 0;
        let l = label(&f);
        assert!(!l.permits("network-loss"));
    }

    #[test]
    fn host_drops_depend_on_the_capture_point() {
        let mut f = clean();
        f.host_drops = 30;
        f.retx_segments = 30;
        f.recovery_s = 1.0;
        let l = label(&f);
        assert!(
            l.required.is_empty(),
            "a client capture cannot see host drops"
        );
        assert!(l.permits("network-loss") && l.permits("receiver-host-drops"));
        f.capture = "router_s".into();
        let l = label(&f);
        assert_eq!(req_kinds(&l), vec!["receiver-host-drops"]);
        assert!(!l.permits("network-loss"));
    }

    #[test]
    fn rto_stall_required_only_with_rtos_in_the_truth() {
        let mut f = clean();
        f.rto_stall_s = 1.0;
        assert!(!label(&f).permits("rto-stall"), "no RTO: forbidden");
        f.rtos = 2;
        f.rto_stall_s = REQUIRED_SHARE * f.life_s * 0.99;
        let l = label(&f);
        assert!(l.permits("rto-stall") && l.required.is_empty());
        f.rto_stall_s = REQUIRED_SHARE * f.life_s;
        assert_eq!(req_kinds(&label(&f)), vec!["rto-stall"]);
    }

    #[test]
    fn reordering_without_drops_requires_spurious_or_reordering() {
        let mut f = clean();
        f.reorders_injected = 40;
        f.dsacks = 10;
        f.spurious_retx = REQUIRED_SPURIOUS;
        f.spurious_cuts = REQUIRED_SPURIOUS_CUTS;
        let l = label(&f);
        assert_eq!(
            l.required[0].kinds,
            vec!["spurious-retransmission", "reordering"]
        );
        f.spurious_cuts = REQUIRED_SPURIOUS_CUTS - 1;
        let l = label(&f);
        assert!(l.required.is_empty());
        assert!(l.permits("reordering") && l.permits("spurious-retransmission"));
        assert!(!l.permits("network-loss"), "reordering alone is no loss");
        // with real drops as well the retransmissions are not all spurious: not required
        f.spurious_cuts = REQUIRED_SPURIOUS_CUTS;
        f.net_drops = 3;
        f.retx_segments = 3;
        assert_eq!(req_kinds(&label(&f)), Vec::<String>::new());
    }

    #[test]
    fn cuts_the_kernel_undid_require_the_recovery_share() {
        let mut f = clean();
        f.reorders_injected = 40;
        f.spurious_retx = REQUIRED_SPURIOUS;
        f.spurious_cuts = REQUIRED_SPURIOUS_CUTS + 1;
        let need = |f: &Facts| req_kinds(&label(f)) == vec!["spurious-retransmission"];
        // every cut undone: required at the recovery share, allowed below it
        f.spurious_cuts_undone = f.spurious_cuts;
        f.recovery_s = REQUIRED_SHARE * f.life_s * 0.99;
        assert!(!need(&f) && label(&f).permits("spurious-retransmission"));
        f.recovery_s = REQUIRED_SHARE * f.life_s;
        assert!(need(&f));
        // short recovery: required when the kept cuts reach the line, not one below it
        f.recovery_s = 0.0;
        f.spurious_cuts_undone = f.spurious_cuts - (REQUIRED_SPURIOUS_CUTS - 1);
        assert!(!need(&f));
        f.spurious_cuts_undone = f.spurious_cuts - REQUIRED_SPURIOUS_CUTS;
        assert!(need(&f));
    }

    #[test]
    fn receiver_window_thresholds() {
        let mut f = clean();
        f.rwnd_share = ALLOWED_RWND_SHARE * 0.99;
        assert!(!label(&f).permits("receiver-window-limited"));
        f.rwnd_share = ALLOWED_RWND_SHARE;
        let l = label(&f);
        assert!(l.permits("receiver-window-limited") && l.required.is_empty());
        f.rwnd_share = REQUIRED_RWND_SHARE;
        assert_eq!(req_kinds(&label(&f)), vec!["receiver-window-limited"]);
        let mut f = clean();
        f.zero_windows = 3;
        f.zero_window_s = REQUIRED_SHARE * f.life_s;
        assert_eq!(req_kinds(&label(&f)), vec!["receiver-window-limited"]);
    }

    #[test]
    fn storage_stall_and_duty_cycle() {
        let mut f = clean();
        f.family = "storage".into();
        f.stall_s = REQUIRED_STALL_S * 0.99;
        let l = label(&f);
        assert!(l.required.is_empty() && l.permits("application-limited"));
        assert!(!l.permits("fixed-duration-stall"), "one stall is no timer");
        f.stall_s = REQUIRED_STALL_S;
        f.server_held_s = REQUIRED_STALL_S;
        assert_eq!(req_kinds(&label(&f)), vec!["application-limited"]);
        // a stop the server's capture does not show (the serving process ran on): allowed only
        f.server_held_s = REQUIRED_STALL_S * 0.99;
        let l = label(&f);
        assert!(l.required.is_empty() && l.permits("application-limited"));
        f.server_held_s = 1.0;
        f.stall_s = REQUIRED_STALL_S * 0.99;
        assert!(label(&f).required.is_empty());
        f.duty_cycle = true;
        assert!(label(&f).permits("fixed-duration-stall"));
    }

    #[test]
    fn nagle_required_with_stalls_and_forbidden_with_nodelay() {
        let mut f = clean();
        f.family = "reqresp".into();
        f.reqresp_s = 2.0;
        f.nagle_stalls = REQUIRED_NAGLE_STALLS;
        f.nagle_s = 0.12;
        assert_eq!(req_kinds(&label(&f)), vec!["nagle-delack-stall"]);
        f.nagle_stalls = REQUIRED_NAGLE_STALLS - 1;
        let l = label(&f);
        assert!(l.required.is_empty() && l.permits("nagle-delack-stall"));
        f.nodelay = true;
        f.nagle_stalls = 0;
        let l = label(&f);
        assert!(!l.permits("nagle-delack-stall"));
        assert!(l.permits("application-limited"));
        assert!(!l.permits("fixed-duration-stall"));
    }

    #[test]
    fn setup_and_capture_kinds_only_with_their_cause() {
        let mut f = clean();
        assert!(!label(&f).permits("handshake-and-setup"));
        assert!(!label(&f).permits("capture-quality"));
        f.no_window_scaling = true;
        f.capture_or_health_problem = true;
        let l = label(&f);
        assert!(l.permits("handshake-and-setup") && l.permits("capture-quality"));
    }

    #[test]
    fn lone_delayed_acks_allow_the_delack_finding() {
        use crate::truth::Sample;
        let s = |t_ms: i64, cwnd: u32, inflight: u32| Sample {
            t_ns: t_ms * 1_000_000,
            cwnd,
            ssthresh: 10,
            srtt_us: 10_000,
            snd_wnd: 1 << 20,
            inflight,
        };
        let mut c = Connection {
            mss: 1448,
            samples: vec![
                s(0, 10, 14480),
                s(30, 1, 1448),  // 30 ms = RTT + 20 ms: a held ACK
                s(59, 1, 1448),  // 29 ms: not
                s(90, 4, 1448),  // a larger window: not a lone segment's
                s(120, 2, 2896), // two segments out: not
            ],
            ..Default::default()
        };
        assert_eq!(lone_delayed_acks(&c), 1);
        c.samples[1].t_ns -= 1;
        assert_eq!(lone_delayed_acks(&c), 0);
        let mut f = clean();
        assert!(!label(&f).permits("delack-slowstart-stall"));
        f.lone_delayed_acks = 1;
        let l = label(&f);
        assert!(l.permits("delack-slowstart-stall") && l.required.is_empty());
    }

    #[test]
    fn sender_limited_allowed_at_the_share_and_never_required_by_it() {
        let mut f = clean();
        assert!(!label(&f).permits("sender-limited"));
        f.sender_share = ALLOWED_SENDER_SHARE * 0.99;
        assert!(!label(&f).permits("sender-limited"));
        f.sender_share = ALLOWED_SENDER_SHARE;
        let l = label(&f);
        assert!(l.permits("sender-limited") && l.required.is_empty());
        f.sender_share = 1.0;
        assert!(label(&f).required.is_empty());
    }

    #[test]
    fn sender_limited_required_at_the_kernels_sndbuf_share_from_the_sender() {
        let mut f = clean();
        f.sndbuf_share = REQUIRED_SNDBUF_SHARE * 0.99;
        let l = label(&f);
        assert!(!l.permits("sender-limited") && l.required.is_empty());
        f.sndbuf_share = REQUIRED_SNDBUF_SHARE;
        assert_eq!(req_kinds(&label(&f)), vec!["sender-limited"]);
        f.sndbuf_share = 1.0;
        assert_eq!(req_kinds(&label(&f)), vec!["sender-limited"]);
        // from the receiver's side or the router: allowed, not required
        for cap in ["server", "router_s"] {
            f.capture = cap.into();
            let l = label(&f);
            assert!(
                l.permits("sender-limited") && l.required.is_empty(),
                "{cap}"
            );
        }
        // not a bulk transfer
        f.capture = "client".into();
        f.family = "reqresp".into();
        assert!(!req_kinds(&label(&f)).contains(&"sender-limited".to_string()));
    }

    #[test]
    fn sender_limited_required_for_a_capped_buffer_at_the_held_share() {
        let mut f = clean();
        f.send_buffer_capped = true;
        f.sender_share = ALLOWED_SENDER_SHARE * 0.99;
        assert!(label(&f).required.is_empty());
        f.sender_share = ALLOWED_SENDER_SHARE;
        assert_eq!(req_kinds(&label(&f)), vec!["sender-limited"]);
        // the same flight without the cap: data pending is not known, only allowed
        f.send_buffer_capped = false;
        let l = label(&f);
        assert!(l.permits("sender-limited") && l.required.is_empty());
        // from the receiver's capture: allowed
        f.send_buffer_capped = true;
        f.capture = "server".into();
        let l = label(&f);
        assert!(l.permits("sender-limited") && l.required.is_empty());
    }

    #[test]
    fn the_sndbuf_share_from_the_senders_report() {
        let v = serde_json::json!({"busy_us": 2000, "sndbuf_limited_us": 1500});
        assert!((sndbuf_share(&v) - 0.75).abs() < 1e-12);
        // an older truth without the fields, or no busy time
        assert_eq!(sndbuf_share(&serde_json::json!({"bytes": 5})), 0.0);
        assert_eq!(
            sndbuf_share(&serde_json::json!({"busy_us": 0, "sndbuf_limited_us": 9})),
            0.0
        );
        assert_eq!(sndbuf_share(&serde_json::Value::Null), 0.0);
    }

    #[test]
    fn the_sender_share_counts_time_in_flight_below_both_windows() {
        let sample = |t_ms: i64, cwnd: u32, snd_wnd: u32, inflight: u32| crate::truth::Sample {
            t_ns: t_ms * 1_000_000,
            cwnd,
            ssthresh: 0,
            srtt_us: 10_000,
            snd_wnd,
            inflight,
        };
        let mss = 1000u32;
        let m = SENDER_MARGIN_SEGMENTS * mss;
        let c = Connection {
            mss,
            samples: vec![
                // 10 ms held: 20 segments of window, the flight 3 below it
                sample(0, 20, 100_000, 20 * mss - m),
                // 10 ms at the congestion window (2 segments below: its limit)
                sample(10, 20, 100_000, 20 * mss - m + 1),
                // 10 ms at the peer's window
                sample(20, 40, 10_000, 10_000 - m + 1),
                // 10 ms idle: not counted
                sample(30, 40, 100_000, 0),
                sample(40, 40, 100_000, 0),
            ],
            ..Default::default()
        };
        assert!(
            (sender_share(&c) - 1.0 / 3.0).abs() < 1e-9,
            "{}",
            sender_share(&c)
        );
    }

    #[test]
    fn bulk_sender_idle_allows_application_limited() {
        let mut f = clean();
        f.sender_idle_s = ALLOWED_IDLE_SHARE * f.life_s * 0.99;
        assert!(!label(&f).permits("application-limited"));
        f.sender_idle_s = ALLOWED_IDLE_SHARE * f.life_s;
        let l = label(&f);
        assert!(l.permits("application-limited") && l.required.is_empty());
    }

    #[test]
    fn sender_idle_from_the_senders_capture() {
        let snd: SocketAddrV4 = "10.1.1.2:5000".parse().unwrap();
        let pkt = |t_ms: i64, from_sender: bool, seq: u32, ack: u32, len: u32, flags: u8| {
            let (a, b) = ([10, 1, 1, 2], [10, 1, 2, 2]);
            Pkt {
                t_ns: t_ms * 1_000_000,
                src: if from_sender { a } else { b },
                dst: if from_sender { b } else { a },
                sport: if from_sender { 5000 } else { 80 },
                dport: if from_sender { 80 } else { 5000 },
                seq,
                ack,
                flags,
                win: 1000,
                len,
            }
        };
        let v = vec![
            pkt(0, true, 99, 0, 0, 0x02),      // SYN
            pkt(10, false, 0, 100, 0, 0x12),   // SYN-ACK
            pkt(10, true, 100, 1, 1000, 0x10), // data at once: no idle
            pkt(11, true, 1100, 1, 1000, 0x10),
            pkt(20, false, 1, 1100, 0, 0x10), // partial ACK: still in flight
            pkt(21, false, 1, 2100, 0, 0x10), // everything acknowledged
            pkt(71, true, 2100, 1, 1000, 0x10), // 50 ms idle
            pkt(72, true, 2100, 1, 1000, 0x10), // a retransmission ends nothing
            pkt(80, false, 1, 3100, 0, 0x10),
            pkt(90, true, 3100, 1, 0, 0x11), // FIN: the final wait does not count
        ];
        assert!((sender_idle_s(&v, snd) - 0.050).abs() < 1e-9);
        assert_eq!(sender_idle_s(&v[..6], snd), 0.0);
    }

    #[test]
    fn held_is_the_longest_payload_silence_of_the_connection_inside_the_window() {
        let srv: SocketAddrV4 = "10.1.2.2:445".parse().unwrap();
        let cli: SocketAddrV4 = "10.1.1.2:40000".parse().unwrap();
        let pkt = |t_ms: i64, to_srv: bool, len: u32, other: bool| {
            let (c, s) = (cli.ip().octets(), srv.ip().octets());
            let cport = if other { 40001 } else { 40000 };
            Pkt {
                t_ns: t_ms * 1_000_000,
                src: if to_srv { c } else { s },
                dst: if to_srv { s } else { c },
                sport: if to_srv { cport } else { 445 },
                dport: if to_srv { 445 } else { cport },
                seq: 0,
                ack: 0,
                flags: 0x10,
                win: 1000,
                len,
            }
        };
        let v = vec![
            pkt(0, true, 100, false),
            pkt(10, false, 1000, false),
            pkt(100, false, 0, false),    // a pure ACK is no payload
            pkt(200, true, 100, true),    // another connection's payload does not count
            pkt(400, false, 1000, false), // 390 ms silent
            pkt(410, true, 100, false),
        ];
        let ms = |x: f64| (x * 1e3).round() as i64;
        assert_eq!(ms(held_s(&v, cli, srv, (0, 1_000_000_000))), 390);
        // either order of the ends
        assert_eq!(ms(held_s(&v, srv, cli, (0, 1_000_000_000))), 390);
        // clipped to the window
        assert_eq!(ms(held_s(&v, cli, srv, (300_000_000, 1_000_000_000))), 100);
        assert_eq!(ms(held_s(&v, cli, srv, (0, 50_000_000))), 40);
        // a window after the last payload: nothing seen held in it
        assert_eq!(held_s(&v, cli, srv, (500_000_000, 900_000_000)), 0.0);
    }

    #[test]
    fn zero_windows_from_the_senders_capture() {
        let snd: SocketAddrV4 = "10.1.1.2:5000".parse().unwrap();
        let ack = |t_us: i64, win: u16, to_sender: bool, flags: u8| {
            let (a, b) = ([10, 1, 2, 2], [10, 1, 1, 2]);
            Pkt {
                t_ns: t_us * 1000,
                src: if to_sender { a } else { b },
                dst: if to_sender { b } else { a },
                sport: if to_sender { 80 } else { 5000 },
                dport: if to_sender { 5000 } else { 80 },
                seq: 1,
                ack: 1,
                flags,
                win,
                len: 0,
            }
        };
        let v = vec![
            ack(0, 0, true, 0x12),        // a SYN-ACK's window is not a zero window
            ack(500, 100, true, 0x10),    //
            ack(1_000, 0, true, 0x10),    // closed at 1 ms
            ack(1_050, 500, true, 0x10),  // open 50 us later
            ack(10_000, 0, true, 0x10),   // closed at 10 ms
            ack(10_100, 0, false, 0x10),  // the sender's own probe: not the peer's window
            ack(20_000, 0, true, 0x10),   // still closed
            ack(30_000, 800, true, 0x10), // open at 30 ms
            ack(40_000, 0, true, 0x14),   // a reset's window is none
            ack(50_000, 0, true, 0x10),   // closed to the end: not counted
        ];
        let us = |x: f64| (x * 1e6).round() as i64;
        assert_eq!(us(zero_window_held_s(&v, snd)), 50 + 20_000);
        assert_eq!(us(zero_window_held_s(&v[..4], snd)), 50);
        assert_eq!(zero_window_held_s(&v[..3], snd), 0.0);
    }

    #[test]
    fn the_zero_window_share_uses_the_captured_length_when_known() {
        let mut f = clean();
        f.zero_windows = 3;
        f.zero_window_s = REQUIRED_SHARE * f.life_s;
        assert_eq!(req_kinds(&label(&f)), vec!["receiver-window-limited"]);
        f.zero_window_held_s = Some(REQUIRED_SHARE * f.life_s * 0.99);
        let l = label(&f);
        assert!(l.required.is_empty() && l.permits("receiver-window-limited"));
        f.zero_window_held_s = Some(REQUIRED_SHARE * f.life_s);
        assert_eq!(req_kinds(&label(&f)), vec!["receiver-window-limited"]);
    }

    #[test]
    fn a_stall_counts_over_the_exchange_both_ways() {
        use crate::truth::{Episodes, Sample, Stall};
        let mut sc = super::super::generate(1);
        sc.workload = Workload::Storage {
            op: crate::scenario::StorageOp::Smb3Read,
            mib: 1,
            short_mib: 1,
            queue_depth: None,
            server_cc: "reno".into(),
            server_stall_ms: 500,
            server_duty_ms: None,
        };
        let s = |t_ms: i64| Sample {
            t_ns: t_ms * 1_000_000,
            cwnd: 10,
            ssthresh: 10,
            srtt_us: 1000,
            snd_wnd: 1 << 20,
            inflight: 0,
        };
        let stall = Stall {
            start_ns: 50_000_000,
            end_ns: 550_000_000,
        };
        let mut t = Truth::default();
        // the server's data starts after the stall; the client's request came before it
        t.connections.push(Connection {
            sender: "10.1.2.2:445".into(),
            receiver: "10.1.1.2:40000".into(),
            bytes_sent: 1 << 20,
            samples: vec![s(560), s(900)],
            episodes: Episodes {
                stalls: vec![stall.clone()],
                ..Default::default()
            },
            ..Default::default()
        });
        t.connections.push(Connection {
            sender: "10.1.1.2:40000".into(),
            receiver: "10.1.2.2:445".into(),
            bytes_sent: 200,
            samples: vec![s(10), s(950)],
            ..Default::default()
        });
        let f = facts(&sc, &t);
        assert_eq!(f.stall_window, Some((50_000_000, 550_000_000)));
        assert!((f.stall_s - 0.5).abs() < 1e-9);
        // without the peer's samples the stall is before the exchange
        t.connections.pop();
        let f = facts(&sc, &t);
        assert_eq!((f.stall_s, f.stall_window), (0.0, None));
    }

    #[test]
    fn nagle_turns_from_the_clients_latencies() {
        let mut sc = super::super::generate(1);
        sc.workload = Workload::ReqResp {
            transactions: 4,
            parts: 2,
            req_bytes: 100,
            resp_bytes: 100,
            nodelay: false,
            cc: "reno".into(),
        };
        sc.relay.as_mut().unwrap().delay_ms = 5.0;
        // RTT 10 ms: 30 ms is exactly RTT + 20 ms, 29.9 ms is not
        let t = Truth {
            workload: serde_json::json!({"client": {"secs": 1.0, "latencies_ms": [10.0, 29.9, 30.0, 60.0]}}),
            ..Default::default()
        };
        let f = facts(&sc, &t);
        assert_eq!(f.family, "reqresp");
        assert_eq!(f.nagle_stalls, 2);
        assert!((f.nagle_s - 0.070).abs() < 1e-9);
        assert_eq!(f.reqresp_s, 1.0);
        assert!(!f.nodelay);
    }

    #[test]
    fn facts_from_a_truth() {
        use crate::truth::{
            DelackPause, Episodes, InjectedEvent, Retransmission, RtoEpisode, Sample,
            SsthreshChange, StateInterval,
        };
        let sc = super::super::generate(3);
        let s = |t: i64, inflight: u32, wnd: u32| Sample {
            t_ns: t,
            cwnd: 10,
            ssthresh: 20,
            srtt_us: 10_000,
            snd_wnd: wnd,
            inflight,
        };
        let cut = |from: u32, to: u32, after_spurious: bool| SsthreshChange {
            t_ns: 0,
            from,
            to,
            cwnd: 10,
            after_spurious,
        };
        let mut t = Truth::default();
        t.health.ok = true;
        let ev = |ev: &str| InjectedEvent {
            t_ns: 0,
            ev: ev.into(),
            n: 1,
            dir: "c2s".into(),
            sport: 1,
            dport: 2,
            seq: 0,
            len: 1448,
        };
        t.injected.drops = vec![ev("drop"), ev("drop_blackout")];
        t.injected.reorders = vec![ev("reorder")];
        t.connections.push(Connection {
            bytes_sent: 1000,
            mss: 1448,
            samples: vec![
                s(0, 1000, 100_000),
                s(500_000_000, 99_000, 100_000),
                s(1_000_000_000, 1000, 100_000),
                s(2_000_000_000, 1000, 100_000),
            ],
            retransmissions: vec![
                Retransmission {
                    t_ns: 1,
                    seq: Some(1),
                    segments: 2,
                    pcap_t_ns: None,
                    reordered_original: false,
                },
                Retransmission {
                    t_ns: 2,
                    seq: Some(5),
                    segments: 1,
                    pcap_t_ns: None,
                    reordered_original: true,
                },
            ],
            cong_states: vec![StateInterval {
                state: "Loss".into(),
                start_ns: 1_200_000_000,
                end_ns: 1_500_000_000,
            }],
            episodes: Episodes {
                delack_pauses: vec![
                    DelackPause {
                        start_ns: 0,
                        end_ns: 60_000_000,
                        length_ns: 60_000_000,
                        excess_ns: 50_000_000,
                        inflight_segments: 1,
                    },
                    DelackPause {
                        start_ns: 0,
                        end_ns: 270_000_000,
                        length_ns: 270_000_000,
                        excess_ns: MAX_DELACK_EXCESS_NS + 1,
                        inflight_segments: 1,
                    },
                ],
                rtos: vec![RtoEpisode {
                    start_ns: 1_200_000_000,
                    end_ns: 1_500_000_000,
                    first_ack_ns: None,
                    cwnd_at_ack: None,
                }],
                // three cuts after spurious retransmissions: the first undone, the second
                // only partly restored, the third last (and a cut after a real loss)
                ssthresh_changes: vec![
                    cut(u32::MAX >> 1, 80, true),
                    cut(80, u32::MAX >> 1, false),
                    cut(u32::MAX >> 1, 60, true),
                    cut(60, 70, false),
                    cut(70, 50, false),
                    cut(50, 40, true),
                ],
                ..Default::default()
            },
            ..Default::default()
        });
        // The sender got one D-SACK back; the receiver sent two (data that came twice).
        let nstat = |k: &str, v: u64| [(k.to_string(), v)].into_iter().collect();
        t.counters.nstat = [
            ("client".into(), nstat("TcpExtTCPDSACKRecv", 1)),
            ("server".into(), nstat("TcpExtTCPDSACKOldSent", 2)),
        ]
        .into_iter()
        .collect();
        let f = facts(&sc, &t);
        assert_eq!(f.dsacks, 3);
        assert_eq!(f.life_s, 2.0);
        assert_eq!(f.net_drops, 2);
        assert_eq!((f.retx_segments, f.spurious_retx), (2, 1));
        assert_eq!((f.spurious_cuts, f.spurious_cuts_undone), (3, 1));
        assert_eq!(f.rtos, 1);
        // the pause held beyond Linux's delayed-ACK cap is not one
        assert_eq!(f.delack_pauses, 1);
        assert!((f.delack_s - 0.060).abs() < 1e-9);
        // last ACK before the RTO at 1.0 s, RTO at 1.2 s
        assert!((f.rto_stall_s - 0.2).abs() < 1e-9);
        assert!((f.recovery_s - 0.3).abs() < 1e-9);
        assert_eq!(f.rwnd_share, 0.25);
        assert_eq!(f.reorders_injected, 1);
        assert!(!f.capture_or_health_problem);
    }
}
