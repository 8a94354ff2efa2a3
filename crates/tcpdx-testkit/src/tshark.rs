//! Runs `tshark` on a capture so scenario tests can compare with Wireshark.
//!
//! Every function returns `None` when `tshark` is not on `PATH`, so a test can skip with a
//! message; any other failure (tshark exits non-zero) panics with its stderr.

use std::path::Path;
use std::process::Command;
use std::sync::OnceLock;

/// Whether `tshark` can be run (checked once per process).
pub fn tshark_available() -> bool {
    static AVAILABLE: OnceLock<bool> = OnceLock::new();
    *AVAILABLE.get_or_init(|| {
        Command::new("tshark")
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    })
}

/// `tshark -r path -T fields -E separator=, -e f1 -e f2 ...`: one row per frame, one string
/// per field (multiple occurrences of a field are joined with `;`).
#[track_caller]
pub fn tshark_fields(path: impl AsRef<Path>, fields: &[&str]) -> Option<Vec<Vec<String>>> {
    tshark_fields_with(path, fields, &[])
}

/// Like [`tshark_fields`] with extra tshark arguments (e.g. `["-2"]`, `["-Y", "tcp.len>0"]`,
/// `["-o", "tcp.check_checksum:TRUE"]`).
#[track_caller]
pub fn tshark_fields_with(
    path: impl AsRef<Path>,
    fields: &[&str],
    extra: &[&str],
) -> Option<Vec<Vec<String>>> {
    let mut args: Vec<&str> = vec![
        "-n",
        "-T",
        "fields",
        "-E",
        "separator=,",
        "-E",
        "aggregator=;",
        "-E",
        "quote=n",
    ];
    for f in fields {
        args.extend(["-e", f]);
    }
    args.extend_from_slice(extra);
    let out = run(path.as_ref(), &args)?;
    Some(
        out.lines()
            .map(|l| l.split(',').map(str::to_owned).collect())
            .collect(),
    )
}

/// Numbers of the frames matching a Wireshark display filter, e.g.
/// `tshark_filter(p, "tcp.analysis.duplicate_ack")`.
#[track_caller]
pub fn tshark_filter(path: impl AsRef<Path>, filter: &str) -> Option<Vec<u64>> {
    let args = ["-n", "-Y", filter, "-T", "fields", "-e", "frame.number"];
    let out = run(path.as_ref(), &args)?;
    Some(
        out.lines()
            .map(|l| l.trim().parse().expect("frame.number is an integer"))
            .collect(),
    )
}

/// Runs `tshark -r path args...` and returns stdout; `None` if tshark is not installed.
#[track_caller]
fn run(path: &Path, args: &[&str]) -> Option<String> {
    if !tshark_available() {
        return None;
    }
    let out = Command::new("tshark")
        .arg("-r")
        .arg(path)
        .args(args)
        .output()
        .expect("tshark was found but could not be run");
    assert!(
        out.status.success(),
        "tshark -r {} {args:?} failed: {}",
        path.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    Some(String::from_utf8(out.stdout).expect("tshark prints UTF-8"))
}
