//! What is remembered of evicted connections, so that one that resumes keeps its stream
//! index and its relative numbering.
//!
//! Bounded: at most `cap` connections are remembered, the oldest evictions forgotten first
//! (a forgotten connection that resumes gets a new stream index, as if new).

use std::collections::{HashMap, VecDeque};
use std::hash::BuildHasherDefault;

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
#[derive(Debug)]
pub struct EvictedFlows {
    map: HashMap<FlowKey, (Evicted, u64), BuildHasherDefault<FxHasher>>,
    /// Keys in eviction order with their generation (stale once taken or re-evicted).
    order: VecDeque<(FlowKey, u64)>,
    generation: u64,
    cap: usize,
}

impl EvictedFlows {
    /// Remembers at most `cap` evicted connections.
    pub fn new(cap: usize) -> Self {
        Self {
            map: HashMap::default(),
            order: VecDeque::new(),
            generation: 0,
            cap,
        }
    }

    /// Number of connections remembered.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// True if none is remembered.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Remembers an evicted connection; returns how many older ones were forgotten for it.
    pub fn insert(&mut self, key: FlowKey, e: Evicted) -> u64 {
        if self.cap == 0 {
            return 1;
        }
        let mut forgotten = 0;
        while self.map.len() >= self.cap {
            let Some((k, g)) = self.order.pop_front() else {
                break;
            };
            if self.map.get(&k).is_some_and(|&(_, gen_)| gen_ == g) {
                self.map.remove(&k);
                forgotten += 1;
            }
        }
        self.generation += 1;
        self.map.insert(key, (e, self.generation));
        self.order.push_back((key, self.generation));
        // Entries taken back leave stale keys behind: drop them before they pile up.
        if self.order.len() > 2 * self.cap + 16 {
            let map = &self.map;
            self.order
                .retain(|(k, g)| map.get(k).is_some_and(|&(_, gen_)| gen_ == *g));
        }
        forgotten
    }

    /// Takes back what was remembered of `key`, if anything.
    pub fn take(&mut self, key: &FlowKey) -> Option<Evicted> {
        self.map.remove(key).map(|(e, _)| e)
    }
}

#[cfg(test)]
mod tests {
    use std::net::{IpAddr, Ipv4Addr};

    use super::*;

    fn key(port: u16) -> FlowKey {
        let ep = |a, port| Endpoint {
            addr: IpAddr::V4(Ipv4Addr::new(10, 0, 0, a)),
            port,
        };
        FlowKey::new(ep(1, port), ep(2, 80)).0
    }

    fn ev(stream: u32) -> Evicted {
        Evicted {
            stream: StreamId(stream),
            client: key(1).lo(),
            base: [None; 2],
            saw_syn: [false; 2],
            hints: [(0, 0); 2],
        }
    }

    #[test]
    fn oldest_forgotten_first_and_bounded() {
        let mut e = EvictedFlows::new(3);
        for p in 0..3 {
            assert_eq!(e.insert(key(p), ev(u32::from(p))), 0);
        }
        assert_eq!(e.insert(key(3), ev(3)), 1);
        assert_eq!(e.take(&key(0)), None);
        assert_eq!(e.take(&key(1)).map(|x| x.stream), Some(StreamId(1)));
        // Taking and re-inserting keeps the queue bounded.
        for i in 0..1000u32 {
            e.insert(key(9), ev(i));
            assert!(e.take(&key(9)).is_some());
        }
        assert!(e.order.len() <= 2 * 3 + 16);
        assert_eq!(e.len(), 2);
    }

    #[test]
    fn re_evicted_key_is_not_forgotten_by_its_stale_entry() {
        let mut e = EvictedFlows::new(2);
        e.insert(key(1), ev(1));
        e.take(&key(1));
        e.insert(key(2), ev(2));
        e.insert(key(1), ev(10));
        // The stale (key 1, gen 1) entry is popped first and must not remove the new one.
        assert_eq!(e.insert(key(3), ev(3)), 1);
        assert_eq!(e.take(&key(1)).map(|x| x.stream), Some(StreamId(10)));
        assert_eq!(e.take(&key(2)), None);
    }
}
