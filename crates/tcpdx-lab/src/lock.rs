//! Machine-wide locks of the lab for resources that cannot be shared between labs running
//! at the same time (e.g. rpcbind, whose socket and lock file have fixed global paths).
//! A lock is a file under [`crate::topology::STATE_DIR`] held with flock(2): the kernel
//! releases it when its holder dies, and the file is removed when it is released.

use anyhow::{Context, Result, bail};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Lock files this process holds, for the signal handler (which exits without drops).
static HELD: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());

/// Removes the files of the locks this process holds (before exiting on a signal; the
/// locks themselves die with the process).
pub fn unlink_held() {
    if let Ok(v) = HELD.lock() {
        for p in v.iter() {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// Whether this process holds lock `name`.
pub fn held_by_me(name: &str) -> bool {
    let file = format!("{name}.lock");
    HELD.lock().is_ok_and(|v| {
        v.iter()
            .any(|p| p.file_name().is_some_and(|f| f == file.as_str()))
    })
}

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
                if let Ok(mut v) = HELD.lock() {
                    v.push(path.clone());
                }
                return Ok(LabLock { file, path });
            }
        }
        bail!("could not take the {name} lock ({})", path.display())
    }

    /// Removes lock files nobody holds (after a crash; `tcpdx-lab cleanup`); returns the
    /// names of the removed locks (their holder died without releasing its resource).
    pub fn remove_stale() -> Vec<String> {
        let mut names = Vec::new();
        let Ok(rd) = std::fs::read_dir(crate::topology::STATE_DIR) else {
            return names;
        };
        for e in rd.flatten() {
            let p = e.path();
            if p.extension().is_some_and(|x| x == "lock")
                && let Ok(f) = File::open(&p)
                && crate::sys::try_lock_exclusive(&f).unwrap_or(false)
            {
                let _ = std::fs::remove_file(&p);
                if let Some(n) = p.file_stem() {
                    names.push(n.to_string_lossy().into_owned());
                }
            }
        }
        names
    }
}

impl Drop for LabLock {
    fn drop(&mut self) {
        // Unlink while still holding the lock, so a waiting process re-checks the inode.
        let _ = std::fs::remove_file(&self.path);
        if let Ok(mut v) = HELD.lock() {
            v.retain(|p| p != &self.path);
        }
        // the lock directory goes with its last entry (only succeeds when empty)
        if let Some(dir) = self.path.parent() {
            let _ = std::fs::remove_dir(dir);
        }
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
        assert!(held_by_me("nfs"));
        drop(b);
        assert!(!held_by_me("nfs"));
        assert!(
            !dir.exists(),
            "the empty lock directory goes with the last lock"
        );
    }
}
