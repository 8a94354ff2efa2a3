//! `network-loss` scenarios.

use super::*;

#[test]
fn the_ack_of_a_repaired_hole_does_not_time_the_path() {
    // Karn's rule: the ACK that a repaired hole releases comes a round trip after the
    // repair, but long after the data above the hole (its ACK delay, 21 ms here, is no round
    // trip); taken as the path's, it made that ACK look too early for the repair, a
    // "spurious" retransmission (tests/data/fast-retransmission.pcapng said so).
    let mut t = Script::new();
    t.handshake();
    t.at_ms(20).client_burst(1, 6, MSS); // 4-9: 4 lost after the capture point
    t.at_ms(30)
        .server_acks(1)
        .sack(&[(1449, 8689)])
        .times_every_ms(4, 0.0); // 10-13
    t.after_ms(0.1).client(SegSpec {
        seq: 1,
        len: MSS,
        ..C2S_DATA
    }); // 14: fast retransmission
    t.after_ms(10.9).server_acks(8689); // 15: a round trip after the repair
    t.after_ms(1.0).client_burst(8689, 2, MSS); // 16-17
    t.after_ms(10).server_acks(AUTO); // 18: a round trip that times the path (10 ms)
    let d = diagnose(&t);
    assert!(
        d.findings
            .iter()
            .all(|f| f.kind != K::SpuriousRetransmission),
        "{:#?}",
        d.findings
    );
    let f = find(&d, K::NetworkLoss);
    assert!(
        roles(f).iter().any(|&(frame, _)| frame == 14),
        "{:?}",
        roles(f)
    );
}
