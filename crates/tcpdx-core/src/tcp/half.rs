//! `HalfFlow`: what one side has sent, and what it has acknowledged of the other side.
//!
//! The fields mirror the state Wireshark keeps per direction (`tcp_flow_t` and its
//! `tcp_analyze_seq_info`), with Wireshark's conventions kept where the flags depend on
//! them: raw 32-bit numbers, and 0 meaning "not seen yet" for `next_seq`, `max_seq_to_be_acked`
//! and `last_ack`.

use tcpdx_wire::{FrameNo, SeqNum, Timestamp};

use super::unacked::UnackedList;
use crate::event::AnalysisFlags;

/// Window scaling state of a direction, as Wireshark tracks it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WindowScale {
    /// No SYN seen: scaling unknown, the raw window is shown and "window full" is not judged.
    Unknown,
    /// The handshake shows scaling is not used.
    NotUsed,
    /// Shift count from the SYN (clamped to 14).
    Shift(u8),
}

impl WindowScale {
    /// The shift to apply to a raw window (0 when unknown or unused).
    pub const fn shift(self) -> u8 {
        match self {
            WindowScale::Shift(s) => s,
            _ => 0,
        }
    }
}

/// Wireshark stores -1 in its unsigned duplicate-ACK counter to mark "ACK of unseen data
/// already reported"; as an unsigned value it also counts as ">= 2 duplicate ACKs" for the
/// fast-retransmission rule, which tshark 4.0's output reflects.
pub const DUP_ACK_MARK: u32 = u32::MAX;

/// RFC 7323 section 2.3: shift counts above 14 are treated as 14.
pub const MAX_WINDOW_SHIFT: u8 = 14;

/// Per-direction analysis state.
#[derive(Clone, Debug)]
pub struct HalfFlow {
    /// Initial sequence number base for relative numbers (ISN, or seq-1 without a SYN).
    pub base_seq: SeqNum,
    /// `base_seq` has been set.
    pub base_set: bool,
    /// A SYN was seen in this direction.
    pub saw_syn: bool,
    /// Window scaling.
    pub win_scale: WindowScale,
    /// Last raw window advertised (Wireshark initialises it to u32::MAX).
    pub window: u32,
    /// Highest sequence number seen + length (0 = none yet).
    pub next_seq: SeqNum,
    /// Frame that set `next_seq`.
    pub next_seq_frame: FrameNo,
    /// Time of the frame that set `next_seq`.
    pub next_seq_time: Timestamp,
    /// Highest contiguous sequence number seen (0 = none yet).
    pub max_seq_to_be_acked: SeqNum,
    /// Last acknowledgement number sent by this side (0 = none yet).
    pub last_ack: SeqNum,
    /// When `last_ack` was sent.
    pub last_ack_time: Timestamp,
    /// Duplicate ACKs counted for the current `last_ack`, or [`DUP_ACK_MARK`].
    pub dup_ack_num: u32,
    /// Last frame that was not a duplicate ACK.
    pub last_non_dup_ack: FrameNo,
    /// Analysis flags of the last segment sent in this direction.
    pub last_segment_flags: AnalysisFlags,
    /// Bytes in flight may be reported (cleared after a lost segment until the peer ACKs).
    pub valid_bif: bool,
    /// Segments sent and not yet acknowledged.
    pub unacked: UnackedList,
    /// Bytes covered by the SACK blocks of the last SACK option this side sent (Wireshark
    /// keeps them until the next SACK option, and subtracts them from the peer's bytes in
    /// flight).
    pub sack_delivered: Option<u32>,
    /// Last unwrapped relative sequence number (for 64-bit unwrapping).
    pub rel_seq_hint: u64,
    /// Last unwrapped relative ack number this side sent.
    pub rel_ack_hint: u64,
}

impl Default for HalfFlow {
    fn default() -> Self {
        Self {
            base_seq: SeqNum(0),
            base_set: false,
            saw_syn: false,
            win_scale: WindowScale::Unknown,
            window: u32::MAX,
            next_seq: SeqNum(0),
            next_seq_frame: FrameNo(0),
            next_seq_time: Timestamp(0),
            max_seq_to_be_acked: SeqNum(0),
            last_ack: SeqNum(0),
            last_ack_time: Timestamp(0),
            dup_ack_num: 0,
            last_non_dup_ack: FrameNo(0),
            last_segment_flags: AnalysisFlags::default(),
            valid_bif: true,
            unacked: UnackedList::new(),
            sack_delivered: None,
            rel_seq_hint: 0,
            rel_ack_hint: 0,
        }
    }
}

/// Unwraps a 32-bit value relative to `base` into 64 bits, choosing the value nearest
/// `hint` (the previous unwrapped value). Works while consecutive values differ by < 2 GB.
pub fn unwrap_rel(raw: SeqNum, base: SeqNum, hint: u64) -> u64 {
    let rel32 = raw.0.wrapping_sub(base.0);
    let delta = rel32.wrapping_sub(hint as u32) as i32 as i64;
    let v = hint as i64 + delta;
    if v < 0 { u64::from(rel32) } else { v as u64 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unwrap_crosses_4gb() {
        let base = SeqNum(1000);
        let mut hint = 0;
        let mut raw = base.add(1);
        for _ in 0..5 {
            raw = raw.add(1_000_000_000);
            hint = unwrap_rel(raw, base, hint);
        }
        assert_eq!(hint, 5_000_000_001);
        // A retransmission slightly behind the front stays in the same epoch.
        assert_eq!(
            unwrap_rel(raw.add(0u32.wrapping_sub(2000)), base, hint),
            4_999_998_001
        );
    }
}
