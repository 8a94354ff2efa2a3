//! `tcpdx::compare` on the lab's before/after pairs (tests/data/lab): the verdict names
//! the pathology the change removed, and the goodput it reports is within 5% of each
//! capture's own figure computed here with tshark (bytes acknowledged over the
//! connection's duration).

use std::path::PathBuf;

use tcpdx::{Capture, Change, Comparison, Options, compare};
use tcpdx_testkit::tshark::tshark_fields;

fn lab(scenario: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/data/lab")
        .join(scenario)
        .join("client.pcap.gz")
}

fn compared(before: &str, after: &str) -> Comparison {
    let o = Options::default();
    compare(
        &mut Capture::open(lab(before)),
        &mut Capture::open(lab(after)),
        &o,
    )
    .unwrap()
}

/// Goodput of the connections to `port` as tshark sees them: per connection and
/// direction, the highest acknowledgement number (relative, less the SYN) summed, over
/// the span from the first to the last of their frames.
fn tshark_goodput(scenario: &str, port: u16) -> f64 {
    let rows = tshark_fields(
        lab(scenario),
        &[
            "tcp.stream",
            "tcp.srcport",
            "tcp.dstport",
            "tcp.ack",
            "frame.time_epoch",
        ],
    )
    .expect("tshark is needed for this test (apt-get install tshark)");
    let mut acked: std::collections::BTreeMap<(u32, u16), u64> = Default::default();
    let (mut first, mut last) = (f64::MAX, f64::MIN);
    for r in rows {
        let (Ok(stream), Ok(sport), Ok(dport)) = (
            r[0].parse::<u32>(),
            r[1].parse::<u16>(),
            r[2].parse::<u16>(),
        ) else {
            continue;
        };
        if sport != port && dport != port {
            continue;
        }
        let t: f64 = r[4].parse().unwrap();
        first = first.min(t);
        last = last.max(t);
        if let Ok(ack) = r[3].parse::<u64>() {
            let e = acked.entry((stream, sport)).or_default();
            *e = (*e).max(ack.saturating_sub(1));
        }
    }
    assert!(last > first, "{scenario}: no frames on port {port}");
    acked.values().sum::<u64>() as f64 * 8.0 / (last - first)
}

#[track_caller]
fn within_5_percent(what: &str, ours: f64, theirs: f64) {
    let off = (ours / theirs - 1.0).abs();
    assert!(
        off <= 0.05,
        "{what}: ours {ours:.0} b/s, tshark {theirs:.0} b/s ({:.1}% off)",
        off * 100.0
    );
    println!(
        "{what}: ours {ours:.0} b/s, tshark {theirs:.0} b/s ({:.2}% off)",
        off * 100.0
    );
}

#[test]
fn quick_ack_removes_the_delayed_ack_stall_of_case000() {
    let c = compared("case000_rto_delack", "case000_rto_quickack");
    println!("{}", c.verdict);
    assert!(
        c.verdict
            .starts_with("the delayed-ACK stall after loss (delack-slowstart-stall) is gone: "),
        "{}",
        c.verdict
    );
    let k = c
        .kinds
        .iter()
        .find(|k| k.kind == "delack-slowstart-stall")
        .unwrap();
    assert!(k.before_s > 0.05 && k.after_s == 0.0, "{k:?}");
    assert_eq!(k.change, Change::Gone);
    // The two runs' RTO stalls are the same blackouts: not called a change.
    let rto = c.kinds.iter().find(|k| k.kind == "rto-stall").unwrap();
    assert_eq!(rto.change, Change::Unchanged, "{rto:?}");
    // The lab gives each run its own addresses: the service is matched by its port.
    let main = &c.services[0];
    assert_eq!(c.main_service.as_deref(), Some(main.service.as_str()));
    assert_eq!(main.matched_by, "port");
    assert!(main.service.ends_with(":15301 tcp"), "{}", main.service);
    within_5_percent(
        "case000_rto_delack",
        c.goodput_before_bps,
        tshark_goodput("case000_rto_delack", 15301),
    );
    within_5_percent(
        "case000_rto_quickack",
        c.goodput_after_bps,
        tshark_goodput("case000_rto_quickack", 15301),
    );
    let ratio = c.goodput_after_bps / c.goodput_before_bps - 1.0;
    let theirs = tshark_goodput("case000_rto_quickack", 15301)
        / tshark_goodput("case000_rto_delack", 15301)
        - 1.0;
    assert!((ratio - theirs).abs() < 0.05, "change {ratio} vs {theirs}");
}

#[test]
fn a_clean_nfs_write_removes_the_network_loss_and_shows_the_write_times() {
    let c = compared("nfs3_write_loss1pct", "nfs3_write_clean");
    println!("{}", c.verdict);
    assert!(
        c.verdict
            .starts_with("the network loss (network-loss) is gone: "),
        "{}",
        c.verdict
    );
    let main = &c.services[0];
    assert!(main.service.ends_with(":2049 nfs"), "{}", main.service);
    assert_eq!(c.main_service.as_deref(), Some(main.service.as_str()));
    let write = main.srt.iter().find(|o| o.op == "WRITE").unwrap();
    assert!(write.count_before > 0 && write.count_after > 0, "{write:?}");
    assert!(
        write.bytes_before >= 2 << 20 && write.bytes_after >= 2 << 20,
        "{write:?}"
    );
    // The verdict names the WRITE response times (two 1 MiB WRITEs a side: too few for
    // a percentile to be judged, and it says so).
    let p = |x: Option<tcpdx_report::compare::Percentiles>| x.unwrap().p95;
    let phrase = format!(
        "WRITE p95 {} -> {}",
        tcpdx_report::compare::ms(p(write.before_s)),
        tcpdx_report::compare::ms(p(write.after_s))
    );
    assert!(c.verdict.contains(&phrase), "{phrase} in {}", c.verdict);
    assert_eq!(write.change, Change::Few);
    within_5_percent(
        "nfs3_write_loss1pct",
        c.goodput_before_bps,
        tshark_goodput("nfs3_write_loss1pct", 2049),
    );
    within_5_percent(
        "nfs3_write_clean",
        c.goodput_after_bps,
        tshark_goodput("nfs3_write_clean", 2049),
    );
}

#[test]
fn a_capture_compared_with_itself_has_no_change() {
    for s in ["case000_rto_delack", "nfs3_write_loss1pct"] {
        let c = compared(s, s);
        assert!(c.verdict.starts_with("no change: "), "{s}: {}", c.verdict);
        assert!(c.worse.is_empty());
        assert_eq!(c.goodput_before_bps, c.goodput_after_bps);
        assert_eq!(c.capture_before, c.capture_after);
        assert!(!c.kinds.is_empty());
        for k in &c.kinds {
            assert_eq!(k.before_s, k.after_s, "{s}: {k:?}");
            assert_eq!(k.change, Change::Unchanged, "{s}: {k:?}");
        }
        for sv in &c.services {
            assert_eq!(sv.matched_by, "address");
            assert_eq!(sv.before, sv.after);
            assert_eq!(sv.goodput_ratio, Some(0.0));
            for o in &sv.srt {
                assert_eq!(o.before_s, o.after_s);
            }
        }
    }
}
