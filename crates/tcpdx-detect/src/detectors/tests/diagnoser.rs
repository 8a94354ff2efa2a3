//! The diagnoser across connections: listing bounds, shares merged, early diagnosis.

use super::*;

#[test]
fn beyond_the_listing_bound_connections_are_counted_not_listed() {
    // 12 connections (different client ports): every third waits 1 s for its SYN's
    // retransmission (a setup finding with a cost), the others are clean.
    let mut t = Script::new();
    for i in 0..12u16 {
        let mut cfg = t.config().clone();
        cfg.client_port = 40_000 + i;
        t.add_connection(cfg);
        let start = f64::from(i) * 2000.0;
        t.at_ms(start).syn();
        if i % 3 == 0 {
            t.at_ms(start + 1000.0).syn();
        }
        t.after_ms(10).syn_ack();
        t.handshake_ack();
        t.after_ms(5).client_sends(1, 100);
        t.after_ms(10).server_acks(AUTO);
    }
    let run = |d: Diagnoser| run_with(&t, d);
    let all = run(Diagnoser::new());
    let few = run(Diagnoser::with_max_listed(4));
    assert_eq!(all.connections.len(), 12);
    assert_eq!(few.connections.len(), 4);
    assert_eq!(few.unlisted.connections, 8);
    // The four kept are the four with a costly finding.
    let setup = |d: &Diagnosis| {
        d.findings
            .iter()
            .filter(|f| f.kind == K::HandshakeAndSetup && f.severity > Severity::Info)
            .count()
    };
    assert_eq!(setup(&all), 4);
    assert_eq!(setup(&few), 4);
    // Nothing of the time is lost.
    assert!((few.time_budget.seconds - all.time_budget.seconds).abs() < 1e-9);
    assert_eq!(few.time_budget.states, all.time_budget.states);
    let folded: u64 = few.unlisted.findings.values().map(|k| k.count).sum();
    assert_eq!(
        few.findings.len() as u64 + folded,
        all.findings.len() as u64,
        "every finding is listed or counted"
    );
    // A byte bound of a few connections' worth lists the costliest that fit.
    let fit = run(Diagnoser::with_listing_bounds(100, 5_000));
    let listed = fit.connections.len();
    assert!((1..12).contains(&listed), "{listed} listed");
    assert_eq!(listed as u64 + fit.unlisted.connections, 12);
    assert_eq!(setup(&fit), listed.min(4), "the costly ones first");
    assert!((fit.time_budget.seconds - all.time_budget.seconds).abs() < 1e-9);
}

/// Feeds a diagnoser and notes the streams its analyzer opens.
struct Opening<'a> {
    diag: &'a mut Diagnoser,
    opened: Vec<u32>,
}

impl tcpdx_core::EventSink for Opening<'_> {
    fn segment_detail(&mut self, a: &tcpdx_core::SegmentAnalysis, d: &tcpdx_core::SegmentDetail) {
        self.diag.segment_detail(a, d);
    }
    fn flow_evicted(&mut self, f: &tcpdx_core::FlowSummary) {
        self.diag.flow_evicted(f);
    }
    fn stream_opened(&mut self, stream: tcpdx_core::StreamId, _frame: tcpdx_wire::FrameNo) {
        self.opened.push(stream.0);
    }
}

#[test]
fn diagnosers_over_shares_of_the_connections_merge_into_the_single_diagnosis() {
    use tcpdx_core::FrameInput;
    // 12 connections, a third of them with a costly finding.
    let mut t = Script::new();
    for i in 0..12u16 {
        let mut cfg = t.config().clone();
        cfg.client_port = 40_000 + i;
        t.add_connection(cfg);
        let start = f64::from(i % 6) * 700.0;
        t.at_ms(start).syn();
        if i % 3 == 0 {
            t.at_ms(start + 1000.0).syn();
        }
        t.after_ms(10).syn_ack();
        t.handshake_ack();
        t.after_ms(5).client_sends(1, 100);
        t.after_ms(10).server_acks(AUTO);
    }
    let frames = t.frames();
    // Bounds on the count, then on the bytes (a few connections' worth).
    let bounds = [
        (100, usize::MAX),
        (4, usize::MAX),
        (3, usize::MAX),
        (100, 2_000),
        (100, 4_000),
    ];
    for (max_listed, max_bytes) in bounds {
        let config = AnalyzerConfig::default;
        let mut one = Diagnoser::with_listing_bounds(max_listed, max_bytes);
        let mut a = Analyzer::new(config());
        for f in &frames {
            a.handle_frame(&f.as_frame(), &mut one);
        }
        a.handle_end(&mut one);
        let end = frames.last().unwrap().ts.0 + 2 * crate::CLOSED_IDLE_NS;
        one.sweep(end);
        let want = one.finish();

        // Three shares by client port; each analyzer numbers its streams from 0, the
        // capture's numbers follow the order the streams open in.
        let n = 3;
        let mut diags: Vec<Diagnoser> = (0..n)
            .map(|_| Diagnoser::with_listing_bounds(max_listed, max_bytes).swept_by_caller())
            .collect();
        let mut ans: Vec<Analyzer> = (0..n).map(|_| Analyzer::new(config())).collect();
        let mut maps: Vec<Vec<u32>> = vec![Vec::new(); n];
        let mut next = 0;
        for f in &frames {
            let frame = f.as_frame();
            let FrameInput::Segment(seg) = FrameInput::classify(&frame) else {
                panic!("all frames are segments");
            };
            let w = usize::from(seg.src.port.min(seg.dst.port)) % n;
            let mut sink = Opening {
                diag: &mut diags[w],
                opened: Vec::new(),
            };
            ans[w].handle_frame(&frame, &mut sink);
            for _ in sink.opened {
                maps[w].push(next);
                next += 1;
            }
        }
        let mut merged: Option<crate::Listing> = None;
        for ((mut d, mut a), map) in diags.into_iter().zip(ans).zip(&maps) {
            a.handle_end(&mut d);
            d.sweep(end);
            let mut l = d.into_listing();
            l.renumber(|s| map[s as usize]);
            match &mut merged {
                Some(m) => m.merge(l),
                None => merged = Some(l),
            }
        }
        let got = merged.unwrap().into_diagnosis();
        assert!(
            want.unlisted.connections > 0 || (max_listed, max_bytes) == (100, usize::MAX),
            "folding is exercised: {} listed, {} not",
            want.connections.len(),
            want.unlisted.connections
        );
        assert!(!want.connections.is_empty(), "something is listed");
        assert_eq!(got, want, "max_listed {max_listed}, max_bytes {max_bytes}");
    }
}

#[test]
fn a_closed_connection_is_diagnosed_early_and_its_state_freed() {
    // Connection 1 transfers and closes; connection 2 then runs for over a second and more
    // than one sweep interval of segments.
    let (t, _) = Script::closed_then_busy(crate::CLOSED_SWEEP_EVERY, 0.1);
    let mut a = Analyzer::new(AnalyzerConfig::default());
    let mut d = Diagnoser::new();
    for f in t.frames() {
        a.handle_frame(&f.as_frame(), &mut d);
    }
    let live: Vec<u32> = d.trackers().map(|c| c.stream).collect();
    assert_eq!(live, vec![1], "the closed connection's state is freed");
    a.handle_end(&mut d);
    let out = d.finish();
    let streams: Vec<u32> = out.connections.iter().map(|c| c.stream).collect();
    assert_eq!(
        streams,
        vec![0, 1],
        "both connections are diagnosed, in stream order"
    );
}
