//! `tcpdx annotate FILE -o OUT`: the capture as pcapng with a comment on every evidence
//! frame of the diagnosis, every packet otherwise as it was.
//!
//! Two passes over FILE: the diagnosis (the same driver as `tcpdx diagnose`), then the
//! rewrite from the raw records or blocks. The output goes to a temporary file beside OUT,
//! renamed at the end, so a failed run leaves no half-written capture.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use tcpdx::{Diagnosis, Finding, PROGRESS_EVERY_FRAMES};
use tcpdx_capture::{PcapNgWriter, RawItem, RawReader};
use tcpdx_detect::Evidence;

use crate::cmd::diagnose::diagnose_file;
use crate::flags::AnnotateArgs;
use crate::progress::Bar;

/// Written as the section's `shb_userappl` of a pcap input's pcapng output.
const USERAPPL: &str = concat!("tcpdx ", env!("CARGO_PKG_VERSION"), " annotate");

/// Runs `tcpdx annotate`.
pub fn run(a: &AnnotateArgs) -> Result<ExitCode> {
    let input = match a.input.files.as_slice() {
        [one] if !one.is_dir() => one,
        _ => bail!(
            "annotate rewrites one capture file: merge the files first (mergecap -w, or \
             mergecap -a for consecutive ones) and annotate the merged file"
        ),
    };
    if input.as_os_str() == "-" {
        bail!(
            "annotate reads the capture twice (diagnose, then rewrite), so it cannot read \
             stdin (-): save the capture to a file first"
        );
    }
    // Before the analysis: an output that cannot be written fails at once.
    let mut out = Output::create(&a.output, input)?;
    let diagnosis = diagnose_file(input, &a.input.analysis)?;
    let comments = comments(&diagnosis);
    let done = rewrite(a, &comments, out.writer())?;
    out.commit()?;
    let missing = comments.len().saturating_sub(done.commented);
    if missing > 0 {
        eprintln!("tcpdx: warning: {missing} evidence frames were not found in the second pass");
    }
    eprintln!(
        "tcpdx: wrote {}: {} frames, {} with tcpdx comments ({} findings); in Wireshark: \
         frame.comment contains \"tcpdx\"",
        a.output.display(),
        done.frames,
        done.commented,
        diagnosis.findings.len()
    );
    Ok(ExitCode::SUCCESS)
}

/// The comments of every evidence frame, by frame number, in findings order.
fn comments(d: &Diagnosis) -> HashMap<u64, Vec<String>> {
    let mut by_frame: HashMap<u64, Vec<String>> = HashMap::new();
    for f in &d.findings {
        for e in &f.evidence {
            let text = comment(f, e);
            let list = by_frame.entry(e.frame).or_default();
            if !list.contains(&text) {
                list.push(text);
            }
        }
    }
    by_frame
}

/// `tcpdx: KIND K/N: ROLE (tcp.stream S, episode D, SEVERITY)`.
fn comment(f: &Finding, e: &Evidence) -> String {
    let mut s = format!("tcpdx: {}", f.kind.as_str());
    if let Some(k) = e.episode {
        // Some detectors count episodes in other units (segments): never show k above n.
        let _ = write!(s, " {k}/{}", f.episodes.max(k));
    }
    let _ = write!(s, ": {} (", e.role);
    if let Some(stream) = f.stream {
        let _ = write!(s, "tcp.stream {stream}, ");
    }
    let listed = e
        .episode
        .and_then(|k| f.episode_list.get(k as usize - 1))
        .filter(|ep| ep.duration_s > 0.0);
    if let Some(ep) = listed {
        let _ = write!(s, "episode {}, ", duration(ep.duration_s));
    }
    let _ = write!(s, "{})", f.severity.as_str());
    s
}

/// A duration for a comment: whole milliseconds from 10 ms up, else two decimals.
fn duration(secs: f64) -> String {
    let ms = secs * 1e3;
    if ms >= 10.0 {
        format!("{ms:.0} ms")
    } else {
        format!("{ms:.2} ms")
    }
}

/// What the rewrite did.
struct Done {
    frames: u64,
    commented: usize,
}

/// Pass 2: copies the capture into `out` as pcapng, with the comments.
fn rewrite(
    a: &AnnotateArgs,
    comments: &HashMap<u64, Vec<String>>,
    out: &mut dyn Write,
) -> Result<Done> {
    let written = |r: io::Result<()>| r.with_context(|| format!("writing {}", a.output.display()));
    let mut reader = RawReader::open(
        a.input
            .files
            .first()
            .map_or(Path::new("-"), |f| f.as_path()),
    )?;
    let an = &a.input.analysis;
    let progress = Bar::if_wanted(an.progress, an.no_progress, "writing");
    if let Some(p) = &progress {
        p.start(reader.input_len());
    }
    let mut w = PcapNgWriter::new(out);
    let pcap = reader.pcap_header();
    if let Some(h) = &pcap {
        written(w.section_header(USERAPPL))?;
        written(w.pcap_interface(h))?;
    }
    let nanos = pcap.is_some_and(|h| h.nanos);
    let none: &[String] = &[];
    let mut commented = 0;
    let mut last_update = 0;
    while let Some(item) = reader.next_item()? {
        let frame = match item {
            RawItem::Record(r) => Some(r.frame),
            RawItem::Block(b) => b.frame,
        };
        let c = frame
            .and_then(|f| comments.get(&f.0))
            .map_or(none, Vec::as_slice);
        commented += usize::from(!c.is_empty());
        written(match item {
            RawItem::Record(r) => w.pcap_record(&r, nanos, c),
            RawItem::Block(b) => w.copy_block(&b, c),
        })?;
        let n = reader.frames();
        if n - last_update >= PROGRESS_EVERY_FRAMES {
            last_update = n;
            if let Some(p) = &progress {
                p.update(reader.input_bytes_read(), n);
            }
        }
    }
    if let Some(p) = progress {
        p.finish();
    }
    written(w.into_inner().flush())?;
    Ok(Done {
        frames: reader.frames(),
        commented,
    })
}

/// The output: stdout, or a temporary file renamed to the output path by `commit` (and
/// removed if the run fails before).
struct Output {
    path: PathBuf,
    tmp: Option<PathBuf>,
    writer: Box<dyn Write>,
}

impl Output {
    fn create(path: &Path, input: &Path) -> Result<Self> {
        if path.as_os_str() == "-" {
            return Ok(Self {
                path: path.to_owned(),
                tmp: None,
                writer: Box::new(BufWriter::with_capacity(1 << 16, io::stdout().lock())),
            });
        }
        if let (Ok(i), Ok(o)) = (input.canonicalize(), path.canonicalize())
            && i == o
        {
            bail!(
                "{}: the output would replace the input capture; choose another path",
                path.display()
            );
        }
        let name = path
            .file_name()
            .with_context(|| format!("{}: not a file name", path.display()))?;
        let mut tmp_name = std::ffi::OsString::from(".");
        tmp_name.push(name);
        tmp_name.push(format!(".tcpdx-{}.tmp", std::process::id()));
        let tmp = path.with_file_name(tmp_name);
        let file =
            File::create(&tmp).with_context(|| format!("cannot create {}", path.display()))?;
        Ok(Self {
            path: path.to_owned(),
            tmp: Some(tmp),
            writer: Box::new(BufWriter::with_capacity(1 << 16, file)),
        })
    }

    fn writer(&mut self) -> &mut dyn Write {
        &mut self.writer
    }

    /// Flushes and moves the temporary file into place.
    fn commit(mut self) -> Result<()> {
        self.writer
            .flush()
            .with_context(|| format!("writing {}", self.path.display()))?;
        if let Some(tmp) = self.tmp.take()
            && let Err(e) = std::fs::rename(&tmp, &self.path)
        {
            let _ = std::fs::remove_file(&tmp);
            return Err(e).with_context(|| format!("cannot create {}", self.path.display()));
        }
        Ok(())
    }
}

impl Drop for Output {
    fn drop(&mut self) {
        if let Some(tmp) = self.tmp.take() {
            let _ = std::fs::remove_file(tmp);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tcpdx::{FindingKind, Severity};

    #[test]
    fn comments_name_kind_episode_role_and_stream() {
        let mut f = Finding::new(FindingKind::DelackSlowstartStall, Some(3));
        f.severity = Severity::Critical;
        f.episodes = 165;
        f.evidence(10, "lone segment");
        f.evidence(12, "delayed ACK");
        f.episode(0.5, 0.102);
        f.evidence(40, "delayed ACK");
        f.episode(1.5, 0.004);
        let mut g = Finding::new(FindingKind::CaptureQuality, None);
        g.evidence(12, "segment longer than the MSS");
        g.evidence(12, "segment longer than the MSS");
        let d = Diagnosis {
            findings: vec![f, g],
            ..Diagnosis::default()
        };
        let c = comments(&d);
        assert_eq!(
            c[&12],
            [
                "tcpdx: delack-slowstart-stall 1/165: delayed ACK (tcp.stream 3, episode 102 ms, critical)",
                "tcpdx: capture-quality: segment longer than the MSS (info)",
            ]
        );
        assert_eq!(
            c[&40],
            [
                "tcpdx: delack-slowstart-stall 2/165: delayed ACK (tcp.stream 3, episode 4.00 ms, critical)"
            ]
        );
        assert_eq!(c.len(), 3);
    }
}
