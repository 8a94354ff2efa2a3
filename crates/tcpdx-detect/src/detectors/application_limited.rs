//! `application-limited` (TCP level): the connection sat idle with nothing in flight: the
//! client did not send the next request, or the server was slow to answer.
//!
//! What of a silence is idle time is [`crate::infer::idle`]'s rule, the time budget's too:
//! the ACK clock seen next to a data receiver is not.

use tcpdx_core::Dir;

use super::{ConnContext, ms};
use crate::budget::State;
use crate::finding::{Finding, FindingKind, Severity};
use crate::infer::Gap;
use crate::infer::idle::IdleTime;

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
    let mut idle_time = IdleTime::new(cx.conn, cx.rtt);
    let mut gaps: Vec<(Gap, i64)> = Vec::new();
    let (mut held_ns, mut idle_ns) = (0i64, 0i64);
    // After the last data of both sides no transfer waits: the client holding the
    // connection open or closing it is its own choice; a server that answers (it sent
    // data) holding its answer to the client's close is still its hold; a server that
    // only received closes once it has read what it was sent (its window's finding).
    let done = cx
        .conn
        .senders
        .iter()
        .map(|s| s.last_data)
        .max()
        .unwrap_or(0);
    let answers = cx.conn.senders[Dir::ServerToClient.idx()].data_bytes > 0;
    for g in cx.conn.gaps.iter() {
        let closing = g.start >= done;
        if (closing && (g.next_dir == Dir::ClientToServer || !answers))
            || cx.pauses.explain(g.start, g.end)
        {
            continue;
        }
        let n = idle_time.of(&g);
        // A silence ended by the server's data after data (the answer to a request, or the
        // rest of an answer it paused in) is the server holding its reply.
        let held = g.next_dir == Dir::ServerToClient
            && ((g.next_has_data && g.last_data_dir.is_some()) || closing);
        if n > 0 {
            if held {
                held_ns += n;
            } else {
                idle_ns += n;
            }
            gaps.push((g, n));
        }
    }
    // The budget's idle time (by the same rule) less the closing silences that are
    // nobody's wait, which it paints too: the server's holds first, then the rest.
    let total = (think + idle).min((held_ns + idle_ns) as f64 / 1e9);
    if total / life < IDLE_MIN_SHARE {
        return Vec::new();
    }
    let think = (held_ns as f64 / 1e9).min(total);
    let idle = total - think;
    let mut f = cx.finding(FindingKind::ApplicationLimited, total);
    // Idle time is the workload's shape, not a fault of the transfer machinery: on a
    // connection that moved little data (chatter, keep-alive sessions, interactive use) it
    // is information only, unless the server held its replies for a share of the life
    // (its service time, a cost whatever the size). The storage layer reports an
    // application that keeps too few requests outstanding on its own.
    if cx.sender().data_bytes < super::handshake_and_setup::BULK_BYTES
        && think / life < IDLE_MIN_SHARE
    {
        f.severity = Severity::Info;
    }
    f.episodes = gaps.len() as u32;
    let longest = gaps.iter().map(|g| g.1).max().unwrap_or(0);
    for (g, n) in &gaps {
        f.evidence(g.frame_after, "first segment after the idle period");
        f.episode(cx.rel_s(g.start), *n as f64 / 1e9);
    }
    // Equal holds are a timer at the answering side: noted here, where their time is
    // counted, not as a second finding.
    let holds: Vec<i64> = gaps
        .iter()
        .filter(|(g, _)| g.next_dir == Dir::ServerToClient && g.next_has_data)
        .map(|(g, _)| g.duration())
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
