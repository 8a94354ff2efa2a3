//! `rto-stall`: data lost with too few segments behind it for duplicate ACKs (or a whole
//! window lost), repaired only when the retransmission timer fired after a silence.

use super::{ConnContext, ms};
use crate::finding::{Finding, FindingKind};

/// Finds the timeouts of the main sender.
pub fn detect(cx: &ConnContext<'_>) -> Vec<Finding> {
    let s = cx.sender();
    if s.rtos.is_empty() {
        return Vec::new();
    }
    let cost_ns: i64 = s.rtos.iter().map(|r| r.end - r.start).sum();
    let mut f = cx.finding(FindingKind::RtoStall, cost_ns as f64 / 1e9);
    f.episodes = s.rtos.len() as u32;
    let backoffs = s.rtos.iter().filter(|r| r.timeouts > 1).count();
    for r in &s.rtos {
        if r.last_ack_frame > 0 {
            f.evidence(r.last_ack_frame, "last ACK before the silence");
        }
        f.evidence(r.retx_frame, "timeout retransmission");
        f.episode(cx.rel_s(r.start), (r.end - r.start) as f64 / 1e9);
    }
    f.wireshark_filter = f.frames_filter();
    f.confidence = 0.85;
    let burst = s
        .episodes
        .iter()
        .filter(|e| e.timeout)
        .map(|e| e.retx)
        .max()
        .unwrap_or(0);
    let (sender, _) = cx.endpoints();
    let upstream = s.rtos.iter().filter(|r| r.upstream_loss).count();
    let upstream_note = if upstream > 0 {
        format!(
            " {upstream} of the timeouts were inferred from the outside: the capture never saw \
             the lost data (it was lost before the capture point), so the silence looked idle; \
             the sender then restarted from one segment and the hole it left in the sequence \
             proved that data had been sent and lost."
        )
    } else {
        String::new()
    };
    f.explanation = format!(
        "{n} time(s) the connection went silent until {sender}'s retransmission timer fired \
         ({total} in total, longest {longest}; {backoffs} with exponential backoff). A timeout \
         means the loss could not be repaired by duplicate ACKs: the lost data was at the tail \
         of what was sent, or everything in flight was lost at once (up to {burst} segments \
         were retransmitted in one timeout episode). After a timeout the sender restarts from \
         one segment (slow start).{upstream_note}",
        n = f.episodes,
        total = ms(cost_ns),
        longest = ms(s.rtos.iter().map(|r| r.end - r.start).max().unwrap_or(0)),
    );
    f.recommendations = vec![
        "Find what drops whole windows (link flaps, blackouts, policers, failovers) or the tail \
         losses; see the loss findings for where."
            .into(),
        format!(
            "On the sender ({sender}): keep tail-loss probes on (Linux RACK-TLP, \
             `net.ipv4.tcp_recovery=1`, default since 4.18) and SACK on \
             (`net.ipv4.tcp_sack=1`); where the RTT is small and stable, lower the minimum RTO \
             per route (`ip route change <dst> ... rto_min 20ms`)."
        )
        .into(),
    ];
    vec![f]
}
