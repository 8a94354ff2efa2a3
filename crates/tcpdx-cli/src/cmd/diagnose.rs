//! `tcpdx diagnose FILE...` (and `tcpdx FILE`): findings and time budget.

use std::io::{self, BufWriter, Write};
use std::process::ExitCode;

use anyhow::Result;
use tcpdx_detect::{Diagnoser, Diagnosis, Listing, Severity};
use tcpdx_report::{fails, write_diagnosis_json, write_diagnosis_text, write_diagnosis_text_all};

use tcpdx_storage::findings::{StorageEvidence, add_findings};
use tcpdx_storage::{Diagnosing, StorageConfig};

use crate::flags::{Common, DiagnoseArgs, FailOn};

use crate::parallel::Plan;
use crate::run::{analyze_storage, analyze_with, open, open_serial, out_err, storage_in_parallel};

/// Diagnoses one capture: the TCP findings and the storage ones (what `tcpdx diagnose`
/// reports for it; `tcpdx annotate` marks the same evidence frames).
pub fn diagnose_file(common: &Common) -> Result<Diagnosis> {
    if storage_in_parallel(common) {
        // Each worker diagnoses its connections; the storage events are replayed here.
        let mut evidence = StorageEvidence::new();
        let out = analyze_storage(
            open(common)?,
            common,
            Plan::Diagnose,
            StorageConfig::default(),
            &mut evidence,
            |_| false,
        )?;
        if let Some(logs) = out.parts.tcp_logs {
            evidence.add_tcp_logs(logs);
        }
        crate::spill::check(&out.parts.spills)?;
        let listing = out.parts.listing;
        let mut d = listing.map(Listing::into_diagnosis).unwrap_or_default();
        add_findings(&evidence, &mut d);
        return Ok(d);
    }
    let spill = crate::spill::new_spill();
    let mut both = Diagnosing::with_parts(
        Diagnoser::new().spilling_to(spill.clone()),
        StorageConfig::default(),
        StorageEvidence::new(),
    );
    let (stop, no_rows) = (
        |_: &Diagnosing| false,
        |_: &mut Diagnosing, _, _, _: &[u8]| {},
    );
    analyze_with(
        open_serial(common)?,
        common,
        &mut both,
        stop,
        Plan::Serial,
        no_rows,
    )?;
    let d = both.finish();
    crate::spill::check([&spill])?;
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
    } else if a.all || !a.streams.is_empty() {
        out_err(write_diagnosis_text_all(&mut out, &all))?;
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
    let code = match level {
        Some(l) if fails(&all, l) => ExitCode::from(1),
        _ => ExitCode::SUCCESS,
    };
    // The process ends next: freeing tens of thousands of findings one by one took 3% of
    // a run on many short connections, for nothing.
    std::mem::forget(all);
    Ok(code)
}
