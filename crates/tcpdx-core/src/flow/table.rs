//! The flow table: maps 4-tuples to connections and assigns stream indexes exactly as
//! Wireshark assigns `tcp.stream`.
//!
//! Wireshark: a conversation is found by its 4-tuple; a new one gets the next stream index.
//! A SYN (without ACK) whose sequence number differs from the base sequence number of the
//! existing connection in that direction starts a new conversation (port reuse).

use std::collections::HashMap;
use std::hash::BuildHasherDefault;

use rustc_hash::FxHasher;

use super::{FlowKey, StreamId};

/// Result of looking up a segment's connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lookup {
    /// An existing connection (slot index).
    Existing(usize),
    /// No connection for this key yet.
    Missing,
}

/// 4-tuple -> connection slot, plus the stream counter.
#[derive(Debug, Default)]
pub struct FlowTable {
    map: HashMap<FlowKey, usize, BuildHasherDefault<FxHasher>>,
    next_stream: u32,
    /// Keys found recently and their slots, by their ports ([`Recent::index`]): bulk
    /// traffic interleaves dozens of connections, and comparing one key is cheaper than
    /// probing the map. An entry is always the map's answer for its key: every change to
    /// the map updates the entry of the key changed.
    recent: Recent,
}

/// Entries of [`FlowTable::recent`] (a power of two).
const RECENT: usize = 256;

/// The slot of an empty [`Recent`] entry.
const NO_SLOT: usize = usize::MAX;

/// A direct-mapped cache of keys and their slots ([`NO_SLOT`]: empty). Plain pairs, read in
/// place: entries behind a `Cell<Option<..>>` were copied out whole (80 bytes) to be read.
#[derive(Debug)]
struct Recent(Box<[(FlowKey, usize); RECENT]>);

impl Default for Recent {
    fn default() -> Self {
        Self(Box::new([(FlowKey::ZERO, NO_SLOT); RECENT]))
    }
}

impl Recent {
    /// The index of `key`'s entry: its two ports folded (the connections of one host pair,
    /// or of one server, differ by their ports).
    #[inline(always)]
    fn index(key: &FlowKey) -> usize {
        let p = key.ports();
        (p ^ p >> 16) as usize % RECENT
    }

    #[inline(always)]
    fn get(&self, key: &FlowKey) -> Option<usize> {
        let (k, slot) = self.0.get(Self::index(key))?;
        (*slot != NO_SLOT && k == key).then_some(*slot)
    }

    fn set(&mut self, key: FlowKey, slot: usize) {
        if let Some(e) = self.0.get_mut(Self::index(&key)) {
            *e = (key, slot);
        }
    }

    fn forget(&mut self, key: &FlowKey) {
        if let Some(e) = self.0.get_mut(Self::index(key))
            && e.1 != NO_SLOT
            && e.0 == *key
        {
            e.1 = NO_SLOT;
        }
    }
}

impl FlowTable {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }
    /// Looks up the current connection of `key`.
    ///
    /// Always inlined: the key then stays in the caller's registers. Passed in memory, it
    /// was compared with 16-byte loads of the 8-byte stores that had just built it, which
    /// the CPU cannot forward (half of the lookup's time).
    #[inline(always)]
    pub fn lookup(&mut self, key: &FlowKey) -> Lookup {
        match self.recent.get(key) {
            Some(slot) => Lookup::Existing(slot),
            None => self.lookup_map(key),
        }
    }

    /// [`Self::lookup`] past the recent keys (out of line).
    #[inline(never)]
    fn lookup_map(&mut self, key: &FlowKey) -> Lookup {
        match self.map.get(key) {
            Some(&slot) => {
                self.recent.set(*key, slot);
                Lookup::Existing(slot)
            }
            None => Lookup::Missing,
        }
    }
    /// Binds `key` to `slot` (a new connection, possibly replacing a reused one) and
    /// returns the new connection's stream index.
    pub fn bind(&mut self, key: FlowKey, slot: usize) -> StreamId {
        self.recent.set(key, slot);
        self.map.insert(key, slot);
        let id = StreamId(self.next_stream);
        // 2^32 connections would take a capture of hundreds of GB; saturate rather than wrap.
        self.next_stream = self.next_stream.saturating_add(1);
        id
    }
    /// Binds `key` to `slot` for a connection that keeps its stream index (resumed after
    /// eviction).
    pub fn rebind(&mut self, key: FlowKey, slot: usize) {
        self.recent.set(key, slot);
        self.map.insert(key, slot);
    }
    /// Forgets `key` (its connection was evicted).
    pub fn unbind(&mut self, key: &FlowKey) {
        self.recent.forget(key);
        self.map.remove(key);
    }
    /// Number of 4-tuples bound.
    pub fn len(&self) -> usize {
        self.map.len()
    }
    /// True if no 4-tuple is bound.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
    /// Number of stream indexes handed out.
    pub fn streams(&self) -> u32 {
        self.next_stream
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flow::Endpoint;

    fn key(port: u16) -> FlowKey {
        let ep = |a: [u8; 4], port| Endpoint {
            addr: std::net::IpAddr::from(a),
            port,
        };
        FlowKey::new(ep([10, 0, 0, 1], port), ep([10, 0, 0, 2], 445)).0
    }

    #[test]
    fn the_recent_key_cache_follows_every_change() {
        let mut t = FlowTable::new();
        assert_eq!(t.lookup(&key(1)), Lookup::Missing);
        assert_eq!(t.bind(key(1), 0), StreamId(0));
        t.bind(key(2), 1);
        assert_eq!(t.lookup(&key(1)), Lookup::Existing(0));
        // Cached now; a new connection on the same 4-tuple (port reuse) moves it.
        assert_eq!(t.lookup(&key(1)), Lookup::Existing(0));
        assert_eq!(t.bind(key(1), 2), StreamId(2));
        assert_eq!(t.lookup(&key(1)), Lookup::Existing(2));
        assert_eq!(t.lookup(&key(2)), Lookup::Existing(1));
        t.rebind(key(2), 3);
        assert_eq!(t.lookup(&key(2)), Lookup::Existing(3));
        t.unbind(&key(2));
        assert_eq!(t.lookup(&key(2)), Lookup::Missing);
        assert_eq!(t.lookup(&key(1)), Lookup::Existing(2));
        t.unbind(&key(1));
        assert_eq!(t.lookup(&key(1)), Lookup::Missing);
        assert!(t.is_empty());
    }

    #[test]
    fn keys_sharing_a_cache_entry_keep_their_slots() {
        // Ports 1 and 257 fold to the same entry.
        let mut t = FlowTable::new();
        t.bind(key(1), 0);
        t.bind(key(257), 1);
        for _ in 0..2 {
            assert_eq!(t.lookup(&key(1)), Lookup::Existing(0));
            assert_eq!(t.lookup(&key(257)), Lookup::Existing(1));
        }
        // Forgetting one leaves the other, whichever the entry holds.
        t.unbind(&key(1));
        assert_eq!(t.lookup(&key(1)), Lookup::Missing);
        assert_eq!(t.lookup(&key(257)), Lookup::Existing(1));
        t.bind(key(1), 2);
        assert_eq!(t.lookup(&key(257)), Lookup::Existing(1));
        t.unbind(&key(257));
        assert_eq!(t.lookup(&key(257)), Lookup::Missing);
        assert_eq!(t.lookup(&key(1)), Lookup::Existing(2));
    }
}
