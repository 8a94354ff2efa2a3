//! tcpdx: why is this TCP transfer slow? The library behind the `tcpdx` command.
//!
//! Open a [`Capture`] (a pcap or pcapng file, optionally gzip- or zstd-compressed, several
//! files or a directory of them read as one capture with [`Capture::open_set`], or any
//! reader), choose [`Options`] (their defaults are the command's), and ask: [`Capture::diagnose`]
//! (findings with their cost and evidence frames, TCP and storage protocols, and the time
//! budget), [`Capture::flows`], [`Capture::srt`], [`Capture::events`] (every analysed
//! segment, streamed into an [`EventSink`]) or [`Capture::export`]. Every pass runs on as
//! many cores as [`Options::threads`] says, with the same result on any number, and in
//! bounded memory: long connections spill to temporary files, and at most
//! [`Options::max_flows`] connections are tracked at once.
//!
//! ```
//! use tcpdx::{Capture, Options};
//!
//! # fn main() -> Result<(), tcpdx::Error> {
//! let path = concat!(
//!     env!("CARGO_MANIFEST_DIR"),
//!     "/../../tests/data/lab/case000_rto_delack/server.pcap.gz"
//! );
//! let mut capture = Capture::open(path);
//! let diagnosis = capture.diagnose(&Options::default())?;
//!
//! // The costliest finding first: what it is, what it cost, and the frames showing it.
//! let worst = &diagnosis.findings[0];
//! assert_eq!(worst.kind.as_str(), "rto-stall");
//! println!(
//!     "{} on tcp.stream {:?}: {:.3} s ({:.0}% of the connection)",
//!     worst.kind.as_str(),
//!     worst.stream,
//!     worst.cost.seconds,
//!     worst.cost.share * 100.0
//! );
//! for e in worst.evidence.iter().take(3) {
//!     println!("  frame {}: {}", e.frame, e.role);
//! }
//! assert!(diagnosis.time_budget.seconds > 0.0);
//! println!("{} frames", capture.summary().expect("a pass ran").stats.frames);
//! # Ok(())
//! # }
//! ```
//!
//! Layers below: `tcpdx-capture` reads, `tcpdx-core` analyses TCP (sans-IO), `tcpdx-storage`
//! parses NFS, SMB2 and iSCSI, `tcpdx-detect` judges, `tcpdx-report` and `tcpdx-export`
//! write. This crate puts them together: the diagnosis of a capture is assembled here only.
#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]

pub mod compare;
mod diagnosis;
pub mod distributed;
mod drive;
mod error;
mod options;
mod parallel;
mod rounds;
mod spill;
#[cfg(feature = "arrow")]
pub mod tables;
pub mod vantage;

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use tcpdx_report::EventsCsv;
use tcpdx_storage::findings::StorageEvidence;
use tcpdx_storage::{Notice, Request, SrtCollector, TcpLog, Tracker, Transaction};
use tcpdx_wire::{FrameNo, Timestamp};

pub use compare::{Measured, compare, compare_measured, measure};
pub use drive::Summary;
pub use error::Error;
pub use options::{
    Filter, MAX_WARNINGS, Options, PROGRESS_EVERY_FRAMES, Progress, default_threads,
};
pub use rounds::direction_name;
pub use tcpdx_capture::{CaptureWarning, SetMap, SetOrder};
pub use tcpdx_core::{
    EventSink, FlowSummary, InputStats, SegmentAnalysis, SegmentDetail, StreamId, Warning,
};
pub use tcpdx_detect::infer::limit::{Limit, RoundRow, Vantage as RoundVantage};
pub use tcpdx_detect::{Diagnosis, Finding, FindingKind, Severity};
pub use tcpdx_export::RowCounts;
pub use tcpdx_report::EvictedTotals;
pub use tcpdx_report::compare::{Change, Comparison};
pub use tcpdx_report::vantage::Vantage;
pub use tcpdx_storage::{DecodeAs, SrtConfig, SrtReport, StorageSink};

use diagnosis::{CaptureDiagnoser, Evidence, assemble_listed};
use drive::{Failed, NoEvents, NoStorage, Outcome, Source};
use parallel::Parts;
use parallel::part;

/// The document `tcpdx diagnose --json` prints for `d` (with its final newline).
pub fn diagnosis_json(d: &Diagnosis) -> std::io::Result<String> {
    let mut out = Vec::new();
    tcpdx_report::write_diagnosis_json(&mut out, d)?;
    String::from_utf8(out).map_err(std::io::Error::other)
}

/// The document `tcpdx srt --json` prints for `r` (with its final newline).
pub fn srt_json(r: &SrtReport) -> std::io::Result<String> {
    let mut out = Vec::new();
    tcpdx_report::write_srt_json(&mut out, r)?;
    String::from_utf8(out).map_err(std::io::Error::other)
}

/// A packet capture to analyse: a file (read again for each pass) or a stream (one pass).
pub struct Capture {
    source: Source,
    /// Opened by [`Capture::prepare`] for the next pass.
    ready: Option<drive::Reader>,
    /// The last pass's summary.
    last: Option<Summary>,
}

impl std::fmt::Debug for Capture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Capture")
            .field("path", &self.source.path())
            .finish_non_exhaustive()
    }
}

/// The connections of a capture ([`Capture::flows`]).
#[derive(Debug, Default)]
pub struct Flows {
    /// One summary per tracked connection (at most [`Options::max_flows`] at once), in
    /// stream order.
    pub flows: Vec<FlowSummary>,
    /// The evicted connections, summed.
    pub evicted: EvictedTotals,
    /// Time of the first frame (ns since the epoch), the origin of relative times.
    pub first_ts_ns: i64,
}

impl Capture {
    /// The capture file at `path` (pcap or pcapng, optionally gzip- or zstd-compressed;
    /// `-` is standard input). It is opened by each pass: a bad file is the pass's error.
    pub fn open(path: impl Into<PathBuf>) -> Capture {
        Capture {
            source: Source::Path(path.into()),
            ready: None,
            last: None,
        }
    }

    /// Several capture files read as one capture (a ring buffer, or files overlapping in
    /// time merged by timestamp: `order`), numbered as in the file `mergecap -w` (`-a` for
    /// [`SetOrder::Concat`]) writes of them; a directory stands for its capture files in
    /// the order of their names. One file is [`Capture::open`]. With several, each
    /// finding's evidence names its file and frame number there
    /// ([`tcpdx_detect::Evidence::source`]).
    pub fn open_set(
        paths: impl IntoIterator<Item = impl Into<PathBuf>>,
        order: SetOrder,
    ) -> Capture {
        let mut paths: Vec<PathBuf> = paths.into_iter().map(Into::into).collect();
        let source = match paths.len() {
            1 if order == SetOrder::default() => Source::Path(paths.remove(0)),
            _ => Source::Set(paths, order),
        };
        Capture {
            source,
            ready: None,
            last: None,
        }
    }

    /// The capture read from `reader` (a pipe, a socket, memory): one pass only.
    pub fn from_reader(reader: impl Read + Send + 'static) -> Capture {
        Capture {
            source: Source::Reader(Some(Box::new(reader))),
            ready: None,
            last: None,
        }
    }

    /// The path of the capture, if it is a file.
    pub fn path(&self) -> Option<&Path> {
        self.source.path()
    }

    /// What the last pass left besides its output (counters, warnings); also after a pass
    /// that failed while reading on several threads (the warnings before the error).
    pub fn summary(&self) -> Option<&Summary> {
        self.last.as_ref()
    }

    /// Opens the capture now, for the next pass with `o`: a bad file is then an error
    /// before the caller writes any output.
    pub fn prepare(&mut self, o: &Options) -> Result<(), Error> {
        self.ready = Some(self.source.open(self.threads(o))?);
        Ok(())
    }

    /// The reader of a pass on `threads` threads.
    fn reader(&mut self, threads: usize) -> Result<drive::Reader, Error> {
        match self.ready.take() {
            Some(r) => Ok(r),
            None => self.source.open(threads),
        }
    }

    /// Runs one pass: `threads` for it, the reader opened for them.
    fn pass<T>(
        &mut self,
        threads: usize,
        run: impl FnOnce(drive::Reader) -> Result<(T, Outcome), Failed>,
    ) -> Result<(T, Parts), Error> {
        self.last = None;
        let reader = self.reader(threads)?;
        match run(reader) {
            Ok((t, out)) => {
                self.last = Some(out.summary);
                Ok((t, out.parts))
            }
            Err(f) => {
                self.last = f.summary.map(|s| *s);
                Err(f.error)
            }
        }
    }

    /// The threads of a pass of `o`.
    fn threads(&self, o: &Options) -> usize {
        o.threads_for(self.source.path())
    }

    /// The findings of every connection, TCP and storage, most costly first, with the
    /// time budget and what was inferred of each connection.
    pub fn diagnose(&mut self, o: &Options) -> Result<Diagnosis, Error> {
        self.diagnose_with(o, &mut NoEvents)
    }

    /// [`Capture::diagnose`], and `also` fed the same pass's flows (summaries at the end and
    /// evicted ones) and warnings; on one thread, every event.
    pub fn diagnose_with<S: EventSink>(
        &mut self,
        o: &Options,
        also: &mut S,
    ) -> Result<Diagnosis, Error> {
        let threads = self.threads(o);
        let spill_dir = o.spill_dir.as_ref();
        // The workers do not know the final stream numbers: a stream filter runs on one.
        if threads > 1 && o.filter.streams.is_empty() {
            let share_evicted = also.needs_flows();
            let mut evidence = StorageEvidence::new();
            let ((), parts) = self.pass(threads, |reader| {
                let out = drive::parallel(
                    reader,
                    o,
                    threads,
                    || {
                        part::Diagnose::new(
                            &o.storage_config(),
                            &o.filter,
                            spill_dir,
                            share_evicted,
                        )
                    },
                    also,
                    &mut evidence,
                    |_, _| false,
                    |_, _, _, _| {},
                )?;
                Ok(((), out))
            })?;
            if let Some(logs) = parts.tcp_logs {
                evidence.add_tcp_logs(logs);
            }
            spill::check(&parts.spills, spill_dir)?;
            let mut d = assemble_listed(parts.listing, &evidence);
            self.name_sources(&mut d)?;
            return Ok(d);
        }
        let mut both = Both(CaptureDiagnoser::new(o.storage_config(), spill_dir), also);
        let ((), _) = self.pass(1, |reader| {
            Ok(((), drive::single(reader, o, &mut both, |_| false)?))
        })?;
        let mut d = both.0.finish(spill_dir)?.0;
        self.name_sources(&mut d)?;
        Ok(d)
    }

    /// With a capture of several files: each evidence frame's file and number there.
    fn name_sources(&self, d: &mut Diagnosis) -> Result<(), Error> {
        let Some(map) = self.last.as_ref().and_then(|s| s.set.as_ref()) else {
            return Ok(());
        };
        let frames: Vec<u64> = d
            .findings
            .iter()
            .flat_map(|f| f.evidence.iter().map(|e| e.frame))
            .collect();
        let found = map.locate(&frames)?;
        let names: Vec<String> = map
            .paths()
            .iter()
            .map(|p| p.display().to_string())
            .collect();
        let evidence = d.findings.iter_mut().flat_map(|f| f.evidence.iter_mut());
        for (e, at) in evidence.zip(found) {
            if let Some((file, frame)) = at {
                let file = names.get(file).cloned().unwrap_or_default();
                e.source = Some(Box::new(tcpdx_detect::Source { file, frame }));
            }
        }
        Ok(())
    }

    /// One summary per connection (both directions), and the evicted ones summed.
    pub fn flows(&mut self, o: &Options) -> Result<Flows, Error> {
        let threads = self.threads(o);
        let mut flows = FlowList::default();
        let ((), _) = self.pass(threads, |reader| {
            let out = if threads > 1 {
                drive::parallel(
                    reader,
                    o,
                    threads,
                    || part::FlowsOnly,
                    &mut flows,
                    &mut NoStorage,
                    |_, _| false,
                    |_, _, _, _| {},
                )?
            } else {
                drive::single(reader, o, &mut flows, |_| false)?
            };
            Ok(((), out))
        })?;
        let summary = self.last.as_ref();
        let mut evicted = flows.1;
        evicted.resumed = summary.map_or(0, |s| s.stats.resumed_flows);
        evicted.max_flows = o.max_flows() as u64;
        Ok(Flows {
            flows: flows.0,
            evicted,
            first_ts_ns: summary.map_or(0, |s| s.first_ts_ns),
        })
    }

    /// Every analysed segment (and the flows, warnings, evictions) into `sink`, in capture
    /// order, as it comes: memory stays bounded whatever the capture's length. `stop` is
    /// polled (every few thousand frames) to end early, e.g. when the output failed.
    pub fn events<S: EventSink>(
        &mut self,
        o: &Options,
        sink: &mut S,
        stop: impl Fn(&S) -> bool,
    ) -> Result<(), Error> {
        let threads = self.threads(o);
        let ((), _) = self.pass(threads, |reader| {
            let out = if threads > 1 {
                drive::parallel(
                    reader,
                    o,
                    threads,
                    || part::Replay,
                    sink,
                    &mut NoStorage,
                    |s, _| stop(s),
                    |_, _, _, _| {},
                )?
            } else {
                drive::single(reader, o, sink, stop)?
            };
            Ok(((), out))
        })?;
        Ok(())
    }

    /// The `tcpdx events` CSV into `csv`: [`Capture::events`], with the rows formatted by
    /// the workers on several threads. Stops early once writing failed.
    pub fn events_csv<W: Write>(
        &mut self,
        o: &Options,
        csv: &mut EventsCsv<W>,
    ) -> Result<(), Error> {
        let threads = self.threads(o);
        let ((), _) = self.pass(threads, |reader| {
            let out = if threads > 1 {
                drive::parallel(
                    reader,
                    o,
                    threads,
                    || part::CsvRows::new(&o.filter),
                    csv,
                    &mut NoStorage,
                    |c, _| c.failed(),
                    |c, frame, stream, tail| c.write_row(frame, stream, tail),
                )?
            } else {
                drive::single(reader, o, csv, EventsCsv::failed)?
            };
            Ok(((), out))
        })?;
        Ok(())
    }

    /// Every storage transaction (NFS, SMB2, iSCSI request with its reply) into `sink`, in
    /// the order of their replies (unanswered requests at the end). `stop` is polled.
    pub fn transactions<T: StorageSink>(
        &mut self,
        o: &Options,
        sink: &mut T,
        stop: impl Fn(&T) -> bool,
    ) -> Result<(), Error> {
        self.storage_pass(o, sink, stop).map(|_| ())
    }

    /// Service response times of the storage protocols (`tcpdx srt`).
    pub fn srt(&mut self, o: &Options, cfg: SrtConfig) -> Result<SrtReport, Error> {
        let mut collector = SrtCollector::new(cfg);
        let last = self.storage_pass(o, &mut collector, |_| false)?;
        Ok(collector.report(last))
    }

    /// A pass of the storage trackers into `sink`: returns the time of the last segment
    /// they saw.
    fn storage_pass<T: StorageSink>(
        &mut self,
        o: &Options,
        sink: &mut T,
        stop: impl Fn(&T) -> bool,
    ) -> Result<Option<Timestamp>, Error> {
        let threads = self.threads(o);
        if threads > 1 && o.filter.streams.is_empty() {
            // Each worker parses its connections; the transactions are replayed here.
            let ((), parts) = self.pass(threads, |reader| {
                let out = drive::parallel(
                    reader,
                    o,
                    threads,
                    || part::Storage::new(&o.storage_config(), &o.filter),
                    &mut NoEvents,
                    sink,
                    |_, t| stop(t),
                    |_, _, _, _| {},
                )?;
                Ok(((), out))
            })?;
            return Ok(parts.last_segment_ts);
        }
        let mut tracker = Tracker::new(o.storage_config(), ByRef(sink));
        let ((), _) = self.pass(1, |reader| {
            Ok((
                (),
                drive::single(reader, o, &mut tracker, |t| stop(t.sink().0))?,
            ))
        })?;
        tracker.finish();
        Ok(tracker.last_ts())
    }

    /// The analysis as Parquet tables in `dir` (created if missing): segments, flows,
    /// storage transactions, findings with their evidence and episodes, time budget.
    /// `meta` goes into every file's metadata. On one thread (the tables take every
    /// segment with its payload's transactions).
    pub fn export(
        &mut self,
        o: &Options,
        dir: &Path,
        meta: &[(&str, &str)],
    ) -> Result<RowCounts, Error> {
        let spill_dir = o.spill_dir.as_ref();
        // Opened first: bad input must not leave table files behind.
        self.last = None;
        let reader = self.reader(1)?;
        std::fs::create_dir_all(dir).map_err(|error| Error::CreateDir {
            dir: dir.to_owned(),
            error,
        })?;
        let exporter = tcpdx_export::Exporter::create(dir, meta)?;
        let fan = ExportFan {
            evidence: StorageEvidence::new(),
            exporter,
        };
        let mut sink = ExportSink(CaptureDiagnoser::with_parts(
            tcpdx_detect::Diagnoser::new().spilling_to(spill::new_spill(spill_dir)),
            o.storage_config(),
            fan,
        ));
        match drive::single(reader, o, &mut sink, |s| s.exporter().failed()) {
            Ok(out) => self.last = Some(out.summary),
            Err(f) => {
                self.last = f.summary.map(|s| *s);
                let (_, tracker) = sink.0.into_parts();
                tracker.into_sink().exporter.abort();
                return Err(f.error);
            }
        }
        let (mut d, mut fan) = sink.0.finish(spill_dir)?;
        self.name_sources(&mut d)?;
        // The rounds take a second pass, over a file only (a stream cannot be read again).
        if self.source.path().is_some() {
            let last = self.last.take();
            let rows = self.rounds(o);
            self.last = last;
            match rows {
                Ok(rows) => fan.exporter.rounds(&rows),
                Err(e) => {
                    fan.exporter.abort();
                    return Err(e);
                }
            }
        }
        Ok(fan.exporter.finish(&d)?)
    }
}

/// Two sinks fed the same events: the first one's, then the second's.
struct Both<'a, A, B>(A, &'a mut B);

impl<A: EventSink, B: EventSink> EventSink for Both<'_, A, B> {
    fn segment(&mut self, a: &SegmentAnalysis) {
        self.0.segment(a);
        self.1.segment(a);
    }
    fn segment_detail(&mut self, a: &SegmentAnalysis, d: &SegmentDetail) {
        self.0.segment_detail(a, d);
        self.1.segment_detail(a, d);
    }
    fn payload(&mut self, a: &SegmentAnalysis, p: &[u8]) {
        self.0.payload(a, p);
        self.1.payload(a, p);
    }
    fn flow(&mut self, f: &FlowSummary) {
        self.0.flow(f);
        self.1.flow(f);
    }
    fn flow_evicted(&mut self, f: &FlowSummary) {
        self.0.flow_evicted(f);
        self.1.flow_evicted(f);
    }
    fn warning(&mut self, w: &Warning) {
        self.0.warning(w);
        self.1.warning(w);
    }
    fn stream_opened(&mut self, stream: StreamId, frame: FrameNo) {
        self.0.stream_opened(stream, frame);
        self.1.stream_opened(stream, frame);
    }
    fn needs_flow_stats(&self) -> bool {
        self.0.needs_flow_stats() || self.1.needs_flow_stats()
    }
    fn needs_flows(&self) -> bool {
        self.0.needs_flows() || self.1.needs_flows()
    }
}

/// Collects flow summaries (one per tracked connection) and sums the evicted ones.
#[derive(Default)]
struct FlowList(Vec<FlowSummary>, EvictedTotals);

impl EventSink for FlowList {
    fn flow(&mut self, f: &FlowSummary) {
        self.0.push(f.clone());
    }
    fn flow_evicted(&mut self, f: &FlowSummary) {
        self.1.add(f);
    }
}

/// A storage sink borrowed by a tracker.
struct ByRef<'a, T>(&'a mut T);

impl<T: StorageSink> StorageSink for ByRef<'_, T> {
    fn transaction(&mut self, t: &Transaction) {
        self.0.transaction(t);
    }
    fn notice(&mut self, n: &Notice) {
        self.0.notice(n);
    }
    fn request(&mut self, r: &Request) {
        self.0.request(r);
    }
    fn start(&mut self, ts: Timestamp) {
        self.0.start(ts);
    }
    fn tcp_log(&mut self, stream: StreamId, log: TcpLog) {
        self.0.tcp_log(stream, log);
    }
    fn tcp_last(&mut self, frame: FrameNo, ts: Timestamp) {
        self.0.tcp_last(frame, ts);
    }
}

/// The storage events of an export: to the diagnosis' evidence and the tables.
struct ExportFan {
    evidence: StorageEvidence,
    exporter: tcpdx_export::Exporter,
}

impl StorageSink for ExportFan {
    fn transaction(&mut self, t: &Transaction) {
        self.evidence.transaction(t);
        self.exporter.transaction(t);
    }
    fn notice(&mut self, n: &Notice) {
        self.evidence.notice(n);
    }
    fn request(&mut self, r: &Request) {
        self.evidence.request(r);
    }
    fn start(&mut self, ts: Timestamp) {
        self.exporter.start(ts);
        self.evidence.start(ts);
    }
    fn tcp_log(&mut self, stream: StreamId, log: TcpLog) {
        self.evidence.tcp_log(stream, log);
    }
    fn tcp_last(&mut self, frame: FrameNo, ts: Timestamp) {
        self.evidence.tcp_last(frame, ts);
    }
}

impl Evidence for ExportFan {
    fn evidence(&self) -> &StorageEvidence {
        &self.evidence
    }
}

/// An export's sink: the tables' rows, then the diagnosis.
struct ExportSink(CaptureDiagnoser<ExportFan>);

impl ExportSink {
    fn exporter(&self) -> &tcpdx_export::Exporter {
        &self.0.tracker().sink().exporter
    }
}

impl EventSink for ExportSink {
    fn segment_detail(&mut self, a: &SegmentAnalysis, d: &SegmentDetail) {
        self.0
            .tracker_mut()
            .sink_mut()
            .exporter
            .segment_detail(a, d);
        self.0.segment_detail(a, d);
    }
    fn payload(&mut self, a: &SegmentAnalysis, p: &[u8]) {
        self.0.payload(a, p);
    }
    fn flow(&mut self, f: &FlowSummary) {
        self.0.tracker_mut().sink_mut().exporter.flow(f);
        self.0.flow(f);
    }
    fn flow_evicted(&mut self, f: &FlowSummary) {
        self.0.flow_evicted(f);
    }
    fn warning(&mut self, w: &Warning) {
        self.0.warning(w);
    }
}
