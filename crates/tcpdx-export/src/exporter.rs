//! [`Exporter`]: one pass over the capture feeding every table.
//!
//! It is the [`EventSink`] the analyzer pushes into and the [`StorageSink`] a storage
//! tracker pushes into: segment rows are written as they come (a row group at a time), flow
//! rows at each flow's end, storage transactions at their reply, and the findings and time
//! budget of the diagnosis it is given once, at [`Exporter::finish`].
//! Tables are written to `NAME.parquet.partial` and renamed when complete, so a failed
//! export leaves no file that looks whole.

use std::fmt;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use tcpdx_core::{EventSink, FlowSummary, SegmentAnalysis, SegmentDetail};
use tcpdx_detect::Diagnosis;
use tcpdx_detect::infer::limit::RoundRow;
use tcpdx_storage::{StorageSink, Transaction};
use tcpdx_wire::Timestamp;

use crate::rows::{SegmentRows, budget_rows, finding_rows, flow_rows, round_row, transaction_row};
use crate::schema::{
    EPISODES, EVIDENCE, FINDINGS, FLOWS, ROUNDS, SEGMENTS, TIME_BUDGET, TRANSACTIONS, TableDef,
};
use crate::table::{TableError, TableWriter};

type Out = BufWriter<File>;

/// A failed export: the table file and what went wrong.
#[derive(Debug)]
pub struct ExportError {
    /// The file being written.
    pub path: PathBuf,
    /// The cause.
    pub kind: ExportErrorKind,
}

/// Cause of an [`ExportError`].
#[derive(Debug)]
pub enum ExportErrorKind {
    /// Creating, writing or renaming the file.
    Io(io::Error),
    /// Encoding the table.
    Table(TableError),
}

impl fmt::Display for ExportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            ExportErrorKind::Io(e) => write!(f, "{}: {e}", self.path.display()),
            ExportErrorKind::Table(e) => write!(f, "{}: {e}", self.path.display()),
        }
    }
}

impl std::error::Error for ExportError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.kind {
            ExportErrorKind::Io(e) => Some(e),
            ExportErrorKind::Table(e) => Some(e),
        }
    }
}

/// Where a table is written while incomplete, and its final name.
fn paths(dir: &Path, def: &TableDef) -> (PathBuf, PathBuf) {
    let done = dir.join(format!("{}.parquet", def.name));
    let partial = dir.join(format!("{}.parquet.partial", def.name));
    (partial, done)
}

fn open_table(
    dir: &Path,
    def: &'static TableDef,
    meta: &[(&str, &str)],
) -> Result<TableWriter<Out>, ExportError> {
    let (partial, _) = paths(dir, def);
    let err = |kind| ExportError {
        path: partial.clone(),
        kind,
    };
    let file = File::create(&partial).map_err(|e| err(ExportErrorKind::Io(e)))?;
    TableWriter::new(BufWriter::with_capacity(1 << 16, file), def, meta)
        .map_err(|e| err(ExportErrorKind::Table(e)))
}

/// The storage transactions table.
struct Transactions {
    table: TableWriter<Out>,
    origin_ns: i64,
    error: Option<TableError>,
}

/// Rows written per table, in [`crate::schema::TABLES`] order.
pub type RowCounts = Vec<(&'static str, u64)>;

/// Writes every table of one capture into a directory. See the module doc.
pub struct Exporter {
    dir: PathBuf,
    segments: SegmentRows<TableWriter<Out>>,
    flows: TableWriter<Out>,
    transactions: Transactions,
    findings: [TableWriter<Out>; 4],
    rounds: TableWriter<Out>,
    origin_ns: Option<i64>,
    /// First failure (table and cause); later events are dropped.
    error: Option<(&'static TableDef, TableError)>,
}

impl Exporter {
    /// Creates the eight table files in `dir` (which must exist). `meta` goes into every
    /// file's key-value metadata (e.g. the capture's name).
    pub fn create(dir: &Path, meta: &[(&str, &str)]) -> Result<Self, ExportError> {
        let segments = SegmentRows::new(open_table(dir, &SEGMENTS, meta)?);
        let flows = open_table(dir, &FLOWS, meta)?;
        let transactions = open_table(dir, &TRANSACTIONS, meta)?;
        let findings = [
            open_table(dir, &FINDINGS, meta)?,
            open_table(dir, &EVIDENCE, meta)?,
            open_table(dir, &EPISODES, meta)?,
            open_table(dir, &TIME_BUDGET, meta)?,
        ];
        let rounds = open_table(dir, &ROUNDS, meta)?;
        Ok(Self {
            dir: dir.to_path_buf(),
            segments,
            flows,
            transactions: Transactions {
                table: transactions,
                origin_ns: 0,
                error: None,
            },
            findings,
            rounds,
            origin_ns: None,
            error: None,
        })
    }

    /// Writes the rounds of every sender (`rounds.parquet`), before [`Exporter::finish`].
    pub fn rounds(&mut self, rows: &[RoundRow]) {
        let mut r = Ok(());
        for x in rows {
            if r.is_err() {
                break;
            }
            r = round_row(&mut self.rounds, x);
        }
        self.fail(&ROUNDS, r);
    }

    /// True once writing failed: the caller may stop feeding early.
    pub fn failed(&self) -> bool {
        self.error.is_some() || self.transactions.error.is_some()
    }

    fn fail(&mut self, def: &'static TableDef, r: Result<(), TableError>) {
        if let Err(e) = r
            && self.error.is_none()
        {
            self.error = Some((def, e));
        }
    }

    fn table_error(&self, def: &TableDef, e: TableError) -> ExportError {
        ExportError {
            path: paths(&self.dir, def).0,
            kind: ExportErrorKind::Table(e),
        }
    }

    /// End of input: writes the findings and time budget of `d`, closes every file and
    /// gives it its final name. Returns the rows written per table.
    pub fn finish(mut self, d: &Diagnosis) -> Result<RowCounts, ExportError> {
        if let Some((def, e)) = self.error.take() {
            let err = self.table_error(def, e);
            self.abort();
            return Err(err);
        }
        let dir = self.dir.clone();
        let Exporter {
            segments,
            flows,
            findings,
            mut transactions,
            rounds,
            ..
        } = self;
        let [mut f, mut ev, mut ep, mut tb] = findings;
        let mut r = transactions.error.take().map_or(Ok(()), Err);
        let mut failed = &TRANSACTIONS;
        for (id, finding) in d.findings.iter().enumerate() {
            if r.is_err() {
                break;
            }
            failed = &FINDINGS;
            r = finding_rows([&mut f, &mut ev, &mut ep], id as i64, finding);
        }
        if r.is_ok() {
            failed = &TIME_BUDGET;
            r = budget_rows(&mut tb, &d.time_budget);
        }
        let tables = [
            (&SEGMENTS, segments.table),
            (&FLOWS, flows),
            (&TRANSACTIONS, transactions.table),
            (&FINDINGS, f),
            (&EVIDENCE, ev),
            (&EPISODES, ep),
            (&TIME_BUDGET, tb),
            (&ROUNDS, rounds),
        ];
        if let Err(e) = r {
            remove_partials(&dir);
            return Err(ExportError {
                path: paths(&dir, failed).0,
                kind: ExportErrorKind::Table(e),
            });
        }
        let mut counts = RowCounts::new();
        let mut result = Ok(());
        for (def, table) in tables {
            if result.is_err() {
                break;
            }
            let (partial, done) = paths(&dir, def);
            result = close(table, &partial, &done).map(|rows| counts.push((def.name, rows)));
        }
        if let Err(e) = result {
            remove_partials(&dir);
            return Err(e);
        }
        Ok(counts)
    }

    /// Gives up: removes the incomplete files.
    pub fn abort(self) {
        remove_partials(&self.dir);
    }
}

/// Writes a table's footer, flushes it to disk and renames it to its final name.
fn close(table: TableWriter<Out>, partial: &Path, done: &Path) -> Result<u64, ExportError> {
    let err = |kind| ExportError {
        path: partial.to_path_buf(),
        kind,
    };
    let (mut out, rows) = table.finish().map_err(|e| err(ExportErrorKind::Table(e)))?;
    out.flush().map_err(|e| err(ExportErrorKind::Io(e)))?;
    drop(out);
    std::fs::rename(partial, done).map_err(|e| err(ExportErrorKind::Io(e)))?;
    Ok(rows)
}

fn remove_partials(dir: &Path) {
    for def in crate::schema::TABLES {
        // Best effort: the error being reported matters more than a leftover file.
        let _ = std::fs::remove_file(paths(dir, def).0);
    }
}

impl EventSink for Exporter {
    fn segment_detail(&mut self, a: &SegmentAnalysis, d: &SegmentDetail) {
        if self.error.is_some() {
            return;
        }
        self.origin_ns.get_or_insert(a.ts.0 - a.rel_time_ns);
        let r = self.segments.row(a, d);
        self.fail(&SEGMENTS, r);
    }
    fn flow(&mut self, f: &FlowSummary) {
        if self.error.is_some() {
            return;
        }
        let origin = self.origin_ns.unwrap_or(f.first_ts.0);
        let r = flow_rows(&mut self.flows, f, origin);
        self.fail(&FLOWS, r);
    }
}

impl StorageSink for Exporter {
    fn transaction(&mut self, t: &Transaction) {
        let x = &mut self.transactions;
        if x.error.is_none()
            && let Err(e) = transaction_row(&mut x.table, t, x.origin_ns)
        {
            x.error = Some(e);
        }
    }
    fn start(&mut self, ts: Timestamp) {
        self.transactions.origin_ns = ts.0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::TABLES;
    use parquet::file::reader::{FileReader, SerializedFileReader};
    use parquet::record::RowAccessor;
    use tcpdx_core::{Analyzer, AnalyzerConfig};
    use tcpdx_detect::Diagnoser;
    use tcpdx_testkit::{AUTO, C2S_DATA, Script, SegSpec};

    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("tcpdx-export-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    /// A transfer with a loss repaired by fast retransmission: 13 frames, 1 connection.
    fn script() -> Script {
        let mut t = Script::new();
        t.handshake(); // 1-3
        t.at_ms(20).client_burst(1, 4, 1448); // 4-7, the second lost
        t.at_ms(30).server_acks(1449); // 8
        t.after_ms(0.01).server_acks(1449).times(3); // 9-11
        t.after_ms(0.1).client(SegSpec {
            seq: 1449,
            len: 1448,
            ..C2S_DATA
        }); // 12
        t.at_ms(45).server_acks(AUTO); // 13
        t
    }

    /// The exporter beside a TCP diagnoser (whose findings it writes at the end).
    struct WithDiagnoser(Exporter, Diagnoser);

    impl EventSink for WithDiagnoser {
        fn segment_detail(&mut self, a: &SegmentAnalysis, d: &SegmentDetail) {
            self.0.segment_detail(a, d);
            self.1.segment_detail(a, d);
        }
        fn flow(&mut self, f: &FlowSummary) {
            self.0.flow(f);
            self.1.flow(f);
        }
    }

    fn export(dir: &Path, t: &Script) -> RowCounts {
        let x = Exporter::create(dir, &[("tcpdx.source", "t")]).unwrap();
        let mut both = WithDiagnoser(x, Diagnoser::new());
        let mut a = Analyzer::new(AnalyzerConfig::default());
        for f in t.frames() {
            a.handle_frame(&f.as_frame(), &mut both);
        }
        a.handle_end(&mut both);
        assert!(!both.0.failed());
        let d = both.1.finish();
        both.0.finish(&d).unwrap()
    }

    #[test]
    fn every_table_reads_back_with_its_rows_and_schema() {
        let dir = scratch("tables");
        let t = script();
        let counts = export(&dir, &t);
        let count = |name: &str| counts.iter().find(|(n, _)| *n == name).unwrap().1;
        assert_eq!(count("segments"), t.frames().len() as u64);
        assert_eq!(count("flows"), 2, "one connection, two directions");
        assert_eq!(count("transactions"), 0, "no storage traffic");
        assert_eq!(count("time_budget"), 8, "one connection, eight states");
        assert!(count("findings") > 0, "a loss was diagnosed");
        for def in TABLES {
            let path = dir.join(format!("{}.parquet", def.name));
            let r = SerializedFileReader::new(File::open(&path).unwrap()).unwrap();
            let meta = r.metadata().file_metadata();
            assert_eq!(meta.num_rows() as u64, count(def.name), "{}", def.name);
            let names: Vec<&str> = meta
                .schema()
                .get_fields()
                .iter()
                .map(|f| f.name())
                .collect();
            let want: Vec<&str> = def.cols.iter().map(|c| c.name).collect();
            assert_eq!(names, want, "{}", def.name);
            assert!(!dir.join(format!("{}.parquet.partial", def.name)).exists());
        }
        // Spot check: the retransmission's row carries its frame, length and flag.
        let r =
            SerializedFileReader::new(File::open(dir.join("segments.parquet")).unwrap()).unwrap();
        let row = r
            .get_row_iter(None)
            .unwrap()
            .map(|r| r.unwrap())
            .find(|r| r.get_long(0).unwrap() == 12)
            .unwrap();
        let col = |name: &str| SEGMENTS.cols.iter().position(|c| c.name == name).unwrap();
        assert_eq!(row.get_long(col("seq")).unwrap(), 1449);
        assert_eq!(row.get_long(col("len")).unwrap(), 1448);
        let flags = row.get_string(col("flags")).unwrap();
        assert!(flags.contains("retransmission"), "{flags}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_missing_directory_is_an_error_naming_the_file() {
        let base = scratch("missing");
        let e = Exporter::create(&base.join("nope"), &[])
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("nope/segments.parquet.partial"), "{e}");
        std::fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn abort_leaves_no_file() {
        let dir = scratch("abort");
        let x = Exporter::create(&dir, &[]).unwrap();
        x.abort();
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
