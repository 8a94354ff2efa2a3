//! `nagle-delack-stall`: the small last segment of a write is held by Nagle's algorithm
//! (RFC 896) until the data before it is acknowledged, and the receiver holds that ACK for
//! its delayed-ACK timer because it has only one segment (RFC 1122 section 4.2.3.2). Each
//! request/response turn then waits about one timer (40 ms Linux, 200 ms Windows).
//!
//! Signature (`infer::sender::NaglePause`): a lone segment, a pure ACK that comes at least
//! the round trip + 20 ms later and covers everything sent, and at once a sub-MSS segment at
//! exactly the acknowledged edge.

use super::{ConnContext, ms};
use crate::finding::{Finding, FindingKind};
use crate::infer::NaglePause;
use tcpdx_core::Dir;

/// Finds the Nagle / delayed-ACK stalls of either side: the held writes are often the
/// requests of a request/response application, whose main data flows the other way.
pub fn detect(cx: &ConnContext<'_>) -> Vec<Finding> {
    // As for delack-slowstart-stall: only waits the clock times with the receiver's frames
    // all captured.
    let facts = &cx.conn.facts;
    let credible = |dir: Dir| -> Vec<NaglePause> {
        (cx.conn.senders[dir.idx()].nagle.iter())
            .filter(|n| facts.timer_wait_credible(dir.rev(), n.start, n.end, n.hold))
            .collect()
    };
    let (main, rev) = (credible(cx.dir), credible(cx.dir.rev()));
    let held = |v: &[NaglePause]| v.iter().map(|n| n.hold).sum::<i64>();
    // Named after the side whose writes waited longest; the cost is both sides'.
    let dir = if held(&rev) > held(&main) {
        cx.dir.rev()
    } else {
        cx.dir
    };
    let mut nagle = main;
    nagle.extend(rev);
    if nagle.is_empty() {
        return Vec::new();
    }
    nagle.sort_unstable_by_key(|n| n.start);
    let cost_ns: i64 = nagle.iter().map(|n| n.hold).sum();
    let mut f = cx.finding(FindingKind::NagleDelackStall, cost_ns as f64 / 1e9);
    f.episodes = nagle.len() as u32;
    let mut holds: Vec<i64> = nagle.iter().map(|n| n.hold).collect();
    holds.sort_unstable();
    let median = holds[holds.len() / 2];
    for n in &nagle {
        f.evidence(n.lone_frame, "segment whose ACK was delayed");
        f.evidence(n.ack_frame, "delayed ACK");
        f.evidence(n.tail_frame, "small segment held by Nagle");
        f.episode(cx.rel_s(n.start), (n.end - n.start) as f64 / 1e9);
    }
    f.wireshark_filter = f.frames_filter();
    f.confidence = 0.8;
    let (sender, receiver) = cx.endpoints_of(dir);
    f.explanation = format!(
        "{n} time(s) {sender} sent one segment, then held the small rest of the same message: \
         Nagle's algorithm sends a segment shorter than the MSS only when nothing is \
         unacknowledged. {receiver} had a single segment and could not answer the incomplete \
         message, so it held the ACK for its delayed-ACK timer (median hold {hold} beyond the \
         round trip). Only that ACK released the small segment. Each such turn waits one timer; \
         {total} in total.",
        n = f.episodes,
        hold = ms(median),
        total = ms(cost_ns),
    );
    f.recommendations = vec![
        format!(
            "On the sender ({sender}): set TCP_NODELAY on the socket (`setsockopt(fd, \
             IPPROTO_TCP, TCP_NODELAY, 1)`; most RPC/storage clients have an option for it), or \
             write each message in one call (`writev`, or TCP_CORK around the writes and \
             uncork at the end)."
        )
        .into(),
        format!(
            "Or on the receiver ({receiver}): stop delaying ACKs for this traffic (Linux `ip \
             route change <sender subnet> dev <if> quickack 1` or TCP_QUICKACK; Windows \
             `TcpAckFrequency`=1 under \
             HKLM\\SYSTEM\\CurrentControlSet\\Services\\Tcpip\\Parameters\\Interfaces\\<GUID>; \
             ESXi NFS client `/SunRPC/SetNoDelayedAck`=1). This removes the timer but Nagle still \
             costs one round trip per message."
        )
        .into(),
    ];
    vec![f]
}
