//! Detector scenarios: hand-built conversations (tcpdx-testkit scripts) through the core's
//! analyzer into the diagnoser. The client sends the data in most scenarios, so the
//! script's vantage point (the client's host) is next to the sender, as in the lab's
//! primary captures.

use tcpdx_core::{Analyzer, AnalyzerConfig};
use tcpdx_testkit::{AUTO, C2S_DATA, Dir, Script, SegSpec};

use crate::finding::{Finding, FindingKind as K, Severity};
use crate::{Diagnoser, Diagnosis};

const MSS: u32 = 1448;

/// `t` fed through an analyzer into `d`, diagnosed.
fn run_with(t: &Script, mut d: Diagnoser) -> Diagnosis {
    let mut a = Analyzer::new(AnalyzerConfig::default());
    for f in t.frames() {
        a.handle_frame(&f.as_frame(), &mut d);
    }
    a.handle_end(&mut d);
    d.finish()
}

/// The diagnosis of `t`; the same with every round spilled to the store and read back on
/// each walk (checked here, so that every scenario checks it).
fn diagnose(t: &Script) -> Diagnosis {
    let run = |d: Diagnoser| run_with(t, d);
    let want = run(Diagnoser::new());
    let spill = std::sync::Arc::new(crate::Spill::new(
        Box::<crate::MemStore>::default(),
        crate::SpillPolicy::tiny(),
    ));
    let spilled = run(Diagnoser::new().spilling_to(spill.clone()));
    assert_eq!(want, spilled, "spilling changed the diagnosis");
    assert!(spill.take_error().is_none());
    assert_eq!(
        spill.live_blobs(),
        0,
        "every blob freed after the diagnosis"
    );
    want
}

#[track_caller]
fn find(d: &Diagnosis, kind: K) -> &Finding {
    d.findings
        .iter()
        .find(|f| f.kind == kind)
        .unwrap_or_else(|| panic!("no {} in {:#?}", kind.as_str(), d.findings))
}

fn roles(f: &Finding) -> Vec<(u64, &str)> {
    f.evidence
        .iter()
        .map(|e| (e.frame, e.role.as_ref()))
        .collect()
}

/// One round trip of the client sending `n` segments and the server acknowledging them
/// all one RTT (10 ms) later.
fn round(t: &mut Script, n: u32) {
    let seq = t.next_seq(Dir::C2S);
    t.client_burst(seq, n, MSS);
    t.after_ms(10).server_acks(AUTO);
}

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

#[test]
fn zero_window_limits_the_sender() {
    let mut t = Script::new();
    t.handshake();
    t.at_ms(20).client_burst(1, 2, MSS); // 4-5
    t.at_ms(30).server_acks(AUTO).win(0); // 6: zero window
    t.at_ms(330).server_acks(AUTO).win(65280); // 7: window update
    t.after_ms(0.1).client_sends(AUTO, MSS); // 8
    t.after_ms(10).server_acks(AUTO);
    let d = diagnose(&t);
    let f = find(&d, K::ReceiverWindowLimited);
    assert_eq!(f.episodes, 1);
    assert!((f.cost.seconds - 0.3).abs() < 1e-6, "{}", f.cost.seconds);
    assert_eq!(roles(f), vec![(6, "zero window"), (7, "window update")]);
    assert_eq!(d.findings[0].kind, K::ReceiverWindowLimited);
}

#[test]
fn receiver_host_drops_when_the_capture_sits_next_to_the_receiver() {
    let mut t = Script::new();
    // Vantage next to the server (the data receiver): its SYN-ACK follows the SYN at once.
    t.syn();
    t.after_ms(0.05).syn_ack();
    t.after_ms(10).handshake_ack();
    t.at_ms(20).client_burst(1, 5, MSS); // 4-8: 5 seen here, dropped inside the receiver
    t.after_ms(0.05).server_acks(1449); // 9
    t.after_ms(0.01)
        .server_acks(1449)
        .sack(&[(2897, 7241)])
        .times_every_ms(3, 0.01); // 10-12
    t.after_ms(10).client(SegSpec {
        seq: 1449,
        len: MSS,
        ..C2S_DATA
    }); // 13
    t.after_ms(0.05).server_acks(7241);
    let d = diagnose(&t);
    assert_eq!(
        d.connections[0].capture_point,
        crate::CapturePoint::NearServer
    );
    let f = find(&d, K::ReceiverHostDrops);
    assert_eq!(f.episodes, 1);
    assert!(f.recommendations.iter().any(|r| r.contains("ethtool -G")));
    assert!(f.recommendations.iter().any(|r| r.contains("%RDY")));
    assert!(d.findings.iter().all(|f| f.kind != K::NetworkLoss));
}

#[test]
fn fixed_duration_stalls_and_application_idle() {
    // Requests answered after the same 240 ms each time: a timer at the server.
    let mut t = Script::new();
    t.handshake();
    for i in 0..4 {
        t.at_ms(20 + i * 260).client_sends(AUTO, 200);
        t.after_ms(5).server_acks(AUTO);
        t.after_ms(240).server_sends(AUTO, 100);
        t.after_ms(5).client_acks(AUTO);
    }
    let d = diagnose(&t);
    let f = find(&d, K::FixedDurationStall);
    assert_eq!(f.episodes, 4);
    assert!((f.episode_list[0].duration_s - 0.24).abs() < 1e-6);
    let a = find(&d, K::ApplicationLimited);
    assert!(a.episodes >= 4, "{a:#?}");
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
fn syn_retransmission_is_a_setup_problem() {
    let mut t = Script::new();
    t.syn(); // 1
    t.at_ms(1000).syn(); // 2
    t.after_ms(10).syn_ack();
    t.handshake_ack();
    t.after_ms(5).client_sends(1, 100);
    t.after_ms(10).server_acks(AUTO);
    let d = diagnose(&t);
    let f = find(&d, K::HandshakeAndSetup);
    assert!((f.cost.seconds - 1.0).abs() < 1e-6);
    assert_eq!(roles(f), vec![(1, "first SYN"), (2, "SYN retransmission")]);
}

#[test]
fn one_direction_only_is_a_capture_problem() {
    let mut t = Script::new();
    t.at_ms(0).client_sends(1, MSS);
    t.at_ms(1).client_sends(AUTO, MSS);
    let d = diagnose(&t);
    let f = find(&d, K::CaptureQuality);
    assert!(f.explanation.contains("one direction"), "{}", f.explanation);
}

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

#[test]
fn beyond_the_listing_bound_connections_are_counted_not_listed() {
    // 12 connections (different client ports): every third waits 1 s for its SYN's
    // retransmission (a setup finding with a cost), the others are clean.
    let mut t = Script::new();
    for i in 0..12u16 {
        let mut cfg = t.config().clone();
        cfg.client_port = 40_000 + i;
        t.add_connection(cfg);
        let start = f64::from(i) * 2000.0;
        t.at_ms(start).syn();
        if i % 3 == 0 {
            t.at_ms(start + 1000.0).syn();
        }
        t.after_ms(10).syn_ack();
        t.handshake_ack();
        t.after_ms(5).client_sends(1, 100);
        t.after_ms(10).server_acks(AUTO);
    }
    let run = |d: Diagnoser| run_with(&t, d);
    let all = run(Diagnoser::new());
    let few = run(Diagnoser::with_max_listed(4));
    assert_eq!(all.connections.len(), 12);
    assert_eq!(few.connections.len(), 4);
    assert_eq!(few.unlisted.connections, 8);
    // The four kept are the four with a costly finding.
    let setup = |d: &Diagnosis| {
        d.findings
            .iter()
            .filter(|f| f.kind == K::HandshakeAndSetup && f.severity > Severity::Info)
            .count()
    };
    assert_eq!(setup(&all), 4);
    assert_eq!(setup(&few), 4);
    // Nothing of the time is lost.
    assert!((few.time_budget.seconds - all.time_budget.seconds).abs() < 1e-9);
    assert_eq!(few.time_budget.states, all.time_budget.states);
    let folded: u64 = few.unlisted.findings.values().map(|k| k.count).sum();
    assert_eq!(
        few.findings.len() as u64 + folded,
        all.findings.len() as u64,
        "every finding is listed or counted"
    );
    // A byte bound of a few connections' worth lists the costliest that fit.
    let fit = run(Diagnoser::with_listing_bounds(100, 5_000));
    let listed = fit.connections.len();
    assert!((1..12).contains(&listed), "{listed} listed");
    assert_eq!(listed as u64 + fit.unlisted.connections, 12);
    assert_eq!(setup(&fit), listed.min(4), "the costly ones first");
    assert!((fit.time_budget.seconds - all.time_budget.seconds).abs() < 1e-9);
}

/// Feeds a diagnoser and notes the streams its analyzer opens.
struct Opening<'a> {
    diag: &'a mut Diagnoser,
    opened: Vec<u32>,
}

impl tcpdx_core::EventSink for Opening<'_> {
    fn segment_detail(&mut self, a: &tcpdx_core::SegmentAnalysis, d: &tcpdx_core::SegmentDetail) {
        self.diag.segment_detail(a, d);
    }
    fn flow_evicted(&mut self, f: &tcpdx_core::FlowSummary) {
        self.diag.flow_evicted(f);
    }
    fn stream_opened(&mut self, stream: tcpdx_core::StreamId, _frame: tcpdx_wire::FrameNo) {
        self.opened.push(stream.0);
    }
}

#[test]
fn diagnosers_over_shares_of_the_connections_merge_into_the_single_diagnosis() {
    use tcpdx_core::FrameInput;
    // 12 connections, a third of them with a costly finding.
    let mut t = Script::new();
    for i in 0..12u16 {
        let mut cfg = t.config().clone();
        cfg.client_port = 40_000 + i;
        t.add_connection(cfg);
        let start = f64::from(i % 6) * 700.0;
        t.at_ms(start).syn();
        if i % 3 == 0 {
            t.at_ms(start + 1000.0).syn();
        }
        t.after_ms(10).syn_ack();
        t.handshake_ack();
        t.after_ms(5).client_sends(1, 100);
        t.after_ms(10).server_acks(AUTO);
    }
    let frames = t.frames();
    // Bounds on the count, then on the bytes (a few connections' worth).
    let bounds = [
        (100, usize::MAX),
        (4, usize::MAX),
        (3, usize::MAX),
        (100, 2_000),
        (100, 4_000),
    ];
    for (max_listed, max_bytes) in bounds {
        let config = AnalyzerConfig::default;
        let mut one = Diagnoser::with_listing_bounds(max_listed, max_bytes);
        let mut a = Analyzer::new(config());
        for f in &frames {
            a.handle_frame(&f.as_frame(), &mut one);
        }
        a.handle_end(&mut one);
        let end = frames.last().unwrap().ts.0 + 2 * crate::CLOSED_IDLE_NS;
        one.sweep(end);
        let want = one.finish();

        // Three shares by client port; each analyzer numbers its streams from 0, the
        // capture's numbers follow the order the streams open in.
        let n = 3;
        let mut diags: Vec<Diagnoser> = (0..n)
            .map(|_| Diagnoser::with_listing_bounds(max_listed, max_bytes).swept_by_caller())
            .collect();
        let mut ans: Vec<Analyzer> = (0..n).map(|_| Analyzer::new(config())).collect();
        let mut maps: Vec<Vec<u32>> = vec![Vec::new(); n];
        let mut next = 0;
        for f in &frames {
            let frame = f.as_frame();
            let FrameInput::Segment(seg) = FrameInput::classify(&frame) else {
                panic!("all frames are segments");
            };
            let w = usize::from(seg.src.port.min(seg.dst.port)) % n;
            let mut sink = Opening {
                diag: &mut diags[w],
                opened: Vec::new(),
            };
            ans[w].handle_frame(&frame, &mut sink);
            for _ in sink.opened {
                maps[w].push(next);
                next += 1;
            }
        }
        let mut merged: Option<crate::Listing> = None;
        for ((mut d, mut a), map) in diags.into_iter().zip(ans).zip(&maps) {
            a.handle_end(&mut d);
            d.sweep(end);
            let mut l = d.into_listing();
            l.renumber(|s| map[s as usize]);
            match &mut merged {
                Some(m) => m.merge(l),
                None => merged = Some(l),
            }
        }
        let got = merged.unwrap().into_diagnosis();
        assert!(
            want.unlisted.connections > 0 || (max_listed, max_bytes) == (100, usize::MAX),
            "folding is exercised: {} listed, {} not",
            want.connections.len(),
            want.unlisted.connections
        );
        assert!(!want.connections.is_empty(), "something is listed");
        assert_eq!(got, want, "max_listed {max_listed}, max_bytes {max_bytes}");
    }
}

#[test]
fn a_closed_connection_is_diagnosed_early_and_its_state_freed() {
    // Connection 1 transfers and closes; connection 2 then runs for over a second and more
    // than one sweep interval of segments.
    let (t, _) = Script::closed_then_busy(crate::CLOSED_SWEEP_EVERY, 0.1);
    let mut a = Analyzer::new(AnalyzerConfig::default());
    let mut d = Diagnoser::new();
    for f in t.frames() {
        a.handle_frame(&f.as_frame(), &mut d);
    }
    let live: Vec<u32> = d.trackers().map(|c| c.stream).collect();
    assert_eq!(live, vec![1], "the closed connection's state is freed");
    a.handle_end(&mut d);
    let out = d.finish();
    let streams: Vec<u32> = out.connections.iter().map(|c| c.stream).collect();
    assert_eq!(
        streams,
        vec![0, 1],
        "both connections are diagnosed, in stream order"
    );
}
