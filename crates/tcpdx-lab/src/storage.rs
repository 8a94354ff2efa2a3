//! Storage workloads (SMB3, NFSv3/v4, iSCSI): servers in the server namespace, clients in
//! the client namespace, configs from `lab/conf/` (embedded at build time, rendered
//! into a per-run state directory). Test files are zero-filled so full-payload
//! captures compress to almost nothing.

use crate::cmd::{self, run};
use crate::run::spawn_in;
use crate::scenario::{Scenario, StorageOp, Workload};
use crate::topology::Names;
use crate::truth::Stall;
use anyhow::{Context, Result, bail};
use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::{Duration, Instant};

const SMB_CONF: &str = include_str!("../../../lab/conf/smb.conf");
const GANESHA_CONF: &str = include_str!("../../../lab/conf/ganesha.conf");
const TARGET_IQN: &str = "iqn.2026-11.lab:disk1";
const INITIATOR_IQN: &str = "iqn.2026-11.lab:client";

/// TCP ports a storage operation uses (first = data port).
pub fn ports(op: StorageOp) -> Vec<u16> {
    match op {
        StorageOp::Smb3Read | StorageOp::Smb3Write => vec![445],
        StorageOp::Nfs3Read | StorageOp::Nfs3Write => vec![2049, 111, 20048],
        StorageOp::Nfs4Read => vec![2049],
        StorageOp::IscsiRead => vec![3260],
    }
}

/// Whether the client sends the bulk data.
pub fn is_write(op: StorageOp) -> bool {
    matches!(op, StorageOp::Smb3Write | StorageOp::Nfs3Write)
}

/// Debian packages each operation needs.
fn needs(op: StorageOp) -> &'static [&'static str] {
    match op {
        StorageOp::Smb3Read | StorageOp::Smb3Write => &["smbd", "smbclient"],
        StorageOp::Nfs3Read | StorageOp::Nfs3Write => &["rpcbind", "ganesha.nfsd", "nfs-cp"],
        StorageOp::Nfs4Read => &["ganesha.nfsd", "nfs-cp"],
        StorageOp::IscsiRead => &["tgtd", "tgtadm", "iscsi-perf"],
    }
}

/// Machine-wide lock an operation needs, with the reason (see [`crate::lock::LabLock`]).
pub fn exclusive_lock(op: StorageOp) -> Option<(&'static str, &'static str)> {
    match op {
        StorageOp::Nfs3Read | StorageOp::Nfs3Write | StorageOp::Nfs4Read => Some((
            "rpcbind",
            "only one NFS scenario can run at a time on a machine (rpcbind's socket /run/rpcbind.sock and its lock file are global)",
        )),
        _ => None,
    }
}

/// rpcbind's warm-start files: Debian's rpcbind writes them when stopped by SIGTERM, with
/// or without `-w` (which only reads them at start), if its state folder exists (the
/// package creates it on some installs).
const RPCBIND_WARM_START: [&str; 2] = ["/run/rpcbind/rpcbind.xdr", "/run/rpcbind/portmap.xdr"];

/// Removes rpcbind's global socket and lock file (left behind when the lab's rpcbind is
/// killed) and the warm-start files it writes when stopped (no rpcbind of the host runs
/// beside the lab's: the lab refuses to start then, and its own would overwrite them);
/// only call while holding, or after a dead run left, the rpcbind lock.
pub fn remove_rpcbind_files() {
    let _ = std::fs::remove_file("/run/rpcbind.sock");
    let _ = std::fs::remove_file("/run/rpcbind.lock");
    for f in RPCBIND_WARM_START {
        let _ = std::fs::remove_file(f);
    }
}

/// Control port of tgtd for a lab (its socket path is global: /var/run/tgtd/socket.N).
fn tgt_port(prefix: &str) -> String {
    let h = prefix
        .bytes()
        .fold(0u32, |a, b| a.wrapping_mul(31).wrapping_add(u32::from(b)));
    (100 + h % 800).to_string()
}

/// Renders a config template for this lab.
pub fn render(template: &str, server_ip: &str, state: &Path) -> String {
    template
        .replace("@SERVER_IP@", server_ip)
        .replace("@STATE@", &state.to_string_lossy())
}

/// Running storage servers.
pub struct Services {
    op: StorageOp,
    state: PathBuf,
    children: Vec<Child>,
    mib: u32,
}

fn zero_file(path: &Path, mib: u32) -> Result<()> {
    let f = std::fs::File::create(path)?;
    f.set_len(u64::from(mib) << 20)?;
    Ok(())
}

fn wait_listen(ns: &str, port: u16, what: &str) -> Result<()> {
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(15) {
        let out =
            cmd::ns_run(ns, "ss", &["-Hltn", &format!("sport = :{port}")]).unwrap_or_default();
        if !out.trim().is_empty() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    bail!("{what} did not listen on port {port} within 15 s")
}

impl Services {
    /// Starts the servers the scenario needs (and creates the test files).
    pub fn start(n: &Names, sc: &Scenario, out: &Path) -> Result<Services> {
        let Workload::Storage {
            op,
            mib,
            short_mib: _,
            server_cc,
            ..
        } = &sc.workload
        else {
            bail!("not a storage workload")
        };
        for tool in needs(*op) {
            if !cmd::have(tool) {
                bail!("`{tool}` is missing: run `tcpdx-lab install`");
            }
        }
        cmd::ns_run(
            &n.ns_s,
            "sysctl",
            &[
                "-qw",
                &format!("net.ipv4.tcp_congestion_control={server_cc}"),
            ],
        )?;
        let state = PathBuf::from(format!("/tmp/tcpdx-lab-{}", n.prefix));
        let _ = std::fs::remove_dir_all(&state);
        let mut s = Services {
            op: *op,
            state: state.clone(),
            children: Vec::new(),
            mib: *mib,
        };
        std::fs::create_dir_all(&state)?;
        let _ = out;
        let log = |name: &str| state.join(format!("{name}.log"));
        match op {
            StorageOp::Smb3Read | StorageOp::Smb3Write => {
                for d in [
                    "share", "lock", "state", "cache", "pid", "private", "ncalrpc", "log",
                ] {
                    std::fs::create_dir_all(state.join("smb").join(d))?;
                }
                zero_file(&state.join("smb/share/f.bin"), *mib)?;
                let conf = state.join("smb/smb.conf");
                std::fs::write(&conf, render(SMB_CONF, &n.ip_s, &state))?;
                s.children.push(spawn_in(
                    &n.ns_s,
                    1,
                    "smbd",
                    &[
                        "--foreground".into(),
                        "--no-process-group".into(),
                        format!("--configfile={}", conf.display()),
                        "--debug-stdout".into(),
                    ],
                    &log("smbd"),
                )?);
                wait_listen(&n.ns_s, 445, "smbd")?;
            }
            StorageOp::Nfs3Read | StorageOp::Nfs3Write | StorageOp::Nfs4Read => {
                for d in ["export", "recov"] {
                    std::fs::create_dir_all(state.join("nfs").join(d))?;
                }
                zero_file(&state.join("nfs/export/f.bin"), *mib)?;
                let conf = state.join("nfs/ganesha.conf");
                std::fs::write(&conf, render(GANESHA_CONF, &n.ip_s, &state))?;
                // ganesha registers with the portmapper even for NFSv4 (it stalls without one)
                {
                    // The caller holds the rpcbind lock, so no other lab's rpcbind runs; a
                    // socket that answers belongs to the host's own rpcbind.
                    if std::os::unix::net::UnixStream::connect("/run/rpcbind.sock").is_ok() {
                        bail!(
                            "an rpcbind outside the lab answers on /run/rpcbind.sock; the lab's rpcbind would take over its socket: stop it first"
                        );
                    }
                    let _ = std::fs::remove_file("/run/rpcbind.sock");
                    let _ = std::fs::remove_file("/run/rpcbind.lock");
                    s.children.push(spawn_in(
                        &n.ns_s,
                        1,
                        "rpcbind",
                        // no -w: no warm start from files a host's rpcbind left (the ones this
                        // one writes when stopped are removed with its socket)
                        &["-f".into()],
                        &log("rpcbind"),
                    )?);
                    wait_listen(&n.ns_s, 111, "rpcbind")?;
                }
                s.children.push(spawn_in(
                    &n.ns_s,
                    1,
                    "ganesha.nfsd",
                    &[
                        "-F".into(),
                        "-f".into(),
                        conf.to_string_lossy().into(),
                        "-L".into(),
                        state.join("nfs/ganesha.log").to_string_lossy().into(),
                        "-p".into(),
                        state.join("nfs/ganesha.pid").to_string_lossy().into(),
                        "-N".into(),
                        "NIV_EVENT".into(),
                    ],
                    &log("ganesha"),
                )?);
                wait_listen(&n.ns_s, 2049, "ganesha")?;
                std::thread::sleep(Duration::from_millis(500));
            }
            StorageOp::IscsiRead => {
                std::fs::create_dir_all(state.join("iscsi"))?;
                zero_file(&state.join("iscsi/disk.img"), (*mib).max(16))?;
                let c = tgt_port(&n.prefix);
                s.children.push(spawn_in(
                    &n.ns_s,
                    1,
                    "tgtd",
                    &[
                        "-f".into(),
                        "-C".into(),
                        c.clone(),
                        "--iscsi".into(),
                        format!("portal={}:3260", n.ip_s),
                    ],
                    &log("tgtd"),
                )?);
                wait_listen(&n.ns_s, 3260, "tgtd")?;
                let img = state.join("iscsi/disk.img").to_string_lossy().into_owned();
                run(
                    "tgtadm",
                    &[
                        "-C", &c, "--lld", "iscsi", "--op", "new", "--mode", "target", "--tid",
                        "1", "-T", TARGET_IQN,
                    ],
                )?;
                run(
                    "tgtadm",
                    &[
                        "-C",
                        &c,
                        "--lld",
                        "iscsi",
                        "--op",
                        "new",
                        "--mode",
                        "logicalunit",
                        "--tid",
                        "1",
                        "--lun",
                        "1",
                        "-b",
                        &img,
                    ],
                )?;
                run(
                    "tgtadm",
                    &[
                        "-C", &c, "--lld", "iscsi", "--op", "bind", "--mode", "target", "--tid",
                        "1", "-I", "ALL",
                    ],
                )?;
            }
        }
        Ok(s)
    }

    /// Runs the client operation (and the server stall, if any); returns a result summary.
    pub fn run_client(
        &mut self,
        n: &Names,
        sc: &Scenario,
        short: bool,
        out: &Path,
    ) -> Result<serde_json::Value> {
        let Workload::Storage {
            op,
            mib,
            short_mib,
            server_stall_ms,
            server_duty_ms,
            queue_depth,
            ..
        } = &sc.workload
        else {
            bail!("not a storage workload")
        };
        let size = if short { *short_mib } else { *mib };
        if size != self.mib {
            // the server files were created with the full size; recreate at the run size
            match op {
                StorageOp::Smb3Read => zero_file(&self.state.join("smb/share/f.bin"), size)?,
                StorageOp::Nfs3Read | StorageOp::Nfs4Read => {
                    zero_file(&self.state.join("nfs/export/f.bin"), size)?
                }
                _ => {}
            }
        }
        let ip = &n.ip_s;
        let local = self.state.join("client.bin");
        zero_file(&local, size)?;
        let got = self.state.join("got.bin");
        let _ = std::fs::remove_file(&got);
        let (prog, args): (&str, Vec<String>) = match op {
            StorageOp::Smb3Read => (
                "smbclient",
                vec![
                    format!("//{ip}/labshare"),
                    "-N".into(),
                    "-m".into(),
                    "SMB3".into(),
                    "-c".into(),
                    "get f.bin /dev/null".into(),
                ],
            ),
            StorageOp::Smb3Write => (
                "smbclient",
                vec![
                    format!("//{ip}/labshare"),
                    "-N".into(),
                    "-m".into(),
                    "SMB3".into(),
                    "-c".into(),
                    format!("put {} up.bin", local.display()),
                ],
            ),
            StorageOp::Nfs3Read => (
                "nfs-cp",
                vec![
                    format!("nfs://{ip}/export/f.bin"),
                    got.to_string_lossy().into(),
                ],
            ),
            StorageOp::Nfs4Read => (
                "nfs-cp",
                vec![
                    format!("nfs://{ip}/export/f.bin?version=4"),
                    got.to_string_lossy().into(),
                ],
            ),
            StorageOp::Nfs3Write => (
                "nfs-cp",
                vec![
                    local.to_string_lossy().into(),
                    format!("nfs://{ip}/export/up.bin"),
                ],
            ),
            StorageOp::IscsiRead => (
                "timeout",
                vec![
                    "15".into(),
                    "iscsi-perf".into(),
                    "-i".into(),
                    INITIATOR_IQN.into(),
                    "-m".into(),
                    queue_depth.unwrap_or(4).to_string(),
                    "-b".into(),
                    "128".into(),
                    "-t".into(),
                    "1".into(),
                    format!("iscsi://{ip}/{TARGET_IQN}/1"),
                ],
            ),
        };
        let cout = out.join("client.out");
        let t0 = Instant::now();
        let mut child = spawn_in(&n.ns_c, 1, prog, &args, &cout)?;
        if *server_stall_ms > 0 {
            std::thread::sleep(Duration::from_millis(150));
            let pids: Vec<i32> = self.children.iter().map(|c| c.id() as i32).collect();
            let server = *pids.last().context("no server process")?;
            let t_stop = crate::sys::realtime_ns();
            crate::sys::send_signal(server, libc::SIGSTOP);
            std::thread::sleep(Duration::from_millis(u64::from(*server_stall_ms)));
            crate::sys::send_signal(server, libc::SIGCONT);
            let t_cont = crate::sys::realtime_ns();
            std::fs::write(
                out.join("stalls.json"),
                serde_json::to_vec(&[Stall {
                    start_ns: t_stop,
                    end_ns: t_cont,
                }])?,
            )?;
        }
        let server = self.children.last().map(|c| c.id() as i32);
        let st = loop {
            if let Some(st) = child.try_wait()? {
                break st;
            }
            if t0.elapsed() > Duration::from_secs(120) {
                let _ = child.kill();
                if let Some(pid) = server {
                    crate::sys::send_signal(pid, libc::SIGCONT);
                }
                bail!("{prog} did not finish within 120 s");
            }
            match (server_duty_ms, server) {
                // Slow server: stopped, then running, in a loop while the client works.
                (Some((stopped, running)), Some(pid)) => {
                    crate::sys::send_signal(pid, libc::SIGSTOP);
                    std::thread::sleep(Duration::from_millis(u64::from(*stopped)));
                    crate::sys::send_signal(pid, libc::SIGCONT);
                    std::thread::sleep(Duration::from_millis(u64::from(*running)));
                }
                _ => std::thread::sleep(Duration::from_millis(20)),
            }
        };
        if let Some(pid) = server {
            crate::sys::send_signal(pid, libc::SIGCONT);
        }
        let secs = t0.elapsed().as_secs_f64();
        let text = std::fs::read_to_string(&cout).unwrap_or_default()
            + &std::fs::read_to_string(cout.with_extension("err")).unwrap_or_default();
        let _ = std::fs::remove_file(&cout);
        let _ = std::fs::remove_file(cout.with_extension("err"));
        // iscsi-perf is stopped by its own -t timer; `timeout` exits 124 only if it hangs
        if !st.success() {
            bail!("{prog} failed ({st}): {}", text.trim());
        }
        let tail: Vec<&str> = text.lines().rev().take(3).collect();
        Ok(serde_json::json!({ "client": prog, "mib": size, "secs": secs, "output_tail": tail }))
    }

    /// Stops the servers (tgtd needs tgtadm; ganesha takes a few seconds).
    pub fn stop(mut self, n: &Names) {
        if self.op == StorageOp::IscsiRead {
            stop_tgt_for(&n.prefix);
        }
        for c in &self.children {
            crate::sys::send_signal(c.id() as i32, libc::SIGCONT);
            crate::sys::send_signal(c.id() as i32, libc::SIGTERM);
        }
        let t0 = Instant::now();
        for c in &mut self.children {
            while t0.elapsed() < Duration::from_secs(6) {
                if c.try_wait().ok().flatten().is_some() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            let _ = c.kill();
            let _ = c.wait();
        }
        crate::topology::kill_ns_processes(&[&n.ns_s]);
        if exclusive_lock(self.op).is_some() {
            remove_rpcbind_files();
        }
        let _ = std::fs::remove_dir_all(&self.state);
    }
}

/// Stall intervals recorded during the run (SIGSTOP..SIGCONT), removing the record file.
pub fn take_stalls(out: &Path) -> Option<Vec<Stall>> {
    let p = out.join("stalls.json");
    let v = serde_json::from_slice(&std::fs::read(&p).ok()?).ok();
    let _ = std::fs::remove_file(&p);
    v
}

/// Stops a tgtd started by the lab with prefix `prefix` (tgtd ignores SIGTERM while targets exist).
pub fn stop_tgt_for(prefix: &str) {
    let c = tgt_port(prefix);
    if Path::new(&format!("/var/run/tgtd/socket.{c}")).exists() {
        cmd::run_quiet(
            "tgtadm",
            &[
                "-C", &c, "--op", "update", "--mode", "sys", "--name", "State", "-v", "offline",
            ],
        );
        cmd::run_quiet("tgtadm", &["-C", &c, "--op", "delete", "--mode", "system"]);
        std::thread::sleep(Duration::from_millis(300));
        let _ = std::fs::remove_file(format!("/var/run/tgtd/socket.{c}"));
        let _ = std::fs::remove_file(format!("/var/run/tgtd/socket.{c}.lock"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configs_render() {
        let s = render(SMB_CONF, "10.7.2.2", Path::new("/tmp/x"));
        assert!(s.contains("interfaces = 10.7.2.2/24") && s.contains("path = /tmp/x/smb/share"));
        assert!(!s.contains('@'));
        assert!(!render(GANESHA_CONF, "10.7.2.2", Path::new("/tmp/x")).contains('@'));
    }

    #[test]
    fn write_ops_and_ports() {
        assert!(is_write(StorageOp::Nfs3Write) && !is_write(StorageOp::IscsiRead));
        assert_eq!(ports(StorageOp::Nfs3Read)[0], 2049);
    }
}
