//! Inputs found by the `analyzer` fuzz target (fuzz/), replayed as hand-built segments.

use std::net::{IpAddr, Ipv4Addr};

use tcpdx_core::{Analyzer, AnalyzerConfig, Endpoint, Event, Segment, SegmentAnalysis};
use tcpdx_wire::{FrameNo, SeqNum, TcpFlags, TcpOptions, Timestamp};

const CLIENT: Endpoint = Endpoint {
    addr: IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)),
    port: 40000,
};
const SERVER: Endpoint = Endpoint {
    addr: IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)),
    port: 80,
};

/// A segment from `src` (client or server) with raw numbers.
fn seg(frame: u64, from_client: bool, seq: u32, ack: u32, flags: u16, len: u32) -> Segment {
    let (src, dst) = if from_client {
        (CLIENT, SERVER)
    } else {
        (SERVER, CLIENT)
    };
    Segment {
        frame: FrameNo(frame),
        ts: Timestamp(1_000_000 * frame as i64),
        src,
        dst,
        seq: SeqNum(seq),
        ack: SeqNum(ack),
        flags: TcpFlags(flags),
        window: 1000,
        len,
        ip_id: 0,
        ttl: 64,
        captured: 0,
        options: TcpOptions::default(),
    }
}

fn rows(cfg: AnalyzerConfig, segs: &[Segment]) -> Vec<SegmentAnalysis> {
    let mut a = Analyzer::new(cfg);
    let mut ev: Vec<Event> = Vec::new();
    for s in segs {
        a.handle_segment(s, &mut ev);
    }
    ev.into_iter()
        .filter_map(|e| match e {
            Event::Segment(s) => Some(s),
            _ => None,
        })
        .collect()
}

const ACK: u16 = TcpFlags::ACK;
const SYN_ACK: u16 = TcpFlags::SYN | TcpFlags::ACK;

/// fuzz/analyzer crash 9e7a0383: a SYN-ACK with a new ISN restarts the sender's relative
/// numbers at 0 (Wireshark), but the 64-bit unwrapping went on from the old numbering and
/// printed 4294967296 when the previous segment was before the old base.
#[test]
fn synack_with_new_isn_restarts_unwrapped_relative_numbers() {
    let r = rows(
        AnalyzerConfig::default(),
        &[
            // The client's ACK sets the server's base to 4999.
            seg(1, true, 1001, 5000, ACK, 10),
            // Server data before that base: relative 2^32 - 999 as a 32-bit number.
            seg(2, false, 4000, 1011, ACK, 10),
            seg(3, false, 7000, 1011, SYN_ACK, 0),
            seg(4, false, 7001, 1011, ACK, 100),
            seg(5, true, 1011, 7101, ACK, 0),
        ],
    );
    assert!(r[2].flags.has(tcpdx_core::AnalysisFlags::REUSED_PORTS));
    assert_eq!(r[2].seq, 0, "the new ISN is relative 0");
    assert_eq!(r[3].seq, 1);
    assert_eq!(r[4].ack, 101, "the peer's ACKs follow the new numbering");
}

/// fuzz/analyzer crash (bytes in flight 161653 after one 29812-byte segment): SACK blocks
/// with the right edge before the left one made the SACKed total wrap, and subtracting it
/// from the bytes in flight wrapped back to more than was ever sent.
#[test]
fn reversed_sack_blocks_never_inflate_bytes_in_flight() {
    let mut ack = seg(1, true, 1001, 5001, ACK, 0);
    ack.options.sack[0] = (SeqNum(5001 + 65535), SeqNum(5001));
    ack.options.sack[1] = (SeqNum(9000), SeqNum(8000));
    ack.options.sack_count = 2;
    ack.frame = FrameNo(3);
    let r = rows(
        AnalyzerConfig::default(),
        &[
            seg(1, true, 1000, 0, TcpFlags::SYN, 0),
            seg(2, false, 5000, 1001, SYN_ACK, 0),
            ack,
            seg(4, false, 5001, 1001, ACK, 1000),
        ],
    );
    let bif = r[3].bytes_in_flight;
    assert!(bif.is_none_or(|b| b <= 1000), "bytes in flight {bif:?}");
}
