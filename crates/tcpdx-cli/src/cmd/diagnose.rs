//! `tcpdx diagnose FILE...` (and `tcpdx FILE`): findings and time budget.

use std::io::{self, BufWriter, Write};
use std::process::ExitCode;

use anyhow::Result;
use tcpdx_detect::{Diagnoser, Diagnosis, Severity};
use tcpdx_report::{fails, write_diagnosis_json, write_diagnosis_text};

use tcpdx_core::{EventSink, FlowSummary, SegmentAnalysis, SegmentDetail, Warning};
use tcpdx_storage::findings::{StorageEvidence, add_findings};
use tcpdx_storage::{StorageConfig, Tracker};

use crate::flags::{Common, DiagnoseArgs, FailOn};

/// The TCP diagnoser and the storage transactions fed side by side.
struct WithStorage {
    diag: Diagnoser,
    storage: Tracker<StorageEvidence>,
}

impl EventSink for WithStorage {
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
use crate::parallel::Plan;
use crate::run::{analyze_with, open, out_err};

/// Diagnoses one capture: the TCP findings and the storage ones (what `tcpdx diagnose`
/// reports for it; `tcpdx annotate` marks the same evidence frames).
pub fn diagnose_file(common: &Common) -> Result<Diagnosis> {
    let mut both = WithStorage {
        diag: Diagnoser::new(),
        storage: Tracker::new(StorageConfig::default(), StorageEvidence::new()),
    };
    // Serial: the storage layer needs segment payloads, which workers do not carry yet.
    let (stop, no_rows) = (
        |_: &WithStorage| false,
        |_: &mut WithStorage, _, _, _: &[u8]| {},
    );
    analyze_with(
        open(common)?,
        common,
        &mut both,
        stop,
        Plan::Serial,
        no_rows,
    )?;
    both.storage.finish();
    let mut d = both.diag.finish();
    add_findings(both.storage.sink(), &mut d);
    Ok(d)
}

/// Runs `tcpdx diagnose`.
pub fn run(a: &DiagnoseArgs) -> Result<ExitCode> {
    let mut all = Diagnosis::default();
    let several = a.files.len() > 1;
    for file in &a.files {
        let mut d = diagnose_file(&a.common(file.clone()))?;
        if several {
            for f in &mut d.findings {
                f.file = Some(file.display().to_string());
            }
        }
        all.merge(d);
    }
    let mut out = BufWriter::new(io::stdout().lock());
    if a.json {
        out_err(write_diagnosis_json(&mut out, &all))?;
    } else {
        out_err(write_diagnosis_text(&mut out, &all))?;
    }
    out_err(out.flush())?;
    let level = a.fail_on.map(|f| match f {
        FailOn::Info => Severity::Info,
        FailOn::Minor => Severity::Minor,
        FailOn::Major => Severity::Major,
        FailOn::Critical => Severity::Critical,
    });
    Ok(match level {
        Some(l) if fails(&all, l) => ExitCode::from(1),
        _ => ExitCode::SUCCESS,
    })
}
