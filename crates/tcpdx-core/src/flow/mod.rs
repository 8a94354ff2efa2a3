//! Connection identity: 4-tuple keys, directions, Wireshark-compatible stream indexes.

mod key;
mod table;

pub use key::{Dir, Endpoint, FlowKey};
pub use table::{FlowTable, Lookup};

use std::fmt;

/// Wireshark's `tcp.stream`: 0-based, in order of first appearance, new on port reuse.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct StreamId(pub u32);

impl fmt::Display for StreamId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}
