//! `tcpdx-lab install`: installs the Debian packages the lab needs with apt-get.

use crate::cmd;
use anyhow::{Result, bail};

/// Packages for the bulk lab (topology, capture, impairments).
pub const BULK_PACKAGES: &[&str] = &[
    "iproute2",
    "nftables",
    "ethtool",
    "tcpdump",
    "util-linux",
    "procps",
];
/// Packages for the storage workloads.
pub const STORAGE_PACKAGES: &[&str] = &[
    "samba",
    "smbclient",
    "nfs-ganesha",
    "nfs-ganesha-vfs",
    "libnfs-utils",
    "tgt",
    "libiscsi-bin",
    "rpcbind",
];

/// Whether a Debian package is installed.
pub fn installed(pkg: &str) -> bool {
    cmd::run("dpkg-query", &["-W", "-f=${Status}", pkg])
        .is_ok_and(|s| s.contains("install ok installed"))
}

/// Installs whatever is missing (bulk tools, plus storage servers unless `bulk_only`).
pub fn install(bulk_only: bool) -> Result<()> {
    let mut want: Vec<&str> = BULK_PACKAGES.to_vec();
    if !bulk_only {
        want.extend_from_slice(STORAGE_PACKAGES);
    }
    let missing: Vec<&str> = want.into_iter().filter(|p| !installed(p)).collect();
    if missing.is_empty() {
        eprintln!("install: everything is installed");
        return Ok(());
    }
    eprintln!("install: apt-get install {}", missing.join(" "));
    let st = std::process::Command::new("apt-get")
        .arg("update")
        .arg("-q")
        .status()?;
    if !st.success() {
        bail!("apt-get update failed");
    }
    let st = std::process::Command::new("apt-get")
        .args(["install", "-y", "-q", "--no-install-recommends"])
        .args(&missing)
        .env("DEBIAN_FRONTEND", "noninteractive")
        .status()?;
    if !st.success() {
        bail!("apt-get install failed");
    }
    Ok(())
}
