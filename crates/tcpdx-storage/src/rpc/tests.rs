//! RPC record marking and matching, on hand-built byte streams.

use tcpdx_core::{Dir, StreamId};
use tcpdx_wire::{FrameNo, Timestamp};

use super::*;
use crate::framer::Framer;
use crate::transaction::{Collect, IoKind};

fn words(w: &[u32]) -> Vec<u8> {
    w.iter().flat_map(|x| x.to_be_bytes()).collect()
}

/// An RPC call message (AUTH_UNIX-like credential of 8 bytes, null verifier).
fn call(xid: u32, prog: u32, vers: u32, proc_: u32, args: &[u8]) -> Vec<u8> {
    let mut m = words(&[xid, 0, 2, prog, vers, proc_, 1, 8, 0x1234, 0, 0, 0]);
    m.extend_from_slice(args);
    m
}

/// An accepted, successful reply.
fn reply(xid: u32, results: &[u8]) -> Vec<u8> {
    let mut m = words(&[xid, 1, 0, 0, 0, 0]);
    m.extend_from_slice(results);
    m
}

/// Record-marks `msg`, cutting it into fragments of at most `frag` bytes.
fn mark(msg: &[u8], frag: usize) -> Vec<u8> {
    let mut out = Vec::new();
    let chunks: Vec<&[u8]> = msg.chunks(frag).collect();
    for (i, c) in chunks.iter().enumerate() {
        let last = if i + 1 == chunks.len() {
            0x8000_0000
        } else {
            0
        };
        out.extend((last | c.len() as u32).to_be_bytes());
        out.extend_from_slice(c);
    }
    out
}

fn at(n: u64) -> At {
    At {
        frame: FrameNo(n),
        ts: Timestamp(n as i64 * 1_000_000),
    }
}

fn write_args(offset: u64, count: u32, data: usize) -> Vec<u8> {
    let mut a = words(&[8, 1, 2]);
    a.extend(offset.to_be_bytes());
    a.extend(words(&[count, 1, count]));
    a.extend(vec![0x5a; data]);
    a
}

fn read_record() -> Vec<u8> {
    let mut read = words(&[8, 7, 7]);
    read.extend(4096u64.to_be_bytes());
    read.extend(words(&[32768]));
    mark(&call(1, 100_003, 3, 6, &read), 1 << 20)
}

/// Client stream: READ (xid 1), WRITE (xid 2, 3 fragments), GETATTR (xid 3), a MOUNT call.
fn client_stream() -> Vec<u8> {
    let mut s = read_record();
    s.extend(mark(
        &call(2, 100_003, 3, 7, &write_args(8192, 3000, 3000)),
        1100,
    ));
    s.extend(mark(&call(3, 100_003, 3, 1, &words(&[8, 7, 7])), 1 << 20));
    s.extend(mark(&call(4, 100_005, 3, 1, &words(&[0])), 1 << 20));
    s
}

/// Server stream: replies to 2, 1, 4 then 3 (out of order).
fn server_stream() -> Vec<u8> {
    let mut s = Vec::new();
    s.extend(mark(&reply(2, &words(&[0, 0, 0, 3000, 2])), 1 << 20));
    let mut rd = words(&[0, 0, 32768, 0, 32768]);
    rd.extend(vec![0u8; 32768]);
    s.extend(mark(&reply(1, &rd), 1 << 20));
    s.extend(mark(&reply(4, &words(&[0])), 1 << 20));
    s.extend(mark(&reply(3, &words(&[0])), 1 << 20));
    s
}

/// Feeds both streams, each cut at `cuts`, client first; returns the transactions.
fn run(cuts_c: &[usize], cuts_s: &[usize]) -> Collect {
    let mut conn = RpcConn::new(1024);
    let mut sink = Collect::default();
    let stream = StreamId(0);
    for (dir, bytes, cuts, base) in [
        (Dir::ClientToServer, client_stream(), cuts_c, 10),
        (Dir::ServerToClient, server_stream(), cuts_s, 100),
    ] {
        let mut f = Framer::new(true);
        let mut h = RpcDir {
            conn: &mut conn,
            dir,
            stream,
            sink: &mut sink,
        };
        let mut prev = 0;
        for (i, &c) in cuts.iter().chain(std::iter::once(&bytes.len())).enumerate() {
            let c = c.clamp(prev, bytes.len());
            f.data(&bytes[prev..c], at(base + i as u64), &mut h);
            prev = c;
        }
    }
    conn.finish(stream, &mut sink);
    sink
}

#[test]
fn calls_and_replies_match_by_xid() {
    let got = run(&[], &[]);
    let t = &got.transactions;
    assert_eq!(t.len(), 3, "MOUNT is matched but not reported");
    assert_eq!((t[0].id, t[0].op), (2, "WRITE"));
    let w = t[0].io.unwrap();
    assert_eq!(
        (w.kind, w.offset, w.len, w.stable),
        (IoKind::Write, 8192, 3000, Some(1))
    );
    assert_eq!((w.done_len, w.done_stable), (Some(3000), Some(2)));
    assert_eq!((t[1].id, t[1].op), (1, "READ"));
    assert_eq!(t[1].io.unwrap().done_len, Some(32768));
    assert_eq!((t[2].id, t[2].op, t[2].status), (3, "GETATTR", Some(0)));
    assert!(t.iter().all(|t| t.reply.is_some() && t.version == Some(3)));
    assert_eq!(got.requests.len(), 3);
}

#[test]
fn records_split_at_every_byte_boundary() {
    let want = run(&[], &[]).transactions;
    let c = client_stream();
    for cut in 0..=c.len() {
        let got = run(&[cut], &[]).transactions;
        let strip = |v: &Vec<Transaction>| {
            v.iter()
                .map(|t| (t.id, t.op, t.io, t.status))
                .collect::<Vec<_>>()
        };
        assert_eq!(strip(&got), strip(&want), "client cut at {cut}");
        // The request's frame is the chunk holding its last byte.
        for t in &got {
            let f = t.request.last.frame.0;
            assert!(f == 10 || f == 11, "cut {cut}: frame {f}");
        }
    }
    let s = server_stream();
    for cut in (0..=s.len()).step_by(7) {
        let got = run(&[], &[cut, cut + 5]).transactions;
        assert_eq!(got.len(), 3, "server cut at {cut}");
    }
}

#[test]
fn request_and_reply_times_are_those_of_the_last_byte() {
    // The WRITE call (2nd record) ends in the 3rd chunk when cut like this.
    let c = client_stream();
    let write_start = read_record().len();
    // GETATTR (64 bytes) and MOUNT (56 bytes) end the stream: cut inside GETATTR.
    let got = run(&[write_start + 10, c.len() - 100], &[]);
    let w = got.transactions.iter().find(|t| t.id == 2).unwrap();
    assert_eq!(w.request.first.frame, FrameNo(10));
    assert_eq!(w.request.last.frame, FrameNo(11));
    let g = got.transactions.iter().find(|t| t.id == 3).unwrap();
    assert_eq!(g.request.last.frame, FrameNo(12));
    assert_eq!(w.srt_ns(), Some((100 - 11) * 1_000_000));
}

#[test]
fn unanswered_calls_are_reported_at_the_end() {
    let mut conn = RpcConn::new(16);
    let mut sink = Collect::default();
    let mut f = Framer::new(true);
    let mut h = RpcDir {
        conn: &mut conn,
        dir: Dir::ClientToServer,
        stream: StreamId(3),
        sink: &mut sink,
    };
    f.data(
        &mark(&call(9, 100_003, 3, 21, &write_args(0, 0, 0)[..20]), 99),
        at(1),
        &mut h,
    );
    conn.finish(StreamId(3), &mut sink);
    assert_eq!(sink.transactions.len(), 1);
    assert_eq!(sink.transactions[0].op, "COMMIT");
    assert_eq!(sink.transactions[0].reply, None);
    assert_eq!(sink.transactions[0].stream, StreamId(3));
}

#[test]
fn resynchronises_after_a_gap() {
    let mut conn = RpcConn::new(16);
    let mut sink = Collect::default();
    let c = client_stream();
    let mut f = Framer::new(true);
    let mut h = RpcDir {
        conn: &mut conn,
        dir: Dir::ClientToServer,
        stream: StreamId(0),
        sink: &mut sink,
    };
    // Lose the first 30 bytes (the READ call's header).
    f.gap(30, at(1), &mut h);
    f.data(&c[30..], at(2), &mut h);
    let mut ids: Vec<u32> = conn.calls.keys().copied().collect();
    ids.sort_unstable();
    assert_eq!(
        ids,
        [2, 3, 4],
        "the first fragment of a multi-fragment record is a start"
    );
    assert!(matches!(sink.notices[0], Notice::FramingLost { .. }));
}

#[test]
fn every_plausible_record_mark_passes_the_first_byte_bound() {
    let mut conn = RpcConn::new(16);
    let mut sink = Collect::default();
    let h = RpcDir {
        conn: &mut conn,
        dir: Dir::ClientToServer,
        stream: StreamId(0),
        sink: &mut sink,
    };
    let Some(FirstByte::LowBitsBelow(below)) = h.first_byte() else {
        panic!("RPC bounds its first byte");
    };
    let body = call(7, 100_003, 3, 6, &[]);
    for len in [48, 255, 256, 0xff_ffff, 0x100_0000, MAX_FRAGMENT as u32] {
        for last in [0, 0x8000_0000u32] {
            let mut b = (last | len).to_be_bytes().to_vec();
            b.extend_from_slice(&body);
            assert!(h.plausible(&b), "len {len:#x}");
            assert!(b[0] & 0x7f < below, "len {len:#x}, first byte {:#x}", b[0]);
        }
    }
    // Just past the longest fragment: neither plausible nor below the bound.
    let mut b = (MAX_FRAGMENT as u32 + (1 << 24)).to_be_bytes().to_vec();
    b.extend_from_slice(&body);
    assert!(!h.plausible(&b) && b[0] & 0x7f >= below);
}

#[test]
fn gss_integrity_arguments_are_unwrapped() {
    // RPCSEC_GSS cred: version 1, proc DATA, seq 5, service integrity, handle 4 bytes.
    let mut m = words(&[7, 0, 2, 100_003, 3, 6, 6, 24, 1, 0, 5, 2, 4, 0xabcd, 6, 0]);
    // databody_integ: length, seq_num, then READ3args.
    m.extend(words(&[28, 5, 8, 7, 7, 0, 512, 1024]));
    let Some(Message::Call(c)) = parse(&m) else {
        panic!("not a call")
    };
    assert_eq!(c.gss_service, Some(2));
    let d = nfs::decode_call(3, 6, c.args);
    assert_eq!(d.io.unwrap().offset, 512);
    assert_eq!(d.io.unwrap().len, 1024);
}

#[test]
fn arbitrary_bytes_never_panic() {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut conn = RpcConn::new(8);
    let mut sink = Collect::default();
    let mut f = Framer::new(true);
    let base = client_stream();
    for round in 0..300u64 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let mut chunk = base[(x as usize) % base.len()..].to_vec();
        chunk.truncate((x >> 20) as usize % 200);
        for b in chunk.iter_mut().step_by(((x >> 40) % 5 + 1) as usize) {
            *b ^= (x >> 8) as u8;
        }
        let mut h = RpcDir {
            conn: &mut conn,
            dir: if round % 2 == 0 {
                Dir::ClientToServer
            } else {
                Dir::ServerToClient
            },
            stream: StreamId(0),
            sink: &mut sink,
        };
        f.data(&chunk, at(round), &mut h);
        if round % 50 == 0 {
            f.gap(x % 100, at(round), &mut h);
        }
        let _ = parse(&chunk);
    }
    assert!(conn.outstanding() <= 8);
}

/// The XIDs of the calls found in `bytes` by a framer that starts lost (a capture that
/// starts mid-stream), fed in chunks of `chunk` bytes.
fn calls_found(bytes: &[u8], chunk: usize) -> Vec<u32> {
    let mut conn = RpcConn::new(16);
    let mut sink = Collect::default();
    let mut f = Framer::new(false);
    let mut h = RpcDir {
        conn: &mut conn,
        dir: Dir::ClientToServer,
        stream: StreamId(0),
        sink: &mut sink,
    };
    for (i, c) in bytes.chunks(chunk.max(1)).enumerate() {
        f.data(c, at(i as u64), &mut h);
    }
    let mut ids: Vec<u32> = conn.calls.keys().copied().collect();
    ids.sort_unstable();
    ids
}

#[test]
fn a_capture_starting_anywhere_finds_exactly_the_calls_that_start_in_it() {
    let c = client_stream();
    // Where each call's record starts.
    let starts = [0, read_record().len()];
    let getattr = c.len()
        - mark(&call(4, 100_005, 3, 1, &words(&[0])), 1 << 20).len()
        - mark(&call(3, 100_003, 3, 1, &words(&[8, 7, 7])), 1 << 20).len();
    let mount = c.len() - mark(&call(4, 100_005, 3, 1, &words(&[0])), 1 << 20).len();
    let starts = [starts[0], starts[1], getattr, mount];
    for from in 0..c.len() {
        let want: Vec<u32> = (1..=4u32)
            .filter(|&x| starts[x as usize - 1] >= from)
            .collect();
        for chunk in [1, 7, 1460, c.len()] {
            assert_eq!(
                calls_found(&c[from..], chunk),
                want,
                "from {from}, chunks of {chunk}"
            );
        }
    }
}

#[test]
fn garbage_before_the_first_call_is_skipped() {
    let mut x = 99u32;
    let mut s: Vec<u8> = (0..5000)
        .map(|_| {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12_345);
            (x >> 16) as u8
        })
        .collect();
    // Stray record marks and call-like words in the garbage.
    s.extend(words(&[0x8000_0040, 77, 0, 2, 100_003, 3]));
    s.extend(words(&[0x8000_0010, 78, 1, 0]));
    s.extend(client_stream());
    assert_eq!(calls_found(&s, 1460), [1, 2, 3, 4]);
}

/// A READ reply (xid 1) whose data holds a complete reply to the GETATTR call (xid 3), then
/// the real reply to 3.
fn server_stream_with_a_look_alike() -> (Vec<u8>, usize) {
    let fake = mark(&reply(3, &words(&[0, 2, 0o644])), 1 << 20);
    let mut data = vec![0xffu8; 100];
    data.extend(&fake);
    data.extend(vec![0xffu8; 32768 - data.len()]);
    let mut rd = words(&[0, 0, 32768, 0, 32768]);
    rd.extend(&data);
    let mut s = mark(&reply(1, &rd), 1 << 20);
    let real = s.len();
    s.extend(mark(&reply(3, &words(&[0])), 1 << 20));
    (s, real)
}

#[test]
fn no_resynchronisation_inside_a_read_replys_data() {
    let (s, real) = server_stream_with_a_look_alike();
    for lost in [4, 30, 200] {
        let mut conn = RpcConn::new(16);
        let mut sink = Collect::default();
        // The calls went out with their framing intact.
        let mut f = Framer::new(true);
        let mut h = RpcDir {
            conn: &mut conn,
            dir: Dir::ClientToServer,
            stream: StreamId(0),
            sink: &mut sink,
        };
        f.data(&client_stream(), at(1), &mut h);
        // The reply's head was not captured: the framing is lost inside its data.
        let mut f = Framer::new(true);
        let mut h = RpcDir {
            conn: &mut conn,
            dir: Dir::ServerToClient,
            stream: StreamId(0),
            sink: &mut sink,
        };
        f.gap(lost as u64, at(2), &mut h);
        f.data(&s[lost..real], at(3), &mut h);
        f.data(&s[real..], at(4), &mut h);
        let got: Vec<(u64, u64)> = sink
            .transactions
            .iter()
            .map(|t| (t.id, t.reply.unwrap().last.frame.0))
            .collect();
        assert_eq!(
            got,
            [(3, 4)],
            "lost {lost}: only the real reply, at frame 4"
        );
        assert_eq!(f.stats().resynced, 1);
    }
}

#[test]
fn a_reply_look_alike_in_the_calls_direction_is_not_a_start() {
    // A WRITE whose data holds a reply to the READ call (xid 1), which went this way.
    let fake = mark(&reply(1, &words(&[0, 2])), 1 << 20);
    let mut c = read_record();
    let mut args = write_args(0, 200, 0);
    args.extend(&fake);
    args.extend(vec![0u8; 200 - fake.len()]);
    c.extend(mark(&call(2, 100_003, 3, 7, &args), 1 << 20));
    // Lose the WRITE's head only.
    let w = read_record().len();
    let mut conn = RpcConn::new(16);
    let mut sink = Collect::default();
    let mut f = Framer::new(true);
    let mut h = RpcDir {
        conn: &mut conn,
        dir: Dir::ClientToServer,
        stream: StreamId(0),
        sink: &mut sink,
    };
    f.data(&c[..w], at(1), &mut h);
    f.gap(8, at(2), &mut h);
    f.data(&c[w + 8..], at(2), &mut h);
    assert_eq!(f.stats().resynced, 0);
    assert_eq!(conn.calls.keys().copied().collect::<Vec<_>>(), [1]);
    assert!(sink.transactions.is_empty());
}

#[test]
fn the_next_record_mark_confirms_a_start() {
    let mut conn = RpcConn::new(16);
    let mut sink = Collect::default();
    let h = RpcDir {
        conn: &mut conn,
        dir: Dir::ClientToServer,
        stream: StreamId(0),
        sink: &mut sink,
    };
    let one = mark(&call(5, 100_003, 3, 1, &words(&[8, 7, 7])), 1 << 20);
    let two = mark(&call(6, 100_003, 3, 1, &words(&[8, 7, 7])), 1 << 20);
    assert!(h.plausible(&one), "nothing after it: not judged");
    assert!(h.plausible(&[&one[..], &two[..]].concat()));
    assert!(
        h.plausible(&[&one[..], &two[..6]].concat()),
        "a mark, no type yet"
    );
    // Followed by what cannot be a record mark, or by a record of another message type.
    assert!(!h.plausible(&[&one[..], &[0xff; 40][..]].concat()));
    assert!(
        !h.plausible(&[&one[..], &words(&[0, 1, 2])[..]].concat()),
        "empty fragment"
    );
    let mut other = two.clone();
    other[8..12].copy_from_slice(&7u32.to_be_bytes());
    assert!(!h.plausible(&[&one[..], &other[..]].concat()));
    // A fragment too short for the call header and its credential.
    let mut short = one.clone();
    short[..4].copy_from_slice(&(0x8000_0000u32 | 47).to_be_bytes());
    assert!(!h.plausible(&short));
    // An unknown credential flavor.
    let mut flavor = one.clone();
    flavor[28..32].copy_from_slice(&99u32.to_be_bytes());
    assert!(!h.plausible(&flavor));
}
