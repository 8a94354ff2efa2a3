//! SMB2/3 (MS-SMB2) over NetBIOS session framing (RFC 1002; direct TCP on 445 uses the
//! same 4-byte header with a 24-bit length): compounded messages, MessageId matching,
//! async STATUS_PENDING interim responses, credits, Read/Write extents, and the SMB3
//! transform (encrypted) and compression headers, which are recognised and reported.

use rustc_hash::FxHashMap;
use tcpdx_core::{Dir, StreamId};

use crate::framer::{FirstByte, Pdu, PduHandler};
use crate::reassembly::At;
use crate::transaction::{
    Credits, Io, IoKind, Notice, Proto, Request, Span, StorageSink, Transaction,
};
use crate::xdr::{le16, le32, le64};

/// Leading bytes of a NetBIOS message kept: every header of a compound of control
/// commands fits; the data of large Read responses and Write requests is skipped.
pub const MESSAGE_KEEP: usize = 64 << 10;
/// Longest NetBIOS message accepted (SMB3 allows 8 MiB reads and writes plus headers).
const MAX_MESSAGE: u64 = 16 << 20;
/// SMB2 header length.
const HEADER: usize = 64;
/// NT status of an interim response.
pub const STATUS_PENDING: u32 = 0x0000_0103;

mod flag {
    pub const RESPONSE: u32 = 0x0000_0001;
    pub const ASYNC: u32 = 0x0000_0002;
}

/// SMB2 commands used below.
mod cmd {
    pub const FLUSH: u16 = 7;
    pub const READ: u16 = 8;
    pub const WRITE: u16 = 9;
    pub const CANCEL: u16 = 12;
    pub const BREAK: u16 = 18;
}

/// Command names as Wireshark spells them (`smb2.cmd`).
const NAMES: [&str; 19] = [
    "Negotiate Protocol",
    "Session Setup",
    "Session Logoff",
    "Tree Connect",
    "Tree Disconnect",
    "Create",
    "Close",
    "Flush",
    "Read",
    "Write",
    "Lock",
    "Ioctl",
    "Cancel",
    "KeepAlive",
    "Find",
    "Notify",
    "GetInfo",
    "SetInfo",
    "Break",
];

/// Wireshark's name of SMB2 command `code`.
pub fn command_name(code: u16) -> &'static str {
    NAMES.get(usize::from(code)).copied().unwrap_or("unknown")
}

/// A checked view of one SMB2 header and what follows it.
#[derive(Clone, Copy, Debug)]
pub struct HeaderSlice<'a> {
    /// The 64 header bytes (fixed offsets into an array need no runtime checks).
    buf: &'a [u8; HEADER],
    /// What follows the header.
    body: &'a [u8],
}

impl<'a> HeaderSlice<'a> {
    /// Checks the protocol id, the structure size and that 64 bytes are there.
    pub fn from_slice(buf: &'a [u8]) -> Option<Self> {
        let (buf, body) = buf.split_first_chunk::<HEADER>()?;
        (buf.starts_with(b"\xfeSMB") && le16(buf, 4) == Some(64)).then_some(Self { buf, body })
    }
    fn u16_at(&self, off: usize) -> u16 {
        le16(self.buf, off).unwrap_or(0)
    }
    fn u32_at(&self, off: usize) -> u32 {
        le32(self.buf, off).unwrap_or(0)
    }
    /// CreditCharge.
    pub fn credit_charge(&self) -> u16 {
        self.u16_at(6)
    }
    /// Status (responses).
    pub fn status(&self) -> u32 {
        self.u32_at(8)
    }
    /// Command.
    pub fn command(&self) -> u16 {
        self.u16_at(12)
    }
    /// CreditRequest (requests) / CreditResponse (responses).
    pub fn credits(&self) -> u16 {
        self.u16_at(14)
    }
    /// Flags.
    pub fn flags(&self) -> u32 {
        self.u32_at(16)
    }
    /// Offset of the next compounded header, 0 for the last.
    pub fn next_command(&self) -> u32 {
        self.u32_at(20)
    }
    /// MessageId.
    pub fn message_id(&self) -> u64 {
        le64(self.buf, 24).unwrap_or(0)
    }
    /// True for a response.
    pub fn is_response(&self) -> bool {
        self.flags() & flag::RESPONSE != 0
    }
    /// True for an async header.
    pub fn is_async(&self) -> bool {
        self.flags() & flag::ASYNC != 0
    }
    /// The command's body (up to the next header or the end of the kept bytes).
    pub fn body(&self) -> &'a [u8] {
        self.body
    }
}

/// The extent of a Read/Write/Flush request.
fn request_io(h: &HeaderSlice<'_>) -> Option<Io> {
    let b = h.body();
    let (kind, len, offset) = match h.command() {
        cmd::READ => (IoKind::Read, le32(b, 4)?, le64(b, 8)?),
        cmd::WRITE => (IoKind::Write, le32(b, 4)?, le64(b, 8)?),
        cmd::FLUSH => (IoKind::Commit, 0, 0),
        _ => return None,
    };
    Some(Io {
        kind,
        offset,
        len: u64::from(len),
        blocks: None,
        stable: None,
        done_stable: None,
        done_len: None,
    })
}

/// Bytes a Read/Write response reports moved.
fn response_len(h: &HeaderSlice<'_>) -> Option<u64> {
    let b = h.body();
    match h.command() {
        // READ response: StructureSize(2) DataOffset(1) Reserved(1) DataLength(4).
        // WRITE response: StructureSize(2) Reserved(2) Count(4).
        cmd::READ | cmd::WRITE if h.status() == 0 => le32(b, 4).map(u64::from),
        _ => None,
    }
}

#[derive(Clone, Copy, Debug)]
struct Pending {
    command: u16,
    dir: Dir,
    span: Span,
    io: Option<Io>,
    credits: Credits,
    interim: Option<At>,
}

/// SMB2 state of one connection.
#[derive(Debug)]
pub struct Smb2Conn {
    pending: FxHashMap<u64, Pending>,
    max_outstanding: usize,
    warned_full: bool,
}

impl Smb2Conn {
    /// A connection remembering at most `max_outstanding` unanswered requests.
    pub fn new(max_outstanding: usize) -> Self {
        Self {
            pending: FxHashMap::default(),
            max_outstanding: max_outstanding.max(1),
            warned_full: false,
        }
    }

    /// Requests waiting for their final response.
    pub fn outstanding(&self) -> usize {
        self.pending.len()
    }

    /// End of input: unanswered requests become transactions without a reply.
    pub fn finish<S: StorageSink>(&mut self, stream: StreamId, sink: &mut S) {
        let mut left: Vec<(u64, Pending)> = self.pending.drain().collect();
        left.sort_by_key(|(_, p)| p.span.last.frame);
        for (id, p) in left {
            sink.transaction(&transaction(stream, id, &p, None, None, None));
        }
    }

    /// One NetBIOS session message's SMB2 content (`msg` = its kept bytes, `len` = its
    /// full length).
    fn message<S: StorageSink>(
        &mut self,
        stream: StreamId,
        dir: Dir,
        msg: &[u8],
        len: u64,
        pdu: &Pdu<'_>,
        sink: &mut S,
    ) {
        match msg.get(..4) {
            Some(b"\xfdSMB") => {
                sink.notice(&Notice::Smb3Encrypted {
                    stream,
                    at: pdu.last,
                    session_id: le64(msg, 44).unwrap_or(0),
                });
                return;
            }
            Some(b"\xfcSMB") => {
                sink.notice(&Notice::Smb3Compressed {
                    stream,
                    at: pdu.last,
                });
                return;
            }
            _ => {}
        }
        let mut off = 0usize;
        // A compound holds at most len / 64 headers; the bound also stops offset loops.
        for _ in 0..(len / HEADER as u64).min(4096) {
            let Some(h) = msg.get(off..).and_then(HeaderSlice::from_slice) else {
                break;
            };
            let next = h.next_command() as usize;
            let cmd_len = if next == 0 {
                len.saturating_sub(off as u64)
            } else {
                next as u64
            };
            let span = Span {
                first: pdu.first,
                last: pdu.last,
                bytes: cmd_len,
                repaired: pdu.repaired,
                damaged: pdu.damaged,
            };
            if h.is_response() {
                self.response(stream, &h, span, sink);
            } else {
                self.request(stream, dir, &h, span, sink);
            }
            // NextCommand is 8-byte aligned and moves forward (MS-SMB2 3.2.4.1.4).
            if next < HEADER {
                break;
            }
            off = match off.checked_add(next) {
                Some(o) => o,
                None => break,
            };
        }
    }

    fn request<S: StorageSink>(
        &mut self,
        stream: StreamId,
        dir: Dir,
        h: &HeaderSlice<'_>,
        span: Span,
        sink: &mut S,
    ) {
        let command = h.command();
        // Cancel has no response of its own (it names another request's MessageId); a
        // Break request acknowledges the server's oplock/lease break, an exchange the
        // server started: neither is a service request (Wireshark's smb2,srt skips both).
        if command == cmd::CANCEL || command == cmd::BREAK {
            return;
        }
        let id = h.message_id();
        if self.pending.contains_key(&id) {
            return; // a retransmitted request keeps the first time
        }
        if self.pending.len() >= self.max_outstanding {
            if let Some((&old, _)) = self.pending.iter().min_by_key(|(_, p)| p.span.last.frame) {
                self.pending.remove(&old);
            }
            if !self.warned_full {
                self.warned_full = true;
                sink.notice(&Notice::TooManyOutstanding { stream });
            }
        }
        let credits = Credits {
            charge: h.credit_charge(),
            requested: h.credits(),
            granted: 0,
            interim_granted: 0,
        };
        let io = request_io(h);
        sink.request(&Request {
            stream,
            proto: Proto::Smb2,
            op: command_name(command),
            at: span.last,
            io,
            credits: Some(credits),
        });
        self.pending.insert(
            id,
            Pending {
                command,
                dir,
                span,
                io,
                credits,
                interim: None,
            },
        );
    }

    fn response<S: StorageSink>(
        &mut self,
        stream: StreamId,
        h: &HeaderSlice<'_>,
        span: Span,
        sink: &mut S,
    ) {
        let id = h.message_id();
        if h.command() == cmd::BREAK {
            return;
        }
        if h.is_async() && h.status() == STATUS_PENDING {
            if let Some(p) = self.pending.get_mut(&id) {
                p.interim.get_or_insert(span.last);
                p.credits.interim_granted = p.credits.interim_granted.saturating_add(h.credits());
            }
            return;
        }
        let Some(mut p) = self.pending.remove(&id) else {
            return;
        };
        p.credits.granted = h.credits();
        sink.transaction(&transaction(
            stream,
            id,
            &p,
            Some(span),
            Some(h.status()),
            response_len(h),
        ));
    }
}

fn transaction(
    stream: StreamId,
    id: u64,
    p: &Pending,
    reply: Option<Span>,
    status: Option<u32>,
    done_len: Option<u64>,
) -> Transaction {
    Transaction {
        stream,
        proto: Proto::Smb2,
        version: None,
        op: command_name(p.command),
        op_code: p.command,
        sub_op: None,
        ops: None,
        id,
        request_dir: p.dir,
        request: p.span,
        reply,
        interim: p.interim,
        status,
        io: p.io.map(|mut io| {
            io.done_len = done_len;
            io
        }),
        credits: Some(p.credits),
    }
}

/// One direction of an SMB2 connection, as the framer's handler.
pub struct Smb2Dir<'a, S> {
    /// Connection state.
    pub conn: &'a mut Smb2Conn,
    /// Direction of these bytes.
    pub dir: Dir,
    /// Stream.
    pub stream: StreamId,
    /// Output.
    pub sink: &'a mut S,
}

/// NetBIOS session message types (RFC 1002 4.3.1).
const NBSS_TYPES: [u8; 6] = [0x00, 0x81, 0x82, 0x83, 0x84, 0x85];

/// Flags an SMB2 header may carry: response, async, related, signed, priority, DFS, replay.
const KNOWN_FLAGS: u32 = 0x3000_007f;

impl<S> Smb2Dir<'_, S> {
    /// An SMB2 header after the NetBIOS one where the framing was lost: header length 64,
    /// and (when these bytes hold them) a known command and flags, and for a response the
    /// MessageId of a request still waiting (or an oplock break's).
    fn plausible_header(&self, b: &[u8]) -> bool {
        if le16(b, 8) != Some(64) {
            return false;
        }
        let cmd_ok = le16(b, 16).is_none_or(|c| usize::from(c) < NAMES.len());
        let flags = le32(b, 20).unwrap_or(0);
        let id_ok = flags & flag::RESPONSE == 0
            || le64(b, 28).is_none_or(|id| id == u64::MAX || self.conn.pending.contains_key(&id));
        cmd_ok && flags & !KNOWN_FLAGS == 0 && id_ok
    }
}

/// Where a NetBIOS message of `len` bytes ends, the next header (when these bytes hold it)
/// must be one too: a known type and, for a session message, a protocol id.
fn next_message_fits(b: &[u8], len: u32) -> bool {
    let end = 4 + len as usize;
    let Some(&kind) = b.get(end) else {
        return true;
    };
    NBSS_TYPES.contains(&kind)
        && (kind != 0
            || b.get(end + 4..end + 8)
                .is_none_or(|id| matches!(id, b"\xfeSMB" | b"\xfdSMB" | b"\xfcSMB")))
}

impl<S: StorageSink> PduHandler for Smb2Dir<'_, S> {
    fn head_len(&self) -> usize {
        4
    }
    fn pdu_len(&mut self, head: &[u8]) -> Option<u64> {
        let &[kind, l2, l1, l0] = head.first_chunk::<4>()?;
        if !NBSS_TYPES.contains(&kind) {
            return None;
        }
        let len = u64::from(l2) << 16 | u64::from(l1) << 8 | u64::from(l0);
        (len <= MAX_MESSAGE).then_some(4 + len)
    }
    fn keep_len(&self, head: &[u8], _total: u64) -> usize {
        if head.first() == Some(&0) {
            4 + MESSAGE_KEEP
        } else {
            4
        }
    }
    fn probe_len(&self) -> usize {
        // NetBIOS header and an SMB2 header up to its MessageId.
        36
    }
    fn max_pdu_len(&self) -> u64 {
        4 + MAX_MESSAGE
    }
    fn first_byte(&self) -> Option<FirstByte> {
        // NetBIOS session message (the only type `plausible` accepts).
        Some(FirstByte::Is(0))
    }
    fn plausible(&self, b: &[u8]) -> bool {
        let Some(b8) = b.first_chunk::<8>() else {
            return false;
        };
        let len = u32::from(b8[1]) << 16 | u32::from(b8[2]) << 8 | u32::from(b8[3]);
        b8[0] == 0
            && len >= 32
            && u64::from(len) <= MAX_MESSAGE
            && matches!(&b8[4..8], b"\xfeSMB" | b"\xfdSMB" | b"\xfcSMB")
            && (b8[4] != 0xfe || self.plausible_header(b))
            && next_message_fits(b, len)
    }
    fn pdu(&mut self, pdu: &Pdu<'_>) {
        if pdu.head.first() != Some(&0) {
            return; // session request / response / keep-alive
        }
        let msg = pdu.head.get(4..).unwrap_or_default();
        self.conn
            .message(self.stream, self.dir, msg, pdu.len - 4, pdu, self.sink);
    }
    fn lost(&mut self, at: At) {
        self.sink.notice(&Notice::FramingLost {
            stream: self.stream,
            dir: self.dir,
            at,
        });
    }
}

#[cfg(test)]
mod tests;
