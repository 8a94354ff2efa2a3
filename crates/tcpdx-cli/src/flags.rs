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
    /// Per-packet TCP analysis: one row per TCP segment, with Wireshark's frame numbers,
    /// tcp.stream indexes and tcp.analysis.* flags.
    ///
    /// Columns: frame,stream,time,src,sport,dst,dport,seq,ack,len,flags,dup_ack_num,
    /// bytes_in_flight,ack_rtt (seq/ack relative, time in seconds since the first frame).
    Events(EventsArgs),
    /// One row per TCP connection and direction: packets, bytes, goodput, retransmissions,
    /// RTT min/median/p95/max (Karn's rule), MSS, window scale, SACK, window limits.
    Flows(FlowsArgs),
}

/// Options shared by every command.
#[derive(Debug, Args)]
pub struct Common {
    /// Capture file (pcap, pcapng, optionally gzip- or zstd-compressed); - reads stdin.
    pub file: PathBuf,
    /// Show a progress bar on stderr (default: when stderr is a terminal and the input is a file).
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

/// Parses the process arguments (exits with code 2 on usage errors).
pub fn parse() -> Cli {
    Cli::parse()
}
