//! Retransmission timeouts: silence, then a retransmission.
//!
//! Two ways in. Seen: a retransmission that is not a fast one, after at least
//! [`rto_silence`] without a send or an ACK, opens a stall (`rto_open`); a retransmission of
//! the same sequence number again is a backoff (one more timeout); the next ACK that
//! advances, or the end of the capture, records it. Unseen (the capture is downstream of
//! the loss): data right at the edge after such a silence with nothing in flight is a
//! `SilentRestart` candidate; a hole in the capture within
//! [`SILENT_RESTART_MAX_SEGMENTS`] of it, larger than what was sent since, proves the
//! sender had sent and lost that data and restarted after a timeout; more segments without
//! a hole, and it was an idle sender.

use super::{DelackPause, MAX_EPISODES, SenderState, take_some};
use tcpdx_core::{AnalysisFlags as F, SegmentAnalysis};

/// Silence before a non-fast retransmission that makes it a retransmission timeout, in
/// path round trips (RFC 6298 RTO >= SRTT + 4 RTTVAR; a tail-loss probe fires after 2 SRTT,
/// RFC 8985 section 7.2, so 3 separates them).
pub const RTO_MIN_SILENCE_RTTS: i64 = 3;
/// Floor of that silence (tcpdx choice: below every stack's minimum RTO in practice, Linux
/// `TCP_RTO_MIN` 200 ms, Windows 300 ms; above tail-loss probes at LAN round trips).
pub const RTO_MIN_SILENCE_NS: i64 = 100_000_000;
/// Segments a restarting sender may send before the hole it left must show (tcpdx choice:
/// slow start from one segment after a timeout sends 1, then 2 (or 3 with F-RTO's new data)
/// before the first duplicate ACK brings the lost data back).
pub const SILENT_RESTART_MAX_SEGMENTS: u64 = 4;

/// The silence before a retransmission (or a restart) that makes it a timeout's, for a path
/// round trip of `path_rtt` ns (0 unknown).
#[inline]
pub fn rto_silence(path_rtt: i64) -> i64 {
    (RTO_MIN_SILENCE_RTTS * path_rtt).max(RTO_MIN_SILENCE_NS)
}

/// A retransmission timeout: silence, then a retransmission.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RtoStall {
    /// Last sign of progress: the last ACK (or the send that started the flight).
    pub start: i64,
    /// Frame of the last ACK before the silence (0 if none).
    pub last_ack_frame: u64,
    /// The (last) timeout retransmission.
    pub end: i64,
    /// Frame of the first timeout retransmission.
    pub retx_frame: u64,
    /// Timeouts in a row for the same data (exponential backoff), 1 = no backoff.
    pub timeouts: u32,
    /// Sequence number retransmitted.
    pub seq: u64,
    /// Inferred from a capture that never saw the lost data (lost upstream of it): the
    /// "retransmission" looked like new data; the hole it left proved the timeout later.
    pub upstream_loss: bool,
}

/// Data after a long silence in which, as far as the capture can tell, nothing was in
/// flight: an idle sender, or a timeout after losses the capture never saw (upstream of a
/// capture next to the receiver). The next hole in the capture decides.
#[derive(Clone, Copy, Debug)]
pub(super) struct SilentRestart {
    pub(super) start: i64,
    pub(super) last_ack_frame: u64,
    pub(super) end: i64,
    pub(super) frame: u64,
    pub(super) seq: u64,
    pub(super) segs_after: u64,
    pub(super) lone_pause: Option<DelackPause>,
}

impl SenderState {
    /// Whether the retransmission `a` follows a timeout: not a fast retransmission, after
    /// [`rto_silence`] without a send or an ACK.
    #[inline]
    pub(super) fn is_timeout(&self, a: &SegmentAnalysis, path_rtt: i64) -> bool {
        let silence = a.ts.0 - self.last_send.max(self.last_ack);
        !a.flags.has(F::FAST_RETRANSMISSION) && silence >= rto_silence(path_rtt)
    }

    /// The timeout retransmission `a`: a backoff of the open stall if it resends the same
    /// data, else a new stall since the last sign of progress.
    pub(super) fn open_rto(&mut self, a: &SegmentAnalysis) {
        let ts = a.ts.0;
        match &mut self.rto_open {
            Some(r) if r.seq == a.seq => {
                r.timeouts += 1;
                r.end = ts;
            }
            _ => {
                self.rto_open = Some(Box::new(RtoStall {
                    start: self.last_ack.max(self.flight_start),
                    last_ack_frame: self.last_ack_frame,
                    end: ts,
                    retx_frame: a.frame.0,
                    timeouts: 1,
                    seq: a.seq,
                    upstream_loss: false,
                }));
            }
        }
    }

    /// An ACK advanced: the open stall (if any) is over.
    #[inline]
    pub(super) fn close_rto(&mut self) {
        if let Some(r) = take_some(&mut self.rto_open) {
            self.rtos.push_capped(*r, MAX_EPISODES);
        }
    }

    /// Tracks data after a silence with nothing in flight (as the capture sees it) until the
    /// capture shows whether data had been sent and lost before it: a hole right after the
    /// restart point, bigger than what was sent since, means the sender had sent that data
    /// before the silence and the silence was its retransmission timeout.
    pub(super) fn check_silent_restart(&mut self, a: &SegmentAnalysis, path_rtt: i64) {
        let ts = a.ts.0;
        let mss = u64::from(self.mss.max(1));
        if let Some(mut sr) = take_some(&mut self.silent_restart) {
            let hole = a.flags.has(F::LOST_SEGMENT) && a.seq > self.snd_nxt;
            if hole {
                let near = self.snd_nxt <= sr.seq + SILENT_RESTART_MAX_SEGMENTS * mss;
                let missing = (a.seq - self.snd_nxt).div_ceil(mss);
                if near && missing > sr.segs_after + 1 {
                    self.rtos.push_capped(
                        RtoStall {
                            start: sr.start,
                            last_ack_frame: sr.last_ack_frame,
                            end: sr.end,
                            retx_frame: sr.frame,
                            timeouts: 1,
                            seq: sr.seq,
                            upstream_loss: true,
                        },
                        MAX_EPISODES,
                    );
                    if let Some(p) = sr.lone_pause {
                        self.delack.push_capped(p, MAX_EPISODES);
                    }
                }
                return;
            }
            sr.segs_after += 1;
            if sr.segs_after <= SILENT_RESTART_MAX_SEGMENTS {
                self.silent_restart = Some(sr);
            }
            return;
        }
        let silence = ts - self.last_send.max(self.last_ack);
        if self.last_send > 0
            && self.idle()
            && a.seq == self.snd_nxt
            && silence >= rto_silence(path_rtt)
        {
            self.silent_restart = Some(Box::new(SilentRestart {
                start: self.last_send.max(self.last_ack),
                last_ack_frame: self.last_ack_frame,
                end: ts,
                frame: a.frame.0,
                seq: a.seq,
                segs_after: 0,
                lone_pause: None,
            }));
        }
    }
}
