//! A TCP connection: both directions' analysis state, handshake facts and statistics.

pub mod analysis;
pub mod half;
pub mod stats;
pub mod unacked;

use tcpdx_wire::{FrameNo, SeqNum, TcpFlags, Timestamp};

use crate::config::AnalyzerConfig;
use crate::event::{AnalysisFlags as F, MAX_SACK_BLOCKS, SegmentAnalysis, SegmentDetail};
use crate::flow::{Dir, Endpoint, Evicted, FlowKey, StreamId};
use crate::segment::Segment;
use analysis::Verdict;
use half::{HalfFlow, MAX_WINDOW_SHIFT, WindowScale, unwrap_rel};
use stats::{DirStats, FlowSummary};

#[cfg(test)]
mod tests;

/// One connection (one Wireshark TCP conversation).
#[derive(Debug)]
pub struct Connection {
    /// Wireshark `tcp.stream`.
    pub stream: StreamId,
    /// Its 4-tuple.
    pub key: FlowKey,
    /// The client endpoint (SYN sender, else first sender seen).
    pub client: Endpoint,
    /// Analysis state per direction, indexed by `Dir::idx()`.
    pub halves: [HalfFlow; 2],
    /// Statistics per direction (data sent by that side).
    pub stats: [DirStats; 2],
    /// Time of the most recent SYN (Wireshark `ts_mru_syn`).
    pub ts_mru_syn: Option<Timestamp>,
    /// Handshake RTT: SYN to the first pure ACK (0 = unknown, as in Wireshark).
    pub first_rtt_ns: i64,
    /// First and last packet.
    pub first_ts: Timestamp,
    /// Last packet (in capture order: the idle time for expiry counts from it).
    pub last_ts: Timestamp,
    /// Latest packet time (not the last one's when capture time went backwards).
    pub end_ts: Timestamp,
    /// Last frame.
    pub last_frame: FrameNo,
    /// FIN seen per direction.
    pub fin: [bool; 2],
    /// RST seen.
    pub rst: bool,
    /// Heavy state (unacked lists, RTT reservoirs) has been freed after expiry.
    pub expired: bool,
    /// The unacked cap warning was already reported.
    pub cap_warned: bool,
}

impl Connection {
    /// A new connection whose first segment is `seg`.
    pub fn new(stream: StreamId, key: FlowKey, seg: &Segment) -> Self {
        let synack = seg.flags.syn() && seg.flags.ack();
        let client = if synack { seg.dst } else { seg.src };
        Self {
            stream,
            key,
            client,
            halves: [HalfFlow::default(), HalfFlow::default()],
            stats: [DirStats::default(), DirStats::default()],
            ts_mru_syn: None,
            first_rtt_ns: 0,
            first_ts: seg.ts,
            last_ts: seg.ts,
            end_ts: seg.ts,
            last_frame: seg.frame,
            fin: [false; 2],
            rst: false,
            expired: false,
            cap_warned: false,
        }
    }

    /// A connection evicted earlier that resumes with `seg`: same stream index, client and
    /// relative numbering; the analysis state and statistics start afresh.
    pub fn resume(key: FlowKey, seg: &Segment, e: &Evicted) -> Self {
        let mut c = Self::new(e.stream, key, seg);
        c.client = e.client;
        for (i, h) in c.halves.iter_mut().enumerate() {
            if let Some(Some(base)) = e.base.get(i) {
                h.base_seq = *base;
                h.base_set = true;
            }
            h.saw_syn = e.saw_syn.get(i).copied().unwrap_or(false);
            (h.rel_seq_hint, h.rel_ack_hint) = e.hints.get(i).copied().unwrap_or((0, 0));
        }
        c
    }

    /// What is remembered of this connection once evicted.
    pub fn evicted(&self) -> Evicted {
        let [a, b] = &self.halves;
        let base = |h: &HalfFlow| h.base_set.then_some(h.base_seq);
        Evicted {
            stream: self.stream,
            client: self.client,
            base: [base(a), base(b)],
            saw_syn: [a.saw_syn, b.saw_syn],
            hints: [
                (a.rel_seq_hint, a.rel_ack_hint),
                (b.rel_seq_hint, b.rel_ack_hint),
            ],
        }
    }

    /// A SYN-ACK with a new ISN in direction `dir`: its sender's relative numbers restart
    /// at `isn` (Wireshark), and 64-bit unwrapping, of its sequence numbers and of the
    /// peer's ACKs of them, must not continue from the old numbering.
    pub fn restart_numbering(&mut self, dir: Dir, isn: SeqNum) {
        let (fwd, rev) = split(&mut self.halves, dir);
        fwd.base_seq = isn;
        fwd.rel_seq_hint = 0;
        rev.rel_ack_hint = 0;
    }

    /// Direction of a segment sent by `src`.
    pub fn dir_of(&self, src: &Endpoint) -> Dir {
        if *src == self.client {
            Dir::ClientToServer
        } else {
            Dir::ServerToClient
        }
    }

    /// The endpoint sending in `dir`.
    pub fn sender(&self, dir: Dir) -> Endpoint {
        match dir {
            Dir::ClientToServer => self.client,
            Dir::ServerToClient => {
                let lo = self.key.lo();
                if lo == self.client { self.key.hi() } else { lo }
            }
        }
    }

    /// True once both FINs or a RST have been seen.
    pub fn is_closed(&self) -> bool {
        self.rst || (self.fin[0] && self.fin[1])
    }

    /// Analyses one segment of this connection. `initial` carries flags decided before the
    /// analysis (reused ports); `stats`: keep the statistics of [`Connection::summary`] (see
    /// [`EventSink::needs_flow_stats`](crate::EventSink::needs_flow_stats)).
    // Always inlined into its one caller (see `Analyzer::connection_for`); the sequence
    // analysis it calls stays out of line (inlined too, `diagnose` ran 3% more).
    #[inline(always)]
    pub fn handle_segment(
        &mut self,
        seg: &Segment,
        initial: F,
        rel_time_ns: i64,
        cfg: &AnalyzerConfig,
        stats: bool,
    ) -> (SegmentAnalysis, Verdict) {
        let dir = self.dir_of(&seg.src);
        let (fwd, rev) = split(&mut self.halves, dir);
        let v = analysis::analyze(fwd, rev, self.first_rtt_ns, seg, initial, cfg);
        if seg.flags.syn() || seg.options.window_scale.is_some() {
            handshake_options(fwd, rev, seg);
        }
        let flags = seg.flags;
        if flags.syn() && !flags.ack() {
            self.ts_mru_syn = Some(seg.ts);
        }
        // Wireshark: the first pure ACK after a SYN gives the handshake RTT.
        if flags.0 & (TcpFlags::SYN | TcpFlags::ACK) == TcpFlags::ACK
            && self.first_rtt_ns == 0
            && let Some(syn) = self.ts_mru_syn
        {
            self.first_rtt_ns = seg.ts.since(syn);
        }

        let (fwd, rev) = split(&mut self.halves, dir);
        fwd.rel_seq_hint = unwrap_rel(seg.seq, fwd.base_seq, fwd.rel_seq_hint);
        let rel_seq = fwd.rel_seq_hint;
        let rel_ack = if flags.ack() {
            fwd.rel_ack_hint = unwrap_rel(seg.ack, rev.base_seq, fwd.rel_ack_hint);
            fwd.rel_ack_hint
        } else {
            u64::from(seg.ack.0)
        };
        let window = if flags.syn() {
            u64::from(seg.window)
        } else {
            u64::from(seg.window) << fwd.win_scale.shift()
        };
        let ack_rtt_ns = v.acked.map(|m| seg.ts.since(m.sent)).filter(|&d| d != 0);

        if stats {
            self.update_stats(dir, seg, &v, rel_seq, window, ack_rtt_ns, cfg);
        }
        self.last_ts = seg.ts;
        // Durations span the earliest to the latest time, whatever the capture order.
        self.first_ts = self.first_ts.min(seg.ts);
        self.end_ts = self.end_ts.max(seg.ts);
        self.last_frame = seg.frame;
        if flags.fin() {
            *dir.of_mut(&mut self.fin) = true;
        }
        if flags.rst() {
            self.rst = true;
        }

        let row = SegmentAnalysis {
            frame: seg.frame,
            stream: self.stream,
            ts: seg.ts,
            rel_time_ns,
            dir,
            src: seg.src.addr,
            sport: seg.src.port,
            dst: seg.dst.addr,
            dport: seg.dst.port,
            seq: rel_seq,
            ack: rel_ack,
            tcp_flags: flags.0,
            len: seg.len,
            window_raw: seg.window,
            window,
            flags: v.flags,
            dup_ack_num: v.dup_ack_num,
            bytes_in_flight: v.bytes_in_flight,
            ack_rtt_ns,
            acks_frame: v.acked.map(|m| m.frame),
        };
        (row, v)
    }

    /// SACK blocks (relative to the peer's base, unwrapped near `row.ack`) and options of a
    /// segment this connection has just analysed into `row`.
    pub fn detail(&self, seg: &Segment, row: &SegmentAnalysis) -> SegmentDetail {
        let o = &seg.options;
        let mut d = SegmentDetail {
            mss: o.mss,
            window_scale: o.window_scale,
            sack_permitted: o.sack_permitted,
            timestamps: o.timestamps,
            ip_id: seg.ip_id,
            ttl: seg.ttl,
            captured: seg.captured,
            ..SegmentDetail::default()
        };
        if o.sack_count > 0 && seg.flags.ack() {
            let peer_base = row.dir.rev().of(&self.halves).base_seq;
            let n = usize::from(o.sack_count).min(MAX_SACK_BLOCKS);
            for (i, &(l, r)) in o.sack_blocks().iter().take(n).enumerate() {
                let left = unwrap_rel(l, peer_base, row.ack);
                let right = unwrap_rel(r, peer_base, left);
                if let Some(b) = d.sack.get_mut(i) {
                    *b = (left, right);
                }
            }
            d.sack_count = n as u8;
        }
        d
    }

    #[allow(clippy::too_many_arguments)]
    fn update_stats(
        &mut self,
        dir: Dir,
        seg: &Segment,
        v: &Verdict,
        rel_seq: u64,
        window: u64,
        ack_rtt_ns: Option<i64>,
        cfg: &AnalyzerConfig,
    ) {
        let resent = v
            .flags
            .any(F::RETRANSMISSION | F::FAST_RETRANSMISSION | F::SPURIOUS_RETRANSMISSION);
        let s = dir.of_mut(&mut self.stats);
        s.packets += 1;
        s.first_ts = Some(s.first_ts.map_or(seg.ts, |t| t.min(seg.ts)));
        s.last_ts = Some(s.last_ts.map_or(seg.ts, |t| t.max(seg.ts)));
        if seg.flags.syn() {
            s.mss = seg.options.mss.or(s.mss);
            s.window_scale = seg.options.window_scale.or(s.window_scale);
            s.sack_permitted |= seg.options.sack_permitted;
        }
        s.max_window = s.max_window.max(window);
        // The data counters are written only when something changes them, so that a side
        // that sends no data never allocates them.
        if seg.len > 0 || resent {
            let d = s.data_mut();
            d.bytes += u64::from(seg.len);
            if resent {
                d.retrans_bytes += u64::from(seg.len);
                d.retrans_packets += 1;
            }
            if seg.len > 0 {
                let end = rel_seq + u64::from(seg.len);
                match d.high_seq {
                    None => {
                        d.unique_bytes += u64::from(seg.len);
                        d.high_seq = Some(end);
                    }
                    Some(h) if end > h => {
                        d.unique_bytes += (end - h).min(u64::from(seg.len));
                        d.high_seq = Some(end);
                    }
                    Some(_) => {}
                }
            }
        }
        let plain = seg.flags.0 & (TcpFlags::SYN | TcpFlags::FIN | TcpFlags::RST) == 0;
        if v.flags.has(F::ZERO_WINDOW) {
            let d = s.data_mut();
            d.zero_window_count += 1;
            d.zero_window_since.get_or_insert(seg.ts);
        } else if plain
            && seg.window != 0
            && let Some(d) = s.data_if_any()
            && let Some(since) = d.zero_window_since.take()
        {
            d.zero_window_ns += seg.ts.since(since);
        }
        // The ACK measures the RTT of the peer's data (Karn: never from a re-sent segment).
        if let (Some(rtt), Some(m)) = (ack_rtt_ns, v.acked)
            && !m.ambiguous
            && rtt > 0
        {
            dir.rev()
                .of_mut(&mut self.stats)
                .data_mut()
                .rtt
                .add(rtt, cfg.rtt_reservoir);
        }
    }

    /// Frees the heavy state of an expired connection; analysis may resume later.
    pub fn expire(&mut self) {
        for h in &mut self.halves {
            h.unacked = unacked::UnackedList::new();
        }
        for d in self.stats.iter_mut().filter_map(DirStats::data_if_any) {
            d.rtt.freeze();
        }
        self.expired = true;
    }

    /// Reduces the RTT reservoirs to their quantiles (a closed connection measures no more).
    pub fn freeze_rtt(&mut self) {
        for d in self.stats.iter_mut().filter_map(DirStats::data_if_any) {
            if !d.rtt.is_frozen() {
                d.rtt.freeze();
            }
        }
    }

    /// The connection's summary.
    pub fn summary(&self) -> FlowSummary {
        let conn_s = self.end_ts.since(self.first_ts) as f64 / 1e9;
        let c = self.sender(Dir::ClientToServer);
        let sv = self.sender(Dir::ServerToClient);
        FlowSummary {
            stream: self.stream,
            first_ts: self.first_ts,
            last_ts: self.end_ts,
            duration_s: conn_s,
            saw_syn: self.halves[0].saw_syn,
            dirs: [
                self.stats[0].summarize(c, sv, conn_s, self.end_ts),
                self.stats[1].summarize(sv, c, conn_s, self.end_ts),
            ],
        }
    }
}

/// Window scale option and Wireshark's `verify_tcp_window_scaling` after a SYN.
fn handshake_options(fwd: &mut HalfFlow, rev: &mut HalfFlow, seg: &Segment) {
    if let Some(shift) = seg.options.window_scale {
        fwd.win_scale = WindowScale::Shift(shift.min(MAX_WINDOW_SHIFT));
    }
    if !seg.flags.syn() {
        return;
    }
    if fwd.win_scale == WindowScale::Unknown {
        // No option in this SYN: scaling is off for both sides.
        fwd.win_scale = WindowScale::NotUsed;
        rev.win_scale = WindowScale::NotUsed;
    } else if seg.flags.ack() && rev.win_scale == WindowScale::NotUsed {
        // SYN-ACK offers scaling the SYN did not: not used.
        fwd.win_scale = WindowScale::NotUsed;
    }
}

fn split(halves: &mut [HalfFlow; 2], dir: Dir) -> (&mut HalfFlow, &mut HalfFlow) {
    dir.split_mut(halves)
}
