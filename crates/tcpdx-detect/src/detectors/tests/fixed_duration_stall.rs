//! `fixed-duration-stall` scenarios: equal silences no other cause explains, and the
//! silences a cause explains (reported under it, not as a timer stall).

use super::*;
use crate::detectors::fixed_duration_stall::{
    ACK_CLOCK_RTTS, ANSWER_WITH_ACK_NS, DELACK_MAX_NS, MIN_REPEATS, SAME_DURATION_TOLERANCE,
    STANDOUT, WAITED_RTTS, equal_durations, stands_out,
};

/// `n` requests of 200 bytes whose ACK (with the answer) comes `hold_ms[i]` later: data in
/// flight through each silence, which the answer ends (no delayed ACK: it carries data).
fn held_requests(hold_ms: &[f64]) -> Script {
    let mut t = Script::new();
    t.handshake();
    let mut at = 20.0;
    for &h in hold_ms {
        t.at_ms(at).client_sends(AUTO, 200);
        t.after_ms(h).server_sends(AUTO, 100);
        t.after_ms(1).client_acks(AUTO);
        at += h + 50.0;
    }
    t
}

#[test]
fn equal_silences_with_data_in_flight_are_a_timer_stall_from_three_on() {
    for (n, want) in [
        (MIN_REPEATS - 1, false),
        (MIN_REPEATS, true),
        (MIN_REPEATS + 1, true),
    ] {
        let d = diagnose(&held_requests(&vec![240.0; n]));
        let f = d.findings.iter().find(|f| f.kind == K::FixedDurationStall);
        assert_eq!(f.is_some(), want, "{n} silences: {:#?}", d.findings);
        if let Some(f) = f {
            assert_eq!(f.episodes as usize, n);
            assert!((f.episode_list[0].duration_s - 0.24).abs() < 1e-6);
        }
    }
}

#[test]
fn a_single_long_silence_is_never_a_timer_stall() {
    let d = diagnose(&held_requests(&[5000.0]));
    assert!(
        d.findings.iter().all(|f| f.kind != K::FixedDurationStall),
        "{:#?}",
        d.findings
    );
}

#[test]
fn equal_means_within_the_tolerance() {
    let base = 240.0;
    let at = |share: f64| held_requests(&[base, base, base * (1.0 + share)]);
    let tol = SAME_DURATION_TOLERANCE;
    for (share, want) in [(tol * 0.9, true), (tol * 1.2, false)] {
        let d = diagnose(&at(share));
        assert_eq!(
            d.findings.iter().any(|f| f.kind == K::FixedDurationStall),
            want,
            "spread {share}: {:#?}",
            d.findings
        );
    }
    assert_eq!(equal_durations(vec![100, 105, 100]), Some((3, 100)));
    assert_eq!(equal_durations(vec![100, 106, 100]), None);
}

#[test]
fn equal_server_holds_are_noted_on_the_idle_time() {
    // Requests acknowledged at once and answered after the same 240 ms each time: the
    // server held its answer (a turn of the conversation), so the time is idle time whose
    // note names the timer, not a second finding.
    let mut t = Script::new();
    t.handshake();
    for i in 0..4 {
        t.at_ms(20 + i * 260).client_sends(AUTO, 200);
        t.after_ms(5).server_acks(AUTO);
        t.after_ms(240).server_sends(AUTO, 100);
        t.after_ms(5).client_acks(AUTO);
    }
    let d = diagnose(&t);
    assert!(
        d.findings.iter().all(|f| f.kind != K::FixedDurationStall),
        "{:#?}",
        d.findings
    );
    let a = find(&d, K::ApplicationLimited);
    assert!(a.episodes >= 4, "{a:#?}");
    assert!(
        a.explanation
            .contains("4 of the server's answers came after the same"),
        "{}",
        a.explanation
    );
}

#[test]
fn the_ack_clock_is_not_a_timer_stall() {
    // Three segments each acknowledged (pure ACK) after a wait: within ACK_CLOCK_RTTS round
    // trips (10 ms) it is the ACK clock; beyond, a stall.
    for (rtts, want) in [(ACK_CLOCK_RTTS, false), (ACK_CLOCK_RTTS + 2, true)] {
        let wait = 10.0 * rtts as f64;
        let mut t = Script::new();
        t.handshake();
        let mut at = 20.0;
        for _ in 0..4 {
            t.at_ms(at).client_sends(AUTO, MSS);
            t.after_ms(0.01).client_sends(AUTO, MSS);
            t.after_ms(wait).server_acks(AUTO);
            at += wait + 1.0;
        }
        let d = diagnose(&t);
        assert_eq!(
            d.findings.iter().any(|f| f.kind == K::FixedDurationStall),
            want,
            "{rtts} round trips: {:#?}",
            d.findings
        );
    }
}

#[test]
fn the_ack_clock_seen_from_the_receiver_is_not_a_timer_stall() {
    // Captured at the receiver: two segments, the first acknowledged at once, then nothing
    // until the sender's next data (it waited for that ACK to cross the path): within
    // ACK_CLOCK_RTTS round trips (10 ms) the ACK clock, beyond a stall.
    for (rtts, want) in [(ACK_CLOCK_RTTS, false), (ACK_CLOCK_RTTS + 2, true)] {
        let wait = 10.0 * rtts as f64;
        let mut t = Script::new();
        t.handshake();
        t.at_ms(20.0);
        let mut seq = 1;
        for _ in 0..4 {
            t.client_sends(seq, MSS);
            t.after_ms(0.01).client_sends(seq + MSS, MSS);
            t.after_ms(0.5).server_acks(seq + MSS);
            seq += 2 * MSS;
            t.after_ms(wait);
        }
        t.client_sends(seq, MSS);
        t.after_ms(0.5).server_acks(seq + MSS);
        let d = diagnose(&t);
        assert_eq!(
            d.findings.iter().any(|f| f.kind == K::FixedDurationStall),
            want,
            "{rtts} round trips: {:#?}",
            d.findings
        );
    }
}

#[test]
fn a_held_ack_sent_with_the_next_request_is_a_turn_not_a_timer_stall() {
    // Request/response: the client acknowledges each answer 96 ms later (beyond the ACK
    // clock's round trips) and its next request follows that ACK: within
    // ANSWER_WITH_ACK_NS the client's turn, beyond a silence no cause explains.
    let limit = ANSWER_WITH_ACK_NS as f64 / 1e6;
    for (after_ack_ms, want) in [(limit * 0.5, false), (limit, false), (limit * 1.5, true)] {
        let mut t = Script::new();
        t.handshake();
        t.at_ms(20.0).client_sends(AUTO, 316);
        for _ in 0..4 {
            t.after_ms(5.0).server_sends(AUTO, 1797);
            t.after_ms(96.0).client_acks(AUTO);
            t.after_ms(after_ack_ms).client_sends(AUTO, 316);
        }
        t.after_ms(5.0).server_sends(AUTO, 1797);
        t.after_ms(1.0).client_acks(AUTO);
        let d = diagnose(&t);
        assert_eq!(
            d.findings.iter().any(|f| f.kind == K::FixedDurationStall),
            want,
            "next request {after_ack_ms} ms after the ACK: {:#?}",
            d.findings
        );
    }
}

#[test]
fn a_held_ack_nobody_waited_for_is_not_a_timer_stall() {
    // Each pair of segments acknowledged 70 ms later (beyond the ACK clock's round trips):
    // a stall if the sender sends again within WAITED_RTTS round trips (10 ms) of the ACK;
    // later, it had nothing waiting on that ACK (its application's pause).
    for (rtts, want) in [(WAITED_RTTS, true), (WAITED_RTTS + 1, false)] {
        let resume = 10.0 * rtts as f64;
        let mut t = Script::new();
        t.handshake();
        t.at_ms(20.0);
        for _ in 0..4 {
            t.client_sends(AUTO, MSS);
            t.after_ms(0.01).client_sends(AUTO, MSS);
            t.after_ms(70.0).server_acks(AUTO);
            t.after_ms(resume);
        }
        t.client_sends(AUTO, MSS);
        t.after_ms(1.0).server_acks(AUTO);
        let d = diagnose(&t);
        assert_eq!(
            d.findings.iter().any(|f| f.kind == K::FixedDurationStall),
            want,
            "sender again {rtts} round trips after the ACK: {:#?}",
            d.findings
        );
    }
}

#[test]
fn a_cluster_must_stand_out_of_the_connections_other_silences() {
    let m = 100;
    assert!(stands_out(m, &mut []));
    let other = (m as f64 / STANDOUT) as i64;
    assert!(stands_out(m, &mut [other, other, other]));
    assert!(!stands_out(m, &mut [other + 1, other + 1, other + 1]));
}

#[test]
fn the_clients_own_pauses_are_idle_time_not_a_timer_stall() {
    // The client sends every 250 ms with nothing in flight in between (a poll interval).
    let mut t = Script::new();
    t.handshake();
    for i in 0..4 {
        t.at_ms(20 + i * 250).client_sends(AUTO, 200);
        t.after_ms(10).server_acks(AUTO);
    }
    let d = diagnose(&t);
    assert!(
        !d.findings.iter().any(|f| f.kind == K::FixedDurationStall),
        "{:#?}",
        d.findings
    );
    let a = find(&d, K::ApplicationLimited);
    assert_eq!(a.episodes, 3);
    // Idle time is what exceeds one round trip per turn; little data moved: information.
    assert!(
        (a.cost.seconds - 3.0 * 0.23).abs() < 1e-6,
        "{}",
        a.cost.seconds
    );
    assert_eq!(a.severity, Severity::Info);
}

#[test]
fn a_clients_next_request_carrying_its_ack_is_its_turn_not_a_timer_stall() {
    // Captured next to the server: each answer is acknowledged by the client's next
    // request, the same 60 ms later each time (the round trip and the client's think
    // time): the client's turn. The server holding its answers as long is still a
    // silence no other cause explains (`equal_silences_with_data_in_flight_...`).
    let mut t = Script::new();
    t.handshake();
    t.at_ms(20.0).client_sends(AUTO, 139);
    for _ in 0..4 {
        t.after_ms(8.0).server_sends(AUTO, 696);
        t.after_ms(60.0).client_sends(AUTO, 139);
    }
    t.after_ms(8.0).server_sends(AUTO, 696);
    t.after_ms(1.0).client_acks(AUTO);
    let d = diagnose(&t);
    assert!(
        d.findings.iter().all(|f| f.kind != K::FixedDurationStall),
        "{:#?}",
        d.findings
    );
}

/// Four rounds of 4 segments acknowledged at once, each followed 20 ms later by one
/// segment sent alone that the receiver acknowledges `ack_ms` later.
fn lone_segments_acked_after(ack_ms: f64, lone: bool) -> Script {
    let mut t = Script::new();
    t.handshake();
    t.after_ms(1);
    for _ in 0..4 {
        let seq = t.next_seq(Dir::C2S);
        t.client_burst(seq, 4, MSS);
        t.after_ms(0.5).server_acks(AUTO);
        t.after_ms(20.0).client_sends(AUTO, MSS);
        if !lone {
            t.after_ms(0.01).client_sends(AUTO, MSS);
        }
        t.after_ms(ack_ms).server_acks(AUTO);
        t.after_ms(20.0);
    }
    t
}

#[test]
fn a_delayed_ack_of_a_lone_segment_is_not_a_timer_stall() {
    // A segment sent alone after a silence has nothing to pair with: the receiver holds
    // its ACK for its delayed-ACK timer, up to DELACK_MAX_NS; longer, or with two
    // segments to acknowledge, equal waits are a silence no other cause explains.
    let max = DELACK_MAX_NS as f64 / 1e6;
    for (ack_ms, lone, want) in [
        (49.4, true, false),
        (max, true, false),
        (max * 1.1, true, true),
        (49.4, false, true),
    ] {
        let d = diagnose(&lone_segments_acked_after(ack_ms, lone));
        assert_eq!(
            d.findings.iter().any(|f| f.kind == K::FixedDurationStall),
            want,
            "ACK {ack_ms} ms after a lone ({lone}) segment: {:#?}",
            d.findings
        );
    }
}
