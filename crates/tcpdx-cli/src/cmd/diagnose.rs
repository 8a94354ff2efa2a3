//! `tcpdx diagnose FILE|DIR...` (and `tcpdx FILE`): findings and time budget of the
//! files read as one capture.

use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Result;
use tcpdx::{Diagnosis, Severity};
use tcpdx_report::{fails, write_diagnosis_json, write_diagnosis_text, write_diagnosis_text_all};

use crate::flags::{Analysis, DiagnoseArgs, FailOn};
use crate::{out_err, warned};

/// Diagnoses one capture (what `tcpdx diagnose` reports for it; `tcpdx annotate` marks the
/// same evidence frames).
pub fn diagnose_file(file: &Path, a: &Analysis) -> Result<Diagnosis> {
    diagnose_files(std::slice::from_ref(&file.to_path_buf()), a)
}

/// Diagnoses the capture of `files`, read as one.
fn diagnose_files(files: &[PathBuf], a: &Analysis) -> Result<Diagnosis> {
    let mut c = a.capture(files);
    let r = c.diagnose(&a.options("reading"));
    warned(&c, a.max_flows, r)
}

/// Runs `tcpdx diagnose`.
pub fn run(a: &DiagnoseArgs) -> Result<ExitCode> {
    let all = diagnose_files(&a.files, &a.analysis)?;
    let mut out = BufWriter::new(io::stdout().lock());
    if a.json {
        out_err(write_diagnosis_json(&mut out, &all))?;
    } else if a.all || !a.analysis.streams.is_empty() {
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
