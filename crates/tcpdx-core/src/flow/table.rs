//! The flow table: maps 4-tuples to connections and assigns stream indexes exactly as
//! Wireshark assigns `tcp.stream`.
//!
//! Wireshark: a conversation is found by its 4-tuple; a new one gets the next stream index.
//! A SYN (without ACK) whose sequence number differs from the base sequence number of the
//! existing connection in that direction starts a new conversation (port reuse).

use std::cell::Cell;
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
    /// The last key found and its slot: consecutive segments often belong to the same
    /// connection, and comparing one key is cheaper than probing the map. Cleared by every
    /// change to the map.
    last: Cell<Option<(FlowKey, usize)>>,
}

impl FlowTable {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }
    /// Looks up the current connection of `key`.
    #[inline]
    pub fn lookup(&self, key: &FlowKey) -> Lookup {
        if let Some((k, slot)) = self.last.get()
            && k == *key
        {
            return Lookup::Existing(slot);
        }
        match self.map.get(key) {
            Some(&slot) => {
                self.last.set(Some((*key, slot)));
                Lookup::Existing(slot)
            }
            None => Lookup::Missing,
        }
    }
    /// Binds `key` to `slot` (a new connection, possibly replacing a reused one) and
    /// returns the new connection's stream index.
    pub fn bind(&mut self, key: FlowKey, slot: usize) -> StreamId {
        self.last.set(None);
        self.map.insert(key, slot);
        let id = StreamId(self.next_stream);
        // 2^32 connections would take a capture of hundreds of GB; saturate rather than wrap.
        self.next_stream = self.next_stream.saturating_add(1);
        id
    }
    /// Binds `key` to `slot` for a connection that keeps its stream index (resumed after
    /// eviction).
    pub fn rebind(&mut self, key: FlowKey, slot: usize) {
        self.last.set(None);
        self.map.insert(key, slot);
    }
    /// Forgets `key` (its connection was evicted).
    pub fn unbind(&mut self, key: &FlowKey) {
        self.last.set(None);
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
    fn the_last_key_cache_follows_every_change() {
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
}
