//! Output is byte-for-byte the same whatever `--threads` is: the parallel pipeline
//! (crates/tcpdx/src/parallel) must renumber streams, order rows, sweep expired state and merge flow
//! summaries exactly as one analyzer does, and `diagnose` / `srt` must merge their workers'
//! diagnoses and storage events into the single-thread result. Checked on the repository's
//! fixtures (golden and lab captures, storage ones among them), on generated captures long
//! enough to trigger expiry sweeps and closed-connection sweeps, with evictions, with many
//! storage connections, and on every TCP capture of ../shared/corpus.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use tcpdx_capture::CaptureReader;
use tcpdx_core::{Analyzer, AnalyzerConfig};
use tcpdx_testkit::bulk::BulkConfig;
use tcpdx_testkit::storage_mix::{StorageMixConfig, write_storage_mix};
use tcpdx_testkit::{Script, ScriptConfig};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Exit code, stdout and stderr of one run (bad captures must fail alike too).
fn tcpdx(args: &[&str], file: &Path, threads: usize) -> (Option<i32>, Vec<u8>, Vec<u8>) {
    let out = Command::new(env!("CARGO_BIN_EXE_tcpdx"))
        .args(args)
        .arg(format!("--threads={threads}"))
        .arg("--no-progress")
        .arg(file)
        .output()
        .expect("run tcpdx");
    assert!(
        matches!(out.status.code(), Some(0..=2)),
        "tcpdx {args:?} {} --threads={threads} crashed: {}",
        file.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code(), out.stdout, out.stderr)
}

/// Runs each command with one thread and with each of `threads`; the outputs must be equal.
fn assert_same(file: &Path, commands: &[&[&str]], threads: &[usize]) {
    for args in commands {
        let one = tcpdx(args, file, 1);
        for &t in threads {
            let many = tcpdx(args, file, t);
            assert!(
                one == many,
                "tcpdx {args:?} {}: --threads=1 and --threads={t} differ",
                file.display()
            );
        }
    }
}

const ALL: &[&[&str]] = &[
    &["events"],
    &["events", "--format", "jsonl"],
    &["events", "--flagged"],
    &["flows", "--json"],
    &["diagnose", "--json"],
];

/// The commands that run a diagnoser and storage trackers per worker.
const STORAGE: &[&[&str]] = &[
    &["diagnose", "--json"],
    &["diagnose"],
    &["srt", "--json"],
    &["srt", "--transactions"],
];

#[test]
fn fixtures_give_the_same_output_for_any_thread_count() {
    let mut files = Vec::new();
    common::captures_under(&repo().join("tests/data"), &mut files);
    assert!(files.len() >= 10, "fixtures missing: {files:?}");
    for f in &files {
        assert_same(f, ALL, &[3]);
    }
}

#[test]
fn diagnose_and_srt_give_the_same_output_for_any_thread_count_on_fixtures() {
    let mut files = Vec::new();
    common::captures_under(&repo().join("tests/data"), &mut files);
    let storage = files
        .iter()
        .filter(|f| {
            let p = f.to_string_lossy();
            ["nfs", "smb", "iscsi"].iter().any(|k| p.contains(k))
        })
        .count();
    assert!(storage >= 8, "storage fixtures missing: {files:?}");
    for f in &files {
        assert_same(f, STORAGE, &[2, 3, 4]);
    }
}

fn words(w: &[u32]) -> Vec<u8> {
    w.iter().flat_map(|x| x.to_be_bytes()).collect()
}

/// A record-marked ONC RPC message.
fn record(m: Vec<u8>) -> Vec<u8> {
    let mut r = (0x8000_0000u32 | m.len() as u32).to_be_bytes().to_vec();
    r.extend(m);
    r
}

#[test]
fn many_storage_connections_give_the_same_output_for_any_thread_count() {
    // 24 NFSv3 connections interleaved: each sends two READs; the server answers the
    // first of each, the second only on every third connection (the others are reported
    // unanswered at the end, in stream order), one slowly.
    let mut t = Script::new();
    let ids: Vec<_> = (0..24u16)
        .map(|i| {
            t.add_connection(ScriptConfig {
                client_port: 41_000 + i,
                server_port: 2049,
                ..ScriptConfig::DEFAULT
            })
        })
        .collect();
    let mut ms = 0.0;
    let tick = |t: &mut Script, ms: &mut f64| {
        *ms += 0.5;
        t.at_ms(*ms);
    };
    for &id in &ids {
        t.on(id);
        tick(&mut t, &mut ms);
        t.handshake();
    }
    for xid in [1u32, 2] {
        for (i, &id) in ids.iter().enumerate() {
            t.on(id);
            tick(&mut t, &mut ms);
            let mut call = words(&[xid, 0, 2, 100_003, 3, 6, 1, 8, 0, 0, 0, 0, 8, 1, 2]);
            call.extend((u64::from(xid) * 4096).to_be_bytes());
            call.extend(words(&[1000 + i as u32]));
            t.client_sends_bytes(&record(call));
        }
        for (i, &id) in ids.iter().enumerate().rev() {
            if xid == 2 && i % 3 != 0 {
                continue;
            }
            t.on(id);
            tick(&mut t, &mut ms);
            if i == 5 {
                ms += 300.0;
                t.at_ms(ms);
            }
            let len = 1000 + i as u32;
            let mut reply = words(&[xid, 1, 0, 0, 0, 0, 0, 0, len, 1, len]);
            reply.extend(vec![0x42; len as usize]);
            t.server_sends_bytes(&record(reply));
        }
    }
    let file = t.write_temp_pcapng("threads-nfs").unwrap();
    let one = tcpdx(&["srt", "--transactions"], &file, 1);
    let rows = String::from_utf8(one.1).unwrap();
    assert_eq!(rows.lines().count(), 1 + 24 + 24, "{rows}");
    assert_same(&file, STORAGE, &[2, 3, 4]);
    let filtered: &[&[&str]] = &[
        &["diagnose", "--json", "--port", "41003"],
        &["srt", "--json", "--port", "41003", "--port", "41004"],
    ];
    assert_same(&file, filtered, &[2]);
    std::fs::remove_file(file).ok();
}

#[test]
fn the_generated_storage_mix_parses_and_gives_the_same_output_for_any_thread_count() {
    // The benchmark's storage capture (bench/run.sh), small: 6 NFSv3 connections alternating
    // 8 KiB READs and WRITEs, 6 operations each, replaced when closed.
    let cfg = StorageMixConfig {
        packets: 4_000,
        concurrent: 6,
        ops_per_conn: 6,
        io_bytes: 8192,
        ..StorageMixConfig::default()
    };
    let path = std::env::temp_dir().join(format!("tcpdx-mix-{}.pcap", std::process::id()));
    let f = std::fs::File::create(&path).expect("create capture");
    write_storage_mix(std::io::BufWriter::new(f), cfg).expect("write capture");
    let (code, out, err) = tcpdx(&["srt", "--json"], &path, 1);
    assert_eq!(code, Some(0), "{}", String::from_utf8_lossy(&err));
    let srt: serde_json::Value = serde_json::from_slice(&out).expect("srt --json");
    // The answered calls of `op` and the unanswered ones.
    let count = |list: &serde_json::Value, op: &str| -> u64 {
        let rows = list.as_array().unwrap().iter();
        rows.filter(|r| r["op"] == op)
            .map(|r| r["count"].as_u64().unwrap())
            .sum()
    };
    let calls = |op: &str| count(&srt["tables"][0]["rows"], op) + count(&srt["unanswered"], op);
    let (reads, writes) = (calls("READ"), calls("WRITE"));
    // Each connection alternates, READ first: at most one READ more than WRITEs each.
    assert!(writes > 50, "{reads} READs, {writes} WRITEs");
    assert!(
        reads >= writes && reads - writes <= cfg.concurrent as u64,
        "{reads} READs, {writes} WRITEs"
    );
    for t in srt["slowest"].as_array().unwrap() {
        assert_eq!(t["len"].as_u64(), Some(8192), "{t}");
    }
    assert_same(&path, STORAGE, &[2]);
    std::fs::remove_file(path).ok();
}

#[test]
fn late_segments_of_swept_connections_are_ignored_alike_for_any_thread_count() {
    // Connection A transfers and closes; B then sends more segments than the diagnoser's
    // sweep interval over 4 s, so one diagnoser diagnoses A early; A's retransmission
    // after that is ignored. Workers must sweep at the same segment to ignore it too.
    let (mut t, a) = Script::closed_then_busy(20_000, 0.2);
    t.on(a).at_ms(4500).client_sends(1, 1000);
    let file = t.write_temp_pcapng("threads-late").unwrap();
    assert_same(&file, &[&["diagnose", "--json"]], &[2, 3]);
    std::fs::remove_file(file).ok();
}

#[test]
fn diagnose_with_evictions_gives_the_same_diagnosis_for_any_thread_count() {
    // 100 connections at a time, 40 data segments each, ~1,400 in all; --max-flows 400
    // (100 per worker with 4 threads) evicts only connections that have finished, so the
    // diagnosis (not the eviction counts on stderr) is the same.
    let file = common::bulk_capture(
        "threads-evict",
        BulkConfig {
            packets: 120_000,
            concurrent: 100,
            per_conn: 40,
            gap_us: 100,
            ..BulkConfig::default()
        },
    );
    let args = ["diagnose", "--json", "--max-flows", "400"];
    let one = tcpdx(&args, &file, 1);
    let err = String::from_utf8_lossy(&one.2);
    assert!(err.contains("connections evicted"), "no evictions: {err}");
    for t in [2, 3, 4] {
        let many = tcpdx(&args, &file, t);
        assert!(
            String::from_utf8_lossy(&many.2).contains("connections evicted"),
            "no evictions with {t} threads"
        );
        assert!(
            one.0 == many.0 && one.1 == many.1,
            "diagnose --max-flows 400: --threads=1 and --threads={t} differ"
        );
    }
    std::fs::remove_file(&file).ok();
}

#[test]
fn expiry_sweeps_and_filters_give_the_same_output_for_any_thread_count() {
    // 150 s of capture (1 ms between frames) with connections closing all the time: the
    // analyzer's sweeps (every 65,536 frames) expire closed connections mid-capture.
    let file = common::bulk_capture(
        "threads-sweep",
        BulkConfig {
            packets: 150_000,
            concurrent: 300,
            per_conn: 40,
            gap_us: 1000,
            ..BulkConfig::default()
        },
    );

    let mut reader = CaptureReader::open(&file).unwrap();
    let mut an = Analyzer::new(AnalyzerConfig::default());
    let mut sink = Vec::new();
    while let Some(frame) = reader.next_frame().unwrap() {
        an.handle_frame(&frame, &mut sink);
    }
    assert!(
        an.stats().expired > 100,
        "the capture must exercise expiry sweeps"
    );

    assert_same(&file, ALL, &[2, 4]);
    assert_same(&file, &[&["diagnose", "--json"]], &[3]);
    // ~3,750 connections in the table.
    assert_same(&file, &[&["flows"]], &[2, 3]);
    let filtered: &[&[&str]] = &[
        &["events", "--stream", "7", "--stream", "400"],
        &["events", "--port", "1100"],
        &["flows", "--json", "--port", "1200"],
        &["diagnose", "--json", "--port", "1100"],
        &["diagnose", "--json", "--stream", "7"],
    ];
    assert_same(&file, filtered, &[2]);
    std::fs::remove_file(&file).ok();
}

/// Runs `tcpdx ARGS --threads=N -` with `bytes` written to its standard input in uneven
/// small pieces (so the reader's shared buffers fill, switch and cut records at any byte).
fn piped(args: &[&str], bytes: &[u8], threads: usize) -> (Option<i32>, Vec<u8>, Vec<u8>) {
    use std::io::Write;
    use std::process::Stdio;
    let mut child = Command::new(env!("CARGO_BIN_EXE_tcpdx"))
        .args(args)
        .arg(format!("--threads={threads}"))
        .args(["--no-progress", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run tcpdx");
    let mut stdin = child.stdin.take().expect("stdin");
    let input = bytes.to_vec();
    let writer = std::thread::spawn(move || {
        let (mut at, mut step) = (0, 1);
        while at < input.len() {
            // 1 byte to ~12 KB, never a multiple of a record.
            step = (step * 7 + 13) % 12_289 + 1;
            let end = (at + step).min(input.len());
            if stdin.write_all(&input[at..end]).is_err() {
                break;
            }
            stdin.flush().ok();
            at = end;
        }
    });
    let out = child.wait_with_output().expect("wait for tcpdx");
    writer.join().expect("writer");
    (out.status.code(), out.stdout, out.stderr)
}

#[test]
fn piped_input_in_small_pieces_gives_the_same_output_for_any_thread_count() {
    // Full 9000-byte frames on the storage port: records far larger than a pipe's pieces,
    // payloads the workers' storage parsers read where they lie.
    let file = common::bulk_capture(
        "threads-piped",
        BulkConfig {
            packets: 3_000,
            concurrent: 6,
            per_conn: 400,
            mss: 8948,
            snaplen: 9100,
            ..BulkConfig::default()
        },
    );
    let bytes = std::fs::read(&file).unwrap();
    for args in [
        &["events"][..],
        &["flows", "--json"],
        &["diagnose", "--json"],
        &["srt", "--json"],
    ] {
        let want = tcpdx(args, &file, 1);
        assert_eq!(want.0, Some(0), "{args:?}");
        for t in [1, 3] {
            assert!(
                piped(args, &bytes, t) == want,
                "tcpdx {args:?} on a pipe, --threads={t}, differs from the file's"
            );
        }
    }
    std::fs::remove_file(&file).ok();
}

#[test]
fn corpus_gives_the_same_output_for_any_thread_count() {
    let corpus = repo().join("../shared/corpus");
    let manifest = std::fs::read_to_string(corpus.join("MANIFEST.tsv"))
        .expect("../shared/corpus/MANIFEST.tsv (the corpus must sit beside the repository)");
    let mut header = Vec::new();
    let mut checked = 0;
    for (i, line) in manifest.lines().enumerate() {
        let cols: Vec<&str> = line.split('\t').collect();
        if i == 0 {
            header = cols.iter().map(|c| c.to_string()).collect();
            continue;
        }
        let col = |name: &str| {
            let k = header
                .iter()
                .position(|h| h == name)
                .expect("manifest column");
            cols.get(k).copied().unwrap_or("")
        };
        if col("tcp_streams").parse::<u64>().unwrap_or(0) == 0 {
            continue;
        }
        let file = corpus.join(col("local_path"));
        assert_same(&file, &[&["events"], &["flows", "--json"]], &[3]);
        checked += 1;
    }
    assert!(checked > 500, "only {checked} corpus captures with TCP");
    eprintln!("{checked} corpus captures: same output with 1 and 3 threads");
}
