//! `path-limited` scenarios.

use super::*;

#[test]
fn a_clean_transfer_is_limited_by_the_path_and_nothing_else() {
    let mut t = Script::new();
    t.handshake();
    t.at_ms(20);
    for n in [4, 8, 16, 32] {
        round(&mut t, n);
    }
    t.after_ms(1).fin_from_client();
    t.after_ms(10).fin_from_server();
    t.after_ms(0.1).server_acks(AUTO);
    let d = diagnose(&t);
    assert!(
        d.findings.iter().all(|f| f.severity == Severity::Info),
        "{:#?}",
        d.findings
    );
    let f = find(&d, K::PathLimited);
    assert!(f.explanation.contains("Healthy"));
    let c = &d.connections[0];
    assert_eq!(c.max_packets_per_round, 32);
    assert!(c.slow_start_rounds >= 2, "{c:?}");
    // The budget adds up to the lifetime.
    let b = &d.time_budget;
    assert!((b.states.total() - b.seconds).abs() < 1e-9);
}
