//! A bounded window over the decompressed capture stream.
//!
//! Owns the one buffer that frames borrow from. It is read in large chunks (1 MiB by default,
//! so one `read` call per many frames), keeps track of the stream offset of every byte (for
//! error offsets), and grows only when a single record or block is larger than the buffer,
//! to the size of that record, doubling at most as the bytes actually arrive (so a block
//! length field of 100 MB in a 1 KB file does not allocate 100 MB). Memory does not depend on
//! the file size.

use std::io::{self, Read};

/// Default buffer size: large reads, few syscalls.
pub(crate) const DEFAULT_CAPACITY: usize = 1 << 20;

/// Buffered bytes of the stream, from `offset()` on.
pub(crate) struct Window {
    reader: Box<dyn Read + Send>,
    buf: Vec<u8>,
    /// First live byte in `buf`.
    start: usize,
    /// One past the last live byte in `buf`.
    end: usize,
    /// Stream offset of `buf[0]`.
    base: u64,
    /// The reader returned end of input.
    eof: bool,
    /// The decompressor reported that its stream ends early (treated as end of input).
    cut_stream: bool,
}

impl Window {
    /// A window over `reader` whose first bytes, `prefix`, were already read from it.
    pub(crate) fn new(reader: Box<dyn Read + Send>, capacity: usize, prefix: &[u8]) -> Self {
        let mut buf = vec![0; capacity.max(prefix.len()).max(64)];
        if let Some(head) = buf.get_mut(..prefix.len()) {
            head.copy_from_slice(prefix);
        }
        Self {
            reader,
            buf,
            start: 0,
            end: prefix.len(),
            base: 0,
            eof: false,
            cut_stream: false,
        }
    }

    /// Stream offset of the first buffered byte.
    pub(crate) fn offset(&self) -> u64 {
        self.base + self.start as u64
    }

    /// Stream bytes received so far (the offset where a read error happened).
    pub(crate) fn received(&self) -> u64 {
        self.base + self.end as u64
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
            if self.end == self.buf.len() {
                self.make_room(n);
            }
            self.read_more()?;
        }
        Ok(true)
    }

    /// One `read` into the free space at the end of the buffer.
    fn read_more(&mut self) -> io::Result<()> {
        loop {
            let Some(free) = self.buf.get_mut(self.end..) else {
                self.eof = true;
                return Ok(());
            };
            match self.reader.read(free) {
                Ok(0) => self.eof = true,
                Ok(k) => self.end += k,
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
        if self.start > 0 {
            self.buf.copy_within(self.start..self.end, 0);
            self.base += self.start as u64;
            self.end -= self.start;
            self.start = 0;
        }
        if self.end == self.buf.len() {
            let grown = n
                .min(self.buf.len().saturating_mul(2))
                .max(self.buf.len() + 1);
            self.buf.resize(grown, 0);
        }
    }

    /// Drops `n` buffered bytes (`n` must not exceed what is buffered).
    #[inline]
    pub(crate) fn consume(&mut self, n: usize) {
        debug_assert!(n <= self.end - self.start);
        self.start += n;
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
            self.base += self.end as u64;
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

    /// A reader that returns at most `step` bytes per call.
    struct Trickle {
        data: Vec<u8>,
        pos: usize,
        step: usize,
    }

    impl Read for Trickle {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let n = self.step.min(buf.len()).min(self.data.len() - self.pos);
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
        let mut w = Window::new(
            Box::new(Trickle {
                data: d[3..].to_vec(),
                pos: 0,
                step: 7,
            }),
            64,
            &d[..3],
        );
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
        let mut w = Window::new(
            Box::new(Trickle {
                data: d.clone(),
                pos: 0,
                step: 100,
            }),
            64,
            &[],
        );
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
}
