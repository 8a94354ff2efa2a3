//! `handshake-and-setup`: SYN retransmissions, window scaling not negotiated, SACK off,
//! small MSS.

use super::{ConnContext, ms};
use crate::finding::{Finding, FindingKind, Severity};

/// Largest window without scaling (RFC 7323 section 2).
pub const UNSCALED_MAX_WINDOW: f64 = 65_535.0;
/// An MSS below this is suspicious on Ethernet paths (tcpdx choice: 1460 - tunnel and VPN
/// overheads still leave more than 1200; RFC 879's 536 default means no option at all).
pub const SMALL_MSS: u16 = 1200;
/// Bytes a sender moves for the connection to count as a bulk transfer (tcpdx choice, the
/// same bound application-limited uses).
pub const BULK_BYTES: u64 = 1_000_000;

/// Finds setup problems.
pub fn detect(cx: &ConnContext<'_>) -> Vec<Finding> {
    let h = &cx.conn.handshake;
    if h.syn.is_none() {
        return Vec::new();
    }
    let mut problems = Vec::new();
    // Whether a problem had (or, for window scaling, must have had) an effect here; the
    // others are only reported as information (a clean connection stays clean).
    let mut mattered = false;
    let mut cost_ns = 0;
    let mut f = cx.finding(FindingKind::HandshakeAndSetup, 0.0);
    if h.syn_count > 1 {
        let first = h.syn.unwrap_or(0);
        let last = h.last_syn.unwrap_or(first);
        cost_ns = last - first;
        problems.push(format!(
            "the SYN was sent {} times, delaying the connection by {}",
            h.syn_count,
            ms(cost_ns)
        ));
        f.evidence(h.syn_frame, "first SYN");
        f.evidence(h.last_syn_frame, "SYN retransmission");
        // The wait is this finding's time: a timeout or a loss seen in it is the SYN's.
        f.episode(cx.rel_s(first), cost_ns as f64 / 1e9);
        mattered = true;
    }
    let (cws, csack, cmss) = h.client_opts;
    let (sws, ssack, smss) = h.server_opts;
    let bdp_bytes = cx.path_bps * cx.rtt as f64 / 8e9;
    if h.synack.is_some() && (cws.is_none() || sws.is_none()) && bdp_bytes > UNSCALED_MAX_WINDOW {
        problems.push(format!(
            "window scaling is not in effect (client {}, server {}): windows stop at 64 KB, below \
             the path's bandwidth-delay product of about {:.0} bytes",
            if cws.is_some() {
                "offered it"
            } else {
                "did not offer it"
            },
            if sws.is_some() {
                "offered it"
            } else {
                "did not offer it"
            },
            bdp_bytes
        ));
        mattered = true;
    }
    if h.synack.is_some() && !(csack && ssack) {
        if super::real_loss_episodes(cx.sender()).next().is_some() {
            problems.push("SACK is not enabled on both ends: each loss costs more".into());
            mattered = true;
        } else {
            problems.push(
                "SACK is not enabled on both ends (no loss happened here, so it cost nothing \
                 yet; each loss would cost more)"
                    .into(),
            );
        }
    }
    for (who, m) in [("client", cmss), ("server", smss)] {
        if let Some(m) = m.filter(|&m| m < SMALL_MSS) {
            problems.push(format!("the {who} announced a small MSS ({m} bytes)"));
            // Small segments matter to bulk transfers (per-packet costs), not to chatter.
            mattered |= cx.sender().data_bytes >= BULK_BYTES;
        }
    }
    if problems.is_empty() {
        return Vec::new();
    }
    f.cost = cx.cost(cost_ns as f64 / 1e9);
    // Severity from what the problems cost here (the SYNs' wait): advice that cost nothing
    // (window scaling missing while the window never limited, SACK off without a loss) is
    // information.
    f.severity = if mattered {
        Severity::from_share(f.cost.share)
    } else {
        Severity::Info
    };
    f.episodes = problems.len() as u32;
    f.wireshark_filter = format!("tcp.stream == {} && tcp.flags.syn == 1", cx.stream());
    f.confidence = 0.9;
    f.explanation = format!("Connection setup: {}.", problems.join("; "));
    f.recommendations = vec![
        "Enable window scaling and SACK on both ends (Linux `net.ipv4.tcp_window_scaling=1`, \
         `net.ipv4.tcp_sack=1`; Windows `netsh int tcp set global autotuninglevel=normal`) and \
         check that no middlebox strips the options from SYNs."
            .into(),
        "SYN retransmissions: look for a listener backlog overflow, a firewall dropping the \
         first SYN, or ARP/ND resolution delays."
            .into(),
    ];
    vec![f]
}
