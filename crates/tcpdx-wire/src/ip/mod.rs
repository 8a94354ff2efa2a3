//! IP headers: IPv4 (with options and fragments) and IPv6 (with extension headers).

pub mod ext;
pub mod ipv4;
pub mod ipv6;

/// IP protocol numbers (IANA) the decoder knows about.
pub mod proto {
    /// IPv6 hop-by-hop options.
    pub const HOPOPTS: u8 = 0;
    /// ICMP.
    pub const ICMP: u8 = 1;
    /// IPv4 in IP.
    pub const IPIP: u8 = 4;
    /// TCP.
    pub const TCP: u8 = 6;
    /// UDP.
    pub const UDP: u8 = 17;
    /// IPv6 in IP.
    pub const IPV6: u8 = 41;
    /// IPv6 routing header.
    pub const ROUTING: u8 = 43;
    /// IPv6 fragment header.
    pub const FRAGMENT: u8 = 44;
    /// Generic routing encapsulation.
    pub const GRE: u8 = 47;
    /// Encapsulating security payload.
    pub const ESP: u8 = 50;
    /// Authentication header.
    pub const AH: u8 = 51;
    /// ICMPv6.
    pub const ICMPV6: u8 = 58;
    /// IPv6 "no next header".
    pub const NONE: u8 = 59;
    /// IPv6 destination options.
    pub const DSTOPTS: u8 = 60;
    /// Mobility header.
    pub const MOBILITY: u8 = 135;
    /// Shim6.
    pub const SHIM6: u8 = 140;
}
