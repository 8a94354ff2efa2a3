//! End-to-end checks of `tcpdx-lab list` and `tcpdx-lab run` (needs root and the lab's
//! packages; runs only with TCPDX_LAB_ROOT=1, as lab/ci.sh sets it).

use std::process::Command;

fn enabled() -> bool {
    std::env::var("TCPDX_LAB_ROOT").is_ok_and(|v| v == "1")
}

#[test]
fn list_names_every_scenario() {
    let out = Command::new(env!("CARGO_BIN_EXE_tcpdx-lab"))
        .arg("list")
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    for s in tcpdx_lab::scenario::registry() {
        assert!(text.contains(&s.name), "{} missing from list", s.name);
    }
}

#[test]
fn run_clean_bulk_produces_verified_truth() {
    if !enabled() {
        eprintln!("skipped: set TCPDX_LAB_ROOT=1 (as root) to run the lab");
        return;
    }
    let dir = std::env::temp_dir().join(format!("tcpdx-lab-test-{}", std::process::id()));
    let st = Command::new(env!("CARGO_BIN_EXE_tcpdx-lab"))
        .args(["run", "clean_bulk_reno", "--short", "--verify", "--out"])
        .arg(&dir)
        .status()
        .unwrap();
    assert!(st.success());
    assert!(dir.join("truth.json").is_file() && dir.join("client.pcap.gz").is_file());
    let r = tcpdx_lab::verify::verify_dir(&dir).unwrap();
    assert!(r.ok());
    let _ = std::fs::remove_dir_all(&dir);
    // nothing left behind
    let ns = String::from_utf8(
        Command::new("ip")
            .args(["netns", "list"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    assert!(
        !ns.lines().any(|l| tcpdx_lab::topology::Names::is_lab_ns(
            l.split_whitespace().next().unwrap_or("")
        ))
    );
}
