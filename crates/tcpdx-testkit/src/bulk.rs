//! A streaming generator of large synthetic captures (bulk transfers with periodic losses),
//! for memory, speed and determinism tests and for `tcpdx-synth`.

use std::io::{self, BufWriter, Write};
use std::net::{IpAddr, Ipv4Addr};

use crate::{ACK, FIN, FrameSpec, OptionsSpec, PSH, SYN};

/// What to generate.
#[derive(Clone, Copy, Debug)]
pub struct BulkConfig {
    /// Frames in all.
    pub packets: u64,
    /// Interleaved connections at any time.
    pub concurrent: usize,
    /// Data segments per connection before it closes (a new one on the next port follows).
    pub per_conn: u32,
    /// Microseconds between frames.
    pub gap_us: u64,
    /// Payload bytes per data segment (1448 for MTU 1500, 8948 for MTU 9000).
    pub mss: u32,
    /// Bytes of each frame written (the rest is cut off, as a capture's snaplen does).
    pub snaplen: usize,
    /// One segment of every `loss_every` is lost and repaired by fast retransmission (at
    /// least 10: the repair comes four segments after the loss).
    pub loss_every: u32,
}

impl Default for BulkConfig {
    fn default() -> Self {
        Self {
            packets: 1_000_000,
            concurrent: 64,
            per_conn: 20_000,
            gap_us: 10,
            mss: 1448,
            snaplen: 96,
            loss_every: 1000,
        }
    }
}

struct Conn {
    port: u16,
    client_isn: u32,
    server_isn: u32,
    sent: u32,
    acked: u32,
    step: u64,
}

/// A pcap being streamed: frames `gap_ns` apart, cut at `snaplen` bytes.
pub(crate) struct Out<W: Write> {
    pub(crate) w: BufWriter<W>,
    ts_ns: u64,
    gap_ns: u64,
    snaplen: usize,
    /// Frames written so far.
    pub(crate) frames: u64,
}

impl<W: Write> Out<W> {
    /// Writes the pcap header (Ethernet, microseconds) into `w`.
    pub(crate) fn new(w: W, gap_ns: u64, snaplen: usize) -> io::Result<Self> {
        let mut out = Out {
            w: BufWriter::with_capacity(1 << 20, w),
            ts_ns: 1_700_000_000_000_000_000,
            gap_ns,
            snaplen,
            frames: 0,
        };
        for v in [0xa1b2_c3d4u32, 0x0004_0002, 0, 0, 262_144, 1] {
            if v == 0x0004_0002 {
                out.w.write_all(&2u16.to_le_bytes())?;
                out.w.write_all(&4u16.to_le_bytes())?;
            } else {
                out.w.write_all(&v.to_le_bytes())?;
            }
        }
        Ok(out)
    }

    /// Writes one frame, `gap_ns` after the previous one.
    pub(crate) fn frame(&mut self, spec: &FrameSpec) -> io::Result<()> {
        let bytes = spec.build();
        let cap = bytes.len().min(self.snaplen);
        self.ts_ns += self.gap_ns;
        let h = [
            (self.ts_ns / 1_000_000_000) as u32,
            ((self.ts_ns % 1_000_000_000) / 1000) as u32,
            cap as u32,
            bytes.len() as u32,
        ];
        for v in h {
            self.w.write_all(&v.to_le_bytes())?;
        }
        self.w.write_all(&bytes[..cap])?;
        self.frames += 1;
        Ok(())
    }
}

fn spec(c: &Conn, from_client: bool, seq: u32, ack: u32, flags: u16, len: u32) -> FrameSpec {
    let client = IpAddr::V4(Ipv4Addr::new(10, 1, (c.port >> 8) as u8, c.port as u8));
    let server = IpAddr::V4(Ipv4Addr::new(10, 2, 0, 1));
    let (src, dst, sp, dp) = if from_client {
        (client, server, c.port, 445)
    } else {
        (server, client, 445, c.port)
    };
    FrameSpec {
        src,
        dst,
        src_port: sp,
        dst_port: dp,
        seq,
        ack,
        flags,
        window: 8192,
        options: syn_options(flags),
        payload_len: len,
        ..FrameSpec::TEMPL
    }
}

/// A Linux client's SYN options (MSS 1460, window scale 7, SACK permitted) on a SYN, none on
/// any other segment.
pub(crate) fn syn_options(flags: u16) -> OptionsSpec {
    if flags & SYN != 0 {
        OptionsSpec {
            mss: Some(1460),
            wscale: Some(7),
            sack_perm: true,
            ..OptionsSpec::NONE
        }
    } else {
        OptionsSpec::NONE
    }
}

/// The default pattern's capture of `packets` frames, in memory (for the benchmarks).
pub fn bulk_capture(packets: u64) -> Vec<u8> {
    let mut pcap = Vec::new();
    let cfg = BulkConfig {
        packets,
        ..BulkConfig::default()
    };
    // Writing to a Vec cannot fail.
    write_bulk(&mut pcap, cfg).expect("generate");
    pcap
}

/// `isn + 1 + segments * mss` in sequence space.
fn at(isn: u32, segments: u32, mss: u32) -> u32 {
    isn.wrapping_add(1).wrapping_add(segments.wrapping_mul(mss))
}

/// Streams a pcap of `cfg` into `w`; nothing is kept in memory. Each
/// connection sends `per_conn` data segments (an ACK every second segment, one loss repaired
/// by fast retransmission every `loss_every` segments), closes with FINs, and a new connection on the
/// next port (wrapping to 1024 after 65535) replaces it.
pub fn write_bulk<W: Write>(w: W, cfg: BulkConfig) -> io::Result<()> {
    let total = cfg.packets;
    let concurrent = cfg.concurrent.max(1);
    let per_conn = cfg.per_conn;
    let gap_ns = cfg.gap_us * 1000;
    let mss = cfg.mss;
    let every = cfg.loss_every.max(10);
    let (lose, repair) = (every / 2, every / 2 + 4);
    let mut out = Out::new(w, gap_ns, cfg.snaplen)?;
    let mut next_port: u16 = 1024;
    let new_conn = |port: &mut u16| {
        *port = if *port == u16::MAX { 1024 } else { *port + 1 };
        Conn {
            port: *port,
            client_isn: u32::from(*port).wrapping_mul(7919),
            server_isn: u32::from(*port).wrapping_mul(104_729),
            sent: 0,
            acked: 0,
            step: 0,
        }
    };
    let mut conns: Vec<Conn> = (0..concurrent).map(|_| new_conn(&mut next_port)).collect();
    let mut i = 0;
    while out.frames < total {
        let c = &mut conns[i % concurrent];
        i += 1;
        let (ci, si) = (c.client_isn, c.server_isn);
        match c.step {
            0 => out.frame(&spec(c, true, ci, 0, SYN, 0))?,
            1 => out.frame(&spec(c, false, si, ci.wrapping_add(1), SYN | ACK, 0))?,
            2 => out.frame(&spec(
                c,
                true,
                ci.wrapping_add(1),
                si.wrapping_add(1),
                ACK,
                0,
            ))?,
            _ if c.sent < per_conn => {
                let seq = at(si, c.sent, mss);
                let lost = c.sent % every == lose;
                if !lost {
                    out.frame(&spec(c, false, seq, ci.wrapping_add(1), PSH | ACK, mss))?;
                }
                c.sent += 1;
                if lost {
                    // Three segments later the receiver has sent dup ACKs; retransmit.
                } else if c.sent % every == repair {
                    let hole = at(si, (c.sent / every) * every + lose, mss);
                    for _ in 0..3 {
                        out.frame(&spec(c, true, ci.wrapping_add(1), hole, ACK, 0))?;
                    }
                    out.frame(&spec(c, false, hole, ci.wrapping_add(1), PSH | ACK, mss))?;
                    c.acked = c.sent;
                    out.frame(&spec(
                        c,
                        true,
                        ci.wrapping_add(1),
                        at(si, c.sent, mss),
                        ACK,
                        0,
                    ))?;
                } else if c.sent.is_multiple_of(2)
                    && (c.sent % every < lose || c.sent % every > repair)
                {
                    c.acked = c.sent;
                    out.frame(&spec(
                        c,
                        true,
                        ci.wrapping_add(1),
                        at(si, c.sent, mss),
                        ACK,
                        0,
                    ))?;
                }
            }
            _ => {
                let end = at(si, c.sent, mss);
                out.frame(&spec(c, false, end, ci.wrapping_add(1), FIN | ACK, 0))?;
                out.frame(&spec(
                    c,
                    true,
                    ci.wrapping_add(1),
                    end.wrapping_add(1),
                    FIN | ACK,
                    0,
                ))?;
                out.frame(&spec(
                    c,
                    false,
                    end.wrapping_add(1),
                    ci.wrapping_add(2),
                    ACK,
                    0,
                ))?;
                *c = new_conn(&mut next_port);
                continue;
            }
        }
        c.step += 1;
    }
    out.w.flush()
}
