//! Tunnel and shim headers that can carry TCP: GRE (and ERSPAN), VXLAN, Geneve, GTP-U,
//! VXLAN-GPE, GRE-in-UDP, Teredo, L2TPv2, AYIYA, CAPWAP, MPLS and PPPoE.
//!
//! Each module is a zero-copy view with a `from_slice` that checks the full header length,
//! including optional fields announced by flags.

pub mod ayiya;
pub mod capwap;
pub mod erspan;
pub mod geneve;
pub mod gre;
pub mod gtp;
pub mod l2tp;
pub mod mpls;
pub mod pppoe;
pub mod teredo;
pub mod vxlan;

/// UDP ports on which tunnels are recognised (IANA).
pub mod port {
    /// VXLAN (RFC 7348).
    pub const VXLAN: u16 = 4789;
    /// Geneve (RFC 8926).
    pub const GENEVE: u16 = 6081;
    /// GTP-U (3GPP TS 29.281).
    pub const GTP_U: u16 = 2152;
    /// GRE in UDP (RFC 8086).
    pub const GRE_IN_UDP: u16 = 4754;
    /// AYIYA.
    pub const AYIYA: u16 = 5072;
    /// CAPWAP data channel (RFC 5415).
    pub const CAPWAP_DATA: u16 = 5247;
    /// Teredo (RFC 4380).
    pub const TEREDO: u16 = 3544;
    /// VXLAN-GPE.
    pub const VXLAN_GPE: u16 = 4790;
    /// L2TP (RFC 2661).
    pub const L2TP: u16 = 1701;
}
