//! `AnalyzerConfig`: every threshold and cap of the core, with its source.

/// Configuration of the analyzer. `Default` gives Wireshark-compatible behaviour.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct AnalyzerConfig {
    /// Maximum tracked unacked segments per direction (Wireshark: TCP_MAX_UNACKED_SEGMENTS = 10000).
    pub max_unacked_segments: usize,
    /// Capture time after which a closed (FIN both ways, or RST) connection's heavy state is freed.
    pub expire_closed_ns: i64,
    /// Capture time after which a closed connection's RTT reservoir is reduced to its
    /// quantiles (nothing more to measure: a finished connection then costs ~1 KB, not
    /// the reservoir's 16 KB).
    pub freeze_closed_ns: i64,
    /// Capture time after which an idle open connection's heavy state is freed.
    pub expire_idle_ns: i64,
    /// How often (in frames) to sweep for expired connections.
    pub sweep_every_frames: u64,
    /// RTT samples kept per direction for quantiles (reservoir beyond this).
    pub rtt_reservoir: usize,
    /// Connections tracked at once (`--max-flows`); beyond it the least recently active one
    /// is evicted (summarised, counted, and remembered so that it keeps its stream index if
    /// it resumes). 0 counts as 1.
    pub max_flows: usize,
    /// Evicted connections remembered for resumption (oldest forgotten first).
    pub max_evicted_remembered: usize,
}

/// Default `max_flows`: enough for any troubleshooting capture, and a worst case of a few
/// hundred MB of state (about 1 KB per connection without RTT samples).
pub const DEFAULT_MAX_FLOWS: usize = 250_000;

impl Default for AnalyzerConfig {
    fn default() -> Self {
        Self {
            max_unacked_segments: 10_000,
            expire_closed_ns: 60_000_000_000,
            freeze_closed_ns: 1_000_000_000,
            expire_idle_ns: 600_000_000_000,
            sweep_every_frames: 65_536,
            rtt_reservoir: 2_048,
            max_flows: DEFAULT_MAX_FLOWS,
            max_evicted_remembered: DEFAULT_MAX_FLOWS,
        }
    }
}
