//! The healthy finding: "limited by the path at X". Made only when no other finding on the
//! connection is above info.

use super::{ConnContext, rate};
use crate::budget::State;
use crate::finding::{Finding, FindingKind, Severity};

/// Bytes a direction must carry to say anything about its path (tcpdx choice: a few round
/// trips of slow start).
pub const MIN_BYTES: u64 = 64 * 1024;

/// The healthy finding for a connection that moved data.
pub fn detect(cx: &ConnContext<'_>) -> Vec<Finding> {
    let s = cx.sender();
    if s.data_bytes < MIN_BYTES || cx.path_bps <= 0.0 {
        return Vec::new();
    }
    let mut f = cx.finding(FindingKind::PathLimited, 0.0);
    f.severity = Severity::Info;
    f.episodes = 1;
    f.confidence = 0.6;
    f.cost.goodput_without_bps = None;
    f.wireshark_filter = format!("tcp.stream == {}", cx.stream());
    let sending = cx.budget_s(State::Sending) / cx.lifetime_s().max(1e-9);
    let (sender, receiver) = cx.endpoints();
    f.explanation = format!(
        "Healthy: {sender} -> {receiver} was limited by the path at about {path} (highest rate \
         delivered over a round trip), with a goodput of {good} over the connection's life and \
         {pct:.0}% of the time spent sending; round trip {rtt:.1} ms.",
        path = rate(cx.path_bps),
        good = rate(cx.goodput_bps()),
        pct = sending * 100.0,
        rtt = cx.rtt as f64 / 1e6,
    );
    vec![f]
}
