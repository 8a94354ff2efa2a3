//! `tcpdx events`: one row per TCP segment, CSV or JSON lines.
//!
//! CSV columns (stable, DESIGN.md): `frame,stream,time,src,sport,dst,dport,seq,ack,len,
//! flags,dup_ack_num,bytes_in_flight,ack_rtt`. `time` and `ack_rtt` are seconds with 9
//! decimals; empty fields mean "not applicable", as in tshark's field output.

use std::io::{self, Write};
use std::net::IpAddr;

use serde::Serialize;
use tcpdx_core::{EventSink, SegmentAnalysis};

use crate::line::{Line, ROW_CAP, Row, ipv4_text};

/// Rows are gathered into batches of at least this many bytes before they are written:
/// one large write instead of a small copy per row (a `BufWriter` of this capacity or less
/// passes such a write straight through).
const BATCH: usize = 1 << 16;

/// The CSV header line.
pub const CSV_HEADER: &str =
    "frame,stream,time,src,sport,dst,dport,seq,ack,len,flags,dup_ack_num,bytes_in_flight,ack_rtt";

/// Streams segment rows as CSV. Write errors are kept and reported by `finish`.
pub struct EventsCsv<W: Write> {
    out: W,
    err: Option<io::Error>,
    tail: CsvTail,
    line: Line,
}

/// Formatted IPv6 addresses of the last few endpoints: `Ipv6Addr`'s `Display` is slow and
/// a capture repeats the same few addresses on every row (IPv4 is formatted directly, or
/// copied from a direct-mapped table of formatted addresses on the fast path).
#[derive(Default)]
struct AddrCache {
    slots: [(Option<IpAddr>, Vec<u8>); 8],
    next: usize,
    v4: V4Texts,
}

/// Formatted IPv4 addresses, direct-mapped by the address's low bits: one compare and a
/// fixed 16-byte copy instead of four table lookups per address.
struct V4Texts {
    slots: Box<[(u32, [u8; 16], u8); V4_SLOTS]>,
}

const V4_SLOTS: usize = 1024;

impl Default for V4Texts {
    fn default() -> Self {
        // Key 0 with length 0 marks an empty slot (0.0.0.0 is formatted on a miss anyway).
        Self {
            slots: Box::new([(0, [0; 16], 0); V4_SLOTS]),
        }
    }
}

impl V4Texts {
    #[inline]
    fn put(&mut self, row: &mut Row<'_>, a: std::net::Ipv4Addr) {
        let k = u32::from(a);
        let h = (k ^ (k >> 10) ^ (k >> 20)) as usize % V4_SLOTS;
        let slot = &mut self.slots[h];
        if slot.0 != k || slot.2 == 0 {
            // Formatted in place: a miss on every row (more addresses than slots) must not
            // cost an allocation.
            slot.2 = ipv4_text(a, &mut slot.1) as u8;
            slot.0 = k;
        }
        row.bytes16(&slot.1, usize::from(slot.2));
    }
}

impl AddrCache {
    /// Appends `a` to `line`: IPv4 directly, IPv6 from the cache (no allocation on a hit).
    fn put(&mut self, line: &mut Line, a: IpAddr) {
        if let IpAddr::V4(v4) = a {
            return line.ipv4(v4);
        }
        let i = self.slot(a);
        line.bytes(&self.slots[i].1);
    }

    /// [`AddrCache::put`] into a [`Row`].
    /// By reference: a copy of the 17-byte `IpAddr` was one 16-byte load of the row's
    /// narrow stores, which the CPU cannot forward (a tenth of the row's formatting).
    // Always inlined, as is `Row::secs`: twice a row, and `#[inline]` left both out of line.
    #[inline(always)]
    fn put_row(&mut self, row: &mut Row<'_>, a: &IpAddr) {
        match a {
            IpAddr::V4(v4) => self.v4.put(row, *v4),
            IpAddr::V6(_) => {
                let i = self.slot(*a);
                row.bytes(&self.slots[i].1);
            }
        }
    }

    /// The slot holding `a`'s text, formatting it on a miss.
    fn slot(&mut self, a: IpAddr) -> usize {
        match self.slots.iter().position(|(k, _)| *k == Some(a)) {
            Some(i) => i,
            None => {
                let i = self.next;
                self.next = (self.next + 1) % self.slots.len();
                self.slots[i] = (Some(a), a.to_string().into_bytes());
                i
            }
        }
    }
}

/// Formats the part of a CSV row after `frame,stream,` (from `time` to the newline), so
/// parallel workers can format rows before the final stream index is known.
#[derive(Default)]
pub struct CsvTail {
    v6: AddrCache,
}

impl CsvTail {
    /// Appends the row tail of `a` (ending with a newline) to `line`.
    pub fn format(&mut self, line: &mut Line, a: &SegmentAnalysis) {
        if !line.row(|r| self.row(r, a)) {
            self.format_checked(line, a);
        }
    }

    /// The row tail through a fixed window (the fast path).
    #[inline]
    fn row(&mut self, r: &mut Row<'_>, a: &SegmentAnalysis) {
        r.secs(a.rel_time_ns);
        r.byte(b',');
        self.v6.put_row(r, &a.src);
        r.byte(b',');
        r.u64(a.sport.into());
        r.byte(b',');
        self.v6.put_row(r, &a.dst);
        r.byte(b',');
        r.u64(a.dport.into());
        r.byte(b',');
        r.u64(a.seq);
        r.byte(b',');
        r.u64(a.ack);
        r.byte(b',');
        r.u64(a.len.into());
        r.byte(b',');
        if !a.flags.is_empty() {
            for (i, name) in a.flags.names().enumerate() {
                if i > 0 {
                    r.byte(b'|');
                }
                r.bytes(name.as_bytes());
            }
        }
        r.byte(b',');
        if let Some(n) = a.dup_ack_num {
            r.u64(n.into());
        }
        r.byte(b',');
        if let Some(n) = a.bytes_in_flight {
            r.u64(n.into());
        }
        r.byte(b',');
        if let Some(ns) = a.ack_rtt_ns {
            r.secs(ns);
        }
        r.byte(b'\n');
    }

    /// The row tail with a capacity check per field (rows longer than a window).
    fn format_checked(&mut self, line: &mut Line, a: &SegmentAnalysis) {
        line.secs(a.rel_time_ns);
        line.byte(b',');
        self.v6.put(line, a.src);
        line.byte(b',');
        line.u64(a.sport.into());
        line.byte(b',');
        self.v6.put(line, a.dst);
        line.byte(b',');
        line.u64(a.dport.into());
        line.byte(b',');
        line.u64(a.seq);
        line.byte(b',');
        line.u64(a.ack);
        line.byte(b',');
        line.u64(a.len.into());
        line.byte(b',');
        if !a.flags.is_empty() {
            for (i, name) in a.flags.names().enumerate() {
                if i > 0 {
                    line.byte(b'|');
                }
                line.bytes(name.as_bytes());
            }
        }
        line.byte(b',');
        if let Some(n) = a.dup_ack_num {
            line.u64(n.into());
        }
        line.byte(b',');
        if let Some(n) = a.bytes_in_flight {
            line.u64(n.into());
        }
        line.byte(b',');
        if let Some(ns) = a.ack_rtt_ns {
            line.secs(ns);
        }
        line.byte(b'\n');
    }
}

/// Appends the first two CSV columns, `frame,stream,`.
pub fn csv_head(line: &mut Line, frame: u64, stream: u32) {
    line.u64(frame);
    line.byte(b',');
    line.u64(stream.into());
    line.byte(b',');
}

impl<W: Write> EventsCsv<W> {
    /// Writes the header and returns the sink.
    pub fn new(mut out: W) -> io::Result<Self> {
        writeln!(out, "{CSV_HEADER}")?;
        Ok(Self {
            out,
            err: None,
            tail: CsvTail::default(),
            line: Line::with_capacity(BATCH + ROW_CAP),
        })
    }
    /// Flushes; returns the first write error, if any.
    pub fn finish(mut self) -> io::Result<()> {
        self.write_batch();
        if let Some(e) = self.err.take() {
            return Err(e);
        }
        self.out.flush()
    }
    /// Writes the rows gathered so far.
    fn write_batch(&mut self) {
        if self.err.is_none()
            && !self.line.is_empty()
            && let Err(e) = self.out.write_all(self.line.as_bytes())
        {
            self.err = Some(e);
        }
        self.line.clear();
    }
    /// Writes the batch once it is large enough (a row always fits in what is left).
    fn row_done(&mut self) {
        if self.line.len() >= BATCH {
            self.write_batch();
        }
    }
    /// True once a write failed (e.g. a closed pipe): the caller may stop early.
    pub fn failed(&self) -> bool {
        self.err.is_some()
    }
    /// Writes a row whose tail was formatted elsewhere (by `CsvTail`).
    pub fn write_row(&mut self, frame: u64, stream: u32, tail: &[u8]) {
        if self.err.is_some() {
            return;
        }
        // The head through the unchecked row window when there is room (the merging
        // thread's share of a parallel `events` run), the tail copied whole.
        let fast = self.line.row(|r| {
            r.u64(frame);
            r.byte(b',');
            r.u64(stream.into());
            r.byte(b',');
        });
        if !fast {
            csv_head(&mut self.line, frame, stream);
        }
        self.line.bytes(tail);
        self.row_done();
    }
}

impl<W: Write> EventSink for EventsCsv<W> {
    /// Rows only: flows are not written.
    fn needs_flow_stats(&self) -> bool {
        false
    }
    fn needs_flows(&self) -> bool {
        false
    }
    fn segment(&mut self, a: &SegmentAnalysis) {
        if self.err.is_some() {
            return;
        }
        let tail = &mut self.tail;
        let fast = self.line.row(|r| {
            r.u64(a.frame.0);
            r.byte(b',');
            r.u64(a.stream.0.into());
            r.byte(b',');
            tail.row(r, a);
        });
        if !fast {
            csv_head(&mut self.line, a.frame.0, a.stream.0);
            self.tail.format_checked(&mut self.line, a);
        }
        self.row_done();
    }
}

#[derive(Serialize)]
struct JsonRow<'a> {
    frame: u64,
    stream: u32,
    time: f64,
    src: String,
    sport: u16,
    dst: String,
    dport: u16,
    seq: u64,
    ack: u64,
    len: u32,
    flags: Vec<&'a str>,
    dup_ack_num: Option<u32>,
    bytes_in_flight: Option<u32>,
    ack_rtt: Option<f64>,
}

/// Streams segment rows as JSON lines (one object per segment, same fields as the CSV,
/// `flags` as an array, absent values as null).
pub struct EventsJsonl<W: Write> {
    out: W,
    err: Option<io::Error>,
}

impl<W: Write> EventsJsonl<W> {
    /// A new sink.
    pub fn new(out: W) -> Self {
        Self { out, err: None }
    }
    /// Flushes; returns the first write error, if any.
    pub fn finish(mut self) -> io::Result<()> {
        if let Some(e) = self.err.take() {
            return Err(e);
        }
        self.out.flush()
    }
    /// True once a write failed.
    pub fn failed(&self) -> bool {
        self.err.is_some()
    }
}

impl<W: Write> EventSink for EventsJsonl<W> {
    /// Rows only: flows are not written.
    fn needs_flow_stats(&self) -> bool {
        false
    }
    fn needs_flows(&self) -> bool {
        false
    }
    fn segment(&mut self, a: &SegmentAnalysis) {
        if self.err.is_some() {
            return;
        }
        let row = JsonRow {
            frame: a.frame.0,
            stream: a.stream.0,
            time: a.rel_time_ns as f64 / 1e9,
            src: a.src.to_string(),
            sport: a.sport,
            dst: a.dst.to_string(),
            dport: a.dport,
            seq: a.seq,
            ack: a.ack,
            len: a.len,
            flags: a.flags.names().collect(),
            dup_ack_num: a.dup_ack_num,
            bytes_in_flight: a.bytes_in_flight,
            ack_rtt: a.ack_rtt_ns.map(|n| n as f64 / 1e9),
        };
        let r = serde_json::to_writer(&mut self.out, &row)
            .map_err(io::Error::from)
            .and_then(|_| self.out.write_all(b"\n"));
        if let Err(e) = r {
            self.err = Some(e);
        }
    }
}
