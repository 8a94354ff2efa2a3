//! A diagnosis run in stages that may each run elsewhere (the Ray driver of
//! `tcpdx.distributed` runs them as tasks), with the single run's result.
//!
//! Stage 1, [`shard`], one per capture file (or [`shard_range`], one per byte range of a
//! large pcap file: its pieces are numbered as the whole file): reads and decodes it, and writes each TCP
//! frame's analysis input (header fields, and the captured payload where a storage parser
//! may read it: what the multi-core driver's reader hands its workers, not whole frames)
//! into one shard per partition, chosen by the direction-free connection hash the
//! multi-core driver uses. Beside them: a timeline (each frame's time, and whether a
//! diagnoser counts it) and a [`ShardMeta`] (frame counts, first and last times).
//!
//! Stage 2 and merge, [`diagnose_shards`]: orders the files by time (consecutive files,
//! a ring buffer, read one after the other; files overlapping in time are refused), gives
//! every frame its global number (the frames of the files before it, as `mergecap -a`
//! numbers them), places the expiry and diagnoser sweeps a single analyzer would make
//! ([`plan`]), and feeds each partition's records to one worker of the multi-core driver
//! ([`feed`]), whose merge numbers streams globally in order of first appearance and ranks
//! the findings: the diagnosis is the one `tcpdx diagnose --threads N` (N partitions) gives
//! on the files concatenated, which is that of one thread unless connections were evicted.
//! Or each partition apart, [`diagnose_partition`] (one task per partition: the same
//! worker, its batches cut at the same global frames as every other partition's), and
//! [`merge_partials`], the multi-core driver's merge over their outputs: the same result.
//!
//! The export, [`export_shards`]: the partitions replayed in frame order into one analyzer
//! (the tables list every segment in capture order): the tables `tcpdx export` writes.

mod codec;
mod export;
mod feed;
mod partial;
mod plan;

use std::collections::HashMap;
use std::fs::{self, File};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use tcpdx_capture::{Frames, RangeReader};
use tcpdx_core::FrameInput;
use tcpdx_detect::Diagnosis;
use tcpdx_storage::findings::StorageEvidence;

use crate::diagnosis::assemble_listed;
use crate::drive::{NoEvents, Reader, Source};
use crate::options::Filtered;
use crate::parallel::{self, Job, part};
use crate::{CaptureWarning, Error, Options, Summary, spill};

pub use export::export_shards;
pub use plan::check_consecutive;

/// Partitions at most (workers of the multi-core driver).
pub const MAX_PARTITIONS: u16 = 255;

/// What stage 1 leaves of one capture file besides its shards.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardMeta {
    /// The capture file.
    pub file: PathBuf,
    /// Its index among the files of the run (names its shard files).
    pub index: u32,
    /// Partitions it was sharded into.
    pub partitions: u16,
    /// Frames read (every frame, TCP or not).
    pub frames: u64,
    /// Time of the first frame (ns since the epoch).
    pub first_ts_ns: Option<i64>,
    /// Latest time of any frame.
    pub last_ts_ns: Option<i64>,
    /// Frames that are not TCP (counted here: no worker sees them).
    pub other_frames: u64,
    /// IP fragments among them.
    pub fragments: u64,
    /// Frames whose decoding stopped before TCP for a reason other than "not IP".
    pub undecodable: u64,
    /// TCP records written to the shards.
    pub records: u64,
    /// Bytes of the shards (what the run moves between its stages).
    pub shard_bytes: u64,
    /// Bytes of the timeline.
    pub timeline_bytes: u64,
    /// What the reader found odd but read past (shown as a single run shows them).
    pub warnings: Vec<CaptureWarning>,
    /// The byte range of the file read, when a piece of it was ([`shard_range`]).
    pub range: Option<Piece>,
}

/// Where the piece of a file that [`shard_range`] read lies in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Piece {
    /// The range asked for: the records that begin in `start..end`.
    pub start: u64,
    /// See `start`.
    pub end: u64,
    /// Offset of the first record read (the boundary found at or after `start`).
    pub began: u64,
    /// Offset of the first record not read (where the next piece must begin), or the
    /// file's length.
    pub stopped: u64,
    /// The file's length.
    pub file_len: u64,
}

const META_MAGIC: &str = "tcpdx-shard 1";

impl ShardMeta {
    /// The meta's text (one `key value` a line).
    pub fn to_text(&self) -> String {
        let opt = |v: Option<i64>| v.map_or_else(|| "-".to_string(), |v| v.to_string());
        let mut warnings = String::new();
        for w in &self.warnings {
            // One line each (a message is one line; a stray newline must not end it).
            let message = w.message.replace('\n', " ");
            warnings.push_str(&format!("warning {} {message}\n", w.offset));
        }
        if let Some(r) = &self.range {
            warnings.push_str(&format!(
                "range {} {} {} {} {}\n",
                r.start, r.end, r.began, r.stopped, r.file_len
            ));
        }
        format!(
            "{META_MAGIC}\nindex {}\npartitions {}\nframes {}\nfirst_ts_ns {}\nlast_ts_ns {}\n\
             other_frames {}\nfragments {}\nundecodable {}\nrecords {}\nshard_bytes {}\n\
             timeline_bytes {}\n{warnings}file {}\n",
            self.index,
            self.partitions,
            self.frames,
            opt(self.first_ts_ns),
            opt(self.last_ts_ns),
            self.other_frames,
            self.fragments,
            self.undecodable,
            self.records,
            self.shard_bytes,
            self.timeline_bytes,
            self.file.display(),
        )
    }

    /// Reads what [`ShardMeta::to_text`] wrote; `name` names it in errors.
    pub fn parse(text: &str, name: &Path) -> Result<ShardMeta, Error> {
        let bad = |what: &str| Error::Shard(format!("{}: {what}", name.display()));
        let mut lines = text.lines();
        if lines.next() != Some(META_MAGIC) {
            return Err(bad("not a tcpdx shard meta (first line)"));
        }
        let mut m = ShardMeta {
            file: PathBuf::new(),
            index: 0,
            partitions: 0,
            frames: 0,
            first_ts_ns: None,
            last_ts_ns: None,
            other_frames: 0,
            fragments: 0,
            undecodable: 0,
            records: 0,
            shard_bytes: 0,
            timeline_bytes: 0,
            warnings: Vec::new(),
            range: None,
        };
        let mut seen = 0u32;
        for line in lines {
            let (k, v) = line
                .split_once(' ')
                .ok_or_else(|| bad(&format!("line {line:?} has no value")))?;
            let num = |v: &str| {
                v.parse::<u64>()
                    .map_err(|_| bad(&format!("{k}: {v:?} is not a count")))
            };
            let ts = |v: &str| {
                if v == "-" {
                    Ok(None)
                } else {
                    v.parse::<i64>()
                        .map(Some)
                        .map_err(|_| bad(&format!("{k}: {v:?} is not a time")))
                }
            };
            match k {
                "index" => {
                    m.index = u32::try_from(num(v)?).map_err(|_| bad("index over 32 bits"))?
                }
                "partitions" => {
                    m.partitions = u16::try_from(num(v)?)
                        .ok()
                        .filter(|p| (1..=MAX_PARTITIONS).contains(p))
                        .ok_or_else(|| bad("partitions not in 1..=255"))?
                }
                "frames" => m.frames = num(v)?,
                "first_ts_ns" => m.first_ts_ns = ts(v)?,
                "last_ts_ns" => m.last_ts_ns = ts(v)?,
                "other_frames" => m.other_frames = num(v)?,
                "fragments" => m.fragments = num(v)?,
                "undecodable" => m.undecodable = num(v)?,
                "records" => m.records = num(v)?,
                "shard_bytes" => m.shard_bytes = num(v)?,
                "timeline_bytes" => m.timeline_bytes = num(v)?,
                "file" => m.file = PathBuf::from(v),
                "range" => {
                    let n: Vec<u64> = v.split(' ').map(num).collect::<Result<_, _>>()?;
                    let [start, end, began, stopped, file_len] = n[..] else {
                        return Err(bad("range: give start, end, began, stopped, length"));
                    };
                    m.range = Some(Piece {
                        start,
                        end,
                        began,
                        stopped,
                        file_len,
                    });
                    continue;
                }
                "warning" => {
                    let (offset, message) = v.split_once(' ').unwrap_or((v, ""));
                    m.warnings.push(CaptureWarning {
                        path: String::new(),
                        offset: num(offset)?,
                        message: message.to_string(),
                    });
                    continue;
                }
                _ => return Err(bad(&format!("unknown key {k:?}"))),
            }
            seen += 1;
        }
        let path = m.file.display().to_string();
        for w in &mut m.warnings {
            w.path.clone_from(&path);
        }
        if seen != 12 {
            return Err(bad(
                "keys missing (written by another version, or cut short)",
            ));
        }
        Ok(m)
    }
}

/// The shard file of partition `p` of file `index` in `dir`.
pub(crate) fn shard_path(dir: &Path, index: u32, p: u16) -> PathBuf {
    dir.join(format!("f{index:05}.p{p:03}.shard"))
}

/// The timeline of file `index` in `dir`.
pub(crate) fn timeline_path(dir: &Path, index: u32) -> PathBuf {
    dir.join(format!("f{index:05}.timeline"))
}

/// The meta of file `index` in `dir` (written last: it marks the file's shards complete).
pub fn meta_path(dir: &Path, index: u32) -> PathBuf {
    dir.join(format!("f{index:05}.meta"))
}

/// Bytes of one timeline entry: the frame's time, and 1 if a diagnoser counts it.
pub(crate) const TIMELINE_ENTRY: usize = 9;

fn io_err(path: &Path, e: std::io::Error) -> Error {
    Error::Shard(format!("{}: {e}", path.display()))
}

/// Stage 1: reads the capture `file` and writes its shards for `partitions` partitions into
/// `dir` (created if missing) as file number `index` of the run. `o` must be the options of
/// stage 2 (its port filter and storage ports decide what is written).
pub fn shard(
    file: &Path,
    dir: &Path,
    index: u32,
    partitions: u16,
    o: &Options,
) -> Result<ShardMeta, Error> {
    check_partitions(partitions)?;
    // A shard is one file: a directory's members are sharded one by one (their order and
    // frame numbers come from the plan).
    let mut reader = match Source::Path(file.to_owned()).open(1)? {
        Reader::One(r) => r,
        Reader::Set(_) => {
            return Err(Error::Shard(format!(
                "{}: a directory: shard its capture files one by one",
                file.display()
            )));
        }
    };
    let m = write_shards(&mut reader, file, dir, index, partitions, o)?;
    write_meta(dir, &m)?;
    Ok(m)
}

/// Stage 1 of the records that begin in the byte range `start..end` of the uncompressed
/// pcap `file` (one task per range of a large file), as [`shard`] with `index` numbering
/// the piece among the run's. The file's pieces, sharded alike, are read by stage 2 as the
/// whole file: they must tile it (the first from 0, each from the end of the one before,
/// the last to the end), and each must begin at the record boundary where the one before
/// stopped (it found that boundary by resync), which stage 2 checks.
pub fn shard_range(
    file: &Path,
    dir: &Path,
    index: u32,
    partitions: u16,
    (start, end): (u64, u64),
    o: &Options,
) -> Result<ShardMeta, Error> {
    check_partitions(partitions)?;
    let mut reader = RangeReader::open(file, start, end)?;
    let mut m = write_shards(&mut reader, file, dir, index, partitions, o)?;
    m.range = Some(Piece {
        start,
        end,
        began: reader.began(),
        stopped: reader.stopped().unwrap_or(reader.began()),
        file_len: reader.input_len().unwrap_or(0),
    });
    write_meta(dir, &m)?;
    Ok(m)
}

fn check_partitions(partitions: u16) -> Result<(), Error> {
    if (1..=MAX_PARTITIONS).contains(&partitions) {
        return Ok(());
    }
    Err(Error::Shard(format!(
        "{partitions} partitions: give 1 to {MAX_PARTITIONS}"
    )))
}

/// Writes the shards and timeline of the frames of `reader` (the capture `file`); returns
/// their meta, for the caller to write once complete.
fn write_shards<R: Frames>(
    reader: &mut R,
    file: &Path,
    dir: &Path,
    index: u32,
    partitions: u16,
    o: &Options,
) -> Result<ShardMeta, Error> {
    fs::create_dir_all(dir).map_err(|error| Error::CreateDir {
        dir: dir.to_owned(),
        error,
    })?;
    let create = |p: &Path| {
        File::create(p)
            .map(|f| BufWriter::with_capacity(1 << 16, f))
            .map_err(|e| io_err(p, e))
    };
    let paths: Vec<PathBuf> = (0..partitions).map(|p| shard_path(dir, index, p)).collect();
    let mut outs = paths
        .iter()
        .map(|p| create(p))
        .collect::<Result<Vec<_>, _>>()?;
    let mut encoders: Vec<codec::Encoder> = (0..partitions).map(|_| Default::default()).collect();
    let tl_path = timeline_path(dir, index);
    let mut timeline = create(&tl_path)?;
    let storage = o.storage_config();
    let mut m = ShardMeta {
        file: file.to_owned(),
        index,
        partitions,
        frames: 0,
        first_ts_ns: None,
        last_ts_ns: None,
        other_frames: 0,
        fragments: 0,
        undecodable: 0,
        records: 0,
        shard_bytes: 0,
        timeline_bytes: 0,
        warnings: Vec::new(),
        range: None,
    };
    let mut input = FrameInput::EMPTY;
    while let Some(frame) = reader.next_frame()? {
        let payload = input.decode_from(&frame);
        let ts = input.ts().0;
        m.frames += 1;
        m.first_ts_ns.get_or_insert(ts);
        m.last_ts_ns = Some(m.last_ts_ns.map_or(ts, |l| l.max(ts)));
        let mut diagnosed = false;
        match parallel::route::worker_of(&input, usize::from(partitions)) {
            Some(p) => {
                let pass = match &input {
                    FrameInput::Segment(s) => {
                        diagnosed = o.filter.port(s.src.port, s.dst.port);
                        !payload.is_empty() && storage.may_parse(s.src.port, s.dst.port)
                    }
                    _ => false,
                };
                let payload = if pass { payload } else { &[] };
                let n = encoders[p]
                    .write(&mut outs[p], &input, payload)
                    .map_err(|e| io_err(&paths[p], e))?;
                m.records += 1;
                m.shard_bytes += n as u64;
            }
            None => {
                if let FrameInput::Other {
                    fragment,
                    undecodable,
                    ..
                } = input
                {
                    m.other_frames += 1;
                    m.fragments += u64::from(fragment);
                    m.undecodable += u64::from(undecodable);
                }
            }
        }
        let mut entry = [0u8; TIMELINE_ENTRY];
        entry[..8].copy_from_slice(&ts.to_le_bytes());
        entry[8] = u8::from(diagnosed);
        timeline
            .write_all(&entry)
            .map_err(|e| io_err(&tl_path, e))?;
        m.timeline_bytes += TIMELINE_ENTRY as u64;
    }
    m.warnings = reader.warnings().to_vec();
    for (out, p) in outs.iter_mut().zip(&paths) {
        out.flush().map_err(|e| io_err(p, e))?;
    }
    timeline.flush().map_err(|e| io_err(&tl_path, e))?;
    Ok(m)
}

/// Writes the meta of `m` (whole under another name, then renamed: a meta present is a
/// stage 1 done).
fn write_meta(dir: &Path, m: &ShardMeta) -> Result<(), Error> {
    let meta = meta_path(dir, m.index);
    let tmp = meta.with_extension("meta.tmp");
    fs::write(&tmp, m.to_text()).map_err(|e| io_err(&tmp, e))?;
    fs::rename(&tmp, &meta).map_err(|e| io_err(&meta, e))
}

/// The metas of every file sharded into `dir`, in index order.
pub fn shard_metas(dir: &Path) -> Result<Vec<ShardMeta>, Error> {
    let entries = fs::read_dir(dir).map_err(|e| io_err(dir, e))?;
    let mut metas = Vec::new();
    for e in entries {
        let path = e.map_err(|e| io_err(dir, e))?.path();
        if path.extension().is_some_and(|x| x == "meta") {
            let text = fs::read_to_string(&path).map_err(|e| io_err(&path, e))?;
            metas.push(ShardMeta::parse(&text, &path)?);
        }
    }
    metas.sort_by_key(|m| m.index);
    if metas.is_empty() {
        return Err(Error::Shard(format!(
            "{}: no shards (no .meta file: stage 1 did not run or did not finish)",
            dir.display()
        )));
    }
    Ok(metas)
}

/// Stage 2 and the merge, on this machine: the diagnosis of every file sharded into `dir`
/// (one worker thread per partition), and the pass's summary (the capture readers'
/// warnings those of stage 1, file after file).
pub fn diagnose_shards(dir: &Path, o: &Options) -> Result<(Diagnosis, Summary), Error> {
    check_no_streams(o)?;
    let metas = shard_metas(dir)?;
    let plan = plan::Plan::new(dir, metas, o.analyzer_config().sweep_every_frames)?;
    let threads = usize::from(plan.partitions);
    let spill_dir = o.spill_dir.as_ref();
    let mut evidence = StorageEvidence::new();
    let mut events = NoEvents;
    let mut filtered = Filtered::new(&mut events, &o.filter);
    let failed = Mutex::new(None);
    let job = Job {
        threads,
        filter: &o.filter,
        storage: o.storage_config(),
        progress: None,
    };
    let par = parallel::run_fed(
        |workers, recycled, stop, _progress, _routing| {
            feed::feed::<tcpdx_capture::CaptureReader>(&plan, dir, workers, recycled, stop, &failed)
        },
        o.analyzer_config(),
        job,
        || part::Diagnose::new(&o.storage_config(), &o.filter, spill_dir, false),
        &mut filtered,
        &mut evidence,
        |_, _| false,
        |_, _, _, _| {},
    )?;
    if let Some(e) = failed.into_inner().unwrap_or_else(|p| p.into_inner()) {
        return Err(e);
    }
    let warnings = filtered.warnings;
    let mut parts = par.parts;
    if let Some(logs) = parts.tcp_logs.take() {
        evidence.add_tcp_logs(logs);
    }
    spill::check(&parts.spills, spill_dir)?;
    let summary = summary_of(&plan, par.stats, warnings);
    Ok((assemble_listed(parts.listing.take(), &evidence), summary))
}

/// Stage 2 of one partition, run apart from the others (one task per partition): its
/// connections analysed and diagnosed by one worker of the multi-core driver, fed as it
/// would be among the others. [`merge_partials`] merges the partitions' results.
/// It travels as bytes ([`Partial::write_to`], [`Partial::read_from`]).
pub struct Partial {
    /// The partition.
    pub partition: u16,
    /// Partitions of the run.
    pub partitions: u16,
    /// The fingerprint of the run's shards (their metas).
    run: u64,
    out: parallel::Alone,
}

/// Stage 2 of partition `p` of the files sharded into `dir` (options `o`, those of the
/// whole run).
pub fn diagnose_partition(dir: &Path, p: u16, o: &Options) -> Result<Partial, Error> {
    check_no_streams(o)?;
    let metas = shard_metas(dir)?;
    let run = partial::fingerprint(&metas);
    let cfg = o.analyzer_config();
    let plan = plan::Plan::new(dir, metas, cfg.sweep_every_frames)?;
    if p >= plan.partitions {
        return Err(Error::Shard(format!(
            "{}: partition {p} of {}: sharded into {} partitions",
            dir.display(),
            plan.partitions,
            plan.partitions
        )));
    }
    let failed = Mutex::new(None);
    let mut events = NoEvents;
    let needs = Filtered::new(&mut events, &o.filter);
    let mut out = parallel::run_alone(
        |worker, recycled| feed::feed_one(&plan, dir, p, worker, recycled, &failed),
        &cfg,
        usize::from(plan.partitions),
        part::Diagnose::new(&o.storage_config(), &o.filter, o.spill_dir.as_ref(), false),
        &needs,
    )?;
    if let Some(e) = failed.into_inner().unwrap_or_else(|p| p.into_inner()) {
        return Err(e);
    }
    // Checked here, where its file is: a partial holds no spilled blob (each connection's
    // are read back when it is diagnosed), so it can go to another machine.
    spill::check(out.take_spill().as_ref(), o.spill_dir.as_ref())?;
    Ok(Partial {
        partition: p,
        partitions: plan.partitions,
        run,
        out,
    })
}

/// The merge of every partition's [`diagnose_partition`] (in any order) of the files
/// sharded into `dir`: the diagnosis and summary [`diagnose_shards`] gives.
pub fn merge_partials(
    dir: &Path,
    mut partials: Vec<Partial>,
    o: &Options,
) -> Result<(Diagnosis, Summary), Error> {
    check_no_streams(o)?;
    let metas = shard_metas(dir)?;
    let run = partial::fingerprint(&metas);
    let plan = plan::Plan::new(dir, metas, o.analyzer_config().sweep_every_frames)?;
    if let Some(p) = partials.iter().find(|p| p.run != run) {
        return Err(Error::Shard(format!(
            "{}: partition {}'s partial was computed from other shards",
            dir.display(),
            p.partition
        )));
    }
    partials.sort_by_key(|p| p.partition);
    let have: Vec<u16> = partials.iter().map(|p| p.partition).collect();
    if have != (0..plan.partitions).collect::<Vec<_>>() {
        return Err(Error::Shard(format!(
            "{}: partitions {have:?} given to merge, the shards have 0 to {}",
            dir.display(),
            plan.partitions - 1
        )));
    }
    let mut evidence = StorageEvidence::new();
    let mut events = NoEvents;
    let mut filtered = Filtered::new(&mut events, &o.filter);
    let (stats, mut parts) = parallel::merge_alone(
        partials.into_iter().map(|p| p.out).collect(),
        plan.other.clone(),
        &o.filter,
        &mut filtered,
        &mut evidence,
    )?;
    let warnings = filtered.warnings;
    if let Some(logs) = parts.tcp_logs.take() {
        evidence.add_tcp_logs(logs);
    }
    spill::check(&parts.spills, o.spill_dir.as_ref())?;
    let summary = summary_of(&plan, stats, warnings);
    Ok((assemble_listed(parts.listing.take(), &evidence), summary))
}

fn check_no_streams(o: &Options) -> Result<(), Error> {
    if o.filter.streams.is_empty() {
        return Ok(());
    }
    Err(Error::Shard(
        "a distributed run does not take a stream filter (--stream): stream numbers are \
         known only at its end"
            .into(),
    ))
}

/// The summary of a run over the files of `plan`: the capture readers' warnings those of
/// stage 1, file after file.
fn summary_of(
    plan: &plan::Plan,
    stats: tcpdx_core::InputStats,
    warnings: Vec<tcpdx_core::Warning>,
) -> Summary {
    Summary {
        set: None,
        first_ts_ns: plan.first_ts.map_or(0, |t| t.0),
        stats,
        capture_warnings: capture_warnings(plan),
        warnings,
    }
}

/// The capture readers' warnings of the files of `plan`, file after file, as a single run
/// shows them: the reader of a piece of a file numbers frames from the piece's first, the
/// single run's from the file's first.
fn capture_warnings(plan: &plan::Plan) -> Vec<CaptureWarning> {
    let mut file_start: HashMap<&Path, u64> = HashMap::new();
    let mut out = Vec::new();
    for (m, offset) in &plan.files {
        // The pieces of a file are in file order: its first is met first.
        let start = *file_start.entry(&m.file).or_insert(*offset);
        for w in &m.warnings {
            let mut w = w.clone();
            if m.range.is_some() {
                w.message = renumbered(&w.message, offset - start);
            }
            out.push(w);
        }
    }
    out
}

/// `message` of the capture reader with the frame number it names ("(frame N)", "(after
/// frame N)") `by` more.
fn renumbered(message: &str, by: u64) -> String {
    for key in ["(frame ", "(after frame "] {
        let Some(i) = message.find(key) else {
            continue;
        };
        let (head, rest) = message.split_at(i + key.len());
        if let Some(j) = rest.find(')')
            && let Ok(n) = rest[..j].parse::<u64>()
        {
            return format!("{head}{}{}", n + by, &rest[j..]);
        }
    }
    message.to_string()
}

/// What `tcpdx diagnose` prints of `d`: its JSON document (`json`), every finding in full
/// (`all`), or the verdict and the findings grouped by pattern.
pub fn render(d: &Diagnosis, json: bool, all: bool) -> Result<String, Error> {
    let mut out = Vec::new();
    let r = if json {
        tcpdx_report::write_diagnosis_json(&mut out, d)
    } else if all {
        tcpdx_report::write_diagnosis_text_all(&mut out, d)
    } else {
        tcpdx_report::write_diagnosis_text(&mut out, d)
    };
    r.map_err(|e| Error::Shard(format!("rendering the diagnosis: {e}")))?;
    String::from_utf8(out).map_err(|e| Error::Shard(format!("rendering the diagnosis: {e}")))
}

/// The whole run on this machine (stage 1 for each file in turn, then
/// [`diagnose_shards`]), shards in `dir`: what the distributed run computes.
pub fn diagnose_files(
    files: &[PathBuf],
    dir: &Path,
    partitions: u16,
    o: &Options,
) -> Result<(Diagnosis, Summary), Error> {
    for (i, f) in files.iter().enumerate() {
        let index = u32::try_from(i).map_err(|_| Error::Shard("over 2^32 files".into()))?;
        shard(f, dir, index, partitions, o)?;
    }
    diagnose_shards(dir, o)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warnings_of_a_piece_name_the_whole_file_frames() {
        let m = "record cut off at byte 9000 (frame 12): analysed up to there";
        assert_eq!(
            renumbered(m, 30),
            "record cut off at byte 9000 (frame 42): analysed up to there"
        );
        let m = "block cut off at byte 9000 (after frame 7): analysed up to there";
        assert_eq!(
            renumbered(m, 3),
            "block cut off at byte 9000 (after frame 10): analysed up to there"
        );
        let m = "no frame here (frame x)";
        assert_eq!(renumbered(m, 3), m);
    }

    #[test]
    fn metas_read_back_as_written() {
        let m = ShardMeta {
            file: PathBuf::from("/data/ring 07.pcap"),
            index: 7,
            partitions: 255,
            frames: 10,
            first_ts_ns: Some(-5),
            last_ts_ns: None,
            other_frames: 1,
            fragments: 2,
            undecodable: 3,
            records: 9,
            shard_bytes: 400,
            timeline_bytes: 90,
            warnings: vec![CaptureWarning {
                path: "/data/ring 07.pcap".into(),
                offset: 4096,
                message: "record longer than the snap length: read".into(),
            }],
            range: None,
        };
        let name = Path::new("f00007.meta");
        assert_eq!(ShardMeta::parse(&m.to_text(), name).unwrap(), m);
        // A piece of a file.
        let piece = ShardMeta {
            range: Some(Piece {
                start: 1 << 20,
                end: 2 << 20,
                began: (1 << 20) + 60,
                stopped: (2 << 20) + 1500,
                file_len: 9 << 20,
            }),
            ..m.clone()
        };
        assert_eq!(ShardMeta::parse(&piece.to_text(), name).unwrap(), piece);
        // Cut short, another magic, a bad count, 0 partitions: errors naming the file.
        let text = m.to_text();
        let cut = &text[..text.find("records").unwrap()];
        for bad in [
            cut.to_string(),
            text.replacen("tcpdx-shard 1", "tcpdx-shard 2", 1),
            text.replacen("frames 10", "frames ten", 1),
            text.replacen("partitions 255", "partitions 0", 1),
            text.replacen("partitions 255", "partitions 256", 1),
            piece.to_text().replacen("range 1048576 ", "range ", 1),
        ] {
            let e = ShardMeta::parse(&bad, name).unwrap_err().to_string();
            assert!(e.starts_with("f00007.meta: "), "{e}");
        }
    }
}
