//! [`Listing`]: the diagnosed connections a diagnosis lists, and the ones it folds into
//! counts to keep memory bounded.
//!
//! It is a value that merges: diagnosers that each saw a share of the connections (the
//! CLI's worker threads) give, once their listings are renumbered to the capture's stream
//! numbers and merged, exactly the [`Diagnosis`] one diagnoser gives. That holds because
//! the listing order is total (cost, then stream, then the order a stream's parts were
//! diagnosed), a listing keeps the top of that order whenever it folds, and folded seconds
//! are summed exactly (fixed point), so neither the fold points nor the order of the sums
//! show in the result.

use std::cmp::Reverse;
use std::collections::BTreeMap;

use smallvec::SmallVec;

use crate::budget::{ConnBudget, StateTimes};
use crate::finding::{Finding, FindingKind, Severity};
use crate::{ConnInference, Diagnosis, KindTotal, Unlisted, sort_findings, total_order};

/// One connection's diagnosis.
#[derive(Debug)]
pub(crate) struct Diagnosed {
    pub(crate) stream: u32,
    /// Order of diagnosis within one listing: a connection evicted and resumed under its
    /// stream number has several parts, kept in time order.
    seq: u64,
    /// [`Diagnosed::weigh`] and [`Diagnosed::measure`] of it, kept: folding sorted by the
    /// one and summed the other reading every connection's findings, cache misses that
    /// made a fold of 16,000 connections take 10 ms.
    weight: (Severity, f64),
    size: usize,
    /// Most connections have one finding or none: held inline, it is not one more block
    /// to free when the diagnosis is built (16,000 of them, cold, took 7 ms there).
    pub(crate) findings: SmallVec<[Finding; 1]>,
    pub(crate) inference: ConnInference,
    pub(crate) budget: ConnBudget,
}

impl Diagnosed {
    /// A diagnosis, trimmed and measured (its place among the parts of its stream is set by
    /// [`Listing::keep`]).
    pub(crate) fn new(
        stream: u32,
        findings: Vec<Finding>,
        inference: ConnInference,
        budget: ConnBudget,
    ) -> Self {
        let mut d = Self {
            stream,
            seq: 0,
            weight: Self::weigh(&findings),
            size: 0,
            // Stays on the heap while over one (until `shrink`).
            findings: SmallVec::from_vec(findings),
            inference,
            budget,
        };
        d.shrink();
        d.size = d.measure();
        d
    }

    /// How much listing a connection with these findings matters: its costliest finding
    /// above info.
    fn weigh(findings: &[Finding]) -> (Severity, f64) {
        findings
            .iter()
            .filter(|f| f.severity > Severity::Info)
            .map(|f| (f.severity, f.cost.seconds))
            .max_by(|a, b| a.0.cmp(&b.0).then(a.1.total_cmp(&b.1)))
            .unwrap_or((Severity::Info, 0.0))
    }

    /// Bytes this diagnosis holds, from lengths (so the same for every run): what the
    /// listing's memory budget counts. Renumbering can only make it larger (longer
    /// stream numbers in the filters), which keeps a share's folds within the merged ones.
    fn measure(&self) -> usize {
        use std::borrow::Cow;
        use std::mem::size_of;
        // Borrowed texts are the program's, not the listing's.
        let owned = |s: &Cow<'static, str>| match s {
            Cow::Owned(s) => s.len(),
            Cow::Borrowed(_) => 0,
        };
        let findings: usize = self
            .findings
            .iter()
            .map(|f| {
                let roles: usize = f.evidence.iter().map(|e| owned(&e.role)).sum();
                let recommendations: usize = f.recommendations.iter().map(owned).sum();
                f.evidence.len() * size_of::<crate::finding::Evidence>()
                    + roles
                    + f.episode_list.len() * size_of::<crate::finding::Episode>()
                    + f.wireshark_filter.len()
                    + f.explanation.len()
                    + f.recommendations.len() * size_of::<Cow<'static, str>>()
                    + recommendations
                    + f.file.as_ref().map_or(0, String::len)
            })
            .sum();
        // The inline one is in `size_of::<Self>()`.
        let spilled = if self.findings.spilled() {
            self.findings.capacity() * size_of::<Finding>()
        } else {
            0
        };
        size_of::<Self>()
            + spilled
            + findings
            + self.inference.client.len()
            + self.inference.server.len()
    }

    /// Frees the spare capacity of its vectors and texts, so that [`Diagnosed::size`] is
    /// what it holds (a growing `Vec` keeps up to twice its length); one finding moves
    /// inline.
    fn shrink(&mut self) {
        self.findings.shrink_to_fit();
        for f in &mut self.findings {
            f.evidence.shrink_to_fit();
            f.episode_list.shrink_to_fit();
            f.wireshark_filter.shrink_to_fit();
            f.explanation.shrink_to_fit();
            f.recommendations.shrink_to_fit();
            for r in &mut f.recommendations {
                if let std::borrow::Cow::Owned(r) = r {
                    r.shrink_to_fit();
                }
            }
        }
    }

    /// Renumbers every stream reference (the findings' filters among them).
    fn renumber(&mut self, to: u32) {
        if to == self.stream {
            return;
        }
        self.stream = to;
        // Only the filters' lengths change: adjusting the size by them spares reading every
        // finding's evidence again (a third of a merge of 16,000 connections' listings).
        let (mut before, mut after) = (0, 0);
        for f in &mut self.findings {
            before += f.wireshark_filter.len();
            f.renumber_stream(to);
            after += f.wireshark_filter.len();
        }
        self.inference.stream = to;
        self.budget.stream = to;
        self.size = self.size + after - before;
        debug_assert_eq!(self.size, self.measure());
    }

    /// Its place in the listing order: weight (most first), then stream and part. Sorted
    /// as a cached key: the stable sort moved the 300-byte diagnoses (7 ms for 16,000).
    fn rank(&self) -> (Reverse<Severity>, Reverse<i64>, u32, u64) {
        let (severity, cost) = self.weight;
        (
            Reverse(severity),
            Reverse(total_order(cost)),
            self.stream,
            self.seq,
        )
    }
}

/// Seconds summed exactly, in units of 2^-64 s: the total does not depend on the order of
/// the additions (hand-written: a fixed-point sum is a few lines, no crate needed).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct ExactSeconds(i128);

/// 2^64, the fixed-point scale (a power of two: scaling an `f64` by it is exact).
const SCALE: f64 = 18_446_744_073_709_551_616.0;

impl ExactSeconds {
    fn add(&mut self, s: f64) {
        // `as` saturates; durations are far below the 2^63 s the type holds.
        self.0 = self.0.saturating_add((s * SCALE) as i128);
    }
    fn add_exact(&mut self, o: ExactSeconds) {
        self.0 = self.0.saturating_add(o.0);
    }
    fn get(self) -> f64 {
        self.0 as f64 / SCALE
    }
}

/// What was folded away: counts and exact sums.
#[derive(Clone, Debug, Default, PartialEq)]
struct Folded {
    connections: u64,
    seconds: ExactSeconds,
    states: [ExactSeconds; 8],
    findings: BTreeMap<FindingKind, (u64, ExactSeconds)>,
}

impl Folded {
    fn add(&mut self, d: &Diagnosed) {
        self.connections += 1;
        for f in &d.findings {
            let t = self.findings.entry(f.kind).or_default();
            t.0 += 1;
            t.1.add(f.cost.seconds);
        }
        self.seconds.add(d.budget.seconds);
        for (a, b) in self.states.iter_mut().zip(d.budget.states.0) {
            a.add(b);
        }
    }
    fn merge(&mut self, o: &Folded) {
        self.connections += o.connections;
        for (k, (n, s)) in &o.findings {
            let t = self.findings.entry(*k).or_default();
            t.0 += n;
            t.1.add_exact(*s);
        }
        self.seconds.add_exact(o.seconds);
        for (a, b) in self.states.iter_mut().zip(o.states) {
            a.add_exact(b);
        }
    }
}

/// The diagnosed connections of one diagnoser (or of several, merged). See the module doc.
#[derive(Debug)]
pub struct Listing {
    done: Vec<Diagnosed>,
    folded: Folded,
    /// Connections listed at most.
    max_listed: usize,
    /// Bytes of listed diagnoses at most ([`Diagnosed::size`]).
    max_bytes: usize,
    /// Bytes of `done`.
    bytes: usize,
    /// Diagnoses kept so far (the next one's `seq`).
    kept: u64,
    /// The facts of every connection diagnosed, listed or folded.
    pub(crate) capture: crate::facts::CaptureFacts,
}

impl Listing {
    /// An empty listing of at most `max_listed` connections and `max_bytes` bytes.
    pub(crate) fn new(max_listed: usize, max_bytes: usize) -> Self {
        Self {
            done: Vec::new(),
            folded: Folded::default(),
            max_listed: max_listed.max(1),
            max_bytes,
            bytes: 0,
            kept: 0,
            capture: crate::facts::CaptureFacts::default(),
        }
    }

    /// Connections listed at most.
    pub fn max_listed(&self) -> usize {
        self.max_listed
    }

    /// Keeps a diagnosed connection; a quarter past either bound, folds the least costly
    /// away (amortised: each fold removes a quarter of the bound, each connection once).
    pub(crate) fn keep(&mut self, mut d: Diagnosed) {
        d.seq = self.kept;
        self.kept += 1;
        self.bytes += d.size;
        self.done.push(d);
        self.fold_if_over();
    }

    fn fold_if_over(&mut self) {
        let (max, bytes) = (self.max_listed, self.max_bytes);
        if self.done.len() > max + max / 4 || self.bytes > bytes.saturating_add(bytes / 4) {
            self.fold();
        }
    }

    /// Folds all but the longest head of the listing order within both bounds into the
    /// counts. A head is within them on every share of the connections when it is on all
    /// of them (sizes only grow when a share is renumbered), so shares fold nothing the
    /// merged listing would keep.
    fn fold(&mut self) {
        if self.done.len() <= self.max_listed && self.bytes <= self.max_bytes {
            return;
        }
        self.done.sort_by_cached_key(Diagnosed::rank);
        let mut bytes = 0;
        let mut keep = 0;
        for d in self.done.iter().take(self.max_listed) {
            let b = bytes + d.size;
            if b > self.max_bytes {
                break;
            }
            bytes = b;
            keep += 1;
        }
        for d in self.done.drain(keep..) {
            self.folded.add(&d);
        }
        self.bytes = bytes;
    }

    /// Renumbers the streams with `to`, which must keep their order (`a < b` gives
    /// `to(a) < to(b)`): a thread's stream numbers mapped to the capture's.
    pub fn renumber(&mut self, to: impl Fn(u32) -> u32) {
        for d in &mut self.done {
            d.renumber(to(d.stream));
        }
        self.bytes = self.done.iter().map(|d| d.size).sum();
    }

    /// Adds the listing of a diagnoser that saw other connections (renumbered to the same
    /// stream numbers as this one's).
    pub fn merge(&mut self, other: Listing) {
        self.max_listed = self.max_listed.max(other.max_listed);
        self.max_bytes = self.max_bytes.max(other.max_bytes);
        self.done.extend(other.done);
        self.bytes += other.bytes;
        self.folded.merge(&other.folded);
        self.kept += other.kept;
        self.capture.add(&other.capture);
        self.fold_if_over();
    }

    /// The diagnosis: the listed connections in stream order, findings most costly first.
    pub fn into_diagnosis(mut self) -> Diagnosis {
        self.fold();
        let mut all = self.done;
        // Cached key: moves each diagnosis once (see `rank`).
        all.sort_by_cached_key(|d| (d.stream, d.seq));
        let f = &self.folded;
        let mut out = Diagnosis {
            unlisted: Unlisted {
                connections: f.connections,
                findings: f
                    .findings
                    .iter()
                    .map(|(k, (count, s))| {
                        let t = KindTotal {
                            count: *count,
                            seconds: s.get(),
                        };
                        (*k, t)
                    })
                    .collect(),
            },
            capture: self.capture,
            ..Diagnosis::default()
        };
        out.time_budget.seconds = f.seconds.get();
        out.time_budget.states = StateTimes(f.states.map(ExactSeconds::get));
        out.findings
            .reserve(all.iter().map(|d| d.findings.len()).sum());
        out.connections.reserve(all.len());
        out.time_budget.connections.reserve(all.len());
        for d in all {
            out.findings.extend(d.findings);
            out.connections.push(d.inference);
            out.time_budget.push(d.budget);
        }
        sort_findings(&mut out.findings);
        out
    }
}

mod codec {
    use tcpdx_core::codec::{Codec, Dec, DecodeError};

    use super::{Diagnosed, ExactSeconds, Folded, Listing};

    impl Codec for ExactSeconds {
        fn enc(&self, w: &mut Vec<u8>) {
            self.0.enc(w);
        }
        fn dec(r: &mut Dec<'_>) -> Result<Self, DecodeError> {
            i128::dec(r).map(Self)
        }
    }

    tcpdx_core::codec_struct!(Folded {
        connections,
        seconds,
        states,
        findings
    });

    impl Codec for Diagnosed {
        fn enc(&self, w: &mut Vec<u8>) {
            self.stream.enc(w);
            self.seq.enc(w);
            self.weight.enc(w);
            self.size.enc(w);
            // Inline or on the heap, with the capacity it had: the listing's memory budget
            // counts it.
            let cap = if self.findings.spilled() {
                self.findings.capacity()
            } else {
                0
            };
            cap.enc(w);
            self.findings.len().enc(w);
            for f in &self.findings {
                f.enc(w);
            }
            self.inference.enc(w);
            self.budget.enc(w);
        }
        fn dec(r: &mut Dec<'_>) -> Result<Self, DecodeError> {
            let stream = Codec::dec(r)?;
            let seq = Codec::dec(r)?;
            let weight = Codec::dec(r)?;
            let size = Codec::dec(r)?;
            let cap = usize::dec(r)?;
            let n = r.length()?;
            let mut findings = smallvec::SmallVec::new();
            if cap > 0 {
                if cap < n.max(2) || cap > 2 * n + 2 {
                    return Err(r.error(format!("{n} findings held in {cap}")));
                }
                findings.grow(cap);
            }
            for _ in 0..n {
                findings.push(Codec::dec(r)?);
            }
            Ok(Self {
                stream,
                seq,
                weight,
                size,
                findings,
                inference: Codec::dec(r)?,
                budget: Codec::dec(r)?,
            })
        }
    }

    tcpdx_core::codec_struct!(Listing {
        done,
        folded,
        max_listed,
        max_bytes,
        bytes,
        kept,
        capture
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::CapturePoint;

    /// A connection's part without findings (all tie on weight) lasting `seconds`.
    fn part(stream: u32, seconds: f64) -> Diagnosed {
        let inference = ConnInference {
            stream,
            client: String::new(),
            server: String::new(),
            main_direction: "client_to_server",
            capture_point: CapturePoint::Unknown,
            rtt_s: None,
            path_bps: 0.0,
            goodput_bps: 0.0,
            rounds: 0,
            slow_start_rounds: 0,
            congestion_avoidance_rounds: 0,
            max_packets_per_round: 0,
            loss_episodes: 0,
            segments_per_ack: None,
            lone_segment_ack_delay_s: None,
        };
        let mut states = StateTimes::default();
        states.0[7] = seconds;
        let budget = ConnBudget {
            stream,
            seconds,
            states,
            sending_limits: Default::default(),
            start_s: 0.0,
        };
        Diagnosed::new(stream, Vec::new(), inference, budget)
    }

    #[test]
    fn shares_merge_into_the_single_listing_with_parts_in_time_order() {
        // Streams 0..40 in one listing; stream 5 evicted and resumed (two parts, the
        // first one second long, the second two). Two shares: even and odd streams, each
        // numbered from 0 in its order.
        let parts = || {
            (0..40u32).flat_map(|s| {
                let mut v = vec![part(s, 1.0 + f64::from(s) * 1e-3)];
                if s == 5 {
                    v.push(part(s, 2.0));
                }
                v
            })
        };
        for max in [100, 7, 2] {
            let mut one = Listing::new(max, usize::MAX);
            for d in parts() {
                one.keep(d);
            }
            let want = one.into_diagnosis();
            let mut shares = [Listing::new(max, usize::MAX), Listing::new(max, usize::MAX)];
            for mut d in parts() {
                let s = d.stream;
                d.renumber(s / 2);
                shares[(s % 2) as usize].keep(d);
            }
            let [mut even, mut odd] = shares;
            even.renumber(|s| s * 2);
            odd.renumber(|s| s * 2 + 1);
            even.merge(odd);
            let got = even.into_diagnosis();
            assert_eq!(got, want, "max_listed {max}");
            let listed: Vec<u32> = got.connections.iter().map(|c| c.stream).collect();
            assert_eq!(listed.len(), max.min(41));
            if max > 40 {
                let fives: Vec<f64> = got
                    .time_budget
                    .connections
                    .iter()
                    .filter(|b| b.stream == 5)
                    .map(|b| b.seconds)
                    .collect();
                assert_eq!(fives, [1.005, 2.0], "the two parts in time order");
            } else {
                // Ties on cost keep the lowest streams, the earlier part first.
                assert_eq!(listed[..2], [0, 1]);
                assert_eq!(got.unlisted.connections, 41 - max as u64);
            }
        }
    }

    #[test]
    fn merged_diagnoses_count_the_unlisted_connections_time() {
        // Three connections of 1, 2 and 4 s; two listed: the 1 s one is folded away.
        let diagnosis = || {
            let mut l = Listing::new(2, usize::MAX);
            for (s, secs) in [(0, 1.0), (1, 2.0), (2, 4.0)] {
                l.keep(part(s, secs));
            }
            l.into_diagnosis()
        };
        let one = diagnosis();
        assert_eq!(one.unlisted.connections, 1);
        assert_eq!(one.time_budget.connections.len(), 2);
        assert_eq!(one.time_budget.seconds, 7.0);
        let mut all = Diagnosis::default();
        all.merge(diagnosis());
        assert_eq!(all, one);
        all.merge(diagnosis());
        assert_eq!(all.time_budget.seconds, 14.0);
        assert_eq!(all.time_budget.states.0[7], 14.0);
        assert_eq!(all.time_budget.connections.len(), 4);
        assert_eq!(all.unlisted.connections, 2);
    }

    #[test]
    fn the_listing_order_ranks_by_weight_then_stream_then_part() {
        let mut a = part(3, 1.0);
        a.weight = (Severity::Major, 0.5);
        let mut b = part(1, 1.0);
        b.weight = (Severity::Major, 0.25);
        let mut c = part(2, 1.0);
        c.weight = (Severity::Critical, 0.001);
        let mut d = part(1, 1.0);
        d.weight = (Severity::Major, 0.25);
        d.seq = 1;
        let mut v = [&d, &b, &a, &c];
        v.sort_by_key(|x| x.rank());
        let got: Vec<(u32, u64)> = v.iter().map(|x| (x.stream, x.seq)).collect();
        assert_eq!(got, [(2, 0), (3, 0), (1, 0), (1, 1)]);
    }

    #[test]
    fn borrowed_texts_do_not_count_against_the_memory_bound() {
        const TEXT: &str = "Look at the server's disk latency at these moments.";
        let with = |r: std::borrow::Cow<'static, str>| {
            let mut f = Finding::new(FindingKind::FixedDurationStall, Some(1));
            f.recommendations = vec![r];
            let mut d = part(1, 1.0);
            d.findings = smallvec::smallvec![f];
            d.measure()
        };
        let borrowed = with(TEXT.into());
        let owned = with(TEXT.to_string().into());
        assert_eq!(owned - borrowed, TEXT.len());
    }

    #[test]
    fn findings_are_counted_once_inline_or_on_the_heap() {
        use std::mem::size_of;
        let finding = |stream: u32| {
            let mut f = Finding::new(FindingKind::FixedDurationStall, Some(stream));
            f.wireshark_filter = format!("tcp.stream == {stream}");
            f
        };
        let with = |stream: u32, findings: Vec<Finding>| {
            let d = part(stream, 1.0);
            Diagnosed::new(stream, findings, d.inference, d.budget)
        };
        let mut listing = Listing::new(10, usize::MAX);
        listing.keep(with(1, vec![finding(1)]));
        listing.keep(with(2, vec![finding(2), finding(2)]));
        let [one, two] = &listing.done[..] else {
            panic!("two kept")
        };
        assert!(!one.findings.spilled() && two.findings.spilled());
        assert_eq!(one.size, size_of::<Diagnosed>() + 15);
        assert_eq!(
            two.size,
            size_of::<Diagnosed>() + 2 * (size_of::<Finding>() + 15)
        );
        // Renumbering adjusts the size by the filters' lengths alone (three digits more).
        let before = listing.bytes;
        listing.renumber(|s| s + 1000);
        assert!(listing.done.iter().all(|d| d.size == d.measure()));
        assert_eq!(listing.bytes, before + 9);
    }

    #[test]
    fn exact_sums_do_not_depend_on_the_order() {
        let v = [0.1, 1e-9, 3.7, 123.456_789, 2e-7, 0.3];
        let mut a = ExactSeconds::default();
        let mut b = ExactSeconds::default();
        for x in v {
            a.add(x);
        }
        for x in v.iter().rev() {
            b.add(*x);
        }
        assert_eq!(a, b);
        let naive: f64 = v.iter().sum();
        assert!((a.get() - naive).abs() < 1e-12);
        let mut halves = ExactSeconds::default();
        let mut rest = ExactSeconds::default();
        for x in &v[..3] {
            halves.add(*x);
        }
        for x in &v[3..] {
            rest.add(*x);
        }
        halves.add_exact(rest);
        assert_eq!(halves, a);
    }
}
