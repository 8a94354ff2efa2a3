//! Request/response workload: the client writes each request in several small writes and
//! waits for the whole response; the server answers once it has the whole request. With
//! Nagle on (no TCP_NODELAY) the second write waits for the ACK of the first, which the
//! server delays: the classic Nagle + delayed-ACK stall of a write-write-read client.

use anyhow::{Context, Result, bail};
use clap::Args;
use serde::{Deserialize, Serialize};
use socket2::{Domain, Socket, Type};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Instant;

/// Options of `tcpdx-lab rr client`.
#[derive(Debug, Clone, Args, Serialize, Deserialize)]
pub struct ClientArgs {
    /// Server address:port.
    #[arg(long)]
    pub to: SocketAddr,
    /// Transactions to run.
    #[arg(long, default_value_t = 50)]
    pub transactions: u32,
    /// Writes per request.
    #[arg(long, default_value_t = 2)]
    pub parts: u32,
    /// Request size in bytes (all parts together).
    #[arg(long, default_value_t = 200)]
    pub req_bytes: usize,
    /// Response size in bytes.
    #[arg(long, default_value_t = 1000)]
    pub resp_bytes: usize,
    /// Set TCP_NODELAY (Nagle off).
    #[arg(long)]
    pub nodelay: bool,
    /// Congestion control (TCP_CONGESTION on the socket).
    #[arg(long)]
    pub cc: Option<String>,
}

/// Options of `tcpdx-lab rr serve`.
#[derive(Debug, Clone, Args, Serialize, Deserialize)]
pub struct ServeArgs {
    /// Address:port to listen on.
    #[arg(long)]
    pub listen: SocketAddr,
    /// Request size in bytes.
    #[arg(long, default_value_t = 200)]
    pub req_bytes: usize,
    /// Response size in bytes.
    #[arg(long, default_value_t = 1000)]
    pub resp_bytes: usize,
    /// Congestion control (TCP_CONGESTION on the listening socket).
    #[arg(long)]
    pub cc: Option<String>,
    /// Write the listening notice to this file once ready (for orchestration).
    #[arg(long)]
    pub ready_file: Option<String>,
}

/// Result line of the client (JSON).
#[derive(Debug, Clone, Serialize, Deserialize, Default, PartialEq)]
pub struct ClientResult {
    /// Always "rr-client".
    pub role: String,
    /// Transactions completed.
    pub transactions: u32,
    /// Seconds from connect to close.
    pub secs: f64,
    /// Latency of each transaction (first write to the last byte of the response), ms.
    pub latencies_ms: Vec<f64>,
    /// Whether TCP_NODELAY was set.
    pub nodelay: bool,
}

/// Sizes of the `parts` writes of a `total`-byte request (the remainder goes to the last).
pub fn split(total: usize, parts: u32) -> Vec<usize> {
    let parts = parts.max(1) as usize;
    let total = total.max(parts);
    let each = total / parts;
    let mut v = vec![each; parts];
    v[parts - 1] += total - each * parts;
    v
}

/// Runs the client; returns its per-transaction latencies.
pub fn client(a: &ClientArgs) -> Result<ClientResult> {
    let sock = Socket::new(Domain::IPV4, Type::STREAM, None)?;
    if let Some(cc) = &a.cc {
        sock.set_tcp_congestion(cc.as_bytes())
            .with_context(|| format!("TCP_CONGESTION {cc}"))?;
    }
    sock.set_nodelay(a.nodelay)?;
    sock.connect(&a.to.into())
        .with_context(|| format!("connecting to {}", a.to))?;
    let mut s: TcpStream = sock.into();
    let parts = split(a.req_bytes, a.parts);
    let req = vec![0x51u8; parts.iter().sum()];
    let mut resp = vec![0u8; a.resp_bytes.max(1)];
    let t0 = Instant::now();
    let mut lat = Vec::with_capacity(a.transactions as usize);
    for _ in 0..a.transactions {
        let t = Instant::now();
        let mut off = 0;
        for p in &parts {
            s.write_all(&req[off..off + p])?;
            off += p;
        }
        s.read_exact(&mut resp).context("reading the response")?;
        lat.push((t.elapsed().as_secs_f64() * 1e5).round() / 100.0);
    }
    s.shutdown(std::net::Shutdown::Write)?;
    let mut sink = [0u8; 4096];
    while s.read(&mut sink)? > 0 {}
    Ok(ClientResult {
        role: "rr-client".into(),
        transactions: lat.len() as u32,
        secs: t0.elapsed().as_secs_f64(),
        latencies_ms: lat,
        nodelay: a.nodelay,
    })
}

/// Runs the server: accept one connection, answer each whole request, close at EOF.
pub fn serve(a: &ServeArgs) -> Result<ClientResult> {
    let ls = Socket::new(Domain::IPV4, Type::STREAM, None)?;
    ls.set_reuse_address(true)?;
    if let Some(cc) = &a.cc {
        ls.set_tcp_congestion(cc.as_bytes())
            .with_context(|| format!("TCP_CONGESTION {cc}"))?;
    }
    ls.bind(&a.listen.into())
        .with_context(|| format!("binding {}", a.listen))?;
    ls.listen(1)?;
    if let Some(f) = &a.ready_file {
        std::fs::write(f, "listening\n")?;
    }
    let (conn, _) = ls.accept()?;
    let mut s: TcpStream = conn.into();
    let mut req = vec![0u8; a.req_bytes.max(1)];
    let resp = vec![0x52u8; a.resp_bytes.max(1)];
    let t0 = Instant::now();
    let mut n = 0u32;
    loop {
        // A whole request, or EOF between requests.
        let mut got = 0;
        while got < req.len() {
            let r = s.read(&mut req[got..])?;
            if r == 0 {
                if got == 0 {
                    return Ok(ClientResult {
                        role: "rr-server".into(),
                        transactions: n,
                        secs: t0.elapsed().as_secs_f64(),
                        ..Default::default()
                    });
                }
                bail!("connection closed inside a request");
            }
            got += r;
        }
        s.write_all(&resp)?;
        n += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_keeps_the_total() {
        assert_eq!(split(200, 2), vec![100, 100]);
        assert_eq!(split(201, 2), vec![100, 101]);
        assert_eq!(split(7, 3), vec![2, 2, 3]);
        assert_eq!(split(5, 1), vec![5]);
        // never a zero-byte write
        assert_eq!(split(1, 3), vec![1, 1, 1]);
    }

    #[test]
    fn client_and_server_complete_every_transaction() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        drop(l);
        let sa = ServeArgs {
            listen: addr,
            req_bytes: 300,
            resp_bytes: 5000,
            cc: None,
            ready_file: None,
        };
        let srv = std::thread::spawn(move || serve(&sa).unwrap());
        let ca = ClientArgs {
            to: addr,
            transactions: 5,
            parts: 3,
            req_bytes: 300,
            resp_bytes: 5000,
            nodelay: true,
            cc: None,
        };
        let mut r = None;
        for _ in 0..100 {
            match client(&ca) {
                Ok(x) => {
                    r = Some(x);
                    break;
                }
                Err(_) => std::thread::sleep(std::time::Duration::from_millis(20)),
            }
        }
        let r = r.expect("client ran");
        assert_eq!(r.transactions, 5);
        assert_eq!(r.latencies_ms.len(), 5);
        assert_eq!(srv.join().unwrap().transactions, 5);
    }
}
