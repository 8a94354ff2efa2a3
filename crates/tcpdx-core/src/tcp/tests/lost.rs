//! Segments and ACKs of segments that the capture did not see.

use tcpdx_testkit::Script;

use super::{analyze, assert_flags, check_tshark};

#[test]
fn lost_segment_and_ack_of_unseen_segment() {
    let mut t = Script::new();
    t.handshake();
    t.at_ms(20).server_sends(1, 1000).not_captured(); // never in the capture
    t.at_ms(21).server_sends(1001, 1000); // 4: previous segment not captured
    t.at_ms(31).client_acks(2001); // 5: ACKs data never seen
    let rows = analyze(&t);
    assert_flags(&rows, &[(4, "lost_segment"), (5, "ack_lost_segment")]);
    check_tshark(&t, "lost_segment");
}
