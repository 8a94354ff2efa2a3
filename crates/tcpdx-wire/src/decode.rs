//! `decode()`: a captured frame's bytes to a [`PacketView`]. Never fails, never panics.
//!
//! CONTRACT (used by tcpdx-core; keep these types and field meanings stable):
//! - `decode(link, data, orig_len)` walks link layer -> (tunnels) -> IP -> TCP and returns
//!   the innermost IP header that carries TCP, and the TCP header.
//! - `TcpHeader::payload_len` comes from the IP header's length fields (capped by the
//!   on-the-wire length `orig_len`, as Wireshark does), never from the captured length, so
//!   snaplen-truncated frames analyse like full ones.
//! - Anything that stops decoding is recorded in `stop` with the layer and byte offset.
//!
//! The header views are hand-written (smoltcp style) rather than taken from etherparse:
//! etherparse does not cover SLL2, NFLOG and the tunnels, nor cap lengths by the on-the-wire
//! size the way tshark does, and this hot path must not allocate.
//!
//! How lengths are followed (Wireshark's rules, since `tcp.len` must match tshark): the walk
//! keeps `wire_end`, the end of the bytes that existed on the wire for the current layer. It
//! starts at `max(orig_len, captured length)`; an IPv4 total length, IPv6 payload length,
//! UDP length, 802.3 length, PPPoE length, GTP-U length, L2TP length, NFLOG attribute
//! length or a FabricPath FCS can only shorten it. The TCP segment length is
//! `wire_end - tcp offset - tcp header length`. Captured bytes beyond `wire_end` (Ethernet
//! padding, trailers) are never read. An IPv4 total length of 0 (TSO) means "up to
//! `wire_end`", as in Wireshark.
//!
//! Deliberately differs from Wireshark 4.0 (checked with tshark 4.0.17 on crafted frames):
//! - IPv6 payload length 0 without a jumbo option also means "up to `wire_end`" (TSO and
//!   Linux BIG TCP captures); Wireshark, whose IPv6 TSO preference is off by default, shows
//!   a TCP layer without `tcp.len`.
//! - No IP reassembly: fragments are flagged (`IpInfo::fragment`) and not analysed, where
//!   Wireshark shows TCP on the frame that completes a datagram.
//! - A TCP header that is not wholly captured (or has a data offset below 5) gives no
//!   `tcp`; Wireshark shows a partial TCP layer. TCP quoted in ICMP errors is not TCP.
//!
//! The corpus test (`tests/corpus.rs`) measures all of this against tshark's output.

use std::net::IpAddr;

use crate::error::DecodeStop;
use crate::frame::LinkType;
use crate::seq::SeqNum;

mod fast;
mod walk;

pub use fast::FastTcp;

/// TCP header flag bits (the 9 low bits of bytes 12-13 of the header).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Hash)]
pub struct TcpFlags(pub u16);

impl TcpFlags {
    /// FIN.
    pub const FIN: u16 = 0x001;
    /// SYN.
    pub const SYN: u16 = 0x002;
    /// RST.
    pub const RST: u16 = 0x004;
    /// PSH.
    pub const PSH: u16 = 0x008;
    /// ACK.
    pub const ACK: u16 = 0x010;
    /// URG.
    pub const URG: u16 = 0x020;
    /// ECE.
    pub const ECE: u16 = 0x040;
    /// CWR.
    pub const CWR: u16 = 0x080;
    /// NS / AE (accurate ECN).
    pub const NS: u16 = 0x100;

    /// True if every bit of `mask` is set.
    pub const fn has(self, mask: u16) -> bool {
        self.0 & mask == mask
    }
    /// FIN set.
    pub const fn fin(self) -> bool {
        self.has(Self::FIN)
    }
    /// SYN set.
    pub const fn syn(self) -> bool {
        self.has(Self::SYN)
    }
    /// RST set.
    pub const fn rst(self) -> bool {
        self.has(Self::RST)
    }
    /// ACK set.
    pub const fn ack(self) -> bool {
        self.has(Self::ACK)
    }
}

/// At most four SACK blocks fit in the 40 bytes of TCP options.
pub const MAX_SACK_BLOCKS: usize = 4;

/// The TCP options the analysis uses, decoded once.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TcpOptions {
    /// Maximum segment size (kind 2).
    pub mss: Option<u16>,
    /// Window scale shift count (kind 3), as sent (not clamped).
    pub window_scale: Option<u8>,
    /// SACK permitted (kind 4).
    pub sack_permitted: bool,
    /// SACK blocks (kind 5): `(left edge, right edge)`; only the first `sack_count` are valid.
    pub sack: [(SeqNum, SeqNum); MAX_SACK_BLOCKS],
    /// Number of valid entries in `sack`.
    pub sack_count: u8,
    /// Timestamps (kind 8): `(TSval, TSecr)`.
    pub timestamps: Option<(u32, u32)>,
    /// True if the option list ran past the header or had an impossible length.
    pub malformed: bool,
}

impl TcpOptions {
    /// No options (the [`Default`], as a constant).
    pub const NONE: TcpOptions = TcpOptions {
        mss: None,
        window_scale: None,
        sack_permitted: false,
        sack: [(SeqNum(0), SeqNum(0)); MAX_SACK_BLOCKS],
        sack_count: 0,
        timestamps: None,
        malformed: false,
    };

    /// The valid SACK blocks.
    pub fn sack_blocks(&self) -> &[(SeqNum, SeqNum)] {
        self.sack
            .get(..usize::from(self.sack_count))
            .unwrap_or(&self.sack)
    }
}

/// Decoded TCP header plus where its payload is.
#[derive(Clone, Copy, Debug)]
pub struct TcpHeader<'a> {
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// Raw sequence number.
    pub seq: SeqNum,
    /// Raw acknowledgement number (meaningful only when the ACK flag is set).
    pub ack: SeqNum,
    /// Flag bits.
    pub flags: TcpFlags,
    /// Raw (unscaled) window field.
    pub window: u16,
    /// Header length in bytes (data offset * 4).
    pub header_len: u8,
    /// Urgent pointer.
    pub urgent: u16,
    /// Decoded options.
    pub options: TcpOptions,
    /// Segment payload length from the IP header (Wireshark's `tcp.len`).
    pub payload_len: u32,
    /// The captured part of the payload (`len() <= payload_len`, shorter when snaplen cut it).
    pub payload: &'a [u8],
}

/// The IP header that carries the TCP segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IpInfo {
    /// Source address.
    pub src: IpAddr,
    /// Destination address.
    pub dst: IpAddr,
    /// Upper-layer protocol number (after IPv6 extension headers).
    pub proto: u8,
    /// IPv4 fragment (MF set or offset != 0) or IPv6 fragment header: not analysed.
    pub fragment: bool,
    /// TTL / hop limit.
    pub ttl: u8,
    /// IPv4 identification (0 for IPv6, which has none outside fragments).
    pub ident: u16,
    /// Offset of the IP header from the start of the frame.
    pub offset: u16,
}

/// The result of decoding one frame.
#[derive(Clone, Copy, Debug, Default)]
pub struct PacketView<'a> {
    /// Innermost IP header reached (the one carrying `tcp` when that is set).
    pub ip: Option<IpInfo>,
    /// TCP header, when the frame carries an unfragmented TCP segment whose header was captured.
    pub tcp: Option<TcpHeader<'a>>,
    /// Why and where decoding stopped early, if it did.
    pub stop: Option<DecodeStop>,
    /// When `tcp` is `None`: a TCP header that still identifies a connection (cut short,
    /// impossible data offset, or quoted inside an ICMP error).
    pub partial_tcp: Option<crate::partial::PartialTcp>,
}

#[cfg(test)]
mod tests;

/// Most headers one frame may stack (VLAN tags, MPLS stacks, tunnels...) before the walk
/// gives up with [`StopKind::TooDeep`](crate::StopKind::TooDeep); real traffic stays far below it.
pub const MAX_LAYERS: usize = 64;

/// Decodes a captured frame. `orig_len` is the on-the-wire length (for the IP length cap).
pub fn decode(link: LinkType, data: &[u8], orig_len: u32) -> PacketView<'_> {
    let wire_len = wire_len(data, orig_len);
    if link == LinkType::ETHERNET
        && let Some(fast) = FastTcp::ethernet(data, wire_len)
    {
        return fast.view();
    }
    general(link, data, wire_len)
}

/// The bytes that existed on the wire: a record whose captured length exceeds its wire
/// length is inconsistent, and the bytes that are there are trusted.
#[inline]
fn wire_len(data: &[u8], orig_len: u32) -> usize {
    usize::try_from(orig_len)
        .unwrap_or(usize::MAX)
        .max(data.len())
}

/// [`decode`] without the fast path.
fn general(link: LinkType, data: &[u8], wire_len: usize) -> PacketView<'_> {
    let mut view = walk::run(link, data, wire_len);
    if view.tcp.is_none() {
        view.partial_tcp = partial(&view, data);
    }
    view
}

/// The identifying part of an unanalysable TCP header, if the frame has one.
fn partial(view: &PacketView<'_>, data: &[u8]) -> Option<crate::partial::PartialTcp> {
    let stop = view.stop?;
    let ip = view.ip?;
    let at = data.get(usize::from(stop.offset)..)?;
    match (stop.layer, stop.kind) {
        (crate::error::Layer::Tcp, _) => crate::partial::PartialTcp::from_bytes(ip, at, false),
        (
            _,
            crate::error::StopKind::NotTcp {
                proto: p @ (1 | 58),
            },
        ) if ip.proto == p => crate::partial::quoted_tcp(at, p == 58),
        _ => None,
    }
}
