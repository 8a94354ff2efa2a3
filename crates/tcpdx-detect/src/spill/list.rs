//! [`SpillList`]: a list of small fixed-width records (a sender's loss episodes, timeouts,
//! delayed-ACK pauses...) of which only the latest few stay in memory; the rest go to a
//! [`Spill`]'s store in blobs of [`SpillPolicy::list_records`] records, so that a long
//! connection's lists cost disk, not memory.
//!
//! While a connection is fed, only the latest record is read or changed (`last`,
//! `last_mut`): it is always in memory. Its diagnosis first reads the whole list back
//! ([`SpillList::prepare`]: the lists are capped, so that is bounded) and then walks it as
//! a plain slice. Iteration and `get` also work before that, reading the blobs back.

use std::sync::Arc;

use super::{BlobRef, Spill};

/// A record of a [`SpillList`]: encoded as fixed-width little-endian fields.
pub trait Record: Copy {
    /// Appends the encoding of `self` to `w`.
    fn encode(&self, w: &mut Writer<'_>);
    /// Decodes one record (`None`: malformed or cut off).
    fn decode(r: &mut Reader<'_>) -> Option<Self>;
}

/// Encodes fields into a byte buffer.
pub struct Writer<'a>(pub &'a mut Vec<u8>);

impl Writer<'_> {
    /// A `u64`.
    pub fn u64(&mut self, v: u64) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    /// An `i64`.
    pub fn i64(&mut self, v: i64) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    /// A `u32`.
    pub fn u32(&mut self, v: u32) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    /// A `u8`.
    pub fn u8(&mut self, v: u8) -> &mut Self {
        self.0.push(v);
        self
    }
    /// A `bool`.
    pub fn bool(&mut self, v: bool) -> &mut Self {
        self.u8(u8::from(v))
    }
    /// An `Option<u64>`: a presence byte, then the value (0 if none, so the width is fixed).
    pub fn opt_u64(&mut self, v: Option<u64>) -> &mut Self {
        self.bool(v.is_some()).u64(v.unwrap_or(0))
    }
}

/// Decodes fields from a byte buffer, front to back.
pub struct Reader<'a>(pub &'a [u8]);

impl Reader<'_> {
    fn take<const N: usize>(&mut self) -> Option<[u8; N]> {
        let (head, rest) = self.0.split_first_chunk::<N>()?;
        self.0 = rest;
        Some(*head)
    }
    /// A `u64`.
    pub fn u64(&mut self) -> Option<u64> {
        self.take().map(u64::from_le_bytes)
    }
    /// An `i64`.
    pub fn i64(&mut self) -> Option<i64> {
        self.take().map(i64::from_le_bytes)
    }
    /// A `u32`.
    pub fn u32(&mut self) -> Option<u32> {
        self.take().map(u32::from_le_bytes)
    }
    /// A `u8`.
    pub fn u8(&mut self) -> Option<u8> {
        self.take::<1>().map(|[b]| b)
    }
    /// A `bool` (any byte but 0 or 1 is malformed).
    pub fn bool(&mut self) -> Option<bool> {
        match self.u8()? {
            0 => Some(false),
            1 => Some(true),
            _ => None,
        }
    }
    /// An `Option<u64>` (see [`Writer::opt_u64`]).
    pub fn opt_u64(&mut self) -> Option<Option<u64>> {
        let some = self.bool()?;
        let v = self.u64()?;
        Some(some.then_some(v))
    }
    /// True when everything was read.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl Record for i64 {
    fn encode(&self, w: &mut Writer<'_>) {
        w.i64(*self);
    }
    fn decode(r: &mut Reader<'_>) -> Option<Self> {
        r.i64()
    }
}

/// A list whose older records go to a [`Spill`] (see the module doc). Without a spill
/// (the default) it is a plain list in memory.
#[derive(Clone, Debug)]
pub struct SpillList<T> {
    /// Where full blobs of records go (none: all stay in memory).
    spill: Option<Arc<Spill>>,
    /// Blobs written, in order, each of exactly `per_blob` records.
    blobs: Vec<BlobRef>,
    per_blob: usize,
    /// The records after the blobs' (never empty once a record was pushed, so the latest is
    /// always in memory).
    tail: Vec<T>,
    /// Read back for a diagnosis ([`SpillList::prepare`]): nothing is spilled any more.
    plain: bool,
}

impl<T> Default for SpillList<T> {
    fn default() -> Self {
        Self {
            spill: None,
            blobs: Vec::new(),
            per_blob: 1,
            tail: Vec::new(),
            plain: false,
        }
    }
}

impl<T: Record> SpillList<T> {
    /// An empty list whose older records go to `spill`'s store.
    pub fn spilling_to(spill: Arc<Spill>) -> Self {
        let records = spill.policy().list_records;
        Self::spilling_in_blobs_of(spill, records)
    }

    /// An empty list whose older records go to `spill`'s store, `records` to a blob.
    pub fn spilling_in_blobs_of(spill: Arc<Spill>, records: usize) -> Self {
        Self {
            per_blob: records.max(1),
            spill: Some(spill),
            ..Self::default()
        }
    }

    /// Appends `x` if there are fewer than `cap` records (the caller counts the rest).
    pub fn push_capped(&mut self, x: T, cap: usize) {
        if self.len() < cap {
            self.push(x);
        }
    }

    /// Appends `x`, writing out the records in memory first if they fill a blob.
    #[inline]
    pub fn push(&mut self, x: T) {
        // The test inline, the writing out of line: a call per record was 3 M of the 540 M
        // instructions of `diagnose` on many short connections with frequent silences.
        if !self.plain && self.tail.len() >= self.per_blob {
            self.write_blob();
        }
        self.tail.push(x);
    }

    /// Writes the first records in memory out as a blob if they fill one; true if written.
    #[inline(never)]
    fn write_blob(&mut self) -> bool {
        let Some(sp) = &self.spill else {
            return false;
        };
        if self.tail.len() < self.per_blob {
            return false;
        }
        let mut blob = Vec::new();
        let mut w = Writer(&mut blob);
        for r in self.tail.iter().take(self.per_blob) {
            r.encode(&mut w);
        }
        // On a store error the records stay in memory (the spill keeps the error).
        let Some(at) = sp.put_records(&blob) else {
            return false;
        };
        self.blobs.push(at);
        self.tail.drain(..self.per_blob);
        true
    }

    /// Makes room for `n` more records in memory without writing any out.
    pub fn reserve(&mut self, n: usize) {
        self.tail.reserve_exact(n);
    }

    /// Records written to the store.
    pub fn spilled(&self) -> usize {
        self.blobs.len() * self.per_blob
    }

    /// Number of records.
    #[inline]
    pub fn len(&self) -> usize {
        self.spilled() + self.tail.len()
    }

    /// True if there is none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The latest record.
    pub fn last(&self) -> Option<&T> {
        self.tail.last()
    }

    /// The latest record, to change it.
    pub fn last_mut(&mut self) -> Option<&mut T> {
        self.tail.last_mut()
    }

    /// Changes the latest record that `pred` accepts with `f`, reading its blob back and
    /// writing it out again if it was spilled, so that the answer does not depend on what
    /// the spill wrote out (rare: a proof that comes after later records). False if none.
    pub fn update_last_where(&mut self, pred: impl Fn(&T) -> bool, f: impl FnOnce(&mut T)) -> bool {
        if let Some(x) = self.tail.iter_mut().rev().find(|x| pred(x)) {
            f(x);
            return true;
        }
        let mut buf = Vec::new();
        for i in (0..self.blobs.len()).rev() {
            self.load(i, &mut buf);
            let mut r = Reader(&buf);
            let mut records: Vec<T> = (0..self.per_blob)
                .map_while(|_| T::decode(&mut r))
                .collect();
            let Some(x) = records.iter_mut().rev().find(|x| pred(x)) else {
                continue;
            };
            f(x);
            let mut blob = Vec::new();
            let mut w = Writer(&mut blob);
            for x in &records {
                x.encode(&mut w);
            }
            if let Some(sp) = &self.spill
                && let Some(at) = sp.put_records(&blob)
            {
                sp.free(std::mem::replace(&mut self.blobs[i], at));
            }
            return true;
        }
        false
    }

    /// Reads blob `i` back into `buf` (empty on a store error: the spill keeps it).
    fn load(&self, i: usize, buf: &mut Vec<u8>) {
        buf.clear();
        if let (Some(&at), Some(sp)) = (self.blobs.get(i), &self.spill) {
            sp.get(at, buf);
        }
    }

    /// Record `i` (reading its blob back if it was written out).
    pub fn get(&self, i: usize) -> Option<T> {
        let spilled = self.spilled();
        if i >= spilled {
            return self.tail.get(i - spilled).copied();
        }
        let mut buf = Vec::new();
        self.load(i / self.per_blob, &mut buf);
        let mut r = Reader(&buf);
        for _ in 0..i % self.per_blob {
            T::decode(&mut r)?;
        }
        T::decode(&mut r)
    }

    /// All records in order.
    #[inline]
    pub fn iter(&self) -> Iter<'_, T> {
        if self.blobs.is_empty() {
            // Everything in memory (always after `prepare`): a plain slice walk, since
            // detectors walk these lists once per silence or episode.
            return Iter::Plain(self.tail.iter());
        }
        Iter::Spilled(Spilled {
            list: self,
            blob: 0,
            buf: Vec::new(),
            pos: 0,
            tail: 0,
        })
    }

    /// Before a diagnosis: writes out the records in memory that fill a blob (all of them
    /// under [`SpillPolicy::tiny`](super::SpillPolicy::tiny), so that every record goes
    /// through the store), then reads every record back into memory and frees the blobs,
    /// so that the walks of the diagnosis read a plain list (bounded: the lists are
    /// capped).
    pub fn prepare(&mut self) {
        while !self.plain && self.write_blob() {}
        if !self.blobs.is_empty() {
            let mut all = Vec::with_capacity(self.len());
            all.extend(self.iter());
            if let Some(sp) = &self.spill {
                for b in self.blobs.drain(..) {
                    sp.free(b);
                }
            }
            self.blobs = Vec::new();
            self.tail = all;
        }
        self.plain = true;
    }
}

/// Iterator over a [`SpillList`]'s records (see [`SpillList::iter`]).
#[derive(Debug)]
pub enum Iter<'a, T> {
    /// No record is in the store.
    Plain(std::slice::Iter<'a, T>),
    /// Some are: blobs read back one at a time, then the records in memory.
    Spilled(Spilled<'a, T>),
}

/// The state of an [`Iter`] over a list with records in the store.
#[derive(Debug)]
pub struct Spilled<'a, T> {
    list: &'a SpillList<T>,
    /// Next blob to read back.
    blob: usize,
    /// The blob read back, and the read position in it.
    buf: Vec<u8>,
    pos: usize,
    /// Next record of the tail.
    tail: usize,
}

impl<T: Record> Iterator for Iter<'_, T> {
    type Item = T;

    #[inline]
    fn next(&mut self) -> Option<T> {
        match self {
            Iter::Plain(it) => it.next().copied(),
            Iter::Spilled(s) => s.next(),
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        match self {
            Iter::Plain(it) => it.size_hint(),
            Iter::Spilled(s) => s.size_hint(),
        }
    }
}

impl<T: Record> Spilled<'_, T> {
    // Out of line, so that the walk of a plain list (every walk of a diagnosis) inlines
    // into its caller: a call per record was 10 M of the 540 M instructions of `diagnose`
    // on 200k packets of many short connections with a silence every few segments.
    #[inline(never)]
    fn next(&mut self) -> Option<T> {
        loop {
            if self.pos < self.buf.len() {
                let mut r = Reader(self.buf.get(self.pos..).unwrap_or_default());
                let before = r.0.len();
                match T::decode(&mut r) {
                    Some(x) => {
                        self.pos += before - r.0.len();
                        return Some(x);
                    }
                    // Malformed: the rest of the blob is lost (cannot happen with a store
                    // that gives back what it was given).
                    None => self.pos = self.buf.len(),
                }
            }
            if self.blob < self.list.blobs.len() {
                self.list.load(self.blob, &mut self.buf);
                self.blob += 1;
                self.pos = 0;
                continue;
            }
            let x = self.list.tail.get(self.tail).copied();
            self.tail += 1;
            return x;
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        if self.blob >= self.list.blobs.len() && self.pos >= self.buf.len() {
            let n = self.list.tail.len().saturating_sub(self.tail);
            (n, Some(n))
        } else {
            (0, Some(self.list.len()))
        }
    }
}

impl<'a, T: Record> IntoIterator for &'a SpillList<T> {
    type Item = T;
    type IntoIter = Iter<'a, T>;
    fn into_iter(self) -> Iter<'a, T> {
        self.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spill::{MemStore, SpillPolicy};

    /// A record with every kind of field, including extremes.
    #[derive(Clone, Copy, Debug, PartialEq)]
    struct Rec {
        a: i64,
        b: u64,
        c: u32,
        d: bool,
        e: Option<u64>,
        f: u8,
    }

    impl Record for Rec {
        fn encode(&self, w: &mut Writer<'_>) {
            w.i64(self.a)
                .u64(self.b)
                .u32(self.c)
                .bool(self.d)
                .opt_u64(self.e)
                .u8(self.f);
        }
        fn decode(r: &mut Reader<'_>) -> Option<Self> {
            Some(Self {
                a: r.i64()?,
                b: r.u64()?,
                c: r.u32()?,
                d: r.bool()?,
                e: r.opt_u64()?,
                f: r.u8()?,
            })
        }
    }

    fn rec(i: usize) -> Rec {
        Rec {
            a: if i == 3 { i64::MIN } else { i as i64 * -7 },
            b: if i == 4 {
                u64::MAX
            } else {
                i as u64 * 1_000_003
            },
            c: i as u32,
            d: i.is_multiple_of(3),
            e: i.is_multiple_of(2).then_some(i as u64),
            f: (i % 256) as u8,
        }
    }

    fn spilling(records: usize) -> (Arc<Spill>, SpillList<Rec>) {
        let policy = SpillPolicy {
            list_records: records,
            ..SpillPolicy::default()
        };
        let sp = Arc::new(Spill::new(Box::<MemStore>::default(), policy));
        (sp.clone(), SpillList::spilling_to(sp))
    }

    #[test]
    fn spilled_records_read_back_exactly() {
        for per_blob in [1, 2, 16] {
            let (sp, mut l) = spilling(per_blob);
            let want: Vec<Rec> = (0..100).map(rec).collect();
            for (i, &r) in want.iter().enumerate() {
                l.push(r);
                assert_eq!(l.last(), Some(&r), "the latest stays in memory");
                assert_eq!(l.len(), i + 1);
                assert!(l.tail.len() <= per_blob, "{per_blob}: {}", l.tail.len());
            }
            assert!(l.spilled() >= 100 - per_blob, "{per_blob}");
            assert_eq!(sp.live_blobs() as usize, l.blobs.len());
            assert_eq!(l.iter().collect::<Vec<_>>(), want, "{per_blob}");
            for i in [0, 1, per_blob - 1, per_blob, 50, 99] {
                assert_eq!(l.get(i), Some(want[i]), "{per_blob}: {i}");
            }
            assert_eq!(l.get(100), None);
            // Changing the latest record changes what is read back.
            l.last_mut().unwrap().c = 777;
            let mut want = want;
            want[99].c = 777;
            l.prepare();
            assert_eq!(sp.live_blobs(), 0, "blobs freed once read back");
            assert_eq!(l.iter().collect::<Vec<_>>(), want);
            assert_eq!(l.get(10), Some(want[10]));
            // Read back: later pushes stay in memory.
            l.push(rec(100));
            assert_eq!(l.len(), 101);
            assert_eq!(sp.live_blobs(), 0);
            assert!(sp.take_error().is_none());
        }
    }

    #[test]
    fn prepare_writes_out_full_blobs_first_so_tiny_lists_go_through_the_store() {
        let (sp, mut l) = spilling(1);
        l.push(rec(1));
        assert_eq!(
            sp.records_written(),
            0,
            "the latest stays in memory while fed"
        );
        l.prepare();
        assert!(
            sp.records_written() > 0,
            "one record per blob: written at prepare"
        );
        assert_eq!(l.iter().collect::<Vec<_>>(), vec![rec(1)]);
        assert_eq!(sp.live_blobs(), 0);
        // A partial blob stays in memory.
        let (sp, mut l) = spilling(4);
        l.extend_for_test((0..6).map(rec));
        let before = sp.records_written();
        l.prepare();
        assert_eq!(sp.records_written(), before);
        assert_eq!(
            l.iter().collect::<Vec<_>>(),
            (0..6).map(rec).collect::<Vec<_>>()
        );
    }

    #[test]
    fn the_cap_keeps_the_first_records() {
        let (_sp, mut l) = spilling(1);
        for i in 0..10 {
            l.push_capped(rec(i), 4);
        }
        assert_eq!(l.len(), 4);
        assert_eq!(
            l.iter().collect::<Vec<_>>(),
            (0..4).map(rec).collect::<Vec<_>>()
        );
    }

    #[test]
    fn without_a_spill_everything_stays_in_memory() {
        let mut l = SpillList::<i64>::default();
        l.extend_for_test(0..1000);
        assert_eq!(l.spilled(), 0);
        assert_eq!(l.iter().sum::<i64>(), 999 * 1000 / 2);
        assert!(SpillList::<i64>::default().is_empty());
    }

    impl<T: Record> SpillList<T> {
        fn extend_for_test(&mut self, it: impl IntoIterator<Item = T>) {
            for x in it {
                self.push(x);
            }
        }
    }

    #[test]
    fn a_failing_store_keeps_the_records_in_memory_and_reports() {
        let sp = crate::spill::broken_tiny();
        let mut l = SpillList::spilling_to(sp.clone());
        l.extend_for_test((0..20).map(rec));
        assert_eq!(l.spilled(), 0);
        assert_eq!(
            l.iter().collect::<Vec<_>>(),
            (0..20).map(rec).collect::<Vec<_>>()
        );
        assert_eq!(sp.take_error().unwrap().to_string(), "no space left");
    }

    #[test]
    fn malformed_fields_do_not_decode() {
        assert_eq!(Reader(&[2]).bool(), None);
        assert_eq!(Reader(&[1, 2, 3]).u32(), None);
        let mut buf = Vec::new();
        rec(5).encode(&mut Writer(&mut buf));
        assert_eq!(Rec::decode(&mut Reader(&buf[..buf.len() - 1])), None);
        let mut r = Reader(&buf);
        assert_eq!(Rec::decode(&mut r), Some(rec(5)));
        assert!(r.is_empty());
    }
}
