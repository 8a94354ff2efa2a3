//! [`Rounds`]: a sender's round trips, stored delta- and varint-encoded in chunks.
//!
//! A long bulk connection has one round per few segments: kept as a `Vec<Round>` (72 bytes
//! each, doubling as it grew) they were most of `diagnose`'s memory, and the doubling copies
//! and fresh pages ~10% of its time. Encoded (a prefix varint per field, [`Enc::put`]), a
//! typical round takes 10-16 bytes; chunks of
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

/// The fields the next round is encoded against.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Prev {
    end: i64,
    rcv_window: u64,
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
    last: Option<Round>,
    /// Every round, once [`Rounds::decode_all`] ran (the chunks are then freed).
    decoded: Option<Vec<Round>>,
}

/// Longest encoded round: the flags byte and eight varints of at most 9 bytes.
const MAX_ROUND_BYTES: usize = 1 + 8 * 9;

/// One round's bytes, built on the stack and appended with one copy: eight small appends
/// cost about three times as much (a capacity check and a `memcpy` call each).
struct Enc {
    buf: [u8; MAX_ROUND_BYTES],
    len: usize,
}

impl Enc {
    fn new(flags: u8) -> Self {
        let mut buf = [0; MAX_ROUND_BYTES];
        buf[0] = flags;
        Self { buf, len: 1 }
    }

    /// Appends `v` as a prefix varint: `n` bytes (1 to 8), little-endian, whose lowest `n`
    /// bits are `n - 1` ones then a zero and whose other `7 n` bits hold the value; a first
    /// byte of eight ones means the value follows in 8 bytes. As small as LEB128 (one bit a
    /// byte), but its length is known from the first byte, so that a value is read with one
    /// load and two shifts instead of a loop over its bytes. Hand-written: the LEB128 of
    /// `integer-encoding` cost about 580 instructions a round to encode and decode (a
    /// tenth of `diagnose` on a bulk transfer, which closes a round every few segments).
    #[inline]
    fn put(&mut self, v: u64) {
        // At most eight values of at most 9 bytes follow the flags: always room.
        let Some(dst) = self
            .buf
            .get_mut(self.len..)
            .and_then(|b| b.first_chunk_mut::<9>())
        else {
            return;
        };
        let bits = u64::BITS - (v | 1).leading_zeros();
        if bits <= 56 {
            let n = bits.div_ceil(7);
            let tagged = (v << n) | ((1 << (n - 1)) - 1);
            if let Some(w) = dst.first_chunk_mut::<8>() {
                *w = tagged.to_le_bytes();
            }
            self.len += n as usize;
        } else {
            dst[0] = 0xff;
            if let Some(w) = dst.last_chunk_mut::<8>() {
                *w = v.to_le_bytes();
            }
            self.len += 9;
        }
    }

    /// Appends `v` zigzag-encoded (small negative numbers stay short).
    #[inline]
    fn put_signed(&mut self, v: i64) {
        self.put(((v << 1) ^ (v >> 63)) as u64);
    }

    fn bytes(&self) -> &[u8] {
        self.buf.get(..self.len).unwrap_or_default()
    }
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
    pub fn push(&mut self, r: Round) {
        if let Some(d) = &mut self.decoded {
            d.push(r);
            self.len += 1;
            self.last = Some(r);
            return;
        }
        let per_chunk = self.chunk_rounds();
        let fresh = self.chunks.last().is_none_or(|c| c.len >= per_chunk);
        if fresh {
            // A full chunk is final: give back its growth slack, or write it out.
            if let Some(full) = self.chunks.last_mut() {
                full.bytes.shrink_to_fit();
            }
            self.maybe_spill();
            // Sized for typical rounds, so most chunks never reallocate; but the first one
            // starts small: most connections are short, and thousands of them live at once
            // (a full chunk's 3.5 KB each was 10% of `diagnose`'s memory on such captures).
            let rounds = if self.len == 0 {
                FIRST_CHUNK_ROUNDS.min(per_chunk)
            } else {
                per_chunk
            };
            self.chunks.push(Chunk {
                bytes: Vec::with_capacity(rounds * 14),
                len: 0,
            });
        }
        let prev = match (&self.last, fresh) {
            (Some(l), false) => Prev {
                end: l.end,
                rcv_window: l.rcv_window,
            },
            _ => Prev::default(),
        };
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
        if r.rcv_window == prev.rcv_window {
            flags |= SAME_WINDOW;
        }
        if r.retx == 0 {
            flags |= NO_RETX;
        }
        let mut e = Enc::new(flags);
        e.put_signed(r.start.wrapping_sub(prev.end));
        e.put_signed(r.end.wrapping_sub(r.start));
        e.put(u64::from(r.pkts));
        e.put(r.bytes);
        e.put(r.acked);
        if r.retx != 0 {
            e.put(u64::from(r.retx));
        }
        if r.rcv_window != prev.rcv_window {
            e.put(r.rcv_window);
        }
        e.put(r.max_in_flight);
        c.bytes.extend_from_slice(e.bytes());
        c.len += 1;
        self.len += 1;
        self.last = Some(r);
    }

    /// Number of rounds.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True if there is none.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The latest round.
    pub fn last(&self) -> Option<&Round> {
        self.last.as_ref()
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

/// Reads the value [`Enc::put`] wrote at `pos` of `b` and moves past it; `None` if `b` ends
/// first.
#[inline]
fn take(b: &[u8], pos: &mut usize) -> Option<u64> {
    let rest = b.get(*pos..)?;
    let n = rest.first()?.trailing_ones() + 1;
    if n > 8 {
        let v = u64::from_le_bytes(*rest.get(1..)?.first_chunk::<8>()?);
        *pos += 9;
        return Some(v);
    }
    if rest.len() < n as usize {
        return None;
    }
    let w = match rest.first_chunk::<8>() {
        Some(w) => u64::from_le_bytes(*w),
        // The end of a chunk: fewer than 8 bytes left.
        None => {
            let mut w = [0; 8];
            for (d, s) in w.iter_mut().zip(rest) {
                *d = *s;
            }
            u64::from_le_bytes(w)
        }
    };
    *pos += n as usize;
    // Keep the value's `n` bytes, drop the tag's `n` bits.
    Some((w << (64 - 8 * n)) >> (64 - 7 * n))
}

/// [`take`] of a value written by [`Enc::put_signed`].
#[inline]
fn take_signed(b: &[u8], pos: &mut usize) -> Option<i64> {
    let v = take(b, pos)?;
    Some((v >> 1) as i64 ^ -((v & 1) as i64))
}

/// [`take`] of a value that fits 32 bits.
#[inline]
fn take_u32(b: &[u8], pos: &mut usize) -> Option<u32> {
    u32::try_from(take(b, pos)?).ok()
}

/// Decodes the round at `pos` of `b`, against `prev`.
#[inline]
fn decode(b: &[u8], pos: &mut usize, prev: &mut Prev) -> Option<Round> {
    let flags = *b.get(*pos)?;
    *pos += 1;
    let start = prev.end.wrapping_add(take_signed(b, pos)?);
    let end = start.wrapping_add(take_signed(b, pos)?);
    let pkts = take_u32(b, pos)?;
    let bytes = take(b, pos)?;
    let acked = take(b, pos)?;
    let retx = if flags & NO_RETX != 0 {
        0
    } else {
        take_u32(b, pos)?
    };
    let rcv_window = if flags & SAME_WINDOW != 0 {
        prev.rcv_window
    } else {
        take(b, pos)?
    };
    let max_in_flight = take(b, pos)?;
    *prev = Prev { end, rcv_window };
    Some(Round {
        start,
        end,
        pkts,
        bytes,
        acked,
        retx,
        rwnd_limited: flags & RWND_LIMITED != 0,
        in_recovery: flags & IN_RECOVERY != 0,
        rcv_window,
        max_in_flight,
    })
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
            self.push(x);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spill::{MemStore, RESIDENT_CHUNKS, SpillPolicy};

    /// Rounds with every field varying, including extremes and negative gaps.
    fn round(i: usize) -> Round {
        let i64v = i as i64;
        Round {
            start: 1_700_000_000_000_000_000 + i64v * 1_000_000 - (i64v % 3) * 7,
            end: 1_700_000_000_000_000_000 + (i64v + 1) * 1_000_000 + (i64v % 5),
            pkts: (i % 97) as u32,
            bytes: if i == 5 {
                u64::MAX
            } else {
                (i as u64 % 97) * 1448
            },
            acked: (i as u64 * 31) % 100_000,
            retx: if i.is_multiple_of(11) {
                (i % 7) as u32
            } else {
                0
            },
            rwnd_limited: i.is_multiple_of(3),
            in_recovery: i % 4 == 1,
            rcv_window: if i % 50 < 25 { 65_535 << 7 } else { i as u64 },
            max_in_flight: if i == 9 {
                u64::MAX
            } else {
                (i as u64 * 977) % 3_000_000
            },
        }
    }

    #[test]
    fn round_trips_exactly_from_any_index() {
        let n = CHUNK * 3 + 7;
        let want: Vec<Round> = (0..n).map(round).collect();
        let mut r: Rounds = want.iter().copied().collect();
        assert_eq!(r.len(), n);
        assert_eq!(r.last(), want.last());
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
        r.push(round(n));
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
    fn varints_round_trip_at_every_length_and_at_the_end_of_the_bytes() {
        let mut values = vec![0, 1, u64::MAX, u64::MAX - 1];
        for bits in 1..64 {
            values.extend([(1 << bits) - 1, 1 << bits, (1 << bits) + 1]);
        }
        for &v in &values {
            let mut e = Enc::new(0);
            e.put(v);
            let bytes = e.bytes().get(1..).unwrap().to_vec();
            // As long as LEB128 (7 bits a byte) up to 56 bits, 9 bytes beyond.
            let bits = 64 - (v | 1).leading_zeros() as usize;
            let want = if bits <= 56 { bits.div_ceil(7) } else { 9 };
            assert_eq!(bytes.len(), want, "{v:#x}");
            // Alone (the reader has fewer than 8 bytes), and followed by other bytes.
            for tail in [&[][..], &[0xff; 16][..]] {
                let b = [&bytes[..], tail].concat();
                let mut pos = 0;
                assert_eq!(take(&b, &mut pos), Some(v), "{v:#x}");
                assert_eq!(pos, bytes.len());
            }
            // Cut short: nothing.
            let mut pos = 0;
            assert_eq!(take(&bytes[..bytes.len() - 1], &mut pos), None, "{v:#x}");
        }
        for v in [0, 1, -1, 63, -64, 64, -65, i64::MAX, i64::MIN] {
            let mut e = Enc::new(0);
            e.put_signed(v);
            let mut pos = 1;
            assert_eq!(take_signed(e.bytes(), &mut pos), Some(v));
        }
    }

    #[test]
    fn typical_rounds_are_small() {
        // Back-to-back rounds of a bulk sender: 1 ms each, 10 segments, same window.
        let r: Rounds = (0..1000)
            .map(|i| Round {
                start: 1_700_000_000_000_000_000 + i * 1_000_000,
                end: 1_700_000_000_000_000_000 + (i + 1) * 1_000_000,
                pkts: 10,
                bytes: 14_480,
                acked: 14_480,
                rcv_window: 3 << 20,
                max_in_flight: 14_480,
                ..Round::default()
            })
            .collect();
        let per_round = r.encoded_bytes() as f64 / 1000.0;
        assert!(per_round < 16.0, "{per_round} bytes per round");
    }

    #[test]
    fn empty() {
        let r = Rounds::default();
        assert!(r.is_empty());
        assert!(r.last().is_none());
        assert_eq!(r.iter_from(3).count(), 0);
    }
}
