//! Bulk TCP sender/receiver with per-socket congestion control, SO_RCVBUF, a slow-reader
//! mode and a clean FIN/FIN close (no RST at the end of captures, unlike iperf3).

use anyhow::{Context, Result};
use clap::Args;
use serde::{Deserialize, Serialize};
use socket2::{Domain, Socket, Type};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// Options of `tcpdx-lab bulk send`.
#[derive(Debug, Clone, Args, Serialize, Deserialize)]
pub struct SendArgs {
    /// Receiver address:port.
    #[arg(long)]
    pub to: SocketAddr,
    /// Bytes to send (ignored with --secs).
    #[arg(long, default_value_t = 10_000_000)]
    pub bytes: u64,
    /// Send for this many seconds instead of a byte count.
    #[arg(long)]
    pub secs: Option<f64>,
    /// Congestion control (TCP_CONGESTION on the socket), e.g. reno, cubic, bbr.
    #[arg(long)]
    pub cc: Option<String>,
    /// SO_SNDBUF in bytes.
    #[arg(long)]
    pub sndbuf: Option<usize>,
    /// Size of each write.
    #[arg(long, default_value_t = 131072)]
    pub write_size: usize,
    /// Send with sendfile(2) from an in-memory file (page references, no copy): a light
    /// traffic generator for benchmarks.
    #[arg(long)]
    #[serde(default)]
    pub zerocopy: bool,
}

/// Options of `tcpdx-lab bulk recv`.
#[derive(Debug, Clone, Args, Serialize, Deserialize)]
pub struct RecvArgs {
    /// Address:port to listen on.
    #[arg(long)]
    pub listen: SocketAddr,
    /// SO_RCVBUF in bytes (set on the listener, so the handshake's window scale follows it).
    #[arg(long)]
    pub rcvbuf: Option<usize>,
    /// Size of each read.
    #[arg(long, default_value_t = 262144)]
    pub read_size: usize,
    /// Sleep after each read (slow application), in ms.
    #[arg(long, default_value_t = 0.0)]
    pub read_sleep_ms: f64,
    /// Sleep after accept before the first read, in ms.
    #[arg(long, default_value_t = 0.0)]
    pub start_delay_ms: f64,
    /// Write the listening notice to this file once ready (for orchestration).
    #[arg(long)]
    pub ready_file: Option<String>,
    /// Discard data in the kernel (recv with MSG_TRUNC, no copy): a light sink for
    /// benchmarks.
    #[arg(long)]
    #[serde(default)]
    pub discard: bool,
}

/// Result line printed by sender and receiver (JSON).
#[derive(Debug, Clone, Serialize, Deserialize, Default)]
pub struct BulkResult {
    /// "send" or "recv".
    pub role: String,
    /// Payload bytes transferred.
    pub bytes: u64,
    /// Seconds from connect/accept to close.
    pub secs: f64,
    /// Goodput in Mbit/s.
    pub mbit_s: f64,
    /// Congestion control in use.
    pub cc: String,
    /// Sender only: the kernel's busy time (`tcpi_busy_time`, us) once all was acknowledged.
    #[serde(default)]
    pub busy_us: u64,
    /// Sender only: of it, limited by the receiver's window (`tcpi_rwnd_limited`, us).
    #[serde(default)]
    pub rwnd_limited_us: u64,
    /// Sender only: of it, limited by the send buffer (`tcpi_sndbuf_limited`, us).
    #[serde(default)]
    pub sndbuf_limited_us: u64,
}

fn sleep_ms(ms: f64) {
    if ms > 0.0 {
        std::thread::sleep(Duration::from_secs_f64(ms / 1000.0));
    }
}

/// Runs the sender: connect, send, shutdown(SHUT_WR), wait for the peer's FIN.
pub fn send(a: &SendArgs) -> Result<BulkResult> {
    let sock = Socket::new(Domain::IPV4, Type::STREAM, None)?;
    if let Some(cc) = &a.cc {
        sock.set_tcp_congestion(cc.as_bytes())
            .with_context(|| format!("TCP_CONGESTION {cc}"))?;
    }
    if let Some(b) = a.sndbuf {
        sock.set_send_buffer_size(b)?;
    }
    sock.connect(&a.to.into())
        .with_context(|| format!("connecting to {}", a.to))?;
    let cc = String::from_utf8_lossy(&sock.tcp_congestion()?)
        .trim_end_matches('\0')
        .to_string();
    let mut s: TcpStream = sock.into();
    let buf = vec![0x5au8; a.write_size.max(1)];
    // zero-copy source: the same in-memory pages sent over and over
    const SRC_LEN: usize = 8 << 20;
    let src = if a.zerocopy {
        Some(crate::sys::memfd_filled(SRC_LEN, 0x5a).context("memfd for --zerocopy")?)
    } else {
        None
    };
    let mut src_off = 0i64;
    let t0 = Instant::now();
    let mut sent = 0u64;
    let deadline = a.secs.map(|s| t0 + Duration::from_secs_f64(s));
    loop {
        let want = match deadline {
            Some(d) if Instant::now() >= d => break,
            Some(_) => buf.len(),
            None if sent >= a.bytes => break,
            None => (a.bytes - sent).min(buf.len() as u64) as usize,
        };
        match &src {
            Some(f) => {
                if src_off as usize >= SRC_LEN {
                    src_off = 0;
                }
                let n = want.min(SRC_LEN - src_off as usize);
                sent += crate::sys::sendfile(&s, f, &mut src_off, n)? as u64;
            }
            None => {
                s.write_all(&buf[..want])?;
                sent += want as u64;
            }
        }
    }
    // Wait until everything is acknowledged before sending the FIN: once the socket is in
    // FIN_WAIT1 the kernel no longer fires tcp_probe for incoming ACKs (they take the
    // tcp_rcv_state_process path), which would blind the ground truth for the tail.
    let t_drain = Instant::now();
    while crate::sys::tcp_outq(&s)? > 0 && t_drain.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_micros(500));
    }
    // Everything is acknowledged, so the chronographs have stopped; read before the FIN.
    let chrono = crate::sys::tcp_chrono(&s).unwrap_or_default();
    s.shutdown(std::net::Shutdown::Write)?;
    let mut sink = [0u8; 65536];
    while s.read(&mut sink)? > 0 {}
    let secs = t0.elapsed().as_secs_f64();
    Ok(BulkResult {
        role: "send".into(),
        bytes: sent,
        secs,
        mbit_s: sent as f64 * 8.0 / secs / 1e6,
        cc,
        busy_us: chrono.busy_us,
        rwnd_limited_us: chrono.rwnd_limited_us,
        sndbuf_limited_us: chrono.sndbuf_limited_us,
    })
}

/// Runs the receiver: accept one connection, read until EOF (optionally slowly), close.
pub fn recv(a: &RecvArgs) -> Result<BulkResult> {
    let ls = Socket::new(Domain::IPV4, Type::STREAM, None)?;
    ls.set_reuse_address(true)?;
    if let Some(b) = a.rcvbuf {
        ls.set_recv_buffer_size(b)?;
    }
    ls.bind(&a.listen.into())
        .with_context(|| format!("binding {}", a.listen))?;
    ls.listen(1)?;
    if let Some(f) = &a.ready_file {
        std::fs::write(f, "listening\n")?;
    }
    let (conn, _) = ls.accept()?;
    let cc = String::from_utf8_lossy(&conn.tcp_congestion()?)
        .trim_end_matches('\0')
        .to_string();
    let t0 = Instant::now();
    sleep_ms(a.start_delay_ms);
    let mut n = 0u64;
    if a.discard {
        let mut buf = vec![std::mem::MaybeUninit::<u8>::uninit(); a.read_size.max(1)];
        loop {
            let r = conn.recv_with_flags(&mut buf, libc::MSG_TRUNC)?;
            if r == 0 {
                break;
            }
            n += r as u64;
        }
    }
    let mut s: TcpStream = conn.into();
    let mut buf = vec![0u8; a.read_size.max(1)];
    loop {
        let r = s.read(&mut buf)?;
        if r == 0 {
            break;
        }
        n += r as u64;
        sleep_ms(a.read_sleep_ms);
    }
    drop(s);
    let secs = t0.elapsed().as_secs_f64();
    Ok(BulkResult {
        role: "recv".into(),
        bytes: n,
        secs,
        mbit_s: n as f64 * 8.0 / secs / 1e6,
        cc,
        ..Default::default()
    })
}
