//! `Analyzer`: the sans-IO entry point. Frames in (capture order), events out.
//!
//! Calling order: `handle_frame` (or `handle_segment` for hand-built input) for every
//! frame in capture order, then `handle_end` once. Time comes only from the frames.

use tcpdx_wire::{Frame, Timestamp};

use crate::config::AnalyzerConfig;
use crate::event::{AnalysisFlags as F, EventSink, Warning};
use crate::flow::{Dir, Evicted, EvictedFlows, FlowKey, FlowTable, Lookup, Lru};
use crate::segment::{FrameInput, Segment};
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
    /// Connections evicted because `max_flows` were tracked at once.
    pub evicted_flows: u64,
    /// Evicted connections that came back and kept their stream index.
    pub resumed_flows: u64,
    /// Evicted connections forgotten (a later segment of theirs opens a new stream).
    pub forgotten_flows: u64,
}

impl InputStats {
    /// Adds another analyzer's counters (frames split between analyzers).
    pub fn add(&mut self, o: &InputStats) {
        self.frames += o.frames;
        self.tcp_segments += o.tcp_segments;
        self.fragments += o.fragments;
        self.undecodable += o.undecodable;
        self.expired += o.expired;
        self.capped_segments += o.capped_segments;
        self.partial_tcp += o.partial_tcp;
        self.evicted_flows += o.evicted_flows;
        self.resumed_flows += o.resumed_flows;
        self.forgotten_flows += o.forgotten_flows;
    }
}

/// Feeds frames in capture order; emits analysis into a sink. Never fails, never blocks.
#[derive(Debug)]
pub struct Analyzer {
    cfg: AnalyzerConfig,
    table: FlowTable,
    /// Tracked connections by slot (slots are reused after eviction, so not in stream order).
    conns: Vec<Connection>,
    /// Slots by last activity, for eviction.
    lru: Lru,
    evicted: EvictedFlows,
    first_ts: Option<Timestamp>,
    stats: InputStats,
    since_sweep: u64,
    /// Where [`Self::handle_frame`] decodes frames.
    scratch: Option<Box<FrameInput>>,
}

impl Analyzer {
    /// A new analyzer.
    pub fn new(mut cfg: AnalyzerConfig) -> Self {
        cfg.max_flows = cfg.max_flows.clamp(1, Lru::MAX_SLOTS);
        Self {
            evicted: EvictedFlows::new(cfg.max_evicted_remembered),
            cfg,
            table: FlowTable::new(),
            conns: Vec::new(),
            lru: Lru::default(),
            first_ts: None,
            stats: InputStats::default(),
            since_sweep: 0,
            scratch: None,
        }
    }

    /// Input counters so far.
    pub fn stats(&self) -> &InputStats {
        &self.stats
    }

    /// Connections tracked now (evicted ones are gone, and all once [`Self::handle_end`]
    /// ran), in no particular order.
    pub fn connections(&self) -> &[Connection] {
        &self.conns
    }

    /// Handles one captured frame (any protocol: non-TCP frames only count).
    #[inline]
    pub fn handle_frame<S: EventSink>(&mut self, frame: &Frame<'_>, sink: &mut S) {
        // Decoded into the same place every time (see `FrameInput::decode_from`).
        let mut input = self
            .scratch
            .take()
            .unwrap_or_else(|| Box::new(FrameInput::EMPTY));
        let payload = input.decode_from(frame);
        self.handle_input_with_payload(&input, payload, sink);
        self.scratch = Some(input);
    }

    /// Handles one frame already decoded by [`FrameInput::classify`] (possibly on another
    /// thread); no payload reaches the sink.
    pub fn handle_input<S: EventSink>(&mut self, input: &FrameInput, sink: &mut S) {
        self.handle_input_with_payload(input, &[], sink);
    }

    /// [`Self::handle_input`] with the segment's captured payload for the sink's `payload`
    /// hook (a caller that decoded the frame elsewhere and kept the bytes).
    pub fn handle_input_with_payload<S: EventSink>(
        &mut self,
        input: &FrameInput,
        payload: &[u8],
        sink: &mut S,
    ) {
        self.first_ts.get_or_insert(input.ts());
        self.stats.frames += 1;
        match input {
            FrameInput::Segment(seg) => self.analyze_segment(seg, payload, sink),
            FrameInput::Partial(seg) => {
                self.connection_for(seg, sink);
                self.stats.partial_tcp += 1;
                self.maybe_sweep(seg.ts);
            }
            FrameInput::Other {
                ts,
                fragment,
                undecodable,
                ..
            } => {
                self.stats.fragments += u64::from(*fragment);
                self.stats.undecodable += u64::from(*undecodable);
                self.maybe_sweep(*ts);
            }
        }
    }

    /// Sets the capture's first timestamp (the origin of relative times) when frames are
    /// split between several analyzers; a no-op once a frame was handled.
    pub fn set_origin(&mut self, ts: Timestamp) {
        self.first_ts.get_or_insert(ts);
    }

    /// Handles one already-decoded segment: the entry point for hand-built tests.
    pub fn handle_segment<S: EventSink>(&mut self, seg: &Segment, sink: &mut S) {
        self.analyze_segment(seg, &[], sink);
    }

    /// Like [`Self::handle_segment`], with the segment's captured payload for the sink's
    /// `payload` hook (hand-built byte streams for the storage layer's tests and fuzzing).
    pub fn handle_segment_with_payload<S: EventSink>(
        &mut self,
        seg: &Segment,
        payload: &[u8],
        sink: &mut S,
    ) {
        self.analyze_segment(seg, payload, sink);
    }

    /// Analyses `seg`, then hands its captured `payload` (if any) to the sink.
    fn analyze_segment<S: EventSink>(&mut self, seg: &Segment, payload: &[u8], sink: &mut S) {
        let first = *self.first_ts.get_or_insert(seg.ts);
        self.stats.tcp_segments += 1;
        let (slot, initial) = self.connection_for(seg, sink);
        let Some(conn) = self.conns.get_mut(slot) else {
            return;
        };
        // Read in place: moving the row out of the returned pair copied it (152 bytes read
        // right after being written field by field, which stalled on store forwarding: 8%
        // of `diagnose`'s time on a bulk capture).
        let stats = sink.needs_flow_stats();
        let analyzed = conn.handle_segment(seg, initial, seg.ts.since(first), &self.cfg, stats);
        let (row, verdict) = (&analyzed.0, &analyzed.1);
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
        let detail = conn.detail(seg, row);
        sink.segment_detail(row, &detail);
        if row.len > 0 {
            sink.payload(row, payload);
        }
        self.maybe_sweep(seg.ts);
    }

    /// Finds (or opens) the connection of `seg` the way Wireshark assigns `tcp.stream`;
    /// returns its slot and the flags decided here (reused ports).
    // Always inlined, as is `Connection::handle_segment`: once a packet, from one place;
    // out of line, the key and the analysed row went through memory (`flows` and
    // `events` executed 10-12% more instructions with the reading and decoding ones).
    #[inline(always)]
    fn connection_for<S: EventSink>(&mut self, seg: &Segment, sink: &mut S) -> (usize, F) {
        let (key, _) = FlowKey::new(seg.src, seg.dst);
        let mut initial = F::default();
        let (syn, ack) = (seg.flags.syn(), seg.flags.ack());
        let slot = match self.table.lookup(&key, holds(&self.conns, &key)) {
            Lookup::Missing => match self.evicted.take(&key) {
                Some(e) => {
                    let dir = if seg.src == e.client {
                        Dir::ClientToServer
                    } else {
                        Dir::ServerToClient
                    };
                    let differs = dir.of(&e.base).is_some_and(|b| b != seg.seq);
                    // Same rules as for a tracked connection (below).
                    if syn && differs {
                        initial.set(F::REUSED_PORTS);
                    }
                    if syn && !ack && differs {
                        self.new_connection(key, seg, None, sink)
                    } else {
                        self.stats.resumed_flows += 1;
                        let slot = self.new_connection(key, seg, Some(e), sink);
                        if syn
                            && differs
                            && let Some(conn) = self.conns.get_mut(slot)
                        {
                            conn.restart_numbering(dir, seg.seq);
                        }
                        slot
                    }
                }
                None => self.new_connection(key, seg, None, sink),
            },
            Lookup::Existing(slot) => {
                let Some(conn) = self.conns.get(slot) else {
                    return (slot, initial);
                };
                let dir = conn.dir_of(&seg.src);
                let fwd = dir.of(&conn.halves);
                let differs = fwd.base_set && seg.seq != fwd.base_seq;
                // Wireshark: a SYN with a new ISN on a known 4-tuple starts a new
                // conversation; a SYN-ACK with a new ISN is flagged and restarts the
                // sender's relative numbering.
                if syn && differs {
                    initial.set(F::REUSED_PORTS);
                }
                if syn && !ack && differs {
                    self.new_connection(key, seg, None, sink)
                } else {
                    if syn
                        && differs
                        && let Some(conn) = self.conns.get_mut(slot)
                    {
                        conn.restart_numbering(dir, seg.seq);
                    }
                    slot
                }
            }
        };
        self.lru.touch(slot);
        (slot, initial)
    }

    /// Opens a connection for `seg` (resuming an evicted one when `resumed` is given), in a
    /// new slot or, when `max_flows` are tracked, in the least recently active one's.
    fn new_connection<S: EventSink>(
        &mut self,
        key: FlowKey,
        seg: &Segment,
        resumed: Option<Evicted>,
        sink: &mut S,
    ) -> usize {
        let slot = self.free_slot(sink);
        let conn = match resumed {
            Some(e) => {
                self.table.rebind(key, slot);
                Connection::resume(key, seg, &e)
            }
            None => {
                let stream = self.table.bind(key, slot);
                sink.stream_opened(stream, seg.frame);
                Connection::new(stream, key, seg)
            }
        };
        match self.conns.get_mut(slot) {
            Some(c) => *c = conn,
            None => self.conns.push(conn),
        }
        slot
    }

    /// A slot for a new connection: a new one below `max_flows`, else the least recently
    /// active connection's, which is evicted (summarised into `sink`, remembered, counted).
    fn free_slot<S: EventSink>(&mut self, sink: &mut S) -> usize {
        if self.conns.len() < self.cfg.max_flows
            && let Some(slot) = self.lru.push()
        {
            return slot;
        }
        let Some(victim) = self.lru.oldest() else {
            return self.conns.len();
        };
        if let Some(c) = self.conns.get(victim) {
            sink.flow_evicted(&c.summary());
            self.stats.evicted_flows += 1;
            // A connection replaced by a newer one on the same 4-tuple is no longer bound.
            if self.table.lookup(&c.key, holds(&self.conns, &c.key)) == Lookup::Existing(victim) {
                self.table.unbind(&c.key);
                self.stats.forgotten_flows += self.evicted.insert(c.key, c.evicted());
            }
        }
        victim
    }

    /// Capture time has reached `now`: free the state of idle and closed connections.
    fn maybe_sweep(&mut self, now: Timestamp) {
        self.since_sweep += 1;
        if self.since_sweep < self.cfg.sweep_every_frames {
            return;
        }
        self.since_sweep = 0;
        self.sweep(now);
    }

    /// Frees the heavy state of connections idle (or closed) for longer than the limits
    /// at capture time `now`. Called every `sweep_every_frames` frames; a caller that splits
    /// frames between analyzers calls it on each at the same points instead.
    pub fn sweep(&mut self, now: Timestamp) {
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
            } else if c.is_closed() && idle > self.cfg.freeze_closed_ns {
                c.freeze_rtt();
            }
        }
    }

    /// End of input: emits every connection's summary, in stream order, and frees the
    /// connections ([`Self::connections`] is empty afterwards).
    pub fn handle_end<S: EventSink>(&mut self, sink: &mut S) {
        // Nothing is looked up after the end, and the connections are summarised once: all
        // is freed here, not when the analyzer is dropped (a caller holds it until every
        // thread is done, while the summaries pile up).
        self.table = FlowTable::new();
        self.evicted = EvictedFlows::new(self.cfg.max_evicted_remembered);
        self.lru = Lru::default();
        let conns = std::mem::take(&mut self.conns);
        if !sink.needs_flows() {
            return;
        }
        let mut order: Vec<&Connection> = conns.iter().collect();
        order.sort_by_key(|c| c.stream);
        for c in order {
            sink.flow(&c.summary());
        }
    }
}

/// Whether the connection in a slot has `key` (what [`FlowTable::lookup`] asks of the
/// connections it does not keep).
#[inline(always)]
fn holds<'a>(conns: &'a [Connection], key: &'a FlowKey) -> impl Fn(usize) -> bool + 'a {
    move |s| conns.get(s).is_some_and(|c| c.key == *key)
}
