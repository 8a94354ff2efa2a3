//! `tcpdx-synth`: writes a large synthetic pcap to stdout, for memory and speed tests.
//!
//! `tcpdx-synth PACKETS [CONCURRENT] [PER_CONNECTION] [GAP_US] [MSS] [SNAPLEN]` streams PACKETS
//! frames (GAP_US microseconds apart, default 10; MSS default 1448; SNAPLEN default 96)
//! of CONCURRENT interleaved bulk transfers; each connection sends PER_CONNECTION data
//! segments (with an ACK every second segment and one loss repaired by fast retransmission
//! every 1000 segments), closes with FINs, and a new connection on a new port replaces it.
//! Nothing is kept in memory, so `tcpdx-synth 20000000 | tcpdx flows -` measures tcpdx alone.
//!
//! `tcpdx-synth storage PACKETS [CONCURRENT] [OPS_PER_CONNECTION] [IO_BYTES] [SNAPLEN]` streams a
//! storage mix instead: CONCURRENT (default 32) NFSv3 connections alternating READ and WRITE
//! calls of IO_BYTES (default 32768) each, closed after OPS_PER_CONNECTION (default 200) and
//! replaced; SNAPLEN default 256 keeps every header and RPC message, cuts the bulk data.
#![forbid(unsafe_code)]

use std::io;
use std::process::ExitCode;

use tcpdx_testkit::bulk::{BulkConfig, write_bulk};
use tcpdx_testkit::storage_mix::{StorageMixConfig, write_storage_mix};

fn main() -> ExitCode {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let storage = args.first().is_some_and(|a| a == "storage");
    if storage {
        args.remove(0);
    }
    let Ok(args) = args
        .iter()
        .map(|a| a.parse())
        .collect::<Result<Vec<u64>, _>>()
    else {
        eprintln!("usage: tcpdx-synth [storage] PACKETS [NUMBERS...] (see the source's doc)");
        return ExitCode::from(2);
    };
    let written = if storage {
        let d = StorageMixConfig::default();
        let cfg = StorageMixConfig {
            packets: *args.first().unwrap_or(&d.packets),
            concurrent: args.get(1).map_or(d.concurrent, |&v| v as usize),
            ops_per_conn: args.get(2).map_or(d.ops_per_conn, |&v| v as u32),
            io_bytes: args.get(3).map_or(d.io_bytes, |&v| v as u32),
            snaplen: args.get(4).map_or(d.snaplen, |&v| v as usize),
            ..d
        };
        write_storage_mix(io::stdout().lock(), cfg)
    } else {
        let d = BulkConfig::default();
        let cfg = BulkConfig {
            packets: *args.first().unwrap_or(&d.packets),
            concurrent: args.get(1).map_or(d.concurrent, |&v| v as usize),
            per_conn: args.get(2).map_or(d.per_conn, |&v| v as u32),
            gap_us: *args.get(3).unwrap_or(&d.gap_us),
            mss: args.get(4).map_or(d.mss, |&v| v as u32),
            snaplen: args.get(5).map_or(d.snaplen, |&v| v as usize),
            ..d
        };
        write_bulk(io::stdout().lock(), cfg)
    };
    match written {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("tcpdx-synth: {e}");
            ExitCode::from(1)
        }
    }
}
