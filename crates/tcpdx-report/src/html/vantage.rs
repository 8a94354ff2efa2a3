//! The report's two-vantage-point section (`tcpdx report --vantage A B`): per connection
//! direction, its time-sequence at A and at B as two graphs on one time axis (B's times in
//! A's clock), each loss marked on the graph of the point it was lost next to. Drawn as
//! inline SVG, so the section needs no script.

use std::fmt::Write as _;

use crate::vantage::{Location, TwoPointGraph, Vantage};

const WIDTH: f64 = 900.0;
const PANEL: f64 = 170.0;
const GAP: f64 = 26.0;
const LEFT: f64 = 70.0;

/// Marker colour of a loss place.
fn colour(l: Location) -> &'static str {
    match l {
        Location::BeforeA => "#8e44ad",
        Location::Between => "#d62728",
        Location::AfterB => "#ff7f0e",
    }
}

/// The section's HTML: a summary and the graphs of `v.graphs`.
pub fn vantage_section(v: &Vantage) -> String {
    let mut o = String::new();
    let _ = write!(
        o,
        "<section id=\"vantage\"><h2>Two vantage points</h2><p class=\"meta\">A = {}, B = {}; \
         B − A = {:+.6} s, drift {:+.1} ppm; {} segments at both points; losses: {} before A, \
         {} between A and B, {} after B; {} capture drops</p>",
        esc(&v.file_a),
        esc(&v.file_b),
        v.offset_s,
        v.drift_ppm,
        v.matched,
        v.losses_at(Location::BeforeA),
        v.losses_at(Location::Between),
        v.losses_at(Location::AfterB),
        v.capture_drops.len()
    );
    let _ = write!(
        o,
        "<p class=\"meta\">Markers: <span style=\"color:{}\">■ lost before A</span> \
         <span style=\"color:{}\">■ lost between A and B</span> \
         <span style=\"color:{}\">■ lost after B</span></p>",
        colour(Location::BeforeA),
        colour(Location::Between),
        colour(Location::AfterB)
    );
    for g in &v.graphs {
        graph(&mut o, g);
    }
    o.push_str("</section>\n");
    o
}

fn graph(o: &mut String, g: &TwoPointGraph) {
    let all =
        g.a.iter()
            .chain(&g.b)
            .copied()
            .chain(g.losses.iter().map(|l| (l.0, l.1)));
    let (mut t0, mut t1, mut s1) = (f64::MAX, f64::MIN, 1.0f64);
    for (t, s) in all {
        t0 = t0.min(t);
        t1 = t1.max(t);
        s1 = s1.max(s);
    }
    if t0 > t1 {
        return;
    }
    let span = (t1 - t0).max(1e-6);
    let x = |t: f64| LEFT + (t - t0) / span * (WIDTH - LEFT - 10.0);
    let height = 2.0 * PANEL + 3.0 * GAP;
    let _ = write!(
        o,
        "<figure class=\"vantage-graph\" data-stream=\"{}\" data-direction=\"{}\"><figcaption>tcp.stream {} {}: \
         time-sequence at A (top) and B (bottom), {:.3}–{:.3} s</figcaption>\
         <svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"{height}\" \
         viewBox=\"0 0 {WIDTH} {height}\">",
        g.stream, g.direction, g.stream, g.direction, t0, t1
    );
    for (k, (name, pts)) in [("A", &g.a), ("B", &g.b)].into_iter().enumerate() {
        let top = GAP + k as f64 * (PANEL + GAP);
        let y = |s: f64| top + PANEL - s / s1 * PANEL;
        let _ = write!(
            o,
            "<rect x=\"{LEFT}\" y=\"{top}\" width=\"{}\" height=\"{PANEL}\" fill=\"none\" stroke=\"#999\"/>\
             <text x=\"4\" y=\"{}\" font-size=\"12\">at {name}</text>\
             <text x=\"4\" y=\"{}\" font-size=\"10\">{:.0} B</text>",
            WIDTH - LEFT - 10.0,
            top + 14.0,
            top + 28.0,
            s1
        );
        let _ = write!(
            o,
            "<path class=\"seq-{name}\" fill=\"none\" stroke=\"#1f77b4\" d=\""
        );
        for &(t, s) in pts.iter() {
            let _ = write!(o, "M{:.1} {:.1}h1.5", x(t), y(s));
        }
        o.push_str("\"/>");
        for &(t, s, l) in &g.losses {
            let here = matches!(
                (k, l),
                (0, Location::BeforeA | Location::Between)
                    | (1, Location::AfterB | Location::Between)
            );
            if here {
                let _ = write!(
                    o,
                    "<circle class=\"loss\" data-location=\"{}\" cx=\"{:.1}\" cy=\"{:.1}\" r=\"3\" fill=\"{}\"/>",
                    l.as_str(),
                    x(t),
                    y(s),
                    colour(l)
                );
            }
        }
    }
    let axis = height - 6.0;
    let _ = write!(
        o,
        "<text x=\"{LEFT}\" y=\"{axis}\" font-size=\"10\">{t0:.3} s</text>\
         <text x=\"{}\" y=\"{axis}\" font-size=\"10\" text-anchor=\"end\">{t1:.3} s (A's clock)</text></svg></figure>",
        WIDTH - 10.0
    );
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// `page` (a whole report) with `section` before its data and scripts.
pub fn with_section(page: &str, section: &str) -> String {
    let at = page
        .find("<script type=\"application/json\" id=\"tcpdx-data\">")
        .unwrap_or(page.len());
    let (head, tail) = page.split_at(at);
    format!("{head}{section}{tail}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_panels_and_a_marker_per_panel_of_its_place() {
        let v = Vantage {
            file_a: "a<.pcap".into(),
            graphs: vec![TwoPointGraph {
                stream: 3,
                direction: "a_to_b",
                a: vec![(0.0, 1.0), (1.0, 1000.0)],
                b: vec![(0.01, 1.0)],
                losses: vec![
                    (0.5, 500.0, Location::Between),
                    (0.6, 600.0, Location::AfterB),
                ],
            }],
            ..Vantage::default()
        };
        let s = vantage_section(&v);
        assert!(s.contains("a&lt;.pcap"));
        assert_eq!(s.matches("<svg").count(), 1);
        assert_eq!(s.matches("class=\"seq-A\"").count(), 1);
        assert_eq!(s.matches("class=\"seq-B\"").count(), 1);
        // Between: on both panels; after B: on B's only.
        assert_eq!(s.matches("data-location=\"between\"").count(), 2);
        assert_eq!(s.matches("data-location=\"after_b\"").count(), 1);
        let page = "<html><body>x<script type=\"application/json\" id=\"tcpdx-data\">{}</script></body></html>";
        let p = with_section(page, &s);
        assert!(p.find("id=\"vantage\"").unwrap() < p.find("tcpdx-data").unwrap());
    }
}
