//! The whole diagnosis of a capture as one event sink: the TCP diagnoser and the storage
//! tracker fed side by side, and their findings merged at the end. What `tcpdx diagnose`,
//! `report` and `annotate` run, so that they agree.

use tcpdx_core::{EventSink, FlowSummary, SegmentAnalysis, SegmentDetail, Warning};
use tcpdx_detect::{Diagnoser, Diagnosis};

use crate::findings::{StorageEvidence, add_findings};
use crate::{StorageConfig, Tracker};

/// TCP and storage diagnosis of one capture (sans-IO: feed it the core's events).
pub struct Diagnosing {
    diag: Diagnoser,
    storage: Tracker<StorageEvidence>,
}

impl Diagnosing {
    /// A diagnosis with the storage layer's port map in `cfg`.
    pub fn new(cfg: StorageConfig) -> Self {
        Self {
            diag: Diagnoser::new(),
            storage: Tracker::new(cfg, StorageEvidence::new()),
        }
    }

    /// The findings (TCP and storage, most costly first), time budget and inference.
    pub fn finish(mut self) -> Diagnosis {
        self.storage.finish();
        let mut d = self.diag.finish();
        add_findings(self.storage.sink(), &mut d);
        d
    }
}

impl EventSink for Diagnosing {
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
}
