//! `network-loss`: segments lost in the network, repaired by retransmission. Reports the
//! loss rate, how bursty it is, where it happened relative to the capture point and the
//! time spent recovering.

use super::{ConnContext, cwnd_collapse, episode_cost_s, real_loss_episodes, receiver_host_drops};
use crate::finding::{Finding, FindingKind};

/// Finds real losses of the main sender not attributed to the receiving host.
pub fn detect(cx: &ConnContext<'_>) -> Vec<Finding> {
    let s = cx.sender();
    if receiver_host_drops::applies(cx) {
        return Vec::new();
    }
    let eps: Vec<_> = real_loss_episodes(s).collect();
    if eps.is_empty() {
        return Vec::new();
    }
    let lost: u32 = eps.iter().map(|e| e.real_losses()).sum();
    let unseen: u32 = eps.iter().map(|e| e.retx_unseen).sum();
    // Bursts that collapsed the window are costed by cwnd-collapse (counted once).
    let collapsed: Vec<usize> = cwnd_collapse::collapses(cx)
        .iter()
        .map(|c| c.index)
        .collect();
    let cost: f64 = s
        .episodes
        .iter()
        .enumerate()
        .filter(|(i, e)| e.real_losses() > 0 && !collapsed.contains(i))
        .map(|(i, e)| episode_cost_s(cx, i) * f64::from(e.real_losses()) / f64::from(e.retx))
        .sum();
    let mut f = cx.finding(FindingKind::NetworkLoss, cost);
    f.episodes = eps.len() as u32;
    // The collapsed episodes' time is cwnd-collapse's: listed there, not here too.
    for (_, e) in s
        .episodes
        .iter()
        .enumerate()
        .filter(|(i, e)| e.real_losses() > 0 && !collapsed.contains(i))
    {
        if let Some(x) = e.third_dupack_frame {
            f.evidence(x, "third duplicate ACK");
        }
        if let Some(x) = e.first_retx_frame {
            f.evidence(x, "retransmission");
        }
        if e.end_frame > 0 {
            f.evidence(e.end_frame, "recovery complete");
        }
        f.episode(cx.rel_s(e.start), e.duration() as f64 / 1e9);
    }
    let rate = f64::from(lost) / s.data_pkts.max(1) as f64;
    let burst = f64::from(lost) / eps.len() as f64;
    let place = if unseen * 2 > lost {
        // Capture drops are delivered and acknowledged without a retransmission; these
        // segments had to be sent again, so they were really lost, before the capture.
        if cx.capture_near_receiver() {
            "upstream of the capture point, between the sender and the capture next to the \
             receiver: the capture never saw the originals, and the sender had to retransmit \
             them (segments only the capture missed would have been acknowledged without a \
             retransmission), so they were lost in the network, not by the capture"
        } else {
            "upstream of the capture point (between the sender and the capture): the capture \
             never saw the originals, and the sender had to retransmit them, so they were lost \
             in the network, not by the capture"
        }
    } else if cx.capture_near_sender() {
        "after the capture point, between the capture (next to the sender) and the receiver"
    } else if cx.capture_near_receiver() {
        "after the capture point, next to the receiver"
    } else {
        "after the capture point (the capture saw the originals)"
    };
    let elsewhere = if collapsed.is_empty() {
        String::new()
    } else {
        format!(
            " (not counting the {} burst(s) that collapsed the sender's window: their cost is \
             in the cwnd-collapse finding)",
            collapsed.len()
        )
    };
    let caveat = if s.ack_unseen_flags > 0 {
        " The receiver also acknowledged data the capture never saw: the capture dropped \
         frames too (see capture-quality), so some holes in it are not network loss."
    } else {
        ""
    };
    let fast = eps
        .iter()
        .filter(|e| e.kind == crate::infer::RecoveryKind::Fast)
        .count();
    let (sender, receiver) = cx.endpoints();
    f.wireshark_filter = format!(
        "tcp.stream == {} && (tcp.analysis.retransmission || tcp.analysis.fast_retransmission || \
         tcp.analysis.duplicate_ack_num == 3)",
        cx.stream()
    );
    f.confidence = 0.8;
    f.explanation = format!(
        "{lost} segment(s) from {sender} to {receiver} were lost ({pct:.3}% of {pkts} data \
         segments) in {n} episode(s), {burst:.1} per episode on average; {fast} episode(s) \
         were repaired by fast retransmission. The loss happened {place}. Recovery and the \
         smaller window afterwards cost about {cost:.3} s of the connection's {life:.3} s\
         {elsewhere}.{caveat}",
        pct = rate * 100.0,
        pkts = s.data_pkts,
        n = eps.len(),
        life = cx.lifetime_s(),
    );
    f.recommendations = vec![
        "Check error and drop counters on every hop of the path in that direction (interface \
         CRC errors, `tc -s qdisc` drops, switch buffer/tail drops, policers)."
            .into(),
        if burst >= 3.0 {
            "Losses come in bursts: look for a buffer overflowing at a speed mismatch; shape or \
             pace the sender (`tc qdisc replace dev <if> root fq maxrate <path rate>`) or use a \
             switch with deeper buffers / ECN."
                .into()
        } else {
            "Isolated losses: look for a faulty link, optics or a congested shared segment.".into()
        },
        "Keep SACK enabled on both ends so one loss costs one retransmission.".into(),
    ];
    vec![f]
}
