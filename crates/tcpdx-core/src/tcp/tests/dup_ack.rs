//! Duplicate ACKs and their numbering.

use tcpdx_testkit::Script;

use super::{analyze, assert_flags, check_tshark};

#[test]
fn dup_acks_are_numbered_and_reset_when_ack_moves() {
    let mut t = Script::new();
    t.handshake();
    t.at_ms(20).server_burst(1, 3, 1000); // 4-6
    t.at_ms(30).client_acks(1001); // 7
    t.client_acks(1001).times(2); // 8-9 dup #1, #2
    t.client_acks(3001); // 10
    t.client_acks(3001); // 11 dup #1 again
    let rows = analyze(&t);
    assert_flags(
        &rows,
        &[
            (8, "duplicate_ack"),
            (9, "duplicate_ack"),
            (11, "duplicate_ack"),
        ],
    );
    assert_eq!(rows[7].dup_ack_num, Some(1));
    assert_eq!(rows[8].dup_ack_num, Some(2));
    assert_eq!(rows[10].dup_ack_num, Some(1));
    check_tshark(&t, "dup_acks");
}

#[test]
fn a_changed_window_is_a_window_update_not_a_dup_ack() {
    let mut t = Script::new();
    t.handshake();
    t.at_ms(20).server_sends(1, 1000);
    t.at_ms(30).client_acks(1001); // 5
    t.client_window(32768).client_acks(1001); // 6
    let rows = analyze(&t);
    assert_flags(&rows, &[(6, "window_update")]);
    check_tshark(&t, "window_update");
}
