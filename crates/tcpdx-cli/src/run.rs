//! Drives one command: opens the capture, feeds the analyzer, reports warnings.

use std::process::ExitCode;

use anyhow::{Context, Result};
use tcpdx_capture::CaptureReader;
use tcpdx_core::{
    Analyzer, AnalyzerConfig, EventSink, FlowSummary, SegmentAnalysis, SegmentDetail, Warning,
};

use tcpdx_storage::{StorageConfig, StorageSink};

use crate::cmd;
use crate::flags::{Cli, Command, Common};
use crate::parallel::{self, Plan};
use crate::progress::{self, Progress};

/// Runs the parsed command line.
pub fn run(cli: Cli) -> Result<ExitCode> {
    match cli.command {
        Command::Diagnose(a) => cmd::diagnose::run(&a),
        Command::Events(a) => cmd::events::run(&a),
        Command::Flows(a) => cmd::flows::run(&a),
        Command::Srt(a) => cmd::srt::run(&a),
        Command::Report(a) => cmd::report::run(&a),
        Command::Export(a) => cmd::export::run(&a),
        Command::Annotate(a) => cmd::annotate::run(&a),
    }
}

/// Warnings kept for the summary line (the count of capped segments is exact regardless).
const MAX_WARNINGS: usize = 1000;

/// Keeps only the segments and flows the user asked for, then forwards them.
pub struct Filter<'a, S> {
    pub(crate) inner: &'a mut S,
    streams: &'a [u32],
    ports: &'a [u16],
    /// Warnings seen (printed once at the end).
    pub warnings: Vec<Warning>,
}

impl<'a, S: EventSink> Filter<'a, S> {
    /// Wraps `inner` with the filters of `common`.
    pub fn new(inner: &'a mut S, common: &'a Common) -> Self {
        Self {
            inner,
            streams: &common.streams,
            ports: &common.ports,
            warnings: Vec::new(),
        }
    }
    fn keep(&self, stream: u32, p1: u16, p2: u16) -> bool {
        (self.streams.is_empty() || self.streams.contains(&stream))
            && (self.ports.is_empty() || self.ports.contains(&p1) || self.ports.contains(&p2))
    }
    /// No filter at all: the segment's fields need not be read (reading them right after
    /// the analyzer wrote them stalls the CPU when loads and stores differ in width).
    #[inline]
    fn all(&self) -> bool {
        self.streams.is_empty() && self.ports.is_empty()
    }
}

impl<S: EventSink> EventSink for Filter<'_, S> {
    fn segment(&mut self, a: &SegmentAnalysis) {
        if self.all() || self.keep(a.stream.0, a.sport, a.dport) {
            self.inner.segment(a);
        }
    }
    fn segment_detail(&mut self, a: &SegmentAnalysis, d: &SegmentDetail) {
        if self.all() || self.keep(a.stream.0, a.sport, a.dport) {
            self.inner.segment_detail(a, d);
        }
    }
    fn payload(&mut self, a: &SegmentAnalysis, payload: &[u8]) {
        if self.all() || self.keep(a.stream.0, a.sport, a.dport) {
            self.inner.payload(a, payload);
        }
    }
    fn needs_flow_stats(&self) -> bool {
        self.inner.needs_flow_stats()
    }
    fn needs_flows(&self) -> bool {
        self.inner.needs_flows()
    }
    fn flow(&mut self, f: &FlowSummary) {
        if self.keep(f.stream.0, f.dirs[0].src.port, f.dirs[0].dst.port) {
            self.inner.flow(f);
        }
    }
    fn flow_evicted(&mut self, f: &FlowSummary) {
        if self.keep(f.stream.0, f.dirs[0].src.port, f.dirs[0].dst.port) {
            self.inner.flow_evicted(f);
        }
    }
    fn warning(&mut self, w: &Warning) {
        // Counted once per stream: the list stays small whatever the input.
        if self.warnings.len() < MAX_WARNINGS {
            self.warnings.push(w.clone());
        }
    }
}

/// What `analyze` tells the command after the last frame.
pub struct Outcome {
    /// Time of the first frame (ns since epoch), for relative times.
    pub first_ts_ns: i64,
    /// The analyzer's input counters (evictions among them).
    pub stats: tcpdx_core::InputStats,
    /// What the storage plans' workers leave ([`analyze_storage`]).
    pub parts: parallel::Parts,
}

/// Opens the capture named on the command line (bad input is an error naming the byte),
/// for an analysis on `--threads` threads.
pub fn open(common: &Common) -> Result<CaptureReader> {
    open_for(common, common.worker_threads())
}

/// [`open`] for an analysis on one thread whatever `--threads` says ([`Plan::Serial`]).
pub fn open_serial(common: &Common) -> Result<CaptureReader> {
    open_for(common, 1)
}

/// Opens the capture. A regular uncompressed file is read mapped into memory (no copy of
/// its bytes: 1.6-1.7x faster on full-payload captures), except that with a core left for
/// a reading thread besides the analysis' (one thread, or a reader and `threads` workers),
/// a file of small records (headers cut by the snap length) is read ahead on that thread:
/// its copies then overlap the analysis, 4-6% faster than mapped there. Other inputs are
/// read ahead when a core is left for it, where on a full machine the thread only adds
/// switches. `TCPDX_NO_MMAP=1` never maps.
fn open_for(common: &Common, threads: usize) -> Result<CaptureReader> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let busy = if threads <= 1 { 1 } else { threads + 1 };
    let read_ahead = cores > busy;
    let map = std::env::var_os("TCPDX_NO_MMAP").is_none_or(|v| v.is_empty() || v == "0")
        && !(read_ahead && small_records(&common.file));
    let reader = if map {
        CaptureReader::open_mapped(&common.file, read_ahead)
    } else if read_ahead {
        CaptureReader::open_read_ahead(&common.file)
    } else {
        CaptureReader::open(&common.file)
    };
    reader.map_err(anyhow::Error::new)
}

/// Records averaging fewer bytes than this are read ahead rather than mapped (where a
/// core is left for it): measured on this project's bench captures, the copy overlapping
/// the analysis wins at 96-byte records by 4-6%, mapping at 9 KB ones by 1.6x.
const SMALL_RECORD: u64 = 512;
/// Records sampled from the start of the file to tell, at most (and at most
/// [`SAMPLE_BYTES`] of it).
const SAMPLE_RECORDS: u64 = 4096;
/// Bytes of the file sampled at most.
const SAMPLE_BYTES: u64 = 4 << 20;

/// Whether the first records of the file at `path` are small on average (a regular
/// uncompressed file only: a pipe cannot be read twice, and other inputs are never mapped).
fn small_records(path: &std::path::Path) -> bool {
    // Not even opened otherwise: opening a named pipe to look would take its first bytes.
    if path.as_os_str() == "-" || !std::fs::metadata(path).is_ok_and(|m| m.is_file()) {
        return false;
    }
    let Ok(mut r) = CaptureReader::open_mapped(path, false) else {
        return false;
    };
    if !r.is_mapped() {
        return false;
    }
    let mut n = 0;
    while n < SAMPLE_RECORDS
        && r.input_bytes_read() < SAMPLE_BYTES
        && matches!(r.next_frame_at(), Ok(Some(_)))
    {
        n += 1;
    }
    n > 0 && r.input_bytes_read() / n < SMALL_RECORD
}

/// Reads every frame of `reader` into a fresh analyzer that pushes into `sink`.
/// `stop` is polled so a failed output (closed pipe) ends the run early.
pub fn analyze<S: EventSink>(
    reader: CaptureReader,
    common: &Common,
    sink: &mut S,
    stop: impl Fn(&S) -> bool,
) -> Result<Outcome> {
    analyze_with(reader, common, sink, stop, Plan::Replay, |_, _, _, _| {})
}

/// [`analyze`] with a choice of what parallel workers send back (`plan`); `row` receives
/// the rows of [`Plan::CsvRows`]. With one thread everything goes through `sink`.
pub fn analyze_with<S: EventSink>(
    reader: CaptureReader,
    common: &Common,
    sink: &mut S,
    stop: impl Fn(&S) -> bool,
    plan: Plan,
    mut row: impl FnMut(&mut S, u64, u32, &[u8]),
) -> Result<Outcome> {
    let progress = progress(common, &reader);
    let threads = common.worker_threads();
    if threads <= 1 || plan == Plan::Serial {
        return analyze_single(reader, common, sink, stop, progress);
    }
    let mut filter = Filter::new(sink, common);
    let job = job(common, threads, plan, StorageConfig::default(), progress);
    let par = parallel::run(
        reader,
        analyzer_config(common),
        job,
        &mut filter,
        &mut NoStorage,
        |f, _| stop(f.inner),
        |f, frame, stream, tail| row(f.inner, frame, stream, tail),
    )?;
    end_parallel(par, &filter.warnings, common)
}

/// The progress bar the command line asked for (or the default for this input).
fn progress(common: &Common, reader: &CaptureReader) -> Option<Progress> {
    Progress::new(
        common.progress,
        common.no_progress,
        reader.input_len(),
        "reading",
    )
}

/// The parallel run's settings.
fn job(
    common: &Common,
    threads: usize,
    plan: Plan,
    storage: StorageConfig,
    progress: Option<Progress>,
) -> parallel::Job<'_> {
    parallel::Job {
        threads,
        plan,
        streams: &common.streams,
        ports: &common.ports,
        storage,
        progress,
    }
}

/// Reports the warnings of a parallel run and turns its read error into the result.
fn end_parallel(par: parallel::Parallel, warnings: &[Warning], common: &Common) -> Result<Outcome> {
    for w in par.reader.reader.warnings() {
        eprintln!("tcpdx: warning: {w}");
    }
    if let Some(e) = par.reader.error {
        return Err(anyhow::Error::new(e));
    }
    report_warnings(warnings, &par.stats, common.max_flows);
    Ok(Outcome {
        first_ts_ns: par.reader.first_ts.map_or(0, |t| t.0),
        stats: par.stats,
        parts: par.parts,
    })
}

/// A storage sink that drops everything (plans without storage work).
struct NoStorage;

impl StorageSink for NoStorage {}

/// A sink that drops everything (the storage plans' results come another way).
struct NoEvents;

impl EventSink for NoEvents {
    fn needs_flow_stats(&self) -> bool {
        false
    }
    fn needs_flows(&self) -> bool {
        false
    }
}

/// True if `common` runs the storage plans ([`analyze_storage`]) on several threads:
/// more than one, and no `--stream` (the workers do not know the global stream numbers).
pub fn storage_in_parallel(common: &Common) -> bool {
    common.worker_threads() > 1 && common.streams.is_empty()
}

/// Runs [`Plan::Diagnose`] or [`Plan::Storage`] on several threads (see
/// [`storage_in_parallel`]): the storage events (parsed with `cfg`) go to `storage` in
/// capture order, the TCP diagnosis comes back in the outcome. `stop` is polled.
pub fn analyze_storage<T: StorageSink>(
    reader: CaptureReader,
    common: &Common,
    plan: Plan,
    cfg: StorageConfig,
    storage: &mut T,
    stop: impl Fn(&T) -> bool,
) -> Result<Outcome> {
    let progress = progress(common, &reader);
    let mut nothing = NoEvents;
    let mut filter = Filter::new(&mut nothing, common);
    let job = job(common, common.worker_threads(), plan, cfg, progress);
    let par = parallel::run(
        reader,
        analyzer_config(common),
        job,
        &mut filter,
        storage,
        |_, t| stop(t),
        |_, _, _, _| {},
    )?;
    end_parallel(par, &filter.warnings, common)
}

fn analyze_single<S: EventSink>(
    mut reader: CaptureReader,
    common: &Common,
    sink: &mut S,
    stop: impl Fn(&S) -> bool,
    progress: Option<Progress>,
) -> Result<Outcome> {
    let mut analyzer = Analyzer::new(analyzer_config(common));
    let mut filter = Filter::new(sink, common);
    let mut first_ts_ns = None;
    let mut n: u64 = 0;
    while let Some(frame) = reader.next_frame().map_err(anyhow::Error::new)? {
        first_ts_ns.get_or_insert(frame.ts.0);
        analyzer.handle_frame(&frame, &mut filter);
        n += 1;
        if n.is_multiple_of(progress::EVERY_FRAMES) {
            if let Some(p) = &progress {
                p.update(reader.input_bytes_read(), n);
            }
            if stop(filter.inner) {
                break;
            }
        }
    }
    analyzer.handle_end(&mut filter);
    if let Some(p) = progress {
        p.finish();
    }
    for w in reader.warnings() {
        eprintln!("tcpdx: warning: {w}");
    }
    report_warnings(&filter.warnings, analyzer.stats(), common.max_flows);
    Ok(Outcome {
        first_ts_ns: first_ts_ns.unwrap_or(0),
        stats: analyzer.stats().clone(),
        parts: parallel::Parts::default(),
    })
}

/// The analyzer settings the command line chose.
fn analyzer_config(common: &Common) -> AnalyzerConfig {
    let mut cfg = AnalyzerConfig::default();
    cfg.max_flows = common.max_flows;
    cfg.max_evicted_remembered = common.max_flows;
    cfg
}

fn report_warnings(warnings: &[Warning], stats: &tcpdx_core::InputStats, max_flows: usize) {
    if !warnings.is_empty() {
        let mut streams: Vec<String> = warnings
            .iter()
            .take(10)
            .map(|w| match w {
                Warning::StateCapReached { stream, .. } => stream.to_string(),
                _ => String::new(),
            })
            .collect();
        if warnings.len() > 10 {
            let at_least = if warnings.len() >= MAX_WARNINGS {
                "at least "
            } else {
                ""
            };
            streams.push(format!("... {at_least}{} streams in all", warnings.len()));
        }
        eprintln!(
            "tcpdx: warning: {} segments not tracked because the per-connection unacked-segment cap was reached (streams {}); their ACK RTT and bytes in flight are not reported",
            stats.capped_segments,
            streams.join(",")
        );
    }
    if stats.evicted_flows > 0 {
        eprintln!(
            "tcpdx: warning: {} connections evicted: more than --max-flows {max_flows} tracked at once; \
             {} resumed under their stream number, {} forgotten (resumed as new streams)",
            stats.evicted_flows, stats.resumed_flows, stats.forgotten_flows
        );
    }
    if stats.fragments > 0 {
        eprintln!(
            "tcpdx: note: {} IP fragments were not analysed (not reassembled)",
            stats.fragments
        );
    }
}

/// Adds the path to an output error.
pub fn out_err(r: std::io::Result<()>) -> Result<()> {
    r.context("writing output")
}
