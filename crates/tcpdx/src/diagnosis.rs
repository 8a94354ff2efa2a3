//! The whole diagnosis of a capture, TCP and storage: the one place both are put together,
//! for `diagnose`, `report`, `annotate` and `export` alike, on one thread or several.

use std::path::PathBuf;

use tcpdx_core::{EventSink, FlowSummary, SegmentAnalysis, SegmentDetail, Warning};
use tcpdx_detect::{Diagnoser, Diagnosis, Listing};
use tcpdx_storage::findings::{StorageEvidence, add_findings};
use tcpdx_storage::{StorageConfig, StorageSink, Tracker};

/// The diagnosis of a capture: the TCP one (per connection) with the storage findings
/// merged into it (re-sorted, most costly first).
pub(crate) fn assemble(tcp: Diagnosis, storage: &StorageEvidence) -> Diagnosis {
    let mut d = tcp;
    add_findings(storage, &mut d);
    d
}

/// [`assemble`] from the workers' merged per-connection listing (several threads).
pub(crate) fn assemble_listed(listing: Option<Listing>, storage: &StorageEvidence) -> Diagnosis {
    assemble(
        listing.map(Listing::into_diagnosis).unwrap_or_default(),
        storage,
    )
}

/// A storage sink that holds the evidence the storage findings read.
pub(crate) trait Evidence: StorageSink {
    fn evidence(&self) -> &StorageEvidence;
}

impl Evidence for StorageEvidence {
    fn evidence(&self) -> &StorageEvidence {
        self
    }
}

/// TCP and storage diagnosis of one capture on one thread (sans-IO: feed it the core's
/// events): the TCP diagnoser and the storage tracker fed side by side. The tracker pushes
/// into `S`: the evidence, or a recorder that hands the events to the merging thread.
pub(crate) struct CaptureDiagnoser<S> {
    diag: Diagnoser,
    storage: Tracker<S>,
}

impl CaptureDiagnoser<StorageEvidence> {
    /// A diagnosis spilling to files in `spill_dir`, with the storage port map `cfg`.
    pub(crate) fn new(cfg: StorageConfig, spill_dir: Option<&PathBuf>) -> Self {
        Self::with_parts(
            Diagnoser::new().spilling_to(crate::spill::new_spill(spill_dir)),
            cfg,
            StorageEvidence::new(),
        )
    }
}

impl<S: Evidence> CaptureDiagnoser<S> {
    /// The findings (TCP and storage, most costly first), time budget and inference, and
    /// the storage sink; the diagnoser's spill is checked for errors.
    pub(crate) fn finish(
        self,
        spill_dir: Option<&PathBuf>,
    ) -> Result<(Diagnosis, S), crate::Error> {
        let (diag, mut tracker) = self.into_parts();
        tracker.finish();
        let spill = diag.spill().clone();
        let tcp = diag.finish();
        crate::spill::check([&spill], spill_dir)?;
        let sink = tracker.into_sink();
        Ok((assemble(tcp, sink.evidence()), sink))
    }
}

impl<S: StorageSink> CaptureDiagnoser<S> {
    /// `diag` beside a storage tracker (port map `cfg`) pushing into `sink`.
    pub(crate) fn with_parts(diag: Diagnoser, cfg: StorageConfig, sink: S) -> Self {
        Self {
            diag,
            storage: Tracker::new(cfg, sink),
        }
    }

    /// The TCP diagnoser (to sweep it).
    pub(crate) fn diagnoser_mut(&mut self) -> &mut Diagnoser {
        &mut self.diag
    }

    /// The storage tracker.
    pub(crate) fn tracker(&self) -> &Tracker<S> {
        &self.storage
    }

    /// The storage tracker.
    pub(crate) fn tracker_mut(&mut self) -> &mut Tracker<S> {
        &mut self.storage
    }

    /// The diagnoser and the tracker (call [`Tracker::finish`] on it).
    pub(crate) fn into_parts(self) -> (Diagnoser, Tracker<S>) {
        (self.diag, self.storage)
    }
}

impl<S: StorageSink> EventSink for CaptureDiagnoser<S> {
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
