//! [`TableWriter`]: rows in, one Parquet file out, a row group at a time.
//!
//! Rows are buffered column by column (typed vectors) and written as a row group every
//! [`ROW_GROUP_ROWS`] rows, so memory stays bounded whatever the number of rows. This is
//! the parquet crate's low-level `SerializedFileWriter` with typed column writers rather
//! than its `arrow` feature: the same files, without compiling arrow-array/-ipc/-select
//! (a from-scratch build of parquet took 1 min 33 s this way, 4 min 14 s with `arrow`).

use std::io::Write;
use std::sync::Arc;

use bytes::Bytes;
use parquet::basic::{Compression, ZstdLevel};
use parquet::data_type::{BoolType, ByteArray, ByteArrayType, DoubleType, Int32Type, Int64Type};
use parquet::file::metadata::KeyValue;
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::parser::parse_message_type;
use parquet::schema::types::ColumnPath;

use crate::schema::{Col, FORMAT_VERSION, TableDef, Ty};

/// Rows per row group (tcpdx choice: DuckDB's own default is 122,880; a segment row is
/// ~100 bytes buffered, so a group stays near 13 MB).
pub const ROW_GROUP_ROWS: usize = 1 << 17;

/// One cell of a row, in column order.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Cell<'a> {
    /// Null (nullable columns only).
    Null,
    /// An `I32` value.
    I32(i32),
    /// An `I64` or `TimestampNs` value.
    I64(i64),
    /// An `F64` value.
    F64(f64),
    /// A `Bool` value.
    Bool(bool),
    /// A `Str` value.
    Str(&'a str),
    /// A `StrList` value.
    Strs(&'a [std::borrow::Cow<'static, str>]),
}

impl From<i32> for Cell<'_> {
    fn from(v: i32) -> Self {
        Cell::I32(v)
    }
}
impl From<i64> for Cell<'_> {
    fn from(v: i64) -> Self {
        Cell::I64(v)
    }
}
impl From<f64> for Cell<'_> {
    fn from(v: f64) -> Self {
        Cell::F64(v)
    }
}
impl From<bool> for Cell<'_> {
    fn from(v: bool) -> Self {
        Cell::Bool(v)
    }
}
impl<'a> From<&'a str> for Cell<'a> {
    fn from(v: &'a str) -> Self {
        Cell::Str(v)
    }
}
impl<'a, T: Into<Cell<'a>>> From<Option<T>> for Cell<'a> {
    fn from(v: Option<T>) -> Self {
        v.map_or(Cell::Null, Into::into)
    }
}

/// A column's buffered values for the current row group. `defs` holds definition levels
/// (nullable columns and lists only); `reps` repetition levels (lists only).
#[derive(Debug)]
enum Values {
    I32(Vec<i32>),
    I64(Vec<i64>),
    F64(Vec<f64>),
    Bool(Vec<bool>),
    /// Strings concatenated in `data`, each ending at its `ends` entry.
    Str {
        data: Vec<u8>,
        ends: Vec<usize>,
    },
}

/// True if `cell` fits column `c`'s type and nullability.
pub(crate) fn fits(c: &Col, cell: &Cell<'_>) -> bool {
    match (c.ty, cell) {
        (_, Cell::Null) => c.nullable && c.ty != Ty::StrList,
        (Ty::I32, Cell::I32(_))
        | (Ty::I64 | Ty::TimestampNs, Cell::I64(_))
        | (Ty::F64, Cell::F64(_))
        | (Ty::Bool, Cell::Bool(_))
        | (Ty::Str, Cell::Str(_))
        | (Ty::StrList, Cell::Strs(_)) => true,
        _ => false,
    }
}

#[derive(Debug)]
struct Buf {
    col: Col,
    values: Values,
    defs: Vec<i16>,
    reps: Vec<i16>,
}

impl Buf {
    fn new(col: Col) -> Self {
        let values = match col.ty {
            Ty::I32 => Values::I32(Vec::new()),
            Ty::I64 | Ty::TimestampNs => Values::I64(Vec::new()),
            Ty::F64 => Values::F64(Vec::new()),
            Ty::Bool => Values::Bool(Vec::new()),
            Ty::Str | Ty::StrList => Values::Str {
                data: Vec::new(),
                ends: Vec::new(),
            },
        };
        Self {
            col,
            values,
            defs: Vec::new(),
            reps: Vec::new(),
        }
    }

    /// True if `cell` fits this column's type and nullability.
    fn fits(&self, cell: &Cell<'_>) -> bool {
        fits(&self.col, cell)
    }

    /// Appends one cell that [`Buf::fits`].
    fn push(&mut self, cell: Cell<'_>) {
        let nullable = self.col.nullable && self.col.ty != Ty::StrList;
        match (&mut self.values, cell) {
            (_, Cell::Null) => {
                self.defs.push(0);
                return;
            }
            (Values::I32(v), Cell::I32(x)) => v.push(x),
            (Values::I64(v), Cell::I64(x)) => v.push(x),
            (Values::F64(v), Cell::F64(x)) => v.push(x),
            (Values::Bool(v), Cell::Bool(x)) => v.push(x),
            (Values::Str { data, ends }, Cell::Str(s)) => {
                data.extend_from_slice(s.as_bytes());
                ends.push(data.len());
            }
            (Values::Str { data, ends }, Cell::Strs(items)) => {
                // Required list of required elements: max definition and repetition level 1;
                // an empty list is one level pair (0, 0) with no value.
                if items.is_empty() {
                    self.defs.push(0);
                    self.reps.push(0);
                }
                for (i, s) in items.iter().enumerate() {
                    data.extend_from_slice(s.as_bytes());
                    ends.push(data.len());
                    self.defs.push(1);
                    self.reps.push(i16::from(i > 0));
                }
                return;
            }
            // Unreachable after `fits`; nothing is pushed, so no level is either.
            _ => return,
        }
        if nullable {
            self.defs.push(1);
        }
    }

    fn clear(&mut self) {
        match &mut self.values {
            Values::I32(v) => v.clear(),
            Values::I64(v) => v.clear(),
            Values::F64(v) => v.clear(),
            Values::Bool(v) => v.clear(),
            Values::Str { data, ends } => {
                data.clear();
                ends.clear();
            }
        }
        self.defs.clear();
        self.reps.clear();
    }
}

/// What went wrong writing a table.
#[derive(Debug)]
pub enum TableError {
    /// The parquet writer failed (I/O errors arrive this way too).
    Parquet(parquet::errors::ParquetError),
    /// A row did not match the table's columns (a bug in the row builder).
    Row {
        /// Column.
        column: &'static str,
        /// What was wrong.
        what: String,
    },
}

impl std::fmt::Display for TableError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TableError::Parquet(e) => write!(f, "{e}"),
            TableError::Row { column, what } => write!(f, "column {column}: {what}"),
        }
    }
}

impl std::error::Error for TableError {}

impl From<parquet::errors::ParquetError> for TableError {
    fn from(e: parquet::errors::ParquetError) -> Self {
        TableError::Parquet(e)
    }
}

/// Where a table's rows go: a Parquet file ([`TableWriter`]) or Arrow record batches
/// (`crate::arrow::BatchBuilder`), fed by the same row functions of [`crate::rows`].
pub trait RowSink {
    /// Appends one row (cells in column order).
    fn row(&mut self, cells: &[Cell<'_>]) -> Result<(), TableError>;
}

impl<W: Write + Send> RowSink for TableWriter<W> {
    fn row(&mut self, cells: &[Cell<'_>]) -> Result<(), TableError> {
        TableWriter::row(self, cells)
    }
}

/// Writes one table's rows to `W` as a Parquet file.
pub struct TableWriter<W: Write + Send> {
    def: &'static TableDef,
    file: SerializedFileWriter<W>,
    bufs: Vec<Buf>,
    /// Rows buffered in `bufs`.
    pending: usize,
    /// Rows written in all.
    rows: u64,
    group_rows: usize,
}

impl<W: Write + Send> TableWriter<W> {
    /// Starts the file: `def`'s schema, zstd pages, `meta` as extra key-value metadata.
    pub fn new(out: W, def: &'static TableDef, meta: &[(&str, &str)]) -> Result<Self, TableError> {
        Self::with_group_rows(out, def, meta, ROW_GROUP_ROWS)
    }

    /// [`TableWriter::new`] with `group_rows` rows per row group (tests use small groups).
    pub fn with_group_rows(
        out: W,
        def: &'static TableDef,
        meta: &[(&str, &str)],
        group_rows: usize,
    ) -> Result<Self, TableError> {
        let schema = Arc::new(parse_message_type(&def.message_type())?);
        let mut kv = vec![KeyValue::new(
            "tcpdx.parquet_format_version".to_string(),
            FORMAT_VERSION.to_string(),
        )];
        kv.extend(
            meta.iter()
                .map(|(k, v)| KeyValue::new((*k).to_string(), (*v).to_string())),
        );
        let mut props = WriterProperties::builder();
        for c in def.cols.iter().filter(|c| c.plain) {
            props = props.set_column_dictionary_enabled(ColumnPath::from(c.name), false);
        }
        let props = props
            .set_compression(Compression::ZSTD(ZstdLevel::default()))
            .set_created_by(format!("tcpdx {}", env!("CARGO_PKG_VERSION")))
            .set_key_value_metadata(Some(kv))
            .build();
        let file = SerializedFileWriter::new(out, schema, Arc::new(props))?;
        Ok(Self {
            def,
            file,
            bufs: def.cols.iter().map(|c| Buf::new(*c)).collect(),
            pending: 0,
            rows: 0,
            group_rows: group_rows.max(1),
        })
    }

    /// Appends one row (cells in column order); writes a row group when enough are buffered.
    pub fn row(&mut self, cells: &[Cell<'_>]) -> Result<(), TableError> {
        if cells.len() != self.bufs.len() {
            return Err(TableError::Row {
                column: self.def.name,
                what: format!("{} cells for {} columns", cells.len(), self.bufs.len()),
            });
        }
        // Checked before anything is buffered, so a bad row leaves the columns aligned.
        for (buf, cell) in self.bufs.iter().zip(cells) {
            if !buf.fits(cell) {
                return Err(TableError::Row {
                    column: buf.col.name,
                    what: format!("{cell:?} does not fit {:?}", buf.col.ty),
                });
            }
        }
        for (buf, cell) in self.bufs.iter_mut().zip(cells) {
            buf.push(*cell);
        }
        self.pending += 1;
        self.rows += 1;
        if self.pending >= self.group_rows {
            self.flush_group()?;
        }
        Ok(())
    }

    /// Rows written so far.
    pub fn rows(&self) -> u64 {
        self.rows
    }

    fn flush_group(&mut self) -> Result<(), TableError> {
        if self.pending == 0 {
            return Ok(());
        }
        let mut group = self.file.next_row_group()?;
        for buf in &mut self.bufs {
            let Some(mut col) = group.next_column()? else {
                return Err(TableError::Row {
                    column: buf.col.name,
                    what: "missing from the file schema".into(),
                });
            };
            let defs = (!buf.defs.is_empty()).then_some(buf.defs.as_slice());
            let reps = (!buf.reps.is_empty()).then_some(buf.reps.as_slice());
            match &mut buf.values {
                Values::I32(v) => col.typed::<Int32Type>().write_batch(v, defs, reps)?,
                Values::I64(v) => col.typed::<Int64Type>().write_batch(v, defs, reps)?,
                Values::F64(v) => col.typed::<DoubleType>().write_batch(v, defs, reps)?,
                Values::Bool(v) => col.typed::<BoolType>().write_batch(v, defs, reps)?,
                Values::Str { data, ends } => {
                    // One shared buffer, sliced per value: no allocation per string.
                    let all = Bytes::from(std::mem::take(data));
                    let mut start = 0;
                    let v: Vec<ByteArray> = ends
                        .iter()
                        .map(|&end| {
                            let b = ByteArray::from(all.slice(start..end));
                            start = end;
                            b
                        })
                        .collect();
                    col.typed::<ByteArrayType>().write_batch(&v, defs, reps)?
                }
            };
            col.close()?;
            buf.clear();
        }
        group.close()?;
        self.pending = 0;
        Ok(())
    }

    /// Writes the last row group and the footer; returns the writer and the row count.
    pub fn finish(mut self) -> Result<(W, u64), TableError> {
        self.flush_group()?;
        let out = self.file.into_inner()?;
        Ok((out, self.rows))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::FINDINGS;
    use parquet::file::reader::{FileReader, SerializedFileReader};
    use parquet::record::Field;

    fn finding_row<'a>(
        id: i64,
        stream: Option<i64>,
        recs: &'a [std::borrow::Cow<'static, str>],
    ) -> Vec<Cell<'a>> {
        vec![
            id.into(),
            "rto-stall".into(),
            "major".into(),
            stream.into(),
            3i64.into(),
            0.5.into(),
            0.25.into(),
            None::<f64>.into(),
            0.9.into(),
            "tcp.stream == 1".into(),
            "a timeout".into(),
            Cell::Strs(recs),
        ]
    }

    #[test]
    fn rows_round_trip_through_the_parquet_reader() {
        let recs = vec!["fix it".into(), format!("or {}", "this").into()];
        let mut w = TableWriter::with_group_rows(Vec::new(), &FINDINGS, &[("k", "v")], 2).unwrap();
        for i in 0..5 {
            let r: &[std::borrow::Cow<'static, str>] = if i % 2 == 0 { &recs } else { &[] };
            w.row(&finding_row(i, (i != 3).then_some(i * 10), r))
                .unwrap();
        }
        let (bytes, rows) = w.finish().unwrap();
        assert_eq!(rows, 5);
        let reader = SerializedFileReader::new(Bytes::from(bytes)).unwrap();
        let meta = reader.metadata();
        assert_eq!(meta.file_metadata().num_rows(), 5);
        assert_eq!(meta.num_row_groups(), 3, "groups of 2 rows");
        let kv = meta.file_metadata().key_value_metadata().unwrap();
        assert!(
            kv.iter()
                .any(|k| k.key == "tcpdx.parquet_format_version" && k.value.as_deref() == Some("1"))
        );
        assert!(kv.iter().any(|k| k.key == "k"));
        let rows: Vec<_> = reader
            .get_row_iter(None)
            .unwrap()
            .map(|r| r.unwrap())
            .collect();
        let get = |i: usize, name: &str| {
            rows[i]
                .get_column_iter()
                .find(|(n, _)| n.as_str() == name)
                .map(|(_, f)| f.clone())
                .unwrap()
        };
        assert_eq!(get(3, "finding_id"), Field::Long(3));
        assert_eq!(get(3, "stream"), Field::Null);
        assert_eq!(get(4, "stream"), Field::Long(40));
        assert_eq!(get(0, "kind"), Field::Str("rto-stall".into()));
        assert_eq!(get(0, "goodput_without_bps"), Field::Null);
        let Field::ListInternal(l) = get(0, "recommendations") else {
            panic!("recommendations is not a list")
        };
        assert_eq!(
            l.elements(),
            &[Field::Str("fix it".into()), Field::Str("or this".into())]
        );
        let Field::ListInternal(l) = get(1, "recommendations") else {
            panic!("recommendations is not a list")
        };
        assert!(l.elements().is_empty());
    }

    #[test]
    fn a_row_that_does_not_fit_is_an_error() {
        let mut w = TableWriter::new(Vec::new(), &FINDINGS, &[]).unwrap();
        let mut row = finding_row(0, None, &[]);
        assert!(w.row(&row[..3]).is_err(), "too few cells");
        row[1] = Cell::I64(1);
        let e = w.row(&row).unwrap_err().to_string();
        assert!(e.contains("kind"), "{e}");
        row[1] = Cell::Str("x");
        row[2] = Cell::Null;
        assert!(w.row(&row).is_err(), "null in a required column");
    }
}
