//! Stream indexes, port reuse, relative numbers without a handshake.

use tcpdx_testkit::{Script, ScriptConfig};

use super::{analyze, check_tshark};

#[test]
fn new_syn_on_the_same_ports_starts_a_new_stream() {
    let mut t = Script::new();
    t.handshake(); // 1-3
    t.at_ms(20).server_sends(1, 100); // 4
    t.close(tcpdx_testkit::Dir::C2S); // FIN exchange
    let c2 = t.new_connection();
    t.on(c2).at_ms(5000).handshake();
    let rows = analyze(&t);
    let last = rows.last().unwrap();
    assert_eq!(last.stream.0, 1);
    let syn2 = rows.iter().find(|r| r.stream.0 == 1).unwrap();
    assert_eq!(syn2.flags.to_string(), "reused_ports");
    check_tshark(&t, "port_reuse");
}

#[test]
fn relative_numbers_start_at_one_without_the_handshake() {
    let mut t = Script::new();
    t.handshake().not_captured();
    t.at_ms(20).server_sends(1, 500);
    t.at_ms(1).client_acks(501);
    let rows = analyze(&t);
    assert_eq!((rows[0].seq, rows[0].ack), (1, 1));
    assert_eq!(rows[1].ack, 501);
    check_tshark(&t, "no_handshake");
}

#[test]
fn different_tuples_get_their_own_streams_in_order_of_appearance() {
    let mut t = Script::new();
    t.handshake();
    let other = t.add_connection(ScriptConfig {
        client_port: 40001,
        ..ScriptConfig::DEFAULT
    });
    t.on(other).at_ms(1).handshake();
    let rows = analyze(&t);
    for r in &rows {
        let want = if r.sport == 40001 || r.dport == 40001 {
            1
        } else {
            0
        };
        assert_eq!(r.stream.0, want, "frame {}", r.frame);
    }
    check_tshark(&t, "two_streams");
}
