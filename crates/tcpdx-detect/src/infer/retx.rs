//! [`RecentRetx`]: a sender's recent retransmissions, remembered until a later segment
//! proves them spurious (a D-SACK, an ACK too early to answer them, Wireshark's flag).
//!
//! A long connection retransmits throughout, so only the latest few stay in memory; older
//! ones go to the [`Spill`] in blobs of [`SpillPolicy::list_records`](crate::SpillPolicy)
//! with a summary (sequence and frame ranges, how many are proven spurious or not), so
//! that a lookup reads back only the blobs that may hold a match, and rewrites one only
//! when it marks a retransmission in it. Lookups run from the latest back, as on the plain
//! list this replaces; at most [`MAX_RECENT_RETX`](super::sender::MAX_RECENT_RETX) are
//! remembered, the oldest forgotten first.

use std::collections::VecDeque;
use std::sync::Arc;

use crate::spill::list::{Reader, Record, Writer};
use crate::spill::{BlobRef, Spill};

/// One retransmission.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Retx {
    /// Sequence number.
    pub seq: u64,
    /// Sequence end.
    pub end: u64,
    /// Sent at (ns).
    pub ts: i64,
    /// Its frame.
    pub frame: u64,
    /// Proven spurious already.
    pub spurious: bool,
}

impl Record for Retx {
    fn encode(&self, w: &mut Writer<'_>) {
        w.u64(self.seq)
            .u64(self.end)
            .i64(self.ts)
            .u64(self.frame)
            .bool(self.spurious);
    }

    fn decode(r: &mut Reader<'_>) -> Option<Self> {
        Some(Self {
            seq: r.u64()?,
            end: r.u64()?,
            ts: r.i64()?,
            frame: r.u64()?,
            spurious: r.bool()?,
        })
    }
}

/// What a blob holds, to skip it without reading it back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Summary {
    min_seq: u64,
    max_seq: u64,
    max_end: u64,
    min_frame: u64,
    max_frame: u64,
    /// Retransmissions not yet proven spurious.
    unproven: usize,
    /// Proven spurious.
    proven: usize,
}

impl Summary {
    fn of(xs: &[Retx]) -> Self {
        let mut s = Summary {
            min_seq: u64::MAX,
            max_seq: 0,
            max_end: 0,
            min_frame: u64::MAX,
            max_frame: 0,
            unproven: 0,
            proven: 0,
        };
        for x in xs {
            s.min_seq = s.min_seq.min(x.seq);
            s.max_seq = s.max_seq.max(x.seq);
            s.max_end = s.max_end.max(x.end);
            s.min_frame = s.min_frame.min(x.frame);
            s.max_frame = s.max_frame.max(x.frame);
            if x.spurious {
                s.proven += 1;
            } else {
                s.unproven += 1;
            }
        }
        s
    }
}

/// Where a blob's records are.
#[derive(Clone, Debug)]
enum Data {
    /// In the store.
    Stored(BlobRef),
    /// In memory (the store failed; the spill keeps the error).
    Mem(Vec<Retx>),
}

#[derive(Clone, Debug)]
struct Blob {
    data: Data,
    /// Records in it, of which the first `gone` are forgotten (the oldest).
    len: usize,
    gone: usize,
    summary: Summary,
}

/// Which retransmissions a lookup is after.
#[derive(Clone, Copy, Debug)]
pub enum Match {
    /// Of this sequence number.
    Seq(u64),
    /// Sent in this frame.
    Frame(u64),
    /// Overlapping `[left, right)` (a D-SACK block).
    Overlap(u64, u64),
}

impl Match {
    fn hits(self, x: &Retx) -> bool {
        match self {
            Match::Seq(s) => x.seq == s,
            Match::Frame(f) => x.frame == f,
            Match::Overlap(l, r) => x.seq < r && x.end > l,
        }
    }

    fn may_hit(self, s: &Summary) -> bool {
        match self {
            Match::Seq(q) => (s.min_seq..=s.max_seq).contains(&q),
            Match::Frame(f) => (s.min_frame..=s.max_frame).contains(&f),
            Match::Overlap(l, r) => s.min_seq < r && s.max_end > l,
        }
    }
}

/// The recent retransmissions (see the module doc).
#[derive(Clone, Debug, Default)]
pub struct RecentRetx {
    spill: Option<Arc<Spill>>,
    per_blob: usize,
    /// Older records, oldest first.
    blobs: VecDeque<Blob>,
    /// The latest, after the blobs'.
    tail: VecDeque<Retx>,
}

impl RecentRetx {
    /// None yet; older ones go to `spill`'s store.
    pub fn spilling_to(spill: Arc<Spill>) -> Self {
        Self {
            per_blob: spill.policy().list_records.max(1),
            spill: Some(spill),
            ..Self::default()
        }
    }

    /// Number remembered.
    pub fn len(&self) -> usize {
        self.tail.len() + self.blobs.iter().map(|b| b.len - b.gone).sum::<usize>()
    }

    /// True if none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Remembers `x`, forgetting the oldest first if `cap` are remembered.
    pub fn push(&mut self, x: Retx, cap: usize) {
        if self.len() >= cap {
            self.forget_oldest();
        }
        if let Some(sp) = &self.spill
            && self.tail.len() >= self.per_blob
        {
            let xs: Vec<Retx> = self.tail.drain(..self.per_blob).collect();
            let summary = Summary::of(&xs);
            let data = match sp.put_records(&encode(&xs)) {
                Some(at) => Data::Stored(at),
                None => Data::Mem(xs),
            };
            self.blobs.push_back(Blob {
                data,
                len: self.per_blob,
                gone: 0,
                summary,
            });
        }
        self.tail.push_back(x);
    }

    fn forget_oldest(&mut self) {
        let Some(b) = self.blobs.front_mut() else {
            self.tail.pop_front();
            return;
        };
        b.gone += 1;
        if b.gone >= b.len
            && let Some(b) = self.blobs.pop_front()
            && let (Data::Stored(at), Some(sp)) = (b.data, &self.spill)
        {
            sp.free(at);
        }
    }

    /// True if a retransmission matching `m` was proven spurious.
    pub fn any_proven(&self, m: Match) -> bool {
        if self.tail.iter().any(|x| x.spurious && m.hits(x)) {
            return true;
        }
        self.blobs.iter().any(|b| {
            b.summary.proven > 0
                && m.may_hit(&b.summary)
                && self
                    .records(b)
                    .iter()
                    .skip(b.gone)
                    .any(|x| x.spurious && m.hits(x))
        })
    }

    /// Marks spurious the latest retransmission matching `m` not proven yet (or, with
    /// `all`, every one); those marked, latest first.
    pub fn prove(&mut self, m: Match, all: bool) -> Vec<Retx> {
        let mut out = Vec::new();
        for x in self.tail.iter_mut().rev() {
            if !x.spurious && m.hits(x) {
                x.spurious = true;
                out.push(*x);
                if !all {
                    return out;
                }
            }
        }
        for i in (0..self.blobs.len()).rev() {
            let Some(b) = self.blobs.get(i) else {
                continue;
            };
            if b.summary.unproven == 0 || !m.may_hit(&b.summary) {
                continue;
            }
            let mut xs = self.records(b);
            let before = out.len();
            for x in xs.iter_mut().skip(b.gone).rev() {
                if !x.spurious && m.hits(x) {
                    x.spurious = true;
                    out.push(*x);
                    if !all {
                        break;
                    }
                }
            }
            if out.len() > before {
                self.rewrite(i, xs);
                if !all {
                    return out;
                }
            }
        }
        out
    }

    /// The records of `b` (none if the store cannot give them back: the spill keeps the
    /// error).
    fn records(&self, b: &Blob) -> Vec<Retx> {
        match (&b.data, &self.spill) {
            (Data::Mem(xs), _) => xs.clone(),
            (Data::Stored(at), Some(sp)) => {
                let mut buf = Vec::new();
                sp.get(*at, &mut buf);
                let mut r = Reader(&buf);
                let mut xs = Vec::with_capacity(b.len);
                while let Some(x) = Retx::decode(&mut r) {
                    xs.push(x);
                }
                xs
            }
            (Data::Stored(_), None) => Vec::new(),
        }
    }

    /// Replaces blob `i`'s records by `xs` (written anew, the old blob freed).
    fn rewrite(&mut self, i: usize, xs: Vec<Retx>) {
        let summary = Summary::of(&xs);
        let Some(b) = self.blobs.get_mut(i) else {
            return;
        };
        b.summary = summary;
        let Some(sp) = &self.spill else {
            b.data = Data::Mem(xs);
            return;
        };
        if let Data::Stored(old) = b.data {
            sp.free(old);
        }
        b.data = match sp.put_records(&encode(&xs)) {
            Some(at) => Data::Stored(at),
            None => Data::Mem(xs),
        };
    }

    /// Frees the blobs in the store (end of the connection).
    pub fn release(&mut self) {
        if let Some(sp) = &self.spill {
            for b in self.blobs.drain(..) {
                if let Data::Stored(at) = b.data {
                    sp.free(at);
                }
            }
        }
        self.blobs = VecDeque::new();
    }
}

fn encode(xs: &[Retx]) -> Vec<u8> {
    let mut buf = Vec::new();
    let mut w = Writer(&mut buf);
    for x in xs {
        x.encode(&mut w);
    }
    buf
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spill::{MemStore, SpillPolicy};

    /// The plain list this replaces, as the sender used it.
    #[derive(Default)]
    struct Plain(VecDeque<Retx>);

    impl Plain {
        fn push(&mut self, x: Retx, cap: usize) {
            if self.0.len() == cap {
                self.0.pop_front();
            }
            self.0.push_back(x);
        }
        fn any_proven(&self, m: Match) -> bool {
            self.0.iter().any(|x| x.spurious && m.hits(x))
        }
        fn prove(&mut self, m: Match, all: bool) -> Vec<Retx> {
            let mut out = Vec::new();
            for x in self.0.iter_mut().rev() {
                if !x.spurious && m.hits(x) {
                    x.spurious = true;
                    out.push(*x);
                    if !all {
                        break;
                    }
                }
            }
            out
        }
    }

    fn retx(i: u64) -> Retx {
        // Sequence numbers repeat (the same segment retransmitted again), frames do not.
        let seq = (i % 37) * 1000;
        Retx {
            seq,
            end: seq + 1000,
            ts: i as i64 * 10,
            frame: 100 + i,
            spurious: false,
        }
    }

    #[test]
    fn behaves_as_the_plain_list() {
        for (per_blob, cap) in [(1, 50), (4, 50), (16, 4096), (16, 30)] {
            let policy = SpillPolicy {
                list_records: per_blob,
                ..SpillPolicy::default()
            };
            let sp = Arc::new(Spill::new(Box::<MemStore>::default(), policy));
            let mut r = RecentRetx::spilling_to(sp.clone());
            let mut p = Plain::default();
            for i in 0..400u64 {
                r.push(retx(i), cap);
                p.push(retx(i), cap);
                assert_eq!(r.len(), p.0.len(), "{per_blob}/{cap} at {i}");
                // Lookups of every kind, some hitting old (spilled or forgotten) records.
                let ms = [
                    Match::Seq((i * 7 % 37) * 1000),
                    Match::Frame(100 + i.saturating_sub(i % 23 * 3)),
                    Match::Overlap((i % 11) * 3000 + 500, (i % 11) * 3000 + 2500),
                ];
                for (k, m) in ms.into_iter().enumerate() {
                    assert_eq!(
                        r.any_proven(m),
                        p.any_proven(m),
                        "{per_blob}/{cap} {i} {m:?}"
                    );
                    if (i + k as u64).is_multiple_of(5) {
                        let all = k == 2;
                        assert_eq!(
                            r.prove(m, all),
                            p.prove(m, all),
                            "{per_blob}/{cap} {i} {m:?}"
                        );
                    }
                }
            }
            assert!(sp.live_blobs() > 0, "{per_blob}/{cap}: nothing spilled");
            assert!(r.tail.len() <= per_blob);
            r.release();
            assert_eq!(sp.live_blobs(), 0);
            assert!(sp.take_error().is_none());
        }
    }

    #[test]
    fn without_a_spill_everything_stays_in_memory() {
        let mut r = RecentRetx::default();
        for i in 0..100 {
            r.push(retx(i), 64);
        }
        assert_eq!(r.len(), 64);
        assert!(r.blobs.is_empty());
        let proven = Retx {
            spurious: true,
            ..retx(99)
        };
        assert_eq!(r.prove(Match::Frame(100 + 99), false), vec![proven]);
        assert!(
            r.prove(Match::Frame(100 + 99), false).is_empty(),
            "proven once"
        );
        assert!(r.any_proven(Match::Seq(retx(99).seq)));
    }
}
