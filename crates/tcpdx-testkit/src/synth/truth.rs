//! The synthesiser's labels in the lab's `truth.json` schema (`tcpdx-lab-truth/1`,
//! lab/README.md), so the same tests read lab runs and synthesised traces. All times are
//! integers, nanoseconds since the epoch on the capture's clock, taken at the data sender
//! (where the lab's kernel tracepoints fire); sequence numbers are absolute.
//!
//! Synthesised traces add `params.synth = true` and one episode list the lab cannot record:
//! `episodes.nagle_stalls` (a sub-MSS segment held by Nagle for >= 20 ms).

use serde::Serialize;

use super::SynthConfig;

/// The whole document.
#[derive(Clone, Debug, Serialize)]
pub struct Truth {
    /// `"tcpdx-lab-truth/1"`.
    pub schema: &'static str,
    /// Scenario name.
    pub scenario: String,
    /// Always false: synthesised traces have one size.
    pub short: bool,
    /// The recipe.
    pub params: Params,
    /// Clock description.
    pub clock: Clock,
    /// Addresses.
    pub topology: Topology,
    /// Files of the run.
    pub files: Files,
    /// Workload results.
    pub workload: WorkloadResult,
    /// Counters (lab-only ones are null or empty).
    pub counters: Counters,
    /// Health of the run (always ok: the model drops nothing unintended).
    pub health: Health,
    /// Injected impairments.
    pub injected: Injected,
    /// The data connection.
    pub connections: Vec<Connection>,
}

/// `params`: the synthesiser's config plus the lab's `capture` and `name` keys.
#[derive(Clone, Debug, Serialize)]
pub struct Params {
    /// Scenario name.
    pub name: String,
    /// Capture point (`client` = the sender, `server` = the receiver).
    pub capture: &'static str,
    /// Always true.
    pub synth: bool,
    /// Seed.
    pub seed: u64,
    /// Snaplen.
    pub snaplen: u32,
    /// The full model configuration.
    pub model: SynthConfig,
}

/// `clock`.
#[derive(Clone, Debug, Serialize)]
pub struct Clock {
    /// `"synth"`.
    pub trace_clock: &'static str,
    /// 0.
    pub tai_minus_realtime_ns: i64,
    /// What the times are.
    pub time_base: &'static str,
}

/// `topology`.
#[derive(Clone, Debug, Serialize)]
pub struct Topology {
    /// Client address.
    pub client: String,
    /// Server address.
    pub server: String,
    /// MTU (MSS + 40).
    pub mtu: u32,
    /// `"synth"`.
    pub prefix: &'static str,
}

/// `files`.
#[derive(Clone, Debug, Serialize)]
pub struct Files {
    /// The one capture.
    pub captures: Vec<CaptureFile>,
    /// No relay log.
    pub relay_log: Option<String>,
    /// No trace.
    pub trace: Option<String>,
}

/// `files.captures[]`.
#[derive(Clone, Debug, Serialize)]
pub struct CaptureFile {
    /// File name.
    pub file: &'static str,
    /// `client` or `server`.
    pub point: &'static str,
    /// Always true.
    pub primary: bool,
    /// Snaplen.
    pub snaplen: u32,
    /// Frames captured and missed.
    pub stats: CaptureStats,
}

/// `files.captures[].stats`.
#[derive(Clone, Debug, Serialize)]
pub struct CaptureStats {
    /// Frames in the file.
    pub captured: u64,
    /// Frames the capture missed (the config's `capture_miss_nth`).
    pub dropped_by_kernel: u64,
}

/// `workload`.
#[derive(Clone, Debug, Serialize)]
pub struct WorkloadResult {
    /// The data sender's view.
    pub send: WorkloadSide,
}

/// `workload.send`.
#[derive(Clone, Debug, Serialize)]
pub struct WorkloadSide {
    /// `"send"`.
    pub role: &'static str,
    /// Payload bytes the sender's application wrote.
    pub bytes: u64,
    /// From the first data segment to the ACK of the last byte, seconds.
    pub secs: f64,
    /// `bytes * 8 / secs / 1e6`.
    pub mbit_s: f64,
}

/// `counters` (only the relay-like drop count applies).
#[derive(Clone, Debug, Serialize)]
pub struct Counters {
    /// Segments dropped by the model.
    pub model_drops: u64,
    /// Lab-only.
    pub tbf_drops: Option<u64>,
    /// Lab-only.
    pub nft_drops: Option<u64>,
}

/// `health`.
#[derive(Clone, Debug, Serialize)]
pub struct Health {
    /// True.
    pub ok: bool,
    /// Empty.
    pub problems: Vec<String>,
}

/// `injected`.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Injected {
    /// Dropped data segments.
    pub drops: Vec<Drop>,
    /// None.
    pub reorders: Vec<Drop>,
    /// None.
    pub blackouts: Vec<Drop>,
}

/// `injected.drops[]`.
#[derive(Clone, Debug, Serialize)]
pub struct Drop {
    /// When the segment left the sender.
    pub t_ns: i64,
    /// `"drop"` (network) or `"drop_host"` (inside the receiving host).
    pub ev: &'static str,
    /// 1-based data-segment transmission index.
    pub n: u64,
    /// `"c2s"`.
    pub dir: &'static str,
    /// Client port.
    pub sport: u16,
    /// Server port.
    pub dport: u16,
    /// Absolute sequence number.
    pub seq: u32,
    /// Payload length.
    pub len: u32,
}

/// `connections[]`.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Connection {
    /// `ip:port` of the data sender.
    pub sender: String,
    /// `ip:port` of the data receiver.
    pub receiver: String,
    /// Payload bytes the sender put on the wire (retransmissions included).
    pub bytes_sent: u64,
    /// MSS.
    pub mss: u32,
    /// Every retransmitted segment.
    pub retransmissions: Vec<Retransmission>,
    /// Number of retransmitted segments.
    pub retransmitted_segments: u64,
    /// Always 0.
    pub failed_retransmit_attempts: u64,
    /// Congestion states (Open, Recovery, Loss) as intervals.
    pub cong_states: Vec<CongState>,
    /// The sender's state before each ACK it processed (decimated to <= 4000).
    pub samples: Vec<Sample>,
    /// Samples before decimation.
    pub samples_total: u64,
    /// Smallest smoothed RTT, µs.
    pub min_srtt_us: u64,
    /// Expected pathology episodes.
    pub episodes: Episodes,
}

/// `connections[].retransmissions[]`.
#[derive(Clone, Debug, Serialize)]
pub struct Retransmission {
    /// When the sender sent it.
    pub t_ns: i64,
    /// Absolute sequence number.
    pub seq: u32,
    /// Segments (always 1).
    pub segments: u32,
    /// When the capture recorded it (null: not captured).
    pub pcap_t_ns: Option<i64>,
    /// Always false (the model does not reorder).
    pub reordered_original: bool,
}

/// `connections[].cong_states[]`.
#[derive(Clone, Debug, Serialize)]
pub struct CongState {
    /// `Open`, `Recovery` or `Loss`.
    pub state: &'static str,
    /// Entry.
    pub start_ns: i64,
    /// Exit.
    pub end_ns: i64,
}

/// `connections[].samples[]`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Sample {
    /// When the ACK arrived at the sender.
    pub t_ns: i64,
    /// Congestion window, segments.
    pub cwnd: u32,
    /// Slow-start threshold, segments (2147483647 = not set).
    pub ssthresh: u32,
    /// Smoothed RTT, µs.
    pub srtt_us: u64,
    /// Peer's window, bytes.
    pub snd_wnd: u64,
    /// snd_nxt - snd_una, bytes.
    pub inflight: u64,
}

/// `connections[].episodes`.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Episodes {
    /// Retransmission timeouts.
    pub rtos: Vec<Rto>,
    /// One segment in flight (cwnd 1) whose ACK came >= one RTT + 20 ms later.
    pub delack_pauses: Vec<DelackPause>,
    /// Recovery/Loss episodes with >= 3 retransmitted segments.
    pub burst_losses: Vec<BurstLoss>,
    /// Congestion avoidance between losses (cwnd >= ssthresh for >= 4 RTTs).
    pub ca_growth: Vec<CaGrowth>,
    /// None (the model's window never closes).
    pub zero_windows: Vec<Interval>,
    /// Every ssthresh change.
    pub ssthresh_changes: Vec<SsthreshChange>,
    /// None (lab server stalls).
    pub stalls: Vec<Interval>,
    /// Sub-MSS segments Nagle held for >= 20 ms (synthesiser only).
    pub nagle_stalls: Vec<NagleStall>,
}

/// `episodes.rtos[]`.
#[derive(Clone, Debug, Serialize)]
pub struct Rto {
    /// Entry into Loss (the timer fired).
    pub start_ns: i64,
    /// Back to Open.
    pub end_ns: i64,
    /// First ACK advancing snd_una afterwards.
    pub first_ack_ns: Option<i64>,
    /// cwnd at that ACK.
    pub cwnd_at_ack: Option<u32>,
    /// Last ACK before the timeout (synthesiser only: where the silence began).
    pub last_ack_ns: i64,
}

/// `episodes.delack_pauses[]`.
#[derive(Clone, Debug, Serialize)]
pub struct DelackPause {
    /// The lone segment left the sender.
    pub start_ns: i64,
    /// Its ACK arrived.
    pub end_ns: i64,
    /// `end - start`.
    pub length_ns: i64,
    /// Length minus the path RTT (the receiver's hold time).
    pub excess_ns: i64,
    /// 1.
    pub inflight_segments: u32,
}

/// `episodes.burst_losses[]`.
#[derive(Clone, Debug, Serialize)]
pub struct BurstLoss {
    /// Entry into Recovery/Loss.
    pub start_ns: i64,
    /// Back to Open.
    pub end_ns: i64,
    /// Segments retransmitted in the episode.
    pub retransmitted_segments: u32,
    /// `Recovery` or `Loss`.
    pub state: &'static str,
}

/// `episodes.ca_growth[]`.
#[derive(Clone, Debug, Serialize)]
pub struct CaGrowth {
    /// Start.
    pub start_ns: i64,
    /// End.
    pub end_ns: i64,
    /// cwnd at the start.
    pub cwnd_start: u32,
    /// cwnd at the end.
    pub cwnd_end: u32,
    /// Length in RTTs.
    pub rtts: f64,
    /// Growth per RTT (Reno ~1).
    pub segments_per_rtt: f64,
}

/// A plain interval.
#[derive(Clone, Debug, Serialize)]
pub struct Interval {
    /// Start.
    pub start_ns: i64,
    /// End.
    pub end_ns: i64,
}

/// `episodes.ssthresh_changes[]`.
#[derive(Clone, Debug, Serialize)]
pub struct SsthreshChange {
    /// When.
    pub t_ns: i64,
    /// Old value (2147483647 = not set).
    pub from: u32,
    /// New value.
    pub to: u32,
    /// cwnd at the change.
    pub cwnd: u32,
    /// Always false.
    pub after_spurious: bool,
}

/// `episodes.nagle_stalls[]`.
#[derive(Clone, Debug, Serialize)]
pub struct NagleStall {
    /// The application wrote the tail; Nagle held it.
    pub start_ns: i64,
    /// The tail left the sender.
    pub end_ns: i64,
    /// `end - start`.
    pub length_ns: i64,
    /// Length minus the path RTT (the receiver's hold time).
    pub excess_ns: i64,
}
