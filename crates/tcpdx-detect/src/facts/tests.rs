//! The facts at their thresholds, and hand-built captures through the analyzer into the
//! diagnoser: copies, re-forwards, a coarse clock, missing ACKs, a late original.

use tcpdx_core::{AnalysisFlags, Analyzer, AnalyzerConfig, Event};
use tcpdx_testkit::OwnedFrame;
use tcpdx_testkit::{AUTO, C2S_DATA, Dir, Script, ScriptConfig, SegSpec};
use tcpdx_wire::{FrameNo, Timestamp};

use super::*;
use crate::finding::FindingKind as K;
use crate::{Diagnoser, Diagnosis};

const MSS: u32 = 1448;

fn run(frames: &[OwnedFrame]) -> Diagnosis {
    let mut a = Analyzer::new(AnalyzerConfig::default());
    let mut d = Diagnoser::new();
    for f in frames {
        a.handle_frame(&f.as_frame(), &mut d);
    }
    a.handle_end(&mut d);
    d.finish()
}

/// Frames the core flags as retransmitted or out of order (what `tcpdx events` shows,
/// Wireshark's view).
fn flagged_retransmissions(frames: &[OwnedFrame]) -> usize {
    let mut a = Analyzer::new(AnalyzerConfig::default());
    let mut ev: Vec<Event> = Vec::new();
    for f in frames {
        a.handle_frame(&f.as_frame(), &mut ev);
    }
    ev.iter()
        .filter(|e| {
            matches!(e, Event::Segment(s) if s.flags.any(AnalysisFlags::RETRANSMISSION
                | AnalysisFlags::FAST_RETRANSMISSION
                | AnalysisFlags::SPURIOUS_RETRANSMISSION
                | AnalysisFlags::OUT_OF_ORDER))
        })
        .count()
}

fn has(d: &Diagnosis, k: K) -> bool {
    d.findings.iter().any(|f| f.kind == k)
}

/// A bulk transfer of `rounds` round trips with one segment lost after the capture point
/// (fast retransmission on three duplicate ACKs) in the middle.
fn bulk_with_one_loss(rounds: u32) -> Script {
    let mut t = Script::new();
    t.handshake();
    t.at_ms(20);
    for r in 0..rounds {
        let base = t.next_seq(Dir::C2S);
        t.client_burst(base, 10, MSS);
        if r == rounds / 2 {
            let top = base + 10 * MSS;
            t.after_ms(10)
                .server_acks(base)
                .sack(&[(base + MSS, top)])
                .times_every_ms(3, 0.01);
            t.after_ms(0.01).client(SegSpec {
                seq: base,
                len: MSS,
                ..C2S_DATA
            });
            t.after_ms(10).server_acks(top);
        } else {
            t.after_ms(10).server_acks(AUTO);
        }
    }
    t
}

/// Every frame again `delay_ns` later (with `ttl_drop` off its TTL), renumbered in time
/// order: what a mirror port (or a router forwarding it back past the tap) gives.
fn doubled(frames: &[OwnedFrame], delay_ns: i64, ttl_drop: u8) -> Vec<OwnedFrame> {
    let mut all: Vec<OwnedFrame> = Vec::with_capacity(frames.len() * 2);
    for f in frames {
        all.push(f.clone());
        let mut c = f.clone();
        c.ts = Timestamp(f.ts.0 + delay_ns);
        // Ethernet, IPv4: the TTL is byte 8 of the IP header.
        if let Some(ttl) = c.data.get_mut(14 + 8) {
            *ttl -= ttl_drop;
        }
        all.push(c);
    }
    all.sort_by_key(|f| f.ts.0);
    for (i, f) in all.iter_mut().enumerate() {
        f.no = FrameNo(i as u64 + 1);
    }
    all
}

#[test]
fn every_frame_twice_is_no_loss() {
    let t = bulk_with_one_loss(6);
    let once = t.frames();
    let clean = run(&once);
    assert!(has(&clean, K::NetworkLoss), "the one real loss is found");
    let lost_once = clean
        .findings
        .iter()
        .find(|f| f.kind == K::NetworkLoss)
        .map(|f| f.explanation.clone());
    for delay_ns in [0, 2_000_000] {
        let twice = doubled(&once, delay_ns, 0);
        // `events` stays Wireshark's: every copy of a data segment is a retransmission (or
        // out of order, within 3 ms).
        assert!(flagged_retransmissions(&twice) > 60, "{delay_ns}");
        let d = run(&twice);
        assert_eq!(d.capture.duplicate_frames, once.len() as u64, "{delay_ns}");
        assert_eq!(d.capture.reforwarded_frames, 0);
        // The same one loss, nothing more; the copies are no spurious retransmissions.
        let f = d.findings.iter().find(|f| f.kind == K::NetworkLoss);
        assert_eq!(f.map(|f| f.explanation.clone()), lost_once, "{delay_ns}");
        assert!(!has(&d, K::SpuriousRetransmission), "{:#?}", d.findings);
        assert!(!has(&d, K::HandshakeAndSetup), "{:#?}", d.findings);
        let q = d.findings.iter().find(|f| f.kind == K::CaptureQuality);
        let q = q.expect("capture-quality tells of the copies");
        assert_eq!(q.severity, crate::Severity::Info);
        assert!(
            q.explanation.contains("captured twice"),
            "{}",
            q.explanation
        );
    }
}

#[test]
fn a_copy_later_than_the_window_is_a_retransmission() {
    // Just within the window a copy; just past it (and past the round trip) not.
    let t = bulk_with_one_loss(2);
    let once = t.frames();
    let within = run(&doubled(&once, DUP_MIN_WINDOW_NS, 0));
    assert_eq!(within.capture.duplicate_frames, once.len() as u64);
    let past = run(&doubled(&once, DUP_MIN_WINDOW_NS + 1_000, 0));
    assert_eq!(past.capture.duplicate_frames, 0);
}

#[test]
fn a_router_forwarding_each_frame_again_with_ttl_one_lower() {
    let t = bulk_with_one_loss(4);
    let once = t.frames();
    let d = run(&doubled(&once, 300_000, 1));
    assert_eq!(d.capture.duplicate_frames, once.len() as u64);
    assert_eq!(d.capture.reforwarded_frames, once.len() as u64);
    let q = d.findings.iter().find(|f| f.kind == K::CaptureQuality);
    assert!(
        q.is_some_and(|q| q.explanation.contains("TTL one lower")),
        "{:#?}",
        d.findings
    );
    let losses: u32 = d
        .findings
        .iter()
        .filter(|f| f.kind == K::NetworkLoss)
        .map(|f| f.episodes)
        .sum();
    assert_eq!(losses, 1);
}

#[test]
fn a_real_retransmission_carries_a_new_id_and_stays_one() {
    // The fast retransmission repeats sequence, length and ACK of the original, but not
    // its ID: not a copy.
    let t = bulk_with_one_loss(4);
    let d = run(&t.frames());
    assert_eq!(d.capture.duplicate_frames, 0);
    assert_eq!(d.capture.late_originals, 0);
    assert_eq!(d.capture.capture_drops.ip_id_missing, 0);
}

/// A transfer whose frames' times are floored to a `tick_ms` grid; the path's round trip
/// is 2 ms.
fn on_a_grid(tick_ms: i64) -> Diagnosis {
    let mut t = Script::with(ScriptConfig {
        rtt_ms: 2.0,
        ..ScriptConfig::DEFAULT
    });
    t.handshake();
    t.at_ms(20);
    for _ in 0..40 {
        let base = t.next_seq(Dir::C2S);
        t.client_burst(base, 8, MSS);
        t.after_ms(2).server_acks(AUTO);
        t.after_ms(0.5);
    }
    let tick = tick_ms * 1_000_000;
    let frames: Vec<_> = t
        .frames()
        .into_iter()
        .map(|mut f| {
            // A grid that does not start at a round time.
            if tick > 0 {
                f.ts = Timestamp((f.ts.0 - 3_000_000) / tick * tick + 3_000_000);
            }
            f
        })
        .collect();
    run(&frames)
}

#[test]
fn a_10_ms_clock_measures_no_round_trip_of_2_ms() {
    let d = on_a_grid(10);
    assert!(d.capture.coarse_clock);
    assert_eq!(d.capture.resolution_s, Some(0.01));
    assert_eq!(d.connections[0].rtt_s, None, "{:?}", d.connections[0]);
    let q = d.findings.iter().find(|f| f.kind == K::CaptureQuality);
    assert!(
        q.is_some_and(|q| q.explanation.contains("tick every 10.0 ms")),
        "{:#?}",
        d.findings
    );
}

#[test]
fn a_microsecond_clock_is_fine() {
    let d = on_a_grid(0);
    assert!(!d.capture.coarse_clock, "{:?}", d.capture);
    assert!(
        d.connections[0]
            .rtt_s
            .is_some_and(|r| (r - 0.002).abs() < 1e-4)
    );
}

#[test]
fn clock_thresholds() {
    // Ticks of 1 ms with ties at the share: coarse; one tie fewer, or a finer tick: not.
    let clock = |ties: u64, frames: u64, tick_ns: i64| {
        let mut c = Clock::default();
        let mut ts = 1_000_000_123;
        for i in 0..frames {
            if i > ties {
                ts += tick_ns;
            }
            c.tick(ts);
        }
        c
    };
    assert_eq!(clock(10, 100, 1_000_000).coarse_tick_ns(), 1_000_000);
    assert_eq!(clock(9, 90, 1_000_000).coarse_tick_ns(), 0, "below 10 ties");
    assert_eq!(
        clock(10, 101, 1_000_000).coarse_tick_ns(),
        0,
        "below a tenth"
    );
    assert_eq!(
        clock(10, 100, 999_000).coarse_tick_ns(),
        0,
        "finer than 1 ms"
    );
    assert_eq!(clock(10, 100, 1_000_000).resolution_ns(), 1_000_000);
    // A fine clock: the unit of the timestamps.
    assert_eq!(clock(0, 100, 1_000).resolution_ns(), 1);
    let f = ConnFacts {
        clock: clock(10, 100, 10_000_000),
        ..ConnFacts::default()
    };
    assert_eq!(f.measurable(19_999_999), 0);
    assert_eq!(f.measurable(20_000_000), 20_000_000);
}

/// A request/response exchange where Nagle holds each small tail until a 200 ms
/// delayed ACK (three turns); with `hide_acks`, each turn's prompt ACK of the server is
/// missing from the capture.
fn nagle_with(hide_acks: bool) -> Diagnosis {
    let mut t = Script::new();
    t.handshake();
    t.at_ms(20);
    // Prompt answers first: the server's IDs show a per-connection counter.
    for _ in 0..10 {
        t.after_ms(1).client_sends(AUTO, 100);
        t.after_ms(10).server_sends(AUTO, 100);
    }
    for _ in 0..3 {
        t.after_ms(0.01).client_sends(AUTO, MSS);
        if hide_acks {
            // Sent, not captured: the server's IDs skip one.
            t.after_ms(10).server_acks(AUTO).not_captured();
            t.after_ms(200);
        } else {
            t.after_ms(210);
        }
        t.server_acks(AUTO);
        t.after_ms(0.01).client_sends(AUTO, 552);
        t.after_ms(10).server_sends(AUTO, 300);
    }
    run(&t.frames())
}

#[test]
fn a_missing_ack_is_not_a_delayed_ack() {
    let shown = nagle_with(false);
    assert!(has(&shown, K::NagleDelackStall), "{:#?}", shown.findings);
    let hidden = nagle_with(true);
    assert!(!has(&hidden, K::NagleDelackStall), "{:#?}", hidden.findings);
    assert_eq!(hidden.capture.capture_drops.ip_id_missing, 3);
    let q = hidden.findings.iter().find(|f| f.kind == K::CaptureQuality);
    assert!(
        q.is_some_and(|q| q.explanation.contains("skip 3 frame(s)")),
        "{:#?}",
        hidden.findings
    );
}

#[test]
fn id_skips_count_only_for_a_sequential_counter() {
    let a = |ts: i64, len: u32| SegmentAnalysis {
        ts: Timestamp(ts),
        len,
        ..seg()
    };
    let mut d = DirFacts::default();
    // ID_MIN_STEPS - 1 steps of one, then a skip of 5: not yet a counter.
    let mut id = 100u16;
    for i in 0..ID_MIN_STEPS {
        d.count_id(&a(i64::from(i), 100), id);
        id += 1;
    }
    assert!(!d.sequential_ids());
    d.count_id(&a(100, 100), id + 5);
    assert!(d.sequential_ids(), "{d:?}");
    assert_eq!(d.missing(), 5);
    assert!(d.missing_within(99, 100));
    assert!(!d.missing_within(100, 200));
    // An offloaded super-segment of 3 MSS used 3 IDs: no skip.
    d.mss = 1000;
    d.count_id(&a(200, 3000), id + 6);
    d.count_id(&a(201, 100), id + 9);
    assert_eq!(d.missing(), 5);
    // A jump past ID_MAX_JUMP is another counter, not missing frames.
    d.count_id(&a(300, 100), id + 10 + ID_MAX_JUMP + 1);
    assert_eq!(d.missing(), 5);
    // An older ID: a late frame.
    assert!(d.count_id(&a(400, 100), id + 10 + ID_MAX_JUMP + 1 - 3));
}

fn seg() -> SegmentAnalysis {
    SegmentAnalysis {
        frame: FrameNo(1),
        stream: tcpdx_core::StreamId(0),
        ts: Timestamp(0),
        rel_time_ns: 0,
        dir: tcpdx_core::Dir::ClientToServer,
        src: std::net::Ipv4Addr::LOCALHOST.into(),
        sport: 1,
        dst: std::net::Ipv4Addr::LOCALHOST.into(),
        dport: 2,
        seq: 1,
        ack: 1,
        tcp_flags: 0x10,
        len: 0,
        window_raw: 0,
        window: 0,
        flags: AnalysisFlags::default(),
        dup_ack_num: None,
        bytes_in_flight: None,
        ack_rtt_ns: None,
        acks_frame: None,
    }
}

/// Five segments captured next to the receiver, the first held 25 ms in the network (less
/// than the sender's round trip, so it is not retransmitted): the receiver SACKs the others,
/// then the original comes and fills the hole.
fn held_segment(late_original_keeps_its_id: bool) -> Diagnosis {
    let mut t = Script::with(ScriptConfig {
        rtt_ms: 40.0,
        ..ScriptConfig::DEFAULT
    });
    t.handshake();
    t.at_ms(100);
    // Clean rounds first: the sender's IDs show a per-connection counter.
    for _ in 0..2 {
        let base = t.next_seq(Dir::C2S);
        t.after_ms(5).client_burst(base, 5, MSS);
        t.after_ms(40).server_acks(AUTO);
    }
    let b = t.next_seq(Dir::C2S);
    t.after_ms(5).client_sends(b, MSS).not_captured();
    let n = t.entries().len();
    let top = b + 5 * MSS;
    t.client_burst(b + MSS, 4, MSS);
    let held_id = t.entries()[n].spec.ip_id - 1;
    t.after_ms(0.05)
        .server_acks(b)
        .sack(&[(b + MSS, top)])
        .times_every_ms(3, 0.01);
    let late = t.after_ms(25).client_sends(b, MSS);
    if late_original_keeps_its_id {
        late.with(|s| s.ip_id = held_id);
    }
    t.after_ms(0.05).server_acks(top);
    for _ in 0..4 {
        let base = t.next_seq(Dir::C2S);
        t.after_ms(15).client_burst(base, 10, MSS);
        t.after_ms(40).server_acks(AUTO);
    }
    run(&t.frames())
}

#[test]
fn a_late_original_is_reordering_not_network_loss() {
    let d = held_segment(true);
    assert_eq!(d.capture.late_originals, 1, "{:?}", d.capture);
    assert!(!has(&d, K::NetworkLoss), "{:#?}", d.findings);
    // With a new ID the same segment is no late original (a retransmission).
    let d = held_segment(false);
    assert_eq!(d.capture.late_originals, 0);
}

#[test]
fn reordering_with_a_dsack_is_no_network_loss() {
    // The sender retransmitted the held segment; the original came after the ACK of the
    // retransmission and the receiver reported it with a D-SACK.
    let mut t = Script::new();
    t.handshake();
    t.at_ms(20);
    for _ in 0..2 {
        let base = t.next_seq(Dir::C2S);
        t.after_ms(5).client_burst(base, 5, MSS);
        t.after_ms(10).server_acks(AUTO);
    }
    let b = t.next_seq(Dir::C2S);
    t.after_ms(5).client_sends(b, MSS).not_captured();
    let n = t.entries().len();
    let top = b + 5 * MSS;
    t.client_burst(b + MSS, 4, MSS);
    let held_id = t.entries()[n].spec.ip_id - 1;
    t.after_ms(0.05)
        .server_acks(b)
        .sack(&[(b + MSS, top)])
        .times_every_ms(3, 0.01);
    t.after_ms(5).client_sends(b, MSS); // the fast retransmission, a new ID
    t.after_ms(0.05).server_acks(top);
    t.after_ms(20)
        .client_sends(b, MSS)
        .with(|s| s.ip_id = held_id);
    t.after_ms(0.05).server_acks(top).sack(&[(b, b + MSS)]); // D-SACK
    let d = run(&t.frames());
    assert!(!has(&d, K::NetworkLoss), "{:#?}", d.findings);
    assert!(has(&d, K::SpuriousRetransmission), "{:#?}", d.findings);
}

#[test]
fn snap_length_is_counted() {
    let mut t = Script::new();
    t.handshake();
    t.at_ms(20).client_sends(1, MSS).snaplen(100);
    t.after_ms(10).server_acks(AUTO);
    let d = run(&t.frames());
    assert_eq!(d.capture.snaplen.truncated_segments, 1);
    // 100 bytes less Ethernet (14), IPv4 (20) and TCP with timestamps (32).
    assert_eq!(d.capture.snaplen.captured_payload_max, 34);
}

#[test]
fn facts_add_up_over_captures() {
    let t = bulk_with_one_loss(2);
    let once = t.frames();
    let mut d = run(&doubled(&once, 0, 0));
    let other = run(&doubled(&once, 0, 1));
    d.merge(other);
    assert_eq!(d.capture.duplicate_frames, 2 * once.len() as u64);
    assert_eq!(d.capture.reforwarded_frames, once.len() as u64);
}

#[test]
fn copies_found_before_and_after_the_table_exists() {
    let seg_at = |ts: i64, seq: u64, len: u32, flags: u16| SegmentAnalysis {
        ts: Timestamp(ts),
        seq,
        len,
        tcp_flags: flags,
        ..seg()
    };
    let det = |ip_id: u16, ttl: u8, tsval: Option<u32>| SegmentDetail {
        ip_id,
        ttl,
        timestamps: tsval.map(|v| (v, 0)),
        ..SegmentDetail::default()
    };
    let mut f = ConnFacts::default();
    let rtt = || 1_000_000;
    // The direction's first frame, then its copy (compared with the first, no table yet).
    assert_eq!(
        f.observe(&seg_at(0, 1, 100, 0x18), &det(7, 64, None), rtt),
        Seen::New
    );
    assert_eq!(
        f.observe(&seg_at(10, 1, 100, 0x18), &det(7, 63, None), rtt),
        Seen::Copy
    );
    assert!(f.dirs[0].recent.is_none());
    // A second frame allocates the table; a copy of each frame is found in it, one with
    // another flag or length is not.
    assert_eq!(
        f.observe(&seg_at(20, 101, 100, 0x18), &det(8, 64, None), rtt),
        Seen::New
    );
    assert!(f.dirs[0].recent.is_some());
    assert_eq!(
        f.observe(&seg_at(30, 101, 100, 0x18), &det(8, 64, None), rtt),
        Seen::Copy
    );
    assert_eq!(
        f.observe(&seg_at(40, 1, 100, 0x18), &det(7, 64, None), rtt),
        Seen::Copy
    );
    assert_eq!(
        f.observe(&seg_at(50, 101, 100, 0x19), &det(8, 64, None), rtt),
        Seen::New
    );
    assert_eq!(
        f.observe(&seg_at(60, 101, 99, 0x19), &det(8, 64, None), rtt),
        Seen::New
    );
    assert_eq!((f.dirs[0].copies, f.dirs[0].reforwarded), (3, 1));
    // Without an ID: data with the same TSval within a round trip is a copy; without the
    // option, or a frame without data (all of whose fields may be zero, as an empty
    // slot's), is not.
    let mut f = ConnFacts::default();
    let ts1 = Some(5);
    assert_eq!(
        f.observe(&seg_at(0, 1, 100, 0x18), &det(0, 64, ts1), rtt),
        Seen::New
    );
    assert_eq!(
        f.observe(&seg_at(10, 1, 100, 0x18), &det(0, 64, ts1), rtt),
        Seen::Copy
    );
    assert_eq!(
        f.observe(&seg_at(20, 201, 100, 0x18), &det(0, 64, None), rtt),
        Seen::New
    );
    assert_eq!(
        f.observe(&seg_at(30, 201, 100, 0x18), &det(0, 64, None), rtt),
        Seen::New
    );
    let null = || SegmentAnalysis {
        seq: 0,
        ack: 0,
        tcp_flags: 0,
        ..seg_at(40, 0, 0, 0)
    };
    assert_eq!(f.observe(&null(), &det(0, 64, None), rtt), Seen::New);
    assert_eq!(f.observe(&null(), &det(0, 64, None), rtt), Seen::New);
    assert_eq!(f.dirs[0].copies, 1);
}
