//! tcpdx-capture: the only reader of capture files.
//!
//! capture -> wire -> core -> detect -> report. This crate opens a file (or stdin), sniffs
//! the format from magic bytes (gzip / zstd in front of pcap in its 4 variants or pcapng),
//! and hands out [`Frame`]s one at a time from a bounded buffer.
//!
//! CONTRACT (used by tcpdx-cli; keep stable):
//! - `CaptureReader::open(path)` ("-" means stdin), `CaptureReader::from_reader(name, reader)`.
//! - `next_frame()` -> `Ok(Some(frame))`, `Ok(None)` at the end, or `Err(CaptureError)`
//!   for a capture that is bad at some byte offset. Frame numbers count every packet record
//!   (EPB, SPB, OPB, pcap records), 1-based, like Wireshark's `frame.number`.
//! - A record cut off at end of file ends the stream with `Ok(None)` and leaves a
//!   [`CaptureWarning`] naming the offset (see `warnings()`).
//! - Memory is bounded: one record at a time, whatever the file size.

pub use tcpdx_wire::{Frame, FrameNo, LinkType, Timestamp};
