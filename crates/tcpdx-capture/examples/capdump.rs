//! Prints one line per frame: number, epoch time (s.ns), interface, link type, captured and
//! original length; then the warnings. `capdump FILE|-` (e.g. `tcpdump -w - | capdump -`).
//! `capdump --count FILE` prints only the frame count and the time taken (a read benchmark).
//! `capdump --walk FILE` also reads each frame's Ethernet, IPv4/IPv6 and TCP headers and
//! nothing else: the floor the benchmark suite compares every analysis with. A regular
//! uncompressed file is read mapped into memory (the fastest way; as `tcpdx` reads it).

use std::io::{BufWriter, Write};
use std::path::Path;
use std::process::ExitCode;

use tcpdx_capture::CaptureReader;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (count_only, walk, path) = match args.as_slice() {
        [flag, path] if flag == "--count" => (true, false, path),
        [flag, path] if flag == "--walk" => (true, true, path),
        [path] => (false, false, path),
        _ => {
            eprintln!("usage: capdump [--count|--walk] FILE|-");
            return ExitCode::from(2);
        }
    };
    let start = std::time::Instant::now();
    // Mapped where the file allows it: the fastest way to read it (the walk is the floor).
    let mut reader = match CaptureReader::open_mapped(Path::new(path), false) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let out = std::io::stdout();
    let mut out = BufWriter::new(out.lock());
    let mut frames = 0u64;
    let mut bytes = 0u64;
    let mut tcp_sum = 0u64;
    let result = loop {
        match reader.next_frame() {
            Ok(Some(f)) => {
                frames += 1;
                bytes += f.data.len() as u64;
                if walk {
                    tcp_sum = tcp_sum.wrapping_add(tcp_header_sum(f.data));
                }
                if !count_only {
                    let ts = f.ts.nanos();
                    let _ = writeln!(
                        out,
                        "{}\t{}.{:09}\t{}\t{}\t{}\t{}",
                        f.no,
                        ts.div_euclid(1_000_000_000),
                        ts.rem_euclid(1_000_000_000),
                        f.interface,
                        f.link.0,
                        f.data.len(),
                        f.orig_len
                    );
                }
            }
            Ok(None) => break Ok(()),
            Err(e) => break Err(e),
        }
    };
    if count_only {
        let secs = start.elapsed().as_secs_f64();
        let _ = writeln!(
            out,
            "{frames} frames, {bytes} captured bytes, {} input bytes, {secs:.3} s ({:.0} frames/s); {}{}",
            reader.input_bytes_read(),
            frames as f64 / secs,
            reader.format(),
            if walk {
                format!("; TCP header sum {tcp_sum}")
            } else {
                String::new()
            }
        );
    }
    let _ = out.flush();
    for w in reader.warnings() {
        eprintln!("warning: {w}");
    }
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

/// Ports, sequence and acknowledgement numbers of an Ethernet/IP/TCP frame, summed (so the
/// walk cannot be optimised away); 0 for anything else. Deliberately minimal: no VLANs, no
/// tunnels, no options, which is what makes it a floor.
fn tcp_header_sum(d: &[u8]) -> u64 {
    let be16 = |o: usize| {
        d.get(o..o + 2)
            .map_or(0, |b| u64::from(u16::from_be_bytes([b[0], b[1]])))
    };
    let be32 = |o: usize| {
        d.get(o..o + 4).map_or(0, |b| {
            u64::from(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
        })
    };
    let (proto, tcp) = match be16(12) {
        0x0800 => {
            let ihl = usize::from(d.get(14).map_or(0, |b| b & 0x0f)) * 4;
            (d.get(23).copied(), 14 + ihl)
        }
        0x86dd => (d.get(20).copied(), 54),
        _ => return 0,
    };
    if proto != Some(6) {
        return 0;
    }
    be16(tcp) + be16(tcp + 2) + be32(tcp + 4) + be32(tcp + 8)
}
