//! `max_flows`: the least recently active connection is evicted, summarised and counted;
//! when it resumes it keeps its stream index and relative numbering.

use std::net::{IpAddr, Ipv4Addr};

use tcpdx_core::{
    Analyzer, AnalyzerConfig, Endpoint, EventSink, FlowSummary, Segment, SegmentAnalysis,
};
use tcpdx_wire::{FrameNo, SeqNum, TcpFlags, TcpOptions, Timestamp};

fn ep(a: u8, port: u16) -> Endpoint {
    Endpoint {
        addr: IpAddr::V4(Ipv4Addr::new(10, 0, 0, a)),
        port,
    }
}

/// Client port `p` to server 10.0.0.2:80, raw numbers.
fn seg(frame: u64, p: u16, from_client: bool, seq: u32, ack: u32, flags: u16, len: u32) -> Segment {
    let (c, s) = (ep(1, p), ep(2, 80));
    let (src, dst) = if from_client { (c, s) } else { (s, c) };
    Segment {
        frame: FrameNo(frame),
        ts: Timestamp(1_000_000 * frame as i64),
        src,
        dst,
        seq: SeqNum(seq),
        ack: SeqNum(ack),
        flags: TcpFlags(flags),
        window: 1000,
        len,
        ip_id: 0,
        ttl: 64,
        captured: 0,
        options: TcpOptions::default(),
    }
}

#[derive(Default)]
struct Sink {
    rows: Vec<SegmentAnalysis>,
    evicted: Vec<FlowSummary>,
    flows: Vec<FlowSummary>,
    /// Declines the flow statistics ([`EventSink::needs_flow_stats`]).
    no_stats: bool,
}

impl EventSink for Sink {
    fn needs_flow_stats(&self) -> bool {
        !self.no_stats
    }
    fn segment(&mut self, a: &SegmentAnalysis) {
        self.rows.push(*a);
    }
    fn flow(&mut self, f: &FlowSummary) {
        self.flows.push(f.clone());
    }
    fn flow_evicted(&mut self, f: &FlowSummary) {
        self.evicted.push(f.clone());
    }
}

const SYN: u16 = TcpFlags::SYN;
const SYN_ACK: u16 = TcpFlags::SYN | TcpFlags::ACK;
const ACK: u16 = TcpFlags::ACK;

/// Handshake plus 100 bytes from the client on port `p` (frames `f..f+4`).
fn open(a: &mut Analyzer, s: &mut Sink, f: u64, p: u16) {
    for x in [
        seg(f, p, true, 1000, 0, SYN, 0),
        seg(f + 1, p, false, 5000, 1001, SYN_ACK, 0),
        seg(f + 2, p, true, 1001, 5001, ACK, 0),
        seg(f + 3, p, true, 1001, 5001, ACK, 100),
    ] {
        a.handle_segment(&x, s);
    }
}

fn cfg(max_flows: usize, remembered: usize) -> AnalyzerConfig {
    let mut c = AnalyzerConfig::default();
    c.max_flows = max_flows;
    c.max_evicted_remembered = remembered;
    c
}

#[test]
fn least_recently_active_is_evicted_and_resumes_with_its_stream() {
    let mut a = Analyzer::new(cfg(2, 10));
    let mut s = Sink::default();
    open(&mut a, &mut s, 1, 40000); // stream 0
    open(&mut a, &mut s, 5, 40001); // stream 1
    // Stream 0 is active again: stream 1 is now the least recently active.
    a.handle_segment(&seg(9, 40000, false, 5001, 1101, ACK, 0), &mut s);
    open(&mut a, &mut s, 10, 40002); // stream 2 evicts stream 1
    assert_eq!(a.stats().evicted_flows, 1);
    assert_eq!(s.evicted.len(), 1);
    assert_eq!(s.evicted[0].stream.0, 1);
    assert_eq!(s.evicted[0].dirs[0].bytes, 100);
    // Stream 1 resumes (evicting stream 0): same stream index, relative numbers go on.
    a.handle_segment(&seg(14, 40001, true, 1101, 5001, ACK, 50), &mut s);
    let last = s.rows.last().unwrap();
    assert_eq!((last.stream.0, last.seq, last.ack), (1, 101, 1));
    assert_eq!(a.stats().resumed_flows, 1);
    assert_eq!(a.stats().evicted_flows, 2);
    assert_eq!(s.evicted[1].stream.0, 0);
    assert_eq!(a.connections().len(), 2, "--max-flows 2");
    a.handle_end(&mut s);
    let streams: Vec<u32> = s.flows.iter().map(|f| f.stream.0).collect();
    assert_eq!(
        streams,
        [1, 2],
        "tracked connections at the end, in stream order"
    );
    assert_eq!(s.flows[0].dirs[0].bytes, 50, "the resumed part only");
    assert!(a.connections().is_empty(), "freed once summarised");
}

#[test]
fn forgotten_connection_gets_a_new_stream() {
    let mut a = Analyzer::new(cfg(1, 0));
    let mut s = Sink::default();
    open(&mut a, &mut s, 1, 40000);
    open(&mut a, &mut s, 5, 40001);
    a.handle_segment(&seg(9, 40000, true, 1101, 5001, ACK, 10), &mut s);
    let last = s.rows.last().unwrap();
    assert_eq!(last.stream.0, 2);
    assert_eq!(a.stats().forgotten_flows, 2);
    assert_eq!(a.stats().resumed_flows, 0);
}

#[test]
fn new_syn_on_an_evicted_tuple_is_a_new_stream() {
    let mut a = Analyzer::new(cfg(1, 10));
    let mut s = Sink::default();
    open(&mut a, &mut s, 1, 40000);
    open(&mut a, &mut s, 5, 40001);
    // Port reuse: a SYN with another ISN on the evicted tuple.
    a.handle_segment(&seg(9, 40000, true, 777_777, 0, SYN, 0), &mut s);
    let last = s.rows.last().unwrap();
    assert_eq!(last.stream.0, 2);
    assert_eq!(last.flags.to_string(), "reused_ports");
    // The same SYN again (a retransmitted SYN) stays on it.
    a.handle_segment(&seg(10, 40000, true, 777_777, 0, SYN, 0), &mut s);
    assert_eq!(s.rows.last().unwrap().stream.0, 2);
}

#[test]
fn memory_is_bounded_by_max_flows() {
    let mut a = Analyzer::new(cfg(100, 100));
    let mut s = Sink::default();
    for i in 0..10_000u32 {
        let p = 1024 + (i % 60_000) as u16;
        let c = ep(1 + (i / 60_000) as u8, p);
        let mut x = seg(u64::from(i) + 1, p, true, i, 0, SYN, 0);
        x.src = c;
        a.handle_segment(&x, &mut s);
    }
    assert_eq!(a.connections().len(), 100);
    assert_eq!(a.stats().evicted_flows, 9_900);
    assert_eq!(s.rows.last().unwrap().stream.0, 9_999);
}

/// fuzz/analyzer crash 9d4e918d: a SYN-ACK with a new ISN on an evicted connection resumes
/// it (same stream) but must restart the sender's relative numbering at 0, as on a tracked one.
#[test]
fn synack_with_new_isn_on_an_evicted_tuple_restarts_numbering() {
    let mut a = Analyzer::new(cfg(1, 10));
    let mut s = Sink::default();
    open(&mut a, &mut s, 1, 40000);
    // Server data far from its base, so that the kept hint is far from 0.
    a.handle_segment(
        &seg(5, 40000, false, 5001 + 3_000_000_000, 1101, ACK, 10),
        &mut s,
    );
    open(&mut a, &mut s, 6, 40001);
    a.handle_segment(&seg(10, 40000, false, 900_000, 1101, SYN_ACK, 0), &mut s);
    let last = s.rows.last().unwrap();
    assert_eq!(last.stream.0, 0, "resumed");
    assert!(last.flags.to_string().contains("reused_ports"));
    assert_eq!(last.seq, 0, "new ISN is relative 0");
}

/// A closed connection's RTT reservoir is reduced to its quantiles once it has been idle
/// for `freeze_closed_ns`; its summary is unchanged by that.
#[test]
fn closed_connection_rtt_reservoir_is_frozen_with_the_same_summary() {
    const FIN_ACK: u16 = TcpFlags::FIN | TcpFlags::ACK;
    let mut a = Analyzer::new(AnalyzerConfig::default());
    let mut s = Sink::default();
    open(&mut a, &mut s, 1, 4000);
    // The server acknowledges the data (an RTT sample), then both sides close.
    for x in [
        seg(5, 4000, false, 5001, 1101, ACK, 0),
        seg(6, 4000, true, 1101, 5001, FIN_ACK, 0),
        seg(7, 4000, false, 5001, 1102, FIN_ACK, 0),
        seg(8, 4000, true, 1102, 5002, ACK, 0),
    ] {
        a.handle_segment(&x, &mut s);
    }
    let summary = |a: &Analyzer| a.connections()[0].summary();
    let before = summary(&a);
    assert!(before.dirs[0].rtt.is_some(), "{before:?}");
    let frozen = |a: &Analyzer| a.connections()[0].stats.iter().all(|d| d.rtt().is_frozen());
    // Not idle long enough yet.
    a.sweep(Timestamp(8_000_000 + 500_000_000));
    assert!(!frozen(&a));
    a.sweep(Timestamp(8_000_000 + 2_000_000_000));
    assert!(frozen(&a));
    assert_eq!(summary(&a), before);
}

#[test]
fn a_sink_declining_flow_stats_gets_the_same_rows_and_bare_summaries() {
    let run = |no_stats: bool| {
        let mut a = Analyzer::new(cfg(2, 10));
        let mut s = Sink {
            no_stats,
            ..Sink::default()
        };
        open(&mut a, &mut s, 1, 40000);
        open(&mut a, &mut s, 5, 40001);
        a.handle_segment(&seg(9, 40000, false, 5001, 1101, ACK, 0), &mut s);
        open(&mut a, &mut s, 10, 40002); // evicts stream 1
        a.handle_segment(&seg(14, 40000, true, 1101, 5001, ACK, 70), &mut s);
        a.handle_end(&mut s);
        s
    };
    let (full, bare) = (run(false), run(true));
    assert_eq!(full.rows, bare.rows);
    let all =
        |s: &Sink| -> Vec<FlowSummary> { s.evicted.iter().chain(&s.flows).cloned().collect() };
    let (full, bare) = (all(&full), all(&bare));
    assert_eq!(full.len(), 3);
    assert_eq!(full.len(), bare.len());
    for (f, b) in full.iter().zip(&bare) {
        // Who and when are kept; the counters are not.
        assert_eq!(
            (f.stream, f.first_ts, f.last_ts),
            (b.stream, b.first_ts, b.last_ts)
        );
        for (fd, bd) in f.dirs.iter().zip(&b.dirs) {
            assert_eq!((fd.src, fd.dst), (bd.src, bd.dst));
            assert!(fd.packets > 0, "{f:?}");
            assert_eq!((bd.packets, bd.bytes), (0, 0), "{b:?}");
        }
    }
}
