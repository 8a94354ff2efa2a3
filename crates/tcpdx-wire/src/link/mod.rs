//! Link-layer and shim headers: Ethernet, 802.1Q/QinQ and other tags, LLC/SNAP, Linux
//! cooked (SLL, SLL2), BSD null/loopback, PPP, NFLOG, and the less common links Wireshark
//! also follows (802.11 data frames with radiotap/PPI, FDDI, ARCNET, IP over InfiniBand).
//!
//! Each module is a zero-copy view over the frame bytes: `from_slice` checks the length
//! once, then every accessor reads a named field range and cannot panic.

pub mod arcnet;
pub mod ethernet;
pub mod fddi;
pub mod ipoib;
pub mod llc;
pub mod nflog;
pub mod null;
pub mod ppi;
pub mod ppp;
pub mod sll;
pub mod sll2;
pub mod tag;
pub mod vlan;
pub mod wlan;

/// EtherType values the decoder follows (IEEE registry).
pub mod ethertype {
    /// IPv4.
    pub const IPV4: u16 = 0x0800;
    /// IPv6.
    pub const IPV6: u16 = 0x86dd;
    /// IEEE 802.1Q customer VLAN tag.
    pub const VLAN: u16 = 0x8100;
    /// IEEE 802.1ad service VLAN tag (QinQ).
    pub const QINQ: u16 = 0x88a8;
    /// Pre-standard QinQ tag used by some vendors.
    pub const QINQ_OLD: u16 = 0x9100;
    /// MPLS unicast.
    pub const MPLS: u16 = 0x8847;
    /// MPLS multicast.
    pub const MPLS_MULTICAST: u16 = 0x8848;
    /// PPPoE session stage.
    pub const PPPOE_SESSION: u16 = 0x8864;
    /// Transparent Ethernet bridging (Ethernet inside GRE or Geneve).
    pub const TEB: u16 = 0x6558;
    /// ERSPAN type II (in GRE).
    pub const ERSPAN_II: u16 = 0x88be;
    /// ERSPAN type III (in GRE).
    pub const ERSPAN_III: u16 = 0x22eb;
    /// IEEE 802.1BR E-Tag.
    pub const ETAG: u16 = 0x893f;
    /// Cisco VN-Tag.
    pub const VNTAG: u16 = 0x8926;
    /// Cisco FabricPath.
    pub const FABRICPATH: u16 = 0x8903;
    /// Aruba access points: an 802.11 frame (no FCS) inside GRE.
    pub const ARUBA_WLAN: u16 = 0x8200;
    /// Largest value that is an IEEE 802.3 length rather than an EtherType.
    pub const MAX_802_3_LEN: u16 = 1500;
}
