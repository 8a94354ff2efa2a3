//! Hostile captures, each generated here (nothing committed): the `tcpdx` binary must give
//! the specified exit code and message, stay under a stated peak memory, and take time
//! linear in the input size.
//!
//! Peak memory is the child's peak RSS: from `/usr/bin/time -f %M` when installed (CI
//! installs it), else from polling `/proc/PID/status` (`VmHWM`, a high-water mark, so a
//! late poll still sees the peak). Caps are stated per test in MB; time bounds compare two
//! input sizes (4x the input may take at most 8x the time, plus slack for a busy machine),
//! which a quadratic algorithm fails.
//!
//! | test | input | cap |
//! |------|-------|-----|
//! | `syn_flood_*` | 1,000,000 SYNs of distinct connections | 100 MB with `--max-flows 10000`; 350 MB with the default 250,000; 400 MB for 300,000 as JSON |
//! | `syn_flood_diagnose_*` | 300,000 SYNs, `diagnose --max-flows 1000` (50,000 listed) | 150 MB |
//! | `many_short_connections_with_findings` | 1,200,000 packets, 18,000 connections of ~67, each losing 4 segments | 170 MB |
//! | `sequence_gap_4gb` | a transfer whose sequence numbers jump by 4 GB - 256 MB, then 2 GB + 1 | 32 MB |
//! | `sack_scoreboard_thousands_of_holes` | 4,000 SACK blocks (every other segment) | 64 MB |
//! | `overlapping_inconsistent_retransmissions` | re-sends at odd offsets, other lengths, other bytes | 32 MB |
//! | `time_going_backwards` | every other frame 1 s earlier | 32 MB |
//! | `duplicate_frames_span_copies` | every frame twice | 32 MB |
//! | `pcapng_block_length_4gb` | EPB and unknown block of total length 0xfffffffc | 32 MB |
//! | `pcapng_huge_block_cut_short` | EPB of 128 MB announced, 1 KB present | 32 MB |
//! | `caplen_larger_than_snaplen` | snaplen 96, records of 1,500 bytes; and 300,000 | 32 MB |
//! | `zero_length_records` | 500,000 records of 0 bytes | 32 MB |
//! | `interface_before_description` | EPB before any IDB; EPB naming interface 5 of 1 | 32 MB |
//! | `nested_vlan_tags_100_deep` | 100 802.1Q tags before IPv4 | 32 MB |

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use tcpdx_testkit::{ACK, FrameSpec, OptionsSpec, PSH, SYN};

const MB: u64 = 1024;

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("tcpdx-hostile-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

/// One run of the binary.
struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
    /// Peak resident set size, KB.
    peak_kb: u64,
    time: Duration,
}

impl Run {
    #[track_caller]
    fn assert_under(&self, what: &str, cap_mb: u64) {
        assert!(
            self.peak_kb > 0 && self.peak_kb <= cap_mb * MB,
            "{what}: peak RSS {} KB, cap {cap_mb} MB",
            self.peak_kb
        );
        eprintln!(
            "{what}: peak RSS {:.1} MB (cap {cap_mb} MB), {:.2} s",
            self.peak_kb as f64 / 1024.0,
            self.time.as_secs_f64()
        );
    }
    #[track_caller]
    fn assert_ok(&self, what: &str) {
        assert_eq!(
            self.code,
            Some(0),
            "{what}: exit code; stderr: {}",
            self.stderr
        );
        assert!(!self.stderr.contains("panicked"), "{what}: {}", self.stderr);
    }
    /// Bad input: exit 2, one line naming the file and the byte.
    #[track_caller]
    fn assert_bad_input(&self, what: &str, path: &Path, message: &str) {
        assert_eq!(
            self.code,
            Some(2),
            "{what}: exit code; stderr: {}",
            self.stderr
        );
        assert_eq!(self.stderr.lines().count(), 1, "{what}: {}", self.stderr);
        let line = self.stderr.trim_end();
        assert!(
            line.starts_with(&format!("tcpdx: {}: byte ", path.display())),
            "{what}: {line}"
        );
        assert!(line.contains(message), "{what}: {line}");
    }
}

/// Runs `tcpdx ARGS`, stdout captured (or discarded), with its peak RSS.
fn run(args: &[&str], keep_stdout: bool) -> Run {
    let exe = env!("CARGO_BIN_EXE_tcpdx");
    let time_bin = Path::new("/usr/bin/time");
    let rss_file = tmp(&format!("rss-{}", rand_suffix()));
    let mut cmd = if time_bin.exists() {
        let mut c = Command::new(time_bin);
        c.args(["-f", "%M", "-o"]).arg(&rss_file).arg(exe);
        c
    } else {
        Command::new(exe)
    };
    cmd.args(args)
        .stdout(if keep_stdout {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stderr(Stdio::piped());
    let start = Instant::now();
    let mut child = cmd.spawn().unwrap();
    // Poll VmHWM meanwhile (the only measure without /usr/bin/time). Stdout and stderr are
    // drained by threads so that a full pipe never blocks the child.
    let pid = child.id();
    let out = child.stdout.take();
    let err = child.stderr.take();
    let out_t = std::thread::spawn(move || read_all(out));
    let err_t = std::thread::spawn(move || read_all(err));
    let mut polled = 0;
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        polled = polled.max(vm_hwm_kb(pid));
        std::thread::sleep(Duration::from_millis(5));
    };
    let time = start.elapsed();
    let peak_kb = std::fs::read_to_string(&rss_file)
        .ok()
        .and_then(|s| s.lines().last().and_then(|l| l.trim().parse().ok()))
        .unwrap_or(polled);
    let _ = std::fs::remove_file(&rss_file);
    let mut stderr = err_t.join().unwrap();
    // /usr/bin/time reports a failing child on stderr.
    stderr = stderr
        .lines()
        .filter(|l| !l.starts_with("Command exited with non-zero status"))
        .map(|l| format!("{l}\n"))
        .collect();
    Run {
        code: status.code(),
        stdout: out_t.join().unwrap(),
        stderr,
        peak_kb,
        time,
    }
}

fn read_all(r: Option<impl std::io::Read>) -> String {
    let mut s = Vec::new();
    if let Some(mut r) = r {
        let _ = r.read_to_end(&mut s);
    }
    String::from_utf8_lossy(&s).into_owned()
}

fn vm_hwm_kb(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
        })
        .unwrap_or(0)
}

fn rand_suffix() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::Relaxed)
}

/// Linear time: the larger input (`factor` times the smaller) takes at most twice
/// proportionally as long, plus 2 s of slack for process start and a busy machine.
#[track_caller]
fn assert_linear(what: &str, small: &Run, large: &Run, factor: u32) {
    let bound = small.time * factor * 2 + Duration::from_secs(2);
    assert!(
        large.time <= bound,
        "{what}: {:?} for {factor}x the input of a {:?} run (bound {bound:?})",
        large.time,
        small.time
    );
}

/// Streams a classic pcap (microseconds, Ethernet unless `link` says otherwise).
struct Pcap {
    w: BufWriter<std::fs::File>,
}

impl Pcap {
    fn create(path: &Path, snaplen: u32, link: u32) -> Self {
        let mut w = BufWriter::with_capacity(1 << 20, std::fs::File::create(path).unwrap());
        w.write_all(&0xa1b2_c3d4u32.to_le_bytes()).unwrap();
        w.write_all(&2u16.to_le_bytes()).unwrap();
        w.write_all(&4u16.to_le_bytes()).unwrap();
        for v in [0u32, 0, snaplen, link] {
            w.write_all(&v.to_le_bytes()).unwrap();
        }
        Self { w }
    }
    /// A record at `ts_us` with `data` captured of `orig_len` on the wire.
    fn record(&mut self, ts_us: u64, data: &[u8], orig_len: u32) {
        let h = [
            (ts_us / 1_000_000) as u32,
            (ts_us % 1_000_000) as u32,
            data.len() as u32,
            orig_len,
        ];
        for v in h {
            self.w.write_all(&v.to_le_bytes()).unwrap();
        }
        self.w.write_all(data).unwrap();
    }
    fn frame(&mut self, ts_us: u64, spec: &FrameSpec) {
        let b = spec.build();
        let n = b.len() as u32;
        self.record(ts_us, &b, n);
    }
    fn finish(mut self) {
        self.w.flush().unwrap();
    }
}

/// `n` SYNs from distinct clients (10.x.y.z:port) to one server.
fn syn_flood(path: &Path, n: u32) {
    let template = FrameSpec {
        flags: SYN,
        dst_port: 80,
        ..FrameSpec::TEMPL
    }
    .build();
    let mut p = Pcap::create(path, 65535, 1);
    let mut f = template.clone();
    for i in 0..n {
        // Source address bytes 26..30 and port 34..36 (Ethernet + IPv4 without options);
        // checksums are not verified.
        let ip = 0x0a00_0000 | (i >> 4);
        f[26..30].copy_from_slice(&ip.to_be_bytes());
        f[34..36].copy_from_slice(&(1024 + (i & 15) as u16).to_be_bytes());
        f[38..42].copy_from_slice(&i.to_be_bytes());
        p.record(u64::from(i), &f, f.len() as u32);
    }
    p.finish();
}

#[test]
fn syn_flood_a_million_connections_with_max_flows() {
    let small = tmp("syn-250k.pcap");
    let large = tmp("syn-1m.pcap");
    syn_flood(&small, 250_000);
    syn_flood(&large, 1_000_000);
    let args = |p: &Path| {
        vec![
            "flows".to_string(),
            "--max-flows".into(),
            "10000".into(),
            p.to_str().unwrap().into(),
        ]
    };
    let a: Vec<String> = args(&small);
    let s = run(&a.iter().map(String::as_str).collect::<Vec<_>>(), true);
    let a: Vec<String> = args(&large);
    let l = run(&a.iter().map(String::as_str).collect::<Vec<_>>(), true);
    l.assert_ok("syn flood");
    l.assert_under("syn flood 1M, --max-flows 10000", 100);
    assert_linear("syn flood", &s, &l, 4);
    // The table lists the 10,000 connections tracked at the end, and counts the rest.
    let rows = l.stdout.lines().filter(|r| r.contains("->")).count();
    assert_eq!(rows, 10_000, "one row per tracked connection");
    assert!(
        l.stdout.contains(
            "evicted: 990000 connections (990000 packets, 0 B) not listed: more than 10000"
        ),
        "evicted line: {}",
        l.stdout.lines().last().unwrap_or("")
    );
    assert!(
        l.stderr
            .contains("warning: 990000 connections evicted: more than --max-flows 10000"),
        "{}",
        l.stderr
    );
    // Stream numbers keep counting across evictions (Wireshark's tcp.stream).
    assert!(
        l.stdout.contains("999999  "),
        "last stream number is 999999"
    );
    let _ = std::fs::remove_file(small);
    let _ = std::fs::remove_file(large);
}

#[test]
fn syn_flood_a_million_connections_with_default_flags() {
    let p = tmp("syn-1m-default.pcap");
    syn_flood(&p, 1_000_000);
    let r = run(&["flows", p.to_str().unwrap()], false);
    r.assert_ok("syn flood 1M, default flags");
    // 250,000 connections tracked at once (the default --max-flows), each of one SYN: no
    // data, so no data counters, and one unacknowledged segment.
    r.assert_under("syn flood 1M, default flags", 350);
    assert!(
        r.stderr
            .contains("warning: 750000 connections evicted: more than --max-flows 250000"),
        "{}",
        r.stderr
    );
    let _ = std::fs::remove_file(p);
}

#[test]
fn syn_flood_json_counts_and_default_cap() {
    // A name of its own: tests run in parallel, and one removing a shared file made the
    // other fail (seen once in CI).
    let p = tmp("syn-300k-json.pcap");
    syn_flood(&p, 300_000);
    let r = run(&["flows", "--json", p.to_str().unwrap()], true);
    r.assert_ok("syn flood json");
    // Default --max-flows (250,000): the rest is evicted.
    r.assert_under("syn flood 300k, default --max-flows", 400);
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v["flows"].as_array().unwrap().len(), 250_000);
    assert_eq!(v["evicted"]["connections"], 50_000);
    assert_eq!(v["evicted"]["packets"], 50_000);
    assert_eq!(v["evicted"]["max_flows"], 250_000);
    let _ = std::fs::remove_file(p);
}

#[test]
fn syn_flood_diagnose_frees_evicted_connections() {
    let p = tmp("syn-300k-diagnose.pcap");
    syn_flood(&p, 300_000);
    let r = run(
        &["diagnose", "--max-flows", "1000", p.to_str().unwrap()],
        true,
    );
    r.assert_ok("syn flood diagnose");
    // The diagnosis engine finalises evicted connections at once (5 KB of inference state
    // each otherwise: 1,000,000 SYNs took 5.2 GB before), and lists at most the 50,000
    // costliest connections (about 0.6 KB each), counting the rest.
    r.assert_under("syn flood 300k, diagnose --max-flows 1000", 150);
    assert!(
        r.stderr.contains("299000 connections evicted"),
        "{}",
        r.stderr
    );
    assert!(
        r.stdout
            .contains("250000 more connection(s) not listed (only the 50000 costliest are kept"),
        "{}",
        r.stdout
    );
    let _ = std::fs::remove_file(p);
}

#[test]
fn many_short_connections_with_findings() {
    // Each connection loses four segments, each repaired by fast retransmission: a
    // network-loss finding with its episodes and evidence. 18,000 of them overflow the
    // listing's 32 MiB, so the least costly are counted instead of listed.
    let p = tmp("many-short.pcap");
    let f = std::fs::File::create(&p).expect("create capture");
    let cfg = tcpdx_testkit::bulk::BulkConfig {
        packets: 1_200_000,
        concurrent: 2000,
        per_conn: 40,
        loss_every: 10,
        ..Default::default()
    };
    tcpdx_testkit::bulk::write_bulk(BufWriter::new(f), cfg).expect("write capture");
    for threads in ["1", "2"] {
        let r = run(
            &["diagnose", "--threads", threads, p.to_str().unwrap()],
            true,
        );
        r.assert_ok("many short connections");
        r.assert_under(&format!("many short connections, {threads} thread(s)"), 170);
        let line = r
            .stdout
            .lines()
            .find(|l| l.contains("more connection(s) not listed"))
            .unwrap_or_else(|| panic!("no fold line in {}", r.stdout.len()));
        let listed: u64 = line
            .split("only the ")
            .nth(1)
            .and_then(|t| t.split(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{line}"));
        let unlisted: u64 = line.split(' ').next().unwrap().parse().unwrap();
        // 1.2M frames of this pattern hold 18,000 connections (60-odd frames each).
        assert_eq!(listed + unlisted, 18_000, "{line}");
        assert!((10_000..18_000).contains(&listed), "{line}");
    }
    let _ = std::fs::remove_file(p);
}

/// Handshake, then `n` data segments of 1000 bytes, each ACKed; frame builder.
fn transfer_frames(n: u32, isn: u32) -> Vec<FrameSpec> {
    let c = FrameSpec::TEMPL;
    let s = FrameSpec {
        src: c.dst,
        dst: c.src,
        src_port: c.dst_port,
        dst_port: c.src_port,
        ..FrameSpec::TEMPL
    };
    let mut v = vec![
        FrameSpec {
            seq: isn,
            flags: SYN,
            options: OptionsSpec {
                sack_perm: true,
                ..OptionsSpec::NONE
            },
            ..c.clone()
        },
        FrameSpec {
            seq: 9000,
            ack: isn + 1,
            flags: SYN | ACK,
            options: OptionsSpec {
                sack_perm: true,
                ..OptionsSpec::NONE
            },
            ..s.clone()
        },
        FrameSpec {
            seq: isn + 1,
            ack: 9001,
            ..c.clone()
        },
    ];
    for i in 0..n {
        let seq = isn.wrapping_add(1 + i * 1000);
        v.push(FrameSpec {
            seq,
            ack: 9001,
            flags: ACK | PSH,
            payload_len: 1000,
            snaplen: Some(96),
            ..c.clone()
        });
        v.push(FrameSpec {
            seq: 9001,
            ack: seq.wrapping_add(1000),
            ..s.clone()
        });
    }
    v
}

fn write_frames(path: &Path, frames: &[FrameSpec], ts_us: impl Fn(usize) -> u64) {
    let mut p = Pcap::create(path, 96, 1);
    for (i, f) in frames.iter().enumerate() {
        let b = f.build();
        let cap = b.len().min(f.snaplen.map_or(usize::MAX, |s| s as usize));
        p.record(ts_us(i), &b[..cap], b.len() as u32);
    }
    p.finish();
}

/// Events CSV rows as column maps (header names).
fn events(stdout: &str) -> Vec<std::collections::HashMap<String, String>> {
    let mut lines = stdout.lines();
    let head: Vec<String> = lines
        .next()
        .unwrap_or("")
        .split(',')
        .map(str::to_string)
        .collect();
    lines
        .map(|l| {
            head.iter()
                .cloned()
                .zip(l.split(',').map(str::to_string))
                .collect()
        })
        .collect()
}

#[test]
fn sequence_gap_4gb() {
    let mut frames = transfer_frames(50, 1000);
    // The sender jumps 4 GB - 256 MB ahead (256 MB behind, modulo 2^32), then exactly
    // 2 GB + 1 ahead of that (ambiguous: Wireshark's macros say both before and after).
    let c = frames[3].clone();
    let base = 1000u32 + 1 + 50 * 1000;
    for (k, jump) in [
        (0u32, 0xF000_0000u32),
        (1, 0xF000_0000u32.wrapping_add(0x8000_0001)),
    ] {
        for i in 0..20u32 {
            frames.push(FrameSpec {
                seq: base.wrapping_add(jump).wrapping_add(i * 1000 + k),
                ..c.clone()
            });
        }
    }
    let p = tmp("gap4g.pcap");
    write_frames(&p, &frames, |i| 1_000_000 + i as u64 * 1000);
    let r = run(&["events", p.to_str().unwrap()], true);
    r.assert_ok("4 GB gap");
    r.assert_under("4 GB gap", 32);
    let rows = events(&r.stdout);
    assert_eq!(rows.len(), frames.len(), "one row per segment");
    for row in &rows {
        if let Some(b) = row.get("bytes_in_flight").filter(|b| !b.is_empty()) {
            let b: u64 = b.parse().unwrap();
            assert!(
                b <= 51_000,
                "bytes in flight {b} beyond what was sent in a window"
            );
        }
    }
    // The jump is a 256 MB step back: flagged, not taken as 4 GB of new data.
    let flows = run(&["flows", "--json", p.to_str().unwrap()], true);
    let v: serde_json::Value = serde_json::from_str(&flows.stdout).unwrap();
    let unique = v["flows"][0]["directions"][0]["unique_bytes"]
        .as_u64()
        .unwrap();
    assert!(unique < 1 << 32, "unique bytes {unique}");
}

#[test]
fn sack_scoreboard_thousands_of_holes() {
    let mk = |n: u32| {
        let c = FrameSpec::TEMPL;
        let mut frames = transfer_frames(0, 1000);
        let s = frames[1].clone();
        // n data segments; the receiver SACKs every other one (n/2 holes), never ACKing
        // past the first hole; its SACK option lists the 4 most recent blocks.
        let mut blocks: Vec<(u32, u32)> = Vec::new();
        for i in 0..n {
            let seq = 1001 + i * 1000;
            frames.push(FrameSpec {
                seq,
                ack: 9001,
                flags: ACK | PSH,
                payload_len: 1000,
                snaplen: Some(96),
                ..c.clone()
            });
            if i % 2 == 1 {
                blocks.push((seq, seq + 1000));
                let recent: Vec<(u32, u32)> = blocks.iter().rev().take(4).copied().collect();
                frames.push(FrameSpec {
                    seq: 9001,
                    ack: 1001,
                    flags: ACK,
                    options: OptionsSpec {
                        sack: recent,
                        ..OptionsSpec::NONE
                    },
                    ..s.clone()
                });
            }
        }
        frames
    };
    let small = tmp("sack-2k.pcap");
    let large = tmp("sack-8k.pcap");
    write_frames(&small, &mk(2_000), |i| 1_000_000 + i as u64 * 100);
    write_frames(&large, &mk(8_000), |i| 1_000_000 + i as u64 * 100);
    for cmd in ["events", "diagnose"] {
        let s = run(&[cmd, small.to_str().unwrap()], false);
        let l = run(&[cmd, large.to_str().unwrap()], false);
        l.assert_ok(cmd);
        l.assert_under(&format!("SACK 4000 holes, {cmd}"), 64);
        assert_linear(cmd, &s, &l, 4);
    }
}

#[test]
fn overlapping_inconsistent_retransmissions() {
    let mut frames = transfer_frames(40, 1000);
    let c = frames[3].clone();
    // Re-sends at odd offsets and lengths, overlapping two originals, with other bytes.
    for (off, len) in [
        (500u32, 1000u32),
        (1, 2999),
        (10_250, 17),
        (0, 40_000),
        (39_990, 20),
    ] {
        frames.push(FrameSpec {
            seq: 1001 + off,
            payload_len: len,
            payload: tcpdx_testkit::Payload::Zeros,
            ..c.clone()
        });
    }
    let p = tmp("overlap.pcap");
    write_frames(&p, &frames, |i| 1_000_000 + i as u64 * 10_000);
    let r = run(&["events", p.to_str().unwrap()], true);
    r.assert_ok("overlapping retransmissions");
    r.assert_under("overlapping retransmissions", 32);
    let rows = events(&r.stdout);
    let resent = rows
        .iter()
        .rev()
        .take(5)
        .filter(|r| r["flags"].contains("retransmission"))
        .count();
    assert_eq!(resent, 5, "every re-send is flagged");
    let f = run(&["flows", "--json", p.to_str().unwrap()], true);
    let v: serde_json::Value = serde_json::from_str(&f.stdout).unwrap();
    let d = &v["flows"][0]["directions"][0];
    assert_eq!(
        d["unique_bytes"], 40_010,
        "re-sends add only the 10 new bytes"
    );
    assert_eq!(d["retrans_bytes"], 1000 + 2999 + 17 + 40_000 + 20);
}

#[test]
fn time_going_backwards() {
    let frames = transfer_frames(200, 1000);
    let p = tmp("backwards.pcap");
    // Every other frame one second earlier than the previous one.
    write_frames(&p, &frames, |i| {
        10_000_000 + i as u64 * 1000 - if i % 2 == 1 { 1_000_000 } else { 0 }
    });
    let r = run(&["flows", "--json", p.to_str().unwrap()], true);
    r.assert_ok("time backwards");
    r.assert_under("time backwards", 32);
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    let f = &v["flows"][0];
    assert!(
        f["duration_s"].as_f64().unwrap() >= 0.0,
        "duration {}",
        f["duration_s"]
    );
    for d in f["directions"].as_array().unwrap() {
        assert!(d["duration_s"].as_f64().unwrap() >= 0.0, "{d}");
        if let Some(min) = d["rtt_min_s"].as_f64() {
            assert!(min > 0.0, "RTT samples are positive (Karn + sanity): {d}");
        }
    }
    let e = run(&["events", p.to_str().unwrap()], false);
    e.assert_ok("time backwards events");
    let d = run(&["diagnose", p.to_str().unwrap()], false);
    d.assert_ok("time backwards diagnose");
}

#[test]
fn duplicate_frames_span_copies() {
    let frames: Vec<FrameSpec> = transfer_frames(500, 1000)
        .into_iter()
        .flat_map(|f| [f.clone(), f])
        .collect();
    let p = tmp("dups.pcap");
    write_frames(&p, &frames, |i| {
        1_000_000 + (i as u64 / 2) * 1000 + (i as u64 % 2)
    });
    let r = run(&["flows", "--json", p.to_str().unwrap()], true);
    r.assert_ok("duplicates");
    r.assert_under("duplicate frames", 32);
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    let d = &v["flows"][0]["directions"][0];
    // As in Wireshark, the second copy of a data segment (and of the SYN) is a retransmission.
    assert_eq!(d["retrans_packets"], 501);
    assert_eq!(d["unique_bytes"], 500_000);
    let e = run(&["diagnose", p.to_str().unwrap()], false);
    e.assert_ok("duplicates diagnose");
}

/// A pcapng section header block (little-endian) and, if `idb`, one Ethernet IDB.
fn pcapng_head(idb: bool) -> Vec<u8> {
    let mut v = Vec::new();
    let mut put = |x: u32| v.extend_from_slice(&x.to_le_bytes());
    put(0x0A0D_0D0A);
    put(28);
    put(0x1A2B_3C4D);
    put(1); // version 1.0
    put(0xffff_ffff);
    put(0xffff_ffff); // section length -1
    put(28);
    if idb {
        for x in [1u32, 20, 1, 0, 20] {
            put(x);
        }
    }
    v
}

/// An EPB with `data` on `interface`.
fn epb(interface: u32, data: &[u8]) -> Vec<u8> {
    let pad = (4 - data.len() % 4) % 4;
    let total = (32 + data.len() + pad) as u32;
    let mut v = Vec::new();
    for x in [
        6,
        total,
        interface,
        0,
        0,
        data.len() as u32,
        data.len() as u32,
    ] {
        v.extend_from_slice(&x.to_le_bytes());
    }
    v.extend_from_slice(data);
    v.extend(std::iter::repeat_n(0, pad));
    v.extend_from_slice(&total.to_le_bytes());
    v
}

#[test]
fn pcapng_block_length_4gb() {
    let frame = FrameSpec::TEMPL.build();
    for (name, block_type) in [("epb", 6u32), ("unknown", 0x0000_1234)] {
        let mut f = pcapng_head(true);
        f.extend(epb(0, &frame));
        let offset = f.len();
        f.extend_from_slice(&block_type.to_le_bytes());
        f.extend_from_slice(&0xffff_fffcu32.to_le_bytes());
        f.extend(std::iter::repeat_n(0xab, 64));
        let p = tmp(&format!("len4g-{name}.pcapng"));
        std::fs::write(&p, &f).unwrap();
        let r = run(&["events", p.to_str().unwrap()], true);
        r.assert_bad_input(name, &p, &format!("byte {offset}: pcapng block"));
        assert!(
            r.stderr
                .contains("bad total length 4294967292: more than 134348832"),
            "{}",
            r.stderr
        );
        r.assert_under("pcapng 4 GB block", 32);
    }
}

#[test]
fn pcapng_huge_block_cut_short() {
    let mut f = pcapng_head(true);
    let offset = f.len();
    let total = 128u32 << 20;
    for x in [6u32, total, 0, 0, 0, total - 32, total - 32] {
        f.extend_from_slice(&x.to_le_bytes());
    }
    f.extend(std::iter::repeat_n(0, 1024));
    let p = tmp("cut128m.pcapng");
    std::fs::write(&p, &f).unwrap();
    let r = run(&["events", p.to_str().unwrap()], true);
    r.assert_ok("cut huge block");
    assert!(
        r.stderr
            .contains(&format!("record cut off at byte {offset} (frame 1)")),
        "{}",
        r.stderr
    );
    r.assert_under("pcapng 128 MB block announced, 1 KB present", 32);
}

#[test]
fn caplen_larger_than_snaplen() {
    let p = tmp("caplen.pcap");
    let mut w = Pcap::create(&p, 96, 1);
    for (i, f) in transfer_frames(20, 1000).iter().enumerate() {
        w.frame(i as u64 * 1000, f);
    }
    w.finish();
    let r = run(&["events", p.to_str().unwrap()], true);
    // Accepted like Wireshark does (snaplen is advice); every segment analysed.
    r.assert_ok("caplen > snaplen");
    assert_eq!(events(&r.stdout).len(), 43);
    r.assert_under("caplen > snaplen", 32);
    // Above the largest packet of any Ethernet capture: corrupt, exit 2.
    let p2 = tmp("caplen-absurd.pcap");
    let mut w = Pcap::create(&p2, 96, 1);
    w.record(0, &FrameSpec::TEMPL.build(), 54);
    w.record(1, &vec![0; 300_000], 300_000);
    w.finish();
    let r = run(&["events", p2.to_str().unwrap()], true);
    r.assert_bad_input(
        "absurd caplen",
        &p2,
        "byte 94: record has captured length 300000, more than the maximum of 262144",
    );
    r.assert_under("absurd caplen", 32);
}

#[test]
fn zero_length_records() {
    let mk = |path: &Path, n: u32| {
        let mut w = Pcap::create(path, 96, 1);
        for i in 0..n {
            w.record(u64::from(i), &[], 0);
        }
        w.finish();
    };
    let small = tmp("zero-125k.pcap");
    let large = tmp("zero-500k.pcap");
    mk(&small, 125_000);
    mk(&large, 500_000);
    let s = run(&["flows", small.to_str().unwrap()], true);
    let l = run(&["flows", large.to_str().unwrap()], true);
    l.assert_ok("zero-length records");
    assert_eq!(l.stdout.lines().count(), 1, "no connection: {}", l.stdout);
    l.assert_under("500,000 zero-length records", 32);
    assert_linear("zero-length records", &s, &l, 4);
    // pcapng: an EPB of 0 bytes is a frame too.
    let mut f = pcapng_head(true);
    f.extend(epb(0, &[]));
    f.extend(epb(0, &FrameSpec::TEMPL.build()));
    let p = tmp("zero.pcapng");
    std::fs::write(&p, &f).unwrap();
    let r = run(&["events", p.to_str().unwrap()], true);
    r.assert_ok("zero-length EPB");
    assert_eq!(
        events(&r.stdout)[0]["frame"],
        "2",
        "frame numbers count the empty one"
    );
}

#[test]
fn interface_before_description() {
    let frame = FrameSpec::TEMPL.build();
    let mut f = pcapng_head(false);
    let offset = f.len();
    f.extend(epb(0, &frame));
    f.extend_from_slice(&pcapng_head(true)[28..]);
    let p = tmp("no-idb.pcapng");
    std::fs::write(&p, &f).unwrap();
    let r = run(&["events", p.to_str().unwrap()], true);
    r.assert_bad_input(
        "EPB before IDB",
        &p,
        &format!(
            "byte {offset}: pcapng packet block names interface 0 but its section describes 0 interface(s)"
        ),
    );
    r.assert_under("interface before description", 32);
    let mut f = pcapng_head(true);
    f.extend(epb(0, &frame));
    let offset = f.len();
    f.extend(epb(5, &frame));
    let p = tmp("idb5.pcapng");
    std::fs::write(&p, &f).unwrap();
    let r = run(&["events", p.to_str().unwrap()], true);
    r.assert_bad_input("interface 5 of 1", &p, &format!("byte {offset}: pcapng packet block names interface 5 but its section describes 1 interface(s)"));
}

#[test]
fn nested_vlan_tags_100_deep() {
    let plain = FrameSpec {
        flags: SYN,
        ..FrameSpec::TEMPL
    }
    .build();
    let tagged = |depth: usize| {
        let mut f = plain[..12].to_vec();
        for i in 0..depth {
            f.extend_from_slice(&0x8100u16.to_be_bytes());
            f.extend_from_slice(&(i as u16 & 0x0fff).to_be_bytes());
        }
        f.extend_from_slice(&plain[12..]);
        f
    };
    let p = tmp("vlan100.pcap");
    let mut w = Pcap::create(&p, 65535, 1);
    let deep = tagged(100);
    let ok = tagged(10);
    w.record(0, &deep, deep.len() as u32);
    w.record(1, &ok, ok.len() as u32);
    w.finish();
    let r = run(&["events", p.to_str().unwrap()], true);
    r.assert_ok("100 VLAN tags");
    r.assert_under("100 nested VLAN tags", 32);
    let rows = events(&r.stdout);
    // The 100-deep frame is beyond the decoder's 64 layers: not analysed, not a crash; the
    // 10-deep one is.
    assert_eq!(rows.len(), 1, "{}", r.stdout);
    assert_eq!(rows[0]["frame"], "2");
}
