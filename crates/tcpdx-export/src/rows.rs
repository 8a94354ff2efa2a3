//! Domain values to table rows: one function per table, cells in the column order of
//! [`crate::schema`].

use std::net::IpAddr;

use tcpdx_core::{Dir, DirSummary, FlowSummary, SegmentAnalysis, SegmentDetail};
use tcpdx_detect::{Finding, State, TimeBudget};
use tcpdx_storage::Transaction;

use crate::table::{Cell, RowSink, TableError};

/// `c2s` / `s2c`, as in `tcpdx flows --json`.
pub fn dir_name(d: Dir) -> &'static str {
    match d {
        Dir::ClientToServer => "c2s",
        Dir::ServerToClient => "s2c",
    }
}

/// u64 counters as Parquet int64 (saturating: no capture comes near 2^63).
fn i(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

fn secs(ns: i64) -> f64 {
    ns as f64 / 1e9
}

/// Formatted addresses of the last few endpoints: a capture repeats the same few
/// addresses on every row, and `IpAddr`'s `Display` allocates.
#[derive(Default)]
pub struct AddrCache {
    slots: [(Option<IpAddr>, String); 8],
    next: usize,
}

impl AddrCache {
    /// The slot holding `a` formatted.
    fn slot(&mut self, a: IpAddr) -> usize {
        if let Some(i) = self.slots.iter().position(|(k, _)| *k == Some(a)) {
            return i;
        }
        let i = self.next;
        self.next = (self.next + 1) % self.slots.len();
        self.slots[i] = (Some(a), a.to_string());
        i
    }
}

/// Writes `segments` rows.
pub struct SegmentRows<T: RowSink> {
    /// The table.
    pub table: T,
    addrs: AddrCache,
    flags: String,
}

impl<T: RowSink> SegmentRows<T> {
    /// Rows into `table`.
    pub fn new(table: T) -> Self {
        Self {
            table,
            addrs: AddrCache::default(),
            flags: String::new(),
        }
    }

    /// One segment's row.
    pub fn row(&mut self, a: &SegmentAnalysis, d: &SegmentDetail) -> Result<(), TableError> {
        self.flags.clear();
        for (k, name) in a.flags.names().enumerate() {
            if k > 0 {
                self.flags.push('|');
            }
            self.flags.push_str(name);
        }
        let (s, t) = (self.addrs.slot(a.src), self.addrs.slot(a.dst));
        let cells = [
            i(a.frame.0).into(),
            i64::from(a.stream.0).into(),
            secs(a.rel_time_ns).into(),
            a.rel_time_ns.into(),
            a.ts.0.into(),
            dir_name(a.dir).into(),
            self.addrs.slots[s].1.as_str().into(),
            i32::from(a.sport).into(),
            self.addrs.slots[t].1.as_str().into(),
            i32::from(a.dport).into(),
            i(a.seq).into(),
            i(a.ack).into(),
            i64::from(a.len).into(),
            i32::from(a.tcp_flags).into(),
            i32::from(a.window_raw).into(),
            i(a.window).into(),
            self.flags.as_str().into(),
            a.dup_ack_num.map(i64::from).into(),
            a.bytes_in_flight.map(i64::from).into(),
            a.ack_rtt_ns.map(secs).into(),
            a.acks_frame.map(|f| i(f.0)).into(),
            d.mss.map(i32::from).into(),
            d.window_scale.map(i32::from).into(),
            d.sack_permitted.into(),
            i32::from(d.sack_count).into(),
            d.timestamps.map(|t| i64::from(t.0)).into(),
            d.timestamps.map(|t| i64::from(t.1)).into(),
        ];
        self.table.row(&cells)
    }
}

/// One connection's two `flows` rows; `origin_ns` is the capture's first frame.
pub fn flow_rows<T: RowSink>(t: &mut T, f: &FlowSummary, origin_ns: i64) -> Result<(), TableError> {
    for (d, dir) in f
        .dirs
        .iter()
        .zip([Dir::ClientToServer, Dir::ServerToClient])
    {
        flow_row(t, f, d, dir, origin_ns)?;
    }
    Ok(())
}

fn flow_row<T: RowSink>(
    t: &mut T,
    f: &FlowSummary,
    d: &DirSummary,
    dir: Dir,
    origin_ns: i64,
) -> Result<(), TableError> {
    let (src, dst) = (d.src.addr.to_string(), d.dst.addr.to_string());
    let rtt = |g: fn(&tcpdx_core::RttSummary) -> i64| d.rtt.as_ref().map(|r| secs(g(r)));
    t.row(&[
        i64::from(f.stream.0).into(),
        dir_name(dir).into(),
        src.as_str().into(),
        i32::from(d.src.port).into(),
        dst.as_str().into(),
        i32::from(d.dst.port).into(),
        secs(f.first_ts.0 - origin_ns).into(),
        f.duration_s.into(),
        f.saw_syn.into(),
        i(d.packets).into(),
        i(d.bytes).into(),
        i(d.unique_bytes).into(),
        i(d.retrans_bytes).into(),
        i(d.retrans_packets).into(),
        d.goodput_bps.into(),
        d.duration_s.into(),
        rtt(|r| r.min_ns).into(),
        rtt(|r| r.median_ns).into(),
        rtt(|r| r.p95_ns).into(),
        rtt(|r| r.max_ns).into(),
        i(d.rtt.map_or(0, |r| r.count)).into(),
        d.mss.map(i32::from).into(),
        d.window_scale.map(i32::from).into(),
        d.sack_permitted.into(),
        i(d.max_window).into(),
        i(d.zero_window_count).into(),
        d.zero_window_s.into(),
    ])
}

/// One `transactions` row; `origin_ns` is the capture's first frame.
pub fn transaction_row<T: RowSink>(
    t: &mut T,
    x: &Transaction,
    origin_ns: i64,
) -> Result<(), TableError> {
    let rel = |ns: i64| secs(ns - origin_ns);
    let kind = x.io.map(|io| match io.kind {
        tcpdx_storage::IoKind::Read => "read",
        tcpdx_storage::IoKind::Write => "write",
        tcpdx_storage::IoKind::Commit => "commit",
    });
    t.row(&[
        i64::from(x.stream.0).into(),
        x.proto.name().into(),
        x.version.map(i32::from).into(),
        x.op.into(),
        i32::from(x.op_code).into(),
        x.sub_op.into(),
        // Bit pattern: SMB2 MessageIds use all 64 bits in principle.
        Cell::I64(x.id as i64),
        dir_name(x.request_dir).into(),
        i(x.request.first.frame.0).into(),
        i(x.request.last.frame.0).into(),
        rel(x.request.last.ts.0).into(),
        i(x.request.bytes).into(),
        x.reply.map(|r| i(r.last.frame.0)).into(),
        x.reply.map(|r| rel(r.last.ts.0)).into(),
        x.reply.map(|r| i(r.bytes)).into(),
        x.srt_ns().map(secs).into(),
        x.status.map(i64::from).into(),
        kind.into(),
        x.io.map(|io| i(io.offset)).into(),
        x.io.map(|io| i(io.len)).into(),
        x.io.and_then(|io| io.done_len).map(i).into(),
        (x.request.repaired || x.reply.is_some_and(|r| r.repaired)).into(),
        (x.request.damaged || x.reply.is_some_and(|r| r.damaged)).into(),
    ])
}

/// The `findings`, `evidence` and `episodes` rows of one finding.
pub fn finding_rows<T: RowSink>(
    tables: [&mut T; 3],
    id: i64,
    f: &Finding,
) -> Result<(), TableError> {
    let [findings, evidence, episodes] = tables;
    findings.row(&[
        id.into(),
        f.kind.as_str().into(),
        f.severity.as_str().into(),
        f.stream.map(i64::from).into(),
        i64::from(f.episodes).into(),
        f.cost.seconds.into(),
        f.cost.share.into(),
        f.cost.goodput_without_bps.into(),
        f.confidence.into(),
        f.wireshark_filter.as_str().into(),
        f.explanation.as_str().into(),
        Cell::Strs(&f.recommendations),
    ])?;
    for e in &f.evidence {
        evidence.row(&[id.into(), i(e.frame).into(), e.role.as_ref().into()])?;
    }
    for e in &f.episode_list {
        episodes.row(&[id.into(), e.start_s.into(), e.duration_s.into()])?;
    }
    Ok(())
}

/// The `time_budget` rows: every connection, every state.
pub fn budget_rows<T: RowSink>(t: &mut T, b: &TimeBudget) -> Result<(), TableError> {
    for c in &b.connections {
        for s in State::ALL {
            let secs = c.states.get(s);
            let share = if c.seconds > 0.0 {
                secs / c.seconds
            } else {
                0.0
            };
            t.row(&[
                i64::from(c.stream).into(),
                c.seconds.into(),
                s.as_str().into(),
                secs.into(),
                share.into(),
            ])?;
        }
    }
    Ok(())
}

/// One round of a sender (`rounds.parquet`).
pub fn round_row<T: RowSink>(
    t: &mut T,
    r: &tcpdx_detect::infer::limit::RoundRow,
) -> Result<(), TableError> {
    let direction = match r.direction {
        Dir::ClientToServer => "client_to_server",
        Dir::ServerToClient => "server_to_client",
    };
    let vantage = match r.vantage {
        tcpdx_detect::infer::limit::Vantage::Sender => "sender",
        tcpdx_detect::infer::limit::Vantage::Receiver => "receiver",
    };
    t.row(&[
        i64::from(r.stream).into(),
        Cell::Str(direction),
        r.start_s.into(),
        r.end_s.into(),
        i64::from(r.segments).into(),
        i64::from(r.retransmissions).into(),
        (r.flight_bytes as i64).into(),
        (r.delivered_bytes as i64).into(),
        r.cwnd_est.map_or(Cell::Null, Cell::F64),
        Cell::Str(r.limit.as_str()),
        Cell::Str(vantage),
    ])
}
