//! Tunnels around script frames, and the encapsulation fixtures built from them
//! (`tests/data/encap/`): one TCP story, carried in GRE with transparent Ethernet bridging,
//! in ERSPAN type I, over IP over InfiniBand, and as 6in4.
//!
//! [`wrap`] puts built frames inside an outer Ethernet + IPv4 header (and GRE): the outer
//! lengths and header checksum are those of the whole inner frame, so a snaplen that cut the
//! inner frame cuts the outer one at the same byte.

use std::net::Ipv4Addr;

use tcpdx_wire::LinkType;

use crate::frame::OwnedFrame;
use crate::script::{AUTO, Dir, S2C_DATA, Script, ScriptConfig, SegSpec};
use crate::{ACK, PSH};

/// A tunnel around an inner frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tunnel {
    /// Ethernet in GRE (protocol 0x6558, transparent Ethernet bridging).
    GreTeb,
    /// ERSPAN type I: Ethernet right after a GRE header of protocol 0x88be without a
    /// sequence number (no ERSPAN header).
    ErspanI,
    /// IPv6 in IPv4 (IP protocol 41); the inner frames are raw IPv6.
    SixInFour,
}

/// Outer tunnel endpoints (TEST-NET-1).
const OUTER_SRC: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 1);
const OUTER_DST: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 2);
const OUTER_SRC_MAC: [u8; 6] = [0x02, 0, 0, 0, 0xee, 0x01];
const OUTER_DST_MAC: [u8; 6] = [0x02, 0, 0, 0, 0xee, 0x02];

/// `frames` inside `tunnel`, as Ethernet frames; numbers and times are kept.
///
/// Panics when a frame's link type does not fit the tunnel (Ethernet for GRE, raw IPv6
/// for 6in4): this is test code.
#[track_caller]
pub fn wrap(frames: &[OwnedFrame], tunnel: Tunnel) -> Vec<OwnedFrame> {
    frames
        .iter()
        .enumerate()
        .map(|(i, f)| {
            let (proto, shim): (u8, &[u8]) = match tunnel {
                Tunnel::GreTeb => (47, &[0x00, 0x00, 0x65, 0x58]),
                Tunnel::ErspanI => (47, &[0x00, 0x00, 0x88, 0xbe]),
                Tunnel::SixInFour => (41, &[]),
            };
            let fits = match tunnel {
                Tunnel::GreTeb | Tunnel::ErspanI => f.link == LinkType::ETHERNET,
                Tunnel::SixInFour => {
                    matches!(f.link, LinkType::RAW | LinkType::IPV6)
                        && f.data.first().is_some_and(|b| b >> 4 == 6)
                }
            };
            assert!(
                fits,
                "frame {} (link type {}) cannot go into {tunnel:?}",
                f.no, f.link.0
            );
            let inner_len = f.orig_len as usize;
            let total = u16::try_from(20 + shim.len() + inner_len)
                .expect("outer IPv4 total length > 65535");
            let mut h = Vec::with_capacity(38 + f.data.len());
            h.extend_from_slice(&OUTER_DST_MAC);
            h.extend_from_slice(&OUTER_SRC_MAC);
            h.extend_from_slice(&0x0800u16.to_be_bytes());
            let ip_at = h.len();
            h.extend_from_slice(&[0x45, 0]);
            h.extend_from_slice(&total.to_be_bytes());
            h.extend_from_slice(&(i as u16).to_be_bytes());
            h.extend_from_slice(&[0x40, 0, 64, proto, 0, 0]);
            h.extend_from_slice(&OUTER_SRC.octets());
            h.extend_from_slice(&OUTER_DST.octets());
            let csum = ipv4_checksum(&h[ip_at..]);
            h[ip_at + 10..ip_at + 12].copy_from_slice(&csum.to_be_bytes());
            h.extend_from_slice(shim);
            let outer = h.len() as u32;
            h.extend_from_slice(&f.data);
            OwnedFrame {
                no: f.no,
                ts: f.ts,
                link: LinkType::ETHERNET,
                orig_len: outer + f.orig_len,
                data: h,
            }
        })
        .collect()
}

fn ipv4_checksum(h: &[u8]) -> u16 {
    let mut sum: u32 = h
        .chunks(2)
        .map(|w| u32::from(u16::from_be_bytes([w[0], *w.get(1).unwrap_or(&0)])))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// The encapsulation fixtures: file stem in `tests/data/encap/` and how it is built.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fixture {
    /// [`Tunnel::GreTeb`] around Ethernet/IPv4 connections.
    GreTeb,
    /// [`Tunnel::ErspanI`] around Ethernet/IPv4 connections.
    ErspanI,
    /// LINKTYPE_IPOIB: one IPv4 and one IPv6 story.
    Ipoib,
    /// [`Tunnel::SixInFour`] around IPv6 connections.
    SixInFour,
}

impl Fixture {
    /// Every fixture.
    pub const ALL: [Fixture; 4] = [
        Fixture::GreTeb,
        Fixture::ErspanI,
        Fixture::Ipoib,
        Fixture::SixInFour,
    ];

    /// File stem.
    pub fn name(self) -> &'static str {
        match self {
            Fixture::GreTeb => "gre-teb",
            Fixture::ErspanI => "erspan-type1",
            Fixture::Ipoib => "ipoib",
            Fixture::SixInFour => "6in4",
        }
    }

    /// The fixture's frames.
    pub fn frames(self) -> Vec<OwnedFrame> {
        let v4 = ScriptConfig::DEFAULT;
        let v6 = ScriptConfig {
            ipv6: true,
            ..ScriptConfig::DEFAULT
        };
        match self {
            Fixture::GreTeb => wrap(&story(v4, 0).frames(), Tunnel::GreTeb),
            Fixture::ErspanI => wrap(&story(v4, 0).frames(), Tunnel::ErspanI),
            Fixture::SixInFour => wrap(
                &story(
                    ScriptConfig {
                        link: LinkType::RAW,
                        ..v6
                    },
                    0,
                )
                .frames(),
                Tunnel::SixInFour,
            ),
            Fixture::Ipoib => {
                // An IPv4 story, then an IPv6 one 10 s later: one file, one link type.
                let link = LinkType::IPOIB;
                let mut frames = story(ScriptConfig { link, ..v4 }, 0).frames();
                let later = story(ScriptConfig { link, ..v6 }, 10_000).frames();
                let n = frames.len() as u64;
                frames.extend(later.into_iter().map(|mut f| {
                    f.no.0 += n;
                    f
                }));
                frames
            }
        }
    }

    /// The fixture as a pcapng file.
    pub fn pcapng(self) -> Vec<u8> {
        let mut buf = Vec::new();
        crate::pcap_writer::write_pcapng(&mut buf, &self.frames()).expect("writing to a Vec");
        buf
    }
}

/// One TCP story on three connections, starting `start_ms` after the script's epoch, with
/// every kind of event the flags name: duplicate ACKs and a fast retransmission, a segment
/// lost before the capture point and an ACK of it, an RTO retransmission and a spurious
/// one, out-of-order data, a zero window with probes and the window update, keep-alives,
/// a close, and a new connection on the same ports.
pub fn story(cfg: ScriptConfig, start_ms: u32) -> Script {
    let t0 = f64::from(start_ms);
    let ms = |x: f64| t0 + x;
    let other_port = |port: u16| ScriptConfig {
        client_port: port,
        ..cfg.clone()
    };
    let mut t = Script::with(cfg.clone());
    let a = t.conn();
    let b = t.add_connection(other_port(40001));

    t.on(a).at_ms(ms(0.0)).handshake(); // ends at 10 ms
    t.on(b).at_ms(ms(12.0)).handshake(); // ends at 22 ms

    // Connection a: loss, duplicate ACKs, fast retransmission.
    t.on(a).at_ms(ms(30.0)).server_sends(1, 1448).not_captured();
    t.server_sends(AUTO, 1448);
    t.server_sends(AUTO, 1448);
    t.server_sends(AUTO, 1448);
    t.at_ms(ms(40.0)).client_acks(1).sack(&[(1449, 2897)]);
    t.after_ms(0.1).client_acks(1).sack(&[(1449, 4345)]);
    t.after_ms(0.1).client_acks(1).sack(&[(1449, 5793)]);
    t.after_ms(0.2).server(SegSpec {
        seq: 1,
        len: 1448,
        flags: PSH | ACK,
        ..S2C_DATA
    });
    t.at_ms(ms(51.0)).client_acks(5793);

    // Connection b: out of order, RTO and spurious retransmissions.
    t.on(b).at_ms(ms(60.0)).server_sends(1, 1000);
    t.server_sends(2001, 1000); // a hole: 1001..2001 comes later
    t.after_ms(0.5).server_sends(1001, 1000); // out of order
    t.at_ms(ms(62.0)).client_acks(3001);
    t.at_ms(ms(70.0)).server_sends(3001, 1000);
    t.at_ms(ms(270.0)).server_sends(3001, 1000); // RTO retransmission
    t.at_ms(ms(272.0)).client_acks(4001);
    t.at_ms(ms(273.0)).server_sends(3001, 1000); // spurious: already acknowledged
    t.at_ms(ms(275.0)).client_acks(4001);

    // Connection a again: zero window, probes, window update, keep-alive, close.
    t.on(a).at_ms(ms(300.0)).server_sends(AUTO, 1448);
    t.at_ms(ms(310.0)).client_window(0).client_acks(7241);
    t.at_ms(ms(510.0))
        .zero_window_probe(Dir::S2C)
        .times_every_ms(2, 400);
    t.at_ms(ms(1000.0)).client_window(65536).client_acks(7241);
    t.at_ms(ms(5000.0)).keepalive_from_client();
    t.after_ms(1.0).server_acks(AUTO);
    t.at_ms(ms(6000.0)).fin_from_client();
    t.after_ms(1.0).fin_from_server();
    t.after_ms(1.0).client_acks(AUTO);

    // Connection b closes; a new connection on its ports follows.
    t.on(b).at_ms(ms(6500.0)).fin_from_server();
    t.after_ms(1.0).client_acks(AUTO);
    t.after_ms(1.0).rst_from_client();
    let c = t.add_connection(ScriptConfig {
        isn_client: 7_000_000,
        isn_server: 9_000_000,
        ..other_port(40001)
    });
    t.on(c).at_ms(ms(7000.0)).handshake();
    t.at_ms(ms(7010.0)).client_sends(1, 500);
    t.after_ms(10.0).server_acks(501);
    t
}
