//! SRT aggregation on synthetic transactions.

use tcpdx_core::{Dir, StreamId};
use tcpdx_wire::{FrameNo, Timestamp};

use super::*;
use crate::reassembly::At;
use crate::transaction::{Io, Span};

fn at(frame: u64, ms: f64) -> At {
    At {
        frame: FrameNo(frame),
        ts: Timestamp((ms * 1e6) as i64),
    }
}

fn span(frame: u64, ms: f64) -> Span {
    Span {
        first: at(frame, ms),
        last: at(frame, ms),
        bytes: 100,
        repaired: false,
        damaged: false,
    }
}

fn read(len: u64) -> Io {
    Io {
        kind: IoKind::Read,
        offset: 0,
        len,
        blocks: None,
        stable: None,
        done_stable: None,
        done_len: Some(len),
    }
}

fn tx(
    id: u64,
    op: &'static str,
    code: u16,
    req_ms: f64,
    rep_ms: f64,
    io: Option<Io>,
) -> Transaction {
    Transaction {
        stream: StreamId(0),
        proto: Proto::Nfs,
        version: Some(3),
        op,
        op_code: code,
        sub_op: None,
        ops: None,
        id,
        request_dir: Dir::ClientToServer,
        request: span(id * 2, req_ms),
        reply: Some(span(id * 2 + 1, rep_ms)),
        interim: None,
        status: Some(0),
        io,
        credits: None,
    }
}

/// Feeds the request then (later) the transaction, in time order.
fn feed(c: &mut SrtCollector, ts: &[Transaction]) {
    let mut events: Vec<(i64, bool, Transaction)> = Vec::new();
    for t in ts {
        events.push((t.request.last.ts.0, false, *t));
        events.push((t.reply.unwrap().last.ts.0, true, *t));
    }
    events.sort_by_key(|e| (e.0, e.1));
    for (_, is_reply, t) in events {
        if is_reply {
            c.transaction(&t);
        } else {
            c.request(&Request {
                stream: t.stream,
                proto: t.proto,
                op: t.op,
                at: t.request.last,
                io: t.io,
                credits: t.credits,
            });
        }
    }
}

#[test]
fn table_matches_hand_computed_statistics() {
    let mut c = SrtCollector::new(SrtConfig::default());
    c.start(Timestamp(0));
    let mut ts = Vec::new();
    for i in 0..100u64 {
        // SRTs 1..=100 ms
        ts.push(tx(
            i + 1,
            "READ",
            6,
            i as f64 * 10.0,
            i as f64 * 10.0 + (i + 1) as f64,
            Some(read(4096)),
        ));
    }
    ts.push(tx(500, "GETATTR", 1, 5.0, 5.5, None));
    feed(&mut c, &ts);
    let r = c.report(None);
    assert_eq!(r.tables.len(), 1);
    let rows = &r.tables[0].rows;
    assert_eq!(rows[0].op, "GETATTR");
    let read = &rows[1];
    assert_eq!((read.op.as_str(), read.code, read.count), ("READ", 6, 100));
    assert!((read.min_s - 0.001).abs() < 1e-12);
    assert!((read.max_s - 0.100).abs() < 1e-12);
    assert!((read.mean_s - 0.0505).abs() < 1e-9);
    assert!((read.p50_s - 0.050).abs() < 1e-12);
    assert!((read.p95_s - 0.095).abs() < 1e-12);
    assert!((read.p99_s - 0.099).abs() < 1e-12);
    assert!((read.total_s - 5.050).abs() < 1e-9);
    assert_eq!(r.slowest.len(), 10);
    assert!((r.slowest[0].srt_s - 0.100).abs() < 1e-12);
    assert_eq!(r.slowest[0].request_frame, 200);
    assert_eq!(r.slowest[0].reply_frame, 201);
}

#[test]
fn outstanding_and_throughput_over_time() {
    // Two 64 KiB reads in flight for the whole of second 0 (0..1000 ms), replies at 1000 ms.
    let mut c = SrtCollector::new(SrtConfig::default());
    c.start(Timestamp(0));
    feed(
        &mut c,
        &[
            tx(1, "READ", 6, 0.0, 1000.0, Some(read(65536))),
            tx(2, "READ", 6, 0.0, 1500.0, Some(read(65536))),
        ],
    );
    let r = c.report(None);
    let iv: Vec<_> = r.intervals.iter().collect();
    assert_eq!(iv.len(), 2);
    assert!((iv[0].outstanding_mean - 2.0).abs() < 1e-9);
    assert_eq!(iv[0].outstanding_max, 2);
    assert!((iv[0].bytes_outstanding_mean - 131_072.0).abs() < 1e-6);
    assert_eq!(iv[0].count, 0);
    // Second 1: one read in flight for 500 ms, two replies.
    assert!((iv[1].outstanding_mean - 0.5).abs() < 1e-9);
    assert_eq!(iv[1].count, 2);
    assert_eq!(iv[1].read_bytes, 131_072);
    let conn = &r.connections[0];
    assert!((conn.outstanding_mean - (2.0 * 1000.0 + 500.0) / 1500.0).abs() < 1e-9);
    assert_eq!(conn.read_bytes, 131_072);
}

#[test]
fn unanswered_requests_are_counted_not_timed() {
    let mut c = SrtCollector::new(SrtConfig::default());
    let mut t = tx(1, "COMMIT", 21, 0.0, 0.0, None);
    t.reply = None;
    c.transaction(&t);
    let r = c.report(None);
    assert!(r.tables.is_empty());
    assert_eq!(r.unanswered[0].op, "COMMIT");
    assert_eq!(r.unanswered[0].count, 1);
}

#[test]
fn smb2_credit_starvation() {
    use crate::transaction::Credits;
    let mut c = SrtCollector::new(SrtConfig::default());
    c.start(Timestamp(0));
    let mut neg = tx(0, "Negotiate Protocol", 0, 0.0, 1.0, None);
    neg.proto = Proto::Smb2;
    neg.version = None;
    neg.credits = Some(Credits {
        charge: 0,
        requested: 1,
        granted: 1,
        interim_granted: 0,
    });
    // Negotiate: 1 - 1 = 0 at 0 ms (starved) until the grant at 1 ms.
    let mut rd = tx(1, "Read", 8, 2.0, 12.0, Some(read(65536)));
    rd.proto = Proto::Smb2;
    rd.version = None;
    rd.credits = Some(Credits {
        charge: 1,
        requested: 1,
        granted: 1,
        interim_granted: 0,
    });
    feed(&mut c, &[neg, rd]);
    let r = c.report(None);
    let cr = &r.credits[0];
    assert!(cr.absolute);
    assert_eq!((cr.min, cr.max, cr.last), (0, 1, 1));
    assert_eq!(cr.starved_episodes, 2);
    assert!((cr.starved_s - 0.011).abs() < 1e-9);
    assert_eq!(r.intervals[0].credits_min, Some(0));
}

#[test]
fn wireshark_rounding() {
    assert_eq!(wireshark_time(10_536_600), "0.010537");
    assert_eq!(wireshark_time(5_006_464_499), "5.006464");
    assert_eq!(wireshark_time(999_999_600), "0.1000000"); // tshark's own quirk
    assert_eq!(wireshark_mean(219_179_000, 2), "0.109590");
    assert_eq!(wireshark_mean(3, 2), "0.000000");
    assert_eq!(wireshark_sum(5_016_839_499), "5.016839");
}

#[test]
fn reservoir_is_bounded_and_deterministic() {
    let mut a = Samples::new(100);
    let mut b = Samples::new(100);
    for i in 0..10_000 {
        a.add(i);
        b.add(i);
    }
    assert_eq!(a.v.len(), 100);
    assert_eq!(a.v, b.v);
    assert_eq!(nearest_rank(&[], 0.5), 0);
    assert_eq!(nearest_rank(&[1, 2, 3, 4], 0.5), 2);
    assert_eq!(nearest_rank(&[1, 2, 3, 4], 1.0), 4);
}
