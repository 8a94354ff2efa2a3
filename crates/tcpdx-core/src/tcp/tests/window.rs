//! Zero window, zero-window probes, window full, window scaling.

use tcpdx_testkit::{Script, ScriptConfig};

use super::{analyze, assert_flags, check_tshark};

#[test]
fn zero_window_probe_and_its_ack() {
    let mut t = Script::new();
    t.handshake();
    t.at_ms(20).server_sends(1, 1000); // 4
    t.at_ms(30).client_window(0).client_acks(1001); // 5 zero window
    t.at_ms(230).zero_window_probe(tcpdx_testkit::Dir::S2C); // 6
    t.at_ms(240).client_acks(1001); // 7
    let rows = analyze(&t);
    assert_eq!(super::flags_of(&rows, 5), "zero_window");
    assert!(super::flags_of(&rows, 6).contains("zero_window_probe"));
    assert!(super::flags_of(&rows, 7).contains("zero_window"));
    check_tshark(&t, "zero_window_probe");
}

#[test]
fn window_full_when_data_reaches_the_advertised_edge() {
    let cfg = ScriptConfig {
        client_window: 4000,
        client_wscale: None,
        server_wscale: None,
        ..ScriptConfig::DEFAULT
    };
    let mut t = Script::with(cfg);
    t.handshake();
    t.at_ms(20).server_burst(1, 4, 1000); // 4-7, frame 7 fills the 4000-byte window
    let rows = analyze(&t);
    assert_flags(&rows, &[(7, "window_full")]);
    check_tshark(&t, "window_full");
}

#[test]
fn window_is_scaled_after_the_handshake() {
    let cfg = ScriptConfig {
        client_wscale: Some(7),
        server_wscale: Some(7),
        ..ScriptConfig::DEFAULT
    };
    let mut t = Script::with(cfg);
    t.handshake();
    t.at_ms(20).client_window(1 << 20).client_acks(1);
    let rows = analyze(&t);
    assert_eq!(rows[3].window, 1 << 20);
    assert_eq!(rows[3].window_raw, (1u32 << 13) as u16);
    check_tshark(&t, "window_scaled");
}

#[test]
fn without_a_handshake_the_scale_is_unknown_and_window_full_is_not_judged() {
    let cfg = ScriptConfig {
        client_window: 4000,
        ..ScriptConfig::DEFAULT
    };
    let mut t = Script::with(cfg);
    t.handshake().not_captured();
    t.at_ms(20).client_acks(1); // 1
    t.at_ms(21).server_burst(1, 4, 1000); // 2-5
    let rows = analyze(&t);
    assert_flags(&rows, &[]);
    check_tshark(&t, "no_handshake_window");
}
