//! The walk behind [`decode`](super::decode): one [`Step`] per header, from the link layer
//! through shims and tunnels to TCP.
//!
//! Every step reads a checked header view over [`Walk::bytes`], which never reaches past
//! `wire_end`; a header that does not fit ends the walk with a [`DecodeStop`] naming the
//! layer and the offset where it started.

use std::net::IpAddr;

use super::{IpInfo, MAX_LAYERS, PacketView, TcpHeader, TcpOptions};
use crate::bytes::sat16;
use crate::error::{DecodeStop, Layer, StopKind};
use crate::frame::LinkType;
use crate::ip::ext::{self, ExtSlice};
use crate::ip::ipv4::Ipv4Slice;
use crate::ip::ipv6::{self, Ipv6Slice};
use crate::ip::proto;
use crate::link::arcnet::{self, ArcnetSlice};
use crate::link::ethernet::{self, EthernetSlice};
use crate::link::ethertype;
use crate::link::fddi::{self, FddiSlice};
use crate::link::ipoib::{self, IpoibSlice};
use crate::link::llc::{self, SnapSlice};
use crate::link::nflog::{self, NflogSlice};
use crate::link::null::{self, NullNext, NullSlice};
use crate::link::ppi::MetaHeaderSlice;
use crate::link::ppp::{self, PppSlice};
use crate::link::sll::{self, SllSlice};
use crate::link::sll2::{self, Sll2Slice};
use crate::link::tag::{self, TagSlice};
use crate::link::vlan::{self, VlanSlice};
use crate::link::wlan::WlanSlice;
use crate::tcp::TcpSlice;
use crate::tunnel::ayiya::{self, AyiyaSlice};
use crate::tunnel::capwap::{self, CapwapSlice};
use crate::tunnel::erspan::ErspanSlice;
use crate::tunnel::geneve::GeneveSlice;
use crate::tunnel::gre::{self, GreSlice};
use crate::tunnel::gtp::{self, GtpUSlice};
use crate::tunnel::l2tp::L2tpSlice;
use crate::tunnel::mpls::MplsSlice;
use crate::tunnel::port;
use crate::tunnel::pppoe::{self, PppoeSlice};
use crate::tunnel::teredo::TeredoSlice;
use crate::tunnel::vxlan::{self, VxlanSlice};
use crate::udp::{self, UdpSlice};

/// Decodes `data` (`wire_len` bytes long on the wire) from link type `link` on.
pub(super) fn run(link: LinkType, data: &[u8], wire_len: usize) -> PacketView<'_> {
    let mut walk = Walk {
        data,
        wire_end: wire_len,
        view: PacketView::default(),
    };
    if let Err(stop) = walk.walk(link) {
        walk.view.stop = Some(stop);
    }
    walk.view
}

/// The next header to decode, at the walk's current offset.
#[derive(Clone, Copy, Debug)]
enum Step {
    /// Ethernet II / 802.3 MAC header.
    Ethernet,
    /// A payload named by an EtherType, announced by a header of `Layer`.
    EtherType(u16, Layer),
    /// An 802.3 payload: LLC (SNAP, or the IP SAP).
    Llc,
    /// 802.1Q / 802.1ad tag.
    Vlan,
    /// A tag of the given length ending with the inner EtherType (E-Tag, VN-Tag).
    Tag(usize),
    /// Cisco FabricPath FTag/TTL, then an inner Ethernet frame.
    FabricPath,
    /// IEEE 802.11 data frame; `true` when the frame-control bytes are swapped (CAPWAP).
    Wlan(bool),
    /// MPLS label stack.
    Mpls,
    /// PPPoE session header.
    Pppoe,
    /// PPP protocol field at offset 0.
    Ppp,
    /// PPP with optional `ff 03`, or Cisco HDLC.
    PppHdlc,
    /// IP of either version, by the first nibble.
    Ip,
    /// IPv4 header.
    Ipv4,
    /// IPv6 header and its extension headers.
    Ipv6,
    /// An authentication header after IPv4.
    Ah,
    /// UDP header (tunnels only).
    Udp,
    /// GRE header.
    Gre,
    /// ERSPAN type II or III header, by its version field.
    Erspan,
    /// VXLAN header.
    Vxlan,
    /// Geneve header.
    Geneve,
    /// GTP-U header.
    GtpU,
    /// AYIYA header.
    Ayiya,
    /// Teredo indicators, then IPv6.
    Teredo,
    /// VXLAN-GPE header.
    VxlanGpe,
    /// L2TPv2 header, then PPP.
    L2tp,
    /// CAPWAP data header.
    Capwap,
    /// TCP header: the end of the walk.
    Tcp,
}

/// The next step and its offset, or the stop that ends the walk.
type Next = Result<(Step, usize), DecodeStop>;

/// A step routed to a method that does not handle it: a bug in `Walk::step`, reported as
/// a stop rather than a panic.
fn unreachable_step(step: Step, off: usize) -> Next {
    debug_assert!(false, "step {step:?} routed to the wrong method");
    Err(stop(
        Layer::Shim,
        off,
        StopKind::Malformed("internal: misrouted step"),
    ))
}

/// State of one frame's walk.
struct Walk<'a> {
    data: &'a [u8],
    /// End (frame offset) of the bytes that existed on the wire for the current layer.
    wire_end: usize,
    view: PacketView<'a>,
}

/// A stop at `layer`, `offset`.
fn stop(layer: Layer, offset: usize, kind: StopKind) -> DecodeStop {
    DecodeStop {
        layer,
        kind,
        offset: sat16(offset),
    }
}

impl<'a> Walk<'a> {
    /// Captured bytes from `offset` up to the wire end of the current layer.
    fn bytes(&self, offset: usize) -> &'a [u8] {
        let end = self.data.len().min(self.wire_end);
        self.data.get(offset..end).unwrap_or(&[])
    }

    /// Bytes the current layer has on the wire from `offset` on (Wireshark's reported length).
    fn reported(&self, offset: usize) -> usize {
        self.wire_end.saturating_sub(offset)
    }

    /// Shortens the current layer to `len` wire bytes from `offset` (never lengthens it).
    fn cap(&mut self, offset: usize, len: usize) {
        self.wire_end = self.wire_end.min(offset.saturating_add(len));
    }

    fn walk(&mut self, link: LinkType) -> Result<(), DecodeStop> {
        let (mut step, mut off) = self.link_layer(link, 0)?;
        for _ in 0..MAX_LAYERS {
            match self.step(step, off)? {
                Some((next, next_off)) => (step, off) = (next, next_off),
                None => return Ok(()),
            }
        }
        Err(stop(Layer::Shim, off, StopKind::TooDeep))
    }

    /// The first step for a frame of link type `link` starting at `base`.
    fn link_layer(&mut self, link: LinkType, base: usize) -> Result<(Step, usize), DecodeStop> {
        let at = |k| stop(Layer::Link, base, k);
        let buf = self.bytes(base);
        Ok(match link {
            LinkType::ETHERNET => (Step::Ethernet, base),
            LinkType::RAW | LinkType::RAW_BSD | LinkType::RAW_BSD14 => (Step::Ip, base),
            // Wireshark hands LINKTYPE_IPV4 to its version-sniffing IP dissector too.
            LinkType::IPV4 => (Step::Ip, base),
            LinkType::IPV6 => (Step::Ipv6, base),
            LinkType::PPP | LinkType::PPP_HDLC => (Step::PppHdlc, base),
            LinkType::C_HDLC => {
                let etype = ppp::cisco_hdlc_ethertype(buf).map_err(at)?;
                (
                    Step::EtherType(etype, Layer::Link),
                    base + ppp::CHDLC_HEADER_LEN,
                )
            }
            LinkType::NULL | LinkType::LOOP => {
                let h = NullSlice::from_slice(buf).map_err(at)?;
                let next = if link == LinkType::NULL {
                    h.next_host_order()
                } else {
                    h.next_big_endian()
                };
                let step = match next {
                    NullNext::PppHdlc => return Ok((Step::PppHdlc, base)),
                    NullNext::EtherType(etype) => Step::EtherType(etype, Layer::Link),
                    // Wireshark's null.type table: AF_INET goes to its version-sniffing
                    // IP dissector, the BSD AF_INET6 values to IPv6. Linux's AF_INET6 (10)
                    // is not in it (tshark 4.0 shows such frames as data), so not here.
                    NullNext::Family(null::AF_INET) => Step::Ip,
                    NullNext::Family(
                        null::AF_INET6_BSD | null::AF_INET6_FREEBSD | null::AF_INET6_DARWIN,
                    ) => Step::Ipv6,
                    NullNext::Family(_) => return Err(at(StopKind::NotIp)),
                };
                (step, base + null::HEADER_LEN)
            }
            LinkType::LINUX_SLL => {
                let h = SllSlice::from_slice(buf).map_err(at)?;
                (
                    sll_step(h.hatype(), h.protocol(), base)?,
                    base + sll::HEADER_LEN,
                )
            }
            LinkType::LINUX_SLL2 => {
                let h = Sll2Slice::from_slice(buf).map_err(at)?;
                (
                    sll_step(h.hatype(), h.protocol(), base)?,
                    base + sll2::HEADER_LEN,
                )
            }
            LinkType::NFLOG => return self.nflog(base),
            LinkType::FDDI => {
                let h = FddiSlice::from_slice(buf).map_err(at)?;
                if !h.is_llc() {
                    return Err(at(StopKind::NotIp));
                }
                (Step::Llc, base + fddi::HEADER_LEN)
            }
            LinkType::ARCNET_LINUX => {
                let h = ArcnetSlice::from_slice(buf).map_err(at)?;
                let step = match h.protocol() {
                    arcnet::PROTO_IP_RFC1201 | arcnet::PROTO_IP_RFC1051 => Step::Ip,
                    arcnet::PROTO_IPV6 => Step::Ipv6,
                    _ => return Err(at(StopKind::NotIp)),
                };
                (step, base + h.header_len())
            }
            LinkType::IPOIB => {
                let h = IpoibSlice::from_slice(buf).map_err(at)?;
                // Wireshark's IPoIB dissector hands on IPv4 (to its version-sniffing IP
                // dissector) and IPv6 only.
                let step = match h.ethertype() {
                    ethertype::IPV4 => Step::Ip,
                    ethertype::IPV6 => Step::Ipv6,
                    _ => return Err(at(StopKind::NotIp)),
                };
                (step, base + ipoib::HEADER_LEN)
            }
            LinkType::IEEE802_11 => (Step::Wlan(false), base),
            LinkType::IEEE802_11_RADIOTAP => {
                let h = MetaHeaderSlice::radiotap(buf).map_err(at)?;
                (Step::Wlan(false), base + h.header_len())
            }
            LinkType::PPI if base == 0 => {
                let h = MetaHeaderSlice::ppi(buf).map_err(at)?;
                let inner = u16::try_from(h.inner_link_type()).unwrap_or(u16::MAX);
                return self.link_layer(LinkType(inner), base + h.header_len());
            }
            other => return Err(at(StopKind::UnsupportedLinkType(other.0))),
        })
    }

    /// NFLOG: find the payload attribute, cap the wire length to it.
    fn nflog(&mut self, base: usize) -> Result<(Step, usize), DecodeStop> {
        let at = |k| stop(Layer::Link, base, k);
        let h = NflogSlice::from_slice(self.bytes(base)).map_err(at)?;
        let Some((value_off, value_len)) = h.payload().map_err(at)? else {
            return Err(at(StopKind::NotIp));
        };
        let step = match h.family() {
            nflog::AF_INET => Step::Ip,
            nflog::AF_INET6 => Step::Ipv6,
            _ => return Err(at(StopKind::NotIp)),
        };
        // Wireshark: the payload's length is the attribute's length.
        self.cap(base + value_off, value_len);
        Ok((step, base + value_off))
    }

    /// Decodes one header at `off`; returns the next step, or `None` when TCP was found.
    fn step(&mut self, step: Step, off: usize) -> Result<Option<(Step, usize)>, DecodeStop> {
        let next = match step {
            Step::Ip | Step::Ipv4 | Step::Ipv6 | Step::Ah => self.ip_step(step, off)?,
            Step::Udp => self.udp(off)?,
            Step::Gre
            | Step::Erspan
            | Step::Vxlan
            | Step::Geneve
            | Step::GtpU
            | Step::Ayiya
            | Step::Teredo
            | Step::VxlanGpe
            | Step::L2tp
            | Step::Capwap => self.tunnel_step(step, off)?,
            Step::Tcp => {
                self.tcp(off)?;
                return Ok(None);
            }
            _ => self.link_step(step, off)?,
        };
        Ok(Some(next))
    }

    /// Link-layer and shim headers: Ethernet, tags, LLC, 802.11, MPLS, PPPoE, PPP.
    fn link_step(&mut self, step: Step, off: usize) -> Next {
        let buf = self.bytes(off);
        Ok(match step {
            Step::Ethernet => {
                let at = |k| stop(Layer::Link, off, k);
                let eth = EthernetSlice::from_slice(buf).map_err(at)?;
                self.type_or_length(eth.type_len(), off + ethernet::HEADER_LEN, Layer::Link)
            }
            Step::Vlan => {
                let at = |k| stop(Layer::Shim, off, k);
                let tag = VlanSlice::from_slice(buf).map_err(at)?;
                self.type_or_length(tag.type_len(), off + vlan::HEADER_LEN, Layer::Shim)
            }
            Step::Tag(len) => {
                let at = |k| stop(Layer::Shim, off, k);
                let tag = TagSlice::from_slice(buf, len).map_err(at)?;
                (
                    Step::EtherType(tag.inner_ethertype(), Layer::Shim),
                    off + tag.header_len(),
                )
            }
            Step::FabricPath => {
                let at = |k| stop(Layer::Shim, off, k);
                crate::bytes::need(buf, tag::FABRICPATH_LEN).map_err(at)?;
                // Wireshark: the last 4 bytes on the wire are the FabricPath FCS, not part
                // of the inner frame.
                self.wire_end = self
                    .wire_end
                    .saturating_sub(tag::FABRICPATH_FCS_LEN)
                    .max(off);
                (Step::Ethernet, off + tag::FABRICPATH_LEN)
            }
            Step::Wlan(swapped) => {
                let at = |k| stop(Layer::Link, off, k);
                let w = WlanSlice::from_slice(buf, swapped).map_err(at)?;
                (Step::Llc, off + w.header_len())
            }
            Step::EtherType(etype, layer) => (ethertype_step(etype, layer, off)?, off),
            Step::Llc => {
                let at = |k| stop(Layer::Shim, off, k);
                // LLC with the IP SAP (RFC 1042's predecessor): 3 bytes, then IPv4.
                if buf.len() >= 3 && buf.starts_with(&[LLC_SAP_IP, LLC_SAP_IP]) {
                    return Ok((Step::Ip, off + 3));
                }
                let snap = SnapSlice::from_slice(buf).map_err(at)?;
                if !matches!(snap.oui(), OUI_ENCAP_ETHERNET | OUI_CISCO_90) {
                    return Err(at(StopKind::NotIp));
                }
                (
                    Step::EtherType(snap.ethertype(), Layer::Shim),
                    off + llc::SNAP_HEADER_LEN,
                )
            }
            Step::Mpls => {
                let at = |k| stop(Layer::Shim, off, k);
                let stack = MplsSlice::from_slice(buf).map_err(at)?;
                let next = off + stack.header_len();
                match stack.payload().first().map(|b| b >> 4) {
                    Some(4) => (Step::Ipv4, next),
                    Some(6) => (Step::Ipv6, next),
                    None => return Err(stop(Layer::Shim, next, crate::bytes::truncated(1, 0))),
                    Some(_) => return Err(stop(Layer::Shim, next, StopKind::NotIp)),
                }
            }
            Step::Pppoe => {
                let at = |k| stop(Layer::Shim, off, k);
                let h = PppoeSlice::from_slice(buf).map_err(at)?;
                // Wireshark: the PPPoE length field bounds the PPP frame.
                self.cap(off + pppoe::HEADER_LEN, usize::from(h.length()));
                (Step::Ppp, off + pppoe::HEADER_LEN)
            }
            Step::Ppp | Step::PppHdlc => {
                let at = |k| stop(Layer::Link, off, k);
                if matches!(step, Step::PppHdlc) && ppp::is_cisco_hdlc(buf) {
                    let etype = ppp::cisco_hdlc_ethertype(buf).map_err(at)?;
                    return Ok((
                        Step::EtherType(etype, Layer::Link),
                        off + ppp::CHDLC_HEADER_LEN,
                    ));
                }
                let h = if matches!(step, Step::PppHdlc) {
                    PppSlice::from_hdlc_slice(buf)
                } else {
                    PppSlice::from_slice(buf)
                }
                .map_err(at)?;
                let next = match h.protocol() {
                    ppp::proto::IPV4 => Step::Ip,
                    ppp::proto::IPV6 => Step::Ipv6,
                    ppp::proto::MPLS | ppp::proto::MPLS_MULTICAST => Step::Mpls,
                    _ => return Err(at(StopKind::NotIp)),
                };
                (next, off + h.header_len())
            }
            _ => unreachable_step(step, off)?,
        })
    }

    /// IP by version, IPv4, IPv6, and an authentication header after IPv4.
    fn ip_step(&mut self, step: Step, off: usize) -> Next {
        let buf = self.bytes(off);
        Ok(match step {
            Step::Ip => match buf.first().map(|b| b >> 4) {
                Some(4) => (Step::Ipv4, off),
                Some(6) => (Step::Ipv6, off),
                Some(_) => {
                    return Err(stop(
                        Layer::Ip,
                        off,
                        StopKind::Malformed("IP version is not 4 or 6"),
                    ));
                }
                None => return Err(stop(Layer::Ip, off, crate::bytes::truncated(1, 0))),
            },
            Step::Ipv4 => self.ipv4(off)?,
            Step::Ipv6 => self.ipv6(off)?,
            Step::Ah => {
                let at = |k| stop(Layer::IpExt, off, k);
                let ah = ExtSlice::from_slice(proto::AH, buf).map_err(at)?;
                self.set_ip_proto(ah.next_header());
                (
                    ip_proto_step(ah.next_header(), off + ah.header_len())?,
                    off + ah.header_len(),
                )
            }
            _ => unreachable_step(step, off)?,
        })
    }

    /// Tunnel headers (GRE, ERSPAN, VXLAN, Geneve, GTP-U, AYIYA, Teredo, L2TP, CAPWAP).
    fn tunnel_step(&mut self, step: Step, off: usize) -> Next {
        let buf = self.bytes(off);
        Ok(match step {
            Step::Gre => {
                let at = |k| stop(Layer::Tunnel, off, k);
                let g = GreSlice::from_slice(buf).map_err(at)?;
                let next = off + g.header_len();
                let step = match g.protocol() {
                    // Wireshark: without a GRE sequence number, 0x88be is ERSPAN type I,
                    // which has no ERSPAN header.
                    ethertype::ERSPAN_II if g.flags() & gre::FLAG_SEQUENCE == 0 => Step::Ethernet,
                    ethertype::ERSPAN_II | ethertype::ERSPAN_III => Step::Erspan,
                    gre::PROTO_PPP => Step::PppHdlc,
                    ethertype::ARUBA_WLAN => Step::Wlan(false),
                    other => Step::EtherType(other, Layer::Tunnel),
                };
                (step, next)
            }
            Step::Erspan => {
                let at = |k| stop(Layer::Tunnel, off, k);
                let e = ErspanSlice::from_slice(buf).map_err(at)?;
                (Step::Ethernet, off + e.header_len())
            }
            Step::Vxlan => {
                let at = |k| stop(Layer::Tunnel, off, k);
                VxlanSlice::from_slice(buf).map_err(at)?;
                (Step::Ethernet, off + vxlan::HEADER_LEN)
            }
            Step::Geneve => {
                let at = |k| stop(Layer::Tunnel, off, k);
                let g = GeneveSlice::from_slice(buf).map_err(at)?;
                (
                    Step::EtherType(g.protocol(), Layer::Tunnel),
                    off + g.header_len(),
                )
            }
            Step::GtpU => {
                let at = |k| stop(Layer::Tunnel, off, k);
                let g = GtpUSlice::from_slice(buf).map_err(at)?;
                if g.message_type() != gtp::MSG_G_PDU {
                    return Err(at(StopKind::NotIp));
                }
                // Wireshark: the length field (bytes after the first 8) bounds the payload.
                self.cap(off + gtp::MIN_HEADER_LEN, usize::from(g.length()));
                let next = off + g.header_len();
                // Wireshark's GTP dissector: IPv4 if the first byte is 0x45..=0x4e, IPv6
                // if the first nibble is 6, anything else is not IP.
                match g.payload().first() {
                    Some(0x45..=0x4e) => (Step::Ipv4, next),
                    Some(b) if b >> 4 == 6 => (Step::Ipv6, next),
                    Some(_) => return Err(stop(Layer::Tunnel, next, StopKind::NotIp)),
                    None => return Err(stop(Layer::Tunnel, next, crate::bytes::truncated(1, 0))),
                }
            }
            Step::Ayiya => {
                let at = |k| stop(Layer::Tunnel, off, k);
                let a = AyiyaSlice::from_slice(buf).map_err(at)?;
                if a.opcode() != ayiya::OPCODE_FORWARD {
                    return Err(at(StopKind::NotIp));
                }
                let next = off + a.header_len();
                (ip_proto_step(a.next_header(), next)?, next)
            }
            Step::Teredo => {
                let at = |k| stop(Layer::Tunnel, off, k);
                let t = TeredoSlice::from_slice(buf).map_err(at)?;
                (Step::Ipv6, off + t.header_len())
            }
            Step::VxlanGpe => {
                let at = |k| stop(Layer::Tunnel, off, k);
                let v = VxlanSlice::from_slice(buf).map_err(at)?;
                let next = off + vxlan::HEADER_LEN;
                let step = match v.gpe_next_protocol() {
                    vxlan::gpe::IPV4 => Step::Ip,
                    vxlan::gpe::IPV6 => Step::Ipv6,
                    vxlan::gpe::ETHERNET => Step::Ethernet,
                    vxlan::gpe::MPLS => Step::Mpls,
                    _ => return Err(at(StopKind::NotIp)),
                };
                (step, next)
            }
            Step::L2tp => {
                let at = |k| stop(Layer::Tunnel, off, k);
                let l = L2tpSlice::from_slice(buf).map_err(at)?;
                if l.is_control() {
                    return Err(at(StopKind::NotIp));
                }
                if let Some(len) = l.length() {
                    self.cap(off, usize::from(len));
                }
                (Step::PppHdlc, off + l.header_len())
            }
            Step::Capwap => {
                let at = |k| stop(Layer::Tunnel, off, k);
                let c = CapwapSlice::from_slice(buf).map_err(at)?;
                if c.is_fragment() {
                    return Err(at(StopKind::Fragment));
                }
                let next = off + c.header_len();
                match (c.native_frame(), c.wbid()) {
                    // Wireshark swaps the frame-control bytes by default (Cisco APs).
                    (true, capwap::WBID_IEEE80211) => (Step::Wlan(true), next),
                    (true, _) => return Err(at(StopKind::NotIp)),
                    (false, _) => (Step::Ethernet, next),
                }
            }
            _ => unreachable_step(step, off)?,
        })
    }

    /// After an Ethernet type/length field: an EtherType, or an 802.3 length bounding the
    /// LLC payload.
    fn type_or_length(&mut self, type_len: u16, next: usize, layer: Layer) -> (Step, usize) {
        if type_len <= ethertype::MAX_802_3_LEN {
            self.cap(next, usize::from(type_len));
            (Step::Llc, next)
        } else {
            (Step::EtherType(type_len, layer), next)
        }
    }

    fn set_ip_proto(&mut self, p: u8) {
        if let Some(ip) = self.view.ip.as_mut() {
            ip.proto = p;
        }
    }

    fn ipv4(&mut self, off: usize) -> Next {
        let at = |k| stop(Layer::Ip, off, k);
        let ip = Ipv4Slice::from_slice(self.bytes(off)).map_err(at)?;
        let header_len = ip.header_len();
        let total = match usize::from(ip.total_len()) {
            // Wireshark (TSO support on by default): a zero total length means "all of it".
            0 => self.reported(off),
            n if n < header_len => {
                return Err(at(StopKind::Malformed(
                    "IPv4 total length below header length",
                )));
            }
            n => n,
        };
        self.cap(off, total);
        let fragment = ip.is_fragment();
        self.view.ip = Some(IpInfo {
            src: IpAddr::V4(ip.src()),
            dst: IpAddr::V4(ip.final_destination()),
            proto: ip.protocol(),
            fragment,
            ttl: ip.ttl(),
            ident: ip.ident(),
            offset: sat16(off),
        });
        if fragment {
            return Err(at(StopKind::Fragment));
        }
        let next = off + header_len;
        let step = match ip.protocol() {
            proto::AH => Step::Ah,
            p => ip_proto_step(p, next)?,
        };
        Ok((step, next))
    }

    fn ipv6(&mut self, off: usize) -> Next {
        let at = |k| stop(Layer::Ip, off, k);
        let ip = Ipv6Slice::from_slice(self.bytes(off)).map_err(at)?;
        let mut next_header = ip.next_header();
        let mut next = off + ipv6::HEADER_LEN;
        let mut payload_len = usize::from(ip.payload_len());
        if payload_len == 0 {
            // A jumbogram's length is in the hop-by-hop header (RFC 2675); otherwise a zero
            // length is a TSO capture: use what was on the wire.
            let jumbo = match next_header {
                proto::HOPOPTS => ExtSlice::from_slice(proto::HOPOPTS, self.bytes(next))
                    .ok()
                    .and_then(|h| h.jumbo_len()),
                _ => None,
            };
            payload_len = match jumbo {
                Some(n) => usize::try_from(n).unwrap_or(usize::MAX),
                None => self.reported(next),
            };
        }
        self.cap(next, payload_len);
        self.view.ip = Some(IpInfo {
            src: IpAddr::V6(ip.src()),
            dst: IpAddr::V6(ip.dst()),
            proto: next_header,
            fragment: false,
            ttl: ip.hop_limit(),
            ident: 0,
            offset: sat16(off),
        });
        while ext::is_extension(next_header) {
            let at = |k| stop(Layer::IpExt, next, k);
            let e = ExtSlice::from_slice(next_header, self.bytes(next)).map_err(at)?;
            if e.is_fragment() {
                if let Some(ip) = self.view.ip.as_mut() {
                    ip.fragment = true;
                    ip.proto = e.next_header();
                }
                return Err(at(StopKind::Fragment));
            }
            next_header = e.next_header();
            next += e.header_len();
            self.set_ip_proto(next_header);
        }
        Ok((ip_proto_step(next_header, next)?, next))
    }

    fn udp(&mut self, off: usize) -> Next {
        let at = |k| stop(Layer::Udp, off, k);
        let u = UdpSlice::from_slice(self.bytes(off)).map_err(at)?;
        let over_ipv6 = matches!(
            self.view.ip,
            Some(IpInfo {
                src: IpAddr::V6(_),
                ..
            })
        );
        match usize::from(u.length()) {
            // Wireshark: a zero length means "the rest" only for IPv6 (jumbograms, TSO).
            0 if over_ipv6 => {}
            n if n < udp::HEADER_LEN => {
                return Err(at(StopKind::Malformed("UDP length below 8")));
            }
            n => self.cap(off, n),
        }
        let step = match udp::tunnel_port(u.src_port(), u.dst_port(), &TUNNEL_PORTS) {
            Some(port::VXLAN) => Step::Vxlan,
            Some(port::GENEVE) => Step::Geneve,
            Some(port::GTP_U) => Step::GtpU,
            Some(port::GRE_IN_UDP) => Step::Gre,
            Some(port::AYIYA) => Step::Ayiya,
            Some(port::CAPWAP_DATA) => Step::Capwap,
            Some(port::TEREDO) => Step::Teredo,
            Some(port::VXLAN_GPE) => Step::VxlanGpe,
            Some(port::L2TP) => Step::L2tp,
            _ => return Err(at(StopKind::NotTcp { proto: proto::UDP })),
        };
        Ok((step, off + udp::HEADER_LEN))
    }

    fn tcp(&mut self, off: usize) -> Result<(), DecodeStop> {
        let at = |k| stop(Layer::Tcp, off, k);
        let t = TcpSlice::from_slice(self.bytes(off)).map_err(at)?;
        let header_len = t.header_len();
        // `bytes()` never reaches past `wire_end`, so the header fits in the wire length.
        let payload_len = self.reported(off).saturating_sub(header_len);
        self.view.tcp = Some(TcpHeader {
            src_port: t.src_port(),
            dst_port: t.dst_port(),
            seq: t.seq(),
            ack: t.ack(),
            flags: t.flags(),
            window: t.window(),
            header_len: header_len as u8,
            urgent: t.urgent(),
            options: TcpOptions::parse(t.options_raw()),
            payload_len: u32::try_from(payload_len).unwrap_or(u32::MAX),
            payload: t.rest(),
        });
        Ok(())
    }
}

/// UDP ports of the tunnels the walk follows.
const TUNNEL_PORTS: [u16; 9] = [
    port::VXLAN,
    port::GENEVE,
    port::GTP_U,
    port::GRE_IN_UDP,
    port::AYIYA,
    port::CAPWAP_DATA,
    port::TEREDO,
    port::VXLAN_GPE,
    port::L2TP,
];

/// LLC SAP of IP (DSAP = SSAP = 0x06).
const LLC_SAP_IP: u8 = 0x06;
/// SNAP OUI of encapsulated Ethernet (RFC 1042).
const OUI_ENCAP_ETHERNET: u32 = 0x00_0000;
/// SNAP OUI of Cisco's 802.1H-style bridge tunnel encapsulation (also EtherTypes).
const OUI_CISCO_90: u32 = 0x00_00f8;

/// Where an EtherType leads.
fn ethertype_step(etype: u16, layer: Layer, off: usize) -> Result<Step, DecodeStop> {
    Ok(match etype {
        // Wireshark's "ip" dissector sniffs the version nibble.
        ethertype::IPV4 => Step::Ip,
        ethertype::IPV6 => Step::Ipv6,
        ethertype::VLAN | ethertype::QINQ | ethertype::QINQ_OLD => Step::Vlan,
        ethertype::MPLS | ethertype::MPLS_MULTICAST => Step::Mpls,
        ethertype::PPPOE_SESSION => Step::Pppoe,
        ethertype::TEB => Step::Ethernet,
        ethertype::ETAG => Step::Tag(tag::ETAG_LEN),
        ethertype::VNTAG => Step::Tag(tag::VNTAG_LEN),
        ethertype::FABRICPATH => Step::FabricPath,
        _ => return Err(stop(layer, off, StopKind::NotIp)),
    })
}

/// Where an IP protocol number leads (after IPv6 extension headers).
fn ip_proto_step(p: u8, off: usize) -> Result<Step, DecodeStop> {
    Ok(match p {
        proto::TCP => Step::Tcp,
        proto::UDP => Step::Udp,
        proto::IPIP => Step::Ip,
        proto::IPV6 => Step::Ipv6,
        proto::GRE => Step::Gre,
        other => return Err(stop(Layer::Ip, off, StopKind::NotTcp { proto: other })),
    })
}

/// The step after an SLL or SLL2 header.
fn sll_step(hatype: u16, protocol: u16, base: usize) -> Result<Step, DecodeStop> {
    let at = |k| stop(Layer::Link, base, k);
    if hatype == sll::ARPHRD_NETLINK {
        return Err(at(StopKind::NotIp));
    }
    if protocol > sll::MAX_LINUX_PROTO {
        return Ok(Step::EtherType(protocol, Layer::Link));
    }
    match protocol {
        sll::PROTO_802_2 => Ok(Step::Llc),
        sll::PROTO_ETHERNET => Ok(Step::Ethernet),
        sll::PROTO_PPPHDLC => Ok(Step::PppHdlc),
        _ => Err(at(StopKind::NotIp)),
    }
}
