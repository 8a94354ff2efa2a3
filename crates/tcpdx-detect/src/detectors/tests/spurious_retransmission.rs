//! `spurious-retransmission` scenarios.

use super::*;

#[test]
fn spurious_retransmission_proved_by_an_early_ack_and_a_dsack() {
    let mut t = Script::new();
    t.handshake();
    t.at_ms(20).client_burst(1, 4, MSS); // 4-7: 4 delayed by reordering
    t.at_ms(30)
        .server_acks(1)
        .sack(&[(1449, 5793)])
        .times_every_ms(3, 0.01); // 8-10
    t.after_ms(0.1).client(SegSpec {
        seq: 1,
        len: MSS,
        ..C2S_DATA
    }); // 11: fast retransmission
    t.after_ms(0.5).server_acks(5793); // 12: the late original arrived
    t.after_ms(10).server_acks(5793).sack(&[(1, 1449)]); // 13: D-SACK
    let d = diagnose(&t);
    let f = find(&d, K::SpuriousRetransmission);
    assert_eq!(f.episodes, 1);
    assert!(roles(f).contains(&(11, "spurious retransmission")));
    assert!(d.findings.iter().all(|f| f.kind != K::NetworkLoss));
}

#[test]
fn reordering_without_retransmission_is_only_info() {
    let mut t = Script::new();
    t.handshake();
    t.at_ms(20).client_burst(1, 4, MSS);
    t.at_ms(30).server_acks(1).sack(&[(1449, 5793)]); // one duplicate-ACK signal
    t.after_ms(0.2).server_acks(5793); // the hole filled by itself
    let d = diagnose(&t);
    let f = find(&d, K::Reordering);
    assert_eq!(f.severity, Severity::Info);
}
