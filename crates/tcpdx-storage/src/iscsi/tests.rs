//! iSCSI framing, ITT matching and CDB decoding on hand-built byte streams.

use tcpdx_core::{Dir, StreamId};
use tcpdx_wire::{FrameNo, Timestamp};

use super::*;
use crate::framer::Framer;
use crate::transaction::Collect;

fn bhs(opcode: u8, flags: u8, data_len: usize, itt: u32) -> [u8; 48] {
    let mut b = [0u8; 48];
    b[0] = opcode;
    b[1] = flags;
    b[5] = (data_len >> 16) as u8;
    b[6] = (data_len >> 8) as u8;
    b[7] = data_len as u8;
    b[16..20].copy_from_slice(&itt.to_be_bytes());
    b
}

/// A PDU with `data` padded to 4 (and digests when `digests`).
fn pdu(mut h: [u8; 48], data: &[u8], digests: bool) -> Vec<u8> {
    let n = data.len();
    h[5] = (n >> 16) as u8;
    h[6] = (n >> 8) as u8;
    h[7] = n as u8;
    let mut v = h.to_vec();
    if digests {
        v.extend([0xd1; 4]);
    }
    v.extend_from_slice(data);
    v.resize(v.len() + (4 - n % 4) % 4, 0);
    if digests && n > 0 {
        v.extend([0xd2; 4]);
    }
    v
}

fn command(
    itt: u32,
    cdb: &[u8],
    edtl: u32,
    write: bool,
    immediate: &[u8],
    digests: bool,
) -> Vec<u8> {
    let mut h = bhs(0x01, 0x80 | if write { 0x20 } else { 0x40 }, 0, itt);
    h[20..24].copy_from_slice(&edtl.to_be_bytes());
    h[32..32 + cdb.len()].copy_from_slice(cdb);
    pdu(h, immediate, digests)
}

fn read16(lba: u64, blocks: u32) -> Vec<u8> {
    let mut c = vec![0x88, 0];
    c.extend(lba.to_be_bytes());
    c.extend(blocks.to_be_bytes());
    c.extend([0, 0]);
    c
}

fn write10(lba: u32, blocks: u16) -> Vec<u8> {
    let mut c = vec![0x2a, 0];
    c.extend(lba.to_be_bytes());
    c.push(0);
    c.extend(blocks.to_be_bytes());
    c.push(0);
    c
}

fn login_response(digest: bool) -> Vec<u8> {
    let text: &[u8] = if digest {
        b"HeaderDigest=CRC32C\0DataDigest=CRC32C\0"
    } else {
        b"HeaderDigest=None\0DataDigest=None\0"
    };
    pdu(bhs(0x23, 0x80 | 0x04 | 0x03, 0, 0x77), text, false)
}

/// Initiator: login; READ(16) ITT 1 (8 blocks of 512); WRITE(10) ITT 2 with 512 bytes
/// immediate then 1024 bytes of Data-Out after an R2T; TEST UNIT READY ITT 3.
fn initiator(digests: bool) -> Vec<u8> {
    let mut s = pdu(
        bhs(0x43, 0x87, 0, 0x77),
        b"HeaderDigest=CRC32C,None\0",
        false,
    );
    s.extend(command(1, &read16(1 << 33, 8), 4096, false, &[], digests));
    s.extend(command(
        2,
        &write10(100, 3),
        1536,
        true,
        &[0x11; 512],
        digests,
    ));
    s.extend(pdu(bhs(0x05, 0x80, 0, 2), &[0x22; 1024], digests));
    s.extend(command(3, &[0; 6], 0, false, &[], digests));
    s
}

/// Target: login response; R2T for ITT 2; Data-In ×2 for ITT 1 (the last with status);
/// SCSI Response for 2 then 3.
fn target(digests: bool) -> Vec<u8> {
    let mut s = login_response(digests);
    s.extend(pdu(bhs(0x31, 0x80, 0, 2), &[], digests));
    s.extend(pdu(bhs(0x25, 0x00, 0, 1), &[0xaa; 2048], digests));
    s.extend(pdu(bhs(0x25, 0x81, 0, 1), &[0xbb; 2048], digests));
    s.extend(pdu(bhs(0x21, 0x80, 0, 2), &[], digests));
    s.extend(pdu(bhs(0x21, 0x80, 0, 3), &[], digests));
    s
}

fn at(n: u64) -> At {
    At {
        frame: FrameNo(n),
        ts: Timestamp(n as i64 * 1_000_000),
    }
}

/// Login exchange first (both directions), then the rest; `cut` splits the initiator's
/// bytes after the login.
fn run(digests: bool, cut: Option<usize>) -> Collect {
    let mut conn = IscsiConn::new(64);
    let mut sink = Collect::default();
    let (ini, tgt) = (initiator(digests), target(digests));
    let login_req = 48 + 28; // BHS + padded text
    let login_rsp = login_response(digests).len();
    let mut fi = Framer::new(true);
    let mut ft = Framer::new(true);
    macro_rules! feed {
        ($f:expr, $dir:expr, $bytes:expr, $at:expr) => {{
            let mut h = IscsiDir {
                conn: &mut conn,
                dir: $dir,
                stream: StreamId(2),
                sink: &mut sink,
            };
            $f.data($bytes, $at, &mut h);
        }};
    }
    feed!(fi, Dir::ClientToServer, &ini[..login_req], at(1));
    feed!(ft, Dir::ServerToClient, &tgt[..login_rsp], at(2));
    let rest = &ini[login_req..];
    let c = cut.unwrap_or(rest.len()).min(rest.len());
    feed!(fi, Dir::ClientToServer, &rest[..c], at(3));
    feed!(fi, Dir::ClientToServer, &rest[c..], at(4));
    feed!(ft, Dir::ServerToClient, &tgt[login_rsp..], at(5));
    conn.finish(StreamId(2), &mut sink);
    sink
}

#[test]
fn commands_match_their_status() {
    for digests in [false, true] {
        let got = run(digests, None);
        let t = &got.transactions;
        let ops: Vec<(&str, u64)> = t.iter().map(|t| (t.op, t.id)).collect();
        assert_eq!(
            ops,
            [("Read(16)", 1), ("Write(10)", 2), ("Test Unit Ready", 3)],
            "digests {digests}"
        );
        let r = t[0].io.unwrap();
        assert_eq!(
            (r.kind, r.offset, r.len, r.blocks, r.done_len),
            (IoKind::Read, 1 << 33, 4096, Some(8), Some(4096))
        );
        let w = t[1].io.unwrap();
        assert_eq!(
            (w.kind, w.offset, w.len, w.blocks, w.done_len),
            (IoKind::Write, 100, 1536, Some(3), Some(1536))
        );
        assert!(t[2].io.is_none());
        assert!(t.iter().all(|t| t.reply.unwrap().last.frame == FrameNo(5)));
        assert_eq!(got.requests.len(), 3);
    }
}

#[test]
fn pdus_split_at_every_byte_boundary() {
    for digests in [false, true] {
        let want: Vec<_> = run(digests, None)
            .transactions
            .iter()
            .map(|t| (t.op, t.id, t.io))
            .collect();
        let n = initiator(digests).len();
        for cut in 0..n {
            let got: Vec<_> = run(digests, Some(cut))
                .transactions
                .iter()
                .map(|t| (t.op, t.id, t.io))
                .collect();
            assert_eq!(got, want, "cut {cut} digests {digests}");
        }
    }
}

#[test]
fn cdb_extents() {
    assert_eq!(
        cdb_extent(&[0x08, 0x1f, 0xff, 0xff, 0, 0]),
        Some((IoKind::Read, 0x1f_ffff, 256))
    );
    assert_eq!(cdb_extent(&write10(7, 9)), Some((IoKind::Write, 7, 9)));
    let mut r12 = vec![0xa8, 0, 0, 0, 1, 0, 0, 0, 0, 2, 0, 0];
    assert_eq!(cdb_extent(&r12), Some((IoKind::Read, 256, 2)));
    r12.truncate(5);
    assert_eq!(cdb_extent(&r12), None);
    assert_eq!(
        cdb_extent(&[0x35, 0, 0, 0, 0, 0, 0, 0, 0, 0]),
        Some((IoKind::Commit, 0, 0))
    );
    assert_eq!(cdb_extent(&[0x12, 0, 0, 0, 36, 0]), None);
    assert_eq!(opcode_name(0x88), "Read(16)");
    assert_eq!(opcode_name(0x9e), "Service Action In(16)");
    assert_eq!(opcode_name(0xff), "Unknown");
}

#[test]
fn arbitrary_bytes_never_panic() {
    let base = [initiator(true), target(false)].concat();
    let mut x: u64 = 0x1234_5678_9abc_def1;
    let mut conn = IscsiConn::new(8);
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
            *b = b.wrapping_mul((x >> 3) as u8 | 1);
        }
        let mut h = IscsiDir {
            conn: &mut conn,
            dir: Dir::ServerToClient,
            stream: StreamId(0),
            sink: &mut sink,
        };
        f.data(&chunk, at(round), &mut h);
        let _ = cdb_extent(&chunk);
    }
    assert!(conn.outstanding() <= 8);
}

/// The ITTs of the commands found in `bytes` by a framer that starts lost (a capture that
/// starts mid-stream), fed in chunks of `chunk` bytes.
fn commands_found(bytes: &[u8], chunk: usize) -> Vec<u32> {
    let mut conn = IscsiConn::new(64);
    let mut sink = Collect::default();
    let mut f = Framer::new(false);
    let mut h = IscsiDir {
        conn: &mut conn,
        dir: Dir::ClientToServer,
        stream: StreamId(2),
        sink: &mut sink,
    };
    for (i, c) in bytes.chunks(chunk.max(1)).enumerate() {
        f.data(c, at(i as u64), &mut h);
    }
    let mut itts: Vec<u32> = conn.pending.keys().copied().collect();
    itts.sort_unstable();
    itts
}

#[test]
fn a_capture_starting_anywhere_finds_exactly_the_commands_that_start_in_it() {
    let ini = initiator(false);
    let login = 48 + 28;
    let read = command(1, &read16(1 << 33, 8), 4096, false, &[], false).len();
    let write = command(2, &write10(100, 3), 1536, true, &[0x11; 512], false).len();
    let data_out = pdu(bhs(0x05, 0x80, 0, 2), &[0x22; 1024], false).len();
    let starts = [login, login + read, login + read + write + data_out];
    for from in 0..ini.len() {
        let want: Vec<u32> = (1..=3u32)
            .filter(|&i| starts[i as usize - 1] >= from)
            .collect();
        for chunk in [1, 29, 1460, ini.len()] {
            assert_eq!(
                commands_found(&ini[from..], chunk),
                want,
                "from {from}, chunks of {chunk}"
            );
        }
    }
}

#[test]
fn garbage_before_the_first_command_is_skipped() {
    // A command look-alike with reserved bytes set, then one whose data runs into junk.
    let mut s = vec![0x55u8; 100];
    let mut bad = command(9, &read16(0, 1), 512, false, &[], false);
    bad[2] = 1;
    s.extend(&bad);
    let mut runs = command(8, &read16(0, 1), 512, false, &[], false);
    runs[7] = 8; // 8 bytes of data: the next BHS would start in the junk
    s.extend(&runs);
    s.extend([0x55u8; 60]); // opcode 0x15: none
    s.extend(&initiator(false)[48 + 28..]);
    assert_eq!(commands_found(&s, 1460), [1, 2, 3]);
}

#[test]
fn no_resynchronisation_inside_read_data() {
    // The first Data-In's data holds a whole SCSI Response to the waiting command 3.
    let fake = pdu(bhs(0x21, 0x80, 0, 3), &[], false);
    let mut data = vec![0xaa; 100];
    data.extend(&fake);
    data.resize(2048, 0xaa);
    let mut t = login_response(false);
    let login_rsp = t.len();
    t.extend(pdu(bhs(0x25, 0x00, 0, 1), &data, false));
    let real = t.len();
    t.extend(pdu(bhs(0x21, 0x80, 0, 3), &[], false));
    for lost in [10, 48, 120] {
        let mut conn = IscsiConn::new(64);
        let mut sink = Collect::default();
        let mut fi = Framer::new(true);
        let mut h = IscsiDir {
            conn: &mut conn,
            dir: Dir::ClientToServer,
            stream: StreamId(2),
            sink: &mut sink,
        };
        fi.data(&initiator(false), at(1), &mut h);
        let mut ft = Framer::new(true);
        let mut h = IscsiDir {
            conn: &mut conn,
            dir: Dir::ServerToClient,
            stream: StreamId(2),
            sink: &mut sink,
        };
        ft.data(&t[..login_rsp], at(2), &mut h);
        // The Data-In's head was not captured.
        ft.gap(lost as u64, at(3), &mut h);
        ft.data(&t[login_rsp + lost..real], at(4), &mut h);
        ft.data(&t[real..], at(5), &mut h);
        let got: Vec<(u64, u64)> = sink
            .transactions
            .iter()
            .filter(|t| t.reply.is_some())
            .map(|t| (t.id, t.reply.unwrap().last.frame.0))
            .collect();
        assert_eq!(
            got,
            [(3, 5)],
            "lost {lost}: only the real response, at frame 5"
        );
        assert_eq!(ft.stats().resynced, 1);
    }
}
