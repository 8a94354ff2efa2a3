//! iSCSI (RFC 7143): PDU framing (48-byte Basic Header Segment, AHS, optional digests,
//! padded data segment), Initiator Task Tag matching, SCSI READ/WRITE CDBs (LBA and
//! length), Data-In / Data-Out / R2T accounting, and the digests negotiated at login.

use rustc_hash::FxHashMap;
use tcpdx_core::{Dir, StreamId};

use crate::framer::{Pdu, PduHandler};
use crate::reassembly::At;
use crate::transaction::{Io, IoKind, Notice, Proto, Request, Span, StorageSink, Transaction};
use crate::xdr::be32;

/// Basic Header Segment length.
const BHS: usize = 48;
/// Longest data segment accepted (MaxRecvDataSegmentLength is at most 2^24 - 1).
const MAX_DATA_SEGMENT: u64 = (1 << 24) - 1;
/// Login and Text data kept to read negotiated keys.
const TEXT_KEEP: usize = 8192;

/// iSCSI opcodes used below.
mod op {
    pub const NOP_OUT: u8 = 0x00;
    pub const SCSI_COMMAND: u8 = 0x01;
    pub const TASK_MGMT: u8 = 0x02;
    pub const LOGIN: u8 = 0x03;
    pub const TEXT: u8 = 0x04;
    pub const DATA_OUT: u8 = 0x05;
    pub const LOGOUT: u8 = 0x06;
    pub const SNACK: u8 = 0x10;
    pub const NOP_IN: u8 = 0x20;
    pub const SCSI_RESPONSE: u8 = 0x21;
    pub const TASK_MGMT_RESPONSE: u8 = 0x22;
    pub const LOGIN_RESPONSE: u8 = 0x23;
    pub const TEXT_RESPONSE: u8 = 0x24;
    pub const DATA_IN: u8 = 0x25;
    pub const LOGOUT_RESPONSE: u8 = 0x26;
    pub const R2T: u8 = 0x31;
    pub const ASYNC: u8 = 0x32;
    pub const REJECT: u8 = 0x3f;
}

/// Every opcode RFC 7143 defines (vendor-specific ones excluded).
const KNOWN: [u8; 18] = [
    op::NOP_OUT,
    op::SCSI_COMMAND,
    op::TASK_MGMT,
    op::LOGIN,
    op::TEXT,
    op::DATA_OUT,
    op::LOGOUT,
    op::SNACK,
    op::NOP_IN,
    op::SCSI_RESPONSE,
    op::TASK_MGMT_RESPONSE,
    op::LOGIN_RESPONSE,
    op::TEXT_RESPONSE,
    op::DATA_IN,
    op::LOGOUT_RESPONSE,
    op::R2T,
    op::ASYNC,
    op::REJECT,
];

/// SBC opcode names as Wireshark spells them (`scsi_sbc.opcode`).
const SBC_NAMES: &[(u8, &str)] = &[
    (0x00, "Test Unit Ready"),
    (0x03, "Request Sense"),
    (0x04, "Format Unit"),
    (0x07, "Reassign Blocks"),
    (0x08, "Read(6)"),
    (0x0a, "Write(6)"),
    (0x12, "Inquiry"),
    (0x15, "Mode Select(6)"),
    (0x16, "Reserve(6)"),
    (0x17, "Release(6)"),
    (0x1a, "Mode Sense(6)"),
    (0x1b, "Start Stop Unit"),
    (0x1d, "Send Diagnostic"),
    (0x1e, "Prevent/Allow Medium Removal"),
    (0x25, "Read Capacity(10)"),
    (0x28, "Read(10)"),
    (0x2a, "Write(10)"),
    (0x2b, "Seek(10)"),
    (0x2e, "Write & Verify(10)"),
    (0x2f, "Verify(10)"),
    (0x33, "Set Limits(10)"),
    (0x34, "Pre-Fetch(10)"),
    (0x35, "Synchronize Cache(10)"),
    (0x36, "Lock Unlock Cache(10)"),
    (0x37, "Read Defect Data(10)"),
    (0x3b, "Write Buffer"),
    (0x3e, "Read Long(10)"),
    (0x3f, "Write Long"),
    (0x41, "Write Same(10)"),
    (0x42, "Unmap"),
    (0x48, "Sanitize"),
    (0x4c, "Log Select"),
    (0x4d, "Log Sense"),
    (0x50, "XdWrite(10)"),
    (0x51, "XpWrite(10)"),
    (0x52, "XdRead(10)"),
    (0x53, "XdWriteRead(10)"),
    (0x55, "Mode Select(10)"),
    (0x56, "Reserve(10)"),
    (0x57, "Release(10)"),
    (0x5a, "Mode Sense(10)"),
    (0x5e, "Persistent Reserve In"),
    (0x5f, "Persistent Reserve Out"),
    (0x7f, "Rebuild(32)"),
    (0x80, "XdWrite Extended(16)"),
    (0x81, "Rebuild(16)"),
    (0x82, "Regenerate(16)"),
    (0x83, "Extended Copy"),
    (0x84, "Receive Copy"),
    (0x88, "Read(16)"),
    (0x89, "Compare & Write(16)"),
    (0x8a, "Write(16)"),
    (0x8b, "OrWrite(16)"),
    (0x8e, "Write & Verify(16)"),
    (0x8f, "Verify(16)"),
    (0x90, "Pre-Fetch(16)"),
    (0x91, "Synchronize Cache(16)"),
    (0x92, "Lock Unlock Cache(16)"),
    (0x93, "Write Same(16)"),
    (0x9c, "Write Atomic(16)"),
    (0x9e, "Service Action In(16)"),
    (0x9f, "Service Action Out(16)"),
    (0xa0, "Report LUNs"),
    (0xa3, "Mgmt Protocol In"),
    (0xa8, "Read(12)"),
    (0xaa, "Write(12)"),
    (0xae, "Write & Verify(12)"),
    (0xaf, "Verify(12)"),
    (0xb3, "Set Limits(12)"),
    (0xb7, "Read Defect Data(12)"),
];

/// Wireshark's name of SCSI (SBC) opcode `code`.
pub fn opcode_name(code: u8) -> &'static str {
    SBC_NAMES
        .iter()
        .find(|(c, _)| *c == code)
        .map_or("Unknown", |(_, n)| n)
}

/// The data extent of a CDB: (kind, LBA, transfer length in blocks).
pub fn cdb_extent(cdb: &[u8]) -> Option<(IoKind, u64, u32)> {
    let b = |i: usize| cdb.get(i).copied().map(u64::from);
    let be = |from: usize, n: usize| -> Option<u64> {
        (from..from + n).try_fold(0u64, |acc, i| Some(acc << 8 | b(i)?))
    };
    let opcode = *cdb.first()?;
    let (kind, lba, blocks) = match opcode {
        // 6-byte: 21-bit LBA, length 0 means 256 blocks (SBC-3 5.15).
        0x08 | 0x0a => {
            let lba = (b(1)? & 0x1f) << 16 | b(2)? << 8 | b(3)?;
            let n = b(4)?;
            let kind = if opcode == 0x08 {
                IoKind::Read
            } else {
                IoKind::Write
            };
            (kind, lba, if n == 0 { 256 } else { n })
        }
        0x28 | 0x2a | 0x2e | 0x35 => (kind_of(opcode), be(2, 4)?, be(7, 2)?),
        0xa8 | 0xaa | 0xae => (kind_of(opcode), be(2, 4)?, be(6, 4)?),
        0x88 | 0x8a | 0x8e | 0x91 | 0x93 => (kind_of(opcode), be(2, 8)?, be(10, 4)?),
        _ => return None,
    };
    Some((kind, lba, u32::try_from(blocks).unwrap_or(u32::MAX)))
}

fn kind_of(opcode: u8) -> IoKind {
    match opcode {
        0x28 | 0xa8 | 0x88 => IoKind::Read,
        0x35 | 0x91 => IoKind::Commit,
        _ => IoKind::Write,
    }
}

/// A checked view of a Basic Header Segment.
#[derive(Clone, Copy, Debug)]
pub struct BhsSlice<'a> {
    /// The 48 header bytes: fixed offsets into an array need no runtime checks.
    b: &'a [u8; BHS],
    /// The bytes after the header as kept.
    rest: &'a [u8],
}

impl<'a> BhsSlice<'a> {
    /// Needs 48 bytes.
    pub fn from_slice(b: &'a [u8]) -> Option<Self> {
        let (b, rest) = b.split_first_chunk::<BHS>()?;
        Some(Self { b, rest })
    }
    /// Opcode (6 bits).
    pub fn opcode(&self) -> u8 {
        self.b[0] & 0x3f
    }
    /// Byte 1 (final bit and opcode-specific flags).
    pub fn flags(&self) -> u8 {
        self.b[1]
    }
    /// Byte 3: the SCSI status of a SCSI Response (or of a Data-In with the S bit).
    pub fn status(&self) -> u8 {
        self.b[3]
    }
    /// TotalAHSLength in bytes.
    pub fn ahs_len(&self) -> usize {
        usize::from(self.b[4]) * 4
    }
    /// DataSegmentLength.
    pub fn data_len(&self) -> u64 {
        u64::from(self.b[5]) << 16 | u64::from(self.b[6]) << 8 | u64::from(self.b[7])
    }
    /// Initiator Task Tag.
    pub fn itt(&self) -> u32 {
        be32(self.b, 16).unwrap_or(0)
    }
    /// A u32 field at `off`.
    pub fn u32_at(&self, off: usize) -> u32 {
        be32(self.b, off).unwrap_or(0)
    }
    /// The 16-byte CDB of a SCSI Command.
    pub fn cdb(&self) -> &'a [u8] {
        &self.b[32..48]
    }
    /// The SCSI opcode (first CDB byte) of a SCSI Command.
    pub fn cdb_opcode(&self) -> u8 {
        self.b[32]
    }
    /// The bytes after the header as kept.
    pub fn rest(&self) -> &'a [u8] {
        self.rest
    }
}

#[derive(Clone, Copy, Debug)]
struct Pending {
    opcode: u8,
    dir: Dir,
    span: Span,
    io: Option<Io>,
    data_in: u64,
    data_out: u64,
    r2ts: u32,
}

/// iSCSI state of one connection.
#[derive(Debug)]
pub struct IscsiConn {
    pending: FxHashMap<u32, Pending>,
    max_outstanding: usize,
    warned_full: bool,
    /// CRC32C header/data digests (in use after the login phase).
    header_digest: bool,
    data_digest: bool,
    /// Digest keys seen during login, applied when the login phase ends.
    offered: (bool, bool),
}

impl IscsiConn {
    /// A connection remembering at most `max_outstanding` unanswered commands.
    pub fn new(max_outstanding: usize) -> Self {
        Self {
            pending: FxHashMap::default(),
            max_outstanding: max_outstanding.max(1),
            warned_full: false,
            header_digest: false,
            data_digest: false,
            offered: (false, false),
        }
    }

    /// Commands waiting for their status.
    pub fn outstanding(&self) -> usize {
        self.pending.len()
    }

    /// End of input: unanswered commands become transactions without a reply.
    pub fn finish<S: StorageSink>(&mut self, stream: StreamId, sink: &mut S) {
        let mut left: Vec<(u32, Pending)> = self.pending.drain().collect();
        left.sort_by_key(|(_, p)| p.span.last.frame);
        for (itt, p) in left {
            sink.transaction(&transaction(stream, itt, &p, None, None));
        }
    }

    fn pdu<S: StorageSink>(
        &mut self,
        stream: StreamId,
        dir: Dir,
        h: &BhsSlice<'_>,
        pdu: &Pdu<'_>,
        sink: &mut S,
    ) {
        let span = Span {
            first: pdu.first,
            last: pdu.last,
            bytes: pdu.len,
            repaired: pdu.repaired,
            damaged: pdu.damaged,
        };
        match h.opcode() {
            op::SCSI_COMMAND => self.command(stream, dir, h, span, sink),
            op::DATA_OUT => {
                if let Some(p) = self.pending.get_mut(&h.itt()) {
                    p.data_out += h.data_len();
                }
            }
            op::R2T => {
                if let Some(p) = self.pending.get_mut(&h.itt()) {
                    p.r2ts += 1;
                }
            }
            op::DATA_IN => {
                let itt = h.itt();
                if let Some(p) = self.pending.get_mut(&itt) {
                    p.data_in += h.data_len();
                }
                // S bit: the status comes with the last Data-In (phase collapse).
                if h.flags() & 0x01 != 0 {
                    self.complete(stream, itt, u32::from(h.status()), span, sink);
                }
            }
            op::SCSI_RESPONSE => self.complete(stream, h.itt(), u32::from(h.status()), span, sink),
            op::LOGIN_RESPONSE => self.login_response(h),
            op::LOGIN => self.login_keys(h.rest()),
            _ => {}
        }
    }

    fn command<S: StorageSink>(
        &mut self,
        stream: StreamId,
        dir: Dir,
        h: &BhsSlice<'_>,
        span: Span,
        sink: &mut S,
    ) {
        let itt = h.itt();
        if self.pending.contains_key(&itt) {
            return;
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
        let cdb = h.cdb();
        let edtl = u64::from(h.u32_at(20));
        let io = cdb_extent(cdb).map(|(kind, lba, blocks)| Io {
            kind,
            offset: lba,
            len: if kind == IoKind::Commit { 0 } else { edtl },
            blocks: Some(blocks),
            stable: None,
            done_stable: None,
            done_len: None,
        });
        let p = Pending {
            opcode: h.cdb_opcode(),
            dir,
            span,
            io,
            data_in: 0,
            // Immediate data travels in the command PDU.
            data_out: h.data_len(),
            r2ts: 0,
        };
        sink.request(&Request {
            stream,
            proto: Proto::Iscsi,
            op: opcode_name(p.opcode),
            at: span.last,
            io,
            credits: None,
        });
        self.pending.insert(itt, p);
    }

    fn complete<S: StorageSink>(
        &mut self,
        stream: StreamId,
        itt: u32,
        status: u32,
        span: Span,
        sink: &mut S,
    ) {
        if let Some(p) = self.pending.remove(&itt) {
            sink.transaction(&transaction(stream, itt, &p, Some(span), Some(status)));
        }
    }

    /// Remembers HeaderDigest/DataDigest answers in a Login Response's text.
    fn login_keys(&mut self, text: &[u8]) {
        for kv in text.split(|&c| c == 0) {
            if let Some(v) = kv.strip_prefix(b"HeaderDigest=") {
                self.offered.0 = v.starts_with(b"CRC32C");
            } else if let Some(v) = kv.strip_prefix(b"DataDigest=") {
                self.offered.1 = v.starts_with(b"CRC32C");
            }
        }
    }

    fn login_response(&mut self, h: &BhsSlice<'_>) {
        self.login_keys(h.rest());
        // Transit to NSG 3 (full feature phase) ends the login: digests start after it.
        let f = h.flags();
        if f & 0x80 != 0 && f & 0x03 == 0x03 {
            (self.header_digest, self.data_digest) = self.offered;
        }
    }
}

fn transaction(
    stream: StreamId,
    itt: u32,
    p: &Pending,
    reply: Option<Span>,
    status: Option<u32>,
) -> Transaction {
    Transaction {
        stream,
        proto: Proto::Iscsi,
        version: None,
        op: opcode_name(p.opcode),
        op_code: u16::from(p.opcode),
        sub_op: None,
        ops: None,
        id: u64::from(itt),
        request_dir: p.dir,
        request: p.span,
        reply,
        interim: None,
        status,
        io: p.io.map(|mut io| {
            io.done_len = match io.kind {
                IoKind::Read => Some(p.data_in),
                IoKind::Write => Some(p.data_out),
                IoKind::Commit => None,
            };
            io
        }),
        credits: None,
    }
}

/// One direction of an iSCSI connection, as the framer's handler.
pub struct IscsiDir<'a, S> {
    /// Connection state.
    pub conn: &'a mut IscsiConn,
    /// Direction of these bytes.
    pub dir: Dir,
    /// Stream.
    pub stream: StreamId,
    /// Output.
    pub sink: &'a mut S,
}

impl<S> IscsiDir<'_, S> {
    /// Where the PDU starting with `h` ends, the next BHS (when these bytes hold it) must be
    /// one too: a known opcode and a data segment within bounds.
    fn next_bhs_fits(&self, b: &[u8], h: &BhsSlice<'_>) -> bool {
        let data = h.data_len().div_ceil(4) * 4;
        let hd = if self.conn.header_digest { 4 } else { 0 };
        let dd = if self.conn.data_digest && data > 0 {
            4
        } else {
            0
        };
        let end = BHS as u64 + h.ahs_len() as u64 + hd + data + dd;
        let next = usize::try_from(end)
            .ok()
            .and_then(|e| b.get(e..))
            .and_then(BhsSlice::from_slice);
        next.is_none_or(|n| KNOWN.contains(&n.opcode()) && n.data_len() <= MAX_DATA_SEGMENT)
    }
}

impl<S: StorageSink> PduHandler for IscsiDir<'_, S> {
    fn head_len(&self) -> usize {
        BHS
    }
    fn pdu_len(&mut self, head: &[u8]) -> Option<u64> {
        let h = BhsSlice::from_slice(head)?;
        if !KNOWN.contains(&h.opcode()) || h.data_len() > MAX_DATA_SEGMENT {
            return None;
        }
        let data = h.data_len().div_ceil(4) * 4;
        let hd = if self.conn.header_digest { 4 } else { 0 };
        let dd = if self.conn.data_digest && data > 0 {
            4
        } else {
            0
        };
        Some(BHS as u64 + h.ahs_len() as u64 + hd + data + dd)
    }
    fn keep_len(&self, head: &[u8], _total: u64) -> usize {
        let Some(h) = BhsSlice::from_slice(head) else {
            return BHS;
        };
        match h.opcode() {
            op::LOGIN | op::LOGIN_RESPONSE | op::TEXT | op::TEXT_RESPONSE => BHS + TEXT_KEEP,
            _ => BHS,
        }
    }
    fn probe_len(&self) -> usize {
        BHS
    }
    fn max_pdu_len(&self) -> u64 {
        // The BHS, the longest AHS (255 words), both digests and the longest data segment
        // padded to a word.
        BHS as u64 + 255 * 4 + 4 + MAX_DATA_SEGMENT.div_ceil(4) * 4 + 4
    }
    fn plausible(&self, bytes: &[u8]) -> bool {
        let Some(h) = BhsSlice::from_slice(bytes) else {
            return false;
        };
        if h.ahs_len() != 0 || h.data_len() > MAX_DATA_SEGMENT {
            return false;
        }
        let Some(b) = bytes.first_chunk::<BHS>() else {
            return false;
        };
        let known = self.conn.pending.contains_key(&h.itt());
        // Reserved fields (RFC 7143 section 11) are zero.
        let head = match h.opcode() {
            // A new command: Final bit set, a CDB opcode Wireshark knows.
            op::SCSI_COMMAND => {
                h.flags() & 0x80 != 0
                    && b[2..4] == [0, 0]
                    && opcode_name(h.cdb_opcode()) != "Unknown"
            }
            // Response code 0 or 1, no LUN field.
            op::SCSI_RESPONSE => known && h.flags() & 0x80 != 0 && b[2] <= 1 && b[8..16] == [0; 8],
            op::DATA_IN => known && b[2] == 0,
            op::DATA_OUT => known && b[2..4] == [0, 0],
            op::R2T => known && b[1] == 0x80 && b[2..4] == [0, 0] && h.data_len() == 0,
            _ => false,
        };
        head && self.next_bhs_fits(bytes, &h)
    }
    fn pdu(&mut self, pdu: &Pdu<'_>) {
        if let Some(h) = BhsSlice::from_slice(pdu.head) {
            self.conn.pdu(self.stream, self.dir, &h, pdu, self.sink);
        }
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
