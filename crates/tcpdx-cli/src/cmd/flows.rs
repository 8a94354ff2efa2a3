//! `tcpdx flows`: per-connection summary table or JSON.

use std::io::{self, BufWriter, Write};
use std::process::ExitCode;

use anyhow::Result;
use tcpdx_core::{EventSink, FlowSummary};
use tcpdx_report::{
    EvictedTotals, write_flows_json, write_flows_table_footer, write_flows_table_header,
    write_flows_table_rows,
};

use crate::flags::FlowsArgs;
use crate::parallel::Plan;
use crate::run::{analyze_with, open, out_err};

/// Collects flow summaries (one per tracked connection: at most `--max-flows`) and sums
/// the evicted ones.
#[derive(Default)]
struct Flows(Vec<FlowSummary>, EvictedTotals);

impl EventSink for Flows {
    fn flow(&mut self, f: &FlowSummary) {
        self.0.push(f.clone());
    }
    fn flow_evicted(&mut self, f: &FlowSummary) {
        self.1.add(f);
    }
}

/// Flows below which the table is formatted on one thread (a thread costs more).
const PARALLEL_ROWS_FROM: usize = 2048;

/// Writes the table rows of `flows`, formatted on up to `threads` threads: on a capture of
/// many short connections formatting the table is a large part of the run.
fn write_rows<W: Write>(out: &mut W, flows: &[FlowSummary], threads: usize) -> Result<()> {
    if threads <= 1 || flows.len() < PARALLEL_ROWS_FROM {
        return out_err(write_flows_table_rows(out, flows));
    }
    let chunk = flows.len().div_ceil(threads);
    let parts: Vec<io::Result<Vec<u8>>> = std::thread::scope(|scope| {
        let handles: Vec<_> = flows
            .chunks(chunk)
            .map(|part| {
                scope.spawn(move || {
                    let mut buf = Vec::with_capacity(part.len() * 400);
                    write_flows_table_rows(&mut buf, part).map(|()| buf)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
            .collect()
    });
    for part in parts {
        out_err(out.write_all(&part?))?;
    }
    Ok(())
}

/// Runs `tcpdx flows`.
pub fn run(a: &FlowsArgs) -> Result<ExitCode> {
    let mut flows = Flows::default();
    let outcome = analyze_with(
        open(&a.common)?,
        &a.common,
        &mut flows,
        |_| false,
        Plan::FlowsOnly,
        |_, _, _, _| {},
    )?;
    flows.1.resumed = outcome.stats.resumed_flows;
    flows.1.max_flows = a.common.max_flows as u64;
    let mut out = BufWriter::new(io::stdout().lock());
    if a.json {
        out_err(write_flows_json(
            &mut out,
            &flows.0,
            outcome.first_ts_ns,
            &flows.1,
        ))?;
    } else {
        out_err(write_flows_table_header(&mut out))?;
        write_rows(&mut out, &flows.0, a.common.worker_threads())?;
        out_err(write_flows_table_footer(&mut out, &flows.1))?;
    }
    out_err(out.flush())?;
    Ok(ExitCode::SUCCESS)
}
