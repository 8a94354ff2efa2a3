//! tcpdx-report: renderers, the last stage of the pipeline.
//!
//! capture -> wire -> core -> detect -> **report**. Each renderer writes to a caller-given
//! `io::Write`; streaming renderers (`events`) implement `EventSink` so per-packet output
//! never materialises in memory (ripgrep's printers-as-sinks).
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod compare;
pub mod diagnose;
pub mod events;
pub mod flows;
mod fmt;
pub mod html;
pub mod line;
pub mod srt;
pub mod vantage;

pub use compare::{Comparison, write_comparison_json, write_comparison_text};
pub use diagnose::{fails, write_diagnosis_json, write_diagnosis_text, write_diagnosis_text_all};
pub use events::{CsvTail, EventsCsv, EventsJsonl, csv_head};
pub use flows::{EvictedTotals, write_flows_json, write_flows_table};
pub use html::{GraphRecorder, write_html_report};
pub use line::{Line, Row};
pub use srt::{TransactionsCsv, write_srt_json, write_srt_text};
pub use vantage::{Vantage, write_vantage_json, write_vantage_text};
