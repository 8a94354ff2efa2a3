//! Target `storage`: any byte streams, in both directions of one connection, into the
//! storage layer (reassembly, framer, ONC RPC / NFSv3 / NFSv4, SMB2/3, iSCSI, SRT tables).
//!
//! Input: a selector byte, then chunks until the bytes run out. The selector picks the
//! server port (so the tracker's port map chooses the parser) and whether the connection
//! starts with a handshake (framer synchronised from the first byte) or mid-stream (the
//! framer must find a record boundary). Each chunk is a header byte, a little-endian u16
//! length and up to that many payload bytes; the header says which direction sends, how the
//! chunk relates to what was sent before (in order, after a hole, a retransmission that
//! overlaps, a bare ACK) and how much time passes. Segments go through the real TCP
//! analyzer, so the tracker sees exactly what it sees on a capture.
//!
//! Checked: no panic; every transaction's request and reply frames were sent, and each
//! message's first frame is not after its last; no SRT table counts more calls than there were
//! transactions. Memory: `rss_limit_mb` in run.sh (the tracker's caps are set low here).

use std::net::{IpAddr, Ipv4Addr};

use tcpdx_core::{Analyzer, AnalyzerConfig, Endpoint, Segment};
use tcpdx_storage::srt::{SrtCollector, SrtConfig};
use tcpdx_storage::{Notice, Request, StorageConfig, StorageSink, Tracker, Transaction};
use tcpdx_wire::{FrameNo, SeqNum, TcpFlags, TcpOptions, Timestamp};

/// Server ports the selector chooses from: NFS (ONC RPC), SMB2, iSCSI.
pub const PORTS: [u16; 3] = [2049, 445, 3260];

/// Chunk kinds (header bits 1-2).
pub mod kind {
    /// Bytes that follow what this direction sent so far.
    pub const IN_ORDER: u8 = 0;
    /// Bytes after a hole as long as the chunk (the hole is never filled).
    pub const AFTER_HOLE: u8 = 1;
    /// Bytes sent again, starting `len` bytes before the end of what was sent.
    pub const RETRANSMIT: u8 = 2;
    /// An ACK of everything the peer sent, without payload (releases held bytes).
    pub const ACK: u8 = 3;
}

/// Largest payload of one segment (longer chunks are cut into segments of this size).
const MSS: usize = 1448;

/// Appends one chunk to a fuzz input (for seeds): direction 0 is client to server.
pub fn encode_chunk(out: &mut Vec<u8>, dir: u8, kind: u8, dt_ms: u8, bytes: &[u8]) {
    out.push((dir & 1) | ((kind & 3) << 1) | ((dt_ms & 0x1f) << 3));
    let len = bytes.len().min(usize::from(u16::MAX)) as u16;
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&bytes[..usize::from(len)]);
}

/// The selector byte: `port` index into [`PORTS`], and whether a handshake opens.
pub fn encode_selector(port: usize, handshake: bool) -> u8 {
    (port as u8 % 3) | (u8::from(handshake) << 2)
}

/// Collects what the checks need, and feeds the SRT aggregation.
struct Sink {
    srt: SrtCollector,
    frames: u64,
    transactions: u64,
}

impl StorageSink for Sink {
    fn transaction(&mut self, t: &Transaction) {
        self.transactions += 1;
        let (first, last) = (t.request.first.frame.0, t.request.last.frame.0);
        assert!(
            1 <= first && first <= last && last <= self.frames,
            "request frames {first}..{last} outside 1..{}",
            self.frames
        );
        if let Some(reply) = t.reply {
            let (rf, rl) = (reply.first.frame.0, reply.last.frame.0);
            assert!(
                rf <= rl && rl <= self.frames,
                "reply frames {rf}..{rl} outside 1..{}",
                self.frames
            );
            // No order between request and reply: with holes on both sides, a request's
            // bytes may become available (at a retransmission) after the reply's.
        }
        self.srt.transaction(t);
    }
    fn request(&mut self, r: &Request) {
        self.srt.request(r);
    }
    fn notice(&mut self, n: &Notice) {
        self.srt.notice(n);
    }
    fn start(&mut self, ts: Timestamp) {
        self.srt.start(ts);
    }
}

/// One direction's sending state.
#[derive(Clone, Copy)]
struct Side {
    ep: Endpoint,
    next: u32,
}

/// Runs one input.
pub fn run(data: &[u8]) {
    let Some((&sel, mut rest)) = data.split_first() else {
        return;
    };
    let port = PORTS[usize::from(sel % 3)];
    let handshake = sel & 4 != 0;
    let mut cfg = StorageConfig::default();
    cfg.max_outstanding = 64;
    cfg.reassembly_cap = 256 * 1024;
    let mut tracker = Tracker::new(
        cfg,
        Sink {
            srt: SrtCollector::new(SrtConfig::default()),
            frames: 0,
            transactions: 0,
        },
    );
    let mut analyzer = Analyzer::new(AnalyzerConfig::default());
    let v4 = |a, port| Endpoint {
        addr: IpAddr::V4(Ipv4Addr::new(10, 9, 0, a)),
        port,
    };
    let mut sides = [
        Side {
            ep: v4(1, 50123),
            next: 0x1000_0000,
        },
        Side {
            ep: v4(2, port),
            next: 0x8000_0000,
        },
    ];
    let mut clock = Clock {
        frame: 0,
        now_ns: 1_700_000_000_000_000_000,
    };
    if handshake {
        for (d, flags) in [(0, 0x002), (1, 0x012), (0, 0x010)] {
            let seg = clock.segment(&sides, d, sides[d].next.wrapping_sub(1), flags, 0);
            tracker.sink_mut().frames = clock.frame;
            analyzer.handle_segment_with_payload(&seg, &[], &mut tracker);
        }
    }
    while rest.len() >= 3 {
        let h = rest[0];
        let len = usize::from(u16::from_le_bytes([rest[1], rest[2]]));
        let take = len.min(rest.len() - 3);
        let bytes = &rest[3..3 + take];
        rest = &rest[3 + take..];
        let d = usize::from(h & 1);
        clock.now_ns += i64::from(h >> 3) * 1_000_000;
        match (h >> 1) & 3 {
            kind::ACK => {
                let seg = clock.segment(&sides, d, sides[d].next, 0x010, 0);
                tracker.sink_mut().frames = clock.frame;
                analyzer.handle_segment_with_payload(&seg, &[], &mut tracker);
                continue;
            }
            kind::AFTER_HOLE => sides[d].next = sides[d].next.wrapping_add(len as u32),
            kind::RETRANSMIT => sides[d].next = sides[d].next.wrapping_sub(len as u32),
            _ => {}
        }
        for part in bytes.chunks(MSS) {
            let start = sides[d].next;
            let seg = clock.segment(&sides, d, start, 0x018, part.len() as u32);
            let end = start.wrapping_add(part.len() as u32);
            if SeqNum(end).is_after(SeqNum(sides[d].next)) {
                sides[d].next = end;
            }
            tracker.sink_mut().frames = clock.frame;
            analyzer.handle_segment_with_payload(&seg, part, &mut tracker);
        }
        // A retransmission does not move the sender's next sequence number back.
        if (h >> 1) & 3 == kind::RETRANSMIT {
            sides[d].next = sides[d].next.wrapping_add(len as u32);
        }
    }
    analyzer.handle_end(&mut tracker);
    tracker.finish();
    let sink = tracker.sink();
    let report = sink.srt.report(None);
    for t in &report.tables {
        let counted: u64 = t.rows.iter().map(|r| r.count).sum();
        assert!(
            counted <= sink.transactions,
            "SRT table {} counts {counted} calls, {} transactions were seen",
            t.protocol,
            sink.transactions
        );
    }
}

/// Frame numbers and capture time.
struct Clock {
    frame: u64,
    now_ns: i64,
}

impl Clock {
    /// A segment from side `d` to the other side, acknowledging all the peer sent.
    fn segment(&mut self, sides: &[Side; 2], d: usize, seq: u32, flags: u16, len: u32) -> Segment {
        self.frame += 1;
        self.now_ns += 1_000;
        let (me, peer) = (sides[d], sides[1 - d]);
        let syn = flags & 0x002 != 0;
        let mut options = TcpOptions::default();
        if syn {
            options.mss = Some(MSS as u16);
        }
        Segment {
            frame: FrameNo(self.frame),
            ts: Timestamp(self.now_ns),
            src: me.ep,
            dst: peer.ep,
            seq: SeqNum(seq),
            ack: SeqNum(if flags == 0x002 { 0 } else { peer.next }),
            flags: TcpFlags(if flags == 0x002 { flags } else { flags | 0x010 }),
            window: 0xffff,
            len,
            ip_id: 0,
            ttl: 64,
            captured: 0,
            options,
        }
    }
}
