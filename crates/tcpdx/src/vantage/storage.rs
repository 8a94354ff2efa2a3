//! Storage response times split at the two points: the request's way from the client-side
//! point to the server-side one, the server's time there, and the reply's way back.

use std::collections::HashMap;

use tcpdx_report::vantage::StorageSplit;
use tcpdx_storage::{Notice, Request, StorageSink, Transaction};

use super::clock::Clock;

/// Transactions of one capture remembered for matching (bounded memory; beyond, counted).
pub(crate) const MAX_TRANSACTIONS: usize = 1_000_000;
/// A transaction is the same at both points when its requests are this close (A's clock).
const SAME_REQUEST_NS: i64 = 1_000_000_000;

/// (protocol, operation code, id): an RPC XID, SMB2 MessageId or iSCSI task tag.
type TxKey = (&'static str, u16, u64);

/// Request and reply times (the last frame of each, own clock) of one capture's
/// transactions.
#[derive(Default)]
pub(crate) struct Collected {
    pub(crate) map: HashMap<TxKey, Vec<(i64, i64, &'static str)>>,
    pub(crate) len: usize,
    pub(crate) dropped: u64,
}

impl StorageSink for Collected {
    fn transaction(&mut self, t: &Transaction) {
        let Some(reply) = t.reply else { return };
        if self.len >= MAX_TRANSACTIONS {
            self.dropped += 1;
            return;
        }
        self.len += 1;
        self.map
            .entry((t.proto.name(), t.op_code, t.id))
            .or_default()
            .push((t.request.last.ts.nanos(), reply.last.ts.nanos(), t.op));
    }
    fn notice(&mut self, _: &Notice) {}
    fn request(&mut self, _: &Request) {}
}

#[derive(Default)]
struct Sums {
    n: u64,
    response: f64,
    to_server: f64,
    server: f64,
    to_client: f64,
    max: f64,
}

/// Splits each transaction seen at both points; the client side is the point that saw
/// the request first.
pub(crate) fn split(a: &Collected, b: &Collected, clock: &Clock) -> Vec<StorageSplit> {
    let mut sums: HashMap<(&'static str, &'static str), Sums> = HashMap::new();
    for (key, at_a) in &a.map {
        let Some(at_b) = b.map.get(key) else { continue };
        for &(qa, ra, op) in at_a {
            let found = at_b
                .iter()
                .map(|&(qb, rb, _)| (clock.a_time(qb), clock.a_time(rb)))
                .find(|(qb, _)| (qb - qa).abs() < SAME_REQUEST_NS);
            let Some((qb, rb)) = found else { continue };
            // (client-side request, reply), (server-side request, reply).
            let ((cq, cr), (sq, sr)) = if qa <= qb {
                ((qa, ra), (qb, rb))
            } else {
                ((qb, rb), (qa, ra))
            };
            let s = sums.entry((key.0, op)).or_default();
            let secs = |ns: i64| ns as f64 / 1e9;
            s.n += 1;
            s.response += secs(cr - cq);
            s.to_server += secs(sq - cq);
            s.server += secs(sr - sq);
            s.to_client += secs(cr - sr);
            s.max = s.max.max(secs(cr - cq));
        }
    }
    let mut out: Vec<StorageSplit> = sums
        .into_iter()
        .map(|((proto, op), s)| {
            let n = s.n as f64;
            StorageSplit {
                proto,
                op,
                count: s.n,
                response_s: s.response / n,
                request_network_s: s.to_server / n,
                reply_network_s: s.to_client / n,
                server_s: s.server / n,
                max_response_s: s.max,
            }
        })
        .collect();
    out.sort_by(|x, y| y.count.cmp(&x.count).then(x.op.cmp(y.op)));
    out
}
