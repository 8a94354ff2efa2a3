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

/// One segment of a 32-segment flight lost and repaired by fast retransmission, then rounds
/// of 4 segments (far below the window before the loss), one of them lasting `pause_ms`
/// (its ACK held that long: a pause, not the window).
fn loss_then_pause(pause_ms: f64) -> Diagnosis {
    let mut t = Script::new();
    t.handshake();
    t.at_ms(20);
    for n in [8, 16, 32] {
        round(&mut t, n);
    }
    let base = t.next_seq(Dir::C2S);
    t.client_burst(base, 32, MSS);
    let top = base + 32 * MSS;
    t.after_ms(10)
        .server_acks(base)
        .sack(&[(base + MSS, top)])
        .times_every_ms(3, 0.01);
    t.after_ms(0.01).client(SegSpec {
        seq: base,
        len: MSS,
        ..C2S_DATA
    });
    t.after_ms(10).server_acks(top);
    round(&mut t, 4);
    let seq = t.next_seq(Dir::C2S);
    t.client_burst(seq, 4, MSS);
    t.after_ms(pause_ms).server_acks(AUTO);
    round(&mut t, 4);
    diagnose(&t)
}

#[test]
fn a_pause_after_a_loss_is_not_a_window_deficit() {
    let rtt_ms = 10.0;
    let max = crate::detectors::DEFICIT_ROUND_MAX_RTTS as f64 * rtt_ms;
    let cost = |pause: f64| {
        let d = loss_then_pause(pause);
        find(&d, K::NetworkLoss).cost.seconds
    };
    let (short, below, above, long) = (
        cost(max * 0.5),
        cost(max * 0.9),
        cost(max * 1.2),
        cost(2000.0),
    );
    // Within the bound a longer round is a longer deficit; beyond it the round is a
    // pause and adds nothing to the loss's cost.
    assert!(below > short + 0.005, "{below} vs {short}");
    assert!(above < below - 0.005, "{above} vs {below}");
    assert!((long - above).abs() < 1e-3, "{long} vs {above}");
}
