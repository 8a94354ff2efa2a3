//! tcpdx: reads a packet capture and explains why a TCP transfer is slow.
//!
//! The binary only parses flags, calls the `tcpdx` library and renders what it returns.
//! Exit codes: 0 ok, 1 findings above `--fail-on`, 2 bad input or usage.
#![forbid(unsafe_code)]

mod cmd;
mod flags;
mod progress;

use std::process::ExitCode;

use anyhow::{Context, Result};
use tcpdx::Capture;

use crate::flags::Command;

fn main() -> ExitCode {
    // A capture truncated by another program while it is read mapped: one line, exit 2.
    tcpdx_capture::exit_on_sigbus(
        "tcpdx: ",
        "; analyse a copy of it, or read it unmapped with TCPDX_NO_MMAP=1",
    );
    let result = match flags::parse().command {
        Command::Diagnose(a) => cmd::diagnose::run(&a),
        Command::Events(a) => cmd::events::run(&a),
        Command::Flows(a) => cmd::flows::run(&a),
        Command::Srt(a) => cmd::srt::run(&a),
        Command::Report(a) => cmd::report::run(&a),
        Command::Export(a) => cmd::export::run(&a),
        Command::Annotate(a) => cmd::annotate::run(&a),
        Command::Compare(a) => cmd::compare::run(&a),
        Command::Shard(a) => cmd::distributed::shard(&a),
        Command::DiagnoseShards(a) => cmd::distributed::diagnose_shards(&a),
        Command::ExportShards(a) => cmd::distributed::export_shards(&a),
        Command::DiagnosePartition(a) => cmd::distributed::diagnose_partition(&a),
        Command::MergePartials(a) => cmd::distributed::merge_partials(&a),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            // A closed pipe (`tcpdx events f | head`) is not an error (ripgrep does the same).
            if err.chain().any(|c| {
                c.downcast_ref::<std::io::Error>()
                    .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
            }) {
                return ExitCode::SUCCESS;
            }
            eprintln!("tcpdx: {}", one_line(&err));
            ExitCode::from(2)
        }
    }
}

/// The error and its causes on one line, each cause said once: a cause whose text the
/// message already holds (an I/O error inside a capture error's message) is not repeated.
fn one_line(err: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in err.chain() {
        let text = cause.to_string();
        if line.contains(&text) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&text);
    }
    line
}

/// Shows on stderr what the last pass over `c` left (also after a failed one), then
/// returns its result.
fn warned<T>(c: &Capture, max_flows: usize, r: Result<T, tcpdx::Error>) -> Result<T> {
    if let Some(s) = c.summary() {
        for m in s.messages(max_flows) {
            eprintln!("tcpdx: {m}");
        }
    }
    Ok(r?)
}

/// Adds "writing output" to an output error.
fn out_err(r: std::io::Result<()>) -> Result<()> {
    r.context("writing output")
}
