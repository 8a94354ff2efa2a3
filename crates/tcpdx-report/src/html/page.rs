//! Writes the self-contained HTML page: findings and time budget as HTML, the graphs'
//! data as one JSON block drawn by the inlined charting library (uPlot) and our script.

use std::fmt::Write as _;
use std::io::{self, Write};

use serde::Serialize;
use tcpdx_detect::{ConnBudget, ConnInference, Diagnosis, Finding, State, TimeBudget};

use super::series::ConnGraphs;
use crate::fmt::{bps, bytes};

/// uPlot, installed with npm and copied by assets/update.sh (MIT, see the page footer).
pub(super) const UPLOT_JS: &str = include_str!("../../assets/vendor/uPlot.iife.min.js");
pub(super) const UPLOT_CSS: &str = include_str!("../../assets/vendor/uPlot.min.css");
pub(super) const UPLOT_VERSION: &str = include_str!("../../assets/vendor/VERSION");
/// The page's own script: builds the charts from the JSON block, sets the render marker.
pub(super) const REPORT_JS: &str = include_str!("../../assets/report.js");
pub(super) const REPORT_CSS: &str = include_str!("../../assets/report.css");
/// Installed first, so that an error anywhere later is recorded on the page.
pub(super) const ERROR_TRAP: &str = "window.tcpdxErrors=[];function tcpdxError(m){window.tcpdxErrors.push(String(m));document.documentElement.setAttribute('data-tcpdx-errors',window.tcpdxErrors.join(' | '));}window.addEventListener('error',function(e){tcpdxError(e.message||e);});window.addEventListener('unhandledrejection',function(e){tcpdxError(e.reason);});";

/// Evidence frames listed per finding (the JSON of `diagnose --json` has them all).
const EVIDENCE_SHOWN: usize = 20;
/// Episodes listed per finding.
const EPISODES_SHOWN: usize = 10;

/// One graphed connection.
#[derive(Clone, Debug)]
pub struct Section {
    /// Its series.
    pub graphs: ConnGraphs,
    /// Why it was chosen.
    pub reasons: Vec<&'static str>,
    /// Payload bytes (both directions), if known.
    pub bytes: Option<u64>,
}

/// What the page shows.
#[derive(Clone, Debug)]
pub struct Page<'a> {
    /// Capture file name, as given.
    pub file: &'a str,
    /// Frames read.
    pub frames: u64,
    /// The diagnosis of the whole capture.
    pub diagnosis: &'a Diagnosis,
    /// The graphed connections.
    pub sections: &'a [Section],
}

#[derive(Serialize)]
struct Stall {
    s: f64,
    e: f64,
    kind: &'static str,
}

#[derive(Serialize)]
struct ConnData<'a> {
    #[serde(flatten)]
    g: &'a ConnGraphs,
    stalls: Vec<Stall>,
}

#[derive(Serialize)]
struct PageData<'a> {
    version: u32,
    conns: Vec<ConnData<'a>>,
}

/// Kinds of chart the script draws, with their titles.
const TSEQ: (&str, &str) = ("tseq", "Time-sequence");
const TPUT: (&str, &str) = ("tput", "Throughput");
const RTT: (&str, &str) = ("rtt", "RTT");
const FLIGHT: (&str, &str) = ("flight", "Bytes in flight and sender window");
const SRT: (&str, &str) = ("srt", "Storage response times");
const OUTSTANDING: (&str, &str) = ("outstanding", "Outstanding storage requests");

/// Writes the whole page.
pub fn write_html_report(w: &mut dyn Write, p: &Page<'_>) -> io::Result<()> {
    let mut body = String::new();
    let graphs = body_html(&mut body, p);
    let data = page_data(p);
    let json = serde_json::to_string(&data).map_err(io::Error::other)?;
    let title = format!("tcpdx report: {}", esc(p.file));
    write!(
        w,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{title}</title>\n<script>{ERROR_TRAP}</script>\n<style>{UPLOT_CSS}\n{REPORT_CSS}</style>\
         </head>\n<body data-tcpdx-expected=\"{graphs}\">\n"
    )?;
    w.write_all(body.as_bytes())?;
    // `</` cannot end the JSON block early once escaped (`<\/` is the same JSON string).
    write!(
        w,
        "<script type=\"application/json\" id=\"tcpdx-data\">{}</script>\n\
         <script>{UPLOT_JS}</script>\n<script>{REPORT_JS}</script>\n</body></html>\n",
        json.replace("</", "<\\/")
    )
}

fn page_data<'a>(p: &'a Page<'_>) -> PageData<'a> {
    PageData {
        version: 1,
        conns: p
            .sections
            .iter()
            .map(|s| ConnData {
                g: &s.graphs,
                stalls: stalls(p.diagnosis, s.graphs.stream),
            })
            .collect(),
    }
}

/// The episodes of the connection's findings, to shade on its graphs.
fn stalls(d: &Diagnosis, stream: u32) -> Vec<Stall> {
    d.findings
        .iter()
        .filter(|f| f.stream == Some(stream))
        .flat_map(|f| {
            f.episode_list.iter().map(|e| Stall {
                s: e.start_s,
                e: e.start_s + e.duration_s,
                kind: f.kind.as_str(),
            })
        })
        .collect()
}

/// Writes the body's HTML; returns the number of graphs the script must draw.
fn body_html(o: &mut String, p: &Page<'_>) -> usize {
    let d = p.diagnosis;
    let _ = writeln!(
        o,
        "<header><h1>tcpdx report</h1><p class=\"meta\"><b>{}</b> · {} frames · {} connections · \
         {} findings · {} graphed</p><nav><a href=\"#findings\">Findings</a> \
         <a href=\"#budget\">Time budget</a> <a href=\"#connections\">Connections</a></nav></header>",
        esc(p.file),
        p.frames,
        d.connections.len(),
        d.findings.len(),
        p.sections.len()
    );
    findings_html(o, d);
    let mut graphs = budget_html(o, &d.time_budget, p.sections);
    o.push_str("<section id=\"connections\"><h2>Connections</h2>\n");
    if p.sections.is_empty() {
        o.push_str("<p>No connection carried data.</p>\n");
    }
    o.push_str(
        "<p class=\"hint\">Drag across a graph to zoom (the connection's graphs follow), \
         double-click to zoom out, hover for values; click a legend entry to hide it. Shaded: \
         episodes of the findings.</p>\n",
    );
    for (i, s) in p.sections.iter().enumerate() {
        graphs += conn_html(o, i, s, d);
    }
    o.push_str("</section>\n");
    let _ = writeln!(
        o,
        "<footer>Generated by tcpdx {}. Charts drawn with {} (MIT licence, © Leon Sorokin).\
         </footer>",
        env!("CARGO_PKG_VERSION"),
        esc(UPLOT_VERSION.trim())
    );
    graphs
}

fn findings_html(o: &mut String, d: &Diagnosis) {
    o.push_str("<section id=\"findings\"><h2>Findings</h2>\n");
    if d.findings.is_empty() {
        o.push_str("<p>No findings: no TCP connection with data to diagnose.</p>\n");
    }
    for (i, f) in d.findings.iter().enumerate() {
        finding_html(o, i + 1, f);
    }
    o.push_str("</section>\n");
}

fn finding_html(o: &mut String, n: usize, f: &Finding) {
    let stream = match f.stream {
        Some(s) => format!("<a href=\"#stream-{s}\">stream {s}</a>"),
        None => "whole capture".to_string(),
    };
    let sev = f.severity.as_str();
    let _ = write!(
        o,
        "<article class=\"finding sev-{sev}\"><h3>{n}. {} <span class=\"sev\">{sev}</span> \
         <span class=\"where\">{stream}</span></h3>\n<p class=\"cost\">Cost: <b>{:.3} s</b> \
         ({:.1}% of the time), {} episode{}",
        f.kind.as_str(),
        f.cost.seconds,
        f.cost.share * 100.0,
        f.episodes,
        if f.episodes == 1 { "" } else { "s" }
    );
    if let Some(g) = f.cost.goodput_without_bps {
        let _ = write!(o, "; goodput without it: {}", bps(g));
    }
    let _ = write!(
        o,
        "; confidence {:.0}%</p>\n<p>{}</p>\n",
        f.confidence * 100.0,
        esc(&f.explanation)
    );
    if !f.recommendations.is_empty() {
        o.push_str("<p class=\"label\">Recommendations</p><ol>");
        for r in &f.recommendations {
            let _ = write!(o, "<li>{}</li>", esc(r));
        }
        o.push_str("</ol>\n");
    }
    if !f.episode_list.is_empty() {
        o.push_str("<p class=\"episodes\">Episodes: ");
        for (i, e) in f.episode_list.iter().take(EPISODES_SHOWN).enumerate() {
            let sep = if i > 0 { ", " } else { "" };
            let _ = write!(o, "{sep}{:.3} s (+{:.3} s)", e.start_s, e.duration_s);
        }
        if f.episodes as usize > EPISODES_SHOWN {
            let _ = write!(o, " … ({} in all)", f.episodes);
        }
        o.push_str("</p>\n");
    }
    if !f.evidence.is_empty() || !f.wireshark_filter.is_empty() {
        let _ = write!(
            o,
            "<details><summary>Evidence: {} frame{}</summary>",
            f.evidence.len(),
            if f.evidence.len() == 1 { "" } else { "s" }
        );
        if !f.wireshark_filter.is_empty() {
            let _ = write!(
                o,
                "<p>Wireshark filter: <code>{}</code></p>",
                esc(&f.wireshark_filter)
            );
        }
        o.push_str("<table><tr><th>frame</th><th>role</th></tr>");
        for e in f.evidence.iter().take(EVIDENCE_SHOWN) {
            let at = e.source.as_ref().map_or(String::new(), |s| {
                format!(" ({} #{})", esc(&s.file), s.frame)
            });
            let _ = write!(
                o,
                "<tr><td>{}{at}</td><td>{}</td></tr>",
                e.frame,
                esc(&e.role)
            );
        }
        o.push_str("</table>");
        if f.evidence.len() > EVIDENCE_SHOWN {
            let _ = write!(
                o,
                "<p>… and {} more (tcpdx diagnose --json lists them all)</p>",
                f.evidence.len() - EVIDENCE_SHOWN
            );
        }
        o.push_str("</details>\n");
    }
    o.push_str("</article>\n");
}

/// Human label of a budget state.
fn state_label(s: State) -> &'static str {
    match s {
        State::RetransmissionTimeout => "retransmission timeout",
        State::DelayedAckStall => "delayed-ACK stall",
        State::ZeroWindow => "zero window",
        State::LossRecovery => "loss recovery",
        State::ServerThinkTime => "server think time",
        State::ApplicationIdle => "application idle",
        State::ReceiverWindowLimited => "receiver window limited",
        State::Sending => "sending",
    }
}

/// The time budget as stacked bars (the capture's, then each graphed connection's);
/// returns the number of graphs (0 when no connection lasted any time).
fn budget_html(o: &mut String, b: &TimeBudget, sections: &[Section]) -> usize {
    o.push_str("<section id=\"budget\"><h2>Time budget</h2>\n");
    if b.seconds <= 0.0 {
        o.push_str("<p>No TCP connection lasted any time: nothing to budget.</p></section>\n");
        return 0;
    }
    let _ = write!(
        o,
        "<p>Where the connections' time went: {:.3} connection-seconds in all.</p>\n\
         <div class=\"graph budget\" data-kind=\"budget\">",
        b.seconds
    );
    bar(o, "all connections", b.seconds, |s| b.states.get(s));
    for s in sections {
        let parts: Vec<&ConnBudget> = b
            .connections
            .iter()
            .filter(|c| c.stream == s.graphs.stream)
            .collect();
        let total: f64 = parts.iter().map(|c| c.seconds).sum();
        let label = format!("stream {}", s.graphs.stream);
        bar(o, &label, total, |st| {
            parts.iter().map(|c| c.states.get(st)).sum()
        });
    }
    o.push_str("<div class=\"legend\">");
    for s in State::ALL {
        let _ = write!(
            o,
            "<span><i class=\"st-{}\"></i>{}</span>",
            s.as_str(),
            state_label(s)
        );
    }
    o.push_str("</div></div>");
    sending_limits_html(o, b);
    o.push_str("</section>\n");
    1
}

/// What limited the senders while they sent: the `sending` seconds by round limit.
fn sending_limits_html(o: &mut String, b: &TimeBudget) {
    let parts: Vec<String> = tcpdx_detect::infer::limit::Limit::ALL
        .iter()
        .map(|&l| (l, b.sending_limits.get(l)))
        .filter(|&(_, secs)| secs > 0.0)
        .map(|(l, secs)| format!("{} {secs:.3} s", limit_label(l.as_str())))
        .collect();
    if !parts.is_empty() {
        let _ = writeln!(
            o,
            "<p class=\"meta\">Of the sending time, by what limited the main sender's round \
             trip: {}.</p>",
            parts.join(", ")
        );
    }
}

fn bar(o: &mut String, label: &str, total: f64, get: impl Fn(State) -> f64) {
    let _ = write!(
        o,
        "<div class=\"brow\"><span class=\"blabel\">{}</span><div class=\"bar\">",
        esc(label)
    );
    if total > 0.0 {
        for s in State::ALL {
            let secs = get(s);
            let share = secs / total;
            if share <= 0.0 {
                continue;
            }
            let _ = write!(
                o,
                "<span class=\"seg st-{}\" style=\"width:{:.3}%\" title=\"{}: {:.3} s ({:.1}%)\"></span>",
                s.as_str(),
                share * 100.0,
                state_label(s),
                secs,
                share * 100.0
            );
        }
    }
    let _ = write!(o, "</div><span class=\"btotal\">{total:.3} s</span></div>");
}

fn inference_html(o: &mut String, c: &ConnInference) {
    let _ = writeln!(
        o,
        "<p class=\"meta\">{} → {} · capture {} · RTT {} · path {} · goodput {} · {} round trips \
         ({} slow start, {} congestion avoidance), up to {} segments per round · {} loss episodes</p>",
        esc(&c.client),
        esc(&c.server),
        serde_json::to_value(c.capture_point)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default()
            .replace('_', " "),
        c.rtt_s
            .map_or_else(|| "unknown".into(), |r| format!("{:.3} ms", r * 1e3)),
        bps(c.path_bps),
        bps(c.goodput_bps),
        c.rounds,
        c.slow_start_rounds,
        c.congestion_avoidance_rounds,
        c.max_packets_per_round,
        c.loss_episodes
    );
}

/// One connection's heading and graph slots; returns the number of graphs.
fn conn_html(o: &mut String, i: usize, s: &Section, d: &Diagnosis) -> usize {
    let g = &s.graphs;
    let _ = writeln!(
        o,
        "<article class=\"conn\" id=\"stream-{}\"><h3>Stream {} <span class=\"why\">{}</span></h3>",
        g.stream,
        g.stream,
        s.reasons.join(", ")
    );
    if let Some(c) = d.connections.iter().find(|c| c.stream == g.stream) {
        inference_html(o, c);
    }
    let dir = g.dir.replace('_', " ");
    let _ = write!(
        o,
        "<p class=\"meta\">Graphed direction: {dir}{}.</p>\n<div class=\"graphs\">",
        s.bytes
            .map(|b| format!(" · {} of payload in both directions", bytes(b)))
            .unwrap_or_default()
    );
    let mut n = 0;
    let mut slot = |(kind, title): (&str, &str), show: bool| {
        if show {
            let _ = write!(
                o,
                "<div class=\"graph chart\" data-kind=\"{kind}\" data-conn=\"{i}\" \
                 data-stream=\"{}\"><h4>{title}</h4><div class=\"plot\"></div></div>",
                g.stream
            );
            n += 1;
        }
    };
    slot(TSEQ, g.tseq_points() > 0);
    slot(TPUT, !g.tput.t.is_empty());
    slot(RTT, !g.rtt_ms.is_empty());
    slot(
        FLIGHT,
        !g.in_flight.is_empty() || !g.sender_window.is_empty(),
    );
    slot(SRT, !g.srt_ms.is_empty());
    slot(OUTSTANDING, !g.outstanding.is_empty());
    o.push_str("</div>");
    limits_legend(o, g);
    o.push_str("</article>\n");
    n
}

/// Human label of a round limit (`infer::limit::Limit::as_str`).
fn limit_label(l: &str) -> &'static str {
    match l {
        "cwnd" => "congestion window",
        "receiver_window" => "receiver window",
        "sender" => "sender (send buffer or application)",
        "pacing" => "pacing rate",
        "recovery" => "loss recovery",
        "timeout" => "retransmission timeout",
        _ => "other",
    }
}

/// The legend of the limits shaded on the flight graph: the limits present, in the order
/// of `Limit::ALL`.
fn limits_legend(o: &mut String, g: &ConnGraphs) {
    if g.limits.is_empty() {
        return;
    }
    o.push_str(
        "<p class=\"legend limits\">Shaded on the bytes-in-flight graph, what limited the \
         sender round trip by round trip: ",
    );
    for l in tcpdx_detect::infer::limit::Limit::ALL {
        let name = l.as_str();
        if g.limits.iter().any(|b| b.limit == name) {
            let _ = write!(
                o,
                "<span data-limit=\"{name}\"><i class=\"lim-{name}\"></i>{}</span>",
                limit_label(name)
            );
        }
    }
    o.push_str("</p>\n");
}

/// HTML-escapes text (five characters; a crate for this would be the only one needed).
pub(super) fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use tcpdx_detect::{Episode, FindingKind, Severity};

    use super::super::series::Line;
    use super::*;

    fn page_with(d: &Diagnosis, sections: &[Section]) -> String {
        let p = Page {
            file: "x<y>.pcap",
            frames: 10,
            diagnosis: d,
            sections,
        };
        let mut v = Vec::new();
        write_html_report(&mut v, &p).unwrap();
        String::from_utf8(v).unwrap()
    }

    fn section(stream: u32) -> Section {
        let mut g = ConnGraphs {
            stream,
            dir: "client_to_server",
            ..ConnGraphs::default()
        };
        g.tseq.ack = Line {
            t: vec![0.5],
            v: vec![100],
        };
        g.tput.t = vec![0.0];
        g.tput.total_bps = vec![8.0];
        g.tput.goodput_bps = vec![8.0];
        g.srt_ms = Line {
            t: vec![1.0],
            v: vec![2.5],
        };
        Section {
            graphs: g,
            reasons: vec!["most bytes"],
            bytes: Some(1000),
        }
    }

    #[test]
    fn the_page_is_self_contained_and_counts_its_graphs() {
        let mut d = Diagnosis::default();
        d.time_budget.seconds = 2.0;
        let mut f = Finding::new(FindingKind::RtoStall, Some(3));
        f.severity = Severity::Major;
        f.explanation = "a </script> <b>".into();
        f.episode_list.push(Episode {
            start_s: 0.25,
            duration_s: 0.5,
        });
        d.findings.push(f);
        let html = page_with(&d, &[section(3)]);
        // budget + tseq + tput + srt
        assert!(html.contains("data-tcpdx-expected=\"4\""), "graph count");
        assert!(html.contains("a &lt;/script&gt; &lt;b&gt;"));
        assert!(html.contains("x&lt;y&gt;.pcap"));
        assert!(!html.contains("src=\"http") && !html.contains("href=\"http"));
        assert!(html.contains("\"stalls\":[{\"s\":0.25,\"e\":0.75,\"kind\":\"rto-stall\"}]"));
        let start = html.find("id=\"tcpdx-data\">").unwrap();
        let end = start + html[start..].find("</script>").unwrap();
        let json = &html[start + "id=\"tcpdx-data\">".len()..end];
        let v: serde_json::Value = serde_json::from_str(json).unwrap();
        assert_eq!(v["conns"][0]["stream"], 3);
        assert_eq!(v["conns"][0]["srt_ms"]["v"][0], 2.5);
        assert!(html.contains(UPLOT_JS));
    }

    #[test]
    fn an_empty_capture_still_renders() {
        let html = page_with(&Diagnosis::default(), &[]);
        assert!(html.contains("data-tcpdx-expected=\"0\""));
        assert!(html.contains("nothing to budget"));
        assert!(html.contains("No findings"));
    }

    #[test]
    fn the_limits_shaded_have_a_legend_entry_each() {
        let d = Diagnosis::default();
        let mut s = section(3);
        s.graphs.limits = vec![
            super::super::series::LimitBand {
                s: 0.0,
                e: 0.1,
                limit: "receiver_window",
            },
            super::super::series::LimitBand {
                s: 0.1,
                e: 0.2,
                limit: "cwnd",
            },
        ];
        let html = page_with(&d, &[s]);
        assert!(html.contains("<i class=\"lim-receiver_window\"></i>receiver window"));
        assert!(html.contains("<i class=\"lim-cwnd\"></i>congestion window"));
        assert!(!html.contains("data-limit=\"sender\""));
        // Congestion window first, as in Limit::ALL; the bands in the graphs' data.
        assert!(html.find("lim-cwnd\"").unwrap() < html.find("lim-receiver_window\"").unwrap());
        assert!(html.contains("\"limits\":[{\"s\":0.0,\"e\":0.1,\"limit\":\"receiver_window\"}"));
        // The budget's sending time by limit, when there is any.
        let mut d = Diagnosis::default();
        let mut st = tcpdx_detect::budget::StateTimes::default();
        st.0[7] = 1.0;
        let mut lim = tcpdx_detect::LimitTimes::default();
        lim.0[1] = 0.25;
        d.time_budget.push(ConnBudget {
            stream: 3,
            seconds: 1.0,
            states: st,
            sending_limits: lim,
            start_s: 0.0,
        });
        let html = page_with(&d, &[]);
        assert!(
            html.contains("by what limited the main sender's round trip: receiver window 0.250 s."),
            "{html}"
        );
        // Without bands, no legend.
        let html = page_with(&d, &[section(3)]);
        assert!(!html.contains("legend limits"));
    }

    #[test]
    fn escaping_covers_the_five_characters() {
        assert_eq!(
            esc("<a href='x'>&\"</a>"),
            "&lt;a href=&#39;x&#39;&gt;&amp;&quot;&lt;/a&gt;"
        );
    }
}
