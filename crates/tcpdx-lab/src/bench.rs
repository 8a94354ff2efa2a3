//! `tcpdx-lab bench-relay`: packets per second through the relay with bulk TCP flows.
//!
//! The rate is MTU-sized wire segments (data segments client-to-server and ACKs
//! server-to-client, given apart) written by the relay over the middle of the transfer,
//! from the relay's own counters (a snapshot on SIGUSR1 at both ends of the window): with
//! `--gso` one TUN packet is a super-packet standing for many wire segments. The same
//! window's TCP/IP counters of both hosts (segments sent, payload bytes received / MSS,
//! ACKs sent) check that count. CPU use of the relay and of each CPU is measured over the
//! same window, so the output says which side limited the rate.

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
    /// a NIC with segmentation offload (cheaper generator: the client's veth then carries
    /// super-packets, not MTU-sized packets; the router's egress veths still cut them
    /// unless --gso-to-hosts). Only with --gso.
    #[arg(long, requires = "gso")]
    #[serde(default)]
    pub sender_offloads: bool,
    /// CPU of the sending processes.
    #[arg(long, default_value_t = 1)]
    #[serde(default)]
    pub send_cpu: u32,
    /// Benchmark only (with --gso): super-packets continue past the relay to the end
    /// hosts (GSO/TSO on the router's egress veths), so the receiver takes and ACKs them
    /// whole instead of one MTU-sized packet at a time. The relay reads and writes the same
    /// super-packets as with --gso alone and decides per wire segment; the rate is still
    /// counted in MTU-sized wire segments (relay counters, checked against the hosts' TCP
    /// counters), but the hosts see fewer, larger packets than on a real MTU-1500 wire.
    #[arg(long, requires = "gso")]
    #[serde(default)]
    pub gso_to_hosts: bool,
    /// GRO on the end hosts' veths, as a receiving NIC does: the receiver merges the
    /// MTU-sized packets it gets into super-packets before TCP sees them (and ACKs
    /// fewer); the router-to-host veths still carry MTU-sized packets unless
    /// --gso-to-hosts.
    #[arg(long)]
    #[serde(default)]
    pub host_gro: bool,
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
    /// TUN tx_dropped + qdisc drops (TUN and veths) + backlog (softnet) drops + veth drops
    /// + relay overflow/write errors during the run.
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
    /// The window's counts from the relay and from both hosts' TCP/IP counters.
    #[serde(default)]
    pub window: Window,
}

/// What passed during the measured window, counted by the relay and by the end hosts
/// (a cross-check of the relay's wire-segment counting, whatever the packet sizes).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Window {
    /// Relay time between the two snapshots (s).
    pub relay_secs: f64,
    /// Wire segments the relay wrote client-to-server (data).
    pub relay_c2s: u64,
    /// Wire segments the relay wrote server-to-client (ACKs).
    pub relay_s2c: u64,
    /// Packets (skbs) the relay wrote: super-packets count once.
    pub relay_tun_writes: u64,
    /// Packets (skbs) the router's two veths sent (super-packets count once).
    pub router_tx_packets: u64,
    /// Orchestrator time between the two veth counter reads (s).
    pub wall_secs: f64,
    /// Segments the client's TCP sent (TcpOutSegs: a GSO skb counts its segments).
    pub client_out_segs: u64,
    /// Full-size data segments the server received: payload bytes / (MTU - 52), payload
    /// = IP bytes received - 52 header bytes per received packet (IP + TCP with timestamps).
    pub server_rx_segs: u64,
    /// Segments the server's TCP sent (TcpOutSegs: the ACKs).
    pub server_out_segs: u64,
    /// ACK packets the client received (TcpInSegs).
    pub client_in_segs: u64,
    /// Out-of-order segments the server queued (TcpExtTCPOFOQueue): reordering or loss
    /// upstream of its TCP.
    #[serde(default)]
    pub server_ofo: u64,
    /// Retransmitted segments of the client (TcpRetransSegs).
    #[serde(default)]
    pub client_retrans: u64,
    /// Whether the relay's counts agree with the hosts' (data within 2 %, ACKs within 2 %
    /// or 200).
    pub counts_agree: bool,
}

/// Absolute SNMP counters of the namespace of process `pid` (/proc/net/snmp and
/// /proc/net/netstat), named as nstat names them ("TcpOutSegs", "IpExtInOctets").
fn snmp(pid: u32) -> std::collections::BTreeMap<String, u64> {
    parse_snmp(&(proc_net(pid, "snmp") + &proc_net(pid, "netstat")))
}

/// Parses the header-line / value-line pairs of /proc/net/snmp and /proc/net/netstat.
fn parse_snmp(text: &str) -> std::collections::BTreeMap<String, u64> {
    let mut m = std::collections::BTreeMap::new();
    let lines: Vec<&str> = text.lines().collect();
    for pair in lines.chunks_exact(2) {
        let (Some((p, names)), Some((q, vals))) =
            (pair[0].split_once(": "), pair[1].split_once(": "))
        else {
            continue;
        };
        if p != q {
            continue;
        }
        for (k, v) in names.split_whitespace().zip(vals.split_whitespace()) {
            if let Ok(v) = v.parse::<u64>() {
                m.insert(format!("{p}{k}"), v);
            }
        }
    }
    m
}

fn delta(
    a: &std::collections::BTreeMap<String, u64>,
    b: &std::collections::BTreeMap<String, u64>,
    k: &str,
) -> u64 {
    b.get(k)
        .copied()
        .unwrap_or(0)
        .saturating_sub(a.get(k).copied().unwrap_or(0))
}

/// Whether two counts of the same packets agree within `rel` (relative) or `abs`.
fn agree(a: u64, b: u64, rel: f64, abs: u64) -> bool {
    let d = a.abs_diff(b);
    d <= abs || d as f64 <= rel * a.max(b) as f64
}

/// Sum of the tx packets of `devs` in /proc/net/dev `text`.
fn dev_tx_packets(text: &str, devs: &[&str]) -> u64 {
    text.lines()
        .filter_map(|l| l.split_once(':'))
        .filter(|(d, _)| devs.contains(&d.trim()))
        .filter_map(|(_, v)| v.split_whitespace().nth(9)?.parse::<u64>().ok())
        .sum()
}

/// A /proc/net file as the namespace of process `pid` sees it (a file read: no process
/// spawned, so readings of several namespaces are taken within microseconds).
fn proc_net(pid: u32, file: &str) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/net/{file}")).unwrap_or_default()
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
    if opts.gso_to_hosts {
        for dev in [&n.dev_rs, &n.dev_rc] {
            crate::cmd::ns_run(&n.ns_r, "ethtool", &["-K", dev, "tso", "on", "gso", "on"])?;
        }
    }
    if opts.host_gro {
        // GRO makes the end hosts' veths receive through a 256-packet NAPI ring: a queue
        // on the router's side lets the kernel hold packets back when it is full.
        for (ns, dev, peer) in [
            (&n.ns_c, &n.dev_c, &n.dev_rc),
            (&n.ns_s, &n.dev_s, &n.dev_rs),
        ] {
            crate::cmd::ns_run(ns, "ethtool", &["-K", dev, "gro", "on"])?;
            crate::cmd::ns_run(
                &n.ns_r,
                "tc",
                &[
                    "qdisc", "replace", "dev", peer, "root", "pfifo", "limit", "10000",
                ],
            )?;
        }
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
    // Counters of every namespace, read through a process living in it.
    let (cli_pid, srv_pid) = (senders[0].id(), receivers[0].id());
    let read = || {
        (
            snmp(cli_pid),
            snmp(srv_pid),
            dev_tx_packets(&proc_net(relay.pid(), "dev"), &[&n.dev_rs, &n.dev_rc]),
            cpu_jiffies(),
            Instant::now(),
        )
    };
    let (r0, (cli0, srv0, p0, j0, t0)) = relay.snapshot(read)?;
    std::thread::sleep(Duration::from_secs_f64((opts.secs - 2.0 * skip).max(0.5)));
    let (r1, (cli1, srv1, p1, j1, t1)) = relay.snapshot(read)?;
    let el = (t1 - t0).as_secs_f64();
    let rx_payload = delta(&srv0, &srv1, "IpExtInOctets")
        .saturating_sub(52 * delta(&srv0, &srv1, "IpInReceives"));
    let mut window = Window {
        relay_secs: r1.elapsed_s - r0.elapsed_s,
        relay_c2s: r1.tx_wire_c2s - r0.tx_wire_c2s,
        relay_s2c: r1.tx_wire_s2c - r0.tx_wire_s2c,
        relay_tun_writes: r1.tx - r0.tx,
        router_tx_packets: p1 - p0,
        wall_secs: el,
        client_out_segs: delta(&cli0, &cli1, "TcpOutSegs"),
        server_rx_segs: rx_payload / u64::from(mtu.saturating_sub(52).max(1)),
        server_out_segs: delta(&srv0, &srv1, "TcpOutSegs"),
        client_in_segs: delta(&cli0, &cli1, "TcpInSegs"),
        server_ofo: delta(&srv0, &srv1, "TcpExtTCPOFOQueue"),
        client_retrans: delta(&cli0, &cli1, "TcpRetransSegs"),
        counts_agree: false,
    };
    window.counts_agree = agree(window.relay_c2s, window.client_out_segs, 0.02, 200)
        && agree(window.relay_c2s, window.server_rx_segs, 0.02, 200)
        && agree(window.relay_s2c, window.server_out_segs, 0.02, 200);
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
    // Queues the lab put in front of the TUN and the veths (pfifo for backpressure) drop
    // without touching the links' counters.
    let qdisc_drops: u64 = [
        (&n.ns_r, &n.dev_tun),
        (&n.ns_c, &n.dev_c),
        (&n.ns_r, &n.dev_rc),
        (&n.ns_r, &n.dev_rs),
        (&n.ns_s, &n.dev_s),
    ]
    .into_iter()
    .map(|(ns, dev)| crate::run::qdisc_stats(ns, dev).0)
    .sum();
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
    let packets = window.relay_c2s + window.relay_s2c;
    let relay_cpu_s = r1.cpu_s - r0.cpu_s;
    let secs = window.relay_secs.max(1e-3);
    let cpu_busy = j0
        .iter()
        .zip(&j1)
        .map(|(a, b)| (b.0 - a.0) as f64 / (b.1 - a.1).max(1) as f64)
        .collect();
    Ok(BenchResult {
        opts: opts.clone(),
        kpps: packets as f64 / secs / 1e3,
        packets,
        secs,
        goodput_mbit_s: goodput,
        unintended_drops: tun_drops
            + qdisc_drops
            + softnet_drops.max(veth_lost)
            + st.pool_overflow
            + st.write_errors,
        retrans_segs: nst.get("TcpRetransSegs").copied().unwrap_or(0),
        dsack_recv: nst.get("TcpExtTCPDSACKRecv").copied().unwrap_or(0),
        relay_cpu_s,
        relay_busy: relay_cpu_s / secs,
        cpu_busy,
        kpps_per_cpu_s: packets as f64 / relay_cpu_s.max(0.01) / 1e3,
        veth_drops,
        veth_drops_by_dev,
        sender_nstat: nst,
        relay: st,
        window,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snmp_pairs_parse_with_nstat_names() {
        let t = "Ip: Forwarding InReceives\nIp: 1 42\nTcp: InSegs OutSegs\nTcp: 7 9\n\
                 IpExt: InOctets\nIpExt: 1500\nBad: A\nOther: 1\n";
        let m = parse_snmp(t);
        assert_eq!(m["IpInReceives"], 42);
        assert_eq!(m["TcpOutSegs"], 9);
        assert_eq!(m["TcpInSegs"], 7);
        assert_eq!(m["IpExtInOctets"], 1500);
        assert!(!m.contains_key("BadA") && !m.contains_key("OtherA"));
    }

    #[test]
    fn dev_tx_packets_sums_named_devices() {
        let t = "Inter-|   Receive |  Transmit\n face |bytes    packets errs drop fifo frame \
                 compressed multicast|bytes    packets errs drop fifo colls carrier compressed\n\
                 \x20   lo: 0 0 0 0 0 0 0 0 0 5 0 0 0 0 0 0\n\
                 tdx1rs: 10 1 0 0 0 0 0 0 3000 7 0 0 0 0 0 0\n\
                 tdx1rc: 10 1 0 0 0 0 0 0 3000 11 0 0 0 0 0 0\n";
        assert_eq!(dev_tx_packets(t, &["tdx1rs", "tdx1rc"]), 18);
        assert_eq!(dev_tx_packets(t, &["lo"]), 5);
        assert_eq!(dev_tx_packets(t, &["nope"]), 0);
    }

    #[test]
    fn counts_agree_within_tolerance() {
        assert!(agree(100_000, 101_500, 0.02, 200));
        assert!(!agree(100_000, 103_000, 0.02, 200));
        assert!(agree(10, 150, 0.02, 200));
        assert!(!agree(0, 500, 0.02, 200));
    }
}
