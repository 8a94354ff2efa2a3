//! `Segment`: the analyzer's input, built from a decoded frame or by hand in tests.

use std::net::IpAddr;

use tcpdx_wire::{
    FastTcp, Frame, FrameNo, PacketView, PartialTcp, SeqNum, StopKind, TcpFlags, TcpOptions,
    Timestamp, decode,
};

use crate::flow::Endpoint;

/// One TCP segment as the analysis sees it (no bytes, no borrowed data).
///
/// `repr(C)`, with the frame number and the time apart: where both sides of a copy held
/// them side by side, the compiler moved them from the caller's `Frame` with one 16-byte
/// load right after two 8-byte stores, which the CPU cannot forward (the stall was half of
/// [`FrameInput::decode_from`]'s time).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct Segment {
    /// Wireshark frame number.
    pub frame: FrameNo,
    /// Raw sequence number.
    pub seq: SeqNum,
    /// Raw acknowledgement field (used by the analysis even without the ACK flag, as
    /// Wireshark does).
    pub ack: SeqNum,
    /// Capture time.
    pub ts: Timestamp,
    /// Sender.
    pub src: Endpoint,
    /// Receiver.
    pub dst: Endpoint,
    /// Flag bits.
    pub flags: TcpFlags,
    /// Raw window field.
    pub window: u16,
    /// Payload length from the IP header.
    pub len: u32,
    /// IPv4 identification (0 for IPv6): the diagnosis tells a copy of a frame from a
    /// retransmission by it.
    pub ip_id: u16,
    /// IPv4 TTL / IPv6 hop limit.
    pub ttl: u8,
    /// Payload bytes captured (below `len` when the snap length cut the frame).
    pub captured: u32,
    /// Decoded options.
    pub options: TcpOptions,
}

impl Segment {
    /// A placeholder segment (all zero) to be overwritten.
    const EMPTY: Segment = Segment {
        frame: FrameNo(0),
        ts: Timestamp(0),
        src: Endpoint {
            addr: IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED),
            port: 0,
        },
        dst: Endpoint {
            addr: IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED),
            port: 0,
        },
        seq: SeqNum(0),
        ack: SeqNum(0),
        flags: TcpFlags(0),
        window: 0,
        len: 0,
        ip_id: 0,
        ttl: 0,
        captured: 0,
        options: TcpOptions::NONE,
    };

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
            ip_id: ip.ident,
            ttl: ip.ttl,
            captured: tcp.payload.len() as u32,
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
            ip_id: p.ip.ident,
            ttl: p.ip.ttl,
            captured: 0,
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
    /// A placeholder for [`Self::decode_from`] to overwrite.
    pub const EMPTY: FrameInput = FrameInput::Other {
        frame: FrameNo(0),
        ts: Timestamp(0),
        fragment: false,
        undecodable: false,
    };

    /// Decodes `frame` and classifies it.
    pub fn classify(frame: &Frame<'_>) -> FrameInput {
        let mut input = FrameInput::EMPTY;
        input.decode_from(frame);
        input
    }

    /// Decodes `frame` into `self` (what [`Self::classify`] returns) and returns its TCP
    /// payload as captured (empty without one).
    ///
    /// In place: the common Ethernet/IPv4/TCP frame is written field by field where `self`
    /// lies, from the frame's bytes ([`FastTcp`]). Decoding into a returned view and moving
    /// it on copied ~200 bytes twice with wide loads of narrow stores, which stall (a fifth
    /// of a bulk `diagnose` run).
    // Always inlined: once a packet, and `#[inline]` left it out of line.
    #[inline(always)]
    pub fn decode_from<'a>(&mut self, frame: &Frame<'a>) -> &'a [u8] {
        let Some(f) = FastTcp::parse(frame.link, frame.data, frame.orig_len) else {
            return self.decode_general(frame);
        };
        // Field by field where `self` lies: a struct literal (even with the options written
        // after it) was built on the stack and copied. A caller that decodes every frame
        // into the same `FrameInput` keeps it a segment, so this reset is rare.
        if !matches!(self, FrameInput::Segment(_)) {
            *self = FrameInput::Segment(Segment::EMPTY);
        }
        if let FrameInput::Segment(s) = self {
            s.frame = frame.no;
            s.ts = frame.ts;
            s.src.addr = IpAddr::V4(f.src());
            s.src.port = f.src_port();
            s.dst.addr = IpAddr::V4(f.dst());
            s.dst.port = f.dst_port();
            s.seq = f.seq();
            s.ack = f.ack();
            s.flags = f.flags();
            s.window = f.window();
            s.len = f.payload_len();
            s.ip_id = f.ident();
            s.ttl = f.ttl();
            s.captured = f.payload().len() as u32;
            f.options_into(&mut s.options);
        }
        f.payload()
    }

    /// [`Self::decode_from`] for the frames of other shapes (out of line: rare).
    #[inline(never)]
    fn decode_general<'a>(&mut self, frame: &Frame<'a>) -> &'a [u8] {
        let view = decode(frame.link, frame.data, frame.orig_len);
        *self = FrameInput::from_view(frame.no, frame.ts, &view);
        view.tcp.map_or(&[], |t| t.payload)
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
    /// Number of the frame.
    pub fn frame(&self) -> FrameNo {
        match self {
            FrameInput::Segment(s) | FrameInput::Partial(s) => s.frame,
            FrameInput::Other { frame, .. } => *frame,
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

#[cfg(test)]
mod tests {
    use std::net::{IpAddr, Ipv6Addr};

    use tcpdx_testkit::builder::{FrameSpec, OptionsSpec, SYN};
    use tcpdx_wire::LinkType;

    use super::*;

    /// Frames of every shape the in-place decoder meets: the fast path with each option
    /// list (none, timestamps, SACK, a SYN's), then frames it leaves to the general walk.
    fn frames() -> Vec<tcpdx_testkit::frame::OwnedFrame> {
        let opts = |o: OptionsSpec| FrameSpec {
            options: o,
            payload_len: 100,
            ..FrameSpec::TEMPL
        };
        let specs = [
            opts(OptionsSpec {
                sack: vec![(1000, 2000), (3000, 4000)],
                timestamps: Some((5, 6)),
                ..OptionsSpec::NONE
            }),
            opts(OptionsSpec {
                timestamps: Some((7, 8)),
                ..OptionsSpec::NONE
            }),
            opts(OptionsSpec {
                sack: vec![(1, 2)],
                ..OptionsSpec::NONE
            }),
            opts(OptionsSpec::NONE),
            FrameSpec {
                flags: SYN,
                options: OptionsSpec {
                    mss: Some(1460),
                    wscale: Some(7),
                    sack_perm: true,
                    timestamps: Some((1, 0)),
                    ..OptionsSpec::NONE
                },
                ..FrameSpec::TEMPL
            },
            opts(OptionsSpec {
                raw: Some(vec![1, 1, 8, 10, 0, 0, 0, 9]),
                ..OptionsSpec::NONE
            }),
            FrameSpec {
                vlan: Some(7),
                ..opts(OptionsSpec::NONE)
            },
            FrameSpec {
                src: IpAddr::V6(Ipv6Addr::LOCALHOST),
                dst: IpAddr::V6(Ipv6Addr::UNSPECIFIED),
                ..opts(OptionsSpec::NONE)
            },
            FrameSpec {
                link: LinkType::RAW,
                ..opts(OptionsSpec::NONE)
            },
            FrameSpec {
                snaplen: Some(30),
                ..opts(OptionsSpec::NONE)
            },
        ];
        specs
            .iter()
            .enumerate()
            .map(|(i, s)| s.to_frame(FrameNo(i as u64 + 1), Timestamp(i as i64 * 1000)))
            .collect()
    }

    /// Decoding every frame into one reused `FrameInput`, in any order (so each shape
    /// follows each other, SACK blocks before none among them), gives what decoding it
    /// afresh gives, and the payload the decoder sees.
    #[test]
    fn decoding_in_place_is_decoding_afresh() {
        let frames = frames();
        let mut input = FrameInput::EMPTY;
        for a in &frames {
            for b in &frames {
                for f in [a, b] {
                    let frame = f.as_frame();
                    let payload = input.decode_from(&frame);
                    let view = decode(frame.link, frame.data, frame.orig_len);
                    assert_eq!(input, FrameInput::from_view(frame.no, frame.ts, &view));
                    assert_eq!(payload, view.tcp.map_or(&[][..], |t| t.payload));
                }
            }
        }
        assert!(matches!(
            FrameInput::classify(&frames[0].as_frame()),
            FrameInput::Segment(s) if s.options.sack_count == 2
        ));
    }
}
