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
