//! Running external tools (ip, tc, nft, tcpdump, ...) with clear errors.

use anyhow::{Context, Result, bail};
use std::process::{Command, Stdio};

/// Runs `prog args...`, fails with its stderr if it exits non-zero; returns stdout.
pub fn run(prog: &str, args: &[&str]) -> Result<String> {
    let out = Command::new(prog)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .with_context(|| {
            format!("cannot run `{prog}` (is it installed? try `tcpdx-lab install`)")
        })?;
    if !out.status.success() {
        bail!(
            "`{} {}` failed ({}): {}",
            prog,
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Runs a command and ignores failures (for best-effort cleanup); returns success.
pub fn run_quiet(prog: &str, args: &[&str]) -> bool {
    Command::new(prog)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Runs `prog args...` inside network namespace `ns` (via `ip netns exec`).
pub fn ns_run(ns: &str, prog: &str, args: &[&str]) -> Result<String> {
    let mut a = vec!["netns", "exec", ns, prog];
    a.extend_from_slice(args);
    run("ip", &a)
}

/// Runs `sh -c script` inside namespace `ns`.
pub fn ns_sh(ns: &str, script: &str) -> Result<String> {
    ns_run(ns, "sh", &["-c", script])
}

/// Feeds `input` to `prog args...` on stdin; fails with stderr on non-zero exit.
pub fn run_stdin(prog: &str, args: &[&str], input: &str) -> Result<String> {
    use std::io::Write;
    let mut child = Command::new(prog)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("cannot run `{prog}`"))?;
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input.as_bytes())?;
    let out = child.wait_with_output()?;
    if !out.status.success() {
        bail!(
            "`{} {}` failed: {}\ninput:\n{}",
            prog,
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim(),
            input
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Whether an executable named `prog` is on PATH.
pub fn have(prog: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(prog).is_file()))
}

/// Writes `value` into a sysctl-like file inside namespace `ns` (for /proc/sys or /sys paths).
pub fn ns_write(ns: &str, path: &str, value: &str) -> Result<()> {
    ns_sh(ns, &format!("echo {value} > {path}")).map(|_| ())
}
