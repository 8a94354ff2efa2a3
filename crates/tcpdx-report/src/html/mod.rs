//! `tcpdx report`: one self-contained HTML file with the findings, the time budget and
//! per-connection graphs.
//!
//! The caller runs the diagnosis, picks connections ([`select`]), replays the capture
//! through a [`GraphRecorder`] restricted to them ([`series`], decimated with [`bins`] so
//! the page stays small and fast for any capture size) and writes the page ([`page`]).
//! The page inlines uPlot (installed with npm, see assets/update.sh) and opens offline.

pub mod bins;
pub mod compare;
pub mod page;
pub mod select;
pub mod series;
pub mod vantage;

pub use compare::write_html_comparison;
pub use page::{Page, Section, write_html_report};
pub use select::{Chosen, TopBytes, choose};
pub use series::{ConnGraphs, GraphRecorder, SeriesConfig};
