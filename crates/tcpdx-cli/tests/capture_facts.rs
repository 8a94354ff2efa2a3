//! Capture facts end to end: a generated pcap in which a mirror port copied every frame
//! 1 ms late, through the `tcpdx` binary. `diagnose` leaves the copies out (no loss, and
//! the `capture` object counts them); `events` still flags them as Wireshark does.

use std::process::Command;

use tcpdx_testkit::{AUTO, Dir, OwnedFrame, Script};
use tcpdx_wire::{FrameNo, Timestamp};

fn tcpdx(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_tcpdx"))
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Four connections of a clean bulk transfer (no loss); every frame again 1 ms later.
fn mirrored() -> (Vec<OwnedFrame>, usize) {
    let mut t = Script::new();
    let mut ids = vec![t.conn()];
    for i in 1..4u16 {
        ids.push(t.add_connection(tcpdx_testkit::ScriptConfig {
            client_port: 40000 + i,
            ..tcpdx_testkit::ScriptConfig::DEFAULT
        }));
    }
    for &id in &ids {
        t.on(id).at_ms(1).handshake();
    }
    t.at_ms(20);
    for _ in 0..30 {
        for &id in &ids {
            let base = t.on(id).next_seq(Dir::C2S);
            t.on(id).client_burst(base, 10, 1448);
        }
        t.after_ms(10);
        for &id in &ids {
            t.on(id).server_acks(AUTO);
        }
        t.after_ms(0.1);
    }
    let once = t.frames();
    let mut all = Vec::with_capacity(once.len() * 2);
    for f in &once {
        all.push(f.clone());
        let mut c = f.clone();
        c.ts = Timestamp(f.ts.0 + 1_000_000);
        all.push(c);
    }
    all.sort_by_key(|f| f.ts.0);
    for (i, f) in all.iter_mut().enumerate() {
        f.no = FrameNo(i as u64 + 1);
    }
    (all, once.len())
}

#[test]
fn a_mirror_ports_copies_are_not_losses() {
    let (frames, n) = mirrored();
    let dir = std::env::temp_dir().join(format!("tcpdx-facts-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("mirrored.pcap");
    let mut bytes = Vec::new();
    tcpdx_testkit::write_pcap(&mut bytes, &frames, false).unwrap();
    std::fs::write(&path, bytes).unwrap();
    let p = path.to_str().unwrap();

    let mut outs = Vec::new();
    for threads in ["1", "2"] {
        let json = tcpdx(&["diagnose", "--json", "--threads", threads, p]);
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        let c = &v["capture"];
        assert_eq!(c["duplicate_frames"], n as u64, "{c}");
        assert_eq!(c["reforwarded_frames"], 0, "{c}");
        assert_eq!(c["capture_drops"]["ip_id_missing"], 0, "{c}");
        assert_eq!(c["coarse_clock"], false, "{c}");
        let kinds: Vec<&str> = v["findings"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|f| f["kind"].as_str())
            .collect();
        for bad in ["network-loss", "spurious-retransmission", "rto-stall"] {
            assert!(!kinds.contains(&bad), "{bad} in {kinds:?}");
        }
        outs.push(c.clone());
    }
    assert_eq!(outs[0], outs[1], "the facts do not depend on the threads");

    // `events` is Wireshark's view: each data copy is a retransmission or out of order.
    let csv = tcpdx(&["events", p]);
    let flagged = csv
        .lines()
        .filter(|l| l.contains("retransmission") || l.contains("out_of_order"))
        .count();
    assert!(flagged >= 4 * 30 * 10, "{flagged} flagged rows");
    std::fs::remove_dir_all(&dir).ok();
}
