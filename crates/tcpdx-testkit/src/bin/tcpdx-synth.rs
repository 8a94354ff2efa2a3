//! `tcpdx-synth`: writes a large synthetic pcap to stdout, for memory and speed tests.
//!
//! `tcpdx-synth PACKETS [CONCURRENT] [PER_CONNECTION]` streams PACKETS frames (snaplen 96)
//! of CONCURRENT interleaved bulk transfers; each connection sends PER_CONNECTION data
//! segments (with an ACK every second segment and one loss repaired by fast retransmission
//! every 1000 segments), closes with FINs, and a new connection on a new port replaces it.
//! Nothing is kept in memory, so `tcpdx-synth 20000000 | tcpdx flows -` measures tcpdx alone.
#![forbid(unsafe_code)]

use std::io::{self, BufWriter, Write};
use std::net::{IpAddr, Ipv4Addr};

use tcpdx_testkit::{ACK, FIN, FrameSpec, OptionsSpec, PSH, SYN};

const MSS: u32 = 1448;

struct Conn {
    port: u16,
    client_isn: u32,
    server_isn: u32,
    sent: u32,
    acked: u32,
    step: u64,
}

struct Out<W: Write> {
    w: W,
    ts_ns: u64,
    frames: u64,
}

impl<W: Write> Out<W> {
    fn frame(&mut self, spec: &FrameSpec) -> io::Result<()> {
        let bytes = spec.build();
        let cap = bytes.len().min(96);
        self.ts_ns += 10_000;
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
        options: if flags & SYN != 0 {
            OptionsSpec {
                mss: Some(1460),
                wscale: Some(7),
                sack_perm: true,
                ..OptionsSpec::NONE
            }
        } else {
            OptionsSpec::NONE
        },
        payload_len: len,
        ..FrameSpec::TEMPL
    }
}

/// `isn + 1 + segments * MSS` in sequence space.
fn at(isn: u32, segments: u32) -> u32 {
    isn.wrapping_add(1).wrapping_add(segments.wrapping_mul(MSS))
}

fn main() -> io::Result<()> {
    let args: Vec<u64> = std::env::args()
        .skip(1)
        .map(|a| a.parse().expect("numbers"))
        .collect();
    let total = *args.first().unwrap_or(&1_000_000);
    let concurrent = *args.get(1).unwrap_or(&64) as usize;
    let per_conn = *args.get(2).unwrap_or(&20_000) as u32;
    let mut out = Out {
        w: BufWriter::with_capacity(1 << 20, io::stdout().lock()),
        ts_ns: 1_700_000_000_000_000_000,
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
                let seq = at(si, c.sent);
                let lost = c.sent % 1000 == 500;
                if !lost {
                    out.frame(&spec(c, false, seq, ci.wrapping_add(1), PSH | ACK, MSS))?;
                }
                c.sent += 1;
                if lost {
                    // Three segments later the receiver has sent dup ACKs; retransmit.
                } else if c.sent % 1000 == 504 {
                    let hole = at(si, (c.sent / 1000) * 1000 + 500);
                    for _ in 0..3 {
                        out.frame(&spec(c, true, ci.wrapping_add(1), hole, ACK, 0))?;
                    }
                    out.frame(&spec(c, false, hole, ci.wrapping_add(1), PSH | ACK, MSS))?;
                    c.acked = c.sent;
                    out.frame(&spec(c, true, ci.wrapping_add(1), at(si, c.sent), ACK, 0))?;
                } else if c.sent.is_multiple_of(2) && (c.sent % 1000 < 500 || c.sent % 1000 > 504) {
                    c.acked = c.sent;
                    out.frame(&spec(c, true, ci.wrapping_add(1), at(si, c.sent), ACK, 0))?;
                }
            }
            _ => {
                let end = at(si, c.sent);
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
