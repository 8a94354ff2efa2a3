//! Reading the two captures together in time order and finding each segment in both.
//!
//! Both readers advance in step (B's times shifted into A's clock), and every segment waits
//! in a window of [`MATCH_WINDOW_NS`] for its twin from the other capture: a segment is
//! released once the merged time has gone past it by the window, with its twin if one came.
//! So memory holds the window's segments, whatever the captures' length, and segments come
//! out in the order they were first seen on the path.

use std::collections::{HashMap, VecDeque};

use tcpdx_capture::Frames;

use super::clock::Clock;
use super::packet::{FlowKey, MatchKey, Obs, Point};
use crate::Error;

/// How long a segment waits for its twin: more than any one-way delay between two capture
/// points of one path (plus the clock's error).
pub(crate) const MATCH_WINDOW_NS: i64 = 1_000_000_000;

/// One capture's next segment.
pub(crate) struct Feed {
    reader: Box<dyn Frames>,
    point: Point,
    next: Option<Obs>,
    done: bool,
}

impl Feed {
    pub(crate) fn new(reader: Box<dyn Frames>, point: Point) -> Feed {
        Feed {
            reader,
            point,
            next: None,
            done: false,
        }
    }

    /// The next TCP segment, without taking it.
    pub(crate) fn peek(&mut self) -> Result<Option<&Obs>, Error> {
        while self.next.is_none() && !self.done {
            match self.reader.next_frame()? {
                Some(f) => self.next = Obs::of(self.point, &f),
                None => self.done = true,
            }
        }
        Ok(self.next.as_ref())
    }

    pub(crate) fn take(&mut self) -> Option<Obs> {
        self.next.take()
    }

    pub(crate) fn reader(&self) -> &dyn Frames {
        &*self.reader
    }
}

/// The two feeds merged by time in A's clock.
pub(crate) struct Merge {
    pub(crate) a: Feed,
    pub(crate) b: Feed,
}

impl Merge {
    /// The next segment of either capture and its time in A's clock.
    pub(crate) fn next(&mut self, clock: &Clock) -> Result<Option<(Obs, i64)>, Error> {
        let ta = self.a.peek()?.map(|o| o.ts);
        let tb = self.b.peek()?.map(|o| clock.a_time(o.ts));
        let pick_a = match (ta, tb) {
            (None, None) => return Ok(None),
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (Some(x), Some(y)) => x <= y,
        };
        Ok(if pick_a {
            self.a.take().zip(ta)
        } else {
            self.b.take().zip(tb)
        })
    }
}

/// A segment whose wait is over: where it was seen first and, if it was, at the other point.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Released {
    pub(crate) obs: Obs,
    /// In A's clock.
    pub(crate) t: i64,
    /// The twin: frame and time in A's clock.
    pub(crate) twin: Option<(u64, i64)>,
    /// The twin's time in its own capture's clock.
    pub(crate) twin_own: i64,
}

impl Released {
    /// Frame and A-clock time at `p`.
    pub(crate) fn at(&self, p: Point) -> Option<(u64, i64)> {
        if self.obs.point == p {
            Some((self.obs.frame, self.t))
        } else {
            self.twin
        }
    }
}

/// Segments waiting for their twin.
pub(crate) struct Matcher {
    slots: VecDeque<Released>,
    /// Absolute index of `slots[0]`.
    base: u64,
    /// Unmatched segments by key, per point (indexes into `slots`).
    waiting: [HashMap<MatchKey, VecDeque<u64>>; 2],
}

fn side(p: Point) -> usize {
    match p {
        Point::A => 0,
        Point::B => 1,
    }
}

impl Matcher {
    pub(crate) fn new() -> Matcher {
        Matcher {
            slots: VecDeque::new(),
            base: 0,
            waiting: [HashMap::new(), HashMap::new()],
        }
    }

    /// A segment seen at `t` (A's clock): the twin of a waiting one, or waits itself.
    pub(crate) fn push(&mut self, obs: Obs, t: i64) {
        let other = 1 - side(obs.point);
        if let Some(q) = self.waiting[other].get_mut(&obs.key) {
            while let Some(i) = q.pop_front() {
                let slot = i
                    .checked_sub(self.base)
                    .and_then(|k| usize::try_from(k).ok())
                    .and_then(|k| self.slots.get_mut(k));
                if let Some(s) = slot
                    && s.twin.is_none()
                {
                    s.twin = Some((obs.frame, t));
                    s.twin_own = obs.ts;
                    if q.is_empty() {
                        self.waiting[other].remove(&obs.key);
                    }
                    return;
                }
            }
            self.waiting[other].remove(&obs.key);
        }
        let i = self.base + self.slots.len() as u64;
        self.slots.push_back(Released {
            obs,
            t,
            twin: None,
            twin_own: 0,
        });
        self.waiting[side(obs.point)]
            .entry(obs.key)
            .or_default()
            .push_back(i);
    }

    /// Releases the segments seen before `now - MATCH_WINDOW_NS` (all with `i64::MAX`).
    pub(crate) fn release(&mut self, now: i64, out: &mut impl FnMut(Released)) {
        while let Some(s) = self.slots.front() {
            if s.t.saturating_add(MATCH_WINDOW_NS) >= now {
                break;
            }
            let Some(s) = self.slots.pop_front() else {
                break;
            };
            let i = self.base;
            self.base += 1;
            if s.twin.is_none() {
                let w = &mut self.waiting[side(s.obs.point)];
                if let Some(q) = w.get_mut(&s.obs.key) {
                    q.retain(|&x| x != i);
                    if q.is_empty() {
                        w.remove(&s.obs.key);
                    }
                }
            }
            out(s);
        }
    }
}

/// `tcp.stream` numbers of each capture: connections in the order of their first frame
/// (Wireshark's numbering when no port is reused).
#[derive(Debug, Default)]
pub(crate) struct Streams {
    ids: HashMap<FlowKey, [Option<u32>; 2]>,
    next: [u32; 2],
}

impl Streams {
    pub(crate) fn see(&mut self, o: &Obs) {
        let s = side(o.point);
        let e = self.ids.entry(o.key.flow).or_default();
        if e[s].is_none() {
            e[s] = Some(self.next[s]);
            self.next[s] += 1;
        }
    }

    /// The connection's stream in A, else in B.
    pub(crate) fn stream(&self, f: &FlowKey) -> u32 {
        self.ids.get(f).and_then(|e| e[0].or(e[1])).unwrap_or(0)
    }

    /// Pairs of (stream in A, stream in B) of the connections seen at both.
    pub(crate) fn pairs(&self) -> Vec<(u32, u32)> {
        let mut v: Vec<_> = self
            .ids
            .values()
            .filter_map(|e| Some((e[0]?, e[1]?)))
            .collect();
        v.sort_unstable();
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{IpAddr, Ipv4Addr};

    fn obs(point: Point, frame: u64, seq: u32, id: u32) -> Obs {
        let ip = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1));
        Obs {
            point,
            frame,
            ts: 0,
            key: MatchKey {
                flow: FlowKey {
                    lo: (ip, 1),
                    hi: (ip, 2),
                },
                from_lo: true,
                seq,
                ack: 0,
                len: 100,
                flags: 0,
                id,
            },
            ident: None,
            ack_flag: true,
            sack: [(0, 0); 4],
            sack_n: 0,
        }
    }

    #[test]
    fn twins_pair_in_order_and_lone_segments_wait_out_the_window() {
        let mut m = Matcher::new();
        m.push(obs(Point::A, 1, 100, 7), 0);
        m.push(obs(Point::A, 2, 100, 7), 10); // the same key twice (no IPv4 ID, same TSval)
        m.push(obs(Point::A, 3, 200, 8), 20);
        m.push(obs(Point::B, 1, 100, 7), 5_000);
        m.push(obs(Point::B, 2, 100, 7), 6_000);
        let mut out = Vec::new();
        m.release(MATCH_WINDOW_NS, &mut |r| out.push(r));
        assert!(out.is_empty(), "nothing is released before its window ends");
        m.release(MATCH_WINDOW_NS + 21, &mut |r| out.push(r));
        let twins: Vec<_> = out.iter().map(|r| (r.obs.frame, r.twin)).collect();
        assert_eq!(
            twins,
            vec![(1, Some((1, 5_000))), (2, Some((2, 6_000))), (3, None)]
        );
        // A segment of B arriving after its A twin was released waits alone.
        m.push(obs(Point::B, 3, 200, 8), MATCH_WINDOW_NS + 30);
        m.release(i64::MAX, &mut |r| out.push(r));
        assert_eq!(
            out.last().map(|r| (r.obs.point, r.twin)),
            Some((Point::B, None))
        );
    }
}
