//! Tunnel and shim headers that can carry TCP: GRE (and ERSPAN), VXLAN, Geneve, GTP-U,
//! MPLS and PPPoE.
//!
//! Each module is a zero-copy view with a `from_slice` that checks the full header length,
//! including optional fields announced by flags.

pub mod erspan;
pub mod geneve;
pub mod gre;
pub mod gtp;
pub mod mpls;
pub mod pppoe;
pub mod vxlan;

/// UDP ports on which tunnels are recognised (IANA).
pub mod port {
    /// VXLAN (RFC 7348).
    pub const VXLAN: u16 = 4789;
    /// Geneve (RFC 8926).
    pub const GENEVE: u16 = 6081;
    /// GTP-U (3GPP TS 29.281).
    pub const GTP_U: u16 = 2152;
}
