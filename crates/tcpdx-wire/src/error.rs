//! Where and why decoding of a frame stopped.

use std::fmt;

/// A protocol layer of the decoder.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Layer {
    /// Link layer (Ethernet, SLL, null, PPP...).
    Link,
    /// VLAN / MPLS / PPPoE shims.
    Shim,
    /// IPv4 or IPv6 header.
    Ip,
    /// IPv6 extension headers.
    IpExt,
    /// Tunnel header (GRE, VXLAN, Geneve, GTP-U...).
    Tunnel,
    /// UDP header.
    Udp,
    /// TCP header or options.
    Tcp,
}

/// Why decoding stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum StopKind {
    /// Fewer captured bytes than the header needs.
    Truncated {
        /// Bytes the header needs.
        required: u16,
        /// Bytes available.
        available: u16,
    },
    /// A link type the decoder does not know.
    UnsupportedLinkType(u16),
    /// An EtherType / protocol number that leads to nothing the decoder follows.
    NotIp,
    /// A header field with an impossible value (e.g. IHL < 5, TCP data offset < 5).
    Malformed(&'static str),
    /// IP fragment: the TCP header is not analysed.
    Fragment,
    /// The IP payload (or a UDP payload that is not a known tunnel) is not TCP.
    NotTcp {
        /// IP protocol number of the payload (17 for UDP that is not a tunnel).
        proto: u8,
    },
    /// More nested headers than the decoder walks (see `decode::MAX_LAYERS`).
    TooDeep,
}

/// Decoding stopped at `layer`, `offset` bytes into the frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DecodeStop {
    /// Layer where it stopped.
    pub layer: Layer,
    /// What was wrong.
    pub kind: StopKind,
    /// Byte offset of that layer's header in the frame.
    pub offset: u16,
}

impl fmt::Display for DecodeStop {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:?} at offset {}: {:?}",
            self.layer, self.offset, self.kind
        )
    }
}
