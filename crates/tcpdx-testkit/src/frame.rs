//! [`OwnedFrame`]: a captured record that owns its bytes, the kit's unit of output.

use tcpdx_wire::{Frame, FrameNo, LinkType, Timestamp};

/// One captured record owning its bytes; [`OwnedFrame::as_frame`] lends it as a [`Frame`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OwnedFrame {
    /// Wireshark frame number (1-based).
    pub no: FrameNo,
    /// Capture timestamp (ns since the Unix epoch).
    pub ts: Timestamp,
    /// Link type of the bytes in `data`.
    pub link: LinkType,
    /// Length on the wire; larger than `data.len()` when a snaplen cut the frame.
    pub orig_len: u32,
    /// The captured bytes.
    pub data: Vec<u8>,
}

impl OwnedFrame {
    /// Borrows this record as the pipeline's [`Frame`] (interface 0).
    pub fn as_frame(&self) -> Frame<'_> {
        Frame {
            no: self.no,
            ts: self.ts,
            link: self.link,
            orig_len: self.orig_len,
            interface: 0,
            data: &self.data,
        }
    }
}
