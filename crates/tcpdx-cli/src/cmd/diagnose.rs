//! `tcpdx diagnose FILE...` (and `tcpdx FILE`): findings and time budget.

use std::io::{self, BufWriter, Write};
use std::process::ExitCode;

use anyhow::Result;
use tcpdx_detect::{Diagnoser, Diagnosis, Severity};
use tcpdx_report::{fails, write_diagnosis_json, write_diagnosis_text};

use crate::flags::{DiagnoseArgs, FailOn};
use crate::run::{analyze, open, out_err};

/// Runs `tcpdx diagnose`.
pub fn run(a: &DiagnoseArgs) -> Result<ExitCode> {
    let mut all = Diagnosis::default();
    let several = a.files.len() > 1;
    for file in &a.files {
        let common = a.common(file.clone());
        let mut diag = Diagnoser::new();
        analyze(open(&common)?, &common, &mut diag, |_| false)?;
        let mut d = diag.finish();
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
