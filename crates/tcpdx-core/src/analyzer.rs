//! `Analyzer`: the sans-IO entry point. Frames in (capture order), events out.
//!
//! Calling order: `handle_frame` (or `handle_segment` for hand-built input) for every
//! frame in capture order, then `handle_end` once. Time comes only from the frames.

use tcpdx_wire::{Frame, Timestamp, decode};

use crate::config::AnalyzerConfig;
use crate::event::{AnalysisFlags as F, EventSink, Warning};
use crate::flow::{FlowKey, FlowTable, Lookup};
use crate::segment::Segment;
use crate::tcp::Connection;

/// Counters about the input, for the CLI's summary line and tests.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct InputStats {
    /// Frames handled.
    pub frames: u64,
    /// Frames with an analysable TCP segment.
    pub tcp_segments: u64,
    /// IP fragments (not analysed).
    pub fragments: u64,
    /// Frames whose decoding stopped before reaching TCP for a reason other than "not TCP".
    pub undecodable: u64,
    /// Connections whose heavy state was expired.
    pub expired: u64,
    /// Segments not tracked because a per-connection cap was hit.
    pub capped_segments: u64,
    /// Frames with a TCP header that identifies a connection but cannot be analysed.
    pub partial_tcp: u64,
}

/// Feeds frames in capture order; emits analysis into a sink. Never fails, never blocks.
#[derive(Debug)]
pub struct Analyzer {
    cfg: AnalyzerConfig,
    table: FlowTable,
    conns: Vec<Connection>,
    first_ts: Option<Timestamp>,
    stats: InputStats,
    since_sweep: u64,
}

impl Analyzer {
    /// A new analyzer.
    pub fn new(cfg: AnalyzerConfig) -> Self {
        Self {
            cfg,
            table: FlowTable::new(),
            conns: Vec::new(),
            first_ts: None,
            stats: InputStats::default(),
            since_sweep: 0,
        }
    }

    /// Input counters so far.
    pub fn stats(&self) -> &InputStats {
        &self.stats
    }

    /// Connections seen so far, in stream order.
    pub fn connections(&self) -> &[Connection] {
        &self.conns
    }

    /// Handles one captured frame (any protocol: non-TCP frames only count).
    pub fn handle_frame<S: EventSink>(&mut self, frame: &Frame<'_>, sink: &mut S) {
        self.first_ts.get_or_insert(frame.ts);
        self.stats.frames += 1;
        let view = decode(frame.link, frame.data, frame.orig_len);
        if view.ip.is_some_and(|ip| ip.fragment) {
            self.stats.fragments += 1;
        }
        match Segment::from_view(frame.no, frame.ts, &view) {
            Some(seg) => self.handle_segment(&seg, sink),
            None if view.partial_tcp.is_some_and(|p| !p.ip.fragment) => {
                // Not analysable, but Wireshark gives it a stream (and may open one).
                if let Some(p) = view.partial_tcp {
                    self.connection_for(&Segment::from_partial(frame.no, frame.ts, &p));
                }
                self.stats.partial_tcp += 1;
                self.maybe_sweep(frame.ts);
            }
            None => {
                if view
                    .stop
                    .is_some_and(|s| !matches!(s.kind, tcpdx_wire::StopKind::NotIp))
                {
                    self.stats.undecodable += 1;
                }
                self.maybe_sweep(frame.ts);
            }
        }
    }

    /// Handles one already-decoded segment: the entry point for hand-built tests.
    pub fn handle_segment<S: EventSink>(&mut self, seg: &Segment, sink: &mut S) {
        let first = *self.first_ts.get_or_insert(seg.ts);
        self.stats.tcp_segments += 1;
        let (slot, initial) = self.connection_for(seg);
        let conn = &mut self.conns[slot];
        let (row, verdict) = conn.handle_segment(seg, initial, seg.ts.since(first), &self.cfg);
        if verdict.unacked_cap_hit {
            self.stats.capped_segments += 1;
            if !conn.cap_warned {
                conn.cap_warned = true;
                sink.warning(&Warning::StateCapReached {
                    stream: conn.stream,
                    what: "unacked segments",
                });
            }
        }
        conn.expired = false;
        let detail = conn.detail(seg, &row);
        sink.segment_detail(&row, &detail);
        self.maybe_sweep(seg.ts);
    }

    /// Finds (or opens) the connection of `seg` the way Wireshark assigns `tcp.stream`;
    /// returns its slot and the flags decided here (reused ports).
    fn connection_for(&mut self, seg: &Segment) -> (usize, F) {
        let (key, _) = FlowKey::new(seg.src, seg.dst);
        let mut initial = F::default();
        let slot = match self.table.lookup(&key) {
            Lookup::Missing => self.new_connection(key, seg),
            Lookup::Existing(slot) => {
                let conn = &self.conns[slot];
                let dir = conn.dir_of(&seg.src);
                let fwd = &conn.halves[dir.idx()];
                let differs = fwd.base_set && seg.seq != fwd.base_seq;
                let (syn, ack) = (seg.flags.syn(), seg.flags.ack());
                // Wireshark: a SYN with a new ISN on a known 4-tuple starts a new
                // conversation; a SYN-ACK with a new ISN is flagged and restarts the
                // sender's relative numbering.
                if syn && differs {
                    initial.set(F::REUSED_PORTS);
                }
                if syn && !ack && differs {
                    self.new_connection(key, seg)
                } else {
                    if syn && differs {
                        // New relative numbering for the sender (and for the peer's ACKs
                        // of it): unwrapping must not continue from the old numbering.
                        let halves = &mut self.conns[slot].halves;
                        halves[dir.idx()].base_seq = seg.seq;
                        halves[dir.idx()].rel_seq_hint = 0;
                        halves[dir.rev().idx()].rel_ack_hint = 0;
                    }
                    slot
                }
            }
        };
        (slot, initial)
    }

    fn new_connection(&mut self, key: FlowKey, seg: &Segment) -> usize {
        let slot = self.conns.len();
        let stream = self.table.bind(key, slot);
        self.conns.push(Connection::new(stream, key, seg));
        slot
    }

    /// Capture time has reached `now`: free the state of idle and closed connections.
    fn maybe_sweep(&mut self, now: Timestamp) {
        self.since_sweep += 1;
        if self.since_sweep < self.cfg.sweep_every_frames {
            return;
        }
        self.since_sweep = 0;
        for c in self.conns.iter_mut().filter(|c| !c.expired) {
            let idle = now.since(c.last_ts);
            let limit = if c.is_closed() {
                self.cfg.expire_closed_ns
            } else {
                self.cfg.expire_idle_ns
            };
            if idle > limit {
                c.expire();
                self.stats.expired += 1;
            }
        }
    }

    /// End of input: emits every connection's summary, in stream order.
    pub fn handle_end<S: EventSink>(&mut self, sink: &mut S) {
        for c in &self.conns {
            sink.flow(&c.summary());
        }
    }
}
