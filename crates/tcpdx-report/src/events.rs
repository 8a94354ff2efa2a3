//! `tcpdx events`: one row per TCP segment, CSV or JSON lines.
//!
//! CSV columns (stable, DESIGN.md): `frame,stream,time,src,sport,dst,dport,seq,ack,len,
//! flags,dup_ack_num,bytes_in_flight,ack_rtt`. `time` and `ack_rtt` are seconds with 9
//! decimals; empty fields mean "not applicable", as in tshark's field output.

use std::io::{self, Write};
use std::net::IpAddr;

use serde::Serialize;
use tcpdx_core::{EventSink, SegmentAnalysis};

use crate::fmt::{push_num, push_secs};

/// The CSV header line.
pub const CSV_HEADER: &str =
    "frame,stream,time,src,sport,dst,dport,seq,ack,len,flags,dup_ack_num,bytes_in_flight,ack_rtt";

/// Streams segment rows as CSV. Write errors are kept and reported by `finish`.
pub struct EventsCsv<W: Write> {
    out: W,
    err: Option<io::Error>,
    addrs: AddrCache,
    line: Vec<u8>,
}

/// Formatted addresses of the last few endpoints: `IpAddr`'s `Display` is slow and a
/// capture repeats the same few addresses on every row.
#[derive(Default)]
struct AddrCache {
    slots: [(Option<IpAddr>, String); 4],
    next: usize,
}

impl AddrCache {
    fn get(&mut self, a: IpAddr) -> &str {
        let i = match self.slots.iter().position(|(k, _)| *k == Some(a)) {
            Some(i) => i,
            None => {
                let i = self.next;
                self.next = (self.next + 1) % self.slots.len();
                self.slots[i] = (Some(a), a.to_string());
                i
            }
        };
        &self.slots[i].1
    }
}

impl<W: Write> EventsCsv<W> {
    /// Writes the header and returns the sink.
    pub fn new(mut out: W) -> io::Result<Self> {
        writeln!(out, "{CSV_HEADER}")?;
        Ok(Self {
            out,
            err: None,
            addrs: AddrCache::default(),
            line: Vec::with_capacity(256),
        })
    }
    /// Flushes; returns the first write error, if any.
    pub fn finish(mut self) -> io::Result<()> {
        if let Some(e) = self.err.take() {
            return Err(e);
        }
        self.out.flush()
    }
    /// True once a write failed (e.g. a closed pipe): the caller may stop early.
    pub fn failed(&self) -> bool {
        self.err.is_some()
    }
}

fn write_csv_row<W: Write>(
    out: &mut W,
    addrs: &mut AddrCache,
    line: &mut Vec<u8>,
    a: &SegmentAnalysis,
) -> io::Result<()> {
    line.clear();
    push_num(line, a.frame.0);
    line.push(b',');
    push_num(line, a.stream.0);
    line.push(b',');
    push_secs(line, a.rel_time_ns);
    line.push(b',');
    line.extend_from_slice(addrs.get(a.src).as_bytes());
    line.push(b',');
    push_num(line, a.sport);
    line.push(b',');
    line.extend_from_slice(addrs.get(a.dst).as_bytes());
    line.push(b',');
    push_num(line, a.dport);
    line.push(b',');
    push_num(line, a.seq);
    line.push(b',');
    push_num(line, a.ack);
    line.push(b',');
    push_num(line, a.len);
    line.push(b',');
    for (i, name) in a.flags.names().enumerate() {
        if i > 0 {
            line.push(b'|');
        }
        line.extend_from_slice(name.as_bytes());
    }
    line.push(b',');
    if let Some(n) = a.dup_ack_num {
        push_num(line, n);
    }
    line.push(b',');
    if let Some(n) = a.bytes_in_flight {
        push_num(line, n);
    }
    line.push(b',');
    if let Some(ns) = a.ack_rtt_ns {
        push_secs(line, ns);
    }
    line.push(b'\n');
    out.write_all(line)
}

impl<W: Write> EventSink for EventsCsv<W> {
    fn segment(&mut self, a: &SegmentAnalysis) {
        let mut line = std::mem::take(&mut self.line);
        if self.err.is_none()
            && let Err(e) = write_csv_row(&mut self.out, &mut self.addrs, &mut line, a)
        {
            self.err = Some(e);
        }
        self.line = line;
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
            .map_err(io::Error::other)
            .and_then(|_| self.out.write_all(b"\n"));
        if let Err(e) = r {
            self.err = Some(e);
        }
    }
}
