//! The distributed run's stages as processes: `tcpdx shard` per file, `tcpdx
//! diagnose-partition` per partition (each writing its partial), `tcpdx merge-partials`:
//! what `tcpdx diagnose --json` (and the text) prints, byte for byte, also with the
//! diagnosers' spill forced on every round (the partials hold no spilled blob: each
//! connection's are read back when it is diagnosed). A damaged partial is a one-line error,
//! exit code 2.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn repo(p: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(p)
}

fn tcpdx(args: &[&str], env: &[(&str, &str)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tcpdx"))
        .args(args)
        .envs(env.iter().copied())
        .output()
        .expect("run tcpdx")
}

fn ok(o: Output, what: &str) -> Output {
    assert!(
        o.status.success(),
        "{what}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    o
}

/// Stage 1 of `file` into `dir` in `n` partitions, then one `diagnose-partition` process
/// per partition: the partials' paths.
fn partials(file: &Path, dir: &Path, n: u16, env: &[(&str, &str)]) -> Vec<String> {
    let s = |p: &Path| p.to_str().unwrap().to_owned();
    let shards = dir.join("shards");
    let args = [
        "shard",
        &s(file),
        "--out",
        &s(&shards),
        "--index",
        "0",
        "--partitions",
        &n.to_string(),
    ];
    ok(tcpdx(&args, env), "shard");
    (0..n)
        .map(|p| {
            let out = s(&dir.join(format!("p{p}.partial")));
            let args = [
                "diagnose-partition",
                &s(&shards),
                &p.to_string(),
                "-o",
                &out,
            ];
            ok(tcpdx(&args, env), "diagnose-partition");
            out
        })
        .collect()
}

fn merge(dir: &Path, partials: &[String], render: &[&str]) -> Output {
    let shards = dir.join("shards");
    let mut args = vec!["merge-partials", shards.to_str().unwrap()];
    args.extend(partials.iter().map(String::as_str));
    args.extend(render);
    tcpdx(&args, &[])
}

#[test]
fn partials_of_processes_merge_to_the_single_run() {
    for (case, n) in [
        ("case000_rto_delack/server.pcap.gz", 3),
        ("case003_nfs_write_stall/server.pcap.gz", 2),
        ("smb3_write_loss1pct/server.pcap.gz", 4),
    ] {
        let file = repo(&format!("tests/data/lab/{case}"));
        let f = file.to_str().unwrap();
        for env in [&[][..], &[("TCPDX_SPILL_TINY", "1")][..]] {
            let dir = tempfile::tempdir().unwrap();
            let mut parts = partials(&file, dir.path(), n, env);
            // Given in any order.
            parts.reverse();
            for render in [&["--json"][..], &[][..], &["--all"][..]] {
                let want = ok(
                    tcpdx(&[&["diagnose", f][..], render].concat(), &[]),
                    "diagnose",
                );
                let got = ok(merge(dir.path(), &parts, render), "merge-partials");
                assert!(
                    got.stdout == want.stdout,
                    "{case}, {n} partitions, {env:?}, {render:?}:\n{}\n---\n{}",
                    String::from_utf8_lossy(&got.stdout),
                    String::from_utf8_lossy(&want.stdout)
                );
            }
        }
    }
}

#[test]
fn damaged_or_missing_partials_are_one_line_errors() {
    let file = repo("tests/data/lab/case000_rto_delack/server.pcap.gz");
    let dir = tempfile::tempdir().unwrap();
    let parts = partials(&file, dir.path(), 2, &[]);
    let bytes = std::fs::read(&parts[1]).unwrap();
    std::fs::write(&parts[1], &bytes[..bytes.len() / 2]).unwrap();
    for given in [parts.clone(), parts[..1].to_vec()] {
        let o = merge(dir.path(), &given, &["--json"]);
        assert_eq!(o.status.code(), Some(2));
        assert!(o.stdout.is_empty());
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(err.starts_with("tcpdx: "), "{err}");
    }
    let cut = String::from_utf8_lossy(&merge(dir.path(), &parts, &[]).stderr).into_owned();
    assert!(cut.contains("p1.partial: offset "), "{cut}");
    // A partition that is not there.
    let shards = dir.path().join("shards");
    let out = dir.path().join("p9.partial");
    let args = [
        "diagnose-partition",
        shards.to_str().unwrap(),
        "9",
        "-o",
        out.to_str().unwrap(),
    ];
    let o = tcpdx(&args, &[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("partition 9"));
}
