//! `tcpdx report FILE -o report.html`: the HTML report with graphs.
//!
//! Two passes over the capture: the first diagnoses every connection (as `diagnose`) and
//! ranks them by bytes; the second replays only the chosen connections into a
//! [`GraphRecorder`], whose memory is bounded per connection. Two passes because the
//! costliest connections are only known once everything has been read.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use tcpdx::Capture;
use tcpdx_report::html::write_html_comparison;
use tcpdx_report::html::{Page, Section, SeriesConfig, TopBytes, choose};
use tcpdx_report::{GraphRecorder, write_html_report};

use crate::flags::ReportArgs;
use crate::warned;

/// Connection directions drawn at both points by `--vantage`.
const VANTAGE_GRAPHS: usize = 3;

/// The `--vantage A B` section, if asked for.
fn vantage_section(a: &ReportArgs, an: &crate::flags::Analysis) -> Result<Option<String>> {
    let [pa, pb] = a.vantage.as_slice() else {
        return Ok(None);
    };
    let o = an.options("reading");
    let mut ca = Capture::open(pa);
    let mut cb = Capture::open(pb);
    let mut v = ca.vantage(&mut cb, &o)?;
    ca.vantage_graphs(&mut cb, &mut v, VANTAGE_GRAPHS)?;
    Ok(Some(tcpdx_report::html::vantage::vantage_section(&v)))
}

/// Runs `tcpdx report`.
pub fn run(a: &ReportArgs) -> Result<ExitCode> {
    if let Some(pair) = &a.compare {
        return compare_page(pair, a);
    }
    // With --vantage A B the report is A's, with the two-point section.
    let files: Vec<PathBuf> = if a.files.is_empty() {
        a.vantage.iter().take(1).cloned().collect()
    } else {
        a.files.clone()
    };
    if files.is_empty() {
        bail!("report: a capture file, --compare BEFORE AFTER or --vantage A B is needed");
    }
    if files.iter().chain(&a.vantage).any(|f| f.as_os_str() == "-") {
        bail!("report: - (standard input) cannot be read twice: save the capture to a file first");
    }
    let an = &a.analysis;
    // `--stream` names connections to graph besides the chosen ones: the first pass
    // diagnoses them all.
    let mut all = an.options("reading");
    all.filter.streams.clear();
    let mut c = an.capture(&files);
    let mut top = TopBytes::new(a.top);
    let r = c.diagnose_with(&all, &mut top);
    let diagnosis = warned(&c, an.max_flows, r)?;
    let frames = c.summary().map_or(0, |s| s.stats.frames);
    let chosen = choose(&diagnosis, &top, a.top, &an.streams);

    let mut sections = Vec::new();
    if !chosen.is_empty() {
        let mut only = an.options("reading");
        only.filter.streams = chosen.iter().map(|c| c.stream).collect();
        let dirs: Vec<_> = chosen.iter().map(|c| (c.stream, c.dir)).collect();
        let mut rec = GraphRecorder::new(&dirs, SeriesConfig::default());
        let r = c.events(&only, &mut rec, |_| false);
        warned(&c, an.max_flows, r)?;
        let bytes = top.ranked();
        for g in rec.finish() {
            let c = chosen.iter().find(|c| c.stream == g.stream);
            sections.push(Section {
                reasons: c.map(|c| c.reasons.clone()).unwrap_or_default(),
                bytes: bytes.iter().find(|b| b.0 == g.stream).map(|b| b.1),
                graphs: g,
            });
        }
    }
    for s in &an.streams {
        if !sections.iter().any(|x| x.graphs.stream == *s) {
            eprintln!("tcpdx: warning: --stream {s}: no such connection in the capture");
        }
    }

    let names: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
    let file = names.join(" ");
    let page = Page {
        file: &file,
        frames,
        diagnosis: &diagnosis,
        sections: &sections,
    };
    let out = &a.output;
    let f = File::create(out).with_context(|| format!("{}: cannot create", out.display()))?;
    let mut w = BufWriter::new(f);
    let written = match vantage_section(a, an)? {
        // The two-point section goes before the page's data and scripts.
        Some(section) => {
            let mut buf = Vec::new();
            write_html_report(&mut buf, &page).and_then(|()| {
                let html = String::from_utf8_lossy(&buf);
                w.write_all(tcpdx_report::html::vantage::with_section(&html, &section).as_bytes())
            })
        }
        None => write_html_report(&mut w, &page),
    };
    written
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

/// `tcpdx report --compare BEFORE AFTER`: the comparison page.
fn compare_page(pair: &[PathBuf], a: &ReportArgs) -> Result<ExitCode> {
    let [before, after] = pair else {
        bail!("report: --compare takes two captures, BEFORE and AFTER");
    };
    let c = crate::cmd::compare::compare_files(before, after, &a.analysis)?;
    let out = &a.output;
    let f = File::create(out).with_context(|| format!("{}: cannot create", out.display()))?;
    let mut w = BufWriter::new(f);
    write_html_comparison(&mut w, &c)
        .and_then(|()| w.flush())
        .with_context(|| format!("{}: writing the report", out.display()))?;
    eprintln!(
        "tcpdx: wrote {} (comparison: {} services, {} finding kinds)",
        out.display(),
        c.services.len(),
        c.kinds.len()
    );
    Ok(ExitCode::SUCCESS)
}
