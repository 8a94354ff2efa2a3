//! What the analyzer emits: per-segment analysis rows, flow summaries, warnings.
//!
//! Results are pushed into an [`EventSink`] (ripgrep's sink model): renderers implement it
//! and stream, tests collect into a `Vec<Event>`.

use std::fmt;
use std::net::IpAddr;

use tcpdx_wire::{FrameNo, Timestamp};

use crate::flow::{Dir, StreamId};
use crate::tcp::stats::FlowSummary;

/// The `tcp.analysis.*` flags of one segment, as a bit set.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct AnalysisFlags(pub u16);

macro_rules! analysis_flags {
    ($($(#[$doc:meta])* $name:ident = $bit:expr, $text:literal;)*) => {
        impl AnalysisFlags {
            $($(#[$doc])* pub const $name: u16 = 1 << $bit;)*
            /// Every flag with its Wireshark name, in output order.
            pub const NAMES: &'static [(u16, &'static str)] = &[$((1 << $bit, $text)),*];
        }
    };
}

analysis_flags! {
    /// `tcp.analysis.retransmission`.
    RETRANSMISSION = 0, "retransmission";
    /// `tcp.analysis.fast_retransmission`.
    FAST_RETRANSMISSION = 1, "fast_retransmission";
    /// `tcp.analysis.spurious_retransmission`.
    SPURIOUS_RETRANSMISSION = 2, "spurious_retransmission";
    /// `tcp.analysis.out_of_order`.
    OUT_OF_ORDER = 3, "out_of_order";
    /// `tcp.analysis.lost_segment` (previous segment not captured).
    LOST_SEGMENT = 4, "lost_segment";
    /// `tcp.analysis.ack_lost_segment` (ACKed segment not captured).
    ACK_LOST_SEGMENT = 5, "ack_lost_segment";
    /// `tcp.analysis.duplicate_ack`.
    DUPLICATE_ACK = 6, "duplicate_ack";
    /// `tcp.analysis.zero_window`.
    ZERO_WINDOW = 7, "zero_window";
    /// `tcp.analysis.zero_window_probe`.
    ZERO_WINDOW_PROBE = 8, "zero_window_probe";
    /// `tcp.analysis.zero_window_probe_ack`.
    ZERO_WINDOW_PROBE_ACK = 9, "zero_window_probe_ack";
    /// `tcp.analysis.window_full`.
    WINDOW_FULL = 10, "window_full";
    /// `tcp.analysis.window_update`.
    WINDOW_UPDATE = 11, "window_update";
    /// `tcp.analysis.keep_alive`.
    KEEP_ALIVE = 12, "keep_alive";
    /// `tcp.analysis.keep_alive_ack`.
    KEEP_ALIVE_ACK = 13, "keep_alive_ack";
    /// `tcp.analysis.reused_ports`.
    REUSED_PORTS = 14, "reused_ports";
}

impl AnalysisFlags {
    /// True if every bit of `mask` is set.
    pub const fn has(self, mask: u16) -> bool {
        self.0 & mask == mask
    }
    /// True if any bit of `mask` is set.
    pub const fn any(self, mask: u16) -> bool {
        self.0 & mask != 0
    }
    /// Sets the bits of `mask`.
    pub fn set(&mut self, mask: u16) {
        self.0 |= mask;
    }
    /// True if no flag is set.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }
    /// The names of the set flags, in canonical order.
    pub fn names(self) -> impl Iterator<Item = &'static str> {
        Self::NAMES
            .iter()
            .filter(move |(bit, _)| self.0 & bit != 0)
            .map(|(_, name)| *name)
    }
    /// Parses one Wireshark flag name.
    pub fn from_name(name: &str) -> Option<u16> {
        Self::NAMES
            .iter()
            .find(|(_, n)| *n == name)
            .map(|(b, _)| *b)
    }
}

impl fmt::Display for AnalysisFlags {
    /// `|`-joined names, as in the `events` CSV `flags` column.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, name) in self.names().enumerate() {
            if i > 0 {
                f.write_str("|")?;
            }
            f.write_str(name)?;
        }
        Ok(())
    }
}

/// One row of `tcpdx events`: the analysis of one TCP segment.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SegmentAnalysis {
    /// Wireshark frame number.
    pub frame: FrameNo,
    /// Wireshark `tcp.stream`.
    pub stream: StreamId,
    /// Capture timestamp.
    pub ts: Timestamp,
    /// Nanoseconds since the first frame of the capture.
    pub rel_time_ns: i64,
    /// Direction within the connection (client = first sender seen, or the SYN sender).
    pub dir: Dir,
    /// Source address.
    pub src: IpAddr,
    /// Source port.
    pub sport: u16,
    /// Destination address.
    pub dst: IpAddr,
    /// Destination port.
    pub dport: u16,
    /// Relative sequence number, unwrapped to 64 bits (Wireshark's `tcp.seq` mod 2^32).
    pub seq: u64,
    /// Relative acknowledgement number (unwrapped) when ACK is set, else the raw field.
    pub ack: u64,
    /// TCP flags.
    pub tcp_flags: u16,
    /// Segment length (`tcp.len`).
    pub len: u32,
    /// Raw window field.
    pub window_raw: u16,
    /// Window in bytes after scaling (`tcp.window_size`).
    pub window: u64,
    /// `tcp.analysis.*` flags.
    pub flags: AnalysisFlags,
    /// `tcp.analysis.duplicate_ack_num`, when a duplicate ACK.
    pub dup_ack_num: Option<u32>,
    /// `tcp.analysis.bytes_in_flight`.
    pub bytes_in_flight: Option<u32>,
    /// `tcp.analysis.ack_rtt` in nanoseconds.
    pub ack_rtt_ns: Option<i64>,
    /// Frame this segment acknowledges (`tcp.analysis.acks_frame`).
    pub acks_frame: Option<FrameNo>,
}

/// Maximum number of SACK blocks in one segment (RFC 2018: 40 option bytes hold 4).
pub const MAX_SACK_BLOCKS: usize = 4;

/// What a segment carries beyond the `events` row, for consumers that infer the sender's
/// state (tcpdx-detect): SACK blocks and handshake options. Delivered with
/// [`EventSink::segment_detail`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SegmentDetail {
    /// SACK blocks `[left, right)` in the *peer's* relative sequence space (like `ack`),
    /// unwrapped to 64 bits; only the first `sack_count` are valid.
    pub sack: [(u64, u64); MAX_SACK_BLOCKS],
    /// Number of valid entries in `sack`.
    pub sack_count: u8,
    /// MSS option (SYNs).
    pub mss: Option<u16>,
    /// Window scale option (SYNs).
    pub window_scale: Option<u8>,
    /// SACK-permitted option (SYNs).
    pub sack_permitted: bool,
    /// Timestamps option `(TSval, TSecr)`.
    pub timestamps: Option<(u32, u32)>,
    /// IPv4 identification (0 for IPv6).
    pub ip_id: u16,
    /// IPv4 TTL / IPv6 hop limit.
    pub ttl: u8,
    /// Payload bytes captured (below the row's `len` when the snap length cut the frame).
    pub captured: u32,
}

impl SegmentDetail {
    /// The valid SACK blocks.
    pub fn sack_blocks(&self) -> &[(u64, u64)] {
        let n = usize::from(self.sack_count).min(MAX_SACK_BLOCKS);
        self.sack.get(..n).unwrap_or_default()
    }
}

/// Something about the input worth telling the user, counted rather than repeated.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Warning {
    /// A per-connection cap was hit (e.g. the unacked-segment list is full); counted per kind.
    StateCapReached {
        /// Stream whose state hit the cap.
        stream: StreamId,
        /// What was capped.
        what: &'static str,
    },
}

impl Warning {
    /// The stream the warning is about, if any (for renumbering).
    pub fn stream_mut(&mut self) -> Option<&mut StreamId> {
        match self {
            Warning::StateCapReached { stream, .. } => Some(stream),
        }
    }
}

/// Receives analysis results, push model. Every method has a no-op default.
pub trait EventSink {
    /// One analysed TCP segment.
    fn segment(&mut self, _a: &SegmentAnalysis) {}
    /// One analysed TCP segment with its SACK blocks and options. The analyzer calls this
    /// (not `segment`) for every segment; the default forwards to [`EventSink::segment`],
    /// so sinks that only need the row implement `segment` alone.
    fn segment_detail(&mut self, a: &SegmentAnalysis, _d: &SegmentDetail) {
        self.segment(a);
    }
    /// The captured payload of the segment just reported by `segment_detail`, for
    /// application-layer consumers (tcpdx-storage). Called for every segment with
    /// `a.len > 0`; `payload.len() < a.len` when the snaplen cut it (and always empty for
    /// hand-built segments, which carry no bytes).
    fn payload(&mut self, _a: &SegmentAnalysis, _payload: &[u8]) {}
    /// A connection's summary, once at the end of input.
    fn flow(&mut self, _f: &FlowSummary) {}
    /// The summary so far of a connection evicted because `max_flows` connections were
    /// tracked at once. If it resumes, its later part comes as a [`EventSink::flow`] with
    /// the same stream index.
    fn flow_evicted(&mut self, _f: &FlowSummary) {}
    /// A warning about the input or a cap being hit.
    fn warning(&mut self, _w: &Warning) {}
    /// A new stream index was handed out at `frame` (before that frame's segment, if any).
    fn stream_opened(&mut self, _stream: StreamId, _frame: FrameNo) {}
    /// Whether this sink reads the statistics of the [`FlowSummary`]s it is given (packets,
    /// bytes, retransmissions, windows, RTT). A sink that does not returns false, and the
    /// analyzer skips their upkeep on every segment (a tenth of `diagnose`'s time on a bulk
    /// capture): its summaries then carry the stream, the
    /// endpoints and the times, with every counter zero. Rows are the same either way.
    #[inline]
    fn needs_flow_stats(&self) -> bool {
        true
    }
    /// Whether this sink reads the [`EventSink::flow`] summaries at the end of input. A sink
    /// that does not returns false, and the analyzer skips summarising every connection it
    /// still tracks (tens of thousands on a capture of many connections).
    #[inline]
    fn needs_flows(&self) -> bool {
        true
    }
}

/// Everything the analyzer can emit, for sinks that collect.
#[derive(Clone, Debug)]
pub enum Event {
    /// A segment row.
    Segment(SegmentAnalysis),
    /// A flow summary.
    Flow(Box<FlowSummary>),
    /// A warning.
    Warning(Warning),
}

impl EventSink for Vec<Event> {
    fn segment(&mut self, a: &SegmentAnalysis) {
        self.push(Event::Segment(*a));
    }
    fn flow(&mut self, f: &FlowSummary) {
        self.push(Event::Flow(Box::new(f.clone())));
    }
    fn warning(&mut self, w: &Warning) {
        self.push(Event::Warning(w.clone()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flag_names_round_trip() {
        let mut f = AnalysisFlags::default();
        f.set(AnalysisFlags::DUPLICATE_ACK);
        f.set(AnalysisFlags::RETRANSMISSION);
        assert_eq!(f.to_string(), "retransmission|duplicate_ack");
        for (bit, name) in AnalysisFlags::NAMES {
            assert_eq!(AnalysisFlags::from_name(name), Some(*bit));
        }
        assert_eq!(AnalysisFlags::from_name("nonsense"), None);
    }
}
