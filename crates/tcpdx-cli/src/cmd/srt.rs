//! `tcpdx srt`: service response times of NFS, SMB2 and iSCSI.

use std::io::{self, BufWriter, Write};
use std::process::ExitCode;

use anyhow::{Result, bail};
use tcpdx::SrtConfig;
use tcpdx_report::{TransactionsCsv, write_srt_json, write_srt_text};

use crate::flags::SrtArgs;
use crate::{out_err, warned};

/// Runs `tcpdx srt`.
pub fn run(a: &SrtArgs) -> Result<ExitCode> {
    if !(a.interval.is_finite() && a.interval >= 1e-6) {
        bail!(
            "--interval must be at least 0.000001 seconds, got {}",
            a.interval
        );
    }
    let an = &a.input.analysis;
    let o = an.options("reading");
    let mut c = a.input.capture();
    if a.transactions {
        let mut csv = TransactionsCsv::new(BufWriter::new(io::stdout().lock()))?;
        let r = c.transactions(&o, &mut csv, |t| t.error.is_some());
        warned(&c, an.max_flows, r)?;
        // The first write error, else the flush's.
        if let Some(e) = csv.error.take() {
            out_err(Err(e))?;
        }
        out_err(csv.into_inner().flush())?;
        return Ok(ExitCode::SUCCESS);
    }
    let cfg = SrtConfig::default()
        .with_interval_ns((a.interval * 1e9).round() as i64)
        .with_slowest(a.slowest);
    let r = c.srt(&o, cfg);
    let report = warned(&c, an.max_flows, r)?;
    let mut out = BufWriter::new(io::stdout().lock());
    if a.json {
        out_err(write_srt_json(&mut out, &report))?;
    } else {
        out_err(write_srt_text(&mut out, &report))?;
    }
    out_err(out.flush())?;
    Ok(ExitCode::SUCCESS)
}
