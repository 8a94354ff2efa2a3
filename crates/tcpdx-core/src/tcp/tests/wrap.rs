//! Sequence numbers that wrap past 2^32 and relative numbers beyond 4 GB.

use tcpdx_testkit::{Script, ScriptConfig};

use super::{analyze, assert_flags, check_tshark};

#[test]
fn isn_near_the_top_wraps_cleanly() {
    let cfg = ScriptConfig {
        isn_server: u32::MAX - 1000,
        ..ScriptConfig::DEFAULT
    };
    let mut t = Script::with(cfg);
    t.handshake();
    t.at_ms(20).server_burst(1, 3, 1000);
    t.at_ms(30).client_acks(3001);
    let rows = analyze(&t);
    assert_flags(&rows, &[]);
    assert_eq!(rows[5].seq, 2001);
    assert_eq!(rows[6].ack, 3001);
    check_tshark(&t, "isn_wrap");
}

#[test]
fn relative_sequence_unwraps_beyond_4_gb() {
    let mut t = Script::new();
    t.handshake();
    // 5 GB in 1 MB jumps of "data" (few frames: each segment is 1 MB long on paper).
    let mut seq: u64 = 1;
    let mut ms = 20.0;
    while seq < 5_000_000_000 {
        t.at_ms(ms).server_sends(seq as u32, 60_000);
        t.after_ms(0.1).client_acks((seq + 60_000) as u32);
        seq += 60_000;
        ms += 0.2;
    }
    let rows = analyze(&t);
    let last_data = rows.iter().rev().find(|r| r.len > 0).unwrap();
    assert_eq!(last_data.seq, seq - 60_000);
    assert!(
        rows.iter().all(|r| r.flags.is_empty()),
        "no flags on a clean 5 GB transfer"
    );
}
