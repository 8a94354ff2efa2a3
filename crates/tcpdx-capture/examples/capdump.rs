//! Prints one line per frame: number, epoch time (s.ns), interface, link type, captured and
//! original length; then the warnings. `capdump FILE|-` (e.g. `tcpdump -w - | capdump -`).
//! `capdump --count FILE` prints only the frame count and the time taken (a read benchmark).

use std::io::{BufWriter, Write};
use std::path::Path;
use std::process::ExitCode;

use tcpdx_capture::CaptureReader;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (count_only, path) = match args.as_slice() {
        [flag, path] if flag == "--count" => (true, path),
        [path] => (false, path),
        _ => {
            eprintln!("usage: capdump [--count] FILE|-");
            return ExitCode::from(2);
        }
    };
    let start = std::time::Instant::now();
    let mut reader = match CaptureReader::open(Path::new(path)) {
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
    let result = loop {
        match reader.next_frame() {
            Ok(Some(f)) => {
                frames += 1;
                bytes += f.data.len() as u64;
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
            "{frames} frames, {bytes} captured bytes, {} input bytes, {secs:.3} s ({:.0} frames/s); {}",
            reader.input_bytes_read(),
            frames as f64 / secs,
            reader.format()
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
