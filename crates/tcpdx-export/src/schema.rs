//! The exported tables' schemas: one definition per table, from which the writer builds the
//! Parquet schema and docs/parquet-format.md its column list (a test keeps them equal).

/// Version of the table layout, written into every file's key-value metadata as
/// `tcpdx.parquet_format_version`. Columns are only ever added; a removal or a change of
/// meaning bumps it.
pub const FORMAT_VERSION: u32 = 1;

/// A column's type (Parquet physical type and logical annotation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ty {
    /// 32-bit signed integer (`int32`).
    I32,
    /// 64-bit signed integer (`int64`).
    I64,
    /// 64-bit float (`double`).
    F64,
    /// Boolean.
    Bool,
    /// UTF-8 string (`binary (STRING)`).
    Str,
    /// Nanoseconds since the Unix epoch, UTC (`int64 (TIMESTAMP(NANOS,true))`).
    TimestampNs,
    /// A list of UTF-8 strings (3-level `LIST` of required elements; the list itself is
    /// required, possibly empty).
    StrList,
}

impl Ty {
    /// The type as the Parquet schema text of a field called `name`.
    fn schema(self, name: &str, nullable: bool) -> String {
        let rep = if nullable { "optional" } else { "required" };
        match self {
            Self::I32 => format!("{rep} int32 {name};"),
            Self::I64 => format!("{rep} int64 {name};"),
            Self::F64 => format!("{rep} double {name};"),
            Self::Bool => format!("{rep} boolean {name};"),
            Self::Str => format!("{rep} binary {name} (STRING);"),
            Self::TimestampNs => format!("{rep} int64 {name} (TIMESTAMP(NANOS,true));"),
            Self::StrList => format!(
                "required group {name} (LIST) {{ repeated group list {{ required binary element (STRING); }} }}"
            ),
        }
    }
    /// The type as DuckDB shows it, for the documentation.
    pub const fn duckdb(self) -> &'static str {
        match self {
            Self::I32 => "INTEGER",
            Self::I64 => "BIGINT",
            Self::F64 => "DOUBLE",
            Self::Bool => "BOOLEAN",
            Self::Str => "VARCHAR",
            Self::TimestampNs => "TIMESTAMPTZ_NS",
            Self::StrList => "VARCHAR[]",
        }
    }
}

/// One column.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Col {
    /// Column name.
    pub name: &'static str,
    /// Type.
    pub ty: Ty,
    /// May be null.
    pub nullable: bool,
    /// What it means.
    pub doc: &'static str,
    /// Values rarely repeat (frame numbers, times): written without a dictionary, which
    /// would only be built and thrown away.
    pub plain: bool,
}

impl Col {
    /// The column with [`Col::plain`] set.
    const fn plain(mut self) -> Col {
        self.plain = true;
        self
    }
}

const fn req(name: &'static str, ty: Ty, doc: &'static str) -> Col {
    Col {
        name,
        ty,
        nullable: false,
        doc,
        plain: false,
    }
}

const fn opt(name: &'static str, ty: Ty, doc: &'static str) -> Col {
    Col {
        name,
        ty,
        nullable: true,
        doc,
        plain: false,
    }
}

/// One table: a file `NAME.parquet` in the output directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TableDef {
    /// Table (and file) name.
    pub name: &'static str,
    /// What one row is.
    pub doc: &'static str,
    /// Columns in file order.
    pub cols: &'static [Col],
}

impl TableDef {
    /// The Parquet schema in the textual form `parse_message_type` reads.
    pub fn message_type(&self) -> String {
        let mut s = format!("message {} {{\n", self.name);
        for c in self.cols {
            s.push_str("  ");
            s.push_str(&c.ty.schema(c.name, c.nullable));
            s.push('\n');
        }
        s.push('}');
        s
    }
}

use Ty::{Bool, F64, I32, I64, Str, StrList, TimestampNs};

/// `segments`: the rows of `tcpdx events`, with the fields the CSV leaves out.
pub const SEGMENTS: TableDef = TableDef {
    name: "segments",
    doc: "One row per TCP segment, in frame order: the rows of `tcpdx events` (same filters, same values) plus the window, TCP flags and options.",
    cols: &[
        req("frame", I64, "Wireshark frame number (`frame.number`).").plain(),
        req("stream", I64, "Wireshark `tcp.stream`."),
        req(
            "time",
            F64,
            "Seconds since the first frame of the capture (`frame.time_relative`).",
        )
        .plain(),
        req("time_ns", I64, "`time` in integer nanoseconds.").plain(),
        req("ts", TimestampNs, "Capture timestamp (UTC).").plain(),
        req(
            "dir",
            Str,
            "`c2s` (sent by the client: the SYN sender, else the first sender seen) or `s2c`.",
        ),
        req("src", Str, "Source address."),
        req("sport", I32, "Source port."),
        req("dst", Str, "Destination address."),
        req("dport", I32, "Destination port."),
        req(
            "seq",
            I64,
            "Relative sequence number (`tcp.seq`), unwrapped past 2^32.",
        )
        .plain(),
        req(
            "ack",
            I64,
            "Relative acknowledgement number (`tcp.ack`) when ACK is set, else the raw field.",
        )
        .plain(),
        req("len", I64, "Payload length (`tcp.len`)."),
        req(
            "tcp_flags",
            I32,
            "TCP header flags as a bit set (`tcp.flags`: FIN 1, SYN 2, RST 4, PSH 8, ACK 16, URG 32, ECE 64, CWR 128).",
        ),
        req(
            "window_raw",
            I32,
            "Window field as sent (`tcp.window_size_value`).",
        ),
        req(
            "window",
            I64,
            "Window in bytes after scaling (`tcp.window_size`).",
        ),
        req(
            "flags",
            Str,
            "`tcp.analysis.*` flags, `|`-joined, empty when none (as in the events CSV).",
        ),
        opt(
            "dup_ack_num",
            I64,
            "`tcp.analysis.duplicate_ack_num` of a duplicate ACK.",
        ),
        opt("bytes_in_flight", I64, "`tcp.analysis.bytes_in_flight`.").plain(),
        opt("ack_rtt", F64, "`tcp.analysis.ack_rtt`, seconds.").plain(),
        opt(
            "acks_frame",
            I64,
            "`tcp.analysis.acks_frame`: the frame this segment acknowledges.",
        )
        .plain(),
        opt("mss", I32, "MSS option (SYNs)."),
        opt(
            "window_scale",
            I32,
            "Window scale option shift count (SYNs).",
        ),
        req(
            "sack_permitted",
            Bool,
            "SACK-permitted option present (SYNs).",
        ),
        req("sack_blocks", I32, "Number of SACK blocks in the segment."),
        opt("tsval", I64, "Timestamps option TSval.").plain(),
        opt("tsecr", I64, "Timestamps option TSecr.").plain(),
    ],
};

/// `flows`: the connections of `tcpdx flows --json`, one row per direction.
pub const FLOWS: TableDef = TableDef {
    name: "flows",
    doc: "One row per connection and direction (`c2s` then `s2c`, both always present): the `flows` entries of `tcpdx flows --json` with their `directions` flattened. Connections evicted by `--max-flows` are not listed (as in `tcpdx flows`).",
    cols: &[
        req("stream", I64, "Wireshark `tcp.stream`."),
        req("dir", Str, "`c2s` or `s2c`."),
        req("src", Str, "Sender address of this direction."),
        req("sport", I32, "Sender port."),
        req("dst", Str, "Receiver address."),
        req("dport", I32, "Receiver port."),
        req(
            "first_time",
            F64,
            "Connection's first packet, seconds since the first frame of the capture.",
        ),
        req(
            "conn_duration_s",
            F64,
            "Connection's duration, first to last packet, seconds.",
        ),
        req("saw_syn", Bool, "The handshake was seen."),
        req("packets", I64, "Packets sent in this direction."),
        req("bytes", I64, "Payload bytes sent."),
        req("unique_bytes", I64, "Distinct payload bytes."),
        req("retrans_bytes", I64, "Retransmitted payload bytes."),
        req("retrans_packets", I64, "Retransmitted segments."),
        req(
            "goodput_bps",
            F64,
            "Unique bytes per second of connection duration, bits/s.",
        ),
        req(
            "duration_s",
            F64,
            "This direction's first to last packet, seconds.",
        ),
        opt("rtt_min_s", F64, "ACK RTT minimum (Karn's rule), seconds."),
        opt("rtt_median_s", F64, "ACK RTT median, seconds."),
        opt("rtt_p95_s", F64, "ACK RTT 95th percentile, seconds."),
        opt("rtt_max_s", F64, "ACK RTT maximum, seconds."),
        req("rtt_samples", I64, "RTT samples."),
        opt("mss", I32, "MSS option of this sender's SYN."),
        opt(
            "window_scale",
            I32,
            "Window scale option of this sender's SYN.",
        ),
        req("sack_permitted", Bool, "SACK permitted by this sender."),
        req(
            "max_window",
            I64,
            "Largest window this sender advertised, bytes.",
        ),
        req("zero_window_count", I64, "Zero-window advertisements."),
        req(
            "zero_window_s",
            F64,
            "Time spent advertising a zero window, seconds.",
        ),
    ],
};

/// `transactions`: storage request/reply pairs, the rows of `tcpdx srt --transactions`.
pub const TRANSACTIONS: TableDef = TableDef {
    name: "transactions",
    doc: "One row per NFS, SMB2 or iSCSI request, in reply order (unanswered requests last): the rows of `tcpdx srt --transactions`. Connections are recognised by the default ports (2049 NFS, 445/139 SMB2, 3260 iSCSI) and `--decode-as`.",
    cols: &[
        req("stream", I64, "Wireshark `tcp.stream`."),
        req("protocol", Str, "`nfs`, `smb2` or `iscsi`."),
        opt(
            "version",
            I32,
            "NFS version (2, 3, 4); null for SMB2 and iSCSI.",
        ),
        req(
            "op",
            Str,
            "Procedure, command or SCSI opcode name, as Wireshark names it.",
        ),
        req(
            "op_code",
            I32,
            "Its number (NFS procedure, SMB2 command, SCSI opcode).",
        ),
        opt("sub_op", Str, "NFSv4: the COMPOUND's principal operation."),
        req(
            "id",
            I64,
            "RPC XID, SMB2 MessageId or iSCSI Initiator Task Tag (as a signed 64-bit bit pattern).",
        )
        .plain(),
        req(
            "request_dir",
            Str,
            "Direction the request travelled in, `c2s` or `s2c`.",
        ),
        req(
            "request_first_frame",
            I64,
            "Frame holding the request's first byte.",
        )
        .plain(),
        req(
            "request_frame",
            I64,
            "Frame completing the request (Wireshark's frame for it).",
        )
        .plain(),
        req(
            "request_time",
            F64,
            "Time of `request_frame`, seconds since the first frame.",
        )
        .plain(),
        req("request_bytes", I64, "Request message length, bytes."),
        opt(
            "reply_frame",
            I64,
            "Frame completing the reply; null when unanswered.",
        )
        .plain(),
        opt(
            "reply_time",
            F64,
            "Time of `reply_frame`, seconds since the first frame.",
        )
        .plain(),
        opt("reply_bytes", I64, "Reply message length, bytes."),
        opt(
            "srt",
            F64,
            "Service response time, `request_frame` to `reply_frame`, seconds.",
        )
        .plain(),
        opt(
            "status",
            I64,
            "Reply status (NFS status, NT status, SCSI status).",
        ),
        opt(
            "kind",
            Str,
            "`read`, `write` or `commit` for data operations.",
        ),
        opt("offset", I64, "Data offset in bytes (SCSI: the LBA).").plain(),
        opt("length", I64, "Requested length in bytes."),
        opt(
            "done_length",
            I64,
            "Bytes the reply says were read or written.",
        ),
        req(
            "repaired",
            Bool,
            "Some bytes arrived out of order (see docs/wireshark-differences.md).",
        ),
        req(
            "damaged",
            Bool,
            "A capture gap fell inside the request or reply.",
        ),
    ],
};

/// `findings`: the findings of `tcpdx diagnose --json`.
pub const FINDINGS: TableDef = TableDef {
    name: "findings",
    doc: "One row per finding of `tcpdx diagnose --json`, in the same order (most costly first).",
    cols: &[
        req(
            "finding_id",
            I64,
            "Position in `diagnose --json` `findings`, from 0; the key of `evidence` and `episodes`.",
        ),
        req(
            "kind",
            Str,
            "Catalogue kind (`rto-stall`, `network-loss`, ...).",
        ),
        req("severity", Str, "`info`, `minor`, `major` or `critical`."),
        opt(
            "stream",
            I64,
            "`tcp.stream`; null for capture-wide findings.",
        ),
        req("episodes", I64, "Number of episodes."),
        req("cost_seconds", F64, "Seconds lost."),
        req(
            "cost_share",
            F64,
            "`cost_seconds` as a share of the connection's lifetime (of the capture for capture-wide findings).",
        ),
        opt(
            "goodput_without_bps",
            F64,
            "Projected goodput without this pathology, bits/s.",
        ),
        req("confidence", F64, "Confidence, 0..1."),
        req(
            "wireshark_filter",
            Str,
            "Display filter showing the evidence.",
        ),
        req("explanation", Str, "What happened."),
        req(
            "recommendations",
            StrList,
            "What to change, most effective first.",
        ),
    ],
};

/// `evidence`: the evidence frames of the findings.
pub const EVIDENCE: TableDef = TableDef {
    name: "evidence",
    doc: "One row per evidence frame of a finding (at most 100 per finding, as in the JSON).",
    cols: &[
        req("finding_id", I64, "The finding (`findings.finding_id`)."),
        req("frame", I64, "Wireshark frame number."),
        req(
            "role",
            Str,
            "What the frame shows (`fast retransmission`, `delayed ACK`, ...).",
        ),
    ],
};

/// `episodes`: the listed episodes of the findings.
pub const EPISODES: TableDef = TableDef {
    name: "episodes",
    doc: "One row per listed episode of a finding (at most 50 per finding; `findings.episodes` is the full count).",
    cols: &[
        req("finding_id", I64, "The finding (`findings.finding_id`)."),
        req("start_s", F64, "Start, seconds since the first frame."),
        req("duration_s", F64, "Length, seconds."),
    ],
};

/// `time_budget`: each connection's lifetime divided among states.
pub const TIME_BUDGET: TableDef = TableDef {
    name: "time_budget",
    doc: "One row per diagnosed connection and state (all 8 states, zeros included), the `connections` of `diagnose --json` `time_budget`; a connection's `seconds` add up to its `connection_seconds`. The capture's budget is the sum over connections.",
    cols: &[
        req("stream", I64, "`tcp.stream`."),
        req(
            "connection_seconds",
            F64,
            "The connection's lifetime (first to last segment), seconds.",
        ),
        req(
            "state",
            Str,
            "`retransmission_timeout`, `delayed_ack_stall`, `zero_window`, `loss_recovery`, `server_think_time`, `application_idle`, `receiver_window_limited` or `sending`.",
        ),
        req("seconds", F64, "Seconds in this state."),
        req(
            "share",
            F64,
            "`seconds / connection_seconds` (0 for a connection of zero length).",
        ),
    ],
};

/// `rounds`: each sender's round trips and what limited each.
pub const ROUNDS: TableDef = TableDef {
    name: "rounds",
    doc: "One row per round trip of each direction's sender (one window of data from its first transmission to its ACK; after a retransmission timeout each retransmission round is its own), with what limited it. From a file only (a second pass over it); empty when the capture is read from standard input.",
    cols: &[
        req("stream", I64, "`tcp.stream`."),
        req(
            "direction",
            Str,
            "The data's direction: `client_to_server` or `server_to_client`.",
        ),
        req(
            "start_s",
            F64,
            "Start (the round's first segment), seconds since the first frame.",
        ),
        req(
            "end_s",
            F64,
            "End (the ACK of its first data), seconds since the first frame.",
        ),
        req(
            "segments",
            I64,
            "Data segments sent in the round, retransmissions included.",
        ),
        req("retransmissions", I64, "Retransmitted segments."),
        req(
            "flight_bytes",
            I64,
            "Bytes in flight: the largest seen at the sender, or from the receiver's side or the middle the data arriving per round trip (`vantage`).",
        ),
        req(
            "delivered_bytes",
            I64,
            "Bytes newly acknowledged in the round.",
        ),
        opt(
            "cwnd_est",
            F64,
            "The sender's congestion window, segments, where the round shows it (rounds limited by it, recovery and timeout rounds); null where the flight was held below it.",
        ),
        req(
            "limit",
            Str,
            "What held the sender back: `cwnd`, `receiver_window` (flight at the advertised window), `sender` (below both: send buffer or application), `pacing`, `recovery` or `timeout`.",
        ),
        req(
            "vantage",
            Str,
            "Where the estimate comes from: `sender` (the capture is next to the data's sender: the flight as it leaves) or `receiver` (next to the receiver or in the middle: the data arriving per round trip, within about a half in the lab).",
        ),
    ],
};

/// Every table, in the order they are documented.
pub const TABLES: [&TableDef; 8] = [
    &SEGMENTS,
    &FLOWS,
    &TRANSACTIONS,
    &FINDINGS,
    &EVIDENCE,
    &EPISODES,
    &TIME_BUDGET,
    &ROUNDS,
];

/// The column reference of docs/parquet-format.md (generated; a test compares).
pub fn markdown() -> String {
    let mut s = String::new();
    for t in TABLES {
        s.push_str(&format!("### `{}.parquet`\n\n{}\n\n", t.name, t.doc));
        s.push_str("| column | type | null | meaning |\n|---|---|---|---|\n");
        for c in t.cols {
            let null = if c.nullable { "yes" } else { "" };
            s.push_str(&format!(
                "| `{}` | {} | {} | {} |\n",
                c.name,
                c.ty.duckdb(),
                null,
                c.doc.replace('|', "\\|")
            ));
        }
        s.push('\n');
    }
    s.truncate(s.trim_end().len());
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_schema_parses() {
        for t in TABLES {
            let ty = parquet::schema::parser::parse_message_type(&t.message_type())
                .unwrap_or_else(|e| panic!("{}: {e}", t.name));
            assert_eq!(ty.get_fields().len(), t.cols.len(), "{}", t.name);
        }
    }

    #[test]
    fn column_names_are_unique_per_table() {
        for t in TABLES {
            let mut names: Vec<&str> = t.cols.iter().map(|c| c.name).collect();
            names.sort_unstable();
            names.dedup();
            assert_eq!(names.len(), t.cols.len(), "{}", t.name);
        }
    }

    #[test]
    fn docs_list_every_column() {
        let doc = include_str!("../../../docs/parquet-format.md");
        let want = markdown();
        assert!(
            doc.contains(&want),
            "docs/parquet-format.md is out of date; its column reference must read:\n{want}"
        );
    }
}
