//! The export of sharded files: one analyzer over every partition's records, merged back
//! into capture order (the tables take every segment in frame order, as the single export
//! writes them), with the plan's expiry sweeps: the tables `tcpdx export` writes of the
//! files concatenated. Stage 1 ran wherever the files are; this runs on one node.

use std::path::Path;

use tcpdx_core::{Analyzer, AnalyzerConfig, EventSink};
use tcpdx_detect::Diagnoser;
use tcpdx_export::{Exporter, RowCounts};
use tcpdx_storage::findings::StorageEvidence;

use super::feed::PartReader;
use super::plan::Plan;
use super::shard_metas;
use crate::diagnosis::CaptureDiagnoser;
use crate::options::Filtered;
use crate::rounds::rows_of;
use crate::{Error, ExportFan, ExportSink, Options, spill};

/// The Parquet tables of the files sharded into `dir`, written into `out` (created if
/// missing) with `meta` in every file's metadata.
pub fn export_shards(
    dir: &Path,
    out: &Path,
    o: &Options,
    meta: &[(&str, &str)],
) -> Result<RowCounts, Error> {
    let metas = shard_metas(dir)?;
    let mut cfg = o.analyzer_config();
    let plan = Plan::new(dir, metas, cfg.sweep_every_frames)?;
    // The plan's sweeps, at the frames a single analyzer counts (non-TCP ones included).
    cfg.sweep_every_frames = u64::MAX;
    let mut parts = (0..plan.partitions)
        .map(|p| PartReader::new(&plan, dir, p))
        .collect::<Result<Vec<_>, _>>()?;
    std::fs::create_dir_all(out).map_err(|error| Error::CreateDir {
        dir: out.to_owned(),
        error,
    })?;
    let spill_dir = o.spill_dir.as_ref();
    let fan = ExportFan {
        evidence: StorageEvidence::new(),
        exporter: Exporter::create(out, meta)?,
    };
    let mut sink = ExportSink(CaptureDiagnoser::with_parts(
        Diagnoser::new().spilling_to(spill::new_spill(spill_dir)),
        o.storage_config(),
        fan,
    ));
    let failed = {
        let mut filtered = Filtered::new(&mut sink, &o.filter);
        replay(&plan, &mut parts, cfg.clone(), &mut filtered, |f| {
            f.inner.exporter().failed()
        })
    };
    if let Some(e) = failed {
        let (_, tracker) = sink.0.into_parts();
        tracker.into_sink().exporter.abort();
        return Err(e);
    }
    let (d, mut fan) = sink.0.finish(spill_dir)?;
    // The rounds take a second replay, as the single export takes a second pass.
    let rounds = (0..plan.partitions)
        .map(|p| PartReader::new(&plan, dir, p))
        .collect::<Result<Vec<_>, _>>()
        .and_then(|mut parts| {
            let mut diag = Diagnoser::new().swept_by_caller();
            let mut filtered = Filtered::new(&mut diag, &o.filter);
            match replay(&plan, &mut parts, cfg, &mut filtered, |_| false) {
                Some(e) => Err(e),
                None => Ok(rows_of(&diag, plan.first_ts.map_or(0, |t| t.0))),
            }
        });
    match rounds {
        Ok(rows) => fan.exporter.rounds(&rows),
        Err(e) => {
            fan.exporter.abort();
            return Err(e);
        }
    }
    Ok(fan.exporter.finish(&d)?)
}

/// Every partition's records into one analyzer in frame order, with the plan's sweeps;
/// `stop` is polled after each record. The first error reading a shard, if any.
fn replay<S: EventSink>(
    plan: &Plan,
    parts: &mut [PartReader],
    cfg: AnalyzerConfig,
    filtered: &mut S,
    stop: impl Fn(&S) -> bool,
) -> Option<Error> {
    let mut an = Analyzer::new(cfg);
    if let Some(ts) = plan.first_ts {
        an.set_origin(ts);
    }
    let mut next_sweep = 0;
    let mut failed = None;
    loop {
        let (mut w, mut first) = (0, u64::MAX);
        for (i, part) in parts.iter().enumerate() {
            let f = part.frame();
            if f < first {
                (w, first) = (i, f);
            }
        }
        while let Some(s) = plan.sweeps.get(next_sweep).filter(|s| s.frame < first) {
            // The diagnoser inside the sink looks for closed connections by itself.
            if !s.diagnoser {
                an.sweep(s.ts);
            }
            next_sweep += 1;
        }
        if first == u64::MAX {
            break;
        }
        let part = &mut parts[w];
        let input = part.head.take().expect("a record is there");
        an.handle_input_with_payload(&input, &part.payload, filtered);
        if let Err(e) = part.advance() {
            failed = Some(e);
            break;
        }
        if stop(filtered) {
            break;
        }
    }
    if failed.is_none() {
        an.handle_end(filtered);
    }
    failed
}
