//! One account of a connection's time: every second goes to at most one finding.
//!
//! Detectors cost their findings independently, so one silence could be counted under
//! several kinds (an RTO that is also an "equal stall" and "idle time"). [`settle`] reads the
//! findings in the order the time budget paints its states (the most specific cause first,
//! [`claim_rank`]): each finding keeps only the seconds of its episodes no earlier finding
//! claimed, and no more than what is left of the connection's life. A finding whose every
//! episode a more specific one already explains is folded into it as a note, not reported
//! twice. Hence on every connection the findings' costs add up to at most its life.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use rustc_hash::FxHashMap;

use crate::Diagnosis;
use crate::detectors::fixed_duration_stall::{KNOWN_TIMER_TOLERANCE, KNOWN_TIMERS_NS};
use crate::finding::{Episode, Finding, FindingKind, MAX_EPISODES_LISTED, Severity};

/// Below this many seconds, time differences are rounding (a nanosecond timestamp
/// converted to f64 seconds since the capture's start).
pub const EPS_S: f64 = 1e-6;

/// An episode at most this share of which is left once the earlier findings' seconds are
/// taken out is explained by them; a finding whose every episode is explained and which
/// kept at most this share of its cost is folded into its cause (tcpdx choice: the round
/// trip of a turn, or a timestamp's rounding, is left at an idle gap's edges).
pub const FOLD_LEFT_SHARE: f64 = 0.1;

/// The order in which findings claim time, the most specific cause first (the time
/// budget's painting priority, [`crate::State::ALL`]): the handshake before anything (a SYN
/// waiting for its retransmission is neither a timeout of the transfer nor a loss of it),
/// timeouts, delayed-ACK waits, the receiver's window, loss repair, the sender's own limit
/// (rounds it kept sending in, never idle), then idle time, and last the equal stalls no
/// other cause explains.
pub const fn claim_rank(kind: FindingKind) -> u8 {
    match kind {
        FindingKind::HandshakeAndSetup => 0,
        FindingKind::RtoStall => 1,
        FindingKind::DelackSlowstartStall => 2,
        FindingKind::NagleDelackStall => 3,
        FindingKind::ReceiverWindowLimited => 4,
        FindingKind::ReceiverHostDrops => 5,
        FindingKind::CwndCollapse => 6,
        FindingKind::NetworkLoss => 7,
        FindingKind::SpuriousRetransmission => 8,
        FindingKind::Reordering => 9,
        FindingKind::SenderLimited => 10,
        FindingKind::ApplicationLimited => 11,
        FindingKind::FixedDurationStall => 12,
        FindingKind::CaptureQuality => 13,
        FindingKind::PathLimited => 14,
    }
}

/// Sorted, disjoint intervals.
type Set = Vec<(f64, f64)>;

/// The union of `v` clipped to `[from, to]`, sorted and disjoint (empty intervals dropped).
fn union(v: impl IntoIterator<Item = (f64, f64)>, from: f64, to: f64) -> Set {
    let mut v: Vec<(f64, f64)> = v
        .into_iter()
        .map(|(a, b)| (a.max(from), b.min(to)))
        .filter(|(a, b)| b > a)
        .collect();
    v.sort_by(|x, y| x.0.total_cmp(&y.0));
    let mut out: Set = Vec::with_capacity(v.len());
    for (a, b) in v {
        match out.last_mut() {
            Some(last) if a <= last.1 => last.1 = last.1.max(b),
            _ => out.push((a, b)),
        }
    }
    out
}

fn measure(s: &[(f64, f64)]) -> f64 {
    s.iter().map(|(a, b)| b - a).sum::<f64>() + 0.0
}

/// Seconds of `s` inside `t` (both sorted and disjoint).
fn overlap(s: &[(f64, f64)], t: &[(f64, f64)]) -> f64 {
    let (mut i, mut j, mut sum) = (0, 0, 0.0);
    while i < s.len() && j < t.len() {
        let (lo, hi) = (s[i].0.max(t[j].0), s[i].1.min(t[j].1));
        if hi > lo {
            sum += hi - lo;
        }
        if s[i].1 < t[j].1 {
            i += 1;
        } else {
            j += 1;
        }
    }
    sum
}

/// The pieces of `(a, b)` outside `claimed` longer than [`EPS_S`].
fn free_pieces(a: f64, b: f64, claimed: &[(f64, f64)]) -> Set {
    let mut out = Vec::new();
    let mut at = a;
    for &(c, d) in claimed {
        if d <= at {
            continue;
        }
        if c >= b {
            break;
        }
        if c.min(b) - at > EPS_S {
            out.push((at, c.min(b)));
        }
        at = at.max(d);
    }
    if b - at > EPS_S {
        out.push((at, b));
    }
    out
}

/// A duration that is a whole known timer ("a whole 5 s: a timer"), for the note a silence
/// with a known cause carries instead of a second finding.
pub fn timer_of(seconds: f64) -> Option<f64> {
    KNOWN_TIMERS_NS
        .iter()
        .map(|&t| t as f64 / 1e9)
        .find(|&t| (seconds - t).abs() <= t * KNOWN_TIMER_TOLERANCE)
}

/// "held 5.0 s, a whole 5 s: a timer" for the listed episodes at a known timer (at most 3).
fn timer_note(f: &Finding) -> Option<String> {
    let held: Vec<String> = f
        .episode_list
        .iter()
        .filter_map(|e| timer_of(e.duration_s).map(|t| (e.duration_s, t)))
        .take(3)
        .map(|(d, t)| format!("held {d:.1} s, a whole {t:.0} s: a timer"))
        .collect();
    (!held.is_empty()).then(|| held.join("; "))
}

/// Settles the findings of one connection whose life is `[from, to]` (seconds since the
/// capture's first frame): see the module's doc. `recost` gives a finding its new cost in
/// seconds (with the share and projection that go with it). Findings keep their order.
///
/// Two passes: the seconds of the episodes first (observed time), in cause order; then the
/// costs beyond the episodes (a window deficit, an equivalent at the path's rate), in the
/// same order, from what is left of the life.
pub fn settle(findings: &mut Vec<Finding>, from: f64, to: f64, recost: impl Fn(&mut Finding, f64)) {
    let life = (to - from).max(0.0);
    let n = findings.len();
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by_key(|&i| {
        let f = &findings[i];
        (!f.claims_first, claim_rank(f.kind))
    });
    let mut claimed: Set = Vec::new();
    // Per finding: its seconds after settling (to name who explained a folded one), its own
    // seconds before (for the note), its cost within and beyond its episodes, and whether
    // an earlier finding explained every one of its timed episodes.
    let mut kept: Vec<Set> = vec![Vec::new(); n];
    let mut held = vec![0.0; n];
    let mut within = vec![0.0; n];
    let mut beyond = vec![0.0; n];
    let mut explained = vec![false; n];
    let mut owns = vec![Vec::new(); n];
    for &i in &order {
        let f = &mut findings[i];
        let spans: Vec<(f64, f64)> = if f.spans.is_empty() {
            f.episode_list
                .iter()
                .map(|e| (e.start_s, e.start_s + e.duration_s))
                .collect()
        } else {
            std::mem::take(&mut f.spans)
        };
        let own = union(spans.iter().copied(), from, to);
        let m = measure(&own);
        held[i] = m;
        let ov = overlap(&own, &claimed);
        let c = f.cost.seconds.max(0.0);
        // Within its episodes a cost is spread evenly over them.
        (within[i], beyond[i]) = if c <= m {
            (if m > 0.0 { c * (1.0 - ov / m) } else { 0.0 }, 0.0)
        } else {
            (m - ov, c - m)
        };
        // What is left of each episode once the earlier findings' seconds are taken out.
        let mut free: Set = own.clone();
        if ov > EPS_S {
            free.clear();
            let mut covered = 0u32;
            let mut listed = Vec::new();
            let mut timed = 0usize;
            for &(a, b) in &spans {
                if b - a <= EPS_S {
                    if listed.len() < MAX_EPISODES_LISTED {
                        listed.push(Episode {
                            start_s: a,
                            duration_s: b - a,
                        });
                    }
                    continue;
                }
                timed += 1;
                let pieces = free_pieces(a.max(from), b.min(to), &claimed);
                let largest = pieces
                    .iter()
                    .copied()
                    .max_by(|x, y| (x.1 - x.0).total_cmp(&(y.1 - y.0)));
                if measure(&pieces) <= FOLD_LEFT_SHARE * (b - a) {
                    covered += 1;
                }
                if let Some((x, y)) = largest
                    && listed.len() < MAX_EPISODES_LISTED
                {
                    listed.push(Episode {
                        start_s: x,
                        duration_s: y - x,
                    });
                }
                free.extend(pieces);
            }
            free = union(free, from, to);
            f.episode_list = listed;
            if f.episodes as usize == spans.len() {
                // Episodes with nothing left are gone; those with a remainder stay.
                f.episodes = spans
                    .iter()
                    .filter(|&&(a, b)| {
                        b - a <= EPS_S || !free_pieces(a.max(from), b.min(to), &claimed).is_empty()
                    })
                    .count() as u32;
            }
            explained[i] = timed > 0 && covered as usize == timed;
        }
        if within[i] > EPS_S {
            claimed = union(
                claimed.iter().copied().chain(free.iter().copied()),
                from,
                to,
            );
            kept[i] = free;
        }
        owns[i] = own;
    }
    let mut left = life - within.iter().sum::<f64>();
    let mut folded: Vec<Option<usize>> = vec![None; n];
    for (pos, &i) in order.iter().enumerate() {
        let extra = beyond[i].min(left.max(0.0));
        left -= extra;
        let settled = within[i] + extra;
        let f = &mut findings[i];
        let c = f.cost.seconds;
        if settled < c - EPS_S {
            recost(f, settled);
            f.severity = f.severity.min(Severity::from_share(f.cost.share));
            // The explanation was written with the whole cost: say what the account kept.
            let _ = write!(
                f.explanation,
                " Of the {c:.3} s, {:.3} s is time another finding already accounts for: this \
                 one's cost is the {settled:.3} s left.",
                c - settled
            );
        }
        // Every timed episode explained by earlier findings, and (almost) nothing left of
        // the cost: their cause is this one's.
        if explained[i] && c > EPS_S && f.cost.seconds <= FOLD_LEFT_SHARE * c {
            let own = &owns[i];
            folded[i] = order[..pos]
                .iter()
                .copied()
                .max_by(|&x, &y| overlap(own, &kept[x]).total_cmp(&overlap(own, &kept[y])));
        }
    }
    // Fold the explained findings into their causes.
    for i in 0..n {
        if let Some(to) = folded[i] {
            let note = format!(
                " The same {:.3} s also looked like {}: counted here, once.",
                held[i],
                findings[i].kind.as_str()
            );
            if let Some(t) = findings.get_mut(to) {
                t.explanation.push_str(&note);
            }
        }
    }
    let mut i = 0;
    findings.retain(|_| {
        i += 1;
        folded[i - 1].is_none()
    });
    for f in findings.iter_mut() {
        f.spans = Vec::new();
        if f.kind != FindingKind::FixedDurationStall
            && !f.explanation.contains("a timer.")
            && let Some(note) = timer_note(f)
        {
            let _ = write!(f.explanation, " Silence {note}.");
        }
    }
}

/// Settles every connection's findings in `diag` again, after findings from above TCP
/// (storage) were added: a new finding's cost share is scaled with its seconds.
pub fn settle_diagnosis(diag: &mut Diagnosis) {
    let life: FxHashMap<u32, (f64, f64)> = diag
        .time_budget
        .connections
        .iter()
        .map(|c| (c.stream, (c.start_s, c.start_s + c.seconds)))
        .collect();
    let mut groups: BTreeMap<(u32, Option<String>), Vec<Finding>> = BTreeMap::new();
    let mut rest = Vec::new();
    for f in std::mem::take(&mut diag.findings) {
        match f.stream.filter(|s| life.contains_key(s)) {
            Some(s) => groups.entry((s, f.file.clone())).or_default().push(f),
            None => rest.push(f),
        }
    }
    for ((s, _), mut v) in groups {
        let (from, to) = life.get(&s).copied().unwrap_or_default();
        settle(&mut v, from, to, |f, secs| {
            let old = f.cost.seconds;
            f.cost.share = if old > 0.0 {
                f.cost.share * secs / old
            } else {
                0.0
            };
            f.cost.seconds = secs;
        });
        rest.extend(v);
    }
    diag.findings = rest;
    crate::sort_findings(&mut diag.findings);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn finding(kind: FindingKind, cost: f64, eps: &[(f64, f64)]) -> Finding {
        let mut f = Finding::new(kind, Some(0));
        for &(a, d) in eps {
            f.episode(a, d);
        }
        f.episodes = eps.len() as u32;
        f.cost.seconds = cost;
        f.cost.share = cost / 10.0;
        f.severity = Severity::from_share(f.cost.share);
        f
    }

    fn recost(f: &mut Finding, s: f64) {
        f.cost.seconds = s;
        f.cost.share = s / 10.0;
    }

    fn total(v: &[Finding]) -> f64 {
        v.iter().map(|f| f.cost.seconds).sum()
    }

    #[test]
    fn a_silence_explained_by_a_timeout_is_counted_once() {
        // A 1 s RTO that is also the connection's longest idle gap and an "equal stall".
        let mut v = vec![
            finding(FindingKind::FixedDurationStall, 1.0, &[(2.0, 1.0)]),
            finding(FindingKind::RtoStall, 1.0, &[(2.0, 1.0)]),
            finding(
                FindingKind::ApplicationLimited,
                3.0,
                &[(2.0, 1.0), (5.0, 2.0)],
            ),
        ];
        settle(&mut v, 0.0, 10.0, recost);
        let kinds: Vec<_> = v.iter().map(|f| f.kind).collect();
        assert_eq!(
            kinds,
            [FindingKind::RtoStall, FindingKind::ApplicationLimited]
        );
        assert!((v[0].cost.seconds - 1.0).abs() < 1e-9);
        assert!((v[1].cost.seconds - 2.0).abs() < 1e-9);
        assert_eq!(v[1].episodes, 1);
        assert_eq!(
            v[1].episode_list,
            [Episode {
                start_s: 5.0,
                duration_s: 2.0
            }]
        );
        assert!(v[0].explanation.contains("fixed-duration-stall"));
        assert!(v[0].explanation.contains("a whole 1 s: a timer"));
    }

    #[test]
    fn a_finding_mostly_explained_by_a_cause_is_folded_into_it() {
        // Idle time covering all but the edges of each equal silence: below the share left,
        // the silences are the idle time's; above it, they stay a finding of their own.
        for (left, folds) in [
            (FOLD_LEFT_SHARE * 0.9, true),
            (FOLD_LEFT_SHARE * 1.1, false),
        ] {
            let mut v = vec![finding(
                FindingKind::FixedDurationStall,
                3.0,
                &[(1.0, 1.0), (3.0, 1.0), (5.0, 1.0)],
            )];
            let idle: Vec<(f64, f64)> = [1.0, 3.0, 5.0]
                .iter()
                .map(|&a| (a + left, 1.0 - left))
                .collect();
            v.push(finding(
                FindingKind::ApplicationLimited,
                3.0 * (1.0 - left),
                &idle,
            ));
            settle(&mut v, 0.0, 10.0, recost);
            let kinds: Vec<_> = v.iter().map(|f| f.kind).collect();
            assert_eq!(
                kinds.contains(&FindingKind::FixedDurationStall),
                !folds,
                "{left}: {kinds:?}"
            );
            assert!(total(&v) <= 10.0);
        }
    }

    #[test]
    fn costs_never_add_up_to_more_than_the_life() {
        // Costs without episodes (window deficits) still fit in what is left.
        let mut v = vec![
            finding(FindingKind::NetworkLoss, 6.0, &[]),
            finding(FindingKind::CwndCollapse, 7.0, &[]),
            finding(FindingKind::ReceiverWindowLimited, 2.0, &[]),
        ];
        settle(&mut v, 0.0, 10.0, recost);
        // Claimed in cause order: the window (2 s), the collapse (7 s), then the loss.
        assert!((total(&v) - 10.0).abs() < 1e-9);
        assert!((v[2].cost.seconds - 2.0).abs() < 1e-9);
        assert!((v[1].cost.seconds - 7.0).abs() < 1e-9);
        assert!(
            (v[0].cost.seconds - 1.0).abs() < 1e-9,
            "{}",
            v[0].cost.seconds
        );
        assert_eq!(v[0].severity, Severity::Major);
    }

    #[test]
    fn observed_seconds_come_before_costs_beyond_the_episodes() {
        // A short recovery with a large window deficit after it, and 8 s of idle time: the
        // idle seconds are observed, the deficit only gets what is left.
        let mut v = vec![
            finding(FindingKind::NetworkLoss, 6.0, &[(1.0, 0.1)]),
            finding(FindingKind::ApplicationLimited, 8.0, &[(2.0, 8.0)]),
        ];
        settle(&mut v, 0.0, 10.0, recost);
        assert!((v[1].cost.seconds - 8.0).abs() < 1e-9);
        assert!(
            (v[0].cost.seconds - 2.0).abs() < 1e-9,
            "{}",
            v[0].cost.seconds
        );
    }

    #[test]
    fn a_partly_claimed_episode_keeps_its_free_part() {
        let mut v = vec![
            finding(FindingKind::RtoStall, 0.5, &[(1.0, 0.5)]),
            finding(FindingKind::ApplicationLimited, 1.0, &[(1.0, 1.0)]),
        ];
        settle(&mut v, 0.0, 10.0, recost);
        assert!((v[1].cost.seconds - 0.5).abs() < 1e-9);
        assert_eq!(v[1].episodes, 1);
        let e = v[1].episode_list[0];
        assert!((e.start_s - 1.5).abs() < 1e-9 && (e.duration_s - 0.5).abs() < 1e-9);
        // Its explanation, written with the whole second, says what the account kept.
        assert!(
            v[1].explanation.ends_with(
                "Of the 1.000 s, 0.500 s is time another finding already accounts for: this \
                 one's cost is the 0.500 s left."
            ),
            "{}",
            v[1].explanation
        );
        assert!(!v[0].explanation.contains("already accounts for"));
    }

    #[test]
    fn a_cost_beyond_the_episodes_loses_only_the_overlap() {
        // A recovery of 1 s (half of it lost) with 2 s of window deficit after it.
        let mut v = vec![
            finding(FindingKind::NetworkLoss, 2.5, &[(1.0, 1.0)]),
            finding(FindingKind::RtoStall, 0.4, &[(1.0, 0.4)]),
        ];
        settle(&mut v, 0.0, 10.0, recost);
        assert!((v[0].cost.seconds - 2.1).abs() < 1e-9);
        assert!((v[1].cost.seconds - 0.4).abs() < 1e-9);
    }

    #[test]
    fn timer_notes_within_the_tolerance() {
        let tol = KNOWN_TIMER_TOLERANCE;
        assert_eq!(timer_of(5.0 * (1.0 - tol * 0.99)), Some(5.0));
        assert_eq!(timer_of(5.0 * (1.0 + tol * 0.99)), Some(5.0));
        assert_eq!(timer_of(5.0 * (1.0 + tol * 1.01)), None);
        assert_eq!(timer_of(1.98), None);
    }

    #[test]
    fn intervals_are_merged_and_overlaps_measured() {
        let s = union([(3.0, 4.0), (0.0, 1.0), (0.5, 2.0)], 0.0, 3.5);
        assert_eq!(s, [(0.0, 2.0), (3.0, 3.5)]);
        assert!((overlap(&s, &[(1.0, 3.25)]) - 1.25).abs() < 1e-12);
        assert_eq!(
            free_pieces(-1.0, 4.0, &s),
            [(-1.0, 0.0), (2.0, 3.0), (3.5, 4.0)]
        );
        assert_eq!(free_pieces(0.5, 1.5, &s), []);
    }
}
