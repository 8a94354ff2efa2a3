//! IPv4 header (RFC 791): 20 bytes plus options, `IHL * 4` bytes in all.
//!
//! `from_slice` checks the version, that IHL is at least 5 and that the whole header
//! (options included) was captured; every accessor is then in bounds.

use std::net::Ipv4Addr;

use crate::bytes::{arr, be16, byte, need, sub, tail};
use crate::error::StopKind;

mod field {
    use crate::bytes::Field;
    pub const VER_IHL: usize = 0;
    pub const TOS: usize = 1;
    pub const TOTAL_LEN: Field = 2..4;
    pub const IDENT: Field = 4..6;
    pub const FLAGS_FRAG: Field = 6..8;
    pub const TTL: usize = 8;
    pub const PROTOCOL: usize = 9;
    pub const CHECKSUM: Field = 10..12;
    pub const SRC: Field = 12..16;
    pub const DST: Field = 16..20;
}

/// Length of a header without options.
pub const MIN_HEADER_LEN: usize = 20;

/// "More fragments" flag in the flags/fragment-offset field.
const FLAG_MF: u16 = 0x2000;
/// "Don't fragment" flag.
const FLAG_DF: u16 = 0x4000;
/// Fragment offset mask (units of 8 bytes).
const FRAG_OFFSET_MASK: u16 = 0x1fff;

/// A checked view of an IPv4 header and what follows it.
#[derive(Clone, Copy, Debug)]
pub struct Ipv4Slice<'a> {
    buf: &'a [u8],
}

impl<'a> Ipv4Slice<'a> {
    /// Checks version 4, IHL >= 5 and that `IHL * 4` bytes are present.
    pub fn from_slice(buf: &'a [u8]) -> Result<Self, StopKind> {
        need(buf, 1)?;
        if byte(buf, field::VER_IHL) >> 4 != 4 {
            return Err(StopKind::Malformed("IPv4 version is not 4"));
        }
        let header_len = usize::from(byte(buf, field::VER_IHL) & 0x0f) * 4;
        if header_len < MIN_HEADER_LEN {
            return Err(StopKind::Malformed("IPv4 header length below 20"));
        }
        need(buf, header_len)?;
        Ok(Self { buf })
    }
    /// Header length in bytes (IHL * 4).
    pub fn header_len(&self) -> usize {
        usize::from(byte(self.buf, field::VER_IHL) & 0x0f) * 4
    }
    /// Type of service / DSCP + ECN byte.
    pub fn tos(&self) -> u8 {
        byte(self.buf, field::TOS)
    }
    /// Total length field (0 in some TSO captures).
    pub fn total_len(&self) -> u16 {
        be16(self.buf, field::TOTAL_LEN)
    }
    /// Identification.
    pub fn ident(&self) -> u16 {
        be16(self.buf, field::IDENT)
    }
    /// Don't-fragment flag.
    pub fn dont_fragment(&self) -> bool {
        be16(self.buf, field::FLAGS_FRAG) & FLAG_DF != 0
    }
    /// More-fragments flag.
    pub fn more_fragments(&self) -> bool {
        be16(self.buf, field::FLAGS_FRAG) & FLAG_MF != 0
    }
    /// Fragment offset in bytes.
    pub fn fragment_offset(&self) -> u32 {
        u32::from(be16(self.buf, field::FLAGS_FRAG) & FRAG_OFFSET_MASK) * 8
    }
    /// True for any fragment (MF set or offset != 0).
    pub fn is_fragment(&self) -> bool {
        be16(self.buf, field::FLAGS_FRAG) & (FLAG_MF | FRAG_OFFSET_MASK) != 0
    }
    /// Time to live.
    pub fn ttl(&self) -> u8 {
        byte(self.buf, field::TTL)
    }
    /// Upper-layer protocol number.
    pub fn protocol(&self) -> u8 {
        byte(self.buf, field::PROTOCOL)
    }
    /// Header checksum (not verified: Wireshark does not by default).
    pub fn checksum(&self) -> u16 {
        be16(self.buf, field::CHECKSUM)
    }
    /// Source address.
    pub fn src(&self) -> Ipv4Addr {
        addr(sub(self.buf, field::SRC))
    }
    /// Destination address.
    pub fn dst(&self) -> Ipv4Addr {
        addr(sub(self.buf, field::DST))
    }
    /// Options bytes (between the fixed header and `header_len`).
    pub fn options(&self) -> &'a [u8] {
        sub(self.buf, MIN_HEADER_LEN..self.header_len())
    }
    /// The destination the datagram is routed to: the last hop of a loose or strict
    /// source route (options 0x83 / 0x89) that is not yet complete, else `dst()`.
    /// Wireshark uses that address as `ip.dst`, so connection identity follows it.
    pub fn final_destination(&self) -> Ipv4Addr {
        let opts = self.options();
        let mut i = 0;
        while i < opts.len() {
            match byte(opts, i) {
                0 => break,
                1 => i += 1,
                kind => {
                    let Some(&len) = opts.get(i + 1) else { break };
                    let len = usize::from(len);
                    if len < 2 || i + len > opts.len() {
                        break;
                    }
                    let ptr = opts.get(i + 2).copied().map_or(0, usize::from);
                    let is_route = kind == 0x83 || kind == 0x89;
                    if is_route && len >= 7 && ptr <= len {
                        let last = i + 3 + (len - 3) / 4 * 4 - 4;
                        return Ipv4Addr::from(arr::<4>(opts, last));
                    }
                    i += len;
                }
            }
        }
        self.dst()
    }
    /// Captured bytes after the header (not cut to the total length).
    pub fn rest(&self) -> &'a [u8] {
        tail(self.buf, self.header_len())
    }
}

fn addr(b: &[u8]) -> Ipv4Addr {
    Ipv4Addr::from(arr::<4>(b, 0))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 24-byte header (one 4-byte option: NOP NOP NOP EOL), total length 44, TCP.
    static HDR: [u8; 25] = [
        0x46, 0x10, 0x00, 0x2c, 0x12, 0x34, 0x40, 0x00, 0x40, 0x06, 0xab, 0xcd, 10, 0, 0, 1, 10, 0,
        0, 2, 1, 1, 1, 0, 0xee,
    ];

    #[test]
    fn deconstruct() {
        let ip = Ipv4Slice::from_slice(&HDR).unwrap();
        assert_eq!(ip.header_len(), 24);
        assert_eq!(ip.tos(), 0x10);
        assert_eq!(ip.total_len(), 44);
        assert_eq!(ip.ident(), 0x1234);
        assert!(ip.dont_fragment());
        assert!(!ip.more_fragments());
        assert!(!ip.is_fragment());
        assert_eq!(ip.ttl(), 64);
        assert_eq!(ip.protocol(), 6);
        assert_eq!(ip.checksum(), 0xabcd);
        assert_eq!(ip.src(), Ipv4Addr::new(10, 0, 0, 1));
        assert_eq!(ip.dst(), Ipv4Addr::new(10, 0, 0, 2));
        assert_eq!(ip.options(), &[1, 1, 1, 0]);
        assert_eq!(ip.rest(), &[0xee]);
    }

    #[test]
    fn source_route_gives_the_final_destination() {
        // LSRR option: len 11, pointer 4, route 1.2.3.4, 5.6.7.8; then EOL.
        let mut h = vec![
            0x48, 0, 0, 0x34, 0, 1, 0, 0, 64, 6, 0, 0, 9, 10, 11, 12, 13, 14, 15, 16,
        ];
        h.extend_from_slice(&[0x83, 11, 4, 1, 2, 3, 4, 5, 6, 7, 8, 0]);
        let ip = Ipv4Slice::from_slice(&h).unwrap();
        assert_eq!(ip.dst(), Ipv4Addr::new(13, 14, 15, 16));
        assert_eq!(ip.final_destination(), Ipv4Addr::new(5, 6, 7, 8));
    }

    #[test]
    fn fragments() {
        let mut h = HDR;
        h[6] = 0x20; // MF
        let ip = Ipv4Slice::from_slice(&h).unwrap();
        assert!(ip.is_fragment() && ip.more_fragments());
        h[6] = 0x00;
        h[7] = 0x03; // offset 3 * 8
        let ip = Ipv4Slice::from_slice(&h).unwrap();
        assert!(ip.is_fragment());
        assert_eq!(ip.fragment_offset(), 24);
    }

    #[test]
    fn truncated_at_every_length() {
        assert!(matches!(
            Ipv4Slice::from_slice(&[]),
            Err(StopKind::Truncated { .. })
        ));
        for len in 1..24 {
            assert_eq!(
                Ipv4Slice::from_slice(&HDR[..len]).unwrap_err(),
                StopKind::Truncated {
                    required: 24,
                    available: len as u16
                }
            );
        }
    }

    #[test]
    fn impossible_lengths() {
        let mut h = HDR;
        h[0] = 0x44;
        assert!(matches!(
            Ipv4Slice::from_slice(&h),
            Err(StopKind::Malformed(_))
        ));
        h[0] = 0x65;
        assert!(matches!(
            Ipv4Slice::from_slice(&h),
            Err(StopKind::Malformed(_))
        ));
    }
}
