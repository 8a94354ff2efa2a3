//! tcpdx-wire: bytes to typed views, the first stage of the tcpdx pipeline.
//!
//! capture -> **wire** -> core -> detect -> report. This crate knows bytes only: it never
//! does I/O and never fails: a frame that cannot be decoded fully yields a [`PacketView`]
//! with what was decoded and a [`DecodeStop`] saying where and why it stopped.
#![warn(missing_docs)]

pub mod decode;
pub mod error;
pub mod frame;
pub mod seq;

pub use decode::{IpInfo, PacketView, TcpFlags, TcpHeader, TcpOptions, decode};
pub use error::{DecodeStop, Layer, StopKind};
pub use frame::{Frame, FrameNo, LinkType, Timestamp};
pub use seq::SeqNum;
