//! The diagnosers' spill files: a [`ChunkStore`] in an unnamed temp file, so that what a
//! long connection accumulates (its encoded rounds) costs disk, not memory.
//!
//! One file per diagnoser (each worker of `--threads N` has its own), created in
//! [`Options::spill_dir`](crate::Options::spill_dir) (default: the temp directory, `$TMPDIR`
//! else `/tmp`) at the first write only (small captures never touch
//! the disk) and unlinked at once by the OS layer (`tempfile::tempfile`), so nothing is
//! left behind even on a crash. Freed blobs' space is reused (first fit), so the file
//! follows the rounds of the connections alive, not the capture's length.
//! Hidden knobs, for tests and measurements: `TCPDX_SPILL_TINY` (spill every round at once)
//! and `TCPDX_SPILL_STATS` (print the bytes written to standard error).

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::PathBuf;
use std::sync::Arc;

use tcpdx_detect::spill::BlobRef;
use tcpdx_detect::{ChunkStore, Spill, SpillPolicy};

use crate::Error;

/// A [`ChunkStore`] in an unnamed temp file.
#[derive(Debug, Default)]
pub(crate) struct FileStore {
    /// The directory of the file (`None`: the temp directory).
    dir: Option<PathBuf>,
    /// Created at the first write.
    file: Option<File>,
    /// End of the used part of the file.
    end: u64,
    /// Free extents (offset -> length), merged with their neighbours.
    free: BTreeMap<u64, u64>,
}

impl FileStore {
    /// Bytes of the file in use or free inside it (its size).
    #[cfg(test)]
    fn size(&self) -> u64 {
        self.end
    }

    /// A free extent of at least `len` bytes (first fit), else the end of the file.
    fn allocate(&mut self, len: u64) -> u64 {
        let fit = self
            .free
            .iter()
            .find(|&(_, &l)| l >= len)
            .map(|(&o, &l)| (o, l));
        match fit {
            Some((o, l)) => {
                self.free.remove(&o);
                if l > len {
                    self.free.insert(o + len, l - len);
                }
                o
            }
            None => {
                let o = self.end;
                self.end += len;
                o
            }
        }
    }
}

impl ChunkStore for FileStore {
    fn put(&mut self, bytes: &[u8]) -> io::Result<BlobRef> {
        if self.file.is_none() {
            self.file = Some(match &self.dir {
                Some(d) => tempfile::tempfile_in(d)?,
                None => tempfile::tempfile()?,
            });
        }
        let len = bytes.len() as u64;
        let offset = self.allocate(len);
        let f = self
            .file
            .as_mut()
            .ok_or_else(|| io::Error::other("no file"))?;
        f.seek(SeekFrom::Start(offset))?;
        f.write_all(bytes)?;
        Ok(BlobRef {
            offset,
            len: bytes.len() as u32,
        })
    }

    fn get(&mut self, r: BlobRef, out: &mut Vec<u8>) -> io::Result<()> {
        let f = self
            .file
            .as_mut()
            .ok_or_else(|| io::Error::other("read before any write"))?;
        f.seek(SeekFrom::Start(r.offset))?;
        out.clear();
        out.resize(r.len as usize, 0);
        f.read_exact(out)
    }

    fn free(&mut self, r: BlobRef) {
        let (mut o, mut l) = (r.offset, u64::from(r.len));
        if l == 0 {
            return;
        }
        // Merge with the free extent just before and just after.
        if let Some((&po, &pl)) = self.free.range(..o).next_back()
            && po + pl == o
        {
            self.free.remove(&po);
            o = po;
            l += pl;
        }
        if let Some(&nl) = self.free.get(&(o + l)) {
            self.free.remove(&(o + l));
            l += nl;
        }
        if o + l == self.end {
            // The tail of the file: give it back (the file is truncated when empty).
            self.end = o;
            if self.end == 0
                && let Some(f) = &self.file
            {
                let _ = f.set_len(0);
            }
        } else {
            self.free.insert(o, l);
        }
    }
}

/// Where the spill files go.
fn spill_dir(dir: Option<&PathBuf>) -> PathBuf {
    dir.cloned().unwrap_or_else(std::env::temp_dir)
}

/// A spill for one diagnoser: a temp file in `dir` (`None`: the temp directory), created
/// at its first write.
pub(crate) fn new_spill(dir: Option<&PathBuf>) -> Arc<Spill> {
    let policy = if std::env::var_os("TCPDX_SPILL_TINY").is_some() {
        SpillPolicy::tiny()
    } else {
        SpillPolicy::default()
    };
    let store = FileStore {
        dir: dir.cloned(),
        ..FileStore::default()
    };
    Arc::new(Spill::new(Box::new(store), policy))
}

/// The spills' first error as the run's (a diagnosis made after one is incomplete).
pub(crate) fn check<'a>(
    spills: impl IntoIterator<Item = &'a Arc<Spill>>,
    dir: Option<&PathBuf>,
) -> Result<(), Error> {
    let (mut written, mut records) = (0, 0);
    for s in spills {
        if let Some(error) = s.take_error() {
            return Err(Error::Spill {
                dir: spill_dir(dir),
                error,
            });
        }
        written += s.bytes_written();
        records += s.records_written();
    }
    if std::env::var_os("TCPDX_SPILL_STATS").is_some() {
        eprintln!("tcpdx: spill: {written} bytes written ({records} of list records)");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blobs_round_trip_and_freed_space_is_reused() {
        let mut s = FileStore::default();
        let a = s.put(&[1; 100]).unwrap();
        let b = s.put(&[2; 50]).unwrap();
        let c = s.put(&[3; 30]).unwrap();
        assert_eq!((a.offset, b.offset, c.offset), (0, 100, 150));
        let mut out = Vec::new();
        s.get(b, &mut out).unwrap();
        assert_eq!(out, vec![2; 50]);
        // A hole in the middle is reused by a blob that fits, the rest stays free.
        s.free(a);
        let d = s.put(&[4; 60]).unwrap();
        assert_eq!(d.offset, 0);
        let e = s.put(&[5; 40]).unwrap();
        assert_eq!(e.offset, 60);
        assert_eq!(s.size(), 180);
        s.get(c, &mut out).unwrap();
        assert_eq!(out, vec![3; 30]);
        s.get(e, &mut out).unwrap();
        assert_eq!(out, vec![5; 40]);
        // Freed neighbours merge; freeing the tail shrinks the file, down to empty.
        s.free(b);
        s.free(d);
        s.free(e);
        assert_eq!(s.free.len(), 1, "{:?}", s.free);
        s.free(c);
        assert_eq!(s.size(), 0);
        assert!(s.free.is_empty());
        let f = s.put(&[6; 10]).unwrap();
        assert_eq!(f.offset, 0);
        s.get(f, &mut out).unwrap();
        assert_eq!(out, vec![6; 10]);
    }

    #[test]
    fn a_spill_through_a_file_reads_back_what_it_wrote() {
        let sp = new_spill(None);
        let blobs: Vec<(BlobRef, Vec<u8>)> = (0..50u8)
            .map(|i| {
                let v = vec![i; 1000 + usize::from(i)];
                (sp.put(&v).expect("written"), v)
            })
            .collect();
        for (i, (r, v)) in blobs.iter().enumerate() {
            let mut out = Vec::new();
            assert!(sp.get(*r, &mut out), "blob {i}");
            assert_eq!(&out, v);
            sp.free(*r);
        }
        assert_eq!(sp.live_blobs(), 0);
        assert!(check([&sp], None).is_ok());
    }
}
