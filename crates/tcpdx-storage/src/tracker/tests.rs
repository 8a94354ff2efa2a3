use tcpdx_core::{Analyzer, AnalyzerConfig};
use tcpdx_testkit::{Script, ScriptConfig, nfs};

use super::*;
use crate::transaction::Collect;

/// A conversation with an NFS server.
fn nfs() -> Script {
    Script::with(ScriptConfig {
        server_port: 2049,
        ..ScriptConfig::DEFAULT
    })
}

/// Runs `t` through an analyzer into a tracker; returns the tracker before `finish`.
fn track(t: &Script) -> Tracker<Collect> {
    let mut analyzer = Analyzer::new(AnalyzerConfig::default());
    let mut tracker = Tracker::new(StorageConfig::default(), Collect::default());
    for f in t.frames() {
        analyzer.handle_frame(&f.as_frame(), &mut tracker);
    }
    tracker
}

#[test]
fn a_connection_over_is_removed_and_still_counted() {
    let mut t = nfs();
    t.handshake();
    t.at_ms(20).client_sends_bytes(&nfs::read_call(7, 100));
    t.at_ms(30).server_sends_bytes(&nfs::read_reply(7, 100));
    t.at_ms(40).fin_from_client();
    t.at_ms(41).fin_from_server();
    let mut tracker = track(&t);
    assert!(tracker.conns.is_empty(), "removed at the second FIN");
    assert_eq!(tracker.stats().connections, 1);
    assert!(tracker.stats().reassembly.delivered_bytes > 0);
    tracker.finish();
    let got = tracker.into_sink();
    assert_eq!(got.transactions.len(), 1);
    assert!(got.transactions[0].reply.is_some());
}

#[test]
fn a_connection_closed_with_a_request_unanswered_is_kept_for_the_end() {
    let mut t = nfs();
    t.handshake();
    t.at_ms(20).client_sends_bytes(&nfs::read_call(7, 100));
    t.at_ms(40).fin_from_client();
    t.at_ms(41).fin_from_server();
    let mut tracker = track(&t);
    assert_eq!(tracker.conns.len(), 1);
    tracker.finish();
    let got = tracker.into_sink();
    assert_eq!(got.transactions.len(), 1);
    assert!(got.transactions[0].reply.is_none(), "reported unanswered");
}

#[test]
fn a_connection_with_one_fin_is_kept() {
    let mut t = nfs();
    t.handshake();
    t.at_ms(20).client_sends_bytes(&nfs::read_call(7, 100));
    t.at_ms(30).server_sends_bytes(&nfs::read_reply(7, 100));
    t.at_ms(40).fin_from_client();
    let tracker = track(&t);
    assert_eq!(tracker.conns.len(), 1);
}
