//! `rto-stall` scenarios.

use super::*;

#[test]
fn rto_stall_from_the_silence_to_the_timeout_retransmission() {
    let mut t = Script::new();
    t.handshake();
    t.at_ms(20).client_sends(1, MSS); // 4: lost, tail of the flight
    t.at_ms(320).client_sends(1, MSS); // 5: timeout retransmission
    t.at_ms(330).server_acks(AUTO); // 6
    let d = diagnose(&t);
    let f = find(&d, K::RtoStall);
    assert_eq!(f.episodes, 1);
    assert!((f.cost.seconds - 0.3).abs() < 1e-6, "{}", f.cost.seconds);
    assert!(roles(f).contains(&(5, "timeout retransmission")));
    assert!(f.severity >= Severity::Major);
}

/// Next to the receiver (the server): a flight, then everything after it lost upstream of
/// the capture; the silence ends with the sender's timeout retransmission, which the capture
/// sees as new data; after its delayed ACK, the sender's new data reveals the hole.
fn silent_timeout_at_the_receiver(t: &mut Script, ack_delay_ms: f64) {
    t.syn();
    t.after_ms(0.05).syn_ack();
    t.after_ms(10).handshake_ack(); // 1-3: RTT 10 ms, all on the client's side
    t.at_ms(20).client_burst(1, 4, MSS); // 4-7
    t.after_ms(0.05).server_acks(AUTO); // 8: everything the capture saw is acknowledged
    // 10 more segments were sent and lost before the capture; 300 ms of silence.
    let restart = t.next_seq(Dir::C2S);
    t.after_ms(300).client_sends(restart, MSS); // 9: timeout retransmission, looks new
    t.after_ms(ack_delay_ms).server_acks(AUTO); // 10: its (delayed) ACK
    t.after_ms(10).client_sends(restart + 11 * MSS, MSS); // 11: new data beyond the hole
    t.after_ms(0.05)
        .server_acks(restart + MSS)
        .sack(&[(restart + 11 * MSS, restart + 12 * MSS)]);
    for i in 1..11 {
        t.after_ms(0.1).client(SegSpec {
            seq: restart + i * MSS,
            len: MSS,
            ..C2S_DATA
        });
    }
    t.after_ms(0.05).server_acks(AUTO);
}

#[test]
fn a_silence_at_the_receiver_with_a_hole_after_it_is_a_timeout_not_idle_time() {
    let mut t = Script::new();
    silent_timeout_at_the_receiver(&mut t, 40.0);
    let d = diagnose(&t);
    assert_eq!(
        d.connections[0].capture_point,
        crate::CapturePoint::NearServer
    );
    let f = find(&d, K::RtoStall);
    assert_eq!(f.episodes, 1);
    assert!((f.cost.seconds - 0.3).abs() < 0.001, "{}", f.cost.seconds);
    assert!(
        f.explanation.contains("inferred from the outside"),
        "{}",
        f.explanation
    );
    assert!(roles(f).contains(&(9, "timeout retransmission")));
    let p = find(&d, K::DelackSlowstartStall);
    assert_eq!(roles(p), vec![(9, "lone segment"), (10, "delayed ACK")]);
    assert!(d.findings.iter().all(|f| f.kind != K::ApplicationLimited));
    assert_eq!(d.findings[0].kind, K::RtoStall);
}

#[test]
fn idle_time_then_a_small_upstream_loss_stays_idle_time() {
    let mut t = Script::new();
    t.syn();
    t.after_ms(0.05).syn_ack();
    t.after_ms(10).handshake_ack();
    t.at_ms(20).client_burst(1, 4, MSS);
    t.after_ms(0.05).server_acks(AUTO);
    // The application pauses 300 ms, then writes a burst whose second segment is lost
    // before the capture.
    let next = t.next_seq(Dir::C2S);
    t.after_ms(300).client_sends(next, MSS);
    t.after_ms(0.1).client_sends(next + 2 * MSS, MSS);
    t.after_ms(0.05)
        .server_acks(next + MSS)
        .sack(&[(next + 2 * MSS, next + 3 * MSS)]);
    t.after_ms(10).client(SegSpec {
        seq: next + MSS,
        len: MSS,
        ..C2S_DATA
    });
    t.after_ms(0.05).server_acks(AUTO);
    let d = diagnose(&t);
    assert!(
        d.findings.iter().all(|f| f.kind != K::RtoStall),
        "{:#?}",
        d.findings
    );
    find(&d, K::ApplicationLimited);
}

/// A segment resent after a silence, then the ACK of everything `reply_ms` after the
/// resend, on a 10 ms path captured next to the sender. Sooner than 0.8 of the round trip
/// it cannot answer the resend: the receiver's late answer to the original ended the
/// silence (lab seed 2054: an SMB request probed after 256 ms, the reply 12.6 ms later on a
/// 24 ms path), and no timer cost anything.
#[test]
fn an_ack_too_early_to_answer_the_resend_ends_no_timeout() {
    for (reply_ms, rtos) in [(7.9, 0), (8.0, 1), (8.1, 1)] {
        let mut t = Script::new();
        t.handshake();
        t.at_ms(20).client_sends(1, MSS); // 4
        t.after_ms(10).server_acks(AUTO); // 5: the round trip, 10 ms
        t.at_ms(40).client_sends(1 + MSS, MSS); // 6
        t.at_ms(340).client_sends(1 + MSS, MSS); // 7: resent after 300 ms
        t.after_ms(reply_ms).server_acks(AUTO); // 8
        let d = diagnose(&t);
        let n = d.findings.iter().filter(|f| f.kind == K::RtoStall).count();
        assert_eq!(n, rtos, "ACK {reply_ms} ms after the resend");
    }
}
