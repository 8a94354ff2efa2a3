//! `tcpdx diagnose FILE|DIR...` (and `tcpdx FILE`): findings and time budget of the
//! files read as one capture.

use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Result;
use tcpdx::{Capture, Diagnosis, Severity};
use tcpdx_report::{
    fails, write_diagnosis_json, write_diagnosis_text, write_diagnosis_text_all,
    write_vantage_json, write_vantage_text,
};

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

/// `tcpdx diagnose --vantage A B`: A's diagnosis and what the two points show together.
fn run_vantage(a: &DiagnoseArgs, pa: &Path, pb: &Path) -> Result<ExitCode> {
    for p in [pa, pb] {
        if p.as_os_str() == "-" {
            anyhow::bail!(
                "diagnose --vantage: - (standard input) cannot be read several times: save the capture to a file first"
            );
        }
    }
    let da = diagnose_file(pa, &a.analysis)?;
    let db = diagnose_file(pb, &a.analysis)?;
    let mut ca = Capture::open(pa);
    let mut cb = Capture::open(pb);
    let mut v = ca.vantage(&mut cb, &a.analysis.options("reading"))?;
    tcpdx::vantage::finding_sides(&mut v, &da, &db);
    let mut out = BufWriter::new(io::stdout().lock());
    if a.json {
        out_err(write_vantage_json(&mut out, &da, &v))?;
    } else {
        if a.all || !a.analysis.streams.is_empty() {
            out_err(write_diagnosis_text_all(&mut out, &da))?;
        } else {
            out_err(write_diagnosis_text(&mut out, &da))?;
        }
        out_err(write_vantage_text(&mut out, &v))?;
    }
    out_err(out.flush())?;
    Ok(exit_code(a, &da))
}

fn exit_code(a: &DiagnoseArgs, d: &Diagnosis) -> ExitCode {
    let level = a.fail_on.map(|f| match f {
        FailOn::Info => Severity::Info,
        FailOn::Minor => Severity::Minor,
        FailOn::Major => Severity::Major,
        FailOn::Critical => Severity::Critical,
    });
    match level {
        Some(l) if fails(d, l) => ExitCode::from(1),
        _ => ExitCode::SUCCESS,
    }
}

/// Runs `tcpdx diagnose`.
pub fn run(a: &DiagnoseArgs) -> Result<ExitCode> {
    if let [pa, pb] = a.vantage.as_slice() {
        return run_vantage(a, pa, pb);
    }
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
    let code = exit_code(a, &all);
    // The process ends next: freeing tens of thousands of findings one by one took 3% of
    // a run on many short connections, for nothing.
    std::mem::forget(all);
    Ok(code)
}
