//! `application-limited` scenarios: idle time with nothing in flight, the server holding
//! its replies, and the silences that only look idle (the ACK clock seen next to the
//! receiver, a connection held open or closing).

use super::*;
use crate::budget::State;
use crate::detectors::application_limited::IDLE_MIN_SHARE;
use crate::infer::idle::ACK_CLOCK_TURNS;

/// A bulk sender (the client) in rounds of 4 segments, each acknowledged at once; the
/// next round follows the ACK after 10 ms (the round trip), except `long` times after
/// `wait_ms`. `at_receiver`: captured next to the server (the data's receiver).
fn rounds_with_waits(at_receiver: bool, long: usize, wait_ms: f64) -> Script {
    let mut t = Script::new();
    if at_receiver {
        t.syn();
        t.syn_ack();
        t.after_ms(10).handshake_ack();
    } else {
        t.handshake();
    }
    t.after_ms(1);
    for i in 0..30 + long {
        let seq = t.next_seq(Dir::C2S);
        t.client_burst(seq, 4, MSS);
        t.after_ms(0.1).server_acks(AUTO);
        t.after_ms(if i % 4 == 3 && i / 4 < long {
            wait_ms
        } else {
            10.0
        });
    }
    t
}

#[test]
fn the_ack_clock_seen_next_to_the_receiver_is_not_idle_time() {
    // Next to the receiver, everything acknowledged is no idle sender: its next data
    // answers the ACK a turnaround (here 10 ms) later, and waits of up to ACK_CLOCK_TURNS
    // turnarounds are that ACK on its way (a loaded path stretches it).
    let bound = 10.0 * ACK_CLOCK_TURNS as f64;
    for (wait, want) in [(bound - 5.0, false), (bound, false), (bound + 5.0, true)] {
        let d = diagnose(&rounds_with_waits(true, 7, wait));
        let f = d.findings.iter().find(|f| f.kind == K::ApplicationLimited);
        assert_eq!(f.is_some(), want, "waits of {wait} ms: {:#?}", d.findings);
        if let Some(f) = f {
            // The rest beyond one turnaround is idle, each time.
            assert_eq!(f.episodes, 7);
            assert!(
                (f.episode_list[0].duration_s - (wait - 10.0) / 1e3).abs() < 1e-4,
                "{f:#?}"
            );
        }
    }
}

#[test]
fn the_budget_counts_the_ack_clock_seen_next_to_the_receiver_as_the_finding_does() {
    // One rule for both: the budget paints no idle time for waits up to ACK_CLOCK_TURNS
    // turnarounds, and for longer ones the rest beyond one turnaround, as the finding
    // prices them (before, it painted every wait less the handshake's round trip).
    let bound = 10.0 * ACK_CLOCK_TURNS as f64;
    for (wait, want_ms) in [
        (bound - 5.0, 0.0),
        (bound, 0.0),
        (bound + 5.0, 7.0 * (bound + 5.0 - 10.0)),
    ] {
        let d = diagnose(&rounds_with_waits(true, 7, wait));
        let idle = d.time_budget.states.get(State::ApplicationIdle)
            + d.time_budget.states.get(State::ServerThinkTime);
        assert!(
            (idle - want_ms / 1e3).abs() < 1e-3,
            "waits of {wait} ms: budget idle {idle} s, want {want_ms} ms"
        );
        if let Some(f) = d.findings.iter().find(|f| f.kind == K::ApplicationLimited) {
            let priced: f64 = f.episode_list.iter().map(|e| e.duration_s).sum();
            assert!((priced - idle).abs() < 1e-6, "{f:#?}");
        }
    }
}

#[test]
fn the_budget_counts_the_same_waits_next_to_the_sender_as_idle_time() {
    let wait = 10.0 * ACK_CLOCK_TURNS as f64;
    let d = diagnose(&rounds_with_waits(false, 7, wait));
    let idle = d.time_budget.states.get(State::ApplicationIdle);
    assert!((idle - 7.0 * (wait - 10.0) / 1e3).abs() < 1e-3, "{idle}");
}

#[test]
fn the_same_waits_next_to_the_sender_are_its_idle_time() {
    // Next to the sender, everything acknowledged means it had nothing to send.
    let wait = 10.0 * ACK_CLOCK_TURNS as f64;
    let d = diagnose(&rounds_with_waits(false, 7, wait));
    let f = find(&d, K::ApplicationLimited);
    assert_eq!(f.episodes, 7);
    assert!(f.cost.share >= IDLE_MIN_SHARE, "{f:#?}");
}

/// A client asking `n` times for 40 segments that the server sends in rounds of 10 (the
/// window), the third round after `pause_ms`; the client asks again `think_ms` after the
/// answer.
fn answers(n: usize, pause_ms: f64, think_ms: f64) -> Script {
    let mut t = Script::new();
    t.handshake();
    t.after_ms(1);
    for _ in 0..n {
        t.client_sends(AUTO, 200);
        for r in 0..4 {
            // Next to the client, the server's next round follows its ACK a round trip
            // later.
            t.after_ms(if r == 2 { pause_ms } else { 10.0 });
            let seq = t.next_seq(Dir::S2C);
            t.server_burst(seq, 10, MSS);
            t.after_ms(10).client_acks(AUTO);
        }
        t.after_ms(think_ms);
    }
    t
}

#[test]
fn a_server_pausing_in_its_answers_is_its_hold_whatever_the_size() {
    // 232 KB in all: a connection that moved little data, but the server held the rest of
    // each answer for 300 ms while the client waited: the server's time, a cost.
    let d = diagnose(&answers(4, 300.0, 1.0));
    let f = find(&d, K::ApplicationLimited);
    assert!(f.severity >= Severity::Minor, "{f:#?}");
    assert!(
        f.explanation.contains("waiting for") && f.explanation.contains("(server think time)"),
        "{}",
        f.explanation
    );
    // The client's own pauses between its requests on such a connection are its shape:
    // information.
    let d = diagnose(&answers(4, 1.0, 300.0));
    let f = find(&d, K::ApplicationLimited);
    assert_eq!(f.severity, Severity::Info, "{f:#?}");
}

/// One request answered at once, then the client's FIN after `client_close_ms` and the
/// server's FIN after `server_close_ms` more.
fn close_after(client_close_ms: f64, server_close_ms: f64) -> Script {
    let mut t = Script::new();
    t.handshake();
    t.after_ms(1).client_sends(AUTO, 200);
    let seq = t.next_seq(Dir::S2C);
    t.after_ms(10).server_burst(seq, 10, MSS);
    t.after_ms(10).client_acks(AUTO);
    t.after_ms(client_close_ms).fin_from_client();
    t.after_ms(server_close_ms).fin_from_server();
    t.after_ms(10).client_acks(AUTO);
    t
}

#[test]
fn after_the_last_data_only_the_servers_hold_counts() {
    // The client holding the connection open before it closes delays no transfer.
    let d = diagnose(&close_after(500.0, 1.0));
    assert!(
        d.findings.iter().all(|f| f.kind != K::ApplicationLimited),
        "{:#?}",
        d.findings
    );
    // The server answering the client's close 500 ms late: its application held it.
    let d = diagnose(&close_after(1.0, 500.0));
    let f = find(&d, K::ApplicationLimited);
    assert_eq!(f.episodes, 1);
    assert!(
        f.explanation.contains("(server think time)"),
        "{}",
        f.explanation
    );
}

#[test]
fn a_receiver_that_sent_nothing_closing_late_is_not_holding_answers() {
    // The server only received (a bulk sink): its late FIN is its reading what it was
    // sent (the window's finding), not a reply held.
    let mut t = Script::new();
    t.handshake();
    t.after_ms(1);
    let seq = t.next_seq(Dir::C2S);
    t.client_burst(seq, 10, MSS);
    t.after_ms(10).server_acks(AUTO);
    t.after_ms(1).fin_from_client();
    t.after_ms(500).fin_from_server();
    t.after_ms(10).client_acks(AUTO);
    let d = diagnose(&t);
    assert!(
        d.findings.iter().all(|f| f.kind != K::ApplicationLimited),
        "{:#?}",
        d.findings
    );
}
