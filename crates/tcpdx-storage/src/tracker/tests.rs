use tcpdx_core::{Analyzer, AnalyzerConfig};
use tcpdx_testkit::{ACK_SEG, DATA_SEG, Payload, Script, ScriptConfig, SegSpec, nfs};

use super::*;
use crate::record::{Recorded, Recorder};
use crate::transaction::Collect;

/// A conversation with an NFS server.
fn nfs() -> Script {
    Script::with(ScriptConfig {
        server_port: 2049,
        ..ScriptConfig::DEFAULT
    })
}

/// Runs `t` through an analyzer into a tracker; returns the tracker before `finish`.
fn track(t: &Script) -> Tracker<Collect> {
    track_with(t, false)
}

/// [`track`], with every segment on the reassembly path if `no_skip`.
fn track_with(t: &Script, no_skip: bool) -> Tracker<Collect> {
    track_into(t, Collect::default(), no_skip)
}

/// Runs `t` through an analyzer into a tracker pushing into `sink` (before `finish`).
fn track_into<S: StorageSink>(t: &Script, sink: S, no_skip: bool) -> Tracker<S> {
    let mut analyzer = Analyzer::new(AnalyzerConfig::default());
    let mut tracker = Tracker::new(StorageConfig::default(), sink);
    tracker.no_skip = no_skip;
    for f in t.frames() {
        analyzer.handle_frame(&f.as_frame(), &mut tracker);
    }
    tracker
}

/// An NFS READ at 20 ms answered at `reply_ms`, then FINs from the client and the server
/// 20 and 21 ms later.
fn read_then_close(reply_ms: f64) -> Script {
    let mut t = nfs();
    t.handshake();
    t.at_ms(20).client_sends_bytes(&nfs::read_call(7, 100));
    t.at_ms(reply_ms)
        .server_sends_bytes(&nfs::read_reply(7, 100));
    t.at_ms(reply_ms + 20.0).fin_from_client();
    t.at_ms(reply_ms + 21.0).fin_from_server();
    t
}

#[test]
fn a_connection_over_is_removed_and_still_counted() {
    let t = read_then_close(30.0);
    let mut tracker = track(&t);
    assert!(tracker.conns.is_empty(), "removed at the second FIN");
    assert_eq!(tracker.stats().connections, 1);
    assert!(tracker.stats().reassembly.delivered_bytes > 0);
    tracker.finish();
    let got = tracker.into_sink();
    assert_eq!(got.transactions.len(), 1);
    assert!(got.transactions[0].reply.is_some());
}

#[test]
fn a_connection_closed_with_a_request_unanswered_is_kept_for_the_end() {
    let mut t = nfs();
    t.handshake();
    t.at_ms(20).client_sends_bytes(&nfs::read_call(7, 100));
    t.at_ms(40).fin_from_client();
    t.at_ms(41).fin_from_server();
    let mut tracker = track(&t);
    assert_eq!(tracker.conns.len(), 1);
    tracker.finish();
    let got = tracker.into_sink();
    assert_eq!(got.transactions.len(), 1);
    assert!(got.transactions[0].reply.is_none(), "reported unanswered");
}

#[test]
fn a_connection_with_one_fin_is_kept() {
    let mut t = nfs();
    t.handshake();
    t.at_ms(20).client_sends_bytes(&nfs::read_call(7, 100));
    t.at_ms(30).server_sends_bytes(&nfs::read_reply(7, 100));
    t.at_ms(40).fin_from_client();
    let tracker = track(&t);
    assert_eq!(tracker.conns.len(), 1);
}

/// What a tracker hands to its sink by the end of input: the TCP logs, the last segment.
type Handed = (
    Vec<(StreamId, TcpLog)>,
    Vec<(FrameNo, tcpdx_wire::Timestamp)>,
);

/// The TCP logs and last segment a tracker hands to its sink, by the end of input.
fn handed_logs(t: &Script) -> Handed {
    let mut tracker = track_into(t, Recorder::default(), false);
    tracker.finish();
    let (mut logs, mut last) = (Vec::new(), Vec::new());
    for e in tracker.into_sink().events {
        match e {
            Recorded::TcpLog(s, log) => logs.push((s, *log)),
            Recorded::TcpLast(f, ts) => last.push((f, ts)),
            _ => {}
        }
    }
    (logs, last)
}

#[test]
fn a_connection_with_a_request_hands_its_tcp_log_over_once() {
    // A READ answered after 2 s of silence, then FINs both ways: the log goes to the sink
    // when the connection is removed, with the silence in it.
    let t = read_then_close(2020.0);
    let (logs, last) = handed_logs(&t);
    assert_eq!(logs.len(), 1, "{logs:?}");
    let (stream, log) = &logs[0];
    assert_eq!(*stream, StreamId(0));
    assert!(log.requested());
    let t0 = t.frames()[0].ts.0;
    // From the request to the reply (the 20 ms before and after are silences too).
    let silent = log.during(t0 + 20_000_000, t0 + 2_020_000_000).silent_s;
    assert!((silent - 2.0).abs() < 0.01, "{silent}");
    // The last segment is reported once, at the end: the server's FIN.
    let fin = t.frames().pop().unwrap();
    assert_eq!(last, [(fin.no, fin.ts)]);

    // The same READ still unanswered when the capture ends: handed over at the end.
    let mut t = nfs();
    t.handshake();
    t.at_ms(20).client_sends_bytes(&nfs::read_call(7, 100));
    let (logs, _) = handed_logs(&t);
    assert_eq!(logs.len(), 1);
}

#[test]
fn a_connection_without_a_request_hands_no_tcp_log() {
    // Nothing parsed (no request): no log, closed or not; the last segment still counts.
    let mut t = nfs();
    t.handshake();
    t.at_ms(40).fin_from_client();
    t.at_ms(41).fin_from_server();
    let (logs, last) = handed_logs(&t);
    assert!(logs.is_empty(), "{logs:?}");
    assert_eq!(last.len(), 1);
    let mut t = nfs();
    t.handshake();
    t.at_ms(40).rst_from_client();
    let (logs, last) = handed_logs(&t);
    assert!(logs.is_empty(), "{logs:?}");
    assert_eq!(
        last,
        [(t.frames().pop().unwrap().no, t.frames().pop().unwrap().ts)]
    );
}

/// NFS reads whose replies come in segments of random sizes, most cut by the snap length
/// (anywhere from the whole payload to none of it), some lost before the capture point (a
/// hole), some swapped with the next one (a hole its successor fills), some behind junk that
/// loses the framing; the client acknowledges after each reply. Deterministic for a `seed`.
fn cut_replies(seed: u64) -> Script {
    let mut x = seed;
    let mut rand = move |n: u64| {
        x = x
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (x >> 33) % n
    };
    let mut t = nfs();
    t.handshake();
    for xid in 0..80u32 {
        let ms = 20.0 + f64::from(xid);
        let count = 1 + rand(6000) as u32;
        t.at_ms(ms).client_sends_bytes(&nfs::read_call(xid, count));
        let mut reply: Vec<u8> = (0..rand(4) * rand(50)).map(|_| rand(256) as u8).collect();
        reply.extend(nfs::read_reply(xid, count));
        let mut segs = Vec::new();
        let mut seq = t.next_seq(tcpdx_testkit::Dir::ServerToClient);
        for seg in reply.chunks(1 + rand(1448) as usize) {
            segs.push((seq, seg.to_vec()));
            seq += seg.len() as u32;
        }
        let mut i = 0;
        while i < segs.len() {
            let order = if i + 1 < segs.len() && rand(8) == 0 {
                vec![i + 1, i]
            } else {
                vec![i]
            };
            i += order.len();
            for k in order {
                let (seq, bytes) = segs[k].clone();
                let sent = t.at_ms(ms + 0.5).server(SegSpec {
                    seq,
                    payload: Payload::Bytes(bytes),
                    ..DATA_SEG
                });
                match rand(10) {
                    0 => sent.not_captured(),
                    // 66 bytes of headers (Ethernet, IPv4, TCP with timestamps), then 0 to
                    // 99 bytes of payload.
                    1..=7 => drop(sent.snaplen(66 + rand(100) as u32)),
                    _ => {}
                }
            }
        }
        t.at_ms(ms + 0.7).client(ACK_SEG);
    }
    t
}

/// What a tracker saw: its output and every counter of reassembly and framing.
fn outcome(mut tracker: Tracker<Collect>) -> impl PartialEq + fmt::Debug {
    let framers: Vec<_> = tracker
        .conns
        .iter()
        .flat_map(|c| c.sides.iter().map(|side| side.framer.stats()))
        .collect();
    tracker.finish();
    let stats = tracker.stats();
    let got = tracker.into_sink();
    (got.transactions, got.notices, got.requests, stats, framers)
}

#[test]
fn cut_segments_skipped_give_what_reassembly_gives() {
    for seed in 0..8 {
        let t = cut_replies(seed);
        let fast = outcome(track_with(&t, false));
        let reference = outcome(track_with(&t, true));
        assert_eq!(fast, reference, "seed {seed}");
    }
}

#[test]
fn streams_sharing_a_cache_entry_keep_their_verdicts() {
    // Streams 0 (not storage) and RECENT (NFS) share an entry of the recent-stream cache
    // and interleave; the NFS connections between them close.
    let mut t = Script::with(ScriptConfig {
        server_port: 80,
        ..ScriptConfig::DEFAULT
    });
    let web = t.conn();
    t.at_ms(1).handshake();
    let mut ids = Vec::new();
    for i in 1..=RECENT as u16 {
        ids.push(t.add_connection(ScriptConfig {
            client_port: 40000 + i,
            server_port: 2049,
            ..ScriptConfig::DEFAULT
        }));
        t.at_ms(2).handshake();
    }
    let nfs = ids[RECENT - 1];
    for &id in &ids[..RECENT - 1] {
        t.on(id).at_ms(3).fin_from_client();
        t.at_ms(3).fin_from_server();
    }
    for xid in 0..4 {
        let ms = 10 + 10 * xid;
        t.on(web)
            .at_ms(ms)
            .client_sends_bytes(&nfs::read_call(xid, 10));
        t.on(nfs)
            .at_ms(ms)
            .client_sends_bytes(&nfs::read_call(xid, 20));
        t.on(web)
            .at_ms(ms + 1)
            .server_sends_bytes(&nfs::read_reply(xid, 10));
        t.on(nfs)
            .at_ms(ms + 1)
            .server_sends_bytes(&nfs::read_reply(xid, 20));
    }
    let mut tracker = track(&t);
    assert_eq!(tracker.conns.len(), 1, "the closed ones are removed");
    tracker.finish();
    let got = tracker.into_sink();
    let answered: Vec<_> = got
        .transactions
        .iter()
        .map(|x| (x.stream.0, x.reply.is_some()))
        .collect();
    assert_eq!(answered, [(RECENT as u32, true); 4]);
}

#[test]
fn a_slot_moved_by_a_removal_is_not_read_from_the_cache() {
    // Streams 0, 1, 2 in slots 0, 1, 2; stream 0 is over and removed, stream 2 moves to
    // slot 0 and stream 3 opens in slot 2, where the cache still places stream 2.
    let mut t = nfs();
    let mut ids = vec![t.conn()];
    for i in 1..4u16 {
        let mut cfg = t.config().clone();
        cfg.client_port = 40000 + i;
        ids.push(t.add_connection(cfg));
    }
    for &id in &ids[..3] {
        t.on(id).at_ms(1).handshake();
    }
    t.on(ids[0]).at_ms(2).fin_from_client();
    t.at_ms(2).fin_from_server();
    t.on(ids[3]).at_ms(3).handshake();
    for (xid, &id) in ids[2..].iter().enumerate() {
        let xid = xid as u32;
        t.on(id)
            .at_ms(10)
            .client_sends_bytes(&nfs::read_call(xid, 10));
        t.at_ms(11).server_sends_bytes(&nfs::read_reply(xid, 10));
    }
    let mut tracker = track(&t);
    tracker.finish();
    let got = tracker.into_sink();
    let answered: Vec<_> = got
        .transactions
        .iter()
        .map(|x| (x.stream.0, x.reply.is_some()))
        .collect();
    assert_eq!(answered, [(2, true), (3, true)]);
}
