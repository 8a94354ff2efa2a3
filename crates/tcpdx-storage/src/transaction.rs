//! What the storage layer emits: one [`Transaction`] per request, and [`Notice`]s.

use tcpdx_core::{Dir, StreamId};

use crate::reassembly::At;

/// Storage protocol of a transaction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Proto {
    /// NFS (ONC RPC program 100003).
    Nfs,
    /// SMB2/3.
    Smb2,
    /// iSCSI (SCSI commands).
    Iscsi,
}

impl Proto {
    /// Lower-case name, as in `tcpdx srt --json`.
    pub fn name(self) -> &'static str {
        match self {
            Proto::Nfs => "nfs",
            Proto::Smb2 => "smb2",
            Proto::Iscsi => "iscsi",
        }
    }
}

/// Kind of data operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum IoKind {
    /// Reads data from the server.
    Read,
    /// Writes data to the server.
    Write,
    /// Makes written data stable (NFS COMMIT, SMB2 Flush, SCSI SYNCHRONIZE CACHE).
    Commit,
}

/// A data operation's extent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Io {
    /// Read, write or commit.
    pub kind: IoKind,
    /// Offset in bytes (SCSI: the LBA, see `blocks`).
    pub offset: u64,
    /// Requested length in bytes (SCSI: the Expected Data Transfer Length).
    pub len: u64,
    /// SCSI: the CDB's transfer length in blocks (then `offset` is an LBA).
    pub blocks: Option<u32>,
    /// NFS `stable_how` of a WRITE (0 UNSTABLE, 1 DATA_SYNC, 2 FILE_SYNC); the reply's
    /// `committed` in `done_stable`.
    pub stable: Option<u32>,
    /// Stability the server reports in the reply (NFS WRITE `committed`).
    pub done_stable: Option<u32>,
    /// Bytes the reply says were read or written.
    pub done_len: Option<u64>,
}

/// SMB2 credits of one request/response pair.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Credits {
    /// CreditCharge of the request (0 counts as 1).
    pub charge: u16,
    /// Credits the request asked for.
    pub requested: u16,
    /// Credits the final response granted.
    pub granted: u16,
    /// Credits granted by an interim (STATUS_PENDING) response.
    pub interim_granted: u16,
}

/// One side of a transaction: where its PDU began and completed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span {
    /// Where the first byte became available.
    pub first: At,
    /// Where the last byte became available (Wireshark's frame for this message).
    pub last: At,
    /// Bytes of the message (PDU length; a compound member's share for SMB2).
    pub bytes: u64,
    /// Some of its bytes arrived out of order (retransmission filling a hole, or released
    /// from the reassembly buffer): Wireshark 4.0's default preferences do not dissect
    /// such messages (docs/wireshark-differences.md).
    pub repaired: bool,
    /// A capture gap fell inside it (bytes never seen): its header was read, its body is
    /// incomplete.
    pub damaged: bool,
}

/// Most NFSv4 operations remembered per COMPOUND.
pub const MAX_OPS: usize = 12;

/// The operation codes of an NFSv4 COMPOUND (the first [`MAX_OPS`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OpList {
    codes: [u16; MAX_OPS],
    n: u8,
    /// The call had more operations than are listed (or some could not be parsed).
    pub truncated: bool,
}

impl OpList {
    /// Appends an operation code (sets `truncated` when full).
    pub fn push(&mut self, code: u16) {
        if let Some(slot) = self.codes.get_mut(usize::from(self.n)) {
            *slot = code;
            self.n += 1;
        } else {
            self.truncated = true;
        }
    }
    /// The codes.
    pub fn codes(&self) -> &[u16] {
        self.codes.get(..usize::from(self.n)).unwrap_or(&self.codes)
    }
}

/// One request and its reply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transaction {
    /// Wireshark `tcp.stream`.
    pub stream: StreamId,
    /// Protocol.
    pub proto: Proto,
    /// NFS version (2, 3, 4); SMB2/iSCSI: `None`.
    pub version: Option<u8>,
    /// Wireshark's name of the procedure / command / SCSI opcode (`READ`, `COMPOUND`,
    /// `Read`, `Read(16)`).
    pub op: &'static str,
    /// Its number (NFS procedure, SMB2 command, SCSI opcode).
    pub op_code: u16,
    /// NFSv4: the COMPOUND's principal operation (`READ` in SEQUENCE+PUTFH+READ).
    pub sub_op: Option<&'static str>,
    /// NFSv4: the COMPOUND's operations.
    pub ops: Option<OpList>,
    /// RPC XID, SMB2 MessageId, or iSCSI Initiator Task Tag.
    pub id: u64,
    /// Direction the request travelled in.
    pub request_dir: Dir,
    /// The request.
    pub request: Span,
    /// The final reply, `None` if none was seen before the end of the capture.
    pub reply: Option<Span>,
    /// SMB2: the interim STATUS_PENDING response.
    pub interim: Option<At>,
    /// Reply status (NFS status / NT status / SCSI status), when decoded.
    pub status: Option<u32>,
    /// Read/write/commit extent, when the operation moves data.
    pub io: Option<Io>,
    /// SMB2 credits.
    pub credits: Option<Credits>,
}

impl Transaction {
    /// Service response time in nanoseconds: request's last frame to reply's last frame
    /// (Wireshark's `rpc.time` / `smb2.time` / `scsi.time`).
    pub fn srt_ns(&self) -> Option<i64> {
        self.reply.map(|r| r.last.ts.since(self.request.last.ts))
    }
}

/// Something about a connection's storage traffic worth telling.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Notice {
    /// An encrypted SMB3 message (transform header): its commands cannot be read.
    Smb3Encrypted {
        /// Stream.
        stream: StreamId,
        /// Where.
        at: At,
        /// Session the message belongs to.
        session_id: u64,
    },
    /// A compressed SMB3 message (compression transform header).
    Smb3Compressed {
        /// Stream.
        stream: StreamId,
        /// Where.
        at: At,
    },
    /// The message framing was lost (a gap over a header, or bytes that are not this
    /// protocol); the parser looks for the next message start.
    FramingLost {
        /// Stream.
        stream: StreamId,
        /// Direction.
        dir: Dir,
        /// Where.
        at: At,
    },
    /// A per-connection table of outstanding requests was full: the oldest was dropped.
    TooManyOutstanding {
        /// Stream.
        stream: StreamId,
    },
}

/// Receives transactions and notices, push model. Every method has a no-op default.
pub trait StorageSink {
    /// One transaction: at its reply, or at the end of input when unanswered.
    fn transaction(&mut self, _t: &Transaction) {}
    /// A notice.
    fn notice(&mut self, _n: &Notice) {}
    /// A request was seen (its last byte), before its reply: for outstanding-I/O
    /// accounting. Its [`Transaction`] follows at the reply.
    fn request(&mut self, _r: &Request) {}
    /// The capture's first frame was at `ts` (called once, before anything else).
    fn start(&mut self, _ts: tcpdx_wire::Timestamp) {}
    /// The TCP log of a storage connection on which a request was parsed (for correlating
    /// its transactions with what TCP did), once: when the connection ends, or at the end of
    /// input.
    fn tcp_log(&mut self, _stream: StreamId, _log: crate::TcpLog) {}
    /// The last TCP segment of a storage connection (once, at the end of input, if any).
    fn tcp_last(&mut self, _frame: tcpdx_wire::FrameNo, _ts: tcpdx_wire::Timestamp) {}
}

/// A request as seen at its last byte (before its reply).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Request {
    /// Stream.
    pub stream: StreamId,
    /// Protocol.
    pub proto: Proto,
    /// Operation name.
    pub op: &'static str,
    /// Where its last byte became available.
    pub at: At,
    /// Its data extent.
    pub io: Option<Io>,
    /// SMB2 credit charge and request.
    pub credits: Option<Credits>,
}

/// Collects everything (tests).
#[derive(Debug, Default)]
pub struct Collect {
    /// Transactions in emission order.
    pub transactions: Vec<Transaction>,
    /// Notices.
    pub notices: Vec<Notice>,
    /// Requests.
    pub requests: Vec<Request>,
}

impl StorageSink for Collect {
    fn transaction(&mut self, t: &Transaction) {
        self.transactions.push(*t);
    }
    fn notice(&mut self, n: &Notice) {
        self.notices.push(*n);
    }
    fn request(&mut self, r: &Request) {
        self.requests.push(*r);
    }
}

mod codec {
    use tcpdx_core::codec::{Codec, Dec, DecodeError};
    use tcpdx_core::codec_struct;

    use super::{Credits, Io, IoKind, Notice, OpList, Proto, Request, Span, Transaction};

    tcpdx_core::codec_unit_enum!(Proto { Nfs, Smb2, Iscsi });
    tcpdx_core::codec_unit_enum!(IoKind {
        Read,
        Write,
        Commit
    });
    codec_struct!(Io {
        kind,
        offset,
        len,
        blocks,
        stable,
        done_stable,
        done_len
    });
    codec_struct!(Credits {
        charge,
        requested,
        granted,
        interim_granted
    });
    codec_struct!(Span {
        first,
        last,
        bytes,
        repaired,
        damaged
    });
    codec_struct!(OpList {
        codes,
        n,
        truncated
    });
    codec_struct!(Transaction {
        stream,
        proto,
        version,
        op,
        op_code,
        sub_op,
        ops,
        id,
        request_dir,
        request,
        reply,
        interim,
        status,
        io,
        credits,
    });
    codec_struct!(Request {
        stream,
        proto,
        op,
        at,
        io,
        credits
    });

    impl Codec for Notice {
        fn enc(&self, w: &mut Vec<u8>) {
            match self {
                Notice::Smb3Encrypted {
                    stream,
                    at,
                    session_id,
                } => {
                    w.push(0);
                    stream.enc(w);
                    at.enc(w);
                    session_id.enc(w);
                }
                Notice::Smb3Compressed { stream, at } => {
                    w.push(1);
                    stream.enc(w);
                    at.enc(w);
                }
                Notice::FramingLost { stream, dir, at } => {
                    w.push(2);
                    stream.enc(w);
                    dir.enc(w);
                    at.enc(w);
                }
                Notice::TooManyOutstanding { stream } => {
                    w.push(3);
                    stream.enc(w);
                }
            }
        }
        fn dec(r: &mut Dec<'_>) -> Result<Self, DecodeError> {
            Ok(match r.tag(4, "Notice")? {
                0 => Notice::Smb3Encrypted {
                    stream: Codec::dec(r)?,
                    at: Codec::dec(r)?,
                    session_id: Codec::dec(r)?,
                },
                1 => Notice::Smb3Compressed {
                    stream: Codec::dec(r)?,
                    at: Codec::dec(r)?,
                },
                2 => Notice::FramingLost {
                    stream: Codec::dec(r)?,
                    dir: Codec::dec(r)?,
                    at: Codec::dec(r)?,
                },
                _ => Notice::TooManyOutstanding {
                    stream: Codec::dec(r)?,
                },
            })
        }
    }
}
