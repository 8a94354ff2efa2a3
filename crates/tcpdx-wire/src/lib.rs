//! tcpdx-wire: bytes to typed views, the first stage of the tcpdx pipeline.
//!
//! capture -> **wire** -> core -> detect -> report. This crate knows bytes only: it never
//! does I/O and never fails: a frame that cannot be decoded fully yields a [`PacketView`]
//! with what was decoded and a [`DecodeStop`] saying where and why it stopped.
//!
//! Layout: [`link`] (Ethernet, VLAN, LLC, SLL, SLL2, null, PPP, NFLOG), [`ip`] (IPv4, IPv6
//! and its extension headers), [`tunnel`] (GRE, ERSPAN, VXLAN, Geneve, GTP-U, MPLS, PPPoE),
//! [`udp`], [`tcp`] (header view and options), and [`decode()`], the walk that ties them.
//! Every header view follows one contract: `from_slice` checks the length (and any field
//! that sets a length) once, after which no accessor can panic.
#![forbid(unsafe_code)]
#![warn(missing_docs)]
// Input data must never panic the library: no unwrap/expect/indexing/panic outside tests
// (checked indexing with `get`; the few provably in-bounds cases carry their reason).
#![cfg_attr(
    not(test),
    deny(
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::indexing_slicing,
        clippy::panic
    )
)]

mod bytes;
pub mod decode;
pub mod error;
pub mod frame;
pub mod ip;
pub mod link;
pub mod partial;
pub mod seq;
pub mod tcp;
pub mod tunnel;
pub mod udp;

pub use decode::{FastTcp, IpInfo, PacketView, TcpFlags, TcpHeader, TcpOptions, decode};
pub use error::{DecodeStop, Layer, StopKind};
pub use frame::{Frame, FrameNo, LinkType, Timestamp};
pub use partial::PartialTcp;
pub use seq::SeqNum;
