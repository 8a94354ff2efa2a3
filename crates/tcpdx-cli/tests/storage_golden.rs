//! `tcpdx srt` end to end: hand-built storage conversations (ports, `--decode-as`, loss),
//! and golden numbers on the lab's real NFS, SMB3 and iSCSI captures.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;
use tcpdx_testkit::{DATA_SEG, Payload, Script, ScriptConfig, SegSpec, nfs};

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tcpdx"))
        .args(args)
        .output()
        .unwrap()
}

fn srt_json(path: &Path, extra: &[&str]) -> Value {
    let mut args = vec!["srt", "--json", path.to_str().unwrap()];
    args.extend_from_slice(extra);
    let out = run(&args);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn lab(name: &str, side: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/data/lab")
        .join(name)
        .join(format!("{side}.pcap.gz"))
}

/// Client READ in two segments (split inside the header), reply in three segments of
/// which the second is lost and retransmitted after the third.
fn nfs_script(port: u16) -> Script {
    let mut t = Script::with(ScriptConfig {
        server_port: port,
        ..ScriptConfig::DEFAULT
    });
    t.handshake();
    let call = nfs::read_call(7, 3000);
    t.at_ms(20).client_sends_bytes(&call[..30]); // frame 4
    t.at_ms(21).client_sends_bytes(&call[30..]); // frame 5: the call completes
    let reply = nfs::read_reply(7, 3000);
    let (a, b) = (1448usize, 2896usize);
    t.at_ms(25).server_sends_bytes(&reply[..a]); // frame 6
    let lost = reply[a..b].to_vec();
    t.at_ms(25.1).server(SegSpec {
        seq: 1 + b as u32,
        payload: Payload::Bytes(reply[b..].to_vec()),
        ..DATA_SEG
    }); // frame 7 (after the hole)
    t.at_ms(36).server(SegSpec {
        seq: 1 + a as u32,
        payload: Payload::Bytes(lost),
        ..DATA_SEG
    }); // frame 8: retransmission fills the hole, the reply completes
    t
}

#[test]
fn nfs_on_a_custom_port_needs_decode_as() {
    let path = nfs_script(20049)
        .write_temp_pcapng("srt-decode-as")
        .unwrap();
    let none = srt_json(&path, &[]);
    assert_eq!(none["tables"], Value::Array(vec![]));
    let v = srt_json(&path, &["--decode-as", "20049=nfs"]);
    let t = &v["tables"][0];
    assert_eq!(t["protocol"], "nfs");
    assert_eq!(t["version"], 3);
    let row = &t["rows"][0];
    assert_eq!(row["op"], "READ");
    assert_eq!(row["count"], 1);
    // Request completes at 21 ms (frame 5), the reply at 36 ms (frame 8).
    assert!(
        (row["max_s"].as_f64().unwrap() - 0.015).abs() < 1e-9,
        "{row}"
    );
    let slow = &v["slowest"][0];
    assert_eq!(slow["request_frame"], 5);
    assert_eq!(slow["reply_frame"], 8);
    assert_eq!(slow["len"], 3000);
    assert_eq!(v["connections"][0]["read_bytes"], 3000);
    std::fs::remove_file(path).ok();
}

#[test]
fn nfs_default_port_and_transactions_csv() {
    let path = nfs_script(2049).write_temp_pcapng("srt-csv").unwrap();
    let out = run(&["srt", "--transactions", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    let f: Vec<&str> = lines[1].split(',').collect();
    // stream,protocol,version,op,sub_op,id,request_frame,request_time,reply_frame,
    // reply_time,srt,status,kind,offset,length,done_length,repaired,damaged
    assert_eq!(&f[..7], ["0", "nfs", "3", "READ", "", "7", "5"]);
    assert_eq!(f[8], "8");
    assert_eq!(f[10], "0.015000000");
    assert_eq!(&f[12..], ["read", "0", "3000", "3000", "1", "0"]);
    std::fs::remove_file(path).ok();
}

#[test]
fn bad_decode_as_is_a_usage_error() {
    let out = run(&["srt", "--decode-as", "2049=ftp", "x.pcap"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("unknown protocol"), "{err}");
}

#[test]
fn golden_nfs3_read() {
    let v = srt_json(&lab("nfs3_read_clean", "client"), &[]);
    let rows = v["tables"][0]["rows"].as_array().unwrap();
    let read = rows.iter().find(|r| r["op"] == "READ").unwrap();
    assert_eq!(read["count"], 2);
    assert_eq!(read["code"], 6);
    assert!((read["max_s"].as_f64().unwrap() - 0.163532).abs() < 1e-6);
    assert_eq!(v["slowest"][0]["request_frame"], 50);
    assert_eq!(v["slowest"][0]["reply_frame"], 796);
    assert_eq!(v["slowest"][0]["len"], 1_048_576);
    assert_eq!(v["connections"][0]["read_bytes"], 2 * 1_048_576);
    assert_eq!(v["connections"][0]["outstanding_max"], 1);
}

#[test]
fn golden_case003_fixed_stall() {
    // See: ../shared/cases/003_a555277df593d0fd.txt (a 5 s stall).
    let v = srt_json(&lab("case003_nfs_write_stall", "client"), &[]);
    let slow = &v["slowest"][0];
    assert_eq!(slow["op"], "GETATTR");
    assert!((slow["srt_s"].as_f64().unwrap() - 5.006464).abs() < 1e-6);
    assert_eq!(slow["request_frame"], 42);
    assert_eq!(slow["reply_frame"], 44);
    let write = v["tables"][0]["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["op"] == "WRITE")
        .unwrap()
        .clone();
    assert_eq!(write["count"], 4);
    // Outstanding over time: 1 request in flight through the stall seconds.
    let stalled: Vec<&Value> = v["intervals"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["start_s"].as_f64().unwrap() >= 1.0 && i["start_s"].as_f64().unwrap() < 5.0)
        .collect();
    assert_eq!(stalled.len(), 4);
    assert!(
        stalled
            .iter()
            .all(|i| (i["outstanding_mean"].as_f64().unwrap() - 1.0).abs() < 1e-9)
    );
}

#[test]
fn golden_nfs4_compound_operations() {
    let v = srt_json(&lab("nfs4_read_clean", "client"), &[]);
    let ops = v["tables"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["by"] == "operation")
        .unwrap();
    let read = ops["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["op"] == "READ")
        .unwrap();
    assert_eq!(read["count"], 2);
    assert_eq!(v["slowest"][0]["op"], "COMPOUND(READ)");
}

#[test]
fn golden_smb3_credits() {
    let v = srt_json(&lab("smb3_read_clean", "client"), &[]);
    let t = &v["tables"][0];
    assert_eq!(t["protocol"], "smb2");
    let read = t["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["op"] == "Read")
        .unwrap();
    assert_eq!(read["count"], 2);
    let c = &v["credits"][0];
    assert_eq!(c["absolute"], true);
    // The Negotiate and the two Session Setup rounds run on a single credit (balance 0
    // while each waits for its response); afterwards Samba grants 8192 and the balance
    // never reaches zero again.
    assert_eq!(c["starved_episodes"], 3, "{c}");
    assert!(c["starved_s"].as_f64().unwrap() < 0.05, "{c}");
    assert_eq!(
        (c["min"].as_i64(), c["max"].as_i64()),
        (Some(0), Some(8192)),
        "{c}"
    );
    assert_eq!(v["notices"]["smb3_encrypted"], 0);
}

#[test]
fn golden_iscsi_queue_depth() {
    let v = srt_json(&lab("iscsi_read_clean", "client"), &[]);
    let rows = v["tables"][0]["rows"].as_array().unwrap();
    let read = rows.iter().find(|r| r["op"] == "Read(16)").unwrap();
    assert_eq!(read["count"], 332);
    assert_eq!(read["code"], 136);
    let c = &v["connections"][0];
    assert_eq!(c["read_bytes"], 332 * 65536);
    // libiscsi keeps several 64 KiB reads in flight.
    assert!(c["outstanding_max"].as_u64().unwrap() >= 4, "{c}");
    assert!(c["io_size_mean"].as_f64().unwrap() > 60_000.0, "{c}");
}

fn diagnose_json(path: &Path) -> Value {
    let out = run(&["diagnose", "--json", path.to_str().unwrap()]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn findings_of<'a>(v: &'a Value, kind: &str) -> Vec<&'a Value> {
    v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["kind"] == kind)
        .collect()
}

#[test]
fn diagnose_tells_a_request_limited_client() {
    // iscsi-perf -m 4 -b 128: 4 x 64 KiB outstanding over a 10 ms round trip.
    let v = diagnose_json(&lab("iscsi_read_clean", "client"));
    let f = findings_of(&v, "application-limited");
    assert_eq!(f.len(), 1, "{v:#}");
    let text = f[0]["explanation"].as_str().unwrap();
    assert!(text.starts_with("Request-limited client"), "{text}");
    assert!(text.contains("request(s) of 64 KiB outstanding"), "{text}");
    assert!(
        findings_of(&v, "path-limited").is_empty(),
        "no longer healthy"
    );
}

#[test]
fn diagnose_places_the_case003_stall_at_the_server() {
    // See: ../shared/cases/003_a555277df593d0fd.txt
    // One GETATTR held 5.006 s: the server's hold (one occurrence shows no repeating
    // timer), named with its service time on the idle-time finding.
    let v = diagnose_json(&lab("case003_nfs_write_stall", "client"));
    assert!(findings_of(&v, "fixed-duration-stall").is_empty(), "{v:#}");
    let f = findings_of(&v, "application-limited");
    assert_eq!(f.len(), 1);
    let text = f[0]["explanation"].as_str().unwrap();
    assert!(
        text.contains("the server held 1 operation(s) of 100 ms or more")
            && text.contains("GETATTR (id 0x323eee16, frames 42 -> 44) 5.006 s"),
        "{text}"
    );
    let frames: Vec<u64> = f[0]["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["frame"].as_u64().unwrap())
        .collect();
    assert!(frames.contains(&42) && frames.contains(&44), "{frames:?}");
}

#[test]
fn diagnose_tells_a_slow_server_from_a_request_limited_client() {
    // Lab: iscsi_read_slow_server (tgtd stopped 20 ms of every 25 ms, RTT 2 ms, 4 commands
    // outstanding) and iscsi_read_qd1 (1 command outstanding, RTT 10 ms), both sides.
    for side in ["client", "server"] {
        let slow = diagnose_json(&lab("iscsi_read_slow_server", side));
        let f = findings_of(&slow, "application-limited");
        assert_eq!(f.len(), 1, "{side}: {slow:#}");
        let text = f[0]["explanation"].as_str().unwrap();
        assert!(text.starts_with("Slow server"), "{side}: {text}");

        let qd1 = diagnose_json(&lab("iscsi_read_qd1", side));
        let f = findings_of(&qd1, "application-limited");
        assert_eq!(f.len(), 1, "{side}: {qd1:#}");
        let text = f[0]["explanation"].as_str().unwrap();
        assert!(text.starts_with("Request-limited client"), "{side}: {text}");
        // One 64 KiB command in flight (about 1 from the server side too).
        assert!(
            text.contains("keeps 1.0 request(s)") || text.contains("keeps 0.9 request(s)"),
            "{side}: {text}"
        );
    }
}
