//! tests/data/malformed/: small broken captures (made by its generate.py), each with the one
//! line tcpdx must print in NAME.expected. Errors exit with 2, warnings with 0; either way
//! stderr holds exactly that line, naming the file and the byte.

use std::path::PathBuf;
use std::process::Command;

#[test]
fn every_malformed_file_gives_its_expected_line() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/malformed");
    let mut checked = 0;
    let mut entries: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "expected"))
        .collect();
    entries.sort();
    for expected_path in entries {
        let capture = expected_path.with_extension("");
        let expected = std::fs::read_to_string(&expected_path).unwrap();
        let expected = expected.trim_end();
        let path = capture.to_str().unwrap();
        for cmd in ["events", "flows", "diagnose"] {
            let out = Command::new(env!("CARGO_BIN_EXE_tcpdx"))
                .args([cmd, path])
                .output()
                .unwrap();
            let stderr = String::from_utf8_lossy(&out.stderr);
            let (want_line, want_code) = match expected.strip_prefix("warning: ") {
                Some(w) => (format!("tcpdx: warning: {path}: {w}"), 0),
                None => (format!("tcpdx: {path}: {expected}"), 2),
            };
            assert_eq!(
                out.status.code(),
                Some(want_code),
                "{cmd} {path}: exit code; stderr: {stderr}"
            );
            assert_eq!(stderr.trim_end(), want_line, "{cmd} {path}: stderr");
        }
        checked += 1;
    }
    assert!(
        checked >= 20,
        "only {checked} malformed files found in {dir:?}"
    );
}
