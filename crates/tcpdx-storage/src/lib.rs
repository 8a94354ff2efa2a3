//! tcpdx-storage: storage transactions from TCP byte streams. Sans-IO.
//!
//! Pipeline stage "transactions": capture -> wire -> core (connections, events) ->
//! **storage** -> detect -> report. Fed by the core's [`EventSink`](tcpdx_core::EventSink)
//! callbacks (segment rows and their payload bytes), it rebuilds each direction's byte
//! stream ([`reassembly`]), cuts it into PDUs ([`framer`]), decodes ONC RPC / NFSv3 /
//! NFSv4 ([`rpc`], [`nfs`]), SMB2/3 ([`smb2`]) and iSCSI ([`iscsi`]), matches requests with
//! replies and pushes one [`Transaction`] per answered (or, at the end, unanswered) request
//! into a [`StorageSink`]. [`srt`] aggregates them into service-response-time tables like
//! Wireshark's `-z rpc,srt` / `-z smb2,srt` / `-z scsi,srt`. Beside each connection's parser
//! state the tracker keeps its TCP log ([`tcplog`]: silences, retransmissions, windows),
//! which the storage [`findings`] read over slow transactions.
//!
//! Every parser reads only the bytes it needs from borrowed slices, keeps bounded state,
//! and never panics on any byte stream.
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

pub mod framer;
pub mod nfs;
pub mod reassembly;
pub mod rpc;
pub mod transaction;
pub mod xdr;

pub use reassembly::At;
pub use transaction::{
    Collect, Credits, Io, IoKind, Notice, OpList, Proto, Request, Span, StorageSink, Transaction,
};
pub mod tracker;
pub use tracker::{DecodeAs, Decoder, StorageConfig, Tracker};
pub mod srt;
pub use srt::{SrtCollector, SrtConfig, SrtReport};
pub mod findings;
pub mod record;
pub mod tcplog;
pub use record::{Recorded, Recorder};
pub use tcplog::{TcpLog, TcpLogs};
pub mod iscsi;
pub mod smb2;
