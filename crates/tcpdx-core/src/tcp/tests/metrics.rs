//! ACK RTT, bytes in flight, flow summary statistics.

use tcpdx_testkit::Script;

use super::analyze;
use crate::analyzer::Analyzer;
use crate::config::AnalyzerConfig;
use crate::event::Event;

#[test]
fn ack_rtt_and_bytes_in_flight() {
    let mut t = Script::new();
    t.handshake();
    t.at_ms(20).server_burst(1, 3, 1000); // 4-6
    t.at_ms(35).client_acks(2001); // 7
    let rows = analyze(&t);
    assert_eq!(rows[3].bytes_in_flight, Some(1000));
    assert_eq!(rows[5].bytes_in_flight, Some(3000));
    assert_eq!(rows[6].acks_frame.map(|f| f.0), Some(5));
    assert_eq!(rows[6].ack_rtt_ns, Some(15_000_000));
    super::check_tshark(&t, "rtt_bif");
}

#[test]
fn flow_summary_counts_retransmissions_and_uses_karn() {
    let mut t = Script::new();
    t.handshake();
    t.at_ms(20).server_sends(1, 1000); // 4
    t.at_ms(30).client_acks(1001); // 5: RTT 10 ms
    t.at_ms(40).server_sends(1001, 1000); // 6
    t.at_ms(300).server_sends(1001, 1000); // 7: retransmission
    t.at_ms(310).client_acks(2001); // 8: ambiguous, no RTT sample
    let mut a = Analyzer::new(AnalyzerConfig::default());
    let mut ev: Vec<Event> = Vec::new();
    for f in t.frames() {
        a.handle_frame(&f.as_frame(), &mut ev);
    }
    a.handle_end(&mut ev);
    let Some(Event::Flow(f)) = ev.iter().find(|e| matches!(e, Event::Flow(_))) else {
        panic!("no flow")
    };
    let s2c = &f.dirs[1];
    assert_eq!(s2c.bytes, 3000);
    assert_eq!(s2c.unique_bytes, 2000);
    assert_eq!(s2c.retrans_bytes, 1000);
    let rtt = s2c.rtt.unwrap();
    assert_eq!(
        rtt.count, 1,
        "Karn's rule drops the retransmitted segment's sample"
    );
    assert_eq!(rtt.min_ns, 10_000_000);
    assert_eq!(s2c.mss, Some(1460));
    assert_eq!(s2c.window_scale, Some(7));
    assert!(s2c.sack_permitted);
}

/// Counts the summaries `handle_end` gives, asking for them or not.
struct Summaries {
    wanted: bool,
    flows: usize,
}

impl crate::event::EventSink for Summaries {
    fn flow(&mut self, _f: &crate::tcp::FlowSummary) {
        self.flows += 1;
    }
    fn needs_flows(&self) -> bool {
        self.wanted
    }
}

#[test]
fn flow_summaries_only_for_a_sink_that_reads_them() {
    let mut t = Script::new();
    t.handshake();
    t.at_ms(20).server_sends(1, 1000);
    for wanted in [true, false] {
        let mut a = Analyzer::new(AnalyzerConfig::default());
        let mut s = Summaries { wanted, flows: 0 };
        for f in t.frames() {
            a.handle_frame(&f.as_frame(), &mut s);
        }
        a.handle_end(&mut s);
        assert_eq!(s.flows, usize::from(wanted), "wanted: {wanted}");
    }
}
