//! `capture-quality`: the capture itself misleads. Data acknowledged but never captured
//! (capture drops), segments longer than the MSS (segmentation offload at the capture
//! host), one direction only.

use super::ConnContext;
use crate::finding::{Finding, FindingKind, Severity};

/// Finds capture artefacts on one connection.
pub fn detect(cx: &ConnContext<'_>) -> Vec<Finding> {
    let c = cx.conn;
    let mut problems = Vec::new();
    // A caveat about the evidence, not a cause: it cost no time, so it stays information
    // (severity from cost), whatever it says.
    let mut f = cx.finding(FindingKind::CaptureQuality, 0.0);
    f.severity = Severity::Info;
    let unseen: u64 = c.senders.iter().map(|s| s.ack_unseen_flags).sum();
    if unseen > 0 {
        problems.push(format!(
            "{unseen} ACK(s) acknowledge data the capture never saw (capture drops, or a \
             second path): losses in this capture may not be real"
        ));
    }
    for s in &c.senders {
        if s.oversize > 0 {
            problems.push(format!(
                "{} segment(s) longer than the MSS ({} bytes): the capture was taken on a host \
                 with segmentation offload (TSO/GSO/GRO), so packet counts and timings are the \
                 host's, not the wire's",
                s.oversize, s.mss
            ));
            if let Some(x) = s.oversize_frame {
                f.evidence(x, "segment longer than the MSS");
            }
        }
    }
    // The capture's own facts: info, their effect is already taken out of the inference.
    problems.extend(c.facts.notes(&c.endpoints));
    let data: u64 = c.senders.iter().map(|s| s.data_pkts).sum();
    if data > 0 && (c.segments[0] == 0 || c.segments[1] == 0) {
        problems.push(
            "only one direction of the connection was captured (asymmetric routing or a \
             one-way tap): ACK-based inference is impossible"
                .into(),
        );
    }
    if problems.is_empty() {
        return Vec::new();
    }
    f.episodes = problems.len() as u32;
    f.confidence = 0.8;
    f.wireshark_filter = format!(
        "tcp.stream == {} && (tcp.analysis.ack_lost_segment || tcp.analysis.lost_segment)",
        cx.stream()
    );
    f.explanation = format!("The capture may mislead: {}.", problems.join("; "));
    f.recommendations = vec![
        "Capture with a tap or a SPAN port without drops, on a host with offloads disabled \
         (`ethtool -K <if> tso off gso off gro off`), both directions, and check the capture \
         tool's drop counter (`tcpdump` prints 'dropped by kernel')."
            .into(),
    ];
    vec![f]
}
