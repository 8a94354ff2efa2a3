//! [`Tracker`]: the core's events in, storage transactions out.
//!
//! It implements [`EventSink`]: each segment row (with its payload) of a connection whose
//! port maps to a storage protocol is reassembled per direction and parsed. Calling order:
//! feed every frame to the core's `Analyzer` with the tracker as (part of) its sink, then
//! call [`Tracker::finish`] once.

use std::fmt;
use std::str::FromStr;

use rustc_hash::FxHashMap;
use tcpdx_core::{Dir, EventSink, SegmentAnalysis, SegmentDetail, StreamId};
use tcpdx_wire::{FrameNo, TcpFlags};

use crate::framer::{Framed, Framer};
use crate::iscsi::{IscsiConn, IscsiDir};
use crate::reassembly::{At, ByteSink, Reassembler, ReassemblyStats};
use crate::rpc::{RpcConn, RpcDir};
use crate::smb2::{Smb2Conn, Smb2Dir};
use crate::tcplog::TcpLog;
use crate::transaction::{Notice, Request, StorageSink, Transaction};

/// Which parser reads a connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Decoder {
    /// ONC RPC (NFS, and MOUNT/NLM/portmap which are matched but not reported).
    Rpc,
    /// SMB2/3 over NetBIOS session framing.
    Smb2,
    /// iSCSI.
    Iscsi,
}

impl FromStr for Decoder {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "nfs" | "rpc" => Ok(Decoder::Rpc),
            "smb2" | "smb3" | "smb" | "cifs" => Ok(Decoder::Smb2),
            "iscsi" => Ok(Decoder::Iscsi),
            other => Err(format!(
                "unknown protocol {other:?} (expected nfs, smb2 or iscsi)"
            )),
        }
    }
}

impl fmt::Display for Decoder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Decoder::Rpc => "nfs",
            Decoder::Smb2 => "smb2",
            Decoder::Iscsi => "iscsi",
        })
    }
}

/// `--decode-as PORT=PROTO`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DecodeAs {
    /// TCP port (either end).
    pub port: u16,
    /// Parser.
    pub decoder: Decoder,
}

impl FromStr for DecodeAs {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let (port, proto) = s
            .split_once('=')
            .ok_or_else(|| format!("expected PORT=PROTO, got {s:?}"))?;
        let port = port
            .trim()
            .parse()
            .map_err(|_| format!("bad port {port:?} in {s:?}"))?;
        Ok(DecodeAs {
            port,
            decoder: proto.trim().parse()?,
        })
    }
}

/// Configuration of the storage layer.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct StorageConfig {
    /// Server ports and their parsers (`--decode-as` entries go first and win).
    pub ports: Vec<DecodeAs>,
    /// Out-of-order bytes buffered per direction before a hole is given up.
    pub reassembly_cap: usize,
    /// Unanswered requests remembered per connection.
    pub max_outstanding: usize,
}

/// Default server ports: NFS 2049, SMB 445 (direct) and 139 (NetBIOS), iSCSI 3260.
pub const DEFAULT_PORTS: &[DecodeAs] = &[
    DecodeAs {
        port: 2049,
        decoder: Decoder::Rpc,
    },
    DecodeAs {
        port: 445,
        decoder: Decoder::Smb2,
    },
    DecodeAs {
        port: 139,
        decoder: Decoder::Smb2,
    },
    DecodeAs {
        port: 3260,
        decoder: Decoder::Iscsi,
    },
];

impl Default for StorageConfig {
    fn default() -> Self {
        Self {
            ports: DEFAULT_PORTS.to_vec(),
            reassembly_cap: 4 << 20,
            max_outstanding: 65_536,
        }
    }
}

impl StorageConfig {
    /// Adds `--decode-as` entries in front of the defaults.
    pub fn with_decode_as(mut self, extra: &[DecodeAs]) -> Self {
        let mut ports = extra.to_vec();
        ports.append(&mut self.ports);
        self.ports = ports;
        self
    }

    /// True if a connection between these ports may be parsed (either is in the port map):
    /// the payloads of other connections are never read.
    pub fn may_parse(&self, sport: u16, dport: u16) -> bool {
        self.ports
            .iter()
            .any(|d| d.port == sport || d.port == dport)
    }

    /// The parser for a connection between these ports: the destination port of a
    /// client-to-server segment is tried first.
    fn decoder(&self, a: &SegmentAnalysis) -> Option<Decoder> {
        let (server, client) = match a.dir {
            Dir::ClientToServer => (a.dport, a.sport),
            Dir::ServerToClient => (a.sport, a.dport),
        };
        let find = |p: u16| self.ports.iter().find(|d| d.port == p).map(|d| d.decoder);
        find(server).or_else(|| find(client))
    }
}

/// Protocol state of one connection.
#[derive(Debug)]
enum State {
    Rpc(RpcConn),
    Smb2(Smb2Conn),
    Iscsi(IscsiConn),
}

impl State {
    /// Requests waiting for their reply.
    fn outstanding(&self) -> usize {
        match self {
            State::Rpc(c) => c.outstanding(),
            State::Smb2(c) => c.outstanding(),
            State::Iscsi(c) => c.outstanding(),
        }
    }
}

/// One storage connection: its parser state, each direction's bytes, and its TCP log.
#[derive(Debug)]
struct Conn {
    stream: StreamId,
    data_seen: [bool; 2],
    finished: bool,
    /// Where each direction's FIN is (relative sequence), once seen.
    fin_at: [Option<u64>; 2],
    log: TcpLog,
    /// Per direction: its bytes and their framing, side by side.
    sides: [Side; 2],
    state: State,
}

/// One direction of a connection's bytes: their reassembly and framing.
#[derive(Debug)]
struct Side {
    reasm: Reassembler,
    framer: Framer,
}

impl Side {
    fn new(cap: usize) -> Self {
        Self {
            reasm: Reassembler::new(cap),
            framer: Framer::new(false),
        }
    }
}

impl Conn {
    /// Closed both ways with every byte up to both FINs parsed and no request unanswered:
    /// nothing can follow but retransmissions of parsed bytes, and [`Tracker::finish`]
    /// would have nothing to say about it.
    fn is_over(&self) -> bool {
        // Before both FINs (nearly every call) nothing else is read.
        let [Some(c), Some(s)] = self.fin_at else {
            return false;
        };
        self.state.outstanding() == 0
            && [c, s]
                .iter()
                .zip(&self.sides)
                .all(|(&fin, side)| side.reasm.delivered_up_to(fin))
    }
}

/// Counters over all connections.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct TrackerStats {
    /// Connections parsed.
    pub connections: u64,
    /// Reassembly counters summed.
    pub reassembly: ReassemblyStats,
}

impl TrackerStats {
    fn add(&mut self, c: &Conn) {
        self.connections += 1;
        for side in &c.sides {
            let r = side.reasm.stats();
            self.reassembly.delivered_bytes += r.delivered_bytes;
            self.reassembly.gaps += r.gaps;
            self.reassembly.gap_bytes += r.gap_bytes;
            self.reassembly.cap_hits += r.cap_hits;
        }
    }
}

/// Storage transactions from the core's segment events. See the module doc.
pub struct Tracker<S> {
    cfg: StorageConfig,
    /// Live storage connections (one that is over is removed: [`Conn::is_over`]).
    conns: Vec<Conn>,
    /// Reassembly counters of the connections removed.
    retired: TrackerStats,
    /// Stream -> slot in `conns`.
    slots: FxHashMap<StreamId, usize>,
    /// Recent streams and their slots ([`Recent`]): most segments need no hash lookup.
    recent: Recent,
    /// Streams already judged not to be storage.
    skip: rustc_hash::FxHashSet<StreamId>,
    started: bool,
    last_ts: Option<tcpdx_wire::Timestamp>,
    /// The last segment of a storage connection.
    last_storage: Option<At>,
    sink: S,
    /// Every segment takes the reassembly path: the reference [`skip_cut`] is tested
    /// against.
    #[cfg(test)]
    no_skip: bool,
}

impl<S: StorageSink> Tracker<S> {
    /// A tracker pushing into `sink`.
    pub fn new(cfg: StorageConfig, sink: S) -> Self {
        Self {
            cfg,
            conns: Vec::new(),
            retired: TrackerStats::default(),
            slots: FxHashMap::default(),
            recent: Recent::new(),
            skip: Default::default(),
            started: false,
            last_ts: None,
            last_storage: None,
            sink,
            #[cfg(test)]
            no_skip: false,
        }
    }

    /// The sink.
    pub fn sink(&self) -> &S {
        &self.sink
    }

    /// The sink, mutably.
    pub fn sink_mut(&mut self) -> &mut S {
        &mut self.sink
    }

    /// Consumes the tracker, returning its sink (call [`Tracker::finish`] first).
    pub fn into_sink(self) -> S {
        self.sink
    }

    /// Time of the last TCP segment seen.
    pub fn last_ts(&self) -> Option<tcpdx_wire::Timestamp> {
        self.last_ts
    }

    /// Counters so far.
    pub fn stats(&self) -> TrackerStats {
        let mut s = self.retired;
        for c in &self.conns {
            s.add(c);
        }
        s
    }

    /// Removes the connection in `slot` if it is over (its stream is then skipped): memory
    /// follows the live connections, not every connection of the capture.
    #[inline]
    fn retire_if_over(&mut self, slot: usize) {
        if self.conns.get(slot).is_some_and(Conn::is_over) {
            self.retire(slot);
        }
    }

    /// Removes the connection in `slot` (out of line: once per connection).
    #[inline(never)]
    fn retire(&mut self, slot: usize) {
        let conn = self.conns.swap_remove(slot);
        self.retired.add(&conn);
        if conn.log.requested() {
            self.sink.tcp_log(conn.stream, conn.log);
        }
        self.slots.remove(&conn.stream);
        self.skip.insert(conn.stream);
        self.recent.set(conn.stream, SKIPPED);
        if let Some(moved) = self.conns.get(slot) {
            self.slots.insert(moved.stream, slot);
        }
    }

    /// End of input: delivers buffered bytes, reports unanswered requests.
    pub fn finish(&mut self) {
        let mut order: Vec<(StreamId, usize)> = self
            .conns
            .iter()
            .enumerate()
            .map(|(i, c)| (c.stream, i))
            .collect();
        order.sort_unstable();
        for (stream, slot) in order {
            let Some(conn) = self.conns.get_mut(slot) else {
                continue;
            };
            if conn.finished {
                continue;
            }
            conn.finished = true;
            for dir in [Dir::ClientToServer, Dir::ServerToClient] {
                with_bytes(conn, dir, stream, &mut self.sink, |r, out| r.finish(out));
            }
            match &mut conn.state {
                State::Rpc(c) => c.finish(stream, &mut self.sink),
                State::Smb2(c) => c.finish(stream, &mut self.sink),
                State::Iscsi(c) => c.finish(stream, &mut self.sink),
            }
            if conn.log.requested() {
                self.sink.tcp_log(stream, std::mem::take(&mut conn.log));
            }
        }
        if let Some(at) = self.last_storage {
            self.sink.tcp_last(at.frame, at.ts);
        }
    }

    /// The slot of the connection's state, opened on its first segment if its port maps to
    /// a parser; `None` if it is not storage. At most one hash lookup per segment, none when
    /// the stream is in the recent cache.
    #[inline]
    fn open(&mut self, a: &SegmentAnalysis) -> Option<usize> {
        match self.recent.get(a.stream) {
            Some(SKIPPED) => None,
            // Checked: a slot moves when a connection before it is removed.
            Some(slot) if self.conns.get(slot).is_some_and(|c| c.stream == a.stream) => Some(slot),
            _ => self.open_slow(a),
        }
    }

    /// [`Tracker::open`] past the recent cache (out of line: rare in bulk traffic).
    #[inline(never)]
    fn open_slow(&mut self, a: &SegmentAnalysis) -> Option<usize> {
        use std::collections::hash_map::Entry;
        let slot = match self.slots.entry(a.stream) {
            Entry::Occupied(o) => *o.get(),
            Entry::Vacant(v) => {
                if self.skip.contains(&a.stream) {
                    self.recent.set(a.stream, SKIPPED);
                    return None;
                }
                let Some(decoder) = self.cfg.decoder(a) else {
                    self.skip.insert(a.stream);
                    self.recent.set(a.stream, SKIPPED);
                    return None;
                };
                let max = self.cfg.max_outstanding;
                let state = match decoder {
                    Decoder::Rpc => State::Rpc(RpcConn::new(max)),
                    Decoder::Smb2 => State::Smb2(Smb2Conn::new(max)),
                    Decoder::Iscsi => State::Iscsi(IscsiConn::new(max)),
                };
                let cap = self.cfg.reassembly_cap;
                self.conns.push(Conn {
                    stream: a.stream,
                    data_seen: [false; 2],
                    finished: false,
                    fin_at: [None; 2],
                    log: TcpLog::default(),
                    sides: [Side::new(cap), Side::new(cap)],
                    state,
                });
                *v.insert(self.conns.len() - 1)
            }
        };
        self.recent.set(a.stream, slot);
        Some(slot)
    }
}

/// Streams in [`Recent`] (a power of two, 64 KB: the few thousand connections a busy
/// storage server keeps open, numbered in order, do not collide).
const RECENT: usize = 4096;
/// A [`Recent`] slot meaning "not parsed" (final: a skipped stream is never parsed again).
const SKIPPED: usize = usize::MAX;

/// A direct-mapped cache of recent streams (by their low bits) and their slots in
/// [`Tracker::conns`] or [`SKIPPED`]: bulk traffic interleaves a few dozen connections, and a
/// hash lookup per segment was a fifth of the tracker's time. Stream numbers are dense, so
/// the live connections rarely collide. A slot read from it must be checked against `conns`.
#[derive(Debug)]
struct Recent(Box<[(StreamId, usize); RECENT]>);

impl Recent {
    fn new() -> Self {
        // Stream 0 in slot 0 would be right if it held anything: a check against `conns`
        // tells.
        Self(Box::new([(StreamId(0), 0); RECENT]))
    }

    fn get(&self, stream: StreamId) -> Option<usize> {
        let (s, slot) = *self.0.get(stream.0 as usize % RECENT)?;
        (s == stream).then_some(slot)
    }

    fn set(&mut self, stream: StreamId, slot: usize) {
        if let Some(e) = self.0.get_mut(stream.0 as usize % RECENT) {
            *e = (stream, slot);
        }
    }
}

/// The sink a connection's parser pushes into: the tracker's, and a request parsed marks
/// the connection's TCP log to be kept.
struct ConnSink<'a, S> {
    sink: &'a mut S,
    log: &'a mut TcpLog,
}

impl<S: StorageSink> StorageSink for ConnSink<'_, S> {
    fn transaction(&mut self, t: &Transaction) {
        self.sink.transaction(t);
    }
    fn notice(&mut self, n: &Notice) {
        self.sink.notice(n);
    }
    fn request(&mut self, r: &Request) {
        self.log.request();
        self.sink.request(r);
    }
    fn start(&mut self, ts: tcpdx_wire::Timestamp) {
        self.sink.start(ts);
    }
    fn tcp_log(&mut self, stream: StreamId, log: TcpLog) {
        self.sink.tcp_log(stream, log);
    }
    fn tcp_last(&mut self, frame: FrameNo, ts: tcpdx_wire::Timestamp) {
        self.sink.tcp_last(frame, ts);
    }
}

/// Runs `f` with `dir`'s reassembler and a byte sink feeding that direction's parser.
fn with_bytes<S: StorageSink>(
    conn: &mut Conn,
    dir: Dir,
    stream: StreamId,
    sink: &mut S,
    f: impl FnOnce(&mut Reassembler, &mut dyn ByteSink),
) {
    let Conn {
        sides, state, log, ..
    } = conn;
    let Side { reasm, framer } = dir.of_mut(sides);
    let sink = &mut ConnSink { sink, log };
    // One arm per protocol: the handler types differ, the plumbing does not.
    macro_rules! run {
        ($handler:ident, $c:expr) => {{
            let mut h = $handler {
                conn: $c,
                dir,
                stream,
                sink,
            };
            f(
                reasm,
                &mut Framed {
                    framer,
                    handler: &mut h,
                },
            );
        }};
    }
    match state {
        State::Rpc(c) => run!(RpcDir, c),
        State::Smb2(c) => run!(Smb2Dir, c),
        State::Iscsi(c) => run!(IscsiDir, c),
    }
}

/// A segment the snap length cut, continuing a direction whose framing is lost: true if no
/// message can start in its captured bytes, which are then only counted, as reassembly and
/// framing would count them ([`Reassembler::continues_cut`], [`Framer::skip_cut`]); false,
/// changing nothing, for any other segment. This keeps a bulk transfer captured with a short
/// snap length, where nothing can be parsed, off the per-byte path, and leaves that state
/// as soon as a full payload, a hole or a plausible message start shows.
fn skip_cut<S: StorageSink>(
    conn: &mut Conn,
    a: &SegmentAnalysis,
    payload: &[u8],
    at: At,
    sink: &mut S,
) -> bool {
    let captured = payload.get(..a.len as usize).unwrap_or(payload);
    let Conn {
        sides, state, log, ..
    } = conn;
    let (dir, stream, len) = (a.dir, a.stream, u64::from(a.len));
    let Side { reasm: r, framer } = dir.of_mut(sides);
    if !r.continues_cut(a.seq, a.len, captured.len()) {
        return false;
    }
    let sink = &mut ConnSink { sink, log };
    // One arm per protocol, as in `with_bytes`.
    macro_rules! skip {
        ($handler:ident, $c:expr) => {
            framer.skip_cut(
                captured,
                len,
                &$handler {
                    conn: $c,
                    dir,
                    stream,
                    sink,
                },
            )
        };
    }
    let skipped = match state {
        State::Rpc(c) => skip!(RpcDir, c),
        State::Smb2(c) => skip!(Smb2Dir, c),
        State::Iscsi(c) => skip!(IscsiDir, c),
    };
    if skipped {
        r.pass_cut(a.len, captured.len(), at);
    }
    skipped
}

impl<S: StorageSink> EventSink for Tracker<S> {
    fn segment_detail(&mut self, a: &SegmentAnalysis, _d: &SegmentDetail) {
        if !self.started {
            self.started = true;
            self.sink
                .start(tcpdx_wire::Timestamp(a.ts.0 - a.rel_time_ns));
        }
        self.last_ts = Some(a.ts);
        let stream = a.stream;
        let flags = TcpFlags(a.tcp_flags);
        let Some(slot) = self.open(a) else {
            return;
        };
        let Some(conn) = self.conns.get_mut(slot) else {
            return;
        };
        self.last_storage = Some(At {
            frame: a.frame,
            ts: a.ts,
        });
        if conn.log.may_forget_before(a.ts.0) {
            // No request can start before this segment, or before bytes held out of order,
            // which a later segment may release as they were (a hole declared lost).
            let held = conn
                .sides
                .iter()
                .filter_map(|s| s.reasm.oldest_held_ts())
                .min();
            conn.log
                .forget_before(held.map_or(a.ts.0, |h| h.min(a.ts.0)));
        }
        conn.log.segment(a);
        if flags.syn() && !*a.dir.of(&conn.data_seen) {
            let side = a.dir.of_mut(&mut conn.sides);
            side.reasm.syn(a.seq);
            side.framer = Framer::new(true);
        }
        if flags.ack() {
            let rev = a.dir.rev();
            // Nearly always nothing is held out of order: no parser to set up then.
            if !rev.of_mut(&mut conn.sides).reasm.peer_acked_idle(a.ack) {
                with_bytes(conn, rev, stream, &mut self.sink, |r, out| {
                    r.peer_acked(a.ack, out)
                });
            }
        }
        if flags.fin() {
            *a.dir.of_mut(&mut conn.fin_at) = Some(a.seq + u64::from(a.len));
        }
        // A segment with data is judged after its payload.
        if a.len == 0 {
            self.retire_if_over(slot);
        }
    }

    /// Flows are not read at all.
    fn needs_flow_stats(&self) -> bool {
        false
    }
    fn needs_flows(&self) -> bool {
        false
    }

    fn payload(&mut self, a: &SegmentAnalysis, payload: &[u8]) {
        let stream = a.stream;
        let Some(slot) = self.open(a) else {
            return;
        };
        let Some(conn) = self.conns.get_mut(slot) else {
            return;
        };
        *a.dir.of_mut(&mut conn.data_seen) = true;
        let at = At {
            frame: a.frame,
            ts: a.ts,
        };
        #[cfg(test)]
        let skip = !self.no_skip;
        #[cfg(not(test))]
        let skip = true;
        if !(skip && skip_cut(conn, a, payload, at, &mut self.sink)) {
            with_bytes(conn, a.dir, stream, &mut self.sink, |r, out| {
                r.segment(a.seq, a.len, payload, at, out)
            });
        }
        self.retire_if_over(slot);
    }
}

#[cfg(test)]
mod tests;
