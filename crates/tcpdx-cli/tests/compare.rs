//! End to end: `tcpdx compare BEFORE AFTER` on the lab's delayed-ACK / quick-ACK pair,
//! text and `--json` (the fields docs/json-format.md promises), and bad input.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

fn lab(case: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/data/lab")
        .join(case)
        .join("client.pcap.gz")
}

fn tcpdx(args: &[&str], files: &[&Path]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tcpdx"))
        .args(["compare", "--no-progress"])
        .args(args)
        .args(files)
        .output()
        .unwrap()
}

#[test]
fn json_has_the_verdict_every_kind_and_the_main_goodput() {
    let (b, a) = (lab("case000_rto_delack"), lab("case000_rto_quickack"));
    let o = tcpdx(&["--json", "--threads", "2"], &[&b, &a]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let j: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["version"], 1);
    let verdict = j["verdict"].as_str().unwrap();
    assert!(
        verdict.contains("(delack-slowstart-stall) is gone"),
        "{verdict}"
    );
    let kinds = j["kinds"].as_array().unwrap();
    let names: Vec<&str> = kinds.iter().map(|k| k["kind"].as_str().unwrap()).collect();
    for k in ["rto-stall", "network-loss", "delack-slowstart-stall"] {
        assert!(names.contains(&k), "{k} in {names:?}");
    }
    for k in kinds {
        assert!(k["before_s"].as_f64().unwrap() >= 0.0);
        assert!(k["after_s"].as_f64().unwrap() >= 0.0);
        assert!(k["change"].is_string());
    }
    let gb = j["goodput_before_bps"].as_f64().unwrap();
    let ga = j["goodput_after_bps"].as_f64().unwrap();
    assert!(gb > 1e6 && ga > gb, "{gb} -> {ga}");
    let services = j["services"].as_array().unwrap();
    assert_eq!(services[0]["service"], j["main_service"]);
    assert_eq!(services[0]["before"]["goodput_bps"].as_f64(), Some(gb));
    assert_eq!(services[0]["after"]["goodput_bps"].as_f64(), Some(ga));
    assert_eq!(services[0]["matched_by"], "port");

    // The same figures as text, on one thread: the verdict first.
    let t = tcpdx(&["--threads", "1"], &[&b, &a]);
    assert!(t.status.success());
    let text = String::from_utf8(t.stdout).unwrap();
    let first = text.lines().position(|l| l == "Verdict:").unwrap();
    assert_eq!(text.lines().nth(first + 1).unwrap().trim(), verdict);
}

#[test]
fn bad_input_is_one_line_and_exit_code_2() {
    let dir = std::env::temp_dir().join(format!("tcpdx-compare-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let garbage = dir.join("garbage.pcap");
    std::fs::write(&garbage, b"this is not a capture at all").unwrap();
    let good = lab("case000_rto_delack");
    let cases: [(&Path, &Path, &str); 3] = [
        (&garbage, &good, "garbage.pcap"),
        (&good, &dir.join("missing.pcap"), "missing.pcap"),
        (Path::new("-"), &good, "standard input"),
    ];
    for (b, a, names) in cases {
        let o = tcpdx(&[], &[b, a]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{err}");
        assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
        assert!(err.contains(names), "{err}");
        assert!(o.stdout.is_empty());
    }
    std::fs::remove_dir_all(&dir).ok();
}
