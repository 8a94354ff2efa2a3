//! `Finding`: one diagnosed pathology with its cost, evidence and advice.
//!
//! The serialised form is the `tcpdx diagnose --json` contract (DESIGN.md "JSON
//! contracts", docs/json-format.md): extend, never break.

use std::borrow::Cow;

use serde::Serialize;

/// The stable catalogue kinds (DESIGN.md "Pathologies"), serialised in kebab-case.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FindingKind {
    /// Sender restarts from one segment after loss; receiver delays the lone segment's ACK.
    DelackSlowstartStall,
    /// Nagle holds the small tail of a message until the peer's delayed ACK.
    NagleDelackStall,
    /// Retransmission after a silent retransmission timeout.
    RtoStall,
    /// Segments lost in the network, costing recovery time.
    NetworkLoss,
    /// Retransmissions of data that was not lost (reordering, lost ACKs).
    SpuriousRetransmission,
    /// Segments arriving out of order without retransmission.
    Reordering,
    /// Burst loss, window back near one segment, slow additive ramp below the BDP.
    CwndCollapse,
    /// The receiver's advertised window (or a zero window) limits the sender.
    ReceiverWindowLimited,
    /// Segments lost inside the receiving host, after the capture point.
    ReceiverHostDrops,
    /// Stalls that repeat at one duration: a timer somewhere.
    FixedDurationStall,
    /// The sender (or the server answering) leaves the connection idle.
    ApplicationLimited,
    /// The sender keeps less in flight than both windows allow while sending back to back
    /// (its send buffer).
    SenderLimited,
    /// Handshake problems: SYN retransmissions, window scaling or SACK off, small MSS.
    HandshakeAndSetup,
    /// The capture itself misleads: drops, offload, one direction only.
    CaptureQuality,
    /// Healthy transfer, limited by the path.
    PathLimited,
}

impl FindingKind {
    /// Every kind, in catalogue order.
    pub const ALL: [FindingKind; 15] = [
        Self::DelackSlowstartStall,
        Self::NagleDelackStall,
        Self::RtoStall,
        Self::NetworkLoss,
        Self::SpuriousRetransmission,
        Self::Reordering,
        Self::CwndCollapse,
        Self::ReceiverWindowLimited,
        Self::ReceiverHostDrops,
        Self::FixedDurationStall,
        Self::ApplicationLimited,
        Self::SenderLimited,
        Self::HandshakeAndSetup,
        Self::CaptureQuality,
        Self::PathLimited,
    ];

    /// The kind named by its stable string, if any.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == s)
    }

    /// The stable kind string (`delack-slowstart-stall`, ...).
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::DelackSlowstartStall => "delack-slowstart-stall",
            Self::NagleDelackStall => "nagle-delack-stall",
            Self::RtoStall => "rto-stall",
            Self::NetworkLoss => "network-loss",
            Self::SpuriousRetransmission => "spurious-retransmission",
            Self::Reordering => "reordering",
            Self::CwndCollapse => "cwnd-collapse",
            Self::ReceiverWindowLimited => "receiver-window-limited",
            Self::ReceiverHostDrops => "receiver-host-drops",
            Self::FixedDurationStall => "fixed-duration-stall",
            Self::ApplicationLimited => "application-limited",
            Self::SenderLimited => "sender-limited",
            Self::HandshakeAndSetup => "handshake-and-setup",
            Self::CaptureQuality => "capture-quality",
            Self::PathLimited => "path-limited",
        }
    }
}

/// How much a finding matters, from its share of the connection's time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    /// Informational (healthy, or too small to matter).
    Info,
    /// Costs a little.
    Minor,
    /// Costs a noticeable share of the transfer time.
    Major,
    /// Dominates the transfer time.
    Critical,
}

impl Severity {
    /// Parses `info|minor|major|critical`.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "info" => Some(Self::Info),
            "minor" => Some(Self::Minor),
            "major" => Some(Self::Major),
            "critical" => Some(Self::Critical),
            _ => None,
        }
    }
    /// The lower-case name.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Info => "info",
            Self::Minor => "minor",
            Self::Major => "major",
            Self::Critical => "critical",
        }
    }
    /// Severity of a cost that is `share` of the connection's lifetime (see the constants).
    pub fn from_share(share: f64) -> Self {
        if share >= CRITICAL_SHARE {
            Self::Critical
        } else if share >= MAJOR_SHARE {
            Self::Major
        } else if share >= MINOR_SHARE {
            Self::Minor
        } else {
            Self::Info
        }
    }
}

/// Share of a connection's time at and above which a finding is critical (tcpdx choice:
/// case 000's stall cost 35% of throughput and was the whole story).
pub const CRITICAL_SHARE: f64 = 0.30;
/// Share at and above which a finding is major (tcpdx choice).
pub const MAJOR_SHARE: f64 = 0.10;
/// Share at and above which a finding is minor; below it, info (tcpdx choice: 2% is within
/// run-to-run noise of a bulk transfer).
pub const MINOR_SHARE: f64 = 0.02;

/// What a finding cost.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Cost {
    /// Seconds lost (stalled, or the equivalent at the path rate).
    pub seconds: f64,
    /// `seconds` as a share of the connection's lifetime (of the capture for capture-wide findings).
    pub share: f64,
    /// Projected goodput of the connection's main direction without this pathology.
    pub goodput_without_bps: Option<f64>,
}

/// One frame that proves a finding, with what it shows.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Evidence {
    /// Wireshark frame number.
    pub frame: u64,
    /// Role (`third duplicate ACK`, `fast retransmission`, `lone segment`, `delayed ACK`, ...).
    pub role: Cow<'static, str>,
    /// The episode (1-based, counting every episode, listed or not) the frame belongs to, for
    /// evidence added before that episode's [`Finding::episode`] call; `None` for evidence
    /// of the finding as a whole. Not serialised (the JSON contract is unchanged).
    #[serde(skip)]
    pub episode: Option<u32>,
    /// A capture of several files: the file holding the frame and its number there
    /// (serialised as `source_file` and `source_frame`; absent for one file). Boxed: one
    /// word while absent.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub source: Option<Box<Source>>,
}

/// Where an evidence frame of a capture of several files lies.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Source {
    /// The file, as named to the reader.
    #[serde(rename = "source_file")]
    pub file: String,
    /// The frame's number in that file (Wireshark's `frame.number` opening it alone).
    #[serde(rename = "source_frame")]
    pub frame: u64,
}

/// One episode of a finding, in seconds since the first frame of the capture.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Episode {
    /// Start, seconds since the first frame.
    pub start_s: f64,
    /// Length in seconds.
    pub duration_s: f64,
}

/// One diagnosed pathology.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Finding {
    /// Catalogue kind.
    pub kind: FindingKind,
    /// Severity.
    pub severity: Severity,
    /// `tcp.stream`, or `None` for capture-wide findings.
    pub stream: Option<u32>,
    /// Number of episodes (occurrences).
    pub episodes: u32,
    /// Cost.
    pub cost: Cost,
    /// Confidence, 0..1.
    pub confidence: f64,
    /// Evidence frames with their roles.
    pub evidence: Vec<Evidence>,
    /// A Wireshark display filter showing the evidence.
    pub wireshark_filter: String,
    /// What happened, for a newcomer.
    pub explanation: String,
    /// What to change, most effective first. Mostly fixed texts, borrowed: a finding can
    /// come for every connection of a capture, and owned copies were a fifth of the bytes
    /// a listed connection holds.
    pub recommendations: Vec<Cow<'static, str>>,
    /// The episodes, in time order (at most [`MAX_EPISODES_LISTED`]).
    pub episode_list: Vec<Episode>,
    /// Capture file the finding comes from (set by the CLI when several files are given).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// [`Finding::episode`] calls so far (listed or not).
    #[serde(skip)]
    episodes_seen: u32,
    /// Evidence from this index on is not yet tagged with an episode.
    #[serde(skip)]
    untagged_from: usize,
    /// Every episode as `(start_s, end_s)`, listed or not: the seconds this finding claims
    /// when the connection's time is accounted once ([`crate::account`]), then emptied.
    #[serde(skip)]
    pub(crate) spans: Vec<(f64, f64)>,
    /// Claims its time before the TCP findings ([`Finding::claim_first`]).
    #[serde(skip)]
    pub(crate) claims_first: bool,
}

/// Episodes listed per finding; the count in `episodes` is always complete (tcpdx choice:
/// enough to check by hand, bounded for huge captures).
pub const MAX_EPISODES_LISTED: usize = 50;
/// Evidence frames listed per finding (tcpdx choice, as above).
pub const MAX_EVIDENCE: usize = 100;

impl Finding {
    /// A finding with no cost, evidence or text yet.
    pub fn new(kind: FindingKind, stream: Option<u32>) -> Self {
        Self {
            kind,
            severity: Severity::Info,
            stream,
            episodes: 0,
            cost: Cost::default(),
            confidence: 0.5,
            evidence: Vec::new(),
            wireshark_filter: String::new(),
            explanation: String::new(),
            recommendations: Vec::new(),
            episode_list: Vec::new(),
            file: None,
            episodes_seen: 0,
            untagged_from: 0,
            spans: Vec::new(),
            claims_first: false,
        }
    }

    /// Adds an evidence frame (bounded by [`MAX_EVIDENCE`]). A role is usually a fixed
    /// text: borrowed, it costs no allocation (a capture of many connections can have
    /// thousands of findings with dozens of frames each).
    pub fn evidence(&mut self, frame: u64, role: impl Into<Cow<'static, str>>) {
        if self.evidence.len() < MAX_EVIDENCE {
            self.evidence.push(Evidence {
                frame,
                role: role.into(),
                episode: None,
                source: None,
            });
        }
    }

    /// Makes room for `episodes` episodes with one evidence frame each (within the bounds),
    /// for a detector that knows how many it adds.
    pub fn reserve(&mut self, episodes: usize) {
        self.evidence.reserve(
            episodes
                .min(MAX_EVIDENCE)
                .saturating_sub(self.evidence.len()),
        );
        self.episode_list.reserve(
            episodes
                .min(MAX_EPISODES_LISTED)
                .saturating_sub(self.episode_list.len()),
        );
    }

    /// Adds an episode span (bounded by [`MAX_EPISODES_LISTED`]). Detectors add each
    /// episode's evidence first, then call this: the evidence added since the previous call
    /// is tagged with this episode's number.
    pub fn episode(&mut self, start_s: f64, duration_s: f64) {
        self.episodes_seen += 1;
        let n = self.episodes_seen;
        for e in self.evidence.iter_mut().skip(self.untagged_from) {
            e.episode = Some(n);
        }
        self.untagged_from = self.evidence.len();
        self.spans.push((start_s, start_s + duration_s.max(0.0)));
        if self.episode_list.len() < MAX_EPISODES_LISTED {
            self.episode_list.push(Episode {
                start_s,
                duration_s,
            });
        }
    }

    /// Makes this finding claim its episodes' time before the TCP-level findings when a
    /// connection's time is accounted ([`crate::account::settle`]): a cause known from
    /// above TCP (a storage server holding a reply) explains the silence it made.
    pub fn claim_first(&mut self) {
        self.claims_first = true;
    }

    /// Sum of the listed episodes' durations.
    pub fn episode_seconds(&self) -> f64 {
        // `+ 0.0`: an empty f64 sum is -0.0.
        self.episode_list.iter().map(|e| e.duration_s).sum::<f64>() + 0.0
    }

    /// Gives the finding's connection the stream number `to` (a diagnosis made under other
    /// numbers, by one of several threads): its `stream`, and the `tcp.stream == N` its
    /// filter starts with (every per-connection filter names its stream there, and only
    /// there).
    pub fn renumber_stream(&mut self, to: u32) {
        let Some(from) = self.stream else {
            return;
        };
        self.stream = Some(to);
        if from == to {
            return;
        }
        const PREFIX: &str = "tcp.stream == ";
        let Some(tail) = self.wireshark_filter.strip_prefix(PREFIX) else {
            return;
        };
        let digits = tail.bytes().take_while(u8::is_ascii_digit).count();
        if tail.get(..digits).and_then(|d| d.parse::<u32>().ok()) == Some(from) {
            // In place: a new string would free the old one, which the merging thread
            // does for 10,000s of findings another thread allocated (slow frees).
            let at = PREFIX.len();
            self.wireshark_filter
                .replace_range(at..at + digits, &to.to_string());
        }
    }

    /// A Wireshark filter selecting the evidence frames of this finding.
    pub fn frames_filter(&self) -> String {
        let mut frames: Vec<u64> = self.evidence.iter().map(|e| e.frame).collect();
        frames.sort_unstable();
        frames.dedup();
        if frames.is_empty() {
            return self
                .stream
                .map_or_else(String::new, |s| format!("tcp.stream == {s}"));
        }
        let list: Vec<String> = frames.iter().map(u64::to_string).collect();
        format!("frame.number in {{{}}}", list.join(" "))
    }
}

tcpdx_core::codec_unit_enum!(Severity {
    Info,
    Minor,
    Major,
    Critical
});

impl tcpdx_core::codec::Codec for FindingKind {
    fn enc(&self, w: &mut Vec<u8>) {
        let i = Self::ALL.iter().position(|k| k == self).unwrap_or(0);
        w.push(i as u8);
    }
    fn dec(r: &mut tcpdx_core::codec::Dec<'_>) -> Result<Self, tcpdx_core::codec::DecodeError> {
        let t = r.tag(Self::ALL.len() as u8, "FindingKind")?;
        Self::ALL
            .get(usize::from(t))
            .copied()
            .ok_or_else(|| r.error("FindingKind"))
    }
}

tcpdx_core::codec_struct!(Cost {
    seconds,
    share,
    goodput_without_bps
});
tcpdx_core::codec_struct!(Evidence {
    frame,
    role,
    episode,
    source
});
tcpdx_core::codec_struct!(Source { file, frame });
tcpdx_core::codec_struct!(Episode {
    start_s,
    duration_s
});
tcpdx_core::codec_struct!(Finding {
    kind,
    severity,
    stream,
    episodes,
    cost,
    confidence,
    evidence,
    wireshark_filter,
    explanation,
    recommendations,
    episode_list,
    file,
    episodes_seen,
    untagged_from,
    spans,
    claims_first,
});

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_parses_from_its_string_and_serialises_to_it() {
        for k in FindingKind::ALL {
            assert_eq!(FindingKind::parse(k.as_str()), Some(k));
            assert_eq!(serde_json::to_value(k).unwrap(), k.as_str());
        }
        assert_eq!(FindingKind::parse("network_loss"), None);
    }

    #[test]
    fn severity_thresholds_and_names() {
        assert_eq!(Severity::from_share(0.5), Severity::Critical);
        assert_eq!(Severity::from_share(0.1), Severity::Major);
        assert_eq!(Severity::from_share(0.05), Severity::Minor);
        assert_eq!(Severity::from_share(0.0), Severity::Info);
        for s in [
            Severity::Info,
            Severity::Minor,
            Severity::Major,
            Severity::Critical,
        ] {
            assert_eq!(Severity::parse(s.as_str()), Some(s));
        }
        assert!(Severity::Critical > Severity::Info);
    }

    #[test]
    fn filter_lists_evidence_frames_once() {
        let mut f = Finding::new(FindingKind::RtoStall, Some(3));
        assert_eq!(f.frames_filter(), "tcp.stream == 3");
        f.evidence(9, "a");
        f.evidence(4, "b");
        f.evidence(9, "c");
        assert_eq!(f.frames_filter(), "frame.number in {4 9}");
    }

    #[test]
    fn renumbering_rewrites_the_stream_and_its_filter() {
        let mut f = Finding::new(FindingKind::RtoStall, Some(1));
        f.wireshark_filter = "tcp.stream == 1 && tcp.time_delta >= 0.010".into();
        f.renumber_stream(17);
        assert_eq!(f.stream, Some(17));
        assert_eq!(
            f.wireshark_filter,
            "tcp.stream == 17 && tcp.time_delta >= 0.010"
        );
        // In place, shorter too.
        f.renumber_stream(4);
        assert_eq!(
            f.wireshark_filter,
            "tcp.stream == 4 && tcp.time_delta >= 0.010"
        );
        // Another stream whose number starts alike is left alone.
        let mut g = Finding::new(FindingKind::RtoStall, Some(1));
        g.wireshark_filter = "tcp.stream == 12".into();
        g.renumber_stream(3);
        assert_eq!(g.wireshark_filter, "tcp.stream == 12");
        // Frame filters and capture-wide findings have no stream to rewrite.
        let mut h = Finding::new(FindingKind::RtoStall, Some(2));
        h.evidence(5, "x");
        h.wireshark_filter = h.frames_filter();
        h.renumber_stream(0);
        assert_eq!(h.wireshark_filter, "frame.number in {5}");
        let mut w = Finding::new(FindingKind::CaptureQuality, None);
        w.renumber_stream(4);
        assert_eq!(w.stream, None);
    }

    #[test]
    fn evidence_is_tagged_with_its_episode() {
        let mut f = Finding::new(FindingKind::RtoStall, Some(1));
        f.evidence(3, "last ACK before the silence");
        f.evidence(5, "timeout retransmission");
        f.episode(0.1, 0.2);
        f.evidence(8, "timeout retransmission");
        f.episode(0.5, 0.2);
        f.evidence(9, "whole finding");
        let tags: Vec<_> = f.evidence.iter().map(|e| e.episode).collect();
        assert_eq!(tags, [Some(1), Some(1), Some(2), None]);
        // Episodes beyond the listed ones still count.
        for _ in 0..MAX_EPISODES_LISTED {
            f.episode(1.0, 0.1);
        }
        f.evidence(10, "late");
        f.episode(2.0, 0.1);
        assert_eq!(f.episode_list.len(), MAX_EPISODES_LISTED);
        assert_eq!(f.evidence.last().unwrap().episode, Some(53));
    }
}
