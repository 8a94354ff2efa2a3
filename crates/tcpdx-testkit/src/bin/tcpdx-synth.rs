//! `tcpdx-synth`: writes a large synthetic pcap to stdout, for memory and speed tests.
//!
//! `tcpdx-synth PACKETS [CONCURRENT] [PER_CONNECTION] [GAP_US] [MSS] [SNAPLEN]` streams PACKETS
//! frames (GAP_US microseconds apart, default 10; MSS default 1448; SNAPLEN default 96)
//! of CONCURRENT interleaved bulk transfers; each connection sends PER_CONNECTION data
//! segments (with an ACK every second segment and one loss repaired by fast retransmission
//! every 1000 segments), closes with FINs, and a new connection on a new port replaces it.
//! Nothing is kept in memory, so `tcpdx-synth 20000000 | tcpdx flows -` measures tcpdx alone.
#![forbid(unsafe_code)]

use std::io;

use tcpdx_testkit::bulk::{BulkConfig, write_bulk};

fn main() -> io::Result<()> {
    let args: Vec<u64> = std::env::args()
        .skip(1)
        .map(|a| a.parse().expect("numbers"))
        .collect();
    let d = BulkConfig::default();
    let cfg = BulkConfig {
        packets: *args.first().unwrap_or(&d.packets),
        concurrent: args.get(1).map_or(d.concurrent, |&v| v as usize),
        per_conn: args.get(2).map_or(d.per_conn, |&v| v as u32),
        gap_us: *args.get(3).unwrap_or(&d.gap_us),
        mss: args.get(4).map_or(d.mss, |&v| v as u32),
        snaplen: args.get(5).map_or(d.snaplen, |&v| v as usize),
    };
    write_bulk(io::stdout().lock(), cfg)
}
