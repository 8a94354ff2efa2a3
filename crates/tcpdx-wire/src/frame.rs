//! One captured record, as the capture layer hands it to the rest of the pipeline.

use std::fmt;

/// Wireshark's `frame.number`: 1-based, counts every record of the capture.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct FrameNo(pub u64);

impl fmt::Display for FrameNo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// Capture time in nanoseconds since the Unix epoch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Timestamp(pub i64);

impl Timestamp {
    /// Builds a timestamp from nanoseconds since the epoch.
    pub const fn from_nanos(ns: i64) -> Self {
        Self(ns)
    }
    /// Nanoseconds since the epoch.
    pub const fn nanos(self) -> i64 {
        self.0
    }
    /// Signed difference `self - earlier` in nanoseconds.
    pub const fn since(self, earlier: Timestamp) -> i64 {
        self.0 - earlier.0
    }
}

/// A pcap/pcapng link-layer type (LINKTYPE_* value, e.g. 1 = Ethernet).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LinkType(pub u16);

impl LinkType {
    /// BSD loopback / null: 4-byte address family in host byte order.
    pub const NULL: Self = Self(0);
    /// Ethernet II / 802.3.
    pub const ETHERNET: Self = Self(1);
    /// PPP (RFC 1661), with or without HDLC framing bytes.
    pub const PPP: Self = Self(9);
    /// Raw IP (BSD value 12 on some systems; LINKTYPE_RAW = 101 in files).
    pub const RAW_BSD: Self = Self(12);
    /// Raw IP as DLT 14 on some BSDs.
    pub const RAW_BSD14: Self = Self(14);
    /// PPP in HDLC-like framing (RFC 1662).
    pub const PPP_HDLC: Self = Self(50);
    /// Raw IPv4 or IPv6, version taken from the first nibble.
    pub const RAW: Self = Self(101);
    /// OpenBSD loopback: like NULL but the family is big-endian.
    pub const LOOP: Self = Self(108);
    /// Linux "cooked" capture v1 (SLL).
    pub const LINUX_SLL: Self = Self(113);
    /// Raw IPv4 only.
    pub const IPV4: Self = Self(228);
    /// Raw IPv6 only.
    pub const IPV6: Self = Self(229);
    /// Linux "cooked" capture v2 (SLL2).
    pub const LINUX_SLL2: Self = Self(276);
    /// Cisco HDLC (address, control, EtherType).
    pub const C_HDLC: Self = Self(104);
    /// Linux netfilter NFLOG.
    pub const NFLOG: Self = Self(239);
    /// FDDI.
    pub const FDDI: Self = Self(10);
    /// IEEE 802.11 without radio information.
    pub const IEEE802_11: Self = Self(105);
    /// IEEE 802.11 with a radiotap header.
    pub const IEEE802_11_RADIOTAP: Self = Self(127);
    /// ARCNET as captured on Linux (with the 2-byte offset field).
    pub const ARCNET_LINUX: Self = Self(129);
    /// Per-Packet Information header, then a frame of the link type it names.
    pub const PPI: Self = Self(192);
    /// IP over InfiniBand (a pseudo header, then RFC 4391's IPoIB header).
    pub const IPOIB: Self = Self(242);
}

/// One captured record: borrowed from the reader's buffer, valid until the next read.
#[derive(Clone, Copy, Debug)]
pub struct Frame<'a> {
    /// Wireshark frame number (1-based, every record counts, even undecodable ones).
    pub no: FrameNo,
    /// Capture timestamp.
    pub ts: Timestamp,
    /// Link type of the interface the frame was captured on.
    pub link: LinkType,
    /// Length of the frame on the wire (may exceed `data.len()` when snaplen cut it).
    pub orig_len: u32,
    /// pcapng interface id (0 for pcap).
    pub interface: u32,
    /// The captured bytes.
    pub data: &'a [u8],
}
