//! Storage findings: request-limited client vs slow server, and stalls at a timer.

use std::collections::BTreeMap;

use tcpdx_core::{AnalysisFlags as F, Dir, SegmentAnalysis, StreamId};
use tcpdx_detect::{CapturePoint, ConnInference, Diagnosis, Finding, FindingKind, Severity};
use tcpdx_wire::{FrameNo, Timestamp};

use super::*;
use crate::reassembly::At;
use crate::tcplog::TcpLog;
use crate::transaction::{Io, IoKind, Proto, Span};

fn conn(stream: u32, rtt_s: f64, path_bps: f64) -> ConnInference {
    ConnInference {
        stream,
        client: "10.0.0.1:700".into(),
        server: "10.0.0.2:2049".into(),
        main_direction: "server_to_client",
        capture_point: CapturePoint::NearClient,
        rtt_s: Some(rtt_s),
        path_bps,
        goodput_bps: path_bps,
        rounds: 10,
        slow_start_rounds: 2,
        congestion_avoidance_rounds: 8,
        max_packets_per_round: 40,
        loss_episodes: 0,
        segments_per_ack: Some(2.0),
        lone_segment_ack_delay_s: None,
    }
}

fn summary(
    outstanding: f64,
    io: f64,
    srt_s: f64,
    xfer_s: f64,
    active_s: f64,
    n: u64,
) -> StreamSummary {
    StreamSummary {
        stream: 0,
        protocol: "nfs",
        transactions: n,
        srt_mean_s: srt_s,
        active_s,
        outstanding_mean: outstanding,
        outstanding_max: outstanding.ceil() as u64,
        bytes_outstanding_mean: outstanding * io,
        bytes_outstanding_max: (outstanding.ceil() * io) as u64,
        io_size_mean: io,
        read_bytes: (n as f64 * io) as u64,
        write_bytes: 0,
        data_srt_mean_s: srt_s,
        data_transactions: n,
        data_reply_transfer_mean_s: xfer_s,
    }
}

fn diag_with(c: ConnInference) -> Diagnosis {
    let mut d = Diagnosis::default();
    let mut healthy = Finding::new(FindingKind::PathLimited, Some(c.stream));
    healthy.severity = Severity::Info;
    d.findings.push(healthy);
    d.connections.push(c);
    d
}

#[test]
fn request_limited_client() {
    // 1 Gb/s path, 20 ms RTT: BDP 2.5 MB. The client keeps 4 x 64 KiB in flight; each
    // READ takes 20.6 ms = RTT + 0.5 ms transfer + 0.1 ms at the server.
    let d = diag_with(conn(0, 0.020, 1e9));
    let s = summary(4.0, 65536.0, 0.0206, 0.0005, 2.0, 400);
    let f = request_pattern(&s, &d).expect("a finding");
    assert_eq!(f.kind, FindingKind::ApplicationLimited);
    assert!(
        f.explanation.starts_with("Request-limited client"),
        "{}",
        f.explanation
    );
    assert!(
        f.explanation.contains("256 KiB in flight"),
        "{}",
        f.explanation
    );
    assert!(f.explanation.contains("2.4 MiB"), "{}", f.explanation);
    assert!(f.severity >= Severity::Major);
    let mut d = d;
    merge(&mut d, f);
    assert_eq!(
        d.findings.len(),
        1,
        "the healthy path-limited finding is dropped"
    );
}

#[test]
fn slow_server() {
    // Same path; each READ takes 60 ms of which 40 ms at the server.
    let d = diag_with(conn(0, 0.020, 1e9));
    let s = summary(4.0, 65536.0, 0.060, 0.0005, 6.0, 400);
    let f = request_pattern(&s, &d).expect("a finding");
    assert!(
        f.explanation.starts_with("Slow server"),
        "{}",
        f.explanation
    );
    assert!(
        f.explanation.contains("39.5 ms at the server"),
        "{}",
        f.explanation
    );
}

#[test]
fn enough_outstanding_is_no_finding() {
    // 48 x 64 KiB = 3 MiB outstanding covers the 2.5 MB BDP; the server is fast.
    let d = diag_with(conn(0, 0.020, 1e9));
    let s = summary(48.0, 65536.0, 0.0206, 0.0005, 2.0, 400);
    assert!(request_pattern(&s, &d).is_none());
    // Too few data operations to judge.
    let s = summary(1.0, 65536.0, 0.0206, 0.0005, 2.0, 3);
    assert!(request_pattern(&s, &d).is_none());
}

fn at(frame: u64, s: f64) -> At {
    At {
        frame: FrameNo(frame),
        ts: Timestamp((s * 1e9) as i64),
    }
}

fn span(frame: u64, s: f64) -> Span {
    Span {
        first: at(frame, s),
        last: at(frame, s),
        bytes: 200,
        repaired: false,
        damaged: false,
    }
}

fn tx(id: u64, op: &'static str, code: u16, req: (u64, f64), rep: (u64, f64)) -> Transaction {
    Transaction {
        stream: StreamId(3),
        proto: Proto::Nfs,
        version: Some(3),
        op,
        op_code: code,
        sub_op: None,
        ops: None,
        id,
        request_dir: Dir::ClientToServer,
        request: span(req.0, req.1),
        reply: Some(span(rep.0, rep.1)),
        interim: None,
        status: Some(0),
        io: Some(Io {
            kind: IoKind::Commit,
            offset: 0,
            len: 0,
            blocks: None,
            stable: None,
            done_stable: None,
            done_len: None,
        }),
        credits: None,
    }
}

fn segment(frame: u64, s: f64, flags: u16) -> SegmentAnalysis {
    crate::tcplog::tests::seg(frame, s, Dir::ClientToServer, 0, flags)
}

/// Logs `segs` per stream, on connections where a request was parsed, and hands the logs
/// and the last segment to `ev`, as a tracker does at the end of input.
fn log_segments(ev: &mut StorageEvidence, segs: &[SegmentAnalysis]) {
    let mut logs: BTreeMap<StreamId, TcpLog> = BTreeMap::new();
    for a in segs {
        let log = logs.entry(a.stream).or_default();
        log.request();
        log.segment(a);
    }
    for (stream, log) in logs {
        ev.tcp_log(stream, log);
    }
    if let Some(a) = segs.last() {
        ev.tcp_last(a.frame, a.ts);
    }
}

/// Ten 10 ms COMMITs, then one of 5.004 s during which the connection is silent.
fn one_long_commit() -> StorageEvidence {
    let mut ev = StorageEvidence::new();
    ev.start(Timestamp(0));
    let mut frame = 1;
    let mut segs = Vec::new();
    for i in 0..10u64 {
        let t0 = i as f64 * 0.1;
        segs.push(segment(frame, t0, 0));
        segs.push(segment(frame + 1, t0 + 0.01, 0));
        ev.transaction(&tx(i, "COMMIT", 21, (frame, t0), (frame + 1, t0 + 0.01)));
        frame += 2;
    }
    segs.push(segment(frame, 1.0, 0));
    segs.push(segment(frame + 1, 6.004, 0));
    ev.transaction(&tx(99, "COMMIT", 21, (frame, 1.0), (frame + 1, 6.004)));
    log_segments(&mut ev, &segs);
    ev
}

#[test]
fn one_held_commit_at_a_timer_is_named_on_the_idle_time_not_a_timer_stall() {
    // With the connection's idle-time finding: the operation and its service time are
    // its evidence; one hold shows no repeating timer.
    let ev = one_long_commit();
    let mut d = Diagnosis::default();
    let mut idle = Finding::new(FindingKind::ApplicationLimited, Some(3));
    idle.cost.seconds = 5.0;
    d.findings.push(idle);
    add_findings(&ev, &mut d);
    assert!(
        d.findings
            .iter()
            .all(|f| f.kind != FindingKind::FixedDurationStall),
        "{:#?}",
        d.findings
    );
    let f = d
        .findings
        .iter()
        .find(|f| f.kind == FindingKind::ApplicationLimited)
        .expect("the idle-time finding");
    assert!(
        f.explanation.contains(
            "the server held 1 operation(s) of 100 ms or more with no window limit meanwhile: COMMIT (id 0x63, frames 21 -> 22) 5.004 s where its median is 10.0 ms."
        ),
        "{}",
        f.explanation
    );
    assert_eq!(f.evidence.len(), 2);
    // Without one (the TCP layer saw no idle time worth a finding): no finding of its own.
    let mut d = Diagnosis::default();
    add_findings(&ev, &mut d);
    assert!(d.findings.is_empty(), "{:#?}", d.findings);
}

/// Ten 10 ms WRITEs, then `n` WRITEs of about 1.2 s starting `every` s apart, with a
/// retransmission in each if `retx`.
fn slow_writes(n: u64, every: f64, retx: bool) -> Diagnosis {
    let mut ev = StorageEvidence::new();
    ev.start(Timestamp(0));
    for i in 0..10u64 {
        let t0 = i as f64 * 0.1;
        ev.transaction(&tx(i, "WRITE", 7, (i * 2 + 1, t0), (i * 2 + 2, t0 + 0.01)));
    }
    let mut segs = Vec::new();
    for k in 0..n {
        let t0 = 2.0 + k as f64 * every;
        segs.push(segment(
            100 + k * 10,
            t0 + 0.3,
            if retx { F::RETRANSMISSION } else { 0 },
        ));
        ev.transaction(&tx(
            50 + k,
            "WRITE",
            7,
            (100 + k * 10, t0),
            (101 + k * 10, t0 + 1.2 + k as f64 * 0.01),
        ));
    }
    log_segments(&mut ev, &segs);
    let mut d = Diagnosis::default();
    add_findings(&ev, &mut d);
    d
}

fn stall(d: &Diagnosis) -> Option<&Finding> {
    d.findings
        .iter()
        .find(|f| f.kind == FindingKind::FixedDurationStall)
}

#[test]
fn equal_holds_are_a_timer_from_three_separate_ones() {
    for (n, want) in [
        (MIN_REPEATS as u64 - 1, false),
        (MIN_REPEATS as u64, true),
        (MIN_REPEATS as u64 + 1, true),
    ] {
        let d = slow_writes(n, 2.0, false);
        assert_eq!(stall(&d).is_some(), want, "{n} holds: {:#?}", d.findings);
        if let Some(f) = stall(&d) {
            assert_eq!(f.episodes as usize, n as usize);
            assert!(
                f.explanation.contains("the server held the reply"),
                "{}",
                f.explanation
            );
        }
    }
}

#[test]
fn equal_waits_that_overlap_are_one_stop_of_the_server_not_a_timer() {
    // Three WRITEs outstanding together through one 1.2 s stop.
    let d = slow_writes(MIN_REPEATS as u64, 0.05, false);
    assert!(stall(&d).is_none(), "{:#?}", d.findings);
}

#[test]
fn slow_operations_with_retransmissions_are_the_network_not_a_timer() {
    let d = slow_writes(MIN_REPEATS as u64 + 1, 2.0, true);
    assert!(stall(&d).is_none(), "{:#?}", d.findings);
}

#[test]
fn held_operations_are_named_from_the_shortest_slow_one() {
    // Every operation slow alike (no usual time to stand out from): named all the same,
    // with the retransmissions meanwhile; below STALL_MIN_NS none is.
    for (srt_s, named) in [(0.1, true), (0.099, false)] {
        let mut ev = StorageEvidence::new();
        ev.start(Timestamp(0));
        let segs = vec![segment(2, 0.05, F::RETRANSMISSION), segment(3, srt_s, 0)];
        ev.transaction(&tx(7, "READ", 6, (1, 0.0), (3, srt_s)));
        log_segments(&mut ev, &segs);
        let mut d = Diagnosis::default();
        d.findings
            .push(Finding::new(FindingKind::ApplicationLimited, Some(3)));
        add_findings(&ev, &mut d);
        let f = &d.findings[0];
        assert_eq!(
            f.explanation.contains("READ (id 0x7, frames 1 -> 3)")
                && f.explanation.contains("(1 retransmission(s) meanwhile)"),
            named,
            "{srt_s} s: {}",
            f.explanation
        );
    }
}

#[test]
fn tcp_logs_collected_apart_and_merged_give_the_same_evidence() {
    // Stream 3 silent for 5 s around a slow COMMIT, stream 4 busy: logged into one evidence,
    // and into two sets of logs (one per stream, numbered 0 there) merged into another.
    let segs: Vec<SegmentAnalysis> = (0..40u64)
        .map(|i| {
            let mut a = segment(
                i + 1,
                i as f64 * 0.2,
                if i == 7 { F::RETRANSMISSION } else { 0 },
            );
            a.stream = StreamId(if i % 2 == 0 && !(10..35).contains(&i) {
                3
            } else {
                4
            });
            a
        })
        .collect();
    let mut one = StorageEvidence::new();
    log_segments(&mut one, &segs);
    let mut merged = StorageEvidence::new();
    for s in [3, 4] {
        let mut log = TcpLog::default();
        log.request();
        let mut logs = TcpLogs::default();
        for a in segs.iter().filter(|a| a.stream.0 == s) {
            log.segment(a);
            logs.saw(a.frame, a.ts);
        }
        logs.add(StreamId(0), log);
        logs.renumber(|_| StreamId(s));
        merged.add_tcp_logs(logs);
    }
    for s in [3, 4] {
        for (from, to) in [(0.0, 8.0), (1.0, 2.5), (2.0, 7.0)] {
            let (from, to) = ((from * 1e9) as i64, (to * 1e9) as i64);
            let want = one.during(StreamId(s), from, to);
            assert_eq!(merged.during(StreamId(s), from, to), want);
        }
    }
    assert!(one.during(StreamId(3), 0, 8_000_000_000).silent_s > 4.0);
    assert_eq!(one.during(StreamId(4), 0, 8_000_000_000).retransmissions, 1);
    assert_eq!(merged.report(), one.report(), "same end of capture");
    assert_eq!(
        one.during(StreamId(5), 0, 8_000_000_000),
        TcpDuring::default(),
        "no log, nothing known"
    );
}
