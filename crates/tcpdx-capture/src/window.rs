//! A bounded window over the decompressed capture stream.
//!
//! Owns the one buffer that frames borrow from. It is read in large chunks (1 MiB by default,
//! so one `read` call per many frames), keeps track of the stream offset of every byte (for
//! error offsets), and grows only when a single record or block is larger than the buffer,
//! to the size of that record, doubling at most as the bytes actually arrive (so a block
//! length field of 100 MB in a 1 KB file does not allocate 100 MB). Memory does not depend on
//! the file size.
//!
//! The buffer can be shared with other threads ([`Window::share`]), so that they read frames
//! where they lie instead of copies: a shared buffer is never written again. When the window
//! needs to write (more input, or room), it continues in another buffer, which starts with
//! the live bytes (at most the unfinished record), and is a spent buffer whose holders have
//! all let go of it when there is one.
//!
//! A mapped file is one buffer holding the whole file ([`Window::mapped`]): nothing is read
//! or copied; the pages read past are let go every few MiB (before the oldest place a
//! shared handle may still read), and a thread may prefault them ahead.
//!
//! A source read on a thread of its own hands over whole chunks, which the window takes as
//! its buffer (with the unfinished record put in the chunk's headroom) instead of copying
//! them: a copy of every byte on the analysing thread was 5% of a headers-only run.

use std::collections::VecDeque;
use std::io;
#[cfg(test)]
use std::io::Read;
use std::ops::Deref;
use std::sync::{Arc, Weak};

use crate::input::{self, Source};
use crate::mapped::{self, Map};

/// Default buffer size: large reads, few syscalls.
pub(crate) const DEFAULT_CAPACITY: usize = 1 << 20;

/// Buffers given up while shared, kept for reuse once their holders let go: enough for the
/// batches a parallel run keeps in flight, few enough to bound memory.
const SPARES: usize = 4;

/// Bytes that frames lie in, which other threads may hold ([`crate::CaptureReader::share_buffer`]).
#[derive(Debug)]
pub enum Buffer {
    /// A buffer the reader filled (read or decompressed bytes).
    Filled(Vec<u8>),
    /// The whole file, mapped ([`crate::CaptureReader::open_mapped`]).
    Mapped(Map),
}

impl Deref for Buffer {
    type Target = [u8];

    #[inline]
    fn deref(&self) -> &[u8] {
        match self {
            Buffer::Filled(v) => v,
            Buffer::Mapped(m) => m.bytes(),
        }
    }
}

/// The buffer as a vector to write into, when it is a filled one no one else holds.
#[inline]
fn filled(buf: &mut Arc<Buffer>) -> Option<&mut Vec<u8>> {
    match Arc::get_mut(buf)? {
        Buffer::Filled(v) => Some(v),
        Buffer::Mapped(_) => None,
    }
}

/// Buffered bytes of the stream, from `offset()` on.
pub(crate) struct Window {
    source: Source,
    /// Written only while no one else holds it (`Arc::get_mut`).
    buf: Arc<Buffer>,
    /// Buffers the window left while they were shared.
    spent: Vec<Arc<Buffer>>,
    /// A mapped file's pages before this index of it are let go once `start` passes it
    /// (never for filled buffers).
    release_at: usize,
    /// The thread prefaulting the mapped file ahead.
    prefault: Option<mapped::Prefault>,
    /// The mapped file as handed out by [`Self::share`], each with the index from which
    /// its holders may read it, oldest first: pages are let go only before the oldest one
    /// still held (other threads read frames after the window has passed them; a page
    /// they fault back in after it was let go would stay mapped).
    pins: VecDeque<(usize, Weak<Buffer>)>,
    /// Counts the buffers the window moved to (see [`Window::generation`]).
    generation: u64,
    /// The buffer was shared once: reads then fill it whole (see [`Window::read_more`]).
    sharing: bool,
    /// First live byte in `buf`.
    start: usize,
    /// One past the last live byte in `buf`.
    end: usize,
    /// Stream offset of `buf[0]`, modulo 2^64 (a taken chunk's headroom may start before
    /// the stream does): always used with wrapping arithmetic.
    base: u64,
    /// The reader returned end of input.
    eof: bool,
    /// The decompressor reported that its stream ends early (treated as end of input).
    cut_stream: bool,
}

impl Window {
    /// A window over `reader` whose first bytes, `prefix`, were already read from it.
    #[cfg(test)]
    pub(crate) fn new(reader: Box<dyn Read + Send>, capacity: usize, prefix: &[u8]) -> Self {
        Self::over(Source::Plain(reader), capacity, prefix)
    }

    /// A window over `source` whose first bytes, `prefix`, were already read from it.
    pub(crate) fn over(source: Source, capacity: usize, prefix: &[u8]) -> Self {
        let mut buf = vec![0; capacity.max(prefix.len()).max(64)];
        if let Some(head) = buf.get_mut(..prefix.len()) {
            head.copy_from_slice(prefix);
        }
        Self::holding(source, Buffer::Filled(buf), prefix.len())
    }

    /// A window over a whole mapped file: every byte is buffered from the start, and a
    /// thread prefaults the pages ahead (where one can be had).
    pub(crate) fn mapped(map: Map) -> Self {
        let end = map.bytes().len();
        let prefault = mapped::Prefault::spawn(map.clone());
        let mut w = Self::holding(Source::Mapped(io::empty()), Buffer::Mapped(map), end);
        w.eof = true;
        w.release_at = mapped::RELEASE_EVERY;
        w.prefault = prefault;
        w
    }

    /// A window whose `buf` holds the stream's first `end` bytes, more to read from `source`.
    fn holding(source: Source, buf: Buffer, end: usize) -> Self {
        Self {
            source,
            buf: Arc::new(buf),
            spent: Vec::new(),
            release_at: usize::MAX,
            prefault: None,
            pins: VecDeque::new(),
            generation: 0,
            sharing: false,
            start: 0,
            end,
            base: 0,
            eof: false,
            cut_stream: false,
        }
    }

    /// The window, its first byte at stream offset `base` (a reader entering a file in the
    /// middle: offsets in errors stay those of the file).
    pub(crate) fn starting_at(mut self, base: u64) -> Self {
        self.base = base;
        self
    }

    /// Whether the window is over a mapped file.
    pub(crate) fn is_mapped(&self) -> bool {
        matches!(*self.buf, Buffer::Mapped(_))
    }

    /// Stream offset of the first buffered byte.
    pub(crate) fn offset(&self) -> u64 {
        self.base.wrapping_add(self.start as u64)
    }

    /// Stream bytes received so far (the offset where a read error happened).
    pub(crate) fn received(&self) -> u64 {
        self.base.wrapping_add(self.end as u64)
    }

    /// Whether a compressed stream ended in the middle (a cut-off .gz or .zst).
    pub(crate) fn stream_was_cut(&self) -> bool {
        self.cut_stream
    }

    /// The buffered bytes.
    #[inline]
    pub(crate) fn bytes(&self) -> &[u8] {
        // start <= end <= buf.len() always holds.
        self.buf.get(self.start..self.end).unwrap_or_default()
    }

    /// The whole buffer: [`Self::bytes`] starts at index [`Self::start`] of it.
    #[inline]
    pub(crate) fn buffer(&self) -> &[u8] {
        &self.buf
    }

    /// Index in [`Self::buffer`] of the first buffered byte.
    #[inline]
    pub(crate) fn start(&self) -> usize {
        self.start
    }

    /// The buffer, for other threads to read: the window never writes into it again.
    pub(crate) fn share(&mut self) -> Arc<Buffer> {
        self.sharing = true;
        if let Buffer::Mapped(map) = &*self.buf {
            // A handle of its own, to know when its holders are done with it.
            let shared = Arc::new(Buffer::Mapped(map.clone()));
            self.pins.push_back((self.start, Arc::downgrade(&shared)));
            return shared;
        }
        Arc::clone(&self.buf)
    }

    /// Changes whenever the window moves to another buffer (indexes into the previous one
    /// stay valid for its holders).
    #[inline]
    pub(crate) fn generation(&self) -> u64 {
        self.generation
    }

    /// Makes the buffer the window's alone before a write: if others hold it, the live
    /// bytes move to another one (so `start`, `end` and `base` may change).
    #[inline]
    fn own(&mut self) {
        if filled(&mut self.buf).is_none() {
            self.unshare();
        }
    }

    /// Leaves the shared buffer to its holders: continues in a spare one that no one holds
    /// any more (or a new one) of at least the same size, starting with the live bytes.
    #[cold]
    fn unshare(&mut self) {
        let size = self.buf.len();
        let spare = self
            .spent
            .iter()
            .position(|b| Arc::strong_count(b) == 1 && b.len() >= size);
        let mut fresh = match spare {
            Some(i) => self.spent.swap_remove(i),
            None => Arc::new(Buffer::Filled(vec![0; size])),
        };
        let live = self.buf.get(self.start..self.end).unwrap_or_default();
        if let Some(head) = filled(&mut fresh).and_then(|v| v.get_mut(..live.len())) {
            head.copy_from_slice(live);
        }
        let old = std::mem::replace(&mut self.buf, fresh);
        if self.spent.len() < SPARES {
            self.spent.push(old);
        }
        self.base = self.base.wrapping_add(self.start as u64);
        self.end -= self.start;
        self.start = 0;
        self.generation += 1;
    }

    /// Makes at least `n` bytes available; `Ok(false)` if the input ends before that.
    #[inline]
    pub(crate) fn fill(&mut self, n: usize) -> io::Result<bool> {
        if self.end - self.start >= n {
            return Ok(true);
        }
        self.fill_slow(n)
    }

    #[cold]
    fn fill_slow(&mut self, n: usize) -> io::Result<bool> {
        while self.end - self.start < n {
            if self.eof {
                return Ok(false);
            }
            if self.take_chunk() {
                continue;
            }
            if self.end == self.buf.len() {
                self.make_room(n);
            }
            self.read_more()?;
        }
        Ok(true)
    }

    /// Moves to the source's next chunk, with the live bytes put just before its data, when
    /// the source hands over chunks and they fit; false (changing nothing) otherwise.
    fn take_chunk(&mut self) -> bool {
        let Source::Ahead(source) = &mut self.source else {
            return false;
        };
        let live = self.end - self.start;
        if live > input::HEADROOM {
            return false;
        }
        let Some(mut chunk) = source.take_chunk() else {
            return false;
        };
        // Data starts at least `HEADROOM` in: the live bytes fit before it.
        let at = chunk.start - live;
        let Some(head) = chunk.buf.get_mut(at..chunk.start) else {
            // Never (chunks carry their headroom); copied the other way rather than lost.
            source.start_on(chunk);
            return false;
        };
        head.copy_from_slice(self.buf.get(self.start..self.end).unwrap_or_default());
        let offset = self.base.wrapping_add(self.start as u64);
        // The bytes past `end` are stale (the window reads over them when it reads itself).
        let end = chunk.end.min(chunk.buf.len());
        let old = std::mem::replace(&mut self.buf, Arc::new(Buffer::Filled(chunk.buf)));
        self.base = offset.wrapping_sub(at as u64);
        self.start = at;
        self.end = end;
        self.generation += 1;
        // Buffers no one else holds go back to the thread, the others wait among the spent.
        match Arc::try_unwrap(old) {
            Ok(Buffer::Filled(buf)) => source.give_back(buf),
            Ok(Buffer::Mapped(_)) => {}
            Err(shared) if self.spent.len() < SPARES => self.spent.push(shared),
            Err(_) => {}
        }
        let mut i = 0;
        while let Some(b) = self.spent.get(i) {
            if Arc::strong_count(b) == 1 {
                if let Ok(Buffer::Filled(buf)) = Arc::try_unwrap(self.spent.swap_remove(i)) {
                    source.give_back(buf);
                }
            } else {
                i += 1;
            }
        }
        true
    }

    /// One `read` into the free space at the end of the buffer; once the window shares its
    /// buffers, as many as fill it (a pipe gives 64 KiB a read: a buffer shared after each
    /// would hold 64 KiB each, and many would be alive at once).
    fn read_more(&mut self) -> io::Result<()> {
        loop {
            self.own();
            let end = self.end;
            // Filled and unique after `own` (disjoint fields: `start` and `end` change below).
            let Some(free) = filled(&mut self.buf).and_then(|v| v.get_mut(end..)) else {
                self.eof = true;
                return Ok(());
            };
            match self.source.reader().read(free) {
                Ok(0) => self.eof = true,
                Ok(k) => {
                    self.end += k;
                    if self.sharing && self.end < self.buf.len() {
                        continue;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                // flate2 and zstd say so when the compressed input stops mid-stream: that is a
                // cut-off capture (as when `tcpdump | gzip` is killed), not a corrupt one;
                // unless nothing at all came out of it.
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof && self.received() > 0 => {
                    self.eof = true;
                    self.cut_stream = true;
                }
                Err(e) => return Err(e),
            }
            return Ok(());
        }
    }

    /// Called with a full buffer: moves the live bytes to the front, and grows the buffer
    /// (at most doubling) if it is still full and holds fewer than `n` bytes.
    fn make_room(&mut self, n: usize) {
        self.own();
        let (start, end) = (self.start, self.end);
        // Filled and unshared after `own`.
        let Some(buf) = filled(&mut self.buf) else {
            return;
        };
        if start > 0 {
            buf.copy_within(start..end, 0);
            self.base = self.base.wrapping_add(start as u64);
            self.end -= start;
            self.start = 0;
        }
        if self.end == buf.len() {
            let grown = n.min(buf.len().saturating_mul(2)).max(buf.len() + 1);
            buf.resize(grown, 0);
        }
    }

    /// Drops `n` buffered bytes (`n` must not exceed what is buffered).
    #[inline]
    pub(crate) fn consume(&mut self, n: usize) {
        debug_assert!(n <= self.end - self.start);
        self.start += n;
        if self.start >= self.release_at {
            self.release();
        }
    }

    /// Lets go of the mapped file's pages read past.
    #[cold]
    fn release(&mut self) {
        let mut upto = self.start;
        while let Some((from, held)) = self.pins.front() {
            if held.strong_count() > 0 {
                upto = upto.min(*from);
                break;
            }
            self.pins.pop_front();
        }
        if let Buffer::Mapped(map) = &*self.buf {
            map.release(upto);
        }
        self.release_at = self.start.saturating_add(mapped::RELEASE_EVERY);
        if let Some(p) = &self.prefault {
            p.advance(self.start);
        }
    }

    /// Drops `n` bytes of the stream without keeping them; returns how many there were
    /// (fewer than `n` only at end of input).
    pub(crate) fn skip(&mut self, n: u64) -> io::Result<u64> {
        let mut left = n;
        loop {
            let k = left.min((self.end - self.start) as u64);
            self.start += k as usize;
            left -= k;
            if left == 0 {
                return Ok(n);
            }
            // Everything buffered was skipped: reuse the whole buffer.
            self.base = self.base.wrapping_add(self.end as u64);
            self.start = 0;
            self.end = 0;
            if self.eof {
                return Ok(n - left);
            }
            self.read_more()?;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;

    /// A reader that returns at most `steps[i]` bytes on its i-th call (cycling).
    struct Trickle {
        data: Vec<u8>,
        pos: usize,
        steps: &'static [usize],
        reads: usize,
    }

    impl Trickle {
        fn new(data: Vec<u8>, steps: &'static [usize]) -> Self {
            Self {
                data,
                pos: 0,
                steps,
                reads: 0,
            }
        }
    }

    impl Read for Trickle {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let step = self.steps[self.reads % self.steps.len()];
            self.reads += 1;
            let n = step.min(buf.len()).min(self.data.len() - self.pos);
            buf[..n].copy_from_slice(&self.data[self.pos..self.pos + n]);
            self.pos += n;
            Ok(n)
        }
    }

    fn data(n: usize) -> Vec<u8> {
        (0..n).map(|i| (i % 253) as u8).collect()
    }

    #[test]
    fn fill_consume_offsets() {
        let d = data(1000);
        let mut w = Window::new(Box::new(Trickle::new(d[3..].to_vec(), &[7])), 64, &d[..3]);
        let mut off = 0;
        for chunk in [1, 10, 64, 100, 3, 500] {
            assert!(w.fill(chunk).unwrap());
            assert_eq!(w.offset(), off as u64);
            assert_eq!(&w.bytes()[..chunk], &d[off..off + chunk]);
            w.consume(chunk);
            off += chunk;
        }
        // 322 bytes left.
        assert!(!w.fill(323).unwrap());
        assert!(w.fill(322).unwrap());
        assert_eq!(w.bytes(), &d[off..]);
        assert_eq!(w.received(), 1000);
    }

    #[test]
    fn growth_is_bounded_by_data() {
        // A 10 MB request on a 100-byte input must not allocate 10 MB.
        let mut w = Window::new(Box::new(Cursor::new(data(100))), 64, &[]);
        assert!(!w.fill(10_000_000).unwrap());
        assert!(w.buf.len() <= 256);
        assert_eq!(w.bytes().len(), 100);
    }

    #[test]
    fn skip_across_reads() {
        let d = data(5000);
        let mut w = Window::new(Box::new(Trickle::new(d.clone(), &[100])), 64, &[]);
        assert!(w.fill(10).unwrap());
        w.consume(5);
        assert_eq!(w.skip(3000).unwrap(), 3000);
        assert_eq!(w.offset(), 3005);
        assert!(w.fill(4).unwrap());
        assert_eq!(&w.bytes()[..4], &d[3005..3009]);
        assert_eq!(w.skip(10_000).unwrap(), 1995);
        assert_eq!(w.offset(), 5000);
        assert!(!w.fill(1).unwrap());
    }

    #[test]
    fn shared_buffers_are_never_written() {
        // 64-byte buffer, 7 bytes per read: many moves between buffers.
        let d = data(3000);
        let mut w = Window::new(Box::new(Trickle::new(d.clone(), &[7])), 64, &[]);
        // (the shared buffer, a copy of it when handed out, where the frame starts)
        let mut held: Vec<(Arc<Buffer>, Vec<u8>, usize)> = Vec::new();
        let mut off = 0;
        while w.fill(5).unwrap() {
            // Hand out the next 5 bytes as a "frame": where they lie, and the buffer.
            let start = w.start();
            let buf = w.share();
            assert_eq!(&buf[start..start + 5], &d[off..off + 5]);
            held.push((buf.clone(), buf.to_vec(), start));
            w.consume(5);
            off += 5;
            // Let go of all but the last few, so spare buffers are reused.
            if held.len() > 4 {
                held.remove(0);
            }
            for (buf, copy, start) in &held {
                assert_eq!(&buf[..], &copy[..], "a shared buffer changed (at {start})");
            }
        }
        assert_eq!(off, 3000);
        // The window moved between buffers, and reused spare ones (bounded).
        assert!(w.generation() > 10);
        assert!(w.spent.len() <= SPARES);
    }

    #[test]
    fn unshared_buffer_is_compacted_in_place() {
        let d = data(1000);
        let mut w = Window::new(Box::new(Trickle::new(d.clone(), &[50])), 64, &[]);
        let mut off = 0;
        while w.fill(10).unwrap() {
            assert_eq!(&w.bytes()[..10], &d[off..off + 10]);
            w.consume(10);
            off += 10;
        }
        // Nothing was shared: one buffer all along.
        assert_eq!(w.generation(), 0);
        assert!(w.spent.is_empty());
    }

    #[test]
    fn a_spare_is_reused_once_released() {
        let d = data(400);
        let mut w = Window::new(Box::new(Trickle::new(d.clone(), &[64])), 64, &[]);
        assert!(w.fill(60).unwrap());
        let first = w.share();
        w.consume(60);
        // Shared: the next read moves to a new buffer.
        assert!(w.fill(10).unwrap());
        assert_eq!(w.generation(), 1);
        assert!(!Arc::ptr_eq(&first, &w.buf));
        let second = w.share();
        w.consume(w.bytes().len());
        drop(first);
        // The first buffer is free again: the next move reuses it.
        assert!(w.fill(10).unwrap());
        assert_eq!(w.generation(), 2);
        assert_eq!(Arc::strong_count(&w.buf), 1);
        assert!(!Arc::ptr_eq(&second, &w.buf));
        assert_eq!(w.spent.len(), 1);
        assert_eq!(&w.bytes()[..10], &d[124..134]);
    }

    /// Reads `d` (its first 5 bytes already read) through `w` as "records" of uneven
    /// lengths that straddle the chunks' ends, some longer than the headroom (copied
    /// instead), sharing the buffer now and then with `share` (a shared buffer must not
    /// change): every byte comes at its offset.
    fn read_records(mut w: Window, d: &[u8], share: bool) -> Window {
        let mut held: Vec<(Arc<Buffer>, Vec<u8>)> = Vec::new();
        let mut off = 0;
        let mut k = 0u64;
        loop {
            k += 1;
            let len = match k % 50 {
                0 => input::HEADROOM + 1000,
                i => (i * i * 37 + 1) as usize,
            };
            let len = len.min(d.len() - off);
            if len == 0 {
                break;
            }
            assert!(w.fill(len).unwrap(), "at {off}");
            assert_eq!(w.offset(), off as u64);
            assert!(w.bytes()[..len] == d[off..off + len], "bytes at {off}");
            if share && k.is_multiple_of(7) {
                let buf = w.share();
                held.push((Arc::clone(&buf), buf.to_vec()));
                if held.len() > 3 {
                    held.remove(0);
                }
            }
            w.consume(len);
            off += len;
            for (buf, copy) in &held {
                assert!(buf[..] == copy[..], "a shared buffer changed");
            }
        }
        assert!(!w.fill(1).unwrap());
        assert_eq!(w.received(), d.len() as u64);
        w
    }

    fn records(n: usize) -> Vec<u8> {
        (0..n as u64)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 11) as u8)
            .collect()
    }

    #[test]
    fn chunks_taken_over_keep_every_byte_and_offset() {
        // Several chunks from a thread, in the first run shared now and then.
        let d = records(3 * (1 << 20) + 777_777);
        for (fill, share) in [(true, true), (false, false)] {
            let source = input::Threaded::spawn(Cursor::new(d[5..].to_vec()), 1, fill, 5).unwrap();
            let w = Window::over(Source::Ahead(source), DEFAULT_CAPACITY, &d[..5]);
            let w = read_records(w, &d, share);
            // Chunks were taken over (unshared, only that moves the window to another buffer).
            assert!(w.generation() >= 3, "generation {}", w.generation());
        }
    }

    #[test]
    fn recycled_chunks_of_any_length_carry_only_their_bytes() {
        // Chunks as the reads come (short ones copied, long ones taken over), their buffers
        // recycled with the bytes of longer chunks still past their end: none of those
        // stale bytes may show, shared or not.
        let d = records(9 * (1 << 20) + 12_345);
        for share in [false, true] {
            // Reads of uneven sizes, as from a pipe: 64 KiB, whole MiBs, a few bytes.
            let uneven = Trickle::new(
                d[5..].to_vec(),
                &[1 << 20, 300_000, 7, 200_000, 1 << 20, 65_536],
            );
            let source = input::Threaded::spawn(uneven, 1, false, 5).unwrap();
            let w = Window::over(Source::Ahead(source), DEFAULT_CAPACITY, &d[..5]);
            let w = read_records(w, &d, share);
            assert!(w.generation() >= 2, "generation {}", w.generation());
        }
    }
}
