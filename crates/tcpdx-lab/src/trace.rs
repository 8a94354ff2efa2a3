//! Kernel ground truth from a private tracefs instance: tcp_probe (filtered by the lab's
//! packet mark and ports), tcp_cong_state_set and tcp_retransmit_skb, with
//! `trace_clock=tai` so timestamps compare with pcap (CLOCK_REALTIME) after subtracting
//! the recorded TAI offset. Also parses the text the instance produces.

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};
use std::net::SocketAddrV4;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// tracefs mount point.
pub const TRACEFS: &str = "/sys/kernel/tracing";
const EVENTS: [&str; 4] = [
    "tcp_probe",
    "tcp_cong_state_set",
    "tcp_retransmit_skb",
    "tcp_receive_reset",
];

/// Marker file: the lab mounted tracefs (so the last lab to finish unmounts it).
fn mount_marker() -> PathBuf {
    Path::new(crate::topology::STATE_DIR).join("tracefs.mounted")
}

/// Mounts tracefs if it is not mounted yet (and records that the lab did).
pub fn ensure_mounted() -> Result<()> {
    if Path::new(TRACEFS).join("instances").is_dir() {
        return Ok(());
    }
    std::fs::create_dir_all(crate::topology::STATE_DIR)?;
    std::fs::write(mount_marker(), "")?;
    crate::cmd::run("mount", &["-t", "tracefs", "nodev", TRACEFS]).context("mounting tracefs")?;
    Ok(())
}

/// Unmounts tracefs if the lab mounted it and no tracing instance is left (call when no
/// lab is live). Returns whether it unmounted.
pub fn unmount_if_ours() -> bool {
    if !mount_marker().exists() {
        return false;
    }
    let instances = Path::new(TRACEFS).join("instances");
    let busy = std::fs::read_dir(&instances).is_ok_and(|mut rd| rd.next().is_some());
    if busy {
        return false;
    }
    let done = !instances.is_dir() || crate::cmd::run("umount", &[TRACEFS]).is_ok();
    if done {
        let _ = std::fs::remove_file(mount_marker());
    }
    done
}

/// A live tracefs instance streaming into a file.
pub struct Tracer {
    dir: PathBuf,
    reader: Child,
    /// Output file (tracefs text).
    pub out: PathBuf,
}

/// Counters of the tracing ring buffer (non-zero overrun means incomplete truth).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct TraceStats {
    /// Events overwritten before they were read.
    pub overrun: u64,
    /// Events dropped.
    pub dropped_events: u64,
}

fn wr(dir: &Path, file: &str, v: &str) -> Result<()> {
    std::fs::write(dir.join(file), v)
        .with_context(|| format!("writing {v:?} to {}/{file}", dir.display()))
}

/// Filter expression matching any of `ports` as source or destination port.
pub fn port_filter(ports: &[u16]) -> String {
    ports
        .iter()
        .map(|p| format!("sport == {p} || dport == {p}"))
        .collect::<Vec<_>>()
        .join(" || ")
}

impl Tracer {
    /// Creates instance `name`, enables the TCP events for `ports` and streams to `out`.
    pub fn start(name: &str, ports: &[u16], mark: u32, out: &Path) -> Result<Tracer> {
        ensure_mounted()?;
        let dir = Path::new(TRACEFS).join("instances").join(name);
        if dir.exists() {
            bail!("tracefs instance {} already exists", dir.display());
        }
        std::fs::create_dir(&dir).with_context(|| format!("creating {}", dir.display()))?;
        wr(&dir, "tracing_on", "0")?;
        wr(&dir, "trace_clock", "tai")?;
        wr(&dir, "buffer_size_kb", "16384")?;
        let pf = port_filter(ports);
        let probe_filter = if std::env::var_os("TDX_TRACE_NOMARK").is_some() {
            pf.clone()
        } else {
            format!("mark == {mark:#x} && ({pf})")
        };
        wr(&dir, "events/tcp/tcp_probe/filter", &probe_filter)?;
        for e in EVENTS {
            if e != "tcp_probe" {
                wr(&dir, &format!("events/tcp/{e}/filter"), &pf)?;
            }
            wr(&dir, &format!("events/tcp/{e}/enable"), "1")?;
        }
        wr(&dir, "trace", "")?;
        let f = std::fs::File::create(out)?;
        let reader = Command::new("cat")
            .arg(dir.join("trace_pipe"))
            .stdout(f)
            .stdin(Stdio::null())
            .spawn()
            .context("starting trace_pipe reader")?;
        wr(&dir, "tracing_on", "1")?;
        Ok(Tracer {
            dir,
            reader,
            out: out.to_path_buf(),
        })
    }

    /// Stops tracing, drains the pipe, removes the instance and returns ring counters.
    pub fn stop(mut self) -> Result<TraceStats> {
        wr(&self.dir, "tracing_on", "0")?;
        std::thread::sleep(Duration::from_millis(400));
        let mut st = TraceStats::default();
        if let Ok(rd) = std::fs::read_dir(self.dir.join("per_cpu")) {
            for e in rd.flatten() {
                let text = std::fs::read_to_string(e.path().join("stats")).unwrap_or_default();
                for l in text.lines() {
                    let v: u64 = l
                        .rsplit(' ')
                        .next()
                        .and_then(|x| x.parse().ok())
                        .unwrap_or(0);
                    if l.starts_with("overrun") {
                        st.overrun += v;
                    } else if l.starts_with("dropped events") {
                        st.dropped_events += v;
                    }
                }
            }
        }
        let _ = self.reader.kill();
        let _ = self.reader.wait();
        remove_instance(&self.dir);
        Ok(st)
    }
}

/// Kills processes (by pid) that hold this instance's trace_pipe open, e.g. the reader
/// of a run that was killed; the instance cannot be removed while it is open.
fn kill_pipe_readers(dir: &Path) {
    let pipe = dir.join("trace_pipe");
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return;
    };
    for p in procs.flatten() {
        let Ok(pid) = p.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(fds) = std::fs::read_dir(p.path().join("fd")) else {
            continue;
        };
        if fds
            .flatten()
            .any(|fd| std::fs::read_link(fd.path()).is_ok_and(|l| l == pipe))
        {
            crate::sys::send_signal(pid, libc::SIGKILL);
        }
    }
}

fn remove_instance(dir: &Path) {
    let _ = std::fs::write(dir.join("tracing_on"), "0");
    kill_pipe_readers(dir);
    for e in EVENTS {
        let _ = std::fs::write(dir.join(format!("events/tcp/{e}/enable")), "0");
    }
    for _ in 0..20 {
        if std::fs::remove_dir(dir).is_ok() || !dir.exists() {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Removes every tracefs instance whose name starts with `prefix`.
pub fn remove_instances(prefix: &str) {
    let Ok(rd) = std::fs::read_dir(Path::new(TRACEFS).join("instances")) else {
        return;
    };
    for e in rd.flatten() {
        if e.file_name().to_string_lossy().starts_with(prefix) {
            remove_instance(&e.path());
        }
    }
}

/// One parsed trace event (times in TAI ns as printed by the kernel, µs resolution).
#[derive(Debug, Clone, PartialEq)]
pub enum TraceEvent {
    /// tcp_probe: a segment arrived at an established socket (state before processing it).
    Probe {
        /// Time (trace clock, ns).
        t_ns: i64,
        /// Local address of the socket.
        src: SocketAddrV4,
        /// Remote address.
        dst: SocketAddrV4,
        /// Payload of the received segment.
        data_len: u32,
        /// snd_nxt before processing.
        snd_nxt: u32,
        /// snd_una before processing.
        snd_una: u32,
        /// Congestion window (segments).
        cwnd: u32,
        /// Slow-start threshold (segments).
        ssthresh: u32,
        /// Peer's advertised window (bytes).
        snd_wnd: u32,
        /// Smoothed RTT (µs).
        srtt_us: u32,
    },
    /// tcp_cong_state_set: the socket's congestion state changes to `state`.
    CongState {
        /// Time (trace clock, ns).
        t_ns: i64,
        /// Local address.
        src: SocketAddrV4,
        /// Remote address.
        dst: SocketAddrV4,
        /// 0 Open, 1 Disorder, 2 CWR, 3 Recovery, 4 Loss.
        state: u8,
    },
    /// tcp_retransmit_skb: one skb (possibly several MSS) was retransmitted.
    Retransmit {
        /// Time (trace clock, ns).
        t_ns: i64,
        /// Local address.
        src: SocketAddrV4,
        /// Remote address.
        dst: SocketAddrV4,
        /// Error of the attempt (0: sent; non-zero: nothing reached the wire).
        err: i32,
    },
    /// tcp_receive_reset.
    Reset {
        /// Time (trace clock, ns).
        t_ns: i64,
        /// Local address.
        src: SocketAddrV4,
        /// Remote address.
        dst: SocketAddrV4,
    },
}

impl TraceEvent {
    /// Event time (trace clock, ns).
    pub fn t_ns(&self) -> i64 {
        match self {
            TraceEvent::Probe { t_ns, .. }
            | TraceEvent::CongState { t_ns, .. }
            | TraceEvent::Retransmit { t_ns, .. }
            | TraceEvent::Reset { t_ns, .. } => *t_ns,
        }
    }

    /// (local, remote) addresses of the socket.
    pub fn addrs(&self) -> (SocketAddrV4, SocketAddrV4) {
        match self {
            TraceEvent::Probe { src, dst, .. }
            | TraceEvent::CongState { src, dst, .. }
            | TraceEvent::Retransmit { src, dst, .. }
            | TraceEvent::Reset { src, dst, .. } => (*src, *dst),
        }
    }
}

fn parse_ts(s: &str) -> Option<i64> {
    let (sec, frac) = s.split_once('.')?;
    let sec: i64 = sec.parse().ok()?;
    let mut f: i64 = frac.parse().ok()?;
    for _ in frac.len()..9 {
        f *= 10;
    }
    Some(sec * 1_000_000_000 + f)
}

fn strip_mapped(a: &str) -> &str {
    a.trim_start_matches('[')
        .trim_start_matches("::ffff:")
        .trim_end_matches(']')
}

fn sockaddr(a: &str) -> Option<SocketAddrV4> {
    // "10.1.1.2:40000" or "[::ffff:10.1.1.2]:40000"
    let (host, port) = a.rsplit_once(':')?;
    format!("{}:{}", strip_mapped(host), port).parse().ok()
}

/// Parses one line of tracefs text output; None for comments and other events.
pub fn parse_line(line: &str) -> Option<TraceEvent> {
    // "<task>-<pid> [cpu] flags  <ts>: <event>: k=v ..."
    let close = line.find("] ")?;
    let rest = &line[close + 2..];
    let mut it = rest.splitn(2, ": ");
    let head = it.next()?;
    let ts = parse_ts(head.split_whitespace().last()?)?;
    let body = it.next()?;
    let (ev, kv) = body.split_once(": ")?;
    let get = |k: &str| {
        kv.split_whitespace()
            .find_map(|w| w.strip_prefix(k)?.strip_prefix('='))
    };
    let num = |k: &str| -> Option<u32> {
        let v = get(k)?;
        match v.strip_prefix("0x") {
            Some(h) => u32::from_str_radix(h, 16).ok(),
            None => v.parse().ok(),
        }
    };
    let v4 = |a: &str, p: &str| -> Option<SocketAddrV4> {
        format!("{}:{}", get(a)?, get(p)?).parse().ok()
    };
    match ev.trim() {
        "tcp_probe" => Some(TraceEvent::Probe {
            t_ns: ts,
            src: sockaddr(get("src")?)?,
            dst: sockaddr(get("dest")?)?,
            data_len: num("data_len")?,
            snd_nxt: num("snd_nxt")?,
            snd_una: num("snd_una")?,
            cwnd: num("snd_cwnd")?,
            ssthresh: num("ssthresh")?,
            snd_wnd: num("snd_wnd")?,
            srtt_us: num("srtt")?,
        }),
        "tcp_cong_state_set" => Some(TraceEvent::CongState {
            t_ns: ts,
            src: v4("saddr", "sport")?,
            dst: v4("daddr", "dport")?,
            state: num("cong_state")? as u8,
        }),
        "tcp_retransmit_skb" => Some(TraceEvent::Retransmit {
            t_ns: ts,
            src: v4("saddr", "sport")?,
            dst: v4("daddr", "dport")?,
            err: get("err").and_then(|e| e.parse().ok()).unwrap_or(0),
        }),
        "tcp_receive_reset" => Some(TraceEvent::Reset {
            t_ns: ts,
            src: v4("saddr", "sport")?,
            dst: v4("daddr", "dport")?,
        }),
        _ => None,
    }
}

/// Parses a whole trace file, sorted by time (trace_pipe is not ordered across CPUs).
pub fn parse_file(path: &Path) -> Result<Vec<TraceEvent>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let mut v: Vec<TraceEvent> = text.lines().filter_map(parse_line).collect();
    v.sort_by_key(TraceEvent::t_ns);
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    const PROBE: &str = "          <idle>-0       [001] ..s1. 1763775000.123456: tcp_probe: family=AF_INET src=10.201.1.2:40000 dest=10.201.2.2:15301 mark=0x1a99 data_len=0 snd_nxt=0x1f4 snd_una=0x64 snd_cwnd=10 ssthresh=2147483647 snd_wnd=65535 srtt=20512 rcv_wnd=64256 sock_cookie=3 skbaddr=0000000012345678 skaddr=00000000abcdef01";
    const CS: &str = " bulk-77 [001] ..s2. 1763775000.200001: tcp_cong_state_set: family=AF_INET sport=40000 dport=15301 saddr=10.201.1.2 daddr=10.201.2.2 saddrv6=::ffff:10.201.1.2 daddrv6=::ffff:10.201.2.2 cong_state=4";
    const RTX: &str = " <idle>-0 [001] ..s1. 1763775000.200002: tcp_retransmit_skb: skbaddr=00000000ab skaddr=00000000cd family=AF_INET sport=40000 dport=15301 saddr=10.201.1.2 daddr=10.201.2.2 saddrv6=::ffff:10.201.1.2 daddrv6=::ffff:10.201.2.2 state=TCP_ESTABLISHED err=0";

    #[test]
    fn parses_probe() {
        let TraceEvent::Probe {
            t_ns,
            src,
            dst,
            snd_nxt,
            snd_una,
            cwnd,
            srtt_us,
            ..
        } = parse_line(PROBE).unwrap()
        else {
            panic!()
        };
        assert_eq!(t_ns, 1_763_775_000_123_456_000);
        assert_eq!(src.to_string(), "10.201.1.2:40000");
        assert_eq!(dst.port(), 15301);
        assert_eq!((snd_nxt, snd_una, cwnd, srtt_us), (500, 100, 10, 20512));
    }

    #[test]
    fn parses_mapped_v6_probe_addresses() {
        let l = PROBE.replace("src=10.201.1.2:40000", "src=[::ffff:10.201.1.2]:40000");
        assert_eq!(
            parse_line(&l).unwrap().addrs().0.to_string(),
            "10.201.1.2:40000"
        );
    }

    #[test]
    fn parses_state_and_retransmit() {
        assert!(matches!(
            parse_line(CS),
            Some(TraceEvent::CongState { state: 4, .. })
        ));
        let r = parse_line(RTX).unwrap();
        assert!(matches!(r, TraceEvent::Retransmit { err: 0, .. }));
        assert_eq!(r.addrs().1.to_string(), "10.201.2.2:15301");
        assert_eq!(r.t_ns(), 1_763_775_000_200_002_000);
        assert!(parse_line("# tracer: nop").is_none());
    }

    #[test]
    fn filter_text() {
        assert_eq!(
            port_filter(&[1, 2]),
            "sport == 1 || dport == 1 || sport == 2 || dport == 2"
        );
    }
}
