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

/// Entries of [`FlowTable::recent`] (a power of two): room for the connections a busy
/// host keeps open at once (with 256, the 2,000 concurrent connections of a storage mix
/// missed it nearly always, and the map's lookups were a fifth of `flows`' time).
const RECENT: usize = 16_384;

/// An empty [`Recent`] entry.
const NO_SLOT: u32 = u32::MAX;

/// A direct-mapped cache of the slots of recent keys ([`NO_SLOT`]: empty). An entry holds a
/// slot only: whether that slot's connection has the key looked up is asked of the caller,
/// who reads that connection next anyway. 64 KB, where entries holding their keys took 1 MB
/// and missed the CPU's caches on busy captures.
#[derive(Debug)]
struct Recent(Box<[u32; RECENT]>);

impl Default for Recent {
    fn default() -> Self {
        Self(Box::new([NO_SLOT; RECENT]))
    }
}

impl Recent {
    /// The index of `key`'s entry: the high bits of its word times an odd constant
    /// (Fibonacci hashing), so that keys differing in any field, ports or addresses, spread.
    #[inline(always)]
    fn index(key: &FlowKey) -> usize {
        (key.word().wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - RECENT.trailing_zeros())) as usize
    }

    #[inline(always)]
    fn get(&self, key: &FlowKey) -> Option<usize> {
        let slot = *self.0.get(Self::index(key))?;
        (slot != NO_SLOT).then_some(slot as usize)
    }

    fn set(&mut self, key: &FlowKey, slot: usize) {
        if let Some(e) = self.0.get_mut(Self::index(key)) {
            // Slots beyond u32 (never: they are bounded by --max-flows) are not cached.
            *e = u32::try_from(slot).unwrap_or(NO_SLOT);
        }
    }

    /// Empties `key`'s entry if it holds `slot`.
    fn forget(&mut self, key: &FlowKey, slot: usize) {
        if let Some(e) = self.0.get_mut(Self::index(key))
            && *e as usize == slot
        {
            *e = NO_SLOT;
        }
    }
}

impl FlowTable {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// Looks up the current connection of `key`; `holds(slot)` tells whether the
    /// connection in `slot` has this key (the caller keeps the connections).
    ///
    /// Always inlined: the key then stays in the caller's registers. Passed in memory, it
    /// was compared with 16-byte loads of the 8-byte stores that had just built it, which
    /// the CPU cannot forward (half of the lookup's time).
    #[inline(always)]
    pub fn lookup(&mut self, key: &FlowKey, holds: impl Fn(usize) -> bool) -> Lookup {
        // An entry verified against its connection's key is the map's answer: every change
        // to the map sets or empties the entry of the key it changes, and two connections
        // with one key (a reused 4-tuple) never both get the entry.
        match self.recent.get(key) {
            Some(slot) if holds(slot) => Lookup::Existing(slot),
            _ => self.lookup_map(key),
        }
    }

    /// [`Self::lookup`] past the recent keys (out of line).
    #[inline(never)]
    fn lookup_map(&mut self, key: &FlowKey) -> Lookup {
        match self.map.get(key) {
            Some(&slot) => {
                self.recent.set(key, slot);
                Lookup::Existing(slot)
            }
            None => Lookup::Missing,
        }
    }
    /// Binds `key` to `slot` (a new connection, possibly replacing a reused one) and
    /// returns the new connection's stream index.
    pub fn bind(&mut self, key: FlowKey, slot: usize) -> StreamId {
        self.recent.set(&key, slot);
        self.map.insert(key, slot);
        let id = StreamId(self.next_stream);
        // 2^32 connections would take a capture of hundreds of GB; saturate rather than wrap.
        self.next_stream = self.next_stream.saturating_add(1);
        id
    }
    /// Binds `key` to `slot` for a connection that keeps its stream index (resumed after
    /// eviction).
    pub fn rebind(&mut self, key: FlowKey, slot: usize) {
        self.recent.set(&key, slot);
        self.map.insert(key, slot);
    }
    /// Forgets `key` (its connection was evicted).
    pub fn unbind(&mut self, key: &FlowKey) {
        if let Some(slot) = self.map.remove(key) {
            self.recent.forget(key, slot);
        }
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

    /// A table and the key each slot's connection has (what the analyzer keeps).
    #[derive(Default)]
    struct Table {
        t: FlowTable,
        slots: Vec<Option<FlowKey>>,
    }

    impl Table {
        fn bind(&mut self, k: FlowKey, slot: usize) -> StreamId {
            self.hold(k, slot);
            self.t.bind(k, slot)
        }
        fn rebind(&mut self, k: FlowKey, slot: usize) {
            self.hold(k, slot);
            self.t.rebind(k, slot)
        }
        /// Puts a connection with key `k` in `slot`, evicting the one there as the
        /// analyzer does (unbound if it is still its key's current connection).
        fn hold(&mut self, k: FlowKey, slot: usize) {
            if self.slots.len() <= slot {
                self.slots.resize(slot + 1, None);
            }
            if let Some(old) = self.slots[slot]
                && self.t.lookup_map(&old) == Lookup::Existing(slot)
            {
                self.t.unbind(&old);
            }
            self.slots[slot] = Some(k);
        }
        fn unbind(&mut self, k: &FlowKey) {
            self.t.unbind(k)
        }
        fn lookup(&mut self, k: &FlowKey) -> Lookup {
            let slots = &self.slots;
            let cached = self
                .t
                .lookup(k, |s| slots.get(s).copied().flatten() == Some(*k));
            // Always the map's answer.
            assert_eq!(cached, self.t.lookup_map(k));
            cached
        }
        fn is_empty(&self) -> bool {
            self.t.is_empty()
        }
    }

    fn key(port: u16) -> FlowKey {
        let ep = |a: [u8; 4], port| Endpoint {
            addr: std::net::IpAddr::from(a),
            port,
        };
        FlowKey::new(ep([10, 0, 0, 1], port), ep([10, 0, 0, 2], 445)).0
    }

    #[test]
    fn the_recent_key_cache_follows_every_change() {
        let mut t = Table::default();
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
        // Two ports whose keys share an entry.
        let p = (2..u16::MAX)
            .find(|&p| Recent::index(&key(p)) == Recent::index(&key(1)))
            .expect("a port sharing port 1's entry");
        let key = |q: u16| key(if q == 257 { p } else { q });
        let mut t = Table::default();
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

    /// Random binds, rebinds and unbinds over few keys and slots (so entries are shared,
    /// slots reused by other keys and keys rebound elsewhere, as eviction and port reuse
    /// do): the cached answer is always the map's (checked inside `Table::lookup`).
    #[test]
    fn the_cache_agrees_with_the_map_under_churn() {
        let mut rng = 0x1234_5678_9abc_def0u64;
        let mut next = move |n: u64| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng % n
        };
        // Ports whose keys share one entry, and others.
        let shared: Vec<u16> = (2..u16::MAX)
            .filter(|&p| Recent::index(&key(p)) == Recent::index(&key(1)))
            .take(3)
            .chain([1, 7, 8])
            .collect();
        let mut t = Table::default();
        for _ in 0..20_000 {
            let k = key(shared[next(shared.len() as u64) as usize]);
            let slot = next(5) as usize;
            match next(4) {
                0 => {
                    t.bind(k, slot);
                }
                1 => t.rebind(k, slot),
                2 => t.unbind(&k),
                _ => {
                    t.lookup(&k);
                }
            }
        }
    }
}
