//! `tcpdx annotate`: Wireshark lists exactly the evidence frames of `tcpdx diagnose --json`
//! through `frame.comment contains "tcpdx"`, and sees the same packets, bytes and
//! timestamps as in the original; bad input and outputs fail cleanly. Also the progress
//! bar: drawn on a terminal only (run under `script` for a pseudo-terminal).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use tcpdx_capture::CaptureReader;
use tcpdx_testkit::OwnedFrame;

fn tcpdx(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tcpdx"))
        .args(args)
        .output()
        .unwrap()
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("tcpdx-annotate-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

fn data(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/data")
        .join(rel)
}

/// `tshark -r path args...` stdout (tshark is required: the comparison is the point).
#[track_caller]
fn tshark(path: &Path, args: &[&str]) -> String {
    let out = Command::new("tshark")
        .arg("-r")
        .arg(path)
        .args(args)
        .output()
        .expect("tshark must be installed for this test");
    assert!(
        out.status.success(),
        "tshark -r {} {args:?}: {}",
        path.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The evidence frames of `tcpdx diagnose --json`.
fn evidence_frames(capture: &Path) -> BTreeSet<u64> {
    let out = tcpdx(&["diagnose", "--json", capture.to_str().unwrap()]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|f| f["evidence"].as_array().unwrap())
        .map(|e| e["frame"].as_u64().unwrap())
        .collect()
}

const FIELDS: &[&str] = &[
    "frame.number",
    "frame.time_epoch",
    "frame.len",
    "frame.cap_len",
    "frame.protocols",
];

fn fields(path: &Path) -> String {
    let mut args = vec!["-n", "-T", "fields"];
    for f in FIELDS {
        args.extend(["-e", f]);
    }
    tshark(path, &args)
}

/// Annotates `capture` and checks the two promises; returns the evidence frame count.
#[track_caller]
fn check(capture: &Path) -> usize {
    let name = capture.file_name().unwrap().to_str().unwrap();
    let out_path = tmp(&format!("{name}.annotated.pcapng"));
    let out = tcpdx(&[
        "annotate",
        capture.to_str().unwrap(),
        "-o",
        out_path.to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{name}: {err}");
    assert!(
        err.contains("with tcpdx comments"),
        "{name}: summary: {err}"
    );

    // (1) Wireshark's filter lists exactly the evidence frames.
    let expected = evidence_frames(capture);
    let listed = tshark(
        &out_path,
        &[
            "-Y",
            "frame.comment contains \"tcpdx\"",
            "-T",
            "fields",
            "-e",
            "frame.number",
            "-e",
            "frame.comment",
        ],
    );
    let mut got = BTreeSet::new();
    for line in listed.lines() {
        let (no, comments) = line.split_once('\t').unwrap();
        got.insert(no.parse::<u64>().unwrap());
        for c in comments.split(',').filter(|c| c.contains("tcpdx")) {
            assert!(c.starts_with("tcpdx: "), "{name}: comment {c:?}");
            assert!(c.contains(" ("), "{name}: comment {c:?}");
        }
    }
    assert_eq!(got, expected, "{name}: commented frames vs evidence frames");

    // (2) Same packets, lengths, timestamps, dissection and bytes.
    assert_eq!(fields(capture), fields(&out_path), "{name}: frame fields");
    let (a, b) = (tshark(capture, &["-x"]), tshark(&out_path, &["-x"]));
    assert!(!a.is_empty());
    assert!(a == b, "{name}: hex dumps differ");
    std::fs::remove_file(&out_path).unwrap();
    expected.len()
}

#[test]
fn lab_captures_pcap_gz_microseconds() {
    for (case, side) in [
        ("case000_rto_delack", "client"),
        ("case001_reorder_time", "server"),
        ("case004_tbf_burst", "server"),
    ] {
        let n = check(&data(&format!("lab/{case}/{side}.pcap.gz")));
        assert!(n > 0, "{case}: the fixture has evidence");
    }
}

#[test]
fn pcapng_plain_and_gzip() {
    check(&data("fast-retransmission.pcapng"));
    check(&data("zero-window.pcapng"));
    let n = check(&data("synth/case000_synth_delack100/capture.pcapng.gz"));
    assert!(n > 0);
}

/// The frames of a capture, owned.
fn frames_of(path: &Path) -> Vec<OwnedFrame> {
    let mut r = CaptureReader::open(path).unwrap();
    let mut v = Vec::new();
    while let Some(f) = r.next_frame().unwrap() {
        v.push(OwnedFrame {
            no: f.no,
            ts: f.ts,
            link: f.link,
            orig_len: f.orig_len,
            data: f.data.to_vec(),
        });
    }
    v
}

#[test]
fn pcap_nanoseconds_and_microseconds() {
    let frames = frames_of(&data("synth/case000_synth_delack100/capture.pcapng.gz"));
    for nanos in [true, false] {
        let path = tmp(&format!("synth-{nanos}.pcap"));
        let mut f = std::fs::File::create(&path).unwrap();
        tcpdx_testkit::write_pcap(&mut f, &frames, nanos).unwrap();
        drop(f);
        assert!(check(&path) > 0);
    }
}

/// A failed run: exit 2, one line naming `what`, no output file left behind.
#[track_caller]
fn assert_fails(args: &[&str], what: &str, out_path: &Path) {
    let out = tcpdx(args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
    assert_eq!(err.lines().count(), 1, "{args:?}: one line: {err}");
    assert!(err.contains(what), "{args:?}: names {what}: {err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(!out_path.exists(), "{args:?}: no output left");
    let dir = out_path.parent().unwrap();
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            let n = e.file_name().to_string_lossy().into_owned();
            assert!(!n.contains(".tcpdx-"), "temporary file left: {n}");
        }
    }
}

#[test]
fn errors_are_one_line_with_exit_code_2() {
    let out_path = tmp("errors/out.pcapng");
    std::fs::create_dir_all(out_path.parent().unwrap()).unwrap();
    let out = out_path.to_str().unwrap();
    // A capture bad in the middle: the error names the file and the byte.
    let bad = data("malformed/pcapng-caplen-beyond-block.pcapng");
    let bad_s = bad.to_str().unwrap();
    assert_fails(&["annotate", bad_s, "-o", out], bad_s, &out_path);
    assert_fails(&["annotate", bad_s, "-o", out], "byte", &out_path);
    // Not a capture at all.
    let text = tmp("errors/text.pcap");
    std::fs::write(&text, "hello, this is not a capture\n").unwrap();
    assert_fails(
        &["annotate", text.to_str().unwrap(), "-o", out],
        "not a",
        &out_path,
    );
    // stdin cannot be read twice.
    assert_fails(&["annotate", "-", "-o", out], "stdin", &out_path);
    // Unwritable output: the output path is named, before any analysis.
    let good = data("fast-retransmission.pcapng");
    let good_s = good.to_str().unwrap();
    let nowhere = tmp("errors/no-such-dir/out.pcapng");
    assert_fails(
        &["annotate", good_s, "-o", nowhere.to_str().unwrap()],
        nowhere.to_str().unwrap(),
        &nowhere,
    );
    // The input is never overwritten.
    let copy = tmp("errors/copy.pcapng");
    std::fs::copy(&good, &copy).unwrap();
    let before = std::fs::read(&copy).unwrap();
    let c = copy.to_str().unwrap();
    let out = tcpdx(&["annotate", c, "-o", c]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("replace the input"));
    assert_eq!(std::fs::read(&copy).unwrap(), before);
    // Missing -o is a usage error.
    assert_eq!(tcpdx(&["annotate", good_s]).status.code(), Some(2));
}

#[test]
fn output_to_stdout() {
    let capture = data("fast-retransmission.pcapng");
    let out = tcpdx(&["annotate", capture.to_str().unwrap(), "-o", "-"]);
    assert_eq!(out.status.code(), Some(0));
    let path = tmp("stdout.pcapng");
    std::fs::write(&path, &out.stdout).unwrap();
    assert_eq!(fields(&capture), fields(&path));
}

/// Runs `tcpdx args` with stderr on a pseudo-terminal (`script`); returns what it drew.
fn on_terminal(args: &[&str]) -> String {
    let cmd = std::iter::once(env!("CARGO_BIN_EXE_tcpdx"))
        .chain(args.iter().copied())
        .map(|a| format!("'{a}'"))
        .collect::<Vec<_>>()
        .join(" ");
    // stdout to /dev/null: only stderr reaches the terminal.
    let out = Command::new("script")
        .args(["-qec", &format!("{cmd} >/dev/null"), "/dev/null"])
        .env("COLUMNS", "120")
        .output()
        .expect("script (util-linux) must be installed for this test");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn progress_bar_only_on_a_terminal() {
    // 8945 frames: the bar is updated every 4096.
    let capture = data("lab/case000_rto_delack/client.pcap.gz");
    let c = capture.to_str().unwrap();
    let drawn = on_terminal(&["diagnose", "--progress", c]);
    assert!(drawn.contains("reading"), "bar drawn: {drawn:?}");
    assert!(drawn.contains("packets/s"), "packets/s shown: {drawn:?}");
    assert!(drawn.contains("KiB"), "bytes of the file size: {drawn:?}");
    let out = tmp("progress.pcapng");
    let o = out.to_str().unwrap();
    let drawn = on_terminal(&["annotate", "--progress", c, "-o", o]);
    assert!(
        drawn.contains("writing"),
        "annotate's second pass: {drawn:?}"
    );
    // A small file: no bar by default, none with --no-progress.
    let drawn = on_terminal(&["diagnose", c]);
    assert!(!drawn.contains("packets/s"), "{drawn:?}");
    let drawn = on_terminal(&["annotate", "--no-progress", c, "-o", o]);
    assert!(!drawn.contains("packets/s"), "{drawn:?}");
    // Piped stderr: nothing drawn, even when asked.
    let piped = tcpdx(&["diagnose", "--progress", c]);
    assert!(
        piped.stderr.is_empty(),
        "{:?}",
        String::from_utf8_lossy(&piped.stderr)
    );
}
