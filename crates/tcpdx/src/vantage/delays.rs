//! One-way delays per direction: percentiles from a histogram of 1% bins and the delay
//! over time in intervals that double when there are too many (bounded memory).

use std::collections::BTreeMap;

use tcpdx_report::vantage::DelaySummary;

/// Relative width of a histogram bin.
const BIN_RATIO: f64 = 1.01;
/// Intervals of the series kept; beyond, neighbours merge.
const MAX_INTERVALS: usize = 300;
/// First interval width (ns).
const FIRST_INTERVAL_NS: i64 = 10_000_000;

#[derive(Clone, Copy, Debug)]
struct Interval {
    min: i64,
    max: i64,
    sum: f64,
    n: u64,
}

/// The delays of one direction.
#[derive(Debug)]
pub(crate) struct Delays {
    name: &'static str,
    t0: i64,
    bins: BTreeMap<i32, u64>,
    n: u64,
    min: i64,
    max: i64,
    width: i64,
    series: Vec<Option<Interval>>,
}

fn bin_of(ns: i64) -> i32 {
    ((ns.max(1) as f64).ln() / BIN_RATIO.ln()).floor() as i32
}

fn value_of(bin: i32) -> f64 {
    BIN_RATIO.powi(bin)
}

impl Delays {
    pub(crate) fn new(name: &'static str, t0: i64) -> Delays {
        Delays {
            name,
            t0,
            bins: BTreeMap::new(),
            n: 0,
            min: i64::MAX,
            max: i64::MIN,
            width: FIRST_INTERVAL_NS,
            series: Vec::new(),
        }
    }

    /// A segment that left the first point at `t` (A's clock) and took `owd` ns.
    pub(crate) fn add(&mut self, t: i64, owd: i64) {
        *self.bins.entry(bin_of(owd)).or_default() += 1;
        self.n += 1;
        self.min = self.min.min(owd);
        self.max = self.max.max(owd);
        let Ok(mut i) = usize::try_from((t - self.t0).max(0) / self.width) else {
            return;
        };
        while i >= MAX_INTERVALS {
            let merged = self
                .series
                .chunks(2)
                .map(|c| {
                    c.iter().flatten().copied().reduce(|a, b| Interval {
                        min: a.min.min(b.min),
                        max: a.max.max(b.max),
                        sum: a.sum + b.sum,
                        n: a.n + b.n,
                    })
                })
                .collect();
            self.series = merged;
            self.width *= 2;
            i /= 2;
        }
        if self.series.len() <= i {
            self.series.resize(i + 1, None);
        }
        if let Some(slot) = self.series.get_mut(i) {
            let x = slot.get_or_insert(Interval {
                min: owd,
                max: owd,
                sum: 0.0,
                n: 0,
            });
            x.min = x.min.min(owd);
            x.max = x.max.max(owd);
            x.sum += owd as f64;
            x.n += 1;
        }
    }

    fn quantile(&self, q: f64) -> f64 {
        let want = ((self.n as f64) * q).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (&b, &c) in &self.bins {
            seen += c;
            if seen >= want {
                return value_of(b);
            }
        }
        self.max as f64
    }

    pub(crate) fn summary(&self) -> DelaySummary {
        if self.n == 0 {
            return DelaySummary {
                direction: self.name,
                ..DelaySummary::default()
            };
        }
        let s = |ns: f64| ns / 1e9;
        // Bins hold 1% of precision: clamp the percentiles to the exact extremes.
        let clamp = |v: f64| v.clamp(self.min as f64, self.max as f64);
        let (p50, p95) = (clamp(self.quantile(0.5)), clamp(self.quantile(0.95)));
        let min = self.min as f64;
        DelaySummary {
            direction: self.name,
            samples: self.n,
            min_s: s(min),
            p50_s: s(p50),
            p95_s: s(p95),
            max_s: s(self.max as f64),
            queue_p50_s: s(p50 - min),
            queue_p95_s: s(p95 - min),
            series: self
                .series
                .iter()
                .enumerate()
                .filter_map(|(i, x)| {
                    let x = (*x)?;
                    let t = (i as i64 * self.width) as f64 / 1e9;
                    Some([t, s(x.min as f64), s(x.sum / x.n as f64), s(x.max as f64)])
                })
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_within_a_percent_and_queueing_above_the_minimum() {
        let mut d = Delays::new("a_to_b", 0);
        for k in 0..1000i64 {
            d.add(k * 1_000_000, 5_000_000 + k * 10_000);
        }
        let s = d.summary();
        assert_eq!(s.samples, 1000);
        assert!((s.min_s - 0.005).abs() < 1e-12);
        assert!((s.p50_s - 0.010).abs() < 0.0002, "{s:?}");
        assert!((s.queue_p95_s - 0.0095).abs() < 0.0002, "{s:?}");
        assert!((s.max_s - 0.01499).abs() < 1e-9);
    }

    #[test]
    fn the_series_stays_bounded() {
        let mut d = Delays::new("b_to_a", 0);
        for k in 0..100_000i64 {
            d.add(k * 10_000_000, 1_000_000);
        }
        let s = d.summary();
        assert!(s.series.len() <= MAX_INTERVALS, "{}", s.series.len());
        assert!(s.series.len() > MAX_INTERVALS / 4);
        assert!(s.series.iter().all(|p| (p[2] - 0.001).abs() < 1e-12));
    }
}
