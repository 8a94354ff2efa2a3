//! The whole diagnosis of a capture as one event sink: the TCP diagnoser and the storage
//! tracker fed side by side, and their findings merged at the end. What `tcpdx diagnose`,
//! `report` and `annotate` run, so that they agree.

use tcpdx_core::{EventSink, FlowSummary, SegmentAnalysis, SegmentDetail, Warning};
use tcpdx_detect::{Diagnoser, Diagnosis};

use crate::findings::{StorageEvidence, add_findings};
use crate::transaction::StorageSink;
use crate::{StorageConfig, Tracker};

/// TCP and storage diagnosis of one capture (sans-IO: feed it the core's events). The
/// storage tracker pushes into `S`: the evidence the findings need, or a
/// [`Recorder`](crate::record::Recorder) to hand the events elsewhere.
pub struct Diagnosing<S = StorageEvidence> {
    diag: Diagnoser,
    storage: Tracker<S>,
}

impl Diagnosing {
    /// A diagnosis with the storage layer's port map in `cfg`.
    pub fn new(cfg: StorageConfig) -> Self {
        Self::with_parts(Diagnoser::new(), cfg, StorageEvidence::new())
    }

    /// The findings (TCP and storage, most costly first), time budget and inference.
    pub fn finish(mut self) -> Diagnosis {
        self.storage.finish();
        let mut d = self.diag.finish();
        add_findings(self.storage.sink(), &mut d);
        d
    }
}

impl<S: StorageSink> Diagnosing<S> {
    /// `diag` beside a storage tracker (port map `cfg`) pushing into `sink`.
    pub fn with_parts(diag: Diagnoser, cfg: StorageConfig, sink: S) -> Self {
        Self {
            diag,
            storage: Tracker::new(cfg, sink),
        }
    }

    /// The TCP diagnoser (to sweep it).
    pub fn diagnoser_mut(&mut self) -> &mut Diagnoser {
        &mut self.diag
    }

    /// The storage tracker.
    pub fn tracker_mut(&mut self) -> &mut Tracker<S> {
        &mut self.storage
    }

    /// The diagnoser and the tracker (call [`Tracker::finish`] on it).
    pub fn into_parts(self) -> (Diagnoser, Tracker<S>) {
        (self.diag, self.storage)
    }
}

impl<S: StorageSink> EventSink for Diagnosing<S> {
    fn segment_detail(&mut self, a: &SegmentAnalysis, d: &SegmentDetail) {
        self.diag.segment_detail(a, d);
        self.storage.segment_detail(a, d);
    }
    fn payload(&mut self, a: &SegmentAnalysis, p: &[u8]) {
        self.storage.payload(a, p);
    }
    fn flow(&mut self, f: &FlowSummary) {
        self.diag.flow(f);
    }
    fn flow_evicted(&mut self, f: &FlowSummary) {
        // The diagnoser finalises the connection and frees its state (bounded memory).
        self.diag.flow_evicted(f);
        self.storage.flow_evicted(f);
    }
    fn warning(&mut self, w: &Warning) {
        self.diag.warning(w);
    }
    fn needs_flow_stats(&self) -> bool {
        self.diag.needs_flow_stats() || self.storage.needs_flow_stats()
    }
    fn needs_flows(&self) -> bool {
        // `flow` goes to the diagnoser only.
        self.diag.needs_flows()
    }
}
