//! `tcpdx srt`: service response times of NFS, SMB2 and iSCSI.

use std::io::{self, BufWriter, Write};
use std::process::ExitCode;

use anyhow::{Result, bail};
use tcpdx_report::{TransactionsCsv, write_srt_json, write_srt_text};
use tcpdx_storage::{SrtCollector, SrtConfig, StorageConfig, Tracker};

use crate::flags::SrtArgs;
use crate::parallel::Plan;
use crate::run::{analyze_storage, analyze_with, open, open_serial, out_err, storage_in_parallel};

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
        let mut csv = TransactionsCsv::new(BufWriter::new(io::stdout().lock()))?;
        if storage_in_parallel(&a.common) {
            // Each worker parses its connections; the transactions are replayed here.
            let stop = |t: &TransactionsCsv<_>| t.error.is_some();
            analyze_storage(
                open(&a.common)?,
                &a.common,
                Plan::Storage,
                cfg,
                &mut csv,
                stop,
            )?;
            return end_csv(csv);
        }
        let mut tracker = Tracker::new(cfg, csv);
        let stop = |t: &Tracker<TransactionsCsv<_>>| t.sink().error.is_some();
        analyze_with(
            open_serial(&a.common)?,
            &a.common,
            &mut tracker,
            stop,
            Plan::Serial,
            |_, _, _, _| {},
        )?;
        tracker.finish();
        return end_csv(tracker.into_sink());
    }
    let srt = SrtConfig::default()
        .with_interval_ns((a.interval * 1e9).round() as i64)
        .with_slowest(a.slowest);
    let report = if storage_in_parallel(&a.common) {
        let mut collector = SrtCollector::new(srt);
        let out = analyze_storage(
            open(&a.common)?,
            &a.common,
            Plan::Storage,
            cfg,
            &mut collector,
            |_| false,
        )?;
        collector.report(out.parts.last_segment_ts)
    } else {
        let mut tracker = Tracker::new(cfg, SrtCollector::new(srt));
        analyze_with(
            open_serial(&a.common)?,
            &a.common,
            &mut tracker,
            |_| false,
            Plan::Serial,
            |_, _, _, _| {},
        )?;
        tracker.finish();
        tracker.sink().report(tracker.last_ts())
    };
    let mut out = BufWriter::new(io::stdout().lock());
    if a.json {
        out_err(write_srt_json(&mut out, &report))?;
    } else {
        out_err(write_srt_text(&mut out, &report))?;
    }
    out_err(out.flush())?;
    Ok(ExitCode::SUCCESS)
}

/// Ends the `--transactions` CSV: its first write error, else the flush's.
fn end_csv<W: Write>(mut csv: TransactionsCsv<W>) -> Result<ExitCode> {
    if let Some(e) = csv.error.take() {
        out_err(Err(e))?;
    }
    out_err(csv.into_inner().flush())?;
    Ok(ExitCode::SUCCESS)
}
