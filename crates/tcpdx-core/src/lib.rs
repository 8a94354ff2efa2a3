//! tcpdx-core: sans-IO TCP analysis, the middle of the tcpdx pipeline.
//!
//! capture -> wire -> **core** -> detect -> report. The [`Analyzer`] is fed frames (or
//! hand-built [`Segment`]s) in capture order and pushes results into an [`EventSink`]:
//! one [`SegmentAnalysis`] per TCP segment (the `tcpdx events` row, with Wireshark's
//! `tcp.analysis.*` flags, frame numbers and stream indexes) and one [`FlowSummary`] per
//! connection at the end. It never reads files, prints or looks at the clock.
#![forbid(unsafe_code)]
#![warn(missing_docs)]
// Input data must never panic the library: no unwrap/expect/indexing/panic outside tests
// (checked indexing with `get`; the few provably in-bounds cases carry their reason).
#![cfg_attr(
    not(test),
    deny(
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::indexing_slicing,
        clippy::panic
    )
)]

pub mod analyzer;
pub mod codec;
pub mod config;
pub mod event;
pub mod flow;
pub mod segment;
pub mod tcp;

pub use analyzer::{Analyzer, InputStats};
pub use config::{AnalyzerConfig, DEFAULT_MAX_FLOWS};
pub use event::{AnalysisFlags, Event, EventSink, SegmentAnalysis, SegmentDetail, Warning};
pub use flow::{Dir, Endpoint, FlowKey, StreamId};
pub use segment::{FrameInput, Segment};
pub use tcp::stats::{DirSummary, FlowSummary, RttSummary};
