//! The `tcpdx` binary as a user meets it: bad input, stdin, compression, exit codes.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use tcpdx_testkit::Script;

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("tcpdx-cli-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tcpdx"))
        .args(args)
        .output()
        .unwrap()
}

fn pcap_bytes() -> Vec<u8> {
    let mut t = Script::new();
    t.handshake();
    t.at_ms(20).server_burst(1, 3, 1000);
    t.at_ms(30).client_acks(3001);
    let mut v = Vec::new();
    tcpdx_testkit::write_pcap(&mut v, &t.frames(), false).unwrap();
    v
}

/// Bad input: exit code 2, exactly one line on stderr naming the file and a byte offset.
#[track_caller]
fn assert_bad_input(path: &Path, what: &str) {
    let out = run(&["events", path.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(2),
        "{what}: exit code; stderr: {err}"
    );
    assert_eq!(
        err.lines().count(),
        1,
        "{what}: one line expected, got: {err}"
    );
    assert!(
        err.contains(path.to_str().unwrap()),
        "{what}: names the file: {err}"
    );
    assert!(err.contains("byte"), "{what}: names the offset: {err}");
    assert!(!err.contains("panicked"), "{what}: {err}");
    // A capture bad from its first record leaves at most the CSV header on stdout.
    assert!(
        out.stdout
            .split(|&b| b == b'\n')
            .filter(|l| !l.is_empty())
            .count()
            <= 1,
        "{what}: no rows"
    );
}

#[test]
fn empty_file_is_bad_input() {
    let p = tmp("empty.pcap");
    std::fs::write(&p, b"").unwrap();
    assert_bad_input(&p, "empty");
}

#[test]
fn text_file_is_bad_input() {
    let p = tmp("notes.txt");
    std::fs::write(&p, b"this is not a capture, just some notes\n").unwrap();
    assert_bad_input(&p, "text");
}

#[test]
fn random_bytes_are_bad_input() {
    let p = tmp("random.bin");
    let mut x: u64 = 0x1234_5678_9abc_def0;
    let bytes: Vec<u8> = (0..4096)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    std::fs::write(&p, bytes).unwrap();
    assert_bad_input(&p, "random");
}

#[test]
fn absurd_caplen_is_bad_input() {
    let mut v = pcap_bytes();
    // First record header starts at 24; caplen at +8.
    v[32..36].copy_from_slice(&0x4000_0000u32.to_le_bytes());
    let p = tmp("caplen.pcap");
    std::fs::write(&p, v).unwrap();
    assert_bad_input(&p, "absurd caplen");
}

#[test]
fn bad_pcapng_block_length_is_bad_input() {
    let mut t = Script::new();
    t.handshake();
    let mut v = Vec::new();
    tcpdx_testkit::write_pcapng(&mut v, &t.frames()).unwrap();
    // The SHB's block length is at offset 4: make it not a multiple of 4.
    v[4..8].copy_from_slice(&27u32.to_le_bytes());
    let p = tmp("badblock.pcapng");
    std::fs::write(&p, v).unwrap();
    assert_bad_input(&p, "bad block length");
}

#[test]
fn missing_file_is_an_error_with_exit_2() {
    let out = run(&["flows", "/nonexistent/capture.pcap"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("/nonexistent/capture.pcap"));
    // One line, the reason said once.
    assert_eq!(err.lines().count(), 1, "{err}");
    assert_eq!(err.matches("os error").count(), 1, "{err}");
}

#[test]
fn cut_off_record_is_analysed_up_to_the_cut_with_a_warning() {
    let full = pcap_bytes();
    let cut = &full[..full.len() - 10];
    let p = tmp("cut.pcap");
    std::fs::write(&p, cut).unwrap();
    let out = run(&["events", p.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let rows = String::from_utf8_lossy(&out.stdout).lines().count() - 1;
    assert_eq!(rows, 6, "the 6 complete frames are analysed");
    assert!(
        err.contains("warning") && err.contains("byte"),
        "warning names the offset: {err}"
    );
}

#[test]
fn stdin_gzip_and_zstd_give_the_same_events() {
    let raw = pcap_bytes();
    let p = tmp("plain.pcap");
    std::fs::write(&p, &raw).unwrap();
    let plain = run(&["events", p.to_str().unwrap()]);
    assert!(plain.status.success());

    let mut child = Command::new(env!("CARGO_BIN_EXE_tcpdx"))
        .args(["events", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(&raw).unwrap();
    let from_stdin = child.wait_with_output().unwrap();
    assert_eq!(from_stdin.stdout, plain.stdout, "stdin");

    let gz = tmp("plain.pcap.gz");
    let mut e = flate2::write::GzEncoder::new(
        std::fs::File::create(&gz).unwrap(),
        flate2::Compression::default(),
    );
    e.write_all(&raw).unwrap();
    e.finish().unwrap();
    assert_eq!(
        run(&["events", gz.to_str().unwrap()]).stdout,
        plain.stdout,
        "gzip"
    );

    let zs = tmp("plain.pcap.zst");
    std::fs::write(&zs, zstd::encode_all(&raw[..], 3).unwrap()).unwrap();
    assert_eq!(
        run(&["events", zs.to_str().unwrap()]).stdout,
        plain.stdout,
        "zstd"
    );
}

/// A named pipe given by path (`tcpdx events <(tcpdump -w - ...)`) is read whole, whatever
/// the thread count: it is never mapped, nor opened beforehand to choose how to read it
/// (that took its first bytes).
#[test]
fn a_named_pipe_reads_as_its_file() {
    let raw = pcap_bytes();
    let p = tmp("fifo-plain.pcap");
    std::fs::write(&p, &raw).unwrap();
    let plain = run(&["events", p.to_str().unwrap()]);
    assert!(plain.status.success());
    for threads in ["1", "2"] {
        let fifo = tmp(&format!("fifo-{threads}"));
        let _ = std::fs::remove_file(&fifo);
        let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
        assert!(made.success(), "mkfifo");
        let writer = {
            let (fifo, raw) = (fifo.clone(), raw.clone());
            std::thread::spawn(move || std::fs::write(fifo, raw))
        };
        let mut child = Command::new(env!("CARGO_BIN_EXE_tcpdx"))
            .args(["events", "--threads", threads, fifo.to_str().unwrap()])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // A pipe whose first bytes were taken leaves the reader waiting for more: a hang,
        // failed here rather than left to CI's time limit.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while child.try_wait().unwrap().is_none() {
            if std::time::Instant::now() > deadline {
                child.kill().unwrap();
                panic!("--threads {threads}: still reading the named pipe after 60 s");
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let out = child.wait_with_output().unwrap();
        writer.join().unwrap().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "--threads {threads}: {err}");
        assert_eq!(out.stdout, plain.stdout, "--threads {threads}");
        std::fs::remove_file(&fifo).unwrap();
    }
}

#[test]
fn jsonl_and_flows_json_are_valid_json() {
    let p = tmp("j.pcap");
    std::fs::write(&p, pcap_bytes()).unwrap();
    let out = run(&["events", "--format", "jsonl", p.to_str().unwrap()]);
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        assert!(v["frame"].is_u64());
    }
    let out = run(&["flows", "--json", p.to_str().unwrap()]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["version"], 1);
    assert_eq!(v["flows"][0]["directions"][1]["unique_bytes"], 3000);
}

#[test]
fn closed_pipe_is_not_an_error() {
    // Every output format: the JSON writers once turned the broken pipe into another error.
    // The outputs must outgrow the output buffer (an error on its flush when dropped is
    // never seen): 20,000 packets of 500 connections, each losing a segment in ten.
    let p = tmp("pipe.pcap");
    let cfg = tcpdx_testkit::bulk::BulkConfig {
        packets: 20_000,
        concurrent: 2000,
        per_conn: 40,
        loss_every: 10,
        ..tcpdx_testkit::bulk::BulkConfig::default()
    };
    let f = std::fs::File::create(&p).unwrap();
    tcpdx_testkit::bulk::write_bulk(std::io::BufWriter::new(f), cfg).unwrap();
    let runs: [&[&str]; 6] = [
        &["events"],
        &["events", "--format", "jsonl"],
        &["flows", "--json"],
        &["diagnose"],
        &["diagnose", "--json"],
        &["srt", "--json"],
    ];
    for args in runs {
        let mut child = Command::new(env!("CARGO_BIN_EXE_tcpdx"))
            .args(args)
            .arg(&p)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stdout.take());
        let out = child.wait_with_output().unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            out.stderr.is_empty(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn usage_errors_exit_2() {
    assert_eq!(run(&["events"]).status.code(), Some(2));
    assert_eq!(run(&["nonsense-command", "x"]).status.code(), Some(2));
}

#[test]
fn diagnose_shorthand_json_and_fail_on() {
    let file = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/data/fast-retransmission.pcapng");
    let bin = env!("CARGO_BIN_EXE_tcpdx");
    let out = Command::new(bin).arg("--json").arg(&file).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["version"], 1);
    assert!(v["findings"].is_array() && v["time_budget"].is_object());
    // A lost segment repaired by a fast retransmission: not a spurious one (the ACK after a
    // repaired hole does not time the path, Karn's rule).
    let kinds: Vec<&str> = v["findings"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|f| f["kind"].as_str())
        .collect();
    assert!(!kinds.contains(&"spurious-retransmission"), "{kinds:?}");
    let fail = Command::new(bin)
        .args(["diagnose", "--fail-on", "info"])
        .arg(&file)
        .output()
        .unwrap();
    let any = v["findings"].as_array().is_some_and(|f| !f.is_empty());
    assert_eq!(fail.status.code(), Some(if any { 1 } else { 0 }));
}

/// Text lines the default `diagnose` output may take on any capture (issue 38: "of the
/// order of 100 lines at most").
const READABLE_LINES: usize = 100;

#[test]
fn diagnose_of_many_connections_starts_with_the_verdict_and_stays_short() {
    // 150,000 packets of short connections, 2,000 at a time (the benchmark's `many`), each
    // losing a segment in ten: a network-loss finding on each.
    let p = tmp("many.pcap");
    let cfg = tcpdx_testkit::bulk::BulkConfig {
        packets: 150_000,
        concurrent: 2000,
        per_conn: 40,
        loss_every: 10,
        ..tcpdx_testkit::bulk::BulkConfig::default()
    };
    let f = std::fs::File::create(&p).unwrap();
    tcpdx_testkit::bulk::write_bulk(std::io::BufWriter::new(f), cfg).unwrap();
    let text = |args: &[&str]| {
        let out = run(&[args, &[p.to_str().unwrap()]].concat());
        assert_eq!(out.status.code(), Some(0), "{args:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    let short = text(&["diagnose"]);
    let lines: Vec<&str> = short.lines().collect();
    assert_eq!(lines[0], "Verdict:", "{short}");
    assert!(
        lines.len() <= READABLE_LINES,
        "{} lines:\n{short}",
        lines.len()
    );
    assert!(short.contains("Findings by pattern"), "{short}");
    // The worst connection of the costliest pattern in full, with its evidence frames.
    assert!(
        short.contains("in full:") && short.contains("evidence: #"),
        "{short}"
    );
    // Every finding in full is what the default leaves out.
    let all = text(&["diagnose", "--all"]);
    assert!(all.starts_with("Verdict:"));
    assert!(all.lines().count() > READABLE_LINES, "{all}");
    // One connection in full, named by the default output's example.
    let n = short
        .split("e.g. --stream ")
        .nth(1)
        .and_then(|t| t.split(|c: char| !c.is_ascii_digit()).next())
        .expect("an example stream");
    let one = text(&["diagnose", "--stream", n]);
    assert!(one.contains(&format!("stream {n}")), "{one}");
    assert!(
        one.contains("evidence:") || one.contains("wireshark:"),
        "{one}"
    );
}
