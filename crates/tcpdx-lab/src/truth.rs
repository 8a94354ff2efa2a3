//! `truth.json`: the kernel's ground truth of one run, reduced from the tracefs events,
//! the relay's event log and the counters, in the pcap clock (CLOCK_REALTIME ns).
//! The schema is documented in lab/README.md ("truth.json schema").

use crate::capture::{CaptureStats, Pkt};
use crate::relay::RelayStats;
use crate::trace::{TraceEvent, TraceStats};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::net::SocketAddrV4;

/// Schema identifier written into every truth.json.
pub const SCHEMA: &str = "tcpdx-lab-truth/1";
/// Cap on cwnd samples kept per endpoint.
pub const MAX_SAMPLES: usize = 4000;

/// The whole file.
#[derive(Debug, Clone, Serialize, Deserialize, Default)]
pub struct Truth {
    /// Always [`SCHEMA`].
    pub schema: String,
    /// Scenario name.
    pub scenario: String,
    /// Whether the run was shortened (`--short`).
    pub short: bool,
    /// The recipe as run (scenario parameters, JSON).
    pub params: serde_json::Value,
    /// Clock alignment.
    pub clock: ClockInfo,
    /// Lab addresses.
    pub topology: TopoInfo,
    /// Files of the run (relative to truth.json).
    pub files: Files,
    /// Workload result lines.
    pub workload: serde_json::Value,
    /// Counters.
    pub counters: Counters,
    /// Unintended-drop accounting.
    pub health: Health,
    /// Per TCP connection truth.
    pub connections: Vec<Connection>,
    /// Injected impairment events (relay log), all connections.
    pub injected: Injected,
}

/// How trace timestamps were aligned with pcap timestamps.
#[derive(Debug, Clone, Serialize, Deserialize, Default)]
pub struct ClockInfo {
    /// tracefs clock used ("tai").
    pub trace_clock: String,
    /// CLOCK_TAI - CLOCK_REALTIME at the start of the run (ns); subtracted from trace times.
    pub tai_minus_realtime_ns: i64,
    /// All times in this file are CLOCK_REALTIME ns (the pcap clock).
    pub time_base: String,
}

/// Addresses of the run's lab.
#[derive(Debug, Clone, Serialize, Deserialize, Default)]
pub struct TopoInfo {
    /// Client address.
    pub client: String,
    /// Server address.
    pub server: String,
    /// Link MTU.
    pub mtu: u32,
    /// Lab prefix (names of namespaces/devices).
    pub prefix: String,
}

/// One capture file.
#[derive(Debug, Clone, Serialize, Deserialize, Default)]
pub struct CaptureFile {
    /// File name.
    pub file: String,
    /// Capture point (client, server, router_s, router_c).
    pub point: String,
    /// Whether this is the scenario's primary capture.
    pub primary: bool,
    /// Snapshot length.
    pub snaplen: u32,
    /// tcpdump counters.
    pub stats: CaptureStats,
}

/// Files of the run.
#[derive(Debug, Clone, Serialize, Deserialize, Default)]
pub struct Files {
    /// Captures.
    pub captures: Vec<CaptureFile>,
    /// Relay JSONL log, if a relay ran.
    pub relay_log: Option<String>,
    /// Raw tracefs text, if kept.
    pub trace: Option<String>,
}

/// Counters collected around the run.
#[derive(Debug, Clone, Serialize, Deserialize, Default)]
pub struct Counters {
    /// nstat deltas per namespace role ("client", "server").
    pub nstat: BTreeMap<String, BTreeMap<String, u64>>,
    /// tbf drops (intended).
    pub tbf_drops: Option<u64>,
    /// tbf packets sent.
    pub tbf_sent: Option<u64>,
    /// nft random-drop rule matches (intended).
    pub nft_drops: Option<u64>,
    /// Pure ACKs dropped by the nft ACK-loss rule (intended).
    #[serde(default)]
    pub ack_drops: Option<u64>,
    /// Relay counters.
    pub relay: Option<RelayStats>,
    /// Packets the kernel could not queue to the relay TUN (unintended).
    pub tun_tx_dropped: Option<u64>,
    /// Drops in the TUN's qdisc (unintended).
    pub tun_qdisc_drops: Option<u64>,
    /// Increase of /proc/net/softnet_stat "dropped" (backlog overflow, unintended).
    pub softnet_dropped: u64,
    /// Drops on the lab veth interfaces (rx/tx dropped, unintended).
    pub veth_dropped: u64,
    /// Ring-buffer health of the trace.
    pub trace: TraceStats,
}

/// Unintended-drop accounting; `ok` is false if anything was lost that the scenario did not inject.
#[derive(Debug, Clone, Serialize, Deserialize, Default)]
pub struct Health {
    /// True when no unintended drop and no capture/trace loss happened.
    pub ok: bool,
    /// Human-readable problems.
    pub problems: Vec<String>,
}

/// A retransmission by the kernel (one tcp_retransmit_skb event).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Retransmission {
    /// Time of the trace event (realtime ns).
    pub t_ns: i64,
    /// First sequence number (absolute), from the matching sender-side capture packets.
    pub seq: Option<u32>,
    /// Segments sent by this skb (from the capture; an skb can carry several MSS).
    pub segments: u32,
    /// Capture time of the first matching packet (realtime ns).
    pub pcap_t_ns: Option<i64>,
    /// The retransmitted data had been held back (reordered) by the relay: spurious.
    pub reordered_original: bool,
}

/// A congestion-state interval.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct StateInterval {
    /// Open, Disorder, CWR, Recovery or Loss.
    pub state: String,
    /// Start (realtime ns).
    pub start_ns: i64,
    /// End (realtime ns; the next state change or the last event).
    pub end_ns: i64,
}

/// A decimated tcp_probe sample at the data sender (state before the ACK is processed).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Sample {
    /// Time (realtime ns).
    pub t_ns: i64,
    /// cwnd (segments).
    pub cwnd: u32,
    /// ssthresh (segments; 2147483647 = initial).
    pub ssthresh: u32,
    /// Smoothed RTT (µs).
    pub srtt_us: u32,
    /// Peer's advertised window (bytes).
    pub snd_wnd: u32,
    /// Bytes in flight (snd_nxt - snd_una).
    pub inflight: u32,
}

/// An RTO episode (entry into the Loss state).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RtoEpisode {
    /// Entry into Loss (realtime ns).
    pub start_ns: i64,
    /// Back to Open (or end of trace).
    pub end_ns: i64,
    /// First ACK that advanced snd_una after the RTO retransmission.
    pub first_ack_ns: Option<i64>,
    /// cwnd (segments) when that ACK arrived, before processing it (1: a lone segment).
    pub cwnd_at_ack: Option<u32>,
}

/// Delayed-ACK pause: a lone segment in flight whose ACK came much later than one RTT.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct DelackPause {
    /// Send time of the lone segment (the RTO retransmission).
    pub start_ns: i64,
    /// Arrival of its ACK at the sender.
    pub end_ns: i64,
    /// end - start (ns).
    pub length_ns: i64,
    /// length minus the path RTT (ns): the receiver's hold time.
    pub excess_ns: i64,
    /// Segments the sender could have in flight (its cwnd; 1 for the pattern).
    pub inflight_segments: u32,
}

/// A loss-recovery episode with several retransmitted segments.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct BurstLoss {
    /// Entry into Recovery/Loss.
    pub start_ns: i64,
    /// Back to Open.
    pub end_ns: i64,
    /// Retransmitted segments in the episode (spurious ones of reordered data excluded).
    pub retransmitted_segments: u32,
    /// Recovery or Loss.
    pub state: String,
}

/// Congestion-avoidance growth between two loss episodes.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CaGrowth {
    /// Start (realtime ns).
    pub start_ns: i64,
    /// End.
    pub end_ns: i64,
    /// cwnd at the start.
    pub cwnd_start: u32,
    /// cwnd at the end.
    pub cwnd_end: u32,
    /// Round trips elapsed (by srtt).
    pub rtts: f64,
    /// Growth rate (Reno: ~1).
    pub segments_per_rtt: f64,
}

/// Interval during which the sender saw a zero receive window.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ZeroWindow {
    /// First probe with snd_wnd == 0.
    pub start_ns: i64,
    /// First probe with a window again.
    pub end_ns: i64,
}

/// Expected pathology episodes, derived from kernel state.
#[derive(Debug, Clone, Serialize, Deserialize, Default, PartialEq)]
pub struct Episodes {
    /// RTOs.
    pub rtos: Vec<RtoEpisode>,
    /// Delayed-ACK pauses after a lone segment.
    pub delack_pauses: Vec<DelackPause>,
    /// Burst-loss episodes (>= 3 segments retransmitted in one recovery).
    pub burst_losses: Vec<BurstLoss>,
    /// Congestion-avoidance growth phases (>= 4 RTTs).
    pub ca_growth: Vec<CaGrowth>,
    /// Zero-window intervals.
    pub zero_windows: Vec<ZeroWindow>,
    /// Server stalls (storage scenarios: SIGSTOP .. SIGCONT).
    pub stalls: Vec<Stall>,
    /// Every change of ssthresh at the sender (window cuts and undos).
    #[serde(default)]
    pub ssthresh_changes: Vec<SsthreshChange>,
}

/// A change of the sender's ssthresh (first probe showing the new value).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SsthreshChange {
    /// Time of the first sample with the new value.
    pub t_ns: i64,
    /// Previous ssthresh (2147483647 = initial).
    pub from: u32,
    /// New ssthresh.
    pub to: u32,
    /// cwnd in that sample.
    pub cwnd: u32,
    /// A retransmission of a segment the relay had reordered (spurious) happened within
    /// the preceding 2 RTTs: the cut was caused by reordering, not loss.
    pub after_spurious: bool,
}

/// A server stall injected by the lab.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Stall {
    /// SIGSTOP time.
    pub start_ns: i64,
    /// SIGCONT time.
    pub end_ns: i64,
}

/// One TCP connection as seen by the kernel at its data sender.
#[derive(Debug, Clone, Serialize, Deserialize, Default)]
pub struct Connection {
    /// Data sender address:port.
    pub sender: String,
    /// Data receiver address:port.
    pub receiver: String,
    /// Payload bytes the sender's capture shows sent (including retransmissions).
    pub bytes_sent: u64,
    /// MSS used for segment counts.
    pub mss: u32,
    /// Kernel retransmissions.
    pub retransmissions: Vec<Retransmission>,
    /// Sum of retransmitted segments.
    pub retransmitted_segments: u32,
    /// tcp_retransmit_skb events with a non-zero error (nothing sent; not in `retransmissions`).
    pub failed_retransmit_attempts: u32,
    /// Congestion-state intervals of the sender.
    pub cong_states: Vec<StateInterval>,
    /// Decimated cwnd/ssthresh/srtt samples at the sender.
    pub samples: Vec<Sample>,
    /// Samples before decimation.
    pub samples_total: usize,
    /// Minimum srtt seen (µs): path RTT estimate.
    pub min_srtt_us: u32,
    /// Expected pathology episodes.
    pub episodes: Episodes,
}

/// Injected impairment events.
#[derive(Debug, Clone, Serialize, Deserialize, Default, PartialEq)]
pub struct Injected {
    /// Dropped data segments (drop, drop_rtx, drop_blackout).
    pub drops: Vec<InjectedEvent>,
    /// Reordered data segments.
    pub reorders: Vec<InjectedEvent>,
    /// Blackout starts.
    pub blackouts: Vec<InjectedEvent>,
}

/// One relay log line.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct InjectedEvent {
    /// Realtime ns.
    pub t_ns: i64,
    /// drop, drop_rtx, drop_blackout, blackout_start, reorder.
    pub ev: String,
    /// Data segment index at the relay.
    pub n: u64,
    /// c2s (sent by the client) or s2c (sent by the server).
    pub dir: String,
    /// Source port.
    pub sport: u16,
    /// Destination port.
    pub dport: u16,
    /// Sequence number.
    pub seq: u32,
    /// Payload length.
    pub len: u32,
}

/// Parses the relay's JSONL log.
pub fn parse_relay_log(text: &str) -> Injected {
    let mut inj = Injected::default();
    for e in text
        .lines()
        .filter_map(|l| serde_json::from_str::<InjectedEvent>(l).ok())
    {
        match e.ev.as_str() {
            "reorder" => inj.reorders.push(e),
            "blackout_start" => inj.blackouts.push(e),
            _ => inj.drops.push(e),
        }
    }
    inj
}

/// Name of a congestion state number.
pub fn state_name(s: u8) -> &'static str {
    match s {
        0 => "Open",
        1 => "Disorder",
        2 => "CWR",
        3 => "Recovery",
        4 => "Loss",
        _ => "?",
    }
}

fn seq_lt(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) < 0
}

/// Retransmitted packets in a sender-side capture: data whose end does not exceed
/// the highest sequence sent before. Returns (index, packet).
pub fn capture_retransmissions(pkts: &[Pkt], sender: SocketAddrV4) -> Vec<Pkt> {
    let mut out = Vec::new();
    let mut high: Option<u32> = None;
    for p in pkts
        .iter()
        .filter(|p| p.src == sender.ip().octets() && p.sport == sender.port())
    {
        if p.len == 0 {
            if p.syn() {
                high = Some(p.seq.wrapping_add(1));
            }
            continue;
        }
        let end = p.seq.wrapping_add(p.len);
        match high {
            Some(h) if !seq_lt(h, end) => out.push(*p),
            Some(h) if seq_lt(p.seq, h) => out.push(*p), // partial overlap
            _ => {}
        }
        if high.is_none_or(|h| seq_lt(h, end)) {
            high = Some(end);
        }
    }
    out
}

/// Matches kernel retransmission times with capture retransmissions. The tap sees a
/// retransmitted packet just before tcp_retransmit_skb fires (the event follows the
/// transmit), so each capture packet belongs to the first event at or after its time
/// (trace times are truncated to whole µs, so an event printed at t happened in
/// [t, t + 1 µs)), if that event is within `tol_ns`. One event can own several
/// packets: one skb can carry several MSS.
pub fn match_retransmissions(trace_t: &[i64], cap: &[Pkt], tol_ns: i64) -> Vec<Retransmission> {
    const RES_NS: i64 = 1_000;
    let mut owned: Vec<Vec<usize>> = vec![Vec::new(); trace_t.len()];
    let mut k = 0;
    for (i, p) in cap.iter().enumerate() {
        while k < trace_t.len() && trace_t[k] + RES_NS <= p.t_ns {
            k += 1;
        }
        if k == trace_t.len() {
            break;
        }
        if trace_t[k] - p.t_ns > tol_ns {
            continue;
        }
        owned[k].push(i);
    }
    // A packet stamped within the same µs as an event may belong to the next event:
    // if that one got nothing, it takes the previous event's last packet.
    for k in 1..trace_t.len() {
        if owned[k].is_empty() && owned[k - 1].len() >= 2 {
            let last = *owned[k - 1].last().expect("non-empty");
            if cap[last].t_ns < trace_t[k] + RES_NS {
                owned[k - 1].pop();
                owned[k].push(last);
            }
        }
    }
    trace_t
        .iter()
        .zip(owned)
        .map(|(&t, v)| Retransmission {
            t_ns: t,
            seq: v.first().map(|&i| cap[i].seq),
            segments: v.len() as u32,
            pcap_t_ns: v.first().map(|&i| cap[i].t_ns),
            reordered_original: false,
        })
        .collect()
}

/// Inputs of the reduction for one connection.
pub struct ConnInput<'a> {
    /// Data sender (local address of the sending socket).
    pub sender: SocketAddrV4,
    /// Data receiver.
    pub receiver: SocketAddrV4,
    /// All trace events, realtime-aligned and sorted.
    pub events: &'a [TraceEvent],
    /// Sender-side capture packets (for sequence numbers), if any.
    pub sender_pcap: &'a [Pkt],
    /// Relay events (for spurious marking).
    pub injected: &'a Injected,
    /// MSS for segment counts.
    pub mss: u32,
}

/// Reduces trace events of one connection to its truth.
pub fn reduce_connection(inp: &ConnInput) -> Connection {
    let (snd, rcv) = (inp.sender, inp.receiver);
    let mine = |e: &&TraceEvent| e.addrs() == (snd, rcv);
    let evs: Vec<&TraceEvent> = inp.events.iter().filter(mine).collect();
    let mut c = Connection {
        sender: snd.to_string(),
        receiver: rcv.to_string(),
        mss: inp.mss,
        ..Default::default()
    };
    let last_t = evs.last().map_or(0, |e| e.t_ns());

    // retransmissions
    let rtx_t: Vec<i64> = evs
        .iter()
        .filter(|e| matches!(e, TraceEvent::Retransmit { err: 0, .. }))
        .map(|e| e.t_ns())
        .collect();
    c.failed_retransmit_attempts = evs
        .iter()
        .filter(|e| matches!(e, TraceEvent::Retransmit { err, .. } if *err != 0))
        .count() as u32;
    let cap_rtx = capture_retransmissions(inp.sender_pcap, snd);
    c.retransmissions = match_retransmissions(&rtx_t, &cap_rtx, 5_000_000);
    for r in &mut c.retransmissions {
        if let Some(seq) = r.seq {
            r.reordered_original = inp
                .injected
                .reorders
                .iter()
                .any(|e| e.seq == seq && e.sport == snd.port() && e.t_ns <= r.t_ns);
        }
        if r.seq.is_none() {
            r.segments = 1;
        }
    }
    c.retransmitted_segments = c.retransmissions.iter().map(|r| r.segments).sum();
    c.bytes_sent = inp
        .sender_pcap
        .iter()
        .filter(|p| p.src == snd.ip().octets() && p.sport == snd.port())
        .map(|p| u64::from(p.len))
        .sum();

    // congestion states
    let mut cur: Option<(u8, i64)> = None;
    for e in &evs {
        if let TraceEvent::CongState { t_ns, state, .. } = e {
            if let Some((s, t0)) = cur {
                c.cong_states.push(StateInterval {
                    state: state_name(s).into(),
                    start_ns: t0,
                    end_ns: *t_ns,
                });
            }
            cur = Some((*state, *t_ns));
        }
    }
    if let Some((s, t0)) = cur {
        c.cong_states.push(StateInterval {
            state: state_name(s).into(),
            start_ns: t0,
            end_ns: last_t.max(t0),
        });
    }

    // samples (ACKs arriving at the sender)
    let probes: Vec<Sample> = evs
        .iter()
        .filter_map(|e| match e {
            TraceEvent::Probe {
                t_ns,
                data_len: 0,
                snd_nxt,
                snd_una,
                cwnd,
                ssthresh,
                snd_wnd,
                srtt_us,
                ..
            } => Some(Sample {
                t_ns: *t_ns,
                cwnd: *cwnd,
                ssthresh: *ssthresh,
                srtt_us: *srtt_us,
                snd_wnd: *snd_wnd,
                inflight: snd_nxt.wrapping_sub(*snd_una),
            }),
            _ => None,
        })
        .collect();
    c.samples_total = probes.len();
    c.min_srtt_us = probes
        .iter()
        .map(|p| p.srtt_us)
        .filter(|&s| s > 0)
        .min()
        .unwrap_or(0);
    c.episodes = episodes(&c, &probes, &evs);
    c.samples = decimate(&probes, MAX_SAMPLES);
    c
}

/// Keeps samples where cwnd or ssthresh changed plus a time-spread subset, at most `max`.
pub fn decimate(s: &[Sample], max: usize) -> Vec<Sample> {
    if s.len() <= max {
        return s.to_vec();
    }
    let mut keep: Vec<Sample> = Vec::with_capacity(max);
    let mut last: Option<&Sample> = None;
    for x in s {
        if last.is_none_or(|l| l.cwnd != x.cwnd || l.ssthresh != x.ssthresh || x.snd_wnd == 0) {
            keep.push(x.clone());
            last = Some(x);
        }
    }
    if keep.len() > max {
        let stride = keep.len().div_ceil(max);
        keep = keep.into_iter().step_by(stride).collect();
    }
    keep
}

fn episodes(c: &Connection, probes: &[Sample], evs: &[&TraceEvent]) -> Episodes {
    let mut ep = Episodes::default();
    let rtt_ns = i64::from(c.min_srtt_us) * 1000;
    // loss episodes: from entering Recovery/Loss until back to Open
    let mut losses: Vec<BurstLoss> = Vec::new();
    let mut i = 0;
    let st = &c.cong_states;
    while i < st.len() {
        let s = &st[i];
        if s.state == "Recovery" || s.state == "Loss" {
            let start = s.start_ns;
            let mut j = i;
            let mut had_loss = false;
            while j < st.len() && st[j].state != "Open" {
                had_loss |= st[j].state == "Loss";
                j += 1;
            }
            let end = st.get(j).map_or(st[st.len() - 1].end_ns, |x| x.start_ns);
            let segs: u32 = c
                .retransmissions
                .iter()
                .filter(|r| r.t_ns >= start && r.t_ns <= end && !r.reordered_original)
                .map(|r| r.segments)
                .sum();
            losses.push(BurstLoss {
                start_ns: start,
                end_ns: end,
                retransmitted_segments: segs,
                state: if had_loss {
                    "Loss".into()
                } else {
                    "Recovery".into()
                },
            });
            i = j.max(i + 1);
        } else {
            i += 1;
        }
    }
    ep.burst_losses = losses
        .iter()
        .filter(|b| b.retransmitted_segments >= 3)
        .cloned()
        .collect();
    // RTOs: every entry into Loss
    for s in st.iter().filter(|s| s.state == "Loss") {
        let rtx = c
            .retransmissions
            .iter()
            .find(|r| r.t_ns >= s.start_ns)
            .map_or(s.start_ns, |r| r.t_ns);
        let end = st
            .iter()
            .find(|x| x.start_ns > s.start_ns && x.state == "Open")
            .map_or(s.end_ns, |x| x.start_ns);
        // first probe after the retransmission whose ACK advances snd_una
        let una: Vec<(i64, u32, u32)> = evs
            .iter()
            .filter_map(|e| match e {
                TraceEvent::Probe {
                    t_ns,
                    data_len: 0,
                    snd_una,
                    cwnd,
                    ..
                } => Some((*t_ns, *snd_una, *cwnd)),
                _ => None,
            })
            .collect();
        // (time, cwnd before processing) of the first ACK that advances snd_una
        let mut first_ack = una
            .windows(2)
            .find(|w| w[0].0 > rtx && w[1].1 != w[0].1)
            .map(|w| (w[0].0, w[0].2));
        // fallback: the last probe of the run acknowledged it
        if first_ack.is_none() {
            first_ack = probes
                .iter()
                .find(|p| p.t_ns > rtx)
                .map(|p| (p.t_ns, p.cwnd));
        }
        ep.rtos.push(RtoEpisode {
            start_ns: s.start_ns,
            end_ns: end,
            first_ack_ns: first_ack.map(|a| a.0),
            cwnd_at_ack: first_ack.map(|a| a.1),
        });
        if let Some((t_ack, cwnd)) = first_ack {
            // after an RTO, cwnd 1 means the retransmission is the only segment in flight
            // (snd_nxt - snd_una is useless here: Linux does not rewind snd_nxt)
            let segs = cwnd;
            let length = t_ack - rtx;
            let excess = length - rtt_ns;
            if segs <= 1 && excess >= 20_000_000 && rtt_ns > 0 {
                ep.delack_pauses.push(DelackPause {
                    start_ns: rtx,
                    end_ns: t_ack,
                    length_ns: length,
                    excess_ns: excess,
                    inflight_segments: segs,
                });
            }
        }
    }
    // congestion-avoidance growth between loss episodes
    let boundaries: Vec<(i64, i64)> = losses.iter().map(|b| (b.start_ns, b.end_ns)).collect();
    let mut phases: Vec<(i64, i64)> = Vec::new();
    for (k, b) in boundaries.iter().enumerate() {
        let next = boundaries.get(k + 1).map_or(i64::MAX, |n| n.0);
        phases.push((b.1, next));
    }
    for (a, b) in phases {
        let ca: Vec<&Sample> = probes
            .iter()
            .filter(|p| p.t_ns > a && p.t_ns < b && p.cwnd >= p.ssthresh && p.ssthresh < 1 << 30)
            .collect();
        let (Some(f), Some(l)) = (ca.first(), ca.last()) else {
            continue;
        };
        let srtt = ca.iter().map(|p| f64::from(p.srtt_us)).sum::<f64>() / ca.len() as f64 * 1000.0;
        let rtts = (l.t_ns - f.t_ns) as f64 / srtt.max(1.0);
        if rtts >= 4.0 {
            ep.ca_growth.push(CaGrowth {
                start_ns: f.t_ns,
                end_ns: l.t_ns,
                cwnd_start: f.cwnd,
                cwnd_end: l.cwnd,
                rtts,
                segments_per_rtt: (f64::from(l.cwnd) - f64::from(f.cwnd)) / rtts,
            });
        }
    }
    // ssthresh changes (window cuts, undos)
    let spurious: Vec<i64> = c
        .retransmissions
        .iter()
        .filter(|r| r.reordered_original)
        .map(|r| r.t_ns)
        .collect();
    for w in probes.windows(2) {
        if w[1].ssthresh != w[0].ssthresh {
            let t = w[1].t_ns;
            ep.ssthresh_changes.push(SsthreshChange {
                t_ns: t,
                from: w[0].ssthresh,
                to: w[1].ssthresh,
                cwnd: w[1].cwnd,
                after_spurious: spurious
                    .iter()
                    .any(|&s| s <= t && t - s <= 2 * rtt_ns.max(1_000_000)),
            });
        }
    }
    // zero window
    let mut zw: Option<i64> = None;
    for p in probes {
        match (zw, p.snd_wnd == 0) {
            (None, true) => zw = Some(p.t_ns),
            (Some(s), false) => {
                ep.zero_windows.push(ZeroWindow {
                    start_ns: s,
                    end_ns: p.t_ns,
                });
                zw = None;
            }
            _ => {}
        }
    }
    ep
}

/// Converts trace times from TAI to realtime.
pub fn align(events: &mut [TraceEvent], tai_minus_realtime_ns: i64) {
    for e in events {
        let t = match e {
            TraceEvent::Probe { t_ns, .. }
            | TraceEvent::CongState { t_ns, .. }
            | TraceEvent::Retransmit { t_ns, .. }
            | TraceEvent::Reset { t_ns, .. } => t_ns,
        };
        *t -= tai_minus_realtime_ns;
    }
}

/// Finds connections (sender, receiver) among trace events: sockets that received ACKs
/// while having data in flight or retransmitted.
pub fn find_senders(events: &[TraceEvent]) -> Vec<(SocketAddrV4, SocketAddrV4)> {
    let mut acked: BTreeMap<(SocketAddrV4, SocketAddrV4), u64> = BTreeMap::new();
    for e in events {
        match e {
            TraceEvent::Probe {
                src,
                dst,
                data_len: 0,
                snd_nxt,
                snd_una,
                ..
            } => {
                *acked.entry((*src, *dst)).or_default() +=
                    u64::from(snd_nxt.wrapping_sub(*snd_una) > 0);
            }
            TraceEvent::Retransmit { src, dst, .. } => *acked.entry((*src, *dst)).or_default() += 1,
            _ => {}
        }
    }
    acked
        .into_iter()
        .filter(|(_, n)| *n > 0)
        .map(|(k, _)| k)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sa(s: &str) -> SocketAddrV4 {
        s.parse().unwrap()
    }
    const S: &str = "10.1.1.2:40000";
    const R: &str = "10.1.2.2:15301";

    fn probe(t: i64, una: u32, nxt: u32, cwnd: u32, ssthresh: u32, wnd: u32) -> TraceEvent {
        TraceEvent::Probe {
            t_ns: t,
            src: sa(S),
            dst: sa(R),
            data_len: 0,
            snd_nxt: nxt,
            snd_una: una,
            cwnd,
            ssthresh,
            snd_wnd: wnd,
            srtt_us: 20_000,
        }
    }
    fn cs(t: i64, s: u8) -> TraceEvent {
        TraceEvent::CongState {
            t_ns: t,
            src: sa(S),
            dst: sa(R),
            state: s,
        }
    }
    fn rtx(t: i64) -> TraceEvent {
        TraceEvent::Retransmit {
            t_ns: t,
            src: sa(S),
            dst: sa(R),
            err: 0,
        }
    }
    fn data(t: i64, seq: u32, len: u32) -> Pkt {
        Pkt {
            t_ns: t,
            src: [10, 1, 1, 2],
            dst: [10, 1, 2, 2],
            sport: 40000,
            dport: 15301,
            seq,
            ack: 0,
            flags: 0x10,
            win: 0,
            len,
        }
    }

    fn reduce(evs: &[TraceEvent], pcap: &[Pkt]) -> Connection {
        let inj = Injected::default();
        reduce_connection(&ConnInput {
            sender: sa(S),
            receiver: sa(R),
            events: evs,
            sender_pcap: pcap,
            injected: &inj,
            mss: 1000,
        })
    }

    #[test]
    fn rto_then_delayed_ack_pause() {
        let ms = 1_000_000;
        let evs = vec![
            probe(0, 0, 10_000, 10, u32::MAX >> 1, 65535),
            cs(300 * ms, 4),
            rtx(300 * ms + 10),
            probe(362 * ms, 0, 1000, 1, 5, 65535),
            probe(363 * ms, 1000, 3000, 2, 5, 65535),
            cs(400 * ms, 0),
        ];
        let pcap = vec![
            data(1, 0, 1000),
            data(2, 1000, 1000),
            data(300 * ms + 5, 0, 1000),
        ];
        let c = reduce(&evs, &pcap);
        assert_eq!(c.retransmissions.len(), 1);
        assert_eq!(c.retransmissions[0].seq, Some(0));
        assert_eq!(c.episodes.rtos.len(), 1);
        assert_eq!(c.episodes.delack_pauses.len(), 1);
        let p = &c.episodes.delack_pauses[0];
        assert_eq!(p.length_ns, 62 * ms - 10);
        assert_eq!(p.excess_ns, 42 * ms - 10);
        assert_eq!(
            c.cong_states
                .iter()
                .map(|s| s.state.as_str())
                .collect::<Vec<_>>(),
            ["Loss", "Open"]
        );
    }

    #[test]
    fn quick_ack_is_no_pause() {
        let ms = 1_000_000;
        let evs = vec![
            probe(0, 0, 10_000, 10, 99, 65535),
            cs(300 * ms, 4),
            rtx(300 * ms),
            probe(321 * ms, 0, 1000, 1, 5, 65535),
            probe(322 * ms, 1000, 1000, 2, 5, 65535),
        ];
        let c = reduce(&evs, &[]);
        assert_eq!(c.episodes.rtos.len(), 1);
        assert!(c.episodes.delack_pauses.is_empty());
    }

    #[test]
    fn burst_loss_and_additive_increase() {
        let ms = 1_000_000;
        let mut evs = vec![cs(10 * ms, 3)];
        for k in 0..5 {
            evs.push(rtx(11 * ms + k));
        }
        evs.push(cs(40 * ms, 0));
        // CA: cwnd 50 -> 60 over 10 RTTs of 20 ms
        for k in 0..=100 {
            evs.push(probe(
                41 * ms + k * 2 * ms,
                0,
                1,
                50 + (k / 10) as u32,
                50,
                65535,
            ));
        }
        evs.push(cs(300 * ms, 3));
        for k in 0..3 {
            evs.push(rtx(301 * ms + k));
        }
        evs.push(cs(330 * ms, 0));
        let c = reduce(&evs, &[]);
        assert_eq!(c.episodes.burst_losses.len(), 2);
        assert_eq!(c.episodes.burst_losses[0].retransmitted_segments, 5);
        let g = &c.episodes.ca_growth[0];
        assert!((g.segments_per_rtt - 1.0).abs() < 0.05, "{g:?}");
    }

    #[test]
    fn ssthresh_cut_after_spurious_retransmission() {
        let ms = 1_000_000;
        let evs = vec![
            probe(0, 0, 1, 40, u32::MAX >> 1, 65535),
            rtx(10 * ms),
            probe(15 * ms, 0, 1, 20, 20, 65535),
        ];
        let pcap = vec![
            data(1, 0, 1000),
            data(2, 1000, 1000),
            data(10 * ms - 1000, 0, 1000),
        ];
        let inj = Injected {
            reorders: vec![InjectedEvent {
                t_ns: 1,
                ev: "reorder".into(),
                n: 1,
                dir: "c2s".into(),
                sport: 40000,
                dport: 15301,
                seq: 0,
                len: 1000,
            }],
            ..Default::default()
        };
        let c = reduce_connection(&ConnInput {
            sender: sa(S),
            receiver: sa(R),
            events: &evs,
            sender_pcap: &pcap,
            injected: &inj,
            mss: 1000,
        });
        assert!(c.retransmissions[0].reordered_original);
        let ch = &c.episodes.ssthresh_changes;
        assert_eq!(ch.len(), 1);
        assert_eq!((ch[0].to, ch[0].after_spurious), (20, true));
    }

    #[test]
    fn zero_window_intervals() {
        let evs = vec![
            probe(1, 0, 1, 10, 5, 100),
            probe(2, 0, 1, 10, 5, 0),
            probe(3, 0, 1, 10, 5, 0),
            probe(9, 0, 1, 10, 5, 50),
        ];
        let c = reduce(&evs, &[]);
        assert_eq!(
            c.episodes.zero_windows,
            vec![ZeroWindow {
                start_ns: 2,
                end_ns: 9
            }]
        );
    }

    #[test]
    fn gso_retransmission_counts_segments() {
        let cap = vec![
            data(0, 0, 100),
            data(1, 100, 100),
            data(2, 200, 100),
            data(500, 100, 100),
            data(510, 200, 100),
        ];
        let r = capture_retransmissions(&cap, sa(S));
        assert_eq!(r.len(), 2);
        let m = match_retransmissions(&[520], &r, 1000);
        assert_eq!((m[0].seq, m[0].segments), (Some(100), 2));
        // back-to-back events 17 µs apart each own their packet
        let cap = vec![data(995_000, 0, 100), data(1_016_000, 100, 100)];
        let m = match_retransmissions(&[1_000_000, 1_017_000], &cap, 5_000_000);
        assert_eq!(
            m.iter().map(|r| (r.seq, r.segments)).collect::<Vec<_>>(),
            [(Some(0), 1), (Some(100), 1)]
        );
    }

    #[test]
    fn decimation_keeps_changes_and_bounds() {
        let s: Vec<Sample> = (0..10_000)
            .map(|i| Sample {
                t_ns: i,
                cwnd: (i / 100) as u32,
                ssthresh: 5,
                srtt_us: 1,
                snd_wnd: 1,
                inflight: 0,
            })
            .collect();
        let d = decimate(&s, 500);
        assert!(d.len() <= 500 && d.len() >= 50);
        assert!(d.windows(2).all(|w| w[0].t_ns < w[1].t_ns));
    }

    #[test]
    fn relay_log_parses() {
        let l = r#"{"t_ns":5,"ev":"drop_blackout","n":3,"dir":"c2s","src":"10.1.1.2","dst":"10.1.2.2","sport":1,"dport":2,"seq":9,"len":1448}
{"t_ns":4,"ev":"blackout_start","n":3,"dir":"c2s","src":"10.1.1.2","dst":"10.1.2.2","sport":1,"dport":2,"seq":9,"len":1448}"#;
        let i = parse_relay_log(l);
        assert_eq!(
            (i.drops.len(), i.blackouts.len(), i.reorders.len()),
            (1, 1, 0)
        );
    }
}
