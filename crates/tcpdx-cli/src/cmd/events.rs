//! `tcpdx events`: per-segment analysis as CSV or JSON lines.

use std::io::{self, BufWriter, Write};
use std::process::ExitCode;

use anyhow::Result;
use tcpdx_core::{EventSink, SegmentAnalysis};
use tcpdx_report::{EventsCsv, EventsJsonl};

use crate::flags::{EventsArgs, EventsFormat};
use crate::parallel::Plan;
use crate::run::{analyze, analyze_with, open, out_err};

/// Drops unflagged rows when `--flagged` is given.
struct OnlyFlagged<S>(S, bool);

impl<S: EventSink> EventSink for OnlyFlagged<S> {
    fn segment(&mut self, a: &SegmentAnalysis) {
        if !self.1 || !a.flags.is_empty() {
            self.0.segment(a);
        }
    }
    fn needs_flow_stats(&self) -> bool {
        self.0.needs_flow_stats()
    }
    fn needs_flows(&self) -> bool {
        self.0.needs_flows()
    }
}

/// Runs `tcpdx events`.
pub fn run(a: &EventsArgs) -> Result<ExitCode> {
    // Open first: bad input must not leave a half-written header behind.
    let reader = open(&a.common)?;
    let out = BufWriter::with_capacity(1 << 16, io::stdout().lock());
    match a.format {
        EventsFormat::Csv => {
            let mut sink = OnlyFlagged(EventsCsv::new(out)?, a.flagged);
            let plan = Plan::CsvRows { flagged: a.flagged };
            analyze_with(
                reader,
                &a.common,
                &mut sink,
                |s| s.0.failed(),
                plan,
                |s, f, st, t| s.0.write_row(f, st, t),
            )?;
            out_err(sink.0.finish())?;
        }
        EventsFormat::Jsonl => {
            let mut sink = OnlyFlagged(EventsJsonl::new(out), a.flagged);
            analyze(reader, &a.common, &mut sink, |s| s.0.failed())?;
            out_err(sink.0.finish())?;
        }
    }
    io::stdout().flush()?;
    Ok(ExitCode::SUCCESS)
}
