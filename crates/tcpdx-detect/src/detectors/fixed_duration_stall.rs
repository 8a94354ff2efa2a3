//! `fixed-duration-stall`: silences that repeat at one duration with no other cause: a
//! timer somewhere. See: ../shared/cases/003_*.txt (5 s).
//!
//! Candidates are the silent gaps no other finding explains: not a SYN waiting for its
//! retransmission, a timeout, a delayed ACK or Nagle (timer pauses), not a turn of a
//! request/response conversation or a client's own pause (idle time, application-limited),
//! not a wait for ACKs with data in flight lasting a few round trips (the ACK clock, seen
//! from either end), not a zero window (receiver-window-limited), not a side's held ACK
//! that leaves with its next request (its turn) or that its data's sender did not wait
//! for (nothing new sent after it: an application's pause), not a client's next request
//! carrying its ACK of the server's data (its turn), not a receiver's delayed ACK of a
//! segment sent alone. Silences mostly counted as idle time are folded
//! into that finding ([`crate::account`]). A single silence, however long, is never one: one
//! occurrence cannot show a repeating timer; its cause's finding carries its duration.

use std::fmt::Write as _;

use tcpdx_core::Dir;

use super::ConnContext;
use crate::finding::{Finding, FindingKind};
use crate::infer::Gap;

/// Shortest stall considered (tcpdx choice: the shortest delayed-ACK timer, 40 ms, minus
/// jitter).
pub const FIXED_MIN_NS: i64 = 30_000_000;
/// Stalls within this relative distance have "the same" duration (tcpdx choice: timers
/// fire within a few percent; ACK and scheduling jitter stay below that).
pub const SAME_DURATION_TOLERANCE: f64 = 0.05;
/// Repetitions needed for a cluster of equal stalls (tcpdx choice).
pub const MIN_REPEATS: usize = 3;
/// Well-known timers (DESIGN.md: 5 s, 1 s; NFS/SMB client and server timeouts): a silence
/// of about one of these is noted as a timer on its cause's finding.
pub const KNOWN_TIMERS_NS: [i64; 4] = [1_000_000_000, 3_000_000_000, 5_000_000_000, 10_000_000_000];
/// Tolerance for a duration to match a known timer.
pub const KNOWN_TIMER_TOLERANCE: f64 = 0.03;
/// A silence with data in flight ended by an ACK within this many round trips is the ACK
/// clock (the sender waiting with its window full), not a stall (tcpdx choice: a receiver
/// acknowledging on a coarse timer grid, or a slow link's serialisation, stays within a
/// few round trips; a timer that stalls a transfer holds it many).
pub const ACK_CLOCK_RTTS: i64 = crate::infer::idle::ACK_CLOCK_TURNS;
/// The cluster's median must be at least this many times the median of the connection's
/// other silences: equal stalls stand out from the connection's own variation (tcpdx
/// choice: a connection whose silences are all alike shows its rhythm, not a timer).
pub const STANDOUT: f64 = 2.0;
/// A silence with one side's data in flight, ended by the other side's pure ACK that this
/// side's own new data follows within this, is that side's turn: it held its ACK and sent
/// it with its next request (tcpdx choice: the two leave the host together, microseconds
/// apart; a slow link's serialisation of a small request stays below 1 ms).
pub const ANSWER_WITH_ACK_NS: i64 = 1_000_000;
/// A held ACK stalls its data's sender only if that sender sends new data within this
/// many round trips of it (tcpdx choice: from any vantage the sender's answer to an ACK
/// shows within one round trip; later, it had nothing waiting on the ACK).
pub const WAITED_RTTS: i64 = 2;

/// Longest wait a receiver's delayed-ACK timer explains (tcpdx choice: the longest
/// common timers, 200 ms, plus scheduling jitter).
pub const DELACK_MAX_NS: i64 = 250_000_000;

/// A stall candidate: (start, end, frame ending it).
type Stall = (i64, i64, u64);

/// True if `g` is a silence no other cause explains (see the module's doc).
pub fn unexplained(cx: &ConnContext<'_>, g: &Gap) -> bool {
    if g.setup || cx.pauses.explain(g.start, g.end) {
        return false;
    }
    // A client's own pause with nothing in flight: the client chose not to send.
    if !g.in_flight && g.next_dir == Dir::ClientToServer {
        return false;
    }
    // A turn of a conversation (one side's data, then the other side's answer, a server
    // holding its reply): idle time, whose finding notes equal holds (application-limited).
    if !g.in_flight && g.next_has_data && g.last_data_dir.is_some_and(|d| d != g.next_dir) {
        return false;
    }
    // The client's turn: the server's data in flight, acknowledged by the client's next
    // request (its ACK rides with it): the client's think time, not a timer's.
    if g.in_flight
        && g.next_has_data
        && g.next_dir == Dir::ClientToServer
        && g.last_data_dir == Some(Dir::ServerToClient)
    {
        return false;
    }
    // The ACK clock: data in flight, an ACK within a few round trips; or, seen from the
    // receiver, the sender's own data resuming once the ACKs it waited for reached it.
    let acks_or_resumes = !g.next_has_data || g.last_data_dir == Some(g.next_dir);
    if g.in_flight && acks_or_resumes && cx.rtt > 0 && g.duration() <= ACK_CLOCK_RTTS * cx.rtt {
        return false;
    }
    // A zero window is the receiver's (receiver-window-limited).
    !cx.sender()
        .zero_windows
        .iter()
        .any(|z| z.start <= g.end && g.start <= z.end)
}

/// True if `g` is a receiver's delayed ACK of a lone segment: data in flight, the last
/// of it sent alone after a silence of its own (`lone`: nothing for the receiver's ACK to
/// pair it with), acknowledged by the other side's pure ACK within [`DELACK_MAX_NS`].
pub fn lone_delayed_ack(g: &Gap, lone: bool) -> bool {
    lone && g.in_flight
        && !g.next_has_data
        && g.last_data_dir.is_some_and(|d| d != g.next_dir)
        && g.duration() <= DELACK_MAX_NS
}

/// The side whose held ACK may end `g` as a turn: one side's data in flight, ended by
/// the other side's pure ACK.
fn acking_side(g: &Gap) -> Option<Dir> {
    (g.in_flight && !g.next_has_data && g.last_data_dir.is_some_and(|d| d != g.next_dir))
        .then_some(g.next_dir)
}

/// Drops from `v` (in time order, with the side of [`acking_side`]) the silences ended by
/// a held ACK that nobody waited for or that went with an answer: that side's new data
/// follows within [`ANSWER_WITH_ACK_NS`] (its turn), or the other side, whose data it
/// acknowledged, sends nothing new within [`WAITED_RTTS`] round trips (its application
/// had nothing more to send: the wait cost nothing). One pass over each side's rounds (a
/// round starts at new data after all was acknowledged).
fn drop_unwaited_acks(cx: &ConnContext<'_>, v: &mut Vec<(Stall, Option<Dir>)>) {
    for dir in [Dir::ClientToServer, Dir::ServerToClient] {
        if !v.iter().any(|x| x.1 == Some(dir)) {
            continue;
        }
        let mut own = cx.conn.senders[dir.idx()].rounds.iter().peekable();
        let mut other = cx.conn.senders[dir.rev().idx()].rounds.iter().peekable();
        v.retain(|&(s, side)| {
            if side != Some(dir) {
                return true;
            }
            while own.peek().is_some_and(|r| r.start < s.1) {
                own.next();
            }
            while other.peek().is_some_and(|r| r.start < s.1) {
                other.next();
            }
            let answered = own
                .peek()
                .is_some_and(|r| r.start <= s.1 + ANSWER_WITH_ACK_NS);
            let waited = cx.rtt <= 0
                || other
                    .peek()
                    .is_some_and(|r| r.start <= s.1 + WAITED_RTTS * cx.rtt);
            !answered && waited
        });
    }
}

/// The largest group of durations within [`SAME_DURATION_TOLERANCE`] of one another in
/// `v` (sorted by duration).
fn largest_cluster(v: &[Stall]) -> &[Stall] {
    let mut best: &[Stall] = &[];
    let mut j = 0;
    for i in 0..v.len() {
        let lo = (v[i].1 - v[i].0) as f64;
        j = j.max(i);
        while j + 1 < v.len()
            && ((v[j + 1].1 - v[j + 1].0) as f64) <= lo * (1.0 + SAME_DURATION_TOLERANCE)
        {
            j += 1;
        }
        if j + 1 - i > best.len() {
            best = &v[i..=j];
        }
    }
    best
}

/// The largest group of at least [`MIN_REPEATS`] durations within
/// [`SAME_DURATION_TOLERANCE`] of one another: (how many, their median), for the note a
/// cause's finding gives its equal silences (server holds of one length: a timer there).
pub fn equal_durations(mut d: Vec<i64>) -> Option<(usize, i64)> {
    d.sort_unstable();
    let v: Vec<Stall> = d.iter().map(|&x| (0, x, 0)).collect();
    let best = largest_cluster(&v);
    (best.len() >= MIN_REPEATS).then(|| (best.len(), best[best.len() / 2].1))
}

/// True if a cluster with median `median` stands out of the connection's other silences
/// (`others`, ns): [`STANDOUT`] times their median or more (or there are none).
pub fn stands_out(median: i64, others: &mut [i64]) -> bool {
    if others.is_empty() {
        return true;
    }
    others.sort_unstable();
    median as f64 >= STANDOUT * others[others.len() / 2] as f64
}

/// Finds unexplained silences clustered at one duration.
pub fn detect(cx: &ConnContext<'_>) -> Vec<Finding> {
    let c = cx.conn;
    // The length test first: it is the cheapest and drops most gaps (no vector is then
    // allocated for a connection without a long one).
    let mut long = c
        .gaps
        .iter()
        .filter(|g| g.end - g.start >= FIXED_MIN_NS)
        .peekable();
    if long.peek().is_none() {
        return Vec::new();
    }
    drop(long);
    let mut sided: Vec<(Stall, Option<Dir>)> = Vec::new();
    let mut prev: Option<Gap> = None;
    for g in c.gaps.iter() {
        let lone = prev.is_some_and(|p| {
            p.end == g.start && p.next_has_data && g.last_data_dir == Some(p.next_dir)
        });
        prev = Some(g);
        if g.duration() >= FIXED_MIN_NS && unexplained(cx, &g) && !lone_delayed_ack(&g, lone) {
            sided.push(((g.start, g.end, g.frame_after), acking_side(&g)));
        }
    }
    if sided.len() < MIN_REPEATS {
        return Vec::new();
    }
    drop_unwaited_acks(cx, &mut sided);
    let mut v: Vec<Stall> = sided.into_iter().map(|x| x.0).collect();
    if v.len() < MIN_REPEATS {
        return Vec::new();
    }
    v.sort_by_key(|x| x.1 - x.0);
    let best = largest_cluster(&v);
    if best.len() < MIN_REPEATS {
        return Vec::new();
    }
    let mut group: Vec<Stall> = best.to_vec();
    let median = group[group.len() / 2].1 - group[group.len() / 2].0;
    let mut others: Vec<i64> = c
        .gaps
        .iter()
        .filter(|g| !group.iter().any(|x| x.0 == g.start && x.1 == g.end))
        .map(|g| g.duration())
        .collect();
    if !stands_out(median, &mut others) {
        return Vec::new();
    }
    let total: i64 = group.iter().map(|x| x.1 - x.0).sum();
    let mut f = cx.finding(FindingKind::FixedDurationStall, total as f64 / 1e9);
    f.episodes = group.len() as u32;
    f.reserve(group.len());
    group.sort_by_key(|x| x.0);
    for x in &group {
        f.evidence(x.2, "silence");
        f.episode(cx.rel_s(x.0), (x.1 - x.0) as f64 / 1e9);
    }
    f.wireshark_filter = format!(
        "tcp.stream == {} && tcp.time_delta >= {:.3}",
        cx.stream(),
        median as f64 / 1e9 * (1.0 - SAME_DURATION_TOLERANCE)
    );
    f.confidence = 0.7;
    // Written into a string of the text's size: this finding can come for every connection
    // of a capture (grown from empty, it reallocated several times each).
    let mut explanation = String::with_capacity(400);
    let _ = write!(
        explanation,
        "{n} silences of the same length, about {len:.1} ms each, {total:.1} ms in total, \
         that no other cause explains (no timeout, delayed ACK, zero window or turn of the \
         conversation). Equal stalls come from a timer, not from congestion: a delayed-ACK or \
         retransmission timer, an application or storage timeout, a periodic flush or lock.",
        n = group.len(),
        len = median as f64 / 1e6,
        total = total as f64 / 1e6,
    );
    f.explanation = explanation;
    f.recommendations = vec![
        "Match the duration to a timer of the stack or the application (40/100/200 ms delayed \
         ACK, 200 ms+ minimum RTO, 1 s/5 s storage or RPC timeouts) and look at what the \
         endpoint was doing at those moments (server logs, fsync/commit latency)."
            .into(),
        "Check the window and retransmission state around each stall in the evidence frames: a \
         zero window points at the receiver's application, a silence with data in flight at \
         the network or a timer."
            .into(),
    ];
    vec![f]
}
