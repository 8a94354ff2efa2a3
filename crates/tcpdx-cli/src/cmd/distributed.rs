//! The stages of a distributed diagnosis, for a driver that runs them as processes
//! (`tcpdx.distributed`, `tcpdx-ray`): `tcpdx shard` (stage 1, one capture file) and
//! `tcpdx diagnose-shards` (stage 2 and the merge, printing what `tcpdx diagnose` prints),
//! or stage 2 one partition per process, `tcpdx diagnose-partition` (writes its partial),
//! and the merge of their partials, `tcpdx merge-partials`.
//! Hidden from `--help`: they are the driver's, not a user's.

use std::io::{self, BufWriter, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::Args;
use tcpdx::distributed;

use crate::flags::Analysis;
use crate::out_err;

/// `tcpdx shard` options.
#[derive(Debug, Args)]
pub struct ShardArgs {
    /// Capture file (pcap, pcapng, optionally gzip- or zstd-compressed).
    pub file: PathBuf,
    /// Directory of the run's shards (shared by every stage).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Index of this file among the run's files (names its shards).
    #[arg(long)]
    pub index: u32,
    /// Partitions (stage 2 tasks), 1 to 255.
    #[arg(long)]
    pub partitions: u16,
    /// Only the records that begin in bytes START..END of the file (an uncompressed pcap
    /// file; the file's ranges, each sharded under its own index, are read as the file).
    #[arg(long, value_name = "START:END", value_parser = parse_range)]
    pub range: Option<(u64, u64)>,
    /// Analysis flags (those of stage 2).
    #[command(flatten)]
    pub analysis: Analysis,
}

/// `tcpdx diagnose-shards` options.
#[derive(Debug, Args)]
pub struct DiagnoseShardsArgs {
    /// Directory of the run's shards.
    pub dir: PathBuf,
    /// Analysis flags (those of stage 1).
    #[command(flatten)]
    pub analysis: Analysis,
    /// Machine-readable JSON, as `tcpdx diagnose --json`.
    #[arg(long)]
    pub json: bool,
    /// Every finding in full, as `tcpdx diagnose --all`.
    #[arg(long)]
    pub all: bool,
}

/// `tcpdx diagnose-partition` options.
#[derive(Debug, Args)]
pub struct DiagnosePartitionArgs {
    /// Directory of the run's shards.
    pub dir: PathBuf,
    /// The partition (0 to the partition count less one).
    pub partition: u16,
    /// File the partition's result (its partial) is written to.
    #[arg(short, long, value_name = "FILE")]
    pub output: PathBuf,
    /// Analysis flags (those of stage 1).
    #[command(flatten)]
    pub analysis: Analysis,
}

/// `tcpdx merge-partials` options.
#[derive(Debug, Args)]
pub struct MergePartialsArgs {
    /// Directory of the run's shards.
    pub dir: PathBuf,
    /// The partials of every partition (`diagnose-partition -o`), in any order.
    #[arg(required = true)]
    pub partials: Vec<PathBuf>,
    /// Analysis flags (those of stage 1).
    #[command(flatten)]
    pub analysis: Analysis,
    /// Machine-readable JSON, as `tcpdx diagnose --json`.
    #[arg(long)]
    pub json: bool,
    /// Every finding in full, as `tcpdx diagnose --all`.
    #[arg(long)]
    pub all: bool,
}

/// `tcpdx export-shards` options.
#[derive(Debug, Args)]
pub struct ExportShardsArgs {
    /// Directory of the run's shards.
    pub dir: PathBuf,
    /// Directory of the Parquet tables (created if missing).
    #[arg(short, long, value_name = "DIR")]
    pub output: PathBuf,
    /// The `tcpdx.source` metadata of the tables (default: the sharded files, in time
    /// order, separated by spaces).
    #[arg(long)]
    pub source: Option<String>,
    /// Analysis flags (those of stage 1).
    #[command(flatten)]
    pub analysis: Analysis,
}

/// `START:END`, two byte offsets, START below END.
fn parse_range(s: &str) -> Result<(u64, u64), String> {
    let bad = || format!("{s:?}: give START:END, two byte offsets, START below END");
    let (a, b) = s.split_once(':').ok_or_else(bad)?;
    let (a, b) = (a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?);
    if a >= b {
        return Err(bad());
    }
    Ok((a, b))
}

/// Runs `tcpdx shard`: prints the file's (or byte range's) shard meta.
pub fn shard(a: &ShardArgs) -> Result<ExitCode> {
    let o = a.analysis.options("sharding");
    let m = match a.range {
        Some(r) => distributed::shard_range(&a.file, &a.out, a.index, a.partitions, r, &o)?,
        None => distributed::shard(&a.file, &a.out, a.index, a.partitions, &o)?,
    };
    let mut out = io::stdout().lock();
    out_err(out.write_all(m.to_text().as_bytes()))?;
    Ok(ExitCode::SUCCESS)
}

/// Runs `tcpdx diagnose-shards`.
pub fn diagnose_shards(a: &DiagnoseShardsArgs) -> Result<ExitCode> {
    let (d, summary) = distributed::diagnose_shards(&a.dir, &a.analysis.options("merging"))?;
    print_diagnosis(&d, &summary, a.analysis.max_flows, a.json, a.all)
}

/// Runs `tcpdx diagnose-partition`: writes the partition's partial.
pub fn diagnose_partition(a: &DiagnosePartitionArgs) -> Result<ExitCode> {
    let o = a.analysis.options("analysing");
    distributed::diagnose_partition(&a.dir, a.partition, &o)?.write_file(&a.output)?;
    Ok(ExitCode::SUCCESS)
}

/// Runs `tcpdx merge-partials`: prints what `tcpdx diagnose` prints.
pub fn merge_partials(a: &MergePartialsArgs) -> Result<ExitCode> {
    let partials = a
        .partials
        .iter()
        .map(|p| distributed::Partial::read_file(p))
        .collect::<Result<Vec<_>, _>>()?;
    let o = a.analysis.options("merging");
    let (d, summary) = distributed::merge_partials(&a.dir, partials, &o)?;
    print_diagnosis(&d, &summary, a.analysis.max_flows, a.json, a.all)
}

/// Prints the distributed run's diagnosis as `tcpdx diagnose` does (its messages on
/// standard error).
fn print_diagnosis(
    d: &tcpdx::Diagnosis,
    summary: &tcpdx::Summary,
    max_flows: usize,
    json: bool,
    all: bool,
) -> Result<ExitCode> {
    for m in summary.messages(max_flows) {
        eprintln!("tcpdx: {m}");
    }
    let text = distributed::render(d, json, all)?;
    let mut out = BufWriter::new(io::stdout().lock());
    out_err(out.write_all(text.as_bytes()))?;
    out_err(out.flush())?;
    Ok(ExitCode::SUCCESS)
}

/// Runs `tcpdx export-shards`: the tables `tcpdx export` writes of the files concatenated.
pub fn export_shards(a: &ExportShardsArgs) -> Result<ExitCode> {
    if a.output.exists() && !a.output.is_dir() {
        anyhow::bail!("{}: exists and is not a directory", a.output.display());
    }
    let source = match &a.source {
        Some(s) => s.clone(),
        None => {
            let metas = distributed::check_consecutive(distributed::shard_metas(&a.dir)?)?;
            let mut files: Vec<String> =
                metas.iter().map(|m| m.file.display().to_string()).collect();
            // A file sharded in byte ranges is named once.
            files.dedup();
            files.join(" ")
        }
    };
    let o = a.analysis.options("exporting");
    let counts = distributed::export_shards(&a.dir, &a.output, &o, &[("tcpdx.source", &source)])?;
    let list: Vec<String> = counts.iter().map(|(t, n)| format!("{t} {n}")).collect();
    let mut err = io::stderr().lock();
    writeln!(
        err,
        "tcpdx: wrote {} tables to {}: {}",
        counts.len(),
        a.output.display(),
        list.join(", ")
    )?;
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::parse_range;

    #[test]
    fn ranges_are_two_offsets_start_below_end() {
        assert_eq!(parse_range("0:1"), Ok((0, 1)));
        assert_eq!(parse_range("268435456:536870912"), Ok((1 << 28, 1 << 29)));
        for bad in ["5:5", "6:5", "5", ":5", "5:", "a:b", "-1:5"] {
            let e = parse_range(bad).unwrap_err();
            assert!(e.contains("START:END"), "{bad}: {e}");
        }
    }
}
