//! The raw input: byte counting for progress, and transparent decompression.
//!
//! Owns everything between the file (or stdin) and the decompressed capture stream: a counter
//! of raw bytes read (shared with the reader, for progress bars), the gzip/zstd sniff on the
//! first raw bytes (read into a small prefix, never sought back, so pipes work), the
//! decompressor put in front when needed, and the thread that reads ahead.

use std::io::{self, BufReader, Cursor, Read};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::sniff::{self, Compression};

/// Buffer between the raw input and a decompressor (the decompressor's reads are small).
const COMPRESSED_BUF_LEN: usize = 256 * 1024;

/// The decompressed capture stream and what it came from.
pub(crate) struct Input {
    /// The capture bytes, decompressed.
    pub stream: Source,
    /// For uncompressed input: the first raw bytes, already taken from `stream`.
    pub prefix: Vec<u8>,
    /// The compression removed.
    pub compression: Compression,
    /// Raw bytes read from the underlying input so far.
    pub raw_bytes: Arc<AtomicU64>,
}

/// Where the window gets the capture bytes.
pub(crate) enum Source {
    /// Read into the window's buffer.
    Plain(Box<dyn Read + Send>),
    /// Read on a thread of its own, whose chunks the window takes over whole.
    Ahead(Threaded),
    /// A mapped file: the window holds all of it from the start; nothing more to read.
    Mapped(io::Empty),
}

impl Source {
    /// The bytes as a reader (the copying way, for any source).
    pub(crate) fn reader(&mut self) -> &mut dyn Read {
        match self {
            Source::Plain(r) => r,
            Source::Ahead(t) => t,
            Source::Mapped(e) => e,
        }
    }
}

/// A reader that counts the bytes going through it into a shared counter.
struct Counting<R> {
    inner: R,
    count: Arc<AtomicU64>,
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        // One atomic add per read call (a read fills up to a whole buffer), not per frame.
        self.count.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

/// Reads up to `n` bytes, fewer only at end of input.
fn read_prefix(r: &mut dyn Read, n: usize) -> io::Result<Vec<u8>> {
    let mut prefix = vec![0; n];
    let mut got = 0;
    while got < n {
        let Some(rest) = prefix.get_mut(got..) else {
            break;
        };
        match r.read(rest) {
            Ok(0) => break,
            Ok(k) => got += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    prefix.truncate(got);
    Ok(prefix)
}

/// Wraps the raw input: counts its bytes, sniffs compression and puts a decompressor in front.
///
/// An `Err` here is a read error on the first raw bytes (offset 0).
/// With `read_ahead`, uncompressed input is also read on a thread of its own (compressed
/// input always is: its decompression).
pub(crate) fn open(raw: Box<dyn Read + Send>, read_ahead: bool) -> io::Result<Input> {
    let raw_bytes = Arc::new(AtomicU64::new(0));
    let mut counted = Counting {
        inner: raw,
        count: Arc::clone(&raw_bytes),
    };
    let prefix = read_prefix(&mut counted, sniff::MAGIC_LEN)?;
    let compression = sniff::compression(&prefix);
    let (stream, prefix) = match compression {
        // Read ahead on a thread of its own: the kernel's copy from the page cache is a
        // fifth to a quarter of a run on headers-only captures, and then overlaps the
        // analysis (one chunk ahead: a file is read far faster than it is analysed).
        Compression::None if read_ahead => {
            // The file's next byte is the one after the prefix.
            let offset = prefix.len() as u64;
            (
                Source::Ahead(Threaded::spawn(counted, 1, false, offset)?),
                prefix,
            )
        }
        Compression::None => (Source::Plain(Box::new(counted)), prefix),
        Compression::Gzip => {
            let raw =
                BufReader::with_capacity(COMPRESSED_BUF_LEN, Cursor::new(prefix).chain(counted));
            // Multi-member: `cat a.gz b.gz` and pigz output are one capture.
            (
                Source::Ahead(Threaded::spawn(
                    flate2::bufread::MultiGzDecoder::new(raw),
                    DECOMPRESSED_AHEAD,
                    true,
                    0,
                )?),
                Vec::new(),
            )
        }
        Compression::Zstd => {
            let raw =
                BufReader::with_capacity(COMPRESSED_BUF_LEN, Cursor::new(prefix).chain(counted));
            // Reads every frame of the stream, not just the first.
            (
                Source::Ahead(Threaded::spawn(
                    zstd::stream::read::Decoder::with_buffer(raw)?,
                    DECOMPRESSED_AHEAD,
                    true,
                    0,
                )?),
                Vec::new(),
            )
        }
    };
    Ok(Input {
        stream,
        prefix,
        compression,
        raw_bytes,
    })
}

/// Bytes per chunk handed from the reading (or decompressing) thread to the parser.
const CHUNK_LEN: usize = 1 << 20;

/// Free bytes before a chunk's data: the window takes a chunk over as its buffer, and puts
/// the unfinished record of the previous one there (no record of a link type that pcap allows
/// on Ethernet, 256 KiB, is longer; a longer one is copied instead).
pub(crate) const HEADROOM: usize = 256 * 1024 + 4096;

/// Bytes of a memory page: where a chunk's data starts within one ([`data_start`]).
const PAGE: usize = 4096;

/// Bytes a chunk's buffer holds: its headroom, up to a page to place its data ([`data_start`])
/// and the data.
const CHUNK_CAP: usize = HEADROOM + PAGE + CHUNK_LEN;

/// Where in `buf` to put the bytes that the source holds from `offset` on: at least
/// [`HEADROOM`] in, at the same place within a page as `offset` (a whole chunk is a whole
/// number of pages, so every chunk of a buffer starts alike). The kernel's copy in `read`
/// (`rep movsb`) runs 4-5x slower on AMD Zen cores when the destination lies 1 to 31 bytes
/// past the source within a page (a cached file read in 1 MiB reads: 36.6 ms against 8.1 ms
/// per 97 MB here), and a malloc'd buffer starts 16 bytes into its page, past a file offset
/// of 4 (the sniffed prefix): exactly that case, on every read.
fn data_start(buf: &[u8], offset: u64) -> usize {
    let at = buf.as_ptr().addr().wrapping_add(HEADROOM);
    // Modulo a power of two: exact in wrapping arithmetic.
    HEADROOM + (offset as usize).wrapping_sub(at) % PAGE
}

/// A chunk read ahead: its bytes from `start` to `end`, after at least [`HEADROOM`] free
/// bytes.
#[derive(Default)]
pub(crate) struct Chunk {
    /// The buffer. Bytes past `end` are stale: the buffer keeps its length, so that a
    /// recycled one is not zeroed again before each read (a pipe gives 64 KiB a read: the
    /// rest of the MiB was zeroed every time, 13% of a run's samples from a pipe).
    pub buf: Vec<u8>,
    /// Where its data starts.
    pub start: usize,
    /// One past its last byte.
    pub end: usize,
}

/// Chunks shorter than this are copied, not taken over (a pipe gives 64 KiB a read: a
/// buffer per read would leave the window many nearly empty buffers when shared).
const TAKE_FROM: usize = CHUNK_LEN / 4;

/// A reader whose source runs on its own thread, so reading and decompression overlap
/// parsing and analysis (a second core then does the inflating, or the kernel's copy).
/// Chunks travel through a bounded channel: memory stays at a few chunks whatever the input.
/// The thread ends at the end of input, on an error (handed over in order), or when this
/// reader is dropped. A chunk's data starts at [`HEADROOM`] or up to a page later.
pub(crate) struct Threaded {
    rx: std::sync::mpsc::Receiver<io::Result<Chunk>>,
    /// Chunks read to the end go back to the thread: a fresh 1 MiB buffer per chunk cost
    /// 256 page faults and its zeroing each time (a tenth of a zstd run on bulk captures).
    spent: std::sync::mpsc::SyncSender<Vec<u8>>,
    /// The chunk [`Read::read`] copies from, from `pos` to its end.
    chunk: Chunk,
    pos: usize,
    /// An error met by [`Threaded::take_chunk`], for the next read to return.
    failed: Option<io::Error>,
    done: bool,
}

/// Chunks on their way back to the decompression thread (beyond them, chunks are freed).
const SPENT_CHUNKS: usize = 4;

/// Chunks a decompression thread may have ready ahead of the parser.
const DECOMPRESSED_AHEAD: usize = 4;

impl Threaded {
    /// Reads `inner` on a new thread, at most `ahead` chunks ahead of the reader. With
    /// `fill`, a chunk is sent once full (decompressors return little per call); without,
    /// each read's bytes go as they come (a pipe from a live capture is analysed as it
    /// arrives, not a MiB at a time). `offset` is where `inner`'s next byte lies in its file
    /// (placing the data alike within a page makes the kernel's copy fast, [`data_start`]).
    pub(crate) fn spawn<R: Read + Send + 'static>(
        mut inner: R,
        ahead: usize,
        fill: bool,
        mut offset: u64,
    ) -> io::Result<Threaded> {
        let (tx, rx) = std::sync::mpsc::sync_channel::<io::Result<Chunk>>(ahead);
        let (spent, recycled) =
            std::sync::mpsc::sync_channel::<Vec<u8>>(SPENT_CHUNKS.min(ahead + 1));
        // Named, so that profilers and `top -H` tell it from the analysis.
        let thread = std::thread::Builder::new().name("tcpdx-read".into());
        thread.spawn(move || {
            loop {
                // Recycled buffers hold `CHUNK_CAP` (`give_back`): within it, the buffer does
                // not move once its data is placed. Zeroed once, when made (all its pages
                // then count in the peak RSS from the start, whatever share of them the first
                // reads fill: the memory measured on a short capture is that of a long one),
                // never again: a recycled buffer keeps its length, whatever its last chunk held.
                let mut buf = recycled
                    .try_recv()
                    .unwrap_or_else(|_| Vec::with_capacity(CHUNK_CAP));
                let start = data_start(&buf, offset);
                let limit = start + CHUNK_LEN;
                if buf.len() < limit {
                    buf.resize(limit, 0);
                }
                let mut len = start;
                let mut eof = false;
                let result = loop {
                    let Some(rest) = buf.get_mut(len..limit) else {
                        break Ok(());
                    };
                    match inner.read(rest) {
                        Ok(0) => {
                            eof = true;
                            break Ok(());
                        }
                        Ok(n) => {
                            len += n;
                            offset += n as u64;
                            if len == limit || !fill {
                                break Ok(());
                            }
                        }
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        Err(e) => break Err(e),
                    }
                };
                let chunk = Chunk {
                    buf,
                    start,
                    end: len,
                };
                if len > start && tx.send(Ok(chunk)).is_err() {
                    return;
                }
                if let Err(e) = result {
                    let _ = tx.send(Err(e));
                    return;
                }
                if eof {
                    return;
                }
            }
        })?;
        Ok(Threaded {
            rx,
            spent,
            chunk: Chunk::default(),
            pos: 0,
            failed: None,
            done: false,
        })
    }

    /// Once the current chunk is read to its end: the next one whole, when it is long
    /// enough to be worth taking over (give its buffer back with [`Threaded::give_back`]).
    /// `None` leaves the bytes to [`Read::read`].
    pub(crate) fn take_chunk(&mut self) -> Option<Chunk> {
        if self.pos < self.chunk.end || self.done || self.failed.is_some() {
            return None;
        }
        let chunk = self.receive()?;
        if chunk.end.saturating_sub(chunk.start) < TAKE_FROM {
            self.start_on(chunk);
            return None;
        }
        let spent = std::mem::take(&mut self.chunk);
        self.give_back(spent.buf);
        self.pos = 0;
        Some(chunk)
    }

    /// The thread's next chunk; `None` at the end of input, or after an error (kept for the
    /// next read to return).
    fn receive(&mut self) -> Option<Chunk> {
        match self.rx.recv() {
            Ok(Ok(chunk)) => Some(chunk),
            Ok(Err(e)) => {
                self.failed = Some(e);
                None
            }
            Err(_) => {
                self.done = true;
                None
            }
        }
    }

    /// Returns a chunk to the thread for reuse (or frees it).
    pub(crate) fn give_back(&self, chunk: Vec<u8>) {
        if chunk.capacity() >= CHUNK_CAP {
            // When the way back is full (or the thread ended), it is freed.
            let _ = self.spent.try_send(chunk);
        }
    }

    /// Makes `chunk` the one [`Read::read`] copies from.
    pub(crate) fn start_on(&mut self, chunk: Chunk) {
        let spent = std::mem::replace(&mut self.chunk, chunk);
        self.give_back(spent.buf);
        self.pos = self.chunk.start.min(self.chunk.end);
    }
}

impl Read for Threaded {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        while self.pos == self.chunk.end {
            if let Some(e) = self.failed.take() {
                self.done = true;
                return Err(e);
            }
            if self.done {
                return Ok(0);
            }
            if let Some(chunk) = self.receive() {
                self.start_on(chunk);
            }
        }
        let rest = self
            .chunk
            .buf
            .get(self.pos..self.chunk.end)
            .unwrap_or_default();
        let n = out.len().min(rest.len());
        if let (Some(dst), Some(src)) = (out.get_mut(..n), rest.get(..n)) {
            dst.copy_from_slice(src);
        }
        self.pos += n;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn read_all(mut input: Input) -> Vec<u8> {
        let mut out = input.prefix.clone();
        input.stream.reader().read_to_end(&mut out).unwrap();
        out
    }

    #[test]
    fn plain_passes_through_and_counts() {
        let data: Vec<u8> = (0..100u8).collect();
        for read_ahead in [false, true] {
            let input = open(Box::new(Cursor::new(data.clone())), read_ahead).unwrap();
            assert_eq!(input.compression, Compression::None);
            let counter = Arc::clone(&input.raw_bytes);
            assert_eq!(read_all(input), data);
            assert_eq!(counter.load(Ordering::Relaxed), 100);
        }
    }

    #[test]
    fn short_inputs() {
        for n in 0..4u8 {
            for read_ahead in [false, true] {
                let data: Vec<u8> = (0..n).collect();
                let input = open(Box::new(Cursor::new(data.clone())), read_ahead).unwrap();
                assert_eq!(read_all(input), data);
            }
        }
    }

    #[test]
    fn gzip_and_zstd() {
        let data: Vec<u8> = (0..5000u32).map(|i| (i % 251) as u8).collect();
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(&data).unwrap();
        let gz = gz.finish().unwrap();
        let raw_len = gz.len() as u64;
        let input = open(Box::new(Cursor::new(gz)), false).unwrap();
        assert_eq!(input.compression, Compression::Gzip);
        let counter = Arc::clone(&input.raw_bytes);
        assert_eq!(read_all(input), data);
        assert_eq!(counter.load(Ordering::Relaxed), raw_len);

        let zst = zstd::encode_all(&data[..], 1).unwrap();
        let input = open(Box::new(Cursor::new(zst)), false).unwrap();
        assert_eq!(input.compression, Compression::Zstd);
        assert_eq!(read_all(input), data);
    }

    #[test]
    fn recycled_chunks_carry_every_byte_in_order() {
        // Many chunks, read in small pieces so that chunks go back while others are queued;
        // every chunk's bytes differ, so a stale or reordered chunk would show.
        let data: Vec<u8> = (0..(9 * CHUNK_LEN + 12_345) as u64)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        let zst = zstd::encode_all(&data[..], 1).unwrap();
        let mut input = open(Box::new(Cursor::new(zst)), false).unwrap();
        let mut out = Vec::new();
        let mut piece = [0u8; 70_001];
        loop {
            let n = input.stream.reader().read(&mut piece).unwrap();
            if n == 0 {
                break;
            }
            out.extend_from_slice(&piece[..n]);
        }
        assert_eq!(out.len(), data.len());
        assert!(out == data, "decompressed bytes differ");
    }

    #[test]
    fn data_starts_where_the_source_offset_lies_in_a_page() {
        // Buffers at several addresses (and places within a page), every offset class.
        let bufs: Vec<Vec<u8>> = (0..8).map(|i| vec![0; CHUNK_CAP + i * 8]).collect();
        for buf in &bufs {
            for offset in [0u64, 1, 4, 12, 16, 31, 32, 4095, 4096, 4100, 1 << 40] {
                let start = data_start(buf, offset);
                assert!((HEADROOM..HEADROOM + PAGE).contains(&start), "{start}");
                let addr = buf.as_ptr().addr() + start;
                assert_eq!(addr % PAGE, offset as usize % PAGE, "offset {offset}");
            }
        }
    }

    #[test]
    fn chunks_read_ahead_lie_like_the_file_in_a_page() {
        // A file read ahead after a 4-byte prefix: every chunk's data sits at the place of
        // its first byte's file offset within a page, and the bytes come whole and in order.
        let data: Vec<u8> = (0..(3 * CHUNK_LEN + 999) as u64)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 7) as u8)
            .collect();
        let prefix = 4;
        let mut t = Threaded::spawn(Cursor::new(data[prefix..].to_vec()), 1, false, 4).unwrap();
        let mut out = data[..prefix].to_vec();
        let mut chunks = 0;
        while let Some(c) = t.take_chunk() {
            let addr = c.buf.as_ptr().addr() + c.start;
            assert_eq!(addr % PAGE, out.len() % PAGE, "chunk {chunks}");
            assert!(c.start >= HEADROOM);
            out.extend_from_slice(&c.buf[c.start..c.end]);
            t.give_back(c.buf);
            chunks += 1;
        }
        t.read_to_end(&mut out).unwrap();
        assert!(chunks >= 3, "{chunks}");
        assert!(out == data, "bytes differ");
    }

    /// A source that gives `first`, then blocks until told to end.
    struct Live {
        first: Vec<u8>,
        pos: usize,
        end: std::sync::mpsc::Receiver<()>,
    }

    impl Read for Live {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            if self.pos < self.first.len() {
                let n = buf.len().min(self.first.len() - self.pos);
                buf[..n].copy_from_slice(&self.first[self.pos..self.pos + n]);
                self.pos += n;
                return Ok(n);
            }
            let _ = self.end.recv();
            Ok(0)
        }
    }

    #[test]
    fn plain_bytes_come_through_as_they_arrive() {
        // A live pipe (`tcpdump -w - | tcpdx events -`): the bytes that came must be
        // readable before a whole chunk has.
        let (end_tx, end) = std::sync::mpsc::channel();
        let first: Vec<u8> = (0..100u8).collect();
        let mut input = open(
            Box::new(Live {
                first: first.clone(),
                pos: 0,
                end,
            }),
            true,
        )
        .unwrap();
        let (got_tx, got) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut buf = vec![0; 4096];
            let n = input.stream.reader().read(&mut buf).unwrap();
            let _ = got_tx.send((input.prefix.clone(), buf[..n].to_vec()));
        });
        let (prefix, rest) = got
            .recv_timeout(std::time::Duration::from_secs(10))
            .expect("the first bytes must be readable while the source is still open");
        assert_eq!([prefix, rest].concat(), first);
        let _ = end_tx.send(());
    }
}
