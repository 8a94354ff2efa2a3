//! The lab sweep: scenarios with randomized parameters drawn from a seed ([`generate`]),
//! labelled from the kernel's truth and the injected impairments ([`labels`]), scored
//! against `tcpdx diagnose --json` ([`score`]). Same seed, same scenario.

pub mod labels;
pub mod rounds;
pub mod score;

use crate::scenario::{
    BULK_PORT, NftHook, NftLossSpec, Point, RelaySpec, RouteSpec, Scenario, StorageOp, TbfSpec,
    Workload,
};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::PathBuf;

/// Seconds of transfer a case aims at (short cases: 100+ fit in well under an hour).
pub const TARGET_SECS: f64 = 1.5;
/// Smallest bulk transfer (bytes).
pub const MIN_BYTES: u64 = 200_000;
/// Largest bulk transfer (bytes).
pub const MAX_BYTES: u64 = 8_000_000;
/// Rate a clean bulk flow reaches through the per-packet relay on this 2-CPU VM (bit/s).
const LAB_RATE_BPS: f64 = 300e6;
const MSS: f64 = 1448.0;

/// First seed that may carry the send-buffer recipe ([`send_buffer`]).
pub const SEND_BUFFER_FROM: u64 = 6000;
/// Percent of those seeds that carry it.
const SEND_BUFFER_PERCENT: u32 = 20;
/// The send buffers (tcp_wmem max, bytes) the recipe picks from.
pub const SEND_BUFFERS: [u64; 5] = [16_384, 32_768, 65_536, 131_072, 262_144];
/// A send buffer at most this share of the path's bandwidth-delay product: well below it,
/// so the buffer, not a window, holds the flight.
const SEND_BUFFER_MAX_BDP: f64 = 0.4;

/// Parses a seed range: "1-60", "7", or a comma list of both ("1-3,10").
pub fn parse_seeds(s: &str) -> Result<Vec<u64>, String> {
    let mut v = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let bad = || format!("bad seed range {part:?} (want N or N-M)");
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (u64, u64) = (
                    a.trim().parse().map_err(|_| bad())?,
                    b.trim().parse().map_err(|_| bad())?,
                );
                if b < a {
                    return Err(bad());
                }
                v.extend(a..=b);
            }
            None => v.push(part.parse().map_err(|_| bad())?),
        }
    }
    if v.is_empty() {
        return Err("no seeds given".into());
    }
    v.sort_unstable();
    v.dedup();
    Ok(v)
}

/// Directory name of a case.
pub fn case_dir_name(seed: u64) -> String {
    format!("seed{seed:05}")
}

fn log_uniform(r: &mut ChaCha8Rng, lo: f64, hi: f64) -> f64 {
    (r.random_range(lo.ln()..hi.ln())).exp()
}

fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

fn pick<'a, T>(r: &mut ChaCha8Rng, v: &'a [T]) -> &'a T {
    &v[r.random_range(0..v.len())]
}

fn pick_cc(r: &mut ChaCha8Rng) -> String {
    (*pick(r, &["reno", "cubic", "bbr"])).to_string()
}

fn pick_capture(r: &mut ChaCha8Rng) -> Point {
    match r.random_range(0..20) {
        0..11 => Point::Client,
        11..16 => Point::Server,
        _ => Point::RouterServerSide,
    }
}

/// The scenario of sweep case `seed`: a pure function of the seed.
pub fn generate(seed: u64) -> Scenario {
    // Mixed so that neighbouring seeds do not share a prefix of the stream.
    let mut r = ChaCha8Rng::seed_from_u64(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0x5eed);
    let rtt_ms = round1(log_uniform(&mut r, 2.0, 60.0));
    let family = r.random_range(0..100);
    let mut sc = Scenario {
        name: format!("sweep_{seed}"),
        description: String::new(),
        mtu: 1500,
        seed,
        workload: Workload::Bulk {
            bytes: 0,
            short_bytes: 0,
            cc: String::new(),
            rcvbuf: None,
            read_size: None,
            read_sleep_ms: 0.0,
            start_delay_ms: 0.0,
        },
        relay: Some(RelaySpec {
            delay_ms: round1(rtt_ms / 2.0),
            ..Default::default()
        }),
        tbf: None,
        nft_loss: None,
        receiver_route: RouteSpec::default(),
        sender_wmem_max: None,
        capture: pick_capture(&mut r),
        ack_loss_per_mille: 0,
        no_window_scaling: false,
        snaplen: 128,
        expect: Default::default(),
    };
    let mut desc = vec![format!("RTT {rtt_ms} ms")];
    match family {
        0..62 => bulk(&mut r, &mut sc, rtt_ms, &mut desc),
        62..74 => reqresp(&mut r, &mut sc, rtt_ms, &mut desc),
        _ => storage(&mut r, &mut sc, &mut desc),
    }
    // Reordering alone and drops inside the receiving host are rare among the mixes above;
    // a separate stream picks ~12% of the seeds for them (the other seeds' cases unchanged).
    let mut s2 = ChaCha8Rng::seed_from_u64(seed.wrapping_mul(0xd134_2543_de82_ef95) ^ 0x0e0e);
    match s2.random_range(0..100) {
        0..8 => {
            desc = vec![format!("RTT {rtt_ms} ms")];
            pure_reordering(&mut s2, &mut sc, rtt_ms, &mut desc);
        }
        8..12 => {
            desc = vec![format!("RTT {rtt_ms} ms")];
            host_drops(&mut s2, &mut sc, rtt_ms, &mut desc);
        }
        12..16 => {
            desc = vec![format!("RTT {rtt_ms} ms")];
            rto_delack(&mut s2, &mut sc, &mut desc);
        }
        _ => {}
    }
    // Seeds from SEND_BUFFER_FROM on: a third stream picks ~20% of them for a sender held
    // by its own send buffer (seeds below keep their cases).
    if seed >= SEND_BUFFER_FROM {
        let mut s3 = ChaCha8Rng::seed_from_u64(seed.wrapping_mul(0xa076_1d64_78bd_642f) ^ 0x5bdf);
        if s3.random_range(0..100) < SEND_BUFFER_PERCENT {
            desc = Vec::new();
            send_buffer(&mut s3, &mut sc, &mut desc);
        }
    }
    desc.push(format!("capture {}", sc.capture.stem()));
    sc.description = desc.join(", ");
    sc
}

fn bulk(r: &mut ChaCha8Rng, sc: &mut Scenario, rtt_ms: f64, desc: &mut Vec<String>) {
    let cc = pick_cc(r);
    desc.insert(0, format!("bulk {cc}"));
    let rtt = rtt_ms / 1e3;
    let mut rate = LAB_RATE_BPS;
    let mut extra_s = 0.0;
    // data segments the transfer must reach so that chosen drops and blackouts happen
    let mut min_segments = 0u64;
    let relay = sc.relay.as_mut().expect("relay");
    // loss
    if r.random_bool(0.45) {
        match r.random_range(0..5) {
            0 | 1 => {
                let p = round1(r.random_range(0.05..2.0)) / 100.0;
                relay.drop_prob = p;
                rate = rate.min(MSS * 8.0 * 1.22 / (rtt * p.sqrt()));
                desc.push(format!("random loss {:.2}%", p * 100.0));
            }
            2 => {
                // a burst of consecutive segments lost, once or twice
                let n = r.random_range(1..=2);
                let mut at = r.random_range(150..600);
                let mut v = Vec::new();
                for _ in 0..n {
                    let len = r.random_range(3..40);
                    v.push(format!("{at}-{}", at + len - 1));
                    at += len + r.random_range(200..900);
                }
                min_segments = at;
                relay.drop_nth = v.join(",");
                desc.push(format!("burst loss {}", relay.drop_nth));
                extra_s += 0.3 * n as f64;
            }
            3 => {
                let n = r.random_range(1..=2);
                let mut at = r.random_range(200..800);
                let mut v = Vec::new();
                for _ in 0..n {
                    v.push(at.to_string());
                    at += r.random_range(400..1500);
                }
                min_segments = at;
                relay.blackout_after = v.join(",");
                relay.blackout_ms = round1(r.random_range(30.0..300.0));
                desc.push(format!(
                    "blackout {} ms at {}",
                    relay.blackout_ms, relay.blackout_after
                ));
                extra_s += 0.6 * n as f64;
            }
            _ => {
                let per_mille = r.random_range(1..=20);
                let hook = if r.random_bool(0.4) {
                    NftHook::ServerInput
                } else {
                    NftHook::RouterForward
                };
                sc.nft_loss = Some(NftLossSpec {
                    hook,
                    per_mille,
                    dport: BULK_PORT,
                });
                let p = f64::from(per_mille) / 1000.0;
                rate = rate.min(MSS * 8.0 * 1.22 / (rtt * p.sqrt()));
                desc.push(format!(
                    "nft loss {per_mille}‰ {}",
                    match hook {
                        NftHook::ServerInput => "in the receiving host",
                        NftHook::RouterForward => "in the router",
                    }
                ));
            }
        }
        if relay.drop_prob > 0.0 && r.random_bool(0.25) {
            relay.drop_repeat = 1;
            desc.push("retransmissions dropped once too".into());
            extra_s += 0.5;
        }
    }
    // reordering
    if r.random_bool(0.25) {
        relay.reorder_prob = f64::from(r.random_range(2..=10)) / 1000.0;
        if r.random_bool(0.5) {
            relay.reorder_k = r.random_range(3..20);
            desc.push(format!(
                "reorder {:.1}% by {} packets",
                relay.reorder_prob * 100.0,
                relay.reorder_k
            ));
        } else {
            relay.reorder_delay_ms = round1(r.random_range(2.0..30.0));
            desc.push(format!(
                "reorder {:.1}% held {} ms",
                relay.reorder_prob * 100.0,
                relay.reorder_delay_ms
            ));
        }
    }
    // bottleneck
    if r.random_bool(0.3) {
        let mbit = r.random_range(20..=200);
        let limit_kb = *pick(r, &[16, 32, 64, 128, 256]);
        sc.tbf = Some(TbfSpec {
            to_server: true,
            rate: format!("{mbit}mbit"),
            burst: "16kb".into(),
            limit: format!("{limit_kb}kb"),
        });
        rate = rate.min(f64::from(mbit) * 1e6);
        desc.push(format!("tbf {mbit} Mbit/s queue {limit_kb} KB"));
    }
    // ACK loss
    if r.random_bool(0.12) {
        sc.ack_loss_per_mille = r.random_range(5..=50);
        desc.push(format!("ACK loss {}‰", sc.ack_loss_per_mille));
    }
    // receiver
    let (mut rcvbuf, mut read_size, mut read_sleep_ms, mut start_delay_ms) = (None, None, 0.0, 0.0);
    match r.random_range(0..100) {
        0..12 => {
            let b = *pick(r, &[32768usize, 65536, 131072, 262144]);
            rcvbuf = Some(b);
            rate = rate.min(b as f64 * 0.5 * 8.0 / rtt);
            desc.push(format!("receiver SO_RCVBUF {} KiB", b / 1024));
        }
        12..24 => {
            let rs = *pick(r, &[16384usize, 32768, 65536]);
            let sleep = round1(r.random_range(10.0..100.0));
            rcvbuf = Some(65536);
            read_size = Some(rs);
            read_sleep_ms = sleep;
            if r.random_bool(0.4) {
                start_delay_ms = round1(r.random_range(100.0..700.0));
            }
            rate = rate.min(rs as f64 * 8.0 / (sleep / 1e3));
            extra_s += start_delay_ms / 1e3;
            desc.push(format!(
                "slow reader {} KiB every {sleep} ms{}",
                rs / 1024,
                if start_delay_ms > 0.0 {
                    format!(" after {start_delay_ms} ms")
                } else {
                    String::new()
                }
            ));
        }
        _ => {}
    }
    if r.random_bool(0.12) {
        sc.no_window_scaling = true;
        rate = rate.min(65535.0 * 8.0 / rtt);
        desc.push("window scaling off".into());
    }
    let secs = (TARGET_SECS - extra_s).max(0.5);
    let bytes = ((rate / 8.0 * secs) as u64)
        .max(min_segments * MSS as u64)
        .clamp(MIN_BYTES, MAX_BYTES);
    sc.workload = Workload::Bulk {
        bytes,
        short_bytes: bytes,
        cc,
        rcvbuf,
        read_size,
        read_sleep_ms,
        start_delay_ms,
    };
    desc.push(format!("{:.1} MB", bytes as f64 / 1e6));
}

fn plain_bulk(sc: &mut Scenario, cc: String, bytes: u64) {
    sc.workload = Workload::Bulk {
        bytes,
        short_bytes: bytes,
        cc,
        rcvbuf: None,
        read_size: None,
        read_sleep_ms: 0.0,
        start_delay_ms: 0.0,
    };
    sc.relay = Some(RelaySpec {
        delay_ms: sc.relay.as_ref().map_or(1.0, |r| r.delay_ms),
        ..Default::default()
    });
    sc.tbf = None;
    sc.nft_loss = None;
    sc.ack_loss_per_mille = 0;
    sc.no_window_scaling = false;
    sc.snaplen = 128;
}

/// Bulk with reordering only: segments held longer than RACK's window (a quarter of the
/// minimum RTT) or by a count, so the sender may retransmit data that was not lost.
fn pure_reordering(r: &mut ChaCha8Rng, sc: &mut Scenario, rtt_ms: f64, desc: &mut Vec<String>) {
    let cc = pick_cc(r);
    desc.insert(0, format!("bulk {cc}, reordering only"));
    plain_bulk(sc, cc, 4_000_000);
    sc.capture = pick_capture(r);
    let relay = sc.relay.as_mut().expect("relay");
    relay.reorder_prob = f64::from(r.random_range(3..=10)) / 1000.0;
    if r.random_bool(0.7) {
        relay.reorder_delay_ms =
            round1(r.random_range((rtt_ms / 2.0).max(2.0)..30.0_f64.max(rtt_ms)));
        desc.push(format!(
            "reorder {:.1}% held {} ms",
            relay.reorder_prob * 100.0,
            relay.reorder_delay_ms
        ));
    } else {
        relay.reorder_k = r.random_range(3..20);
        desc.push(format!(
            "reorder {:.1}% by {} packets",
            relay.reorder_prob * 100.0,
            relay.reorder_k
        ));
    }
    desc.push("4.0 MB".into());
}

/// Bulk with data segments dropped inside the receiving host (after every capture point).
fn host_drops(r: &mut ChaCha8Rng, sc: &mut Scenario, rtt_ms: f64, desc: &mut Vec<String>) {
    let cc = pick_cc(r);
    desc.insert(0, format!("bulk {cc}"));
    let per_mille = r.random_range(3..=20);
    let p = f64::from(per_mille) / 1000.0;
    let rate = LAB_RATE_BPS.min(MSS * 8.0 * 1.22 / (rtt_ms / 1e3 * p.sqrt()));
    let bytes = ((rate / 8.0 * TARGET_SECS) as u64).clamp(MIN_BYTES, MAX_BYTES);
    plain_bulk(sc, cc, bytes);
    sc.nft_loss = Some(NftLossSpec {
        hook: NftHook::ServerInput,
        per_mille,
        dport: BULK_PORT,
    });
    sc.capture = *pick(r, &[Point::Server, Point::RouterServerSide, Point::Client]);
    desc.push(format!("nft loss {per_mille}‰ in the receiving host"));
    desc.push(format!("{:.1} MB", bytes as f64 / 1e6));
}

/// Case 000's recipe with random values: blackouts force RTOs and the receiver (route
/// rto_min 1 s, so no quickack after the silence; fixed SO_RCVBUF) delays the ACK of the lone
/// post-RTO segment.
fn rto_delack(r: &mut ChaCha8Rng, sc: &mut Scenario, desc: &mut Vec<String>) {
    let cc = (*pick(r, &["reno", "cubic"])).to_string();
    desc.insert(0, format!("bulk {cc}, RTO + delayed ACK receiver"));
    let n = r.random_range(1..=2);
    let mut at = r.random_range(300..1000);
    let mut v = Vec::new();
    for _ in 0..n {
        v.push(at.to_string());
        at += r.random_range(800..2000);
    }
    let bytes = ((at + 500) * MSS as u64).clamp(MIN_BYTES, MAX_BYTES);
    plain_bulk(sc, cc, bytes);
    if let Workload::Bulk { rcvbuf, .. } = &mut sc.workload {
        *rcvbuf = Some(1_048_576);
    }
    sc.receiver_route = RouteSpec {
        rto_min_ms: Some(1000),
        quickack: false,
    };
    sc.capture = pick_capture(r);
    let relay = sc.relay.as_mut().expect("relay");
    relay.blackout_after = v.join(",");
    relay.blackout_ms = round1(r.random_range(100.0..250.0));
    desc.push(format!(
        "blackout {} ms at {}",
        relay.blackout_ms, relay.blackout_after
    ));
    desc.push("receiver rto_min 1 s, SO_RCVBUF 1 MiB".into());
    desc.push(format!("{:.1} MB", bytes as f64 / 1e6));
}

/// A clean bulk transfer whose sender's send buffer (tcp_wmem max in the sender's
/// namespace, so autotuning stops there) is well below the path's bandwidth-delay product:
/// the buffer holds the flight, not the congestion or the receiver's window.
fn send_buffer(r: &mut ChaCha8Rng, sc: &mut Scenario, desc: &mut Vec<String>) {
    let cc = pick_cc(r);
    desc.push(format!("bulk {cc}, send buffer"));
    let rtt_ms = round1(log_uniform(r, 8.0, 60.0));
    desc.push(format!("RTT {rtt_ms} ms"));
    let mut rate = LAB_RATE_BPS;
    let tbf = r.random_bool(0.3).then(|| {
        let mbit = r.random_range(40..=200);
        rate = f64::from(mbit) * 1e6;
        mbit
    });
    let bdp = rate / 8.0 * rtt_ms / 1e3;
    let fits: Vec<u64> = SEND_BUFFERS
        .iter()
        .copied()
        .filter(|&b| b as f64 <= bdp * SEND_BUFFER_MAX_BDP)
        .collect();
    let wmem = *pick(
        r,
        if fits.is_empty() {
            &SEND_BUFFERS[..1]
        } else {
            &fits
        },
    );
    // Linux keeps about half the buffer's bytes as payload in flight (the rest overhead).
    let held_bps = (wmem as f64 * 0.5 * 8.0 / (rtt_ms / 1e3)).min(rate);
    // and at least 30 buffers' worth, so the held rounds are many, and 1.5 MB (tcpdx
    // reads less as chatter)
    let bytes = ((held_bps / 8.0 * TARGET_SECS) as u64)
        .max(30 * wmem)
        .max(1_500_000)
        .clamp(MIN_BYTES, MAX_BYTES);
    plain_bulk(sc, cc, bytes);
    sc.relay.as_mut().expect("relay").delay_ms = round1(rtt_ms / 2.0);
    if let Some(mbit) = tbf {
        sc.tbf = Some(TbfSpec {
            to_server: true,
            rate: format!("{mbit}mbit"),
            burst: "16kb".into(),
            limit: "256kb".into(),
        });
        desc.push(format!("tbf {mbit} Mbit/s"));
    }
    sc.sender_wmem_max = Some(wmem);
    // Mostly at the sender: only its capture shows the flight held below the windows.
    sc.capture = match r.random_range(0..20) {
        0..14 => Point::Client,
        14..17 => Point::Server,
        _ => Point::RouterServerSide,
    };
    desc.push(format!(
        "sender tcp_wmem max {} KiB (path BDP {:.0} KiB)",
        wmem / 1024,
        bdp / 1024.0
    ));
    desc.push(format!("{:.1} MB", bytes as f64 / 1e6));
}

fn reqresp(r: &mut ChaCha8Rng, sc: &mut Scenario, rtt_ms: f64, desc: &mut Vec<String>) {
    let cc = pick_cc(r);
    let nodelay = r.random_bool(0.5);
    // a Nagle turn costs up to a delayed ACK (~40 ms) on top of the round trip
    let per = rtt_ms + if nodelay { 0.0 } else { 40.0 };
    let transactions = ((TARGET_SECS * 1e3 / per) as u32).clamp(15, 80);
    let req_bytes = r.random_range(60..400);
    let resp_bytes = r.random_range(200..4000);
    desc.insert(
        0,
        format!(
            "request/response {cc}, {transactions} x ({req_bytes} B in 2 writes -> {resp_bytes} B), {}",
            if nodelay { "TCP_NODELAY" } else { "Nagle on" }
        ),
    );
    sc.workload = Workload::ReqResp {
        transactions,
        parts: 2,
        req_bytes,
        resp_bytes,
        nodelay,
        cc,
    };
    sc.snaplen = 0;
}

fn storage(r: &mut ChaCha8Rng, sc: &mut Scenario, desc: &mut Vec<String>) {
    let op = *pick(
        r,
        &[
            StorageOp::Smb3Read,
            StorageOp::Smb3Write,
            StorageOp::Nfs3Read,
            StorageOp::Nfs3Write,
            StorageOp::Nfs4Read,
            StorageOp::IscsiRead,
        ],
    );
    let server_cc = (*pick(r, &["reno", "bbr"])).to_string();
    let short_mib = r.random_range(2..=4);
    let mut server_stall_ms = 0;
    let mut server_duty_ms = None;
    match r.random_range(0..10) {
        0..5 => server_stall_ms = r.random_range(200..=2000),
        5 if op == StorageOp::IscsiRead => {
            server_duty_ms = Some((r.random_range(10..=30), r.random_range(5..=20)))
        }
        _ => {}
    }
    desc.insert(0, format!("{op:?} {short_mib} MiB, server {server_cc}"));
    if server_stall_ms > 0 {
        desc.push(format!("server stopped {server_stall_ms} ms"));
    }
    if let Some((s, g)) = server_duty_ms {
        desc.push(format!("slow server (stopped {s} of every {} ms)", s + g));
    }
    if r.random_bool(0.25) {
        let relay = sc.relay.as_mut().expect("relay");
        relay.drop_prob = f64::from(r.random_range(2..=15)) / 1000.0;
        desc.push(format!("random loss {:.1}%", relay.drop_prob * 100.0));
    }
    sc.workload = Workload::Storage {
        op,
        mib: short_mib,
        short_mib,
        server_stall_ms,
        server_cc,
        server_duty_ms,
        queue_depth: None,
    };
    sc.snaplen = 0;
}

/// Options of `tcpdx-lab sweep`.
#[derive(Debug, Clone)]
pub struct SweepOpts {
    /// Seeds to run.
    pub seeds: Vec<u64>,
    /// Run directory (one `seedNNNNN` subdirectory per case).
    pub out: PathBuf,
}

/// One line of `sweep.jsonl` in the run directory.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CaseRun {
    /// Seed.
    pub seed: u64,
    /// The run finished (truth.json written).
    pub ok: bool,
    /// Wall time of the run (s), both attempts.
    pub secs: f64,
    /// Attempts made.
    pub attempts: u32,
    /// Unintended drops or capture loss (the truth's health problems).
    pub health: Vec<String>,
    /// Error of the last attempt.
    pub error: Option<String>,
    /// The recipe's description.
    pub description: String,
}

/// Runs the cases of `o.seeds` that `o.out` does not hold yet (a case directory with a
/// truth.json is kept); a failed case is tried once more at once. Returns the runs made.
pub fn run_sweep(o: &SweepOpts) -> anyhow::Result<Vec<CaseRun>> {
    std::fs::create_dir_all(&o.out)?;
    let mut runs = Vec::new();
    for &seed in &o.seeds {
        let dir = o.out.join(case_dir_name(seed));
        if dir.join("truth.json").is_file() {
            eprintln!("== seed {seed}: already in {}", dir.display());
            continue;
        }
        let sc = generate(seed);
        eprintln!("== seed {seed}: {}", sc.description);
        let t0 = std::time::Instant::now();
        let mut run = CaseRun {
            seed,
            ok: false,
            secs: 0.0,
            attempts: 0,
            health: Vec::new(),
            error: None,
            description: sc.description.clone(),
        };
        while run.attempts < 2 && !run.ok {
            run.attempts += 1;
            let _ = std::fs::remove_dir_all(&dir);
            let ro = crate::run::RunOpts {
                out: dir.clone(),
                short: true,
                seed: None,
                mtu: None,
                keep_trace: false,
                gzip: true,
                relay_gso: false,
            };
            match crate::run::run_scenario(&sc, &ro) {
                Ok(t) => {
                    run.ok = true;
                    run.error = None;
                    run.health = t.health.problems.clone();
                }
                Err(e) => {
                    eprintln!("   attempt {} FAILED: {e:#}", run.attempts);
                    run.error = Some(format!("{e:#}"));
                }
            }
        }
        run.secs = (t0.elapsed().as_secs_f64() * 10.0).round() / 10.0;
        eprintln!(
            "   {} in {:.1} s{}",
            if run.ok { "done" } else { "failed" },
            run.secs,
            if run.health.is_empty() {
                String::new()
            } else {
                format!(" (health: {})", run.health.join("; "))
            }
        );
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(o.out.join("sweep.jsonl"))?;
        writeln!(f, "{}", serde_json::to_string(&run)?)?;
        runs.push(run);
    }
    Ok(runs)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEEDS_BELOW_FINGERPRINT: u64 = 14_325_771_920_040_866_433;

    #[test]
    fn same_seed_same_scenario() {
        for seed in [1, 2, 40, 1001, 1120, 5999, 6000, 6001, 6040, 6200, u64::MAX] {
            assert_eq!(generate(seed), generate(seed), "seed {seed}");
        }
    }

    #[test]
    fn different_seeds_differ_and_cover_every_family() {
        let all: Vec<Scenario> = (1..=200).map(generate).collect();
        let distinct: std::collections::BTreeSet<String> = all
            .iter()
            .map(|s| serde_json::to_string(s).unwrap())
            .collect();
        assert_eq!(distinct.len(), all.len());
        let count = |f: &dyn Fn(&Scenario) -> bool| all.iter().filter(|s| f(s)).count();
        let bulk = count(&|s| matches!(s.workload, Workload::Bulk { .. }));
        let rr = count(&|s| matches!(s.workload, Workload::ReqResp { .. }));
        let st = count(&|s| matches!(s.workload, Workload::Storage { .. }));
        assert!(bulk > 90 && rr > 10 && st > 30, "{bulk} {rr} {st}");
        for (what, n) in [
            (
                "random loss",
                count(&|s| s.relay.as_ref().is_some_and(|r| r.drop_prob > 0.0)),
            ),
            (
                "burst",
                count(&|s| s.relay.as_ref().is_some_and(|r| !r.drop_nth.is_empty())),
            ),
            (
                "blackout",
                count(&|s| {
                    s.relay
                        .as_ref()
                        .is_some_and(|r| !r.blackout_after.is_empty())
                }),
            ),
            (
                "reorder by time",
                count(&|s| s.relay.as_ref().is_some_and(|r| r.reorder_delay_ms > 0.0)),
            ),
            (
                "reorder by count",
                count(&|s| {
                    s.relay
                        .as_ref()
                        .is_some_and(|r| r.reorder_prob > 0.0 && r.reorder_delay_ms == 0.0)
                }),
            ),
            ("tbf", count(&|s| s.tbf.is_some())),
            ("nft", count(&|s| s.nft_loss.is_some())),
            ("ack loss", count(&|s| s.ack_loss_per_mille > 0)),
            ("wscale off", count(&|s| s.no_window_scaling)),
            (
                "server stall",
                count(
                    &|s| matches!(s.workload, Workload::Storage { server_stall_ms, .. } if server_stall_ms > 0),
                ),
            ),
            (
                "slow reader",
                count(
                    &|s| matches!(s.workload, Workload::Bulk { read_sleep_ms, .. } if read_sleep_ms > 0.0),
                ),
            ),
            (
                "router capture",
                count(&|s| s.capture == Point::RouterServerSide),
            ),
            ("server capture", count(&|s| s.capture == Point::Server)),
        ] {
            assert!(n >= 3, "{what}: only {n} of 200");
        }
    }

    #[test]
    fn parameters_stay_in_their_ranges() {
        for seed in 1..=300 {
            let s = generate(seed);
            let r = s.relay.as_ref().unwrap();
            let rtt = 2.0 * r.delay_ms;
            assert!((1.9..=60.1).contains(&rtt), "seed {seed}: rtt {rtt}");
            assert!(r.drop_prob <= 0.02, "seed {seed}");
            assert!(r.reorder_prob <= 0.01, "seed {seed}");
            if let Some(l) = &s.nft_loss {
                assert!(l.per_mille <= 20);
            }
            match &s.workload {
                Workload::Bulk {
                    short_bytes, cc, ..
                } => {
                    assert!((MIN_BYTES..=MAX_BYTES).contains(short_bytes));
                    assert!(["reno", "cubic", "bbr"].contains(&cc.as_str()));
                    assert_eq!(s.snaplen, 128);
                }
                Workload::ReqResp { transactions, .. } => {
                    assert!((15..=80).contains(transactions));
                    assert_eq!(s.ack_loss_per_mille, 0);
                }
                Workload::Storage {
                    short_mib,
                    server_stall_ms,
                    ..
                } => {
                    assert!((2..=4).contains(short_mib));
                    assert!(*server_stall_ms == 0 || (200..=2000).contains(server_stall_ms));
                    assert_eq!(s.snaplen, 0);
                }
            }
        }
    }

    #[test]
    fn bulk_transfers_reach_every_chosen_drop_and_blackout() {
        let mut checked = 0;
        for seed in 1..=400 {
            let s = generate(seed);
            let (Workload::Bulk { short_bytes, .. }, Some(r)) = (&s.workload, &s.relay) else {
                continue;
            };
            let last = crate::relay::parse_list(&r.drop_nth)
                .unwrap()
                .into_iter()
                .chain(crate::relay::parse_list(&r.blackout_after).unwrap())
                .max();
            if let Some(last) = last {
                checked += 1;
                assert!(
                    *short_bytes / MSS as u64 > last + 100,
                    "seed {seed}: {short_bytes} bytes, last chosen segment {last}"
                );
            }
        }
        assert!(checked >= 20, "{checked}");
    }

    #[test]
    fn reordering_only_and_host_drop_cases() {
        let all: Vec<Scenario> = (1..=300).map(generate).collect();
        let pure: Vec<&Scenario> = all
            .iter()
            .filter(|s| s.description.contains("reordering only"))
            .collect();
        assert!(pure.len() >= 10, "{}", pure.len());
        for s in pure {
            let r = s.relay.as_ref().unwrap();
            assert!(r.reorder_prob > 0.0 && r.drop_prob == 0.0 && r.drop_nth.is_empty());
            assert!(r.blackout_after.is_empty() && s.tbf.is_none() && s.nft_loss.is_none());
            assert_eq!(s.ack_loss_per_mille, 0);
        }
        let host = all
            .iter()
            .filter(|s| {
                s.nft_loss
                    .as_ref()
                    .is_some_and(|l| l.hook == NftHook::ServerInput)
                    && s.capture != Point::Client
            })
            .count();
        assert!(host >= 5, "{host}");
        let delack = all
            .iter()
            .filter(|s| s.receiver_route.rto_min_ms == Some(1000))
            .count();
        assert!(delack >= 5, "{delack}");
    }

    /// FNV-1a over the scenarios' JSON: a fingerprint that stays put across Rust versions.
    fn fingerprint(seeds: std::ops::Range<u64>) -> u64 {
        let mut h = 0xcbf2_9ce4_8422_2325u64;
        for seed in seeds {
            for b in serde_json::to_vec(&generate(seed)).unwrap() {
                h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
            }
        }
        h
    }

    #[test]
    fn seeds_below_the_send_buffer_range_keep_their_scenarios() {
        // The fingerprint of seeds 1-5999 as generated before the send-buffer recipe (the
        // swept ranges 1-40, 1001-1120, ..., 5001-5120 stay reproducible).
        assert_eq!(fingerprint(1..SEND_BUFFER_FROM), SEEDS_BELOW_FINGERPRINT);
    }

    #[test]
    fn the_send_buffer_recipe_only_from_its_first_seed() {
        let is_sb = |s: &Scenario| s.sender_wmem_max.is_some();
        assert!(!(1..SEND_BUFFER_FROM).map(generate).any(|s| is_sb(&s)));
        let from: Vec<Scenario> = (SEND_BUFFER_FROM..SEND_BUFFER_FROM + 1000)
            .map(generate)
            .collect();
        let sb: Vec<&Scenario> = from.iter().filter(|s| is_sb(s)).collect();
        assert!((150..=250).contains(&sb.len()), "{}", sb.len());
        for s in sb {
            let Workload::Bulk {
                cc,
                short_bytes,
                rcvbuf,
                read_sleep_ms,
                ..
            } = &s.workload
            else {
                panic!("seed {}: not bulk", s.seed)
            };
            assert!(s.description.contains("send buffer"), "{}", s.description);
            assert!(["reno", "cubic", "bbr"].contains(&cc.as_str()));
            assert!(rcvbuf.is_none() && *read_sleep_ms == 0.0, "seed {}", s.seed);
            let r = s.relay.as_ref().unwrap();
            assert!(r.drop_prob == 0.0 && r.drop_nth.is_empty() && r.reorder_prob == 0.0);
            assert!(s.nft_loss.is_none() && s.ack_loss_per_mille == 0 && !s.no_window_scaling);
            // the buffer well below the path's bandwidth-delay product
            let rate = s.tbf.as_ref().map_or(LAB_RATE_BPS, |t| {
                t.rate.trim_end_matches("mbit").parse::<f64>().unwrap() * 1e6
            });
            let bdp = rate / 8.0 * 2.0 * r.delay_ms / 1e3;
            let w = s.sender_wmem_max.unwrap();
            assert!(SEND_BUFFERS.contains(&w));
            assert!(
                w as f64 <= bdp * SEND_BUFFER_MAX_BDP * 1.01,
                "seed {}",
                s.seed
            );
            // enough round trips for the finding's rounds
            assert!(
                *short_bytes >= 20 * w || *short_bytes == MAX_BYTES,
                "seed {}",
                s.seed
            );
            assert!(*short_bytes >= 1_500_000, "seed {}", s.seed);
        }
        // the other seeds of the range are the usual mix
        let rest = from.iter().filter(|s| !is_sb(s)).count();
        assert!(rest >= 750, "{rest}");
    }

    #[test]
    fn seed_ranges_parse() {
        assert_eq!(parse_seeds("1-3,7").unwrap(), vec![1, 2, 3, 7]);
        assert_eq!(parse_seeds("5").unwrap(), vec![5]);
        assert_eq!(parse_seeds("3-3").unwrap(), vec![3]);
        assert!(parse_seeds("4-2").is_err());
        assert!(parse_seeds("x").is_err());
        assert!(parse_seeds("").is_err());
    }
}
