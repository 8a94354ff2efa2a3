//! Before and after: two captures of the same traffic compared service by service.
//!
//! Each side is measured by the passes the library already has ([`Capture::diagnose`],
//! [`Capture::flows`], [`Capture::transactions`]); [`compare_measured`] then matches the
//! connections of the two sides by service and judges every figure with the rules of
//! [`rules`]. Memory: the diagnosis and flows of each side (bounded as theirs are), and one
//! response time per storage reply.

pub mod rules;

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use tcpdx_core::FlowSummary;
use tcpdx_report::compare::{
    Change, Comparison, KindChange, OpChange, Percentiles, ServiceChange, SideFigures,
};
use tcpdx_storage::srt::nearest_rank;
use tcpdx_storage::transaction::IoKind;
use tcpdx_storage::{StorageSink, Transaction};

use crate::{Capture, Diagnosis, Error, FindingKind, Options};

/// The JSON format's version.
pub const VERSION: u32 = 1;

/// What a comparison needs of one capture: its diagnosis, its connections and its storage
/// response times.
#[derive(Debug, Default)]
pub struct Measured {
    /// The capture as the comparison names it (its path, as given).
    pub name: String,
    /// [`Capture::diagnose`].
    pub diagnosis: Diagnosis,
    /// [`Capture::flows`]: one summary per tracked connection.
    pub flows: Vec<FlowSummary>,
    /// One row per answered storage request.
    pub replies: Vec<Reply>,
}

/// One answered storage request.
#[derive(Clone, Debug, PartialEq)]
pub struct Reply {
    /// `tcp.stream`.
    pub stream: u32,
    /// `nfs`, `smb2`, `iscsi`.
    pub protocol: &'static str,
    /// Operation (NFSv4: the COMPOUND's principal operation).
    pub op: &'static str,
    /// Service response time, nanoseconds.
    pub srt_ns: i64,
    /// Bytes the request read or wrote (0 for other operations).
    pub bytes: u64,
}

/// Collects [`Reply`] rows.
#[derive(Default)]
struct Replies(Vec<Reply>);

impl StorageSink for Replies {
    fn transaction(&mut self, t: &Transaction) {
        if let Some(srt_ns) = t.srt_ns() {
            self.0.push(Reply {
                stream: t.stream.0,
                protocol: t.proto.name(),
                op: t.sub_op.unwrap_or(t.op),
                srt_ns,
                bytes: t
                    .io
                    .filter(|io| io.kind != IoKind::Commit)
                    .map_or(0, |io| io.len),
            });
        }
    }
}

/// Measures one side: three passes over `c` (diagnosis, flows, storage transactions).
pub fn measure(c: &mut Capture, o: &Options) -> Result<Measured, Error> {
    let name = c
        .path()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|| "-".into());
    let diagnosis = c.diagnose(o)?;
    let flows = c.flows(o)?.flows;
    let mut replies = Replies::default();
    c.transactions(o, &mut replies, |_| false)?;
    Ok(Measured {
        name,
        diagnosis,
        flows,
        replies: replies.0,
    })
}

/// Compares two captures of the same traffic, `before` and `after` a change: see
/// [`compare_measured`].
pub fn compare(
    before: &mut Capture,
    after: &mut Capture,
    o: &Options,
) -> Result<Comparison, Error> {
    let b = measure(before, o)?;
    let a = measure(after, o)?;
    Ok(compare_measured(&b, &a))
}

/// A server `ip:port` and what it speaks: a service.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct ServiceKey {
    addr: IpAddr,
    port: u16,
    protocol: &'static str,
}

impl ServiceKey {
    fn server(&self) -> String {
        match self.addr {
            IpAddr::V4(a) => format!("{a}:{}", self.port),
            IpAddr::V6(a) => format!("[{a}]:{}", self.port),
        }
    }
    fn name(&self) -> String {
        format!("{} {}", self.server(), self.protocol)
    }
}

/// The server end of a connection: the receiver of the SYN when the handshake was seen;
/// else the end with the lower port (servers listen on well-known or registered ports,
/// clients send from ephemeral ones: 32768-60999 on Linux, 49152-65535 per RFC 6335),
/// the analyzer's server on a tie.
fn server_of(f: &FlowSummary) -> (IpAddr, u16) {
    let c2s = &f.dirs[0];
    if f.saw_syn || c2s.dst.port <= c2s.src.port {
        (c2s.dst.addr, c2s.dst.port)
    } else {
        (c2s.src.addr, c2s.src.port)
    }
}

/// One side's figures, grouped by service.
#[derive(Default)]
struct Group {
    streams: BTreeSet<u32>,
    bytes: u64,
    first_ns: Option<i64>,
    last_ns: Option<i64>,
}

impl Group {
    fn add(&mut self, f: &FlowSummary) {
        self.streams.insert(f.stream.0);
        self.bytes += f.dirs[0].unique_bytes + f.dirs[1].unique_bytes;
        let (a, b) = (f.first_ts.nanos(), f.last_ts.nanos());
        self.first_ns = Some(self.first_ns.map_or(a, |x| x.min(a)));
        self.last_ns = Some(self.last_ns.map_or(b, |x| x.max(b)));
    }
}

/// Findings' cost and count per kind on `streams` (`None`: every finding, the unlisted
/// ones included).
fn kind_costs(d: &Diagnosis, streams: Option<&BTreeSet<u32>>) -> BTreeMap<FindingKind, (f64, u64)> {
    let mut m: BTreeMap<FindingKind, (f64, u64)> = BTreeMap::new();
    for f in &d.findings {
        if streams.is_some_and(|s| !f.stream.is_some_and(|x| s.contains(&x))) {
            continue;
        }
        let e = m.entry(f.kind).or_default();
        e.0 += f.cost.seconds;
        e.1 += 1;
    }
    if streams.is_none() {
        for (k, t) in &d.unlisted.findings {
            let e = m.entry(*k).or_default();
            e.0 += t.seconds;
            e.1 += t.count;
        }
    }
    m
}

fn seconds_lost(costs: &BTreeMap<FindingKind, (f64, u64)>) -> f64 {
    costs
        .iter()
        .filter(|(k, _)| **k != FindingKind::PathLimited)
        .map(|(_, c)| c.0)
        .sum()
}

fn figures(g: &Group, costs: &BTreeMap<FindingKind, (f64, u64)>) -> SideFigures {
    let duration_s = match (g.first_ns, g.last_ns) {
        (Some(a), Some(b)) => (b - a) as f64 / 1e9,
        _ => 0.0,
    };
    SideFigures {
        connections: g.streams.len() as u64,
        bytes: g.bytes,
        duration_s,
        goodput_bps: if duration_s > 0.0 {
            g.bytes as f64 * 8.0 / duration_s
        } else {
            0.0
        },
        seconds_lost: seconds_lost(costs),
    }
}

/// Every kind of either side, most seconds (on either side) first.
fn kind_rows(
    b: &BTreeMap<FindingKind, (f64, u64)>,
    a: &BTreeMap<FindingKind, (f64, u64)>,
) -> Vec<KindChange> {
    let kinds: BTreeSet<FindingKind> = b.keys().chain(a.keys()).copied().collect();
    let mut rows: Vec<KindChange> = kinds
        .into_iter()
        .map(|k| {
            let (bs, bn) = b.get(&k).copied().unwrap_or_default();
            let (as_, an) = a.get(&k).copied().unwrap_or_default();
            KindChange {
                kind: k.as_str().into(),
                before_s: bs,
                after_s: as_,
                findings_before: bn,
                findings_after: an,
                change: rules::cost_change(bs, as_),
            }
        })
        .collect();
    rows.sort_by(|x, y| {
        y.before_s
            .max(y.after_s)
            .total_cmp(&x.before_s.max(x.after_s))
            .then_with(|| x.kind.cmp(&y.kind))
    });
    rows
}

/// Response times per (protocol, operation) of the replies on `streams` (`None`: all).
type OpTimes = BTreeMap<(&'static str, &'static str), (Vec<i64>, u64)>;

/// Response times (sorted) and bytes moved per (protocol, operation) of the replies on
/// `streams` (`None`: all).
fn op_times(replies: &[Reply], streams: Option<&BTreeSet<u32>>) -> OpTimes {
    let mut m = OpTimes::new();
    for r in replies {
        if streams.is_none_or(|s| s.contains(&r.stream)) {
            let e = m.entry((r.protocol, r.op)).or_default();
            e.0.push(r.srt_ns);
            e.1 += r.bytes;
        }
    }
    for v in m.values_mut() {
        v.0.sort_unstable();
    }
    m
}

fn percentiles(v: &[i64]) -> Option<Percentiles> {
    let p = |q| nearest_rank(v, q) as f64 / 1e9;
    (!v.is_empty()).then(|| Percentiles {
        p50: p(0.50),
        p95: p(0.95),
        p99: p(0.99),
    })
}

fn op_rows(b: &OpTimes, a: &OpTimes) -> Vec<OpChange> {
    let keys: BTreeSet<_> = b.keys().chain(a.keys()).copied().collect();
    keys.into_iter()
        .map(|k| {
            let (bv, bb) = b.get(&k).map_or((&[][..], 0), |x| (x.0.as_slice(), x.1));
            let (av, ab) = a.get(&k).map_or((&[][..], 0), |x| (x.0.as_slice(), x.1));
            let (bp, ap) = (percentiles(bv), percentiles(av));
            let (nb, na) = (bv.len() as u64, av.len() as u64);
            OpChange {
                protocol: k.0.into(),
                op: k.1.into(),
                count_before: nb,
                count_after: na,
                bytes_before: bb,
                bytes_after: ab,
                before_s: bp,
                after_s: ap,
                change: rules::srt_change(bp.map(|p| (p.p95, nb)), ap.map(|p| (p.p95, na))),
            }
        })
        .collect()
}

/// One side's services: the connections grouped by server `ip:port` and protocol (the
/// storage protocol whose replies the connection carried, else `tcp`).
fn services(m: &Measured) -> BTreeMap<ServiceKey, Group> {
    let mut proto: BTreeMap<u32, &'static str> = BTreeMap::new();
    for r in &m.replies {
        proto.entry(r.stream).or_insert(r.protocol);
    }
    let mut out: BTreeMap<ServiceKey, Group> = BTreeMap::new();
    for f in &m.flows {
        let (addr, port) = server_of(f);
        let protocol = proto.get(&f.stream.0).copied().unwrap_or("tcp");
        out.entry(ServiceKey {
            addr,
            port,
            protocol,
        })
        .or_default()
        .add(f);
    }
    out
}

/// Pairs the services of the two sides: the same server address, port and protocol;
/// then, of those left, the only one of a port and protocol on each side (a rerun on
/// other addresses, a server moved); the rest are on one side only.
fn pair(
    b: &BTreeMap<ServiceKey, Group>,
    a: &BTreeMap<ServiceKey, Group>,
) -> Vec<(Option<ServiceKey>, Option<ServiceKey>, &'static str)> {
    let mut out = Vec::new();
    let mut left_b: Vec<&ServiceKey> = Vec::new();
    for k in b.keys() {
        if a.contains_key(k) {
            out.push((Some(k.clone()), Some(k.clone()), "address"));
        } else {
            left_b.push(k);
        }
    }
    let mut left_a: Vec<&ServiceKey> = a.keys().filter(|k| !b.contains_key(*k)).collect();
    let same = |x: &ServiceKey, y: &ServiceKey| x.port == y.port && x.protocol == y.protocol;
    let mut only_b = Vec::new();
    for kb in left_b {
        let nb = b
            .keys()
            .filter(|x| same(x, kb) && !a.contains_key(*x))
            .count();
        let cands: Vec<usize> = (0..left_a.len()).filter(|&i| same(left_a[i], kb)).collect();
        if nb == 1 && cands.len() == 1 {
            let ka = left_a.remove(cands[0]);
            out.push((Some(kb.clone()), Some(ka.clone()), "port"));
        } else {
            only_b.push(kb);
        }
    }
    out.extend(
        only_b
            .into_iter()
            .map(|k| (Some(k.clone()), None, "before_only")),
    );
    out.extend(
        left_a
            .into_iter()
            .map(|k| (None, Some(k.clone()), "after_only")),
    );
    out
}

/// The comparison of two measured sides: services matched by server address, port and
/// protocol (clients may differ); then the whole capture and each service, before ->
/// after; the main transfer (the matched service with the most bytes on both sides
/// together) gives the verdict's goodput and response times.
pub fn compare_measured(before: &Measured, after: &Measured) -> Comparison {
    let (sb, sa) = (services(before), services(after));
    let mut rows: Vec<(u64, ServiceChange)> = Vec::new();
    for (kb, ka, how) in pair(&sb, &sa) {
        let gb = kb.as_ref().and_then(|k| sb.get(k));
        let ga = ka.as_ref().and_then(|k| sa.get(k));
        let cb = gb.map(|g| kind_costs(&before.diagnosis, Some(&g.streams)));
        let ca = ga.map(|g| kind_costs(&after.diagnosis, Some(&g.streams)));
        let fb = gb.zip(cb.as_ref()).map(|(g, c)| figures(g, c));
        let fa = ga.zip(ca.as_ref()).map(|(g, c)| figures(g, c));
        let empty = BTreeMap::new();
        let kinds = kind_rows(cb.as_ref().unwrap_or(&empty), ca.as_ref().unwrap_or(&empty));
        let no_ops = OpTimes::new();
        let ob = gb.map(|g| op_times(&before.replies, Some(&g.streams)));
        let oa = ga.map(|g| op_times(&after.replies, Some(&g.streams)));
        let srt = op_rows(
            ob.as_ref().unwrap_or(&no_ops),
            oa.as_ref().unwrap_or(&no_ops),
        );
        let (goodput_change, goodput_ratio) = match (fb, fa) {
            (Some(b), Some(a)) => (
                rules::goodput_change(b.goodput_bps, a.goodput_bps),
                rules::ratio(b.goodput_bps, a.goodput_bps),
            ),
            _ => (Change::OneSide, None),
        };
        let Some(key) = kb.as_ref().or(ka.as_ref()) else {
            continue;
        };
        let weight = if fb.is_some() && fa.is_some() {
            fb.map_or(0, |f| f.bytes) + fa.map_or(0, |f| f.bytes)
        } else {
            0
        };
        rows.push((
            weight,
            ServiceChange {
                service: key.name(),
                protocol: key.protocol.into(),
                server_before: kb.as_ref().map(ServiceKey::server),
                server_after: ka.as_ref().map(ServiceKey::server),
                matched_by: how,
                before: fb,
                after: fa,
                goodput_change,
                goodput_ratio,
                kinds,
                srt,
            },
        ));
    }
    // The main transfer first (most bytes over both sides among the matched), then the
    // rest by bytes on either side.
    rows.sort_by(|x, y| {
        let bytes =
            |s: &ServiceChange| s.before.map_or(0, |f| f.bytes) + s.after.map_or(0, |f| f.bytes);
        y.0.cmp(&x.0)
            .then_with(|| bytes(&y.1).cmp(&bytes(&x.1)))
            .then_with(|| x.1.service.cmp(&y.1.service))
    });
    let main = rows.first().filter(|r| r.0 > 0).map(|r| r.1.clone());
    let services: Vec<ServiceChange> = rows.into_iter().map(|r| r.1).collect();

    let whole = |m: &Measured| {
        let mut g = Group::default();
        for f in &m.flows {
            g.add(f);
        }
        let costs = kind_costs(&m.diagnosis, None);
        (figures(&g, &costs), costs)
    };
    let (capture_before, kb) = whole(before);
    let (capture_after, ka) = whole(after);
    let kinds = kind_rows(&kb, &ka);
    let srt = op_rows(
        &op_times(&before.replies, None),
        &op_times(&after.replies, None),
    );

    let (goodput, verdict_kinds, verdict_ops) = match &main {
        Some(m) => (
            (
                m.before.map_or(0.0, |f| f.goodput_bps),
                m.after.map_or(0.0, |f| f.goodput_bps),
            ),
            &kinds,
            &m.srt,
        ),
        None => (
            (capture_before.goodput_bps, capture_after.goodput_bps),
            &kinds,
            &srt,
        ),
    };
    let (verdict, worse) = rules::verdict(verdict_kinds, goodput, verdict_ops);
    Comparison {
        version: VERSION,
        before: before.name.clone(),
        after: after.name.clone(),
        verdict,
        worse,
        main_service: main.map(|m| m.service),
        goodput_before_bps: goodput.0,
        goodput_after_bps: goodput.1,
        capture_before,
        capture_after,
        kinds,
        srt,
        services,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(addr: &str, port: u16, protocol: &'static str) -> ServiceKey {
        ServiceKey {
            addr: addr.parse().unwrap(),
            port,
            protocol,
        }
    }

    fn side(keys: &[ServiceKey]) -> BTreeMap<ServiceKey, Group> {
        keys.iter().map(|k| (k.clone(), Group::default())).collect()
    }

    #[test]
    fn services_pair_by_address_then_by_a_unique_port_and_protocol() {
        let b = side(&[
            key("10.0.0.2", 2049, "nfs"),
            key("10.0.0.3", 445, "smb2"),
            key("10.0.0.4", 80, "tcp"),
            key("10.0.0.5", 80, "tcp"),
            key("10.0.0.6", 22, "tcp"),
        ]);
        let a = side(&[
            key("10.0.0.2", 2049, "nfs"),
            key("10.9.0.3", 445, "smb2"),
            key("10.9.0.4", 80, "tcp"),
            key("10.9.0.6", 22, "ssh-not-tcp"),
        ]);
        let p = pair(&b, &a);
        let find = |addr: &str, port| {
            p.iter()
                .find(|(x, y, _)| {
                    x.as_ref()
                        .or(y.as_ref())
                        .is_some_and(|k| k.addr.to_string() == addr && k.port == port)
                })
                .map(|(_, y, how)| (y.as_ref().map(ServiceKey::server), *how))
                .unwrap()
        };
        assert_eq!(
            find("10.0.0.2", 2049),
            (Some("10.0.0.2:2049".into()), "address")
        );
        assert_eq!(find("10.0.0.3", 445), (Some("10.9.0.3:445".into()), "port"));
        // Two before-services on port 80: which one moved is unknown, neither is matched.
        assert_eq!(find("10.0.0.4", 80), (None, "before_only"));
        assert_eq!(find("10.0.0.5", 80), (None, "before_only"));
        // Another protocol is another service.
        assert_eq!(find("10.0.0.6", 22), (None, "before_only"));
        assert_eq!(find("10.9.0.4", 80).1, "after_only");
        assert_eq!(find("10.9.0.6", 22).1, "after_only");
        assert_eq!(p.len(), 7);
    }

    #[test]
    fn a_service_name_brackets_ipv6() {
        assert_eq!(key("::1", 2049, "nfs").name(), "[::1]:2049 nfs");
        assert_eq!(key("10.0.0.2", 80, "tcp").name(), "10.0.0.2:80 tcp");
    }
}
