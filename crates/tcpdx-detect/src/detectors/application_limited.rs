//! `application-limited` (TCP level): the connection sat idle with nothing in flight: the
//! client did not send the next request, or the server was slow to answer.

use tcpdx_core::Dir;

use super::{ConnContext, ms};
use crate::budget::State;
use crate::finding::{Finding, FindingKind, Severity};

/// Share of the lifetime idle before the finding is reported (tcpdx choice: below it,
/// idle time is within normal request/response turn-taking).
pub const IDLE_MIN_SHARE: f64 = 0.1;

/// Finds idle time.
pub fn detect(cx: &ConnContext<'_>) -> Vec<Finding> {
    let think = cx.budget_s(State::ServerThinkTime);
    let idle = cx.budget_s(State::ApplicationIdle);
    let life = cx.lifetime_s();
    if life <= 0.0 || (think + idle) / life < IDLE_MIN_SHARE {
        return Vec::new();
    }
    let gaps: Vec<_> = cx
        .conn
        .gaps
        .iter()
        .filter(|g| g.idle_ns(cx.rtt) > 0 && !cx.pauses.explain(g.start, g.end))
        .collect();
    let mut f = cx.finding(FindingKind::ApplicationLimited, think + idle);
    // Idle time is the workload's shape, not a fault of the transfer machinery: on a
    // connection that moved little data (chatter, keep-alive sessions, interactive use) it
    // is information only. The storage layer reports an application that keeps too few
    // requests outstanding on its own.
    if cx.sender().data_bytes < super::handshake_and_setup::BULK_BYTES {
        f.severity = Severity::Info;
    }
    f.episodes = gaps.len() as u32;
    let longest = gaps.iter().map(|g| g.idle_ns(cx.rtt)).max().unwrap_or(0);
    for g in &gaps {
        f.evidence(g.frame_after, "first segment after the idle period");
        f.episode(cx.rel_s(g.start), g.idle_ns(cx.rtt) as f64 / 1e9);
    }
    // Equal holds are a timer at the answering side: noted here, where their time is
    // counted, not as a second finding.
    let holds: Vec<i64> = gaps
        .iter()
        .filter(|g| g.next_dir == Dir::ServerToClient && g.next_has_data)
        .map(|g| g.duration())
        .collect();
    let equal =
        super::fixed_duration_stall::equal_durations(holds).map_or_else(String::new, |(n, d)| {
            format!(
                " {n} of the server's answers came after the same {}: a timer at the server.",
                ms(d)
            )
        });
    f.wireshark_filter = format!("tcp.stream == {} && tcp.time_delta >= 0.010", cx.stream());
    f.confidence = 0.6;
    let (client, server) = (&cx.conn.endpoints[0], &cx.conn.endpoints[1]);
    f.explanation = format!(
        "The connection was idle with nothing in flight for {tot:.3} s of {life:.3} s: \
         {think:.3} s waiting for {server} to answer (server think time) and {idle:.3} s with \
         the application not sending (mostly {client}'s turn). {n} idle period(s), the longest \
         {longest}.{equal}",
        tot = think + idle,
        n = gaps.len(),
        longest = ms(longest),
    );
    f.recommendations = vec![
        "If the client waits for each answer before asking again, keep more requests \
         outstanding (NFS: larger rsize/wsize and more slots, `nconnect`; SMB: multichannel, \
         larger credits; iSCSI: queue depth) so outstanding bytes cover the bandwidth-delay \
         product."
            .into(),
        format!(
            "If {server}'s think time dominates, the bottleneck is the server (CPU, disk, \
             locks), not the network."
        )
        .into(),
    ];
    vec![f]
}
