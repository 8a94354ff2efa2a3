//! Two captures of the same connections at two points of the path ([`Capture::vantage`]):
//! the clock between them, where each segment was lost, one-way delays, storage response
//! times split between the network and the server.
//!
//! Segments are matched by their addresses, ports, sequence and acknowledgement numbers,
//! length, flags and IPv4 ID (or TCP timestamp when the ID is 0): captures across a NAT do
//! not match. Four passes, each in bounded memory: the first segments of each capture give
//! a coarse offset; a pass over both in step fits the clock ([`clock`]); a second pass
//! matches with it, locates the losses ([`losses`]) and collects delays ([`delays`]); the
//! storage transactions of each capture are then split ([`storage`]).

mod clock;
mod delays;
mod losses;
mod matching;
mod packet;
mod storage;

use std::collections::HashMap;

use tcpdx_report::vantage::{Direction, FindingSide, Point, TwoPointGraph, Vantage};

use crate::{Capture, Diagnosis, Error, Options};
use clock::{Clock, ClockFit};
use delays::Delays;
use losses::Classifier;
use matching::{Feed, Matcher, Merge, Released, Streams};
use packet::{FlowKey, MatchKey};

pub use tcpdx_report::vantage::{Location, SegmentEvent};

/// Segments of each capture read for the coarse offset.
const COARSE_SEGMENTS: usize = 50_000;
/// Flow sides remembered from the coarse pass.
const MAX_SIDES: usize = 100_000;
/// How often idle connections are forgotten (capture time, ns).
const SWEEP_EVERY_NS: i64 = 10_000_000_000;

impl Capture {
    /// This capture (A) and `b`, two captures of the same connections at two points of
    /// the path: the clock offset and drift, each loss with where it happened, one-way
    /// delays and storage response times split (see the [`vantage`](crate::vantage)
    /// module). Both must be files (each is read four times).
    pub fn vantage(&mut self, b: &mut Capture, o: &Options) -> Result<Vantage, Error> {
        let name = |c: &Capture| c.path().map_or("-".to_owned(), |p| p.display().to_string());
        let mut v = Vantage {
            file_a: name(self),
            file_b: name(b),
            assumes_symmetric_path: true,
            ..Vantage::default()
        };
        v.notes.push(
            "segments are matched without address translation (no NAT between the points)".into(),
        );
        let (coarse, sides) = coarse(self.reader(1)?.boxed(), b.reader(1)?.boxed())?;
        let Some(coarse) = coarse else {
            v.notes
                .push("no segment was seen in both captures: nothing to compare".into());
            return Ok(v);
        };
        let clock = fit_clock(
            self.reader(1)?.boxed(),
            b.reader(1)?.boxed(),
            coarse,
            &sides,
        )?
        .unwrap_or(coarse);
        v.offset_s = clock.offset_ns / 1e9;
        v.drift_ppm = clock.drift * 1e6;
        locate(
            self.reader(1)?.boxed(),
            b.reader(1)?.boxed(),
            clock,
            &sides,
            &mut v,
        )?;

        let mut sa = storage::Collected::default();
        self.transactions(o, &mut sa, |_| false)?;
        let mut sb = storage::Collected::default();
        b.transactions(o, &mut sb, |_| false)?;
        v.storage = storage::split(&sa, &sb, &clock);
        if sa.dropped + sb.dropped > 0 {
            v.notes.push(format!(
                "{} storage transactions beyond the first {} of a capture were not split",
                sa.dropped + sb.dropped,
                storage::MAX_TRANSACTIONS
            ));
        }
        Ok(v)
    }
}

/// Fills `v.findings`: each finding of A's and B's diagnoses, and whether a finding of the
/// same kind was made on the same connection at the other point.
pub fn finding_sides(v: &mut Vantage, a: &Diagnosis, b: &Diagnosis) {
    let b_of_a: HashMap<u32, u32> = v.stream_pairs.iter().copied().collect();
    let a_of_b: HashMap<u32, u32> = v.stream_pairs.iter().map(|&(x, y)| (y, x)).collect();
    let mut out: Vec<FindingSide> = Vec::new();
    for f in &a.findings {
        let Some(s) = f.stream else { continue };
        let at_b = b_of_a.get(&s).and_then(|sb| {
            b.findings
                .iter()
                .find(|g| g.kind == f.kind && g.stream == Some(*sb))
        });
        out.push(FindingSide {
            kind: f.kind.as_str(),
            stream: s,
            seen_at: if at_b.is_some() { "both" } else { "a" },
            cost_s: at_b.map_or(f.cost.seconds, |g| g.cost.seconds.max(f.cost.seconds)),
        });
    }
    for g in &b.findings {
        let Some(sb) = g.stream else { continue };
        let sa = a_of_b.get(&sb).copied();
        let in_a = sa.is_some_and(|sa| {
            a.findings
                .iter()
                .any(|f| f.kind == g.kind && f.stream == Some(sa))
        });
        if !in_a {
            out.push(FindingSide {
                kind: g.kind.as_str(),
                stream: sa.unwrap_or(sb),
                seen_at: "b",
                cost_s: g.cost.seconds,
            });
        }
    }
    out.sort_by(|x, y| y.cost_s.total_cmp(&x.cost_s));
    v.findings = out;
}

/// The side of each flow's lower endpoint, from the coarse pass.
type Sides = HashMap<FlowKey, bool>;

/// The first segments of each capture: B's clock against A's without drift, and which
/// side of the path each connection's endpoints are on.
fn coarse(
    a: Box<dyn tcpdx_capture::Frames>,
    b: Box<dyn tcpdx_capture::Frames>,
) -> Result<(Option<Clock>, Sides), Error> {
    let mut fb = Feed::new(b, Point::B);
    let mut at_b: HashMap<MatchKey, i64> = HashMap::new();
    for _ in 0..COARSE_SEGMENTS {
        let Some(o) = fb.peek()?.copied() else { break };
        fb.take();
        at_b.entry(o.key).or_insert(o.ts);
    }
    let mut fa = Feed::new(a, Point::A);
    let mut t0 = None;
    // Per flow direction: smallest and largest b - a.
    let mut spans: HashMap<(FlowKey, bool), (i64, i64)> = HashMap::new();
    for _ in 0..COARSE_SEGMENTS {
        let Some(o) = fa.peek()?.copied() else { break };
        fa.take();
        t0.get_or_insert(o.ts);
        if let Some(&tb) = at_b.get(&o.key) {
            let d = tb - o.ts;
            let e = spans.entry((o.key.flow, o.key.from_lo)).or_insert((d, d));
            e.0 = e.0.min(d);
            e.1 = e.1.max(d);
        }
    }
    // The direction whose differences are larger goes from A to B.
    let mut sides = Sides::new();
    let (mut low, mut high) = (None::<i64>, None::<i64>);
    for (&(flow, from_lo), &(min, max)) in &spans {
        let Some(&(omin, _)) = spans.get(&(flow, !from_lo)) else {
            continue;
        };
        let a_to_b = min > omin || (min == omin && from_lo);
        if a_to_b {
            low = Some(low.map_or(min, |l| l.min(min)));
            if sides.len() < MAX_SIDES {
                sides.insert(flow, from_lo);
            }
        } else {
            high = Some(high.map_or(max, |h| h.max(max)));
        }
    }
    let clock = match (t0, low, high) {
        (Some(t0), Some(l), Some(h)) => Some(Clock {
            t0,
            offset_ns: (i128::from(l) + i128::from(h)) as f64 / 2.0,
            drift: 0.0,
        }),
        // Segments of one direction only: their smallest difference.
        (Some(t0), _, _) => spans.values().map(|s| s.0).min().map(|d| Clock {
            t0,
            offset_ns: d as f64,
            drift: 0.0,
        }),
        _ => None,
    };
    Ok((clock, sides))
}

/// Whether a released twin pair went from A to B, and A's and B's own times.
fn pair(r: &Released, cls: &Classifier) -> Option<(bool, i64, i64)> {
    let (_, tw) = r.twin?;
    let dir = cls.direction(&r.obs.key.flow, r.obs.key.from_lo)?;
    let (ta, tb) = match r.obs.point {
        Point::A => (r.obs.ts, r.twin_own),
        Point::B => (r.twin_own, r.obs.ts),
    };
    let _ = tw;
    Some((dir == Direction::AToB, ta, tb))
}

/// Both captures in step with the coarse clock: the fitted clock.
fn fit_clock(
    a: Box<dyn tcpdx_capture::Frames>,
    b: Box<dyn tcpdx_capture::Frames>,
    coarse: Clock,
    sides: &Sides,
) -> Result<Option<Clock>, Error> {
    let mut merge = Merge {
        a: Feed::new(a, Point::A),
        b: Feed::new(b, Point::B),
    };
    let mut m = Matcher::new();
    let mut fit = ClockFit::new();
    // Only for the flows' sides (its events are not used).
    let mut cls = Classifier::new(coarse.t0);
    for (&f, &lo) in sides {
        cls.set_side(f, lo);
    }
    let mut handle = |r: Released| {
        cls.handle(&r, 0);
        if let Some((a_to_b, ta, tb)) = pair(&r, &cls) {
            fit.add(ta, tb, a_to_b);
        }
    };
    while let Some((o, t)) = merge.next(&coarse)? {
        m.push(o, t);
        m.release(t, &mut handle);
    }
    m.release(i64::MAX, &mut handle);
    Ok(fit.fit())
}

/// Both captures in step with `clock`: each released segment to `each` with its stream,
/// after the classifier judged it. Returns the classifier and the stream numbers.
fn walk(
    a: Box<dyn tcpdx_capture::Frames>,
    b: Box<dyn tcpdx_capture::Frames>,
    clock: Clock,
    sides: &Sides,
    notes: &mut Vec<String>,
    mut each: impl FnMut(&Released, u32, &Classifier),
) -> Result<(Classifier, Streams), Error> {
    let mut merge = Merge {
        a: Feed::new(a, Point::A),
        b: Feed::new(b, Point::B),
    };
    let mut m = Matcher::new();
    let mut streams = Streams::default();
    let mut cls = Classifier::new(clock.t0);
    for (&f, &lo) in sides {
        cls.set_side(f, lo);
    }
    let mut next_sweep = clock.t0 + SWEEP_EVERY_NS;
    let mut pending: Vec<Released> = Vec::new();
    let mut done = false;
    while !done {
        match merge.next(&clock)? {
            Some((o, t)) => {
                streams.see(&o);
                m.push(o, t);
                m.release(t, &mut |r| pending.push(r));
                if t > next_sweep {
                    cls.forget_idle(t);
                    next_sweep = t + SWEEP_EVERY_NS;
                }
            }
            None => {
                m.release(i64::MAX, &mut |r| pending.push(r));
                done = true;
            }
        }
        for r in pending.drain(..) {
            let stream = streams.stream(&r.obs.key.flow);
            cls.handle(&r, stream);
            each(&r, stream, &cls);
        }
    }
    for (name, f) in [("A", &merge.a), ("B", &merge.b)] {
        for w in f.reader().warnings() {
            notes.push(format!("capture {name}: {w}"));
        }
    }
    Ok((cls, streams))
}

/// Both captures in step with the fitted clock: losses, delays, counts.
fn locate(
    a: Box<dyn tcpdx_capture::Frames>,
    b: Box<dyn tcpdx_capture::Frames>,
    clock: Clock,
    sides: &Sides,
    v: &mut Vantage,
) -> Result<(), Error> {
    let mut ab = Delays::new("a_to_b", clock.t0);
    let mut ba = Delays::new("b_to_a", clock.t0);
    let (mut matched, mut only_a, mut only_b) = (0u64, 0u64, 0u64);
    let (cls, streams) = walk(a, b, clock, sides, &mut v.notes, |r, _, cls| {
        count(r, &mut matched, &mut only_a, &mut only_b);
        delay(r, cls, &mut ab, &mut ba);
    })?;
    if cls.unjudged > 0 {
        v.notes.push(format!(
            "{} segments of connections beyond the {} judged at once were not judged",
            cls.unjudged,
            losses::MAX_FLOWS
        ));
    }
    let found = cls.finish();
    v.matched = matched;
    v.only_a = only_a;
    v.only_b = only_b;
    v.stream_pairs = streams.pairs();
    v.connections = v.stream_pairs.len() as u64;
    v.losses = found.losses;
    v.capture_drops = found.capture_drops;
    v.reordered = found.reordered;
    v.duplicated = found.duplicated;
    v.events_not_listed = found.not_listed;
    v.delays = vec![ab.summary(), ba.summary()];
    v.t0_ns = clock.t0;
    Ok(())
}

/// Points kept per capture and graph; beyond, every other one is dropped.
const GRAPH_POINTS: usize = 4_000;

/// Up to `max` (stream, direction) with the most losses, or the first connections' A to B
/// data when there are none.
fn graphed(v: &Vantage, max: usize) -> Vec<(u32, Direction)> {
    let mut n: HashMap<(u32, Direction), usize> = HashMap::new();
    for l in &v.losses {
        *n.entry((l.stream, l.direction)).or_default() += 1;
    }
    let mut top: Vec<_> = n.into_iter().collect();
    top.sort_by(|x, y| y.1.cmp(&x.1).then(x.0.0.cmp(&y.0.0)));
    let mut out: Vec<_> = top.into_iter().map(|x| x.0).take(max).collect();
    if out.is_empty() {
        out = v
            .stream_pairs
            .iter()
            .take(max)
            .flat_map(|p| [(p.0, Direction::AToB), (p.0, Direction::BToA)])
            .collect();
    }
    out
}

/// A series with a bounded number of points: when full, every other point goes and only
/// every `stride`-th new one is kept.
#[derive(Default)]
struct Thin {
    pts: Vec<(f64, f64)>,
    stride: usize,
    seen: usize,
}

impl Thin {
    fn push(&mut self, p: (f64, f64)) {
        self.stride = self.stride.max(1);
        self.seen += 1;
        if !self.seen.is_multiple_of(self.stride) {
            return;
        }
        if self.pts.len() >= GRAPH_POINTS {
            let kept = self.pts.iter().step_by(2).copied().collect();
            self.pts = kept;
            self.stride *= 2;
        }
        self.pts.push(p);
    }
}

impl Capture {
    /// Fills `v.graphs` (after [`Capture::vantage`] with the same `b`): the time-sequence
    /// of up to `max` connection directions at both points on A's time axis, the ones with
    /// most losses first, with their losses. One more pass over both captures.
    pub fn vantage_graphs(
        &mut self,
        b: &mut Capture,
        v: &mut Vantage,
        max: usize,
    ) -> Result<(), Error> {
        let chosen = graphed(v, max);
        if chosen.is_empty() {
            return Ok(());
        }
        let clock = Clock {
            t0: v.t0_ns,
            offset_ns: v.offset_s * 1e9,
            drift: v.drift_ppm / 1e6,
        };
        let (_, sides) = coarse(self.reader(1)?.boxed(), b.reader(1)?.boxed())?;
        let mut series: HashMap<(u32, Direction), (Option<u32>, Thin, Thin)> = chosen
            .iter()
            .map(|&k| (k, (None, Thin::default(), Thin::default())))
            .collect();
        let mut notes = Vec::new();
        walk(
            self.reader(1)?.boxed(),
            b.reader(1)?.boxed(),
            clock,
            &sides,
            &mut notes,
            |r, stream, cls| {
                if r.obs.key.len == 0 && !r.obs.syn() {
                    return;
                }
                let Some(dir) = cls.direction(&r.obs.key.flow, r.obs.key.from_lo) else {
                    return;
                };
                let Some((base, at_a, at_b)) = series.get_mut(&(stream, dir)) else {
                    return;
                };
                let base = *base.get_or_insert(r.obs.key.seq);
                let seq = f64::from(r.obs.key.seq.wrapping_sub(base));
                let secs = |t: i64| (t - clock.t0) as f64 / 1e9;
                if let Some((_, t)) = r.at(Point::A) {
                    at_a.push((secs(t), seq));
                }
                if let Some((_, t)) = r.at(Point::B) {
                    at_b.push((secs(t), seq));
                }
            },
        )?;
        v.graphs = chosen
            .into_iter()
            .filter_map(|k| {
                let (_, a, b) = series.remove(&k)?;
                let losses = v
                    .losses
                    .iter()
                    .filter(|l| (l.stream, l.direction) == k)
                    .filter_map(|l| Some((l.t_s, f64::from(l.seq), l.location?)))
                    .collect();
                Some(TwoPointGraph {
                    stream: k.0,
                    direction: k.1.as_str(),
                    a: a.pts,
                    b: b.pts,
                    losses,
                })
            })
            .collect();
        Ok(())
    }
}

fn count(r: &Released, matched: &mut u64, only_a: &mut u64, only_b: &mut u64) {
    match (r.twin.is_some(), r.obs.point) {
        (true, _) => *matched += 1,
        (false, Point::A) => *only_a += 1,
        (false, Point::B) => *only_b += 1,
    }
}

fn delay(r: &Released, cls: &Classifier, ab: &mut Delays, ba: &mut Delays) {
    let (Some((_, ta)), Some((_, tb))) = (r.at(Point::A), r.at(Point::B)) else {
        return;
    };
    match cls.direction(&r.obs.key.flow, r.obs.key.from_lo) {
        Some(Direction::AToB) => ab.add(ta, tb - ta),
        Some(Direction::BToA) => ba.add(tb, ta - tb),
        None => {}
    }
}
