//! Which connections the report graphs: the top N by bytes, the top N by the cost of
//! their findings, and any the user named.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use tcpdx_core::{Dir, EventSink, FlowSummary};
use tcpdx_detect::Diagnosis;

/// Keeps the `n` connections that carried the most payload bytes (a bounded heap fed
/// with flow summaries: memory is O(n) whatever the number of connections).
#[derive(Debug)]
pub struct TopBytes {
    n: usize,
    /// Min-heap of (bytes, stream).
    heap: BinaryHeap<Reverse<(u64, u32)>>,
}

impl TopBytes {
    /// Keeps the top `n`.
    pub fn new(n: usize) -> Self {
        Self {
            n,
            heap: BinaryHeap::with_capacity(n + 1),
        }
    }

    /// Offers a connection (or an evicted part of one) that carried `bytes`.
    pub fn offer(&mut self, stream: u32, bytes: u64) {
        if self.n == 0 || bytes == 0 {
            return;
        }
        self.heap.push(Reverse((bytes, stream)));
        if self.heap.len() > self.n {
            self.heap.pop();
        }
    }

    /// (stream, bytes), most bytes first.
    pub fn ranked(&self) -> Vec<(u32, u64)> {
        let mut v: Vec<(u32, u64)> = self.heap.iter().map(|r| (r.0.1, r.0.0)).collect();
        v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        v.dedup_by_key(|x| x.0);
        v
    }
}

impl EventSink for TopBytes {
    fn flow(&mut self, f: &FlowSummary) {
        self.offer(f.stream.0, f.dirs[0].bytes + f.dirs[1].bytes);
    }
    // An evicted connection's part counts on its own: exact totals would need state for
    // every connection, which is what eviction avoids.
    fn flow_evicted(&mut self, f: &FlowSummary) {
        self.flow(f);
    }
}

/// One connection chosen for graphs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Chosen {
    /// `tcp.stream`.
    pub stream: u32,
    /// Direction to graph (the one carrying most data).
    pub dir: Dir,
    /// Why it was chosen (`highest cost`, `most bytes`, `--stream`).
    pub reasons: Vec<&'static str>,
}

/// Picks the connections to graph: the `top` costliest (by their findings' cost), then the
/// `top` largest, then `explicit`, without repeats and in that order.
pub fn choose(d: &Diagnosis, bytes: &TopBytes, top: usize, explicit: &[u32]) -> Vec<Chosen> {
    let mut out: Vec<Chosen> = Vec::new();
    let mut add = |stream: u32, why: &'static str| match out.iter_mut().find(|c| c.stream == stream)
    {
        Some(c) => {
            if !c.reasons.contains(&why) {
                c.reasons.push(why);
            }
        }
        None => out.push(Chosen {
            stream,
            dir: main_dir(d, stream),
            reasons: vec![why],
        }),
    };
    let mut costly: Vec<u32> = Vec::new();
    for f in d.findings.iter().filter(|f| f.cost.seconds > 0.0) {
        if let Some(s) = f.stream
            && !costly.contains(&s)
            && costly.len() < top
        {
            costly.push(s);
        }
    }
    for s in costly {
        add(s, "highest cost");
    }
    for (s, _) in bytes.ranked() {
        add(s, "most bytes");
    }
    for &s in explicit {
        add(s, "--stream");
    }
    out
}

/// The direction the diagnosis found carrying most data (client to server if unknown).
fn main_dir(d: &Diagnosis, stream: u32) -> Dir {
    match d.connections.iter().find(|c| c.stream == stream) {
        Some(c) if c.main_direction == "server_to_client" => Dir::ServerToClient,
        _ => Dir::ClientToServer,
    }
}

#[cfg(test)]
mod tests {
    use tcpdx_detect::{Finding, FindingKind};

    use super::*;

    #[test]
    fn top_bytes_keeps_the_largest() {
        let mut t = TopBytes::new(2);
        for (s, b) in [(0, 10), (1, 50), (2, 0), (3, 30), (4, 20)] {
            t.offer(s, b);
        }
        assert_eq!(t.ranked(), vec![(1, 50), (3, 30)]);
    }

    #[test]
    fn costly_first_then_large_then_named() {
        let mut t = TopBytes::new(2);
        t.offer(1, 50);
        t.offer(3, 30);
        let mut d = Diagnosis::default();
        let mut f = Finding::new(FindingKind::RtoStall, Some(3));
        f.cost.seconds = 1.0;
        d.findings.push(f);
        let mut free = Finding::new(FindingKind::PathLimited, Some(9));
        free.cost.seconds = 0.0;
        d.findings.push(free);
        let c = choose(&d, &t, 5, &[7, 1]);
        let streams: Vec<u32> = c.iter().map(|c| c.stream).collect();
        assert_eq!(streams, vec![3, 1, 7]);
        assert_eq!(c[0].reasons, vec!["highest cost", "most bytes"]);
        assert_eq!(c[1].reasons, vec!["most bytes", "--stream"]);
    }
}
