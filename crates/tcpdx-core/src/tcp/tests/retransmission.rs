//! Retransmission, fast retransmission, spurious retransmission, out-of-order.

use tcpdx_testkit::{S2C_DATA, Script, SegSpec};

use super::{analyze, assert_flags, check_tshark};

#[test]
fn fast_retransmission_after_three_dup_acks() {
    let mut t = Script::new();
    t.handshake(); // 1-3
    t.at_ms(20).server_burst(1, 4, 1448); // 4-7, frame 4 lost downstream
    t.at_ms(30).client_acks(1).times(3); // 8-10
    t.after_ms(0.2).server(SegSpec {
        seq: 1,
        len: 1448,
        ..S2C_DATA
    }); // 11
    let rows = analyze(&t);
    assert_flags(
        &rows,
        &[
            (8, "duplicate_ack"),
            (9, "duplicate_ack"),
            (10, "duplicate_ack"),
            (11, "retransmission|fast_retransmission"),
        ],
    );
    assert_eq!(rows[9].dup_ack_num, Some(3));
    check_tshark(&t, "fast_retransmission");
}

#[test]
fn retransmission_after_timeout() {
    let mut t = Script::new();
    t.handshake();
    t.at_ms(20).server_sends(1, 1000);
    t.at_ms(300).server_sends(1, 1000);
    let rows = analyze(&t);
    assert_flags(&rows, &[(5, "retransmission")]);
    check_tshark(&t, "rto_retransmission");
}

#[test]
fn out_of_order_within_handshake_rtt() {
    let mut t = Script::new();
    t.handshake(); // rtt 10 ms by default
    t.at_ms(20).server_sends(1001, 1000); // 4: hole before it
    t.at_ms(21).server_sends(1, 1000); // 5: the late one, 1 ms after
    let rows = analyze(&t);
    assert_flags(&rows, &[(4, "lost_segment"), (5, "out_of_order")]);
    check_tshark(&t, "out_of_order");
}

#[test]
fn spurious_retransmission_of_acknowledged_data() {
    let mut t = Script::new();
    t.handshake();
    t.at_ms(20).server_sends(1, 1000);
    t.at_ms(30).client_acks(1001);
    t.at_ms(300).server_sends(1, 1000);
    let rows = analyze(&t);
    assert_flags(&rows, &[(6, "retransmission|spurious_retransmission")]);
    check_tshark(&t, "spurious_retransmission");
}

#[test]
fn syn_retransmission() {
    let mut t = Script::new();
    t.syn();
    t.at_ms(1000).syn();
    let rows = analyze(&t);
    assert_flags(&rows, &[(2, "retransmission")]);
    check_tshark(&t, "syn_retransmission");
}
