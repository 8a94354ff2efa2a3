//! [`Rounds`]: a sender's round trips, stored delta-encoded in chunks, each field in as few bytes as it needs.
//!
//! A long bulk connection has one round per few segments: kept as a `Vec<Round>` (72 bytes
//! each, doubling as it grew) they were most of `diagnose`'s memory, and the doubling copies
//! and fresh pages ~10% of its time. Encoded (a header of lengths, then each field in 1,
//! 2, 4 or 8 bytes, [`Enc`]), a typical round takes 12-18 bytes; chunks of
//! [`CHUNK`] rounds never move once written and each starts from a clean state, so
//! iteration can start at any chunk. Lossless: every field decodes to its exact value.
//!
//! Given a [`Spill`], only the last few chunks stay in memory ([`SpillPolicy`]): full ones
//! are written to the spill's store as one blob, so a live connection's memory does not
//! depend on its length. Iteration reads the blobs back one at a time.
//! Diagnosis walks the rounds a dozen times, so a connection of at most
//! [`DECODE_ALL_MAX_ROUNDS`] rounds is first decoded once ([`Rounds::decode_all`]) into a
//! plain list that lives only while it is diagnosed; a longer one is decoded on every walk,
//! a blob at a time.

use std::sync::Arc;

use super::Round;
use crate::spill::{BlobRef, Spill};

/// Rounds per chunk (tcpdx choice: iteration from an index decodes under one chunk to skip).
pub const CHUNK: usize = 256;

/// Bytes a chunk is sized for per round (tcpdx choice: a bulk transfer's rounds take
/// 16-17 bytes on average; a chunk with larger ones grows once).
const BYTES_PER_ROUND: usize = 17;

/// Rounds the first chunk has room for before it grows (tcpdx choice: a short
/// connection's whole life).
const FIRST_CHUNK_ROUNDS: usize = 16;

/// Rounds of a connection decoded into a plain list for its diagnosis (tcpdx choice: 72
/// bytes each, ~2.4 MB; longer connections decode a blob at a time on each walk, so that
/// the diagnosis of a long connection does not need memory in proportion to it).
pub const DECODE_ALL_MAX_ROUNDS: usize = 32_768;

/// Flag bits of a round's first byte.
const RWND_LIMITED: u8 = 1;
const IN_RECOVERY: u8 = 2;
/// The receiver's window equals the previous round's (not encoded again).
const SAME_WINDOW: u8 = 4;
/// No retransmission in the round (not encoded).
const NO_RETX: u8 = 8;
/// Segments, bytes, bytes acknowledged and largest flight equal the previous round's (not
/// encoded again): a steady transfer's rounds differ only in their times, and take 10
/// bytes instead of 17.
const SAME_SHAPE: u8 = 16;
/// The round ended in or followed a retransmission timeout.
const TIMEOUT: u8 = 32;
/// A loss episode was still open at the round's end.
const RECOVERY_AT_END: u8 = 64;
/// The round's departures were paced.
const PACED: u8 = 128;

/// The fields the next round is encoded against.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Prev {
    end: i64,
    rcv_window: u64,
    pkts: u32,
    bytes: u64,
    acked: u64,
    max_in_flight: u64,
}

impl Prev {
    fn of(r: &Round) -> Self {
        Prev {
            end: r.end,
            rcv_window: r.rcv_window,
            pkts: r.pkts,
            bytes: r.bytes,
            acked: r.acked,
            max_in_flight: r.max_in_flight,
        }
    }

    /// `r` has the shape of the previous round ([`SAME_SHAPE`]).
    fn same_shape(&self, r: &Round) -> bool {
        (r.pkts, r.bytes, r.acked, r.max_in_flight)
            == (self.pkts, self.bytes, self.acked, self.max_in_flight)
    }
}

#[derive(Clone, Debug, Default, PartialEq)]
struct Chunk {
    bytes: Vec<u8>,
    len: usize,
}

/// Chunks written to the spill's store as one blob: `[len: u32 LE][bytes]` per chunk.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Blob {
    at: BlobRef,
    /// Index of its first round.
    first: usize,
}

/// A sender's rounds in order: append, length, the latest, and iteration from any index.
#[derive(Clone, Debug, Default)]
pub struct Rounds {
    /// Where full chunks go (none: all stay in memory).
    spill: Option<Arc<Spill>>,
    /// Blobs written, in order.
    blobs: Vec<Blob>,
    /// Rounds in the blobs.
    spilled: usize,
    /// The chunks in memory, after the blobs' (all full but the last).
    chunks: Vec<Chunk>,
    len: usize,
    /// What the next round is encoded against (the latest round's end and window).
    prev: Prev,
    /// Segments of the latest round.
    last_pkts: u32,
    /// Every round, once [`Rounds::decode_all`] ran (the chunks are then freed).
    decoded: Option<Vec<Round>>,
}

/// Longest encoded round: a 3-byte header and eight values of at most 8 bytes.
const MAX_ROUND_BYTES: usize = 3 + 8 * 8;

/// Values of a round with a retransmission count and a new window (the most there are).
const MAX_VALUES: usize = 8;

/// Bits of a header before the values' length codes.
const FLAG_BITS: u32 = 8;

/// Bytes of the header of a round of `values` values: 8 flag bits and a 2-bit code a value.
#[inline]
fn header_len(values: usize) -> usize {
    if values <= 4 { 2 } else { 3 }
}

/// The values a round with `flags` holds: its start and duration always, its shape (four
/// values) unless it is the previous round's, the retransmissions and the window when the
/// flags do not say they are 0 and the previous window.
#[inline]
fn value_count(flags: u8) -> usize {
    2 + 4 * usize::from(flags & SAME_SHAPE == 0)
        + usize::from(flags & NO_RETX == 0)
        + usize::from(flags & SAME_WINDOW == 0)
}

/// One round's bytes: a header (the flags in its low 8 bits, then for each value 2 bits
/// giving its length, 1, 2, 4 or 8 bytes), then the values, little-endian. Hand-written
/// for speed: every value's offset follows from the header alone, so the decoder loads
/// them all at once, where a varint's length is known only once the previous one has been
/// read (the prefix varints this replaced decoded at 23 ns a round, a chain of dependent
/// loads, and LEB128 from `integer-encoding` cost ~580 instructions a round). Written in
/// place at the end of its chunk ([`Rounds::push`]): built in a zeroed buffer on the stack
/// and copied, a round cost ~20 ns more, mostly waiting on that copy's loads of the
/// values' unaligned stores, which the CPU cannot forward.
struct Enc<'a> {
    /// Room for the longest round and the last value's 8-byte store past it.
    buf: &'a mut [u8; MAX_ROUND_BYTES + 8],
    len: usize,
    /// Bytes of the header, from the flags (the values follow).
    header_len: usize,
    header: u32,
    values: u32,
}

impl<'a> Enc<'a> {
    fn new(flags: u8, buf: &'a mut [u8; MAX_ROUND_BYTES + 8]) -> Self {
        let header_len = header_len(value_count(flags));
        Self {
            buf,
            len: header_len,
            header_len,
            header: u32::from(flags),
            values: 0,
        }
    }

    /// Appends `v` in the fewest of 1, 2, 4 or 8 bytes that hold it.
    #[inline]
    fn put(&mut self, v: u64) {
        let bits = u64::BITS - (v | 1).leading_zeros();
        let code = u32::from(bits > 8) + u32::from(bits > 16) + u32::from(bits > 32);
        // At most MAX_VALUES values (`push` writes a round's): always room.
        if let Some(dst) = self
            .buf
            .get_mut(self.len..)
            .and_then(|b| b.first_chunk_mut::<8>())
        {
            *dst = v.to_le_bytes();
        }
        self.len += 1 << code;
        self.header |= code << (FLAG_BITS + 2 * self.values);
        self.values += 1;
    }

    /// Appends `v` zigzag-encoded (small negative numbers stay short).
    #[inline]
    fn put_signed(&mut self, v: i64) {
        self.put(((v << 1) ^ (v >> 63)) as u64);
    }

    /// Writes the header; the round's length.
    fn finish(self) -> usize {
        let h = self.header.to_le_bytes();
        let n = self.header_len;
        if let (Some(dst), Some(src)) = (self.buf.get_mut(..n), h.get(..n)) {
            dst.copy_from_slice(src);
        }
        self.len
    }
}

/// A round's fields as stored: its flags and its values in order.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Raw {
    flags: u8,
    values: [u64; MAX_VALUES],
}

/// Reads the round [`Enc`] wrote at `pos` of `b` and moves past it; `None` if `b` ends
/// first.
#[inline]
fn read(b: &[u8], pos: &mut usize) -> Option<Raw> {
    let rest = b.get(*pos..)?;
    let (raw, len) = match rest.first_chunk::<MAX_ROUND_BYTES>() {
        Some(w) => read_window(w),
        // The end of a chunk: the round's bytes and zeros after them.
        None => {
            let mut w = [0; MAX_ROUND_BYTES];
            let n = rest.len();
            w.get_mut(..n)?.copy_from_slice(rest);
            let (raw, len) = read_window(&w);
            if len > n || n == 0 {
                return None;
            }
            (raw, len)
        }
    };
    *pos += len;
    Some(raw)
}

/// [`read`] from bytes that hold the longest round: each value is one 8-byte load at an
/// offset the header gives (the last value starts at most 8 bytes before the end), masked
/// to its length. Returns the round and its length.
#[inline(always)]
fn read_window(w: &[u8; MAX_ROUND_BYTES]) -> (Raw, usize) {
    let h = u32::from_le_bytes([w[0], w[1], w[2], 0]);
    let flags = (h & ((1 << FLAG_BITS) - 1)) as u8;
    let count = value_count(flags);
    let mut codes = h >> FLAG_BITS;
    let mut at = header_len(count);
    let mut values = [0; MAX_VALUES];
    for v in values.iter_mut().take(count) {
        let len = 1usize << (codes & 3);
        codes >>= 2;
        // `at` stays below MAX_ROUND_BYTES - 8 for every value: the bound lets the compiler
        // drop the range check.
        let from = at.min(MAX_ROUND_BYTES - 8);
        let word = w
            .get(from..from + 8)
            .and_then(|x| x.first_chunk::<8>())
            .map_or(0, |x| u64::from_le_bytes(*x));
        *v = word & (u64::MAX >> (64 - 8 * len));
        at += len;
    }
    (Raw { flags, values }, at)
}

/// The value [`Enc::put_signed`] wrote.
#[inline]
fn unzigzag(v: u64) -> i64 {
    (v >> 1) as i64 ^ -((v & 1) as i64)
}

impl Rounds {
    /// No rounds yet; full chunks beyond `spill`'s policy go to its store.
    pub fn spilling_to(spill: Arc<Spill>) -> Self {
        Self {
            spill: Some(spill),
            ..Self::default()
        }
    }

    fn chunk_rounds(&self) -> usize {
        self.spill
            .as_ref()
            .map_or(CHUNK, |s| s.policy().chunk_rounds)
    }

    /// Writes the full chunks in memory to the store as one blob, if the policy says so.
    fn maybe_spill(&mut self) {
        let Some(sp) = &self.spill else {
            return;
        };
        if self.chunks.len() <= sp.policy().resident_chunks {
            return;
        }
        let mut blob = Vec::with_capacity(self.chunks.iter().map(|c| c.bytes.len() + 4).sum());
        let mut rounds = 0;
        for c in &self.chunks {
            blob.extend_from_slice(&(c.bytes.len() as u32).to_le_bytes());
            blob.extend_from_slice(&c.bytes);
            rounds += c.len;
        }
        // On a store error the chunks stay in memory (the spill keeps the error).
        if let Some(at) = sp.put(&blob) {
            self.blobs.push(Blob {
                at,
                first: self.spilled,
            });
            self.spilled += rounds;
            self.chunks.clear();
        }
    }

    /// Appends a round.
    pub fn push(&mut self, r: &Round) {
        self.last_pkts = r.pkts;
        if let Some(d) = &mut self.decoded {
            d.push(*r);
            self.len += 1;
            return;
        }
        let per_chunk = self.chunk_rounds();
        let fresh = self.chunks.last().is_none_or(|c| c.len >= per_chunk);
        if fresh {
            self.new_chunk(per_chunk);
        }
        let prev = if fresh { Prev::default() } else { self.prev };
        self.prev = Prev::of(r);
        let Some(c) = self.chunks.last_mut() else {
            return;
        };
        let mut flags = 0;
        if r.rwnd_limited {
            flags |= RWND_LIMITED;
        }
        if r.in_recovery {
            flags |= IN_RECOVERY;
        }
        if r.timeout {
            flags |= TIMEOUT;
        }
        if r.recovery_at_end {
            flags |= RECOVERY_AT_END;
        }
        if r.paced {
            flags |= PACED;
        }
        if r.rcv_window == prev.rcv_window {
            flags |= SAME_WINDOW;
        }
        if r.retx == 0 {
            flags |= NO_RETX;
        }
        let same_shape = prev.same_shape(r);
        if same_shape {
            flags |= SAME_SHAPE;
        }
        // Room for the longest round at the chunk's end, cut back to the round's length.
        let at = c.bytes.len();
        c.bytes.resize(at + MAX_ROUND_BYTES + 8, 0);
        let Some(buf) = c
            .bytes
            .get_mut(at..)
            .and_then(|b| b.first_chunk_mut::<{ MAX_ROUND_BYTES + 8 }>())
        else {
            return;
        };
        let mut e = Enc::new(flags, buf);
        e.put_signed(r.start.wrapping_sub(prev.end));
        e.put_signed(r.end.wrapping_sub(r.start));
        if !same_shape {
            e.put(u64::from(r.pkts));
            e.put(r.bytes);
            e.put(r.acked);
        }
        if r.retx != 0 {
            e.put(u64::from(r.retx));
        }
        if r.rcv_window != prev.rcv_window {
            e.put(r.rcv_window);
        }
        if !same_shape {
            e.put(r.max_in_flight);
        }
        let n = e.finish();
        c.bytes.truncate(at + n);
        c.len += 1;
        self.len += 1;
    }

    /// Starts a chunk (out of line: once per [`CHUNK`] rounds).
    #[inline(never)]
    fn new_chunk(&mut self, per_chunk: usize) {
        // A full chunk is final: give back its growth slack, or write it out.
        if let Some(full) = self.chunks.last_mut() {
            full.bytes.shrink_to_fit();
        }
        self.maybe_spill();
        // Sized for typical rounds, so most chunks never reallocate; but the first one
        // starts small: most connections are short, and thousands of them live at once
        // (a full chunk's 3.5 KB each was 10% of `diagnose`'s memory on such captures).
        // Plus the room for a longest round that each round is written into.
        let rounds = if self.len == 0 {
            FIRST_CHUNK_ROUNDS.min(per_chunk)
        } else {
            per_chunk
        };
        self.chunks.push(Chunk {
            bytes: Vec::with_capacity(rounds * BYTES_PER_ROUND + MAX_ROUND_BYTES + 8),
            len: 0,
        });
    }

    /// Number of rounds.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True if there is none.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// True once [`Rounds::decode_all`] made them a plain list.
    pub fn is_decoded(&self) -> bool {
        self.decoded.is_some()
    }

    /// Segments of the latest round (0 without one).
    pub fn last_pkts(&self) -> u32 {
        self.last_pkts
    }

    /// Bytes the encoded rounds take in memory (for tests and the memory notes).
    pub fn encoded_bytes(&self) -> usize {
        self.chunks.iter().map(|c| c.bytes.len()).sum()
    }

    /// Rounds written to the spill's store.
    pub fn spilled(&self) -> usize {
        self.spilled
    }

    /// Decodes every round into a plain list (freeing the encoded chunks and blobs), so
    /// that the many walks of a diagnosis read memory instead of decoding again.
    pub fn decode_all(&mut self) {
        if self.decoded.is_none() {
            // Sized once: growing by doubling copied the list ~log2(n) times.
            let mut all = Vec::with_capacity(self.len);
            all.extend(self.iter());
            self.release();
            self.decoded = Some(all);
        }
    }

    /// Before a diagnosis: decodes every round into a list if there are few enough
    /// ([`DECODE_ALL_MAX_ROUNDS`] or the spill's policy), else leaves them to be decoded on
    /// each walk, so that diagnosing a long connection does not take memory in proportion.
    pub fn prepare(&mut self) {
        let max = self
            .spill
            .as_ref()
            .map_or(DECODE_ALL_MAX_ROUNDS, |s| s.policy().decode_all_max_rounds);
        if self.len <= max {
            self.decode_all();
        }
    }

    /// Frees the encoded chunks and the blobs in the store (the rounds are gone but for a
    /// list [`Rounds::decode_all`] made; end of diagnosis).
    pub fn release(&mut self) {
        if let Some(sp) = &self.spill {
            for b in self.blobs.drain(..) {
                sp.free(b.at);
            }
        }
        self.blobs = Vec::new();
        self.chunks = Vec::new();
        self.spilled = 0;
    }

    /// All rounds in order.
    pub fn iter(&self) -> Iter<'_> {
        self.iter_from(0)
    }

    /// The rounds from index `first` on (decoding at most one chunk's worth to skip).
    pub fn iter_from(&self, first: usize) -> Iter<'_> {
        if let Some(d) = &self.decoded {
            return Iter::Plain(d.get(first..).unwrap_or_default().iter());
        }
        let mut it = Decoder {
            rounds: self,
            cur: Cur::None,
            pos: 0,
            prev: Prev::default(),
            blob: self.blobs.len(),
            buf: Vec::new(),
            buf_next: 0,
            chunk: 0,
        };
        let per_chunk = self.chunk_rounds();
        let mut skip = if first < self.spilled {
            // The blob holding `first`, then whole chunks inside it by their headers.
            let b = self.blobs.partition_point(|b| b.first <= first) - 1;
            it.blob = b;
            it.load_blob();
            let mut skip = first - self.blobs.get(b).map_or(0, |b| b.first);
            while skip >= per_chunk && it.skip_blob_chunk() {
                skip -= per_chunk;
            }
            skip
        } else {
            let i = (first - self.spilled) / per_chunk;
            it.chunk = i;
            first - self.spilled - i * per_chunk
        };
        while skip > 0 && it.next().is_some() {
            skip -= 1;
        }
        Iter::Encoded(it)
    }
}

/// Iterator over the rounds (see [`Rounds::iter_from`]).
#[derive(Clone, Debug)]
pub enum Iter<'a> {
    /// Decoding chunks.
    Encoded(Decoder<'a>),
    /// Reading the decoded list.
    Plain(std::slice::Iter<'a, Round>),
}

impl Iterator for Iter<'_> {
    type Item = Round;

    #[inline]
    fn next(&mut self) -> Option<Round> {
        match self {
            Iter::Encoded(d) => d.next(),
            Iter::Plain(p) => p.next().copied(),
        }
    }
}

/// Where the chunk being decoded is.
#[derive(Clone, Copy, Debug)]
enum Cur {
    /// None yet (or the input ended).
    None,
    /// In the loaded blob, up to this offset.
    Blob(usize),
    /// The chunk in memory at this index.
    Mem(usize),
}

/// Decodes rounds from the blobs (read back one at a time), then the chunks in memory.
#[derive(Clone, Debug)]
pub struct Decoder<'a> {
    rounds: &'a Rounds,
    cur: Cur,
    /// Read position in the current chunk's bytes.
    pos: usize,
    prev: Prev,
    /// Next blob to read back.
    blob: usize,
    /// The blob read back.
    buf: Vec<u8>,
    /// Offset of the next chunk's header in `buf`.
    buf_next: usize,
    /// Next chunk in memory.
    chunk: usize,
}

impl Decoder<'_> {
    /// Reads back blob `self.blob` (empty on a store error: the spill keeps it).
    fn load_blob(&mut self) {
        self.buf.clear();
        self.buf_next = 0;
        if let (Some(b), Some(sp)) = (self.rounds.blobs.get(self.blob), &self.rounds.spill) {
            sp.get(b.at, &mut self.buf);
        }
        self.blob += 1;
    }

    /// The next chunk's header in the loaded blob: its end, and moves past it.
    fn blob_chunk(&mut self) -> Option<(usize, usize)> {
        let at = self.buf_next;
        let len = self.buf.get(at..at + 4)?;
        let len = u32::from_le_bytes(len.try_into().ok()?) as usize;
        let start = at + 4;
        let end = (start + len).min(self.buf.len());
        self.buf_next = end;
        Some((start, end))
    }

    /// Skips the next chunk of the loaded blob without decoding it.
    fn skip_blob_chunk(&mut self) -> bool {
        self.blob_chunk().is_some()
    }

    /// Moves to the next chunk; false at the end.
    fn advance(&mut self) -> bool {
        self.prev = Prev::default();
        loop {
            if self.buf_next < self.buf.len()
                && let Some((start, end)) = self.blob_chunk()
            {
                self.cur = Cur::Blob(end);
                self.pos = start;
                return true;
            }
            if self.blob < self.rounds.blobs.len() {
                self.load_blob();
                continue;
            }
            if self.chunk < self.rounds.chunks.len() {
                self.cur = Cur::Mem(self.chunk);
                self.pos = 0;
                self.chunk += 1;
                return true;
            }
            self.cur = Cur::None;
            return false;
        }
    }
}

/// Decodes the round at `pos` of `b`, against `prev`.
#[inline]
fn decode(b: &[u8], pos: &mut usize, prev: &mut Prev) -> Option<Round> {
    let Raw { flags, values } = read(b, pos)?;
    let mut v = values.into_iter();
    let mut next = || v.next().unwrap_or(0);
    let start = prev.end.wrapping_add(unzigzag(next()));
    let end = start.wrapping_add(unzigzag(next()));
    let same_shape = flags & SAME_SHAPE != 0;
    let (pkts, bytes, acked) = if same_shape {
        (prev.pkts, prev.bytes, prev.acked)
    } else {
        (u32::try_from(next()).ok()?, next(), next())
    };
    let retx = if flags & NO_RETX != 0 {
        0
    } else {
        u32::try_from(next()).ok()?
    };
    let rcv_window = if flags & SAME_WINDOW != 0 {
        prev.rcv_window
    } else {
        next()
    };
    let max_in_flight = if same_shape {
        prev.max_in_flight
    } else {
        next()
    };
    let r = Round {
        start,
        end,
        pkts,
        bytes,
        acked,
        retx,
        rwnd_limited: flags & RWND_LIMITED != 0,
        in_recovery: flags & IN_RECOVERY != 0,
        timeout: flags & TIMEOUT != 0,
        recovery_at_end: flags & RECOVERY_AT_END != 0,
        paced: flags & PACED != 0,
        rcv_window,
        max_in_flight,
    };
    *prev = Prev::of(&r);
    Some(r)
}

impl Iterator for Decoder<'_> {
    type Item = Round;

    fn next(&mut self) -> Option<Round> {
        loop {
            let b: &[u8] = match self.cur {
                Cur::Blob(end) => self.buf.get(..end).unwrap_or_default(),
                Cur::Mem(i) => self.rounds.chunks.get(i).map_or(&[], |c| &c.bytes),
                Cur::None => &[],
            };
            if self.pos < b.len() {
                return decode(b, &mut self.pos, &mut self.prev);
            }
            if !self.advance() {
                return None;
            }
        }
    }
}

impl<'a> IntoIterator for &'a Rounds {
    type Item = Round;
    type IntoIter = Iter<'a>;
    fn into_iter(self) -> Iter<'a> {
        self.iter()
    }
}

impl FromIterator<Round> for Rounds {
    fn from_iter<I: IntoIterator<Item = Round>>(iter: I) -> Self {
        let mut r = Rounds::default();
        r.extend(iter);
        r
    }
}

impl Extend<Round> for Rounds {
    fn extend<I: IntoIterator<Item = Round>>(&mut self, iter: I) {
        for x in iter {
            self.push(&x);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spill::{MemStore, RESIDENT_CHUNKS, SpillPolicy};

    /// Rounds with every field varying, including extremes and negative gaps; the shape
    /// (segments, bytes, acknowledged, flight) repeats in runs of five, which chunk and
    /// blob boundaries cut.
    fn round(i: usize) -> Round {
        let i64v = i as i64;
        let run = i as u64 / 5;
        Round {
            start: 1_700_000_000_000_000_000 + i64v * 1_000_000 - (i64v % 3) * 7,
            end: 1_700_000_000_000_000_000 + (i64v + 1) * 1_000_000 + (i64v % 5),
            pkts: (run % 97) as u32,
            bytes: if i == 5 { u64::MAX } else { (run % 97) * 1448 },
            acked: (run * 31) % 100_000,
            retx: if i.is_multiple_of(11) {
                (i % 7) as u32
            } else {
                0
            },
            rwnd_limited: i.is_multiple_of(3),
            in_recovery: i % 4 == 1,
            timeout: i % 7 == 2,
            recovery_at_end: i % 6 == 1,
            paced: i % 8 == 3,
            rcv_window: if i % 50 < 25 { 65_535 << 7 } else { i as u64 },
            max_in_flight: if i == 9 {
                u64::MAX
            } else {
                (run * 977) % 3_000_000
            },
        }
    }

    #[test]
    fn round_trips_exactly_from_any_index() {
        let n = CHUNK * 3 + 7;
        let want: Vec<Round> = (0..n).map(round).collect();
        let mut r: Rounds = want.iter().copied().collect();
        assert_eq!(r.len(), n);
        assert_eq!(r.last_pkts(), want.last().unwrap().pkts);
        assert_eq!(r.iter().collect::<Vec<_>>(), want);
        let check = |r: &Rounds| {
            for first in [
                0,
                1,
                CHUNK - 1,
                CHUNK,
                CHUNK + 1,
                2 * CHUNK + 3,
                n - 1,
                n,
                n + 5,
            ] {
                let got: Vec<Round> = r.iter_from(first).collect();
                assert_eq!(got, want.get(first..).unwrap_or_default(), "from {first}");
            }
            assert_eq!(r.into_iter().count(), n);
        };
        check(&r);
        // Decoded once for diagnosis: the same rounds, and pushing still appends.
        r.decode_all();
        assert_eq!(r.encoded_bytes(), 0);
        check(&r);
        r.push(&round(n));
        assert_eq!(r.len(), n + 1);
        assert_eq!(r.iter_from(n).collect::<Vec<_>>(), vec![round(n)]);
    }

    fn spilling(policy: SpillPolicy) -> (Arc<Spill>, Rounds) {
        let sp = Arc::new(Spill::new(Box::<MemStore>::default(), policy));
        (sp.clone(), Rounds::spilling_to(sp))
    }

    #[test]
    fn spilled_rounds_read_back_exactly_from_any_index() {
        let n = CHUNK * 13 + 7;
        let want: Vec<Round> = (0..n).map(round).collect();
        for policy in [
            SpillPolicy::default(),
            SpillPolicy::tiny(),
            SpillPolicy {
                chunk_rounds: 3,
                resident_chunks: 2,
                decode_all_max_rounds: 0,
                ..SpillPolicy::default()
            },
        ] {
            let (sp, mut r) = spilling(policy);
            r.extend(want.iter().copied());
            assert!(r.spilled() > 0, "{policy:?}");
            assert!(sp.live_blobs() > 0);
            // At most the resident chunks and the one being filled stay in memory.
            let resident = r.len() - r.spilled();
            assert!(
                resident <= (policy.resident_chunks + 1) * policy.chunk_rounds,
                "{policy:?}: {resident} rounds in memory"
            );
            assert_eq!(r.iter().collect::<Vec<_>>(), want, "{policy:?}");
            for first in (0..n + 3)
                .step_by(97)
                .chain([n - 1, n, r.spilled(), CHUNK * 4])
            {
                let got: Vec<Round> = r.iter_from(first).take(600).collect();
                let end = (first + 600).min(n);
                assert_eq!(
                    got,
                    want.get(first..end).unwrap_or_default(),
                    "{policy:?} from {first}"
                );
            }
            r.decode_all();
            assert_eq!(sp.live_blobs(), 0, "blobs freed once decoded");
            assert_eq!(r.iter().collect::<Vec<_>>(), want);
            assert!(sp.take_error().is_none());
        }
    }

    #[test]
    fn default_policy_keeps_a_few_chunks_in_memory() {
        let (sp, mut r) = spilling(SpillPolicy::default());
        r.extend((0..100_000).map(round));
        assert!(r.len() - r.spilled() <= (RESIDENT_CHUNKS + 1) * CHUNK);
        assert!(r.encoded_bytes() < 100_000, "{} bytes", r.encoded_bytes());
        assert!(sp.bytes_written() > 1_000_000);
        r.release();
        assert_eq!(sp.live_blobs(), 0);
    }

    #[test]
    fn a_failing_store_keeps_the_rounds_in_memory_and_reports() {
        let sp = crate::spill::broken_tiny();
        let mut r = Rounds::spilling_to(sp.clone());
        let want: Vec<Round> = (0..50).map(round).collect();
        r.extend(want.iter().copied());
        assert_eq!(r.spilled(), 0);
        assert_eq!(r.iter().collect::<Vec<_>>(), want);
        assert_eq!(sp.take_error().unwrap().to_string(), "no space left");
    }

    #[test]
    fn values_round_trip_at_every_length_and_at_the_end_of_the_bytes() {
        let mut values = vec![0, 1, u64::MAX, u64::MAX - 1];
        for bits in 1..64 {
            values.extend([(1 << bits) - 1, 1 << bits, (1 << bits) + 1]);
        }
        // Bytes a value takes, by its size (an independent statement of `Enc::put`'s rule).
        let len = |v: u64| match v {
            0..=0xff => 1,
            0x100..=0xffff => 2,
            0x1_0000..=0xffff_ffff => 4,
            _ => 8,
        };
        for &v in &values {
            for flags in [
                0,
                RWND_LIMITED | NO_RETX | SAME_WINDOW,
                SAME_SHAPE,
                SAME_SHAPE | NO_RETX | SAME_WINDOW | IN_RECOVERY,
                TIMEOUT | RWND_LIMITED,
                TIMEOUT | SAME_SHAPE | NO_RETX | SAME_WINDOW | IN_RECOVERY | RWND_LIMITED,
                RECOVERY_AT_END | TIMEOUT | SAME_SHAPE | NO_RETX | SAME_WINDOW | IN_RECOVERY,
                PACED | RWND_LIMITED,
                PACED | RECOVERY_AT_END | TIMEOUT | SAME_SHAPE | NO_RETX | SAME_WINDOW,
                PACED,
            ] {
                let count = value_count(flags);
                // The value under test in each place, the others small or large.
                for place in 0..count {
                    let want: Vec<u64> = (0..count)
                        .map(|i| if i == place { v } else { (i as u64) << (i * 8) })
                        .collect();
                    let mut buf = [0; MAX_ROUND_BYTES + 8];
                    let mut e = Enc::new(flags, &mut buf);
                    for &x in &want {
                        e.put(x);
                    }
                    let n = e.finish();
                    let bytes = buf[..n].to_vec();
                    let size: usize = want.iter().map(|&x| len(x)).sum();
                    assert_eq!(bytes.len(), header_len(count) + size, "{v:#x}");
                    // Alone (the reader has fewer bytes than the longest round), and
                    // followed by other bytes.
                    for tail in [&[][..], &[0xff; 80][..]] {
                        let b = [&bytes[..], tail].concat();
                        let mut pos = 0;
                        let raw = read(&b, &mut pos).unwrap();
                        assert_eq!(raw.flags, flags);
                        assert_eq!(raw.values.get(..count).unwrap(), &want[..], "{v:#x}");
                        assert_eq!(pos, bytes.len());
                    }
                    // Cut short: nothing.
                    let mut pos = 0;
                    assert_eq!(read(&bytes[..bytes.len() - 1], &mut pos), None, "{v:#x}");
                    assert_eq!(pos, 0);
                }
            }
        }
        for v in [0, 1, -1, 63, -64, 64, -65, i64::MAX, i64::MIN] {
            let mut buf = [0; MAX_ROUND_BYTES + 8];
            let mut e = Enc::new(NO_RETX | SAME_WINDOW, &mut buf);
            e.put_signed(v);
            for _ in 1..6 {
                e.put(0);
            }
            let n = e.finish();
            let mut pos = 0;
            let raw = read(&buf[..n], &mut pos).unwrap();
            assert_eq!(unzigzag(raw.values[0]), v);
        }
    }

    #[test]
    fn typical_rounds_are_small() {
        // Back-to-back rounds of a bulk sender: 1 ms each, about 10 segments, same window.
        let bulk = |pkts: fn(i64) -> u32| -> Rounds {
            (0..1000)
                .map(|i| Round {
                    start: 1_700_000_000_000_000_000 + i * 1_000_000,
                    end: 1_700_000_000_000_000_000 + (i + 1) * 1_000_000,
                    pkts: pkts(i),
                    bytes: 14_480,
                    acked: 14_480,
                    rcv_window: 3 << 20,
                    max_in_flight: 14_480,
                    ..Round::default()
                })
                .collect()
        };
        // The same shape each time: a header, the gap (0) and the duration (1 ms).
        let per_round = bulk(|_| 10).encoded_bytes() as f64 / 1000.0;
        assert!(per_round <= 8.0, "{per_round} bytes per round");
        // Another shape every round: each value encoded.
        let per_round = bulk(|i| 10 + (i % 2) as u32).encoded_bytes() as f64 / 1000.0;
        assert!(per_round < 16.0, "{per_round} bytes per round");
    }

    #[test]
    fn empty() {
        let r = Rounds::default();
        assert!(r.is_empty());
        assert_eq!(r.last_pkts(), 0);
        assert_eq!(r.iter_from(3).count(), 0);
    }
}
