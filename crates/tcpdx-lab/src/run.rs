//! Runs one scenario end to end: topology, impairments, captures, tracing, workload,
//! counters, and the reduction to `truth.json`.

use crate::capture::{self, Capture};
use crate::cmd::{self, ns_run, run, run_stdin};
use crate::relay::{RelayArgs, RelayStats};
use crate::scenario::{BULK_PORT, NftHook, Point, RelayPath, Scenario, Workload};
use crate::topology::{LAB_MARK, Lab, Names, TopoConfig};
use crate::trace::Tracer;
use crate::truth::{self, CaptureFile, ClockInfo, ConnInput, Counters, Health, TopoInfo, Truth};
use anyhow::{Context, Result, bail};
use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// Options of one run.
#[derive(Debug, Clone)]
pub struct RunOpts {
    /// Output directory.
    pub out: PathBuf,
    /// Use the scenario's short transfer size.
    pub short: bool,
    /// Override the seed.
    pub seed: Option<u64>,
    /// Override the link MTU (1500 or 9000).
    pub mtu: Option<u32>,
    /// Keep the raw tracefs text (trace.txt) in the output.
    pub keep_trace: bool,
    /// Gzip the captures (and remove the raw pcaps).
    pub gzip: bool,
    /// Run the relay in GSO mode (see [`crate::scenario::RelaySpec::gso`]).
    pub relay_gso: bool,
}

fn self_exe() -> Result<String> {
    Ok(std::env::current_exe()?.to_string_lossy().into_owned())
}

/// Spawns `prog args` in namespace `ns` pinned to `cpu`, stdout to `out`.
pub fn spawn_in(ns: &str, cpu: u32, prog: &str, args: &[String], out: &Path) -> Result<Child> {
    let f = std::fs::File::create(out)?;
    let err = std::fs::File::create(out.with_extension("err"))?;
    // Own process group: some servers (smbd --no-process-group) signal their whole
    // group on exit, which must not reach the orchestrator.
    Command::new("ip")
        .args(["netns", "exec", ns, "taskset", "-c", &cpu.to_string(), prog])
        .args(args)
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(f)
        .stderr(err)
        .spawn()
        .with_context(|| format!("spawning {prog} in {ns}"))
}

fn wait_child(mut c: Child, what: &str, timeout: Duration, errfile: &Path) -> Result<()> {
    let t0 = std::time::Instant::now();
    loop {
        if let Some(st) = c.try_wait()? {
            if !st.success() {
                bail!(
                    "{what} failed ({st}): {}",
                    std::fs::read_to_string(errfile).unwrap_or_default().trim()
                );
            }
            return Ok(());
        }
        if t0.elapsed() > timeout {
            let _ = c.kill();
            let _ = c.wait();
            bail!("{what} did not finish within {timeout:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Steers traffic in the router through the relay TUN (policy routing, table 100).
pub fn relay_route_on(n: &Names, path: RelayPath, mtu: u32, gso: bool) -> Result<()> {
    let r = &n.ns_r;
    if gso {
        // GRO on the router's ingress veths merges each flow's segments into super-packets
        // that reach the relay (TUN with offloads) whole; the egress veths keep GSO off, so
        // they are cut again before any capture tap, qdisc or end host downstream.
        // GRO makes a veth receive through a NAPI ring of only 256 packets; a queue on the
        // peer (end host) veth lets the kernel hold packets back when the ring is full
        // (veth backpressure) instead of dropping them.
        for (dev, ns, peer) in [
            (&n.dev_rc, &n.ns_c, &n.dev_c),
            (&n.dev_rs, &n.ns_s, &n.dev_s),
        ] {
            run(
                "ip",
                &["netns", "exec", r, "ethtool", "-K", dev, "gro", "on"],
            )?;
            run(
                "ip",
                &[
                    "netns", "exec", ns, "tc", "qdisc", "replace", "dev", peer, "root", "pfifo",
                    "limit", "10000",
                ],
            )?;
        }
    }
    run(
        "ip",
        &["-n", r, "tuntap", "add", "dev", &n.dev_tun, "mode", "tun"],
    )?;
    run(
        "ip",
        &[
            "-n",
            r,
            "link",
            "set",
            &n.dev_tun,
            "mtu",
            &mtu.to_string(),
            "txqueuelen",
            "10000",
            "up",
        ],
    )?;
    for kv in [
        format!("net.ipv4.conf.{}.rp_filter=0", n.dev_tun),
        format!("net.ipv4.conf.{}.accept_local=1", n.dev_tun),
    ] {
        ns_run(r, "sysctl", &["-qw", &kv])?;
    }
    // What the relay writes is forwarded on CPU1 (RPS) like everything else: the relay
    // then costs ~3 µs per packet and keeps headroom, so a bulk flow is limited by CPU1
    // and TCP backs off without loss. With RPS off ("0") the forwarding runs inside the
    // relay's write() on CPU0: ~10% faster end to end but the relay saturates and the
    // TUN ring overflows (unintended drops). TCPDX_LAB_TUN_RPS overrides the mask.
    let mask =
        std::env::var("TCPDX_LAB_TUN_RPS").unwrap_or_else(|_| crate::topology::RPS_MASK.into());
    cmd::ns_write(
        r,
        &format!("/sys/class/net/{}/queues/rx-0/rps_cpus", n.dev_tun),
        &mask,
    )?;
    run(
        "ip",
        &[
            "-n", r, "route", "replace", "default", "dev", &n.dev_tun, "table", "100",
        ],
    )?;
    if matches!(path, RelayPath::Both | RelayPath::S2c) {
        run(
            "ip",
            &[
                "-n", r, "rule", "add", "iif", &n.dev_rs, "lookup", "100", "pref", "100",
            ],
        )?;
    }
    if matches!(path, RelayPath::Both | RelayPath::C2s) {
        run(
            "ip",
            &[
                "-n", r, "rule", "add", "iif", &n.dev_rc, "lookup", "100", "pref", "101",
            ],
        )?;
    }
    Ok(())
}

/// Removes the relay steering and the TUN.
pub fn relay_route_off(n: &Names) {
    let r = &n.ns_r;
    cmd::run_quiet("ip", &["-n", r, "rule", "del", "pref", "100"]);
    cmd::run_quiet("ip", &["-n", r, "rule", "del", "pref", "101"]);
    cmd::run_quiet("ip", &["-n", r, "route", "flush", "table", "100"]);
    cmd::run_quiet(
        "ip",
        &["-n", r, "tuntap", "del", "dev", &n.dev_tun, "mode", "tun"],
    );
}

/// A running relay process.
pub struct RelayProc {
    child: Child,
    stats: PathBuf,
    err: PathBuf,
}

impl RelayProc {
    /// Starts the relay in the router namespace on CPU0.
    pub fn start(n: &Names, args: &RelayArgs, dir: &Path) -> Result<RelayProc> {
        let mut argv = vec!["relay".to_string()];
        argv.extend(args.to_args());
        let out = dir.join("relay.out");
        let child = spawn_in(&n.ns_r, 0, &self_exe()?, &argv, &out)?;
        std::thread::sleep(Duration::from_millis(500));
        let mut p = RelayProc {
            child,
            stats: PathBuf::from(args.stats.clone().unwrap_or_default()),
            err: out.with_extension("err"),
        };
        if let Some(st) = p.child.try_wait()? {
            bail!(
                "relay exited at start ({st}): {}",
                std::fs::read_to_string(&p.err).unwrap_or_default()
            );
        }
        Ok(p)
    }

    /// Process id of the relay.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Its counters so far (SIGUSR1, then waits up to 1 s for the snapshot file), with
    /// what `meanwhile` returns: it runs right after the signal, so other counters it reads
    /// are taken within about a millisecond of the relay's.
    pub fn snapshot<T>(&self, meanwhile: impl FnOnce() -> T) -> Result<(RelayStats, T)> {
        let p = PathBuf::from(crate::relay::snapshot_path(&self.stats.to_string_lossy()));
        let _ = std::fs::remove_file(&p);
        crate::sys::send_signal(self.child.id() as i32, libc::SIGUSR1);
        let t = meanwhile();
        for _ in 0..1000 {
            if let Ok(s) = std::fs::read(&p) {
                return Ok((serde_json::from_slice(&s)?, t));
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        bail!("relay wrote no counter snapshot within 1 s")
    }

    /// Stops it (SIGTERM) and returns its counters.
    pub fn stop(mut self) -> Result<RelayStats> {
        crate::sys::send_signal(self.child.id() as i32, libc::SIGTERM);
        for _ in 0..50 {
            if self.child.try_wait()?.is_some() {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        let s = std::fs::read(&self.stats).with_context(|| {
            format!(
                "relay stats missing: {}",
                std::fs::read_to_string(&self.err).unwrap_or_default()
            )
        })?;
        Ok(serde_json::from_slice(&s)?)
    }
}

/// Reads (tx_dropped, rx_dropped) of a device in a namespace.
pub fn link_drops(ns: &str, dev: &str) -> (u64, u64) {
    let Ok(out) = run("ip", &["-n", ns, "-s", "-j", "link", "show", dev]) else {
        return (0, 0);
    };
    let v: serde_json::Value = serde_json::from_str(&out).unwrap_or_default();
    let s = &v[0]["stats64"];
    (
        s["tx"]["dropped"].as_u64().unwrap_or(0),
        s["rx"]["dropped"].as_u64().unwrap_or(0),
    )
}

/// Reads (drops, packets) of the root qdisc of a device.
pub fn qdisc_stats(ns: &str, dev: &str) -> (u64, u64) {
    let Ok(out) = run(
        "ip",
        &[
            "netns", "exec", ns, "tc", "-s", "-j", "qdisc", "show", "dev", dev,
        ],
    ) else {
        return (0, 0);
    };
    let v: serde_json::Value = serde_json::from_str(&out).unwrap_or_default();
    v.as_array()
        .map(|a| {
            a.iter().fold((0, 0), |acc, q| {
                (
                    acc.0 + q["drops"].as_u64().unwrap_or(0),
                    acc.1 + q["packets"].as_u64().unwrap_or(0),
                )
            })
        })
        .unwrap_or((0, 0))
}

/// Sum of the "dropped" column of /proc/net/softnet_stat over all CPUs.
pub fn softnet_dropped() -> u64 {
    std::fs::read_to_string("/proc/net/softnet_stat")
        .unwrap_or_default()
        .lines()
        .filter_map(|l| u64::from_str_radix(l.split_whitespace().nth(1)?, 16).ok())
        .sum()
}

fn nstat_hist(ns: &str) -> String {
    format!("/tmp/tcpdx-nstat.{ns}")
}

/// Resets nstat's per-namespace history.
pub fn nstat_reset(ns: &str) -> Result<()> {
    let st = Command::new("ip")
        .args(["netns", "exec", ns, "nstat", "-n"])
        .env("NSTAT_HISTORY", nstat_hist(ns))
        .status()?;
    if !st.success() {
        bail!("nstat -n failed in {ns}");
    }
    Ok(())
}

/// nstat deltas since the last reset (non-zero counters only).
pub fn nstat_delta(ns: &str) -> Result<BTreeMap<String, u64>> {
    let out = Command::new("ip")
        .args(["netns", "exec", ns, "nstat", "-j"])
        .env("NSTAT_HISTORY", nstat_hist(ns))
        .output()?;
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).context("parsing nstat -j")?;
    let _ = std::fs::remove_file(nstat_hist(ns));
    Ok(v["kernel"]
        .as_object()
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_u64()?)))
                .filter(|(_, v)| *v > 0)
                .collect()
        })
        .unwrap_or_default())
}

fn nft_loss_table(per_mille: u32, dport: u16, daddr: &str, hook: NftHook) -> String {
    let (h, cond) = match hook {
        NftHook::RouterForward => ("forward", format!("ip daddr {daddr} ")),
        NftHook::ServerInput => ("input", String::new()),
    };
    format!(
        "table ip tdxloss {{\n chain loss {{ type filter hook {h} priority 0; policy accept;\n  {cond}tcp dport {dport} meta length > 100 numgen random mod 1000 < {per_mille} counter drop\n }}\n}}\n"
    )
}

/// nft table dropping `per_mille` of the pure ACKs (no payload, no SYN/FIN/RST) that the
/// server (`saddr`, port `sport`) forwards through the router.
fn ack_loss_table(per_mille: u32, sport: u16, saddr: &str) -> String {
    format!(
        "table ip tdxackloss {{\n chain loss {{ type filter hook forward priority 0; policy accept;\n  ip saddr {saddr} tcp sport {sport} tcp flags & (fin|syn|rst) == 0 meta length < 100 numgen random mod 1000 < {per_mille} counter drop\n }}\n}}\n"
    )
}

fn nft_counter(ns: &str, table: &str) -> Option<u64> {
    let out = ns_run(ns, "nft", &["list", "table", "ip", table]).ok()?;
    let i = out.find("counter packets ")?;
    out[i + 16..].split_whitespace().next()?.parse().ok()
}

/// Runs scenario `sc` and writes its outputs (captures, truth.json, ...) to `o.out`.
pub fn run_scenario(sc: &Scenario, o: &RunOpts) -> Result<Truth> {
    let mut sc = sc.clone();
    if let Some(s) = o.seed {
        sc.seed = s;
    }
    if let Some(m) = o.mtu {
        sc.mtu = m;
    }
    if o.relay_gso {
        let Some(r) = sc.relay.as_mut() else {
            bail!("{}: --relay-gso needs a scenario with a relay", sc.name);
        };
        r.gso = true;
    }
    if sc.relay.as_ref().is_some_and(|r| r.gso) {
        if matches!(
            sc.capture,
            Point::RouterServerSide | Point::RouterClientSide
        ) {
            bail!(
                "{}: relay GSO mode cannot capture on the router (its ingress sees GRO super-packets)",
                sc.name
            );
        }
        if sc
            .nft_loss
            .as_ref()
            .is_some_and(|l| l.hook == NftHook::RouterForward)
        {
            bail!(
                "{}: relay GSO mode cannot drop with nft on the router (it would drop super-packets)",
                sc.name
            );
        }
    }
    // Refuse before building anything if a resource this run needs is in use by another run.
    let _lock = match &sc.workload {
        Workload::Storage { op, .. } => crate::storage::exclusive_lock(*op)
            .map(|(name, why)| crate::lock::LabLock::acquire(name, why))
            .transpose()
            .with_context(|| format!("cannot run {}", sc.name))?,
        Workload::Bulk { .. } | Workload::ReqResp { .. } => None,
    };
    std::fs::create_dir_all(&o.out)?;
    let out = std::fs::canonicalize(&o.out)?;
    crate::topology::install_signal_cleanup()?;
    let lab = Lab::create(&TopoConfig {
        mtu: sc.mtu,
        offloads: false,
    })?;
    let res = run_in_lab(&sc, o, &out, &lab);
    drop(lab);
    res
}

fn run_in_lab(sc: &Scenario, o: &RunOpts, out: &Path, lab: &Lab) -> Result<Truth> {
    let n = &lab.names;
    let tai_off = crate::sys::tai_minus_realtime_ns();
    let ports: Vec<u16> = match &sc.workload {
        Workload::Bulk { .. } | Workload::ReqResp { .. } => vec![BULK_PORT],
        Workload::Storage { op, .. } => crate::storage::ports(*op),
    };
    // receiver route tweaks (the data receiver: server for bulk/writes, client for reads)
    let recv_is_server = match &sc.workload {
        Workload::Bulk { .. } | Workload::ReqResp { .. } => true,
        Workload::Storage { op, .. } => crate::storage::is_write(*op),
    };
    let rr = &sc.receiver_route;
    if rr.rto_min_ms.is_some() || rr.quickack {
        let (ns, via, dev) = if recv_is_server {
            (&n.ns_s, &n.ip_rs, &n.dev_s)
        } else {
            (&n.ns_c, &n.ip_rc, &n.dev_c)
        };
        let mut a = vec![
            "-n".to_string(),
            ns.clone(),
            "route".into(),
            "change".into(),
            "default".into(),
            "via".into(),
            via.clone(),
            "dev".into(),
            dev.clone(),
        ];
        if let Some(ms) = rr.rto_min_ms {
            a.extend(["rto_min".into(), format!("{ms}ms")]);
        }
        if rr.quickack {
            a.extend(["quickack".into(), "1".into()]);
        }
        run("ip", &a.iter().map(String::as_str).collect::<Vec<_>>())?;
    }
    if sc.no_window_scaling {
        for ns in [&n.ns_c, &n.ns_s] {
            ns_run(ns, "sysctl", &["-qw", "net.ipv4.tcp_window_scaling=0"])?;
        }
    }
    if let Some(w) = sc.sender_wmem_max {
        ns_run(
            &n.ns_c,
            "sysctl",
            &["-qw", &format!("net.ipv4.tcp_wmem=4096 16384 {w}")],
        )?;
    }
    if let Some(t) = &sc.tbf {
        let dev = if t.to_server { &n.dev_rs } else { &n.dev_rc };
        ns_run(
            &n.ns_r,
            "tc",
            &[
                "qdisc", "replace", "dev", dev, "root", "tbf", "rate", &t.rate, "burst", &t.burst,
                "limit", &t.limit,
            ],
        )?;
    }
    let nft_ns = sc.nft_loss.as_ref().map(|l| {
        if l.hook == NftHook::ServerInput {
            n.ns_s.clone()
        } else {
            n.ns_r.clone()
        }
    });
    if let (Some(l), Some(ns)) = (&sc.nft_loss, &nft_ns) {
        run_stdin(
            "ip",
            &["netns", "exec", ns, "nft", "-f", "-"],
            &nft_loss_table(l.per_mille, l.dport, &n.ip_s, l.hook),
        )?;
    }
    if sc.ack_loss_per_mille > 0 {
        run_stdin(
            "ip",
            &["netns", "exec", &n.ns_r, "nft", "-f", "-"],
            &ack_loss_table(sc.ack_loss_per_mille, BULK_PORT, &n.ip_s),
        )?;
    }
    let mut storage = None;
    if let Workload::Storage { .. } = &sc.workload {
        storage = Some(crate::storage::Services::start(n, sc, out)?);
    }
    let relay_log = out.join("relay.jsonl");
    let mut relay = None;
    if let Some(r) = &sc.relay {
        relay_route_on(n, r.path, lab.mtu, r.gso)?;
        let args = RelayArgs {
            dev: n.dev_tun.clone(),
            server: n.ip_s.parse()?,
            delay_ms: r.delay_ms,
            delay_c2s_ms: r.delay_c2s_ms,
            delay_s2c_ms: r.delay_s2c_ms,
            only_port: ports.first().copied().filter(|_| ports.len() == 1),
            drop_nth: r.drop_nth.clone(),
            drop_repeat: r.drop_repeat,
            drop_prob: r.drop_prob,
            blackout_after: r.blackout_after.clone(),
            blackout_ms: r.blackout_ms,
            reorder_nth: r.reorder_nth.clone(),
            reorder_prob: r.reorder_prob,
            reorder_k: r.reorder_k.max(1),
            reorder_delay_ms: r.reorder_delay_ms,
            seed: sc.seed,
            log: Some(relay_log.to_string_lossy().into()),
            stats: Some(out.join("relay.stats.json").to_string_lossy().into()),
            slots: 32768,
            slot_size: (lab.mtu as usize + 64).max(2048),
            spin_us: 20,
            nice: -10,
            gso: r.gso,
        };
        relay = Some(RelayProc::start(n, &args, out)?);
    }
    for ns in [&n.ns_c, &n.ns_s] {
        nstat_reset(ns)?;
    }
    let softnet0 = softnet_dropped();
    let veth0: u64 = veth_drops(n);
    let (tun_tx0, tun_q0) = if relay.is_some() {
        (
            link_drops(&n.ns_r, &n.dev_tun).0,
            qdisc_stats(&n.ns_r, &n.dev_tun).0,
        )
    } else {
        (0, 0)
    };

    // captures: client and server always, plus the router point if primary
    let filter = ports
        .iter()
        .map(|p| format!("tcp port {p}"))
        .collect::<Vec<_>>()
        .join(" or ");
    let mut points = vec![Point::Client, Point::Server];
    if !points.contains(&sc.capture) {
        points.push(sc.capture);
    }
    let mut caps = Vec::new();
    for p in &points {
        let (ns, dev) = match p {
            Point::Client => (&n.ns_c, &n.dev_c),
            Point::Server => (&n.ns_s, &n.dev_s),
            Point::RouterServerSide => (&n.ns_r, &n.dev_rs),
            Point::RouterClientSide => (&n.ns_r, &n.dev_rc),
        };
        let path = out.join(format!("{}.pcap", p.stem()));
        caps.push((*p, Capture::start(ns, dev, &path, sc.snaplen, &filter)?));
    }
    let trace_path = out.join("trace.txt");
    let tracer = Tracer::start(
        &format!("{}_{}", n.prefix, std::process::id()),
        &ports,
        LAB_MARK,
        &trace_path,
    )?;

    // workload
    let wl_res = match &sc.workload {
        Workload::Bulk { .. } => run_bulk(sc, o, n, out),
        Workload::ReqResp { .. } => run_reqresp(sc, n, out),
        Workload::Storage { .. } => storage
            .as_mut()
            .expect("services")
            .run_client(n, sc, o.short, out),
    };

    // stop everything, collect counters
    let mut cap_files = Vec::new();
    for (p, c) in caps {
        let path = c.path.clone();
        let st = c.stop()?;
        cap_files.push((p, path, st));
    }
    let trace_stats = tracer.stop()?;
    let mut counters = Counters::default();
    for (role, ns) in [("client", &n.ns_c), ("server", &n.ns_s)] {
        counters.nstat.insert(role.into(), nstat_delta(ns)?);
    }
    if let Some(t) = &sc.tbf {
        let dev = if t.to_server { &n.dev_rs } else { &n.dev_rc };
        let (d, p) = qdisc_stats(&n.ns_r, dev);
        counters.tbf_drops = Some(d);
        counters.tbf_sent = Some(p);
    }
    if let Some(ns) = &nft_ns {
        counters.nft_drops = nft_counter(ns, "tdxloss");
    }
    if sc.ack_loss_per_mille > 0 {
        counters.ack_drops = nft_counter(&n.ns_r, "tdxackloss");
    }
    if relay.is_some() {
        counters.tun_tx_dropped = Some(link_drops(&n.ns_r, &n.dev_tun).0 - tun_tx0);
        counters.tun_qdisc_drops = Some(qdisc_stats(&n.ns_r, &n.dev_tun).0 - tun_q0);
    }
    if let Some(r) = relay.take() {
        counters.relay = Some(r.stop()?);
        relay_route_off(n);
    }
    if let Some(s) = storage.take() {
        s.stop(n);
    }
    counters.softnet_dropped = softnet_dropped().saturating_sub(softnet0);
    counters.veth_dropped = veth_drops(n).saturating_sub(veth0);
    counters.trace = trace_stats;
    let workload = wl_res?;

    // reduce
    let mut t = Truth {
        schema: truth::SCHEMA.into(),
        scenario: sc.name.clone(),
        short: o.short,
        params: serde_json::to_value(sc)?,
        clock: ClockInfo {
            trace_clock: "tai".into(),
            tai_minus_realtime_ns: tai_off,
            time_base: "CLOCK_REALTIME ns (pcap clock)".into(),
        },
        topology: TopoInfo {
            client: n.ip_c.clone(),
            server: n.ip_s.clone(),
            mtu: lab.mtu,
            prefix: n.prefix.clone(),
        },
        workload,
        counters,
        ..Default::default()
    };
    t.injected = if sc.relay.is_some() {
        truth::parse_relay_log(&std::fs::read_to_string(&relay_log).unwrap_or_default())
    } else {
        Default::default()
    };
    let mut events = crate::trace::parse_file(&trace_path)?;
    truth::align(&mut events, tai_off);
    let pcaps: BTreeMap<Point, Vec<capture::Pkt>> = cap_files
        .iter()
        .map(|(p, path, _)| Ok((*p, capture::read_pcap(path)?)))
        .collect::<Result<_>>()?;
    let lab_net = |a: &SocketAddrV4| a.ip().octets()[0] == 10 && a.ip().octets()[1] == n.octet;
    for (snd, rcv) in truth::find_senders(&events) {
        if !lab_net(&snd) || !lab_net(&rcv) {
            continue;
        }
        let sender_point = if snd.ip() == &n.ip_c.parse::<Ipv4Addr>()? {
            Point::Client
        } else {
            Point::Server
        };
        let pk = &pcaps[&sender_point];
        let mss = pk
            .iter()
            .filter(|p| p.src == snd.ip().octets() && p.sport == snd.port())
            .map(|p| p.len)
            .max()
            .unwrap_or(lab.mtu - 52)
            .min(lab.mtu - 40);
        let c = truth::reduce_connection(&ConnInput {
            sender: snd,
            receiver: rcv,
            events: &events,
            sender_pcap: pk,
            injected: &t.injected,
            mss,
        });
        if c.bytes_sent > 0 || !c.retransmissions.is_empty() {
            t.connections.push(c);
        }
    }
    if let Some(s) = crate::storage::take_stalls(out) {
        // the stall belongs to the storage data connection(s)
        let data_port = ports.first().copied().unwrap_or(0);
        for c in &mut t.connections {
            let on_port = |a: &str| {
                a.rsplit(':').next().and_then(|p| p.parse::<u16>().ok()) == Some(data_port)
            };
            if on_port(&c.sender) || on_port(&c.receiver) {
                c.episodes.stalls = s.clone();
            }
        }
    }
    // files
    for (p, path, st) in &cap_files {
        let file = if o.gzip {
            let gz = capture::gzip_file(path)?;
            std::fs::remove_file(path)?;
            gz
        } else {
            path.clone()
        };
        t.files.captures.push(CaptureFile {
            file: file.file_name().expect("name").to_string_lossy().into(),
            point: p.stem().into(),
            primary: *p == sc.capture,
            snaplen: sc.snaplen,
            stats: st.clone(),
        });
    }
    t.files.relay_log = match (&sc.relay, o.gzip) {
        (None, _) => None,
        (Some(_), false) => Some("relay.jsonl".into()),
        (Some(_), true) => {
            capture::gzip_file(&relay_log)?;
            std::fs::remove_file(&relay_log)?;
            Some("relay.jsonl.gz".into())
        }
    };
    if o.keep_trace {
        t.files.trace = Some("trace.txt".into());
    } else {
        let _ = std::fs::remove_file(&trace_path);
    }
    for f in ["relay.stats.json", "relay.out", "relay.err"] {
        let _ = std::fs::remove_file(out.join(f));
    }
    t.health = health(&t);
    std::fs::write(out.join("truth.json"), serde_json::to_vec(&t)?)?;
    Ok(t)
}

fn veth_drops(n: &Names) -> u64 {
    [
        (&n.ns_c, &n.dev_c),
        (&n.ns_r, &n.dev_rc),
        (&n.ns_r, &n.dev_rs),
        (&n.ns_s, &n.dev_s),
    ]
    .iter()
    .map(|(ns, d)| {
        let (a, b) = link_drops(ns, d);
        a + b
    })
    .sum()
}

/// Accounts for unintended drops and capture/trace loss.
pub fn health(t: &Truth) -> Health {
    let c = &t.counters;
    let mut p = Vec::new();
    let mut chk = |what: &str, v: u64| {
        if v > 0 {
            p.push(format!("{what}: {v}"));
        }
    };
    chk("softnet backlog drops", c.softnet_dropped);
    chk("veth drops", c.veth_dropped);
    chk("TUN tx_dropped", c.tun_tx_dropped.unwrap_or(0));
    chk("TUN qdisc drops", c.tun_qdisc_drops.unwrap_or(0));
    if let Some(r) = &c.relay {
        chk("relay pool overflow", r.pool_overflow);
        chk("relay write errors", r.write_errors);
    }
    chk("trace overrun", c.trace.overrun);
    chk("trace dropped events", c.trace.dropped_events);
    for f in &t.files.captures {
        chk(
            &format!("capture drops in {}", f.file),
            f.stats.dropped_by_kernel,
        );
    }
    Health {
        ok: p.is_empty(),
        problems: p,
    }
}

fn run_bulk(sc: &Scenario, o: &RunOpts, n: &Names, out: &Path) -> Result<serde_json::Value> {
    let Workload::Bulk {
        bytes,
        short_bytes,
        cc,
        rcvbuf,
        read_size,
        read_sleep_ms,
        start_delay_ms,
    } = &sc.workload
    else {
        bail!("not a bulk workload")
    };
    let exe = self_exe()?;
    let ready = out.join("recv.ready");
    let _ = std::fs::remove_file(&ready);
    let mut ra = vec![
        "bulk".to_string(),
        "recv".into(),
        "--listen".into(),
        format!("{}:{BULK_PORT}", n.ip_s),
        "--ready-file".into(),
        ready.to_string_lossy().into(),
        "--read-sleep-ms".into(),
        read_sleep_ms.to_string(),
        "--start-delay-ms".into(),
        start_delay_ms.to_string(),
    ];
    if let Some(b) = rcvbuf {
        ra.extend(["--rcvbuf".into(), b.to_string()]);
    }
    if let Some(r) = read_size {
        ra.extend(["--read-size".into(), r.to_string()]);
    }
    let recv_out = out.join("bulk_recv.json");
    let recv = spawn_in(&n.ns_s, 1, &exe, &ra, &recv_out)?;
    for _ in 0..100 {
        if ready.exists() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = std::fs::remove_file(&ready);
    let nbytes = if o.short { *short_bytes } else { *bytes };
    let sa = vec![
        "bulk".to_string(),
        "send".into(),
        "--to".into(),
        format!("{}:{BULK_PORT}", n.ip_s),
        "--bytes".into(),
        nbytes.to_string(),
        "--cc".into(),
        cc.clone(),
    ];
    let send_out = out.join("bulk_send.json");
    let send = spawn_in(&n.ns_c, 1, &exe, &sa, &send_out)?;
    collect_pair(
        ("send", "bulk sender", send, &send_out),
        ("recv", "bulk receiver", recv, &recv_out),
    )
}

/// One side of a two-process workload: its key in the report, its name in errors, the
/// process and the file it writes its JSON report to.
type Side<'a> = (&'a str, &'a str, Child, &'a Path);

/// Waits for a workload's active side (up to 2 min) and then its passive one (30 s more),
/// and returns both sides' JSON reports under their keys (their files are removed).
fn collect_pair(active: Side<'_>, passive: Side<'_>) -> Result<serde_json::Value> {
    let (key_a, what_a, child_a, file_a) = active;
    let (key_p, what_p, child_p, file_p) = passive;
    wait_child(
        child_a,
        what_a,
        Duration::from_secs(120),
        &file_a.with_extension("err"),
    )?;
    wait_child(
        child_p,
        what_p,
        Duration::from_secs(30),
        &file_p.with_extension("err"),
    )?;
    let mut v = serde_json::Map::new();
    for (k, f) in [(key_a, file_a), (key_p, file_p)] {
        let s = std::fs::read_to_string(f)?;
        v.insert(
            k.into(),
            serde_json::from_str(s.trim()).unwrap_or(serde_json::Value::String(s)),
        );
        let _ = std::fs::remove_file(f);
        let _ = std::fs::remove_file(f.with_extension("err"));
    }
    Ok(serde_json::Value::Object(v))
}

fn run_reqresp(sc: &Scenario, n: &Names, out: &Path) -> Result<serde_json::Value> {
    let Workload::ReqResp {
        transactions,
        parts,
        req_bytes,
        resp_bytes,
        nodelay,
        cc,
    } = &sc.workload
    else {
        bail!("not a request/response workload")
    };
    let exe = self_exe()?;
    let ready = out.join("rr.ready");
    let _ = std::fs::remove_file(&ready);
    let sa = vec![
        "rr".to_string(),
        "serve".into(),
        "--listen".into(),
        format!("{}:{BULK_PORT}", n.ip_s),
        "--ready-file".into(),
        ready.to_string_lossy().into(),
        "--req-bytes".into(),
        req_bytes.to_string(),
        "--resp-bytes".into(),
        resp_bytes.to_string(),
        "--cc".into(),
        cc.clone(),
    ];
    let srv_out = out.join("rr_serve.json");
    let srv = spawn_in(&n.ns_s, 1, &exe, &sa, &srv_out)?;
    for _ in 0..100 {
        if ready.exists() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = std::fs::remove_file(&ready);
    let mut ca = vec![
        "rr".to_string(),
        "client".into(),
        "--to".into(),
        format!("{}:{BULK_PORT}", n.ip_s),
        "--transactions".into(),
        transactions.to_string(),
        "--parts".into(),
        parts.to_string(),
        "--req-bytes".into(),
        req_bytes.to_string(),
        "--resp-bytes".into(),
        resp_bytes.to_string(),
        "--cc".into(),
        cc.clone(),
    ];
    if *nodelay {
        ca.push("--nodelay".into());
    }
    let cli_out = out.join("rr_client.json");
    let cli = spawn_in(&n.ns_c, 1, &exe, &ca, &cli_out)?;
    collect_pair(
        ("client", "request/response client", cli, &cli_out),
        ("server", "request/response server", srv, &srv_out),
    )
}
