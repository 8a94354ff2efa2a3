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
/// Shortest silence remembered (tcpdx choice: below the shortest delayed-ACK timer).
const SILENCE_MIN_NS: i64 = 20_000_000;

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
        if let Some((last, _)) = self.last
            && ts - last >= SILENCE_MIN_NS
        {
            self.silence(last, ts, a.frame.0);
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
