//! Golden tests: small captures made by the test kit (tests/data/*.pcapng) and the exact
//! `events` / `flows --json` output expected for them. The fixtures are regenerated from
//! their scripts on every run and must match the committed bytes, so they are provably the
//! project's own. `UPDATE_GOLDEN=1 cargo test -p tcpdx-cli --test golden` rewrites them
//! (then check the new outputs against tshark before committing).
//!
//! `diagnose --json` is pinned the same way on two synthesised captures
//! (tests/data/synth/<name>/diagnose.json; the captures themselves are pinned to the
//! synthesiser by tcpdx-testkit's `synth_fixtures` test).

use std::path::{Path, PathBuf};
use std::process::Command;

use tcpdx_testkit::{Dir, S2C_DATA, Script, ScriptConfig, SegSpec};

fn data_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/data")
}

/// A bulk transfer with one loss repaired by fast retransmission, then a clean close.
fn fast_retransmission() -> Script {
    let mut t = Script::new();
    t.handshake();
    t.at_ms(20).server_burst(1, 6, 1448);
    t.at_ms(30).client_acks(1).sack(&[(1449, 8689)]).times(4);
    t.after_ms(0.1).server(SegSpec {
        seq: 1,
        len: 1448,
        ..S2C_DATA
    });
    t.at_ms(41).client_acks(8689);
    t.at_ms(42).server_burst(8689, 4, 1448);
    t.at_ms(52).client_acks(14481);
    t.at_ms(60).close(Dir::S2C);
    t
}

/// A receiver that stops reading: zero window, probes, then a window update.
fn zero_window() -> Script {
    let cfg = ScriptConfig {
        client_window: 4000,
        client_wscale: None,
        server_wscale: None,
        ..ScriptConfig::DEFAULT
    };
    let mut t = Script::with(cfg);
    t.handshake();
    t.at_ms(20).server_burst(1, 4, 1000);
    t.at_ms(30).client_window(0).client_acks(4001);
    t.at_ms(230).zero_window_probe(Dir::S2C);
    t.at_ms(240).client_acks(4001);
    t.at_ms(640).zero_window_probe(Dir::S2C);
    t.at_ms(650).client_acks(4001);
    t.at_ms(700).client_window(8000).client_acks(4001);
    t.at_ms(701).server_burst(4001, 2, 1000);
    t.at_ms(711).client_acks(6001);
    t
}

fn fixtures() -> Vec<(&'static str, Script)> {
    vec![
        ("fast-retransmission", fast_retransmission()),
        ("zero-window", zero_window()),
    ]
}

fn tcpdx(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_tcpdx"))
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "tcpdx {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn check_or_update(path: &Path, got: &[u8]) {
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(path, got).unwrap();
        return;
    }
    let want = std::fs::read(path)
        .unwrap_or_else(|e| panic!("{}: {e} (UPDATE_GOLDEN=1 creates it)", path.display()));
    if want != got {
        panic!(
            "{} differs\n--- expected\n{}\n--- got\n{}",
            path.display(),
            String::from_utf8_lossy(&want),
            String::from_utf8_lossy(got)
        );
    }
}

#[test]
fn fixtures_are_made_by_the_test_kit() {
    for (name, t) in fixtures() {
        let mut bytes = Vec::new();
        tcpdx_testkit::write_pcapng(&mut bytes, &t.frames()).unwrap();
        check_or_update(&data_dir().join(format!("{name}.pcapng")), &bytes);
        assert!(bytes.len() < 1 << 20);
    }
}

#[test]
fn events_csv_matches_golden() {
    for (name, _) in fixtures() {
        let cap = data_dir().join(format!("{name}.pcapng"));
        let out = tcpdx(&["events", cap.to_str().unwrap()]);
        check_or_update(
            &data_dir().join(format!("{name}.events.csv")),
            out.as_bytes(),
        );
    }
}

#[test]
fn flows_json_matches_golden() {
    for (name, _) in fixtures() {
        let cap = data_dir().join(format!("{name}.pcapng"));
        let out = tcpdx(&["flows", "--json", cap.to_str().unwrap()]);
        check_or_update(
            &data_dir().join(format!("{name}.flows.json")),
            out.as_bytes(),
        );
    }
}

/// Synthesised fixtures whose `diagnose --json` output is pinned: one delayed-ACK mechanism
/// each, small enough to review a diff by eye.
const DIAGNOSE_GOLDEN: &[&str] = &["nagle_delack_stall", "case000_synth_delack100"];

#[test]
fn diagnose_json_matches_golden() {
    for name in DIAGNOSE_GOLDEN {
        let dir = data_dir().join("synth").join(name);
        let cap = dir.join("capture.pcapng.gz");
        let out = tcpdx(&["diagnose", "--json", cap.to_str().unwrap()]);
        check_or_update(&dir.join("diagnose.json"), out.as_bytes());
    }
}
