//! `tcpdx events`: per-segment analysis as CSV or JSON lines.

use std::io::{self, BufWriter, Write};
use std::process::ExitCode;

use anyhow::Result;
use tcpdx_report::{EventsCsv, EventsJsonl};

use crate::flags::{EventsArgs, EventsFormat};
use crate::{out_err, warned};

/// Runs `tcpdx events`.
pub fn run(a: &EventsArgs) -> Result<ExitCode> {
    let an = &a.input.analysis;
    let mut o = an.options("reading");
    o.filter.flagged = a.flagged;
    let mut c = a.input.capture();
    // Open first: bad input must not leave a half-written header behind.
    c.prepare(&o)?;
    let out = BufWriter::with_capacity(1 << 16, io::stdout().lock());
    match a.format {
        EventsFormat::Csv => {
            let mut csv = EventsCsv::new(out)?;
            let r = c.events_csv(&o, &mut csv);
            warned(&c, an.max_flows, r)?;
            out_err(csv.finish())?;
        }
        EventsFormat::Jsonl => {
            let mut jsonl = EventsJsonl::new(out);
            let r = c.events(&o, &mut jsonl, EventsJsonl::failed);
            warned(&c, an.max_flows, r)?;
            out_err(jsonl.finish())?;
        }
    }
    io::stdout().flush()?;
    Ok(ExitCode::SUCCESS)
}
