//! `handshake-and-setup` scenarios.

use super::*;

#[test]
fn syn_retransmission_is_a_setup_problem() {
    let mut t = Script::new();
    t.syn(); // 1
    t.at_ms(1000).syn(); // 2
    t.after_ms(10).syn_ack();
    t.handshake_ack();
    t.after_ms(5).client_sends(1, 100);
    t.after_ms(10).server_acks(AUTO);
    let d = diagnose(&t);
    let f = find(&d, K::HandshakeAndSetup);
    assert!((f.cost.seconds - 1.0).abs() < 1e-6);
    assert_eq!(roles(f), vec![(1, "first SYN"), (2, "SYN retransmission")]);
}

#[test]
fn syn_retransmissions_are_one_finding_not_a_timeout_and_a_loss_too() {
    let mut t = Script::new();
    t.syn(); // 1
    t.at_ms(1000).syn(); // 2
    t.at_ms(3000).syn(); // 3
    t.after_ms(10).syn_ack();
    t.handshake_ack();
    t.after_ms(5).client_sends(1, 100);
    t.after_ms(10).server_acks(AUTO);
    let d = diagnose(&t);
    let kinds: Vec<K> = d.findings.iter().map(|f| f.kind).collect();
    assert!(
        !kinds.contains(&K::RtoStall) && !kinds.contains(&K::NetworkLoss),
        "{:#?}",
        d.findings
    );
    let f = find(&d, K::HandshakeAndSetup);
    assert!((f.cost.seconds - 3.0).abs() < 1e-6, "{}", f.cost.seconds);
    assert_eq!(f.episode_list.len(), 1);
    // The 3 s wait is a whole known timer.
    assert!(
        f.explanation.contains("a whole 3 s: a timer"),
        "{}",
        f.explanation
    );
    let total: f64 = d.findings.iter().map(|f| f.cost.seconds).sum();
    assert!(total <= d.time_budget.seconds + 1e-9);
}

/// A bulk transfer (over 1 MB) in segments of `mss` bytes, announced in the SYNs: 50 rounds
/// of 40 segments, each acknowledged 10 ms later.
fn bulk_with_mss(mss: u16) -> Diagnosis {
    let mut t = Script::with(tcpdx_testkit::ScriptConfig {
        mss,
        ..tcpdx_testkit::ScriptConfig::DEFAULT
    });
    t.handshake();
    t.at_ms(20.0);
    for _ in 0..50 {
        let seq = t.next_seq(Dir::C2S);
        t.client_burst(seq, 40, u32::from(mss));
        t.after_ms(10).server_acks(AUTO);
    }
    diagnose(&t)
}

#[test]
fn advice_that_cost_nothing_is_information() {
    // A small MSS on a bulk transfer is worth knowing, but it cost no time here.
    let small = crate::detectors::handshake_and_setup::SMALL_MSS - 1;
    let d = bulk_with_mss(small);
    let f = find(&d, K::HandshakeAndSetup);
    assert!(f.explanation.contains("small MSS"), "{}", f.explanation);
    assert_eq!(f.cost.seconds, 0.0);
    assert_eq!(f.severity, Severity::Info, "{f:#?}");
    assert!(
        d.findings
            .iter()
            .all(|f| f.severity == Severity::Info || f.cost.seconds > 0.0),
        "{:#?}",
        d.findings
    );
    // At the bound the MSS is not small at all.
    let d = bulk_with_mss(crate::detectors::handshake_and_setup::SMALL_MSS);
    assert!(d.findings.iter().all(|f| f.kind != K::HandshakeAndSetup));
}
