//! Two vantage points (issue 42) on the lab fixtures: A is the client-side capture, B the
//! server-side one, the relay between them; both were taken on one clock (offset 0).

use std::collections::HashMap;
use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};

use tcpdx::vantage::Location;
use tcpdx::{Capture, Options, Vantage};
use tcpdx_capture::{RawItem, RawReader};

fn lab(case: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/data/lab")
        .join(case)
}

fn vantage(a: &Path, b: &Path) -> Vantage {
    let mut a = Capture::open(a);
    let mut b = Capture::open(b);
    a.vantage(&mut b, &Options::default()).unwrap()
}

fn lab_vantage(case: &str) -> Vantage {
    let d = lab(case);
    vantage(&d.join("client.pcap.gz"), &d.join("server.pcap.gz"))
}

/// The relay's injected drops of `case` (truth.json): (direction, raw seq) -> count.
fn injected_drops(case: &str) -> HashMap<(String, u32), usize> {
    let t: serde_json::Value =
        serde_json::from_reader(File::open(lab(case).join("truth.json")).unwrap()).unwrap();
    let mut m = HashMap::new();
    for d in t["injected"]["drops"].as_array().unwrap() {
        let dir = if d["dir"] == "c2s" {
            "a_to_b"
        } else {
            "b_to_a"
        };
        let seq = d["seq"].as_u64().unwrap() as u32;
        *m.entry((dir.to_owned(), seq)).or_default() += 1;
    }
    m
}

/// Injected drops located between A and B, out of all injected drops.
fn located(case: &str, v: &Vantage) -> (usize, usize) {
    let mut want = injected_drops(case);
    let total = want.values().sum();
    let mut right = 0;
    for l in &v.losses {
        if l.location != Some(Location::Between) {
            continue;
        }
        if let Some(n) = want.get_mut(&(l.direction.as_str().to_owned(), l.seq_raw))
            && *n > 0
        {
            *n -= 1;
            right += 1;
        }
    }
    (right, total)
}

#[test]
fn relay_blackout_drops_are_located_between_the_points() {
    for case in ["case000_rto_delack", "case000_rto_quickack"] {
        let v = lab_vantage(case);
        let (right, total) = located(case, &v);
        assert!(total > 1000, "{case}: {total} injected drops");
        assert!(
            right * 100 >= total * 99,
            "{case}: {right} of {total} injected drops located between"
        );
        assert_eq!(
            v.losses_at(Location::Between),
            total,
            "{case}: no extra loss"
        );
        assert_eq!(
            v.losses_at(Location::BeforeA) + v.losses_at(Location::AfterB),
            0
        );
        let l = &v.losses[0];
        assert!(l.frame_a.is_some() && l.frame_b.is_none(), "{l:?}");
    }
}

#[test]
fn router_drops_are_between_and_server_input_drops_after_b() {
    // nftables drops 1% on the router (between) or at the server's input, after its capture.
    for case in ["nfs3_write_loss1pct", "smb3_write_loss1pct"] {
        let v = lab_vantage(case);
        assert!(v.losses_at(Location::Between) > 10, "{case}: {v:?}");
        assert_eq!(v.losses.len(), v.losses_at(Location::Between), "{case}");
    }
    let v = lab_vantage("case002_rx_host_drops");
    assert!(v.losses_at(Location::AfterB) > 10, "{:?}", v.losses);
    assert_eq!(v.losses.len(), v.losses_at(Location::AfterB));
    assert!(
        v.losses
            .iter()
            .all(|l| l.frame_a.is_some() && l.frame_b.is_some())
    );
}

#[test]
fn clean_runs_invent_no_loss() {
    for case in [
        "clean_bulk_cubic",
        "clean_bulk_reno",
        "iscsi_read_clean",
        "nfs3_read_clean",
        "nfs4_read_clean",
        "smb3_read_clean",
    ] {
        let v = lab_vantage(case);
        assert!(v.matched > 1000, "{case}: {}", v.matched);
        assert!(v.losses.is_empty(), "{case}: {:?}", v.losses);
        assert!(v.capture_drops.is_empty(), "{case}: {:?}", v.capture_drops);
        assert_eq!(v.only_a + v.only_b, 0, "{case}");
        assert!(v.offset_s.abs() < 100e-6, "{case}: offset {}", v.offset_s);
        let ab = &v.delays[0];
        // The relay delays each direction by 5 ms.
        assert!((ab.min_s - 0.005).abs() < 0.001, "{case}: {ab:?}");
    }
}

#[test]
fn reordering_by_the_relay_is_reordering_between_not_loss() {
    for case in ["case001_reorder_count", "case001_reorder_time"] {
        let v = lab_vantage(case);
        assert_eq!(v.reordered.len(), 17, "{case}: {:?}", v.reordered);
        assert!(
            v.reordered
                .iter()
                .all(|r| r.location == Some(Location::Between))
        );
        assert!(v.losses.is_empty(), "{case}: {:?}", v.losses);
    }
}

/// `src` rewritten with every timestamp moved by `shift_ns`, as pcapng.
fn shifted(src: &Path, dst: &Path, shift_ns: i64) {
    let mut r = RawReader::open(src).unwrap();
    let mut h = r.pcap_header().expect("the lab writes pcap");
    h.nanos = true;
    let mut w = tcpdx_capture::PcapNgWriter::new(BufWriter::new(File::create(dst).unwrap()));
    w.section_header("tcpdx test").unwrap();
    w.pcap_interface(&h).unwrap();
    while let Some(item) = r.next_item().unwrap() {
        let RawItem::Record(mut rec) = item else {
            panic!("pcap has records only")
        };
        rec.ts.0 += shift_ns;
        w.pcap_record::<&str>(&rec, true, &[]).unwrap();
    }
    w.into_inner().into_inner().unwrap();
}

#[test]
fn offset_of_a_shifted_capture_within_100_us() {
    let tmp = tempfile::tempdir().unwrap();
    for (case, shift) in [
        ("clean_bulk_cubic", 1_234_567_891i64),
        ("case000_rto_delack", -3_600_000_123_456),
        ("nfs3_write_loss1pct", 250_000_000),
    ] {
        let d = lab(case);
        let b = tmp.path().join(format!("{case}.pcapng"));
        shifted(&d.join("server.pcap.gz"), &b, shift);
        let v = vantage(&d.join("client.pcap.gz"), &b);
        let err = v.offset_s - shift as f64 / 1e9;
        assert!(
            err.abs() < 100e-6,
            "{case}: offset {} error {err}",
            v.offset_s
        );
        assert!(v.drift_ppm.abs() < 100.0, "{case}: {}", v.drift_ppm);
        // The losses stay where they were.
        let plain = lab_vantage(case);
        assert_eq!(v.losses, plain.losses, "{case}");
    }
}

#[test]
fn storage_time_splits_into_network_and_server() {
    let v = lab_vantage("iscsi_read_slow_server");
    let read = v.storage.iter().find(|s| s.op == "Read(16)").unwrap();
    assert!(read.count > 200, "{read:?}");
    let sum = read.request_network_s + read.server_s + read.reply_network_s;
    assert!((sum - read.response_s).abs() < 1e-6, "{read:?}");
    // The relay adds 1 ms each way; the server's time is the rest.
    assert!((read.request_network_s - 0.001).abs() < 0.0005, "{read:?}");
    assert!(read.server_s > 0.005, "{read:?}");
}

#[test]
fn swapped_captures_mirror_the_locations() {
    let d = lab("case002_rx_host_drops");
    let v = vantage(&d.join("server.pcap.gz"), &d.join("client.pcap.gz"));
    assert!(v.losses_at(Location::BeforeA) > 10);
    assert_eq!(v.losses.len(), v.losses_at(Location::BeforeA));
    assert!(v.losses.iter().all(|l| l.direction.as_str() == "b_to_a"));
}

#[test]
fn findings_say_which_point_showed_them() {
    let d = lab("case000_rto_delack");
    let (pa, pb) = (d.join("client.pcap.gz"), d.join("server.pcap.gz"));
    let o = Options::default();
    let da = Capture::open(&pa).diagnose(&o).unwrap();
    let db = Capture::open(&pb).diagnose(&o).unwrap();
    let mut v = vantage(&pa, &pb);
    tcpdx::vantage::finding_sides(&mut v, &da, &db);
    let side = |kind: &str| {
        v.findings
            .iter()
            .find(|f| f.kind == kind)
            .map(|f| f.seen_at)
    };
    // The timeout stall shows at both ends of the path.
    assert_eq!(side("rto-stall"), Some("both"), "{:?}", v.findings);
    // Every finding of either diagnosis is placed once.
    let listed = da.findings.len() + db.findings.len();
    let both = v.findings.iter().filter(|f| f.seen_at == "both").count();
    assert_eq!(v.findings.len() + both, listed, "{:?}", v.findings);
}
