//! Validates a run directory: truth.json against its captures. Needs no root, so the
//! committed fixtures are checked by ordinary tests.

use crate::capture::{Pkt, read_pcap};
use crate::scenario::{Expect, Scenario};
use crate::truth::{Connection, Truth};
use anyhow::{Context, Result};
use std::collections::HashMap;
use std::net::SocketAddrV4;
use std::path::Path;

/// Tolerance for matching kernel event times with capture times.
pub const TOL_NS: i64 = 5_000_000;

/// One named check.
#[derive(Debug, Clone)]
pub struct Check {
    /// Short name.
    pub name: String,
    /// Passed?
    pub ok: bool,
    /// Details.
    pub detail: String,
}

/// Verification report of one run.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// Run directory.
    pub dir: String,
    /// Scenario name.
    pub scenario: String,
    /// Checks in order.
    pub checks: Vec<Check>,
}

impl Report {
    /// True if every check passed.
    pub fn ok(&self) -> bool {
        self.checks.iter().all(|c| c.ok)
    }

    /// The failed checks on one line ("name: detail; ..."), empty if every check passed.
    pub fn failures(&self) -> String {
        let failed: Vec<String> = self
            .checks
            .iter()
            .filter(|c| !c.ok)
            .map(|c| format!("{}: {}", c.name, c.detail))
            .collect();
        failed.join("; ")
    }

    fn add(&mut self, name: &str, ok: bool, detail: String) {
        self.checks.push(Check {
            name: name.into(),
            ok,
            detail,
        });
    }

    /// Prints the report to stderr.
    pub fn print(&self) {
        eprintln!(
            "verify {} ({}): {}",
            self.dir,
            self.scenario,
            if self.ok() { "OK" } else { "FAILED" }
        );
        for c in &self.checks {
            eprintln!(
                "  [{}] {:<26} {}",
                if c.ok { " ok " } else { "FAIL" },
                c.name,
                c.detail
            );
        }
    }
}

/// One-line summary of a truth file.
pub fn summary(t: &Truth) -> String {
    let mut s = format!("   {}: ", t.scenario);
    for c in t
        .connections
        .iter()
        .filter(|c| c.bytes_sent > 10_000 || !c.retransmissions.is_empty())
    {
        let e = &c.episodes;
        s += &format!(
            "{} -> {}: {} B, rtx {} ({} segs), RTOs {}, delack pauses {}, burst losses {}, zero-window {}, CA phases {}; ",
            c.sender,
            c.receiver,
            c.bytes_sent,
            c.retransmissions.len(),
            c.retransmitted_segments,
            e.rtos.len(),
            e.delack_pauses.len(),
            e.burst_losses.len(),
            e.zero_windows.len(),
            e.ca_growth.len()
        );
    }
    let k = &t.counters;
    s += &format!(
        "injected drops {} reorders {}; tbf drops {:?}; nft drops {:?}; health {}",
        t.injected.drops.len(),
        t.injected.reorders.len(),
        k.tbf_drops,
        k.nft_drops,
        if t.health.ok {
            "ok".to_string()
        } else {
            t.health.problems.join(", ")
        }
    );
    s
}

fn addr(s: &str) -> Option<SocketAddrV4> {
    s.parse().ok()
}

fn from(p: &Pkt, a: SocketAddrV4) -> bool {
    p.src == a.ip().octets() && p.sport == a.port()
}

/// Loads truth.json of `dir` and checks it against the captures in `dir`.
pub fn verify_dir(dir: &Path) -> Result<Report> {
    let tp = dir.join("truth.json");
    let t: Truth = serde_json::from_slice(
        &std::fs::read(&tp).with_context(|| format!("reading {}", tp.display()))?,
    )
    .with_context(|| format!("parsing {}", tp.display()))?;
    let sc: Scenario =
        serde_json::from_value(t.params.clone()).context("truth.params is not a scenario")?;
    let mut caps: HashMap<String, Vec<Pkt>> = HashMap::new();
    for f in &t.files.captures {
        caps.insert(f.point.clone(), read_pcap(&dir.join(&f.file))?);
    }
    let mut r = Report {
        dir: dir.display().to_string(),
        scenario: t.scenario.clone(),
        checks: Vec::new(),
    };
    r.add("schema", t.schema == crate::truth::SCHEMA, t.schema.clone());
    r.add(
        "capture present",
        caps.values().any(|c| !c.is_empty()),
        format!("{} capture file(s)", caps.len()),
    );
    r.add(
        "no unintended drops",
        t.health.ok,
        if t.health.ok {
            format!(
                "softnet {}, veth {}, tun {:?}/{:?}, relay overflow {:?}, trace overrun {}",
                t.counters.softnet_dropped,
                t.counters.veth_dropped,
                t.counters.tun_tx_dropped,
                t.counters.tun_qdisc_drops,
                t.counters.relay.as_ref().map(|r| r.pool_overflow),
                t.counters.trace.overrun
            )
        } else {
            t.health.problems.join(", ")
        },
    );
    r.add(
        "connection found",
        !t.connections.is_empty(),
        format!("{} connection(s)", t.connections.len()),
    );
    for c in &t.connections {
        check_connection(&mut r, &t, c, &caps);
    }
    check_injected(&mut r, &t, sc.relay.as_ref(), &caps);
    check_expect(&mut r, &t, &sc.expect, &caps);
    Ok(r)
}

fn sender_capture<'a>(t: &Truth, c: &Connection, caps: &'a HashMap<String, Vec<Pkt>>) -> &'a [Pkt] {
    let key = if c.sender.starts_with(&format!("{}:", t.topology.client)) {
        "client"
    } else {
        "server"
    };
    caps.get(key).map_or(&[], |v| v.as_slice())
}

fn receiver_capture<'a>(
    t: &Truth,
    c: &Connection,
    caps: &'a HashMap<String, Vec<Pkt>>,
) -> &'a [Pkt] {
    let key = if c.sender.starts_with(&format!("{}:", t.topology.client)) {
        "server"
    } else {
        "client"
    };
    caps.get(key).map_or(&[], |v| v.as_slice())
}

fn check_connection(r: &mut Report, t: &Truth, c: &Connection, caps: &HashMap<String, Vec<Pkt>>) {
    let Some(snd) = addr(&c.sender) else {
        r.add("connection address", false, c.sender.clone());
        return;
    };
    let pk = sender_capture(t, c, caps);
    // every kernel retransmission appears in the sender capture at the aligned time
    let mut seen: HashMap<u32, Vec<i64>> = HashMap::new();
    let mut bad = Vec::new();
    let mut first_tx: HashMap<u32, i64> = HashMap::new();
    for p in pk.iter().filter(|p| from(p, snd) && p.len > 0) {
        seen.entry(p.seq).or_default().push(p.t_ns);
        first_tx.entry(p.seq).or_insert(p.t_ns);
    }
    let mut worst = 0i64;
    for x in &c.retransmissions {
        let hit = x.seq.and_then(|s| {
            let times = seen.get(&s)?;
            let first = first_tx.get(&s)?;
            times
                .iter()
                .filter(|&&tt| tt > *first || times.len() > 1)
                .map(|tt| (tt - x.t_ns).abs())
                .min()
        });
        match hit {
            Some(d) if d <= TOL_NS => worst = worst.max(d),
            _ => bad.push(x.t_ns),
        }
    }
    r.add(
        "retransmissions in capture",
        bad.is_empty(),
        format!(
            "{}: {}/{} kernel retransmissions found within {} ms (worst offset {} µs){}",
            c.sender,
            c.retransmissions.len() - bad.len(),
            c.retransmissions.len(),
            TOL_NS / 1_000_000,
            worst / 1000,
            if bad.is_empty() {
                String::new()
            } else {
                format!("; missing at {:?}", &bad[..bad.len().min(5)])
            }
        ),
    );
}

/// Every segment the relay reordered was really held back: downstream it arrives after a
/// higher sequence number of its flow, or (time-based reordering) at least the extra delay
/// late. A held segment at the right edge of the receive window cannot be overtaken (the
/// sender may send nothing beyond it), so lateness alone is enough for time-based holds.
fn check_reorders(
    r: &mut Report,
    t: &Truth,
    relay: Option<&crate::scenario::RelaySpec>,
    caps: &HashMap<String, Vec<Pkt>>,
) {
    if t.injected.reorders.is_empty() {
        return;
    }
    let (mut held, mut overtaken) = (0, 0);
    let late_ms = |c2s: bool| {
        relay.filter(|s| s.reorder_delay_ms > 0.0).map(|s| {
            let d = if c2s { s.delay_c2s_ms } else { s.delay_s2c_ms };
            d.unwrap_or(s.delay_ms) + s.reorder_delay_ms
        })
    };
    for e in &t.injected.reorders {
        let c2s = e.dir == "c2s";
        let (src, down) = if c2s {
            (&t.topology.client, "server")
        } else {
            (&t.topology.server, "client")
        };
        let Ok(src) = src.parse::<std::net::Ipv4Addr>() else {
            continue;
        };
        let pk = caps.get(down).map_or(&[][..], |v| v.as_slice());
        let flow: Vec<&Pkt> = pk
            .iter()
            .filter(|p| p.src == src.octets() && p.sport == e.sport && p.len > 0)
            .collect();
        if let Some(i) = flow.iter().position(|p| p.seq == e.seq && p.t_ns >= e.t_ns) {
            let over = flow[..i]
                .iter()
                .any(|p| (p.seq.wrapping_sub(e.seq) as i32) > 0 && p.t_ns >= e.t_ns);
            // 5% tolerance: the relay's timer and the capture tap are not the same instant
            let late = late_ms(c2s).is_some_and(|ms| (flow[i].t_ns - e.t_ns) as f64 >= ms * 0.95e6);
            overtaken += usize::from(over);
            held += usize::from(over || late);
        }
    }
    r.add(
        "injected reorders held back",
        held == t.injected.reorders.len(),
        format!(
            "{held}/{} held segments arrived after a later segment of their flow ({overtaken}) or late by the reorder delay",
            t.injected.reorders.len()
        ),
    );
}

fn check_injected(
    r: &mut Report,
    t: &Truth,
    relay: Option<&crate::scenario::RelaySpec>,
    caps: &HashMap<String, Vec<Pkt>>,
) {
    check_reorders(r, t, relay, caps);
    if t.injected.drops.is_empty() {
        return;
    }
    // count transmissions of each (src, sport, seq) upstream and downstream of the relay
    let count = |pk: &[Pkt]| {
        let mut m: HashMap<(String, u16, u32), i64> = HashMap::new();
        for p in pk.iter().filter(|p| p.len > 0) {
            let src = std::net::Ipv4Addr::from(p.src).to_string();
            *m.entry((src, p.sport, p.seq)).or_default() += 1;
        }
        m
    };
    let (cl, sv) = (
        count(caps.get("client").map_or(&[], |v| v)),
        count(caps.get("server").map_or(&[], |v| v)),
    );
    let mut drops: HashMap<(String, u16, u32), i64> = HashMap::new();
    for d in &t.injected.drops {
        let src = if d.dir == "c2s" {
            &t.topology.client
        } else {
            &t.topology.server
        };
        *drops.entry((src.clone(), d.sport, d.seq)).or_default() += 1;
    }
    let mut bad = Vec::new();
    for (k, n) in &drops {
        let c2s = k.0 == t.topology.client;
        let (up, down) = if c2s { (&cl, &sv) } else { (&sv, &cl) };
        let (u, d) = (
            up.get(k).copied().unwrap_or(0),
            down.get(k).copied().unwrap_or(0),
        );
        if u - d != *n {
            bad.push(format!("seq {} sent {u} arrived {d} dropped {n}", k.2));
        }
    }
    r.add(
        "injected drops missing",
        bad.is_empty(),
        format!(
            "{} drops of {} distinct segments: upstream - downstream == drops{}",
            t.injected.drops.len(),
            drops.len(),
            if bad.is_empty() {
                String::new()
            } else {
                format!("; mismatches: {}", bad[..bad.len().min(5)].join("; "))
            }
        ),
    );
}

fn lone_segment_ack_gaps(pk: &[Pkt], snd: SocketAddrV4, c: &Connection) -> Vec<(i64, i64, i64)> {
    // (retransmission time, ack time, number of other data packets in between)
    let mut out = Vec::new();
    for x in &c.retransmissions {
        let Some(seq) = x.seq else { continue };
        let Some(start) = x.pcap_t_ns else { continue };
        let end_seq = seq.wrapping_add(c.mss);
        let mut others = 0;
        for p in pk.iter().filter(|p| p.t_ns > start) {
            if from(p, snd) && p.len > 0 {
                others += 1;
            } else if !from(p, snd) && (p.ack.wrapping_sub(end_seq) as i32) >= 0 {
                out.push((start, p.t_ns, others));
                break;
            }
        }
    }
    out
}

fn check_expect(r: &mut Report, t: &Truth, e: &Expect, caps: &HashMap<String, Vec<Pkt>>) {
    let conns = &t.connections;
    let sum = |f: &dyn Fn(&Connection) -> usize| conns.iter().map(f).sum::<usize>();
    let rtx = sum(&|c| c.retransmissions.len());
    if e.no_retransmissions {
        r.add(
            "no retransmission",
            rtx == 0,
            format!("{rtx} kernel retransmissions"),
        );
    }
    if e.min_rtos > 0 {
        let n = sum(&|c| c.episodes.rtos.len());
        r.add(
            "RTOs",
            n >= e.min_rtos as usize,
            format!("{n} RTO episode(s), expected >= {}", e.min_rtos),
        );
    }
    let rtt_ns = |c: &Connection| i64::from(c.min_srtt_us) * 1000;
    if e.min_delack_pauses > 0 {
        let mut matched = 0;
        let mut detail = Vec::new();
        for c in conns {
            let Some(snd) = addr(&c.sender) else { continue };
            let gaps = lone_segment_ack_gaps(sender_capture(t, c, caps), snd, c);
            for p in &c.episodes.delack_pauses {
                let hit = gaps.iter().find(|(s, a, others)| {
                    (s - p.start_ns).abs() <= TOL_NS
                        && (a - p.end_ns).abs() <= TOL_NS
                        && *others == 0
                        && a - s >= rtt_ns(c) + 20_000_000
                });
                if let Some((s, a, _)) = hit {
                    matched += 1;
                    detail.push(format!(
                        "{:.1} ms (rtt {:.1} ms)",
                        (a - s) as f64 / 1e6,
                        rtt_ns(c) as f64 / 1e6
                    ));
                }
            }
        }
        r.add(
            "delayed-ACK pause",
            matched >= e.min_delack_pauses as usize,
            format!("{matched} one-segment -> delayed-ACK pause(s) in capture matched by kernel state: {}", detail.join(", ")),
        );
    }
    if e.no_delack_pause {
        let mut slow = 0;
        let mut n = 0;
        for c in conns {
            let Some(snd) = addr(&c.sender) else { continue };
            for (s, a, others) in lone_segment_ack_gaps(sender_capture(t, c, caps), snd, c) {
                if others == 0 {
                    n += 1;
                    slow += usize::from(a - s >= rtt_ns(c) + 20_000_000);
                }
            }
        }
        let k = sum(&|c| c.episodes.delack_pauses.len());
        r.add(
            "no delayed-ACK pause",
            k == 0 && slow == 0,
            format!("{k} pause(s) in kernel state; {slow}/{n} lone retransmissions ACKed later than RTT + 20 ms"),
        );
    }
    if e.min_burst_losses > 0 {
        let n = sum(&|c| c.episodes.burst_losses.len());
        let segs: Vec<u32> = conns
            .iter()
            .flat_map(|c| {
                c.episodes
                    .burst_losses
                    .iter()
                    .map(|b| b.retransmitted_segments)
            })
            .collect();
        r.add(
            "burst loss",
            n >= e.min_burst_losses as usize && t.counters.tbf_drops.unwrap_or(1) > 0,
            format!(
                "{n} burst-loss episode(s), segments {segs:?}, tbf drops {:?}",
                t.counters.tbf_drops
            ),
        );
    }
    if e.additive_increase {
        let g: Vec<String> = conns
            .iter()
            .flat_map(|c| c.episodes.ca_growth.iter())
            .map(|g| {
                format!(
                    "{:.2}/RTT over {:.0} RTTs ({}->{})",
                    g.segments_per_rtt, g.rtts, g.cwnd_start, g.cwnd_end
                )
            })
            .collect();
        let ok = conns
            .iter()
            .flat_map(|c| c.episodes.ca_growth.iter())
            .any(|g| g.rtts >= 5.0 && (0.6..=1.4).contains(&g.segments_per_rtt));
        r.add("+1 segment per RTT", ok, g.join(", "));
    }
    if e.min_spurious > 0 {
        let dsack = t
            .counters
            .nstat
            .get("client")
            .and_then(|m| m.get("TcpExtTCPDSACKRecv"))
            .copied()
            .unwrap_or(0);
        let reord = sum(&|c| {
            c.retransmissions
                .iter()
                .filter(|r| r.reordered_original)
                .count()
        });
        r.add(
            "spurious retransmissions",
            dsack >= u64::from(e.min_spurious) && reord >= e.min_spurious as usize,
            format!("TCPDSACKRecv {dsack}, retransmissions of reordered segments {reord}, reorders injected {}", t.injected.reorders.len()),
        );
        let cuts = sum(&|c| {
            c.episodes
                .ssthresh_changes
                .iter()
                .filter(|x| x.after_spurious && x.to < x.from)
                .count()
        });
        r.add(
            "window cuts from reordering",
            cuts > 0,
            format!("{cuts} ssthresh reduction(s) right after a spurious retransmission"),
        );
    }
    let intended = t.injected.drops.len() as u64
        + t.counters.tbf_drops.unwrap_or(0)
        + t.counters.nft_drops.unwrap_or(0);
    if intended > 0 {
        let segs: u64 = conns
            .iter()
            .map(|c| u64::from(c.retransmitted_segments))
            .sum();
        let nstat: u64 = t
            .counters
            .nstat
            .values()
            .filter_map(|m| m.get("TcpRetransSegs"))
            .sum();
        r.add(
            "loss accounted",
            segs >= intended,
            format!("intended drops {intended}; kernel retransmitted segments {segs} (nstat TcpRetransSegs {nstat})"),
        );
    }
    if e.zero_window {
        let n = sum(&|c| c.episodes.zero_windows.len());
        let in_cap = conns.iter().any(|c| {
            addr(&c.receiver).is_some_and(|rcv| {
                sender_capture(t, c, caps)
                    .iter()
                    .any(|p| from(p, rcv) && p.win == 0 && !p.syn())
            })
        });
        r.add(
            "zero window",
            n > 0 && in_cap,
            format!(
                "{n} zero-window interval(s) in kernel state; zero window in capture: {in_cap}"
            ),
        );
    }
    if e.drops_after_capture {
        let nft = t.counters.nft_drops.unwrap_or(0);
        let primary = t
            .files
            .captures
            .iter()
            .find(|f| f.primary)
            .map(|f| f.point.clone())
            .unwrap_or_default();
        let mut ok = nft > 0 && rtx > 0;
        let mut detail = format!("nft drops {nft}, kernel retransmissions {rtx}");
        for c in conns {
            let Some(snd) = addr(&c.sender) else { continue };
            let n_snd = sender_capture(t, c, caps)
                .iter()
                .filter(|p| from(p, snd) && p.len > 0)
                .count();
            let n_pri = caps.get(&primary).map_or(0, |v| {
                v.iter().filter(|p| from(p, snd) && p.len > 0).count()
            });
            let n_rcv = receiver_capture(t, c, caps)
                .iter()
                .filter(|p| from(p, snd) && p.len > 0)
                .count();
            ok &= n_snd == n_pri;
            detail +=
                &format!("; data packets sender {n_snd}, {primary} {n_pri}, receiver tap {n_rcv}");
        }
        r.add("drops after capture point", ok, detail);
    }
    if e.stall_ms > 0 {
        let st: Vec<i64> = conns
            .iter()
            .flat_map(|c| c.episodes.stalls.iter())
            .map(|s| (s.end_ns - s.start_ns) / 1_000_000)
            .collect();
        r.add(
            "server stall",
            st.iter()
                .any(|&ms| (ms - i64::from(e.stall_ms)).abs() < 500),
            format!("stalls (ms): {st:?}"),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::RelaySpec;
    use crate::truth::InjectedEvent;

    fn pkt(t_ms: i64, seq: u32) -> Pkt {
        Pkt {
            t_ns: t_ms * 1_000_000,
            src: [10, 9, 1, 2],
            dst: [10, 9, 2, 2],
            sport: 40000,
            dport: 5001,
            seq,
            ack: 0,
            flags: 0x10,
            win: 0,
            len: 1448,
        }
    }

    fn truth_with_hold(t_ms: i64, seq: u32) -> Truth {
        let mut t = Truth::default();
        t.topology.client = "10.9.1.2".into();
        t.topology.server = "10.9.2.2".into();
        t.injected.reorders.push(InjectedEvent {
            t_ns: t_ms * 1_000_000,
            ev: "reorder".into(),
            n: 1,
            dir: "c2s".into(),
            sport: 40000,
            dport: 5001,
            seq,
            len: 1448,
        });
        t
    }

    fn held_ok(relay: &RelaySpec, server: Vec<Pkt>) -> bool {
        let t = truth_with_hold(100, 2000);
        let caps = HashMap::from([("server".to_string(), server)]);
        let mut r = Report {
            dir: String::new(),
            scenario: String::new(),
            checks: Vec::new(),
        };
        check_reorders(&mut r, &t, Some(relay), &caps);
        r.ok()
    }

    #[test]
    fn failures_name_only_the_failed_checks() {
        let mut r = Report::default();
        r.add("schema", true, "fine".into());
        assert_eq!(r.failures(), "");
        r.add(
            "no retransmission",
            false,
            "2 kernel retransmissions".into(),
        );
        r.add("connection found", false, "0 connection(s)".into());
        assert_eq!(
            r.failures(),
            "no retransmission: 2 kernel retransmissions; connection found: 0 connection(s)"
        );
    }

    #[test]
    fn held_segment_must_be_overtaken_or_late() {
        let time_based = RelaySpec {
            delay_ms: 5.0,
            reorder_delay_ms: 15.0,
            ..Default::default()
        };
        let count_based = RelaySpec {
            delay_ms: 5.0,
            reorder_k: 3,
            ..Default::default()
        };
        // overtaken by seq 3448 before it arrives
        let overtaken = vec![pkt(105, 3448), pkt(120, 2000)];
        assert!(held_ok(&time_based, overtaken.clone()));
        assert!(held_ok(&count_based, overtaken));
        // at the window edge: nothing later, but 20 ms late (5 + 15)
        let late = vec![pkt(120, 2000)];
        assert!(held_ok(&time_based, late.clone()));
        assert!(
            !held_ok(&count_based, late),
            "count-based holds must be overtaken"
        );
        // neither overtaken nor late: the relay did not hold it
        assert!(!held_ok(&time_based, vec![pkt(105, 2000), pkt(106, 3448)]));
    }
}
