//! Keep-alives and their ACKs.

use tcpdx_testkit::{Dir, Script};

use super::{analyze, assert_flags, check_tshark};

#[test]
fn keep_alive_and_keep_alive_ack() {
    let mut t = Script::new();
    t.handshake();
    t.at_ms(20).server_sends(1, 100); // 4
    t.at_ms(30).client_acks(101); // 5
    t.at_ms(60_000).keepalive(Dir::S2C); // 6
    t.after_ms(10).client_acks(101); // 7
    let rows = analyze(&t);
    assert_flags(&rows, &[(6, "keep_alive"), (7, "keep_alive_ack")]);
    check_tshark(&t, "keep_alive");
}
