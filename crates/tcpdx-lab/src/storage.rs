//! Storage workloads (SMB3, NFSv3/v4, iSCSI): servers in the server namespace, clients in
//! the client namespace, configs from `lab/conf/`.

use crate::scenario::{Scenario, StorageOp};
use crate::topology::Names;
use crate::truth::Stall;
use anyhow::{Result, bail};
use std::path::Path;

/// TCP ports a storage operation uses (first = data port).
pub fn ports(op: StorageOp) -> Vec<u16> {
    match op {
        StorageOp::Smb3Read | StorageOp::Smb3Write => vec![445],
        StorageOp::Nfs3Read | StorageOp::Nfs3Write => vec![2049, 111, 20048],
        StorageOp::Nfs4Read => vec![2049],
        StorageOp::IscsiRead => vec![3260],
    }
}

/// Whether the client sends the bulk data.
pub fn is_write(op: StorageOp) -> bool {
    matches!(op, StorageOp::Smb3Write | StorageOp::Nfs3Write)
}

/// Running storage servers.
pub struct Services {}

impl Services {
    /// Starts the servers the scenario needs.
    pub fn start(_n: &Names, _sc: &Scenario, _out: &Path) -> Result<Services> {
        bail!("storage workloads are not implemented yet")
    }

    /// Runs the client operation.
    pub fn run_client(
        &mut self,
        _n: &Names,
        _sc: &Scenario,
        _short: bool,
        _out: &Path,
    ) -> Result<serde_json::Value> {
        bail!("storage workloads are not implemented yet")
    }

    /// Stops the servers.
    pub fn stop(self, _n: &Names) {}
}

/// Stall intervals recorded during the run (SIGSTOP..SIGCONT), removing the record file.
pub fn take_stalls(_out: &Path) -> Option<Vec<Stall>> {
    None
}

/// Stops a tgtd started by the lab with prefix `prefix` (tgtd ignores SIGTERM while targets exist).
pub fn stop_tgt_for(_prefix: &str) {}
