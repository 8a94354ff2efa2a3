//! FIN and RST handling.

use tcpdx_testkit::{Dir, Script};

use super::{analyze, assert_flags, check_tshark};

#[test]
fn fin_exchange_has_no_flags() {
    let mut t = Script::new();
    t.handshake();
    t.at_ms(20).server_sends(1, 1000);
    t.at_ms(30).client_acks(1001);
    t.at_ms(40).close(Dir::S2C);
    let rows = analyze(&t);
    assert_flags(&rows, &[]);
    check_tshark(&t, "fin_close");
}

#[test]
fn rst_does_not_make_later_data_look_retransmitted() {
    let mut t = Script::new();
    t.handshake();
    t.at_ms(20).server_sends(1, 1000);
    t.at_ms(30).rst_from_client();
    let rows = analyze(&t);
    assert_eq!(rows.len(), 5);
    check_tshark(&t, "rst");
}
