//! B's clock against A's, from segments seen at both points.
//!
//! A segment going from A to B is seen at B `owd + offset` later (in the two clocks), one
//! going back `owd - offset` later. Queues only add delay, so each direction's smallest
//! difference is its path minimum: the offset is the middle of the two envelopes,
//! `(min(b - a | A to B) + max(b - a | B to A)) / 2`, and is exact when the two minima are
//! equal. The drift is the slope of each direction's envelope over time (the line under
//! the short windows' minima that is closest to them, as Moon, Skelly and Towsley's
//! linear program; queues only raise the points), averaged over the two directions.

/// First window width: short captures still get several windows for the drift.
const FIRST_WINDOW_NS: i64 = 100_000_000;
/// Windows kept: beyond, two neighbours merge and the width doubles (bounded memory).
const MAX_WINDOWS: usize = 512;
/// Fewer windows with both directions give no drift (an offset alone).
const MIN_DRIFT_WINDOWS: usize = 4;
/// The largest drift taken for a clock's: NTP's frequency tolerance (500 ppm, RFC 5905).
const MAX_DRIFT: f64 = 500e-6;
/// Two envelope slopes within this much of each other (absolute, plus a share of their
/// size) are one clock's drift; farther apart, queues moved them.
const SLOPES_AGREE: f64 = 20e-6;
const SLOPES_AGREE_SHARE: f64 = 0.2;

/// B's clock as a function of A's.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct Clock {
    /// A's time where `offset_ns` holds.
    pub(crate) t0: i64,
    /// B minus A at `t0` (ns).
    pub(crate) offset_ns: f64,
    /// dB/dA - 1.
    pub(crate) drift: f64,
}

impl Clock {
    /// B minus A at A's time `t`.
    pub(crate) fn offset_at(&self, t: i64) -> f64 {
        self.offset_ns + self.drift * (t - self.t0) as f64
    }

    /// A's time of B's time `tb`.
    pub(crate) fn a_time(self, tb: i64) -> i64 {
        // Two steps of the fixed point t = tb - offset(t): the drift is tiny.
        let guess = tb - self.offset_ns as i64;
        let guess = tb - self.offset_at(guess).round() as i64;
        tb - self.offset_at(guess).round() as i64
    }
}

/// The envelopes of one window: smallest `b - a` going A to B, largest going B to A, each
/// with the A time it was seen at.
#[derive(Clone, Copy, Debug)]
struct Window {
    ab: Option<(i64, i64)>,
    ba: Option<(i64, i64)>,
}

/// Collects the envelopes of matched segments over time and fits the clock.
#[derive(Debug)]
pub(crate) struct ClockFit {
    t0: Option<i64>,
    width: i64,
    windows: Vec<Window>,
}

impl ClockFit {
    pub(crate) fn new() -> ClockFit {
        ClockFit {
            t0: None,
            width: FIRST_WINDOW_NS,
            windows: Vec::new(),
        }
    }

    /// A segment seen at A at `ta` and at B at `tb` (each in its own clock), going from
    /// A to B when `a_to_b`.
    pub(crate) fn add(&mut self, ta: i64, tb: i64, a_to_b: bool) {
        let t0 = *self.t0.get_or_insert(ta);
        let d = tb - ta;
        let Ok(mut i) = usize::try_from((ta - t0).max(0) / self.width) else {
            return;
        };
        while i >= MAX_WINDOWS {
            self.halve();
            i /= 2;
        }
        if self.windows.len() <= i {
            self.windows.resize(i + 1, Window { ab: None, ba: None });
        }
        let Some(w) = self.windows.get_mut(i) else {
            return;
        };
        if a_to_b {
            if w.ab.is_none_or(|(_, m)| d < m) {
                w.ab = Some((ta, d));
            }
        } else if w.ba.is_none_or(|(_, m)| d > m) {
            w.ba = Some((ta, d));
        }
    }

    /// Merges neighbouring windows: the width doubles.
    fn halve(&mut self) {
        let merged = self
            .windows
            .chunks(2)
            .map(|c| {
                let mut w = Window { ab: None, ba: None };
                for x in c {
                    if let Some((t, d)) = x.ab
                        && w.ab.is_none_or(|(_, m)| d < m)
                    {
                        w.ab = Some((t, d));
                    }
                    if let Some((t, d)) = x.ba
                        && w.ba.is_none_or(|(_, m)| d > m)
                    {
                        w.ba = Some((t, d));
                    }
                }
                w
            })
            .collect();
        self.windows = merged;
        self.width *= 2;
    }

    /// The clock, if both directions had a segment seen at both points.
    pub(crate) fn fit(&self) -> Option<Clock> {
        let t0 = self.t0?;
        let rel = |(t, d): (i64, i64)| ((t - t0) as f64, d as f64);
        let ab: Vec<(f64, f64)> = self.windows.iter().filter_map(|w| w.ab.map(rel)).collect();
        let ba: Vec<(f64, f64)> = self.windows.iter().filter_map(|w| w.ba.map(rel)).collect();
        let slopes: Vec<f64> = [envelope_slope(&ab, true), envelope_slope(&ba, false)]
            .into_iter()
            .flatten()
            .collect();
        let drift = match slopes.as_slice() {
            [x, y] if ab.len().min(ba.len()) >= MIN_DRIFT_WINDOWS && clock_like(*x, *y) => {
                (x + y) / 2.0
            }
            _ => 0.0,
        };
        let low = self
            .windows
            .iter()
            .filter_map(|w| w.ab)
            .map(|(t, d)| d as f64 - drift * (t - t0) as f64)
            .reduce(f64::min)?;
        let high = self
            .windows
            .iter()
            .filter_map(|w| w.ba)
            .map(|(t, d)| d as f64 - drift * (t - t0) as f64)
            .reduce(f64::max)?;
        Some(Clock {
            t0,
            offset_ns: (low + high) / 2.0,
            drift,
        })
    }
}

/// A clock drift moves both directions' envelopes alike, and no further than a clock can.
fn clock_like(x: f64, y: f64) -> bool {
    let mean = (x + y) / 2.0;
    (x - y).abs() <= SLOPES_AGREE + SLOPES_AGREE_SHARE * mean.abs() && mean.abs() <= MAX_DRIFT
}

/// The slope of the line under (`lower`) or over every point that is closest to them on
/// average: the convex hull's edge above the points' mean time (queues only move points
/// away from it, so it follows the path's minimum).
fn envelope_slope(p: &[(f64, f64)], lower: bool) -> Option<f64> {
    let sign = if lower { 1.0 } else { -1.0 };
    let mut pts: Vec<(f64, f64)> = p.iter().map(|&(t, d)| (t, sign * d)).collect();
    pts.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut hull: Vec<(f64, f64)> = Vec::with_capacity(pts.len());
    for q in pts {
        while let [.., o, a] = hull.as_slice() {
            let cross = (a.0 - o.0) * (q.1 - o.1) - (a.1 - o.1) * (q.0 - o.0);
            if cross <= 0.0 {
                hull.pop();
            } else {
                break;
            }
        }
        hull.push(q);
    }
    let mean = p.iter().map(|x| x.0).sum::<f64>() / p.len().max(1) as f64;
    hull.windows(2)
        .find(|e| matches!(e, [a, b] if a.0 <= mean && mean <= b.0 && b.0 > a.0))
        .and_then(|e| match e {
            [a, b] => Some(sign * (b.1 - a.1) / (b.0 - a.0)),
            _ => None,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Segments every ms for `secs`, both ways, with `owd_ab`/`owd_ba` minimum delays and
    /// extra queueing on most of them.
    fn fit(offset: i64, ppm: f64, owd_ab: i64, owd_ba: i64, secs: i64) -> Clock {
        let mut f = ClockFit::new();
        let start = 1_700_000_000_000_000_000i64;
        for k in 0..secs * 1000 {
            let ta = start + k * 1_000_000;
            let queue = (k * 7919 % 13) * 50_000;
            let skew = |t: i64| offset + ((t - start) as f64 * ppm * 1e-6) as i64;
            // A to B: leaves A at ta, reaches B after owd (+ queue), read in B's clock.
            let arrive = ta + owd_ab + queue;
            f.add(ta, arrive + skew(arrive), true);
            // B to A: leaves B at B's time of ta, reaches A after owd.
            let tb = ta + skew(ta);
            f.add(ta + owd_ba + queue, tb, false);
        }
        f.fit().unwrap()
    }

    #[test]
    fn offset_from_the_two_minima() {
        let c = fit(2_500_000_000, 0.0, 5_000_000, 5_000_000, 3);
        assert!((c.offset_ns - 2.5e9).abs() < 1_000.0, "{c:?}");
        assert!(c.drift.abs() < 1e-7, "{c:?}");
    }

    #[test]
    fn drift_from_the_envelope_slope() {
        let c = fit(-40_000_000, 50.0, 3_000_000, 3_000_000, 20);
        assert!((c.drift * 1e6 - 50.0).abs() < 1.0, "{c:?}");
        assert!((c.offset_ns + 4e7).abs() < 10_000.0, "{c:?}");
        // B's time back to A's.
        let tb = c.t0 + 10_000_000_000 + c.offset_at(c.t0 + 10_000_000_000) as i64;
        assert!((c.a_time(tb) - (c.t0 + 10_000_000_000)).abs() < 10);
    }

    #[test]
    fn asymmetric_minima_bias_the_offset_by_half_their_difference() {
        let c = fit(0, 0.0, 6_000_000, 2_000_000, 2);
        assert!((c.offset_ns - 2e6).abs() < 1_000.0, "{c:?}");
    }

    #[test]
    fn slopes_are_a_clock_drift_only_when_they_agree_and_stay_plausible() {
        assert!(clock_like(50e-6, 50e-6));
        // From 0: y <= 20 ppm + 0.2 * y / 2, i.e. 22.2 ppm.
        assert!(clock_like(0.0, 22.2e-6), "just below the bound");
        assert!(!clock_like(0.0, 22.3e-6), "just above it");
        assert!(clock_like(100e-6, 118e-6), "within 20 ppm + 20%");
        assert!(!clock_like(100e-6, 150e-6));
        assert!(clock_like(500e-6, 500e-6), "at NTP's tolerance");
        assert!(!clock_like(501e-6, 501e-6), "beyond it");
    }

    #[test]
    fn one_direction_only_gives_no_clock() {
        let mut f = ClockFit::new();
        f.add(0, 5, true);
        assert!(f.fit().is_none());
    }

    #[test]
    fn many_windows_merge_and_keep_the_envelope() {
        let c = fit(1_000, 0.0, 1_000_000, 1_000_000, 120);
        assert!((c.offset_ns - 1_000.0).abs() < 1_000.0, "{c:?}");
    }
}
