//! The tables of `tcpdx export` as Arrow record batches (feature `arrow`; the Python API's
//! `tcpdx.segments()` and friends): the export's schemas and row functions, built a batch
//! at a time and handed over as each is complete, so memory holds one batch.

use tcpdx_core::{EventSink, SegmentAnalysis, SegmentDetail};
use tcpdx_export::TableError;
use tcpdx_export::arrow::BatchBuilder;
use tcpdx_export::rows::{SegmentRows, flow_rows, round_row, transaction_row};
use tcpdx_export::schema::{FLOWS, ROUNDS, SEGMENTS, TRANSACTIONS, TableDef};
use tcpdx_storage::{StorageSink, Transaction};
use tcpdx_wire::Timestamp;

pub use arrow_array::RecordBatch;
pub use arrow_schema::SchemaRef;

use crate::{Capture, Error, Options};

/// A table of [`Capture::batches`]: its rows and columns are those of the Parquet file of
/// the same name that [`Capture::export`] writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Table {
    /// One row per TCP segment, in frame order.
    Segments,
    /// One row per connection and direction, in stream order.
    Flows,
    /// One row per storage request with its reply, in reply order.
    Transactions,
    /// One row per sender round trip, by stream and direction: flight, delivered bytes,
    /// congestion-window estimate and what limited it.
    Rounds,
}

impl Table {
    /// Every table.
    pub const ALL: [Table; 4] = [
        Table::Segments,
        Table::Flows,
        Table::Transactions,
        Table::Rounds,
    ];

    fn def(self) -> &'static TableDef {
        match self {
            Table::Segments => &SEGMENTS,
            Table::Flows => &FLOWS,
            Table::Transactions => &TRANSACTIONS,
            Table::Rounds => &ROUNDS,
        }
    }

    /// The table's name (its Parquet file is `NAME.parquet`).
    pub fn name(self) -> &'static str {
        self.def().name
    }

    /// The table called `name`.
    pub fn parse(name: &str) -> Option<Table> {
        Table::ALL.into_iter().find(|t| t.name() == name)
    }

    /// Its Arrow schema (the one a Parquet reader gives the exported file).
    pub fn schema(self) -> SchemaRef {
        tcpdx_export::arrow::schema(self.def())
    }
}

impl Capture {
    /// The rows of `table` as record batches of at most `batch_rows` rows, each into `each`
    /// as soon as it is built (`each` returns false to stop the pass early). Same options,
    /// same rows as [`Capture::export`]'s file, on [`Options::threads`] threads.
    pub fn batches(
        &mut self,
        o: &Options,
        table: Table,
        batch_rows: usize,
        each: impl FnMut(RecordBatch) -> bool,
    ) -> Result<(), Error> {
        let b = BatchBuilder::new(table.def(), batch_rows, each);
        match table {
            Table::Segments => {
                let mut sink = Rows {
                    rows: SegmentRows::new(b),
                    error: None,
                };
                self.events(o, &mut sink, |s| s.stop())?;
                done(sink.rows.table, sink.error)
            }
            Table::Flows => {
                let f = self.flows(o)?;
                let mut b = b;
                for flow in &f.flows {
                    flow_rows(&mut b, flow, f.first_ts_ns).map_err(Error::Table)?;
                    if b.stopped() {
                        break;
                    }
                }
                done(b, None)
            }
            Table::Transactions => {
                let mut sink = Rows {
                    rows: TransactionRows { b, origin_ns: 0 },
                    error: None,
                };
                self.transactions(o, &mut sink, |s| s.stop())?;
                done(sink.rows.b, sink.error)
            }
            Table::Rounds => {
                let rounds = self.rounds(o)?;
                let mut b = b;
                for r in &rounds {
                    round_row(&mut b, r).map_err(Error::Table)?;
                    if b.stopped() {
                        break;
                    }
                }
                done(b, None)
            }
        }
    }
}

/// The last batch, or the first row error.
fn done<F: FnMut(RecordBatch) -> bool>(
    b: BatchBuilder<F>,
    error: Option<TableError>,
) -> Result<(), Error> {
    if let Some(e) = error {
        return Err(Error::Table(e));
    }
    b.finish().map(|_| ()).map_err(Error::Table)
}

/// A table's rows from a pass's events, and the first error building them.
struct Rows<R> {
    rows: R,
    error: Option<TableError>,
}

impl<R> Rows<R> {
    fn keep(&mut self, r: Result<(), TableError>) {
        if let Err(e) = r {
            self.error.get_or_insert(e);
        }
    }
}

impl<F: FnMut(RecordBatch) -> bool> Rows<SegmentRows<BatchBuilder<F>>> {
    fn stop(&self) -> bool {
        self.error.is_some() || self.rows.table.stopped()
    }
}

impl<F: FnMut(RecordBatch) -> bool> EventSink for Rows<SegmentRows<BatchBuilder<F>>> {
    fn segment_detail(&mut self, a: &SegmentAnalysis, d: &SegmentDetail) {
        if self.error.is_none() {
            let r = self.rows.row(a, d);
            self.keep(r);
        }
    }
    fn needs_flows(&self) -> bool {
        false
    }
    fn needs_flow_stats(&self) -> bool {
        false
    }
}

/// `transactions` rows, with the time origin the storage pass gives.
struct TransactionRows<F: FnMut(RecordBatch) -> bool> {
    b: BatchBuilder<F>,
    origin_ns: i64,
}

impl<F: FnMut(RecordBatch) -> bool> Rows<TransactionRows<F>> {
    fn stop(&self) -> bool {
        self.error.is_some() || self.rows.b.stopped()
    }
}

impl<F: FnMut(RecordBatch) -> bool> StorageSink for Rows<TransactionRows<F>> {
    fn start(&mut self, ts: Timestamp) {
        self.rows.origin_ns = ts.0;
    }
    fn transaction(&mut self, t: &Transaction) {
        if self.error.is_none() {
            let r = transaction_row(&mut self.rows.b, t, self.rows.origin_ns);
            self.keep(r);
        }
    }
}
