//! Target `analyzer`: structured (`arbitrary`) segment sequences into the TCP analyzer.
//!
//! Input: a [`Config`], then [`Op`]s until the bytes run out. Four 4-tuples (two IPv4, two
//! IPv6) share the analyzer; every op sends one segment in one direction of one of them.
//! Sequence numbers are deltas from the sender's next sequence number and ACK numbers
//! deltas from the peer's, so that in-order transfers are the easy case for the fuzzer and
//! holes, overlaps, retransmissions and 4 GB jumps are one mutated delta away. Time steps
//! may be negative (capture time going backwards).
//!
//! Checked after every segment, against a model kept here from the inputs alone:
//! - no panic;
//! - relative sequence numbers are exact: each row's unwrapped `seq` is the previous row's
//!   plus the raw difference (while it stays at or above the base);
//! - relative sequence numbers are monotone where they must be: a data segment that is not
//!   flagged as a retransmission, out-of-order, keep-alive or window probe does not start
//!   before the highest sequence number sent so far (less one byte, Wireshark's tolerance);
//! - bytes in flight never exceed the sequence span sent in that direction (the highest end
//!   minus the lowest start), and stay below Wireshark's 2 GB sanity limit.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use arbitrary::{Arbitrary, Unstructured};
use tcpdx_core::{
    AnalysisFlags as F, Analyzer, AnalyzerConfig, Dir, Endpoint, EventSink, Segment,
    SegmentAnalysis, SegmentDetail,
};
use tcpdx_wire::{FrameNo, SeqNum, TcpFlags, TcpOptions, Timestamp};

/// Analyzer settings, small so that caps, expiry and eviction happen in short inputs.
#[derive(Arbitrary, Clone, Copy, Debug, Default)]
pub struct Config {
    /// Unacked segments per direction: 1 + this % 64 (0xff: the default, 10,000).
    pub max_unacked: u8,
    /// Frames between expiry sweeps: 1 + this.
    pub sweep_every: u8,
    /// Flows tracked at once: 1 + this % 8 (0xff: the default).
    pub max_flows: u8,
}

/// One segment to send.
#[derive(Arbitrary, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Op {
    /// Bits 0-1: which 4-tuple; bit 2: direction (0: A to B, 1: B to A).
    pub conn: u8,
    /// TCP flag bits (9 low bits used).
    pub flags: u16,
    /// Sequence number minus the sender's next sequence number.
    pub seq_delta: i32,
    /// ACK number minus the peer's next sequence number.
    pub ack_delta: i32,
    /// Payload length.
    pub len: u16,
    /// Raw window.
    pub window: u16,
    /// Microseconds since the previous segment (negative: time goes backwards).
    pub dt_us: i32,
    /// Options present: bit 0 MSS, 1 window scale, 2 SACK permitted, 3 timestamps,
    /// bits 4-6 number of SACK blocks (at most 4), bit 7 SACK edges swapped (right < left).
    pub opts: u8,
    /// Window scale shift, when present.
    pub ws: u8,
    /// SACK blocks: left edge minus the ACK number, and length.
    pub sack: [(i32, u16); 4],
}

/// Bytes of one encoded [`Op`] (the derive reads fields in order, integers little-endian).
pub const OP_LEN: usize = 1 + 2 + 4 + 4 + 2 + 2 + 4 + 1 + 1 + 4 * 6;

impl Op {
    /// The bytes that `arbitrary` decodes into this op (for seeds).
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.push(self.conn);
        out.extend_from_slice(&self.flags.to_le_bytes());
        out.extend_from_slice(&self.seq_delta.to_le_bytes());
        out.extend_from_slice(&self.ack_delta.to_le_bytes());
        out.extend_from_slice(&self.len.to_le_bytes());
        out.extend_from_slice(&self.window.to_le_bytes());
        out.extend_from_slice(&self.dt_us.to_le_bytes());
        out.push(self.opts);
        out.push(self.ws);
        for (l, n) in self.sack {
            out.extend_from_slice(&l.to_le_bytes());
            out.extend_from_slice(&n.to_le_bytes());
        }
    }
}

impl Config {
    /// The bytes that `arbitrary` decodes into this config.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&[self.max_unacked, self.sweep_every, self.max_flows]);
    }

    /// The analyzer configuration this stands for.
    pub fn analyzer_config(self) -> AnalyzerConfig {
        let mut c = AnalyzerConfig::default();
        if self.max_unacked != 0xff {
            c.max_unacked_segments = 1 + usize::from(self.max_unacked % 64);
        }
        c.sweep_every_frames = 1 + u64::from(self.sweep_every);
        c.expire_closed_ns = 5_000_000;
        c.expire_idle_ns = 50_000_000;
        if self.max_flows != 0xff {
            c.max_flows = 1 + usize::from(self.max_flows % 8);
            c.max_evicted_remembered = usize::from(self.max_flows / 8 % 4);
        }
        c
    }
}

/// Endpoints of 4-tuple `i`: (A, B).
pub fn endpoints(i: usize) -> (Endpoint, Endpoint) {
    let v4 = |a: u8, port| Endpoint {
        addr: IpAddr::V4(Ipv4Addr::new(10, 0, 0, a)),
        port,
    };
    let v6 = |a: u16, port| Endpoint {
        addr: IpAddr::V6(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, a)),
        port,
    };
    match i & 3 {
        0 => (v4(1, 40000), v4(2, 80)),
        1 => (v4(1, 40001), v4(2, 80)),
        2 => (v6(1, 50000), v6(2, 443)),
        _ => (v6(2, 443), v6(1, 50000)),
    }
}

/// Initial sequence number of 4-tuple `conn`, direction `dir` (0 or 1).
pub fn initial_seq(conn: usize, dir: usize) -> u32 {
    0x1000_0000u32
        .wrapping_mul(conn as u32 * 2 + dir as u32 + 1)
        .wrapping_add(0x0123_4567)
}

/// Turns ops into segments: the raw numbers each op's deltas stand for.
#[derive(Clone, Debug)]
pub struct Sender {
    /// Next sequence number per 4-tuple and direction.
    next: [[u32; 2]; 4],
    now_ns: i64,
    frame: u64,
}

impl Default for Sender {
    fn default() -> Self {
        let mut next = [[0; 2]; 4];
        for (c, n) in next.iter_mut().enumerate() {
            *n = [initial_seq(c, 0), initial_seq(c, 1)];
        }
        Self {
            next,
            now_ns: 1_700_000_000_000_000_000,
            frame: 0,
        }
    }
}

impl Sender {
    /// The segment `op` describes, and advances the state.
    pub fn segment(&mut self, op: &Op) -> Segment {
        let c = usize::from(op.conn & 3);
        let d = usize::from((op.conn >> 2) & 1);
        let (a, b) = endpoints(c);
        let (src, dst) = if d == 0 { (a, b) } else { (b, a) };
        let flags = TcpFlags(op.flags & 0x1ff);
        let seq = self.next[c][d].wrapping_add(op.seq_delta as u32);
        let ack = self.next[c][1 - d].wrapping_add(op.ack_delta as u32);
        let mut options = TcpOptions::default();
        if op.opts & 1 != 0 {
            options.mss = Some(1460);
        }
        if op.opts & 2 != 0 {
            options.window_scale = Some(op.ws);
        }
        options.sack_permitted = op.opts & 4 != 0;
        if op.opts & 8 != 0 {
            options.timestamps = Some((self.frame as u32, 7));
        }
        let n = usize::from((op.opts >> 4) & 7).min(4);
        for (i, (l, len)) in op.sack.iter().take(n).enumerate() {
            let left = SeqNum(ack.wrapping_add(*l as u32));
            let right = left.add(u32::from(*len));
            options.sack[i] = if op.opts & 0x80 != 0 {
                (right, left)
            } else {
                (left, right)
            };
        }
        options.sack_count = n as u8;
        let len = u32::from(op.len);
        let space = len + u32::from(flags.syn()) + u32::from(flags.fin());
        let end = seq.wrapping_add(space);
        if SeqNum(end).is_after(SeqNum(self.next[c][d])) {
            self.next[c][d] = end;
        }
        self.now_ns = self.now_ns.saturating_add(i64::from(op.dt_us) * 1000);
        self.frame += 1;
        Segment {
            frame: FrameNo(self.frame),
            ts: Timestamp(self.now_ns),
            src,
            dst,
            seq: SeqNum(seq),
            ack: SeqNum(ack),
            flags,
            window: op.window,
            len,
            ip_id: 0,
            ttl: 64,
            captured: 0,
            options,
        }
    }
}

/// Rows of the last segment.
#[derive(Default)]
struct Rows(Vec<SegmentAnalysis>);

impl EventSink for Rows {
    fn segment_detail(&mut self, a: &SegmentAnalysis, _d: &SegmentDetail) {
        self.0.push(*a);
    }
}

/// What the harness knows of one direction of one stream, in unwrapped positions.
#[derive(Debug)]
struct Model {
    /// Raw sequence number and position of the last row.
    last: (u32, i64),
    /// Highest end sent (`next_seq` of the analysis).
    next: Next,
    /// Lowest start and highest end of everything sent; None once they stop being comparable
    /// with the analyzer's 32-bit relative numbers (base changed, or went below it).
    span: Option<(i64, i64)>,
}

/// The model's idea of the analysis' `next_seq`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Next {
    /// Nothing sent yet (the analyzer's 0).
    Unset,
    /// At this position.
    At(i64),
    /// Not comparable any more (32-bit ambiguity, or numbering restarted).
    Unknown,
}

const RESENT: u16 = F::RETRANSMISSION
    | F::FAST_RETRANSMISSION
    | F::SPURIOUS_RETRANSMISSION
    | F::OUT_OF_ORDER
    | F::KEEP_ALIVE
    | F::ZERO_WINDOW_PROBE;

const HALF: i64 = 1 << 31;

/// Runs one input.
pub fn run(data: &[u8]) {
    let mut u = Unstructured::new(data);
    let Ok(cfg) = Config::arbitrary(&mut u) else {
        return;
    };
    let mut analyzer = Analyzer::new(cfg.analyzer_config());
    let mut sender = Sender::default();
    let mut models: HashMap<(u32, Dir), Model> = HashMap::new();
    let mut rows = Rows::default();
    while !u.is_empty() {
        let Ok(op) = Op::arbitrary(&mut u) else {
            break;
        };
        let seg = sender.segment(&op);
        let before = analyzer.stats().clone();
        analyzer.handle_segment(&seg, &mut rows);
        let capped = analyzer.stats().capped_segments > before.capped_segments;
        let resumed = analyzer.stats().resumed_flows > before.resumed_flows;
        assert_eq!(rows.0.len(), 1, "one row per segment");
        let row = rows.0.remove(0);
        if resumed {
            // Resumed after eviction: numbering kept, analysis state (next_seq) restarted,
            // in both directions.
            for dir in [Dir::ClientToServer, Dir::ServerToClient] {
                if let Some(m) = models.get_mut(&(row.stream.0, dir)) {
                    m.next = Next::Unset;
                }
            }
        }
        check(&mut models, &seg, &row, capped);
    }
    analyzer.handle_end(&mut rows);
}

fn check(
    models: &mut HashMap<(u32, Dir), Model>,
    seg: &Segment,
    row: &SegmentAnalysis,
    capped: bool,
) {
    let flags = row.flags;
    let key = (row.stream.0, row.dir);
    let reused = flags.has(F::REUSED_PORTS);
    let model = match models.get_mut(&key) {
        Some(m) if !reused => m,
        _ => {
            // First row of this direction (or its base was just reset): the analyzer has no
            // earlier row to unwrap against, so the value is the 32-bit relative number.
            assert!(row.seq < 1 << 32, "first relative seq is 32-bit: {row:?}");
            let pos = row.seq as i64;
            let m = Model {
                last: (seg.seq.0, pos),
                next: if reused { Next::Unknown } else { Next::Unset },
                span: (!reused).then_some((pos, pos)),
            };
            models.insert(key, m);
            let m = models.get_mut(&key).expect("just inserted");
            advance(m, seg, row, pos, capped);
            return;
        }
    };
    let pos = model.last.1 + i64::from(seg.seq.0.wrapping_sub(model.last.0) as i32);
    if pos < 0 {
        // Before the base: the analyzer falls back to the 32-bit value and its numbering
        // restarts from there; so does the model.
        model.last = (seg.seq.0, row.seq as i64);
        model.next = Next::Unknown;
        model.span = None;
        return;
    }
    assert_eq!(row.seq, pos as u64, "relative seq unwraps exactly: {row:?}");
    let plain_data = row.len > 0 && row.tcp_flags & (TcpFlags::SYN | TcpFlags::RST) == 0;
    if plain_data
        && !flags.any(RESENT)
        && let Next::At(next) = model.next
        && (pos - next).abs() < HALF - 1
        && raw_at(model, next) != 0
    {
        assert!(
            pos + 1 >= next,
            "unflagged data goes back: seq {pos}, highest sent {next}: {row:?}"
        );
    }
    advance(model, seg, row, pos, capped);
}

/// Raw sequence number at position `p` of the model.
fn raw_at(m: &Model, p: i64) -> u32 {
    m.last.0.wrapping_add((p - m.last.1) as u32)
}

/// Records the row in the model and checks bytes in flight.
fn advance(m: &mut Model, seg: &Segment, row: &SegmentAnalysis, pos: i64, capped: bool) {
    let syn_fin = seg.flags.syn() || seg.flags.fin();
    let space = i64::from(seg.len) + i64::from(syn_fin && !capped);
    let end = pos + space;
    let probe = row.flags.has(F::ZERO_WINDOW_PROBE);
    let plain_rst = seg.flags.rst() && !syn_fin;
    if !probe && !plain_rst {
        m.next = match m.next {
            // The analyzer's 0 means "unset" even when data really ended there.
            Next::Unset => Next::At(end),
            Next::At(n) if raw_at(m, n) == 0 => Next::At(end),
            Next::At(n) if (end - n).abs() >= HALF - 1 => Next::Unknown,
            Next::At(n) => Next::At(n.max(end)),
            Next::Unknown => Next::Unknown,
        };
    }
    m.last = (seg.seq.0, pos);
    if seg.len > 0 || syn_fin {
        let full = pos + i64::from(seg.len) + i64::from(syn_fin);
        m.span = m.span.map(|(lo, hi)| (lo.min(pos), hi.max(full)));
    }
    if let Some(bif) = row.bytes_in_flight {
        assert!(
            bif < 2_000_000_000,
            "bytes in flight under the sanity limit"
        );
        if let Some((lo, hi)) = m.span
            && lo >= 0
            && hi < 1 << 32
        {
            assert!(
                i64::from(bif) <= hi - lo,
                "bytes in flight {bif} exceed the sequence span {lo}..{hi}: {row:?}"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn op_encoding_round_trips() {
        let op = Op {
            conn: 5,
            flags: 0x18,
            seq_delta: -7,
            ack_delta: 1 << 20,
            len: 1448,
            window: 512,
            dt_us: -3,
            opts: 0x2b,
            ws: 7,
            sack: [(1, 2), (-3, 4), (5, 6), (7, 8)],
        };
        let mut b = Vec::new();
        Config::default().encode(&mut b);
        op.encode(&mut b);
        assert_eq!(b.len(), 3 + OP_LEN);
        let mut u = Unstructured::new(&b);
        let _ = Config::arbitrary(&mut u).unwrap();
        assert_eq!(Op::arbitrary(&mut u).unwrap(), op);
    }
}
