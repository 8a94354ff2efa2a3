//! `tcpdx export FILE -o DIR`: the analysis as Parquet tables (docs/parquet-format.md).

use std::io::{self, Write};
use std::process::ExitCode;

use anyhow::{Result, bail};

use crate::flags::ExportArgs;
use crate::warned;

/// Runs `tcpdx export`.
pub fn run(a: &ExportArgs) -> Result<ExitCode> {
    let dir = &a.output;
    if dir.exists() && !dir.is_dir() {
        bail!("{}: exists and is not a directory", dir.display());
    }
    let an = &a.input.analysis;
    let names: Vec<String> = a
        .input
        .files
        .iter()
        .map(|f| f.display().to_string())
        .collect();
    let source = names.join(" ");
    let mut c = a.input.capture();
    let r = c.export(&an.options("reading"), dir, &[("tcpdx.source", &source)]);
    let counts = warned(&c, an.max_flows, r)?;
    // A one-line summary on stderr: stdout stays free for scripts.
    let list: Vec<String> = counts.iter().map(|(t, n)| format!("{t} {n}")).collect();
    let mut err = io::stderr().lock();
    writeln!(
        err,
        "tcpdx: wrote {} tables to {}: {}",
        counts.len(),
        dir.display(),
        list.join(", ")
    )?;
    Ok(ExitCode::SUCCESS)
}
