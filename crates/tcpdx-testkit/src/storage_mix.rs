//! A streaming generator of a storage mix: NFSv3 clients reading and writing over many
//! connections at once, every frame interleaved with the other connections' (the `storage`
//! capture of `bench/run.sh`, and `tcpdx-synth storage`).
//!
//! Each connection opens with a handshake, then alternates READ and WRITE calls of
//! `io_bytes` each (replies and data in MSS-sized segments, an ACK every second data segment
//! and after the last), closes with FINs after `ops_per_conn` operations, and a new
//! connection on the next client port replaces it. Headers and RPC messages are whole in the
//! capture with the default snap length; the bulk of the data is cut, as on a capture
//! appliance. Nothing is kept in memory beyond each connection's current operation.

use std::collections::VecDeque;
use std::io::{self, Write};
use std::net::{IpAddr, Ipv4Addr};

use crate::bulk::{Out, syn_options};
use crate::{ACK, FIN, FrameSpec, PSH, Payload, SYN, nfs};

/// What to generate.
#[derive(Clone, Copy, Debug)]
pub struct StorageMixConfig {
    /// Frames in all.
    pub packets: u64,
    /// Connections open at any time.
    pub concurrent: usize,
    /// Operations per connection before it closes.
    pub ops_per_conn: u32,
    /// Bytes per READ and per WRITE.
    pub io_bytes: u32,
    /// Payload bytes per data segment.
    pub mss: u32,
    /// Microseconds between frames.
    pub gap_us: u64,
    /// Bytes of each frame written.
    pub snaplen: usize,
}

impl Default for StorageMixConfig {
    fn default() -> Self {
        Self {
            packets: 1_000_000,
            concurrent: 32,
            ops_per_conn: 200,
            io_bytes: 32_768,
            mss: 1448,
            gap_us: 10,
            snaplen: 256,
        }
    }
}

/// NFS server port.
const NFS: u16 = 2049;

/// One connection: its sequence numbers and the frames of its current exchange.
struct Conn {
    port: u16,
    /// Next sequence number of the client, of the server.
    seq: [u32; 2],
    ops: u32,
    /// The FINs are queued: once they are out, the connection is replaced.
    closing: bool,
    queue: VecDeque<FrameSpec>,
}

impl Conn {
    fn new(port: u16) -> Self {
        let isn = [
            u32::from(port).wrapping_mul(7919),
            u32::from(port).wrapping_mul(104_729),
        ];
        let mut c = Conn {
            port,
            seq: isn,
            ops: 0,
            closing: false,
            queue: VecDeque::new(),
        };
        c.push(true, SYN, Vec::new());
        c.push(false, SYN | ACK, Vec::new());
        c.push(true, ACK, Vec::new());
        c
    }

    /// Queues a segment from the client (or the server) carrying `payload`; SYN and FIN take
    /// a sequence number.
    fn push(&mut self, from_client: bool, flags: u16, payload: Vec<u8>) {
        let (me, peer) = if from_client { (0, 1) } else { (1, 0) };
        let client = IpAddr::V4(Ipv4Addr::new(
            10,
            3,
            (self.port >> 8) as u8,
            self.port as u8,
        ));
        let server = IpAddr::V4(Ipv4Addr::new(10, 4, 0, 1));
        let (src, dst, src_port, dst_port) = if from_client {
            (client, server, self.port, NFS)
        } else {
            (server, client, NFS, self.port)
        };
        let len = payload.len() as u32;
        let spec = FrameSpec {
            src,
            dst,
            src_port,
            dst_port,
            seq: self.seq[me],
            // Before the handshake's first segment is answered there is nothing to ACK.
            ack: if flags & ACK != 0 { self.seq[peer] } else { 0 },
            flags,
            window: 8192,
            options: syn_options(flags),
            payload_len: len,
            payload: Payload::Bytes(payload),
            ..FrameSpec::TEMPL
        };
        self.seq[me] = self.seq[me]
            .wrapping_add(len)
            .wrapping_add(u32::from(flags & (SYN | FIN) != 0));
        self.queue.push_back(spec);
    }

    /// Queues `bytes` from one side in `mss`-sized segments, the other side acknowledging
    /// every second one and the last.
    fn send(&mut self, from_client: bool, bytes: &[u8], mss: u32) {
        let chunks = bytes.chunks(mss.max(1) as usize);
        let n = chunks.len();
        for (i, chunk) in chunks.enumerate() {
            self.push(from_client, PSH | ACK, chunk.to_vec());
            if i % 2 == 1 || i + 1 == n {
                self.push(!from_client, ACK, Vec::new());
            }
        }
    }

    /// Queues the next operation (READ, WRITE alternately), or the close after the last.
    fn next_exchange(&mut self, cfg: &StorageMixConfig) {
        if self.ops >= cfg.ops_per_conn {
            self.push(true, FIN | ACK, Vec::new());
            self.push(false, FIN | ACK, Vec::new());
            self.push(true, ACK, Vec::new());
            self.closing = true;
            return;
        }
        let xid = u32::from(self.port) << 16 | self.ops;
        let count = cfg.io_bytes;
        if self.ops.is_multiple_of(2) {
            self.push(true, PSH | ACK, nfs::read_call(xid, count));
            self.send(false, &nfs::read_reply(xid, count), cfg.mss);
        } else {
            self.send(true, &nfs::write_call(xid, count), cfg.mss);
            self.push(false, PSH | ACK, nfs::write_reply(xid, count));
        }
        self.ops += 1;
    }
}

/// Streams a pcap of `cfg` into `w` (see the module doc).
pub fn write_storage_mix<W: Write>(w: W, cfg: StorageMixConfig) -> io::Result<()> {
    let mut out = Out::new(w, cfg.gap_us * 1000, cfg.snaplen)?;
    let concurrent = cfg.concurrent.max(1);
    let mut next_port: u16 = 1024;
    let mut new_port = || {
        next_port = if next_port == u16::MAX {
            1024
        } else {
            next_port + 1
        };
        next_port
    };
    let mut conns: Vec<Conn> = (0..concurrent).map(|_| Conn::new(new_port())).collect();
    let mut i = 0;
    while out.frames < cfg.packets {
        let c = &mut conns[i % concurrent];
        i += 1;
        if c.queue.is_empty() {
            if c.closing {
                // Closed: a new connection takes its place.
                *c = Conn::new(new_port());
            } else {
                c.next_exchange(&cfg);
            }
        }
        if let Some(spec) = c.queue.pop_front() {
            out.frame(&spec)?;
        }
    }
    out.w.flush()
}
