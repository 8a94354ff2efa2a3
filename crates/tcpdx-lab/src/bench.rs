//! `tcpdx-lab bench-relay`: packets per second through the relay with bulk TCP flows.
//!
//! Packets are counted where they leave the router after the relay (tx packets of the
//! router's two veths, which carry only what the relay wrote): MTU-sized wire packets in
//! both directions (data segments and ACKs), whatever the relay handled internally (with
//! `--gso` it forwards GRO super-packets whole, so one TUN packet is many wire packets).
//! CPU use of the relay and of each CPU is measured over the same window, so the output
//! says which side limited the rate.

use crate::relay::RelayArgs;
use crate::run::{
    RelayProc, link_drops, relay_route_off, relay_route_on, softnet_dropped, spawn_in,
};
use crate::scenario::{BULK_PORT, RelayPath};
use crate::topology::{Lab, TopoConfig};
use anyhow::{Context, Result, bail};
use clap::Args;
use serde::{Deserialize, Serialize};
use std::time::{Duration, Instant};

/// Options of the relay benchmark.
#[derive(Debug, Clone, Args, Serialize, Deserialize)]
pub struct BenchOpts {
    /// Link MTU.
    #[arg(long, default_value_t = 1500)]
    pub mtu: u32,
    /// One-way delay in the relay (ms).
    #[arg(long, default_value_t = 5.0)]
    pub delay_ms: f64,
    /// Seconds of traffic.
    #[arg(long, default_value_t = 8.0)]
    pub secs: f64,
    /// Relay busy-poll threshold (µs).
    #[arg(long, default_value_t = 20)]
    pub spin_us: u32,
    /// GSO mode: GRO on the router's ingress veths, the relay forwards super-packets whole.
    #[arg(long)]
    pub gso: bool,
    /// Parallel bulk flows (each its own sender and receiver process).
    #[arg(long, default_value_t = 1)]
    pub flows: u16,
    /// CPU of the receiving processes (the relay runs on CPU0, everything else on CPU1).
    #[arg(long, default_value_t = 1)]
    #[serde(default)]
    pub recv_cpu: u32,
    /// Ordinary copying sender and receiver instead of the light generator (sendfile from
    /// memory, receiver discarding in the kernel with MSG_TRUNC).
    #[arg(long)]
    #[serde(default)]
    pub copying_ends: bool,
    /// TSO/GSO on the client's veth: the sender hands TCP super-packets to the router as to
    /// a NIC with segmentation offload (cheaper generator; the router's egress veths still
    /// carry, and count, MTU-sized wire packets). Only with --gso.
    #[arg(long, requires = "gso")]
    #[serde(default)]
    pub sender_offloads: bool,
    /// CPU of the sending processes.
    #[arg(long, default_value_t = 1)]
    #[serde(default)]
    pub send_cpu: u32,
}

/// Result of a relay benchmark.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BenchResult {
    /// The options.
    pub opts: BenchOpts,
    /// Wire packets (MTU-sized data segments and ACKs, both directions) forwarded after
    /// the relay per second, thousands.
    pub kpps: f64,
    /// Wire packets forwarded after the relay during the window.
    pub packets: u64,
    /// Seconds measured.
    pub secs: f64,
    /// Sum of the flows' goodput (Mbit/s).
    pub goodput_mbit_s: f64,
    /// TUN tx_dropped + backlog (softnet) drops + veth drops + relay overflow/write
    /// errors during the run.
    pub unintended_drops: u64,
    /// Sender retransmitted segments.
    pub retrans_segs: u64,
    /// D-SACKs the senders received (spurious retransmissions: reordering, not loss).
    pub dsack_recv: u64,
    /// Relay CPU seconds during the window.
    pub relay_cpu_s: f64,
    /// Relay CPU use during the window (1.0 = one CPU saturated).
    pub relay_busy: f64,
    /// Busy fraction of each CPU during the window (everything on the machine).
    pub cpu_busy: Vec<f64>,
    /// Wire packets the relay could forward per CPU-second of its own (capacity on a
    /// dedicated CPU), thousands.
    pub kpps_per_cpu_s: f64,
    /// Dropped packets (tx + rx) counted by the lab's veths over the whole run.
    pub veth_drops: u64,
    /// The same per veth: "dev": [tx_dropped, rx_dropped] (non-zero only).
    pub veth_drops_by_dev: std::collections::BTreeMap<String, (u64, u64)>,
    /// Non-zero nstat counters of the client (sender) namespace.
    pub sender_nstat: std::collections::BTreeMap<String, u64>,
    /// Relay counters (whole run).
    pub relay: crate::relay::RelayStats,
}

fn tx_packets(ns: &str, dev: &str) -> u64 {
    let out =
        crate::cmd::run("ip", &["-n", ns, "-s", "-j", "link", "show", dev]).unwrap_or_default();
    let v: serde_json::Value = serde_json::from_str(&out).unwrap_or_default();
    v[0]["stats64"]["tx"]["packets"].as_u64().unwrap_or(0)
}

/// (busy, total) jiffies per CPU from /proc/stat.
fn cpu_jiffies() -> Vec<(u64, u64)> {
    std::fs::read_to_string("/proc/stat")
        .unwrap_or_default()
        .lines()
        .filter(|l| l.starts_with("cpu") && !l.starts_with("cpu "))
        .map(|l| {
            let v: Vec<u64> = l
                .split_whitespace()
                .skip(1)
                .filter_map(|x| x.parse().ok())
                .collect();
            let idle = v.get(3).copied().unwrap_or(0) + v.get(4).copied().unwrap_or(0);
            let total: u64 = v.iter().take(8).sum();
            (total - idle, total)
        })
        .collect()
}

/// utime + stime of a process in seconds (USER_HZ is 100 on Linux).
fn proc_cpu_s(pid: u32) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            let rest = s.rsplit_once(") ")?.1;
            let f: Vec<&str> = rest.split_whitespace().collect();
            let t: u64 = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
            Some(t as f64 / 100.0)
        })
        .unwrap_or(0.0)
}

/// Builds a lab, runs bulk flows through a relay with `opts.delay_ms` each way for
/// `opts.secs` and measures the rate.
pub fn bench_relay(opts: &BenchOpts) -> Result<BenchResult> {
    crate::topology::install_signal_cleanup()?;
    let mtu = opts.mtu;
    let lab = Lab::create(&TopoConfig {
        mtu,
        offloads: false,
    })?;
    let n = &lab.names;
    let dir = std::env::temp_dir().join(format!("{}-bench", n.prefix));
    std::fs::create_dir_all(&dir)?;
    relay_route_on(n, RelayPath::Both, mtu, opts.gso)?;
    if opts.sender_offloads {
        crate::cmd::ns_run(
            &n.ns_c,
            "ethtool",
            &["-K", &n.dev_c, "tso", "on", "gso", "on"],
        )?;
    }
    // Large socket buffers: with 10 ms RTT the default 4 MB send / 6 MB receive limits
    // cap the flow below what the relay can carry (window-bound, not CPU-bound).
    crate::cmd::ns_run(
        &n.ns_c,
        "sysctl",
        &["-qw", "net.ipv4.tcp_wmem=4096 16384 67108864"],
    )?;
    crate::cmd::ns_run(
        &n.ns_s,
        "sysctl",
        &["-qw", "net.ipv4.tcp_rmem=4096 131072 67108864"],
    )?;
    let args = RelayArgs {
        dev: n.dev_tun.clone(),
        server: n.ip_s.parse()?,
        delay_ms: opts.delay_ms,
        delay_c2s_ms: None,
        delay_s2c_ms: None,
        only_port: None,
        drop_nth: String::new(),
        drop_repeat: 0,
        drop_prob: 0.0,
        blackout_after: String::new(),
        blackout_ms: 0.0,
        reorder_nth: String::new(),
        reorder_prob: 0.0,
        reorder_k: 3,
        reorder_delay_ms: 0.0,
        seed: 1,
        log: None,
        stats: Some(dir.join("relay.stats.json").to_string_lossy().into()),
        slots: 32768,
        slot_size: (mtu as usize + 64).max(2048),
        spin_us: opts.spin_us,
        nice: -10,
        gso: opts.gso,
    };
    let relay = RelayProc::start(n, &args, &dir)?;
    let exe = std::env::current_exe()?.to_string_lossy().into_owned();
    let flows = opts.flows.max(1);
    let mut receivers = Vec::new();
    for f in 0..flows {
        let ready = dir.join(format!("ready{f}"));
        let mut a: Vec<String> = vec![
            "bulk".into(),
            "recv".into(),
            "--listen".into(),
            format!("{}:{}", n.ip_s, BULK_PORT + f),
            "--ready-file".into(),
            ready.to_string_lossy().into(),
        ];
        if !opts.copying_ends {
            a.push("--discard".into());
        }
        receivers.push(spawn_in(
            &n.ns_s,
            opts.recv_cpu,
            &exe,
            &a,
            &dir.join(format!("recv{f}.json")),
        )?);
        for _ in 0..100 {
            if ready.exists() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    crate::run::nstat_reset(&n.ns_c)?;
    let wire = || tx_packets(&n.ns_r, &n.dev_rs) + tx_packets(&n.ns_r, &n.dev_rc);
    let (tun_start, softnet_start) = (link_drops(&n.ns_r, &n.dev_tun).0, softnet_dropped());
    let mut senders = Vec::new();
    for f in 0..flows {
        let mut a: Vec<String> = vec![
            "bulk".into(),
            "send".into(),
            "--to".into(),
            format!("{}:{}", n.ip_s, BULK_PORT + f),
            "--secs".into(),
            opts.secs.to_string(),
            "--cc".into(),
            "cubic".into(),
        ];
        if !opts.copying_ends {
            a.push("--zerocopy".into());
        }
        senders.push(spawn_in(
            &n.ns_c,
            opts.send_cpu,
            &exe,
            &a,
            &dir.join(format!("send{f}.json")),
        )?);
    }
    // Measure the middle of the transfer: skip slow start and the final drain.
    let skip = (opts.secs * 0.2).min(1.0);
    std::thread::sleep(Duration::from_secs_f64(skip));
    let (p0, c0, j0) = (wire(), proc_cpu_s(relay.pid()), cpu_jiffies());
    let t0 = Instant::now();
    std::thread::sleep(Duration::from_secs_f64((opts.secs - 2.0 * skip).max(0.5)));
    let el = t0.elapsed().as_secs_f64();
    let (p1, c1, j1) = (wire(), proc_cpu_s(relay.pid()), cpu_jiffies());
    let mut goodput = 0.0;
    for (f, s) in senders.into_iter().enumerate() {
        let out = s.wait_with_output()?;
        if !out.status.success() {
            bail!(
                "bulk sender {f} failed: {}",
                std::fs::read_to_string(dir.join(format!("send{f}.err"))).unwrap_or_default()
            );
        }
        let r: crate::workload::bulk::BulkResult = serde_json::from_str(
            std::fs::read_to_string(dir.join(format!("send{f}.json")))?.trim(),
        )
        .context("bulk sender result")?;
        goodput += r.mbit_s;
    }
    for mut r in receivers {
        let _ = r.wait();
    }
    let nst = crate::run::nstat_delta(&n.ns_c)?;
    let tun_drops = link_drops(&n.ns_r, &n.dev_tun).0 - tun_start;
    let softnet_drops = softnet_dropped() - softnet_start;
    let pairs = [
        ((&n.ns_c, &n.dev_c), (&n.ns_r, &n.dev_rc)),
        ((&n.ns_r, &n.dev_rs), (&n.ns_s, &n.dev_s)),
    ];
    let mut veth_drops_by_dev = std::collections::BTreeMap::new();
    // One lost packet can count as tx_dropped of the sending veth *and* rx_dropped of its
    // peer (and in softnet_stat): per direction of a pair take the larger of the two.
    let mut veth_lost = 0;
    for ((ns_a, a), (ns_b, b)) in pairs {
        let (da, db) = (link_drops(ns_a, a), link_drops(ns_b, b));
        veth_lost += da.0.max(db.1) + db.0.max(da.1);
        for (d, v) in [(a, da), (b, db)] {
            if v.0 + v.1 > 0 {
                veth_drops_by_dev.insert(d.to_string(), v);
            }
        }
    }
    let veth_drops = veth_drops_by_dev.values().map(|(t, r)| t + r).sum();
    let st = relay.stop()?;
    relay_route_off(n);
    let _ = std::fs::remove_dir_all(&dir);
    drop(lab);
    let packets = p1 - p0;
    let relay_cpu_s = c1 - c0;
    let cpu_busy = j0
        .iter()
        .zip(&j1)
        .map(|(a, b)| (b.0 - a.0) as f64 / (b.1 - a.1).max(1) as f64)
        .collect();
    Ok(BenchResult {
        opts: opts.clone(),
        kpps: packets as f64 / el / 1e3,
        packets,
        secs: el,
        goodput_mbit_s: goodput,
        unintended_drops: tun_drops
            + softnet_drops.max(veth_lost)
            + st.pool_overflow
            + st.write_errors,
        retrans_segs: nst.get("TcpRetransSegs").copied().unwrap_or(0),
        dsack_recv: nst.get("TcpExtTCPDSACKRecv").copied().unwrap_or(0),
        relay_cpu_s,
        relay_busy: relay_cpu_s / el,
        cpu_busy,
        kpps_per_cpu_s: packets as f64 / relay_cpu_s.max(0.01) / 1e3,
        veth_drops,
        veth_drops_by_dev,
        sender_nstat: nst,
        relay: st,
    })
}
