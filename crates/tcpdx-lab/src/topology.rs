//! Lab topology: client, router and server network namespaces joined by veth pairs.
//!
//! ```text
//!  <p>c (client)                     <p>r (router)                         <p>s (server)
//!  <p>c0 10.X.1.2/24 <--veth--> <p>rc 10.X.1.1 | <p>rs 10.X.2.1 <--veth--> <p>s0 10.X.2.2/24
//!                                <p>t0 (TUN of the impairment relay, only while it runs)
//! ```
//! `<p>` is a per-run prefix `tdx<4 hex digits>` derived from the pid, `X` a second octet
//! checked to be unused on the machine. Offloads are off by default, neighbours static,
//! RPS steers receive processing of every lab interface to CPU1 and the global
//! `net.core.netdev_max_backlog` is raised to 10000 for the run (restored afterwards).
//! A [`Lab`] tears itself down on drop; a signal handler and `tcpdx-lab cleanup` cover
//! the other exits. Every lab writes a state file under [`STATE_DIR`].

use crate::cmd::{self, ns_run, ns_write, run, run_quiet};
use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;

/// Directory holding one JSON state file per live lab (for `cleanup`).
pub const STATE_DIR: &str = "/run/tcpdx-lab";
/// Packet mark set on everything the end hosts receive; tcp_probe is filtered on it.
pub const LAB_MARK: u32 = 0x1a99;
/// Value of net.core.netdev_max_backlog during a run (see lab notes §1.4).
pub const LAB_BACKLOG: u32 = 10000;
/// RPS mask steering lab receive processing to CPU1.
pub const RPS_MASK: &str = "2";

/// Names and addresses of one lab instance.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Names {
    /// Per-run prefix, e.g. `tdx3f2a`.
    pub prefix: String,
    /// Second octet of the lab's 10.X.0.0/16 addresses.
    pub octet: u8,
    /// Client namespace.
    pub ns_c: String,
    /// Router namespace.
    pub ns_r: String,
    /// Server namespace.
    pub ns_s: String,
    /// Client interface.
    pub dev_c: String,
    /// Router interface towards the client.
    pub dev_rc: String,
    /// Router interface towards the server.
    pub dev_rs: String,
    /// Server interface.
    pub dev_s: String,
    /// Relay TUN device (in the router namespace).
    pub dev_tun: String,
    /// Client address.
    pub ip_c: String,
    /// Router address on the client side.
    pub ip_rc: String,
    /// Router address on the server side.
    pub ip_rs: String,
    /// Server address.
    pub ip_s: String,
}

impl Names {
    /// Builds the names for prefix `tdx<hex4>` and subnet octet `octet`.
    pub fn new(hex4: u16, octet: u8) -> Names {
        let p = format!("tdx{hex4:04x}");
        Names {
            ns_c: format!("{p}c"),
            ns_r: format!("{p}r"),
            ns_s: format!("{p}s"),
            dev_c: format!("{p}c0"),
            dev_rc: format!("{p}rc"),
            dev_rs: format!("{p}rs"),
            dev_s: format!("{p}s0"),
            dev_tun: format!("{p}t0"),
            ip_c: format!("10.{octet}.1.2"),
            ip_rc: format!("10.{octet}.1.1"),
            ip_rs: format!("10.{octet}.2.1"),
            ip_s: format!("10.{octet}.2.2"),
            prefix: p,
            octet,
        }
    }

    /// The three namespaces.
    pub fn namespaces(&self) -> [&str; 3] {
        [&self.ns_c, &self.ns_r, &self.ns_s]
    }

    /// Whether `name` looks like a lab namespace name (`tdx` + 4 hex + c/r/s).
    pub fn is_lab_ns(name: &str) -> bool {
        let b = name.as_bytes();
        b.len() == 8
            && name.starts_with("tdx")
            && b[3..7].iter().all(|c| c.is_ascii_hexdigit())
            && matches!(b[7], b'c' | b'r' | b's')
    }
}

/// Persistent record of a lab (written to [`STATE_DIR`]) so `cleanup` can undo it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LabState {
    /// The lab's names.
    pub names: Names,
    /// Pid of the orchestrator that owns the lab.
    pub pid: i32,
    /// netdev_max_backlog before the lab changed it.
    pub saved_backlog: Option<u32>,
}

/// Options for building the topology.
#[derive(Debug, Clone)]
pub struct TopoConfig {
    /// MTU of every lab link (1500 or 9000).
    pub mtu: u32,
    /// Keep TSO/GSO/GRO on (default off: every packet on the wire is <= MTU).
    pub offloads: bool,
}

/// A live lab; torn down on drop.
pub struct Lab {
    /// Names and addresses.
    pub names: Names,
    /// MTU of the lab links.
    pub mtu: u32,
    state: LabState,
    down: bool,
}

static ACTIVE: Mutex<Vec<LabState>> = Mutex::new(Vec::new());

/// Installs SIGINT/SIGTERM/SIGHUP handling that tears down every live lab, then exits.
pub fn install_signal_cleanup() -> Result<()> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP])?;
    std::thread::spawn(move || {
        if let Some(sig) = signals.forever().next() {
            eprintln!("tcpdx-lab: signal {sig}, cleaning up");
            let labs: Vec<LabState> = ACTIVE.lock().map(|v| v.clone()).unwrap_or_default();
            for st in &labs {
                teardown_state(st);
            }
            crate::lock::unlink_held();
            if list_states().is_empty() {
                let _ = std::fs::remove_dir(STATE_DIR);
            }
            std::process::exit(128 + sig);
        }
    });
    Ok(())
}

fn hash_pid() -> u16 {
    let pid = std::process::id() as u64;
    let t = crate::sys::realtime_ns() as u64;
    let mut x = pid.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (t >> 7);
    x ^= x >> 29;
    x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    (x >> 40) as u16
}

fn octets_in_use() -> Result<Vec<u8>> {
    let mut used = Vec::new();
    let text = run("ip", &["-4", "-o", "addr", "show"])?
        + &run("ip", &["-4", "route", "show", "table", "all"])?;
    for tok in text.split(|c: char| c.is_whitespace() || c == '/') {
        let mut it = tok.split('.');
        if it.next() == Some("10")
            && let Some(Ok(o)) = it.next().map(str::parse::<u8>)
        {
            used.push(o);
        }
    }
    for st in list_states() {
        used.push(st.names.octet);
    }
    Ok(used)
}

/// Picks a free 10.X subnet (X in 200..=254) and an unused prefix.
pub fn pick_names() -> Result<Names> {
    let used = octets_in_use()?;
    let existing = run("ip", &["netns", "list"])?;
    let mut h = hash_pid();
    for _ in 0..64 {
        let octet = 200 + (h % 55) as u8;
        let n = Names::new(h, octet);
        let clash = existing
            .split_whitespace()
            .any(|w| w.starts_with(&n.prefix));
        if !used.contains(&octet) && !clash {
            return Ok(n);
        }
        h = h.wrapping_mul(31).wrapping_add(7);
    }
    bail!("no free 10.X.0.0/16 subnet in 10.200-10.254 (all in use?)")
}

fn read_backlog() -> Option<u32> {
    std::fs::read_to_string("/proc/sys/net/core/netdev_max_backlog")
        .ok()?
        .trim()
        .parse()
        .ok()
}

fn write_backlog(v: u32) -> Result<()> {
    std::fs::write("/proc/sys/net/core/netdev_max_backlog", v.to_string())
        .context("cannot set net.core.netdev_max_backlog (are you root?)")
}

fn state_path(prefix: &str) -> PathBuf {
    PathBuf::from(STATE_DIR).join(format!("{prefix}.json"))
}

/// All lab state files currently present.
pub fn list_states() -> Vec<LabState> {
    let Ok(rd) = std::fs::read_dir(STATE_DIR) else {
        return Vec::new();
    };
    rd.filter_map(|e| e.ok())
        .filter_map(|e| std::fs::read(e.path()).ok())
        .filter_map(|b| serde_json::from_slice(&b).ok())
        .collect()
}

impl Lab {
    /// Creates namespaces, links, addresses, routes, static neighbours and host settings.
    pub fn create(cfg: &TopoConfig) -> Result<Lab> {
        if !matches!(cfg.mtu, 1500 | 9000) {
            bail!("MTU must be 1500 or 9000");
        }
        for tool in [
            "ip", "tc", "nft", "ethtool", "tcpdump", "nstat", "taskset", "sysctl", "ss",
        ] {
            if !cmd::have(tool) {
                bail!("`{tool}` is missing: run `tcpdx-lab install` (needs apt)");
            }
        }
        let names = pick_names()?;
        let state = LabState {
            names: names.clone(),
            pid: std::process::id() as i32,
            saved_backlog: read_backlog(),
        };
        std::fs::create_dir_all(STATE_DIR)?;
        std::fs::write(
            state_path(&names.prefix),
            serde_json::to_vec_pretty(&state)?,
        )?;
        ACTIVE.lock().expect("lab registry").push(state.clone());
        let mut lab = Lab {
            names,
            mtu: cfg.mtu,
            state,
            down: false,
        };
        lab.build(cfg).context("building the lab topology")?;
        Ok(lab)
    }

    fn build(&mut self, cfg: &TopoConfig) -> Result<()> {
        let n = &self.names;
        for ns in n.namespaces() {
            run("ip", &["netns", "add", ns])?;
        }
        run(
            "ip",
            &[
                "link", "add", &n.dev_c, "netns", &n.ns_c, "type", "veth", "peer", "name",
                &n.dev_rc, "netns", &n.ns_r,
            ],
        )?;
        run(
            "ip",
            &[
                "link", "add", &n.dev_s, "netns", &n.ns_s, "type", "veth", "peer", "name",
                &n.dev_rs, "netns", &n.ns_r,
            ],
        )?;
        let mtu = self.mtu.to_string();
        let links = [
            (&n.ns_c, &n.dev_c, &n.ip_c),
            (&n.ns_r, &n.dev_rc, &n.ip_rc),
            (&n.ns_r, &n.dev_rs, &n.ip_rs),
            (&n.ns_s, &n.dev_s, &n.ip_s),
        ];
        for ns in n.namespaces() {
            run("ip", &["-n", ns, "link", "set", "dev", "lo", "up"])?;
            ns_run(ns, "sysctl", &["-qw", "net.ipv6.conf.all.disable_ipv6=1"])?;
            ns_run(
                ns,
                "sysctl",
                &["-qw", "net.ipv6.conf.default.disable_ipv6=1"],
            )?;
        }
        for (ns, dev, ip) in links {
            run(
                "ip",
                &["-n", ns, "addr", "add", &format!("{ip}/24"), "dev", dev],
            )?;
            run(
                "ip",
                &["-n", ns, "link", "set", "dev", dev, "mtu", &mtu, "up"],
            )?;
            if !cfg.offloads {
                ns_run(
                    ns,
                    "ethtool",
                    &["-K", dev, "tso", "off", "gso", "off", "gro", "off"],
                )?;
            }
            ns_write(
                ns,
                &format!("/sys/class/net/{dev}/queues/rx-0/rps_cpus"),
                RPS_MASK,
            )?;
        }
        run(
            "ip",
            &["-n", &n.ns_c, "route", "add", "default", "via", &n.ip_rc],
        )?;
        run(
            "ip",
            &["-n", &n.ns_s, "route", "add", "default", "via", &n.ip_rs],
        )?;
        for kv in [
            "net.ipv4.ip_forward=1",
            "net.ipv4.conf.all.rp_filter=0",
            "net.ipv4.conf.default.rp_filter=0",
        ] {
            ns_run(&n.ns_r, "sysctl", &["-qw", kv])?;
        }
        let mac = |ns: &str, dev: &str| -> Result<String> {
            let out = ns_run(ns, "cat", &[&format!("/sys/class/net/{dev}/address")])?;
            Ok(out.trim().to_string())
        };
        let (cm, sm, rcm, rsm) = (
            mac(&n.ns_c, &n.dev_c)?,
            mac(&n.ns_s, &n.dev_s)?,
            mac(&n.ns_r, &n.dev_rc)?,
            mac(&n.ns_r, &n.dev_rs)?,
        );
        for (ns, ip, mac, dev) in [
            (&n.ns_c, &n.ip_rc, &rcm, &n.dev_c),
            (&n.ns_r, &n.ip_c, &cm, &n.dev_rc),
            (&n.ns_r, &n.ip_s, &sm, &n.dev_rs),
            (&n.ns_s, &n.ip_rs, &rsm, &n.dev_s),
        ] {
            run(
                "ip",
                &[
                    "-n",
                    ns,
                    "neigh",
                    "replace",
                    ip,
                    "lladdr",
                    mac,
                    "dev",
                    dev,
                    "nud",
                    "permanent",
                ],
            )?;
        }
        let mark = format!(
            "table inet tdxmark {{\n chain pre {{ type filter hook prerouting priority -150; policy accept; meta mark set {LAB_MARK:#x}; }}\n}}\n"
        );
        for ns in [&n.ns_c, &n.ns_s] {
            cmd::run_stdin("ip", &["netns", "exec", ns, "nft", "-f", "-"], &mark)?;
            ns_run(
                ns,
                "sysctl",
                &["-qw", "net.ipv4.tcp_congestion_control=reno"],
            )?;
        }
        write_backlog(LAB_BACKLOG)?;
        Ok(())
    }

    /// Tears the lab down (idempotent).
    pub fn teardown(&mut self) {
        if self.down {
            return;
        }
        self.down = true;
        teardown_state(&self.state);
        if let Ok(mut v) = ACTIVE.lock() {
            v.retain(|s| s.names.prefix != self.state.names.prefix);
        }
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        self.teardown();
    }
}

/// Pids of processes running inside namespace `ns`.
pub fn ns_pids(ns: &str) -> Vec<i32> {
    run("ip", &["netns", "pids", ns])
        .map(|s| {
            s.split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// Kills the processes inside the namespaces (TERM, then KILL), never by name.
pub fn kill_ns_processes(namespaces: &[&str]) {
    let me = std::process::id() as i32;
    let mut any = false;
    for ns in namespaces {
        for p in ns_pids(ns) {
            if p != me {
                any |= crate::sys::send_signal(p, libc::SIGTERM);
            }
        }
    }
    if any {
        for _ in 0..30 {
            if namespaces.iter().all(|ns| ns_pids(ns).is_empty()) {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        for ns in namespaces {
            for p in ns_pids(ns) {
                if p != me {
                    crate::sys::send_signal(p, libc::SIGKILL);
                }
            }
        }
    }
}

/// Undoes everything a lab state describes: processes, namespaces, tracefs instances, sysctl.
pub fn teardown_state(st: &LabState) {
    let n = &st.names;
    crate::storage::stop_tgt_for(&n.prefix);
    kill_ns_processes(&n.namespaces());
    if crate::lock::held_by_me("rpcbind") {
        crate::storage::remove_rpcbind_files();
    }
    for ns in n.namespaces() {
        run_quiet("ip", &["netns", "del", ns]);
    }
    crate::trace::remove_instances(&n.prefix);
    // per-run state of the storage servers (storage.rs) and nstat histories (run.rs)
    let _ = std::fs::remove_dir_all(format!("/tmp/tcpdx-lab-{}", n.prefix));
    for ns in n.namespaces() {
        let _ = std::fs::remove_file(format!("/tmp/tcpdx-nstat.{ns}"));
    }
    let others = list_states()
        .into_iter()
        .filter(|s| s.names.prefix != n.prefix && crate::sys::pid_alive(s.pid))
        .count();
    let _ = std::fs::remove_file(state_path(&n.prefix));
    if others == 0 {
        if let Some(b) = st.saved_backlog {
            let _ = write_backlog(b);
        }
        crate::trace::unmount_if_ours();
        if crate::lock::LabLock::remove_stale()
            .iter()
            .any(|l| l == "rpcbind")
        {
            crate::storage::remove_rpcbind_files();
        }
        // the state directory goes once it is empty (a live lock or lab keeps it)
        let _ = std::fs::remove_dir(STATE_DIR);
    }
}

/// `tcpdx-lab cleanup`: removes labs whose owner is gone (or all with `force`) and orphans.
pub fn cleanup(force: bool) -> Result<usize> {
    let mut removed = 0;
    let mut restore = None;
    for st in list_states() {
        if force || !crate::sys::pid_alive(st.pid) {
            eprintln!("removing lab {} (owner pid {})", st.names.prefix, st.pid);
            restore = restore.or(st.saved_backlog);
            teardown_state(&st);
            removed += 1;
        }
    }
    let live: Vec<String> = list_states().into_iter().map(|s| s.names.prefix).collect();
    let nss = run("ip", &["netns", "list"])?;
    for ns in nss.lines().filter_map(|l| l.split_whitespace().next()) {
        if Names::is_lab_ns(ns) && !live.iter().any(|p| ns.starts_with(p.as_str())) {
            eprintln!("removing orphan namespace {ns}");
            kill_ns_processes(&[ns]);
            run_quiet("ip", &["netns", "del", ns]);
            removed += 1;
        }
    }
    if live.is_empty() {
        crate::trace::remove_instances("tdx");
        if crate::trace::unmount_if_ours() {
            eprintln!("unmounted tracefs (mounted by the lab)");
        }
        if crate::lock::LabLock::remove_stale()
            .iter()
            .any(|l| l == "rpcbind")
        {
            crate::storage::remove_rpcbind_files();
        }
        if let Some(b) = restore {
            write_backlog(b)?;
        } else if read_backlog() == Some(LAB_BACKLOG) {
            eprintln!(
                "note: netdev_max_backlog is {LAB_BACKLOG} and no saved value was found; setting 1000"
            );
            write_backlog(1000)?;
        }
        let _ = std::fs::remove_dir(STATE_DIR);
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_fit_ifnamsiz_and_are_recognised() {
        let n = Names::new(0xbeef, 201);
        for d in [&n.dev_c, &n.dev_rc, &n.dev_rs, &n.dev_s, &n.dev_tun] {
            assert!(d.len() < 16, "{d}");
        }
        assert_eq!(n.ns_r, "tdxbeefr");
        assert!(Names::is_lab_ns(&n.ns_c) && Names::is_lab_ns(&n.ns_s));
        assert!(!Names::is_lab_ns("tdxbeefx") && !Names::is_lab_ns("labc"));
        assert_eq!(n.ip_s, "10.201.2.2");
    }
}
