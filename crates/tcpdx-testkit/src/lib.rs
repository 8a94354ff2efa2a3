//! tcpdx-testkit: TCP scenarios as short scripts that produce real frames.
//!
//! Dev-dependency only (`publish = false`). Three layers, each usable alone:
//!
//! - [`builder`]: one Ethernet/VLAN/SLL/raw + IPv4/IPv6 + TCP frame as bytes, from a
//!   [`FrameSpec`] (raw numbers, correct checksums and lengths, optional snaplen).
//! - [`script`]: a scenario DSL in relative sequence numbers (like Wireshark's), with a
//!   deterministic clock that moves only when told (quinn's `Pair` idea) and segment
//!   templates used with struct-update syntax (smoltcp's `SEND_TEMPL` idea).
//! - [`pcap_writer`]: writes [`OwnedFrame`]s as pcapng or classic pcap, so the same scenario
//!   can be read by tcpdx-capture and by `tshark` ([`tshark`] module) for comparison.
//! - [`synth`]: a deterministic model of sender, receiver and path that writes a capture
//!   and its exact labels (`truth.json`, the lab's schema) for behaviour no lab stack shows.
//!
//! ```
//! use tcpdx_testkit::{Script, AUTO};
//!
//! let mut t = Script::new();
//! t.handshake(); // frames 1-3
//! t.at_ms(10).server_sends(1, 1448); // frame 4
//! t.at_ms(10.1).client_acks(1449); // frame 5
//! t.client_acks(1449).times(3); // frames 6-8: duplicate ACKs
//! t.at_ms(11).server_sends(AUTO, 1448); // frame 9: relative seq 1449
//! assert_eq!(t.frames().len(), 9);
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod builder;
pub mod bulk;
pub mod encap;
pub mod frame;
pub mod nfs;
pub mod pcap_writer;
pub mod script;
pub mod storage_mix;
pub mod synth;
pub mod tshark;

pub use builder::{
    ACK, CWR, ECE, FIN, FrameSpec, NS, OptionsSpec, PSH, Payload, RST, SYN, URG, encode_options,
};
pub use frame::OwnedFrame;
pub use pcap_writer::{write_pcap, write_pcapng};
pub use script::{
    ACK_SEG, AUTO, C2S_ACK, C2S_DATA, ConnId, DATA_SEG, Dir, S2C_ACK, S2C_DATA, Script,
    ScriptConfig, ScriptFrame, SegSpec, Sent, TsOpt,
};
pub use tshark::{tshark_available, tshark_fields, tshark_fields_with, tshark_filter};
