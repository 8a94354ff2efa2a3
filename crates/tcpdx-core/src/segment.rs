//! `Segment`: the analyzer's input, built from a decoded frame or by hand in tests.

use tcpdx_wire::{
    Frame, FrameNo, PacketView, PartialTcp, SeqNum, StopKind, TcpFlags, TcpOptions, Timestamp,
    decode,
};

use crate::flow::Endpoint;

/// One TCP segment as the analysis sees it (no bytes, no borrowed data).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segment {
    /// Wireshark frame number.
    pub frame: FrameNo,
    /// Capture time.
    pub ts: Timestamp,
    /// Sender.
    pub src: Endpoint,
    /// Receiver.
    pub dst: Endpoint,
    /// Raw sequence number.
    pub seq: SeqNum,
    /// Raw acknowledgement field (used by the analysis even without the ACK flag, as
    /// Wireshark does).
    pub ack: SeqNum,
    /// Flag bits.
    pub flags: TcpFlags,
    /// Raw window field.
    pub window: u16,
    /// Payload length from the IP header.
    pub len: u32,
    /// Decoded options.
    pub options: TcpOptions,
}

impl Segment {
    /// Builds a segment from a decoded frame; `None` if the frame carries no analysable TCP.
    pub fn from_view(frame: FrameNo, ts: Timestamp, view: &PacketView<'_>) -> Option<Segment> {
        let ip = view.ip?;
        let tcp = view.tcp?;
        if ip.fragment {
            return None;
        }
        Some(Segment {
            frame,
            ts,
            src: Endpoint {
                addr: ip.src,
                port: tcp.src_port,
            },
            dst: Endpoint {
                addr: ip.dst,
                port: tcp.dst_port,
            },
            seq: tcp.seq,
            ack: tcp.ack,
            flags: tcp.flags,
            window: tcp.window,
            len: tcp.payload_len,
            options: tcp.options,
        })
    }

    /// The identity of an unanalysable TCP header (only used to find its connection).
    pub fn from_partial(frame: FrameNo, ts: Timestamp, p: &PartialTcp) -> Segment {
        Segment {
            frame,
            ts,
            src: Endpoint {
                addr: p.ip.src,
                port: p.src_port,
            },
            dst: Endpoint {
                addr: p.ip.dst,
                port: p.dst_port,
            },
            seq: p.seq,
            ack: p.ack,
            flags: p.flags,
            window: 0,
            len: 0,
            options: TcpOptions::default(),
        }
    }

    /// Sequence space this segment occupies (payload plus one for SYN and for FIN).
    pub fn seq_space(&self) -> u32 {
        self.len + u32::from(self.flags.syn()) + u32::from(self.flags.fin())
    }
}

/// What a captured frame brings to the analysis, decided by decoding it once. Splitting
/// decoding from analysis lets a reader thread decode while workers analyse.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameInput {
    /// An analysable TCP segment.
    Segment(Segment),
    /// A TCP header that identifies a connection but cannot be analysed (Wireshark still
    /// gives it a stream, and may open one).
    Partial(Segment),
    /// Anything else.
    Other {
        /// Frame number.
        frame: FrameNo,
        /// Capture time.
        ts: Timestamp,
        /// An IP fragment (not reassembled, not analysed).
        fragment: bool,
        /// Decoding stopped before TCP for a reason other than "not IP".
        undecodable: bool,
    },
}

impl FrameInput {
    /// Decodes `frame` and classifies it.
    pub fn classify(frame: &Frame<'_>) -> FrameInput {
        let view = decode(frame.link, frame.data, frame.orig_len);
        FrameInput::from_view(frame.no, frame.ts, &view)
    }
    /// Classifies an already decoded frame.
    pub fn from_view(no: FrameNo, ts: Timestamp, view: &PacketView<'_>) -> FrameInput {
        let fragment = view.ip.is_some_and(|ip| ip.fragment);
        if let Some(seg) = Segment::from_view(no, ts, view) {
            return FrameInput::Segment(seg);
        }
        if let Some(p) = view.partial_tcp.filter(|p| !p.ip.fragment) {
            return FrameInput::Partial(Segment::from_partial(no, ts, &p));
        }
        FrameInput::Other {
            frame: no,
            ts,
            fragment,
            undecodable: view
                .stop
                .is_some_and(|s| !matches!(s.kind, StopKind::NotIp)),
        }
    }
    /// Capture time of the frame.
    pub fn ts(&self) -> Timestamp {
        match self {
            FrameInput::Segment(s) | FrameInput::Partial(s) => s.ts,
            FrameInput::Other { ts, .. } => *ts,
        }
    }
}
