//! `SegmentDetail`: SACK blocks in the peer's relative space, handshake options.

use tcpdx_testkit::Script;

use crate::analyzer::Analyzer;
use crate::config::AnalyzerConfig;
use crate::event::{EventSink, SegmentAnalysis, SegmentDetail};

/// Collects every (row, detail) pair.
#[derive(Default)]
struct Details(Vec<(SegmentAnalysis, SegmentDetail)>);

impl EventSink for Details {
    fn segment_detail(&mut self, a: &SegmentAnalysis, d: &SegmentDetail) {
        self.0.push((*a, *d));
    }
}

#[test]
fn sack_blocks_are_relative_to_the_peer_and_options_are_kept() {
    let mut t = Script::new();
    t.handshake(); // 1-3
    t.at_ms(20).server_burst(1, 4, 1000); // 4-7, 4 lost
    t.at_ms(30).client_acks(1).sack(&[(1001, 4001)]); // 8
    let mut a = Analyzer::new(AnalyzerConfig::default());
    let mut d = Details::default();
    for f in t.frames() {
        a.handle_frame(&f.as_frame(), &mut d);
    }
    let (syn, syn_d) = &d.0[0];
    assert_eq!(syn.frame.0, 1);
    assert!(syn_d.mss.is_some() && syn_d.sack_permitted);
    let (ack, ack_d) = &d.0[7];
    assert_eq!(ack.ack, 1);
    assert_eq!(ack_d.sack_blocks(), &[(1001, 4001)]);
}

#[test]
fn plain_rows_still_reach_segment_only_sinks() {
    let mut t = Script::new();
    t.handshake();
    let mut a = Analyzer::new(AnalyzerConfig::default());
    let mut v: Vec<crate::event::Event> = Vec::new();
    for f in t.frames() {
        a.handle_frame(&f.as_frame(), &mut v);
    }
    assert_eq!(v.len(), 3);
}
