//! SMB2 framing, compounds, async responses and credits on hand-built byte streams.

use tcpdx_core::{Dir, StreamId};
use tcpdx_wire::{FrameNo, Timestamp};

use super::*;
use crate::framer::Framer;
use crate::transaction::Collect;

#[derive(Clone, Copy)]
struct H {
    cmd: u16,
    response: bool,
    is_async: bool,
    id: u64,
    credits: u16,
    charge: u16,
    status: u32,
}

const REQ: H = H {
    cmd: 5,
    response: false,
    is_async: false,
    id: 0,
    credits: 1,
    charge: 1,
    status: 0,
};

fn header(h: H, next: u32) -> Vec<u8> {
    let mut v = b"\xfeSMB".to_vec();
    v.extend(64u16.to_le_bytes());
    v.extend(h.charge.to_le_bytes());
    v.extend(h.status.to_le_bytes());
    v.extend(h.cmd.to_le_bytes());
    v.extend(h.credits.to_le_bytes());
    let flags = u32::from(h.response) | if h.is_async { 2 } else { 0 };
    v.extend(flags.to_le_bytes());
    v.extend(next.to_le_bytes());
    v.extend(h.id.to_le_bytes());
    v.extend([0u8; 8]); // reserved+tree / async id
    v.extend(0x1122u64.to_le_bytes()); // session
    v.extend([0u8; 16]); // signature
    v
}

/// One SMB2 command (header + body), padded to 8 when `pad`.
fn command(h: H, body: &[u8], next: bool) -> Vec<u8> {
    let mut len = 64 + body.len();
    if next {
        len = (len + 7) & !7;
    }
    let mut v = header(h, if next { len as u32 } else { 0 });
    v.extend_from_slice(body);
    v.resize(len, 0);
    v
}

fn nbss(msg: &[u8]) -> Vec<u8> {
    let n = msg.len() as u32;
    let mut v = vec![0, (n >> 16) as u8, (n >> 8) as u8, n as u8];
    v.extend_from_slice(msg);
    v
}

fn read_req(len: u32, offset: u64) -> Vec<u8> {
    let mut b = vec![49, 0, 0, 0];
    b.extend(len.to_le_bytes());
    b.extend(offset.to_le_bytes());
    b.extend([0u8; 32]);
    b
}

fn read_rsp(len: u32) -> Vec<u8> {
    let mut b = vec![17, 0, 80, 0];
    b.extend(len.to_le_bytes());
    b.extend([0u8; 8]);
    b.extend(vec![0xaa; len as usize]);
    b
}

/// Client: Negotiate (id 0); compound Create (1) + Read (2); Write (3); Cancel of 3.
fn client() -> Vec<u8> {
    let mut s = nbss(&command(
        H {
            cmd: 0,
            charge: 0,
            ..REQ
        },
        &[36, 0],
        false,
    ));
    let mut c = command(H { id: 1, ..REQ }, &[57, 0, 0, 0], true);
    c.extend(command(
        H {
            cmd: 8,
            id: 2,
            credits: 64,
            ..REQ
        },
        &read_req(65536, 4096),
        false,
    ));
    s.extend(nbss(&c));
    let mut w = vec![49, 0, 112, 0];
    w.extend(3000u32.to_le_bytes());
    w.extend(0u64.to_le_bytes());
    w.extend([0u8; 32]);
    w.extend(vec![0x55; 3000]);
    s.extend(nbss(&command(
        H {
            cmd: 9,
            id: 3,
            charge: 1,
            ..REQ
        },
        &w,
        false,
    )));
    s.extend(nbss(&command(
        H {
            cmd: 12,
            id: 3,
            ..REQ
        },
        &[4, 0],
        false,
    )));
    s
}

/// Server: Negotiate response; Create + Read responses as a compound; Write interim
/// STATUS_PENDING then final; an unsolicited oplock break.
fn server() -> Vec<u8> {
    let rsp = H {
        response: true,
        credits: 10,
        ..REQ
    };
    let mut s = nbss(&command(H { cmd: 0, ..rsp }, &[65, 0], false));
    let mut c = command(H { id: 1, ..rsp }, &[89, 0], true);
    c.extend(command(
        H {
            cmd: 8,
            id: 2,
            credits: 64,
            ..rsp
        },
        &read_rsp(2000),
        false,
    ));
    s.extend(nbss(&c));
    let pending = H {
        cmd: 9,
        id: 3,
        is_async: true,
        status: STATUS_PENDING,
        credits: 5,
        ..rsp
    };
    s.extend(nbss(&command(pending, &[9, 0, 0, 0, 0, 0, 0, 0], false)));
    let mut wr = vec![17, 0, 0, 0];
    wr.extend(3000u32.to_le_bytes());
    s.extend(nbss(&command(
        H {
            cmd: 9,
            id: 3,
            is_async: true,
            credits: 1,
            ..rsp
        },
        &wr,
        false,
    )));
    s.extend(nbss(&command(
        H {
            cmd: 18,
            id: u64::MAX,
            ..rsp
        },
        &[24, 0],
        false,
    )));
    s
}

fn at(n: u64) -> At {
    At {
        frame: FrameNo(n),
        ts: Timestamp(n as i64 * 1_000_000),
    }
}

fn run(c_cuts: &[usize], s_cuts: &[usize]) -> Collect {
    let mut conn = Smb2Conn::new(64);
    let mut sink = Collect::default();
    for (dir, bytes, cuts, base) in [
        (Dir::ClientToServer, client(), c_cuts, 10),
        (Dir::ServerToClient, server(), s_cuts, 100),
    ] {
        let mut f = Framer::new(true);
        let mut h = Smb2Dir {
            conn: &mut conn,
            dir,
            stream: StreamId(1),
            sink: &mut sink,
        };
        let mut prev = 0;
        for (i, &c) in cuts.iter().chain(std::iter::once(&bytes.len())).enumerate() {
            let c = c.clamp(prev, bytes.len());
            f.data(&bytes[prev..c], at(base + i as u64), &mut h);
            prev = c;
        }
    }
    conn.finish(StreamId(1), &mut sink);
    sink
}

#[test]
fn compound_async_and_credits() {
    let got = run(&[], &[]);
    let t = &got.transactions;
    let ops: Vec<(&str, u64)> = t.iter().map(|t| (t.op, t.id)).collect();
    assert_eq!(
        ops,
        [
            ("Negotiate Protocol", 0),
            ("Create", 1),
            ("Read", 2),
            ("Write", 3)
        ]
    );
    let read = &t[2];
    let io = read.io.unwrap();
    assert_eq!(
        (io.kind, io.offset, io.len, io.done_len),
        (IoKind::Read, 4096, 65536, Some(2000))
    );
    assert_eq!(read.credits.unwrap().requested, 64);
    assert_eq!(read.credits.unwrap().granted, 64);
    let write = &t[3];
    assert!(write.interim.is_some());
    assert_eq!(write.credits.unwrap().interim_granted, 5);
    assert_eq!(write.credits.unwrap().granted, 1);
    assert_eq!(write.io.unwrap().done_len, Some(3000));
    assert_eq!(write.status, Some(0));
    assert_eq!(
        got.requests.len(),
        4,
        "Cancel is not a request with a response"
    );
    // The compound members share the message's frames; bytes are split by NextCommand.
    assert_eq!(t[1].request.last, t[2].request.last);
    assert_eq!(t[1].request.bytes, 72);
}

#[test]
fn messages_split_at_every_byte_boundary() {
    let want: Vec<_> = run(&[], &[])
        .transactions
        .iter()
        .map(|t| (t.op, t.id, t.io))
        .collect();
    let c = client();
    for cut in 0..=c.len() {
        let got: Vec<_> = run(&[cut], &[])
            .transactions
            .iter()
            .map(|t| (t.op, t.id, t.io))
            .collect();
        assert_eq!(got, want, "client cut at {cut}");
    }
    let s = server();
    for cut in 0..=s.len() {
        let got: Vec<_> = run(&[], &[cut])
            .transactions
            .iter()
            .map(|t| (t.op, t.id, t.io))
            .collect();
        assert_eq!(got, want, "server cut at {cut}");
    }
}

#[test]
fn encrypted_messages_are_reported() {
    let mut t = b"\xfdSMB".to_vec();
    t.extend([0u8; 32]); // signature + nonce
    t.extend(100u32.to_le_bytes());
    t.extend([0u8; 4]);
    t.extend(0xabcdu64.to_le_bytes());
    t.extend(vec![0x77; 100]);
    let mut conn = Smb2Conn::new(4);
    let mut sink = Collect::default();
    let mut f = Framer::new(false);
    let mut h = Smb2Dir {
        conn: &mut conn,
        dir: Dir::ClientToServer,
        stream: StreamId(0),
        sink: &mut sink,
    };
    let mut bytes = vec![0x13, 0x37]; // mid-stream garbage before the first message
    bytes.extend(nbss(&t));
    bytes.extend(nbss(&t));
    f.data(&bytes, at(1), &mut h);
    assert_eq!(
        sink.notices,
        vec![
            Notice::Smb3Encrypted {
                stream: StreamId(0),
                at: at(1),
                session_id: 0xabcd
            };
            2
        ]
    );
    assert!(sink.transactions.is_empty());
}

#[test]
fn arbitrary_bytes_never_panic() {
    let base = [client(), server()].concat();
    let mut x: u64 = 88172645463325252;
    let mut conn = Smb2Conn::new(8);
    let mut sink = Collect::default();
    let mut f = Framer::new(true);
    for round in 0..400u64 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let start = (x as usize) % base.len();
        let mut chunk = base[start..].to_vec();
        chunk.truncate((x >> 24) as usize % 300);
        for b in chunk.iter_mut().step_by(((x >> 50) % 7 + 1) as usize) {
            *b = b.wrapping_add((x >> 3) as u8);
        }
        let mut h = Smb2Dir {
            conn: &mut conn,
            dir: Dir::ClientToServer,
            stream: StreamId(0),
            sink: &mut sink,
        };
        f.data(&chunk, at(round), &mut h);
        let _ = HeaderSlice::from_slice(&chunk);
    }
    assert!(conn.outstanding() <= 8);
}

#[test]
fn oplock_break_acknowledgements_are_not_timed() {
    // Server-initiated break (unsolicited), the client's acknowledgement (a Break request)
    // and the server's Break response: no transaction, as in Wireshark's smb2,srt.
    let mut conn = Smb2Conn::new(4);
    let mut sink = Collect::default();
    let rsp = H {
        response: true,
        ..REQ
    };
    for (dir, bytes) in [
        (
            Dir::ServerToClient,
            nbss(&command(
                H {
                    cmd: 18,
                    id: u64::MAX,
                    ..rsp
                },
                &[24, 0],
                false,
            )),
        ),
        (
            Dir::ClientToServer,
            nbss(&command(
                H {
                    cmd: 18,
                    id: 9,
                    ..REQ
                },
                &[24, 0],
                false,
            )),
        ),
        (
            Dir::ServerToClient,
            nbss(&command(
                H {
                    cmd: 18,
                    id: 9,
                    ..rsp
                },
                &[24, 0],
                false,
            )),
        ),
    ] {
        let mut f = Framer::new(true);
        let mut h = Smb2Dir {
            conn: &mut conn,
            dir,
            stream: StreamId(0),
            sink: &mut sink,
        };
        f.data(&bytes, at(1), &mut h);
    }
    conn.finish(StreamId(0), &mut sink);
    assert!(sink.transactions.is_empty());
    assert!(sink.requests.is_empty());
}

/// Where each NetBIOS message of `s` starts.
fn message_starts(s: &[u8]) -> Vec<usize> {
    let mut out = Vec::new();
    let mut pos = 0;
    while let Some(h) = s.get(pos..pos + 4) {
        out.push(pos);
        pos += 4 + (usize::from(h[1]) << 16 | usize::from(h[2]) << 8 | usize::from(h[3]));
    }
    out
}

/// The MessageIds of the requests found in `bytes` by a framer that starts lost (a
/// capture that starts mid-stream), fed in chunks of `chunk` bytes.
fn requests_found(conn: &mut Smb2Conn, bytes: &[u8], chunk: usize) -> Vec<u64> {
    let mut sink = Collect::default();
    let mut f = Framer::new(false);
    let mut h = Smb2Dir {
        conn,
        dir: Dir::ClientToServer,
        stream: StreamId(1),
        sink: &mut sink,
    };
    for (i, c) in bytes.chunks(chunk.max(1)).enumerate() {
        f.data(c, at(i as u64), &mut h);
    }
    let mut ids: Vec<u64> = conn.pending.keys().copied().collect();
    ids.sort_unstable();
    ids
}

#[test]
fn a_capture_starting_anywhere_finds_exactly_the_requests_that_start_in_it() {
    let c = client();
    let starts = message_starts(&c);
    // Negotiate; Create + Read; Write; Cancel (not a request of its own).
    let ids: [&[u64]; 4] = [&[0], &[1, 2], &[3], &[]];
    assert_eq!(starts.len(), ids.len());
    for from in 0..c.len() {
        let mut want: Vec<u64> = starts
            .iter()
            .zip(ids)
            .filter(|(s, _)| **s >= from)
            .flat_map(|(_, i)| i.iter().copied())
            .collect();
        want.sort_unstable();
        for chunk in [1, 13, 1460, c.len()] {
            let got = requests_found(&mut Smb2Conn::new(64), &c[from..], chunk);
            assert_eq!(got, want, "from {from}, chunks of {chunk}");
        }
    }
}

#[test]
fn garbage_and_a_stray_protocol_id_before_the_first_request_are_skipped() {
    let mut s = vec![0u8, 0, 1, 0];
    s.extend(b"\xfeSMB");
    s.extend([7u8; 300]);
    // A header whose NetBIOS length runs into bytes that cannot start the next message.
    s.extend([0, 0, 0, 80]);
    s.extend(header(REQ, 0));
    s.extend([9u8; 100]);
    s.extend(client());
    assert_eq!(
        requests_found(&mut Smb2Conn::new(64), &s, 1460),
        [0, 1, 2, 3]
    );
}

#[test]
fn no_resynchronisation_inside_a_read_responses_data() {
    // The Read response's data holds a whole Write response to the waiting Write (id 3).
    let rsp = H {
        response: true,
        credits: 1,
        ..REQ
    };
    let mut wr = vec![17, 0, 0, 0];
    wr.extend(3000u32.to_le_bytes());
    let fake = nbss(&command(
        H {
            cmd: 9,
            id: 3,
            ..rsp
        },
        &wr,
        false,
    ));
    let mut rd = read_rsp(0);
    rd.extend([0xaa; 40]);
    rd.extend(&fake);
    rd.extend([0xaa; 1000]);
    let mut s = nbss(&command(
        H {
            cmd: 8,
            id: 2,
            ..rsp
        },
        &rd,
        false,
    ));
    let real = s.len();
    s.extend(nbss(&command(
        H {
            cmd: 9,
            id: 3,
            ..rsp
        },
        &wr,
        false,
    )));
    for lost in [4, 30, 100] {
        let mut conn = Smb2Conn::new(64);
        let mut sink = Collect::default();
        let mut f = Framer::new(true);
        let mut h = Smb2Dir {
            conn: &mut conn,
            dir: Dir::ClientToServer,
            stream: StreamId(1),
            sink: &mut sink,
        };
        f.data(&client(), at(1), &mut h);
        // The Read response's head was not captured.
        let mut f = Framer::new(true);
        let mut h = Smb2Dir {
            conn: &mut conn,
            dir: Dir::ServerToClient,
            stream: StreamId(1),
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
            "lost {lost}: only the real response, at frame 4"
        );
        assert_eq!(f.stats().resynced, 1);
    }
}

#[test]
fn a_response_to_no_waiting_request_or_with_unknown_flags_is_not_a_start() {
    let mut conn = Smb2Conn::new(64);
    let mut sink = Collect::default();
    let h = Smb2Dir {
        conn: &mut conn,
        dir: Dir::ServerToClient,
        stream: StreamId(1),
        sink: &mut sink,
    };
    let req = nbss(&command(H { id: 5, ..REQ }, &[57, 0], false));
    assert!(h.plausible(&req));
    let rsp = nbss(&command(
        H {
            id: 5,
            response: true,
            ..REQ
        },
        &[89, 0],
        false,
    ));
    assert!(!h.plausible(&rsp), "no request 5 waiting");
    let mut flags = req.clone();
    flags[20] = 0x80;
    assert!(!h.plausible(&flags));
    let mut command_code = req.clone();
    command_code[16] = 19;
    assert!(!h.plausible(&command_code));
    // The next NetBIOS header, when there, must be one.
    assert!(h.plausible(&[&req[..], &req[..]].concat()));
    assert!(!h.plausible(&[&req[..], &[0x42; 8][..]].concat()));
    assert!(!h.plausible(&[&req[..], &[0, 0, 0, 9, 1, 2, 3, 4][..]].concat()));
}
