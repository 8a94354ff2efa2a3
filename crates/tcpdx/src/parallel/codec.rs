//! The lossless encoding of a worker run apart ([`Alone`]): what a distributed run's
//! stage 2 task hands to the merge in another process. Only what a `diagnose` worker
//! leaves is encoded (its batches hold stream openings, warnings and storage events; it
//! keeps evicted connections and reads no flow summaries at the end); anything else is
//! refused when writing ([`Alone::check_portable`]).

use tcpdx_core::codec::{Codec, Dec, DecodeError};

use super::Alone;
use super::batch::{BatchOut, FrameEnd, Out, RowMeta};
use super::part::Tail;

impl Alone {
    /// Whether [`Codec`] encodes `self` whole (else what it would lose).
    pub(crate) fn check_portable(&self) -> Result<(), &'static str> {
        if !self.flows.is_empty() {
            return Err("flow summaries (only a diagnosis partition can be written)");
        }
        let foreign = self
            .batches
            .iter()
            .flat_map(|b| &b.items)
            .any(|i| matches!(i, Out::Seg(..) | Out::Evicted(_)));
        if foreign {
            return Err("per-segment output (only a diagnosis partition can be written)");
        }
        if self.tail.as_ref().is_some_and(|t| t.spill.is_some()) {
            return Err("an unchecked spill");
        }
        Ok(())
    }
}

tcpdx_core::codec_struct!(FrameEnd { frame, items, rows });
tcpdx_core::codec_struct!(RowMeta { frame, local, end });
tcpdx_core::codec_struct!(BatchOut {
    items,
    row_meta,
    ends,
    rows
});

/// Tag of the items [`Alone::check_portable`] refuses (never read back).
const NOT_PORTABLE: u8 = 255;

impl Codec for Out {
    fn enc(&self, w: &mut Vec<u8>) {
        match self {
            Out::Opened(s) => {
                w.push(0);
                s.enc(w);
            }
            Out::Warning(x) => {
                w.push(1);
                x.enc(w);
            }
            Out::Storage(e) => {
                w.push(2);
                e.enc(w);
            }
            Out::Seg(..) | Out::Evicted(_) => w.push(NOT_PORTABLE),
        }
    }
    fn dec(r: &mut Dec<'_>) -> Result<Self, DecodeError> {
        Ok(match r.tag(3, "worker output item")? {
            0 => Out::Opened(Codec::dec(r)?),
            1 => Out::Warning(Codec::dec(r)?),
            _ => Out::Storage(Codec::dec(r)?),
        })
    }
}

impl Codec for Tail {
    fn enc(&self, w: &mut Vec<u8>) {
        // The spill is checked and dropped before (its blobs are read back into the
        // listing when each connection is diagnosed: nothing refers to them after).
        self.listing.enc(w);
        self.tcp_logs.enc(w);
        self.finish.enc(w);
        self.last.enc(w);
    }
    fn dec(r: &mut Dec<'_>) -> Result<Self, DecodeError> {
        Ok(Tail {
            listing: Codec::dec(r)?,
            spill: None,
            tcp_logs: Codec::dec(r)?,
            finish: Codec::dec(r)?,
            last: Codec::dec(r)?,
        })
    }
}

impl Codec for Alone {
    fn enc(&self, w: &mut Vec<u8>) {
        self.batches.enc(w);
        self.stats.enc(w);
        self.tail.enc(w);
    }
    fn dec(r: &mut Dec<'_>) -> Result<Self, DecodeError> {
        Ok(Alone {
            batches: Codec::dec(r)?,
            flows: Vec::new(),
            stats: Codec::dec(r)?,
            tail: Codec::dec(r)?,
        })
    }
}

impl Alone {
    /// Takes the spill out of the worker's end (to check it for errors: the partial is
    /// then written without it).
    pub(crate) fn take_spill(&mut self) -> Option<std::sync::Arc<tcpdx_detect::Spill>> {
        self.tail.as_mut().and_then(|t| t.spill.take())
    }
}
