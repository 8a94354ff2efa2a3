//! Writes seed corpora for the fuzz targets from real captures.
//!
//! `make-seeds OUT_DIR CAPTURE_OR_DIR...`: for each capture (directories are walked), writes
//! `OUT_DIR/capture/` (the file's first 32 KiB, raw and to be gzip-compressed by the
//! harness), `OUT_DIR/wire/` (frames of every link type, a few per file) and
//! `OUT_DIR/analyzer/` (the file's TCP segments re-expressed as the analyzer target's
//! ops, first four connections) and `OUT_DIR/storage/` (payloads of the first connections
//! to an NFS, SMB or iSCSI port, as the storage target's chunks). Seeds are named by content hash, so reruns add nothing new.
#![forbid(unsafe_code)]

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::{Path, PathBuf};

use tcpdx_capture::CaptureReader;
use tcpdx_core::{FlowKey, Segment};
use tcpdx_fuzz::analyzer::{Config, OP_LEN, Op, Sender};
use tcpdx_fuzz::{capture, storage, wire};
use tcpdx_wire::decode;

const CAPTURE_PREFIX: usize = 32 * 1024;
const WIRE_PER_FILE: usize = 24;
const ANALYZER_OPS: usize = 400;
const STORAGE_CONNS: usize = 4;
const STORAGE_SEED_BYTES: usize = 60 * 1024;

fn main() {
    let args: Vec<PathBuf> = std::env::args_os().skip(1).map(PathBuf::from).collect();
    let Some((out, inputs)) = args.split_first() else {
        eprintln!("usage: make-seeds OUT_DIR CAPTURE_OR_DIR...");
        std::process::exit(2);
    };
    let mut files = Vec::new();
    for i in inputs {
        walk(i, &mut files);
    }
    files.sort();
    let mut counts: HashMap<&str, usize> = HashMap::new();
    for f in &files {
        for (target, seed) in seeds(f) {
            let dir = out.join(target);
            std::fs::create_dir_all(&dir).expect("create seed dir");
            let mut h = DefaultHasher::new();
            seed.hash(&mut h);
            std::fs::write(dir.join(format!("{:016x}", h.finish())), &seed).expect("write seed");
            *counts.entry(target).or_default() += 1;
        }
    }
    let mut c: Vec<_> = counts.into_iter().collect();
    c.sort();
    for (t, n) in c {
        println!("{t}: {n} seeds written from {} files", files.len());
    }
}

fn walk(p: &Path, out: &mut Vec<PathBuf>) {
    if p.is_dir() {
        if let Ok(rd) = std::fs::read_dir(p) {
            for e in rd.flatten() {
                walk(&e.path(), out);
            }
        }
        return;
    }
    let name = p.to_string_lossy();
    let capture_like = [
        ".pcap", ".pcapng", ".cap", ".gz", ".zst", ".pcap.gz", ".ntar",
    ]
    .iter()
    .any(|e| name.ends_with(e));
    if capture_like {
        out.push(p.to_path_buf());
    }
}

fn seeds(path: &Path) -> Vec<(&'static str, Vec<u8>)> {
    let mut v = Vec::new();
    let Ok(bytes) = std::fs::read(path) else {
        return v;
    };
    let prefix = &bytes[..bytes.len().min(CAPTURE_PREFIX)];
    v.push(("capture", capture::encode(0, prefix)));
    let Ok(mut reader) = CaptureReader::open(path) else {
        return v;
    };
    if bytes.len() <= CAPTURE_PREFIX / 2 && !path.to_string_lossy().ends_with(".gz") {
        v.push(("capture", capture::encode(2, &bytes)));
    }
    let mut per_link: HashMap<u16, usize> = HashMap::new();
    let mut keys: Vec<FlowKey> = Vec::new();
    let mut first_sender: HashMap<FlowKey, tcpdx_core::Endpoint> = HashMap::new();
    let mut sender = Sender::default();
    let mut ops = Vec::new();
    Config {
        max_unacked: 0xff,
        sweep_every: 0xff,
        max_flows: 0xff,
    }
    .encode(&mut ops);
    let mut n_ops = 0;
    let mut last_ts = None;
    while let Ok(Some(frame)) = reader.next_frame() {
        let seen = per_link.entry(frame.link.0).or_default();
        if *seen < WIRE_PER_FILE
            && let Some(s) = wire::encode(frame.link.0, frame.orig_len, frame.data)
        {
            *seen += 1;
            v.push(("wire", s));
        }
        if n_ops >= ANALYZER_OPS {
            if per_link.values().all(|&n| n >= WIRE_PER_FILE) {
                break;
            }
            continue;
        }
        let view = decode(frame.link, frame.data, frame.orig_len);
        let Some(seg) = Segment::from_view(frame.no, frame.ts, &view) else {
            continue;
        };
        let (key, _) = FlowKey::new(seg.src, seg.dst);
        let c = match keys.iter().position(|k| *k == key) {
            Some(c) => c,
            None if keys.len() < 4 => {
                keys.push(key);
                first_sender.insert(key, seg.src);
                keys.len() - 1
            }
            None => continue,
        };
        let d = u8::from(first_sender.get(&key) != Some(&seg.src));
        let dt_us = last_ts.map_or(0, |t: i64| (frame.ts.0 - t) / 1000);
        last_ts = Some(frame.ts.0);
        let mut op = Op {
            conn: c as u8 | d << 2,
            flags: seg.flags.0,
            len: u16::try_from(seg.len).unwrap_or(u16::MAX),
            window: seg.window,
            dt_us: i32::try_from(dt_us).unwrap_or(i32::MAX),
            ws: seg.options.window_scale.unwrap_or(0),
            ..Op::default()
        };
        op.opts = u8::from(seg.options.mss.is_some())
            | u8::from(seg.options.window_scale.is_some()) << 1
            | u8::from(seg.options.sack_permitted) << 2
            | u8::from(seg.options.timestamps.is_some()) << 3
            | seg.options.sack_count.min(4) << 4;
        // Deltas against the sender model: a dry run with zero deltas tells its `next`.
        let probe = sender_next(&sender, &op);
        op.seq_delta = seg.seq.0.wrapping_sub(probe.0) as i32;
        op.ack_delta = seg.ack.0.wrapping_sub(probe.1) as i32;
        for (i, (l, r)) in seg.options.sack_blocks().iter().enumerate().take(4) {
            op.sack[i] = (
                l.0.wrapping_sub(seg.ack.0) as i32,
                u16::try_from(r.0.wrapping_sub(l.0)).unwrap_or(u16::MAX),
            );
        }
        sender.segment(&op);
        op.encode(&mut ops);
        n_ops += 1;
    }
    if n_ops > 0 {
        debug_assert_eq!(ops.len(), 3 + n_ops * OP_LEN);
        v.push(("analyzer", ops));
    }
    storage_seeds(path, &mut v);
    v
}

/// `storage` seeds: the TCP payloads of the file's first connections to a storage port, as
/// in-order chunks in both directions (retransmissions and holes are the fuzzer's job).
fn storage_seeds(path: &Path, v: &mut Vec<(&'static str, Vec<u8>)>) {
    let Ok(mut reader) = CaptureReader::open(path) else {
        return;
    };
    // Per connection (up to STORAGE_CONNS): the seed being built and its server endpoint.
    let mut conns: Vec<(FlowKey, tcpdx_core::Endpoint, Vec<u8>)> = Vec::new();
    while let Ok(Some(frame)) = reader.next_frame() {
        let view = decode(frame.link, frame.data, frame.orig_len);
        let (Some(seg), Some(tcp)) = (Segment::from_view(frame.no, frame.ts, &view), view.tcp)
        else {
            continue;
        };
        let server = [seg.dst, seg.src]
            .into_iter()
            .find(|e| storage::PORTS.contains(&e.port));
        let Some(server) = server else { continue };
        let (key, _) = FlowKey::new(seg.src, seg.dst);
        let i = match conns.iter().position(|c| c.0 == key) {
            Some(i) => i,
            None if conns.len() < STORAGE_CONNS => {
                let port = storage::PORTS
                    .iter()
                    .position(|&p| p == server.port)
                    .unwrap_or(0);
                let syn = seg.flags.syn();
                conns.push((key, server, vec![storage::encode_selector(port, syn)]));
                conns.len() - 1
            }
            None => continue,
        };
        let dir = u8::from(seg.src == conns[i].1);
        let seed = &mut conns[i].2;
        if tcp.payload.is_empty() || seed.len() >= STORAGE_SEED_BYTES {
            continue;
        }
        storage::encode_chunk(seed, dir, storage::kind::IN_ORDER, 0, tcp.payload);
    }
    for (_, _, seed) in conns {
        if seed.len() > 1 {
            v.push(("storage", seed));
        }
    }
}

/// The sender's next sequence numbers (own, peer's) for the 4-tuple and direction of `op`.
fn sender_next(s: &Sender, op: &Op) -> (u32, u32) {
    let mut dry = Op {
        seq_delta: 0,
        ack_delta: 0,
        ..*op
    };
    dry.opts = 0;
    let seg = s.clone().segment(&dry);
    (seg.seq.0, seg.ack.0)
}
