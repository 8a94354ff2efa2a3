//! The few raw syscalls the lab needs (TUN ioctl, ppoll, clock_gettime), wrapped in safe
//! functions. This is the only module of the crate allowed to use `unsafe`.
// The one unsafe exception of the workspace (FFI: ioctl, ppoll, kill...); every block has a
// SAFETY comment and the crate root denies unsafe_code everywhere else.
#![allow(unsafe_code)]

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, IntoRawFd};
use std::os::unix::fs::OpenOptionsExt;
use std::time::Duration;

const TUNSETIFF: libc::c_ulong = 0x4004_54ca;
const IFF_TUN: libc::c_short = 0x0001;
const IFF_NO_PI: libc::c_short = 0x1000;
const IFF_VNET_HDR: libc::c_short = 0x4000;
const TUNSETOFFLOAD: libc::c_ulong = 0x4004_54d0;
const TUN_F_CSUM: libc::c_uint = 0x01;
const TUN_F_TSO4: libc::c_uint = 0x02;
const TUN_F_TSO6: libc::c_uint = 0x04;
const TUN_F_TSO_ECN: libc::c_uint = 0x08;

#[repr(C)]
struct IfReq {
    name: [u8; libc::IFNAMSIZ],
    flags: libc::c_short,
    _pad: [u8; 22],
}

/// Opens (creating if needed) the TUN device `name` in the current netns, non-blocking, no PI
/// header. With `vnet`, every packet carries a 10-byte `virtio_net_hdr` and the device
/// accepts TCP GSO super-packets and partial checksums in both directions (TUNSETOFFLOAD).
pub fn open_tun(name: &str, vnet: bool) -> io::Result<File> {
    if name.is_empty() || name.len() >= libc::IFNAMSIZ {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "bad interface name",
        ));
    }
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NONBLOCK)
        .open("/dev/net/tun")?;
    let mut req = IfReq {
        name: [0; libc::IFNAMSIZ],
        flags: IFF_TUN | IFF_NO_PI | if vnet { IFF_VNET_HDR } else { 0 },
        _pad: [0; 22],
    };
    req.name[..name.len()].copy_from_slice(name.as_bytes());
    // SAFETY: TUNSETIFF reads/writes a struct ifreq, which IfReq matches in size and layout.
    let rc = unsafe { libc::ioctl(f.as_raw_fd(), TUNSETIFF, &mut req as *mut IfReq) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    if vnet {
        let offload = TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6 | TUN_F_TSO_ECN;
        // SAFETY: TUNSETOFFLOAD takes the flag word by value.
        let rc = unsafe { libc::ioctl(f.as_raw_fd(), TUNSETOFFLOAD, offload as libc::c_ulong) };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    let fd = f.into_raw_fd();
    // SAFETY: fd is a valid, owned descriptor that we just released from `f`.
    Ok(unsafe { File::from_raw_fd(fd) })
}

/// Waits until `fd` is readable or `timeout` (None = forever) passes; returns true if readable.
pub fn poll_readable(fd: &impl AsRawFd, timeout: Option<Duration>) -> io::Result<bool> {
    let mut pfd = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    let ts = timeout.map(|d| libc::timespec {
        tv_sec: d.as_secs() as libc::time_t,
        tv_nsec: d.subsec_nanos() as libc::c_long,
    });
    let tsp = ts
        .as_ref()
        .map_or(std::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: pfd and tsp point to valid memory for the duration of the call.
    let rc = unsafe { libc::ppoll(&mut pfd, 1, tsp, std::ptr::null()) };
    if rc < 0 {
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::Interrupted {
            return Ok(false);
        }
        return Err(e);
    }
    Ok(rc > 0 && (pfd.revents & libc::POLLIN) != 0)
}

fn clock_ns(id: libc::clockid_t) -> i64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid out-pointer.
    unsafe { libc::clock_gettime(id, &mut ts) };
    ts.tv_sec * 1_000_000_000 + ts.tv_nsec
}

/// CLOCK_MONOTONIC in nanoseconds.
pub fn mono_ns() -> i64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// CLOCK_REALTIME in nanoseconds (the pcap clock).
pub fn realtime_ns() -> i64 {
    clock_ns(libc::CLOCK_REALTIME)
}

/// CLOCK_TAI - CLOCK_REALTIME in nanoseconds, rounded to whole seconds (normally 0 or 37 s).
pub fn tai_minus_realtime_ns() -> i64 {
    (0..5)
        .map(|_| {
            let r = clock_ns(libc::CLOCK_REALTIME);
            let t = clock_ns(libc::CLOCK_TAI);
            let r2 = clock_ns(libc::CLOCK_REALTIME);
            (t - (r + r2) / 2, r2 - r)
        })
        .min_by_key(|&(_, spread)| spread)
        .map(|(off, _)| (off + 500_000_000).div_euclid(1_000_000_000) * 1_000_000_000)
        .unwrap_or(0)
}

/// Whether process `pid` exists and is not a zombie.
pub fn pid_alive(pid: i32) -> bool {
    // SAFETY: kill with signal 0 only checks for existence.
    let exists = unsafe { libc::kill(pid, 0) == 0 };
    let zombie = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s.rsplit_once(") ").map(|(_, rest)| rest.starts_with('Z')))
        .unwrap_or(false);
    exists && !zombie
}

/// Sends `sig` to process `pid`.
pub fn send_signal(pid: i32, sig: i32) -> bool {
    // SAFETY: plain kill(2).
    unsafe { libc::kill(pid, sig) == 0 }
}

/// Sets this thread's timer slack to 1 ns so short ppoll timeouts are precise.
pub fn set_min_timer_slack() {
    // SAFETY: PR_SET_TIMERSLACK takes an integer argument.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) };
}

/// CPU time (user + system) this process has used, in seconds.
pub fn cpu_seconds() -> f64 {
    // SAFETY: rusage is a plain out-struct; zeroed is a valid initial value.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: valid out-pointer.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// Bytes in a TCP socket's send queue not yet acknowledged by the peer (SIOCOUTQ).
pub fn tcp_outq(fd: &impl AsRawFd) -> io::Result<i32> {
    let mut v: libc::c_int = 0;
    // SAFETY: SIOCOUTQ writes one int.
    let rc = unsafe { libc::ioctl(fd.as_raw_fd(), libc::TIOCOUTQ, &mut v as *mut libc::c_int) };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(v)
    }
}

/// The kernel's cumulative send-side time accounting of a TCP socket (`tcp_info`'s
/// chronographs, microseconds): busy (data outstanding), of which limited by the peer's
/// window and by the send buffer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TcpChrono {
    /// `tcpi_busy_time`: time with data in the write or retransmit queue.
    pub busy_us: u64,
    /// `tcpi_rwnd_limited`: of it, held by the receiver's window.
    pub rwnd_limited_us: u64,
    /// `tcpi_sndbuf_limited`: of it, everything queued was sent and the send buffer was full.
    pub sndbuf_limited_us: u64,
}

/// Reads `fd`'s [`TcpChrono`] (TCP_INFO).
pub fn tcp_chrono(fd: &impl AsRawFd) -> io::Result<TcpChrono> {
    // SAFETY: tcp_info is plain data; all-zero is a valid value.
    let mut ti: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = size_of::<libc::tcp_info>() as libc::socklen_t;
    // SAFETY: the kernel writes at most `len` bytes into `ti` and updates `len`.
    let rc = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut ti as *mut libc::tcp_info).cast(),
            &mut len,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    // An older kernel fills less; the chronographs end at byte 192.
    if (len as usize) < 192 {
        return Ok(TcpChrono::default());
    }
    Ok(TcpChrono {
        busy_us: ti.tcpi_busy_time,
        rwnd_limited_us: ti.tcpi_rwnd_limited,
        sndbuf_limited_us: ti.tcpi_sndbuf_limited,
    })
}

/// Sets this process's nice value (negative = more CPU share); returns success.
pub fn set_nice(nice: i32) -> bool {
    // SAFETY: plain setpriority(2) on the calling process.
    unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, nice) == 0 }
}

/// Tries to take an exclusive advisory lock on `f` without blocking (flock(2));
/// Ok(false) if another process holds it. Released when the file is closed.
pub fn try_lock_exclusive(f: &File) -> io::Result<bool> {
    // SAFETY: plain flock(2) on a descriptor `f` keeps open for the call.
    let rc = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if rc == 0 {
        return Ok(true);
    }
    let e = io::Error::last_os_error();
    if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
        Ok(false)
    } else {
        Err(e)
    }
}

/// An anonymous in-memory file (memfd_create) holding `len` bytes of `byte`.
pub fn memfd_filled(len: usize, byte: u8) -> io::Result<File> {
    let name = c"tcpdx-bulk";
    // SAFETY: name is a valid NUL-terminated string; flags 0 (no sealing).
    let fd = unsafe { libc::memfd_create(name.as_ptr(), 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd is a fresh descriptor we own.
    let mut f = unsafe { File::from_raw_fd(fd) };
    io::Write::write_all(&mut f, &vec![byte; len])?;
    Ok(f)
}

/// sendfile(2) of up to `count` bytes of `inp` from offset `*off` (advanced) to `out`.
pub fn sendfile(out: &impl AsRawFd, inp: &File, off: &mut i64, count: usize) -> io::Result<usize> {
    let mut o: libc::off_t = *off;
    // SAFETY: both descriptors are open for the call; o is a valid in/out offset.
    let rc = unsafe { libc::sendfile(out.as_raw_fd(), inp.as_raw_fd(), &mut o, count) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    *off = o;
    Ok(rc as usize)
}
