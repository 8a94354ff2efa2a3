//! `tcpdx srt`: service response times of NFS, SMB2 and iSCSI.

use std::io::{self, BufWriter, Write};
use std::process::ExitCode;

use anyhow::{Result, bail};
use tcpdx_report::{TransactionsCsv, write_srt_json, write_srt_text};
use tcpdx_storage::{SrtCollector, SrtConfig, StorageConfig, Tracker};

use crate::flags::SrtArgs;
use crate::parallel::Plan;
use crate::run::{analyze_with, open, out_err};

/// Runs `tcpdx srt`.
pub fn run(a: &SrtArgs) -> Result<ExitCode> {
    if !(a.interval.is_finite() && a.interval >= 1e-6) {
        bail!(
            "--interval must be at least 0.000001 seconds, got {}",
            a.interval
        );
    }
    let cfg = StorageConfig::default().with_decode_as(&a.decode_as);
    if a.transactions {
        let csv = TransactionsCsv::new(BufWriter::new(io::stdout().lock()))?;
        let mut tracker = Tracker::new(cfg, csv);
        let stop = |t: &Tracker<TransactionsCsv<_>>| t.sink().error.is_some();
        analyze_with(
            open(&a.common)?,
            &a.common,
            &mut tracker,
            stop,
            Plan::Serial,
            |_, _, _, _| {},
        )?;
        tracker.finish();
        let mut csv = tracker.into_sink();
        if let Some(e) = csv.error.take() {
            out_err(Err(e))?;
        }
        out_err(csv.into_inner().flush())?;
        return Ok(ExitCode::SUCCESS);
    }
    let srt = SrtConfig::default()
        .with_interval_ns((a.interval * 1e9).round() as i64)
        .with_slowest(a.slowest);
    let mut tracker = Tracker::new(cfg, SrtCollector::new(srt));
    analyze_with(
        open(&a.common)?,
        &a.common,
        &mut tracker,
        |_| false,
        Plan::Serial,
        |_, _, _, _| {},
    )?;
    tracker.finish();
    let report = tracker.sink().report(tracker.last_ts());
    let mut out = BufWriter::new(io::stdout().lock());
    if a.json {
        out_err(write_srt_json(&mut out, &report))?;
    } else {
        out_err(write_srt_text(&mut out, &report))?;
    }
    out_err(out.flush())?;
    Ok(ExitCode::SUCCESS)
}
