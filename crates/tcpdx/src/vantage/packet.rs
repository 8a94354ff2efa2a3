//! One TCP segment as the vantage analysis needs it, and the key that finds the same
//! segment in the other capture.

use std::net::IpAddr;

use tcpdx_wire::Frame;
use tcpdx_wire::decode::{TcpFlags, decode};

pub(crate) use tcpdx_report::vantage::Point;

/// A connection's two endpoints, the lower one first, so both directions share the key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct FlowKey {
    pub(crate) lo: (IpAddr, u16),
    pub(crate) hi: (IpAddr, u16),
}

/// What tells two sightings of one segment apart from its other transmissions: without
/// NAT every field is the same at both points.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct MatchKey {
    pub(crate) flow: FlowKey,
    /// Sent from `flow.lo`.
    pub(crate) from_lo: bool,
    pub(crate) seq: u32,
    pub(crate) ack: u32,
    pub(crate) len: u32,
    /// SYN, FIN and RST.
    pub(crate) flags: u16,
    /// IPv4 ID when the sender sets one, else the TCP timestamp value, else 0.
    pub(crate) id: u32,
}

/// One TCP segment seen at one point.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Obs {
    pub(crate) point: Point,
    pub(crate) frame: u64,
    /// In the capture's own clock (ns).
    pub(crate) ts: i64,
    pub(crate) key: MatchKey,
    /// The IPv4 ID, when nonzero: a sender's transmission counter.
    pub(crate) ident: Option<u16>,
    pub(crate) ack_flag: bool,
    pub(crate) sack: [(u32, u32); 4],
    pub(crate) sack_n: u8,
}

impl Obs {
    /// The segment of `f`, if it carries an unfragmented TCP header.
    pub(crate) fn of(point: Point, f: &Frame<'_>) -> Option<Obs> {
        let v = decode(f.link, f.data, f.orig_len);
        let (ip, tcp) = (v.ip?, v.tcp?);
        if ip.fragment {
            return None;
        }
        let src = (ip.src, tcp.src_port);
        let dst = (ip.dst, tcp.dst_port);
        let from_lo = src <= dst;
        let flow = if from_lo {
            FlowKey { lo: src, hi: dst }
        } else {
            FlowKey { lo: dst, hi: src }
        };
        let ident = (ip.ident != 0).then_some(ip.ident);
        let id = match (ident, tcp.options.timestamps) {
            (Some(i), _) => u32::from(i),
            (None, Some((tsval, _))) => tsval,
            (None, None) => 0,
        };
        let mut sack = [(0, 0); 4];
        let blocks = tcp.options.sack_blocks();
        for (s, b) in sack.iter_mut().zip(blocks) {
            *s = (b.0.0, b.1.0);
        }
        let flags = tcp.flags.0 & (TcpFlags::SYN | TcpFlags::FIN | TcpFlags::RST);
        Some(Obs {
            point,
            frame: f.no.0,
            ts: f.ts.nanos(),
            key: MatchKey {
                flow,
                from_lo,
                seq: tcp.seq.0,
                ack: if tcp.flags.ack() { tcp.ack.0 } else { 0 },
                len: tcp.payload_len,
                flags,
                id,
            },
            ident,
            ack_flag: tcp.flags.ack(),
            sack,
            sack_n: blocks.len().min(4) as u8,
        })
    }

    /// Sequence space it takes: payload, plus one for SYN and one for FIN.
    pub(crate) fn seq_len(&self) -> u32 {
        let f = self.key.flags;
        self.key.len + u32::from(f & TcpFlags::SYN != 0) + u32::from(f & TcpFlags::FIN != 0)
    }

    pub(crate) fn syn(&self) -> bool {
        self.key.flags & TcpFlags::SYN != 0
    }
}
