//! Capture sets: several files read as one capture.
//!
//! A ring buffer (`tcpdump -C/-G`, `dumpcap -b`) writes consecutive files; two interfaces
//! captured apart write files that overlap in time. [`CaptureSet`] hands out the frames of
//! all of them as one stream, numbered as in the file `mergecap` writes of the same files:
//! by default merged by timestamp as `mergecap -w` merges ([`SetOrder::Merge`]: each file is
//! read in its own order, and the frame read next is the earliest of the files' next frames,
//! the file later in the list first on equal times), or one file after the other as
//! `mergecap -a` concatenates ([`SetOrder::Concat`]). Consecutive files merge to their
//! concatenation; files are opened only once the merge reaches their first frame and closed
//! at their end, so memory holds one read buffer per file open at that time (one or two for
//! a ring buffer), whatever the number of files.
//!
//! Each frame's source file and number in that file are told by [`SetMap::locate`] after
//! the pass (the runs of consecutive frames from one file are kept, up to [`MAX_RUNS`];
//! beyond that the set is read again, without analysis, to find them).

use std::cmp::Reverse;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::{Buffer, CaptureError, CaptureErrorKind, CaptureReader, CaptureWarning, FrameAt};
use tcpdx_wire::{Frame, FrameNo, Timestamp};

/// How the files of a set are put together.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SetOrder {
    /// Merged frame by frame by timestamp, as `mergecap -w` does (consecutive files are
    /// then read one after the other).
    #[default]
    Merge,
    /// One file after the other in the order given, as `mergecap -a` does, whatever the
    /// timestamps.
    Concat,
}

/// Most runs of consecutive frames from one file remembered to tell each frame's source;
/// a set merged more finely is read again to tell ([`SetMap::locate`]).
pub const MAX_RUNS: usize = 1 << 16;

/// Opens one member file (the caller chooses how: mapped, read ahead).
pub type OpenMember = dyn Fn(&Path) -> Result<CaptureReader, CaptureError> + Send + Sync;

/// The member files of `paths`: a directory stands for its capture files, in the order of
/// their names (digits compared as numbers, so `trace9` comes before `trace10` as `tcpdump
/// -C` numbers them); hidden files, subdirectories and files that do not start as a capture
/// (pcap, pcapng, gzip or zstd magic) are skipped, each with a warning.
pub fn members(paths: &[PathBuf]) -> Result<(Vec<PathBuf>, Vec<CaptureWarning>), CaptureError> {
    let mut files = Vec::new();
    let mut warnings = Vec::new();
    for p in paths {
        if p.as_os_str() != "-" && p.is_dir() {
            let found = dir_members(p, &mut warnings)?;
            if found.is_empty() {
                return Err(invalid(p, "a directory holding no capture file"));
            }
            files.extend(found);
        } else {
            files.push(p.clone());
        }
    }
    if files.len() > 1 && files.iter().any(|f| f.as_os_str() == "-") {
        return Err(invalid(
            Path::new("-"),
            "standard input cannot be one of several capture files",
        ));
    }
    Ok((files, warnings))
}

/// The capture files of directory `dir`, sorted by name.
fn dir_members(
    dir: &Path,
    warnings: &mut Vec<CaptureWarning>,
) -> Result<Vec<PathBuf>, CaptureError> {
    let open_error = |e: io::Error| CaptureError {
        path: dir.display().to_string(),
        offset: 0,
        kind: CaptureErrorKind::Open(e),
    };
    let mut found = Vec::new();
    for entry in fs::read_dir(dir).map_err(open_error)? {
        let entry = entry.map_err(open_error)?;
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        let skip = if name.starts_with('.') {
            Some("hidden file")
        } else if path.is_dir() {
            Some("a directory (not read recursively)")
        } else if !starts_as_capture(&path) {
            Some("not a capture file (no pcap, pcapng, gzip or zstd magic number)")
        } else {
            None
        };
        match skip {
            Some(why) => warnings.push(CaptureWarning {
                path: path.display().to_string(),
                offset: 0,
                message: format!("skipped: {why}"),
            }),
            None => found.push((name, path)),
        }
    }
    found.sort_by(|a, b| natural_cmp(&a.0, &b.0));
    Ok(found.into_iter().map(|(_, p)| p).collect())
}

/// Whether the file at `path` starts with a capture's or a compressor's magic number.
fn starts_as_capture(path: &Path) -> bool {
    use std::io::Read;
    let mut head = [0u8; crate::sniff::MAGIC_LEN];
    let Ok(mut f) = fs::File::open(path) else {
        // Kept: opening it again names the error.
        return true;
    };
    let n = f.read(&mut head).unwrap_or(0);
    let head = head.get(..n).unwrap_or_default();
    crate::sniff::compression(head) != crate::Compression::None
        || matches!(
            crate::sniff::container(head),
            crate::sniff::Sniffed::Capture(_)
        )
}

/// Orders names with runs of digits compared as numbers (`a9` < `a10`).
fn natural_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    let (mut a, mut b) = (a.as_bytes(), b.as_bytes());
    loop {
        match (a.first(), b.first()) {
            (None, None) => return std::cmp::Ordering::Equal,
            (None, Some(_)) => return std::cmp::Ordering::Less,
            (Some(_), None) => return std::cmp::Ordering::Greater,
            (Some(x), Some(y)) if x.is_ascii_digit() && y.is_ascii_digit() => {
                let da = a.iter().take_while(|c| c.is_ascii_digit()).count();
                let db = b.iter().take_while(|c| c.is_ascii_digit()).count();
                let (na, ra) = a.split_at(da);
                let (nb, rb) = b.split_at(db);
                let trim = |n: &[u8]| -> usize { n.iter().take_while(|&&c| c == b'0').count() };
                let (ta, tb) = (
                    na.get(trim(na)..).unwrap_or_default(),
                    nb.get(trim(nb)..).unwrap_or_default(),
                );
                let ord = ta
                    .len()
                    .cmp(&tb.len())
                    .then(ta.cmp(tb))
                    .then(na.len().cmp(&nb.len()));
                if ord.is_ne() {
                    return ord;
                }
                (a, b) = (ra, rb);
            }
            (Some(x), Some(y)) => {
                if x != y {
                    return x.cmp(y);
                }
                (a, b) = (
                    a.get(1..).unwrap_or_default(),
                    b.get(1..).unwrap_or_default(),
                );
            }
        }
    }
}

/// An error about `path` as a member of a set.
fn invalid(path: &Path, what: &str) -> CaptureError {
    CaptureError {
        path: path.display().to_string(),
        offset: 0,
        kind: CaptureErrorKind::Open(io::Error::new(io::ErrorKind::InvalidInput, what)),
    }
}

/// A member file open in the merge, with its next frame.
struct Open {
    member: usize,
    reader: CaptureReader,
    head: Option<FrameAt>,
}

/// A run of frames from one member: global frame `global` is frame `local` of `member`,
/// and so on for the frames after it up to the next run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Run {
    global: u64,
    member: usize,
    local: u64,
}

/// Several capture files read as one capture (see the module documentation).
pub struct CaptureSet {
    paths: Vec<PathBuf>,
    order: SetOrder,
    open_member: Arc<OpenMember>,
    /// Members not opened yet, next first: in list order (concatenation) or by their first
    /// frame's time, the later file first on equal times (merge).
    waiting: Vec<(usize, Option<Timestamp>)>,
    open: Vec<Open>,
    /// Index in `open` of the member whose frame was handed out last.
    current: Option<usize>,
    /// The last global frame number handed out.
    frames: u64,
    /// Per member: the last local frame number counted.
    counted: Vec<u64>,
    runs: Vec<Run>,
    runs_overflowed: bool,
    warnings: Vec<CaptureWarning>,
    closed_bytes: u64,
    input_len: Option<u64>,
    mapped: bool,
    done: bool,
}

impl std::fmt::Debug for CaptureSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CaptureSet")
            .field("members", &self.paths)
            .field("order", &self.order)
            .field("frames", &self.frames)
            .finish_non_exhaustive()
    }
}

impl CaptureSet {
    /// The files `paths` (each already a file: see [`members`]) as one capture in `order`,
    /// each opened by `open_member`. Each file is opened now to read its first frame's
    /// time, so a file that is no capture is an error before any frame is read.
    pub fn open(
        paths: Vec<PathBuf>,
        order: SetOrder,
        open_member: Arc<OpenMember>,
    ) -> Result<CaptureSet, CaptureError> {
        let mut waiting = Vec::with_capacity(paths.len());
        let mut input_len = Some(0u64);
        for (i, p) in paths.iter().enumerate() {
            let mut r = CaptureReader::open(p)?;
            input_len = input_len.zip(r.input_len()).map(|(a, b)| a + b);
            let first = r.next_frame_at()?.map(|f| f.ts);
            waiting.push((i, first));
        }
        if order == SetOrder::Merge {
            // Files without frames last (they are opened for their warnings only).
            waiting.sort_by_key(|&(i, ts)| (ts.is_none(), ts.map(|t| t.0), Reverse(i)));
        }
        waiting.reverse(); // popped from the end
        Ok(CaptureSet {
            counted: vec![0; paths.len()],
            paths,
            order,
            open_member,
            waiting,
            open: Vec::new(),
            current: None,
            frames: 0,
            runs: Vec::new(),
            runs_overflowed: false,
            warnings: Vec::new(),
            closed_bytes: 0,
            input_len,
            mapped: false,
            done: false,
        })
    }

    /// Next frame of the set, numbered in the set; `Ok(None)` at the end, and after an
    /// error (which names the member file and the byte in it).
    #[inline]
    pub fn next_frame_at(&mut self) -> Result<Option<FrameAt>, CaptureError> {
        if self.done {
            return Ok(None);
        }
        let r = self.advance();
        if !matches!(r, Ok(Some(_))) {
            self.done = true;
            self.close_all();
        }
        r
    }

    #[inline]
    fn advance(&mut self) -> Result<Option<FrameAt>, CaptureError> {
        // The frame handed out last is done with: read its file's next one.
        if let Some(k) = self.current.take()
            && let Some(o) = self.open.get_mut(k)
        {
            o.head = o.reader.next_frame_at()?;
            if o.head.is_none() {
                self.close(k);
            }
        }
        // The common case (a ring buffer): one file open, its next frame before the next
        // file's first.
        if let [o] = self.open.as_slice()
            && let Some(head) = o.head
            && self.before_waiting(head.ts)
        {
            self.current = Some(0);
            return Ok(Some(self.number(o.member, head)));
        }
        loop {
            self.open_waiting()?;
            let best = self
                .open
                .iter()
                .enumerate()
                .filter_map(|(k, o)| o.head.map(|h| (k, key(h.ts, o.member))))
                .min_by_key(|&(_, key)| key);
            let Some((k, _)) = best else {
                if self.waiting.is_empty() {
                    return Ok(None);
                }
                continue;
            };
            let Some(o) = self.open.get(k) else {
                return Ok(None);
            };
            let (member, Some(head)) = (o.member, o.head) else {
                return Ok(None);
            };
            self.current = Some(k);
            return Ok(Some(self.number(member, head)));
        }
    }

    /// Whether a frame at `ts` comes before the first frame of every waiting member
    /// (merge), or there is no need to look (concatenation: one file at a time).
    #[inline]
    fn before_waiting(&self, ts: Timestamp) -> bool {
        match (self.order, self.waiting.last()) {
            (SetOrder::Concat, _) | (_, None | Some((_, None))) => true,
            // A member not yet started loses a tie (see `open_waiting`).
            (SetOrder::Merge, Some(&(_, Some(first)))) => ts.0 <= first.0,
        }
    }

    /// Opens the waiting members whose first frame comes before every open one's next
    /// frame (merge), or the next member once none is open (concatenation).
    #[cold]
    fn open_waiting(&mut self) -> Result<(), CaptureError> {
        loop {
            let Some(&(member, first)) = self.waiting.last() else {
                return Ok(());
            };
            let needed = match self.order {
                SetOrder::Concat => self.open.is_empty(),
                SetOrder::Merge => {
                    let best = self
                        .open
                        .iter()
                        .filter_map(|o| o.head.map(|h| key(h.ts, o.member)))
                        .min();
                    match (first, best) {
                        (_, None) => true,
                        (None, Some(_)) => false,
                        // Strictly earlier: a file that starts at the time another
                        // ends continues it (a ring buffer is read in order, as the one
                        // file it was cut from), where mergecap would put it first.
                        (Some(ts), Some(best)) => ts.0 < best.0,
                    }
                }
            };
            if !needed {
                return Ok(());
            }
            self.waiting.pop();
            let path = self.paths.get(member).cloned().unwrap_or_default();
            let mut reader = (self.open_member)(&path)?;
            self.mapped |= reader.is_mapped();
            let head = reader.next_frame_at()?;
            self.open.push(Open {
                member,
                reader,
                head,
            });
            if head.is_none() {
                self.close(self.open.len() - 1);
            }
        }
    }

    /// Numbers `head`, the next frame of `member`: the set's records before it are every
    /// record of the files read so far, in the order read.
    #[inline]
    fn number(&mut self, member: usize, head: FrameAt) -> FrameAt {
        let counted = self.counted.get_mut(member);
        let before = counted.as_deref().copied().unwrap_or(0);
        if let Some(c) = counted {
            *c = head.no.0;
        }
        let first = self.frames + 1;
        // Records that are not packets (counted by the reader) come before the packet.
        self.frames += head.no.0.saturating_sub(before);
        self.note_run(first, member, before + 1);
        let n = self.paths.len().max(1) as u64;
        FrameAt {
            no: FrameNo(self.frames),
            // Distinct per member: a caller shares the buffer again when it changes.
            buffer: head.buffer.wrapping_mul(n).wrapping_add(member as u64),
            ..head
        }
    }

    #[inline]
    fn note_run(&mut self, global: u64, member: usize, local: u64) {
        if self.runs.last().is_some_and(|r| r.member == member) || self.runs_overflowed {
            return;
        }
        if self.runs.len() >= MAX_RUNS {
            self.runs_overflowed = true;
            self.runs = Vec::new();
            return;
        }
        self.runs.push(Run {
            global,
            member,
            local,
        });
    }

    /// Closes the open member at `k` (at its end): its warnings and trailing records kept.
    #[cold]
    fn close(&mut self, k: usize) {
        if k >= self.open.len() {
            return;
        }
        let o = self.open.swap_remove(k);
        let before = self.counted.get(o.member).copied().unwrap_or(0);
        let records = o.reader.records();
        if records > before {
            // Records after the last packet (pcapng blocks Wireshark numbers).
            let first = self.frames + 1;
            self.frames += records - before;
            self.note_run(first, o.member, before + 1);
            if let Some(c) = self.counted.get_mut(o.member) {
                *c = records;
            }
        }
        self.warnings.extend_from_slice(o.reader.warnings());
        self.closed_bytes += o.reader.input_bytes_read();
        if self.current == Some(self.open.len()) {
            self.current = Some(k);
        }
    }

    fn close_all(&mut self) {
        while !self.open.is_empty() {
            self.close(self.open.len() - 1);
        }
    }

    /// The frame last handed out, with its bytes.
    #[inline]
    pub fn frame_of(&self, f: &FrameAt) -> Frame<'_> {
        match self.current.and_then(|k| self.open.get(k)) {
            Some(o) => o.reader.frame_of(f),
            None => Frame {
                no: f.no,
                ts: f.ts,
                link: f.link,
                orig_len: f.orig_len,
                interface: f.interface,
                data: &[],
            },
        }
    }

    /// The buffer of the frame last handed out (see [`CaptureReader::share_buffer`]).
    pub fn share_buffer(&mut self) -> Arc<Buffer> {
        match self.current.and_then(|k| self.open.get_mut(k)) {
            Some(o) => o.reader.share_buffer(),
            None => Arc::new(Buffer::Filled(Vec::new())),
        }
    }

    /// Warnings of the files read to their end so far (and of the directory listing, if
    /// added with [`Self::add_warnings`]).
    pub fn warnings(&self) -> &[CaptureWarning] {
        &self.warnings
    }

    /// Adds warnings to report with the set's (e.g. the files skipped in a directory).
    pub fn add_warnings(&mut self, w: impl IntoIterator<Item = CaptureWarning>) {
        self.warnings.extend(w);
    }

    /// Bytes read from the files so far (compressed bytes of compressed files).
    pub fn input_bytes_read(&self) -> u64 {
        self.closed_bytes
            + self
                .open
                .iter()
                .map(|o| o.reader.input_bytes_read())
                .sum::<u64>()
    }

    /// The files' total size, if known for each.
    pub fn input_len(&self) -> Option<u64> {
        self.input_len
    }

    /// Whether the files are read mapped into memory.
    pub fn is_mapped(&self) -> bool {
        self.mapped
    }

    /// The member files, in the order given.
    pub fn paths(&self) -> &[PathBuf] {
        &self.paths
    }

    /// What tells each frame's source file, once the pass is over.
    pub fn map(&self) -> SetMap {
        SetMap {
            paths: self.paths.clone(),
            order: self.order,
            runs: (!self.runs_overflowed).then(|| self.runs.clone()),
        }
    }
}

/// The merge order's key of a frame at `ts` of member `member`: earlier first, the later
/// member first on equal times (`mergecap` 4.0 takes the last file's frame on a tie).
fn key(ts: Timestamp, member: usize) -> (i64, Reverse<usize>) {
    (ts.0, Reverse(member))
}

/// Which file each frame of a set came from (see [`CaptureSet::map`]).
#[derive(Clone, Debug)]
pub struct SetMap {
    paths: Vec<PathBuf>,
    order: SetOrder,
    /// `None` once there were more than [`MAX_RUNS`].
    runs: Option<Vec<Run>>,
}

impl SetMap {
    /// The member files, in the order given.
    pub fn paths(&self) -> &[PathBuf] {
        &self.paths
    }

    /// For each of `frames` (set frame numbers): the index of its file in [`Self::paths`]
    /// and its number in that file; `None` past the end. Reads the set again (without
    /// analysis) if it was merged too finely to remember.
    pub fn locate(&self, frames: &[u64]) -> Result<Vec<Option<(usize, u64)>>, CaptureError> {
        if let Some(runs) = &self.runs {
            return Ok(frames.iter().map(|&g| locate_in(runs, g)).collect());
        }
        let mut wanted: Vec<u64> = frames.to_vec();
        wanted.sort_unstable();
        wanted.dedup();
        let mut found = vec![None; wanted.len()];
        let open: Arc<OpenMember> = Arc::new(|p: &Path| CaptureReader::open(p));
        let mut set = CaptureSet::open(self.paths.clone(), self.order, open)?;
        let last = wanted.last().copied().unwrap_or(0);
        while let Some(f) = set.next_frame_at()? {
            if let Ok(i) = wanted.binary_search(&f.no.0)
                && let Some((k, slot)) = set.current.zip(found.get_mut(i))
                && let Some(o) = set.open.get(k)
            {
                *slot = set.counted.get(o.member).map(|&local| (o.member, local));
            }
            if f.no.0 >= last {
                break;
            }
        }
        Ok(frames
            .iter()
            .map(|g| {
                wanted
                    .binary_search(g)
                    .ok()
                    .and_then(|i| found.get(i).copied().flatten())
            })
            .collect())
    }
}

/// Frame `global`'s file and number in it, from the runs.
fn locate_in(runs: &[Run], global: u64) -> Option<(usize, u64)> {
    let i = runs
        .partition_point(|r| r.global <= global)
        .checked_sub(1)?;
    let r = runs.get(i)?;
    Some((r.member, r.local + (global - r.global)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// A pcap (microseconds, Ethernet) of frames `(seconds, tag)`: the tag is the payload.
    fn pcap(frames: &[(u32, &str)]) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend(0xa1b2_c3d4u32.to_le_bytes());
        b.extend(2u16.to_le_bytes());
        b.extend(4u16.to_le_bytes());
        b.extend([0u8; 8]);
        b.extend(65535u32.to_le_bytes());
        b.extend(1u32.to_le_bytes());
        for (ts, tag) in frames {
            let mut d = vec![0xff; 12];
            d.extend([0x08, 0x00]);
            d.extend(tag.as_bytes());
            for v in [*ts, 0, d.len() as u32, d.len() as u32] {
                b.extend(v.to_le_bytes());
            }
            b.extend(d);
        }
        b
    }

    /// A fresh directory for one test.
    fn dir(test: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("tcpdx-set-{}-{test}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        d
    }

    fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
        let p = dir.join(name);
        fs::write(&p, bytes).unwrap();
        p
    }

    fn plain() -> Arc<OpenMember> {
        Arc::new(|p: &Path| CaptureReader::open(p))
    }

    /// Every frame of the set: (set number, tag, source file index, number there), and the
    /// most files open at once.
    fn read_all(set: &mut CaptureSet) -> (Vec<(u64, String, usize, u64)>, usize) {
        let mut out = Vec::new();
        let mut most_open = 0;
        while let Some(f) = set.next_frame_at().unwrap() {
            most_open = most_open.max(set.open.len());
            let tag = String::from_utf8(set.frame_of(&f).data[14..].to_vec()).unwrap();
            let o = &set.open[set.current.unwrap()];
            out.push((f.no.0, tag, o.member, set.counted[o.member]));
        }
        (out, most_open)
    }

    #[test]
    fn overlapping_files_merge_as_mergecap_does() {
        let d = dir("merge");
        let a = write(
            &d,
            "a.pcap",
            &pcap(&[(10, "a1"), (20, "a2"), (20, "a3"), (30, "a4")]),
        );
        let b = pcap(&[(5, "b1"), (20, "b2"), (25, "b3"), (15, "b4"), (40, "b5")]);
        let b = write(&d, "b.pcap", &b);
        // `mergecap -w ab a.pcap b.pcap` (4.0.17): on equal times the later file's frame
        // first; each file's frames in their own order, even when its time goes back.
        let mut set =
            CaptureSet::open(vec![a.clone(), b.clone()], SetOrder::Merge, plain()).unwrap();
        let (got, _) = read_all(&mut set);
        let tags: Vec<&str> = got.iter().map(|g| g.1.as_str()).collect();
        assert_eq!(tags, ["b1", "a1", "b2", "a2", "a3", "b3", "b4", "a4", "b5"]);
        assert_eq!(
            got.iter().map(|g| g.0).collect::<Vec<_>>(),
            (1..=9).collect::<Vec<_>>()
        );
        // Files swapped: `mergecap -w ba b.pcap a.pcap`.
        let mut set = CaptureSet::open(vec![b, a], SetOrder::Merge, plain()).unwrap();
        let tags: Vec<String> = read_all(&mut set).0.into_iter().map(|g| g.1).collect();
        assert_eq!(tags, ["b1", "a1", "a2", "a3", "b2", "b3", "b4", "a4", "b5"]);
        // Each frame's source, from the runs and by reading again.
        let map = set.map();
        let frames: Vec<u64> = (1..=9).collect();
        let want: Vec<Option<(usize, u64)>> = [
            (0, 1),
            (1, 1),
            (1, 2),
            (1, 3),
            (0, 2),
            (0, 3),
            (0, 4),
            (1, 4),
            (0, 5),
        ]
        .into_iter()
        .map(Some)
        .collect();
        assert_eq!(map.locate(&frames).unwrap(), want);
        let reread = SetMap { runs: None, ..map };
        assert_eq!(reread.locate(&frames).unwrap(), want);
        assert_eq!(reread.locate(&[7, 2]).unwrap(), [want[6], want[1]]);
    }

    #[test]
    fn a_file_starting_at_the_time_another_ends_continues_it() {
        // A ring buffer cut between two frames of the same microsecond: read in order, as
        // the one file (mergecap -w would put b1 first); a started file still wins a tie.
        let d = dir("tie");
        let a = write(&d, "a.pcap", &pcap(&[(10, "a1"), (20, "a2"), (20, "a3")]));
        let b = write(&d, "b.pcap", &pcap(&[(20, "b1"), (30, "b2"), (30, "b3")]));
        let c = write(&d, "c.pcap", &pcap(&[(19, "c1"), (30, "c2")]));
        let mut set =
            CaptureSet::open(vec![a.clone(), b.clone()], SetOrder::Merge, plain()).unwrap();
        let tags: Vec<String> = read_all(&mut set).0.into_iter().map(|g| g.1).collect();
        assert_eq!(tags, ["a1", "a2", "a3", "b1", "b2", "b3"]);
        // One frame earlier (19 < 20) and c starts first; then on 30 the later file first.
        let mut set = CaptureSet::open(vec![b, c], SetOrder::Merge, plain()).unwrap();
        let tags: Vec<String> = read_all(&mut set).0.into_iter().map(|g| g.1).collect();
        assert_eq!(tags, ["c1", "b1", "c2", "b2", "b3"]);
    }

    #[test]
    fn concatenation_keeps_the_order_given() {
        let d = dir("concat");
        let a = write(&d, "a.pcap", &pcap(&[(10, "a1"), (30, "a2")]));
        let b = write(&d, "b.pcap", &pcap(&[(5, "b1"), (20, "b2")]));
        let mut set = CaptureSet::open(vec![a, b], SetOrder::Concat, plain()).unwrap();
        let (got, most_open) = read_all(&mut set);
        let tags: Vec<&str> = got.iter().map(|g| g.1.as_str()).collect();
        assert_eq!(tags, ["a1", "a2", "b1", "b2"]);
        assert_eq!((got[2].2, got[2].3), (1, 1));
        assert_eq!(most_open, 1);
        assert_eq!(
            set.map().locate(&[3, 4]).unwrap(),
            [Some((1, 1)), Some((1, 2))]
        );
    }

    #[test]
    fn consecutive_files_are_read_one_at_a_time_in_time_order() {
        let d = dir("ring");
        // Given out of order: the merge opens them by their first frame's time.
        let mut paths = Vec::new();
        for i in (0..6u32).rev() {
            let frames = [(i * 10, "x"), (i * 10 + 5, "y"), (i * 10 + 9, "z")];
            paths.push(write(&d, &format!("r{i}.pcap"), &pcap(&frames)));
        }
        let mut set = CaptureSet::open(paths, SetOrder::Merge, plain()).unwrap();
        let (got, most_open) = read_all(&mut set);
        assert_eq!(got.len(), 18);
        assert_eq!(most_open, 1, "a ring buffer needs one file open at a time");
        // r0 is the last path given.
        assert_eq!((got[0].2, got[0].3, got[17].2, got[17].3), (5, 1, 0, 3));
        assert_eq!(set.map().runs.as_ref().map(Vec::len), Some(6));
    }

    #[test]
    fn members_compressed_truncated_and_bad() {
        let d = dir("members");
        let a = write(&d, "a.pcap", &pcap(&[(1, "a1"), (3, "a2")]));
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(&pcap(&[(2, "g1"), (4, "g2")])).unwrap();
        let g = write(&d, "g.pcap.gz", &gz.finish().unwrap());
        let mut cut = pcap(&[(5, "c1"), (6, "c2")]);
        cut.truncate(cut.len() - 3);
        let c = write(&d, "c.pcap", &cut);
        let mut set =
            CaptureSet::open(vec![a.clone(), g, c.clone()], SetOrder::Merge, plain()).unwrap();
        let tags: Vec<String> = read_all(&mut set).0.into_iter().map(|g| g.1).collect();
        assert_eq!(tags, ["a1", "g1", "a2", "g2", "c1"]);
        let w = set.warnings();
        assert_eq!(w.len(), 1, "{w:?}");
        assert_eq!(w[0].path, c.display().to_string());
        assert!(w[0].message.contains("cut off"), "{}", w[0].message);

        // Not a capture: the error names the member, before any frame.
        let bad = write(&d, "bad.pcap", b"hello world, no capture");
        let e =
            CaptureSet::open(vec![a.clone(), bad.clone()], SetOrder::Merge, plain()).unwrap_err();
        assert_eq!(e.path, bad.display().to_string());
        assert!(
            e.to_string().contains("not a pcap or pcapng capture"),
            "{e}"
        );
        // A bad record further in: the error names the member and the byte.
        let mut absurd = pcap(&[(2, "b1"), (7, "b2")]);
        let second = 24 + 16 + 16;
        absurd[second + 8..second + 12].copy_from_slice(&u32::MAX.to_le_bytes());
        let bad = write(&d, "absurd.pcap", &absurd);
        let mut set = CaptureSet::open(vec![a, bad.clone()], SetOrder::Merge, plain()).unwrap();
        let mut n = 0;
        let e = loop {
            match set.next_frame_at() {
                Ok(Some(_)) => n += 1,
                Ok(None) => panic!("no error"),
                Err(e) => break e,
            }
        };
        assert_eq!(n, 2, "a1 and b1 read before the bad record");
        assert_eq!(
            (e.path.as_str(), e.offset),
            (bad.display().to_string().as_str(), second as u64)
        );
        assert!(matches!(set.next_frame_at(), Ok(None)));
    }

    #[test]
    fn a_directory_is_its_capture_files_by_name() {
        let d = dir("listing");
        for name in ["t10", "t9", "t1"] {
            write(&d, name, &pcap(&[(1, name)]));
        }
        write(&d, ".hidden", &pcap(&[(1, "h")]));
        write(&d, "notes.txt", b"not a capture");
        fs::create_dir_all(d.join("sub")).unwrap();
        let (files, skipped) = members(std::slice::from_ref(&d)).unwrap();
        let names: Vec<_> = files
            .iter()
            .map(|f| f.file_name().unwrap().to_owned())
            .collect();
        assert_eq!(names, ["t1", "t9", "t10"]);
        let mut why: Vec<&str> = skipped.iter().map(|w| w.message.as_str()).collect();
        why.sort_unstable();
        assert_eq!(why.len(), 3);
        assert!(
            why[0].contains("a directory")
                && why[1].contains("hidden")
                && why[2].contains("not a capture"),
            "{why:?}"
        );

        let empty = dir("empty");
        let e = members(std::slice::from_ref(&empty)).unwrap_err();
        assert!(e.to_string().contains("no capture file"), "{e}");
        let e = members(&[d.join("t1"), PathBuf::from("-")]).unwrap_err();
        assert!(e.to_string().contains("standard input"), "{e}");
    }

    #[test]
    fn names_sort_with_their_numbers() {
        let mut v = ["f10", "f9", "f", "f01", "f1", "g", "f2_b", "f2_a"];
        v.sort_by(|a, b| natural_cmp(a, b));
        assert_eq!(v, ["f", "f1", "f01", "f2_a", "f2_b", "f9", "f10", "g"]);
    }
}
