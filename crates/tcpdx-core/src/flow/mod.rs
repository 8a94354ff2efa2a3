//! Connection identity: 4-tuple keys, directions, Wireshark-compatible stream indexes.

mod evicted;
mod key;
mod lru;
mod table;
mod text;

pub use evicted::{Evicted, EvictedFlows};
pub use key::{Dir, Endpoint, FlowKey};
pub use lru::Lru;
pub use table::{FlowTable, Lookup};
pub use text::ipv4_text;

use std::fmt;

/// Wireshark's `tcp.stream`: 0-based, in order of first appearance, new on port reuse.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct StreamId(pub u32);

impl fmt::Display for StreamId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}
