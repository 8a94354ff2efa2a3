//! `tcpdx flows`: per-connection summary table or JSON.

use std::io::{self, BufWriter, Write};
use std::process::ExitCode;

use anyhow::Result;
use tcpdx_core::{EventSink, FlowSummary};
use tcpdx_report::{EvictedTotals, write_flows_json, write_flows_table};

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
        out_err(write_flows_table(&mut out, &flows.0, &flows.1))?;
    }
    out_err(out.flush())?;
    Ok(ExitCode::SUCCESS)
}
