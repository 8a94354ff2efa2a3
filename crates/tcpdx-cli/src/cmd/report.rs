//! `tcpdx report FILE -o report.html`: the HTML report with graphs.
//!
//! Two passes over the capture: the first diagnoses every connection (as `diagnose`) and
//! ranks them by bytes; the second replays only the chosen connections into a
//! [`GraphRecorder`], whose memory is bounded per connection. Two passes because the
//! costliest connections are only known once everything has been read.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use tcpdx_core::{EventSink, FlowSummary, SegmentAnalysis, SegmentDetail, Warning};
use tcpdx_detect::Diagnoser;
use tcpdx_report::html::{Page, Section, SeriesConfig, TopBytes, choose};
use tcpdx_report::{GraphRecorder, write_html_report};
use tcpdx_storage::findings::StorageEvidence;
use tcpdx_storage::{Diagnosing, StorageConfig};

use crate::flags::ReportArgs;
use crate::parallel::Plan;
use crate::run::{analyze_with, open_serial};

/// First pass: the diagnosis (TCP and storage, as `diagnose`) and the largest connections.
struct Survey {
    diag: Diagnosing,
    top: TopBytes,
}

impl EventSink for Survey {
    fn segment_detail(&mut self, a: &SegmentAnalysis, d: &SegmentDetail) {
        self.diag.segment_detail(a, d);
    }
    fn payload(&mut self, a: &SegmentAnalysis, p: &[u8]) {
        self.diag.payload(a, p);
    }
    fn flow(&mut self, f: &FlowSummary) {
        self.diag.flow(f);
        self.top.flow(f);
    }
    fn flow_evicted(&mut self, f: &FlowSummary) {
        self.diag.flow_evicted(f);
        self.top.flow_evicted(f);
    }
    fn warning(&mut self, w: &Warning) {
        self.diag.warning(w);
    }
}

/// Runs `tcpdx report`.
pub fn run(a: &ReportArgs) -> Result<ExitCode> {
    if a.file.as_os_str() == "-" {
        bail!("report: - (standard input) cannot be read twice: save the capture to a file first");
    }
    let all = a.common(Vec::new());
    let spill = crate::spill::new_spill();
    let mut survey = Survey {
        diag: Diagnosing::with_parts(
            Diagnoser::new().spilling_to(spill.clone()),
            StorageConfig::default(),
            StorageEvidence::new(),
        ),
        top: TopBytes::new(a.top),
    };
    let outcome = analyze_with(
        open_serial(&all)?,
        &all,
        &mut survey,
        |_| false,
        Plan::Serial,
        |_, _, _, _| {},
    )?;
    let diagnosis = survey.diag.finish();
    crate::spill::check([&spill])?;
    let chosen = choose(&diagnosis, &survey.top, a.top, &a.streams);

    let mut sections = Vec::new();
    if !chosen.is_empty() {
        let streams: Vec<u32> = chosen.iter().map(|c| c.stream).collect();
        let only = a.common(streams);
        let dirs: Vec<_> = chosen.iter().map(|c| (c.stream, c.dir)).collect();
        let mut rec = GraphRecorder::new(&dirs, SeriesConfig::default());
        analyze_with(
            open_serial(&only)?,
            &only,
            &mut rec,
            |_| false,
            Plan::Serial,
            |_, _, _, _| {},
        )?;
        let bytes = survey.top.ranked();
        for g in rec.finish() {
            let c = chosen.iter().find(|c| c.stream == g.stream);
            sections.push(Section {
                reasons: c.map(|c| c.reasons.clone()).unwrap_or_default(),
                bytes: bytes.iter().find(|b| b.0 == g.stream).map(|b| b.1),
                graphs: g,
            });
        }
    }
    for s in &a.streams {
        if !sections.iter().any(|x| x.graphs.stream == *s) {
            eprintln!("tcpdx: warning: --stream {s}: no such connection in the capture");
        }
    }

    let file = a.file.display().to_string();
    let page = Page {
        file: &file,
        frames: outcome.stats.frames,
        diagnosis: &diagnosis,
        sections: &sections,
    };
    let out = &a.output;
    let f = File::create(out).with_context(|| format!("{}: cannot create", out.display()))?;
    let mut w = BufWriter::new(f);
    write_html_report(&mut w, &page)
        .and_then(|()| w.flush())
        .with_context(|| format!("{}: writing the report", out.display()))?;
    eprintln!(
        "tcpdx: wrote {} ({} findings, {} connections graphed)",
        out.display(),
        diagnosis.findings.len(),
        sections.len()
    );
    Ok(ExitCode::SUCCESS)
}
