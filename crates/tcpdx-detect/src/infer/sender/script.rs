//! Hand-built segment sequences for the sender's unit tests: this side's data and the
//! peer's ACKs, as the core's analyzer reports them (relative sequence numbers, Wireshark's
//! analysis flags set by the test where the analyzer would set them).

use super::SenderState;
use tcpdx_core::{AnalysisFlags, Dir, SegmentAnalysis, SegmentDetail, StreamId};
use tcpdx_wire::{FrameNo, Timestamp};

/// The MSS the sender announces.
pub(super) const MSS: u32 = 1000;
/// One millisecond in ns.
pub(super) const MS: i64 = 1_000_000;
/// The first segment's time: far from 0, which the state reads as "never".
pub(super) const T0: i64 = 1_000 * MS;
/// TCP flag ACK.
const ACK: u16 = 0x10;

/// A sender fed segment by segment, numbering frames from 1 as Wireshark does.
pub(super) struct Feed {
    /// The state under test.
    pub(super) s: SenderState,
    /// The path round trip given to every call (0 unknown).
    pub(super) rtt: i64,
    frame: u64,
}

/// A segment at `t` ns carrying `len` bytes at `seq` and acknowledging `ack`.
pub(super) fn row(t: i64, dir: Dir, seq: u64, ack: u64, len: u32) -> SegmentAnalysis {
    SegmentAnalysis {
        frame: FrameNo(0),
        stream: StreamId(0),
        ts: Timestamp(t),
        rel_time_ns: t - T0,
        dir,
        src: "10.0.0.1".parse().unwrap(),
        sport: 40000,
        dst: "10.0.0.2".parse().unwrap(),
        dport: 5001,
        seq,
        ack,
        tcp_flags: ACK,
        len,
        window_raw: 65535,
        window: 65535,
        flags: AnalysisFlags(0),
        dup_ack_num: None,
        bytes_in_flight: None,
        ack_rtt_ns: None,
        acks_frame: None,
    }
}

impl Feed {
    /// A sender with an MSS of [`MSS`] on a path of `rtt` ns.
    pub(super) fn new(rtt: i64) -> Self {
        let mut s = SenderState::default();
        s.on_syn(&SegmentDetail {
            mss: Some(MSS as u16),
            ..SegmentDetail::default()
        });
        Feed { s, rtt, frame: 0 }
    }

    /// The data segment `a` (its frame number assigned here); returns the frame.
    pub(super) fn send(&mut self, mut a: SegmentAnalysis) -> u64 {
        self.frame += 1;
        a.frame = FrameNo(self.frame);
        self.s.on_data(&a, self.rtt);
        self.frame
    }

    /// `len` bytes at `seq` at `t` with these analysis flags; returns the frame.
    pub(super) fn data(&mut self, t: i64, seq: u64, len: u32, flags: u16) -> u64 {
        let mut a = row(t, Dir::ClientToServer, seq, 1, len);
        a.flags = AnalysisFlags(flags);
        self.send(a)
    }

    /// `n` full segments from `seq` at `t`; returns the sequence after them.
    pub(super) fn burst(&mut self, t: i64, seq: u64, n: u32) -> u64 {
        for i in 0..u64::from(n) {
            self.data(t, seq + i * u64::from(MSS), MSS, 0);
        }
        seq + u64::from(n) * u64::from(MSS)
    }

    /// The peer's segment `a` with SACK blocks `sack`; returns the frame.
    pub(super) fn receive(&mut self, mut a: SegmentAnalysis, sack: &[(u64, u64)]) -> u64 {
        self.frame += 1;
        a.frame = FrameNo(self.frame);
        let mut d = SegmentDetail::default();
        d.sack[..sack.len()].copy_from_slice(sack);
        d.sack_count = sack.len() as u8;
        self.s.on_ack(&a, &d, self.rtt);
        self.frame
    }

    /// A pure ACK of `ack` at `t`; returns the frame.
    pub(super) fn ack(&mut self, t: i64, ack: u64) -> u64 {
        self.receive(ack_row(t, ack), &[])
    }

    /// A duplicate ACK of `ack` at `t` (the `n`th), with SACK blocks; returns the frame.
    pub(super) fn dupack(&mut self, t: i64, ack: u64, n: u32, sack: &[(u64, u64)]) -> u64 {
        let mut a = ack_row(t, ack);
        a.flags = AnalysisFlags(AnalysisFlags::DUPLICATE_ACK);
        a.dup_ack_num = Some(n);
        self.receive(a, sack)
    }
}

/// A pure ACK of `ack` at `t`, to customise before [`Feed::receive`].
pub(super) fn ack_row(t: i64, ack: u64) -> SegmentAnalysis {
    row(t, Dir::ServerToClient, 1, ack, 0)
}
