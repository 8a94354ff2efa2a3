//! `AnalyzerConfig`: every threshold and cap of the core, with its source.

/// Configuration of the analyzer. `Default` gives Wireshark-compatible behaviour.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct AnalyzerConfig {
    /// Maximum tracked unacked segments per direction (Wireshark: TCP_MAX_UNACKED_SEGMENTS = 10000).
    pub max_unacked_segments: usize,
    /// Capture time after which a closed (FIN both ways, or RST) connection's heavy state is freed.
    pub expire_closed_ns: i64,
    /// Capture time after which an idle open connection's heavy state is freed.
    pub expire_idle_ns: i64,
    /// How often (in frames) to sweep for expired connections.
    pub sweep_every_frames: u64,
    /// RTT samples kept per direction for quantiles (reservoir beyond this).
    pub rtt_reservoir: usize,
}

impl Default for AnalyzerConfig {
    fn default() -> Self {
        Self {
            max_unacked_segments: 10_000,
            expire_closed_ns: 60_000_000_000,
            expire_idle_ns: 600_000_000_000,
            sweep_every_frames: 65_536,
            rtt_reservoir: 2_048,
        }
    }
}
