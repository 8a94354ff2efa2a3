//! Machine-wide locks of the lab for resources that cannot be shared between labs running
//! at the same time (e.g. rpcbind, whose socket and lock file have fixed global paths).
//! A lock is a file under [`crate::topology::STATE_DIR`] held with flock(2): the kernel
//! releases it when its holder dies, and the file is removed when it is released.

use anyhow::{Context, Result, bail};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// A held lock; released (and its file removed) on drop.
#[derive(Debug)]
pub struct LabLock {
    file: File,
    path: PathBuf,
}

/// Pid written into a lock file by its holder (for the error message).
fn holder(path: &Path) -> String {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "?".into())
}

impl LabLock {
    /// Takes lock `name` or fails at once, naming the holder's pid and `why` it is exclusive.
    pub fn acquire(name: &str, why: &str) -> Result<LabLock> {
        Self::acquire_in(Path::new(crate::topology::STATE_DIR), name, why)
    }

    /// Takes lock `name` in directory `dir` (see [`Self::acquire`]).
    pub fn acquire_in(dir: &Path, name: &str, why: &str) -> Result<LabLock> {
        let path = dir.join(format!("{name}.lock"));
        std::fs::create_dir_all(dir)?;
        // The file may be unlinked by its previous holder between open and flock; retry
        // until the locked file is the one at `path`.
        for _ in 0..10 {
            let file = OpenOptions::new()
                .create(true)
                .truncate(false)
                .read(true)
                .write(true)
                .open(&path)
                .with_context(|| format!("opening {}", path.display()))?;
            if !crate::sys::try_lock_exclusive(&file)? {
                bail!(
                    "another tcpdx-lab run (pid {}) holds the {name} lock ({}): {why}; wait for it to finish",
                    holder(&path),
                    path.display()
                );
            }
            let same = std::fs::metadata(&path)
                .is_ok_and(|m| m.ino() == file.metadata().map(|f| f.ino()).unwrap_or(0));
            if same {
                let mut file = file;
                file.set_len(0)?;
                writeln!(file, "{}", std::process::id())?;
                return Ok(LabLock { file, path });
            }
        }
        bail!("could not take the {name} lock ({})", path.display())
    }

    /// Removes lock files nobody holds (after a crash; `tcpdx-lab cleanup`).
    pub fn remove_stale() {
        let Ok(rd) = std::fs::read_dir(crate::topology::STATE_DIR) else {
            return;
        };
        for e in rd.flatten() {
            let p = e.path();
            if p.extension().is_some_and(|x| x == "lock")
                && let Ok(f) = File::open(&p)
                && crate::sys::try_lock_exclusive(&f).unwrap_or(false)
            {
                let _ = std::fs::remove_file(&p);
            }
        }
    }
}

impl Drop for LabLock {
    fn drop(&mut self) {
        // Unlink while still holding the lock, so a waiting process re-checks the inode.
        let _ = std::fs::remove_file(&self.path);
        let _ = &self.file;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_holder_is_refused_until_release() {
        let dir = std::env::temp_dir().join(format!("tcpdx-lock-test-{}", std::process::id()));
        let a = LabLock::acquire_in(&dir, "nfs", "test").unwrap();
        // flock locks belong to the open file description: a second open conflicts even
        // within one process, as a second tcpdx-lab would.
        let e = LabLock::acquire_in(&dir, "nfs", "only one at a time").unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains(&format!("pid {}", std::process::id())),
            "{msg}"
        );
        assert!(msg.contains("only one at a time"), "{msg}");
        drop(a);
        assert!(!dir.join("nfs.lock").exists());
        let b = LabLock::acquire_in(&dir, "nfs", "test").unwrap();
        drop(b);
        std::fs::remove_dir(&dir).unwrap();
    }
}
