//! The diagnosers' spill files (crates/tcpdx/src/spill.rs) change nothing but memory: `diagnose --json`
//! is byte-for-byte the same with the spill forced on every round and every list record
//! (`TCPDX_SPILL_TINY`: every round, loss episode, timeout, pause, recent retransmission...
//! written to the temp file at once and read back on each walk or lookup of the
//! diagnosis) as with the default budget, on one and two threads, on every fixture (lab
//! and storage captures among them) and on generated bulk captures long enough to spill
//! under the default budget too. A spill file that cannot be written is a one-line error,
//! exit code 2.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use tcpdx_testkit::bulk::BulkConfig;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `tcpdx diagnose --json` on `file`, with the environment `env` added.
fn diagnose(file: &Path, threads: usize, env: &[(&str, &str)]) -> Output {
    let out = Command::new(env!("CARGO_BIN_EXE_tcpdx"))
        .args(["diagnose", "--json", "--no-progress"])
        .arg(format!("--threads={threads}"))
        .arg(file)
        .envs(env.iter().copied())
        .env("TCPDX_SPILL_STATS", "1")
        .output()
        .expect("run tcpdx");
    assert!(
        matches!(out.status.code(), Some(0..=2)),
        "tcpdx diagnose {} crashed: {}",
        file.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Bytes the run's spill files took, and of them the list records' (its
/// `TCPDX_SPILL_STATS` line: `N bytes written (M of list records)`), 0 if none.
fn spill_stats(o: &Output) -> (u64, u64) {
    let line = String::from_utf8_lossy(&o.stderr)
        .lines()
        .find_map(|l| l.strip_prefix("tcpdx: spill: ").map(str::to_owned))
        .unwrap_or_default();
    let mut numbers = line
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|n| n.parse().ok());
    (numbers.next().unwrap_or(0), numbers.next().unwrap_or(0))
}

/// Bytes the run's spill files took.
fn spilled(o: &Output) -> u64 {
    spill_stats(o).0
}

/// Same exit code and output with the spill forced as without; the bytes the forced runs
/// wrote, and of them the list records'.
fn assert_spill_changes_nothing(file: &Path) -> (u64, u64) {
    let want = diagnose(file, 1, &[]);
    let (mut written, mut records) = (0, 0);
    for threads in [1, 2] {
        let tiny = diagnose(file, threads, &[("TCPDX_SPILL_TINY", "1")]);
        assert_eq!(
            (want.status.code(), &want.stdout),
            (tiny.status.code(), &tiny.stdout),
            "{}: forced spill on {threads} thread(s) changed the diagnosis",
            file.display()
        );
        let (w, r) = spill_stats(&tiny);
        written += w;
        records += r;
    }
    (written, records)
}

#[test]
fn forced_spill_gives_the_same_diagnosis_on_every_fixture() {
    let mut files = Vec::new();
    common::captures_under(&repo().join("tests/data"), &mut files);
    files.retain(|f| !f.to_string_lossy().contains("malformed"));
    let lab = files
        .iter()
        .filter(|f| f.to_string_lossy().contains("/lab/"))
        .count();
    assert!(lab >= 30, "lab fixtures missing: {files:?}");
    let (mut spilling, mut lists) = (0, 0);
    for f in &files {
        let (written, records) = assert_spill_changes_nothing(f);
        if written > 0 {
            spilling += 1;
        }
        if records > 0 {
            lists += 1;
        }
    }
    // The forced runs did go through the files: every capture with data does.
    assert!(
        spilling * 10 >= files.len() * 8,
        "only {spilling} of {} fixtures spilled",
        files.len()
    );
    // So did the lists (loss episodes, timeouts, pauses, zero windows, recent
    // retransmissions) of every capture with a loss or a stall: 45 of 50 when written.
    assert!(
        lists * 10 >= files.len() * 8,
        "only {lists} of {} fixtures spilled list records",
        files.len()
    );
}

#[test]
fn long_connections_spill_under_the_default_budget_and_diagnose_alike() {
    // 4 long connections (~40k data segments each, a loss every 1000) spill past the
    // default budget; one of 20k-segment connections that close and are replaced frees
    // its space as each is diagnosed.
    for (packets, concurrent, per_conn) in [(240_000, 4, 100_000_000), (150_000, 3, 20_000)] {
        let path = common::bulk_capture(
            &format!("spill-{packets}-{per_conn}"),
            BulkConfig {
                packets,
                concurrent,
                per_conn,
                ..BulkConfig::default()
            },
        );
        let default = spilled(&diagnose(&path, 1, &[]));
        assert!(default > 0, "{packets} packets did not spill by default");
        let (tiny, records) = assert_spill_changes_nothing(&path);
        assert!(records > 0, "{packets} packets: no list record spilled");
        assert!(
            tiny > default,
            "forced spill wrote {tiny} bytes, default {default}"
        );
        std::fs::remove_file(&path).ok();
    }
}

#[test]
fn an_unwritable_spill_directory_is_a_one_line_error() {
    let file = repo().join("tests/data/lab/case004_tbf_burst/client.pcap.gz");
    let missing = std::env::temp_dir().join(format!("tcpdx-no-such-dir-{}", std::process::id()));
    let env = [
        ("TCPDX_SPILL_TINY", "1"),
        ("TMPDIR", missing.to_str().expect("utf-8 temp dir")),
    ];
    for threads in [1, 2] {
        let out = diagnose(&file, threads, &env);
        assert_eq!(out.status.code(), Some(2), "{threads} thread(s)");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(
            err.starts_with("tcpdx: spill file in ") && err.contains("tcpdx-no-such-dir"),
            "{err}"
        );
    }
    // Without the need to spill, the same directory is never touched.
    let small = repo().join("tests/data/zero-window.pcapng");
    let out = diagnose(&small, 1, &[("TMPDIR", missing.to_str().unwrap())]);
    assert_eq!(out.status.code(), Some(0));
}
