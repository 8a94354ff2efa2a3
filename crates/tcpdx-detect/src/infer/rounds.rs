//! [`Rounds`]: a sender's round trips, stored delta- and varint-encoded in chunks.
//!
//! A long bulk connection has one round per few segments: kept as a `Vec<Round>` (72 bytes
//! each, doubling as it grew) they were most of `diagnose`'s memory, and the doubling copies
//! and fresh pages ~10% of its time. Encoded, a typical round takes 10-16 bytes; chunks of
//! [`CHUNK`] rounds never move once written and each starts from a clean state, so
//! iteration can start at any chunk. Lossless: every field decodes to its exact value.
//! Diagnosis walks the rounds a dozen times, so it first decodes them once
//! ([`Rounds::decode_all`]) into a plain list that lives only while the connection is
//! diagnosed.

use integer_encoding::VarInt;

use super::Round;

/// Rounds per chunk (tcpdx choice: iteration from an index decodes under one chunk to skip).
const CHUNK: usize = 256;

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

/// A sender's rounds in order: append, length, the latest, and iteration from any index.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Rounds {
    chunks: Vec<Chunk>,
    len: usize,
    last: Option<Round>,
    /// Every round, once [`Rounds::decode_all`] ran (the chunks are then freed).
    decoded: Option<Vec<Round>>,
}

fn put<V: VarInt>(out: &mut Vec<u8>, v: V) {
    let mut buf = [0u8; 10];
    let n = v.encode_var(&mut buf);
    out.extend_from_slice(buf.get(..n).unwrap_or_default());
}

impl Rounds {
    /// Appends a round.
    pub fn push(&mut self, r: Round) {
        if let Some(d) = &mut self.decoded {
            d.push(r);
            self.len += 1;
            self.last = Some(r);
            return;
        }
        let fresh = self.chunks.last().is_none_or(|c| c.len >= CHUNK);
        if fresh {
            // A full chunk is final: give back its growth slack.
            if let Some(full) = self.chunks.last_mut() {
                full.bytes.shrink_to_fit();
            }
            // Sized for typical rounds, so most chunks never reallocate.
            self.chunks.push(Chunk {
                bytes: Vec::with_capacity(CHUNK * 14),
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
        let out = &mut c.bytes;
        out.push(flags);
        put(out, r.start.wrapping_sub(prev.end));
        put(out, r.end.wrapping_sub(r.start));
        put(out, r.pkts);
        put(out, r.bytes);
        put(out, r.acked);
        if r.retx != 0 {
            put(out, r.retx);
        }
        if r.rcv_window != prev.rcv_window {
            put(out, r.rcv_window);
        }
        put(out, r.max_in_flight);
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

    /// Bytes the encoded rounds take (for tests and the memory notes).
    pub fn encoded_bytes(&self) -> usize {
        self.chunks.iter().map(|c| c.bytes.len()).sum()
    }

    /// Decodes every round into a plain list (freeing the encoded chunks), so that the
    /// many walks of a diagnosis read memory instead of decoding again.
    pub fn decode_all(&mut self) {
        if self.decoded.is_none() {
            let all: Vec<Round> = self.iter().collect();
            self.decoded = Some(all);
            self.chunks = Vec::new();
        }
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
            chunks: self.chunks.get(first / CHUNK..).unwrap_or_default(),
            pos: 0,
            prev: Prev::default(),
        };
        for _ in 0..first % CHUNK {
            if it.next().is_none() {
                break;
            }
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

/// Decodes rounds from the chunks.
#[derive(Clone, Debug)]
pub struct Decoder<'a> {
    /// The current chunk first.
    chunks: &'a [Chunk],
    /// Read position in the current chunk's bytes.
    pos: usize,
    prev: Prev,
}

impl Decoder<'_> {
    fn take<V: VarInt>(&mut self, bytes: &[u8]) -> Option<V> {
        let (v, n) = V::decode_var(bytes.get(self.pos..)?)?;
        self.pos += n;
        Some(v)
    }
}

impl Iterator for Decoder<'_> {
    type Item = Round;

    fn next(&mut self) -> Option<Round> {
        let mut chunk = self.chunks.first()?;
        if self.pos >= chunk.bytes.len() {
            self.chunks = self.chunks.get(1..)?;
            chunk = self.chunks.first()?;
            self.pos = 0;
            self.prev = Prev::default();
        }
        let b = &chunk.bytes;
        let flags = *b.get(self.pos)?;
        self.pos += 1;
        let start = self.prev.end.wrapping_add(self.take::<i64>(b)?);
        let end = start.wrapping_add(self.take::<i64>(b)?);
        let pkts = self.take(b)?;
        let bytes = self.take(b)?;
        let acked = self.take(b)?;
        let retx = if flags & NO_RETX != 0 {
            0
        } else {
            self.take(b)?
        };
        let rcv_window = if flags & SAME_WINDOW != 0 {
            self.prev.rcv_window
        } else {
            self.take(b)?
        };
        let max_in_flight = self.take(b)?;
        self.prev = Prev { end, rcv_window };
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
        for x in iter {
            r.push(x);
        }
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
