//! `receiver-window-limited` scenarios.

use super::*;

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

/// Slow start under a window of `open` segments, then ten round trips with the window at
/// `held` segments and the sender filling it (10 ms each).
fn window_held(open: u32, held: u32) -> Script {
    let mut t = Script::new();
    t.handshake();
    t.at_ms(20);
    for n in [2, 4, 8] {
        let seq = t.next_seq(Dir::C2S);
        t.client_burst(seq, n, MSS);
        t.after_ms(10).server_acks(AUTO).win(open * MSS);
    }
    for _ in 0..10 {
        let seq = t.next_seq(Dir::C2S);
        t.client_burst(seq, held, MSS);
        t.after_ms(10).server_acks(AUTO).win(held * MSS);
    }
    t.after_ms(1).fin_from_client();
    t.after_ms(10).fin_from_server();
    t.after_ms(0.1).server_acks(AUTO);
    t
}

#[test]
fn a_window_closed_below_what_it_was_limits_the_sender() {
    // A slow reader: 64 segments advertised, then 11 filled every round trip. Slow start
    // never ran faster, so only the earlier window shows what the path carried.
    let d = diagnose(&window_held(64, 11));
    let f = find(&d, K::ReceiverWindowLimited);
    assert!(f.severity >= Severity::Minor, "{f:#?}");
    assert!(f.episodes >= 9, "{}", f.episodes);
    // Each held round delivers 11 of the 64 segments the earlier window allowed.
    let want = 10.0 * 0.010 * (1.0 - 11.0 / 64.0);
    assert!(
        f.cost.seconds > 0.5 * want && f.cost.seconds <= 1.05 * want,
        "{} vs {want}",
        f.cost.seconds
    );
}

#[test]
fn a_window_just_inside_the_share_of_its_largest_is_not_priced_as_closed() {
    // 58 of 64 segments is above 90% of the largest window: the window never closed, and
    // with no faster round the path's room above it is unknown.
    let d = diagnose(&window_held(64, 58));
    if let Some(f) = d
        .findings
        .iter()
        .find(|f| f.kind == K::ReceiverWindowLimited)
    {
        assert!(f.cost.seconds < 1e-9, "{f:#?}");
    }
    // 57 is below 90%: the window closed, and it is priced.
    let d = diagnose(&window_held(64, 57));
    let f = find(&d, K::ReceiverWindowLimited);
    assert!(f.cost.seconds > 0.0, "{f:#?}");
}

/// A receiver window of `segs` segments from the handshake on (a fixed buffer, no window
/// scaling), filled every round trip; each round trip's ACK comes after the given delay.
fn window_pinned(segs: u32, round_ms: &[f64]) -> Script {
    let mut t = Script::new();
    t.window(Dir::S2C, segs * MSS);
    t.handshake();
    t.at_ms(20);
    for &ms in round_ms {
        let seq = t.next_seq(Dir::C2S);
        t.client_burst(seq, segs, MSS);
        t.after_ms(ms).server_acks(AUTO);
    }
    t.after_ms(1).fin_from_client();
    t.after_ms(10).fin_from_server();
    t.after_ms(0.1).server_acks(AUTO);
    t
}

#[test]
fn a_window_pinned_from_the_start_costs_its_slower_round_trips() {
    // The window never grew or shrank and no round ran free of it: the path carried the
    // window in 10 ms, and each round trip at the same window that took 20 ms lost 10 ms.
    let rounds = [10.0, 20.0, 10.0, 20.0, 10.0, 20.0, 10.0, 20.0, 10.0, 20.0];
    let d = diagnose(&window_pinned(20, &rounds));
    let f = find(&d, K::ReceiverWindowLimited);
    assert!(f.severity >= Severity::Major, "{f:#?}");
    assert!(
        (f.cost.seconds - 0.050).abs() < 0.002,
        "{} vs 0.050",
        f.cost.seconds
    );
}

#[test]
fn a_window_pinned_at_a_steady_round_trip_shows_no_room_above_it() {
    // Every round trip as fast as the fastest: nothing says the path could carry more.
    let d = diagnose(&window_pinned(20, &[10.0; 10]));
    if let Some(f) = d
        .findings
        .iter()
        .find(|f| f.kind == K::ReceiverWindowLimited)
    {
        assert!(f.severity < Severity::Minor, "{f:#?}");
    }
}

/// The server sends, the capture is next to the client (the receiver): a window of
/// `window` segments from the handshake on, bursts of `burst` segments acknowledged as they
/// arrive, each followed by the given gap.
fn bursts_at_receiver(window: u32, burst: u32, gaps_ms: &[f64]) -> Script {
    let mut t = Script::new();
    t.window(Dir::C2S, window * MSS);
    t.handshake();
    t.at_ms(20);
    for &ms in gaps_ms {
        let seq = t.next_seq(Dir::S2C);
        t.burst(Dir::S2C, seq, burst, MSS);
        t.after_ms(0.1).acks(Dir::C2S, AUTO);
        t.after_ms(ms - 0.1);
    }
    t.after_ms(1).fin(Dir::S2C);
    t.after_ms(0.1).fin(Dir::C2S);
    t.after_ms(10).acks(Dir::S2C, AUTO);
    t
}

#[test]
fn from_the_receiver_a_window_arriving_whole_every_round_trip_limits_the_sender() {
    // Next to the receiver the flight is not visible (every segment is acknowledged as it
    // arrives); a whole window arriving every round trip is the window holding the
    // sender, and round trips at it that took twice as long lost half their time.
    let gaps = [10.0, 10.0, 20.0, 20.0].repeat(4);
    let d = diagnose(&bursts_at_receiver(20, 20, &gaps));
    let f = find(&d, K::ReceiverWindowLimited);
    assert!(f.severity >= Severity::Minor, "{f:#?}");
    // A third of the window per round trip is the sender's own pace, not the window's.
    let d = diagnose(&bursts_at_receiver(60, 20, &gaps));
    assert!(
        d.findings
            .iter()
            .all(|f| f.kind != K::ReceiverWindowLimited || f.severity < Severity::Minor),
        "{:#?}",
        d.findings
    );
}

#[test]
fn a_window_closed_for_a_moment_after_the_flight_went_out_did_not_hold_it() {
    // Autotuning opens the window from 64 to 256 segments. Twice the sender fills 60 of the
    // 64 and the ACK closing that round advertises 8 (the reader a moment late), reopened
    // to 64 at once: the rounds ran at the 64 the receiver had, not at the dip.
    let mut t = Script::new();
    t.handshake();
    t.at_ms(20);
    for (n, win, dip) in [
        (2, 64, false),
        (4, 64, false),
        (8, 64, false),
        (16, 64, false),
        (32, 64, false),
        (60, 64, true),
        (60, 64, false),
        (60, 64, true),
        (60, 256, false),
        (60, 256, false),
    ] {
        let seq = t.next_seq(Dir::C2S);
        t.client_burst(seq, n, MSS);
        if dip {
            t.after_ms(10).server_acks(AUTO).win(8 * MSS);
            t.after_ms(0.1).server_acks(AUTO).win(win * MSS);
        } else {
            t.after_ms(10).server_acks(AUTO).win(win * MSS);
        }
    }
    t.after_ms(1).fin_from_client();
    t.after_ms(10).fin_from_server();
    t.after_ms(0.1).server_acks(AUTO);
    let d = diagnose(&t);
    let cost = d
        .findings
        .iter()
        .find(|f| f.kind == K::ReceiverWindowLimited)
        .map_or(0.0, |f| f.cost.seconds);
    assert!(cost < 1e-9, "{d:#?}");
}
