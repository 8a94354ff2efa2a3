//! Detector scenarios: hand-built conversations (tcpdx-testkit scripts) through the core's
//! analyzer into the diagnoser. The client sends the data in most scenarios, so the
//! script's vantage point (the client's host) is next to the sender, as in the lab's
//! primary captures.

use tcpdx_core::{Analyzer, AnalyzerConfig};
use tcpdx_testkit::{AUTO, C2S_DATA, Dir, Script, SegSpec};

use crate::finding::{Finding, FindingKind as K, Severity};
use crate::{Diagnoser, Diagnosis};

const MSS: u32 = 1448;

mod application_limited;
mod capture_quality;
mod cwnd_collapse;
mod delack_slowstart_stall;
mod diagnoser;
mod fixed_duration_stall;
mod handshake_and_setup;
mod nagle_delack_stall;
mod network_loss;
mod path_limited;
mod receiver_host_drops;
mod receiver_window_limited;
mod rto_stall;
mod sender_limited;
mod spurious_retransmission;

/// `t` fed through an analyzer into `d`, diagnosed.
fn run_with(t: &Script, mut d: Diagnoser) -> Diagnosis {
    let mut a = Analyzer::new(AnalyzerConfig::default());
    for f in t.frames() {
        a.handle_frame(&f.as_frame(), &mut d);
    }
    a.handle_end(&mut d);
    d.finish()
}

/// The diagnosis of `t`; the same with every round spilled to the store and read back on
/// each walk (checked here, so that every scenario checks it).
fn diagnose(t: &Script) -> Diagnosis {
    let run = |d: Diagnoser| run_with(t, d);
    let want = run(Diagnoser::new());
    let spill = std::sync::Arc::new(crate::Spill::new(
        Box::<crate::MemStore>::default(),
        crate::SpillPolicy::tiny(),
    ));
    let spilled = run(Diagnoser::new().spilling_to(spill.clone()));
    assert_eq!(want, spilled, "spilling changed the diagnosis");
    assert!(spill.take_error().is_none());
    assert_eq!(
        spill.live_blobs(),
        0,
        "every blob freed after the diagnosis"
    );
    want
}

#[track_caller]
fn find(d: &Diagnosis, kind: K) -> &Finding {
    d.findings
        .iter()
        .find(|f| f.kind == kind)
        .unwrap_or_else(|| panic!("no {} in {:#?}", kind.as_str(), d.findings))
}

fn roles(f: &Finding) -> Vec<(u64, &str)> {
    f.evidence
        .iter()
        .map(|e| (e.frame, e.role.as_ref()))
        .collect()
}

/// One round trip of the client sending `n` segments and the server acknowledging them
/// all one RTT (10 ms) later.
fn round(t: &mut Script, n: u32) {
    let seq = t.next_seq(Dir::C2S);
    t.client_burst(seq, n, MSS);
    t.after_ms(10).server_acks(AUTO);
}
