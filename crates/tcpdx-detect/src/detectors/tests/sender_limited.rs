//! `sender-limited` scenarios: a flight held below both windows while sending back to
//! back, against the same flight with the application pausing between rounds.

use super::*;
use crate::detectors::sender_limited::{MIN_ROUNDS, RATE_ROOM};

/// The receiver's window: far above any flight here.
const RWND: u32 = 4_000_000;

/// One round trip of `n` segments acknowledged 10 ms later, plus `i` (0 to 6) times 11 µs:
/// a clock whose times are all whole milliseconds would be read as a coarse one.
fn jittered_round(t: &mut Script, n: u32, i: usize) {
    let seq = t.next_seq(Dir::C2S);
    t.client_burst(seq, n, MSS);
    t.after_ms(10.0 + (i % 7) as f64 * 0.011)
        .server_acks(AUTO)
        .win(RWND);
}

/// Slow start through `slow` segments a round, then `rounds` round trips of `held`
/// segments, each followed by `pause_ms` with nothing in flight (10 ms RTT).
fn held_flight(slow: &[u32], held: u32, rounds: usize, pause_ms: f64) -> Script {
    let mut t = Script::new();
    t.handshake();
    t.at_ms(20);
    for (i, &n) in slow.iter().enumerate() {
        jittered_round(&mut t, n, i);
    }
    for i in 0..rounds {
        jittered_round(&mut t, held, i);
        if pause_ms > 0.0 {
            t.after_ms(pause_ms);
        }
    }
    t.after_ms(1).fin_from_client();
    t.after_ms(10).fin_from_server();
    t.after_ms(0.1).server_acks(AUTO);
    t
}

/// The send buffer a recommendation asks for: the number before " bytes (Linux".
fn buffer_bytes(r: &str) -> f64 {
    let head = &r[..r.find(" bytes (Linux").unwrap()];
    head.rsplit(' ').next().unwrap().parse().unwrap()
}

/// Rounds of `n` segments sent back to back, acknowledged two at a time `spacing_ms`
/// apart from 10 ms later (the bottleneck's pace), the next round sent at the last ACK:
/// a flight held by the send buffer, with no round limited by a window.
fn clocked_flight(n: u32, rounds: usize, spacing_ms: f64) -> Script {
    let mut t = Script::new();
    t.handshake();
    t.at_ms(20);
    for i in 0..rounds {
        let seq = t.next_seq(Dir::C2S);
        t.client_burst(seq, n, MSS);
        t.after_ms(10.0 + (i % 7) as f64 * 0.011);
        for k in 1..=n / 2 {
            if k > 1 {
                t.after_ms(spacing_ms);
            }
            t.server_acks(seq.wrapping_add(2 * k * MSS)).win(RWND);
        }
    }
    t.after_ms(1).fin_from_client();
    t.after_ms(10).fin_from_server();
    t.after_ms(0.1).server_acks(AUTO);
    t
}

#[test]
fn a_flight_held_from_the_start_is_priced_against_the_ack_spacing() {
    // 8 segments a round trip for 120 rounds; their ACKs 0.1 ms apart for 2 segments:
    // the path carries 2 x MSS per 0.1 ms, far above 8 segments per 10 ms.
    let d = diagnose(&clocked_flight(8, 120, 0.1));
    let f = find(&d, K::SenderLimited);
    assert!(f.severity >= Severity::Major, "{f:#?}");
    assert!(f.cost.seconds > 0.5, "{f:#?}");
    assert!(
        f.explanation.contains("spacing of its ACKs"),
        "{}",
        f.explanation
    );
    let r = &f.recommendations[0];
    assert!(r.contains("BDP = ") && r.contains("SO_SNDBUF"), "{r}");
    // BDP = the ACK-spacing rate over the round trip (10 ms plus the train's 0.3 ms)
    let bps = f64::from(2 * MSS) * 8.0 / 0.1e-3;
    let got = buffer_bytes(r);
    let want = bps * 0.0103 / 8.0;
    assert!((got - want).abs() < 0.05 * want, "{got} vs {want}: {r}");
    let b = &d.time_budget.connections[0];
    let sender = b.sending_limits.get(crate::infer::limit::Limit::Sender);
    assert!(sender > 0.8, "{:?}", b.sending_limits);
}

#[test]
fn acks_further_apart_than_a_train_price_against_the_receivers_window() {
    // The same flight with its ACKs 3 ms apart, more than a quarter of the 10 ms round
    // trip: no train, so the receiver's window per round trip is the ceiling.
    let d = diagnose(&clocked_flight(8, 120, 3.0));
    let f = find(&d, K::SenderLimited);
    assert!(
        f.explanation.contains("receiver's window per round trip"),
        "{}",
        f.explanation
    );
    assert!(f.cost.seconds > 0.0, "{f:#?}");
    // 2.4 ms apart: one train per round, at 6 segments per 7.2 ms, still above the
    // flight's 8 segments per 17.2 ms round by more than RATE_ROOM.
    let d = diagnose(&clocked_flight(8, 120, 2.4));
    let f = find(&d, K::SenderLimited);
    assert!(
        f.explanation.contains("spacing of its ACKs"),
        "{}",
        f.explanation
    );
    assert!(f.cost.seconds > 0.0, "{f:#?}");
}

// Slow start from Linux's initial window of 10 segments: a round below it is the sender's.
const SLOW: [u32; 3] = [10, 20, 40];

#[test]
fn a_flight_held_below_the_windows_is_the_senders_and_priced_against_the_path() {
    // 40 segments a round trip in slow start, then 10 for 70 round trips: a quarter of
    // what the path carried, with the receiver's window far above.
    let d = diagnose(&held_flight(&SLOW, 10, 70, 0.0));
    let f = find(&d, K::SenderLimited);
    assert!(f.severity >= Severity::Major, "{f:#?}");
    // The held rounds follow one another: one episode.
    assert_eq!(f.episodes, 1, "{f:#?}");
    assert!(
        f.explanation.contains("in 70 of its round trips"),
        "{}",
        f.explanation
    );
    let want = 70.0 * 0.010 * (1.0 - 10.0 / 40.0);
    assert!(
        f.cost.seconds > 0.9 * want && f.cost.seconds <= 1.02 * want,
        "{} vs {want}",
        f.cost.seconds
    );
    assert!(
        f.explanation.contains("its send buffer"),
        "{}",
        f.explanation
    );
    assert!(f.recommendations[0].contains("tcp_wmem"));
    // The buffer it needs: the path's 40 segments a round trip (within the round trips'
    // few microseconds of jitter).
    let r = &f.recommendations[0];
    let got = buffer_bytes(r);
    let bdp = f64::from(40 * MSS);
    assert!((got - bdp).abs() < 0.01 * bdp, "{r}");
    assert!(
        d.findings
            .iter()
            .all(|g| g.kind != K::ApplicationLimited || g.severity == Severity::Info)
    );
    // The budget says where the sending time went: mostly the sender's own limit.
    let b = &d.time_budget.connections[0];
    let sender = b.sending_limits.get(crate::infer::limit::Limit::Sender);
    assert!(sender > 0.6, "{:?}", b.sending_limits);
    assert!(b.sending_limits.total() <= b.states.get(crate::State::Sending) + 1e-9);
}

#[test]
fn the_same_flight_with_the_application_pausing_is_application_limited() {
    // 30 ms after each round with nothing in flight: the application's pauses.
    let d = diagnose(&held_flight(&SLOW, 10, 70, 30.0));
    assert!(
        d.findings.iter().all(|f| f.kind != K::SenderLimited),
        "{:#?}",
        d.findings
    );
    find(&d, K::ApplicationLimited);
}

#[test]
fn a_flight_at_the_path_rate_costs_nothing_and_room_is_a_quarter() {
    // Held at the rate slow start last showed: the sender's limit, but the capture shows
    // no faster path.
    let d = diagnose(&held_flight(&[10, 20, 32], 32, 30, 0.0));
    let f = find(&d, K::SenderLimited);
    assert_eq!(f.cost.seconds, 0.0);
    assert_eq!(f.severity, Severity::Info);
    assert!(f.explanation.contains("not shown"), "{}", f.explanation);
    // 40 segments is RATE_ROOM times 32 (the line itself is tested beside the detector,
    // the round trips here vary by a few microseconds): 41 before is above it, 39 below.
    assert_eq!(40.0 / 32.0, RATE_ROOM);
    let d = diagnose(&held_flight(&[10, 20, 41], 32, 30, 0.0));
    assert!(find(&d, K::SenderLimited).cost.seconds > 0.0);
    let d = diagnose(&held_flight(&[10, 20, 39], 32, 30, 0.0));
    assert_eq!(find(&d, K::SenderLimited).cost.seconds, 0.0);
}

#[test]
fn too_few_held_rounds_or_too_little_data_is_no_finding() {
    // Below a megabyte: chatter, not a transfer whose pace matters.
    let d = diagnose(&held_flight(&SLOW, 10, 30, 0.0));
    assert!(d.findings.iter().all(|f| f.kind != K::SenderLimited));
    // Enough data, a flight cut from 128 to 100 segments without a loss (the sender's at
    // once): MIN_ROUNDS held rounds make a finding, one fewer does not.
    let slow = [10, 20, 40, 80, 128];
    let d = diagnose(&held_flight(&slow, 100, MIN_ROUNDS, 0.0));
    find(&d, K::SenderLimited);
    let d = diagnose(&held_flight(&slow, 100, MIN_ROUNDS - 1, 0.0));
    assert!(
        d.findings.iter().all(|f| f.kind != K::SenderLimited),
        "{:#?}",
        d.findings
    );
}
