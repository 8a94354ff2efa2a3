//! What a run analyses and how: [`Options`], the [`Filter`] and the [`Progress`] callback.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tcpdx_core::{AnalyzerConfig, EventSink, FlowSummary, SegmentAnalysis, SegmentDetail, Warning};
use tcpdx_storage::{DecodeAs, StorageConfig};

/// How to analyse a capture. [`Options::default`] is what the `tcpdx` command runs without
/// flags.
#[derive(Clone, Default)]
pub struct Options {
    /// Connections on these ports parsed as this storage protocol, besides the defaults
    /// (2049 NFS, 445 and 139 SMB2, 3260 iSCSI).
    pub decode_as: Vec<DecodeAs>,
    /// Connections tracked at once; beyond it the least recently active one is evicted
    /// (counted, not listed). `None`: [`tcpdx_core::DEFAULT_MAX_FLOWS`].
    pub max_flows: Option<usize>,
    /// Analysis threads. `None`: every core, less one for a compressed file's
    /// decompression ([`default_threads`]). Outputs are the same for any value.
    pub threads: Option<usize>,
    /// Which connections and segments are analysed and reported.
    pub filter: Filter,
    /// Directory of the spill files (what long connections accumulate goes to disk there,
    /// not memory). `None`: the system's temporary directory.
    pub spill_dir: Option<PathBuf>,
    /// Told how far reading has come.
    pub progress: Option<Arc<dyn Progress>>,
}

impl std::fmt::Debug for Options {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Options")
            .field("decode_as", &self.decode_as)
            .field("max_flows", &self.max_flows)
            .field("threads", &self.threads)
            .field("filter", &self.filter)
            .field("spill_dir", &self.spill_dir)
            .field("progress", &self.progress.is_some())
            .finish()
    }
}

impl Options {
    /// The connections tracked at once.
    pub fn max_flows(&self) -> usize {
        self.max_flows.unwrap_or(tcpdx_core::DEFAULT_MAX_FLOWS)
    }

    /// The analysis threads for the capture at `path`.
    pub fn threads_for(&self, path: Option<&Path>) -> usize {
        match (self.threads, path) {
            (Some(n), _) => n.max(1),
            (None, Some(p)) => default_threads(p),
            (None, None) => default_threads(Path::new("-")),
        }
    }

    /// The analyzer's settings.
    pub(crate) fn analyzer_config(&self) -> AnalyzerConfig {
        let mut cfg = AnalyzerConfig::default();
        cfg.max_flows = self.max_flows();
        cfg.max_evicted_remembered = self.max_flows();
        cfg
    }

    /// The storage parsers' port map.
    pub(crate) fn storage_config(&self) -> StorageConfig {
        StorageConfig::default().with_decode_as(&self.decode_as)
    }
}

/// Analysis threads when none are asked for: every core, but one for the decompressing
/// thread when `file` is compressed (on two cores, a compressed capture analysed on two
/// threads beside its decompression ran slower than on one).
pub fn default_threads(file: &Path) -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let compressed = tcpdx_capture::Compression::of_path(file)
        .is_some_and(|c| c != tcpdx_capture::Compression::None);
    cores.saturating_sub(usize::from(compressed)).max(1)
}

/// Told how far a run's reading has come (a progress bar). Called from the reading thread.
pub trait Progress: Send + Sync {
    /// A pass over an input of `len` bytes starts (`None`: unknown, a pipe).
    fn start(&self, _len: Option<u64>) {}
    /// `bytes` of the input read, `frames` handled so far.
    fn update(&self, bytes: u64, frames: u64);
    /// The pass read its last frame.
    fn finish(&self) {}
    /// Asked after each [`Progress::update`]: true ends the pass with [`Error::Cancelled`]
    /// (Ctrl-C in the Python API).
    ///
    /// [`Error::Cancelled`]: crate::Error::Cancelled
    fn cancelled(&self) -> bool {
        false
    }
}

/// Frames between two [`Progress::update`] calls (an update costs a time check).
pub const PROGRESS_EVERY_FRAMES: u64 = 4096;

/// Which connections and segments are analysed and reported: `--stream`, `--port`,
/// `--flagged`. Empty lists keep everything.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Filter {
    /// Only these tcp.stream indexes.
    pub streams: Vec<u32>,
    /// Only connections with one of these ports at either end.
    pub ports: Vec<u16>,
    /// Only segments with at least one tcp.analysis flag (per-segment outputs).
    pub flagged: bool,
}

impl Filter {
    /// Whether a connection between these ports passes.
    #[inline]
    pub fn port(&self, a: u16, b: u16) -> bool {
        self.ports.is_empty() || self.ports.contains(&a) || self.ports.contains(&b)
    }

    /// Whether the connection numbered `stream` passes.
    #[inline]
    pub fn stream(&self, stream: u32) -> bool {
        self.streams.is_empty() || self.streams.contains(&stream)
    }

    /// Whether a segment passes the port filter and the flag filter (not the stream one:
    /// a worker does not know the final stream numbers).
    #[inline]
    pub fn segment_here(&self, a: &SegmentAnalysis) -> bool {
        self.port(a.sport, a.dport) && (!self.flagged || !a.flags.is_empty())
    }

    fn connection(&self, stream: u32, a: u16, b: u16) -> bool {
        self.stream(stream) && self.port(a, b)
    }

    /// No connection filter at all: the segment's fields need not be read (reading them
    /// right after the analyzer wrote them stalls the CPU when loads and stores differ in
    /// width).
    #[inline]
    fn all_connections(&self) -> bool {
        self.streams.is_empty() && self.ports.is_empty()
    }

    /// Whether the segment `a` passes all three.
    #[inline]
    fn segment(&self, a: &SegmentAnalysis) -> bool {
        (self.all_connections() || self.connection(a.stream.0, a.sport, a.dport))
            && (!self.flagged || !a.flags.is_empty())
    }
}

/// Warnings kept in [`Summary::warnings`](crate::Summary::warnings) at most (the count of
/// capped segments in its statistics is exact regardless).
pub const MAX_WARNINGS: usize = 1000;

/// Keeps only the segments and flows `filter` lets through, forwards them to `inner`, and
/// keeps the analyzer's warnings.
pub(crate) struct Filtered<'a, S> {
    pub(crate) inner: &'a mut S,
    filter: &'a Filter,
    /// The filter keeps every segment: decided once, not for each segment twice.
    everything: bool,
    /// Warnings seen (reported once at the end).
    pub(crate) warnings: Vec<Warning>,
}

impl<'a, S: EventSink> Filtered<'a, S> {
    pub(crate) fn new(inner: &'a mut S, filter: &'a Filter) -> Self {
        Self {
            inner,
            filter,
            everything: filter.all_connections() && !filter.flagged,
            warnings: Vec::new(),
        }
    }

    #[inline]
    fn passes(&self, a: &SegmentAnalysis) -> bool {
        self.everything || self.filter.segment(a)
    }
}

impl<S: EventSink> EventSink for Filtered<'_, S> {
    fn segment(&mut self, a: &SegmentAnalysis) {
        if self.passes(a) {
            self.inner.segment(a);
        }
    }
    fn segment_detail(&mut self, a: &SegmentAnalysis, d: &SegmentDetail) {
        if self.passes(a) {
            self.inner.segment_detail(a, d);
        }
    }
    fn payload(&mut self, a: &SegmentAnalysis, payload: &[u8]) {
        if self.passes(a) {
            self.inner.payload(a, payload);
        }
    }
    fn needs_flow_stats(&self) -> bool {
        self.inner.needs_flow_stats()
    }
    fn needs_flows(&self) -> bool {
        self.inner.needs_flows()
    }
    fn flow(&mut self, f: &FlowSummary) {
        if self
            .filter
            .connection(f.stream.0, f.dirs[0].src.port, f.dirs[0].dst.port)
        {
            self.inner.flow(f);
        }
    }
    fn flow_evicted(&mut self, f: &FlowSummary) {
        if self
            .filter
            .connection(f.stream.0, f.dirs[0].src.port, f.dirs[0].dst.port)
        {
            self.inner.flow_evicted(f);
        }
    }
    fn warning(&mut self, w: &Warning) {
        // Counted once per stream: the list stays small whatever the input.
        if self.warnings.len() < MAX_WARNINGS {
            self.warnings.push(w.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_lists_keep_everything_and_lists_keep_their_members() {
        let all = Filter::default();
        assert!(all.port(1, 2) && all.stream(7));
        let f = Filter {
            streams: vec![3],
            ports: vec![445],
            flagged: false,
        };
        assert!(f.port(445, 1) && f.port(1, 445) && !f.port(1, 2));
        assert!(f.stream(3) && !f.stream(2) && !f.stream(4));
        assert!(f.connection(3, 445, 50000) && !f.connection(4, 445, 50000));
    }

    #[test]
    fn defaults_are_the_command_line_ones() {
        let o = Options::default();
        assert_eq!(o.max_flows(), tcpdx_core::DEFAULT_MAX_FLOWS);
        assert_eq!(o.analyzer_config().max_flows, tcpdx_core::DEFAULT_MAX_FLOWS);
        assert_eq!(
            o.threads_for(Some(Path::new("x.pcap"))),
            default_threads(Path::new("x.pcap"))
        );
        let one = Options {
            threads: Some(0),
            ..Options::default()
        };
        assert_eq!(one.threads_for(None), 1);
    }
}
