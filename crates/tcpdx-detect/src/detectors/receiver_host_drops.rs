//! `receiver-host-drops`: frames lost inside the receiving host, after the capture point
//! (ring exhaustion, CPU starvation). See: ../shared/cases/002_*.txt.
//!
//! Signature: the capture is next to the receiver, it saw the original segments, and the
//! receiver still reported them missing (duplicate ACKs / SACK) and got them retransmitted.

use super::{ConnContext, episode_cost_s, real_loss_episodes};
use crate::finding::{Finding, FindingKind};

/// True when the main sender's real losses happened after a capture point next to the
/// receiver, whose originals the capture saw.
pub fn applies(cx: &ConnContext<'_>) -> bool {
    let s = cx.sender();
    let (lost, unseen) =
        real_loss_episodes(s).fold((0, 0), |(l, u), e| (l + e.real_losses(), u + e.retx_unseen));
    lost > 0 && unseen * 2 <= lost && cx.capture_near_receiver()
}

/// Finds losses inside the receiving host.
pub fn detect(cx: &ConnContext<'_>) -> Vec<Finding> {
    if !applies(cx) {
        return Vec::new();
    }
    let s = cx.sender();
    let eps: Vec<_> = real_loss_episodes(s).collect();
    let lost: u32 = eps.iter().map(|e| e.real_losses()).sum();
    let cost: f64 = s
        .episodes
        .iter()
        .enumerate()
        .filter(|(_, e)| e.real_losses() > 0)
        .map(|(i, e)| episode_cost_s(cx, i) * f64::from(e.real_losses()) / f64::from(e.retx))
        .sum();
    let mut f = cx.finding(FindingKind::ReceiverHostDrops, cost);
    f.episodes = lost;
    for e in &eps {
        if let Some(x) = e.third_dupack_frame {
            f.evidence(x, "receiver reports the segment missing");
        }
        if let Some(x) = e.first_retx_frame {
            f.evidence(x, "retransmission of a segment the capture saw delivered");
        }
        f.episode(cx.rel_s(e.start), e.duration() as f64 / 1e9);
    }
    f.wireshark_filter = format!(
        "tcp.stream == {} && (tcp.analysis.retransmission || tcp.analysis.duplicate_ack)",
        cx.stream()
    );
    f.confidence = 0.7;
    let (_, receiver) = cx.endpoints();
    f.explanation = format!(
        "The capture was taken next to {receiver} (the handshake's round trip is almost all on \
         the sender's side) and saw every one of the {lost} segment(s) that {receiver} then \
         reported missing: they were dropped after the capture point, inside the receiving \
         host (NIC ring, driver backlog, firewall, CPU starvation), not in the network. \
         Recovery and the smaller window afterwards cost about {cost:.3} s."
    );
    f.recommendations = vec![
        format!(
            "On {receiver}: look at the NIC's drop counters (`ethtool -S <if> | grep -iE \
             'drop|miss|no_buf|ring'`, `/proc/net/softnet_stat`, `nstat -az | grep -i drop`) and \
             enlarge the receive ring (`ethtool -G <if> rx 4096`; VMXNET3 in Windows guests: \
             'Rx Ring #1 Size' 4096 and 'Small Rx Buffers' 8192)."
        )
        .into(),
        "If the receiver is a VM: check CPU ready time (esxtop %RDY; more than 5% per vCPU \
         starves the guest's receive path) and co-stop; give it CPU reservation or fewer vCPUs \
         contending."
            .into(),
        "Spread receive processing over cores (RSS/RPS) and raise \
         `net.core.netdev_max_backlog` if softnet drops grow."
            .into(),
    ];
    vec![f]
}
