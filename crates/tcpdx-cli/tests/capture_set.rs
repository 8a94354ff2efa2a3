//! Capture sets: several files read as one capture (issue 41, item 1). A lab capture cut
//! into a ring buffer of ten files diagnoses as the one file does (frame numbers included),
//! on one thread and two; overlapping files are numbered as the file `mergecap -w` writes
//! of them (checked against tshark reading that file and the members); a directory stands
//! for its capture files; compressed, truncated and bad members.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use tcpdx_capture::CaptureReader;
use tcpdx_testkit::OwnedFrame;
use tcpdx_testkit::pcap_writer::write_pcap;
use tcpdx_testkit::tshark::tshark_fields;

/// Exit code, stdout and stderr of `tcpdx ARGS`.
fn tcpdx(args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_tcpdx"))
        .args(args)
        .arg("--no-progress")
        .output()
        .expect("run tcpdx");
    (
        out.status.code(),
        String::from_utf8(out.stdout).expect("utf-8 stdout"),
        String::from_utf8(out.stderr).expect("utf-8 stderr"),
    )
}

/// `tcpdx ARGS`, which must succeed: its stdout.
#[track_caller]
fn ok(args: &[&str]) -> String {
    let (code, out, err) = tcpdx(args);
    assert_eq!(code, Some(0), "tcpdx {args:?}: {err}");
    out
}

/// A fresh directory for one test.
fn scratch(test: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("tcpdx-capture-set-{}-{test}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("scratch dir");
    d
}

/// Every frame of a capture.
fn frames(path: &Path) -> Vec<OwnedFrame> {
    let mut r = CaptureReader::open(path).expect("open capture");
    let mut v = Vec::new();
    while let Some(f) = r.next_frame().expect("read") {
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

fn write(path: &Path, frames: &[OwnedFrame]) -> PathBuf {
    let mut f = std::fs::File::create(path).expect("create");
    write_pcap(&mut f, frames, true).expect("write pcap");
    path.to_owned()
}

/// `frames` cut into `n` consecutive files `dir/ring_NN.pcap` (as `editcap -c` cuts).
fn ring(dir: &Path, frames: &[OwnedFrame], n: usize) -> Vec<PathBuf> {
    let per = frames.len().div_ceil(n);
    frames
        .chunks(per)
        .enumerate()
        .map(|(i, c)| write(&dir.join(format!("ring_{i:02}.pcap")), c))
        .collect()
}

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

/// The JSON with every evidence's source fields taken out; the fields taken, in order.
fn without_sources(mut v: Value) -> (Value, Vec<(String, u64, u64)>) {
    let mut taken = Vec::new();
    for f in v["findings"].as_array_mut().into_iter().flatten() {
        for e in f["evidence"].as_array_mut().into_iter().flatten() {
            let e = e.as_object_mut().expect("evidence object");
            let file = e
                .remove("source_file")
                .and_then(|f| f.as_str().map(str::to_owned));
            let frame = e.remove("source_frame").and_then(|f| f.as_u64());
            let global = e["frame"].as_u64().expect("frame");
            taken.push((
                file.expect("source_file"),
                frame.expect("source_frame"),
                global,
            ));
        }
    }
    (v, taken)
}

fn json(text: &str) -> Value {
    serde_json::from_str(text).expect("JSON output")
}

const LAB: &str = "lab/case000_rto_delack/server.pcap.gz";

#[test]
fn a_ring_buffer_of_ten_files_diagnoses_as_the_one_file() {
    let dir = scratch("ring");
    let all = frames(&common::data_dir(LAB));
    assert!(all.len() > 5000, "{} frames", all.len());
    let one = write(&dir.join("one.pcap"), &all);
    let parts_dir = dir.join("parts");
    std::fs::create_dir_all(&parts_dir).expect("parts dir");
    let parts = ring(&parts_dir, &all, 10);
    assert_eq!(parts.len(), 10);
    let per = all.len().div_ceil(10) as u64;

    let single = ok(&["diagnose", "--json", s(&one)]);
    assert!(
        !single.contains("source_file"),
        "one file: no source fields"
    );
    let mut args = vec!["diagnose", "--json"];
    args.extend(parts.iter().map(|p| s(p)));
    let set = ok(&args);
    let (set_json, taken) = without_sources(json(&set));
    assert_eq!(
        set_json,
        json(&single),
        "the set's diagnosis is the one file's"
    );
    assert!(!taken.is_empty(), "evidence frames");
    for (file, local, global) in &taken {
        let i = (global - 1) / per;
        assert_eq!(file, s(&parts[i as usize]), "frame {global}");
        assert_eq!(*local, global - i * per, "frame {global}");
    }
    // The directory reads the same files in the same order.
    let by_dir = ok(&["diagnose", "--json", s(&parts_dir)]);
    assert_eq!(without_sources(json(&by_dir)).0, json(&single));

    // Every command: one file, the set on one thread, the set on two.
    for cmd in [
        &["diagnose", "--json"][..],
        &["diagnose"],
        &["events"],
        &["flows", "--json"],
        &["srt", "--json"],
    ] {
        let mut set1: Vec<&str> = cmd.to_vec();
        set1.extend(parts.iter().map(|p| s(p)));
        let mut set2 = set1.clone();
        set1.push("--threads=1");
        set2.push("--threads=2");
        let (a, b) = (ok(&set1), ok(&set2));
        assert_eq!(a, b, "tcpdx {cmd:?}: --threads 1 and 2 differ on the set");
        if cmd != ["diagnose"] && cmd != ["diagnose", "--json"] {
            let mut single: Vec<&str> = cmd.to_vec();
            single.push(s(&one));
            assert_eq!(
                a,
                ok(&single),
                "tcpdx {cmd:?}: the set differs from the one file"
            );
        }
    }
    // The text names each evidence frame's file and number there.
    let text = ok(&[
        &["diagnose"][..],
        &parts.iter().map(|p| s(p)).collect::<Vec<_>>(),
    ]
    .concat());
    let (file, local, global) = &taken[0];
    assert!(
        text.contains(&format!("#{global} ({file} #{local})")),
        "{text}"
    );
}

#[test]
fn overlapping_files_are_numbered_as_mergecap_numbers_them() {
    let dir = scratch("overlap");
    // The two ends of one connection (gzip members), and one capture split into two
    // interleaved halves.
    let client = common::data_dir("lab/case000_rto_delack/client.pcap.gz");
    let server = common::data_dir(LAB);
    let all = frames(&server);
    let (odd, even): (Vec<_>, Vec<_>) = all.iter().cloned().partition(|f| f.no.0 % 2 == 1);
    let odd = write(&dir.join("odd.pcap"), &odd);
    let even = write(&dir.join("even.pcap"), &even);
    for (name, pair) in [("ends", [&client, &server]), ("halves", [&odd, &even])] {
        let merged = dir.join(format!("{name}.pcapng"));
        let st = Command::new("mergecap")
            .arg("-w")
            .arg(&merged)
            .args(pair)
            .status()
            .expect("mergecap is installed");
        assert!(st.success(), "mergecap");
        let set = [s(pair[0]), s(pair[1])];
        // Per-packet rows and flows: those of mergecap's file.
        for cmd in [&["events"][..], &["flows", "--json"]] {
            let a = ok(&[cmd, &set[..]].concat());
            let b = ok(&[cmd, &[s(&merged)][..]].concat());
            assert_eq!(a, b, "{name}: tcpdx {cmd:?}");
        }
        let (d, taken) = without_sources(json(&ok(&[&["diagnose", "--json"][..], &set].concat())));
        assert_eq!(d, json(&ok(&["diagnose", "--json", s(&merged)])), "{name}");
        assert!(!taken.is_empty(), "{name}: evidence");
        // Each evidence frame of the merged file, read by tshark, is the frame named in
        // its source file.
        let fields = [
            "frame.number",
            "frame.time_epoch",
            "frame.len",
            "tcp.seq_raw",
            "tcp.ack_raw",
        ];
        let rows = |p: &Path| tshark_fields(p, &fields).expect("tshark is installed");
        let m = rows(&merged);
        let members = [rows(pair[0]), rows(pair[1])];
        for (file, local, global) in &taken {
            let k = pair.iter().position(|p| s(p) == file).expect("a member");
            let (a, b) = (&m[*global as usize - 1], &members[k][*local as usize - 1]);
            assert_eq!(a[0], global.to_string());
            assert_eq!(a[1..], b[1..], "{name}: frame {global} is {file} #{local}");
        }
    }
    // Concatenated (--concat): `mergecap -a`'s numbering, whatever the times.
    let concat = dir.join("concat.pcapng");
    let st = Command::new("mergecap")
        .args(["-a", "-w"])
        .arg(&concat)
        .args([&odd, &even])
        .status()
        .expect("mergecap");
    assert!(st.success());
    assert_eq!(
        ok(&["events", "--concat", s(&odd), s(&even)]),
        ok(&["events", s(&concat)])
    );
}

#[test]
fn bad_truncated_and_skipped_members() {
    let dir = scratch("members");
    let all = frames(&common::data_dir(LAB));
    let parts = ring(&dir, &all[..1000], 4);
    // Not a capture: one line naming the member, exit 2, nothing on stdout.
    let junk = dir.join("junk.pcap");
    std::fs::write(&junk, b"this is not a capture at all").unwrap();
    let (code, out, err) = tcpdx(&["diagnose", s(&parts[0]), s(&junk)]);
    assert_eq!(code, Some(2), "{err}");
    assert!(out.is_empty());
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains(s(&junk)) && err.contains("byte 0") && err.contains("not a pcap"),
        "{err}"
    );
    // A corrupt record inside the third member: its name and the record's offset.
    let mut bytes = std::fs::read(&parts[2]).unwrap();
    let second = 24 + 16 + all[250].data.len();
    bytes[second + 8..second + 12].copy_from_slice(&u32::MAX.to_le_bytes());
    let corrupt = dir.join("corrupt.pcap");
    std::fs::write(&corrupt, &bytes).unwrap();
    let (code, _, err) = tcpdx(&[
        "flows",
        s(&parts[0]),
        s(&parts[1]),
        s(&corrupt),
        s(&parts[3]),
    ]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains(&format!(
            "{}: byte {second}: record has captured length",
            s(&corrupt)
        )),
        "{err}"
    );
    // A member cut short: analysed up to the cut, with a warning naming it.
    let mut cut = std::fs::read(&parts[1]).unwrap();
    cut.truncate(cut.len() - 10);
    let cut_path = dir.join("cut.pcap");
    std::fs::write(&cut_path, &cut).unwrap();
    let (code, out, err) = tcpdx(&["events", s(&parts[0]), s(&cut_path), s(&parts[2])]);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        err.contains(&format!("{}: record cut off", s(&cut_path))),
        "{err}"
    );
    let kept: Vec<OwnedFrame> = [&all[..499], &all[500..750]].concat();
    let kept = write(&dir.join("kept.one"), &kept);
    assert_eq!(
        out,
        ok(&["events", s(&kept)]),
        "every frame but the cut one"
    );
    // A directory: what is skipped is said.
    std::fs::write(dir.join("README.txt"), b"notes").unwrap();
    std::fs::remove_file(&junk).unwrap();
    let ring_dir = dir.join("ring");
    std::fs::create_dir_all(&ring_dir).unwrap();
    for p in &parts {
        std::fs::copy(p, ring_dir.join(p.file_name().unwrap())).unwrap();
    }
    std::fs::write(ring_dir.join("notes.txt"), b"notes").unwrap();
    let (code, out, err) = tcpdx(&["events", s(&ring_dir)]);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        err.contains("notes.txt: skipped: not a capture file"),
        "{err}"
    );
    let first = write(&dir.join("first.one"), &all[..1000]);
    assert_eq!(out, ok(&["events", s(&first)]));
    // annotate rewrites one file.
    let (code, _, err) = tcpdx(&["annotate", s(&parts[0]), s(&parts[1]), "-o", "/dev/null"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("annotate rewrites one capture file"), "{err}");
}

#[test]
fn members_of_different_link_types() {
    // The second half as raw IP (LINKTYPE_RAW, the Ethernet headers taken off): each
    // frame is decoded by its own file's link type, as mergecap's pcapng keeps one
    // interface per file.
    let dir = scratch("links");
    let all = frames(&common::data_dir(LAB));
    let all = &all[..1000];
    let first = write(&dir.join("eth.pcap"), &all[..500]);
    let raw: Vec<OwnedFrame> = all[500..]
        .iter()
        .map(|f| {
            assert_eq!(&f.data[12..14], &[0x08, 0x00], "IPv4 over Ethernet");
            OwnedFrame {
                link: tcpdx_wire::LinkType::RAW,
                orig_len: f.orig_len - 14,
                data: f.data[14..].to_vec(),
                ..f.clone()
            }
        })
        .collect();
    let second = write(&dir.join("raw.pcap"), &raw);
    let one = write(&dir.join("one.pcap"), all);
    assert_eq!(
        ok(&["events", s(&first), s(&second)]),
        ok(&["events", s(&one)])
    );
}

/// `dir` made a ring buffer of `n` files of `capture` (a lab capture), and the whole
/// capture as one uncompressed file beside it.
fn ring_of(dir: &Path, capture: &str, n: usize) -> (PathBuf, PathBuf) {
    let all = frames(&common::data_dir(capture));
    std::fs::create_dir_all(dir.join("ring")).expect("ring dir");
    assert_eq!(ring(&dir.join("ring"), &all, n).len(), n);
    (write(&dir.join("one.pcap"), &all), dir.join("ring"))
}

#[test]
fn compare_and_vantage_take_capture_sets() {
    let dir = scratch("sides");
    let (before, before_set) = ring_of(
        &dir.join("before"),
        "lab/case000_rto_delack/client.pcap.gz",
        4,
    );
    let (after, after_set) = ring_of(
        &dir.join("after"),
        "lab/case000_rto_quickack/client.pcap.gz",
        3,
    );
    let files = json(&ok(&["compare", "--json", s(&before), s(&after)]));
    let sets = json(&ok(&["compare", "--json", s(&before_set), s(&after_set)]));
    for key in [
        "verdict",
        "kinds",
        "goodput_before_bps",
        "goodput_after_bps",
    ] {
        assert!(!files[key].is_null(), "{key}");
        assert_eq!(sets[key], files[key], "{key}");
    }
    assert!(
        files["verdict"]
            .as_str()
            .unwrap()
            .contains("delack-slowstart-stall")
    );

    // Two points, each a ring buffer: the same offset and the same losses, at the same frames.
    let (a, a_set) = ring_of(&dir.join("a"), "lab/case000_rto_delack/client.pcap.gz", 5);
    let (b, b_set) = ring_of(&dir.join("b"), "lab/case000_rto_delack/server.pcap.gz", 2);
    let files = json(&ok(&["diagnose", "--json", "--vantage", s(&a), s(&b)]));
    let sets = json(&ok(&[
        "diagnose",
        "--json",
        "--vantage",
        s(&a_set),
        s(&b_set),
    ]));
    let losses = files["vantage"]["losses"].as_array().expect("losses");
    assert!(!losses.is_empty());
    assert_eq!(sets["vantage"]["losses"], files["vantage"]["losses"]);
    assert_eq!(sets["vantage"]["offset_s"], files["vantage"]["offset_s"]);
    let _ = std::fs::remove_dir_all(&dir);
}
