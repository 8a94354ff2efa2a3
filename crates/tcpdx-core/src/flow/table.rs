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
}

impl FlowTable {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }
    /// Looks up the current connection of `key`.
    pub fn lookup(&self, key: &FlowKey) -> Lookup {
        match self.map.get(key) {
            Some(&slot) => Lookup::Existing(slot),
            None => Lookup::Missing,
        }
    }
    /// Binds `key` to `slot` (a new connection, possibly replacing a reused one) and
    /// returns the new connection's stream index.
    pub fn bind(&mut self, key: FlowKey, slot: usize) -> StreamId {
        self.map.insert(key, slot);
        let id = StreamId(self.next_stream);
        self.next_stream += 1;
        id
    }
    /// Number of stream indexes handed out.
    pub fn streams(&self) -> u32 {
        self.next_stream
    }
}
