//! Per-connection statistics for `tcpdx flows`: counts, goodput, RTT (Karn's rule),
//! options, window limits. Bounded memory: RTT samples go into a fixed-size reservoir.

use tcpdx_wire::Timestamp;

use crate::flow::{Endpoint, StreamId};

/// RTT samples of one direction: exact min/max/count, quantiles from a bounded reservoir.
#[derive(Clone, Debug, Default)]
pub struct RttSamples {
    samples: Vec<i64>,
    count: u64,
    min: Option<i64>,
    max: Option<i64>,
    rng: u64,
    /// Median and p95 taken when the reservoir was freed ([`Self::freeze`]); samples added
    /// later still count in `count`, `min` and `max`.
    frozen: Option<(i64, i64)>,
}

impl RttSamples {
    /// No sample.
    pub const EMPTY: Self = Self {
        samples: Vec::new(),
        count: 0,
        min: None,
        max: None,
        rng: 0,
        frozen: None,
    };
    /// Adds one sample (nanoseconds); keeps at most `cap` for quantiles (reservoir sampling).
    pub fn add(&mut self, ns: i64, cap: usize) {
        self.count += 1;
        self.min = Some(self.min.map_or(ns, |m| m.min(ns)));
        self.max = Some(self.max.map_or(ns, |m| m.max(ns)));
        if self.frozen.is_some() {
            return;
        }
        if self.samples.len() < cap {
            self.samples.push(ns);
            return;
        }
        // Deterministic xorshift so runs are reproducible.
        self.rng ^= self.rng << 13 ^ 0x9e37_79b9_7f4a_7c15;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        // Uniform in 0..count by multiply-shift: a 64-bit division took ~40 cycles per
        // sample, 6% of a bulk capture's analysis.
        let j = ((u128::from(self.rng) * u128::from(self.count)) >> 64) as usize;
        if let Some(s) = self.samples.get_mut(j) {
            *s = ns;
        }
    }
    /// Number of samples seen.
    pub fn count(&self) -> u64 {
        self.count
    }
    /// Summary: min, median, p95, max.
    pub fn summary(&self) -> Option<RttSummary> {
        let (min, max) = (self.min?, self.max?);
        let (median_ns, p95_ns) = match self.frozen {
            Some(q) => q,
            None => {
                let mut s = self.samples.clone();
                s.sort_unstable();
                // An empty reservoir (capacity 0) falls back to the exact extremes.
                let q = |p: f64| {
                    let i = (s.len().saturating_sub(1) as f64 * p).round() as usize;
                    s.get(i).copied().unwrap_or(if p < 0.5 { min } else { max })
                };
                (q(0.5), q(0.95))
            }
        };
        Some(RttSummary {
            count: self.count,
            min_ns: min,
            median_ns,
            p95_ns,
            max_ns: max,
        })
    }
    /// True once [`Self::freeze`] freed the reservoir.
    pub fn is_frozen(&self) -> bool {
        self.frozen.is_some()
    }
    /// Frees the reservoir, keeping its quantiles (connections closed or expired: later
    /// samples, rare there, update the count and extremes only).
    pub fn freeze(&mut self) -> Option<RttSummary> {
        let s = self.summary();
        if let Some(sum) = &s {
            self.frozen = Some((sum.median_ns, sum.p95_ns));
        }
        self.samples = Vec::new();
        s
    }
}

/// RTT statistics of a direction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RttSummary {
    /// Number of samples.
    pub count: u64,
    /// Minimum.
    pub min_ns: i64,
    /// Median.
    pub median_ns: i64,
    /// 95th percentile.
    pub p95_ns: i64,
    /// Maximum.
    pub max_ns: i64,
}

/// Counters for what one side sent. The counters every connection needs are inline; those
/// only a side that sends data needs are in [`DataStats`], allocated on first use, so a
/// connection that never carries any (a SYN of a flood) costs no more than its analysis state.
#[derive(Clone, Debug, Default)]
pub struct DirStats {
    /// Packets sent.
    pub packets: u64,
    /// Earliest packet time (the first one's unless capture time went backwards).
    pub first_ts: Option<Timestamp>,
    /// Latest packet time.
    pub last_ts: Option<Timestamp>,
    /// MSS option from this side's SYN.
    pub mss: Option<u16>,
    /// Window scale option from this side's SYN.
    pub window_scale: Option<u8>,
    /// SACK permitted in this side's SYN.
    pub sack_permitted: bool,
    /// Largest window this side advertised, in bytes after scaling.
    pub max_window: u64,
    /// The rest; `None` until a counter in it is first written (all zero until then).
    data: Option<Box<DataStats>>,
}

/// The counters of a side that sent data, retransmitted, advertised a zero window or had
/// its data's RTT measured.
#[derive(Clone, Debug, Default)]
pub struct DataStats {
    /// Payload bytes sent (including retransmissions).
    pub bytes: u64,
    /// Distinct payload bytes (highest sequence reached minus the first).
    pub unique_bytes: u64,
    /// Payload bytes in segments flagged as retransmissions (any kind).
    pub retrans_bytes: u64,
    /// Segments flagged as retransmissions (any kind).
    pub retrans_packets: u64,
    /// Highest relative sequence end seen (for unique bytes).
    pub high_seq: Option<u64>,
    /// Segments advertising a zero window.
    pub zero_window_count: u64,
    /// Total time this side's advertised window stayed at zero.
    pub zero_window_ns: i64,
    /// Start of the current zero-window period.
    pub zero_window_since: Option<Timestamp>,
    /// RTT of this side's data, measured by the peer's ACKs (Karn's rule).
    pub rtt: RttSamples,
}

/// What an absent [`DataStats`] reads as.
static NO_DATA: DataStats = DataStats {
    bytes: 0,
    unique_bytes: 0,
    retrans_bytes: 0,
    retrans_packets: 0,
    high_seq: None,
    zero_window_count: 0,
    zero_window_ns: 0,
    zero_window_since: None,
    rtt: RttSamples::EMPTY,
};

impl DirStats {
    /// The data counters (all zero when none was written yet).
    pub fn data(&self) -> &DataStats {
        self.data.as_deref().unwrap_or(&NO_DATA)
    }
    /// The data counters, allocated if need be.
    #[inline]
    pub fn data_mut(&mut self) -> &mut DataStats {
        self.data.get_or_insert_with(Box::default)
    }
    /// The data counters, if any was written.
    pub fn data_if_any(&mut self) -> Option<&mut DataStats> {
        self.data.as_deref_mut()
    }
    /// RTT samples of this side's data.
    pub fn rtt(&self) -> &RttSamples {
        &self.data().rtt
    }
}

/// One row of `tcpdx flows` for one direction.
#[derive(Clone, Debug, PartialEq)]
pub struct DirSummary {
    /// Sender of this direction.
    pub src: Endpoint,
    /// Receiver.
    pub dst: Endpoint,
    /// Packets sent.
    pub packets: u64,
    /// Payload bytes sent.
    pub bytes: u64,
    /// Distinct payload bytes.
    pub unique_bytes: u64,
    /// Retransmitted payload bytes.
    pub retrans_bytes: u64,
    /// Retransmitted segments.
    pub retrans_packets: u64,
    /// Unique bytes per second of connection duration, in bits/s.
    pub goodput_bps: f64,
    /// Duration of this direction (first to last packet), seconds.
    pub duration_s: f64,
    /// RTT statistics (Karn's rule), when samples exist.
    pub rtt: Option<RttSummary>,
    /// MSS option.
    pub mss: Option<u16>,
    /// Window scale option.
    pub window_scale: Option<u8>,
    /// SACK permitted.
    pub sack_permitted: bool,
    /// Largest advertised window (bytes).
    pub max_window: u64,
    /// Zero-window advertisements.
    pub zero_window_count: u64,
    /// Time spent advertising a zero window, seconds.
    pub zero_window_s: f64,
}

/// A connection's summary (`tcpdx flows` row pair).
#[derive(Clone, Debug, PartialEq)]
pub struct FlowSummary {
    /// Wireshark `tcp.stream`.
    pub stream: StreamId,
    /// First packet time.
    pub first_ts: Timestamp,
    /// Last packet time.
    pub last_ts: Timestamp,
    /// Duration in seconds.
    pub duration_s: f64,
    /// The handshake was seen (SYN from the client).
    pub saw_syn: bool,
    /// Client to server, then server to client.
    pub dirs: [DirSummary; 2],
}

impl DirStats {
    /// Summarises this direction for a connection that lasted `conn_s` seconds and whose
    /// latest packet is at `end_ts` (an open zero-window period is closed there).
    pub fn summarize(
        &self,
        src: Endpoint,
        dst: Endpoint,
        conn_s: f64,
        end_ts: Timestamp,
    ) -> DirSummary {
        let duration_s = match (self.first_ts, self.last_ts) {
            (Some(a), Some(b)) => b.since(a) as f64 / 1e9,
            _ => 0.0,
        };
        let d = self.data();
        let mut zero_window_ns = d.zero_window_ns;
        if let Some(since) = d.zero_window_since {
            zero_window_ns += end_ts.since(since).max(0);
        }
        DirSummary {
            src,
            dst,
            packets: self.packets,
            bytes: d.bytes,
            unique_bytes: d.unique_bytes,
            retrans_bytes: d.retrans_bytes,
            retrans_packets: d.retrans_packets,
            goodput_bps: if conn_s > 0.0 {
                d.unique_bytes as f64 * 8.0 / conn_s
            } else {
                0.0
            },
            duration_s,
            rtt: d.rtt.summary(),
            mss: self.mss,
            window_scale: self.window_scale,
            sack_permitted: self.sack_permitted,
            max_window: self.max_window,
            zero_window_count: d.zero_window_count,
            zero_window_s: zero_window_ns as f64 / 1e9,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_counters_are_allocated_on_first_write() {
        let mut s = DirStats::default();
        assert!(s.data_if_any().is_none());
        assert_eq!(s.data().bytes, 0);
        assert!(s.rtt().summary().is_none());
        s.data_mut().bytes += 10;
        assert_eq!(s.data_if_any().map(|d| d.bytes), Some(10));
        let ep = Endpoint {
            addr: std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST),
            port: 1,
        };
        // An open zero-window period counts up to the connection's end.
        s.data_mut().zero_window_since = Some(Timestamp(1_000_000_000));
        let sum = s.summarize(ep, ep, 1.0, Timestamp(3_000_000_000));
        assert_eq!((sum.bytes, sum.zero_window_s), (10, 2.0));
        // Capture time going backwards past the period's start counts nothing.
        let sum = s.summarize(ep, ep, 1.0, Timestamp(0));
        assert_eq!(sum.zero_window_s, 0.0);
    }

    #[test]
    fn reservoir_keeps_exact_extremes() {
        let mut r = RttSamples::default();
        for i in 0..10_000 {
            r.add(1000 + i, 100);
        }
        let s = r.summary().unwrap();
        assert_eq!(s.count, 10_000);
        assert_eq!(s.min_ns, 1000);
        assert_eq!(s.max_ns, 10_999);
        assert!((s.median_ns - 6000).abs() < 1500, "median {}", s.median_ns);
    }

    #[test]
    fn freezing_keeps_the_quantiles() {
        let mut r = RttSamples::default();
        for i in 0..1000 {
            r.add(i * 10, 2048);
        }
        let before = r.summary().unwrap();
        assert_eq!(r.freeze(), Some(before));
        assert!(r.is_frozen());
        assert_eq!(r.summary(), Some(before));
        // A late sample moves the exact figures only.
        r.add(1_000_000, 2048);
        let after = r.summary().unwrap();
        assert_eq!(after.count, 1001);
        assert_eq!(after.max_ns, 1_000_000);
        assert_eq!(
            (after.median_ns, after.p95_ns),
            (before.median_ns, before.p95_ns)
        );
    }
}
