//! The capture's answer: findings grouped by pattern across connections, and a verdict.
//!
//! A pure reading of a [`Diagnosis`] (no I/O): every finding falls into exactly one
//! [`Group`] (same kind, and the same server service `ip:port` or the same client host),
//! so the groups' seconds add up to the findings' seconds; the groups are ranked by seconds
//! lost; the [`Verdict`] says in a few lines where the time went, what cost most, on which
//! connections, hosts or services, and the one change that would help most.

use std::collections::BTreeMap;

use rustc_hash::FxHashMap;
use serde::Serialize;

use crate::budget::State;
use crate::finding::{Finding, FindingKind, Severity};
use crate::{ConnInference, Diagnosis};

/// Worst connections kept per group as examples (tcpdx choice: enough to pick one to look
/// at with `--stream N`, short enough for one line).
pub const WORST_PER_GROUP: usize = 3;

/// States named in the verdict's first line at most (tcpdx choice: the rest are small).
const VERDICT_STATES: usize = 3;

/// A state is named in the verdict's first line from this share of the connection-seconds
/// on (tcpdx choice: below 1% it is noise in the account).
const VERDICT_STATE_SHARE: f64 = 0.01;

/// What the findings of a group have in common besides their kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum GroupBy {
    /// The same server `ip:port`.
    Service,
    /// The same client address.
    ClientHost,
    /// A capture-wide finding (no stream).
    Capture,
    /// Findings of connections folded away to bound memory (counted, not listed).
    Unlisted,
}

/// One connection given as an example of a group.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Example {
    /// `tcp.stream`.
    pub stream: u32,
    /// The finding's cost on this connection, seconds.
    pub seconds: f64,
    /// The same as a share of the connection's life.
    pub share: f64,
    /// The capture file, with several input files.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
}

/// Findings of one kind sharing a service or a client host.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Group {
    /// The findings' kind.
    pub kind: FindingKind,
    /// What the connections share.
    pub by: GroupBy,
    /// The server `ip:port` or the client address; `None` for capture-wide and unlisted.
    pub key: Option<String>,
    /// Connections (findings) in the group.
    pub connections: u64,
    /// Episodes over the group's findings.
    pub episodes: u64,
    /// Seconds lost, summed over the group's findings.
    pub seconds: f64,
    /// `seconds` over the capture's connection-seconds (0 when the capture has none).
    pub share: f64,
    /// The highest severity among the findings.
    pub severity: Severity,
    /// The costliest connections, most costly first (at most [`WORST_PER_GROUP`]).
    pub worst: Vec<Example>,
    /// The first recommendation of the group's costliest finding.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recommendation: Option<String>,
}

/// One state's share of the capture's connection-seconds.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct StateShare {
    /// The time-budget state (`sending`, `server_think_time`, ...).
    pub state: &'static str,
    /// Connection-seconds in it.
    pub seconds: f64,
    /// Share of the connection-seconds.
    pub share: f64,
}

/// Where the lost time is concentrated: the service or client host with most of it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Hotspot {
    /// [`GroupBy::Service`] or [`GroupBy::ClientHost`].
    pub by: GroupBy,
    /// The server `ip:port` or the client address.
    pub key: String,
    /// Seconds lost there, over every kind.
    pub seconds: f64,
    /// Share of the capture's lost seconds.
    pub share_of_lost: f64,
    /// Connections there with a finding that cost time.
    pub connections: u64,
}

/// The answer at the top: a few lines and the figures behind them.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Verdict {
    /// Two to four lines of prose, in order: where the time went, what cost most (or that
    /// nothing did), where, and the change that would help most.
    pub lines: Vec<String>,
    /// No finding cost time.
    pub healthy: bool,
    /// Connections diagnosed (listed and not).
    pub connections: u64,
    /// The capture's connection-seconds.
    pub connection_seconds: f64,
    /// Seconds lost, summed over every finding (listed and not).
    pub seconds_lost: f64,
    /// `seconds_lost` over `connection_seconds` (0 when there are none).
    pub share_lost: f64,
    /// The largest states of the time budget, largest first.
    pub states: Vec<StateShare>,
    /// Index in `groups` of the group that cost most, if any cost time.
    pub top_group: Option<usize>,
    /// The service or client host with most of the lost time, if any.
    pub hotspot: Option<Hotspot>,
    /// The change that would help most (the top group's first recommendation).
    pub advice: Option<String>,
}

/// The verdict and the groups of a diagnosis.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Summary {
    /// The answer at the top.
    pub verdict: Verdict,
    /// Every finding in one group; most seconds lost first.
    pub groups: Vec<Group>,
}

/// The server `ip:port` and the client address of a connection.
fn keys(c: &ConnInference) -> (&str, &str) {
    let host = c.client.rsplit_once(':').map_or(c.client.as_str(), |h| h.0);
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    (c.server.as_str(), host)
}

/// Group totals used to choose a finding's group: seconds, then findings.
#[derive(Clone, Copy, Default, PartialEq, PartialOrd)]
struct Weight(f64, u64);

/// Groups the findings and draws the verdict.
pub fn summarize(d: &Diagnosis) -> Summary {
    let total = d.time_budget.seconds;
    let share_of = |s: f64| if total > 0.0 { s / total } else { 0.0 };
    // Several input files can repeat a stream number: the first connection listed with it
    // gives the keys.
    let mut conns: FxHashMap<u32, &ConnInference> = FxHashMap::default();
    for c in &d.connections {
        conns.entry(c.stream).or_insert(c);
    }
    let conn_keys = |f: &Finding| f.stream.and_then(|s| conns.get(&s)).map(|c| keys(c));

    // Each finding goes to whichever of its two candidate groups weighs more over the
    // capture (the service on a tie): one server's many clients gather under the
    // service, one client's many servers under the client.
    let mut weights: FxHashMap<(FindingKind, GroupBy, &str), Weight> = FxHashMap::default();
    for f in &d.findings {
        if let Some((svc, host)) = conn_keys(f) {
            for k in [
                (f.kind, GroupBy::Service, svc),
                (f.kind, GroupBy::ClientHost, host),
            ] {
                let w = weights.entry(k).or_default();
                w.0 += f.cost.seconds;
                w.1 += 1;
            }
        }
    }
    let mut members: BTreeMap<(FindingKind, GroupBy, Option<&str>), Vec<&Finding>> =
        BTreeMap::new();
    for f in &d.findings {
        let key = match conn_keys(f) {
            Some((svc, host)) => {
                let w = |by, k| weights.get(&(f.kind, by, k)).copied().unwrap_or_default();
                if w(GroupBy::ClientHost, host) > w(GroupBy::Service, svc) {
                    (f.kind, GroupBy::ClientHost, Some(host))
                } else {
                    (f.kind, GroupBy::Service, Some(svc))
                }
            }
            // A finding without a listed connection stands alone (capture-wide).
            None => (f.kind, GroupBy::Capture, None),
        };
        members.entry(key).or_default().push(f);
    }

    let mut groups: Vec<Group> = Vec::with_capacity(members.len() + d.unlisted.findings.len());
    for ((kind, by, key), mut fs) in members {
        if by == GroupBy::Capture {
            // Each capture-wide finding is its own pattern.
            for f in fs {
                groups.push(group_of(kind, by, None, &[f], total));
            }
            continue;
        }
        fs.sort_by(|a, b| {
            b.cost
                .seconds
                .total_cmp(&a.cost.seconds)
                .then(a.stream.cmp(&b.stream))
        });
        groups.push(group_of(kind, by, key.map(str::to_string), &fs, total));
    }
    for (kind, t) in &d.unlisted.findings {
        groups.push(Group {
            kind: *kind,
            by: GroupBy::Unlisted,
            key: None,
            connections: t.count,
            episodes: 0,
            seconds: t.seconds,
            share: share_of(t.seconds),
            severity: Severity::Info,
            worst: Vec::new(),
            recommendation: None,
        });
    }
    groups.sort_by(|a, b| {
        b.seconds
            .total_cmp(&a.seconds)
            .then(b.severity.cmp(&a.severity))
            .then(b.connections.cmp(&a.connections))
            .then(a.kind.cmp(&b.kind))
            .then(a.by.cmp(&b.by))
            .then(a.key.cmp(&b.key))
    });

    let verdict = verdict(d, &groups, &conns);
    Summary { verdict, groups }
}

/// The group of `fs` (costliest first).
fn group_of(
    kind: FindingKind,
    by: GroupBy,
    key: Option<String>,
    fs: &[&Finding],
    total: f64,
) -> Group {
    let seconds: f64 = fs.iter().map(|f| f.cost.seconds).sum::<f64>() + 0.0;
    Group {
        kind,
        by,
        key,
        connections: fs.len() as u64,
        episodes: fs.iter().map(|f| u64::from(f.episodes)).sum(),
        seconds,
        share: if total > 0.0 { seconds / total } else { 0.0 },
        severity: fs
            .iter()
            .map(|f| f.severity)
            .max()
            .unwrap_or(Severity::Info),
        worst: fs
            .iter()
            .filter_map(|f| {
                Some(Example {
                    stream: f.stream?,
                    seconds: f.cost.seconds,
                    share: f.cost.share,
                    file: f.file.clone(),
                })
            })
            .take(WORST_PER_GROUP)
            .collect(),
        recommendation: fs
            .first()
            .and_then(|f| f.recommendations.first())
            .map(|r| r.to_string()),
    }
}

/// A group costs time if it lost any and is not the healthy path-limited reading.
fn costs_time(g: &Group) -> bool {
    g.seconds > 0.0 && g.kind != FindingKind::PathLimited
}

fn verdict(d: &Diagnosis, groups: &[Group], conns: &FxHashMap<u32, &ConnInference>) -> Verdict {
    let total = d.time_budget.seconds;
    let n = d.connections.len() as u64 + d.unlisted.connections;
    let lost: f64 = groups
        .iter()
        .filter(|g| costs_time(g))
        .map(|g| g.seconds)
        .sum::<f64>()
        + 0.0;
    let share_lost = if total > 0.0 { lost / total } else { 0.0 };

    let mut states: Vec<StateShare> = State::ALL
        .iter()
        .map(|&s| {
            let seconds = d.time_budget.states.get(s);
            StateShare {
                state: s.as_str(),
                seconds,
                share: if total > 0.0 { seconds / total } else { 0.0 },
            }
        })
        .filter(|s| s.seconds > 0.0 && s.share >= VERDICT_STATE_SHARE)
        .collect();
    // Stable: equal states keep the budget's order.
    states.sort_by(|a, b| b.seconds.total_cmp(&a.seconds));
    states.truncate(VERDICT_STATES);

    let top_group = groups.iter().position(costs_time);
    let hotspot = hotspot(d, conns, lost);
    let advice = top_group.and_then(|i| groups[i].recommendation.clone());

    let mut lines = Vec::with_capacity(4);
    if n == 0 || total <= 0.0 {
        lines.push(format!(
            "{n} connection(s), no time to account for: nothing to diagnose."
        ));
    } else {
        let parts: Vec<String> = states
            .iter()
            .map(|s| {
                format!(
                    "{} {:.0}%",
                    s.state.replace('_', " "),
                    (s.share * 100.0).round()
                )
            })
            .collect();
        let parts = if parts.is_empty() {
            String::new()
        } else {
            format!(": {}", parts.join(", "))
        };
        lines.push(format!(
            "{n} connection(s), {} connection-seconds{parts}.",
            secs(total)
        ));
    }
    match top_group.map(|i| &groups[i]) {
        Some(g) => {
            lines.push(format!(
                "Findings cost {} ({:.1}% of the connection-seconds); most: {}, {} ({:.1}%).",
                secs(lost),
                share_lost * 100.0,
                describe(g),
                secs(g.seconds),
                g.share * 100.0
            ));
            let mut where_ = String::new();
            if let Some(h) = &hotspot {
                where_ = format!(
                    "{:.0}% of the lost time on {} {} ({} connection(s))",
                    (h.share_of_lost * 100.0).round(),
                    match h.by {
                        GroupBy::ClientHost => "connections from",
                        _ => "connections to",
                    },
                    h.key,
                    h.connections
                );
            }
            let worst: Vec<String> = g.worst.iter().map(|e| e.stream.to_string()).collect();
            if !worst.is_empty() {
                if !where_.is_empty() {
                    where_.push_str("; ");
                }
                where_.push_str(&format!("worst connections: stream {}", worst.join(", ")));
            }
            if !where_.is_empty() {
                lines.push(format!("{where_}."));
            }
            if let Some(a) = &advice {
                lines.push(format!("Most help: {a}"));
            }
        }
        None => {
            let path = groups
                .iter()
                .filter(|g| g.kind == FindingKind::PathLimited)
                .map(|g| g.connections)
                .sum::<u64>();
            let idle = d.time_budget.states.get(State::ApplicationIdle)
                + d.time_budget.states.get(State::ServerThinkTime);
            let limit = if total > 0.0 && idle / total >= 0.5 {
                "the applications: the connections were mostly idle, waiting for data to send"
                    .to_string()
            } else if path > 0 {
                format!("the path ({path} connection(s) ran at what it allows)")
            } else {
                "the path or the applications, not TCP".to_string()
            };
            lines.push(format!(
                "Healthy: no finding cost time; throughput was limited by {limit}."
            ));
        }
    }
    Verdict {
        lines,
        healthy: top_group.is_none(),
        connections: n,
        connection_seconds: total,
        seconds_lost: lost,
        share_lost,
        states,
        top_group,
        hotspot,
        advice,
    }
}

/// The service or client host where most lost time lies, over every kind.
fn hotspot(d: &Diagnosis, conns: &FxHashMap<u32, &ConnInference>, lost: f64) -> Option<Hotspot> {
    if lost <= 0.0 {
        return None;
    }
    // Per key: seconds and the distinct streams (a connection with two findings once).
    let mut at: BTreeMap<(GroupBy, &str), (f64, Vec<u32>)> = BTreeMap::new();
    for f in &d.findings {
        if f.cost.seconds <= 0.0 || f.kind == FindingKind::PathLimited {
            continue;
        }
        let Some((s, c)) = f.stream.and_then(|s| conns.get(&s).map(|c| (s, c))) else {
            continue;
        };
        let (svc, host) = keys(c);
        for k in [(GroupBy::Service, svc), (GroupBy::ClientHost, host)] {
            let e = at.entry(k).or_default();
            e.0 += f.cost.seconds;
            e.1.push(s);
        }
    }
    // Most seconds; on a tie the first in the map's order, the service, then the smaller
    // key (`max_by` keeps the last of equals: the reversed order's last is the first).
    let ((by, key), (seconds, mut streams)) = at
        .into_iter()
        .rev()
        .max_by(|a, b| a.1.0.total_cmp(&b.1.0))?;
    streams.sort_unstable();
    streams.dedup();
    Some(Hotspot {
        by,
        key: key.to_string(),
        seconds,
        share_of_lost: (seconds / lost).min(1.0),
        connections: streams.len() as u64,
    })
}

/// "KIND on N connection(s) to SERVICE", and the like.
pub fn describe(g: &Group) -> String {
    let k = g.kind.as_str();
    let n = g.connections;
    match (g.by, &g.key) {
        (GroupBy::Service, Some(key)) => format!("{k} on {n} connection(s) to {key}"),
        (GroupBy::ClientHost, Some(key)) => format!("{k} on {n} connection(s) from {key}"),
        (GroupBy::Unlisted, _) => format!("{k} on {n} connection(s) not listed"),
        _ => format!("{k} (capture-wide)"),
    }
}

/// Seconds with as many decimals as matter: "615 s", "26.0 s", "1.25 s", "0.041 s".
pub fn secs(x: f64) -> String {
    if x >= 100.0 {
        format!("{x:.0} s")
    } else if x >= 10.0 {
        format!("{x:.1} s")
    } else if x >= 1.0 {
        format!("{x:.2} s")
    } else {
        format!("{x:.3} s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::budget::{ConnBudget, StateTimes, TimeBudget};
    use crate::{CapturePoint, KindTotal};

    fn conn(stream: u32, client: &str, server: &str) -> ConnInference {
        ConnInference {
            stream,
            client: client.into(),
            server: server.into(),
            main_direction: "server_to_client",
            capture_point: CapturePoint::Unknown,
            rtt_s: None,
            path_bps: 0.0,
            goodput_bps: 0.0,
            rounds: 0,
            slow_start_rounds: 0,
            congestion_avoidance_rounds: 0,
            max_packets_per_round: 0,
            loss_episodes: 0,
            segments_per_ack: None,
            lone_segment_ack_delay_s: None,
        }
    }

    fn finding(kind: FindingKind, stream: Option<u32>, seconds: f64, sev: Severity) -> Finding {
        let mut f = Finding::new(kind, stream);
        f.cost.seconds = seconds;
        f.cost.share = seconds / 10.0;
        f.severity = sev;
        f.episodes = 2;
        f.recommendations = vec![format!("fix {}", kind.as_str()).into()];
        f
    }

    /// A diagnosis of `conns` connections of 10 s each, all in `sending`, with `findings`.
    fn diag(conns: Vec<ConnInference>, findings: Vec<Finding>) -> Diagnosis {
        let mut tb = TimeBudget::default();
        for c in &conns {
            let mut st = StateTimes::default();
            st.0[7] = 10.0;
            tb.push(ConnBudget {
                stream: c.stream,
                seconds: 10.0,
                states: st,
                sending_limits: Default::default(),
                start_s: 0.0,
            });
        }
        let mut d = Diagnosis {
            findings,
            time_budget: tb,
            connections: conns,
            ..Diagnosis::default()
        };
        crate::sort_findings(&mut d.findings);
        d
    }

    #[test]
    fn no_finding_gives_a_healthy_verdict() {
        let d = diag(vec![conn(0, "10.0.0.1:40000", "10.0.0.2:80")], vec![]);
        let s = summarize(&d);
        assert!(s.groups.is_empty());
        let v = &s.verdict;
        assert!(v.healthy);
        assert_eq!(v.top_group, None);
        assert_eq!(v.advice, None);
        assert_eq!(v.hotspot, None);
        assert_eq!(v.seconds_lost, 0.0);
        assert_eq!(v.connections, 1);
        assert_eq!(v.lines.len(), 2, "{:?}", v.lines);
        assert_eq!(
            v.lines[0],
            "1 connection(s), 10.0 s connection-seconds: sending 100%."
        );
        assert!(v.lines[1].starts_with("Healthy: no finding cost time"));
    }

    #[test]
    fn an_empty_capture_has_nothing_to_diagnose() {
        let s = summarize(&Diagnosis::default());
        assert!(s.verdict.healthy);
        assert_eq!(s.verdict.connections, 0);
        assert!(s.verdict.lines[0].contains("nothing to diagnose"));
        assert!((2..=4).contains(&s.verdict.lines.len()));
    }

    #[test]
    fn a_zero_cost_path_limited_finding_is_healthy() {
        let d = diag(
            vec![conn(0, "10.0.0.1:40000", "10.0.0.2:80")],
            vec![finding(
                FindingKind::PathLimited,
                Some(0),
                0.0,
                Severity::Info,
            )],
        );
        let s = summarize(&d);
        assert_eq!(s.groups.len(), 1);
        assert!(s.verdict.healthy);
        assert!(s.verdict.lines[1].contains("the path (1 connection(s)"));
    }

    #[test]
    fn one_connection_one_finding() {
        let d = diag(
            vec![conn(3, "10.0.0.1:40000", "10.0.0.2:80")],
            vec![finding(
                FindingKind::RtoStall,
                Some(3),
                2.5,
                Severity::Major,
            )],
        );
        let s = summarize(&d);
        assert_eq!(s.groups.len(), 1);
        let g = &s.groups[0];
        assert_eq!((g.kind, g.by), (FindingKind::RtoStall, GroupBy::Service));
        assert_eq!(g.key.as_deref(), Some("10.0.0.2:80"));
        assert_eq!((g.connections, g.episodes), (1, 2));
        assert_eq!(g.seconds, 2.5);
        assert_eq!(g.share, 0.25);
        assert_eq!(g.worst.len(), 1);
        assert_eq!(g.worst[0].stream, 3);
        let v = &s.verdict;
        assert!(!v.healthy);
        assert_eq!(v.top_group, Some(0));
        assert_eq!(v.seconds_lost, 2.5);
        assert_eq!(v.advice.as_deref(), Some("fix rto-stall"));
        let h = v.hotspot.as_ref().unwrap();
        assert_eq!(
            (h.by, h.key.as_str(), h.connections),
            (GroupBy::Service, "10.0.0.2:80", 1)
        );
        assert_eq!(h.share_of_lost, 1.0);
        assert_eq!(v.lines.len(), 4, "{:?}", v.lines);
        assert!(v.lines[1].contains("rto-stall on 1 connection(s) to 10.0.0.2:80, 2.50 s (25.0%)"));
        assert!(v.lines[2].contains("worst connections: stream 3"));
        assert_eq!(v.lines[3], "Most help: fix rto-stall");
    }

    #[test]
    fn one_client_to_many_servers_groups_by_the_client() {
        let conns: Vec<_> = (0..4)
            .map(|i| conn(i, "192.168.1.5:5000", &format!("10.0.0.{i}:443")))
            .collect();
        let findings = (0..4)
            .map(|i| {
                finding(
                    FindingKind::NetworkLoss,
                    Some(i),
                    0.5 + f64::from(i),
                    Severity::Minor,
                )
            })
            .collect();
        let s = summarize(&diag(conns, findings));
        assert_eq!(s.groups.len(), 1);
        let g = &s.groups[0];
        assert_eq!(
            (g.by, g.key.as_deref()),
            (GroupBy::ClientHost, Some("192.168.1.5"))
        );
        assert_eq!(g.connections, 4);
        assert_eq!(g.seconds, 0.5 + 1.5 + 2.5 + 3.5);
        let worst: Vec<u32> = g.worst.iter().map(|e| e.stream).collect();
        assert_eq!(worst, [3, 2, 1]);
        assert!(describe(g).ends_with("from 192.168.1.5"));
        let h = s.verdict.hotspot.unwrap();
        assert_eq!(
            (h.by, h.key.as_str(), h.connections),
            (GroupBy::ClientHost, "192.168.1.5", 4)
        );
    }

    #[test]
    fn ipv6_clients_are_grouped_by_their_address() {
        let c = conn(0, "[2001:db8::1]:5000", "[2001:db8::2]:80");
        assert_eq!(keys(&c), ("[2001:db8::2]:80", "2001:db8::1"));
    }

    #[test]
    fn ties_are_broken_by_severity_then_connections_then_kind() {
        let conns = vec![
            conn(0, "10.0.0.1:1", "10.0.0.9:80"),
            conn(1, "10.0.0.2:1", "10.0.0.8:80"),
            conn(2, "10.0.0.3:1", "10.0.0.7:80"),
            conn(3, "10.0.0.3:2", "10.0.0.7:80"),
        ];
        let findings = vec![
            finding(FindingKind::RtoStall, Some(0), 1.0, Severity::Minor),
            finding(FindingKind::NetworkLoss, Some(1), 1.0, Severity::Major),
            finding(FindingKind::CwndCollapse, Some(2), 0.5, Severity::Minor),
            finding(FindingKind::CwndCollapse, Some(3), 0.5, Severity::Minor),
        ];
        let s = summarize(&diag(conns, findings));
        let order: Vec<(FindingKind, u64)> =
            s.groups.iter().map(|g| (g.kind, g.connections)).collect();
        assert_eq!(
            order,
            [
                (FindingKind::NetworkLoss, 1),
                (FindingKind::CwndCollapse, 2),
                (FindingKind::RtoStall, 1),
            ]
        );
        // Service and client host weigh the same for every finding here: the service wins.
        assert!(s.groups.iter().all(|g| g.by == GroupBy::Service));
        // Equal costs within a group: the lower stream first.
        let worst: Vec<u32> = s.groups[1].worst.iter().map(|e| e.stream).collect();
        assert_eq!(worst, [2, 3]);
        // Two services lost 1.0 s each: the hotspot is the first key of the tie, the same
        // on every run.
        let h = s.verdict.hotspot.unwrap();
        assert_eq!((h.key.as_str(), h.seconds), ("10.0.0.7:80", 1.0));
    }

    #[test]
    fn capture_wide_findings_are_groups_of_their_own() {
        let conns = vec![conn(0, "10.0.0.1:1", "10.0.0.2:80")];
        let findings = vec![
            finding(FindingKind::CaptureQuality, None, 0.0, Severity::Minor),
            finding(FindingKind::CaptureQuality, None, 0.0, Severity::Info),
            finding(FindingKind::RtoStall, Some(0), 0.3, Severity::Major),
        ];
        let s = summarize(&diag(conns, findings));
        assert_eq!(s.groups.len(), 3);
        assert_eq!(s.groups[0].kind, FindingKind::RtoStall);
        for g in &s.groups[1..] {
            assert_eq!(
                (g.by, g.key.as_deref(), g.connections),
                (GroupBy::Capture, None, 1)
            );
            assert!(g.worst.is_empty());
            assert!(describe(g).contains("capture-wide"));
        }
        // The more severe first among equal costs.
        assert_eq!(s.groups[1].severity, Severity::Minor);
        let json = serde_json::to_value(&s.groups[1]).unwrap();
        assert!(json["key"].is_null());
        assert_eq!(json["by"], "capture");
        assert_eq!(s.verdict.seconds_lost, 0.3);
    }

    #[test]
    fn unlisted_findings_count_in_groups_and_verdict() {
        let mut d = diag(
            vec![conn(0, "10.0.0.1:1", "10.0.0.2:80")],
            vec![finding(
                FindingKind::RtoStall,
                Some(0),
                0.2,
                Severity::Major,
            )],
        );
        d.unlisted.connections = 7;
        d.unlisted.findings.insert(
            FindingKind::NetworkLoss,
            KindTotal {
                count: 5,
                seconds: 0.4,
            },
        );
        let s = summarize(&d);
        assert_eq!(s.groups[0].by, GroupBy::Unlisted);
        assert_eq!(s.groups[0].connections, 5);
        assert_eq!(s.verdict.connections, 8);
        assert!((s.verdict.seconds_lost - 0.6).abs() < 1e-12);
        assert!(describe(&s.groups[0]).contains("not listed"));
    }

    #[test]
    fn thousands_of_connections_make_few_groups() {
        // 6,000 clients of one web service, every second one losing time, and 30 of another
        // service's connections from one client host.
        let mut conns = Vec::new();
        let mut findings = Vec::new();
        for i in 0..6000u32 {
            let client = format!("10.1.{}.{}:{}", i / 250, i % 250, 30000 + i % 1000);
            conns.push(conn(i, &client, "10.98.0.2:8080"));
            if i % 2 == 0 {
                let cost = 0.001 * f64::from(i % 97);
                findings.push(finding(
                    FindingKind::ReceiverWindowLimited,
                    Some(i),
                    cost,
                    Severity::Minor,
                ));
            }
            findings.push(finding(
                FindingKind::PathLimited,
                Some(i),
                0.0,
                Severity::Info,
            ));
        }
        for j in 0..30u32 {
            let i = 6000 + j;
            conns.push(conn(i, "172.16.0.9:4000", &format!("10.50.{j}.1:443")));
            findings.push(finding(
                FindingKind::RtoStall,
                Some(i),
                0.2,
                Severity::Major,
            ));
        }
        let d = diag(conns, findings);
        let s = summarize(&d);
        let summary: Vec<(FindingKind, GroupBy, u64)> = s
            .groups
            .iter()
            .map(|g| (g.kind, g.by, g.connections))
            .collect();
        assert_eq!(
            summary,
            [
                (FindingKind::ReceiverWindowLimited, GroupBy::Service, 3000),
                (FindingKind::RtoStall, GroupBy::ClientHost, 30),
                (FindingKind::PathLimited, GroupBy::Service, 6000),
            ]
        );
        // Every finding in exactly one group: the seconds add up.
        let sum: f64 = d.findings.iter().map(|f| f.cost.seconds).sum();
        let grouped: f64 = s.groups.iter().map(|g| g.seconds).sum();
        assert!((sum - grouped).abs() < 1e-9);
        let g = &s.groups[0];
        assert_eq!(g.worst.len(), WORST_PER_GROUP);
        assert!(g.worst.iter().all(|e| e.seconds == 0.096));
        assert!(g.worst.windows(2).all(|w| w[0].stream < w[1].stream));
        assert!((g.share - g.seconds / 60_300.0).abs() < 1e-12);
        let v = &s.verdict;
        assert_eq!(v.top_group, Some(0));
        assert_eq!(v.connections, 6030);
        assert_eq!(v.hotspot.as_ref().unwrap().key, "10.98.0.2:8080");
        assert!(v.lines.len() <= 4);
        assert!(v.lines.iter().all(|l| l.len() < 400), "{:?}", v.lines);
    }

    #[test]
    fn seconds_are_printed_with_the_decimals_that_matter() {
        assert_eq!(secs(615.4), "615 s");
        assert_eq!(secs(26.04), "26.0 s");
        assert_eq!(secs(1.254), "1.25 s");
        assert_eq!(secs(0.0412), "0.041 s");
        assert_eq!(secs(0.0), "0.000 s");
    }
}
