//! `tcpdx-lab bench-relay`: packets per second through the relay with a bulk TCP flow.

use crate::relay::RelayArgs;
use crate::run::{
    RelayProc, link_drops, relay_route_off, relay_route_on, softnet_dropped, spawn_in,
};
use crate::scenario::{BULK_PORT, RelayPath};
use crate::topology::{Lab, TopoConfig};
use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::time::{Duration, Instant};

/// Result of a relay benchmark.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BenchResult {
    /// Packets through the relay per second, thousands (both directions).
    pub kpps: f64,
    /// Packets through the relay.
    pub packets: u64,
    /// Seconds measured.
    pub secs: f64,
    /// Bulk goodput (Mbit/s).
    pub goodput_mbit_s: f64,
    /// TUN tx_dropped + softnet drops + relay overflow during the run.
    pub unintended_drops: u64,
    /// Sender retransmitted segments.
    pub retrans_segs: u64,
    /// Packets the relay could forward per CPU-second (capacity on a dedicated CPU), thousands.
    pub kpps_per_cpu_s: f64,
    /// Relay counters.
    pub relay: crate::relay::RelayStats,
}

fn tun_packets(ns: &str, dev: &str) -> u64 {
    let out =
        crate::cmd::run("ip", &["-n", ns, "-s", "-j", "link", "show", dev]).unwrap_or_default();
    let v: serde_json::Value = serde_json::from_str(&out).unwrap_or_default();
    v[0]["stats64"]["tx"]["packets"].as_u64().unwrap_or(0)
}

/// Builds a lab, runs a bulk flow through a relay with `delay_ms` each way for `secs`
/// (`spin_us`: the relay's busy-poll threshold).
pub fn bench_relay(mtu: u32, delay_ms: f64, secs: f64, spin_us: u32) -> Result<BenchResult> {
    crate::topology::install_signal_cleanup()?;
    let lab = Lab::create(&TopoConfig {
        mtu,
        offloads: false,
    })?;
    let n = &lab.names;
    let dir = std::env::temp_dir().join(format!("{}-bench", n.prefix));
    std::fs::create_dir_all(&dir)?;
    relay_route_on(n, RelayPath::Both, mtu)?;
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
        delay_ms,
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
        spin_us,
        nice: -10,
    };
    let relay = RelayProc::start(n, &args, &dir)?;
    let exe = std::env::current_exe()?.to_string_lossy().into_owned();
    let ready = dir.join("ready");
    let recv = spawn_in(
        &n.ns_s,
        1,
        &exe,
        &[
            "bulk".into(),
            "recv".into(),
            "--listen".into(),
            format!("{}:{BULK_PORT}", n.ip_s),
            "--ready-file".into(),
            ready.to_string_lossy().into(),
        ],
        &dir.join("recv.json"),
    )?;
    for _ in 0..100 {
        if ready.exists() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    crate::run::nstat_reset(&n.ns_c)?;
    let (p0, d0, s0) = (
        tun_packets(&n.ns_r, &n.dev_tun),
        link_drops(&n.ns_r, &n.dev_tun).0,
        softnet_dropped(),
    );
    let t0 = Instant::now();
    let send = spawn_in(
        &n.ns_c,
        1,
        &exe,
        &[
            "bulk".into(),
            "send".into(),
            "--to".into(),
            format!("{}:{BULK_PORT}", n.ip_s),
            "--secs".into(),
            secs.to_string(),
            "--cc".into(),
            "cubic".into(),
        ],
        &dir.join("send.json"),
    )?;
    let out = send.wait_with_output()?;
    let el = t0.elapsed().as_secs_f64();
    let (p1, d1, s1) = (
        tun_packets(&n.ns_r, &n.dev_tun),
        link_drops(&n.ns_r, &n.dev_tun).0,
        softnet_dropped(),
    );
    let _ = out;
    let mut recv = recv;
    let _ = recv.wait();
    let nst = crate::run::nstat_delta(&n.ns_c)?;
    let st = relay.stop()?;
    relay_route_off(n);
    let send_res: crate::workload::bulk::BulkResult =
        serde_json::from_str(std::fs::read_to_string(dir.join("send.json"))?.trim())
            .context("bulk sender result")?;
    let _ = std::fs::remove_dir_all(&dir);
    drop(lab);
    let packets = p1 - p0;
    Ok(BenchResult {
        kpps: packets as f64 / el / 1e3,
        packets,
        secs: el,
        goodput_mbit_s: send_res.mbit_s,
        unintended_drops: (d1 - d0) + (s1 - s0) + st.pool_overflow + st.write_errors,
        retrans_segs: nst.get("TcpRetransSegs").copied().unwrap_or(0),
        kpps_per_cpu_s: st.tx as f64 / st.cpu_s.max(1e-9) / 1e3,
        relay: st,
    })
}
