//! `receiver-host-drops` scenarios.

use super::*;

#[test]
fn receiver_host_drops_when_the_capture_sits_next_to_the_receiver() {
    let mut t = Script::new();
    // Vantage next to the server (the data receiver): its SYN-ACK follows the SYN at once.
    t.syn();
    t.after_ms(0.05).syn_ack();
    t.after_ms(10).handshake_ack();
    t.at_ms(20).client_burst(1, 5, MSS); // 4-8: 5 seen here, dropped inside the receiver
    t.after_ms(0.05).server_acks(1449); // 9
    t.after_ms(0.01)
        .server_acks(1449)
        .sack(&[(2897, 7241)])
        .times_every_ms(3, 0.01); // 10-12
    t.after_ms(10).client(SegSpec {
        seq: 1449,
        len: MSS,
        ..C2S_DATA
    }); // 13
    t.after_ms(0.05).server_acks(7241);
    let d = diagnose(&t);
    assert_eq!(
        d.connections[0].capture_point,
        crate::CapturePoint::NearServer
    );
    let f = find(&d, K::ReceiverHostDrops);
    assert_eq!(f.episodes, 1);
    assert!(f.recommendations.iter().any(|r| r.contains("ethtool -G")));
    assert!(f.recommendations.iter().any(|r| r.contains("%RDY")));
    assert!(d.findings.iter().all(|f| f.kind != K::NetworkLoss));
}
