//! `spurious-retransmission` and `reordering`: the sender retransmitted data that was not
//! lost (reordering or lost ACKs) and cut its window for nothing. See:
//! ../shared/cases/001_*.txt.
//!
//! Proof of a spurious retransmission: a D-SACK for it (RFC 2883) or Wireshark's
//! `spurious_retransmission` (data already acknowledged). Reordering without
//! retransmission shows as out-of-order arrivals or duplicate-ACK runs that resolve alone.

use super::{ConnContext, episode_cost_s};
use crate::finding::{Finding, FindingKind, Severity};

/// Finds spurious retransmissions, or reordering that cost nothing.
pub fn detect(cx: &ConnContext<'_>) -> Vec<Finding> {
    let s = cx.sender();
    if s.spurious_count == 0 {
        return reordering(cx);
    }
    // Cost: each episode's recovery and window deficit, in proportion of its
    // retransmissions that were spurious.
    let mut cost = 0.0;
    let mut episodes = 0;
    for (i, e) in s.episodes.iter().enumerate() {
        if e.spurious == 0 || e.retx == 0 {
            continue;
        }
        episodes += 1;
        cost += episode_cost_s(cx, i) * f64::from(e.spurious.min(e.retx)) / f64::from(e.retx);
    }
    let mut f = cx.finding(FindingKind::SpuriousRetransmission, cost);
    f.episodes = s.spurious_count;
    for x in &s.spurious {
        f.evidence(x.retx_frame, "spurious retransmission");
        if x.proof_frame != x.retx_frame {
            f.evidence(x.proof_frame, x.proof);
        }
        f.episode(cx.rel_s(x.ts), 0.0);
    }
    f.wireshark_filter = f.frames_filter();
    f.confidence = if s.dsacks > 0 { 0.9 } else { 0.7 };
    let (sender, receiver) = cx.endpoints();
    f.explanation = format!(
        "{n} retransmission(s) by {sender} were unnecessary: {receiver} had the data already \
         ({d} D-SACK block(s); ACKs that came sooner than a round trip after the \
         retransmission; data already acknowledged). The sender took reordered (or late) segments for \
         losses; {episodes} recovery episode(s) were triggered by reordering, and \
         each one cut the sender's window, which then grows back by about one segment per \
         round trip. The capture shows {ooo} out-of-order arrival(s) and {runs} duplicate-ACK \
         run(s) that resolved without a retransmission. Estimated cost {cost:.3} s.",
        n = s.spurious_count,
        d = s.dsacks,
        ooo = s.out_of_order,
        runs = s.dupack_runs_without_retx,
    );
    f.recommendations = vec![
        "Find the element that reorders packets between the two ends (per-packet load \
         balancing, ECMP or LAG hashing changes, a firewall or WAN optimiser with several \
         queues) and make it keep flows in order."
            .into(),
        format!(
            "On the sender ({sender}), let the stack undo reductions it proves spurious: Linux \
             `net.ipv4.tcp_dsack=1`, `net.ipv4.tcp_frto=2`, RACK `net.ipv4.tcp_recovery=1` \
             (adapts its reordering window); raise `net.ipv4.tcp_reordering` (e.g. 10) on paths \
             known to reorder."
        )
        .into(),
    ];
    vec![f]
}

/// Reordering without spurious retransmission: informational.
fn reordering(cx: &ConnContext<'_>) -> Vec<Finding> {
    let s = cx.sender();
    let n = s.out_of_order + u64::from(s.dupack_runs_without_retx);
    if n == 0 {
        return Vec::new();
    }
    let mut f = cx.finding(FindingKind::Reordering, 0.0);
    f.severity = Severity::Info;
    f.episodes = n as u32;
    f.confidence = 0.6;
    f.wireshark_filter = format!(
        "tcp.stream == {} && (tcp.analysis.out_of_order || tcp.analysis.duplicate_ack)",
        cx.stream()
    );
    f.explanation = format!(
        "Segments arrived out of order ({} out-of-order arrival(s), {} duplicate-ACK run(s) that \
         resolved alone) without causing a retransmission: harmless so far, but a reordering \
         path can make the sender retransmit spuriously and cut its window.",
        s.out_of_order, s.dupack_runs_without_retx
    );
    vec![f]
}
