//! NFSv3 (RFC 1813) and NFSv4.x (RFC 7530, 8881) procedure decoding: names, and the
//! READ/WRITE/COMMIT extents of calls and replies.
//!
//! Only the leading fields are read; anything that does not parse gives `None` fields,
//! never an error (the transaction still counts).

use crate::transaction::{Io, IoKind, OpList};
use crate::xdr::Xdr;

/// ONC RPC program number of NFS.
pub const PROGRAM: u32 = 100_003;

/// Longest NFS file handle (NFSv4: NFS4_FHSIZE = 128; v3: 64).
const MAX_FH: usize = 128;
/// Longest name component or opaque we skip in arguments.
const MAX_OPAQUE: usize = 1 << 16;

/// NFSv3 procedure names, as Wireshark spells them (`nfs.procedure_v3`).
const V3_PROCS: [&str; 22] = [
    "NULL",
    "GETATTR",
    "SETATTR",
    "LOOKUP",
    "ACCESS",
    "READLINK",
    "READ",
    "WRITE",
    "CREATE",
    "MKDIR",
    "SYMLINK",
    "MKNOD",
    "REMOVE",
    "RMDIR",
    "RENAME",
    "LINK",
    "READDIR",
    "READDIRPLUS",
    "FSSTAT",
    "FSINFO",
    "PATHCONF",
    "COMMIT",
];

/// NFSv2 procedure names (`nfs.procedure_v2`).
const V2_PROCS: [&str; 18] = [
    "NULL",
    "GETATTR",
    "SETATTR",
    "ROOT",
    "LOOKUP",
    "READLINK",
    "READ",
    "WRITECACHE",
    "WRITE",
    "CREATE",
    "REMOVE",
    "RENAME",
    "LINK",
    "SYMLINK",
    "MKDIR",
    "RMDIR",
    "READDIR",
    "STATFS",
];

/// NFSv4 operation names from code 3 (`nfs.opcode`).
const V4_OPS: [&str; 73] = [
    "ACCESS",
    "CLOSE",
    "COMMIT",
    "CREATE",
    "DELEGPURGE",
    "DELEGRETURN",
    "GETATTR",
    "GETFH",
    "LINK",
    "LOCK",
    "LOCKT",
    "LOCKU",
    "LOOKUP",
    "LOOKUPP",
    "NVERIFY",
    "OPEN",
    "OPENATTR",
    "OPEN_CONFIRM",
    "OPEN_DOWNGRADE",
    "PUTFH",
    "PUTPUBFH",
    "PUTROOTFH",
    "READ",
    "READDIR",
    "READLINK",
    "REMOVE",
    "RENAME",
    "RENEW",
    "RESTOREFH",
    "SAVEFH",
    "SECINFO",
    "SETATTR",
    "SETCLIENTID",
    "SETCLIENTID_CONFIRM",
    "VERIFY",
    "WRITE",
    "RELEASE_LOCKOWNER",
    "BACKCHANNEL_CTL",
    "BIND_CONN_TO_SESSION",
    "EXCHANGE_ID",
    "CREATE_SESSION",
    "DESTROY_SESSION",
    "FREE_STATEID",
    "GET_DIR_DELEGATION",
    "GETDEVINFO",
    "GETDEVLIST",
    "LAYOUTCOMMIT",
    "LAYOUTGET",
    "LAYOUTRETURN",
    "SECINFO_NO_NAME",
    "SEQUENCE",
    "SET_SSV",
    "TEST_STATEID",
    "WANT_DELEG",
    "DESTROY_CLIENTID",
    "RECLAIM_COMPLETE",
    "ALLOCATE",
    "COPY",
    "COPY_NOTIFY",
    "DEALLOCATE",
    "IO_ADVISE",
    "LAYOUTERROR",
    "LAYOUTSTATS",
    "OFFLOAD_CANCEL",
    "OFFLOAD_STATUS",
    "READ_PLUS",
    "SEEK",
    "WRITE_SAME",
    "CLONE",
    "GETXATTR",
    "SETXATTR",
    "LISTXATTRS",
    "REMOVEXATTR",
];

/// NFSv4 operation codes used below.
mod op {
    pub const ACCESS: u16 = 3;
    pub const CLOSE: u16 = 4;
    pub const COMMIT: u16 = 5;
    pub const DELEGRETURN: u16 = 8;
    pub const GETATTR: u16 = 9;
    pub const GETFH: u16 = 10;
    pub const LINK: u16 = 11;
    pub const LOOKUP: u16 = 15;
    pub const LOOKUPP: u16 = 16;
    pub const OPEN: u16 = 18;
    pub const OPEN_CONFIRM: u16 = 20;
    pub const PUTFH: u16 = 22;
    pub const PUTPUBFH: u16 = 23;
    pub const PUTROOTFH: u16 = 24;
    pub const READ: u16 = 25;
    pub const READDIR: u16 = 26;
    pub const READLINK: u16 = 27;
    pub const REMOVE: u16 = 28;
    pub const RENAME: u16 = 29;
    pub const RENEW: u16 = 30;
    pub const RESTOREFH: u16 = 31;
    pub const SAVEFH: u16 = 32;
    pub const SETATTR: u16 = 34;
    pub const WRITE: u16 = 38;
    pub const DESTROY_SESSION: u16 = 44;
    pub const FREE_STATEID: u16 = 45;
    pub const SECINFO_NO_NAME: u16 = 52;
    pub const SEQUENCE: u16 = 53;
    pub const RECLAIM_COMPLETE: u16 = 58;
    pub const ILLEGAL: u16 = 10044;
}

/// Wireshark's name of procedure `proc_` of NFS version `vers`.
pub fn proc_name(vers: u32, proc_: u32) -> &'static str {
    let p = proc_ as usize;
    match vers {
        2 => V2_PROCS.get(p).copied().unwrap_or("Unknown"),
        3 => V3_PROCS.get(p).copied().unwrap_or("Unknown"),
        4 => match proc_ {
            0 => "NULL",
            1 => "COMPOUND",
            _ => "Unknown",
        },
        _ => "Unknown",
    }
}

/// Wireshark's name of NFSv4 operation `code`.
pub fn op4_name(code: u16) -> &'static str {
    match code {
        op::ILLEGAL => "ILLEGAL",
        3.. => V4_OPS
            .get(usize::from(code) - 3)
            .copied()
            .unwrap_or("Unknown"),
        _ => "Unknown",
    }
}

/// What a call tells beyond its procedure.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NfsCall {
    /// READ/WRITE/COMMIT extent.
    pub io: Option<Io>,
    /// NFSv4 COMPOUND operations.
    pub ops: Option<OpList>,
    /// NFSv4 principal operation.
    pub sub_op: Option<&'static str>,
}

/// What a reply tells.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NfsReply {
    /// NFS status (nfsstat3 / nfsstat4), if the results could be read.
    pub status: Option<u32>,
    /// Bytes read or written.
    pub done_len: Option<u64>,
    /// WRITE `committed`.
    pub done_stable: Option<u32>,
}

/// Decodes a call's arguments.
pub fn decode_call(vers: u32, proc_: u32, args: &[u8]) -> NfsCall {
    match vers {
        3 => NfsCall {
            io: v3_call_io(proc_, args),
            ..NfsCall::default()
        },
        4 if proc_ == 1 => {
            let (ops, io) = v4_compound(args);
            NfsCall {
                io,
                sub_op: Some(op4_name(principal(ops.codes()))),
                ops: Some(ops),
            }
        }
        _ => NfsCall::default(),
    }
}

/// Decodes a reply's results (`io` is the call's extent, to know what to look for).
pub fn decode_reply(vers: u32, proc_: u32, res: &[u8], io: Option<Io>) -> NfsReply {
    if proc_ == 0 {
        return NfsReply::default();
    }
    let mut x = Xdr::new(res);
    let Some(status) = x.u32() else {
        return NfsReply::default();
    };
    let mut r = NfsReply {
        status: Some(status),
        ..NfsReply::default()
    };
    if status != 0 {
        return r;
    }
    match (vers, proc_) {
        (3, 6) => {
            // READ3resok: post_op_attr, count, eof, data.
            r.done_len = skip_post_op_attr(&mut x)
                .and_then(|_| x.u32())
                .map(u64::from);
        }
        // WRITE3resok: wcc_data, count, committed, verf.
        (3, 7) if skip_wcc_data(&mut x).is_some() => {
            r.done_len = x.u32().map(u64::from);
            r.done_stable = x.u32();
        }
        (4, 1) if io.is_some() => v4_reply_io(&mut x, &mut r),
        _ => {}
    }
    r
}

fn v3_call_io(proc_: u32, args: &[u8]) -> Option<Io> {
    let kind = match proc_ {
        6 => IoKind::Read,
        7 => IoKind::Write,
        21 => IoKind::Commit,
        _ => return None,
    };
    let mut x = Xdr::new(args);
    x.skip_opaque(MAX_FH)?;
    let offset = x.u64()?;
    let len = u64::from(x.u32()?);
    let stable = if kind == IoKind::Write { x.u32() } else { None };
    Some(Io {
        kind,
        offset,
        len,
        blocks: None,
        stable,
        done_stable: None,
        done_len: None,
    })
}

/// `fattr3` is 84 bytes.
const FATTR3_LEN: usize = 84;
/// `wcc_attr` is 24 bytes.
const WCC_ATTR_LEN: usize = 24;

fn skip_post_op_attr(x: &mut Xdr<'_>) -> Option<()> {
    if x.u32()? != 0 {
        x.skip(FATTR3_LEN)?;
    }
    Some(())
}

fn skip_wcc_data(x: &mut Xdr<'_>) -> Option<()> {
    if x.u32()? != 0 {
        x.skip(WCC_ATTR_LEN)?;
    }
    skip_post_op_attr(x)
}

/// The operation that names a COMPOUND: the first that is not session or file-handle
/// plumbing (SEQUENCE, PUTFH, GETFH, SAVEFH, ...), else the last GETATTR, else the first.
pub fn principal(codes: &[u16]) -> u16 {
    const PLUMBING: [u16; 8] = [
        op::SEQUENCE,
        op::PUTFH,
        op::PUTROOTFH,
        op::PUTPUBFH,
        op::GETFH,
        op::SAVEFH,
        op::RESTOREFH,
        op::GETATTR,
    ];
    codes
        .iter()
        .copied()
        .find(|c| !PLUMBING.contains(c))
        .or_else(|| codes.iter().copied().rev().find(|&c| c == op::GETATTR))
        .or_else(|| codes.first().copied())
        .unwrap_or(0)
}

/// Operations of a COMPOUND4args and the first READ/WRITE/COMMIT extent.
fn v4_compound(args: &[u8]) -> (OpList, Option<Io>) {
    let mut ops = OpList::default();
    let mut io = None;
    let mut x = Xdr::new(args);
    let header = (|| {
        x.skip_opaque(MAX_OPAQUE)?; // tag
        x.u32()?; // minorversion
        x.u32()
    })();
    let Some(n) = header else {
        ops.truncated = true;
        return (ops, None);
    };
    for _ in 0..n {
        let Some(code) = x.u32() else {
            ops.truncated = true;
            break;
        };
        let code = u16::try_from(code).unwrap_or(u16::MAX);
        ops.push(code);
        match skip_v4_args(code, &mut x) {
            Some(found) => {
                if io.is_none() {
                    io = found;
                }
            }
            None => {
                // Unknown layout: the remaining operations cannot be located.
                ops.truncated = n as usize > ops.codes().len();
                break;
            }
        }
    }
    (ops, io)
}

const STATEID: usize = 16;
const SESSIONID: usize = 16;

/// Skips one operation's arguments; `Some(io)` when it moved past them.
fn skip_v4_args(code: u16, x: &mut Xdr<'_>) -> Option<Option<Io>> {
    let io = |kind, offset, len, stable| {
        Some(Some(Io {
            kind,
            offset,
            len,
            blocks: None,
            stable,
            done_stable: None,
            done_len: None,
        }))
    };
    match code {
        op::ACCESS => x.skip(4)?,
        op::CLOSE => x.skip(4 + STATEID)?,
        op::COMMIT => {
            let offset = x.u64()?;
            let len = x.u32()?;
            return io(IoKind::Commit, offset, u64::from(len), None);
        }
        op::DELEGRETURN | op::FREE_STATEID => x.skip(STATEID)?,
        op::GETATTR => x.skip_bitmap(64)?,
        op::GETFH
        | op::LOOKUPP
        | op::PUTPUBFH
        | op::PUTROOTFH
        | op::READLINK
        | op::RESTOREFH
        | op::SAVEFH => {}
        op::LINK | op::LOOKUP | op::REMOVE => x.skip_opaque(MAX_OPAQUE)?,
        op::RENAME => {
            x.skip_opaque(MAX_OPAQUE)?;
            x.skip_opaque(MAX_OPAQUE)?;
        }
        op::OPEN => skip_open4(x)?,
        op::OPEN_CONFIRM => x.skip(STATEID + 4)?,
        op::PUTFH => x.skip_opaque(MAX_FH)?,
        op::READ => {
            x.skip(STATEID)?;
            let offset = x.u64()?;
            let len = x.u32()?;
            return io(IoKind::Read, offset, u64::from(len), None);
        }
        op::READDIR => {
            x.skip(8 + 8 + 4 + 4)?;
            x.skip_bitmap(64)?;
        }
        op::RENEW => x.skip(8)?,
        op::SETATTR => {
            x.skip(STATEID)?;
            skip_fattr4(x)?;
        }
        op::WRITE => {
            x.skip(STATEID)?;
            let offset = x.u64()?;
            let stable = x.u32()?;
            let len = x.u32()?; // the data's length; the data itself is not kept
            let _ = x.skip(crate::xdr::pad4(len as usize));
            return io(IoKind::Write, offset, u64::from(len), Some(stable));
        }
        op::DESTROY_SESSION => x.skip(SESSIONID)?,
        op::SECINFO_NO_NAME | op::RECLAIM_COMPLETE => x.skip(4)?,
        op::SEQUENCE => x.skip(SESSIONID + 4 + 4 + 4 + 4)?,
        _ => return None,
    }
    Some(None)
}

fn skip_fattr4(x: &mut Xdr<'_>) -> Option<()> {
    x.skip_bitmap(64)?;
    x.skip_opaque(MAX_OPAQUE)
}

/// OPEN4args: seqid, share_access, share_deny, open_owner4, openflag4, open_claim4.
fn skip_open4(x: &mut Xdr<'_>) -> Option<()> {
    x.skip(4 + 4 + 4 + 8)?;
    x.skip_opaque(1024)?; // owner
    if x.u32()? == 1 {
        // OPEN4_CREATE: createhow4
        match x.u32()? {
            0 | 1 => skip_fattr4(x)?,
            2 => x.skip(8)?,
            3 => {
                x.skip(8)?;
                skip_fattr4(x)?;
            }
            _ => return None,
        }
    }
    match x.u32()? {
        0 | 3 => x.skip_opaque(MAX_OPAQUE)?,
        1 => x.skip(4)?,
        2 => {
            x.skip(STATEID)?;
            x.skip_opaque(MAX_OPAQUE)?;
        }
        4 | 6 => {}
        5 => x.skip(STATEID)?,
        _ => return None,
    }
    Some(())
}

/// Walks COMPOUND4res up to the first READ/WRITE result and reads its length.
fn v4_reply_io(x: &mut Xdr<'_>, r: &mut NfsReply) {
    let walk = (|| {
        x.skip_opaque(MAX_OPAQUE)?; // tag
        let n = x.u32()?;
        for _ in 0..n {
            let code = u16::try_from(x.u32()?).ok()?;
            let status = x.u32()?;
            if status != 0 {
                return None;
            }
            match code {
                op::READ => {
                    x.u32()?; // eof
                    let len = x.u32()?;
                    r.done_len = Some(u64::from(len));
                    return Some(());
                }
                op::WRITE => {
                    r.done_len = Some(u64::from(x.u32()?));
                    r.done_stable = x.u32();
                    return Some(());
                }
                op::SEQUENCE => x.skip(SESSIONID + 4 * 5)?,
                op::PUTFH | op::PUTROOTFH | op::PUTPUBFH | op::SAVEFH | op::RESTOREFH => {}
                op::GETFH => x.skip_opaque(MAX_FH)?,
                op::GETATTR => skip_fattr4(x)?,
                op::ACCESS => x.skip(8)?,
                op::LOOKUP => {}
                _ => return None,
            }
        }
        Some(())
    })();
    let _ = walk;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn xdr(words: &[u32]) -> Vec<u8> {
        words.iter().flat_map(|w| w.to_be_bytes()).collect()
    }

    #[test]
    fn names_follow_wireshark() {
        assert_eq!(proc_name(3, 6), "READ");
        assert_eq!(proc_name(3, 21), "COMMIT");
        assert_eq!(proc_name(3, 22), "Unknown");
        assert_eq!(proc_name(4, 1), "COMPOUND");
        assert_eq!(proc_name(2, 8), "WRITE");
        assert_eq!(op4_name(53), "SEQUENCE");
        assert_eq!(op4_name(38), "WRITE");
        assert_eq!(op4_name(75), "REMOVEXATTR");
        assert_eq!(op4_name(76), "Unknown");
        assert_eq!(op4_name(10044), "ILLEGAL");
        assert_eq!(op4_name(0), "Unknown");
    }

    #[test]
    fn v3_write_call_and_reply() {
        // fh (8 bytes), offset 1<<32 + 4096, count 65536, stable FILE_SYNC, data...
        let args = xdr(&[8, 0xaaaa_aaaa, 0xbbbb_bbbb, 1, 4096, 65536, 2, 65536]);
        let c = decode_call(3, 7, &args);
        let io = c.io.unwrap();
        assert_eq!(io.kind, IoKind::Write);
        assert_eq!(io.offset, (1 << 32) + 4096);
        assert_eq!(io.len, 65536);
        assert_eq!(io.stable, Some(2));
        // status OK, pre_op_attr absent, post_op_attr absent, count, committed UNSTABLE
        let res = xdr(&[0, 0, 0, 65536, 0]);
        let r = decode_reply(3, 7, &res, c.io);
        assert_eq!(r.status, Some(0));
        assert_eq!(r.done_len, Some(65536));
        assert_eq!(r.done_stable, Some(0));
    }

    #[test]
    fn v3_read_reply_with_attributes() {
        let mut res = xdr(&[0, 1]);
        res.extend([0u8; FATTR3_LEN]);
        res.extend(xdr(&[4096, 1]));
        let r = decode_reply(3, 6, &res, None);
        assert_eq!(r.done_len, Some(4096));
        assert_eq!(decode_reply(3, 6, &xdr(&[70]), None).status, Some(70));
        assert_eq!(decode_reply(3, 6, &[0, 0], None), NfsReply::default());
    }

    #[test]
    fn v4_compound_sequence_putfh_read() {
        let mut a = xdr(&[0, 1, 3]); // empty tag, minorversion 1, 3 ops
        a.extend(xdr(&[53]));
        a.extend([0u8; 16]);
        a.extend(xdr(&[1, 0, 0, 0]));
        a.extend(xdr(&[22, 4, 0xdead_beef]));
        a.extend(xdr(&[25]));
        a.extend([0u8; 16]);
        a.extend(xdr(&[0, 8192, 1 << 20]));
        let c = decode_call(4, 1, &a);
        assert_eq!(c.ops.unwrap().codes(), &[53, 22, 25]);
        assert!(!c.ops.unwrap().truncated);
        assert_eq!(c.sub_op, Some("READ"));
        let io = c.io.unwrap();
        assert_eq!((io.kind, io.offset, io.len), (IoKind::Read, 8192, 1 << 20));
        // Reply: OK, empty tag, 3 results: SEQUENCE ok, PUTFH ok, READ ok eof=0 len=4096
        let mut r = xdr(&[0, 0, 3, 53, 0]);
        r.extend([0u8; 16]);
        r.extend(xdr(&[1, 0, 0, 0, 0]));
        r.extend(xdr(&[22, 0, 25, 0, 0, 4096]));
        let d = decode_reply(4, 1, &r, c.io);
        assert_eq!(d.done_len, Some(4096));
    }

    #[test]
    fn v4_unknown_op_stops_the_list() {
        let a = xdr(&[0, 2, 3, 42, 1, 2, 3, 9, 0]);
        let c = decode_call(4, 1, &a);
        assert_eq!(c.ops.unwrap().codes(), &[42]);
        assert!(c.ops.unwrap().truncated);
        assert_eq!(c.sub_op, Some("EXCHANGE_ID"));
    }

    #[test]
    fn principal_operation() {
        assert_eq!(principal(&[53, 22, 9]), 9);
        assert_eq!(principal(&[53, 22, 18, 10, 9]), 18);
        assert_eq!(principal(&[53]), 53);
        assert_eq!(principal(&[]), 0);
    }

    #[test]
    fn truncated_input_never_panics() {
        let mut a = xdr(&[0, 1, 3, 53]);
        a.extend([0u8; 16]);
        for n in 0..a.len() {
            let _ = decode_call(4, 1, &a[..n]);
            let _ = decode_call(3, 7, &a[..n]);
            let _ = decode_reply(3, 7, &a[..n], None);
            let _ = decode_reply(
                4,
                1,
                &a[..n],
                Some(Io {
                    kind: IoKind::Read,
                    offset: 0,
                    len: 1,
                    blocks: None,
                    stable: None,
                    done_stable: None,
                    done_len: None,
                }),
            );
        }
    }
}
