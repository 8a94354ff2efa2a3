//! End to end: `tcpdx diagnose --vantage A B` on the lab's client- and server-side
//! captures (text, `--json`, bad input).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn lab(case: &str, file: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/data/lab")
        .join(case)
        .join(file)
}

fn tcpdx(args: &[&str], files: &[PathBuf]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tcpdx"))
        .args(args)
        .args(files)
        .output()
        .unwrap()
}

fn pair(case: &str) -> Vec<PathBuf> {
    vec![lab(case, "client.pcap.gz"), lab(case, "server.pcap.gz")]
}

#[test]
fn json_locates_the_relay_drops_between_the_points() {
    let o = tcpdx(
        &["diagnose", "--no-progress", "--json", "--vantage"],
        &pair("case000_rto_quickack"),
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(
        !doc["findings"].as_array().unwrap().is_empty(),
        "A's diagnosis"
    );
    let v = &doc["vantage"];
    assert!(
        v["offset_s"].as_f64().unwrap().abs() < 100e-6,
        "{}",
        v["offset_s"]
    );
    assert!(v["drift_ppm"].is_number());
    let losses = v["losses"].as_array().unwrap();
    assert_eq!(
        losses.len(),
        1427,
        "the relay's log has 1427 blackout drops"
    );
    for l in losses {
        assert_eq!(l["location"], "between");
        assert_eq!(l["direction"], "a_to_b");
        assert!(l["frame_a"].is_u64() && l["frame_b"].is_null(), "{l}");
        assert!(l["stream"].is_u64() && l["seq"].is_u64() && l["len"].is_u64());
    }
    let delays = v["delays"].as_array().unwrap();
    assert_eq!(delays[0]["direction"], "a_to_b");
    assert!(
        delays[0]["min_s"].as_f64().unwrap() > 0.009,
        "the relay's 10 ms"
    );
    let sides = v["findings"].as_array().unwrap();
    assert!(!sides.is_empty());
    assert!(
        sides
            .iter()
            .all(|f| ["a", "b", "both"].contains(&f["seen_at"].as_str().unwrap()))
    );
}

#[test]
fn text_ends_with_the_two_points() {
    let o = tcpdx(
        &["diagnose", "--no-progress", "--vantage"],
        &pair("case002_rx_host_drops"),
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let s = String::from_utf8(o.stdout).unwrap();
    assert!(s.contains("Two vantage points: A = "), "{s}");
    assert!(
        s.contains("0 before A, 0 between A and B, 19 after B"),
        "{s}"
    );
    assert!(s.contains("one-way delay a_to_b: min 5.0"), "{s}");
}

#[test]
fn storage_split_in_json() {
    let o = tcpdx(
        &["diagnose", "--no-progress", "--json", "--vantage"],
        &pair("iscsi_read_slow_server"),
    );
    assert!(o.status.success());
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let st = doc["vantage"]["storage"].as_array().unwrap();
    let read = st.iter().find(|s| s["op"] == "Read(16)").unwrap();
    assert_eq!(read["proto"], "iscsi");
    let f = |k: &str| read[k].as_f64().unwrap();
    let sum = f("request_network_s") + f("server_s") + f("reply_network_s");
    assert!((sum - f("response_s")).abs() < 1e-6, "{read}");
}

#[test]
fn a_missing_capture_is_exit_2_with_its_name() {
    let o = tcpdx(
        &["diagnose", "--no-progress", "--vantage"],
        &[
            lab("clean_bulk_cubic", "client.pcap.gz"),
            PathBuf::from("/nonexistent.pcap"),
        ],
    );
    assert_eq!(o.status.code(), Some(2));
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("/nonexistent.pcap"), "{e}");
    let o = tcpdx(
        &["diagnose", "--vantage"],
        &[lab("clean_bulk_cubic", "client.pcap.gz")],
    );
    assert_eq!(o.status.code(), Some(2), "one capture is not two points");
}

#[test]
fn report_draws_both_points_with_the_losses_marked() {
    let dir = tempfile_dir();
    let out = dir.join("v.html");
    let mut args = vec!["report".to_owned(), "--no-progress".into(), "-o".into()];
    args.push(out.display().to_string());
    args.push("--vantage".into());
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = tcpdx(&refs, &pair("case000_rto_delack"));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let html = std::fs::read_to_string(&out).unwrap();
    let section = html
        .find("<section id=\"vantage\">")
        .expect("the vantage section");
    assert!(
        section < html.find("id=\"tcpdx-data\"").unwrap(),
        "before the scripts"
    );
    assert!(html.contains("class=\"vantage-graph\" data-stream=\"0\" data-direction=\"a_to_b\""));
    assert_eq!(html.matches("class=\"seq-A\"").count(), 1);
    assert_eq!(html.matches("class=\"seq-B\"").count(), 1);
    // 1619 losses between the points, marked on both graphs.
    assert_eq!(html.matches("data-location=\"between\"").count(), 2 * 1619);
    assert!(html.contains("1619 between A and B"));
    std::fs::remove_dir_all(dir).unwrap();
}

fn tempfile_dir() -> PathBuf {
    let d =
        PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("vantage-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}
