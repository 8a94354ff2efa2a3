//! Drives one pass over a capture: opens it (mapped or read ahead), feeds the analyzer on
//! one thread or the workers on several, and sums up what the caller reports.

use std::io::Read;
use std::path::Path;
use std::sync::Arc;

use tcpdx_capture::{CaptureReader, CaptureSet, CaptureWarning, Frames, SetMap, SetOrder};
use tcpdx_core::{Analyzer, EventSink, InputStats, Warning};
use tcpdx_storage::StorageSink;

use crate::options::{Filtered, PROGRESS_EVERY_FRAMES};
use crate::parallel::{self, Job, Part, Parts};
use crate::{Error, Options, Progress};

/// What a pass over the capture leaves besides its output: counters and warnings, for the
/// caller to show.
#[derive(Debug, Default, Clone)]
pub struct Summary {
    /// Time of the first frame (ns since the epoch), the origin of relative times.
    pub first_ts_ns: i64,
    /// The analyzer's input counters (frames, evictions, fragments, capped segments).
    pub stats: InputStats,
    /// What the capture reader found odd but read past.
    pub capture_warnings: Vec<CaptureWarning>,
    /// The analyzer's warnings (per-connection caps reached), the first
    /// [`MAX_WARNINGS`](crate::MAX_WARNINGS).
    pub warnings: Vec<Warning>,
    /// A capture of several files: which file each frame came from.
    pub set: Option<SetMap>,
}

impl Summary {
    /// What the `tcpdx` command says on stderr after this pass, one line each (it prints
    /// them after `tcpdx: `): `warning: ...` for what the reader read past (a capture cut
    /// off: analysed up to there), segments not tracked and connections evicted (beyond
    /// `max_flows`), `note: ...` for fragments not analysed.
    pub fn messages(&self, max_flows: usize) -> Vec<String> {
        let mut out: Vec<String> = self
            .capture_warnings
            .iter()
            .map(|w| format!("warning: {w}"))
            .collect();
        let stats = &self.stats;
        if !self.warnings.is_empty() {
            let mut streams: Vec<String> = self
                .warnings
                .iter()
                .take(10)
                .map(|w| match w {
                    Warning::StateCapReached { stream, .. } => stream.to_string(),
                    _ => String::new(),
                })
                .collect();
            if self.warnings.len() > 10 {
                let at_least = if self.warnings.len() >= crate::MAX_WARNINGS {
                    "at least "
                } else {
                    ""
                };
                streams.push(format!(
                    "... {at_least}{} streams in all",
                    self.warnings.len()
                ));
            }
            out.push(format!(
                "warning: {} segments not tracked because the per-connection unacked-segment cap was reached (streams {}); their ACK RTT and bytes in flight are not reported",
                stats.capped_segments,
                streams.join(",")
            ));
        }
        if stats.evicted_flows > 0 {
            out.push(format!(
                "warning: {} connections evicted: more than --max-flows {max_flows} tracked at once; \
                 {} resumed under their stream number, {} forgotten (resumed as new streams)",
                stats.evicted_flows, stats.resumed_flows, stats.forgotten_flows
            ));
        }
        if stats.fragments > 0 {
            out.push(format!(
                "note: {} IP fragments were not analysed (not reassembled)",
                stats.fragments
            ));
        }
        out
    }
}

/// A pass's result: the summary, and what the workers' parts leave (several threads).
pub(crate) struct Outcome {
    pub(crate) summary: Summary,
    pub(crate) parts: Parts,
}

/// A pass that failed: the error, and the summary so far (the reader's warnings of a
/// parallel pass) for the caller to show first.
pub(crate) struct Failed {
    pub(crate) error: Error,
    pub(crate) summary: Option<Box<Summary>>,
}

impl From<Error> for Failed {
    fn from(error: Error) -> Self {
        Failed {
            error,
            summary: None,
        }
    }
}

/// Where the capture comes from.
pub(crate) enum Source {
    Path(std::path::PathBuf),
    /// Several files (or directories of them) read as one capture.
    Set(Vec<std::path::PathBuf>, SetOrder),
    /// A stream, read once.
    Reader(Option<Box<dyn Read + Send>>),
}

/// The frames of a pass: one file, or a set of them.
pub(crate) enum Reader {
    One(CaptureReader),
    Set(CaptureSet),
}

impl Reader {
    /// The frames, whichever kind of reader gives them.
    pub(crate) fn boxed(self) -> Box<dyn Frames> {
        match self {
            Reader::One(r) => Box::new(r),
            Reader::Set(s) => Box::new(s),
        }
    }
}

impl Source {
    /// The path, if the capture is a file (or `-`).
    pub(crate) fn path(&self) -> Option<&Path> {
        match self {
            Source::Path(p) => Some(p),
            Source::Set(p, _) => p.first().map(|p| p.as_path()),
            Source::Reader(_) => None,
        }
    }

    /// Opens the capture for a pass on `threads` threads (bad input is an error naming the
    /// byte).
    pub(crate) fn open(&mut self, threads: usize) -> Result<Reader, Error> {
        match self {
            Source::Path(p) if !p.is_dir() => Ok(Reader::One(open_path(p, threads)?)),
            Source::Path(p) => open_set(std::slice::from_ref(p), SetOrder::default(), threads),
            Source::Set(paths, order) => open_set(paths, *order, threads),
            Source::Reader(r) => {
                let r = r.take().ok_or(Error::ReadTwice)?;
                Ok(Reader::One(CaptureReader::from_reader("-", r)?))
            }
        }
    }
}

/// Opens the files of `paths` (directories stand for their capture files): one file is
/// read as such, several as one capture in `order`, each opened as [`open_path`] opens.
fn open_set(
    paths: &[std::path::PathBuf],
    order: SetOrder,
    threads: usize,
) -> Result<Reader, Error> {
    let (files, skipped) = tcpdx_capture::members(paths)?;
    if let [one] = files.as_slice()
        && skipped.is_empty()
    {
        return Ok(Reader::One(open_path(one, threads)?));
    }
    let open: Arc<tcpdx_capture::OpenMember> = Arc::new(move |p: &Path| open_path(p, threads));
    let mut set = CaptureSet::open(files, order, open)?;
    set.add_warnings(skipped);
    Ok(Reader::Set(set))
}

/// Opens the capture at `path`. A regular uncompressed file is read mapped into memory (no
/// copy of its bytes: 1.6-1.7x faster on full-payload captures), except that with a core
/// left for a reading thread besides the analysis' (one thread, or a reader and `threads`
/// workers), a file of small records (headers cut by the snap length) is read ahead on that
/// thread: its copies then overlap the analysis. Other inputs are read ahead when a core is
/// left for it, where on a full machine the thread only adds switches. `TCPDX_NO_MMAP=1`
/// never maps.
fn open_path(path: &Path, threads: usize) -> Result<CaptureReader, tcpdx_capture::CaptureError> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let busy = if threads <= 1 { 1 } else { threads + 1 };
    let read_ahead = cores > busy;
    let map = std::env::var_os("TCPDX_NO_MMAP").is_none_or(|v| v.is_empty() || v == "0")
        && !(read_ahead && small_records(path));
    if map {
        CaptureReader::open_mapped(path, read_ahead)
    } else if read_ahead {
        CaptureReader::open_read_ahead(path)
    } else {
        CaptureReader::open(path)
    }
}

/// Records averaging fewer bytes than this are read ahead rather than mapped (where a
/// core is left for it): the copy overlapping the analysis wins at 96-byte records,
/// mapping at 9 KB ones.
const SMALL_RECORD: u64 = 512;
/// Records sampled from the start of the file to tell, at most (and at most
/// [`SAMPLE_BYTES`] of it).
const SAMPLE_RECORDS: u64 = 4096;
/// Bytes of the file sampled at most.
const SAMPLE_BYTES: u64 = 4 << 20;

/// Whether the first records of the file at `path` are small on average (a regular
/// uncompressed file only: a pipe cannot be read twice, and other inputs are never mapped).
fn small_records(path: &Path) -> bool {
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

/// The progress callback, told that a pass over `reader` starts.
fn progress(o: &Options, reader: &impl Frames) -> Option<Arc<dyn Progress>> {
    let p = o.progress.clone()?;
    p.start(reader.input_len());
    Some(p)
}

/// One pass on the caller's thread: every frame of `reader` into a fresh analyzer that
/// pushes into `sink` (filtered). `stop` is polled so a failed output (closed pipe) ends
/// the pass early.
pub(crate) fn single<S: EventSink>(
    reader: Reader,
    o: &Options,
    sink: &mut S,
    stop: impl Fn(&S) -> bool,
) -> Result<Outcome, Failed> {
    match reader {
        Reader::One(r) => single_on(r, o, sink, stop, |_| None),
        Reader::Set(s) => single_on(s, o, sink, stop, |s| Some(s.map())),
    }
}

/// [`single`] on one kind of reader; `map` tells its set's map at the end.
fn single_on<R: Frames, S: EventSink>(
    mut reader: R,
    o: &Options,
    sink: &mut S,
    stop: impl Fn(&S) -> bool,
    map: impl Fn(&R) -> Option<SetMap>,
) -> Result<Outcome, Failed> {
    let progress = progress(o, &reader);
    let mut analyzer = Analyzer::new(o.analyzer_config());
    let mut filter = Filtered::new(sink, &o.filter);
    let mut first_ts_ns = None;
    let mut n: u64 = 0;
    while let Some(frame) = reader.next_frame().map_err(Error::from)? {
        first_ts_ns.get_or_insert(frame.ts.0);
        analyzer.handle_frame(&frame, &mut filter);
        n += 1;
        if n.is_multiple_of(PROGRESS_EVERY_FRAMES) {
            if let Some(p) = &progress {
                p.update(reader.input_bytes_read(), n);
                if p.cancelled() {
                    return Err(Failed {
                        error: Error::Cancelled,
                        summary: None,
                    });
                }
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
    Ok(Outcome {
        summary: Summary {
            first_ts_ns: first_ts_ns.unwrap_or(0),
            stats: analyzer.stats().clone(),
            capture_warnings: reader.warnings().to_vec(),
            warnings: filter.warnings,
            set: map(&reader),
        },
        parts: Parts::default(),
    })
}

/// One pass on `threads` workers, each with a part made by `new_part`: `sink` (filtered)
/// gets what the parts send to the merge, in capture order, `storage` their storage
/// events; `row` the CSV rows of [`parallel::part::CsvRows`].
#[allow(clippy::too_many_arguments)]
pub(crate) fn parallel<P: Part, S: EventSink, T: StorageSink>(
    reader: Reader,
    o: &Options,
    threads: usize,
    new_part: impl Fn() -> P,
    sink: &mut S,
    storage: &mut T,
    stop: impl Fn(&S, &T) -> bool,
    row: impl FnMut(&mut S, u64, u32, &[u8]),
) -> Result<Outcome, Failed> {
    match reader {
        Reader::One(r) => parallel_on(r, o, threads, new_part, sink, storage, stop, row, |_| None),
        Reader::Set(r) => parallel_on(r, o, threads, new_part, sink, storage, stop, row, |s| {
            Some(s.map())
        }),
    }
}

/// [`parallel`] on one kind of reader; `map` tells its set's map at the end.
#[allow(clippy::too_many_arguments)]
fn parallel_on<R: Frames, P: Part, S: EventSink, T: StorageSink>(
    reader: R,
    o: &Options,
    threads: usize,
    new_part: impl Fn() -> P,
    sink: &mut S,
    storage: &mut T,
    stop: impl Fn(&S, &T) -> bool,
    mut row: impl FnMut(&mut S, u64, u32, &[u8]),
    map: impl Fn(&R) -> Option<SetMap>,
) -> Result<Outcome, Failed> {
    let progress = progress(o, &reader);
    let mut filter = Filtered::new(sink, &o.filter);
    let job = Job {
        threads,
        filter: &o.filter,
        storage: o.storage_config(),
        progress,
    };
    let par = parallel::run(
        reader,
        o.analyzer_config(),
        job,
        new_part,
        &mut filter,
        storage,
        |f, t| stop(f.inner, t),
        |f, frame, stream, tail| row(f.inner, frame, stream, tail),
    )?;
    let capture_warnings = par
        .reader
        .reader
        .as_ref()
        .map_or_else(Vec::new, |r| r.warnings().to_vec());
    let set = par.reader.reader.as_ref().and_then(map);
    if par.reader.cancelled {
        return Err(Failed {
            error: Error::Cancelled,
            summary: None,
        });
    }
    if let Some(error) = par.reader.error {
        return Err(Failed {
            error: Error::Capture(error),
            summary: Some(Box::new(Summary {
                capture_warnings,
                set,
                ..Summary::default()
            })),
        });
    }
    Ok(Outcome {
        summary: Summary {
            first_ts_ns: par.reader.first_ts.map_or(0, |t| t.0),
            stats: par.stats,
            capture_warnings,
            warnings: filter.warnings,
            set,
        },
        parts: par.parts,
    })
}

/// A sink that drops everything (the parts' results come another way).
pub(crate) struct NoEvents;

impl EventSink for NoEvents {
    fn needs_flow_stats(&self) -> bool {
        false
    }
    fn needs_flows(&self) -> bool {
        false
    }
}

/// A storage sink that drops everything (parts without storage work).
pub(crate) struct NoStorage;

impl StorageSink for NoStorage {}
