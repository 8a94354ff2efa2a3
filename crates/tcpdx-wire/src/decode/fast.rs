//! The fast path of [`decode`](super::decode): Ethernet II, IPv4 without options, an
//! unfragmented TCP header that was wholly captured. That is nearly every frame of a
//! typical capture; it is read here with one length check and fixed offsets, and anything
//! else (VLAN tags, IP options, TSO lengths, short or odd headers...) is left to the general
//! walk, which gives the same view for the frames accepted here (`tests::fast_path_agrees`).

use std::net::{IpAddr, Ipv4Addr};

use super::{IpInfo, PacketView, TcpFlags, TcpHeader, TcpOptions};
use crate::bytes::{arr, byte};
use crate::link::{ethernet, ethertype};
use crate::seq::SeqNum;

/// Offset of the IPv4 header.
const IP: usize = ethernet::HEADER_LEN;
/// Offset of the TCP header (IPv4 without options).
const TCP: usize = IP + 20;
/// Bytes the fast path reads unconditionally: Ethernet, IPv4 and the fixed TCP header.
const FIXED: usize = TCP + 20;

/// The view of an Ethernet/IPv4/TCP frame, or `None` for the general walk.
/// `wire_len` is `max(orig_len, data.len())`, as for the walk.
#[inline]
pub(super) fn ethernet_ipv4_tcp(data: &[u8], wire_len: usize) -> Option<PacketView<'_>> {
    let h: &[u8; FIXED] = data.get(..FIXED)?.try_into().ok()?;
    // Constant offsets into a fixed-size array: the checks inside `arr`/`byte` fold away.
    let be16 = |at: usize| u16::from_be_bytes(arr(h, at));
    let be32 = |at: usize| u32::from_be_bytes(arr(h, at));
    let byte = |at: usize| byte(h, at);
    // Version 4, IHL 5, protocol TCP, neither MF nor a fragment offset.
    if be16(12) != ethertype::IPV4
        || byte(IP) != 0x45
        || byte(IP + 9) != 6
        || be16(IP + 6) & 0x3fff != 0
    {
        return None;
    }
    let total = usize::from(be16(IP + 2));
    let tcp_len = usize::from(byte(TCP + 12) >> 4) * 4;
    // A zero (TSO) or short total length, and an odd data offset, take the general path.
    if total < 40 || tcp_len < 20 {
        return None;
    }
    let wire_end = wire_len.min(IP + total);
    let captured_end = data.len().min(wire_end);
    let tcp_end = TCP + tcp_len;
    if tcp_end > captured_end {
        return None;
    }
    let options_raw = data.get(TCP + 20..tcp_end)?;
    let options = match options_raw {
        [] => TcpOptions::default(),
        // NOP, NOP, timestamps: what nearly every segment of a Linux sender carries.
        [1, 1, 8, 10, ts @ ..] if ts.len() == 8 => TcpOptions {
            timestamps: Some((
                u32::from_be_bytes(arr(ts, 0)),
                u32::from_be_bytes(arr(ts, 4)),
            )),
            ..TcpOptions::default()
        },
        other => TcpOptions::parse(other),
    };
    let addr = |at: usize| Ipv4Addr::from(arr::<4>(h, at));
    Some(PacketView {
        ip: Some(IpInfo {
            src: IpAddr::V4(addr(IP + 12)),
            dst: IpAddr::V4(addr(IP + 16)),
            proto: 6,
            fragment: false,
            ttl: byte(IP + 8),
            offset: IP as u16,
        }),
        tcp: Some(TcpHeader {
            src_port: be16(TCP),
            dst_port: be16(TCP + 2),
            seq: SeqNum(be32(TCP + 4)),
            ack: SeqNum(be32(TCP + 8)),
            flags: TcpFlags(be16(TCP + 12) & 0x01ff),
            window: be16(TCP + 14),
            header_len: tcp_len as u8,
            urgent: be16(TCP + 18),
            options,
            payload_len: (wire_end - tcp_end) as u32,
            payload: data.get(tcp_end..captured_end).unwrap_or_default(),
        }),
        stop: None,
        partial_tcp: None,
    })
}
