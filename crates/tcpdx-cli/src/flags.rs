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
    /// Why is it slow? A verdict for the capture, the findings grouped by pattern (kind and
    /// server or client host, most seconds lost first), the worst of each in full (cost,
    /// evidence frames, Wireshark filter, recommendations), and the time budget. `tcpdx FILE`
    /// is short for `tcpdx diagnose FILE`.
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
    /// The same traffic before and after a change (delayed ACK off, a buffer, a switch
    /// setting): connections matched by service (server address and port, protocol;
    /// clients may differ), then a verdict (what went away, goodput of the main transfer,
    /// storage response times; then what got worse) and, for the whole capture and each
    /// service, goodput, duration, each finding kind's cost and SRT p50/p95/p99 per
    /// operation, before -> after. Each capture is read three times, so not from stdin.
    Compare(CompareArgs),
    /// Stage 1 of a distributed diagnosis (tcpdx.distributed): one file into shards.
    #[command(hide = true)]
    Shard(crate::cmd::distributed::ShardArgs),
    /// Stage 2 and merge of a distributed diagnosis: prints what `diagnose` prints.
    #[command(hide = true)]
    DiagnoseShards(crate::cmd::distributed::DiagnoseShardsArgs),
    /// Export of a distributed run's shards: writes what `export` writes.
    #[command(hide = true)]
    ExportShards(crate::cmd::distributed::ExportShardsArgs),
    /// Stage 2 of one partition of a distributed diagnosis: writes its partial.
    #[command(hide = true)]
    DiagnosePartition(crate::cmd::distributed::DiagnosePartitionArgs),
    /// Merge of a distributed diagnosis' partials: prints what `diagnose` prints.
    #[command(hide = true)]
    MergePartials(crate::cmd::distributed::MergePartialsArgs),
}

/// The analysis flags, the same on every command.
#[derive(Debug, Args)]
pub struct Analysis {
    /// Show a progress bar on stderr: bytes read of the file size, bytes/s, packets/s (default:
    /// when stderr is a terminal and the input is a file of 64 MiB or more). Never drawn into
    /// a pipe or a file.
    #[arg(long, overrides_with = "no_progress")]
    pub progress: bool,
    /// Never show a progress bar.
    #[arg(long)]
    pub no_progress: bool,
    /// Only this tcp.stream (repeatable; `report` graphs it besides the chosen ones).
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
    /// Parse connections on this port as this protocol (nfs, smb2, iscsi); repeatable.
    /// Defaults: 2049 nfs, 445 and 139 smb2, 3260 iscsi.
    #[arg(long = "decode-as", value_name = "PORT=PROTO")]
    pub decode_as: Vec<tcpdx::DecodeAs>,
    /// Several files: read them one after the other in the order given, as `mergecap -a`
    /// concatenates them, whatever their timestamps.
    #[arg(long, conflicts_with = "merge")]
    pub concat: bool,
    /// Several files: merge them frame by frame by timestamp, as `mergecap -w` does (the
    /// default; consecutive files, a ring buffer, then read one after the other).
    #[arg(long)]
    pub merge: bool,
}

impl Analysis {
    /// The library's options for these flags; a progress bar labelled `label`.
    pub fn options(&self, label: &'static str) -> tcpdx::Options {
        tcpdx::Options {
            decode_as: self.decode_as.clone(),
            max_flows: Some(self.max_flows),
            threads: self.threads.map(usize::from),
            filter: tcpdx::Filter {
                streams: self.streams.clone(),
                ports: self.ports.clone(),
                flagged: false,
            },
            spill_dir: None,
            progress: crate::progress::Bar::if_wanted(self.progress, self.no_progress, label),
        }
    }

    /// How several files make one capture.
    pub fn order(&self) -> tcpdx::SetOrder {
        if self.concat {
            tcpdx::SetOrder::Concat
        } else {
            tcpdx::SetOrder::Merge
        }
    }

    /// The capture of `files` (one file, several, or directories of them) read as one.
    pub fn capture(&self, files: &[PathBuf]) -> tcpdx::Capture {
        tcpdx::Capture::open_set(files, self.order())
    }
}

/// `tcpdx diagnose` options.
#[derive(Debug, Args)]
pub struct DiagnoseArgs {
    /// Capture files (pcap, pcapng, optionally gzip- or zstd-compressed) or directories of
    /// them, read as one capture (see --merge, --concat); - reads stdin.
    #[arg(required_unless_present = "vantage", value_name = "FILE|DIR")]
    pub files: Vec<PathBuf>,
    /// Two captures of the same connections at two points of the path (A first): A's
    /// diagnosis, then where each loss happened (before A, between, after B), the clock
    /// offset, one-way delays and storage times split between network and server.
    #[arg(long, num_args = 2, value_names = ["A", "B"], conflicts_with = "files")]
    pub vantage: Vec<PathBuf>,
    /// Analysis flags.
    #[command(flatten)]
    pub analysis: Analysis,
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

/// The capture and the analysis flags, for the commands of one capture.
#[derive(Debug, Args)]
pub struct Input {
    /// Capture files (pcap, pcapng, optionally gzip- or zstd-compressed) or directories of
    /// them, read as one capture (see --merge, --concat); - reads stdin.
    #[arg(required = true, value_name = "FILE|DIR")]
    pub files: Vec<PathBuf>,
    /// Analysis flags.
    #[command(flatten)]
    pub analysis: Analysis,
}

impl Input {
    /// The capture of the files, read as one.
    pub fn capture(&self) -> tcpdx::Capture {
        self.analysis.capture(&self.files)
    }
}

/// `tcpdx events` options.
#[derive(Debug, Args)]
pub struct EventsArgs {
    /// Input and analysis.
    #[command(flatten)]
    pub input: Input,
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

/// `tcpdx flows` options.
#[derive(Debug, Args)]
pub struct FlowsArgs {
    /// Input and analysis.
    #[command(flatten)]
    pub input: Input,
    /// Machine-readable JSON (`{"version": 1, "flows": [...]}`) instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// `tcpdx srt` options.
#[derive(Debug, Args)]
pub struct SrtArgs {
    /// Input and analysis.
    #[command(flatten)]
    pub input: Input,
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
}

/// `tcpdx report` options.
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Capture files (pcap, pcapng, optionally gzip- or zstd-compressed) or directories of
    /// them, read as one capture. They are read twice (diagnosis, then the graphed
    /// connections), so standard input is not accepted. Not with `--compare` or `--vantage`.
    #[arg(
        required_unless_present_any = ["compare", "vantage"],
        conflicts_with_all = ["compare", "vantage"],
        value_name = "FILE|DIR"
    )]
    pub files: Vec<PathBuf>,
    /// A before/after comparison instead of one capture's report: the verdict, every
    /// finding kind's cost before and after, goodput and storage response times per
    /// service (as `tcpdx compare BEFORE AFTER`).
    #[arg(long, num_args = 2, value_names = ["BEFORE", "AFTER"])]
    pub compare: Option<Vec<PathBuf>>,
    /// Two captures of the same connections at two points (A first): A's report with a
    /// section of two time-sequence graphs per connection on one time axis, losses marked.
    #[arg(long, num_args = 2, value_names = ["A", "B"], conflicts_with = "compare")]
    pub vantage: Vec<PathBuf>,
    /// Analysis flags.
    #[command(flatten)]
    pub analysis: Analysis,
    /// Where to write the HTML report.
    #[arg(short, long, value_name = "PATH", default_value = "report.html")]
    pub output: PathBuf,
    /// Graph the N costliest connections (by their findings' cost) and the N largest (by
    /// payload bytes).
    #[arg(long, value_name = "N", default_value_t = 5)]
    pub top: usize,
}

/// `tcpdx compare` options.
#[derive(Debug, Args)]
pub struct CompareArgs {
    /// The capture before the change.
    pub before: PathBuf,
    /// The capture after the change.
    pub after: PathBuf,
    /// Analysis flags (the same for both captures).
    #[command(flatten)]
    pub analysis: Analysis,
    /// Machine-readable JSON (`{"version": 1, "verdict": "...", "kinds": [...], ...}`;
    /// docs/json-format.md).
    #[arg(long)]
    pub json: bool,
}

/// `tcpdx export` options.
#[derive(Debug, Args)]
pub struct ExportArgs {
    /// Input and analysis.
    #[command(flatten)]
    pub input: Input,
    /// Directory for the tables (created if missing; existing tables are replaced).
    #[arg(short, long, value_name = "DIR")]
    pub output: PathBuf,
}

/// `tcpdx annotate` options.
#[derive(Debug, Args)]
pub struct AnnotateArgs {
    /// Input and analysis (the filters choose what is diagnosed, as for `diagnose`).
    #[command(flatten)]
    pub input: Input,
    /// The annotated capture (pcapng; written to a temporary file beside it, then renamed);
    /// - writes to stdout.
    #[arg(short, long, value_name = "OUT")]
    pub output: PathBuf,
}

/// Subcommand names, for the `tcpdx FILE` shorthand.
const SUBCOMMANDS: &[&str] = &[
    "diagnose",
    "events",
    "flows",
    "srt",
    "report",
    "export",
    "annotate",
    "compare",
    "help",
    "shard",
    "diagnose-shards",
    "export-shards",
    "diagnose-partition",
    "merge-partials",
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

#[cfg(test)]
mod tests {
    use super::*;

    fn v(a: &[&str]) -> Vec<std::ffi::OsString> {
        a.iter().map(Into::into).collect()
    }

    #[test]
    fn vantage_takes_two_captures_a_first() {
        let c = Cli::try_parse_from(v(&["tcpdx", "diagnose", "--vantage", "a.pcap", "b.pcap"]))
            .unwrap();
        let Command::Diagnose(d) = c.command else {
            panic!("diagnose")
        };
        assert_eq!(
            d.vantage,
            [PathBuf::from("a.pcap"), PathBuf::from("b.pcap")]
        );
        assert!(d.files.is_empty());
        let c = Cli::try_parse_from(v(&[
            "tcpdx",
            "report",
            "--vantage",
            "a.pcap",
            "b.pcap",
            "-o",
            "x.html",
        ]))
        .unwrap();
        let Command::Report(r) = c.command else {
            panic!("report")
        };
        assert_eq!(r.vantage.len(), 2);
        assert!(r.files.is_empty());
        // One capture is not two vantage points.
        assert!(Cli::try_parse_from(v(&["tcpdx", "diagnose", "--vantage", "a.pcap"])).is_err());
        assert!(Cli::try_parse_from(v(&["tcpdx", "diagnose"])).is_err());
    }

    #[test]
    fn every_command_takes_the_analysis_flags() {
        let flags = [
            "--decode-as",
            "2050=nfs",
            "--max-flows",
            "7",
            "--threads",
            "2",
            "--stream",
            "3",
            "--port",
            "2050",
            "--no-progress",
        ];
        for cmd in [
            "diagnose", "events", "flows", "srt", "report", "export", "annotate", "compare",
        ] {
            let mut args = vec!["tcpdx", cmd, "x.pcap"];
            if cmd == "compare" {
                args.push("y.pcap");
            }
            args.extend(flags);
            if matches!(cmd, "export" | "annotate") {
                args.extend(["-o", "out"]);
            }
            let cli = Cli::try_parse_from(v(&args)).unwrap_or_else(|e| panic!("{cmd}: {e}"));
            let a = match &cli.command {
                Command::Diagnose(a) => &a.analysis,
                Command::Report(a) => &a.analysis,
                Command::Compare(a) => &a.analysis,
                Command::Events(EventsArgs { input, .. })
                | Command::Flows(FlowsArgs { input, .. })
                | Command::Srt(SrtArgs { input, .. })
                | Command::Export(ExportArgs { input, .. })
                | Command::Annotate(AnnotateArgs { input, .. }) => &input.analysis,
                Command::Shard(a) => &a.analysis,
                Command::DiagnoseShards(a) => &a.analysis,
                Command::ExportShards(a) => &a.analysis,
                Command::DiagnosePartition(a) => &a.analysis,
                Command::MergePartials(a) => &a.analysis,
            };
            let o = a.options("reading");
            assert_eq!(o.max_flows, Some(7), "{cmd}");
            assert_eq!(o.threads, Some(2), "{cmd}");
            assert_eq!(o.filter.streams, [3], "{cmd}");
            assert_eq!(o.filter.ports, [2050], "{cmd}");
            assert_eq!(o.decode_as.len(), 1, "{cmd}");
            assert!(o.progress.is_none(), "{cmd}");
        }
    }

    #[test]
    fn the_defaults_are_the_library_ones() {
        let cli = Cli::try_parse_from(v(&["tcpdx", "flows", "x.pcap"])).unwrap();
        let Command::Flows(a) = cli.command else {
            panic!("flows");
        };
        let o = a.input.analysis.options("reading");
        let d = tcpdx::Options::default();
        assert_eq!(o.max_flows(), d.max_flows());
        assert_eq!(
            (o.threads, &o.filter, &o.decode_as),
            (d.threads, &d.filter, &d.decode_as)
        );
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
