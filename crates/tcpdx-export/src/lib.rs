//! tcpdx-export: an analysis as Parquet tables (`tcpdx export FILE -o DIR`).
//!
//! Pipeline stage "export", beside tcpdx-report: the same results (segment rows, flow
//! summaries, storage transactions, findings, time budget) as files for pandas, polars and
//! DuckDB. [`schema`] defines the tables (docs/parquet-format.md is generated from it),
//! [`table`] writes one Parquet file a row group at a time, [`rows`] maps results to rows
//! and [`Exporter`] is the sink that feeds them all in one pass.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

#[cfg(feature = "arrow")]
pub mod arrow;
pub mod exporter;
pub mod rows;
pub mod schema;
pub mod table;

pub use exporter::{ExportError, ExportErrorKind, Exporter, RowCounts};
pub use schema::{FORMAT_VERSION, TABLES};
pub use table::{Cell, RowSink, TableError};
