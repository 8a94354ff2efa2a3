//! `delack-slowstart-stall` scenarios.

use super::*;

#[test]
fn delack_slowstart_stall_has_the_four_signatures_of_case_000() {
    let mut t = Script::new();
    t.handshake(); // 1-3
    t.at_ms(20).client_burst(1, 5, MSS); // 4-8: A..E, B (5) lost after the capture
    t.at_ms(30).server_acks(1449); // 9: ACK of A
    t.after_ms(0.01)
        .server_acks(1449)
        .sack(&[(2897, 7241)])
        .times(3); // 10-12
    t.after_ms(0.1).client(SegSpec {
        seq: 1449,
        len: MSS,
        ..C2S_DATA
    }); // 13: fast retransmission of B
    t.after_ms(10).server_acks(7241); // 14: caught up
    t.after_ms(0.1).client_sends(AUTO, MSS); // 15: slow start, one segment
    t.after_ms(110).server_acks(AUTO); // 16: delayed ACK, 100 ms beyond the RTT
    round(&mut t, 2);
    round(&mut t, 4);
    let d = diagnose(&t);
    let f = find(&d, K::DelackSlowstartStall);
    assert_eq!(f.episodes, 1);
    assert_eq!(
        roles(f),
        vec![
            (12, "third duplicate ACK"),
            (13, "fast retransmission"),
            (15, "lone segment"),
            (16, "delayed ACK")
        ]
    );
    assert!((f.cost.seconds - 0.1).abs() < 0.002, "{}", f.cost.seconds);
    assert!(f.explanation.contains("ESXi"), "{}", f.explanation);
    assert!(f.recommendations[0].contains("/SunRPC/SetNoDelayedAck"));
    assert!(f.recommendations[0].contains("quickack 1"));
    assert!(f.recommendations[0].contains("TcpAckFrequency"));
    let without = f.cost.goodput_without_bps.unwrap();
    assert!(without > d.connections[0].path_bps.min(1.0));
}

#[test]
fn no_delack_stall_when_the_receiver_acks_at_once() {
    let mut t = Script::new();
    t.handshake();
    t.at_ms(20).client_burst(1, 5, MSS);
    t.at_ms(30).server_acks(1449);
    t.after_ms(0.01)
        .server_acks(1449)
        .sack(&[(2897, 7241)])
        .times(3);
    t.after_ms(0.1).client(SegSpec {
        seq: 1449,
        len: MSS,
        ..C2S_DATA
    });
    t.after_ms(10).server_acks(7241);
    t.after_ms(0.1).client_sends(AUTO, MSS);
    t.after_ms(10).server_acks(AUTO); // immediate ACK: one RTT
    let d = diagnose(&t);
    assert!(d.findings.iter().all(|f| f.kind != K::DelackSlowstartStall));
    // The loss itself is still reported, after the capture point next to the sender.
    let f = find(&d, K::NetworkLoss);
    assert_eq!(f.episodes, 1);
    assert!(
        f.explanation.contains("after the capture point"),
        "{}",
        f.explanation
    );
}

/// Case 000's episode, the sender's next segment `answer_ms` after the delayed ACK (the
/// capture next to the sender). A sender waiting for that ACK answers it at once; one that
/// sends later was held by something else (the receiver's window, its application: lab
/// seeds 1113, 2092, 3060, 3061) and the hold was no stall of it.
#[test]
fn the_delayed_ack_stalls_the_sender_only_if_it_answers_at_once() {
    for (answer_ms, episodes) in [(0.9, 1), (1.0, 1), (1.1, 0)] {
        let mut t = Script::new();
        t.handshake();
        t.at_ms(20).client_burst(1, 5, MSS);
        t.at_ms(30).server_acks(1449);
        t.after_ms(0.01)
            .server_acks(1449)
            .sack(&[(2897, 7241)])
            .times(3);
        t.after_ms(0.1).client(SegSpec {
            seq: 1449,
            len: MSS,
            ..C2S_DATA
        });
        t.after_ms(10).server_acks(7241);
        t.after_ms(0.1).client_sends(AUTO, MSS); // the lone segment
        t.after_ms(110).server_acks(AUTO); // its delayed ACK
        t.after_ms(answer_ms).client_sends(AUTO, MSS);
        t.after_ms(10).server_acks(AUTO);
        let d = diagnose(&t);
        let n = (d.findings.iter())
            .filter(|f| f.kind == K::DelackSlowstartStall)
            .map(|f| f.episodes)
            .sum::<u32>();
        assert_eq!(n, episodes, "answered {answer_ms} ms after the ACK");
    }
}
