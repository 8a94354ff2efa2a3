//! One byte range of a capture file read on its own (one task of a distributed run per
//! range of a large file).
//!
//! A range `[start, end)` holds the records that BEGIN in it. Its reader reads the file
//! header itself (link type, time resolution), finds the first record boundary at or after
//! `start` by resynchronising ([`find_boundary`]: a plausible record header whose record fits
//! in the file and is followed by more plausible records), and reads every record that
//! begins before `end`, the last one past `end` if it straddles the cut. The boundary where
//! a reader stopped ([`RangeReader::stopped`]) is the one the next range's reader must
//! begin at ([`RangeReader::began`]): a caller compares them, so that a boundary found
//! wrongly is an error, never a record read twice or lost.
//!
//! Only uncompressed pcap files: a compressed stream cannot be entered in the middle, and a
//! pcapng file's interfaces may be described anywhere in it.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;
use std::sync::Arc;

use crate::error::{Bad, CaptureErrorKind};
use crate::input::Source;
use crate::pcap::{FILE_HEADER_LEN, PcapFile, PcapVariant};
use crate::sniff::{self, Compression, Container, Sniffed};
use crate::window::{self, Window};
use crate::{
    Buffer, CaptureError, CaptureFormat, CaptureReader, CaptureWarning, Frame, FrameAt, Frames,
    Parser, open_file,
};

/// Records after a candidate boundary that must parse too (fewer where the file ends).
const CHAIN: usize = 4;
/// A record's time within this before the file's first record's, or [`LATER`] after it (in
/// seconds): bytes one off a record header read as a time thousands of years away.
const EARLIER: u32 = 86_400;
/// See [`EARLIER`].
const LATER: u32 = 366 * 86_400;

/// A reader of the records that begin in one byte range of a pcap file.
pub struct RangeReader {
    inner: CaptureReader,
    end: u64,
    began: u64,
    /// Length of a record header.
    header_len: u64,
    stopped: Option<u64>,
}

impl RangeReader {
    /// Opens the byte range `[start, end)` of the uncompressed pcap file at `path`.
    pub fn open(path: &Path, start: u64, end: u64) -> Result<RangeReader, CaptureError> {
        let (name, mut file, len) = open_file(path)?;
        let fail = |offset, why: String| {
            Err(Bad::at(offset, CaptureErrorKind::Range { why }).with_path(&name))
        };
        let Some(len) = len else {
            return fail(0, "not a regular file: byte ranges need one".into());
        };
        if start >= end {
            return fail(start, format!("empty byte range {start}:{end}"));
        }
        let mut head = [0u8; FILE_HEADER_LEN];
        let got = read_at(&mut file, 0, &mut head).map_err(|e| io_error(&name, 0, e))?;
        let head = head.get(..got).unwrap_or_default();
        if sniff::compression(head) != Compression::None {
            return fail(
                0,
                "a compressed file is read whole (no byte ranges): shard it whole, or \
                 decompress it first"
                    .into(),
            );
        }
        let variant = match sniff::container(head) {
            Sniffed::Capture(Container::PcapNg) => {
                return fail(
                    0,
                    "a pcapng file is read whole (byte ranges are for pcap files: its \
                     interfaces may be described anywhere in it)"
                        .into(),
                );
            }
            Sniffed::Capture(c) => PcapVariant::of(c).map(|v| (c, v)),
            _ => None,
        };
        let (Some((container, variant)), true) = (variant, got == FILE_HEADER_LEN) else {
            // Not a pcap file, or cut inside its header: the whole-file reader says which.
            return CaptureReader::open(path)
                .and_then(|_| fail(0, "not a pcap file: byte ranges are for pcap files".into()));
        };
        let pcap = PcapFile::parse_header(head, variant).map_err(|b| b.with_path(&name))?;
        let header_len = pcap.record_header_len() as u64;
        let from = start.max(FILE_HEADER_LEN as u64);
        let mut first = vec![0u8; header_len as usize];
        let got = read_at(&mut file, FILE_HEADER_LEN as u64, &mut first)
            .map_err(|e| io_error(&name, FILE_HEADER_LEN as u64, e))?;
        let first_sec = (got == first.len()).then(|| pcap.ts_sec(&first));
        let began = find_boundary(&mut file, len, from, &pcap, first_sec)
            .map_err(|e| io_error(&name, from, e))?;
        file.seek(SeekFrom::Start(began))
            .map_err(|e| io_error(&name, began, e))?;
        let window = Window::over(Source::Plain(Box::new(file)), window::DEFAULT_CAPACITY, &[])
            .starting_at(began);
        let inner = CaptureReader {
            name: name.clone(),
            window,
            parser: Parser::Pcap(pcap),
            format: CaptureFormat {
                container,
                compression: Compression::None,
            },
            raw_bytes: Arc::default(),
            input_len: Some(len),
            warnings: Vec::new(),
            frames: 0,
            pending: 0,
            done: false,
        };
        Ok(RangeReader {
            inner,
            end,
            began,
            header_len,
            stopped: None,
        })
    }

    /// Offset of the first record read: the first boundary at or after the range's start
    /// (or the file's length if none is).
    pub fn began(&self) -> u64 {
        self.began
    }

    /// Once the reader returned its last frame: the offset of the first record it did not
    /// read (the first to begin at or after the range's end), or the file's length.
    pub fn stopped(&self) -> Option<u64> {
        self.stopped
    }
}

impl Frames for RangeReader {
    fn next_frame_at(&mut self) -> Result<Option<FrameAt>, CaptureError> {
        if self.stopped.is_some() {
            return Ok(None);
        }
        match self.inner.next_frame_at()? {
            Some(f) => {
                // The record is still in the window: its start is the window's offset.
                let at = self.inner.window.offset();
                if at >= self.end {
                    self.stopped = Some(at);
                    return Ok(None);
                }
                Ok(Some(f))
            }
            None => {
                // At the end of the file, or at a record cut off by it. One that begins at
                // or after the range's end, its header whole, is the next range's (its
                // resync finds it): so is its warning.
                let at = self.inner.window.offset();
                let len = self.inner.input_len.unwrap_or(at);
                if at >= self.end && len.saturating_sub(at) >= self.header_len {
                    self.stopped = Some(at);
                    self.inner.warnings.retain(|w| w.offset < self.end);
                } else {
                    self.stopped = Some(len);
                }
                Ok(None)
            }
        }
    }
    fn frame_of(&self, f: &FrameAt) -> Frame<'_> {
        self.inner.frame_of(f)
    }
    fn share_buffer(&mut self) -> Arc<Buffer> {
        self.inner.share_buffer()
    }
    fn warnings(&self) -> &[CaptureWarning] {
        self.inner.warnings()
    }
    fn input_bytes_read(&self) -> u64 {
        self.inner.window.offset()
    }
    fn input_len(&self) -> Option<u64> {
        self.inner.input_len
    }
    fn is_mapped(&self) -> bool {
        false
    }
}

fn io_error(name: &str, offset: u64, e: std::io::Error) -> CaptureError {
    Bad::at(offset, CaptureErrorKind::Io(e)).with_path(name)
}

/// Reads up to `buf.len()` bytes at `offset`; fewer only at the end of the file.
fn read_at(file: &mut File, offset: u64, buf: &mut [u8]) -> std::io::Result<usize> {
    file.seek(SeekFrom::Start(offset))?;
    let mut got = 0;
    while got < buf.len() {
        match file.read(buf.get_mut(got..).unwrap_or_default()) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

/// The file's bytes from some offset on, read in blocks as a scan asks for them.
struct Ahead<'a> {
    file: &'a mut File,
    len: u64,
    at: u64,
    buf: Vec<u8>,
}

impl Ahead<'_> {
    /// The `n` bytes at `offset` (`None` past the end of the file).
    fn get(&mut self, offset: u64, n: usize) -> std::io::Result<Option<&[u8]>> {
        let want_end = offset.saturating_add(n as u64);
        if want_end > self.len {
            return Ok(None);
        }
        let have_end = self.at + self.buf.len() as u64;
        if offset < self.at || want_end > have_end {
            // Reload from `offset`, a block at least.
            let size = (n.max(1 << 20) as u64).min(self.len - offset) as usize;
            self.buf.resize(size, 0);
            let got = read_at(self.file, offset, &mut self.buf)?;
            self.buf.truncate(got);
            self.at = offset;
            if got < n {
                return Ok(None);
            }
        }
        let from = (offset - self.at) as usize;
        Ok(self.buf.get(from..from + n))
    }
}

/// The first record boundary at or after `from` in a pcap file of `len` bytes: the first
/// offset holding a plausible record header ([`PcapFile::plausible`]) whose record fits in
/// the file, whose time is near the first record's (`first_sec`, see [`EARLIER`]), and is
/// followed by [`CHAIN`] more such records (or by the end of the file, or
/// a last record cut off by it, as the reader reads one), or a plausible header of a last
/// record cut off by the end of the file. `len` if there is none.
pub(crate) fn find_boundary(
    file: &mut File,
    len: u64,
    from: u64,
    pcap: &PcapFile,
    first_sec: Option<u32>,
) -> std::io::Result<u64> {
    let mut ahead = Ahead {
        file,
        len,
        at: 0,
        buf: Vec::new(),
    };
    let hlen = pcap.record_header_len();
    let mut candidate = from;
    while candidate < len {
        if chain_holds(&mut ahead, candidate, hlen, pcap, first_sec)? {
            return Ok(candidate);
        }
        candidate += 1;
    }
    Ok(len)
}

/// Whether records follow one another from `at` as [`find_boundary`] asks.
fn chain_holds(
    ahead: &mut Ahead<'_>,
    mut at: u64,
    hlen: usize,
    pcap: &PcapFile,
    first_sec: Option<u32>,
) -> std::io::Result<bool> {
    for i in 0..=CHAIN {
        if at == ahead.len {
            return Ok(i > 0);
        }
        let Some(h) = ahead.get(at, hlen)? else {
            // Fewer bytes than a header left: the reader would warn of a cut record.
            return Ok(i > 0);
        };
        let near = |sec: u32| {
            first_sec
                .is_none_or(|f| sec >= f.saturating_sub(EARLIER) && sec <= f.saturating_add(LATER))
        };
        let Some(total) = pcap.plausible(h).filter(|_| near(pcap.ts_sec(h))) else {
            return Ok(false);
        };
        let next = at + total as u64;
        if next > ahead.len {
            // A last record cut off by the end of the file (the reader warns of it).
            return Ok(true);
        }
        at = next;
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// A little-endian microsecond pcap file of records of the given captured lengths,
    /// each record's bytes `0xee` (or what `fill` makes of its index).
    fn pcap(caplens: &[u32], fill: impl Fn(usize) -> u8) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes());
        b.extend_from_slice(&2u16.to_le_bytes());
        b.extend_from_slice(&4u16.to_le_bytes());
        b.extend_from_slice(&[0; 8]);
        b.extend_from_slice(&65535u32.to_le_bytes());
        b.extend_from_slice(&1u32.to_le_bytes());
        for (i, &c) in caplens.iter().enumerate() {
            b.extend_from_slice(&(1_700_000_000u32 + i as u32).to_le_bytes());
            b.extend_from_slice(&(i as u32 * 10).to_le_bytes());
            b.extend_from_slice(&c.to_le_bytes());
            b.extend_from_slice(&c.to_le_bytes());
            b.extend(std::iter::repeat_n(fill(i), c as usize));
        }
        b
    }

    fn write(dir: &Path, name: &str, bytes: &[u8]) -> std::path::PathBuf {
        let p = dir.join(name);
        File::create(&p).unwrap().write_all(bytes).unwrap();
        p
    }

    /// Record start offsets of a file made by `pcap`.
    fn starts(caplens: &[u32]) -> Vec<u64> {
        let mut at = FILE_HEADER_LEN as u64;
        caplens
            .iter()
            .map(|c| {
                let s = at;
                at += 16 + u64::from(*c);
                s
            })
            .collect()
    }

    /// Frames (their timestamps) read by ranges cut at `cuts`, and each range's
    /// (began, stopped).
    fn read_cut(path: &Path, len: u64, cuts: &[u64]) -> (Vec<i64>, Vec<(u64, u64)>) {
        let mut bounds = vec![0];
        bounds.extend_from_slice(cuts);
        bounds.push(len);
        let mut ts = Vec::new();
        let mut ends = Vec::new();
        for w in bounds.windows(2) {
            let mut r = RangeReader::open(path, w[0], w[1]).unwrap();
            while let Some(f) = r.next_frame().unwrap() {
                ts.push(f.ts.0);
            }
            ends.push((r.began(), r.stopped().unwrap()));
        }
        (ts, ends)
    }

    fn whole(path: &Path) -> Vec<i64> {
        let mut r = CaptureReader::open(path).unwrap();
        let mut ts = Vec::new();
        while let Some(f) = r.next_frame().unwrap() {
            ts.push(f.ts.0);
        }
        ts
    }

    #[test]
    fn every_record_is_read_once_whatever_the_cuts() {
        let dir = tempfile::tempdir().unwrap();
        let caplens: Vec<u32> = (0..40).map(|i| 40 + (i * 37) % 300).collect();
        let bytes = pcap(&caplens, |_| 0xee);
        let path = write(dir.path(), "a.pcap", &bytes);
        let len = bytes.len() as u64;
        let want = whole(&path);
        let s = starts(&caplens);
        // Inside the header, exactly at a boundary, one byte before and after one, in the
        // middle of a record (a record straddling the cut), and every offset of one record.
        let mut cuts: Vec<Vec<u64>> = vec![
            vec![10],
            vec![s[5]],
            vec![s[5] - 1, s[20] + 1],
            vec![s[7] + 30, s[8], s[30] + 3],
            vec![len - 1],
        ];
        cuts.extend((s[12]..s[13] + 1).map(|c| vec![c]));
        for cut in cuts {
            let (got, ends) = read_cut(&path, len, &cut);
            assert_eq!(got, want, "cut at {cut:?}");
            // Each range begins where the one before stopped; the last reads to the end.
            for w in ends.windows(2) {
                assert_eq!(w[0].1, w[1].0, "cut at {cut:?}: {ends:?}");
            }
            assert_eq!(ends.last().unwrap().1, len);
            assert_eq!(ends[0].0, FILE_HEADER_LEN as u64);
        }
    }

    #[test]
    fn payloads_that_look_like_record_headers_need_a_chain() {
        // Each record's payload starts with 3 records of 16 bytes (fakes): a chain of three
        // plausible records is not a boundary.
        let dir = tempfile::tempdir().unwrap();
        let caplens = [200u32; 12];
        let mut bytes = pcap(&caplens, |_| 0);
        let s = starts(&caplens);
        for &r in &s {
            let data = r as usize + 16;
            let mut fake = Vec::new();
            fake.extend_from_slice(&1_700_000_000u32.to_le_bytes());
            fake.extend_from_slice(&0u32.to_le_bytes());
            fake.extend_from_slice(&16u32.to_le_bytes());
            fake.extend_from_slice(&16u32.to_le_bytes());
            for k in 0..3 {
                bytes[data + 32 * k..data + 32 * k + 16].copy_from_slice(&fake);
            }
        }
        let path = write(dir.path(), "b.pcap", &bytes);
        let len = bytes.len() as u64;
        let (got, ends) = read_cut(&path, len, &[s[3] + 20, s[6] + 100]);
        assert_eq!(got, whole(&path));
        assert_eq!(ends[1].0, s[4]);
        assert_eq!(ends[2].0, s[7]);
    }

    #[test]
    fn a_range_past_the_last_record_is_empty_and_compressed_or_pcapng_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let caplens = [100u32, 3000, 100];
        let bytes = pcap(&caplens, |_| 0xee);
        let path = write(dir.path(), "c.pcap", &bytes);
        let len = bytes.len() as u64;
        let s = starts(&caplens);
        // Inside the last record: nothing begins there.
        let mut r = RangeReader::open(&path, s[2] + 5, len).unwrap();
        assert!(r.next_frame().unwrap().is_none());
        assert_eq!((r.began(), r.stopped()), (len, Some(len)));
        // Within the big record: the range before reads it, this one is empty.
        let (got, ends) = read_cut(&path, len, &[s[1] + 100, s[1] + 200]);
        assert_eq!(got.len(), 3);
        assert_eq!(ends[1], (s[2], s[2]));
        // A record cut off by the end of the file: read as the whole reader reads it.
        let cut_file = write(dir.path(), "d.pcap", &bytes[..bytes.len() - 10]);
        let (got, ends) = read_cut(&cut_file, len - 10, &[s[1] + 7]);
        assert_eq!(got, whole(&cut_file));
        assert_eq!(ends[0].1, ends[1].0);
        let mut r = RangeReader::open(&cut_file, s[1] + 7, len - 10).unwrap();
        while r.next_frame().unwrap().is_some() {}
        assert_eq!(r.warnings().len(), 1, "{:?}", r.warnings());
        // Refused with a reason: compressed, pcapng, an empty range.
        let gz = write(dir.path(), "e.pcap.gz", &[0x1f, 0x8b, 8, 0, 0, 0, 0, 0]);
        let e = RangeReader::open(&gz, 0, 100).err().unwrap().to_string();
        assert!(e.contains("compressed") && e.contains("e.pcap.gz"), "{e}");
        let mut ng = vec![0x0a, 0x0d, 0x0d, 0x0a, 28, 0, 0, 0, 0x4d, 0x3c, 0x2b, 0x1a];
        ng.extend_from_slice(&[1, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]);
        ng.extend_from_slice(&[28, 0, 0, 0]);
        let ng = write(dir.path(), "f.pcapng", &ng);
        let e = RangeReader::open(&ng, 0, 100).err().unwrap().to_string();
        assert!(e.contains("pcapng"), "{e}");
        let e = RangeReader::open(&path, 50, 50).err().unwrap().to_string();
        assert!(e.contains("empty byte range"), "{e}");
    }

    #[test]
    fn a_garbled_record_is_the_error_the_whole_reader_gives() {
        let dir = tempfile::tempdir().unwrap();
        let caplens = [100u32; 20];
        let mut bytes = pcap(&caplens, |_| 0xee);
        let s = starts(&caplens);
        // Record 10's captured length made absurd.
        let at = s[10] as usize + 8;
        bytes[at..at + 4].copy_from_slice(&0x7fff_0000u32.to_le_bytes());
        let path = write(dir.path(), "g.pcap", &bytes);
        let len = bytes.len() as u64;
        let mut r = CaptureReader::open(&path).unwrap();
        let want = loop {
            match r.next_frame() {
                Ok(Some(_)) => {}
                Ok(None) => panic!("no error"),
                Err(e) => break e.to_string(),
            }
        };
        // The range holding the record stops at the same error; the one starting inside
        // the garbled record resynchronises at the next record.
        let mut r = RangeReader::open(&path, 0, s[10] + 5).unwrap();
        let got = loop {
            match r.next_frame() {
                Ok(Some(_)) => {}
                Ok(None) => panic!("no error"),
                Err(e) => break e.to_string(),
            }
        };
        assert_eq!(got, want);
        let r = RangeReader::open(&path, s[10] + 5, len).unwrap();
        assert_eq!(r.began(), s[11]);
    }
}
