//! [`Spill`]: where a [`Diagnoser`](crate::Diagnoser) keeps what its live connections have
//! accumulated beyond a small in-memory budget (the encoded rounds of
//! [`Rounds`](crate::infer::Rounds)), so that its memory does not grow with a connection's
//! length.
//!
//! The crate does no IO: the bytes go to an injected [`ChunkStore`]. [`MemStore`] keeps them
//! in memory (the default: tests and library users); the CLI gives each diagnoser a temp
//! file. A store error is remembered (the first one) and spilling stops: what was not
//! written stays in memory, nothing is lost, and the caller reports the error
//! ([`Spill::take_error`]) once it has finished.

use std::fmt;
use std::io;
use std::sync::Mutex;

pub mod list;

pub use list::SpillList;

/// Where a stored blob is (opaque to the diagnoser; the store's own addressing).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BlobRef {
    /// Position in the store (a byte offset for a file).
    pub offset: u64,
    /// Length in bytes.
    pub len: u32,
}

/// A place for blobs of bytes: written once, read back any number of times, then freed.
pub trait ChunkStore: Send + fmt::Debug {
    /// Stores `bytes`; the handle to read them back.
    fn put(&mut self, bytes: &[u8]) -> io::Result<BlobRef>;
    /// Reads the blob `r` into `out` (replacing its contents).
    fn get(&mut self, r: BlobRef, out: &mut Vec<u8>) -> io::Result<()>;
    /// The blob `r` will not be read again (its space may be reused).
    fn free(&mut self, r: BlobRef);
}

/// A [`ChunkStore`] in memory: moves the bytes, saves nothing (the default; tests).
#[derive(Debug, Default)]
pub struct MemStore {
    blobs: Vec<Vec<u8>>,
    /// Slots freed, reused first.
    free: Vec<usize>,
}

impl ChunkStore for MemStore {
    fn put(&mut self, bytes: &[u8]) -> io::Result<BlobRef> {
        let slot = match self.free.pop() {
            Some(s) => s,
            None => {
                self.blobs.push(Vec::new());
                self.blobs.len() - 1
            }
        };
        let b = self
            .blobs
            .get_mut(slot)
            .ok_or_else(|| io::Error::other("memory store: bad slot"))?;
        b.clear();
        b.extend_from_slice(bytes);
        Ok(BlobRef {
            offset: slot as u64,
            len: bytes.len() as u32,
        })
    }

    fn get(&mut self, r: BlobRef, out: &mut Vec<u8>) -> io::Result<()> {
        let b = self
            .blobs
            .get(r.offset as usize)
            .filter(|b| b.len() == r.len as usize)
            .ok_or_else(|| io::Error::other(format!("memory store: no blob at {}", r.offset)))?;
        out.clear();
        out.extend_from_slice(b);
        Ok(())
    }

    fn free(&mut self, r: BlobRef) {
        if let Some(b) = self.blobs.get_mut(r.offset as usize) {
            *b = Vec::new();
            self.free.push(r.offset as usize);
        }
    }
}

/// Encoded rounds kept in memory per sender before the full chunks go to the store, in
/// chunks (tcpdx choice: 4 chunks of 256 rounds, ~17 KB per sender, written as one blob).
pub const RESIDENT_CHUNKS: usize = 4;

/// Records of a [`SpillList`] kept in memory per list, written out together when full
/// (tcpdx choice: 16 loss episodes take ~2 KB; a bulk connection has one every few hundred
/// round trips, so a list takes about as much memory at 1 M packets as at 20 M).
pub const LIST_RECORDS: usize = 16;

/// Silent gaps of a connection kept in memory, written out together when full (tcpdx
/// choice: ~10 KB; a connection with a silence every few segments has hundreds, and
/// writing them 16 at a time cost a diagnosis of many short ones 6%, a write per blob).
pub const GAP_RECORDS: usize = 256;

/// How much a diagnoser keeps in memory per sender: chunks of `chunk_rounds` rounds, of
/// which `resident_chunks` full ones stay before they are written out together; and how
/// many rounds a connection may have to be decoded at once for its diagnosis.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SpillPolicy {
    /// Rounds per encoded chunk (at least 1).
    pub chunk_rounds: usize,
    /// Full chunks kept in memory (0: each is written as soon as it is full).
    pub resident_chunks: usize,
    /// A sender with more rounds is decoded a blob at a time on every walk of its
    /// diagnosis instead of once into a list.
    pub decode_all_max_rounds: usize,
    /// Records of a [`SpillList`] per blob: the list keeps at most that many in memory.
    pub list_records: usize,
    /// The same for a connection's silent gaps.
    pub gap_records: usize,
}

impl Default for SpillPolicy {
    fn default() -> Self {
        Self {
            chunk_rounds: crate::infer::rounds::CHUNK,
            resident_chunks: RESIDENT_CHUNKS,
            decode_all_max_rounds: crate::infer::rounds::DECODE_ALL_MAX_ROUNDS,
            list_records: LIST_RECORDS,
            gap_records: GAP_RECORDS,
        }
    }
}

impl SpillPolicy {
    /// Everything written out at once, one round per chunk and one record per list blob,
    /// and every diagnosis reading the rounds back on each walk: exercises the store on tiny inputs (tests;
    /// `TCPDX_SPILL_TINY` in the CLI).
    pub fn tiny() -> Self {
        Self {
            chunk_rounds: 1,
            resident_chunks: 0,
            decode_all_max_rounds: 0,
            list_records: 1,
            gap_records: 1,
        }
    }
}

/// A [`ChunkStore`] shared by a diagnoser's connections, with its policy, the first error
/// and the bytes written.
pub struct Spill {
    policy: SpillPolicy,
    inner: Mutex<Inner>,
}

struct Inner {
    store: Box<dyn ChunkStore>,
    error: Option<io::Error>,
    written: u64,
    records_written: u64,
    live: u64,
}

impl fmt::Debug for Spill {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Spill")
            .field("policy", &self.policy)
            .finish_non_exhaustive()
    }
}

impl Default for Spill {
    fn default() -> Self {
        Self::new(Box::<MemStore>::default(), SpillPolicy::default())
    }
}

impl Spill {
    /// Spilling into `store` under `policy`.
    pub fn new(store: Box<dyn ChunkStore>, policy: SpillPolicy) -> Self {
        Self {
            policy: SpillPolicy {
                chunk_rounds: policy.chunk_rounds.max(1),
                list_records: policy.list_records.max(1),
                gap_records: policy.gap_records.max(1),
                ..policy
            },
            inner: Mutex::new(Inner {
                store,
                error: None,
                written: 0,
                records_written: 0,
                live: 0,
            }),
        }
    }

    /// The policy.
    pub fn policy(&self) -> SpillPolicy {
        self.policy
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // A panic while holding the lock cannot leave the store half-updated in a way that
        // matters more than the panic itself: keep going with its state.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Stores `bytes`; `None` if the store failed, now or before (keep them in memory).
    pub fn put(&self, bytes: &[u8]) -> Option<BlobRef> {
        let mut g = self.lock();
        if g.error.is_some() {
            return None;
        }
        match g.store.put(bytes) {
            Ok(r) => {
                g.written += bytes.len() as u64;
                g.live += 1;
                Some(r)
            }
            Err(e) => {
                g.error = Some(e);
                None
            }
        }
    }

    /// Stores the records of a list ([`SpillList`], the recent retransmissions) as
    /// [`Spill::put`] does, counted apart too ([`Spill::records_written`]).
    pub fn put_records(&self, bytes: &[u8]) -> Option<BlobRef> {
        let r = self.put(bytes);
        if r.is_some() {
            self.lock().records_written += bytes.len() as u64;
        }
        r
    }

    /// Reads `r` into `out`; false if the store failed (the error is kept).
    pub fn get(&self, r: BlobRef, out: &mut Vec<u8>) -> bool {
        let mut g = self.lock();
        match g.store.get(r, out) {
            Ok(()) => true,
            Err(e) => {
                out.clear();
                g.error.get_or_insert(e);
                false
            }
        }
    }

    /// Frees `r`.
    pub fn free(&self, r: BlobRef) {
        let mut g = self.lock();
        g.live = g.live.saturating_sub(1);
        g.store.free(r);
    }

    /// The first store error, if any (a diagnosis made after one is incomplete).
    pub fn take_error(&self) -> Option<io::Error> {
        self.lock().error.take()
    }

    /// Bytes written to the store so far.
    pub fn bytes_written(&self) -> u64 {
        self.lock().written
    }

    /// Bytes of list records written (part of [`Spill::bytes_written`]).
    pub fn records_written(&self) -> u64 {
        self.lock().records_written
    }

    /// Blobs stored and not yet freed.
    pub fn live_blobs(&self) -> u64 {
        self.lock().live
    }
}

/// A store whose puts fail and whose reads fail: the error path of the spilling types'
/// tests.
#[cfg(test)]
#[derive(Debug)]
pub(crate) struct BrokenStore;

#[cfg(test)]
impl ChunkStore for BrokenStore {
    fn put(&mut self, _: &[u8]) -> io::Result<BlobRef> {
        Err(io::Error::other("no space left"))
    }
    fn get(&mut self, _: BlobRef, _: &mut Vec<u8>) -> io::Result<()> {
        Err(io::Error::other("unreadable"))
    }
    fn free(&mut self, _: BlobRef) {}
}

/// A spill into a [`BrokenStore`] that spills at once ([`SpillPolicy::tiny`]).
#[cfg(test)]
pub(crate) fn broken_tiny() -> std::sync::Arc<Spill> {
    std::sync::Arc::new(Spill::new(Box::new(BrokenStore), SpillPolicy::tiny()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A store that fails every call after `ok` successful puts.
    #[derive(Debug)]
    struct Failing {
        inner: MemStore,
        ok: usize,
    }

    impl ChunkStore for Failing {
        fn put(&mut self, bytes: &[u8]) -> io::Result<BlobRef> {
            if self.ok == 0 {
                return Err(io::Error::other("disk full"));
            }
            self.ok -= 1;
            self.inner.put(bytes)
        }
        fn get(&mut self, r: BlobRef, out: &mut Vec<u8>) -> io::Result<()> {
            self.inner.get(r, out)
        }
        fn free(&mut self, r: BlobRef) {
            self.inner.free(r);
        }
    }

    #[test]
    fn mem_store_round_trips_and_reuses_freed_slots() {
        let mut s = MemStore::default();
        let a = s.put(b"alpha").unwrap();
        let b = s.put(b"be").unwrap();
        let mut out = Vec::new();
        s.get(a, &mut out).unwrap();
        assert_eq!(out, b"alpha");
        s.get(b, &mut out).unwrap();
        assert_eq!(out, b"be");
        s.free(a);
        assert!(s.get(a, &mut out).is_err(), "freed blob read back");
        let c = s.put(b"gamma!").unwrap();
        assert_eq!(c.offset, a.offset, "slot reused");
        s.get(c, &mut out).unwrap();
        assert_eq!(out, b"gamma!");
    }

    #[test]
    fn spill_counts_and_keeps_the_first_error() {
        let sp = Spill::new(
            Box::new(Failing {
                inner: MemStore::default(),
                ok: 1,
            }),
            SpillPolicy::default(),
        );
        let a = sp.put(b"xyz").expect("first put works");
        assert_eq!(sp.bytes_written(), 3);
        assert_eq!(sp.live_blobs(), 1);
        assert!(sp.put(b"more").is_none());
        // Once failed, no more attempts (and the count stays).
        assert!(sp.put(b"more").is_none());
        assert_eq!(sp.bytes_written(), 3);
        let mut out = Vec::new();
        assert!(sp.get(a, &mut out));
        assert_eq!(out, b"xyz");
        sp.free(a);
        assert_eq!(sp.live_blobs(), 0);
        assert!(!sp.get(a, &mut out), "reading a freed blob fails");
        let e = sp.take_error().expect("error kept");
        assert_eq!(e.to_string(), "disk full");
        assert!(sp.take_error().is_none());
    }
}
