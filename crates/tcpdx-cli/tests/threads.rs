//! Output is byte-for-byte the same whatever `--threads` is: the parallel pipeline
//! (src/parallel.rs) must renumber streams, order rows, sweep expired state and merge flow
//! summaries exactly as one analyzer does. Checked on the repository's fixtures (golden and
//! lab captures), on a generated capture long enough to trigger expiry sweeps, and on every
//! TCP capture of ../shared/corpus.

use std::path::{Path, PathBuf};
use std::process::Command;

use tcpdx_capture::CaptureReader;
use tcpdx_core::{Analyzer, AnalyzerConfig};
use tcpdx_testkit::bulk::{BulkConfig, write_bulk};

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

fn captures_under(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read dir").flatten() {
        let p = entry.path();
        if p.is_dir() {
            captures_under(&p, out);
        } else if let Some(name) = p.file_name().and_then(|n| n.to_str())
            && [".pcap", ".pcapng", ".pcap.gz", ".pcapng.gz", ".pcap.zst"]
                .iter()
                .any(|ext| name.ends_with(ext))
        {
            out.push(p);
        }
    }
}

#[test]
fn fixtures_give_the_same_output_for_any_thread_count() {
    let mut files = Vec::new();
    captures_under(&repo().join("tests/data"), &mut files);
    assert!(files.len() >= 10, "fixtures missing: {files:?}");
    for f in &files {
        assert_same(f, ALL, &[3]);
    }
}

#[test]
fn expiry_sweeps_and_filters_give_the_same_output_for_any_thread_count() {
    // 150 s of capture (1 ms between frames) with connections closing all the time: the
    // analyzer's sweeps (every 65,536 frames) expire closed connections mid-capture.
    let dir = std::env::temp_dir().join(format!("tcpdx-threads-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("sweep.pcap");
    let cfg = BulkConfig {
        packets: 150_000,
        concurrent: 300,
        per_conn: 40,
        gap_us: 1000,
        ..BulkConfig::default()
    };
    write_bulk(std::fs::File::create(&file).unwrap(), cfg).unwrap();

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
    let filtered: &[&[&str]] = &[
        &["events", "--stream", "7", "--stream", "400"],
        &["events", "--port", "1100"],
        &["flows", "--json", "--port", "1200"],
    ];
    assert_same(&file, filtered, &[2]);
    std::fs::remove_dir_all(&dir).ok();
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
