//! Two vantage points of the same connections (`tcpdx diagnose --vantage A B`): the values
//! the library computes ([`Vantage`]) and their text and JSON renderings.
//!
//! The types live here, beside their renderers, because the library (`tcpdx`) depends on
//! this crate and re-exports them. Capture A is the first file given; every time is in A's
//! clock (B's frames shifted by the estimated offset and drift).

use std::io::{self, Write};

use serde::Serialize;
use tcpdx_detect::Diagnosis;

/// Where on the path a segment was lost, in the order the path runs from A's side to B's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Location {
    /// Outside A, on A's side (between A's end host and capture point A).
    BeforeA,
    /// Between the two capture points.
    Between,
    /// Outside B, on B's side (between capture point B and B's end host).
    AfterB,
}

impl Location {
    /// The JSON name.
    pub fn as_str(self) -> &'static str {
        match self {
            Location::BeforeA => "before_a",
            Location::Between => "between",
            Location::AfterB => "after_b",
        }
    }
}

/// A capture point.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Point {
    /// The first capture given.
    A,
    /// The second capture given.
    B,
}

/// The direction of a segment on the path.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// Passes A first, then B.
    AToB,
    /// Passes B first, then A.
    BToA,
}

impl Direction {
    /// The JSON name.
    pub fn as_str(self) -> &'static str {
        match self {
            Direction::AToB => "a_to_b",
            Direction::BToA => "b_to_a",
        }
    }
}

/// One segment lost, reordered or duplicated, or missed by one capture.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SegmentEvent {
    /// The connection's `tcp.stream` in capture A (in B when A never saw it).
    pub stream: u32,
    /// Its direction.
    pub direction: Direction,
    /// Sequence number relative to the connection's first (Wireshark's `tcp.seq`).
    pub seq: u32,
    /// Sequence number as on the wire (`tcp.seq_raw`).
    pub seq_raw: u32,
    /// Payload bytes.
    pub len: u32,
    /// The segment's frame in A, `None` when A did not see it.
    pub frame_a: Option<u64>,
    /// The segment's frame in B, `None` when B did not see it.
    pub frame_b: Option<u64>,
    /// Where it happened (losses, reordering, duplication); `None` for a capture drop.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub location: Option<Location>,
    /// The capture that missed it (capture drops only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub missing_at: Option<Point>,
    /// When it was first seen (or, lost before both points, repaired), seconds since A's
    /// first frame.
    pub t_s: f64,
}

/// One-way delays of one direction: the minimum, percentiles, queueing above the minimum,
/// and the delay over time.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct DelaySummary {
    /// `a_to_b` or `b_to_a`.
    pub direction: &'static str,
    /// Segments seen at both points.
    pub samples: u64,
    /// Smallest one-way delay (s): the path's propagation and transmission time.
    pub min_s: f64,
    /// Median one-way delay (s).
    pub p50_s: f64,
    /// 95th percentile (s).
    pub p95_s: f64,
    /// Largest (s).
    pub max_s: f64,
    /// Median queueing delay, the one-way delay above the minimum (s).
    pub queue_p50_s: f64,
    /// 95th percentile of the queueing delay (s).
    pub queue_p95_s: f64,
    /// Over time: `[t_s, min_s, mean_s, max_s]` per interval, at most a few hundred.
    pub series: Vec<[f64; 4]>,
}

/// The response time of one storage operation split at the two points.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct StorageSplit {
    /// `nfs`, `smb2` or `iscsi`.
    pub proto: &'static str,
    /// Operation (`WRITE`, `Read`...).
    pub op: &'static str,
    /// Transactions seen at both points.
    pub count: u64,
    /// Mean response time at the client-side point (s).
    pub response_s: f64,
    /// Mean time of the request from the client-side point to the server-side one (s).
    pub request_network_s: f64,
    /// Mean time of the reply from the server-side point back to the client-side one (s).
    pub reply_network_s: f64,
    /// Mean response time at the server-side point (s): the server's own time.
    pub server_s: f64,
    /// Largest response time at the client-side point (s).
    pub max_response_s: f64,
}

/// A finding of either capture's diagnosis and the points its evidence was seen at.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FindingSide {
    /// Finding kind.
    pub kind: &'static str,
    /// `tcp.stream` in A (in B when the connection is not in A).
    pub stream: u32,
    /// `a`, `b` or `both`: where a finding of this kind on this connection was made.
    pub seen_at: &'static str,
    /// Its cost at the point where it was largest (s).
    pub cost_s: f64,
}

/// One connection direction drawn as two time-sequence graphs on A's time axis.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TwoPointGraph {
    /// `tcp.stream` in A.
    pub stream: u32,
    /// Its data direction.
    pub direction: &'static str,
    /// `(t_s, relative seq)` of segments seen at A.
    pub a: Vec<(f64, f64)>,
    /// The same at B, shifted to A's clock.
    pub b: Vec<(f64, f64)>,
    /// `(t_s, relative seq, location)` of the losses.
    pub losses: Vec<(f64, f64, Location)>,
}

/// What two captures of the same connections show together.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Vantage {
    /// Capture A (the first given).
    pub file_a: String,
    /// Capture B.
    pub file_b: String,
    /// B's clock minus A's at A's first frame (s).
    pub offset_s: f64,
    /// B's clock drift against A's (parts per million, B faster when positive).
    pub drift_ppm: f64,
    /// Half the difference of the two directions' minimum delays cannot be told from a
    /// clock offset: the offset assumes the path's two minima are equal.
    pub assumes_symmetric_path: bool,
    /// TCP segments seen at both points.
    pub matched: u64,
    /// TCP segments seen only at A.
    pub only_a: u64,
    /// TCP segments seen only at B.
    pub only_b: u64,
    /// Connections seen at both points.
    pub connections: u64,
    /// Network losses, each with the place it happened.
    pub losses: Vec<SegmentEvent>,
    /// Segments one capture missed but the network delivered.
    pub capture_drops: Vec<SegmentEvent>,
    /// Segments overtaken by later ones, and where.
    pub reordered: Vec<SegmentEvent>,
    /// Segments that arrived twice, and where the copy was made.
    pub duplicated: Vec<SegmentEvent>,
    /// Events beyond the lists' bound, counted only.
    pub events_not_listed: u64,
    /// One-way delays per direction.
    pub delays: Vec<DelaySummary>,
    /// Storage response times split between the network and the server, per operation.
    pub storage: Vec<StorageSplit>,
    /// Each finding of the two diagnoses and where its evidence was seen.
    pub findings: Vec<FindingSide>,
    /// What the matching assumes or could not do.
    pub notes: Vec<String>,
    /// Graphs for the HTML report (not in the JSON).
    #[serde(skip)]
    pub graphs: Vec<TwoPointGraph>,
    /// `(stream in A, stream in B)` of the connections seen at both (not in the JSON).
    #[serde(skip)]
    pub stream_pairs: Vec<(u32, u32)>,
    /// A's first TCP frame time (ns since the epoch), the origin of `t_s` (not in the JSON).
    #[serde(skip)]
    pub t0_ns: i64,
}

impl Vantage {
    /// Losses at `loc`.
    pub fn losses_at(&self, loc: Location) -> usize {
        self.losses
            .iter()
            .filter(|l| l.location == Some(loc))
            .count()
    }
}

/// The diagnosis JSON (`write_diagnosis_json`) with a `vantage` object added at the end.
pub fn write_vantage_json(w: &mut dyn Write, d: &Diagnosis, v: &Vantage) -> io::Result<()> {
    let mut buf = Vec::new();
    crate::write_diagnosis_json(&mut buf, d)?;
    let mut doc: serde_json::Value = serde_json::from_slice(&buf).map_err(io::Error::from)?;
    if let Some(o) = doc.as_object_mut() {
        o.insert(
            "vantage".into(),
            serde_json::to_value(v).map_err(io::Error::from)?,
        );
    }
    serde_json::to_writer_pretty(&mut *w, &doc).map_err(io::Error::from)?;
    writeln!(w)
}

/// Losses printed one per line in the text; the rest are counted.
const TEXT_LOSSES: usize = 12;

/// The vantage section of `tcpdx diagnose --vantage` (after the diagnosis).
pub fn write_vantage_text(w: &mut dyn Write, v: &Vantage) -> io::Result<()> {
    writeln!(w)?;
    writeln!(w, "Two vantage points: A = {}, B = {}", v.file_a, v.file_b)?;
    writeln!(
        w,
        "  clock: B - A = {:+.6} s at A's start, drift {:+.1} ppm (from the minimum one-way delay each way; assumes equal minima)",
        v.offset_s, v.drift_ppm
    )?;
    writeln!(
        w,
        "  segments: {} seen at both, {} only at A, {} only at B; {} connections at both",
        v.matched, v.only_a, v.only_b, v.connections
    )?;
    writeln!(
        w,
        "  losses: {} before A, {} between A and B, {} after B; {} capture drops (A missed {}, B missed {}); {} reordered, {} duplicated",
        v.losses_at(Location::BeforeA),
        v.losses_at(Location::Between),
        v.losses_at(Location::AfterB),
        v.capture_drops.len(),
        v.capture_drops
            .iter()
            .filter(|c| c.missing_at == Some(Point::A))
            .count(),
        v.capture_drops
            .iter()
            .filter(|c| c.missing_at == Some(Point::B))
            .count(),
        v.reordered.len(),
        v.duplicated.len()
    )?;
    for l in v.losses.iter().take(TEXT_LOSSES) {
        writeln!(
            w,
            "    {:>9.6} s  stream {} {} seq {} len {}: lost {} (frame A {}, frame B {})",
            l.t_s,
            l.stream,
            l.direction.as_str(),
            l.seq,
            l.len,
            l.location.map_or("?", |x| where_lost(x)),
            frame(l.frame_a),
            frame(l.frame_b)
        )?;
    }
    if v.losses.len() > TEXT_LOSSES {
        writeln!(
            w,
            "    ... {} more losses (--json lists them all)",
            v.losses.len() - TEXT_LOSSES
        )?;
    }
    for d in &v.delays {
        writeln!(
            w,
            "  one-way delay {}: min {}, median {}, p95 {}, max {}; queueing median {}, p95 {} ({} segments)",
            d.direction,
            ms(d.min_s),
            ms(d.p50_s),
            ms(d.p95_s),
            ms(d.max_s),
            ms(d.queue_p50_s),
            ms(d.queue_p95_s),
            d.samples
        )?;
    }
    for s in &v.storage {
        writeln!(
            w,
            "  {} {}: {} seen at both, response {} = request network {} + server {} + reply network {} (mean)",
            s.proto,
            s.op,
            s.count,
            ms(s.response_s),
            ms(s.request_network_s),
            ms(s.server_s),
            ms(s.reply_network_s)
        )?;
    }
    let (mut a, mut b, mut both) = (0, 0, 0);
    for f in &v.findings {
        match f.seen_at {
            "a" => a += 1,
            "b" => b += 1,
            _ => both += 1,
        }
    }
    if !v.findings.is_empty() {
        writeln!(
            w,
            "  findings: {both} seen at both points, {a} only at A, {b} only at B"
        )?;
    }
    for n in &v.notes {
        writeln!(w, "  note: {n}")?;
    }
    Ok(())
}

fn where_lost(l: Location) -> &'static str {
    match l {
        Location::BeforeA => "before A",
        Location::Between => "between A and B",
        Location::AfterB => "after B",
    }
}

fn frame(f: Option<u64>) -> String {
    f.map_or_else(|| "-".to_owned(), |f| f.to_string())
}

fn ms(s: f64) -> String {
    format!("{:.3} ms", s * 1e3)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loss(loc: Location) -> SegmentEvent {
        SegmentEvent {
            stream: 0,
            direction: Direction::AToB,
            seq: 1,
            seq_raw: 1001,
            len: 1448,
            frame_a: Some(7),
            frame_b: None,
            location: Some(loc),
            missing_at: None,
            t_s: 0.5,
        }
    }

    #[test]
    fn json_has_the_vantage_object_with_locations() {
        let v = Vantage {
            offset_s: 0.25,
            losses: vec![loss(Location::Between), loss(Location::AfterB)],
            ..Vantage::default()
        };
        let mut out = Vec::new();
        write_vantage_json(&mut out, &Diagnosis::default(), &v).unwrap();
        let doc: serde_json::Value = serde_json::from_slice(&out).unwrap();
        let van = &doc["vantage"];
        assert_eq!(van["offset_s"], 0.25);
        assert_eq!(van["losses"][0]["location"], "between");
        assert_eq!(van["losses"][1]["location"], "after_b");
        assert_eq!(van["losses"][0]["frame_b"], serde_json::Value::Null);
        assert_eq!(van["losses"][0]["direction"], "a_to_b");
        assert!(doc["findings"].is_array(), "the diagnosis is kept");
    }

    #[test]
    fn text_counts_losses_by_place() {
        let v = Vantage {
            losses: vec![
                loss(Location::Between),
                loss(Location::Between),
                loss(Location::BeforeA),
            ],
            ..Vantage::default()
        };
        let mut out = Vec::new();
        write_vantage_text(&mut out, &v).unwrap();
        let s = String::from_utf8(out).unwrap();
        assert!(
            s.contains("1 before A, 2 between A and B, 0 after B"),
            "{s}"
        );
        assert!(
            s.contains("lost between A and B (frame A 7, frame B -)"),
            "{s}"
        );
    }
}
