//! Where each segment was lost, reordered, duplicated or missed by a capture.
//!
//! Per connection direction, U is the point a segment passes first and D the second. A
//! transmission is judged once a later transmission of its bytes (or the receiver's ACK)
//! shows what became of it:
//! - seen at U, not at D, sent again: lost between the points; acknowledged before any
//!   retransmission: D's capture missed it;
//! - seen at D, not at U: U's capture missed it (it went past U to reach D);
//! - seen at neither (a hole at U filled later by a retransmission seen at U): lost before U
//!   (a hole filled by an earlier IPv4 ID is a reordering before U instead);
//! - seen at both, sent again before the receiver acknowledged it by the time the
//!   retransmission reached D: lost after D;
//! - seen at D twice: duplicated between; reaching D after a segment sent later: reordered
//!   between.

use std::collections::{BTreeMap, HashMap};

use tcpdx_report::vantage::{Direction, Location, Point, SegmentEvent};

use super::matching::Released;
use super::packet::FlowKey;

/// Events listed per kind; beyond, counted (bounded memory).
pub(crate) const MAX_EVENTS: usize = 100_000;
/// Holes remembered per direction.
const MAX_GAPS: usize = 64;
/// SACK blocks remembered per direction.
const MAX_SACKED: usize = 16;
/// How long after a retransmission reached D a D-SACK (RFC 2883) for it still shows the
/// receiver had the original: its answer to a duplicate is immediate, plus the way back to D.
const DSACK_WAIT_NS: i64 = 100_000_000;
/// A jump of the highest sequence larger than this is not a hole (a new connection on the
/// same ports, a broken capture).
const MAX_GAP_BYTES: u64 = 1 << 30;

/// One transmission of a range.
#[derive(Clone, Copy, Debug)]
struct Tx {
    end: u64,
    raw_seq: u32,
    len: u32,
    id: u32,
    u: Option<(u64, i64)>,
    d: Option<(u64, i64)>,
    judged: bool,
}

/// A hole in what U saw: bytes below a later segment, not yet seen.
#[derive(Clone, Copy, Debug)]
struct Gap {
    start: u64,
    end: u64,
    creator_ident: Option<u16>,
}

/// Seen at both, sent again: lost after D unless the receiver acknowledges it before the
/// retransmission reaches D.
#[derive(Clone, Copy, Debug)]
struct Suspect {
    stream: u32,
    flow: FlowKey,
    from_lo: bool,
    start: u64,
    tx: Tx,
    deadline: i64,
}

#[derive(Debug, Default)]
struct DirState {
    base: Option<u32>,
    /// Highest unwrapped sequence seen (for unwrapping).
    hi: u64,
    txs: BTreeMap<u64, Tx>,
    max_end: Option<u64>,
    gaps: Vec<Gap>,
    ack: Option<u64>,
    sacked: Vec<(u64, u64)>,
    /// The matched segment that reached D latest: (D time, start, tx, reported).
    latest_d: Option<(i64, u64, Tx, bool)>,
}

impl DirState {
    fn unwrap(&mut self, raw: u32) -> u64 {
        let base = *self.base.get_or_insert(raw);
        let rel = u64::from(raw.wrapping_sub(base));
        let epoch = self.hi & !0xffff_ffff;
        let mut best = epoch | rel;
        for cand in [best.wrapping_add(1 << 32), best.wrapping_sub(1 << 32)] {
            if cand < (1 << 62) && cand.abs_diff(self.hi) < best.abs_diff(self.hi) {
                best = cand;
            }
        }
        self.hi = self.hi.max(best);
        best
    }

    fn covered(&self, s: u64, e: u64) -> bool {
        self.ack.is_some_and(|a| a >= e) || self.sacked.iter().any(|&(l, r)| l <= s && e <= r)
    }
}

#[derive(Debug, Default)]
struct Flow {
    /// `flow.lo` is on A's side of the path.
    lo_is_a: Option<bool>,
    dirs: [DirState; 2],
    last_t: i64,
}

/// The events found, in lists bounded by [`MAX_EVENTS`].
#[derive(Debug, Default)]
pub(crate) struct Found {
    pub(crate) losses: Vec<SegmentEvent>,
    pub(crate) capture_drops: Vec<SegmentEvent>,
    pub(crate) reordered: Vec<SegmentEvent>,
    pub(crate) duplicated: Vec<SegmentEvent>,
    pub(crate) not_listed: u64,
}

#[derive(Clone, Copy)]
enum Kind {
    Loss,
    CaptureDrop,
    Reordered,
    Duplicated,
}

/// Judges released segments in order (see the module doc).
pub(crate) struct Classifier {
    flows: HashMap<FlowKey, Flow>,
    suspects: Vec<Suspect>,
    found: Found,
    /// A's first frame time: event times are relative to it.
    t0: i64,
    /// Segments of connections beyond [`MAX_FLOWS`], not judged.
    pub(crate) unjudged: u64,
    max_flows: usize,
}

/// Connections judged at once (bounded memory under a flood of connections); beyond, a new
/// connection's segments are counted, not judged, until idle ones are forgotten.
pub(crate) const MAX_FLOWS: usize = 200_000;

/// Flows idle this long (capture time) are forgotten.
const IDLE_NS: i64 = 120_000_000_000;

impl Classifier {
    pub(crate) fn new(t0: i64) -> Classifier {
        Classifier {
            flows: HashMap::new(),
            suspects: Vec::new(),
            found: Found::default(),
            t0,
            unjudged: 0,
            max_flows: MAX_FLOWS,
        }
    }

    /// The side of the path of `flow`'s lower endpoint, when known before any twin.
    pub(crate) fn set_side(&mut self, flow: FlowKey, lo_is_a: bool) {
        self.flows.entry(flow).or_default().lo_is_a = Some(lo_is_a);
    }

    /// Direction of segments from `flow.lo` (when `from_lo`), if the flow's side is known.
    pub(crate) fn direction(&self, flow: &FlowKey, from_lo: bool) -> Option<Direction> {
        let lo_is_a = self.flows.get(flow)?.lo_is_a?;
        Some(if lo_is_a == from_lo {
            Direction::AToB
        } else {
            Direction::BToA
        })
    }

    /// Drops the flows idle since before `now - IDLE_NS`.
    pub(crate) fn forget_idle(&mut self, now: i64) {
        self.flows.retain(|_, f| f.last_t >= now - IDLE_NS);
    }

    /// Judges one released segment; `stream` numbers its connection.
    pub(crate) fn handle(&mut self, r: &Released, stream: u32) {
        self.expire_suspects(r.t);
        let key = r.obs.key;
        if self.flows.len() >= self.max_flows && !self.flows.contains_key(&key.flow) {
            self.unjudged += 1;
            return;
        }
        let flow = self.flows.entry(key.flow).or_default();
        flow.last_t = r.t;
        if flow.lo_is_a.is_none()
            && let Some((_, tw)) = r.twin
        {
            // The point that saw it first is on the sender's side.
            let first_is_a = match r.obs.point {
                Point::A => tw >= r.t,
                Point::B => tw < r.t,
            };
            flow.lo_is_a = Some(first_is_a == key.from_lo);
        }
        let Some(lo_is_a) = flow.lo_is_a else {
            return;
        };
        let dir = if lo_is_a == key.from_lo {
            Direction::AToB
        } else {
            Direction::BToA
        };
        let (u, d) = match dir {
            Direction::AToB => (Point::A, Point::B),
            Direction::BToA => (Point::B, Point::A),
        };
        let at_u = r.at(u);
        let at_d = r.at(d);
        let t_rel = (r.t - self.t0) as f64 / 1e9;
        let fi = usize::from(key.from_lo);
        let mut events: Vec<(Kind, SegmentEvent)> = Vec::new();

        // Its ACK tells about the other direction.
        if r.obs.ack_flag {
            let other = &mut flow.dirs[1 - fi];
            if other.base.is_some() {
                let a = other.unwrap(key.ack);
                other.ack = Some(other.ack.map_or(a, |x| x.max(a)));
                for &(l, h) in r.obs.sack.iter().take(usize::from(r.obs.sack_n)) {
                    let (l, h) = (other.unwrap(l), other.unwrap(h));
                    if h > l {
                        if other.sacked.len() >= MAX_SACKED {
                            other.sacked.remove(0);
                        }
                        other.sacked.push((l, h));
                    }
                }
                let dsack = dsack_block(other, a, &r.obs.sack, r.obs.sack_n);
                let ack = other.ack.unwrap_or(0);
                other.sacked.retain(|&(_, h)| h > ack);
                let odir = flip(dir);
                // Seen at U only, now acknowledged: D's capture missed it.
                let mut judged = Vec::new();
                for (&s, tx) in other.txs.iter() {
                    if !tx.judged && tx.d.is_none() && other.covered(s, tx.end) {
                        judged.push(s);
                    }
                }
                for s in judged {
                    if let Some(tx) = other.txs.get_mut(&s) {
                        tx.judged = true;
                        let (_, missing) = points(odir);
                        events.push((
                            Kind::CaptureDrop,
                            event(stream, odir, other.base, tx, None, Some(missing), t_rel),
                        ));
                    }
                }
                other
                    .txs
                    .retain(|_, tx| tx.end > ack || !tx.judged && tx.d.is_none());
                other.gaps.retain(|g| g.end > ack);
                let flow_key = key.flow;
                let ofrom = !key.from_lo;
                let covered_now: Vec<usize> = self
                    .suspects
                    .iter()
                    .enumerate()
                    .filter(|(_, s)| {
                        s.flow == flow_key
                            && s.from_lo == ofrom
                            && (r.t <= s.deadline && other.covered(s.start, s.tx.end)
                                || r.t <= s.deadline + DSACK_WAIT_NS
                                    && dsack.is_some_and(|(l, h)| l < s.tx.end && s.start < h))
                    })
                    .map(|(i, _)| i)
                    .collect();
                for i in covered_now.into_iter().rev() {
                    self.suspects.swap_remove(i);
                }
            }
        }

        let seq_len = r.obs.seq_len();
        let st = &mut flow.dirs[fi];
        if seq_len > 0 {
            if r.obs.syn() {
                st.base.get_or_insert(key.seq);
            }
            let s = st.unwrap(key.seq);
            let e = s + u64::from(seq_len);
            let tx = Tx {
                end: e,
                raw_seq: key.seq,
                len: key.len,
                id: key.id,
                u: at_u,
                d: at_d,
                judged: false,
            };
            // A second copy at D of what both points saw.
            if at_u.is_none()
                && let Some(p) = st.txs.get(&s)
                && p.end == e
                && p.id == tx.id
                && p.d.is_some()
                && p.u.is_some()
            {
                events.push((
                    Kind::Duplicated,
                    event(
                        stream,
                        dir,
                        st.base,
                        &tx,
                        Some(Location::Between),
                        None,
                        t_rel,
                    ),
                ));
                self.found_push(events);
                return;
            }
            // Earlier transmissions of these bytes.
            let earlier: Vec<u64> = st
                .txs
                .range(..e)
                .rev()
                .take_while(|(_, p)| p.end > s || p.end + u64::from(u32::MAX) < s)
                .filter(|(_, p)| p.end > s && !p.judged)
                .map(|(&k, _)| k)
                .collect();
            for k in earlier {
                let Some(p) = st.txs.get_mut(&k) else {
                    continue;
                };
                p.judged = true;
                let p = *p;
                match (p.u, p.d) {
                    (Some(_), None) => events.push((
                        Kind::Loss,
                        event(
                            stream,
                            dir,
                            st.base,
                            &p,
                            Some(Location::Between),
                            None,
                            t_rel,
                        ),
                    )),
                    (pu, Some((_, pd))) => {
                        let owd = pu.map_or(0, |(_, t)| pd - t);
                        let arrival = match (at_d, at_u) {
                            (Some((_, t)), _) => t,
                            (None, Some((_, t))) => t + owd,
                            (None, None) => r.t,
                        };
                        if arrival > pd && !st.covered(k, p.end) {
                            self.suspects.push(Suspect {
                                stream,
                                flow: key.flow,
                                from_lo: key.from_lo,
                                start: k,
                                tx: p,
                                deadline: arrival,
                            });
                        }
                    }
                    (None, None) => {}
                }
            }
            // Holes at U this fills.
            let mut kept = Vec::with_capacity(st.gaps.len());
            for g in st.gaps.drain(..) {
                if g.end <= s || g.start >= e {
                    kept.push(g);
                    continue;
                }
                if at_u.is_some() {
                    let earlier_id = matches!(
                        (r.obs.ident, g.creator_ident),
                        (Some(i), Some(c)) if (i.wrapping_sub(c) as i16) < 0
                    );
                    let (kind, place) = if earlier_id {
                        (Kind::Reordered, before(dir))
                    } else {
                        (Kind::Loss, before(dir))
                    };
                    let lost = Tx {
                        u: None,
                        d: None,
                        ..tx
                    };
                    events.push((
                        kind,
                        event(stream, dir, st.base, &lost, Some(place), None, t_rel),
                    ));
                }
                if g.start < s {
                    kept.push(Gap { end: s, ..g });
                }
                if g.end > e {
                    kept.push(Gap { start: e, ..g });
                }
            }
            st.gaps = kept;
            if at_u.is_none() {
                let (missing, _) = points(dir);
                events.push((
                    Kind::CaptureDrop,
                    event(stream, dir, st.base, &tx, None, Some(missing), t_rel),
                ));
            }
            // Reordering between: it reached D before one sent earlier.
            if let (Some(_), Some((_, td))) = (at_u, at_d) {
                match &mut st.latest_d {
                    Some((latest, ls, ltx, reported)) if td < *latest => {
                        if !*reported && *ls < s {
                            *reported = true;
                            events.push((
                                Kind::Reordered,
                                event(
                                    stream,
                                    dir,
                                    st.base,
                                    ltx,
                                    Some(Location::Between),
                                    None,
                                    t_rel,
                                ),
                            ));
                        }
                    }
                    _ => st.latest_d = Some((td, s, tx, false)),
                }
            }
            if let Some(me) = st.max_end
                && s > me
                && s - me < MAX_GAP_BYTES
            {
                if st.gaps.len() >= MAX_GAPS {
                    st.gaps.remove(0);
                }
                st.gaps.push(Gap {
                    start: me,
                    end: s,
                    creator_ident: r.obs.ident,
                });
            }
            st.max_end = Some(st.max_end.map_or(e, |m| m.max(e)));
            st.txs.insert(s, tx);
        }
        self.found_push(events);
    }

    /// Suspects whose retransmission reached D before `now` with no ACK: lost after D.
    fn expire_suspects(&mut self, now: i64) {
        if self
            .suspects
            .iter()
            .all(|s| s.deadline + DSACK_WAIT_NS >= now)
        {
            return;
        }
        let (due, keep): (Vec<Suspect>, Vec<Suspect>) = self
            .suspects
            .drain(..)
            .partition(|s| s.deadline + DSACK_WAIT_NS < now);
        self.suspects = keep;
        let mut events = Vec::new();
        for s in due {
            let Some(f) = self.flows.get(&s.flow) else {
                continue;
            };
            let Some(lo_is_a) = f.lo_is_a else {
                continue;
            };
            let dir = if lo_is_a == s.from_lo {
                Direction::AToB
            } else {
                Direction::BToA
            };
            let base = f.dirs[usize::from(s.from_lo)].base;
            let t_rel = (s.deadline - self.t0) as f64 / 1e9;
            events.push((
                Kind::Loss,
                event(s.stream, dir, base, &s.tx, Some(after(dir)), None, t_rel),
            ));
        }
        self.found_push(events);
    }

    fn found_push(&mut self, events: Vec<(Kind, SegmentEvent)>) {
        for (k, e) in events {
            let list = match k {
                Kind::Loss => &mut self.found.losses,
                Kind::CaptureDrop => &mut self.found.capture_drops,
                Kind::Reordered => &mut self.found.reordered,
                Kind::Duplicated => &mut self.found.duplicated,
            };
            if list.len() < MAX_EVENTS {
                list.push(e);
            } else {
                self.found.not_listed += 1;
            }
        }
    }

    /// The events, once every segment was handled.
    pub(crate) fn finish(mut self) -> Found {
        self.expire_suspects(i64::MAX);
        let f = &mut self.found;
        for l in [
            &mut f.losses,
            &mut f.capture_drops,
            &mut f.reordered,
            &mut f.duplicated,
        ] {
            l.sort_by(|a, b| a.t_s.total_cmp(&b.t_s));
        }
        self.found
    }
}

/// The D-SACK block of an ACK (RFC 2883): its first SACK block when below the cumulative
/// ACK `ack` or inside the second block: bytes the receiver got twice.
fn dsack_block(st: &mut DirState, ack: u64, sack: &[(u32, u32); 4], n: u8) -> Option<(u64, u64)> {
    let first = *sack.first().filter(|_| n >= 1)?;
    let (l, h) = (st.unwrap(first.0), st.unwrap(first.1));
    let inside_second = n >= 2
        && sack.get(1).is_some_and(|&(l2, h2)| {
            let (l2, h2) = (st.unwrap(l2), st.unwrap(h2));
            l2 <= l && h <= h2
        });
    (h > l && (h <= ack || inside_second)).then_some((l, h))
}

fn flip(d: Direction) -> Direction {
    match d {
        Direction::AToB => Direction::BToA,
        Direction::BToA => Direction::AToB,
    }
}

/// (U, D) of a direction.
fn points(d: Direction) -> (Point, Point) {
    match d {
        Direction::AToB => (Point::A, Point::B),
        Direction::BToA => (Point::B, Point::A),
    }
}

/// Outside U on the path.
fn before(d: Direction) -> Location {
    match d {
        Direction::AToB => Location::BeforeA,
        Direction::BToA => Location::AfterB,
    }
}

/// Outside D on the path.
fn after(d: Direction) -> Location {
    match d {
        Direction::AToB => Location::AfterB,
        Direction::BToA => Location::BeforeA,
    }
}

fn event(
    stream: u32,
    direction: Direction,
    base: Option<u32>,
    tx: &Tx,
    location: Option<Location>,
    missing_at: Option<Point>,
    t_s: f64,
) -> SegmentEvent {
    let (fa, fb) = match direction {
        Direction::AToB => (tx.u, tx.d),
        Direction::BToA => (tx.d, tx.u),
    };
    SegmentEvent {
        stream,
        direction,
        seq: tx.raw_seq.wrapping_sub(base.unwrap_or(tx.raw_seq)),
        seq_raw: tx.raw_seq,
        len: tx.len,
        frame_a: fa.map(|x| x.0),
        frame_b: fb.map(|x| x.0),
        location,
        missing_at,
        t_s,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vantage::packet::{MatchKey, Obs};
    use std::net::{IpAddr, Ipv4Addr};

    fn released(port: u16) -> Released {
        let ip = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1));
        let obs = Obs {
            point: Point::A,
            frame: 1,
            ts: 0,
            key: MatchKey {
                flow: FlowKey {
                    lo: (ip, port),
                    hi: (ip, 9999),
                },
                from_lo: true,
                seq: 1,
                ack: 0,
                len: 100,
                flags: 0,
                id: 1,
            },
            ident: Some(1),
            ack_flag: false,
            sack: [(0, 0); 4],
            sack_n: 0,
        };
        Released {
            obs,
            t: 0,
            twin: Some((1, 5)),
            twin_own: 5,
        }
    }

    #[test]
    fn connections_beyond_the_bound_are_counted_not_judged() {
        let mut c = Classifier::new(0);
        c.max_flows = 2;
        c.handle(&released(1), 0);
        c.handle(&released(2), 1);
        c.handle(&released(1), 0);
        assert_eq!(c.unjudged, 0, "at the bound");
        c.handle(&released(3), 2);
        assert_eq!(c.unjudged, 1, "just above it");
        assert_eq!(c.flows.len(), 2);
    }

    fn state() -> DirState {
        let mut st = DirState::default();
        st.unwrap(1000);
        st
    }

    #[test]
    fn dsack_is_a_first_block_below_the_ack_or_inside_the_second() {
        let blocks = |b: &[(u32, u32)]| {
            let mut s = [(0, 0); 4];
            for (x, y) in s.iter_mut().zip(b) {
                *x = *y;
            }
            (s, b.len() as u8)
        };
        let mut st = state();
        // Below the cumulative ACK (relative 5000): a duplicate.
        let (s, n) = blocks(&[(2000, 3000)]);
        assert_eq!(dsack_block(&mut st, 5000, &s, n), Some((1000, 2000)));
        // Ending at the ACK: still below it.
        let (s, n) = blocks(&[(5000, 6000)]);
        assert_eq!(dsack_block(&mut st, 5000, &s, n), Some((4000, 5000)));
        // Above the ACK and alone: an ordinary SACK block.
        let (s, n) = blocks(&[(6001, 7000)]);
        assert_eq!(dsack_block(&mut st, 5000, &s, n), None);
        // Inside the second block.
        let (s, n) = blocks(&[(8000, 9000), (7000, 10000)]);
        assert_eq!(dsack_block(&mut st, 5000, &s, n), Some((7000, 8000)));
        // Beside the second block, not inside.
        let (s, n) = blocks(&[(8000, 9000), (9000, 10000)]);
        assert_eq!(dsack_block(&mut st, 5000, &s, n), None);
        let (s, _) = blocks(&[(2000, 3000)]);
        assert_eq!(dsack_block(&mut st, 5000, &s, 0), None, "no block");
    }
}
