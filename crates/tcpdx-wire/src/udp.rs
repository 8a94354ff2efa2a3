//! UDP header (RFC 768), 8 bytes: only followed to reach tunnels (VXLAN, Geneve, GTP-U,
//! ...), chosen by port the way Wireshark chooses.

use crate::bytes::{be16, need, tail};
use crate::error::StopKind;

mod field {
    use crate::bytes::Field;
    pub const SRC_PORT: Field = 0..2;
    pub const DST_PORT: Field = 2..4;
    pub const LENGTH: Field = 4..6;
    pub const CHECKSUM: Field = 6..8;
}

/// Length of the header.
pub const HEADER_LEN: usize = 8;

/// UDP ports (1..=6081, the highest tunnel port) on which tshark 4.0.17 registers a
/// dissector (`tshark -G decodes`, table `udp.port`), sorted.
///
/// Wireshark tries the lower port of a datagram first, then the higher one; a tunnel on
/// the higher port is only reached when nothing is registered on the lower one. This list
/// lets [`tunnel_port`] make the same choice.
pub const WIRESHARK_PORTS: [u16; 190] = [
    7, 13, 19, 37, 49, 53, 67, 68, 69, 88, 111, 123, 137, 138, 161, 162, 173, 177, 213, 269, 319,
    320, 389, 427, 434, 464, 473, 496, 500, 502, 513, 514, 520, 521, 524, 525, 539, 546, 547, 573,
    623, 631, 646, 654, 664, 698, 699, 701, 750, 853, 854, 910, 921, 925, 1001, 1044, 1052, 1069,
    1089, 1090, 1091, 1101, 1113, 1153, 1194, 1293, 1547, 1628, 1629, 1645, 1646, 1700, 1701, 1718,
    1719, 1745, 1755, 1812, 1813, 1900, 1985, 2029, 2048, 2055, 2067, 2099, 2123, 2152, 2157, 2190,
    2221, 2222, 2231, 2246, 2268, 2269, 2313, 2345, 2424, 2427, 2428, 2727, 2887, 2944, 2945, 2948,
    2949, 2960, 3000, 3121, 3130, 3205, 3222, 3250, 3333, 3343, 3357, 3386, 3389, 3452, 3455, 3478,
    3483, 3503, 3540, 3544, 3567, 3622, 3671, 3784, 3785, 3792, 3799, 3804, 3819, 3863, 3956, 4000,
    4011, 4058, 4305, 4306, 4307, 4341, 4342, 4500, 4533, 4534, 4551, 4555, 4556, 4569, 4665, 4672,
    4713, 4729, 4739, 4754, 4784, 4789, 4790, 4791, 4991, 5000, 5001, 5031, 5050, 5060, 5072, 5094,
    5246, 5247, 5264, 5265, 5350, 5351, 5353, 5355, 5404, 5405, 5436, 5555, 5567, 5678, 5683, 5684,
    5868, 6060, 6073, 6081,
];

/// Which port of a datagram Wireshark dissects by, among `tunnels`: the lower port first,
/// then the higher; a registered non-tunnel lower port wins (returns `None`). Port 0 is
/// never used.
pub fn tunnel_port(src: u16, dst: u16, tunnels: &[u16]) -> Option<u16> {
    let (lo, hi) = if src <= dst { (src, dst) } else { (dst, src) };
    for port in [lo, hi] {
        if port == 0 {
            continue;
        }
        if tunnels.contains(&port) {
            return Some(port);
        }
        if WIRESHARK_PORTS.binary_search(&port).is_ok() {
            return None;
        }
    }
    None
}

/// A checked view of a UDP header.
#[derive(Clone, Copy, Debug)]
pub struct UdpSlice<'a> {
    buf: &'a [u8],
}

impl<'a> UdpSlice<'a> {
    /// Checks that the header was captured.
    pub fn from_slice(buf: &'a [u8]) -> Result<Self, StopKind> {
        need(buf, HEADER_LEN)?;
        Ok(Self { buf })
    }
    /// Source port.
    pub fn src_port(&self) -> u16 {
        be16(self.buf, field::SRC_PORT)
    }
    /// Destination port.
    pub fn dst_port(&self) -> u16 {
        be16(self.buf, field::DST_PORT)
    }
    /// Length field (header included; 0 for jumbograms / TSO).
    pub fn length(&self) -> u16 {
        be16(self.buf, field::LENGTH)
    }
    /// Checksum (not verified).
    pub fn checksum(&self) -> u16 {
        be16(self.buf, field::CHECKSUM)
    }
    /// Captured bytes after the header.
    pub fn payload(&self) -> &'a [u8] {
        tail(self.buf, HEADER_LEN)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    static HDR: [u8; 9] = [0xc0, 0x00, 0x12, 0xb5, 0x00, 0x09, 0xab, 0xcd, 0x08];

    #[test]
    fn deconstruct() {
        let u = UdpSlice::from_slice(&HDR).unwrap();
        assert_eq!(u.src_port(), 0xc000);
        assert_eq!(u.dst_port(), 4789);
        assert_eq!(u.length(), 9);
        assert_eq!(u.checksum(), 0xabcd);
        assert_eq!(u.payload(), &[0x08]);
    }

    #[test]
    fn port_choice_follows_wireshark() {
        let tunnels = [4789, 2152];
        assert_eq!(tunnel_port(49152, 4789, &tunnels), Some(4789));
        assert_eq!(tunnel_port(4789, 60000, &tunnels), Some(4789));
        // DNS on the lower port wins over VXLAN.
        assert_eq!(tunnel_port(53, 4789, &tunnels), None);
        // Nothing registered on 1000: the higher port decides.
        assert_eq!(tunnel_port(1000, 4789, &tunnels), Some(4789));
        assert_eq!(tunnel_port(0, 2152, &tunnels), Some(2152));
        assert_eq!(tunnel_port(5353, 5353, &tunnels), None);
        assert!(WIRESHARK_PORTS.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn truncated_at_every_length() {
        for len in 0..HEADER_LEN {
            assert!(UdpSlice::from_slice(&HDR[..len]).is_err());
        }
    }
}
