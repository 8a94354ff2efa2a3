//! The tables as Arrow record batches (feature `arrow`), for the Python API: the same
//! [`TableDef`]s and row functions as the Parquet files, so a batch has the columns, types
//! and values a Parquet reader gets back from the exported file.

use std::sync::Arc;

use arrow_array::builder::{
    ArrayBuilder, BooleanBuilder, Float64Builder, Int32Builder, Int64Builder, ListBuilder,
    StringBuilder, TimestampNanosecondBuilder,
};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Schema, SchemaRef, TimeUnit};

use crate::schema::{Col, TableDef, Ty};
use crate::table::{Cell, RowSink, TableError, fits};

/// The element field of a [`Ty::StrList`] column, as a Parquet reader names it.
fn list_element() -> Field {
    Field::new("element", DataType::Utf8, false)
}

/// The Arrow type a Parquet reader gives column type `ty`.
pub fn data_type(ty: Ty) -> DataType {
    match ty {
        Ty::I32 => DataType::Int32,
        Ty::I64 => DataType::Int64,
        Ty::F64 => DataType::Float64,
        Ty::Bool => DataType::Boolean,
        Ty::Str => DataType::Utf8,
        Ty::TimestampNs => DataType::Timestamp(TimeUnit::Nanosecond, Some("UTC".into())),
        Ty::StrList => DataType::List(Arc::new(list_element())),
    }
}

/// The Arrow schema of table `def`.
pub fn schema(def: &TableDef) -> SchemaRef {
    let fields: Vec<Field> = def
        .cols
        .iter()
        .map(|c| Field::new(c.name, data_type(c.ty), c.nullable && c.ty != Ty::StrList))
        .collect();
    Arc::new(Schema::new(fields))
}

/// One column's values being built.
enum Builder {
    I32(Int32Builder),
    I64(Int64Builder),
    F64(Float64Builder),
    Bool(BooleanBuilder),
    Str(StringBuilder),
    Ts(TimestampNanosecondBuilder),
    List(ListBuilder<StringBuilder>),
}

impl Builder {
    fn new(c: &Col, rows: usize) -> Builder {
        match c.ty {
            Ty::I32 => Builder::I32(Int32Builder::with_capacity(rows)),
            Ty::I64 => Builder::I64(Int64Builder::with_capacity(rows)),
            Ty::F64 => Builder::F64(Float64Builder::with_capacity(rows)),
            Ty::Bool => Builder::Bool(BooleanBuilder::with_capacity(rows)),
            Ty::Str => Builder::Str(StringBuilder::with_capacity(rows, rows * 8)),
            Ty::TimestampNs => {
                Builder::Ts(TimestampNanosecondBuilder::with_capacity(rows).with_timezone("UTC"))
            }
            Ty::StrList => {
                Builder::List(ListBuilder::new(StringBuilder::new()).with_field(list_element()))
            }
        }
    }

    /// Appends a cell that [`fits`] the column.
    fn push(&mut self, cell: Cell<'_>) {
        match (self, cell) {
            (Builder::I32(b), Cell::I32(v)) => b.append_value(v),
            (Builder::I32(b), _) => b.append_null(),
            (Builder::I64(b), Cell::I64(v)) => b.append_value(v),
            (Builder::I64(b), _) => b.append_null(),
            (Builder::F64(b), Cell::F64(v)) => b.append_value(v),
            (Builder::F64(b), _) => b.append_null(),
            (Builder::Bool(b), Cell::Bool(v)) => b.append_value(v),
            (Builder::Bool(b), _) => b.append_null(),
            (Builder::Str(b), Cell::Str(v)) => b.append_value(v),
            (Builder::Str(b), _) => b.append_null(),
            (Builder::Ts(b), Cell::I64(v)) => b.append_value(v),
            (Builder::Ts(b), _) => b.append_null(),
            (Builder::List(b), Cell::Strs(items)) => {
                for s in items {
                    b.values().append_value(s);
                }
                b.append(true);
            }
            (Builder::List(b), _) => b.append(true),
        }
    }

    fn finish(&mut self) -> ArrayRef {
        match self {
            Builder::I32(b) => Arc::new(b.finish()),
            Builder::I64(b) => Arc::new(b.finish()),
            Builder::F64(b) => Arc::new(b.finish()),
            Builder::Bool(b) => Arc::new(b.finish()),
            Builder::Str(b) => Arc::new(b.finish()),
            Builder::Ts(b) => Arc::new(b.finish()),
            Builder::List(b) => Arc::new(b.finish()),
        }
    }

    fn len(&self) -> usize {
        match self {
            Builder::I32(b) => b.len(),
            Builder::I64(b) => b.len(),
            Builder::F64(b) => b.len(),
            Builder::Bool(b) => b.len(),
            Builder::Str(b) => b.len(),
            Builder::Ts(b) => b.len(),
            Builder::List(b) => b.len(),
        }
    }
}

/// Builds one table's rows into record batches of at most `batch_rows` rows; each full
/// batch goes to `out` as it is completed, so memory holds one batch whatever the input.
/// `out` returns false when it wants no more (then rows are dropped: see
/// [`BatchBuilder::stopped`]).
pub struct BatchBuilder<F: FnMut(RecordBatch) -> bool> {
    def: &'static TableDef,
    schema: SchemaRef,
    cols: Vec<Builder>,
    batch_rows: usize,
    out: F,
    stopped: bool,
}

impl<F: FnMut(RecordBatch) -> bool> BatchBuilder<F> {
    /// Batches of table `def`, `batch_rows` rows each (the last one fewer), into `out`.
    pub fn new(def: &'static TableDef, batch_rows: usize, out: F) -> Self {
        let batch_rows = batch_rows.max(1);
        // A capacity, not a limit: a big batch size must not reserve memory up front.
        let reserve = batch_rows.min(1 << 16);
        Self {
            def,
            schema: schema(def),
            cols: def.cols.iter().map(|c| Builder::new(c, reserve)).collect(),
            batch_rows,
            out,
            stopped: false,
        }
    }

    /// Rows buffered for the next batch.
    pub fn pending(&self) -> usize {
        self.cols.first().map_or(0, Builder::len)
    }

    /// True once `out` wanted no more batches: the caller may stop.
    pub fn stopped(&self) -> bool {
        self.stopped
    }

    /// Sends the rows buffered (if any) as a batch.
    pub fn flush(&mut self) -> Result<(), TableError> {
        if self.pending() == 0 {
            return Ok(());
        }
        let arrays: Vec<ArrayRef> = self.cols.iter_mut().map(Builder::finish).collect();
        let batch =
            RecordBatch::try_new(self.schema.clone(), arrays).map_err(|e| TableError::Row {
                column: self.def.name,
                what: e.to_string(),
            })?;
        if !self.stopped {
            self.stopped = !(self.out)(batch);
        }
        Ok(())
    }

    /// The last rows as a batch; returns the sink.
    pub fn finish(mut self) -> Result<F, TableError> {
        self.flush()?;
        Ok(self.out)
    }
}

impl<F: FnMut(RecordBatch) -> bool> RowSink for BatchBuilder<F> {
    fn row(&mut self, cells: &[Cell<'_>]) -> Result<(), TableError> {
        if self.stopped {
            return Ok(());
        }
        if cells.len() != self.cols.len() {
            return Err(TableError::Row {
                column: self.def.name,
                what: format!("{} cells for {} columns", cells.len(), self.cols.len()),
            });
        }
        // Checked before anything is appended, so a bad row leaves the columns aligned.
        for (c, cell) in self.def.cols.iter().zip(cells) {
            if !fits(c, cell) {
                return Err(TableError::Row {
                    column: c.name,
                    what: format!("{cell:?} does not fit {:?}", c.ty),
                });
            }
        }
        for (b, cell) in self.cols.iter_mut().zip(cells) {
            b.push(*cell);
        }
        if self.pending() >= self.batch_rows {
            self.flush()?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::{FINDINGS, TABLES};
    use arrow_array::Array;
    use arrow_array::cast::AsArray;
    use arrow_array::types::Int64Type;

    #[test]
    fn every_table_has_an_arrow_schema_with_its_columns() {
        for def in TABLES {
            let s = schema(def);
            let names: Vec<&str> = s.fields().iter().map(|f| f.name().as_str()).collect();
            let want: Vec<&str> = def.cols.iter().map(|c| c.name).collect();
            assert_eq!(names, want, "{}", def.name);
        }
    }

    #[test]
    fn rows_become_batches_of_the_asked_size_with_nulls_and_lists() {
        let recs: Vec<std::borrow::Cow<'static, str>> = vec!["fix it".into(), "or this".into()];
        let mut batches = Vec::new();
        let mut b = BatchBuilder::new(&FINDINGS, 2, |r| {
            batches.push(r);
            true
        });
        for i in 0..5i64 {
            let r: &[_] = if i % 2 == 0 { &recs } else { &[] };
            let row: [Cell<'_>; 12] = [
                i.into(),
                "rto-stall".into(),
                "major".into(),
                (i != 3).then_some(i * 10).into(),
                3i64.into(),
                0.5.into(),
                0.25.into(),
                None::<f64>.into(),
                0.9.into(),
                "tcp.stream == 1".into(),
                "a timeout".into(),
                Cell::Strs(r),
            ];
            b.row(&row).unwrap();
        }
        assert_eq!(b.pending(), 1, "two full batches sent, one row left");
        let _ = b.finish().unwrap();
        assert_eq!(
            batches
                .iter()
                .map(RecordBatch::num_rows)
                .collect::<Vec<_>>(),
            [2, 2, 1]
        );
        let stream = batches[1].column(3).as_primitive::<Int64Type>();
        assert_eq!(stream.value(0), 20);
        assert!(stream.is_null(1), "row 3 has no stream");
        let recs0 = batches[0].column(11).as_list::<i32>().value(0);
        assert_eq!(recs0.as_string::<i32>().value(1), "or this");
        assert_eq!(batches[0].column(11).as_list::<i32>().value(1).len(), 0);
    }

    #[test]
    fn a_sink_that_wants_no_more_stops_the_builder() {
        let mut sent = 0;
        let mut b = BatchBuilder::new(&FINDINGS, 1, |_| {
            sent += 1;
            false
        });
        let row: [Cell<'_>; 12] = [
            0i64.into(),
            "rto-stall".into(),
            "major".into(),
            None::<i64>.into(),
            3i64.into(),
            0.5.into(),
            0.25.into(),
            None::<f64>.into(),
            0.9.into(),
            "f".into(),
            "e".into(),
            Cell::Strs(&[]),
        ];
        b.row(&row).unwrap();
        assert!(b.stopped());
        b.row(&row).unwrap();
        let _ = b.finish().unwrap();
        assert_eq!(sent, 1);
    }

    #[test]
    fn a_row_that_does_not_fit_is_an_error_and_appends_nothing() {
        let mut b = BatchBuilder::new(&FINDINGS, 10, |_| true);
        let mut row = vec![Cell::I64(0); 12];
        assert!(b.row(&row[..3]).is_err(), "too few cells");
        row[1] = Cell::Null;
        let e = b.row(&row).unwrap_err().to_string();
        assert!(e.contains("kind"), "{e}");
        assert_eq!(b.pending(), 0);
    }
}
