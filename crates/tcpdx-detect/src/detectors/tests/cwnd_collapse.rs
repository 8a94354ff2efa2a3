//! `cwnd-collapse` scenarios.

use super::*;

#[test]
fn cwnd_collapse_after_a_burst_loss_and_an_additive_ramp() {
    let mut t = Script::new();
    t.handshake();
    t.at_ms(20);
    for n in [8, 16, 32] {
        round(&mut t, n);
    }
    // A burst of 40: the first 10 are lost after the capture point.
    let base = t.next_seq(Dir::C2S);
    t.client_burst(base, 40, MSS);
    let (hole_end, top) = (base + 10 * MSS, base + 40 * MSS);
    t.after_ms(10)
        .server_acks(base)
        .sack(&[(hole_end, top)])
        .times_every_ms(3, 0.01);
    for i in 0..10 {
        t.after_ms(0.01).client(SegSpec {
            seq: base + i * MSS,
            len: MSS,
            ..C2S_DATA
        });
    }
    t.after_ms(10).server_acks(top);
    // Restart low, then +1 segment per round trip.
    for n in 4..=12 {
        round(&mut t, n);
    }
    let d = diagnose(&t);
    let f = find(&d, K::CwndCollapse);
    assert_eq!(f.episodes, 1);
    assert!(f.cost.seconds > 0.0);
    assert!(f.recommendations[0].contains("bbr"));
    assert!(
        f.explanation.contains("grew by only 1.0 per round"),
        "{}",
        f.explanation
    );
}

/// Slow start, then congestion avoidance into a queue: rounds of `before` segments whose
/// round trip is `queue_rtt_ms` (10 ms empty); one segment lost after the capture point and
/// repaired by fast retransmission; then rounds growing by one segment from `after`.
fn single_loss(queue_rtt_ms: f64, before: u32, after: u32) -> Diagnosis {
    let mut t = Script::new();
    t.handshake();
    t.at_ms(20);
    for n in [8, 16, 32] {
        round(&mut t, n);
    }
    for n in before - 4..before {
        let seq = t.next_seq(Dir::C2S);
        t.client_burst(seq, n, MSS);
        t.after_ms(queue_rtt_ms).server_acks(AUTO);
    }
    let base = t.next_seq(Dir::C2S);
    t.client_burst(base, before, MSS);
    let top = base + before * MSS;
    t.after_ms(queue_rtt_ms)
        .server_acks(base)
        .sack(&[(base + MSS, top)])
        .times_every_ms(3, 0.01);
    t.after_ms(0.01).client(SegSpec {
        seq: base,
        len: MSS,
        ..C2S_DATA
    });
    t.after_ms(10).server_acks(top);
    for n in after..after + 12 {
        round(&mut t, n);
    }
    diagnose(&t)
}

#[test]
fn cwnd_collapse_after_one_overflow_of_a_shallow_queue() {
    // The round trip grew from 10 to 13 ms as the queue filled; the window halves to 22,
    // far below the path's BDP, and regrows by one segment per round.
    let d = single_loss(13.0, 44, 22);
    let f = find(&d, K::CwndCollapse);
    assert_eq!(f.episodes, 1);
    assert!(
        f.explanation.contains("queue overflowed"),
        "{}",
        f.explanation
    );
    assert_eq!(d.findings[0].kind, K::CwndCollapse, "{:#?}", d.findings);
    // Its cost is not counted twice.
    let loss = find(&d, K::NetworkLoss);
    assert!(loss.cost.seconds < 1e-9, "{:?}", loss.cost);
}

#[test]
fn no_cwnd_collapse_after_a_random_loss_without_a_queue() {
    // Same cut, but the round trip never grew: a random loss, not an overflow.
    let d = single_loss(10.0, 44, 22);
    assert!(
        !d.findings.iter().any(|f| f.kind == K::CwndCollapse),
        "{:#?}",
        d.findings
    );
    assert!(find(&d, K::NetworkLoss).cost.seconds > 0.0);
    // Nor after a restart from one segment (slow start again, not a multiplicative cut).
    let d = single_loss(13.0, 44, 1);
    assert!(
        !d.findings.iter().any(|f| f.kind == K::CwndCollapse),
        "{:#?}",
        d.findings
    );
}
