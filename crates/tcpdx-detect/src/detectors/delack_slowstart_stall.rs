//! `delack-slowstart-stall`: after loss recovery the sender has one segment in flight and
//! the receiver holds its ACK for the delayed-ACK timer (See: ../shared/cases/000_*.txt).
//!
//! Evidence per episode, in the case file's order: third duplicate ACK, fast retransmission
//! (or the timeout retransmission), the lone segment, the delayed ACK.

use super::{ConnContext, ms};
use crate::finding::{Finding, FindingKind};

/// Median hold times at or above these values name the receiver's likely stack (Linux
/// `TCP_DELACK_MIN` 40 ms; ESXi NFS client 100 ms, case 000; Windows 200 ms,
/// `TcpAckFrequency` docs).
const TIMER_GUESSES: [(i64, &str); 3] = [
    (
        180_000_000,
        "about 200 ms: a Windows receiver's delayed-ACK timer",
    ),
    (
        90_000_000,
        "about 100 ms: the ESXi NFS/iSCSI client's delayed-ACK timer",
    ),
    (
        0,
        "40 ms or so: a Linux receiver's delayed-ACK timer (TCP_DELACK_MIN)",
    ),
];

/// Finds the stalls of the main sender.
pub fn detect(cx: &ConnContext<'_>) -> Vec<Finding> {
    let s = cx.sender();
    // A wait the clock cannot time, or during which the receiver's frames are missing
    // from the capture, is not shown to be a delayed ACK.
    let facts = &cx.conn.facts;
    let delack: Vec<_> = (s.delack.iter())
        .filter(|d| facts.timer_wait_credible(cx.dir.rev(), d.start, d.end, d.hold))
        .collect();
    if delack.is_empty() {
        return Vec::new();
    }
    let cost_ns: i64 = delack.iter().map(|d| d.hold).sum();
    let mut f = cx.finding(FindingKind::DelackSlowstartStall, cost_ns as f64 / 1e9);
    f.episodes = delack.len() as u32;
    let mut holds: Vec<i64> = delack.iter().map(|d| d.hold).collect();
    holds.sort_unstable();
    let median = holds[holds.len() / 2];
    let fast = delack
        .iter()
        .filter(|d| d.fast_retx_frame.is_some())
        .count();
    for d in &delack {
        if let Some(x) = d.third_dupack_frame {
            f.evidence(x, "third duplicate ACK");
        }
        if let Some(x) = d.fast_retx_frame {
            f.evidence(x, "fast retransmission");
        } else if let Some(x) = d.rto_frame.filter(|&x| x != d.lone_frame) {
            f.evidence(x, "timeout retransmission");
        }
        f.evidence(d.lone_frame, "lone segment");
        f.evidence(d.ack_frame, "delayed ACK");
        f.episode(cx.rel_s(d.start), (d.end - d.start) as f64 / 1e9);
    }
    f.wireshark_filter = f.frames_filter();
    let timer = TIMER_GUESSES
        .iter()
        .find(|(min, _)| median >= *min)
        .map_or("", |(_, t)| t);
    let (sender, receiver) = cx.endpoints();
    f.confidence = if fast > 0 { 0.9 } else { 0.8 };
    f.explanation = format!(
        "{n} time(s) after a loss, {sender} restarted from a single segment and waited for its \
         ACK; {receiver} held that ACK for its delayed-ACK timer (median hold {hold} beyond the \
         round trip; {timer}). Nothing was sent meanwhile: each episode is a pause of one \
         timer. {fast} of the episodes followed a fast retransmission, the rest a \
         retransmission timeout. Total hold time {total}.",
        n = f.episodes,
        hold = ms(median),
        total = ms(cost_ns),
    );
    let workaround = format!(
        "Workaround on the receiver ({receiver}): stop delaying ACKs for this traffic. ESXi \
         NFS client: `esxcfg-advcfg -s 1 /SunRPC/SetNoDelayedAck` (VMware KB 59548; iSCSI: \
         disable DelayedAck on the adapter, KB 1002598). Linux: `ip route change <sender \
         subnet> dev <if> quickack 1` (or TCP_QUICKACK in the application). Windows: \
         registry `TcpAckFrequency`=1 (DWORD) under \
         HKLM\\SYSTEM\\CurrentControlSet\\Services\\Tcpip\\Parameters\\Interfaces\\<GUID>."
    );
    let fix = format!(
        "Real fix on the sender ({sender}): a stack that keeps half its window after a fast \
         retransmission (RFC 5681 fast recovery, RFC 6675 SACK recovery, PRR RFC 6937) \
         instead of restarting from one segment; ask the vendor for that fix."
    );
    f.recommendations = vec![
        workaround.into(),
        fix.into(),
        "Remove the loss that triggers each episode (see the network-loss finding).".into(),
    ];
    vec![f]
}
