//! Packet capture with tcpdump inside a lab namespace (pinned to CPU0, 64 MiB buffer),
//! plus a small pcap reader (classic pcap, optionally gzip) for verification.

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A running tcpdump.
pub struct Capture {
    child: Child,
    /// Output pcap path.
    pub path: PathBuf,
    log: PathBuf,
}

/// tcpdump's own counters at exit.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct CaptureStats {
    /// Packets written.
    pub captured: u64,
    /// Packets the kernel dropped before tcpdump read them (capture loss, not network loss).
    pub dropped_by_kernel: u64,
}

impl Capture {
    /// Starts `tcpdump -i iface -s snaplen -B 65536 -w out filter` in `ns` on CPU0.
    pub fn start(ns: &str, iface: &str, out: &Path, snaplen: u32, filter: &str) -> Result<Capture> {
        let log = out.with_extension("tcpdump.log");
        let _ = std::fs::remove_file(out);
        let logf = std::fs::File::create(&log)?;
        let child = Command::new("ip")
            .args([
                "netns", "exec", ns, "taskset", "-c", "0", "tcpdump", "-n", "-i", iface, "-s",
            ])
            .arg(snaplen.to_string())
            .args(["-B", "65536", "-w"])
            .arg(out)
            .arg(filter)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(logf)
            .spawn()
            .context("starting tcpdump")?;
        let mut c = Capture {
            child,
            path: out.to_path_buf(),
            log,
        };
        for _ in 0..100 {
            if std::fs::read_to_string(&c.log).is_ok_and(|s| s.contains("listening on")) {
                return Ok(c);
            }
            if let Some(st) = c.child.try_wait()? {
                bail!(
                    "tcpdump exited ({st}): {}",
                    std::fs::read_to_string(&c.log).unwrap_or_default()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = c.child.kill();
        bail!("tcpdump did not start listening within 5 s")
    }

    /// Waits 1.5 s (TPACKET_V3 block retirement), stops tcpdump with SIGINT and reads its counters.
    pub fn stop(mut self) -> Result<CaptureStats> {
        std::thread::sleep(Duration::from_millis(1500));
        crate::sys::send_signal(self.child.id() as i32, libc::SIGINT);
        for _ in 0..50 {
            if self.child.try_wait()?.is_some() {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let _ = std::fs::remove_file(&self.log);
        Ok(parse_tcpdump_stats(&text))
    }
}

/// Parses tcpdump's exit summary ("N packets captured", "N packets dropped by kernel").
pub fn parse_tcpdump_stats(text: &str) -> CaptureStats {
    let num = |suffix: &str| {
        text.lines()
            .find(|l| l.trim_end().ends_with(suffix))
            .and_then(|l| l.split_whitespace().next()?.parse().ok())
            .unwrap_or(0)
    };
    CaptureStats {
        captured: num("packets captured"),
        dropped_by_kernel: num("packets dropped by kernel"),
    }
}

/// One IPv4/TCP packet from a capture.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pkt {
    /// Timestamp, ns since the epoch (CLOCK_REALTIME).
    pub t_ns: i64,
    /// Source address.
    pub src: [u8; 4],
    /// Destination address.
    pub dst: [u8; 4],
    /// Source port.
    pub sport: u16,
    /// Destination port.
    pub dport: u16,
    /// Sequence number.
    pub seq: u32,
    /// Acknowledgement number.
    pub ack: u32,
    /// TCP flags.
    pub flags: u8,
    /// Receive window field (unscaled).
    pub win: u16,
    /// Payload length from the IP header (independent of snaplen).
    pub len: u32,
}

impl Pkt {
    /// Whether the SYN flag is set.
    pub fn syn(&self) -> bool {
        self.flags & 0x02 != 0
    }
    /// Whether the FIN flag is set.
    pub fn fin(&self) -> bool {
        self.flags & 0x01 != 0
    }
    /// Whether the RST flag is set.
    pub fn rst(&self) -> bool {
        self.flags & 0x04 != 0
    }
}

/// Reads every IPv4/TCP packet of a classic pcap file (`.gz` is decompressed).
pub fn read_pcap(path: &Path) -> Result<Vec<Pkt>> {
    let raw = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let data = if raw.starts_with(&[0x1f, 0x8b]) {
        let mut v = Vec::new();
        flate2::read::MultiGzDecoder::new(&raw[..]).read_to_end(&mut v)?;
        v
    } else {
        raw
    };
    parse_pcap(&data).with_context(|| format!("parsing {}", path.display()))
}

/// Parses classic pcap bytes (Ethernet, Linux SLL/SLL2 or raw IP link types).
pub fn parse_pcap(d: &[u8]) -> Result<Vec<Pkt>> {
    if d.len() < 24 {
        bail!("not a pcap file (too short)");
    }
    let magic = u32::from_le_bytes([d[0], d[1], d[2], d[3]]);
    let (le, nanos) = match magic {
        0xa1b2_c3d4 => (true, false),
        0xa1b2_3c4d => (true, true),
        0xd4c3_b2a1 => (false, false),
        0x4d3c_b2a1 => (false, true),
        _ => bail!("not a classic pcap file (pcapng is not supported here)"),
    };
    let u32at = |o: usize| {
        let b = [d[o], d[o + 1], d[o + 2], d[o + 3]];
        if le {
            u32::from_le_bytes(b)
        } else {
            u32::from_be_bytes(b)
        }
    };
    let linktype = u32at(20);
    let mut out = Vec::new();
    let mut o = 24;
    while o + 16 <= d.len() {
        let (sec, frac, incl) = (u32at(o) as i64, u32at(o + 4) as i64, u32at(o + 8) as usize);
        let t_ns = sec * 1_000_000_000 + if nanos { frac } else { frac * 1000 };
        let body = &d[o + 16..(o + 16 + incl).min(d.len())];
        o += 16 + incl;
        let ip = match linktype {
            1 if body.len() >= 14 && body[12..14] == [0x08, 0x00] => &body[14..],
            113 if body.len() >= 16 && body[14..16] == [0x08, 0x00] => &body[16..],
            276 if body.len() >= 20 && body[0..2] == [0x08, 0x00] => &body[20..],
            101 | 12 | 228 => body,
            _ => continue,
        };
        if let Some(p) = parse_ip(ip, t_ns) {
            out.push(p);
        }
    }
    Ok(out)
}

fn parse_ip(p: &[u8], t_ns: i64) -> Option<Pkt> {
    if p.len() < 20 || p[0] >> 4 != 4 || p[9] != 6 {
        return None;
    }
    let ihl = usize::from(p[0] & 15) * 4;
    let tot = usize::from(u16::from_be_bytes([p[2], p[3]]));
    let t = p.get(ihl..)?;
    if t.len() < 16 {
        return None;
    }
    let thl = usize::from(t[12] >> 4) * 4;
    let be32 = |b: &[u8]| u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
    Some(Pkt {
        t_ns,
        src: [p[12], p[13], p[14], p[15]],
        dst: [p[16], p[17], p[18], p[19]],
        sport: u16::from_be_bytes([t[0], t[1]]),
        dport: u16::from_be_bytes([t[2], t[3]]),
        seq: be32(&t[4..8]),
        ack: be32(&t[8..12]),
        flags: t[13],
        win: u16::from_be_bytes([t[14], t[15]]),
        len: tot.saturating_sub(ihl + thl) as u32,
    })
}

/// Gzips `path` into `path.gz` (keeps the original).
pub fn gzip_file(path: &Path) -> Result<PathBuf> {
    use std::io::Write;
    let data = std::fs::read(path)?;
    let out = PathBuf::from(format!("{}.gz", path.display()));
    let mut enc =
        flate2::write::GzEncoder::new(std::fs::File::create(&out)?, flate2::Compression::best());
    enc.write_all(&data)?;
    enc.finish()?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tcpdump_summary() {
        let s = "listening on x\n1234 packets captured\n1300 packets received by filter\n7 packets dropped by kernel\n";
        assert_eq!(
            parse_tcpdump_stats(s),
            CaptureStats {
                captured: 1234,
                dropped_by_kernel: 7
            }
        );
    }

    #[test]
    fn pcap_roundtrip_ethernet() {
        let ip = crate::relay::pkt::build_tcp([10, 0, 0, 1], [10, 0, 0, 2], 1, 2, 1000, 100);
        let mut d = vec![];
        d.extend(0xa1b2_c3d4u32.to_le_bytes());
        d.extend([2, 0, 4, 0]);
        d.extend([0u8; 8]);
        d.extend(128u32.to_le_bytes());
        d.extend(1u32.to_le_bytes());
        let frame: Vec<u8> = [vec![0u8; 12], vec![8, 0], ip[..60].to_vec()].concat();
        d.extend(5u32.to_le_bytes());
        d.extend(7u32.to_le_bytes());
        d.extend((frame.len() as u32).to_le_bytes());
        d.extend((frame.len() as u32 + 40).to_le_bytes());
        d.extend(&frame);
        let p = parse_pcap(&d).unwrap();
        assert_eq!(p.len(), 1);
        assert_eq!((p[0].t_ns, p[0].seq, p[0].len), (5_000_007_000, 1000, 100));
    }
}
