//! The TCP context of a storage connection: its silences and troubled segments, read by
//! the storage findings over a slow transaction's span ("silent for 5 s": the server held
//! the reply; "3 retransmissions": part of the wait is the network).
//!
//! A [`TcpLog`] lives beside the connection's parser state in the
//! [`Tracker`](crate::Tracker), which logs each of its segments there: one structure per
//! connection, reached with the parser's, instead of a hash lookup per segment (that
//! lookup and its cache misses were 5% of a bulk diagnosis). The tracker hands the log of
//! a connection on which a request was parsed to its sink when the connection ends
//! ([`StorageSink::tcp_log`](crate::StorageSink::tcp_log)); [`TcpLogs`] collects them.

use rustc_hash::FxHashMap;
use tcpdx_core::{AnalysisFlags as F, Dir, SegmentAnalysis, StreamId};
use tcpdx_wire::{FrameNo, TcpFlags, Timestamp};

/// TCP silences and flagged segments remembered per connection (bounded memory).
const MAX_TCP_LOG: usize = 4096;
/// Silences a log first makes room for (768 bytes).
const FIRST_SILENCES: usize = 32;
/// Shortest silence remembered (tcpdx choice: below the shortest delayed-ACK timer).
const SILENCE_MIN_NS: i64 = 20_000_000;
/// Before a request is parsed, what is older than this is forgotten
/// ([`TcpLog::forget_before`]; tcpdx choice: far above the steps back in time of merged
/// captures, ~50 silences at most).
const FORGET_MARGIN_NS: i64 = 1_000_000_000;

/// Analysis flags a log keeps a segment for.
const TROUBLE: u16 = F::RETRANSMISSION
    | F::FAST_RETRANSMISSION
    | F::SPURIOUS_RETRANSMISSION
    | F::ZERO_WINDOW
    | F::WINDOW_FULL
    | F::LOST_SEGMENT;

/// The TCP context of one connection.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TcpLog {
    /// The last segment: (time, frame).
    last: Option<(i64, u64)>,
    /// Silences: (start, end, frame ending it).
    silences: Vec<(i64, i64, u64)>,
    /// Retransmissions, zero windows and window-full segments: (time, flags).
    flagged: Vec<(i64, u16)>,
    /// A request was parsed on this connection.
    requested: bool,
    /// A segment came more than [`FORGET_MARGIN_NS`] earlier in time than the one before
    /// it: nothing is forgotten any more ([`TcpLog::forget_before`]).
    unordered: bool,
    /// A FIN was seen from the client (bit 0) or the server (bit 1).
    fins: u8,
}

impl TcpLog {
    /// Logs a segment of the connection.
    ///
    /// A connection that ends (FINs both ways, or a reset) without a request parsed starts
    /// its log afresh: the log is only read over a slow transaction's span, from its request
    /// to its reply, and no reply can follow the end. Memory then follows the live
    /// connections where nothing is parsed (encrypted SMB3, payloads cut by the snap length,
    /// another protocol on a storage port), not their whole history.
    // Inlined into the tracker's per-segment path; what is rare is out of line, so that the
    // common path saves no registers (a third of its instructions did).
    #[inline]
    pub fn segment(&mut self, a: &SegmentAnalysis) {
        let ts = a.ts.0;
        if let Some((last, _)) = self.last {
            if ts - last >= SILENCE_MIN_NS {
                self.silence(last, ts, a.frame.0);
            } else if last - ts > FORGET_MARGIN_NS {
                self.unordered = true;
            }
        }
        self.last = Some((ts, a.frame.0));
        if a.flags.any(TROUBLE) {
            self.flag(ts, a.flags.0);
        }
        let flags = TcpFlags(a.tcp_flags);
        if flags.fin() {
            self.fins |= match a.dir {
                Dir::ClientToServer => 1,
                Dir::ServerToClient => 2,
            };
        }
        if !self.requested && (self.fins == 3 || flags.rst()) {
            self.forget();
        }
    }

    #[cold]
    #[inline(never)]
    fn silence(&mut self, from: i64, to: i64, frame: u64) {
        if self.silences.capacity() == 0 {
            // Room for a few dozen at once: a connection with one silence mostly has more,
            // and growing from four, one at a time, was 3% of `diagnose` on many short
            // connections with a silence every few segments (a realloc and copy each).
            self.silences.reserve_exact(FIRST_SILENCES);
        }
        if self.silences.len() < MAX_TCP_LOG {
            self.silences.push((from, to, frame));
        }
    }

    #[cold]
    #[inline(never)]
    fn flag(&mut self, ts: i64, flags: u16) {
        if self.flagged.len() < MAX_TCP_LOG {
            self.flagged.push((ts, flags));
        }
    }

    #[cold]
    #[inline(never)]
    fn forget(&mut self) {
        *self = TcpLog::default();
    }

    /// Until a request is parsed: forgets the silences that ended and the segments flagged
    /// more than [`FORGET_MARGIN_NS`] before `ts`, where no request parsed later can start
    /// (`ts`: the current segment's time, or earlier if bytes held out of order may complete
    /// a request; see [`Tracker`](crate::Tracker)). The log is read only from a request on,
    /// so this changes no reading, and memory follows the live connections where nothing is
    /// parsed even while they last: 2,000 long connections with a silence every 20 ms kept
    /// up to 98 KB of silences each. The margin keeps that exact where the capture's time
    /// steps back a little (merged interfaces); a larger step stops it for the connection.
    #[inline]
    pub fn forget_before(&mut self, ts: i64) {
        if self.may_forget_before(ts) {
            self.forget_entries_before(ts.saturating_sub(FORGET_MARGIN_NS));
        }
    }

    /// True if [`TcpLog::forget_before`] would forget something at `ts` (or at an earlier
    /// time): a cheap test, so that the tracker looks for bytes held out of order only then.
    #[inline]
    pub fn may_forget_before(&self, ts: i64) -> bool {
        if self.requested || self.unordered {
            return false;
        }
        let before = ts.saturating_sub(FORGET_MARGIN_NS);
        self.silences.first().is_some_and(|s| s.1 < before)
            || self.flagged.first().is_some_and(|f| f.0 < before)
    }

    #[cold]
    #[inline(never)]
    fn forget_entries_before(&mut self, before: i64) {
        self.silences.retain(|&(_, end, _)| end >= before);
        self.flagged.retain(|&(t, _)| t >= before);
    }

    /// A request was parsed on the connection (its log is then kept to the end).
    pub fn request(&mut self) {
        self.requested = true;
    }

    /// True once a request was parsed: only then can the log be read.
    pub fn requested(&self) -> bool {
        self.requested
    }

    /// What TCP did between `from` and `to` (ns).
    pub fn during(&self, from: i64, to: i64) -> TcpDuring {
        let mut d = TcpDuring::default();
        let silent: i64 = self
            .silences
            .iter()
            .map(|&(a, b, _)| (b.min(to) - a.max(from)).max(0))
            .sum();
        d.silent_s = silent as f64 / 1e9;
        for &(ts, flags) in &self.flagged {
            if ts >= from && ts <= to {
                let fl = F(flags);
                if fl.any(F::RETRANSMISSION | F::FAST_RETRANSMISSION | F::SPURIOUS_RETRANSMISSION) {
                    d.retransmissions += 1;
                }
                if fl.any(F::ZERO_WINDOW | F::WINDOW_FULL) {
                    d.window_limited += 1;
                }
            }
        }
        d
    }
}

/// What TCP did on a connection between two instants.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct TcpDuring {
    /// Time without any segment (s).
    pub silent_s: f64,
    /// Retransmitted segments.
    pub retransmissions: u32,
    /// Zero-window or window-full segments.
    pub window_limited: u32,
}

/// The TCP logs of the storage connections, per stream, and the last storage segment: the
/// part of the storage evidence that depends on each connection alone, so that a caller
/// parsing connections on several threads collects it there and merges it
/// ([`TcpLogs::merge`]).
#[derive(Debug, Default)]
pub struct TcpLogs {
    logs: FxHashMap<StreamId, TcpLog>,
    /// The last segment of a storage connection.
    last: Option<(FrameNo, Timestamp)>,
}

impl TcpLogs {
    /// Keeps the log of `stream` (replacing any).
    pub fn add(&mut self, stream: StreamId, log: TcpLog) {
        self.logs.insert(stream, log);
    }

    /// The last segment of a storage connection was `frame`, at `ts` (the latest frame of
    /// all calls is kept).
    pub fn saw(&mut self, frame: FrameNo, ts: Timestamp) {
        if self.last.is_none_or(|(f, _)| frame > f) {
            self.last = Some((frame, ts));
        }
    }

    /// The last segment of a storage connection.
    pub fn last(&self) -> Option<(FrameNo, Timestamp)> {
        self.last
    }

    /// The log of `stream`, if it was kept.
    pub fn get(&self, stream: StreamId) -> Option<&TcpLog> {
        self.logs.get(&stream)
    }

    /// Gives every stream the number `to(stream)`.
    pub fn renumber(&mut self, to: impl Fn(StreamId) -> StreamId) {
        self.logs = std::mem::take(&mut self.logs)
            .into_iter()
            .map(|(s, l)| (to(s), l))
            .collect();
    }

    /// Adds the logs of other connections (same stream numbering).
    pub fn merge(&mut self, other: TcpLogs) {
        self.logs.extend(other.logs);
        if let Some((f, ts)) = other.last {
            self.saw(f, ts);
        }
    }
}

tcpdx_core::codec_struct!(TcpLog {
    last,
    silences,
    flagged,
    requested,
    unordered,
    fins
});
tcpdx_core::codec_struct!(TcpLogs { logs, last });

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    const FIN: u16 = 0x01;
    const RST: u16 = 0x04;

    /// A segment row of stream 3 (NFS) at `s` seconds, with these TCP and analysis flags.
    pub(crate) fn seg(frame: u64, s: f64, dir: Dir, tcp_flags: u16, flags: u16) -> SegmentAnalysis {
        SegmentAnalysis {
            frame: FrameNo(frame),
            stream: StreamId(3),
            ts: Timestamp((s * 1e9) as i64),
            rel_time_ns: (s * 1e9) as i64,
            dir,
            src: "10.0.0.1".parse().unwrap(),
            sport: 700,
            dst: "10.0.0.2".parse().unwrap(),
            dport: 2049,
            seq: 1,
            ack: 1,
            tcp_flags: 0x10 | tcp_flags,
            len: 0,
            window_raw: 100,
            window: 100,
            flags: F(flags),
            dup_ack_num: None,
            bytes_in_flight: None,
            ack_rtt_ns: None,
            acks_frame: None,
        }
    }

    #[test]
    fn silences_and_trouble_are_read_over_a_span() {
        let c2s = Dir::ClientToServer;
        let mut log = TcpLog::default();
        log.segment(&seg(1, 0.0, c2s, 0, 0));
        log.segment(&seg(2, 0.01, c2s, 0, 0)); // 10 ms: below the shortest silence
        log.segment(&seg(3, 2.01, c2s, 0, F::RETRANSMISSION));
        log.segment(&seg(4, 2.02, c2s, 0, F::ZERO_WINDOW));
        let d = log.during(0, 3_000_000_000);
        assert!((d.silent_s - 2.0).abs() < 1e-6, "{d:?}");
        assert_eq!((d.retransmissions, d.window_limited), (1, 1));
        // Half of the silence, and no trouble, in the first second.
        let d = log.during(1_010_000_000, 2_000_000_000);
        assert!((d.silent_s - 0.99).abs() < 1e-6, "{d:?}");
        assert_eq!((d.retransmissions, d.window_limited), (0, 0));
    }

    #[test]
    fn a_connection_ended_without_a_request_starts_its_log_afresh() {
        let (c2s, s2c) = (Dir::ClientToServer, Dir::ServerToClient);
        let ended = |last: SegmentAnalysis, requested: bool| {
            let mut log = TcpLog::default();
            if requested {
                log.request();
            }
            log.segment(&seg(1, 0.0, c2s, 0, 0));
            log.segment(&seg(2, 1.0, c2s, FIN, 0));
            log.segment(&last);
            log
        };
        // FINs both ways or a reset, no request: nothing remembered.
        assert_eq!(ended(seg(3, 1.5, s2c, FIN, 0), false), TcpLog::default());
        assert_eq!(ended(seg(3, 1.5, s2c, RST, 0), false), TcpLog::default());
        // One FIN only, or a request parsed: the silence is kept.
        let open = ended(seg(3, 1.5, c2s, 0, 0), false);
        assert!(open.during(0, 2_000_000_000).silent_s > 0.9);
        let asked = ended(seg(3, 1.5, s2c, FIN, 0), true);
        assert!(asked.requested());
        assert!(asked.during(0, 2_000_000_000).silent_s > 0.9);
    }

    #[test]
    fn before_a_request_only_the_last_second_is_remembered() {
        let c2s = Dir::ClientToServer;
        // A segment every 100 ms for 20 s: each ends a silence.
        let (mut forgetting, mut keeping) = (TcpLog::default(), TcpLog::default());
        let feed = |log: &mut TcpLog, forget: bool, from: u64, to: u64, flags: u16| {
            for i in from..to {
                let a = seg(i + 1, i as f64 * 0.1, c2s, 0, flags);
                if forget {
                    log.forget_before(a.ts.0);
                }
                log.segment(&a);
            }
        };
        feed(&mut forgetting, true, 0, 200, F::RETRANSMISSION);
        feed(&mut keeping, false, 0, 200, F::RETRANSMISSION);
        assert_eq!(keeping.silences.len(), 199);
        // The silences and flags of the last second (and the one ending at its start).
        assert!(
            forgetting.silences.len() <= 12,
            "{}",
            forgetting.silences.len()
        );
        assert!(
            forgetting.flagged.len() <= 12,
            "{}",
            forgetting.flagged.len()
        );
        // A request parsed now reads the same as with everything kept, from its segment on
        // and from anywhere in the margin; then nothing is forgotten any more.
        forgetting.request();
        keeping.request();
        let kept = forgetting.silences.len();
        feed(&mut forgetting, true, 200, 400, 0);
        feed(&mut keeping, false, 200, 400, 0);
        assert_eq!(forgetting.silences.len(), kept + 200);
        let end = 40_000_000_000;
        for from in [19_900_000_000, 19_000_000_000, 25_000_000_000] {
            assert_eq!(
                forgetting.during(from, end),
                keeping.during(from, end),
                "{from}"
            );
        }
    }

    #[test]
    fn time_going_back_more_than_the_margin_stops_forgetting() {
        let c2s = Dir::ClientToServer;
        let mut log = TcpLog::default();
        for (i, s) in [0.0, 0.5, 1.0, 1.5, 2.0, 0.2, 0.7, 1.2, 5.0, 9.0]
            .into_iter()
            .enumerate()
        {
            let a = seg(i as u64 + 1, s, c2s, 0, 0);
            log.forget_before(a.ts.0);
            log.segment(&a);
        }
        // Back from 2.0 s to 0.2 s: everything from then on is kept (at 5.0 s the silences
        // ending before 4.0 s would have gone: 7.8 s instead of 8.6 s).
        assert!(log.unordered);
        let d = log.during(1_200_000_000, 9_000_000_000);
        assert!((d.silent_s - 8.6).abs() < 1e-6, "{d:?}");
    }

    #[test]
    fn merged_logs_keep_the_latest_segment() {
        let mut a = TcpLogs::default();
        a.saw(FrameNo(9), Timestamp(90));
        a.add(StreamId(0), TcpLog::default());
        let mut b = TcpLogs::default();
        b.saw(FrameNo(4), Timestamp(40));
        b.add(StreamId(0), TcpLog::default());
        b.renumber(|_| StreamId(5));
        a.merge(b);
        assert_eq!(a.last(), Some((FrameNo(9), Timestamp(90))));
        assert!(a.get(StreamId(0)).is_some() && a.get(StreamId(5)).is_some());
        assert!(a.get(StreamId(4)).is_none());
        let mut c = TcpLogs::default();
        c.saw(FrameNo(12), Timestamp(120));
        a.merge(c);
        assert_eq!(a.last(), Some((FrameNo(12), Timestamp(120))));
    }
}
