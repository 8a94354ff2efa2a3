//! The verdict rules of a before/after comparison: when a cost is gone, a figure better,
//! worse or unchanged, and the verdict line built from them. Every threshold is a named
//! constant; a change must clear both its relative and its absolute floor, so that the
//! noise between two runs of the same transfer is not called a change.

use tcpdx_report::compare::{Change, KindChange, OpChange, ms, percent, rate};

use crate::FindingKind;

/// A finding kind costing less than this is absent (tcpdx choice: under a quarter of the
/// shortest delayed-ACK timer, 40 ms on Linux; a finding's cost below it is within the
/// timing noise of a LAN round trip or two).
pub const COST_FLOOR_S: f64 = 0.010;
/// A cost moving by at most this share of its before value is unchanged (tcpdx choice:
/// the lab's two runs of one scenario, e.g. case000's RTO stalls 0.559 s and 0.562 s,
/// network loss 0.243 s and 0.271 s, differ by up to 12%).
pub const COST_REL: f64 = 0.20;
/// Goodput moving by at most this share is unchanged (tcpdx choice, as above: repeated
/// lab runs of one transfer differ by a few percent).
pub const GOODPUT_REL: f64 = 0.10;
/// Goodput moving by less than this (bits/s) is unchanged: a trickle is no transfer.
pub const GOODPUT_FLOOR_BPS: f64 = 8_000.0;
/// A response-time percentile moving by at most this share is unchanged.
pub const SRT_REL: f64 = 0.20;
/// A response-time percentile moving by less than this (s) is unchanged (tcpdx choice:
/// the scheduling noise of a server answering from memory).
pub const SRT_FLOOR_S: f64 = 0.001;

/// How a figure where lower is better (a cost, a response time) moved from `before` to
/// `after`: more than `rel` of `before` and at least `floor`, else unchanged.
pub fn lower_is_better(before: f64, after: f64, rel: f64, floor: f64) -> Change {
    let d = after - before;
    if d.abs() < floor || d.abs() <= rel * before {
        Change::Unchanged
    } else if d < 0.0 {
        Change::Better
    } else {
        Change::Worse
    }
}

/// How a finding kind's cost (seconds) moved: gone when above [`COST_FLOOR_S`] before and
/// below it after, new the other way, else [`lower_is_better`] with [`COST_REL`].
pub fn cost_change(before_s: f64, after_s: f64) -> Change {
    match (before_s >= COST_FLOOR_S, after_s >= COST_FLOOR_S) {
        (false, false) => Change::Unchanged,
        (true, false) => Change::Gone,
        (false, true) => Change::New,
        (true, true) => lower_is_better(before_s, after_s, COST_REL, COST_FLOOR_S),
    }
}

/// How goodput (bits/s) moved: by more than [`GOODPUT_REL`] of `before` and at least
/// [`GOODPUT_FLOOR_BPS`], else unchanged. Higher is better.
pub fn goodput_change(before_bps: f64, after_bps: f64) -> Change {
    match lower_is_better(before_bps, after_bps, GOODPUT_REL, GOODPUT_FLOOR_BPS) {
        Change::Better => Change::Worse,
        Change::Worse => Change::Better,
        c => c,
    }
}

/// Replies an operation needs on each side for its percentiles to be judged (tcpdx
/// choice: the p95 of fewer is one of its few samples, as noisy as any one reply).
pub const SRT_MIN_REPLIES: u64 = 5;

/// How a response-time percentile (s, of that many replies) moved; [`Change::OneSide`]
/// when a side has none, [`Change::Few`] with fewer than [`SRT_MIN_REPLIES`] on a side.
pub fn srt_change(before: Option<(f64, u64)>, after: Option<(f64, u64)>) -> Change {
    match (before, after) {
        (Some((_, nb)), Some((_, na))) if nb.min(na) < SRT_MIN_REPLIES => Change::Few,
        (Some((b, _)), Some((a, _))) => lower_is_better(b, a, SRT_REL, SRT_FLOOR_S),
        _ => Change::OneSide,
    }
}

/// (after - before) / before, when before is not 0.
pub fn ratio(before: f64, after: f64) -> Option<f64> {
    (before > 0.0).then(|| after / before - 1.0)
}

/// What a kind is called in a verdict.
pub fn label(kind: &str) -> &'static str {
    match FindingKind::parse(kind) {
        Some(FindingKind::DelackSlowstartStall) => "delayed-ACK stall after loss",
        Some(FindingKind::NagleDelackStall) => "Nagle and delayed-ACK stall",
        Some(FindingKind::RtoStall) => "retransmission-timeout stall",
        Some(FindingKind::NetworkLoss) => "network loss",
        Some(FindingKind::SpuriousRetransmission) => "spurious retransmission",
        Some(FindingKind::Reordering) => "reordering",
        Some(FindingKind::CwndCollapse) => "congestion-window collapse",
        Some(FindingKind::ReceiverWindowLimited) => "receiver-window limit",
        Some(FindingKind::ReceiverHostDrops) => "drops inside the receiver",
        Some(FindingKind::FixedDurationStall) => "fixed-duration stall",
        Some(FindingKind::ApplicationLimited) => "application-limited time",
        Some(FindingKind::SenderLimited) => "sender's own limit (send buffer)",
        Some(FindingKind::HandshakeAndSetup) => "handshake and setup cost",
        Some(FindingKind::CaptureQuality) => "capture-quality problem",
        Some(FindingKind::PathLimited) | None => "path limit",
    }
}

fn s3(v: f64) -> String {
    format!("{v:.3} s")
}

/// A kind's phrase in the verdict, by its change (`None` when unchanged).
pub fn kind_phrase(k: &KindChange) -> Option<String> {
    let name = format!("the {} ({})", label(&k.kind), k.kind);
    let pct = percent(ratio(k.before_s, k.after_s));
    match k.change {
        Change::Gone => Some(format!("{name} is gone: {} -> 0 s", s3(k.before_s))),
        Change::New => Some(format!("{name} is new: 0 s -> {}", s3(k.after_s))),
        Change::Better | Change::Worse => Some(format!(
            "{name}: {} -> {} ({pct})",
            s3(k.before_s),
            s3(k.after_s)
        )),
        Change::Unchanged | Change::OneSide | Change::Few => None,
    }
}

/// A goodput phrase: `goodput 63.00 Mb/s -> 98.00 Mb/s (+56%)`.
pub fn goodput_phrase(before_bps: f64, after_bps: f64) -> String {
    format!(
        "goodput {} -> {} ({})",
        rate(before_bps),
        rate(after_bps),
        percent(ratio(before_bps, after_bps))
    )
}

/// An operation's phrase: `WRITE p95 234 ms -> 12.0 ms`.
pub fn op_phrase(o: &OpChange) -> Option<String> {
    let (b, a) = (o.before_s?, o.after_s?);
    Some(format!("{} p95 {} -> {}", o.op, ms(b.p95), ms(a.p95)))
}

/// The verdict line and what got worse: what went away or improved first (kinds gone,
/// then better, most seconds first), the main transfer's goodput, its operations' p95
/// that improved; then "worse: ...". "no change" when no rule saw a change.
pub fn verdict(
    kinds: &[KindChange],
    goodput: (f64, f64),
    ops: &[OpChange],
) -> (String, Vec<String>) {
    let mut better = Vec::new();
    let mut worse = Vec::new();
    let mut by_saving: Vec<&KindChange> = kinds.iter().collect();
    // Gone first, then the larger saving; new and worse ones by the larger loss.
    by_saving.sort_by(|a, b| {
        let rank = |k: &KindChange| u8::from(k.change != Change::Gone);
        rank(a).cmp(&rank(b)).then(
            (b.before_s - b.after_s)
                .abs()
                .total_cmp(&(a.before_s - a.after_s).abs()),
        )
    });
    for k in by_saving {
        let Some(p) = kind_phrase(k) else { continue };
        match k.change {
            Change::Gone | Change::Better => better.push(p),
            _ => worse.push(p),
        }
    }
    let g = goodput_change(goodput.0, goodput.1);
    let gp = goodput_phrase(goodput.0, goodput.1);
    let mut op_better = Vec::new();
    for o in ops {
        let Some(p) = op_phrase(o) else { continue };
        match o.change {
            Change::Better => op_better.push(p),
            Change::Worse => worse.push(p),
            _ => {}
        }
    }
    // The operation moving the most data is named even when its replies are too few to
    // judge: the figures, and that they say little.
    let data_op = ops
        .iter()
        .filter(|o| o.change == Change::Few && o.bytes_before + o.bytes_after > 0)
        .max_by_key(|o| o.bytes_before + o.bytes_after);
    let few = data_op.and_then(|o| {
        Some(format!(
            "{} ({} and {} replies: too few to judge)",
            op_phrase(o)?,
            o.count_before,
            o.count_after
        ))
    });
    if g == Change::Worse {
        worse.insert(0, gp.clone());
    }
    if better.is_empty() && op_better.is_empty() && worse.is_empty() && g == Change::Unchanged {
        return (format!("no change: {gp}, the same findings"), worse);
    }
    let mut line = better;
    if g != Change::Worse {
        line.push(gp);
    }
    line.extend(op_better);
    line.extend(few);
    let mut text = line.join("; ");
    if !worse.is_empty() {
        text.push_str("; worse: ");
        text.push_str(&worse.join("; "));
    }
    (text, worse)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tcpdx_report::compare::Percentiles;

    #[test]
    fn a_cost_is_gone_new_or_absent_at_its_floor() {
        let f = COST_FLOOR_S;
        assert_eq!(cost_change(f, 0.0), Change::Gone);
        assert_eq!(cost_change(f, f * 0.99), Change::Gone);
        assert_eq!(cost_change(f * 0.99, 0.0), Change::Unchanged);
        assert_eq!(cost_change(0.0, f), Change::New);
        assert_eq!(cost_change(0.0, f * 0.99), Change::Unchanged);
        assert_eq!(cost_change(0.0, 0.0), Change::Unchanged);
    }

    #[test]
    fn a_cost_is_better_or_worse_only_beyond_its_relative_threshold() {
        // Just inside and just outside the threshold (floats: exactly at it is either).
        let (b, inside, outside) = (1.0, COST_REL * 0.999, COST_REL * 1.001);
        assert_eq!(cost_change(b, b * (1.0 + inside)), Change::Unchanged);
        assert_eq!(cost_change(b, b * (1.0 + outside)), Change::Worse);
        assert_eq!(cost_change(b, b * (1.0 - inside)), Change::Unchanged);
        assert_eq!(cost_change(b, b * (1.0 - outside)), Change::Better);
        // Relative change large, absolute change below the floor: unchanged.
        assert_eq!(
            cost_change(0.02, 0.02 + COST_FLOOR_S * 0.99),
            Change::Unchanged
        );
        assert_eq!(cost_change(0.02, 0.02 + COST_FLOOR_S * 1.01), Change::Worse);
    }

    #[test]
    fn goodput_higher_is_better_beyond_both_floors() {
        let b = 100e6;
        let (inside, outside) = (GOODPUT_REL * 0.999, GOODPUT_REL * 1.001);
        assert_eq!(goodput_change(b, b * (1.0 + inside)), Change::Unchanged);
        assert_eq!(goodput_change(b, b * (1.0 + outside)), Change::Better);
        assert_eq!(goodput_change(b, b * (1.0 - inside)), Change::Unchanged);
        assert_eq!(goodput_change(b, b * (1.0 - outside)), Change::Worse);
        // A trickle doubling is no change.
        assert_eq!(goodput_change(1000.0, 2000.0), Change::Unchanged);
        assert_eq!(goodput_change(0.0, GOODPUT_FLOOR_BPS), Change::Better);
        assert_eq!(goodput_change(0.0, 0.0), Change::Unchanged);
    }

    #[test]
    fn response_times_of_too_few_replies_are_not_judged() {
        let n = SRT_MIN_REPLIES;
        assert_eq!(srt_change(Some((0.2, n)), Some((0.01, n))), Change::Better);
        assert_eq!(srt_change(Some((0.2, n - 1)), Some((0.01, n))), Change::Few);
        assert_eq!(srt_change(Some((0.2, n)), Some((0.01, n - 1))), Change::Few);
        let mut o = op(0.0183, 0.0464);
        (o.count_before, o.count_after) = (2, 2);
        o.change = srt_change(Some((0.0183, 2)), Some((0.0464, 2)));
        let (v, worse) = verdict(&[kind("network-loss", 0.43, 0.0)], (7.6e6, 12.6e6), &[o]);
        assert!(
            v.ends_with("; WRITE p95 18.3 ms -> 46.4 ms (2 and 2 replies: too few to judge)"),
            "{v}"
        );
        assert!(worse.is_empty());
    }

    #[test]
    fn response_times_lower_is_better_beyond_both_floors() {
        assert_eq!(
            srt_change(Some((0.234, 9)), Some((0.012, 9))),
            Change::Better
        );
        assert_eq!(
            srt_change(Some((0.012, 9)), Some((0.234, 9))),
            Change::Worse
        );
        assert_eq!(
            srt_change(Some((0.100, 9)), Some((0.100 * (1.0 + SRT_REL * 0.999), 9))),
            Change::Unchanged
        );
        assert_eq!(
            srt_change(Some((0.100, 9)), Some((0.100 * (1.0 + SRT_REL * 1.001), 9))),
            Change::Worse
        );
        // 0.2 ms -> 0.9 ms: +350%, but under the 1 ms floor.
        assert_eq!(
            srt_change(Some((0.0002, 9)), Some((0.0009, 9))),
            Change::Unchanged
        );
        assert_eq!(
            srt_change(Some((0.0002, 9)), Some((0.0013, 9))),
            Change::Worse
        );
        assert_eq!(srt_change(None, Some((0.1, 9))), Change::OneSide);
    }

    fn kind(k: &str, b: f64, a: f64) -> KindChange {
        KindChange {
            kind: k.into(),
            before_s: b,
            after_s: a,
            findings_before: u64::from(b > 0.0),
            findings_after: u64::from(a > 0.0),
            change: cost_change(b, a),
        }
    }

    fn op(b: f64, a: f64) -> OpChange {
        let p = |x: f64| Percentiles {
            p50: x / 2.0,
            p95: x,
            p99: x,
        };
        OpChange {
            protocol: "nfs".into(),
            op: "WRITE".into(),
            count_before: 10,
            count_after: 10,
            bytes_before: 10 << 20,
            bytes_after: 10 << 20,
            before_s: Some(p(b)),
            after_s: Some(p(a)),
            change: srt_change(Some((b, 10)), Some((a, 10))),
        }
    }

    #[test]
    fn the_verdict_names_what_went_away_then_goodput_then_response_times() {
        let (v, worse) = verdict(
            &[
                kind("rto-stall", 0.5, 0.5),
                kind("delack-slowstart-stall", 0.62, 0.0),
            ],
            (63e6, 98e6),
            &[op(0.234, 0.012)],
        );
        assert_eq!(
            v,
            "the delayed-ACK stall after loss (delack-slowstart-stall) is gone: 0.620 s -> 0 s; \
             goodput 63.00 Mb/s -> 98.00 Mb/s (+56%); WRITE p95 234 ms -> 12.0 ms"
        );
        assert!(worse.is_empty());
    }

    #[test]
    fn what_got_worse_comes_after_the_improvements() {
        let (v, worse) = verdict(
            &[
                kind("network-loss", 0.4, 0.0),
                kind("receiver-window-limited", 0.0, 0.3),
            ],
            (10e6, 5e6),
            &[op(0.010, 0.050)],
        );
        assert!(v.starts_with("the network loss (network-loss) is gone: 0.400 s -> 0 s; worse: "));
        assert_eq!(worse.len(), 3, "{worse:?}");
        assert!(
            worse[0].starts_with("goodput 10.00 Mb/s -> 5.00 Mb/s (-50%)"),
            "{worse:?}"
        );
        assert!(
            worse
                .iter()
                .any(|w| w.contains("receiver-window-limited) is new"))
        );
        assert!(worse.iter().any(|w| w == "WRITE p95 10.0 ms -> 50.0 ms"));
    }

    #[test]
    fn nothing_moving_is_no_change() {
        let (v, worse) = verdict(
            &[kind("rto-stall", 0.5, 0.55), kind("path-limited", 0.0, 0.0)],
            (50e6, 52e6),
            &[op(0.010, 0.0105)],
        );
        assert!(
            v.starts_with("no change: goodput 50.00 Mb/s -> 52.00 Mb/s (+4%)"),
            "{v}"
        );
        assert!(worse.is_empty());
    }
}
