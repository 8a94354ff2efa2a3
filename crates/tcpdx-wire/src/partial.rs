//! TCP headers that cannot be analysed but still identify a connection: a header cut by
//! the snaplen or with an impossible data offset, and TCP quoted inside ICMP errors.
//!
//! Wireshark reads ports, sequence and acknowledgement numbers, flags and window (the
//! first 16 bytes) before it looks up the conversation, so such frames still get a
//! `tcp.stream` (and can start a new one); they are never sequence-analysed.

use crate::bytes::{arr, byte};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::decode::{IpInfo, TcpFlags};
use crate::seq::SeqNum;

/// Bytes of a TCP header Wireshark needs before the conversation lookup.
pub const MIN_IDENTIFYING_LEN: usize = 16;

/// The identifying part of a TCP header that was not analysable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PartialTcp {
    /// The IP header carrying it (the quoted, inner one for ICMP errors).
    pub ip: IpInfo,
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// Raw sequence number.
    pub seq: SeqNum,
    /// Raw acknowledgement number.
    pub ack: SeqNum,
    /// Flags.
    pub flags: TcpFlags,
    /// Quoted inside an ICMP error.
    pub quoted: bool,
}

impl PartialTcp {
    /// Reads the first 16 bytes of a TCP header; `None` if fewer were captured.
    pub fn from_bytes(ip: IpInfo, b: &[u8], quoted: bool) -> Option<PartialTcp> {
        if b.len() < MIN_IDENTIFYING_LEN {
            return None;
        }
        let be32 = |i: usize| u32::from_be_bytes(arr(b, i));
        let be16 = |i: usize| u16::from_be_bytes(arr(b, i));
        Some(PartialTcp {
            ip,
            src_port: be16(0),
            dst_port: be16(2),
            seq: SeqNum(be32(4)),
            ack: SeqNum(be32(8)),
            flags: TcpFlags(be16(12) & 0x0fff),
            quoted,
        })
    }
}

/// ICMPv4 error types that quote the offending datagram (RFC 792, RFC 1812).
const ICMP4_ERRORS: [u8; 5] = [3, 4, 5, 11, 12];
/// ICMPv6 error types (RFC 4443).
const ICMP6_ERRORS: [u8; 4] = [1, 2, 3, 4];
/// ICMP error header length before the quoted datagram.
const ICMP_ERROR_HEADER: usize = 8;

/// The TCP header quoted by an ICMP (`v6 == false`) or ICMPv6 error message `icmp`.
pub fn quoted_tcp(icmp: &[u8], v6: bool) -> Option<PartialTcp> {
    let ty = *icmp.first()?;
    let errors: &[u8] = if v6 { &ICMP6_ERRORS } else { &ICMP4_ERRORS };
    if !errors.contains(&ty) {
        return None;
    }
    let inner = icmp.get(ICMP_ERROR_HEADER..)?;
    let (ip, tcp_off) = match inner.first()? >> 4 {
        4 if inner.len() >= 20 => {
            let ihl = usize::from(byte(inner, 0) & 0x0f) * 4;
            let frag_off = u16::from_be_bytes(arr(inner, 6)) & 0x1fff;
            if ihl < 20 || byte(inner, 9) != 6 || frag_off != 0 {
                return None;
            }
            let a = |i: usize| IpAddr::V4(Ipv4Addr::from(arr::<4>(inner, i)));
            (
                IpInfo {
                    src: a(12),
                    dst: a(16),
                    proto: 6,
                    fragment: false,
                    ttl: byte(inner, 8),
                    ident: u16::from_be_bytes(arr(inner, 4)),
                    offset: 0,
                },
                ihl,
            )
        }
        6 if inner.len() >= 40 => {
            if byte(inner, 6) != 6 {
                return None;
            }
            let a = |i: usize| IpAddr::V6(Ipv6Addr::from(arr::<16>(inner, i)));
            (
                IpInfo {
                    src: a(8),
                    dst: a(24),
                    proto: 6,
                    fragment: false,
                    ttl: byte(inner, 7),
                    ident: 0,
                    offset: 0,
                },
                40,
            )
        }
        _ => return None,
    };
    PartialTcp::from_bytes(ip, inner.get(tcp_off..)?, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoted_syn_in_port_unreachable() {
        let mut icmp = vec![3, 3, 0, 0, 0, 0, 0, 0];
        icmp.extend_from_slice(&[
            0x45, 0, 0, 60, 0, 0, 0x40, 0, 64, 6, 0, 0, 192, 168, 0, 1, 10, 0, 0, 1,
        ]);
        icmp.extend_from_slice(&[
            0xc0, 0x01, 0x01, 0xbb, 0, 0, 0, 7, 0, 0, 0, 0, 0xa0, 0x02, 0xfa, 0xf0,
        ]);
        let p = quoted_tcp(&icmp, false).unwrap();
        assert_eq!((p.src_port, p.dst_port, p.seq), (49153, 443, SeqNum(7)));
        assert!(p.flags.syn() && p.quoted);
        assert_eq!(p.ip.dst, IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)));
        // Only 8 quoted TCP bytes (the RFC 792 minimum): not enough to identify it.
        assert!(quoted_tcp(&icmp[..36], false).is_none());
        // An echo reply quotes nothing.
        icmp[0] = 0;
        assert!(quoted_tcp(&icmp, false).is_none());
    }

    #[test]
    fn never_panics_on_short_input() {
        for n in 0..60 {
            let icmp = vec![3u8; n];
            let _ = quoted_tcp(&icmp, false);
            let _ = quoted_tcp(&icmp, true);
        }
    }
}
