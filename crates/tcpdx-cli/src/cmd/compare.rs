//! `tcpdx compare BEFORE AFTER`: the same traffic before and after a change, service by
//! service, with a verdict.

use std::io::{self, BufWriter, Write};
use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use tcpdx::{Capture, Comparison, Measured};
use tcpdx_report::{write_comparison_json, write_comparison_text};

use crate::flags::{Analysis, CompareArgs};
use crate::{out_err, warned};

/// Opens one side of a comparison. The only place that knows what a side is (today one
/// capture file; a set of files or a directory once the library reads capture sets).
pub fn open_side(path: &Path) -> Result<Capture> {
    if path.as_os_str() == "-" {
        bail!(
            "compare: - (standard input) cannot be read several times: save the capture to a file first"
        );
    }
    Ok(Capture::open(path))
}

/// Measures one side (`which`: "before" or "after", for the error message).
fn measure(path: &Path, a: &Analysis, which: &str) -> Result<Measured> {
    let mut c = open_side(path)?;
    let r = tcpdx::measure(&mut c, &a.options("reading"));
    warned(&c, a.max_flows, r).with_context(|| format!("{which} capture"))
}

/// The comparison of `before` and `after` (what `compare` prints and `report --compare`
/// shows).
pub fn compare_files(before: &Path, after: &Path, a: &Analysis) -> Result<Comparison> {
    let b = measure(before, a, "before")?;
    let af = measure(after, a, "after")?;
    Ok(tcpdx::compare_measured(&b, &af))
}

/// Runs `tcpdx compare`.
pub fn run(a: &CompareArgs) -> Result<ExitCode> {
    let c = compare_files(&a.before, &a.after, &a.analysis)?;
    let mut out = BufWriter::new(io::stdout().lock());
    if a.json {
        out_err(write_comparison_json(&mut out, &c))?;
    } else {
        out_err(write_comparison_text(&mut out, &c))?;
    }
    out_err(out.flush())?;
    Ok(ExitCode::SUCCESS)
}
