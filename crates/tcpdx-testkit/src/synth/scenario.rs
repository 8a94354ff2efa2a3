//! The named scenarios whose outputs are committed under `tests/data/synth/<name>/`.
//!
//! Each one isolates a mechanism the lab's Linux stacks cannot show (or shows only with a
//! 40 ms timer), with exact labels. Pairs that differ only in the receiver's delayed ACK
//! (`*_quickack`) measure what the what-if projection must predict.

use super::{
    CaptureAt, DropSite, PathModel, ReceiverModel, Recovery, SenderModel, SynthConfig, Workload,
};

/// Builds one scenario's configuration.
pub type Constructor = fn() -> SynthConfig;

/// Every scenario: name and constructor.
pub const SCENARIOS: &[(&str, Constructor)] = &[
    ("case000_synth_delack200", || {
        case000("case000_synth_delack200", Some(200.0), CaptureAt::Sender)
    }),
    ("case000_synth_delack100", || {
        case000("case000_synth_delack100", Some(100.0), CaptureAt::Sender)
    }),
    ("case000_synth_quickack", || {
        case000("case000_synth_quickack", None, CaptureAt::Sender)
    }),
    ("case000_synth_receiver", || {
        case000("case000_synth_receiver", Some(100.0), CaptureAt::Receiver)
    }),
    ("nagle_delack_stall", || {
        nagle("nagle_delack_stall", Some(200.0))
    }),
    ("nagle_delack_quickack", || {
        nagle("nagle_delack_quickack", None)
    }),
    ("syn_retry", syn_retry),
    ("capture_drops", capture_drops),
];

/// The scenario called `name`.
pub fn scenario(name: &str) -> Option<SynthConfig> {
    SCENARIOS.iter().find(|(n, _)| *n == name).map(|(_, f)| f())
}

/// Data segments between two chosen drops in the case 000 traces: at 50 Mb/s about 140 ms of
/// sending per loss, so a 100 ms stall costs about 40% as in the case (910 -> 588 MB/s).
const CASE000_SPACING: u64 = 600;
/// Chosen drops in the case 000 traces.
const CASE000_DROPS: u64 = 6;

fn base(name: &str, description: &str) -> SynthConfig {
    SynthConfig {
        name: name.into(),
        description: description.into(),
        seed: 7,
        mss: 1448,
        sack: true,
        sender: SenderModel {
            recovery: Recovery::NewReno,
            initial_cwnd: 10,
            initial_ssthresh: None,
            // Windows' minimum RTO: above a 200 ms delayed-ACK timer plus the RTT, so the
            // stalls end with the delayed ACK, not with a timeout.
            rto_min_ms: 300.0,
            nagle: false,
        },
        receiver: ReceiverModel {
            delayed_ack_ms: Some(40.0),
            ack_every: 2,
            rwnd_bytes: 4 << 20,
        },
        path: PathModel {
            rate_bps: 50e6,
            owd_ms: 5.0,
            drop_nth: Vec::new(),
            drop_prob: 0.0,
            drop_site: DropSite::Network,
            drop_syns: 0,
        },
        workload: Workload::Bulk { bytes: 1 << 20 },
        capture: CaptureAt::Sender,
        snaplen: 96,
        capture_miss_nth: Vec::new(),
        expect_top: Vec::new(),
    }
}

/// Case 000: isolated losses repaired by fast retransmission; the sender restarts from one
/// segment and the receiver holds that lone segment's ACK for its delayed-ACK timer.
fn case000(name: &str, delack_ms: Option<f64>, capture: CaptureAt) -> SynthConfig {
    let timer = delack_ms.map_or("no delayed ACK (quick ACK)".to_string(), |ms| {
        format!("{ms:.0} ms delayed ACK")
    });
    let point = match capture {
        CaptureAt::Sender => "captured at the sender",
        CaptureAt::Receiver => "captured at the receiver",
    };
    let mut c = base(
        name,
        &format!(
            "case 000: {CASE000_DROPS} single losses, fast retransmit, restart from one \
             segment, {timer}; {point}"
        ),
    );
    c.sender.recovery = Recovery::RestartFromOne;
    // About the path's BDP (50 Mb/s x 10 ms = 43 segments), as HyStart would leave it.
    c.sender.initial_ssthresh = Some(48);
    c.receiver.delayed_ack_ms = delack_ms;
    c.path.drop_nth = (1..=CASE000_DROPS).map(|i| i * CASE000_SPACING).collect();
    c.workload = Workload::Bulk {
        bytes: (CASE000_DROPS + 1) * CASE000_SPACING * u64::from(c.mss),
    };
    c.capture = capture;
    c.expect_top = if delack_ms.is_some() {
        vec!["delack-slowstart-stall".into()]
    } else {
        vec!["network-loss".into()]
    };
    c
}

/// Nagle holds the sub-MSS tail of each request until the server's delayed ACK of the
/// first, full segment: every request/response turn waits one timer.
fn nagle(name: &str, delack_ms: Option<f64>) -> SynthConfig {
    let timer = delack_ms.map_or("quick ACK".to_string(), |ms| {
        format!("{ms:.0} ms delayed ACK")
    });
    let mut c = base(
        name,
        &format!("Nagle on, 2000-byte requests (MSS + 552-byte tail), 300-byte answers, {timer}"),
    );
    c.sender.nagle = true;
    c.receiver.delayed_ack_ms = delack_ms;
    c.path.rate_bps = 100e6;
    c.path.owd_ms = 1.0;
    c.workload = Workload::RequestResponse {
        requests: 40,
        request_bytes: 2000,
        response_bytes: 300,
        think_ms: 0.0,
    };
    c.expect_top = if delack_ms.is_some() {
        vec!["nagle-delack-stall".into()]
    } else {
        Vec::new()
    };
    c
}

/// The first SYN is lost: the connection starts one initial RTO (1 s) late.
fn syn_retry() -> SynthConfig {
    let mut c = base(
        "syn_retry",
        "first SYN lost, retried after 1 s; short clean bulk",
    );
    c.path.drop_syns = 1;
    c.workload = Workload::Bulk { bytes: 256 << 10 };
    c.expect_top = vec!["handshake-and-setup".into()];
    c
}

/// The capture misses a few delivered segments (capture drops): the receiver ACKs data the
/// capture never saw, and nothing is retransmitted.
fn capture_drops() -> SynthConfig {
    let mut c = base(
        "capture_drops",
        "clean bulk; the capture misses 3 delivered data segments",
    );
    c.capture_miss_nth = vec![200, 450, 700];
    c.expect_top = vec!["capture-quality".into()];
    c
}
