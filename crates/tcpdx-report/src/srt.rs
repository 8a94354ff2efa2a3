//! `tcpdx srt`: service response time tables (text like tshark's `-z ...,srt`, or JSON).

use std::io::{self, Write};

use tcpdx_storage::SrtReport;
use tcpdx_storage::srt::{By, SrtTable, wireshark_mean, wireshark_sum, wireshark_time};

/// Writes the report as JSON (`{"version": 1, "tables": [...], ...}`; docs/json-format.md).
pub fn write_srt_json<W: Write>(out: &mut W, r: &SrtReport) -> io::Result<()> {
    serde_json::to_writer_pretty(&mut *out, r)?;
    writeln!(out)
}

fn title(t: &SrtTable) -> String {
    match (t.protocol, t.version, t.by) {
        ("nfs", Some(v), By::Procedure) => {
            format!("NFSv{v} service response time by procedure (tshark -z rpc,srt,100003,{v})")
        }
        ("nfs", Some(v), By::Operation) => {
            format!("NFSv{v} COMPOUND service response time by principal operation")
        }
        ("smb2", _, _) => "SMB2 service response time by command (tshark -z smb2,srt)".into(),
        ("iscsi", _, _) => "SCSI service response time by opcode (tshark -z scsi,srt,0)".into(),
        (p, _, _) => format!("{p} service response time"),
    }
}

/// Writes the report as text tables.
pub fn write_srt_text<W: Write>(out: &mut W, r: &SrtReport) -> io::Result<()> {
    if r.tables.is_empty() {
        writeln!(out, "No NFS, SMB2 or iSCSI transactions found.")?;
    }
    for t in &r.tables {
        writeln!(out, "{}", title(t))?;
        writeln!(
            out,
            "Index  {:<22} {:>6} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10}",
            "Operation", "Calls", "Min SRT", "Max SRT", "Avg SRT", "Sum SRT", "p50", "p95", "p99"
        )?;
        for row in &t.rows {
            writeln!(
                out,
                "{:5}  {:<22} {:>6} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10}",
                row.code,
                row.op,
                row.count,
                wireshark_time(row.min_ns),
                wireshark_time(row.max_ns),
                wireshark_mean(row.total_ns, row.count),
                wireshark_sum(row.total_ns),
                format!("{:.6}", row.p50_s),
                format!("{:.6}", row.p95_s),
                format!("{:.6}", row.p99_s),
            )?;
        }
        writeln!(out)?;
    }
    if !r.unanswered.is_empty() {
        writeln!(out, "Requests without a reply in the capture")?;
        for u in &r.unanswered {
            let v = u.version.map(|v| format!("v{v} ")).unwrap_or_default();
            writeln!(out, "  {} {v}{}: {}", u.protocol, u.op, u.count)?;
        }
        writeln!(out)?;
    }
    if !r.slowest.is_empty() {
        writeln!(out, "Slowest requests")?;
        writeln!(
            out,
            "{:>10}  {:<6} {:<24} {:>6} {:>9} {:>9} {:>12} {:>14} {:>10}",
            "SRT (s)",
            "proto",
            "operation",
            "stream",
            "req frame",
            "rep frame",
            "time (s)",
            "offset",
            "length"
        )?;
        for s in &r.slowest {
            writeln!(
                out,
                "{:>10.6}  {:<6} {:<24} {:>6} {:>9} {:>9} {:>12.6} {:>14} {:>10}",
                s.srt_s,
                s.protocol,
                s.op,
                s.stream,
                s.request_frame,
                s.reply_frame,
                s.time_s,
                s.offset.map(|o| o.to_string()).unwrap_or_default(),
                s.len.map(|o| o.to_string()).unwrap_or_default(),
            )?;
        }
        writeln!(out)?;
    }
    if !r.intervals.is_empty() {
        writeln!(
            out,
            "Over time ({} s intervals): SRT of the replies, requests and bytes in flight, throughput",
            r.interval_s
        )?;
        writeln!(
            out,
            "{:<6} {:>9} {:>7} {:>10} {:>10} {:>10} {:>10} {:>8} {:>6} {:>12} {:>11} {:>11} {:>8}",
            "proto",
            "start (s)",
            "replies",
            "p50",
            "p95",
            "p99",
            "max",
            "in-fl",
            "max",
            "bytes in-fl",
            "read MB/s",
            "write MB/s",
            "credits"
        )?;
        for i in &r.intervals {
            writeln!(
                out,
                "{:<6} {:>9.3} {:>7} {:>10.6} {:>10.6} {:>10.6} {:>10.6} {:>8.2} {:>6} {:>12.0} {:>11.2} {:>11.2} {:>8}",
                i.protocol,
                i.start_s,
                i.count,
                i.p50_s,
                i.p95_s,
                i.p99_s,
                i.max_s,
                i.outstanding_mean,
                i.outstanding_max,
                i.bytes_outstanding_mean,
                i.read_bytes as f64 / r.interval_s / 1e6,
                i.write_bytes as f64 / r.interval_s / 1e6,
                i.credits_min.map(|c| c.to_string()).unwrap_or_default(),
            )?;
        }
        writeln!(out)?;
    }
    if !r.connections.is_empty() {
        writeln!(out, "Per connection")?;
        writeln!(
            out,
            "{:>6} {:<6} {:>8} {:>10} {:>10} {:>9} {:>6} {:>12} {:>10} {:>12} {:>12}",
            "stream",
            "proto",
            "replies",
            "mean SRT",
            "active (s)",
            "in-fl",
            "max",
            "bytes in-fl",
            "I/O size",
            "read",
            "written"
        )?;
        for c in &r.connections {
            writeln!(
                out,
                "{:>6} {:<6} {:>8} {:>10.6} {:>10.3} {:>9.2} {:>6} {:>12.0} {:>10.0} {:>12} {:>12}",
                c.stream,
                c.protocol,
                c.transactions,
                c.srt_mean_s,
                c.active_s,
                c.outstanding_mean,
                c.outstanding_max,
                c.bytes_outstanding_mean,
                c.io_size_mean,
                c.read_bytes,
                c.write_bytes
            )?;
        }
        writeln!(out)?;
    }
    if !r.credits.is_empty() {
        writeln!(
            out,
            "SMB2 credits (balance = granted - charged, starting at 1)"
        )?;
        for c in &r.credits {
            writeln!(
                out,
                "  stream {}: min {} max {} last {}{}; charged {} requested {} granted {}; at zero {} times for {:.6} s",
                c.stream,
                c.min,
                c.max,
                c.last,
                if c.absolute {
                    ""
                } else {
                    " (relative: no Negotiate seen)"
                },
                c.charged,
                c.requested,
                c.granted,
                c.starved_episodes,
                c.starved_s
            )?;
        }
        writeln!(out)?;
    }
    let n = &r.notices;
    if n.smb3_encrypted > 0 {
        writeln!(
            out,
            "Encrypted SMB3: {} messages on streams {:?} cannot be read (no keys): their commands are not in the tables.",
            n.smb3_encrypted, n.smb3_encrypted_streams
        )?;
    }
    if n.smb3_compressed > 0 {
        writeln!(
            out,
            "Compressed SMB3: {} messages not decoded.",
            n.smb3_compressed
        )?;
    }
    if n.framing_lost > 0 {
        writeln!(
            out,
            "Message framing lost {} times (gaps in the capture or non-storage bytes); parsing resumed at the next message.",
            n.framing_lost
        )?;
    }
    Ok(())
}

/// Streams one CSV row per transaction (`tcpdx srt --transactions`), in reply order
/// (unanswered requests last). Columns: `stream,protocol,version,op,sub_op,id,
/// request_frame,request_time,reply_frame,reply_time,srt,status,kind,offset,length,
/// done_length,repaired,damaged` (times in seconds since the first frame).
pub struct TransactionsCsv<W: Write> {
    out: W,
    origin: i64,
    /// First write error (later rows are dropped).
    pub error: Option<io::Error>,
}

impl<W: Write> TransactionsCsv<W> {
    /// Writes the header line.
    pub fn new(mut out: W) -> io::Result<Self> {
        writeln!(
            out,
            "stream,protocol,version,op,sub_op,id,request_frame,request_time,reply_frame,reply_time,srt,status,kind,offset,length,done_length,repaired,damaged"
        )?;
        Ok(Self {
            out,
            origin: 0,
            error: None,
        })
    }

    /// The writer.
    pub fn into_inner(self) -> W {
        self.out
    }

    fn row(&mut self, t: &tcpdx_storage::Transaction) -> io::Result<()> {
        let opt = |v: Option<u64>| v.map(|x| x.to_string()).unwrap_or_default();
        let secs = |ns: i64| format!("{:.9}", ns as f64 / 1e9);
        let io = t.io;
        writeln!(
            self.out,
            "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
            t.stream,
            t.proto.name(),
            t.version.map(|v| v.to_string()).unwrap_or_default(),
            t.op,
            t.sub_op.unwrap_or(""),
            t.id,
            t.request.last.frame,
            secs(t.request.last.ts.0 - self.origin),
            opt(t.reply.map(|r| r.last.frame.0)),
            t.reply
                .map(|r| secs(r.last.ts.0 - self.origin))
                .unwrap_or_default(),
            t.srt_ns().map(secs).unwrap_or_default(),
            opt(t.status.map(u64::from)),
            io.map(|io| format!("{:?}", io.kind).to_lowercase())
                .unwrap_or_default(),
            opt(io.map(|io| io.offset)),
            opt(io.map(|io| io.len)),
            opt(io.and_then(|io| io.done_len)),
            u8::from(t.request.repaired || t.reply.is_some_and(|r| r.repaired)),
            u8::from(t.request.damaged || t.reply.is_some_and(|r| r.damaged)),
        )
    }
}

impl<W: Write> tcpdx_storage::StorageSink for TransactionsCsv<W> {
    fn start(&mut self, ts: tcpdx_wire::Timestamp) {
        self.origin = ts.0;
    }
    fn transaction(&mut self, t: &tcpdx_storage::Transaction) {
        if self.error.is_none()
            && let Err(e) = self.row(t)
        {
            self.error = Some(e);
        }
    }
}
