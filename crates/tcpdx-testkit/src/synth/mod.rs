//! The trace synthesiser: a deterministic model of a TCP sender, a receiver and the path
//! between them that writes what a capture at a chosen point would show (pcapng) plus the
//! model's exact labels (`truth.json`, the lab's schema `tcpdx-lab-truth/1`, lab/README.md).
//!
//! It exists for what no Linux stack in the lab can show (issue 3 item 6, DESIGN.md
//! "Validation"): a receiver that holds a lone segment's ACK for 100 or 200 ms, a sender that
//! restarts from one segment after every fast retransmission (See:
//! ../shared/cases/000_*.txt), Nagle holding the tail of a request until the peer's delayed
//! ACK. Everything is seeded: the same [`SynthConfig`] always gives the same bytes.
//!
//! The model (module `sim`): the client is the data sender (as in the lab's bulk scenarios);
//! it writes a bulk transfer or requests that the server answers. The sender runs slow start
//! and congestion avoidance (byte counting, RFC 5681), fast retransmit after three duplicate
//! ACKs with NewReno fast recovery (RFC 6582) or, with [`Recovery::RestartFromOne`], a restart
//! from one segment once the recovery completes; retransmission timeouts (RFC 6298, Karn);
//! optional Nagle (RFC 896). The receiver ACKs every `ack_every`-th segment and holds a lone
//! segment's ACK for its delayed-ACK timer (or ACKs at once), ACKs out-of-order data at once
//! with SACK blocks (RFC 2018) and advertises a fixed window. The path has a bottleneck rate
//! in the middle (a FIFO queue per direction), a one-way delay, and drops of chosen (or
//! random, seeded) data segments in the network or inside the receiving host.

mod scenario;
mod sim;
mod truth;

#[cfg(test)]
mod tests;

use std::io::{self, Write};
use std::path::Path;

use serde::Serialize;

pub use scenario::{SCENARIOS, scenario};
pub use truth::Truth;

use crate::frame::OwnedFrame;

/// How the sender reacts once a fast retransmission has repaired a loss.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Recovery {
    /// RFC 5681 / RFC 6582 NewReno: the window is halved and the sender goes on from there.
    NewReno,
    /// The sender halves ssthresh but restarts from one segment in slow start once the ACK
    /// covers the recovery point (case 000's NFS server, a Tahoe-like stack).
    RestartFromOne,
}

/// The data sender (the client).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SenderModel {
    /// Reaction to a fast retransmission.
    pub recovery: Recovery,
    /// Initial window in segments (RFC 6928: 10).
    pub initial_cwnd: u32,
    /// Initial slow-start threshold in segments (`None`: unset, slow start until the first
    /// loss). Linux's HyStart leaves slow start near the path's BDP; a fixed value keeps the
    /// model from building a queue of hundreds of segments before the first loss.
    pub initial_ssthresh: Option<u32>,
    /// Minimum retransmission timeout, ms (Linux 200, RFC 6298 1000).
    pub rto_min_ms: f64,
    /// Nagle's algorithm (RFC 896): hold a sub-MSS segment while data is unacknowledged.
    pub nagle: bool,
}

/// The data receiver (the server).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ReceiverModel {
    /// Delayed-ACK timer for a lone segment, ms; `None` ACKs every segment at once (quick ACK).
    pub delayed_ack_ms: Option<f64>,
    /// ACK at once when this many segments are unacknowledged (RFC 1122: 2).
    pub ack_every: u32,
    /// Advertised receive window, bytes (the application reads at once).
    pub rwnd_bytes: u32,
}

/// Where chosen drops happen.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DropSite {
    /// In the network, between the two capture points.
    Network,
    /// Inside the receiving host, after a receiver-side capture saw the segment.
    ReceiverHost,
}

/// The path between client and server.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PathModel {
    /// Bottleneck rate in each direction, bits/s (frames on the wire, headers included).
    pub rate_bps: f64,
    /// One-way delay in each direction, ms (half before the bottleneck, half after).
    pub owd_ms: f64,
    /// Data segments of the sender to drop, by 1-based transmission index (retransmissions
    /// count), like the lab relay's `--drop-nth`.
    pub drop_nth: Vec<u64>,
    /// Random drop probability of the sender's data segments (seeded).
    pub drop_prob: f64,
    /// Where drops happen.
    pub drop_site: DropSite,
    /// SYNs to drop before one gets through (each retry waits twice as long, from 1 s).
    pub drop_syns: u32,
}

/// What the applications do.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Workload {
    /// The client writes `bytes` at once and closes when all is acknowledged.
    Bulk {
        /// Payload bytes.
        bytes: u64,
    },
    /// The client writes a request of `request_bytes` in one write; the server answers with
    /// `response_bytes` after `think_ms`; the client sends the next request when the whole
    /// response has arrived, `requests` times.
    RequestResponse {
        /// Number of requests.
        requests: u32,
        /// Request size, bytes.
        request_bytes: u32,
        /// Response size, bytes.
        response_bytes: u32,
        /// Server think time, ms.
        think_ms: f64,
    },
}

/// Where the capture is taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CaptureAt {
    /// On the data sender's host (the client).
    Sender,
    /// On the data receiver's host (the server), before its drops inside the host.
    Receiver,
}

/// One synthesised scenario.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SynthConfig {
    /// Scenario name (the fixture directory).
    pub name: String,
    /// One line for `tcpdx-synth-trace list`.
    pub description: String,
    /// Seed of the random drops.
    pub seed: u64,
    /// Maximum segment size, bytes.
    pub mss: u32,
    /// Both ends offer SACK (RFC 2018); without it the receiver sends no SACK blocks.
    pub sack: bool,
    /// Sender model.
    pub sender: SenderModel,
    /// Receiver model.
    pub receiver: ReceiverModel,
    /// Path model.
    pub path: PathModel,
    /// Workload.
    pub workload: Workload,
    /// Capture point.
    pub capture: CaptureAt,
    /// Captured bytes per frame (headers only: 96 keeps Ethernet, IPv4, TCP and 3 SACK
    /// blocks).
    pub snaplen: u32,
    /// Capture misses: data segments of the sender (1-based transmission index) that the
    /// capture does not record although they were delivered (capture drops).
    pub capture_miss_nth: Vec<u64>,
    /// Catalogue kinds tcpdx must put first for this trace (checked by the tests).
    pub expect_top: Vec<String>,
}

/// A run of the model: the captured frames and the labels.
#[derive(Clone, Debug)]
pub struct SynthRun {
    /// Frames as the capture point saw them, numbered from 1.
    pub frames: Vec<OwnedFrame>,
    /// The labels, in the lab's truth.json schema.
    pub truth: Truth,
}

/// File name of the capture in a fixture directory.
pub const CAPTURE_FILE: &str = "capture.pcapng.gz";
/// File name of the labels in a fixture directory.
pub const TRUTH_FILE: &str = "truth.json";

/// Runs the model.
pub fn run(cfg: &SynthConfig) -> SynthRun {
    sim::Sim::new(cfg).run()
}

impl SynthRun {
    /// The capture as pcapng bytes (uncompressed).
    pub fn pcapng_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        crate::pcap_writer::write_pcapng(&mut out, &self.frames)
            .expect("writing to a Vec cannot fail");
        out
    }

    /// The labels as JSON text (ends with a newline).
    pub fn truth_json(&self) -> String {
        // Compact, like the lab's: thousands of samples stay small.
        let mut s = serde_json::to_string(&self.truth).expect("truth serialises");
        s.push('\n');
        s
    }

    /// Writes `dir/capture.pcapng.gz` and `dir/truth.json` (the directory is created).
    pub fn write_dir(&self, dir: &Path) -> io::Result<()> {
        std::fs::create_dir_all(dir)?;
        let f = std::fs::File::create(dir.join(CAPTURE_FILE))?;
        // mtime 0 and no file name: the same trace always gives the same header.
        let mut gz = flate2::GzBuilder::new()
            .mtime(0)
            .write(io::BufWriter::new(f), flate2::Compression::best());
        gz.write_all(&self.pcapng_bytes())?;
        gz.finish()?.flush()?;
        std::fs::write(dir.join(TRUTH_FILE), self.truth_json())
    }
}
