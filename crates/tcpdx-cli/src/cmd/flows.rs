//! `tcpdx flows`: per-connection summary table or JSON.

use std::io::{self, BufWriter, Write};
use std::process::ExitCode;

use anyhow::Result;
use tcpdx_report::{write_flows_json, write_flows_table};

use crate::flags::FlowsArgs;
use crate::{out_err, warned};

/// Runs `tcpdx flows`.
pub fn run(a: &FlowsArgs) -> Result<ExitCode> {
    let an = &a.input.analysis;
    let mut c = a.input.capture();
    let r = c.flows(&an.options("reading"));
    let f = warned(&c, an.max_flows, r)?;
    let mut out = BufWriter::new(io::stdout().lock());
    if a.json {
        out_err(write_flows_json(
            &mut out,
            &f.flows,
            f.first_ts_ns,
            &f.evicted,
        ))?;
    } else {
        out_err(write_flows_table(&mut out, &f.flows, &f.evicted))?;
    }
    out_err(out.flush())?;
    Ok(ExitCode::SUCCESS)
}
