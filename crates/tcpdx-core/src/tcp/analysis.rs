//! Per-segment sequence analysis: the meaning of Wireshark's `tcp.analysis.*` flags.
//!
//! The rules are Wireshark's (epan/dissectors/packet-tcp.c, `tcp_analyze_sequence_number`,
//! as of 4.0), re-expressed as an ordered list of named checks: the first group judges the
//! segment against what its sender sent before (window, keep-alive, duplicate ACK), the
//! second what it acknowledges, the third whether it re-sends old data. Wireshark's
//! conventions are kept where its flags depend on them (raw 32-bit numbers, 0 = unset).

use tcpdx_wire::{SeqNum, TcpFlags, Timestamp};

use super::half::{DUP_ACK_MARK, HalfFlow, WindowScale};
use super::unacked::{AckedMatch, Unacked};
use crate::config::AnalyzerConfig;
use crate::event::AnalysisFlags as F;
use crate::segment::Segment;

/// What the analysis found for one segment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Verdict {
    /// The `tcp.analysis.*` flags.
    pub flags: F,
    /// Duplicate ACK number, when a duplicate ACK.
    pub dup_ack_num: Option<u32>,
    /// Bytes in flight after this segment, when Wireshark reports it.
    pub bytes_in_flight: Option<u32>,
    /// The segment this one acknowledges exactly, if any.
    pub acked: Option<AckedMatch>,
    /// The unacked list was full: the segment was not tracked.
    pub unacked_cap_hit: bool,
}

/// Wireshark: a retransmission within 20 ms of the last duplicate ACK is "fast".
pub const FAST_RETRANS_MAX_GAP_NS: i64 = 20_000_000;
/// Wireshark: without a handshake RTT, a re-sent segment within 3 ms of the highest one is
/// "out of order" rather than a retransmission.
pub const OOO_WINDOW_NO_RTT_NS: i64 = 3_000_000;
/// Wireshark reports bytes in flight only below this (larger values mean confusion).
pub const MAX_BYTES_IN_FLIGHT: u32 = 2_000_000_000;

const SFR: u16 = TcpFlags::SYN | TcpFlags::FIN | TcpFlags::RST;

/// `now - then` as Wireshark's unsigned arithmetic sees it: a negative gap is huge.
fn gap_below(now: Timestamp, then: Timestamp, limit_ns: u64) -> bool {
    (now.since(then) as u64) < limit_ns
}

/// Analyses one segment sent by `fwd` towards `rev`. `first_rtt_ns` is the handshake RTT
/// (0 when not known yet).
pub fn analyze(
    fwd: &mut HalfFlow,
    rev: &mut HalfFlow,
    first_rtt_ns: i64,
    seg: &Segment,
    initial_flags: F,
    cfg: &AnalyzerConfig,
) -> Verdict {
    let mut v = Verdict {
        flags: initial_flags,
        ..Verdict::default()
    };
    let flags = seg.flags;
    set_bases(fwd, rev, seg);
    if flags.ack() {
        rev.valid_bif = true;
    }

    sender_checks(fwd, rev, seg, &mut v);

    // The dup-ACK counter restarts whenever the ACK number moves.
    if seg.ack != fwd.last_ack {
        fwd.last_non_dup_ack = seg.frame;
        fwd.dup_ack_num = 0;
    }

    ack_of_unseen(rev, seg, &mut v);

    if seg.len > 0 || flags.syn() || flags.fin() {
        classify_resend(fwd, rev, first_rtt_ns, seg, &mut v);
    }

    record_sent(fwd, seg, &mut v, cfg);

    fwd.window = u32::from(seg.window);
    fwd.last_ack = seg.ack;
    fwd.last_ack_time = seg.ts;
    fwd.last_segment_flags = v.flags;

    v.acked = rev.unacked.ack(seg.ack);

    if seg.len != 0 && !fwd.unacked.is_empty() && fwd.valid_bif {
        // Wireshark subtracts what the peer's last SACK option covered (even if stale).
        // More SACKed than in flight (bogus blocks, e.g. right edge before left) would wrap
        // to a number larger than anything sent: nothing is reported instead.
        let sacked = rev.sack_delivered.unwrap_or(0);
        let in_flight = fwd.unacked.in_flight(fwd.base_seq).saturating_sub(sacked);
        if in_flight > 0 && in_flight < MAX_BYTES_IN_FLIGHT {
            // SYN and FIN occupy sequence space but are not bytes.
            let bif = in_flight - u32::from(flags.syn() || flags.fin());
            v.bytes_in_flight = Some(bif).filter(|&b| b > 0);
        }
    }
    fwd.sack_delivered = (seg.options.sack_count > 0).then(|| {
        seg.options
            .sack_blocks()
            .iter()
            .fold(0u32, |acc, (l, r)| acc.wrapping_add(r.0.wrapping_sub(l.0)))
    });
    v
}

/// Base sequence numbers for relative numbering (Wireshark: ISN from the SYN, else seq-1;
/// the peer's from the first ACK).
fn set_bases(fwd: &mut HalfFlow, rev: &mut HalfFlow, seg: &Segment) {
    if !fwd.base_set {
        if seg.flags.syn() {
            fwd.base_seq = seg.seq;
            fwd.saw_syn = true;
        } else {
            fwd.base_seq = SeqNum(seg.seq.0.wrapping_sub(1));
        }
        fwd.base_set = true;
    }
    if !rev.base_set && seg.flags.ack() {
        rev.base_seq = SeqNum(seg.ack.0.wrapping_sub(1));
        rev.base_set = true;
    }
}

/// Zero window, lost segment, keep-alive, window update/full, keep-alive ACK,
/// zero-window-probe ACK and duplicate ACK, in Wireshark's order.
fn sender_checks(fwd: &mut HalfFlow, rev: &HalfFlow, seg: &Segment, v: &mut Verdict) {
    let len = seg.len;
    let window = u32::from(seg.window);
    let plain = seg.flags.0 & SFR == 0;
    let at_next = seg.seq == fwd.next_seq;
    let same_ack = seg.ack == fwd.last_ack;

    // ZERO WINDOW PROBE: one byte at the next sequence number into a closed window.
    if len == 1 && at_next && rev.window == 0 {
        v.flags.set(F::ZERO_WINDOW_PROBE);
        return;
    }
    if window == 0 && plain {
        v.flags.set(F::ZERO_WINDOW);
    }
    // LOST SEGMENT: a hole before this segment.
    if fwd.next_seq.0 != 0 && seg.seq.is_after(fwd.next_seq) && !seg.flags.rst() {
        v.flags.set(F::LOST_SEGMENT);
        fwd.valid_bif = false;
    }
    // KEEP ALIVE: 0 or 1 byte starting one before the next sequence number.
    if (len == 0 || len == 1) && seg.seq.0 == fwd.next_seq.0.wrapping_sub(1) && plain {
        v.flags.set(F::KEEP_ALIVE);
    }
    if len == 0 && window != 0 && window != fwd.window && at_next && same_ack && plain {
        v.flags.set(F::WINDOW_UPDATE);
    }
    if len > 0 && rev.win_scale != WindowScale::Unknown && plain {
        let edge = rev
            .last_ack
            .0
            .wrapping_add(rev.window << rev.win_scale.shift());
        if seg.seq.0.wrapping_add(len) == edge {
            v.flags.set(F::WINDOW_FULL);
        }
    }
    let repeats = len == 0 && window == fwd.window && at_next && same_ack && plain;
    if repeats && window != 0 && rev.last_segment_flags.has(F::KEEP_ALIVE) {
        v.flags.set(F::KEEP_ALIVE_ACK);
        return;
    }
    if repeats && window == 0 && rev.last_segment_flags.has(F::ZERO_WINDOW_PROBE) {
        v.flags.set(F::ZERO_WINDOW_PROBE_ACK);
        return;
    }
    if repeats && window != 0 {
        // -1 marks a repeated ACK of unseen data: the first duplicate counts as #1.
        fwd.dup_ack_num = if fwd.dup_ack_num == DUP_ACK_MARK {
            1
        } else {
            fwd.dup_ack_num + 1
        };
        v.flags.set(F::DUPLICATE_ACK);
        v.dup_ack_num = Some(fwd.dup_ack_num);
    }
}

/// ACKED LOST SEGMENT: the ACK covers data of the peer that was never captured.
///
/// Reported once per hole. When the peer has sent beyond the hole, its contiguous edge
/// jumps to its highest sequence number. When it has not (the ACK runs ahead of data
/// captured later, or the peer only sends pure ACKs), the peer's duplicate-ACK counter
/// gets the -1 marker and repeats are not flagged until the peer's own ACK moves.
/// (Matches tshark 4.0 on the public corpus; Wireshark's later code differs.)
fn ack_of_unseen(rev: &mut HalfFlow, seg: &Segment, v: &mut Verdict) {
    if rev.max_seq_to_be_acked.0 == 0
        || !seg.ack.is_after(rev.max_seq_to_be_acked)
        || !seg.flags.ack()
    {
        return;
    }
    if rev.next_seq.is_after(rev.max_seq_to_be_acked) {
        rev.max_seq_to_be_acked = rev.next_seq;
        v.flags.set(F::ACK_LOST_SEGMENT);
    } else {
        if rev.dup_ack_num == 0 {
            v.flags.set(F::ACK_LOST_SEGMENT);
        }
        rev.dup_ack_num = DUP_ACK_MARK;
    }
}

/// Retransmission, fast retransmission, out-of-order or spurious retransmission.
fn classify_resend(
    fwd: &HalfFlow,
    rev: &HalfFlow,
    first_rtt_ns: i64,
    seg: &Segment,
    v: &mut Verdict,
) {
    if v.flags.has(F::KEEP_ALIVE) {
        return;
    }
    let len = seg.len;
    let mut not_advanced = fwd.next_seq.0 != 0 && seg.seq.is_before(fwd.next_seq);
    // New data starting one byte early (after a 1-byte probe) is not a re-send.
    if len > 1 && fwd.next_seq.0.wrapping_sub(1) == seg.seq.0 {
        not_advanced = false;
    }
    // SPURIOUS: everything in it was already acknowledged.
    if len > 0 && rev.last_ack.0 != 0 && seg.seq.add(len).is_at_or_before(rev.last_ack) {
        // Wireshark also reports `tcp.analysis.retransmission` for spurious and fast ones.
        v.flags.set(F::SPURIOUS_RETRANSMISSION | F::RETRANSMISSION);
        return;
    }
    if not_advanced
        && rev.dup_ack_num >= 2
        && rev.last_ack == seg.seq
        && gap_below(seg.ts, rev.last_ack_time, FAST_RETRANS_MAX_GAP_NS as u64)
    {
        v.flags.set(F::FAST_RETRANSMISSION | F::RETRANSMISSION);
        return;
    }
    let ooo_window = if first_rtt_ns == 0 {
        OOO_WINDOW_NO_RTT_NS as u64
    } else {
        first_rtt_ns as u64
    };
    if not_advanced
        && gap_below(seg.ts, fwd.next_seq_time, ooo_window)
        && fwd.next_seq != seg.seq.add(seg.seq_space())
    {
        v.flags.set(F::OUT_OF_ORDER);
        return;
    }
    if not_advanced {
        v.flags.set(F::RETRANSMISSION);
    }
}

/// Tracks the segment as sent: unacked list, highest sequence number, contiguous edge.
fn record_sent(fwd: &mut HalfFlow, seg: &Segment, v: &mut Verdict, cfg: &AnalyzerConfig) {
    let flags = seg.flags;
    let mut next = seg.seq.add(seg.len);
    let occupies = seg.len > 0 || flags.syn() || flags.fin();
    if occupies {
        if fwd.unacked.len() < cfg.max_unacked_segments {
            if flags.syn() || flags.fin() {
                next = next.add(1);
            }
            let resent = v
                .flags
                .any(F::RETRANSMISSION | F::FAST_RETRANSMISSION | F::SPURIOUS_RETRANSMISSION);
            if resent {
                fwd.unacked.mark_retransmitted(seg.seq, next);
            }
            fwd.unacked.push(Unacked {
                seq: seg.seq,
                end: next,
                frame: seg.frame,
                ts: seg.ts,
                ambiguous: resent,
            });
        } else {
            v.unacked_cap_hit = true;
        }
    }
    let probe = v.flags.has(F::ZERO_WINDOW_PROBE);
    // A plain RST does not move the sender's next sequence number (tshark 4.0, measured: a
    // RST with an odd sequence number must not turn later data into "retransmissions").
    let plain_rst = flags.rst() && !flags.syn() && !flags.fin();
    if (next.is_after(fwd.next_seq) || fwd.next_seq.0 == 0) && !probe && !plain_rst {
        fwd.next_seq = next;
        fwd.next_seq_frame = seg.frame;
        fwd.next_seq_time = seg.ts;
    }
    if (seg.seq == fwd.max_seq_to_be_acked || fwd.max_seq_to_be_acked.0 == 0) && !probe {
        fwd.max_seq_to_be_acked = fwd.next_seq;
    }
}
