//! ONC RPC over TCP (RFC 5531): record marking, call/reply headers, XID matching.
//!
//! Each direction is framed by fragment (4-byte record mark: last-fragment bit and 31-bit
//! length); fragments are joined into records, of which the first [`RECORD_KEEP`] bytes
//! are kept. Calls are remembered by XID until their reply; NFS calls (program 100003)
//! become [`Transaction`]s, other programs (MOUNT, portmap, NLM) are matched and dropped.

use rustc_hash::FxHashMap;
use tcpdx_core::{Dir, StreamId};

use crate::framer::{FirstByte, Pdu, PduHandler};
use crate::nfs;
use crate::reassembly::At;
use crate::transaction::{Notice, Proto, Request, Span, StorageSink, Transaction};
use crate::xdr::{Xdr, be32};

/// Leading bytes of a record kept for parsing: every header and NFS argument we read fits.
pub const RECORD_KEEP: usize = 4096;
/// Longest fragment accepted (Wireshark's `rpc.max_tcp_pdu_size` is 4 MiB; NFS servers
/// send up to rsize + headers, and some allow 16 MiB).
const MAX_FRAGMENT: u64 = 64 << 20;
/// Longest credential or verifier body (RFC 5531: 400 bytes).
const MAX_AUTH: usize = 400;
/// RPCSEC_GSS (RFC 2203).
const AUTH_GSS: u32 = 6;
/// Programs whose calls mark a plausible record start after a gap.
const KNOWN_PROGRAMS: [u32; 7] = [
    nfs::PROGRAM,
    100_000, // portmap
    100_005, // mount
    100_021, // NLM
    100_024, // status
    100_227, // nfs_acl
    100_011, // rquota
];

/// A decoded call header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Call<'a> {
    /// Transaction id.
    pub xid: u32,
    /// Program.
    pub prog: u32,
    /// Program version.
    pub vers: u32,
    /// Procedure.
    pub proc_: u32,
    /// RPCSEC_GSS service (1 none, 2 integrity, 3 privacy) of a data call.
    pub gss_service: Option<u32>,
    /// The procedure's arguments (unwrapped for GSS integrity; empty for privacy).
    pub args: &'a [u8],
}

/// A decoded reply header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reply<'a> {
    /// Transaction id.
    pub xid: u32,
    /// MSG_ACCEPTED with SUCCESS.
    pub success: bool,
    /// The results (still GSS-wrapped, see [`unwrap_gss`]).
    pub results: &'a [u8],
}

/// An RPC message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Message<'a> {
    /// A call.
    Call(Call<'a>),
    /// A reply.
    Reply(Reply<'a>),
}

/// Parses the start of a record.
pub fn parse(rec: &[u8]) -> Option<Message<'_>> {
    let mut x = Xdr::new(rec);
    let xid = x.u32()?;
    match x.u32()? {
        0 => {
            if x.u32()? != 2 {
                return None;
            }
            let prog = x.u32()?;
            let vers = x.u32()?;
            let proc_ = x.u32()?;
            let flavor = x.u32()?;
            let cred = x.opaque(MAX_AUTH)?;
            x.u32()?;
            x.skip_opaque(MAX_AUTH)?;
            let mut gss_service = None;
            let mut args = x.rest();
            if flavor == AUTH_GSS {
                // rpc_gss_cred_vers_1_t: version, gss_proc, seq_num, service, handle.
                let gss_proc = be32(cred, 4)?;
                let service = be32(cred, 12)?;
                if gss_proc == 0 {
                    gss_service = Some(service);
                    args = unwrap_gss(service, args);
                }
            }
            Some(Message::Call(Call {
                xid,
                prog,
                vers,
                proc_,
                gss_service,
                args,
            }))
        }
        1 => {
            let success = match x.u32()? {
                0 => {
                    x.u32()?;
                    x.skip_opaque(MAX_AUTH)?;
                    x.u32()? == 0
                }
                1 => false,
                _ => return None,
            };
            Some(Message::Reply(Reply {
                xid,
                success,
                results: if success { x.rest() } else { &[] },
            }))
        }
        _ => None,
    }
}

/// The body of RPCSEC_GSS-protected data: integrity wraps it in (length, seq_num, data,
/// checksum); privacy encrypts it.
pub fn unwrap_gss(service: u32, data: &[u8]) -> &[u8] {
    match service {
        2 => data.get(8..).unwrap_or(&[]),
        3 => &[],
        _ => data,
    }
}

/// A call waiting for its reply.
#[derive(Clone, Copy, Debug)]
struct PendingCall {
    prog: u32,
    vers: u32,
    proc_: u32,
    gss_service: Option<u32>,
    dir: Dir,
    span: Span,
    call: nfs::NfsCall,
}

/// A record being joined from fragments.
#[derive(Debug, Default)]
struct Record {
    buf: Vec<u8>,
    first: Option<At>,
    bytes: u64,
    repaired: bool,
    damaged: bool,
}

/// RPC state of one connection.
#[derive(Debug)]
pub struct RpcConn {
    calls: FxHashMap<u32, PendingCall>,
    rec: [Record; 2],
    max_outstanding: usize,
    warned_full: bool,
}

impl RpcConn {
    /// A connection remembering at most `max_outstanding` unanswered calls.
    pub fn new(max_outstanding: usize) -> Self {
        Self {
            calls: FxHashMap::default(),
            rec: [Record::default(), Record::default()],
            max_outstanding: max_outstanding.max(1),
            warned_full: false,
        }
    }

    /// Calls still waiting for a reply.
    pub fn outstanding(&self) -> usize {
        self.calls.len()
    }

    /// End of input: unanswered NFS calls become transactions without a reply.
    pub fn finish<S: StorageSink>(&mut self, stream: StreamId, sink: &mut S) {
        let mut left: Vec<(u32, PendingCall)> = self.calls.drain().collect();
        left.sort_by_key(|(_, c)| c.span.last.frame);
        for (xid, c) in left {
            if c.prog == nfs::PROGRAM {
                sink.transaction(&transaction(
                    stream,
                    xid,
                    &c,
                    None,
                    nfs::NfsReply::default(),
                ));
            }
        }
    }

    fn record<S: StorageSink>(
        &mut self,
        stream: StreamId,
        dir: Dir,
        rec: &[u8],
        span: Span,
        sink: &mut S,
    ) {
        match parse(rec) {
            Some(Message::Call(c)) => self.call(stream, dir, &c, span, sink),
            Some(Message::Reply(r)) => self.reply(stream, &r, span, sink),
            None => {}
        }
    }

    fn call<S: StorageSink>(
        &mut self,
        stream: StreamId,
        dir: Dir,
        c: &Call<'_>,
        span: Span,
        sink: &mut S,
    ) {
        // A retransmitted call keeps the first one's time (as Wireshark does).
        if self.calls.contains_key(&c.xid) {
            return;
        }
        if self.calls.len() >= self.max_outstanding {
            self.evict_oldest(stream, sink);
        }
        let call = if c.prog == nfs::PROGRAM {
            nfs::decode_call(c.vers, c.proc_, c.args)
        } else {
            nfs::NfsCall::default()
        };
        let p = PendingCall {
            prog: c.prog,
            vers: c.vers,
            proc_: c.proc_,
            gss_service: c.gss_service,
            dir,
            span,
            call,
        };
        if c.prog == nfs::PROGRAM {
            sink.request(&Request {
                stream,
                proto: Proto::Nfs,
                op: nfs::proc_name(c.vers, c.proc_),
                at: span.last,
                io: call.io,
                credits: None,
            });
        }
        self.calls.insert(c.xid, p);
    }

    fn reply<S: StorageSink>(&mut self, stream: StreamId, r: &Reply<'_>, span: Span, sink: &mut S) {
        let Some(c) = self.calls.remove(&r.xid) else {
            return;
        };
        if c.prog != nfs::PROGRAM {
            return;
        }
        let d = if r.success {
            let res = unwrap_gss(c.gss_service.unwrap_or(1), r.results);
            nfs::decode_reply(c.vers, c.proc_, res, c.call.io)
        } else {
            nfs::NfsReply::default()
        };
        sink.transaction(&transaction(stream, r.xid, &c, Some(span), d));
    }

    fn evict_oldest<S: StorageSink>(&mut self, stream: StreamId, sink: &mut S) {
        if let Some((&xid, _)) = self.calls.iter().min_by_key(|(_, c)| c.span.last.frame) {
            self.calls.remove(&xid);
        }
        if !self.warned_full {
            self.warned_full = true;
            sink.notice(&Notice::TooManyOutstanding { stream });
        }
    }
}

fn transaction(
    stream: StreamId,
    xid: u32,
    c: &PendingCall,
    reply: Option<Span>,
    d: nfs::NfsReply,
) -> Transaction {
    let io = c.call.io.map(|mut io| {
        io.done_len = d.done_len;
        io.done_stable = d.done_stable;
        io
    });
    Transaction {
        stream,
        proto: Proto::Nfs,
        version: u8::try_from(c.vers).ok(),
        op: nfs::proc_name(c.vers, c.proc_),
        op_code: u16::try_from(c.proc_).unwrap_or(u16::MAX),
        sub_op: c.call.sub_op,
        ops: c.call.ops,
        id: u64::from(xid),
        request_dir: c.dir,
        request: c.span,
        reply,
        interim: None,
        status: d.status,
        io,
        credits: None,
    }
}

/// Credential and verifier flavors (RFC 5531 AUTH_NONE to AUTH_TLS, and RPCSEC_GSS's
/// pseudo-flavors for Kerberos).
fn known_flavor(f: u32) -> bool {
    f <= 7 || (390_003..=390_005).contains(&f)
}

/// A call header where the framing was lost (`b`: record mark first, fragment length
/// `len`): RPC version 2, a program of [`KNOWN_PROGRAMS`] at a version it has, a small
/// procedure number, and (when these bytes hold it) a known credential flavor whose body
/// fits the fragment.
fn plausible_call(b: &[u8], len: u32) -> bool {
    let w = |i: usize| be32(b, 4 + 4 * i);
    let (Some(rpcvers), Some(prog), Some(vers), Some(proc_)) = (w(2), w(3), w(4), w(5)) else {
        return false;
    };
    let flavor = w(6).unwrap_or(0);
    let cred_len = w(7).unwrap_or(0);
    let vers_ok = if prog == nfs::PROGRAM {
        (2..=4).contains(&vers)
    } else {
        vers <= 4
    };
    rpcvers == 2
        && KNOWN_PROGRAMS.contains(&prog)
        && vers_ok
        && proc_ < 64
        && known_flavor(flavor)
        && cred_len as usize <= MAX_AUTH
        // xid .. credential length, the credential, the verifier's flavor and length.
        && u64::from(len) >= 40 + u64::from(cred_len)
}

/// Where a fragment starting with `mark` ends, the next record mark (when these bytes hold
/// it) must be one too: a fragment length within bounds and, after a last fragment, the
/// message type of the next record.
fn next_mark_fits(b: &[u8], mark: u32) -> bool {
    let end = 4 + (mark & 0x7fff_ffff) as usize;
    let Some(next) = be32(b, end) else {
        return true;
    };
    let len = next & 0x7fff_ffff;
    if len == 0 || u64::from(len) > MAX_FRAGMENT {
        return false;
    }
    mark & 0x8000_0000 == 0 || len < 8 || be32(b, end + 8).is_none_or(|t| t <= 1)
}

/// One direction of an RPC connection, as the framer's handler.
pub struct RpcDir<'a, S> {
    /// Connection state.
    pub conn: &'a mut RpcConn,
    /// Direction of these bytes.
    pub dir: Dir,
    /// Stream.
    pub stream: StreamId,
    /// Output.
    pub sink: &'a mut S,
}

impl<S> RpcDir<'_, S> {
    /// A reply header where the framing was lost: to a call still waiting that went the
    /// other way, with a sane verifier (accepted) or rejection reason (denied).
    fn plausible_reply(&self, xid: u32, b: &[u8], len: u32) -> bool {
        if !self.conn.calls.get(&xid).is_some_and(|c| c.dir != self.dir) {
            return false;
        }
        match be32(b, 12) {
            // Accepted: verifier flavor and length, then the accept status must fit.
            Some(0) => match (be32(b, 16), be32(b, 20)) {
                (Some(flavor), Some(verf_len)) => {
                    known_flavor(flavor)
                        && verf_len as usize <= MAX_AUTH
                        && u64::from(len) >= 24 + u64::from(verf_len)
                }
                _ => false,
            },
            // Denied: RPC_MISMATCH or AUTH_ERROR.
            Some(1) => be32(b, 16).is_some_and(|r| r <= 1),
            _ => false,
        }
    }
}

impl<S: StorageSink> PduHandler for RpcDir<'_, S> {
    fn head_len(&self) -> usize {
        4
    }
    fn pdu_len(&mut self, head: &[u8]) -> Option<u64> {
        let len = u64::from(be32(head, 0)? & 0x7fff_ffff);
        (len <= MAX_FRAGMENT).then_some(4 + len)
    }
    fn keep_len(&self, _head: &[u8], _total: u64) -> usize {
        4 + RECORD_KEEP.saturating_sub(self.dir.of(&self.conn.rec).buf.len())
    }
    fn probe_len(&self) -> usize {
        // Record mark and a call header up to its procedure (the shortest reply, 28 bytes,
        // is judged within its own segment); the credential is judged when it is there.
        28
    }
    fn max_pdu_len(&self) -> u64 {
        4 + MAX_FRAGMENT
    }
    fn first_byte(&self) -> Option<FirstByte> {
        // The record mark's high byte: the last-fragment bit, then the top of a length of
        // at most MAX_FRAGMENT (`plausible` rejects longer ones).
        Some(FirstByte::LowBitsBelow(((MAX_FRAGMENT >> 24) + 1) as u8))
    }
    fn plausible(&self, b: &[u8]) -> bool {
        let (Some(mark), Some(xid), Some(mtype)) = (be32(b, 0), be32(b, 4), be32(b, 8)) else {
            return false;
        };
        let len = mark & 0x7fff_ffff;
        if len < 12 || u64::from(len) > MAX_FRAGMENT {
            return false;
        }
        let head = match mtype {
            0 => plausible_call(b, len),
            1 => self.plausible_reply(xid, b, len),
            _ => false,
        };
        head && next_mark_fits(b, mark)
    }
    fn pdu(&mut self, pdu: &Pdu<'_>) {
        let Some(mark) = be32(pdu.head, 0) else {
            return;
        };
        let last = mark & 0x8000_0000 != 0;
        let body = pdu.head.get(4..).unwrap_or_default();
        let rec = self.dir.of_mut(&mut self.conn.rec);
        if last && rec.first.is_none() {
            // Single-fragment record: parse in place.
            let span = Span {
                first: pdu.first,
                last: pdu.last,
                bytes: pdu.len,
                repaired: pdu.repaired,
                damaged: pdu.damaged,
            };
            self.conn
                .record(self.stream, self.dir, body, span, self.sink);
            return;
        }
        let room = RECORD_KEEP.saturating_sub(rec.buf.len());
        rec.buf.extend_from_slice(body.get(..room).unwrap_or(body));
        rec.first.get_or_insert(pdu.first);
        rec.bytes += pdu.len;
        rec.repaired |= pdu.repaired;
        rec.damaged |= pdu.damaged;
        if last {
            let rec = std::mem::take(self.dir.of_mut(&mut self.conn.rec));
            let span = Span {
                first: rec.first.unwrap_or(pdu.first),
                last: pdu.last,
                bytes: rec.bytes,
                repaired: rec.repaired,
                damaged: rec.damaged,
            };
            self.conn
                .record(self.stream, self.dir, &rec.buf, span, self.sink);
        }
    }
    fn lost(&mut self, at: At) {
        *self.dir.of_mut(&mut self.conn.rec) = Record::default();
        self.sink.notice(&Notice::FramingLost {
            stream: self.stream,
            dir: self.dir,
            at,
        });
    }
}

#[cfg(test)]
mod tests;
