//! Tests of the whole walk: literal frames for every link type and tunnel, truncation at
//! every length, and the length rules (padding, TSO, snaplen, wire-length cap).

use std::net::{IpAddr, Ipv4Addr};

use super::*;
use crate::error::{Layer, StopKind};

// ============================================================================
// Frame builders (tests only: the decoder itself never allocates)
// ============================================================================

const MAC_A: [u8; 6] = [0x00, 0x11, 0x22, 0x33, 0x44, 0x55];
const MAC_B: [u8; 6] = [0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb];

/// A TCP header (ACK|PSH, seq 1000, ack 2000, window 512) with `options`, then `payload`.
fn tcp(options: &[u8], payload: &[u8]) -> Vec<u8> {
    assert_eq!(options.len() % 4, 0);
    let offset = (20 + options.len()) / 4;
    let mut t = vec![
        0x30,
        0x39,
        0x00,
        0x50, // ports 12345 -> 80
        0x00,
        0x00,
        0x03,
        0xe8, // seq 1000
        0x00,
        0x00,
        0x07,
        0xd0, // ack 2000
        (offset as u8) << 4,
        0x18, // ACK PSH
        0x02,
        0x00, // window 512
        0x00,
        0x00,
        0x00,
        0x00, // checksum, urgent
    ];
    t.extend_from_slice(options);
    t.extend_from_slice(payload);
    t
}

/// An IPv4 header (no options) with the right total length, then `payload`.
fn ipv4(protocol: u8, payload: &[u8]) -> Vec<u8> {
    ipv4_with(protocol, payload, 20 + payload.len() as u16, 0)
}

/// An IPv4 header with an explicit total length and flags/fragment word.
fn ipv4_with(protocol: u8, payload: &[u8], total_len: u16, flags_frag: u16) -> Vec<u8> {
    let mut h = vec![0x45, 0x00];
    h.extend_from_slice(&total_len.to_be_bytes());
    h.extend_from_slice(&[0x12, 0x34]);
    h.extend_from_slice(&flags_frag.to_be_bytes());
    h.extend_from_slice(&[64, protocol, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2]);
    h.extend_from_slice(payload);
    h
}

/// An IPv6 header with the right payload length, then `payload` (extension headers
/// included by the caller).
fn ipv6(next_header: u8, payload: &[u8]) -> Vec<u8> {
    ipv6_with(next_header, payload, payload.len() as u16)
}

fn ipv6_with(next_header: u8, payload: &[u8], payload_len: u16) -> Vec<u8> {
    let mut h = vec![0x60, 0, 0, 0];
    h.extend_from_slice(&payload_len.to_be_bytes());
    h.extend_from_slice(&[next_header, 63]);
    h.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
    h.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
    h.extend_from_slice(payload);
    h
}

/// An Ethernet II header with `ethertype`, then `payload`.
fn eth(ethertype: u16, payload: &[u8]) -> Vec<u8> {
    let mut f = MAC_A.to_vec();
    f.extend_from_slice(&MAC_B);
    f.extend_from_slice(&ethertype.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// A UDP header with the right length, then `payload`.
fn udp(src: u16, dst: u16, payload: &[u8]) -> Vec<u8> {
    let mut u = src.to_be_bytes().to_vec();
    u.extend_from_slice(&dst.to_be_bytes());
    u.extend_from_slice(&(8 + payload.len() as u16).to_be_bytes());
    u.extend_from_slice(&[0, 0]);
    u.extend_from_slice(payload);
    u
}

fn cat(parts: &[&[u8]]) -> Vec<u8> {
    parts.concat()
}

/// Decodes a complete frame (orig_len = captured length).
fn full(link: LinkType, f: &[u8]) -> PacketView<'_> {
    decode(link, f, f.len() as u32)
}

/// Asserts a TCP header was found with `payload_len`, inside IP at `ip_offset`.
#[track_caller]
fn assert_tcp(v: &PacketView<'_>, payload_len: u32, ip_offset: u16) {
    assert_eq!(v.stop, None, "unexpected stop");
    let t = v.tcp.expect("tcp");
    assert_eq!(t.payload_len, payload_len, "payload_len");
    assert_eq!((t.src_port, t.dst_port), (12345, 80));
    let ip = v.ip.expect("ip");
    assert_eq!(ip.offset, ip_offset, "ip offset");
    assert_eq!(ip.proto, 6);
    assert!(!ip.fragment);
}

/// Asserts no TCP and a stop of `kind` at `layer`, `offset`.
#[track_caller]
fn assert_stop(v: &PacketView<'_>, layer: Layer, offset: u16, kind: StopKind) {
    assert!(v.tcp.is_none(), "unexpected tcp");
    assert_eq!(
        v.stop,
        Some(DecodeStop {
            layer,
            kind,
            offset
        })
    );
}

/// Decodes every prefix of `f` (as a snaplen would cut it): never panics; TCP appears
/// exactly when the TCP header ends inside the prefix, always with the same
/// `payload_len`; otherwise a stop is recorded.
#[track_caller]
fn check_every_truncation(link: LinkType, f: &[u8]) {
    let whole = full(link, f);
    let t = whole.tcp.expect("whole frame has tcp");
    // Where the payload starts in `f`, i.e. where the TCP header ends.
    let tcp_end = t.payload.as_ptr() as usize - f.as_ptr() as usize;
    for len in 0..f.len() {
        let v = decode(link, &f[..len], f.len() as u32);
        match v.tcp {
            Some(cut) => {
                assert!(len >= tcp_end, "tcp at {len} before header end {tcp_end}");
                assert_eq!(
                    cut.payload_len, t.payload_len,
                    "snaplen changed payload_len"
                );
                let captured = (len - tcp_end).min(t.payload.len());
                assert_eq!(cut.payload, &t.payload[..captured]);
            }
            None => {
                assert!(
                    len < tcp_end,
                    "no tcp at {len} though header ends at {tcp_end}"
                );
                let stop = v.stop.expect("a stop");
                assert!(
                    matches!(stop.kind, StopKind::Truncated { .. }),
                    "at {len}: {stop}"
                );
            }
        }
    }
}

// ============================================================================
// Ethernet, IPv4, TCP and the length rules
// ============================================================================

#[test]
fn ethernet_ipv4_tcp_deconstruct() {
    let opts = [0x01, 0x01, 0x08, 0x0a, 0, 0, 0, 7, 0, 0, 0, 9];
    let f = eth(0x0800, &ipv4(6, &tcp(&opts, b"hello")));
    let v = full(LinkType::ETHERNET, &f);
    assert_tcp(&v, 5, 14);
    let ip = v.ip.unwrap();
    assert_eq!(ip.src, IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)));
    assert_eq!(ip.dst, IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)));
    assert_eq!(ip.ttl, 64);
    let t = v.tcp.unwrap();
    assert_eq!(t.seq, SeqNum(1000));
    assert_eq!(t.ack, SeqNum(2000));
    assert!(t.flags.ack() && t.flags.has(TcpFlags::PSH) && !t.flags.syn());
    assert_eq!(t.window, 512);
    assert_eq!(t.header_len, 32);
    assert_eq!(t.urgent, 0);
    assert_eq!(t.options.timestamps, Some((7, 9)));
    assert!(!t.options.malformed);
    assert_eq!(t.payload, b"hello");
    check_every_truncation(LinkType::ETHERNET, &f);
}

#[test]
fn ethernet_padding_is_not_payload() {
    // 40-byte IP datagram padded to the 60-byte Ethernet minimum (plus a 4-byte FCS).
    let mut f = eth(0x0800, &ipv4(6, &tcp(&[], &[])));
    f.resize(64, 0xee);
    let v = full(LinkType::ETHERNET, &f);
    assert_tcp(&v, 0, 14);
    assert!(v.tcp.unwrap().payload.is_empty());
}

#[test]
fn snaplen_does_not_change_payload_len() {
    let f = eth(0x0800, &ipv4(6, &tcp(&[], &[0xab; 1400])));
    // A 96-byte snaplen: the wire length still says 1400 bytes of payload.
    let v = decode(LinkType::ETHERNET, &f[..96], f.len() as u32);
    assert_tcp(&v, 1400, 14);
    assert_eq!(v.tcp.unwrap().payload.len(), 96 - 54);
}

#[test]
fn ipv4_total_length_zero_is_tso() {
    let mut f = eth(0x0800, &ipv4(6, &tcp(&[], &[1; 3000])));
    f[16] = 0;
    f[17] = 0;
    assert_tcp(&full(LinkType::ETHERNET, &f), 3000, 14);
    // With a snaplen, the wire length (not the captured one) still decides.
    let v = decode(LinkType::ETHERNET, &f[..100], f.len() as u32);
    assert_tcp(&v, 3000, 14);
}

#[test]
fn ipv4_total_length_beyond_the_wire_is_capped() {
    let f = eth(0x0800, &ipv4_with(6, &tcp(&[], &[7; 100]), 1500, 0));
    assert_tcp(&full(LinkType::ETHERNET, &f), 100, 14);
}

#[test]
fn ipv4_total_length_below_header_is_malformed() {
    let f = eth(0x0800, &ipv4_with(6, &tcp(&[], &[]), 19, 0));
    let v = full(LinkType::ETHERNET, &f);
    assert_stop(
        &v,
        Layer::Ip,
        14,
        StopKind::Malformed("IPv4 total length below header length"),
    );
    // IP options: IHL 6.
    let mut ip = ipv4(6, &tcp(&[], b"xy"));
    ip[0] = 0x46;
    ip.splice(20..20, [1, 1, 1, 0]);
    ip[3] += 4;
    let f = eth(0x0800, &ip);
    assert_tcp(&full(LinkType::ETHERNET, &f), 2, 14);
}

#[test]
fn ipv4_bad_header_fields() {
    let mut f = eth(0x0800, &ipv4(6, &tcp(&[], &[])));
    f[14] = 0x44; // IHL 4
    assert_stop(
        &full(LinkType::ETHERNET, &f),
        Layer::Ip,
        14,
        StopKind::Malformed("IPv4 header length below 20"),
    );
    f[14] = 0x35; // version 3
    assert_stop(
        &full(LinkType::ETHERNET, &f),
        Layer::Ip,
        14,
        StopKind::Malformed("IP version is not 4 or 6"),
    );
}

#[test]
fn ipv4_fragments_are_flagged_not_analysed() {
    for flags_frag in [0x2000u16, 0x0010, 0x2010] {
        let f = eth(0x0800, &ipv4_with(6, &tcp(&[], &[0; 16]), 56, flags_frag));
        let v = full(LinkType::ETHERNET, &f);
        assert_stop(&v, Layer::Ip, 14, StopKind::Fragment);
        assert!(v.ip.unwrap().fragment);
    }
    // DF alone is not a fragment.
    let f = eth(0x0800, &ipv4_with(6, &tcp(&[], &[0; 16]), 56, 0x4000));
    assert_tcp(&full(LinkType::ETHERNET, &f), 16, 14);
}

#[test]
fn tcp_header_problems() {
    let mut seg = tcp(&[], &[0; 8]);
    seg[12] = 0x40; // data offset 4
    let frame = eth(0x0800, &ipv4(6, &seg));
    let v = full(LinkType::ETHERNET, &frame);
    assert_stop(
        &v,
        Layer::Tcp,
        34,
        StopKind::Malformed("TCP data offset below 5"),
    );
    assert!(v.ip.is_some());
    seg[12] = 0xf0; // 60-byte header in a 28-byte segment
    let frame = eth(0x0800, &ipv4(6, &seg));
    let v = full(LinkType::ETHERNET, &frame);
    assert_stop(
        &v,
        Layer::Tcp,
        34,
        StopKind::Truncated {
            required: 60,
            available: 28,
        },
    );
}

#[test]
fn malformed_options_keep_the_segment() {
    let opts = [0x02, 0x04, 0x05, 0xb4, 0x08, 0x01, 0x00, 0x00];
    let frame = eth(0x0800, &ipv4(6, &tcp(&opts, &[])));
    let v = full(LinkType::ETHERNET, &frame);
    let t = v.tcp.unwrap();
    assert_eq!(t.options.mss, Some(1460));
    assert!(t.options.malformed);
}

#[test]
fn icmp_error_quoting_tcp_is_not_tcp() {
    let quoted = ipv4(6, &tcp(&[], &[])[..8]);
    let icmp = cat(&[&[3, 3, 0, 0, 0, 0, 0, 0], &quoted]);
    let frame = eth(0x0800, &ipv4(1, &icmp));
    let v = full(LinkType::ETHERNET, &frame);
    assert_stop(&v, Layer::Ip, 34, StopKind::NotTcp { proto: 1 });
    assert_eq!(v.ip.unwrap().proto, 1);
}

#[test]
fn udp_that_is_not_a_tunnel() {
    let frame = eth(0x0800, &ipv4(17, &udp(5353, 53, b"q")));
    let v = full(LinkType::ETHERNET, &frame);
    assert_stop(&v, Layer::Udp, 34, StopKind::NotTcp { proto: 17 });
}

#[test]
fn non_ip_ethertype() {
    let frame = eth(0x0806, &[0; 28]);
    let v = full(LinkType::ETHERNET, &frame);
    assert_stop(&v, Layer::Link, 14, StopKind::NotIp);
    assert!(v.ip.is_none());
}

// ============================================================================
// IPv6
// ============================================================================

#[test]
fn ipv6_with_extension_headers() {
    let seg = tcp(&[], b"abc");
    let hop = [60, 0, 1, 4, 0, 0, 0, 0]; // -> dst opts, PadN
    let dst = [43, 0, 1, 4, 0, 0, 0, 0]; // -> routing
    let rt = [6, 0, 0, 0, 0, 0, 0, 0]; // -> TCP
    let payload = cat(&[&hop, &dst, &rt, &seg]);
    let f = eth(0x86dd, &ipv6(0, &payload));
    let v = full(LinkType::ETHERNET, &f);
    assert_tcp(&v, 3, 14);
    assert_eq!(v.ip.unwrap().ttl, 63);
    check_every_truncation(LinkType::ETHERNET, &f);
}

#[test]
fn ipv6_fragments() {
    let seg = tcp(&[], b"abc");
    for frag in [
        [6, 0, 0x00, 0x01, 0, 0, 0, 1],
        [6, 0, 0x00, 0x08, 0, 0, 0, 1],
    ] {
        let f = eth(0x86dd, &ipv6(44, &cat(&[&frag, &seg])));
        let v = full(LinkType::ETHERNET, &f);
        assert_stop(&v, Layer::IpExt, 54, StopKind::Fragment);
        assert!(v.ip.unwrap().fragment);
    }
    // Atomic fragment (offset 0, M clear): a whole datagram.
    let atomic = [6, 0, 0, 0, 0, 0, 0, 1];
    let f = eth(0x86dd, &ipv6(44, &cat(&[&atomic, &seg])));
    assert_tcp(&full(LinkType::ETHERNET, &f), 3, 14);
}

#[test]
fn ipv4_authentication_header() {
    let ah = cat(&[&[6, 4, 0, 0], &[0; 20], &tcp(&[], b"abcd")]);
    let frame = eth(0x0800, &ipv4(51, &ah));
    let v = full(LinkType::ETHERNET, &frame);
    assert_tcp(&v, 4, 14);
}

#[test]
fn ipv6_mobility_header_is_not_stepped_over() {
    let mh = cat(&[&[6, 0, 0, 0, 0, 0, 0, 0], &tcp(&[], &[])]);
    let frame = eth(0x86dd, &ipv6(135, &mh));
    let v = full(LinkType::ETHERNET, &frame);
    assert_stop(&v, Layer::Ip, 54, StopKind::NotTcp { proto: 135 });
}

#[test]
fn ipv6_zero_payload_length() {
    let seg = tcp(&[], &[9; 2000]);
    // No jumbo option: a TSO capture, the wire length counts.
    let f = eth(0x86dd, &ipv6_with(6, &seg, 0));
    assert_tcp(
        &decode(LinkType::ETHERNET, &f[..80], f.len() as u32),
        2000,
        14,
    );
    // Jumbo payload option (RFC 2675) in the hop-by-hop header.
    let jumbo_len = (8 + seg.len()) as u32;
    let mut hop = vec![6, 0, 0xc2, 4];
    hop.extend_from_slice(&jumbo_len.to_be_bytes());
    let mut f = eth(0x86dd, &ipv6_with(0, &cat(&[&hop, &seg]), 0));
    f.extend_from_slice(&[0; 10]); // trailer beyond the jumbogram
    assert_tcp(&full(LinkType::ETHERNET, &f), 2000, 14);
}

#[test]
fn ipv6_payload_length_cut_and_padding() {
    let seg = tcp(&[], &[1; 10]);
    let mut f = eth(0x86dd, &ipv6(6, &seg));
    f.extend_from_slice(&[0; 6]);
    assert_tcp(&full(LinkType::ETHERNET, &f), 10, 14);
    let f = eth(0x86dd, &ipv6_with(6, &seg, 12));
    assert_stop(
        &full(LinkType::ETHERNET, &f),
        Layer::Tcp,
        54,
        StopKind::Truncated {
            required: 20,
            available: 12,
        },
    );
}

// ============================================================================
// Link types
// ============================================================================

fn ip_tcp() -> Vec<u8> {
    ipv4(6, &tcp(&[], b"0123456789"))
}

#[test]
fn raw_ip_link_types() {
    let v4 = ip_tcp();
    let v6 = ipv6(6, &tcp(&[], b"0123456789"));
    for link in [LinkType::RAW, LinkType::RAW_BSD, LinkType::RAW_BSD14] {
        assert_tcp(&full(link, &v4), 10, 0);
        assert_tcp(&full(link, &v6), 10, 0);
    }
    assert_tcp(&full(LinkType::IPV4, &v4), 10, 0);
    // Like Wireshark, LINKTYPE_IPV4 sniffs the version too.
    assert_tcp(&full(LinkType::IPV4, &v6), 10, 0);
    assert_tcp(&full(LinkType::IPV6, &v6), 10, 0);
    assert_stop(
        &full(LinkType::IPV6, &v4),
        Layer::Ip,
        0,
        StopKind::Malformed("IPv6 version is not 6"),
    );
    check_every_truncation(LinkType::RAW, &v6);
}

#[test]
fn null_and_loop() {
    let v4 = ip_tcp();
    let v6 = ipv6(6, &tcp(&[], b"0123456789"));
    for hdr in [[2, 0, 0, 0], [0, 0, 0, 2]] {
        assert_tcp(&full(LinkType::NULL, &cat(&[&hdr, &v4])), 10, 4);
    }
    for family in [24u32, 28, 30] {
        for hdr in [family.to_le_bytes(), family.to_be_bytes()] {
            assert_tcp(&full(LinkType::NULL, &cat(&[&hdr, &v6])), 10, 4);
        }
    }
    // Linux's AF_INET6 is not a BSD family: tshark 4.0 shows it as data.
    let linux = cat(&[&10u32.to_le_bytes(), &v6]);
    assert_stop(
        &full(LinkType::NULL, &linux),
        Layer::Link,
        0,
        StopKind::NotIp,
    );
    assert_tcp(&full(LinkType::LOOP, &cat(&[&[0, 0, 0, 2], &v4])), 10, 4);
    assert_stop(
        &full(LinkType::NULL, &cat(&[&[7, 0, 0, 0], &v4])),
        Layer::Link,
        0,
        StopKind::NotIp,
    );
    check_every_truncation(LinkType::NULL, &cat(&[&[2, 0, 0, 0], &v4]));
}

#[test]
fn linux_cooked_v1_and_v2() {
    let sll = cat(&[
        &[0, 4, 0, 1, 0, 6, 1, 2, 3, 4, 5, 6, 0, 0, 0x08, 0x00],
        &ip_tcp(),
    ]);
    assert_tcp(&full(LinkType::LINUX_SLL, &sll), 10, 16);
    check_every_truncation(LinkType::LINUX_SLL, &sll);
    let sll2 = cat(&[
        &[
            0x08, 0x00, 0, 0, 0, 0, 0, 2, 0, 1, 0, 6, 1, 2, 3, 4, 5, 6, 0, 0,
        ],
        &ip_tcp(),
    ]);
    assert_tcp(&full(LinkType::LINUX_SLL2, &sll2), 10, 20);
    check_every_truncation(LinkType::LINUX_SLL2, &sll2);
    // Netlink hardware type is never IP.
    let mut nl = sll.clone();
    nl[2..4].copy_from_slice(&824u16.to_be_bytes());
    assert_stop(
        &full(LinkType::LINUX_SLL, &nl),
        Layer::Link,
        0,
        StopKind::NotIp,
    );
}

#[test]
fn ppp_framings() {
    let ip = ip_tcp();
    for hdr in [
        &[0xff, 0x03, 0x00, 0x21][..],
        &[0x00, 0x21],
        &[0xff, 0x03, 0x21],
        &[0x21],
    ] {
        let f = cat(&[hdr, &ip]);
        assert_tcp(&full(LinkType::PPP, &f), 10, hdr.len() as u16);
        assert_tcp(&full(LinkType::PPP_HDLC, &f), 10, hdr.len() as u16);
    }
    let v6 = cat(&[&[0xff, 0x03, 0x00, 0x57], &ipv6(6, &tcp(&[], b"x"))]);
    assert_tcp(&full(LinkType::PPP, &v6), 1, 4);
    let lcp = [0xff, 0x03, 0xc0, 0x21, 1, 1, 0, 4];
    assert_stop(&full(LinkType::PPP, &lcp), Layer::Link, 0, StopKind::NotIp);
    let chdlc = cat(&[&[0x0f, 0x00, 0x08, 0x00], &ip]);
    assert_tcp(&full(LinkType::C_HDLC, &chdlc), 10, 4);
    assert_tcp(&full(LinkType::PPP, &chdlc), 10, 4);
}

#[test]
fn nflog_payload_attribute() {
    let ip = ip_tcp();
    let mut f = vec![2, 0, 0, 0];
    f.extend_from_slice(&[8, 0, 1, 0, 0x08, 0x00, 3, 0]); // NFULA_PACKET_HDR
    f.extend_from_slice(&((4 + ip.len()) as u16).to_le_bytes());
    f.extend_from_slice(&[9, 0]);
    let at = f.len();
    f.extend_from_slice(&ip);
    assert_tcp(&full(LinkType::NFLOG, &f), 10, at as u16);
    let no_payload = [2, 0, 0, 0, 8, 0, 1, 0, 0, 0, 0, 0];
    assert_stop(
        &full(LinkType::NFLOG, &no_payload),
        Layer::Link,
        0,
        StopKind::NotIp,
    );
}

#[test]
fn unsupported_link_type() {
    assert_stop(
        &full(LinkType(147), &ip_tcp()),
        Layer::Link,
        0,
        StopKind::UnsupportedLinkType(147),
    );
}

#[test]
fn wireless_and_legacy_links() {
    let llc_ip = cat(&[&[0xaa, 0xaa, 0x03, 0, 0, 0, 0x08, 0x00], &ip_tcp()]);
    // 802.11 QoS data, To DS.
    let mut wlan = vec![0x88, 0x01, 0, 0];
    wlan.extend_from_slice(&[1; 18]);
    wlan.extend_from_slice(&[0x10, 0x00, 0x00, 0x00]);
    let f = cat(&[&wlan, &llc_ip]);
    assert_tcp(&full(LinkType::IEEE802_11, &f), 10, 34);
    let radiotap = cat(&[&[0, 0, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0], &f]);
    assert_tcp(&full(LinkType::IEEE802_11_RADIOTAP, &radiotap), 10, 46);
    let ppi = cat(&[&[0, 0, 8, 0, 105, 0, 0, 0], &f]);
    assert_tcp(&full(LinkType::PPI, &ppi), 10, 42);
    check_every_truncation(LinkType::PPI, &ppi);
    // FDDI: frame control 0x50, two addresses, LLC.
    let fddi = cat(&[&[0x50], &MAC_A, &MAC_B, &llc_ip]);
    assert_tcp(&full(LinkType::FDDI, &fddi), 10, 21);
    // ARCNET (Linux): RFC 1201 IP.
    let arc = cat(&[&[0xbe, 0x50, 0xc0, 0x00, 0xd4, 0x00, 0x01, 0x6b], &ip_tcp()]);
    assert_tcp(&full(LinkType::ARCNET_LINUX, &arc), 10, 8);
}

#[test]
fn ip_over_infiniband() {
    let ipoib = |etype: u16, payload: &[u8]| {
        let mut f = vec![0u8; 40];
        f.extend_from_slice(&etype.to_be_bytes());
        f.extend_from_slice(&[0, 0]);
        f.extend_from_slice(payload);
        f
    };
    let v4 = ipoib(0x0800, &ip_tcp());
    assert_tcp(&full(LinkType::IPOIB, &v4), 10, 44);
    check_every_truncation(LinkType::IPOIB, &v4);
    let v6 = ipoib(0x86dd, &ipv6(6, &tcp(&[], b"0123456789")));
    assert_tcp(&full(LinkType::IPOIB, &v6), 10, 44);
    // Wireshark's IP dissector sniffs the version: IPv6 under the IPv4 type is IPv6.
    let sniffed = ipoib(0x0800, &ipv6(6, &tcp(&[], b"0123456789")));
    assert_tcp(&full(LinkType::IPOIB, &sniffed), 10, 44);
    // Under the IPv6 type, IPv4 is a wrong version; other types are not followed.
    assert_stop(
        &full(LinkType::IPOIB, &ipoib(0x86dd, &ip_tcp())),
        Layer::Ip,
        44,
        StopKind::Malformed("IPv6 version is not 6"),
    );
    let vlan = ipoib(0x8100, &cat(&[&[0, 1, 0x08, 0x00], &ip_tcp()]));
    assert_stop(
        &full(LinkType::IPOIB, &vlan),
        Layer::Link,
        0,
        StopKind::NotIp,
    );
    // A 4-byte header without the pseudo header is too short for what tshark reads.
    let bare = cat(&[&[0x08, 0x00, 0, 0], &ip_tcp()[..30]]);
    assert_stop(
        &full(LinkType::IPOIB, &bare),
        Layer::Link,
        0,
        StopKind::Truncated {
            required: 44,
            available: 34,
        },
    );
}

// ============================================================================
// Shims: VLAN, 802.3/LLC, MPLS, PPPoE, vendor tags
// ============================================================================

#[test]
fn vlan_tags_any_depth() {
    let ip = ip_tcp();
    let one = eth(0x8100, &cat(&[&[0x00, 0x64, 0x08, 0x00], &ip]));
    assert_tcp(&full(LinkType::ETHERNET, &one), 10, 18);
    let qinq = eth(
        0x88a8,
        &cat(&[
            &[0x00, 0x0a, 0x81, 0x00],
            &[0x00, 0x64, 0x91, 0x00],
            &[0, 1, 0x08, 0x00],
            &ip,
        ]),
    );
    assert_tcp(&full(LinkType::ETHERNET, &qinq), 10, 26);
    check_every_truncation(LinkType::ETHERNET, &qinq);
    // Far too many tags.
    let mut deep = Vec::new();
    for _ in 0..200 {
        deep.extend_from_slice(&[0x00, 0x01, 0x81, 0x00]);
    }
    let frame = eth(0x8100, &deep);
    let v = full(LinkType::ETHERNET, &frame);
    assert_eq!(v.stop.map(|s| s.kind), Some(StopKind::TooDeep));
}

#[test]
fn ieee_802_3_with_snap() {
    let ip = ip_tcp();
    let llc = cat(&[&[0xaa, 0xaa, 0x03, 0, 0, 0, 0x08, 0x00], &ip]);
    let mut f = eth(llc.len() as u16, &llc);
    f.extend_from_slice(&[0; 8]); // padding after the 802.3 length
    assert_tcp(&full(LinkType::ETHERNET, &f), 10, 22);
    // An 802.3 length shorter than the datagram cuts it.
    let short = eth(30, &llc);
    assert_stop(
        &full(LinkType::ETHERNET, &short),
        Layer::Tcp,
        42,
        StopKind::Truncated {
            required: 20,
            available: 2,
        },
    );
    // Spanning tree LLC is not IP.
    let stp = eth(38, &[0x42, 0x42, 0x03, 0, 0, 0, 0, 0]);
    assert_stop(
        &full(LinkType::ETHERNET, &stp),
        Layer::Shim,
        14,
        StopKind::NotIp,
    );
}

#[test]
fn mpls_stacks() {
    let ip = ip_tcp();
    let two = eth(0x8847, &cat(&[&[0, 1, 0, 64, 0, 2, 1, 64], &ip]));
    assert_tcp(&full(LinkType::ETHERNET, &two), 10, 22);
    check_every_truncation(LinkType::ETHERNET, &two);
    let v6 = eth(0x8848, &cat(&[&[0, 1, 1, 64], &ipv6(6, &tcp(&[], b"z"))]));
    assert_tcp(&full(LinkType::ETHERNET, &v6), 1, 18);
    let cw = eth(0x8847, &cat(&[&[0, 1, 1, 64], &[0, 0, 0, 0], &ip]));
    assert_stop(
        &full(LinkType::ETHERNET, &cw),
        Layer::Shim,
        18,
        StopKind::NotIp,
    );
}

#[test]
fn pppoe_session() {
    let ip = ip_tcp();
    let ppp = cat(&[&[0x00, 0x21], &ip]);
    let mut hdr = vec![0x11, 0x00, 0x00, 0x01];
    hdr.extend_from_slice(&(ppp.len() as u16).to_be_bytes());
    let mut f = eth(0x8864, &cat(&[&hdr, &ppp]));
    f.extend_from_slice(&[0; 4]);
    assert_tcp(&full(LinkType::ETHERNET, &f), 10, 22);
    check_every_truncation(LinkType::ETHERNET, &f);
}

#[test]
fn vendor_tags() {
    let ip = ip_tcp();
    let etag = eth(0x893f, &cat(&[&[0, 0, 0, 1, 0, 0, 0x08, 0x00], &ip]));
    assert_tcp(&full(LinkType::ETHERNET, &etag), 10, 22);
    let vntag = eth(0x8926, &cat(&[&[0x80, 0, 0, 1, 0x08, 0x00], &ip]));
    assert_tcp(&full(LinkType::ETHERNET, &vntag), 10, 20);
    // FabricPath: the inner frame, then 4 bytes of FabricPath FCS.
    let inner = eth(0x0800, &ip);
    let mut fp = eth(0x8903, &cat(&[&[0, 0], &inner]));
    fp.extend_from_slice(&[0xde, 0xad, 0xbe, 0xef]);
    assert_tcp(&full(LinkType::ETHERNET, &fp), 10, 30);
}

// ============================================================================
// Tunnels
// ============================================================================

#[test]
fn ip_in_ip_reports_the_innermost_header() {
    let inner = ip_tcp();
    let f = eth(0x0800, &ipv4(4, &inner));
    assert_tcp(&full(LinkType::ETHERNET, &f), 10, 34);
    let six_in_four = eth(0x0800, &ipv4(41, &ipv6(6, &tcp(&[], b"0123456789"))));
    let v = full(LinkType::ETHERNET, &six_in_four);
    assert_tcp(&v, 10, 34);
    assert!(matches!(v.ip.unwrap().src, IpAddr::V6(_)));
    check_every_truncation(LinkType::ETHERNET, &six_in_four);
    // 6in4 whose inner packet is not version 6: Wireshark's IPv6 dissector stops there.
    let wrong = eth(0x0800, &ipv4(41, &inner));
    assert_stop(
        &full(LinkType::ETHERNET, &wrong),
        Layer::Ip,
        34,
        StopKind::Malformed("IPv6 version is not 6"),
    );
    // Truncated inside the inner IPv6 header.
    let v = decode(
        LinkType::ETHERNET,
        &six_in_four[..60],
        six_in_four.len() as u32,
    );
    assert_stop(
        &v,
        Layer::Ip,
        34,
        StopKind::Truncated {
            required: 40,
            available: 26,
        },
    );
    // The outer IP length bounds the inner datagram: 5 of its 10 payload bytes remain.
    let mut cut = ipv4(4, &inner);
    cut[3] -= 5;
    let v = full(LinkType::RAW, &cut);
    assert_tcp(&v, 5, 20);
    assert_eq!(v.tcp.unwrap().payload, b"01234");
    // Cut into the inner TCP header: no tcp.
    cut[3] -= 10;
    let v = full(LinkType::RAW, &cut);
    assert_stop(
        &v,
        Layer::Tcp,
        40,
        StopKind::Truncated {
            required: 20,
            available: 15,
        },
    );
}

#[test]
fn gre_variants() {
    let ip = ip_tcp();
    let plain = eth(0x0800, &ipv4(47, &cat(&[&[0, 0, 0x08, 0x00], &ip])));
    assert_tcp(&full(LinkType::ETHERNET, &plain), 10, 38);
    // Checksum + key + sequence, transparent Ethernet bridging.
    let teb = cat(&[
        &[0xb0, 0x00, 0x65, 0x58, 0, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0, 1],
        &eth(0x0800, &ip),
    ]);
    let f = eth(0x0800, &ipv4(47, &teb));
    assert_tcp(&full(LinkType::ETHERNET, &f), 10, 64);
    check_every_truncation(LinkType::ETHERNET, &f);
    // ERSPAN type II (GRE with a sequence number) and type I (without).
    let inner = eth(0x0800, &ip);
    let e2 = cat(&[
        &[0x10, 0x00, 0x88, 0xbe, 0, 0, 0, 1],
        &[0x10, 0, 0, 1, 0, 0, 0, 0],
        &inner,
    ]);
    assert_tcp(&full(LinkType::RAW, &ipv4(47, &e2)), 10, 50);
    let e1 = cat(&[&[0x00, 0x00, 0x88, 0xbe], &inner]);
    assert_tcp(&full(LinkType::RAW, &ipv4(47, &e1)), 10, 38);
    check_every_truncation(LinkType::RAW, &ipv4(47, &e1));
    // GRE version bits do not change how Wireshark reads a TEB or ERSPAN type I payload.
    for ver in [1u8, 2, 7] {
        let f = cat(&[&[0x00, ver, 0x65, 0x58], &inner]);
        assert_tcp(&full(LinkType::RAW, &ipv4(47, &f)), 10, 38);
        let f = cat(&[&[0x00, ver, 0x88, 0xbe], &inner]);
        assert_tcp(&full(LinkType::RAW, &ipv4(47, &f)), 10, 38);
    }
    // With a sequence number, the ERSPAN version field picks the header, whichever GRE
    // protocol announced it: version 2 under 0x88be is type III, 1 under 0x22eb type II.
    let gre_s = |proto: [u8; 2], erspan: &[u8]| {
        ipv4(
            47,
            &cat(&[&[0x10, 0x00], &proto, &[0, 0, 0, 1], erspan, &inner]),
        )
    };
    let v2 = [0x20, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0];
    let v1 = [0x10, 0, 0, 1, 0, 0, 0, 0];
    assert_tcp(&full(LinkType::RAW, &gre_s([0x88, 0xbe], &v2)), 10, 54);
    assert_tcp(&full(LinkType::RAW, &gre_s([0x22, 0xeb], &v1)), 10, 50);
    for ver in [0x00, 0x30, 0xf0] {
        let mut bad = v1;
        bad[0] = ver;
        assert_stop(
            &full(LinkType::RAW, &gre_s([0x88, 0xbe], &bad)),
            Layer::Tunnel,
            28,
            StopKind::Malformed("ERSPAN version is not 1 or 2"),
        );
    }
    // ERSPAN type III, with and without the platform sub-header.
    let mut hdr3 = vec![0x20, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0];
    let e3 = cat(&[&[0x10, 0x00, 0x22, 0xeb, 0, 0, 0, 1], &hdr3, &inner]);
    assert_tcp(&full(LinkType::RAW, &ipv4(47, &e3)), 10, 54);
    hdr3[11] = 0x01;
    hdr3.extend_from_slice(&[0; 8]);
    let e3o = cat(&[&[0x10, 0x00, 0x22, 0xeb, 0, 0, 0, 1], &hdr3, &inner]);
    assert_tcp(&full(LinkType::RAW, &ipv4(47, &e3o)), 10, 62);
    // PPTP (enhanced GRE carrying PPP).
    let pptp = cat(&[
        &[0x30, 0x01, 0x88, 0x0b, 0, 8, 0, 1, 0, 0, 0, 1],
        &[0xff, 0x03, 0x00, 0x21],
        &ip,
    ]);
    assert_tcp(&full(LinkType::RAW, &ipv4(47, &pptp)), 10, 36);
    // Aruba: 802.11 inside GRE.
    let mut wlan = vec![0x08, 0x01, 0, 0];
    wlan.extend_from_slice(&[1; 18]);
    wlan.extend_from_slice(&[0, 0]);
    let aruba = cat(&[
        &[0, 0, 0x82, 0x00],
        &wlan,
        &[0xaa, 0xaa, 0x03, 0, 0, 0, 0x08, 0x00],
        &ip,
    ]);
    assert_tcp(&full(LinkType::RAW, &ipv4(47, &aruba)), 10, 56);
}

#[test]
fn udp_tunnels() {
    let ip = ip_tcp();
    let inner = eth(0x0800, &ip);
    // VXLAN on either port.
    let vx = cat(&[&[0x08, 0, 0, 0, 0, 0, 1, 0], &inner]);
    for (s, d) in [(49152, 4789), (4789, 60000)] {
        let f = eth(0x0800, &ipv4(17, &udp(s, d, &vx)));
        assert_tcp(&full(LinkType::ETHERNET, &f), 10, 64);
    }
    let f = eth(0x0800, &ipv4(17, &udp(49152, 4789, &vx)));
    check_every_truncation(LinkType::ETHERNET, &f);
    // Geneve with 4 bytes of options, Ethernet and IP payloads.
    let gen_eth = cat(&[&[0x01, 0, 0x65, 0x58, 0, 0, 1, 0, 1, 2, 3, 4], &inner]);
    let f = eth(0x0800, &ipv4(17, &udp(50000, 6081, &gen_eth)));
    assert_tcp(&full(LinkType::ETHERNET, &f), 10, 68);
    let gen_ip = cat(&[&[0x00, 0, 0x08, 0x00, 0, 0, 1, 0], &ip]);
    let f = eth(0x0800, &ipv4(17, &udp(50000, 6081, &gen_ip)));
    assert_tcp(&full(LinkType::ETHERNET, &f), 10, 50);
    // GTP-U with an extension header.
    let mut gtp = cat(&[
        &[
            0x34, 0xff, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0x85, 0x01, 0x00, 0x01, 0x00,
        ],
        &ip,
    ]);
    let gtp_len = (gtp.len() - 8) as u16;
    gtp[2..4].copy_from_slice(&gtp_len.to_be_bytes());
    let f = eth(0x0800, &ipv4(17, &udp(2152, 2152, &gtp)));
    assert_tcp(&full(LinkType::ETHERNET, &f), 10, 58);
    check_every_truncation(LinkType::ETHERNET, &f);
    let echo = [0x32, 0x01, 0, 4, 0, 0, 0, 0, 0, 1, 0, 0];
    let f = eth(0x0800, &ipv4(17, &udp(2152, 2152, &echo)));
    assert_stop(
        &full(LinkType::ETHERNET, &f),
        Layer::Tunnel,
        42,
        StopKind::NotIp,
    );
    // GRE in UDP.
    let gre = cat(&[&[0, 0, 0x08, 0x00], &ip]);
    let f = eth(0x0800, &ipv4(17, &udp(40000, 4754, &gre)));
    assert_tcp(&full(LinkType::ETHERNET, &f), 10, 46);
    // AYIYA forwarding IPv6 (1-byte identity, no signature).
    let v6 = ipv6(6, &tcp(&[], b"0123456789"));
    let ay = cat(&[&[0x00, 0x00, 0x01, 41, 0, 0, 0, 0, 0xaa], &v6]);
    let f = eth(0x0800, &ipv4(17, &udp(5072, 5072, &ay)));
    assert_tcp(&full(LinkType::ETHERNET, &f), 10, 51);
    // CAPWAP data: native 802.11 with swapped frame control.
    let mut wlan = vec![0x01, 0x08, 0, 0];
    wlan.extend_from_slice(&[1; 18]);
    wlan.extend_from_slice(&[0, 0]);
    let cw = cat(&[
        &[0x00, 0x10, 0x03, 0x00, 0, 0, 0, 0],
        &wlan,
        &[0xaa, 0xaa, 0x03, 0, 0, 0, 0x08, 0x00],
        &ip,
    ]);
    let f = eth(0x0800, &ipv4(17, &udp(41000, 5247, &cw)));
    assert_tcp(&full(LinkType::ETHERNET, &f), 10, 82);
    // Teredo with an origin indication.
    let teredo = cat(&[&[0, 0, 1, 2, 3, 4, 5, 6], &v6]);
    let f = eth(0x0800, &ipv4(17, &udp(3544, 50000, &teredo)));
    assert_tcp(&full(LinkType::ETHERNET, &f), 10, 50);
    // VXLAN-GPE carrying IPv6 and Ethernet; no next protocol: not followed.
    let gpe6 = cat(&[&[0x0c, 0, 0, 2, 0, 0, 1, 0], &v6]);
    let f = eth(0x0800, &ipv4(17, &udp(50000, 4790, &gpe6)));
    assert_tcp(&full(LinkType::ETHERNET, &f), 10, 50);
    let gpe_eth = cat(&[&[0x0c, 0, 0, 3, 0, 0, 1, 0], &inner]);
    let f = eth(0x0800, &ipv4(17, &udp(50000, 4790, &gpe_eth)));
    assert_tcp(&full(LinkType::ETHERNET, &f), 10, 64);
    let gpe0 = cat(&[&[0x08, 0, 0, 0, 0, 0, 1, 0], &inner]);
    let f = eth(0x0800, &ipv4(17, &udp(50000, 4790, &gpe0)));
    assert_stop(
        &full(LinkType::ETHERNET, &f),
        Layer::Tunnel,
        42,
        StopKind::NotIp,
    );
    // L2TPv2 data with a length field that cuts 6 payload bytes; control messages stop.
    let ppp = cat(&[&[0xff, 0x03, 0x00, 0x21], &ip]);
    let mut l2 = cat(&[&[0x40, 0x02, 0, 0, 0, 1, 0, 1], &ppp]);
    let l2_len = (l2.len() - 6) as u16;
    l2[2..4].copy_from_slice(&l2_len.to_be_bytes());
    let f = eth(0x0800, &ipv4(17, &udp(1701, 1701, &l2)));
    assert_tcp(&full(LinkType::ETHERNET, &f), 4, 54);
    let ctl = [0xc8, 0x02, 0, 12, 0, 1, 0, 0, 0, 0, 0, 0];
    let f = eth(0x0800, &ipv4(17, &udp(1701, 1701, &ctl)));
    assert_stop(
        &full(LinkType::ETHERNET, &f),
        Layer::Tunnel,
        42,
        StopKind::NotIp,
    );
    // Wireshark's port choice: DNS on the lower port wins over VXLAN.
    let f = eth(0x0800, &ipv4(17, &udp(53, 4789, &vx)));
    assert_stop(
        &full(LinkType::ETHERNET, &f),
        Layer::Udp,
        34,
        StopKind::NotTcp { proto: 17 },
    );
    // GTP-U: the length field bounds the payload.
    let mut cut_gtp = cat(&[&[0x30, 0xff, 0, 0, 0, 0, 0, 1], &ip]);
    let gtp_len = (ip.len() - 3) as u16;
    cut_gtp[2..4].copy_from_slice(&gtp_len.to_be_bytes());
    let f = eth(0x0800, &ipv4(17, &udp(2152, 2152, &cut_gtp)));
    assert_tcp(&full(LinkType::ETHERNET, &f), 7, 50);
    // UDP length 0: "the rest" over IPv6, malformed over IPv4.
    let mut zero = udp(50000, 4789, &vx);
    zero[4..6].copy_from_slice(&[0, 0]);
    let f = eth(0x86dd, &ipv6(17, &zero));
    assert_tcp(&full(LinkType::ETHERNET, &f), 10, 84);
    let f = eth(0x0800, &ipv4(17, &zero));
    assert_stop(
        &full(LinkType::ETHERNET, &f),
        Layer::Udp,
        34,
        StopKind::Malformed("UDP length below 8"),
    );
    // A UDP length shorter than its payload bounds the tunnel.
    let mut short = udp(49152, 4789, &vx);
    short[5] -= 1;
    let frame = ipv4(17, &short);
    assert_tcp(&full(LinkType::RAW, &frame), 9, 50);
}

#[test]
fn stops_report_layer_and_offset() {
    let f = eth(0x0800, &ipv4(17, &udp(49152, 4789, &[0x08, 0, 0])));
    assert_stop(
        &full(LinkType::ETHERNET, &f),
        Layer::Tunnel,
        42,
        StopKind::Truncated {
            required: 8,
            available: 3,
        },
    );
    assert_eq!(
        full(LinkType::ETHERNET, &f).stop.unwrap().to_string(),
        "Tunnel at offset 42: Truncated { required: 8, available: 3 }"
    );
}

// ============================================================================
// The Ethernet/IPv4/TCP fast path against the general walk
// ============================================================================

mod fast_path {
    use proptest::prelude::*;

    use super::*;

    /// TCP option lists: none, the common NOP NOP TS, a SYN's, SACK, and junk.
    fn options() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            Just(vec![]),
            any::<[u8; 8]>().prop_map(|ts| [&[1u8, 1, 8, 10][..], &ts].concat()),
            Just(vec![
                2, 4, 5, 0xb4, 4, 2, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2, 1, 3, 3, 7
            ]),
            any::<[u8; 16]>().prop_map(|b| [&[1u8, 1, 5, 18][..], &b].concat()),
            prop::collection::vec(any::<u8>(), 0..=10).prop_map(|mut v| {
                v.resize(v.len().div_ceil(4) * 4, 0);
                v
            }),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4000))]

        /// Wherever the fast path takes a frame, its view is the walk's, field for field;
        /// mutated headers, truncation and odd wire lengths included.
        #[test]
        fn fast_path_agrees(
            opts in options(),
            payload_len in 0usize..200,
            total_delta in -60i32..60,
            zero_total in any::<bool>(),
            flags_frag in prop_oneof![Just(0u16), Just(0x4000), Just(0x2000), Just(1), any::<u16>()],
            pokes in prop::collection::vec((0usize..80, any::<u8>()), 0..3),
            cut in 0usize..300,
            orig_delta in -40i32..40,
        ) {
            let payload = vec![0xab; payload_len];
            let seg = tcp(&opts, &payload);
            let real_total = 20 + seg.len() as i32;
            let total = if zero_total { 0 } else { (real_total + total_delta).clamp(0, 65535) };
            let mut f = eth(0x0800, &ipv4_with(6, &seg, total as u16, flags_frag));
            for (at, b) in pokes {
                if let Some(x) = f.get_mut(at) {
                    *x = b;
                }
            }
            let orig = (f.len() as i32 + orig_delta).max(0) as usize;
            f.truncate(cut.max(1));
            let wire_len = orig.max(f.len());
            if let Some(fast) = FastTcp::ethernet(&f, wire_len) {
                let slow = general(LinkType::ETHERNET, &f, wire_len);
                prop_assert_eq!(format!("{:?}", fast.view()), format!("{slow:?}"));
            }
        }
    }

    #[test]
    fn no_options_is_the_default() {
        assert_eq!(TcpOptions::NONE, TcpOptions::default());
    }

    #[test]
    fn takes_plain_segments() {
        let ts = [1u8, 1, 8, 10, 0, 0, 0, 7, 0, 0, 0, 9];
        let f = eth(0x0800, &ipv4(6, &tcp(&ts, b"hello")));
        let v = FastTcp::parse(LinkType::ETHERNET, &f, f.len() as u32).expect("fast path");
        let t = v.view().tcp.unwrap();
        assert_eq!((t.payload_len, t.payload), (5, &b"hello"[..]));
        assert_eq!(t.options.timestamps, Some((7, 9)));
        // IP options (a source route may change the destination) go the general way.
        let mut opt = ipv4(6, &tcp(&[], b""));
        opt[0] = 0x46;
        assert!(FastTcp::parse(LinkType::ETHERNET, &eth(0x0800, &opt), 60).is_none());
        // Another link type never takes it.
        assert!(FastTcp::parse(LinkType::RAW, &f, f.len() as u32).is_none());
    }
}
