//! What is remembered of evicted connections, so that one that resumes keeps its stream
//! index and its relative numbering.
//!
//! Bounded: at most `cap` connections are remembered, the oldest evictions forgotten first
//! (a forgotten connection that resumes gets a new stream index, as if new).

use std::collections::VecDeque;
use std::hash::{BuildHasher, BuildHasherDefault};

use hashbrown::HashTable;
use rustc_hash::FxHasher;
use tcpdx_wire::SeqNum;

use super::{Endpoint, FlowKey, StreamId};

/// The identity and numbering of an evicted connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Evicted {
    /// Its `tcp.stream`.
    pub stream: StreamId,
    /// Its client endpoint (direction 0).
    pub client: Endpoint,
    /// Base sequence number per direction, when set.
    pub base: [Option<SeqNum>; 2],
    /// Whether a SYN was seen per direction.
    pub saw_syn: [bool; 2],
    /// Last unwrapped relative sequence and ACK numbers per direction.
    pub hints: [(u64, u64); 2],
}

/// Evicted connections by 4-tuple, oldest eviction first.
///
/// Kept compact, as a SYN flood fills it: one ring of entries in eviction order (the key
/// and a packed [`Evicted`], 96 bytes), and a hash table of positions in the ring (8
/// bytes a slot) instead of a map holding a second copy of every key.
#[derive(Debug)]
pub struct EvictedFlows {
    /// Entries in eviction order; one taken back stays as a dead entry until it is popped
    /// or the ring is compacted.
    ring: VecDeque<Entry>,
    /// Position of every live entry (`first` + its index in `ring`), by its key's hash.
    index: HashTable<u64>,
    /// Position of `ring[0]`.
    first: u64,
    /// Live entries.
    live: usize,
    cap: usize,
    hasher: BuildHasherDefault<FxHasher>,
}

/// One remembered connection.
#[derive(Clone, Copy, Debug)]
struct Entry {
    key: FlowKey,
    hints: [(u64, u64); 2],
    base: [SeqNum; 2],
    stream: StreamId,
    /// [`BASE_SET`] and [`SAW_SYN`] shifted by the direction, [`CLIENT_LO`], [`LIVE`].
    bits: u8,
}

const BASE_SET: u8 = 1;
const SAW_SYN: u8 = 4;
const CLIENT_LO: u8 = 16;
const LIVE: u8 = 32;

impl Entry {
    fn pack(key: FlowKey, e: &Evicted) -> Self {
        let mut bits = LIVE;
        let [b0, b1] = e.base;
        let [s0, s1] = e.saw_syn;
        for (shift, set, syn) in [(0, b0.is_some(), s0), (1, b1.is_some(), s1)] {
            if set {
                bits |= BASE_SET << shift;
            }
            if syn {
                bits |= SAW_SYN << shift;
            }
        }
        // The client is one of the key's endpoints.
        debug_assert!(e.client == key.lo() || e.client == key.hi());
        if e.client == key.lo() {
            bits |= CLIENT_LO;
        }
        Self {
            key,
            hints: e.hints,
            base: [b0.unwrap_or(SeqNum(0)), b1.unwrap_or(SeqNum(0))],
            stream: e.stream,
            bits,
        }
    }

    fn unpack(&self) -> Evicted {
        let has = |flag: u8, shift: u8| self.bits & (flag << shift) != 0;
        let [b0, b1] = self.base;
        Evicted {
            stream: self.stream,
            client: if self.bits & CLIENT_LO != 0 {
                self.key.lo()
            } else {
                self.key.hi()
            },
            base: [
                has(BASE_SET, 0).then_some(b0),
                has(BASE_SET, 1).then_some(b1),
            ],
            saw_syn: [has(SAW_SYN, 0), has(SAW_SYN, 1)],
            hints: self.hints,
        }
    }

    fn live(&self) -> bool {
        self.bits & LIVE != 0
    }
}

impl EvictedFlows {
    /// Remembers at most `cap` evicted connections.
    pub fn new(cap: usize) -> Self {
        Self {
            ring: VecDeque::new(),
            index: HashTable::new(),
            first: 0,
            live: 0,
            cap,
            hasher: BuildHasherDefault::default(),
        }
    }

    /// Number of connections remembered.
    pub fn len(&self) -> usize {
        self.live
    }

    /// True if none is remembered.
    pub fn is_empty(&self) -> bool {
        self.live == 0
    }

    /// Ring length beyond which dead entries are dropped: a quarter of slack keeps the
    /// compactions (a pass over the ring) rare.
    fn max_ring(&self) -> usize {
        self.cap + self.cap / 4 + 16
    }

    /// Remembers an evicted connection; returns how many older ones were forgotten for it.
    pub fn insert(&mut self, key: FlowKey, e: Evicted) -> u64 {
        if self.cap == 0 {
            return 1;
        }
        let mut forgotten = 0;
        while self.live >= self.cap {
            let Some(old) = self.ring.pop_front() else {
                break;
            };
            let pos = self.first;
            self.first += 1;
            if old.live() {
                let hash = self.hasher.hash_one(old.key);
                if let Ok(slot) = self.index.find_entry(hash, |&p| p == pos) {
                    slot.remove();
                }
                self.live -= 1;
                forgotten += 1;
            }
        }
        // A key is remembered once: a newer eviction replaces the older one (not counted
        // as forgotten).
        let _replaced = self.take(&key);
        if self.ring.capacity() == 0 {
            // Exactly what the ring can hold: it never grows, and pages of it that are
            // never written are never resident.
            self.ring.reserve_exact(self.max_ring() + 1);
        }
        let pos = self.first + self.ring.len() as u64;
        self.ring.push_back(Entry::pack(key, &e));
        self.live += 1;
        let hash = self.hasher.hash_one(key);
        let Self {
            ring,
            index,
            first,
            hasher,
            ..
        } = self;
        index.insert_unique(hash, pos, |&p| rehash(ring, *first, hasher, p));
        if self.ring.len() > self.max_ring() {
            self.compact();
        }
        forgotten
    }

    /// Drops the dead entries and renumbers the rest.
    fn compact(&mut self) {
        self.ring.retain(Entry::live);
        self.first = 0;
        self.index.clear();
        let Self {
            ring,
            index,
            hasher,
            ..
        } = self;
        for (i, e) in ring.iter().enumerate() {
            let hash = hasher.hash_one(e.key);
            index.insert_unique(hash, i as u64, |&p| rehash(ring, 0, hasher, p));
        }
    }

    /// Takes back what was remembered of `key`, if anything.
    pub fn take(&mut self, key: &FlowKey) -> Option<Evicted> {
        if self.live == 0 {
            return None;
        }
        let hash = self.hasher.hash_one(key);
        let (ring, first) = (&self.ring, self.first);
        let at = |p: u64| p.checked_sub(first).and_then(|i| usize::try_from(i).ok());
        let slot = self
            .index
            .find_entry(hash, |&p| {
                at(p)
                    .and_then(|i| ring.get(i))
                    .is_some_and(|e| e.key == *key)
            })
            .ok()?;
        let (pos, _) = slot.remove();
        let e = at(pos).and_then(|i| self.ring.get_mut(i))?;
        e.bits &= !LIVE;
        self.live -= 1;
        Some(e.unpack())
    }
}

/// The hash of the key at position `p` of `ring` (for the hash table's resizing).
fn rehash(
    ring: &VecDeque<Entry>,
    first: u64,
    hasher: &BuildHasherDefault<FxHasher>,
    p: u64,
) -> u64 {
    p.checked_sub(first)
        .and_then(|i| usize::try_from(i).ok())
        .and_then(|i| ring.get(i))
        .map_or(0, |e| hasher.hash_one(e.key))
}

#[cfg(test)]
mod tests {
    use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

    use super::*;

    fn key(port: u16) -> FlowKey {
        let ep = |a, port| Endpoint {
            addr: IpAddr::V4(Ipv4Addr::new(10, 0, 0, a)),
            port,
        };
        FlowKey::new(ep(1, port), ep(2, 80)).0
    }

    /// What is remembered of the connection of `k` (its client is one of its endpoints).
    fn ev(k: FlowKey, stream: u32) -> Evicted {
        Evicted {
            stream: StreamId(stream),
            client: k.lo(),
            base: [None; 2],
            saw_syn: [false; 2],
            hints: [(0, 0); 2],
        }
    }

    #[test]
    fn oldest_forgotten_first_and_bounded() {
        let mut e = EvictedFlows::new(3);
        for p in 0..3 {
            assert_eq!(e.insert(key(p), ev(key(p), u32::from(p))), 0);
        }
        assert_eq!(e.insert(key(3), ev(key(3), 3)), 1);
        assert_eq!(e.take(&key(0)), None);
        assert_eq!(e.take(&key(1)).map(|x| x.stream), Some(StreamId(1)));
        // Taking and re-inserting keeps the queue bounded.
        for i in 0..1000u32 {
            e.insert(key(9), ev(key(9), i));
            assert!(e.take(&key(9)).is_some());
        }
        assert!(e.ring.len() <= e.max_ring());
        assert_eq!(e.len(), 2);
    }

    #[test]
    fn packed_entries_round_trip() {
        let v6 = |a: u16, port| Endpoint {
            addr: IpAddr::V6(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, a)),
            port,
        };
        let (k, _) = FlowKey::new(v6(2, 80), v6(1, 40000));
        let cases = [
            (k.lo(), [Some(SeqNum(7)), None], [true, false]),
            (k.hi(), [None, Some(SeqNum(u32::MAX))], [false, true]),
        ];
        for (client, base, saw_syn) in cases {
            let e = Evicted {
                stream: StreamId(42),
                client,
                base,
                saw_syn,
                hints: [(1, 2), (u64::MAX, 3)],
            };
            let mut f = EvictedFlows::new(4);
            assert_eq!(f.insert(k, e), 0);
            assert_eq!(f.take(&k), Some(e));
            assert_eq!(f.take(&k), None);
            assert!(f.is_empty());
        }
    }

    #[test]
    fn compaction_keeps_the_live_entries_and_their_order() {
        let mut e = EvictedFlows::new(8);
        for p in 0..4 {
            e.insert(key(p), ev(key(p), u32::from(p)));
        }
        // Churn on other keys leaves dead entries until the ring is compacted.
        for i in 0..200u32 {
            e.insert(key(100), ev(key(100), i));
            assert_eq!(e.take(&key(100)).map(|x| x.stream), Some(StreamId(i)));
            assert!(e.ring.len() <= e.max_ring());
        }
        assert_eq!(e.len(), 4);
        // Still found, and still forgotten oldest first.
        for p in 4..8 {
            assert_eq!(e.insert(key(p), ev(key(p), u32::from(p))), 0);
        }
        assert_eq!(e.insert(key(8), ev(key(8), 8)), 1);
        assert_eq!(e.take(&key(0)), None);
        for p in 1..9 {
            assert_eq!(
                e.take(&key(p)).map(|x| x.stream),
                Some(StreamId(u32::from(p)))
            );
        }
    }

    #[test]
    fn re_evicted_key_is_not_forgotten_by_its_stale_entry() {
        let mut e = EvictedFlows::new(2);
        e.insert(key(1), ev(key(1), 1));
        e.take(&key(1));
        e.insert(key(2), ev(key(2), 2));
        e.insert(key(1), ev(key(1), 10));
        // The stale (key 1, gen 1) entry is popped first and must not remove the new one.
        assert_eq!(e.insert(key(3), ev(key(3), 3)), 1);
        assert_eq!(e.take(&key(1)).map(|x| x.stream), Some(StreamId(10)));
        assert_eq!(e.take(&key(2)), None);
    }
}
