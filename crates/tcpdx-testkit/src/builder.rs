//! One frame as bytes: link header + IPv4/IPv6 + TCP (+ options + payload).
//!
//! A [`FrameSpec`] holds raw wire values (absolute sequence numbers, raw window); the
//! [`script`](crate::script) layer computes them from relative ones. [`FrameSpec::build`]
//! always emits the complete frame with correct IP total length / payload length, IPv4 header
//! checksum and TCP checksum over the full payload; [`FrameSpec::to_frame`] then applies the
//! snaplen, so a truncated frame still says its real length in the IP header and `orig_len`.
//!
//! Everything here panics (with a message naming the field) on values that cannot be encoded,
//! such as more than 40 bytes of TCP options: this is test code and a panic points at the test.

use std::net::{IpAddr, Ipv4Addr};

use tcpdx_wire::{FrameNo, LinkType, Timestamp};

use crate::frame::OwnedFrame;

/// TCP flag FIN (no more data from sender).
pub const FIN: u16 = 0x01;
/// TCP flag SYN (synchronise sequence numbers).
pub const SYN: u16 = 0x02;
/// TCP flag RST (reset the connection).
pub const RST: u16 = 0x04;
/// TCP flag PSH (push).
pub const PSH: u16 = 0x08;
/// TCP flag ACK (acknowledgement field is significant).
pub const ACK: u16 = 0x10;
/// TCP flag URG (urgent pointer is significant).
pub const URG: u16 = 0x20;
/// TCP flag ECE (ECN echo, RFC 3168).
pub const ECE: u16 = 0x40;
/// TCP flag CWR (congestion window reduced, RFC 3168).
pub const CWR: u16 = 0x80;
/// TCP flag NS / AE (the ninth flag bit, RFC 3540 / AccECN).
pub const NS: u16 = 0x100;

/// Size of an Ethernet frame without FCS below which a NIC pads on receive.
const ETH_MIN_FRAME: usize = 60;
/// RFC 9293: the data offset field is 4 bits of 32-bit words, so at most 40 option bytes.
const MAX_OPTIONS_LEN: usize = 40;

/// What fills the TCP payload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Payload {
    /// Deterministic bytes: the byte at absolute sequence number `s` is `s as u8`, so a
    /// retransmission carries exactly the bytes of the original.
    Pattern,
    /// All zero bytes.
    Zeros,
    /// These exact bytes; the spec's `payload_len` must be 0 or equal to their length.
    Bytes(Vec<u8>),
}

/// TCP options of one segment, as raw values.
///
/// Encoded in the order Linux uses (`tcp_options_write`): MSS, SACK-permitted + timestamps
/// (or NOP NOP timestamps), NOP window scale, NOP NOP SACK-permitted (without timestamps),
/// NOP NOP SACK blocks; padded with EOL to a multiple of 4.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OptionsSpec {
    /// Maximum segment size option (kind 2).
    pub mss: Option<u16>,
    /// Window scale shift (kind 3).
    pub wscale: Option<u8>,
    /// SACK-permitted option (kind 4).
    pub sack_perm: bool,
    /// Timestamps option (kind 8): `(TSval, TSecr)`.
    pub timestamps: Option<(u32, u32)>,
    /// SACK blocks (kind 5) as absolute `(left, right)` edges; at most 4, or 3 with timestamps.
    pub sack: Vec<(u32, u32)>,
    /// Exact option bytes instead of all of the above (padded with EOL to a multiple of 4):
    /// for malformed-option tests.
    pub raw: Option<Vec<u8>>,
}

impl OptionsSpec {
    /// No options at all.
    pub const NONE: Self = Self {
        mss: None,
        wscale: None,
        sack_perm: false,
        timestamps: None,
        sack: Vec::new(),
        raw: None,
    };
}

/// Encodes TCP options as they go on the wire (length a multiple of 4, at most 40 bytes).
#[track_caller]
pub fn encode_options(o: &OptionsSpec) -> Vec<u8> {
    let mut out = Vec::with_capacity(MAX_OPTIONS_LEN);
    if let Some(raw) = &o.raw {
        out.extend_from_slice(raw);
    } else {
        if let Some(mss) = o.mss {
            out.extend_from_slice(&[2, 4]);
            out.extend_from_slice(&mss.to_be_bytes());
        }
        match (o.timestamps, o.sack_perm) {
            (Some(_), true) => out.extend_from_slice(&[4, 2]),
            (Some(_), false) => out.extend_from_slice(&[1, 1]),
            _ => {}
        }
        if let Some((val, ecr)) = o.timestamps {
            out.extend_from_slice(&[8, 10]);
            out.extend_from_slice(&val.to_be_bytes());
            out.extend_from_slice(&ecr.to_be_bytes());
        }
        if let Some(ws) = o.wscale {
            out.extend_from_slice(&[1, 3, 3, ws]);
        }
        if o.sack_perm && o.timestamps.is_none() {
            out.extend_from_slice(&[1, 1, 4, 2]);
        }
        if !o.sack.is_empty() {
            let len = 2 + 8 * o.sack.len();
            out.extend_from_slice(&[1, 1, 5, len as u8]);
            for (left, right) in &o.sack {
                out.extend_from_slice(&left.to_be_bytes());
                out.extend_from_slice(&right.to_be_bytes());
            }
        }
    }
    while !out.len().is_multiple_of(4) {
        out.push(0);
    }
    assert!(
        out.len() <= MAX_OPTIONS_LEN,
        "TCP options need {} bytes, at most {MAX_OPTIONS_LEN} fit (too many SACK blocks?): {o:?}",
        out.len()
    );
    out
}

/// Everything needed to build one TCP frame, in raw wire values.
///
/// Use [`FrameSpec::TEMPL`] with struct-update syntax:
/// `FrameSpec { seq: 1000, flags: SYN, ..FrameSpec::TEMPL }`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FrameSpec {
    /// Link-layer encapsulation: ETHERNET, RAW, IPV4, IPV6, NULL, LOOP, LINUX_SLL, LINUX_SLL2,
    /// IPOIB.
    pub link: LinkType,
    /// Ethernet source MAC (also the SLL address).
    pub src_mac: [u8; 6],
    /// Ethernet destination MAC.
    pub dst_mac: [u8; 6],
    /// 802.1Q VLAN id to tag the frame with (Ethernet only).
    pub vlan: Option<u16>,
    /// Pad Ethernet frames shorter than 60 bytes with zeros, as a receiving NIC does.
    pub eth_pad: bool,
    /// IP source address (both addresses must be of one family).
    pub src: IpAddr,
    /// IP destination address.
    pub dst: IpAddr,
    /// IPv4 TTL / IPv6 hop limit.
    pub ttl: u8,
    /// IPv4 identification (unused for IPv6).
    pub ip_id: u16,
    /// IPv4 DF bit (unused for IPv6).
    pub dont_fragment: bool,
    /// IPv4 TOS / IPv6 traffic class byte (DSCP << 2 | ECN).
    pub tos: u8,
    /// TCP source port.
    pub src_port: u16,
    /// TCP destination port.
    pub dst_port: u16,
    /// Raw sequence number.
    pub seq: u32,
    /// Raw acknowledgement number (written as is, even without the ACK flag).
    pub ack: u32,
    /// Flag bits ([`FIN`] .. [`NS`]).
    pub flags: u16,
    /// Raw (unscaled) window field.
    pub window: u16,
    /// Urgent pointer.
    pub urgent: u16,
    /// TCP options.
    pub options: OptionsSpec,
    /// Payload length in bytes (ignored when `payload` is `Bytes`, unless it disagrees).
    pub payload_len: u32,
    /// Payload content.
    pub payload: Payload,
    /// Captured length limit; the frame on the wire keeps its full length.
    pub snaplen: Option<u32>,
    /// Write a wrong TCP checksum (the correct one XOR 0x5555).
    pub bad_checksum: bool,
}

impl FrameSpec {
    /// Template: 10.0.0.1:40000 -> 10.0.0.2:5201 over Ethernet, ACK, no options, no payload.
    pub const TEMPL: Self = Self {
        link: LinkType::ETHERNET,
        src_mac: [0x02, 0, 0, 0, 0, 0x01],
        dst_mac: [0x02, 0, 0, 0, 0, 0x02],
        vlan: None,
        eth_pad: false,
        src: IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)),
        dst: IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)),
        ttl: 64,
        ip_id: 0,
        dont_fragment: true,
        tos: 0,
        src_port: 40000,
        dst_port: 5201,
        seq: 0,
        ack: 0,
        flags: ACK,
        window: 65535,
        urgent: 0,
        options: OptionsSpec::NONE,
        payload_len: 0,
        payload: Payload::Pattern,
        snaplen: None,
        bad_checksum: false,
    };

    /// Number of payload bytes this segment carries.
    #[track_caller]
    pub fn payload_len(&self) -> usize {
        match &self.payload {
            Payload::Bytes(b) => {
                assert!(
                    self.payload_len == 0 || self.payload_len as usize == b.len(),
                    "payload_len {} disagrees with {} explicit payload bytes",
                    self.payload_len,
                    b.len()
                );
                b.len()
            }
            Payload::Pattern | Payload::Zeros => self.payload_len as usize,
        }
    }

    /// The payload bytes.
    pub fn payload_bytes(&self) -> Vec<u8> {
        match &self.payload {
            Payload::Bytes(b) => b.clone(),
            Payload::Zeros => vec![0; self.payload_len as usize],
            Payload::Pattern => (0..self.payload_len)
                .map(|i| self.seq.wrapping_add(i) as u8)
                .collect(),
        }
    }

    /// The TCP header plus payload, with the checksum filled in.
    #[track_caller]
    pub fn tcp_bytes(&self) -> Vec<u8> {
        let opts = encode_options(&self.options);
        let hlen = 20 + opts.len();
        let payload = self.payload_bytes();
        let mut t = Vec::with_capacity(hlen + payload.len());
        t.extend_from_slice(&self.src_port.to_be_bytes());
        t.extend_from_slice(&self.dst_port.to_be_bytes());
        t.extend_from_slice(&self.seq.to_be_bytes());
        t.extend_from_slice(&self.ack.to_be_bytes());
        t.push(((hlen / 4) as u8) << 4 | ((self.flags >> 8) & 0x01) as u8);
        t.push(self.flags as u8);
        t.extend_from_slice(&self.window.to_be_bytes());
        t.extend_from_slice(&[0, 0]); // checksum, below
        t.extend_from_slice(&self.urgent.to_be_bytes());
        t.extend_from_slice(&opts);
        t.extend_from_slice(&payload);

        let mut sum = 0u32;
        match (self.src, self.dst) {
            (IpAddr::V4(s), IpAddr::V4(d)) => {
                let len = u16::try_from(t.len()).expect("TCP segment longer than 65535 bytes");
                sum = add_words(sum, &s.octets());
                sum = add_words(sum, &d.octets());
                sum = add_words(sum, &[0, 6]);
                sum = add_words(sum, &len.to_be_bytes());
            }
            (IpAddr::V6(s), IpAddr::V6(d)) => {
                sum = add_words(sum, &s.octets());
                sum = add_words(sum, &d.octets());
                sum = add_words(sum, &(t.len() as u32).to_be_bytes());
                sum = add_words(sum, &[0, 0, 0, 6]);
            }
            (s, d) => panic!("source {s} and destination {d} are of different IP families"),
        }
        sum = add_words(sum, &t);
        let mut csum = fold(sum);
        if self.bad_checksum {
            csum ^= 0x5555;
        }
        t[16..18].copy_from_slice(&csum.to_be_bytes());
        t
    }

    /// The IP packet (IPv4 or IPv6 header + TCP), with lengths and checksums filled in.
    #[track_caller]
    pub fn ip_bytes(&self) -> Vec<u8> {
        let tcp = self.tcp_bytes();
        let mut p = Vec::with_capacity(40 + tcp.len());
        match (self.src, self.dst) {
            (IpAddr::V4(s), IpAddr::V4(d)) => {
                let total = u16::try_from(20 + tcp.len()).expect("IPv4 total length > 65535");
                p.extend_from_slice(&[0x45, self.tos]);
                p.extend_from_slice(&total.to_be_bytes());
                p.extend_from_slice(&self.ip_id.to_be_bytes());
                p.extend_from_slice(if self.dont_fragment {
                    &[0x40, 0]
                } else {
                    &[0, 0]
                });
                p.extend_from_slice(&[self.ttl, 6, 0, 0]);
                p.extend_from_slice(&s.octets());
                p.extend_from_slice(&d.octets());
                let csum = fold(add_words(0, &p));
                p[10..12].copy_from_slice(&csum.to_be_bytes());
            }
            (IpAddr::V6(s), IpAddr::V6(d)) => {
                let plen = u16::try_from(tcp.len()).expect("IPv6 payload length > 65535");
                let vtf = 0x6000_0000u32 | u32::from(self.tos) << 20;
                p.extend_from_slice(&vtf.to_be_bytes());
                p.extend_from_slice(&plen.to_be_bytes());
                p.extend_from_slice(&[6, self.ttl]);
                p.extend_from_slice(&s.octets());
                p.extend_from_slice(&d.octets());
            }
            (s, d) => panic!("source {s} and destination {d} are of different IP families"),
        }
        p.extend_from_slice(&tcp);
        p
    }

    /// The complete frame on the wire (no snaplen applied).
    #[track_caller]
    pub fn build(&self) -> Vec<u8> {
        let ip = self.ip_bytes();
        let v6 = self.src.is_ipv6();
        let ethertype: u16 = if v6 { 0x86dd } else { 0x0800 };
        let mut f = Vec::with_capacity(24 + ip.len());
        match self.link {
            LinkType::ETHERNET => {
                f.extend_from_slice(&self.dst_mac);
                f.extend_from_slice(&self.src_mac);
                if let Some(vid) = self.vlan {
                    assert!(vid < 4096, "VLAN id {vid} does not fit in 12 bits");
                    f.extend_from_slice(&0x8100u16.to_be_bytes());
                    f.extend_from_slice(&vid.to_be_bytes());
                }
                f.extend_from_slice(&ethertype.to_be_bytes());
            }
            LinkType::RAW | LinkType::IPV4 | LinkType::IPV6 => {}
            // BSD loopback: address family in the writer's (little-endian) byte order;
            // 24 is AF_INET6 on NetBSD/OpenBSD, which Wireshark accepts.
            LinkType::NULL => f.extend_from_slice(&(if v6 { 24u32 } else { 2 }).to_le_bytes()),
            LinkType::LOOP => f.extend_from_slice(&(if v6 { 24u32 } else { 2 }).to_be_bytes()),
            LinkType::LINUX_SLL => {
                f.extend_from_slice(&[0, 0, 0, 1, 0, 6]); // to us, ARPHRD_ETHER, 6-byte address
                f.extend_from_slice(&self.src_mac);
                f.extend_from_slice(&[0, 0]);
                f.extend_from_slice(&ethertype.to_be_bytes());
            }
            LinkType::LINUX_SLL2 => {
                f.extend_from_slice(&ethertype.to_be_bytes());
                f.extend_from_slice(&[0, 0, 0, 0, 0, 1, 0, 1, 0, 6]); // ifindex 1, ETHER, host
                f.extend_from_slice(&self.src_mac);
                f.extend_from_slice(&[0, 0]);
            }
            LinkType::IPOIB => {
                // The pseudo header tshark reads: a zero first word (unicast, no GRH), the
                // destination QPN and GID at 20..40; then the IPoIB type and reserved word.
                f.extend_from_slice(&[0; 20]);
                f.extend_from_slice(&[0, 0, 0, 0x48, 0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0]);
                f.extend_from_slice(&self.dst_mac);
                f.extend_from_slice(&ethertype.to_be_bytes());
                f.extend_from_slice(&[0, 0]);
            }
            other => panic!(
                "link type {} is not supported by the frame builder",
                other.0
            ),
        }
        f.extend_from_slice(&ip);
        if self.eth_pad && self.link == LinkType::ETHERNET && f.len() < ETH_MIN_FRAME {
            f.resize(ETH_MIN_FRAME, 0);
        }
        f
    }

    /// Builds the frame and applies the snaplen, keeping the full length in `orig_len`.
    #[track_caller]
    pub fn to_frame(&self, no: FrameNo, ts: Timestamp) -> OwnedFrame {
        let mut data = self.build();
        let orig_len = data.len() as u32;
        if let Some(snap) = self.snaplen {
            data.truncate(snap as usize);
        }
        OwnedFrame {
            no,
            ts,
            link: self.link,
            orig_len,
            data,
        }
    }
}

impl Default for FrameSpec {
    fn default() -> Self {
        Self::TEMPL
    }
}

/// Adds `data` as big-endian 16-bit words (odd length padded with zero) to a running sum.
fn add_words(mut sum: u32, data: &[u8]) -> u32 {
    let mut chunks = data.chunks_exact(2);
    for w in &mut chunks {
        sum = sum.wrapping_add(u32::from(u16::from_be_bytes([w[0], w[1]])));
        // Fold early so a 64 KiB segment cannot overflow the accumulator.
        sum = (sum & 0xffff) + (sum >> 16);
    }
    if let [last] = chunks.remainder() {
        sum = sum.wrapping_add(u32::from(*last) << 8);
    }
    sum
}

/// RFC 1071: folds the carries and returns the one's complement.
fn fold(mut sum: u32) -> u16 {
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

#[cfg(test)]
mod tests {
    use super::*;
    use etherparse::{NetSlice, SlicedPacket, TransportSlice};
    use std::net::Ipv6Addr;

    /// 10.0.0.1:40000 -> 10.0.0.2:5201, SYN, seq 1000, MSS 1460, no payload.
    fn syn() -> FrameSpec {
        FrameSpec {
            seq: 1000,
            flags: SYN,
            window: 64240,
            ip_id: 0x1234,
            options: OptionsSpec {
                mss: Some(1460),
                ..OptionsSpec::NONE
            },
            ..FrameSpec::TEMPL
        }
    }

    /// Hand-assembled bytes of `syn()`; checksums computed by hand below.
    #[rustfmt::skip]
    static SYN_BYTES: [u8; 58] = [
        // Ethernet: dst, src, IPv4
        0x02, 0, 0, 0, 0, 0x02,  0x02, 0, 0, 0, 0, 0x01,  0x08, 0x00,
        // IPv4: 45 00, total 44, id 0x1234, DF, ttl 64, TCP, checksum 0x1496
        0x45, 0x00, 0x00, 0x2c, 0x12, 0x34, 0x40, 0x00, 0x40, 0x06, 0x14, 0x96,
        10, 0, 0, 1,  10, 0, 0, 2,
        // TCP: 40000 -> 5201, seq 1000, ack 0, doff 6, SYN, win 64240, csum 0xd4b9, urg 0
        0x9c, 0x40, 0x14, 0x51,  0x00, 0x00, 0x03, 0xe8,  0, 0, 0, 0,
        0x60, 0x02, 0xfa, 0xf0,  0xd4, 0xb9, 0x00, 0x00,
        // MSS 1460
        0x02, 0x04, 0x05, 0xb4,
    ];

    #[test]
    fn syn_matches_hand_assembled_bytes() {
        // IPv4 header words: 4500+002c+1234+4000+4006+0a00+0001+0a00+0002 = 0xeb69,
        // no carry; complement 0x1496.
        // TCP: pseudo header 0a00+0001+0a00+0002+0006+0018 (length 24) plus header and MSS
        // 9c40+1451+0000+03e8+0000+0000+6002+faf0+0000+0000+0204+05b4 = 0x2_2b44;
        // fold 0x2b46; complement 0xd4b9.
        assert_eq!(syn().build(), SYN_BYTES);
    }

    #[test]
    fn checksums_verify_with_etherparse() {
        for spec in [
            syn(),
            FrameSpec {
                seq: u32::MAX - 3,
                ack: 77,
                flags: ACK | PSH,
                payload_len: 1001, // odd length exercises the checksum's padding
                options: OptionsSpec {
                    timestamps: Some((1, 2)),
                    sack: vec![(1, 2), (3, 4), (5, 6)],
                    ..OptionsSpec::NONE
                },
                ..FrameSpec::TEMPL
            },
            FrameSpec {
                src: IpAddr::V6(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1)),
                dst: IpAddr::V6(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 2)),
                payload_len: 100,
                vlan: Some(42),
                ..FrameSpec::TEMPL
            },
        ] {
            let bytes = spec.build();
            let p = SlicedPacket::from_ethernet(&bytes).expect("etherparse parses the frame");
            let Some(TransportSlice::Tcp(tcp)) = &p.transport else {
                panic!("no TCP in {p:?}")
            };
            let expected = match &p.net {
                Some(NetSlice::Ipv4(ip)) => {
                    let h = ip.header();
                    assert_eq!(h.total_len() as usize, bytes.len() - 14);
                    assert_eq!(
                        h.to_header().calc_header_checksum(),
                        h.header_checksum(),
                        "IPv4 header checksum"
                    );
                    tcp.calc_checksum_ipv4(h.source(), h.destination()).unwrap()
                }
                Some(NetSlice::Ipv6(ip)) => {
                    let h = ip.header();
                    assert_eq!(h.payload_length() as usize, bytes.len() - 14 - 4 - 40);
                    tcp.calc_checksum_ipv6(h.source(), h.destination()).unwrap()
                }
                other => panic!("unexpected net layer {other:?}"),
            };
            assert_eq!(tcp.checksum(), expected, "TCP checksum of {spec:?}");
            assert_eq!(tcp.sequence_number(), spec.seq);
            assert_eq!(tcp.payload().len(), spec.payload_len());
        }
    }

    #[test]
    fn bad_checksum_differs() {
        let good = syn().build();
        let bad = FrameSpec {
            bad_checksum: true,
            ..syn()
        }
        .build();
        assert_eq!(good[50] ^ 0x55, bad[50]);
        assert_eq!(good[51] ^ 0x55, bad[51]);
    }

    #[test]
    fn options_follow_linux_layout() {
        let syn = OptionsSpec {
            mss: Some(1460),
            sack_perm: true,
            timestamps: Some((0x0102_0304, 0)),
            wscale: Some(7),
            ..OptionsSpec::NONE
        };
        assert_eq!(
            encode_options(&syn),
            [
                2, 4, 5, 0xb4, 4, 2, 8, 10, 1, 2, 3, 4, 0, 0, 0, 0, 1, 3, 3, 7
            ]
        );
        let ack = OptionsSpec {
            timestamps: Some((5, 6)),
            sack: vec![(10, 20)],
            ..OptionsSpec::NONE
        };
        assert_eq!(
            encode_options(&ack),
            [
                1, 1, 8, 10, 0, 0, 0, 5, 0, 0, 0, 6, 1, 1, 5, 10, 0, 0, 0, 10, 0, 0, 0, 20
            ]
        );
        let raw = OptionsSpec {
            raw: Some(vec![2, 4, 5]),
            ..OptionsSpec::NONE
        };
        assert_eq!(encode_options(&raw), [2, 4, 5, 0]);
    }

    #[test]
    #[should_panic(expected = "at most 40 fit")]
    fn four_sack_blocks_and_timestamps_do_not_fit() {
        encode_options(&OptionsSpec {
            timestamps: Some((1, 1)),
            sack: vec![(1, 2); 4],
            ..OptionsSpec::NONE
        });
    }

    #[test]
    fn snaplen_cuts_capture_not_lengths() {
        let spec = FrameSpec {
            payload_len: 1448,
            snaplen: Some(54),
            ..FrameSpec::TEMPL
        };
        let f = spec.to_frame(FrameNo(1), Timestamp(0));
        assert_eq!(f.data.len(), 54);
        assert_eq!(f.orig_len, 14 + 20 + 20 + 1448);
        assert_eq!(u16::from_be_bytes([f.data[16], f.data[17]]), 20 + 20 + 1448);
    }

    #[test]
    fn pattern_payload_depends_on_sequence_number_only() {
        let a = FrameSpec {
            seq: 0xffff_fffe,
            payload_len: 4,
            ..FrameSpec::TEMPL
        };
        assert_eq!(a.payload_bytes(), [0xfe, 0xff, 0x00, 0x01]);
    }

    #[test]
    fn other_links_and_padding() {
        let raw = FrameSpec {
            link: LinkType::RAW,
            ..FrameSpec::TEMPL
        }
        .build();
        assert_eq!(raw[0], 0x45);
        assert_eq!(raw.len(), 40);
        let padded = FrameSpec {
            eth_pad: true,
            ..FrameSpec::TEMPL
        }
        .build();
        assert_eq!(padded.len(), 60);
        let sll = FrameSpec {
            link: LinkType::LINUX_SLL,
            ..FrameSpec::TEMPL
        }
        .build();
        assert_eq!(&sll[14..16], &[0x08, 0x00]);
        assert_eq!(sll.len(), 16 + 40);
        let sll2 = FrameSpec {
            link: LinkType::LINUX_SLL2,
            ..FrameSpec::TEMPL
        }
        .build();
        assert_eq!(&sll2[0..2], &[0x08, 0x00]);
        assert_eq!(sll2.len(), 20 + 40);
    }
}
