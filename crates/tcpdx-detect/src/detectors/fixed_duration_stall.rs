//! `fixed-duration-stall`: stalls that repeat at one duration, or one long stall at a
//! well-known timer value: a timer somewhere. See: ../shared/cases/003_*.txt (5 s).
//!
//! Candidates are every silent gap, zero-window period and timeout stall of the connection.

use std::fmt::Write as _;

use tcpdx_core::Dir;

use super::ConnContext;
use crate::finding::{Finding, FindingKind};

/// Shortest stall considered (tcpdx choice: the shortest delayed-ACK timer, 40 ms, minus
/// jitter).
pub const FIXED_MIN_NS: i64 = 30_000_000;
/// Stalls within this relative distance have "the same" duration (tcpdx choice: timers
/// fire within a few percent; ACK and scheduling jitter stay below that).
pub const SAME_DURATION_TOLERANCE: f64 = 0.05;
/// Repetitions needed for a cluster of equal stalls (tcpdx choice).
pub const MIN_REPEATS: usize = 3;
/// Well-known timers a single long stall is compared with (DESIGN.md: 5 s, 1 s; NFS/SMB
/// client and server timeouts), and the tolerance for that match (tighter, tcpdx choice).
pub const KNOWN_TIMERS_NS: [i64; 4] = [1_000_000_000, 3_000_000_000, 5_000_000_000, 10_000_000_000];
/// Tolerance for a single stall to match a known timer.
pub const KNOWN_TIMER_TOLERANCE: f64 = 0.03;

/// A stall candidate: (start, end, frame ending it, what it was).
type Stall = (i64, i64, u64, &'static str);

fn candidates(cx: &ConnContext<'_>) -> Vec<Stall> {
    let c = cx.conn;
    // Silences explained by a finding of their own (delayed-ACK stalls, timeouts, a SYN
    // waiting for its retransmission) are that finding's, not an unknown timer's.
    // Nor are the client's own pauses with nothing in flight (a user, a keep-alive or poll
    // interval): the client chose not to send; a timer that stalls a transfer holds data in
    // flight, or a request waiting for its answer.
    // The length test first: it is the cheapest and drops most gaps (no vector is then
    // allocated for a connection without a long one).
    let mut long = c
        .gaps
        .iter()
        .filter(|g| g.end - g.start >= FIXED_MIN_NS)
        .peekable();
    // Sized for every gap at once: collected from a filter, the list grew from four, one
    // reallocation at a time (2% of `diagnose` on many connections with regular silences).
    let mut v: Vec<Stall> = if long.peek().is_some() {
        Vec::with_capacity(c.gaps.len())
    } else {
        Vec::new()
    };
    v.extend(
        long.filter(|g| !g.setup && !cx.pauses.explain(g.start, g.end))
            .filter(|g| g.in_flight || g.next_dir != Dir::ClientToServer)
            .map(|g| (g.start, g.end, g.frame_after, "silence")),
    );
    for s in &c.senders {
        v.extend(
            s.zero_windows
                .iter()
                .filter(|z| z.end - z.start >= FIXED_MIN_NS)
                .map(|z| (z.start, z.end, z.end_frame, "zero window")),
        );
    }
    v
}

/// Finds stalls clustered at one duration.
pub fn detect(cx: &ConnContext<'_>) -> Vec<Finding> {
    let mut v = candidates(cx);
    if v.is_empty() {
        return Vec::new();
    }
    v.sort_by_key(|x| x.1 - x.0);
    // Largest group of stalls within the tolerance of one another.
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
    let longest = v[v.len() - 1];
    let timer = KNOWN_TIMERS_NS
        .iter()
        .copied()
        .find(|&t| ((longest.1 - longest.0 - t) as f64).abs() <= t as f64 * KNOWN_TIMER_TOLERANCE);
    let mut group: Vec<Stall> = if best.len() >= MIN_REPEATS {
        best.to_vec()
    } else if timer.is_some() {
        vec![longest]
    } else {
        return Vec::new();
    };
    let total: i64 = group.iter().map(|x| x.1 - x.0).sum();
    let median = group[group.len() / 2].1 - group[group.len() / 2].0;
    // The kinds in name order, each once (the only two candidates give).
    let silence = group.iter().any(|x| x.3 == "silence");
    let zero_window = group.iter().any(|x| x.3 == "zero window");
    let what = match (silence, zero_window) {
        (true, true) => "silence, zero window",
        (false, true) => "zero window",
        _ => "silence",
    };
    let mut f = cx.finding(FindingKind::FixedDurationStall, total as f64 / 1e9);
    f.episodes = group.len() as u32;
    f.reserve(group.len());
    group.sort_by_key(|x| x.0);
    for x in &group {
        f.evidence(x.2, x.3);
        f.episode(cx.rel_s(x.0), (x.1 - x.0) as f64 / 1e9);
    }
    f.wireshark_filter = format!(
        "tcp.stream == {} && tcp.time_delta >= {:.3}",
        cx.stream(),
        median as f64 / 1e9 * (1.0 - SAME_DURATION_TOLERANCE)
    );
    f.confidence = if group.len() >= MIN_REPEATS { 0.7 } else { 0.5 };
    // Written into a string of the text's size: this finding can come for every connection
    // of a capture (grown from empty, it reallocated several times each).
    let mut explanation = String::with_capacity(400);
    let _ = write!(
        explanation,
        "{n} stall(s) of the same length, about {len:.1} ms each ({what}), {total:.1} ms in \
         total. Equal stalls come from a timer, not from congestion: a delayed-ACK or \
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
