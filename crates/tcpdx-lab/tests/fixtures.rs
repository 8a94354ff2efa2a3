//! The committed lab fixtures (tests/data/lab/<scenario>/) verify against their own
//! captures, stay small, and cover the required scenarios. Needs no root.

use std::path::PathBuf;

fn fixture_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/lab")
}

fn fixture_dirs() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(fixture_root())
        .map(|rd| {
            rd.flatten()
                .map(|e| e.path())
                .filter(|p| p.join("truth.json").is_file())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

#[test]
fn every_fixture_verifies() {
    let dirs = fixture_dirs();
    assert!(
        !dirs.is_empty(),
        "no fixtures under {}",
        fixture_root().display()
    );
    let mut failed = Vec::new();
    for d in &dirs {
        let r =
            tcpdx_lab::verify::verify_dir(d).unwrap_or_else(|e| panic!("{}: {e:#}", d.display()));
        r.print();
        if !r.ok() {
            failed.push(d.display().to_string());
        }
    }
    assert!(
        failed.is_empty(),
        "fixtures failing verification: {failed:?}"
    );
}

#[test]
fn fixture_files_are_small() {
    for d in fixture_dirs() {
        for f in std::fs::read_dir(&d).unwrap().flatten() {
            let len = f.metadata().unwrap().len();
            assert!(len < 1_000_000, "{} is {len} bytes", f.path().display());
        }
    }
}

#[test]
fn required_bulk_scenarios_have_fixtures() {
    let have: Vec<String> = fixture_dirs()
        .iter()
        .map(|d| d.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    for s in [
        "clean_bulk_cubic",
        "clean_bulk_reno",
        "case000_rto_delack",
        "case000_rto_quickack",
        "case001_reorder_time",
        "case001_reorder_behind",
        "case001_reorder_count",
        "case002_slow_reader",
        "case002_rx_host_drops",
        "case004_tbf_burst",
    ] {
        assert!(have.iter().any(|h| h == s), "missing fixture {s}");
    }
}

#[test]
fn fixtures_match_the_registry() {
    for d in fixture_dirs() {
        let t: tcpdx_lab::truth::Truth =
            serde_json::from_slice(&std::fs::read(d.join("truth.json")).unwrap()).unwrap();
        let sc = tcpdx_lab::scenario::find(&t.scenario)
            .unwrap_or_else(|| panic!("unknown scenario {}", t.scenario));
        let recorded: tcpdx_lab::scenario::Scenario =
            serde_json::from_value(t.params.clone()).unwrap();
        assert_eq!(
            recorded,
            sc,
            "fixture {} was produced by a different recipe; regenerate it",
            d.display()
        );
    }
}
