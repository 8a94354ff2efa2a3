//! Pure core of the relay: impairment decisions per packet and a time-ordered release
//! queue. No I/O, no allocation after construction; unit-tested with synthetic packets.

use super::pkt::{self, TcpView};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::cmp::Ordering;
use std::collections::{BinaryHeap, VecDeque};

/// Direction of a packet through the router.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dir {
    /// Client to server.
    C2s = 0,
    /// Server to client.
    S2c = 1,
}

impl Dir {
    /// Short name used in logs.
    pub fn name(self) -> &'static str {
        match self {
            Dir::C2s => "c2s",
            Dir::S2c => "s2c",
        }
    }
}

/// Impairment parameters (times in nanoseconds).
#[derive(Debug, Clone, Default)]
pub struct Impairments {
    /// Server address (host order): packets to it travel c2s, everything else s2c.
    pub server: u32,
    /// One-way delay client to server.
    pub delay_c2s_ns: i64,
    /// One-way delay server to client.
    pub delay_s2c_ns: i64,
    /// Restrict drops/reorders to segments with this source or destination port.
    pub only_port: Option<u16>,
    /// 1-based indices of data segments to drop (sorted).
    pub drop_nth: Vec<u64>,
    /// Also drop this many retransmissions of each segment dropped by `drop_nth`/`drop_prob`.
    pub drop_repeat: u32,
    /// Probability of dropping a data segment.
    pub drop_prob: f64,
    /// Data segment indices that start a blackout (sorted).
    pub blackout_after: Vec<u64>,
    /// Blackout length.
    pub blackout_ns: i64,
    /// 1-based indices of data segments to reorder (sorted).
    pub reorder_nth: Vec<u64>,
    /// Probability of reordering a data segment.
    pub reorder_prob: f64,
    /// Count-based reordering: release after this many later packets of the same direction.
    pub reorder_k: u32,
    /// Time-based reordering: extra delay of a reordered segment (0 = count-based).
    pub reorder_delay_ns: i64,
    /// Seed of the random choices.
    pub seed: u64,
}

/// Kind of an injected event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventKind {
    /// Dropped because chosen (Nth) or random.
    Drop,
    /// Dropped retransmission of a previously dropped segment (`drop_repeat`).
    DropRtx,
    /// Dropped during a blackout.
    DropBlackout,
    /// A blackout began.
    BlackoutStart,
    /// Segment held back (reordered).
    Reorder,
}

impl EventKind {
    /// Name used in the JSONL log.
    pub fn name(self) -> &'static str {
        match self {
            EventKind::Drop => "drop",
            EventKind::DropRtx => "drop_rtx",
            EventKind::DropBlackout => "drop_blackout",
            EventKind::BlackoutStart => "blackout_start",
            EventKind::Reorder => "reorder",
        }
    }
}

/// One injected event (the relay logs it with a CLOCK_REALTIME timestamp).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Event {
    /// What happened.
    pub kind: EventKind,
    /// Data segment index (1-based, over the impaired flow(s)).
    pub n: u64,
    /// The segment's TCP header.
    pub tcp: TcpView,
    /// Direction.
    pub dir: Dir,
}

/// What to do with a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Send at `due` (monotonic ns).
    Forward { due: i64 },
    /// Hold until `k` later packets of the same direction were sent (or `deadline`).
    Hold { k: u32, deadline: i64 },
    /// Discard.
    Drop,
}

/// Per-packet impairment decisions.
pub struct Impairer {
    cfg: Impairments,
    rng: ChaCha8Rng,
    n_data: u64,
    blackout_until: i64,
    bo_next: usize,
    repeat: Vec<(u32, u16, u16, u32, u32)>,
}

fn in_sorted(list: &[u64], n: u64) -> bool {
    list.binary_search(&n).is_ok()
}

/// Whether the sorted `list` holds a value in `lo..=hi`.
fn any_in(list: &[u64], lo: u64, hi: u64) -> bool {
    list.get(list.partition_point(|&x| x < lo))
        .is_some_and(|&x| x <= hi)
}

impl Impairer {
    /// Creates the decision state; the random stream depends only on `cfg.seed`.
    pub fn new(cfg: Impairments) -> Impairer {
        let rng = ChaCha8Rng::seed_from_u64(cfg.seed);
        Impairer {
            cfg,
            rng,
            n_data: 0,
            blackout_until: 0,
            bo_next: 0,
            repeat: Vec::with_capacity(4096),
        }
    }

    /// Direction of a packet by destination address.
    pub fn dir_of(&self, p: &[u8]) -> Dir {
        if pkt::ipv4_dst(p) == Some(self.cfg.server) {
            Dir::C2s
        } else {
            Dir::S2c
        }
    }

    /// Data segments seen so far on the impaired flow(s).
    pub fn data_segments(&self) -> u64 {
        self.n_data
    }

    fn delay(&self, dir: Dir) -> i64 {
        match dir {
            Dir::C2s => self.cfg.delay_c2s_ns,
            Dir::S2c => self.cfg.delay_s2c_ns,
        }
    }

    /// For a GSO super-packet `p` standing for `segs` wire segments: if no impairment can
    /// act on any of them, counts them and returns the verdict for the whole packet (it is
    /// forwarded uncut); None if it must be cut and each segment decided by [`Self::decide`].
    pub fn decide_whole(&mut self, now: i64, p: &[u8], segs: u32) -> Option<(Dir, Verdict)> {
        let dir = self.dir_of(p);
        let fwd = Verdict::Forward {
            due: now + self.delay(dir),
        };
        let Some(t) = pkt::parse(p) else {
            return Some((dir, fwd));
        };
        if t.payload == 0
            || self
                .cfg
                .only_port
                .is_some_and(|port| port != t.sport && port != t.dport)
        {
            return Some((dir, fwd));
        }
        let (lo, hi) = (self.n_data + 1, self.n_data + u64::from(segs));
        let c = &self.cfg;
        let quiet = c.drop_prob == 0.0
            && c.reorder_prob == 0.0
            && self.repeat.is_empty()
            && now >= self.blackout_until
            && c.blackout_after.get(self.bo_next).is_none_or(|&b| b > hi)
            && !any_in(&c.drop_nth, lo, hi)
            && !any_in(&c.reorder_nth, lo, hi);
        if !quiet {
            return None;
        }
        self.n_data = hi;
        Some((dir, fwd))
    }

    /// Decides the fate of packet `p` arriving at monotonic time `now`; may report an event.
    pub fn decide(&mut self, now: i64, p: &[u8], events: &mut impl FnMut(Event)) -> (Dir, Verdict) {
        let dir = self.dir_of(p);
        let delay = self.delay(dir);
        let fwd = Verdict::Forward { due: now + delay };
        let Some(t) = pkt::parse(p) else {
            return (dir, fwd);
        };
        if t.payload == 0
            || self
                .cfg
                .only_port
                .is_some_and(|port| port != t.sport && port != t.dport)
        {
            return (dir, fwd);
        }
        self.n_data += 1;
        let n = self.n_data;
        let ev = |kind| Event {
            kind,
            n,
            tcp: t,
            dir,
        };
        if let Some(i) = self
            .repeat
            .iter()
            .position(|r| (r.0, r.1, r.2, r.3) == (t.src, t.sport, t.dport, t.seq))
        {
            self.repeat[i].4 -= 1;
            if self.repeat[i].4 == 0 {
                self.repeat.swap_remove(i);
            }
            events(ev(EventKind::DropRtx));
            return (dir, Verdict::Drop);
        }
        if self.bo_next < self.cfg.blackout_after.len()
            && n >= self.cfg.blackout_after[self.bo_next]
        {
            self.bo_next += 1;
            self.blackout_until = now + self.cfg.blackout_ns;
            events(ev(EventKind::BlackoutStart));
        }
        if now < self.blackout_until {
            events(ev(EventKind::DropBlackout));
            return (dir, Verdict::Drop);
        }
        let chosen = in_sorted(&self.cfg.drop_nth, n);
        let random = self.cfg.drop_prob > 0.0 && self.rng.random::<f64>() < self.cfg.drop_prob;
        if chosen || random {
            if self.cfg.drop_repeat > 0 && self.repeat.len() < self.repeat.capacity() {
                self.repeat
                    .push((t.src, t.sport, t.dport, t.seq, self.cfg.drop_repeat));
            }
            events(ev(EventKind::Drop));
            return (dir, Verdict::Drop);
        }
        let chosen = in_sorted(&self.cfg.reorder_nth, n);
        let random =
            self.cfg.reorder_prob > 0.0 && self.rng.random::<f64>() < self.cfg.reorder_prob;
        if chosen || random {
            events(ev(EventKind::Reorder));
            if self.cfg.reorder_delay_ns > 0 {
                return (
                    dir,
                    Verdict::Forward {
                        due: now + delay + self.cfg.reorder_delay_ns,
                    },
                );
            }
            let k = self.cfg.reorder_k.max(1);
            return (
                dir,
                Verdict::Hold {
                    k,
                    deadline: now + delay + 200_000_000,
                },
            );
        }
        (dir, fwd)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Entry {
    due: i64,
    id: u64,
    slot: u32,
    dir: Dir,
}

impl Ord for Entry {
    fn cmp(&self, o: &Self) -> Ordering {
        // min-heap on (due, arrival order)
        (o.due, o.id).cmp(&(self.due, self.id))
    }
}

impl PartialOrd for Entry {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}

#[derive(Debug, Clone, Copy)]
struct Held {
    slot: u32,
    dir: Dir,
    id: u64,
    left: u32,
    deadline: i64,
}

/// Time-ordered release queue plus count-based holds; stores slot indices only.
pub struct Scheduler {
    heap: BinaryHeap<Entry>,
    held: VecDeque<Held>,
    next_id: u64,
}

impl Scheduler {
    /// Creates a queue for up to `cap` packets (no allocation below that).
    pub fn with_capacity(cap: usize) -> Scheduler {
        Scheduler {
            heap: BinaryHeap::with_capacity(cap),
            held: VecDeque::with_capacity(cap.min(65536)),
            next_id: 0,
        }
    }

    /// Queues `slot` for release at `due`.
    pub fn push(&mut self, due: i64, slot: u32, dir: Dir) {
        self.next_id += 1;
        self.heap.push(Entry {
            due,
            id: self.next_id,
            slot,
            dir,
        });
    }

    /// Holds `slot` until `k` later packets of `dir` were sent or `deadline` passes.
    pub fn hold(&mut self, slot: u32, dir: Dir, k: u32, deadline: i64) {
        self.next_id += 1;
        self.held.push_back(Held {
            slot,
            dir,
            id: self.next_id,
            left: k,
            deadline,
        });
    }

    /// Whether a count-based hold is waiting (it counts packets sent, so super-packets
    /// must then be cut to count wire segments).
    pub fn has_held(&self) -> bool {
        !self.held.is_empty()
    }

    /// Packets queued or held.
    pub fn len(&self) -> usize {
        self.heap.len() + self.held.len()
    }

    /// Whether nothing is queued or held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Earliest time anything must be sent.
    pub fn next_due(&self) -> Option<i64> {
        let h = self.heap.peek().map(|e| e.due);
        let d = self.held.iter().map(|h| h.deadline).min();
        match (h, d) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Pops the next packet due at or before `now`, with its direction.
    /// Returns (slot, direction, arrival id).
    pub fn pop_due(&mut self, now: i64) -> Option<(u32, Dir, u64)> {
        if let Some(i) = self.held.iter().position(|h| h.deadline <= now) {
            let h = self.held.remove(i).expect("index valid");
            return Some((h.slot, h.dir, h.id));
        }
        match self.heap.peek() {
            Some(e) if e.due <= now => self.heap.pop().map(|e| (e.slot, e.dir, e.id)),
            _ => None,
        }
    }

    /// Records that packet `id` of `dir` was sent; only packets that arrived after a held
    /// one count towards its release. Returns a held slot that is now released.
    pub fn on_sent(&mut self, dir: Dir, id: u64) -> Option<(u32, Dir, u64)> {
        let mut release = None;
        for (i, h) in self.held.iter_mut().enumerate() {
            if h.dir == dir && id > h.id && h.left > 0 {
                h.left -= 1;
                if h.left == 0 && release.is_none() {
                    release = Some(i);
                }
            }
        }
        release
            .and_then(|i| self.held.remove(i))
            .map(|h| (h.slot, h.dir, h.id))
    }

    /// Releases a held slot whose count already reached zero (after `on_sent`).
    pub fn pop_released(&mut self) -> Option<(u32, Dir, u64)> {
        let i = self.held.iter().position(|h| h.left == 0)?;
        self.held.remove(i).map(|h| (h.slot, h.dir, h.id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::relay::pkt::build_tcp;

    const C: [u8; 4] = [10, 1, 1, 2];
    const S: [u8; 4] = [10, 1, 2, 2];

    fn cfg() -> Impairments {
        Impairments {
            server: u32::from_be_bytes(S),
            delay_c2s_ns: 5_000_000,
            delay_s2c_ns: 1_000_000,
            ..Default::default()
        }
    }

    fn run(imp: &mut Impairer, now: i64, seq: u32, len: usize) -> (Verdict, Vec<Event>) {
        let p = build_tcp(C, S, 40000, 5001, seq, len);
        let mut evs = Vec::new();
        let (_, v) = imp.decide(now, &p, &mut |e| evs.push(e));
        (v, evs)
    }

    #[test]
    fn delay_per_direction() {
        let mut imp = Impairer::new(cfg());
        assert_eq!(
            run(&mut imp, 100, 1, 1448).0,
            Verdict::Forward { due: 5_000_100 }
        );
        let ack = build_tcp(S, C, 5001, 40000, 9, 0);
        let (d, v) = imp.decide(100, &ack, &mut |_| {});
        assert_eq!((d, v), (Dir::S2c, Verdict::Forward { due: 1_000_100 }));
        assert_eq!(imp.data_segments(), 1, "pure ACKs are not data segments");
    }

    #[test]
    fn drop_nth_with_repeat() {
        let mut imp = Impairer::new(Impairments {
            drop_nth: vec![2],
            drop_repeat: 1,
            ..cfg()
        });
        assert!(matches!(
            run(&mut imp, 0, 1, 100).0,
            Verdict::Forward { .. }
        ));
        let (v, e) = run(&mut imp, 0, 101, 100);
        assert_eq!((v, e[0].kind, e[0].n), (Verdict::Drop, EventKind::Drop, 2));
        let (v, e) = run(&mut imp, 10, 101, 100); // the retransmission
        assert_eq!((v, e[0].kind), (Verdict::Drop, EventKind::DropRtx));
        assert!(matches!(
            run(&mut imp, 20, 101, 100).0,
            Verdict::Forward { .. }
        ));
    }

    #[test]
    fn blackout_drops_everything_for_its_length() {
        let mut imp = Impairer::new(Impairments {
            blackout_after: vec![3],
            blackout_ns: 1000,
            ..cfg()
        });
        run(&mut imp, 0, 1, 10);
        run(&mut imp, 0, 11, 10);
        let (v, e) = run(&mut imp, 100, 21, 10);
        assert_eq!(v, Verdict::Drop);
        assert_eq!(
            e.iter().map(|e| e.kind).collect::<Vec<_>>(),
            [EventKind::BlackoutStart, EventKind::DropBlackout]
        );
        assert_eq!(run(&mut imp, 1099, 21, 10).0, Verdict::Drop);
        assert!(matches!(
            run(&mut imp, 1100, 21, 10).0,
            Verdict::Forward { .. }
        ));
    }

    #[test]
    fn random_drops_are_seeded() {
        let pick = |seed| {
            let mut imp = Impairer::new(Impairments {
                drop_prob: 0.1,
                seed,
                ..cfg()
            });
            (0..1000)
                .filter(|&i| run(&mut imp, 0, i * 100, 100).0 == Verdict::Drop)
                .collect::<Vec<_>>()
        };
        let a = pick(7);
        assert_eq!(a, pick(7));
        assert_ne!(a, pick(8));
        assert!((50..150).contains(&a.len()), "{}", a.len());
    }

    #[test]
    fn reorder_by_time_and_count() {
        let mut imp = Impairer::new(Impairments {
            reorder_nth: vec![1],
            reorder_delay_ns: 15_000_000,
            ..cfg()
        });
        assert_eq!(
            run(&mut imp, 0, 1, 10).0,
            Verdict::Forward { due: 20_000_000 }
        );
        let mut imp = Impairer::new(Impairments {
            reorder_nth: vec![1],
            reorder_k: 2,
            ..cfg()
        });
        assert!(matches!(
            run(&mut imp, 0, 1, 10).0,
            Verdict::Hold { k: 2, .. }
        ));
    }

    #[test]
    fn super_packets_pass_whole_only_when_no_impairment_can_act() {
        let p = build_tcp(C, S, 40000, 5001, 1, 14480);
        let mut imp = Impairer::new(Impairments {
            drop_nth: vec![25],
            blackout_after: vec![40],
            blackout_ns: 1000,
            ..cfg()
        });
        assert_eq!(
            imp.decide_whole(0, &p, 10),
            Some((Dir::C2s, Verdict::Forward { due: 5_000_000 }))
        );
        assert_eq!(imp.data_segments(), 10);
        assert!(
            imp.decide_whole(0, &p, 20).is_none(),
            "segment 25 is in 11..=30"
        );
        assert_eq!(
            imp.data_segments(),
            10,
            "nothing counted when it must be cut"
        );
        assert!(imp.decide_whole(0, &p, 14).is_some(), "11..=24");
        assert!(imp.decide_whole(0, &p, 1).is_none(), "25");
        assert_eq!(run(&mut imp, 0, 1, 1448).0, Verdict::Drop);
        assert!(imp.decide_whole(0, &p, 14).is_some(), "26..=39");
        assert!(
            imp.decide_whole(0, &p, 2).is_none(),
            "blackout starts at 40"
        );
        let ack = build_tcp(S, C, 5001, 40000, 9, 0);
        assert!(imp.decide_whole(0, &ack, 1).is_some());
        let mut rnd = Impairer::new(Impairments {
            drop_prob: 0.01,
            ..cfg()
        });
        assert!(rnd.decide_whole(0, &p, 10).is_none());
    }

    #[test]
    fn scheduler_orders_by_time_then_arrival() {
        let mut s = Scheduler::with_capacity(16);
        s.push(30, 1, Dir::C2s);
        s.push(10, 2, Dir::C2s);
        s.push(10, 3, Dir::S2c);
        assert_eq!(s.next_due(), Some(10));
        assert_eq!(s.pop_due(9), None);
        assert_eq!(s.pop_due(10).map(|x| x.0), Some(2));
        assert_eq!(s.pop_due(10).map(|x| (x.0, x.1)), Some((3, Dir::S2c)));
        assert_eq!(s.pop_due(29), None);
        assert_eq!(s.pop_due(31).map(|x| x.0), Some(1));
        assert!(s.is_empty());
    }

    #[test]
    fn held_packet_waits_for_k_later_arrivals_or_deadline() {
        let mut s = Scheduler::with_capacity(16);
        s.push(100, 1, Dir::C2s); // arrived before the held one: does not count
        s.hold(9, Dir::C2s, 2, 1000);
        s.push(100, 2, Dir::C2s);
        s.push(100, 3, Dir::S2c);
        s.push(100, 4, Dir::C2s);
        let (slot, d, id) = s.pop_due(100).unwrap();
        assert_eq!(slot, 1);
        assert_eq!(s.on_sent(d, id), None);
        let (slot, d, id) = s.pop_due(100).unwrap();
        assert_eq!(slot, 2);
        assert_eq!(s.on_sent(d, id), None);
        let (slot, d, id) = s.pop_due(100).unwrap();
        assert_eq!(slot, 3);
        assert_eq!(s.on_sent(d, id), None, "other direction");
        let (slot, d, id) = s.pop_due(100).unwrap();
        assert_eq!(slot, 4);
        assert_eq!(s.on_sent(d, id).map(|x| x.0), Some(9));
        s.hold(8, Dir::C2s, 5, 1000);
        assert_eq!(s.next_due(), Some(1000));
        assert_eq!(s.pop_due(1000).map(|x| x.0), Some(8));
    }
}
