//! Tests of the scenario DSL: frames are parsed back with etherparse, and, when tshark is
//! installed, read by tshark to check that Wireshark's analysis sees what the script meant.

use etherparse::{NetSlice, SlicedPacket, TcpOptionElement, TransportSlice};

use super::*;
use crate::builder::{CWR, ECE};
use crate::tshark::{tshark_fields, tshark_filter};

// ===========================================================================================
// Helpers
// ===========================================================================================

/// The TCP header fields of one frame, parsed back with etherparse.
#[derive(Debug, PartialEq)]
struct Parsed {
    src_port: u16,
    seq: u32,
    ack: u32,
    syn: bool,
    ack_flag: bool,
    fin: bool,
    rst: bool,
    win: u16,
    len: usize,
    mss: Option<u16>,
    wscale: Option<u8>,
    sack_perm: bool,
    ts: Option<(u32, u32)>,
    sack: Vec<(u32, u32)>,
    ip_id: Option<u16>,
}

#[track_caller]
fn parse(f: &OwnedFrame) -> Parsed {
    let p = SlicedPacket::from_ethernet(&f.data).expect("etherparse parses the frame");
    let ip_id = match &p.net {
        Some(NetSlice::Ipv4(ip)) => Some(ip.header().identification()),
        _ => None,
    };
    let Some(TransportSlice::Tcp(tcp)) = p.transport else {
        panic!("frame {} has no TCP", f.no)
    };
    let mut out = Parsed {
        src_port: tcp.source_port(),
        seq: tcp.sequence_number(),
        ack: tcp.acknowledgment_number(),
        syn: tcp.syn(),
        ack_flag: tcp.ack(),
        fin: tcp.fin(),
        rst: tcp.rst(),
        win: tcp.window_size(),
        len: tcp.payload().len(),
        mss: None,
        wscale: None,
        sack_perm: false,
        ts: None,
        sack: Vec::new(),
        ip_id,
    };
    for o in tcp.options_iterator() {
        match o.expect("options parse") {
            TcpOptionElement::MaximumSegmentSize(m) => out.mss = Some(m),
            TcpOptionElement::WindowScale(w) => out.wscale = Some(w),
            TcpOptionElement::SelectiveAcknowledgementPermitted => out.sack_perm = true,
            TcpOptionElement::Timestamp(v, e) => out.ts = Some((v, e)),
            TcpOptionElement::SelectiveAcknowledgement(first, rest) => {
                out.sack.push(first);
                out.sack.extend(rest.into_iter().flatten());
            }
            TcpOptionElement::Noop => {}
        }
    }
    out
}

/// Milliseconds of frame `f` since the script's start.
fn ms(t: &Script, f: &OwnedFrame) -> f64 {
    f.ts.since(t.start) as f64 / 1e6
}

/// Writes `t` to a temp pcapng and runs `check` on the path if tshark is installed.
fn with_tshark(t: &Script, name: &str, check: impl FnOnce(&Path)) {
    if !crate::tshark::tshark_available() {
        eprintln!("tshark not installed: skipping the Wireshark cross-check of {name}");
        return;
    }
    let path = t.write_temp_pcapng(name).unwrap();
    check(&path);
    std::fs::remove_file(&path).unwrap();
}

// ===========================================================================================
// Handshake, relative numbers, options
// ===========================================================================================

#[test]
fn handshake_has_configured_options_and_timing() {
    let mut t = Script::new();
    let nos = t.handshake().frame_nos();
    assert_eq!(nos, [FrameNo(1), FrameNo(2), FrameNo(3)]);
    let f = t.frames();
    let (syn, synack, ack) = (parse(&f[0]), parse(&f[1]), parse(&f[2]));
    assert_eq!(
        (ms(&t, &f[0]), ms(&t, &f[1]), ms(&t, &f[2])),
        (0.0, 10.0, 10.0)
    );
    assert!(syn.syn && !syn.ack_flag);
    assert_eq!((syn.seq, syn.ack), (1_000_000, 0));
    assert_eq!(
        (syn.mss, syn.wscale, syn.sack_perm, syn.ts),
        (Some(1460), Some(7), true, Some((100_000, 0)))
    );
    assert_eq!(syn.win, 64256, "SYN windows are never scaled");
    assert!(synack.syn && synack.ack_flag);
    assert_eq!((synack.seq, synack.ack), (2_000_000, 1_000_001));
    assert_eq!(synack.ts, Some((500_010, 100_000)));
    assert_eq!((ack.seq, ack.ack), (1_000_001, 2_000_001));
    assert_eq!(ack.win, 64256 >> 7);
    assert_eq!(ack.ts, Some((100_010, 500_010)));
    assert_eq!((ack.mss, ack.wscale, ack.sack_perm), (None, None, false));
    assert_eq!(t.now_ms(), 10.0);
}

#[test]
fn relative_numbers_wrap_around_isn_near_2_pow_32() {
    let mut t = Script::established(ScriptConfig {
        isn_client: u32::MAX - 100,
        isn_server: u32::MAX,
        ..ScriptConfig::DEFAULT
    });
    t.server_sends(1, 1448);
    t.client_acks(1449).sack(&[(2897, 4345)]);
    let f = t.frames();
    let data = parse(&f[3]);
    assert_eq!(data.seq, 0, "server ISN 2^32-1, relative 1 -> raw 0");
    assert_eq!(data.ack, (u32::MAX - 100).wrapping_add(1));
    let ack = parse(&f[4]);
    assert_eq!(ack.ack, 1448);
    assert_eq!(ack.sack, [(2896, 4344)]);
    assert_eq!(t.entries()[4].rel_ack, Some(1449));
}

#[test]
fn auto_seq_and_ack_follow_what_was_sent() {
    let mut t = Script::established(ScriptConfig::DEFAULT);
    t.at_ms(20).client_sends(AUTO, 100);
    t.at_ms(30).server_sends(AUTO, 1448);
    t.server_sends(AUTO, 1000);
    t.at_ms(31).client_acks(AUTO);
    let e = t.entries();
    assert_eq!((e[3].rel_seq, e[3].rel_ack), (1, Some(1)));
    assert_eq!((e[4].rel_seq, e[4].rel_ack), (1, Some(101)));
    assert_eq!(e[5].rel_seq, 1449);
    assert_eq!((e[6].rel_seq, e[6].rel_ack), (101, Some(2449)));
    assert_eq!(t.next_seq(Dir::S2C), 2449);
    // Retransmission with an explicit seq does not move the next sequence number back.
    t.server_sends(1, 1448);
    assert_eq!(t.next_seq(Dir::S2C), 2449);
}

#[test]
fn windows_are_scaled_by_the_senders_shift() {
    let mut t = Script::established(ScriptConfig {
        client_wscale: Some(2),
        server_wscale: Some(9),
        ..ScriptConfig::DEFAULT
    });
    t.client_window(0).client_acks(1);
    t.client_window(40_000).client_acks(1);
    t.server_acks(1).win(512 * 100);
    let f = t.frames();
    assert_eq!(parse(&f[3]).win, 0);
    assert_eq!(parse(&f[4]).win, 10_000);
    assert_eq!(parse(&f[5]).win, 100);

    // Without window scaling on both SYNs, windows go out unscaled.
    let mut t = Script::established(ScriptConfig {
        server_wscale: None,
        client_window: 30_000,
        ..ScriptConfig::DEFAULT
    });
    t.client_acks(1);
    assert_eq!(parse(&t.frames()[3]).win, 30_000);
}

#[test]
#[should_panic(expected = "does not fit in 16 bits")]
fn unscaled_window_over_64k_panics() {
    let mut t = Script::established(ScriptConfig {
        client_wscale: None,
        ..ScriptConfig::DEFAULT
    });
    t.client_window(100_000).client_acks(1);
}

#[test]
fn repeats_are_new_packets_and_duplicates_are_not() {
    let mut t = Script::established(ScriptConfig::DEFAULT);
    let nos = t.at_ms(20).client_acks(1).times(3).frame_nos();
    assert_eq!(nos, [FrameNo(4), FrameNo(5), FrameNo(6)]);
    t.at_ms(30).keepalive_from_server().times_every_ms(2, 1000);
    t.client_acks(1).captured_twice();
    let f = t.frames();
    let p: Vec<_> = f.iter().map(parse).collect();
    assert_eq!(p[3].seq, p[5].seq);
    assert_ne!(p[3].ip_id, p[4].ip_id);
    assert_eq!((ms(&t, &f[6]), ms(&t, &f[7])), (30.0, 1030.0));
    assert_eq!(
        p[7].ts.unwrap().0 - p[6].ts.unwrap().0,
        1000,
        "TSval ticks at 1 kHz"
    );
    assert_eq!(p[6].seq, 2_000_000, "keep-alive: next seq - 1");
    assert_eq!(
        f[8],
        OwnedFrame {
            no: FrameNo(9),
            ..f[9].clone()
        }
    );
}

#[test]
fn not_captured_keeps_the_state() {
    let mut t = Script::established(ScriptConfig::DEFAULT);
    t.server_sends(AUTO, 1448).not_captured();
    t.server_sends(AUTO, 1448);
    assert_eq!(t.frame_count(), 4);
    assert_eq!(t.entries()[3].rel_seq, 1449);
}

#[test]
fn timestamps_echo_the_peers_last_tsval() {
    let mut t = Script::established(ScriptConfig::DEFAULT);
    t.at_ms(50).server_sends(1, 100).ts(7, 8);
    t.client_acks(101);
    t.server(SegSpec {
        ts: TsOpt::Off,
        ..S2C_ACK
    });
    let f = t.frames();
    assert_eq!(parse(&f[3]).ts, Some((7, 8)));
    assert_eq!(parse(&f[4]).ts, Some((100_050, 7)));
    assert_eq!(parse(&f[5]).ts, None);
}

#[test]
fn close_and_reset_consume_sequence_space_correctly() {
    let mut t = Script::established(ScriptConfig::DEFAULT);
    t.close(Dir::C2S);
    t.rst_from_server();
    let p: Vec<_> = t.frames().iter().map(parse).collect();
    assert!(p[3].fin && p[4].fin && !p[5].fin);
    assert_eq!(p[4].ack, p[3].seq + 1, "server's FIN acks the client's FIN");
    assert_eq!(p[5].ack, p[4].seq + 1);
    assert!(p[6].rst);
    assert_eq!(p[6].seq, p[4].seq + 1);
}

#[test]
fn port_reuse_gets_new_isns_and_explicit_connections_their_tuple() {
    let mut t = Script::established(ScriptConfig::DEFAULT);
    t.fin_from_client();
    let first = t.conn();
    let second = t.new_connection();
    t.after_ms(100).handshake();
    let third = t.add_connection(ScriptConfig {
        client_port: 40001,
        ..ScriptConfig::DEFAULT
    });
    t.syn();
    t.on(first).fin_from_server();
    assert_eq!((first, second, third), (ConnId(0), ConnId(1), ConnId(2)));
    let p: Vec<_> = t.frames().iter().map(parse).collect();
    assert_eq!(p[4].seq, 1_000_000 + NEW_CONN_ISN_STEP);
    assert_eq!(p[4].src_port, 40000);
    assert_eq!(p[7].src_port, 40001);
    assert_eq!(p[7].seq, 1_000_000);
    assert_eq!(p[8].src_port, 5201);
    assert_eq!(p[8].ack, 1_000_002, "first connection's state is kept");
}

#[test]
fn ipv6_vlan_and_flags() {
    let mut t = Script::established(ScriptConfig {
        ipv6: true,
        vlan: Some(7),
        ..ScriptConfig::DEFAULT
    });
    t.server_sends(1, 10).flags(ECE | CWR).tos(0x03);
    let f = t.frames();
    let p = SlicedPacket::from_ethernet(&f[3].data).unwrap();
    assert_eq!(p.link_exts.len(), 1, "one VLAN tag");
    let Some(NetSlice::Ipv6(ip)) = &p.net else {
        panic!("not IPv6: {p:?}")
    };
    assert_eq!(
        ip.header().source_addr(),
        "fd00::2".parse::<Ipv6Addr>().unwrap()
    );
    assert_eq!(ip.header().traffic_class(), 0x03);
    let Some(TransportSlice::Tcp(tcp)) = &p.transport else {
        panic!()
    };
    assert!(tcp.ece() && tcp.cwr() && tcp.psh());
    assert_eq!(
        tcp.checksum(),
        tcp.calc_checksum_ipv6(ip.header().source(), ip.header().destination())
            .unwrap()
    );
}

#[test]
fn explicit_bytes_and_snaplen() {
    let cfg = ScriptConfig {
        snaplen: Some(100),
        ..ScriptConfig::DEFAULT
    };
    let mut t = Script::established(cfg);
    t.client_sends_bytes(b"GET / HTTP/1.1\r\n\r\n");
    t.server_sends(1, 1448);
    let f = t.frames();
    assert_eq!(t.next_seq(Dir::C2S), 19);
    assert!(f[3].data.ends_with(b"GET / HTTP/1.1\r\n\r\n"));
    assert_eq!(f[4].data.len(), 100);
    assert_eq!(f[4].orig_len, 14 + 20 + 32 + 1448);
}

#[test]
fn pcapng_of_a_script_reads_back_identical() {
    use pcap_parser::pcapng::Block;
    use pcap_parser::{PcapBlockOwned, PcapNGSlice};
    let mut t = Script::established(ScriptConfig::DEFAULT);
    t.at_ms(1.5).server_burst(1, 3, 1448);
    let bytes = t.pcapng_bytes();
    let got: Vec<_> = PcapNGSlice::from_slice(&bytes)
        .unwrap()
        .filter_map(|b| match b.unwrap() {
            PcapBlockOwned::NG(Block::EnhancedPacket(epb)) => Some((
                ((u64::from(epb.ts_high) << 32) | u64::from(epb.ts_low)) as i64,
                epb.data[..epb.caplen as usize].to_vec(),
            )),
            _ => None,
        })
        .collect();
    let want: Vec<_> = t.frames().into_iter().map(|f| (f.ts.0, f.data)).collect();
    assert_eq!(got, want);
}

// ===========================================================================================
// Wireshark agrees with what the scripts mean
// ===========================================================================================

#[test]
fn tshark_sees_dup_acks_and_fast_retransmission() {
    let mut t = Script::new();
    t.handshake(); // 1-3
    t.at_ms(20).server_sends(1, 1448); // 4: lost after the capture point
    t.server_sends(AUTO, 1448); // 5
    t.server_sends(AUTO, 1448); // 6
    t.server_sends(AUTO, 1448); // 7
    t.at_ms(30).client_acks(1).sack(&[(1449, 2897)]); // 8: dup ACK 1
    t.after_ms(0.1).client_acks(1).sack(&[(1449, 4345)]); // 9: dup ACK 2
    t.after_ms(0.1).client_acks(1).sack(&[(1449, 5793)]); // 10: dup ACK 3
    t.after_ms(0.2).server(SegSpec {
        seq: 1,
        len: 1448,
        flags: PSH | ACK,
        ..S2C_DATA
    }); // 11
    t.at_ms(41).client_acks(5793); // 12
    assert_eq!(t.frame_count(), 12);
    with_tshark(&t, "fast-retrans", |path| {
        let rows = tshark_fields(path, &["frame.number", "tcp.seq", "tcp.ack", "tcp.len"]).unwrap();
        assert_eq!(rows.len(), 12);
        assert_eq!(rows[10], ["11", "1", "1", "1448"]);
        assert_eq!(rows[9][2], "1");
        assert_eq!(
            tshark_filter(path, "tcp.analysis.flags").unwrap(),
            [8, 9, 10, 11],
            "no analysis flag beyond the intended ones"
        );
        assert_eq!(
            tshark_filter(path, "tcp.analysis.duplicate_ack").unwrap(),
            [8, 9, 10]
        );
        assert_eq!(
            tshark_filter(path, "tcp.analysis.fast_retransmission").unwrap(),
            [11]
        );
        let sack = tshark_fields(path, &["tcp.options.sack_le", "tcp.options.sack_re"]).unwrap();
        assert_eq!(sack[9], ["1449", "5793"]);
    });
}

#[test]
fn tshark_sees_windows_keepalives_retransmissions_and_reuse() {
    let mut t = Script::with(ScriptConfig {
        isn_server: u32::MAX - 1000, // raw numbers wrap during the transfer
        ..ScriptConfig::DEFAULT
    });
    t.handshake(); // 1-3
    t.at_ms(20).server_sends(1, 1448); // 4
    t.at_ms(220).server_sends(1, 1448); // 5: RTO retransmission
    t.at_ms(230).client_window(0).client_acks(1449); // 6: zero window
    t.at_ms(430)
        .zero_window_probe(Dir::S2C)
        .times_every_ms(2, 400); // 7-8
    t.at_ms(900).client_window(65536).client_acks(1449); // 9: window update
    t.at_ms(5000).keepalive_from_client(); // 10
    t.at_ms(6000).fin_from_client(); // 11
    t.rst_from_server(); // 12
    t.new_connection();
    t.at_ms(7000).handshake(); // 13-15: same ports, new ISNs
    with_tshark(&t, "misc", |path| {
        let f = |filter| tshark_filter(path, filter).unwrap();
        // No other analysis flag anywhere: the kit produced exactly the intended story.
        assert_eq!(f("tcp.analysis.flags"), [5, 6, 7, 8, 9, 10, 13]);
        assert_eq!(f("tcp.analysis.retransmission"), [5]);
        assert_eq!(f("tcp.analysis.zero_window"), [6]);
        assert_eq!(f("tcp.analysis.zero_window_probe"), [7, 8]);
        assert_eq!(f("tcp.analysis.window_update"), [9]);
        assert_eq!(f("tcp.analysis.keep_alive"), [10]);
        assert_eq!(f("tcp.stream == 1"), [13, 14, 15]);
        let rows = tshark_fields(path, &["tcp.seq", "tcp.ack", "tcp.window_size"]).unwrap();
        assert_eq!(rows[5], ["1", "1449", "0"]);
        assert_eq!(rows[8], ["1", "1449", "65536"]);
        assert_eq!(rows[4][0], "1", "relative seq despite raw wrap-around");
    });
}
