//! `tcpdx export FILE -o DIR`: the analysis as Parquet tables (docs/parquet-format.md).

use std::io::{self, Write};
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use tcpdx_export::Exporter;
use tcpdx_storage::StorageConfig;

use crate::flags::ExportArgs;
use crate::parallel::Plan;
use crate::run::{analyze_with, open_serial};

/// Runs `tcpdx export`.
pub fn run(a: &ExportArgs) -> Result<ExitCode> {
    let dir = &a.output;
    if dir.exists() && !dir.is_dir() {
        bail!("{}: exists and is not a directory", dir.display());
    }
    // Open first: bad input must not leave an empty directory behind.
    let reader = open_serial(&a.common)?;
    std::fs::create_dir_all(dir).with_context(|| format!("{}: cannot create", dir.display()))?;
    let source = a.common.file.display().to_string();
    let cfg = StorageConfig::default().with_decode_as(&a.decode_as);
    let mut exporter = Exporter::create(dir, cfg, &[("tcpdx.source", &source)])?;
    // Serial: the storage layer needs segment payloads, which workers do not carry yet.
    let analysed = analyze_with(
        reader,
        &a.common,
        &mut exporter,
        Exporter::failed,
        Plan::Serial,
        |_, _, _, _| {},
    );
    if let Err(e) = analysed {
        exporter.abort();
        return Err(e);
    }
    let counts = exporter.finish()?;
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
