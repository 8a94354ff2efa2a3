//! `nagle-delack-stall` scenarios.

use super::*;

/// Request/response turns of `n` requests of one full segment plus a 552-byte tail; the
/// server's ACK of the first segment comes `ack_ms` later (pure ACK, or with the answer).
fn nagle_turns(t: &mut Script, n: u32, ack_ms: f64, answer_carries_ack: bool) {
    for _ in 0..n {
        t.after_ms(0.01).client_sends(AUTO, MSS); // the full segment
        if answer_carries_ack {
            t.after_ms(ack_ms).server_sends(AUTO, 300); // answer + ACK, no tail pending
            t.after_ms(0.01).client_sends(AUTO, 552); // the next, unrelated small write
            t.after_ms(10).server_acks(AUTO);
        } else {
            t.after_ms(ack_ms).server_acks(AUTO); // the delayed ACK
            t.after_ms(0.01).client_sends(AUTO, 552); // the tail Nagle held
            t.after_ms(10).server_sends(AUTO, 300); // the answer carries the ACK
        }
    }
}

#[test]
fn nagle_tail_released_by_a_delayed_ack() {
    let mut t = Script::new();
    t.handshake(); // 1-3, RTT 10 ms
    t.at_ms(20);
    nagle_turns(&mut t, 3, 210.0, false); // 4-6 lone, delayed ACK, tail; 7 answer; ...
    let d = diagnose(&t);
    let f = find(&d, K::NagleDelackStall);
    assert_eq!(f.episodes, 3);
    assert_eq!(
        roles(f)[..3],
        [
            (4, "segment whose ACK was delayed"),
            (5, "delayed ACK"),
            (6, "small segment held by Nagle")
        ]
    );
    // Hold: 210 ms minus the 10 ms round trip, per turn.
    assert!((f.cost.seconds - 0.6).abs() < 0.002, "{}", f.cost.seconds);
    assert!(f.recommendations[0].contains("TCP_NODELAY"));
    assert!(f.recommendations[1].contains("TcpAckFrequency"));
    assert!(d.findings.iter().all(|f| f.kind != K::FixedDurationStall));
    assert!(d.findings.iter().all(|f| f.kind != K::DelackSlowstartStall));
    assert!(d.time_budget.states.get(crate::State::DelayedAckStall) > 0.6);
}

#[test]
fn no_nagle_stall_when_the_answer_carries_the_ack() {
    let mut t = Script::new();
    t.handshake();
    t.at_ms(20);
    nagle_turns(&mut t, 3, 210.0, true);
    let d = diagnose(&t);
    assert!(d.findings.iter().all(|f| f.kind != K::NagleDelackStall));
}

#[test]
fn no_nagle_stall_when_the_ack_is_prompt() {
    let mut t = Script::new();
    t.handshake();
    t.at_ms(20);
    nagle_turns(&mut t, 3, 10.0, false); // one RTT: the receiver did not hold it
    let d = diagnose(&t);
    assert!(d.findings.iter().all(|f| f.kind != K::NagleDelackStall));
}

#[test]
fn no_nagle_stall_when_the_small_segment_comes_later() {
    let mut t = Script::new();
    t.handshake();
    t.at_ms(20).client_sends(AUTO, MSS);
    t.after_ms(210).server_acks(AUTO);
    t.after_ms(50).client_sends(AUTO, 552); // the application wrote it later
    t.after_ms(10).server_acks(AUTO);
    let d = diagnose(&t);
    assert!(d.findings.iter().all(|f| f.kind != K::NagleDelackStall));
}

/// Request/response turns whose request (a small lone write and its tail) Nagle splits,
/// answered by two full segments: the main data flows to the client, the held writes are the
/// client's.
fn nagle_requests(t: &mut Script, n: u32, ack_ms: f64) {
    for _ in 0..n {
        t.after_ms(0.01).client_sends(AUTO, 86); // the first write
        t.after_ms(ack_ms).server_acks(AUTO); // the delayed ACK
        t.after_ms(0.01).client_sends(AUTO, 87); // the tail Nagle held
        t.after_ms(10).server_sends(AUTO, MSS); // the answer
        t.after_ms(0.01).server_sends(AUTO, MSS);
        t.after_ms(10).client_acks(AUTO);
    }
}

#[test]
fn nagle_stall_of_the_requests_when_the_answers_are_the_main_data() {
    let mut t = Script::new();
    t.handshake(); // RTT 10 ms
    t.at_ms(20);
    nagle_requests(&mut t, 4, 50.0);
    let d = diagnose(&t);
    let f = find(&d, K::NagleDelackStall);
    assert_eq!(f.episodes, 4);
    // Hold: 50 ms minus the 10 ms round trip, per turn.
    assert!((f.cost.seconds - 0.16).abs() < 0.002, "{}", f.cost.seconds);
    // Named after the client, whose writes were held.
    assert!(
        f.recommendations[0].contains("On the sender (10.0.0.1:"),
        "{:?}",
        f.recommendations
    );
    assert!(f.explanation.starts_with("4 time(s) "), "{}", f.explanation);
    assert!(d.findings.iter().all(|f| f.kind != K::FixedDurationStall));
}

#[test]
fn no_nagle_stall_of_the_requests_when_the_ack_is_prompt() {
    let mut t = Script::new();
    t.handshake();
    t.at_ms(20);
    nagle_requests(&mut t, 4, 10.0);
    let d = diagnose(&t);
    assert!(d.findings.iter().all(|f| f.kind != K::NagleDelackStall));
}
