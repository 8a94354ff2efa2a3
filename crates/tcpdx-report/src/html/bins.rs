//! Adaptive time bins: the decimation behind every graph of the HTML report.
//!
//! A [`Bins`] keeps at most `cap` non-empty bins of one series, each holding an aggregate
//! ([`Agg`]) of the samples that fell in it. When a new bin would exceed the cap, the bin
//! width doubles and neighbouring bins merge, so memory and output size stay bounded
//! whatever the capture's length, and a short capture keeps every sample (the first width
//! is tiny). Samples may arrive slightly out of time order (capture reordering).

/// How samples of one bin combine.
pub trait Agg: Copy {
    /// Folds `other` (a later or neighbouring part of the same bin) into `self`.
    fn merge(&mut self, other: &Self);
}

/// One series' bins.
#[derive(Clone, Debug)]
pub struct Bins<A> {
    width_ns: i64,
    cap: usize,
    /// Non-empty bins, sorted by index (bin `k` covers `[k * width, (k + 1) * width)`).
    bins: Vec<(i64, A)>,
}

impl<A: Agg> Bins<A> {
    /// Empty series with bins of `width_ns` (at least 1), widened as needed to keep at
    /// most `cap` (at least 2) bins.
    pub fn new(width_ns: i64, cap: usize) -> Self {
        Self {
            width_ns: width_ns.max(1),
            cap: cap.max(2),
            bins: Vec::new(),
        }
    }

    /// Adds a sample at `t_ns`.
    pub fn add(&mut self, t_ns: i64, a: A) {
        let k = t_ns.div_euclid(self.width_ns);
        match self.bins.last_mut() {
            Some((last, agg)) if *last == k => agg.merge(&a),
            Some((last, _)) if *last > k => match self.bins.binary_search_by_key(&k, |b| b.0) {
                Ok(i) => self.bins[i].1.merge(&a),
                Err(i) => self.bins.insert(i, (k, a)),
            },
            _ => self.bins.push((k, a)),
        }
        while self.bins.len() > self.cap {
            self.coarsen();
        }
    }

    /// Doubles the width and merges the bins that now share an index.
    fn coarsen(&mut self) {
        self.width_ns = self.width_ns.saturating_mul(2);
        let mut out: Vec<(i64, A)> = Vec::with_capacity(self.bins.len() / 2 + 1);
        for (k, a) in self.bins.drain(..) {
            let k = k.div_euclid(2);
            match out.last_mut() {
                Some((last, agg)) if *last == k => agg.merge(&a),
                _ => out.push((k, a)),
            }
        }
        self.bins = out;
    }

    /// Current bin width in ns.
    pub fn width_ns(&self) -> i64 {
        self.width_ns
    }

    /// True if no sample was added.
    pub fn is_empty(&self) -> bool {
        self.bins.is_empty()
    }

    /// Non-empty bins in time order: (start of the bin in ns, aggregate).
    pub fn iter(&self) -> impl Iterator<Item = (i64, &A)> {
        self.bins
            .iter()
            .map(move |(k, a)| (k.saturating_mul(self.width_ns), a))
    }
}

/// A vertical extent drawn at one time: the sequence range of the segments of a bin.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Range {
    /// Time of the earliest sample (ns).
    pub t: i64,
    /// Lowest value.
    pub lo: u64,
    /// Highest value.
    pub hi: u64,
}

impl Agg for Range {
    fn merge(&mut self, o: &Self) {
        self.t = self.t.min(o.t);
        self.lo = self.lo.min(o.lo);
        self.hi = self.hi.max(o.hi);
    }
}

/// The lowest and highest sample of a bin, each with its time (min/max decimation: a
/// line through both keeps every spike a full-resolution plot would show).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Extremes {
    /// Time and value of the lowest sample.
    pub min: (i64, f64),
    /// Time and value of the highest sample.
    pub max: (i64, f64),
}

impl Extremes {
    /// One sample.
    pub fn at(t: i64, v: f64) -> Self {
        Self {
            min: (t, v),
            max: (t, v),
        }
    }
    /// The one or two points to draw, in time order.
    pub fn points(&self) -> impl Iterator<Item = (i64, f64)> {
        let (a, b) = if self.min.0 <= self.max.0 {
            (self.min, self.max)
        } else {
            (self.max, self.min)
        };
        std::iter::once(a).chain((b != a).then_some(b))
    }
}

impl Agg for Extremes {
    fn merge(&mut self, o: &Self) {
        if o.min.1 < self.min.1 {
            self.min = o.min;
        }
        if o.max.1 > self.max.1 {
            self.max = o.max;
        }
    }
}

/// Byte counts of a bin (throughput).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Sum {
    /// All payload bytes.
    pub total: u64,
    /// Payload bytes not flagged as retransmissions.
    pub new: u64,
}

impl Agg for Sum {
    fn merge(&mut self, o: &Self) {
        self.total += o.total;
        self.new += o.new;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sum(total: u64) -> Sum {
        Sum { total, new: total }
    }

    #[test]
    fn samples_in_one_bin_merge() {
        let mut b = Bins::new(100, 10);
        b.add(10, sum(1));
        b.add(99, sum(2));
        b.add(100, sum(4));
        let v: Vec<(i64, u64)> = b.iter().map(|(t, s)| (t, s.total)).collect();
        assert_eq!(v, vec![(0, 3), (100, 4)]);
    }

    #[test]
    fn the_cap_doubles_the_width_and_keeps_every_byte() {
        let mut b = Bins::new(1, 8);
        for t in 0..1000 {
            b.add(t, sum(1));
        }
        assert!(b.iter().count() <= 8);
        assert_eq!(b.width_ns(), 128);
        assert_eq!(b.iter().map(|(_, s)| s.total).sum::<u64>(), 1000);
        let starts: Vec<i64> = b.iter().map(|(t, _)| t).collect();
        assert!(starts.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn late_samples_land_in_their_bin() {
        let mut b = Bins::new(10, 100);
        b.add(50, sum(1));
        b.add(5, sum(2));
        b.add(52, sum(4));
        b.add(25, sum(8));
        let v: Vec<(i64, u64)> = b.iter().map(|(t, s)| (t, s.total)).collect();
        assert_eq!(v, vec![(0, 2), (20, 8), (50, 5)]);
    }

    #[test]
    fn negative_times_bin_below_zero() {
        let mut b = Bins::new(10, 100);
        b.add(-1, sum(1));
        b.add(0, sum(1));
        let starts: Vec<i64> = b.iter().map(|(t, _)| t).collect();
        assert_eq!(starts, vec![-10, 0]);
    }

    #[test]
    fn extremes_keep_the_spike_and_its_time() {
        let mut b = Bins::new(1000, 4);
        for (t, v) in [(1, 5.0), (2, 9.0), (3, 1.0), (4, 5.0)] {
            b.add(t, Extremes::at(t, v));
        }
        let (_, e) = b.iter().next().unwrap();
        assert_eq!(e.points().collect::<Vec<_>>(), vec![(2, 9.0), (3, 1.0)]);
        let one = Extremes::at(7, 2.0);
        assert_eq!(one.points().count(), 1);
    }

    #[test]
    fn ranges_cover_their_segments() {
        let mut r = Range {
            t: 5,
            lo: 100,
            hi: 200,
        };
        r.merge(&Range {
            t: 3,
            lo: 150,
            hi: 300,
        });
        assert_eq!(
            r,
            Range {
                t: 3,
                lo: 100,
                hi: 300
            }
        );
    }
}
