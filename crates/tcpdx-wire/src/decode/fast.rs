//! The fast path of [`decode`](super::decode): Ethernet II, IPv4 without options, an
//! unfragmented TCP header that was wholly captured. That is nearly every frame of a
//! typical capture; it is read here with one length check and fixed offsets, and anything
//! else (VLAN tags, IP options, TSO lengths, short or odd headers...) is left to the general
//! walk, which gives the same view for the frames accepted here (`tests::fast_path_agrees`).
//!
//! [`FastTcp`] is a zero-copy view: its fields are read from the frame where they lie, so a
//! caller can write them straight into its own structure (`tcpdx_core::FrameInput`'s
//! `decode_from`). Building a [`PacketView`] and moving it on cost a fifth of a bulk
//! `diagnose` run: the moves copied it with wide loads right after it had been written with
//! narrow stores, which the CPU cannot forward (a stall of a dozen cycles per load).

use std::net::{IpAddr, Ipv4Addr};

use super::{IpInfo, PacketView, TcpFlags, TcpHeader, TcpOptions};
use crate::bytes::{arr, byte};
use crate::frame::LinkType;
use crate::link::{ethernet, ethertype};
use crate::seq::SeqNum;

/// Offset of the IPv4 header.
const IP: usize = ethernet::HEADER_LEN;
/// Offset of the TCP header (IPv4 without options).
const TCP: usize = IP + 20;
/// Bytes the fast path reads unconditionally: Ethernet, IPv4 and the fixed TCP header.
const FIXED: usize = TCP + 20;

/// An Ethernet II / IPv4 (no options, not a fragment) / TCP frame whose TCP header was
/// wholly captured, read where it lies. Its fields are those [`decode`](super::decode)
/// gives for the frame.
#[derive(Clone, Copy, Debug)]
pub struct FastTcp<'a> {
    h: &'a [u8; FIXED],
    options: &'a [u8],
    payload: &'a [u8],
    payload_len: u32,
}

impl<'a> FastTcp<'a> {
    /// The view of `data` (a frame of link type `link`, `orig_len` bytes on the wire), or
    /// `None` when the frame has another shape (the general walk then decodes it).
    #[inline]
    pub fn parse(link: LinkType, data: &'a [u8], orig_len: u32) -> Option<Self> {
        if link != LinkType::ETHERNET {
            return None;
        }
        Self::ethernet(data, super::wire_len(data, orig_len))
    }

    /// [`Self::parse`] of an Ethernet frame; `wire_len` is `max(orig_len, data.len())`.
    #[inline]
    pub(super) fn ethernet(data: &'a [u8], wire_len: usize) -> Option<Self> {
        let h: &[u8; FIXED] = data.get(..FIXED)?.try_into().ok()?;
        // Constant offsets into a fixed-size array: the checks inside `arr`/`byte` fold away.
        let be16 = |at: usize| u16::from_be_bytes(arr(h, at));
        // Version 4, IHL 5, protocol TCP, neither MF nor a fragment offset.
        if be16(12) != ethertype::IPV4
            || byte(h, IP) != 0x45
            || byte(h, IP + 9) != 6
            || be16(IP + 6) & 0x3fff != 0
        {
            return None;
        }
        let total = usize::from(be16(IP + 2));
        let tcp_len = usize::from(byte(h, TCP + 12) >> 4) * 4;
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
        Some(Self {
            h,
            options: data.get(TCP + 20..tcp_end)?,
            payload: data.get(tcp_end..captured_end).unwrap_or_default(),
            payload_len: (wire_end - tcp_end) as u32,
        })
    }

    #[inline]
    fn be16(&self, at: usize) -> u16 {
        u16::from_be_bytes(arr(self.h, at))
    }

    #[inline]
    fn be32(&self, at: usize) -> u32 {
        u32::from_be_bytes(arr(self.h, at))
    }

    /// IPv4 source address.
    #[inline]
    pub fn src(&self) -> Ipv4Addr {
        Ipv4Addr::from(arr::<4>(self.h, IP + 12))
    }

    /// IPv4 destination address.
    #[inline]
    pub fn dst(&self) -> Ipv4Addr {
        Ipv4Addr::from(arr::<4>(self.h, IP + 16))
    }

    /// TTL.
    #[inline]
    pub fn ttl(&self) -> u8 {
        byte(self.h, IP + 8)
    }

    /// IPv4 identification.
    #[inline]
    pub fn ident(&self) -> u16 {
        self.be16(IP + 4)
    }

    /// TCP source port.
    #[inline]
    pub fn src_port(&self) -> u16 {
        self.be16(TCP)
    }

    /// TCP destination port.
    #[inline]
    pub fn dst_port(&self) -> u16 {
        self.be16(TCP + 2)
    }

    /// Raw sequence number.
    #[inline]
    pub fn seq(&self) -> SeqNum {
        SeqNum(self.be32(TCP + 4))
    }

    /// Raw acknowledgement number.
    #[inline]
    pub fn ack(&self) -> SeqNum {
        SeqNum(self.be32(TCP + 8))
    }

    /// Flag bits.
    #[inline]
    pub fn flags(&self) -> TcpFlags {
        TcpFlags(self.be16(TCP + 12) & 0x01ff)
    }

    /// Raw window field.
    #[inline]
    pub fn window(&self) -> u16 {
        self.be16(TCP + 14)
    }

    /// Segment payload length from the IP header (Wireshark's `tcp.len`).
    #[inline]
    pub fn payload_len(&self) -> u32 {
        self.payload_len
    }

    /// The captured part of the payload.
    #[inline]
    pub fn payload(&self) -> &'a [u8] {
        self.payload
    }

    /// The decoded options.
    #[inline]
    pub fn options(&self) -> TcpOptions {
        let mut o = TcpOptions::NONE;
        self.options_into(&mut o);
        o
    }

    /// Writes [`Self::options`] into `out`, field by field for the common lists (in place:
    /// see the module doc; assigning a whole `TcpOptions` went through a stack copy).
    #[inline]
    pub fn options_into(&self, out: &mut TcpOptions) {
        let timestamps = match self.options {
            [] => None,
            // NOP, NOP, timestamps: what nearly every segment of a Linux sender carries.
            [1, 1, 8, 10, ts @ ..] if ts.len() == 8 => Some((
                u32::from_be_bytes(arr(ts, 0)),
                u32::from_be_bytes(arr(ts, 4)),
            )),
            other => {
                *out = TcpOptions::parse(other);
                return;
            }
        };
        out.mss = None;
        out.window_scale = None;
        out.sack_permitted = false;
        if out.sack_count != 0 {
            out.sack = TcpOptions::NONE.sack;
            out.sack_count = 0;
        }
        out.timestamps = timestamps;
        out.malformed = false;
    }

    /// The frame as [`decode`](super::decode) views it.
    pub fn view(&self) -> PacketView<'a> {
        PacketView {
            ip: Some(IpInfo {
                src: IpAddr::V4(self.src()),
                dst: IpAddr::V4(self.dst()),
                proto: 6,
                fragment: false,
                ttl: self.ttl(),
                ident: self.ident(),
                offset: IP as u16,
            }),
            tcp: Some(TcpHeader {
                src_port: self.src_port(),
                dst_port: self.dst_port(),
                seq: self.seq(),
                ack: self.ack(),
                flags: self.flags(),
                window: self.window(),
                header_len: (20 + self.options.len()) as u8,
                urgent: self.be16(TCP + 18),
                options: self.options(),
                payload_len: self.payload_len,
                payload: self.payload,
            }),
            stop: None,
            partial_tcp: None,
        }
    }
}
