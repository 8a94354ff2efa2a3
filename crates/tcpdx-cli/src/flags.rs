//! Command-line flags (clap derive). The contract is in DESIGN.md "Command line".

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// tcpdx reads a packet capture (pcap or pcapng, optionally .gz/.zst, or - for stdin) and
/// tells why TCP transfers in it are slow.
#[derive(Debug, Parser)]
#[command(name = "tcpdx", version, about, long_about = None, arg_required_else_help = true)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Why is it slow? Findings (pathology, cost, evidence frames, Wireshark filter,
    /// recommendations), most costly first, and the time budget. `tcpdx FILE` is short for
    /// `tcpdx diagnose FILE`.
    Diagnose(DiagnoseArgs),
    /// Per-packet TCP analysis: one row per TCP segment, with Wireshark's frame numbers,
    /// tcp.stream indexes and tcp.analysis.* flags.
    ///
    /// Columns: frame,stream,time,src,sport,dst,dport,seq,ack,len,flags,dup_ack_num,
    /// bytes_in_flight,ack_rtt (seq/ack relative, time in seconds since the first frame).
    Events(EventsArgs),
    /// One row per TCP connection and direction: packets, bytes, goodput, retransmissions,
    /// RTT min/median/p95/max (Karn's rule), MSS, window scale, SACK, window limits.
    Flows(FlowsArgs),
    /// Service response times of storage protocols: per NFS procedure (v3, v4 COMPOUND and
    /// its principal operation), SMB2 command and SCSI opcode over iSCSI: count, min, mean,
    /// p50/p95/p99, max, total (Wireshark's -z rpc,srt / smb2,srt / scsi,srt numbers), the
    /// slowest requests with their frames, latency, requests in flight and throughput over
    /// time, and SMB2 credits.
    Srt(SrtArgs),
    /// One self-contained HTML file (opens offline) with the findings, the time budget as a
    /// chart and per-connection graphs: time-sequence (data, ACK, receive window, SACK,
    /// retransmissions, stalls shaded), throughput, RTT, bytes in flight and the inferred
    /// sender window, storage response times and outstanding requests. Zoom and hover.
    Report(ReportArgs),
    /// Parquet tables for pandas, polars and DuckDB, in one pass: segments (the events
    /// rows with window and options), flows, storage transactions, findings with their
    /// evidence and episodes, and the time budget. Schema: docs/parquet-format.md.
    Export(ExportArgs),
    /// The capture rewritten as pcapng with a comment on every evidence frame of `tcpdx
    /// diagnose` ("tcpdx: KIND EPISODE/EPISODES: ROLE (tcp.stream, episode length,
    /// severity)"), so the display filter `frame.comment contains "tcpdx"` lists the proof in
    /// Wireshark. Every packet's bytes, lengths and timestamp are kept (pcap input gets one
    /// interface in its own time units; pcapng blocks are copied, comments added); gzip or
    /// zstd input gives plain pcapng.
    ///
    /// FILE is read twice (diagnose, then rewrite), so it cannot be - (stdin): save the
    /// capture to a file first.
    Annotate(AnnotateArgs),
}

/// Options shared by every command.
#[derive(Debug, Args)]
pub struct Common {
    /// Capture file (pcap, pcapng, optionally gzip- or zstd-compressed); - reads stdin.
    pub file: PathBuf,
    /// Show a progress bar on stderr: bytes read of the file size, bytes/s, packets/s (default:
    /// when stderr is a terminal and the input is a file of 64 MiB or more). Never drawn into
    /// a pipe or a file.
    #[arg(long, overrides_with = "no_progress")]
    pub progress: bool,
    /// Never show a progress bar.
    #[arg(long)]
    pub no_progress: bool,
    /// Only this tcp.stream (repeatable).
    #[arg(long = "stream", value_name = "N")]
    pub streams: Vec<u32>,
    /// Only connections with this port at either end (repeatable).
    #[arg(long = "port", value_name = "PORT")]
    pub ports: Vec<u16>,
    /// Analysis threads (default: the number of cores, less one for a compressed file's
    /// decompression). Output is the same for any value. More threads pay on captures of
    /// many concurrent connections; on a few bulk ones reading is most of the work.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=256))]
    pub threads: Option<u16>,
    /// Connections tracked at once; beyond it the least recently active one is evicted:
    /// counted and summed in the output (not listed), and if it resumes it keeps its stream
    /// number. Bounds memory on captures with huge numbers of connections (SYN floods, scans).
    /// With several threads each tracks its share, so which ones are evicted depends on them.
    #[arg(long, value_name = "N", default_value_t = tcpdx_core::DEFAULT_MAX_FLOWS)]
    pub max_flows: usize,
}

/// `tcpdx events` options.
#[derive(Debug, Args)]
pub struct EventsArgs {
    /// Input and filters.
    #[command(flatten)]
    pub common: Common,
    /// Output format.
    #[arg(long, value_enum, default_value_t = EventsFormat::Csv)]
    pub format: EventsFormat,
    /// Only segments with at least one tcp.analysis flag.
    #[arg(long)]
    pub flagged: bool,
}

/// Output format of `events`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum EventsFormat {
    /// Comma-separated values with a header line.
    Csv,
    /// One JSON object per line.
    Jsonl,
}

/// `tcpdx diagnose` options.
#[derive(Debug, Args)]
pub struct DiagnoseArgs {
    /// Capture files (pcap, pcapng, optionally gzip- or zstd-compressed); - reads stdin.
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    /// Show a progress bar on stderr: bytes read of the file size, bytes/s, packets/s (default:
    /// when stderr is a terminal and the input is a file of 64 MiB or more). Never drawn into
    /// a pipe or a file.
    #[arg(long, overrides_with = "no_progress")]
    pub progress: bool,
    /// Never show a progress bar.
    #[arg(long)]
    pub no_progress: bool,
    /// Only this tcp.stream (repeatable).
    #[arg(long = "stream", value_name = "N")]
    pub streams: Vec<u32>,
    /// Only connections with this port at either end (repeatable).
    #[arg(long = "port", value_name = "PORT")]
    pub ports: Vec<u16>,
    /// Analysis threads (default: the number of cores, less one for a compressed file's
    /// decompression). Output is the same for any value. More threads pay on captures of
    /// many concurrent connections; on a few bulk ones reading is most of the work.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=256))]
    pub threads: Option<u16>,
    /// Connections tracked at once; beyond it the least recently active one is evicted:
    /// counted and summed in the output (not listed), and if it resumes it keeps its stream
    /// number. Bounds memory on captures with huge numbers of connections (SYN floods, scans).
    /// With several threads each tracks its share, so which ones are evicted depends on them.
    #[arg(long, value_name = "N", default_value_t = tcpdx_core::DEFAULT_MAX_FLOWS)]
    pub max_flows: usize,
    /// Machine-readable JSON (`{"version": 1, "findings": [...], "time_budget": {...}}`).
    #[arg(long)]
    pub json: bool,
    /// Every finding in full, after the verdict and the findings grouped by pattern (the
    /// default for `--stream`).
    #[arg(long)]
    pub all: bool,
    /// Exit with code 1 if a finding is at or above this severity.
    #[arg(long, value_enum, value_name = "SEVERITY")]
    pub fail_on: Option<FailOn>,
}

impl Common {
    /// Worker threads to use: `--threads`, else [`default_threads`] for the file.
    pub fn worker_threads(&self) -> usize {
        match self.threads {
            Some(n) => usize::from(n),
            None => default_threads(&self.file),
        }
    }
}

impl DiagnoseArgs {
    /// The shared options for one of the files.
    pub fn common(&self, file: PathBuf) -> Common {
        Common {
            file,
            progress: self.progress,
            no_progress: self.no_progress,
            streams: self.streams.clone(),
            ports: self.ports.clone(),
            threads: self.threads,
            max_flows: self.max_flows,
        }
    }
}

/// Severity threshold of `--fail-on`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FailOn {
    /// Any finding, even informational.
    Info,
    /// Minor and above.
    Minor,
    /// Major and above.
    Major,
    /// Critical only.
    Critical,
}

/// `tcpdx flows` options.
#[derive(Debug, Args)]
pub struct FlowsArgs {
    /// Input and filters.
    #[command(flatten)]
    pub common: Common,
    /// Machine-readable JSON (`{"version": 1, "flows": [...]}`) instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// `tcpdx srt` options.
#[derive(Debug, Args)]
pub struct SrtArgs {
    /// Input and filters.
    #[command(flatten)]
    pub common: Common,
    /// Machine-readable JSON (`{"version": 1, "tables": [...], ...}`).
    #[arg(long)]
    pub json: bool,
    /// Timeline interval in seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = 1.0)]
    pub interval: f64,
    /// Instead of the tables, one CSV row per transaction (request, reply, frames, times,
    /// SRT, status, data extent).
    #[arg(long)]
    pub transactions: bool,
    /// How many of the slowest requests to list.
    #[arg(long, value_name = "N", default_value_t = 10)]
    pub slowest: usize,
    /// Parse connections on this port as this protocol (nfs, smb2, iscsi); repeatable.
    /// Defaults: 2049 nfs, 445 and 139 smb2, 3260 iscsi.
    #[arg(long = "decode-as", value_name = "PORT=PROTO")]
    pub decode_as: Vec<tcpdx_storage::DecodeAs>,
}

/// `tcpdx report` options.
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Capture file (pcap, pcapng, optionally gzip- or zstd-compressed). It is read twice
    /// (diagnosis, then the graphed connections), so standard input is not accepted.
    pub file: PathBuf,
    /// Where to write the HTML report.
    #[arg(short, long, value_name = "PATH", default_value = "report.html")]
    pub output: PathBuf,
    /// Graph the N costliest connections (by their findings' cost) and the N largest (by
    /// payload bytes).
    #[arg(long, value_name = "N", default_value_t = 5)]
    pub top: usize,
    /// Also graph this tcp.stream (repeatable).
    #[arg(long = "stream", value_name = "N")]
    pub streams: Vec<u32>,
    /// Only connections with this port at either end (repeatable).
    #[arg(long = "port", value_name = "PORT")]
    pub ports: Vec<u16>,
    /// Show a progress bar on stderr (default: when stderr is a terminal and the input is a file).
    #[arg(long, overrides_with = "no_progress")]
    pub progress: bool,
    /// Never show a progress bar.
    #[arg(long)]
    pub no_progress: bool,
    /// Connections tracked at once (see `tcpdx diagnose --help`).
    #[arg(long, value_name = "N", default_value_t = tcpdx_core::DEFAULT_MAX_FLOWS)]
    pub max_flows: usize,
}

impl ReportArgs {
    /// The shared options, keeping only `streams` (empty: all).
    pub fn common(&self, streams: Vec<u32>) -> Common {
        Common {
            file: self.file.clone(),
            progress: self.progress,
            no_progress: self.no_progress,
            streams,
            ports: self.ports.clone(),
            threads: Some(1),
            max_flows: self.max_flows,
        }
    }
}

/// `tcpdx export` options.
#[derive(Debug, Args)]
pub struct ExportArgs {
    /// Input and filters.
    #[command(flatten)]
    pub common: Common,
    /// Directory for the tables (created if missing; existing tables are replaced).
    #[arg(short, long, value_name = "DIR")]
    pub output: PathBuf,
    /// Parse connections on this port as this protocol (nfs, smb2, iscsi); repeatable.
    /// Defaults: 2049 nfs, 445 and 139 smb2, 3260 iscsi.
    #[arg(long = "decode-as", value_name = "PORT=PROTO")]
    pub decode_as: Vec<tcpdx_storage::DecodeAs>,
}

/// `tcpdx annotate` options.
#[derive(Debug, Args)]
pub struct AnnotateArgs {
    /// Input and filters (the filters choose what is diagnosed, as for `diagnose`).
    #[command(flatten)]
    pub common: Common,
    /// The annotated capture (pcapng; written to a temporary file beside it, then renamed);
    /// - writes to stdout.
    #[arg(short, long, value_name = "OUT")]
    pub output: PathBuf,
}

/// Subcommand names, for the `tcpdx FILE` shorthand.
const SUBCOMMANDS: &[&str] = &[
    "diagnose", "events", "flows", "srt", "report", "export", "annotate", "help",
];

/// Parses the process arguments (exits with code 2 on usage errors). `tcpdx FILE...` (first
/// argument neither a subcommand nor an option) means `tcpdx diagnose FILE...`.
pub fn parse() -> Cli {
    Cli::parse_from(with_default_command(std::env::args_os().collect()))
}

/// Inserts `diagnose` unless the first non-option argument is a subcommand, or the only
/// request is help or the version.
pub fn with_default_command(mut args: Vec<std::ffi::OsString>) -> Vec<std::ffi::OsString> {
    const HELP: &[&str] = &["-h", "--help", "-V", "--version"];
    let first = args.get(1).and_then(|a| a.to_str()).unwrap_or("");
    if args.len() < 2 || HELP.contains(&first) {
        return args;
    }
    let positional = args[1..]
        .iter()
        .filter_map(|a| a.to_str())
        .find(|a| *a == "-" || !a.starts_with('-'));
    if positional.is_some_and(|p| !SUBCOMMANDS.contains(&p)) {
        args.insert(1, "diagnose".into());
    }
    args
}

/// Analysis threads when `--threads` is not given: every core, but one for the decompressing
/// thread when `file` is compressed. On two cores, a compressed capture analysed on two
/// threads beside its decompression ran 5-20% slower than on one (bench/results.md).
pub fn default_threads(file: &std::path::Path) -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let compressed = tcpdx_capture::Compression::of_path(file)
        .is_some_and(|c| c != tcpdx_capture::Compression::None);
    cores.saturating_sub(usize::from(compressed)).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(a: &[&str]) -> Vec<std::ffi::OsString> {
        a.iter().map(Into::into).collect()
    }

    #[test]
    fn a_compressed_file_leaves_a_core_to_its_decompression() {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let dir = tempfile::tempdir().unwrap();
        let (gz, plain) = (dir.path().join("c.pcap.gz"), dir.path().join("c.pcap"));
        std::fs::write(&gz, [0x1f, 0x8b, 8, 0]).unwrap();
        std::fs::write(&plain, [0xd4, 0xc3, 0xb2, 0xa1]).unwrap();
        assert_eq!(default_threads(&gz), cores.saturating_sub(1).max(1));
        assert_eq!(default_threads(&plain), cores);
        assert_eq!(default_threads(std::path::Path::new("-")), cores);
    }

    #[test]
    fn a_bare_file_means_diagnose() {
        assert_eq!(
            with_default_command(v(&["tcpdx", "x.pcap"])),
            v(&["tcpdx", "diagnose", "x.pcap"])
        );
        assert_eq!(
            with_default_command(v(&["tcpdx", "-"])),
            v(&["tcpdx", "diagnose", "-"])
        );
        assert_eq!(
            with_default_command(v(&["tcpdx", "flows", "x"])),
            v(&["tcpdx", "flows", "x"])
        );
        assert_eq!(
            with_default_command(v(&["tcpdx", "--help"])),
            v(&["tcpdx", "--help"])
        );
        assert_eq!(
            with_default_command(v(&["tcpdx", "--json", "x"])),
            v(&["tcpdx", "diagnose", "--json", "x"])
        );
        assert_eq!(
            with_default_command(v(&["tcpdx", "--no-progress", "flows", "x"])),
            v(&["tcpdx", "--no-progress", "flows", "x"])
        );
        assert_eq!(
            with_default_command(v(&["tcpdx", "report", "x", "-o", "r.html"])),
            v(&["tcpdx", "report", "x", "-o", "r.html"])
        );
    }
}
