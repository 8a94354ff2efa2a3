//! `tcpdx._native`: the tcpdx library for Python. Every function here calls the library
//! facade (`tcpdx::Capture`, the entry point the command uses) and only converts: keyword
//! arguments to `tcpdx::Options`, errors to `CaptureError`, the pass's warnings to
//! `warnings.warn`, record batches to pyarrow through the Arrow C data interface. The
//! Python layer (python/tcpdx/__init__.py) gives them their documented signatures.
//!
//! The work runs on a thread of its own with the GIL released; the calling thread wakes
//! every [`TICK`] to run the progress callback and check for Ctrl-C, which cancels the pass
//! through the library's [`Progress::cancelled`].
#![deny(unsafe_code)]

use std::collections::HashMap;
use std::ffi::CString;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, sync_channel};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use arrow_pyarrow::{IntoPyArrow, ToPyArrow};
use pyo3::exceptions::{PyKeyboardInterrupt, PyRuntimeError, PyUserWarning, PyValueError};
use pyo3::prelude::*;
use tcpdx::tables::{RecordBatch, Table};
use tcpdx::{Capture, DecodeAs, Error, Filter, Options, Progress, SrtConfig};

pyo3::create_exception!(
    tcpdx,
    CaptureError,
    PyValueError,
    "The capture could not be read: the message is the command's (file, byte offset, what was wrong)."
);
pyo3::create_exception!(
    tcpdx,
    CaptureWarning,
    PyUserWarning,
    "What the command prints as a warning: a capture cut off (analysed up to the cut), connections evicted, segments not tracked."
);

/// How often the calling thread wakes while a pass runs (progress, Ctrl-C).
const TICK: Duration = Duration::from_millis(100);

/// A pass's progress as the reading thread reports it, and the caller's stop flag.
#[derive(Default)]
struct Shared {
    len: AtomicU64,
    bytes: AtomicU64,
    frames: AtomicU64,
    cancel: AtomicBool,
}

/// The library's progress callback: records, and answers the stop flag.
struct Watch(Arc<Shared>);

impl Progress for Watch {
    fn start(&self, len: Option<u64>) {
        self.0.len.store(len.unwrap_or(u64::MAX), Ordering::Relaxed);
        self.0.bytes.store(0, Ordering::Relaxed);
        self.0.frames.store(0, Ordering::Relaxed);
    }
    fn update(&self, bytes: u64, frames: u64) {
        self.0.bytes.store(bytes, Ordering::Relaxed);
        self.0.frames.store(frames, Ordering::Relaxed);
    }
    fn cancelled(&self) -> bool {
        self.0.cancel.load(Ordering::Relaxed)
    }
}

impl Shared {
    /// Calls `cb(bytes_read, total_bytes or None, frames)`.
    fn report(&self, cb: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
        let Some(cb) = cb else { return Ok(()) };
        let len = self.len.load(Ordering::Relaxed);
        cb.call1((
            self.bytes.load(Ordering::Relaxed),
            (len != u64::MAX).then_some(len),
            self.frames.load(Ordering::Relaxed),
        ))?;
        Ok(())
    }
}

/// A pass's options: the command's flags as keyword arguments.
mod distributed;

struct Args {
    path: PathBuf,
    options: Options,
    shared: Arc<Shared>,
}

#[allow(clippy::too_many_arguments)]
fn args(
    path: PathBuf,
    threads: Option<usize>,
    max_flows: Option<usize>,
    decode_as: Option<HashMap<u16, String>>,
    stream: Vec<u32>,
    port: Vec<u16>,
) -> PyResult<Args> {
    if threads == Some(0) {
        return Err(PyValueError::new_err("threads must be at least 1"));
    }
    let mut decode = Vec::new();
    let mut pairs: Vec<(u16, String)> = decode_as.unwrap_or_default().into_iter().collect();
    pairs.sort();
    for (port, proto) in pairs {
        let d: DecodeAs = format!("{port}={proto}")
            .parse()
            .map_err(|e| PyValueError::new_err(format!("decode_as {{{port}: {proto:?}}}: {e}")))?;
        decode.push(d);
    }
    let shared = Arc::new(Shared::default());
    let options = Options {
        decode_as: decode,
        max_flows,
        threads,
        filter: Filter {
            streams: stream,
            ports: port,
            flagged: false,
        },
        spill_dir: None,
        progress: Some(Arc::new(Watch(shared.clone()))),
    };
    Ok(Args {
        path,
        options,
        shared,
    })
}

/// What a pass returns to the calling thread: its result and the command's stderr lines.
type Done<T> = (Result<T, Error>, Vec<String>);

/// Runs `work` on `capture` on a thread of its own, the GIL released; the lines the command
/// would print on stderr become warnings.
fn run<T: Send + 'static>(
    py: Python<'_>,
    a: Args,
    progress: Option<&Bound<'_, PyAny>>,
    stacklevel: i32,
    work: impl FnOnce(&mut Capture, &Options) -> Result<T, Error> + Send + 'static,
) -> PyResult<T> {
    let (tx, rx) = sync_channel(1);
    // In a mutex so that the closures run without the GIL may borrow it.
    let rx = Mutex::new(rx);
    let recv = |timeout: Duration| match rx.lock() {
        Ok(r) => r.recv_timeout(timeout),
        Err(_) => Err(RecvTimeoutError::Disconnected),
    };
    let shared = a.shared.clone();
    std::thread::Builder::new()
        .name("tcpdx".into())
        .spawn(move || {
            let mut c = Capture::open(&a.path);
            let r = work(&mut c, &a.options);
            let _ = tx.send(finished(&c, &a.options, r));
        })
        .map_err(|e| PyRuntimeError::new_err(format!("cannot start a thread: {e}")))?;
    loop {
        match py.detach(|| recv(TICK)) {
            Ok((r, lines)) => {
                shared.report(progress)?;
                warn(py, &lines, stacklevel)?;
                return r.map_err(py_err);
            }
            Err(RecvTimeoutError::Timeout) => {
                let checked = py.check_signals().and_then(|()| shared.report(progress));
                if let Err(e) = checked {
                    // The pass stops at its next progress update; its result is dropped.
                    shared.cancel.store(true, Ordering::Relaxed);
                    let _ = py.detach(|| recv(Duration::MAX));
                    return Err(e);
                }
            }
            Err(RecvTimeoutError::Disconnected) => {
                return Err(PyRuntimeError::new_err("tcpdx: the analysis thread failed"));
            }
        }
    }
}

/// A pass's result with what the command would say on stderr after it.
fn finished<T>(c: &Capture, o: &Options, r: Result<T, Error>) -> Done<T> {
    let lines = c
        .summary()
        .map(|s| s.messages(o.max_flows()))
        .unwrap_or_default();
    (r, lines)
}

/// The command's stderr lines as `warnings.warn(text, CaptureWarning, stacklevel)`.
fn warn(py: Python<'_>, lines: &[String], stacklevel: i32) -> PyResult<()> {
    let category = py.get_type::<CaptureWarning>();
    for line in lines {
        let text = line
            .strip_prefix("warning: ")
            .or_else(|| line.strip_prefix("note: "))
            .unwrap_or(line);
        let msg = CString::new(text.replace('\0', " "))?;
        PyErr::warn(py, category.as_any(), &msg, stacklevel)?;
    }
    Ok(())
}

fn py_err(e: Error) -> PyErr {
    match e {
        Error::Capture(_) => CaptureError::new_err(e.one_line()),
        Error::Cancelled => PyKeyboardInterrupt::new_err("cancelled"),
        _ => PyRuntimeError::new_err(e.one_line()),
    }
}

fn table_named(name: &str) -> PyResult<Table> {
    Table::parse(name).ok_or_else(|| {
        let names: Vec<&str> = Table::ALL.iter().map(|t| t.name()).collect();
        PyValueError::new_err(format!("no table {name:?}: one of {}", names.join(", ")))
    })
}

/// The document `tcpdx diagnose --json` prints, as a string.
#[pyfunction]
#[pyo3(signature = (path, *, threads=None, max_flows=None, decode_as=None, stream=vec![], port=vec![], progress=None, stacklevel=1))]
#[allow(clippy::too_many_arguments)]
fn diagnose_json(
    py: Python<'_>,
    path: PathBuf,
    threads: Option<usize>,
    max_flows: Option<usize>,
    decode_as: Option<HashMap<u16, String>>,
    stream: Vec<u32>,
    port: Vec<u16>,
    progress: Option<Bound<'_, PyAny>>,
    stacklevel: i32,
) -> PyResult<String> {
    let a = args(path, threads, max_flows, decode_as, stream, port)?;
    let d = run(py, a, progress.as_ref(), stacklevel, |c, o| c.diagnose(o))?;
    py.detach(|| tcpdx::diagnosis_json(&d))
        .map_err(|e| PyRuntimeError::new_err(format!("the diagnosis as JSON: {e}")))
}

/// The document `tcpdx srt --json` prints, as a string.
#[pyfunction]
#[pyo3(signature = (path, *, interval=1.0, slowest=10, threads=None, max_flows=None, decode_as=None, stream=vec![], port=vec![], progress=None, stacklevel=1))]
#[allow(clippy::too_many_arguments)]
fn srt_json(
    py: Python<'_>,
    path: PathBuf,
    interval: f64,
    slowest: usize,
    threads: Option<usize>,
    max_flows: Option<usize>,
    decode_as: Option<HashMap<u16, String>>,
    stream: Vec<u32>,
    port: Vec<u16>,
    progress: Option<Bound<'_, PyAny>>,
    stacklevel: i32,
) -> PyResult<String> {
    if !(interval.is_finite() && interval >= 1e-6) {
        return Err(PyValueError::new_err(format!(
            "interval must be at least 0.000001 seconds, got {interval}"
        )));
    }
    let cfg = SrtConfig::default()
        .with_interval_ns((interval * 1e9).round() as i64)
        .with_slowest(slowest);
    let a = args(path, threads, max_flows, decode_as, stream, port)?;
    let r = run(py, a, progress.as_ref(), stacklevel, move |c, o| {
        c.srt(o, cfg)
    })?;
    py.detach(|| tcpdx::srt_json(&r))
        .map_err(|e| PyRuntimeError::new_err(format!("the response times as JSON: {e}")))
}

/// Table `name` of the capture as a `pyarrow.Table` (record batches of `batch_size` rows).
#[pyfunction]
#[pyo3(signature = (name, path, *, batch_size=65536, threads=None, max_flows=None, decode_as=None, stream=vec![], port=vec![], progress=None, stacklevel=1))]
#[allow(clippy::too_many_arguments)]
fn table<'py>(
    py: Python<'py>,
    name: &str,
    path: PathBuf,
    batch_size: usize,
    threads: Option<usize>,
    max_flows: Option<usize>,
    decode_as: Option<HashMap<u16, String>>,
    stream: Vec<u32>,
    port: Vec<u16>,
    progress: Option<Bound<'py, PyAny>>,
    stacklevel: i32,
) -> PyResult<Bound<'py, PyAny>> {
    let t = table_named(name)?;
    let a = args(path, threads, max_flows, decode_as, stream, port)?;
    let batches = run(py, a, progress.as_ref(), stacklevel, move |c, o| {
        let mut all = Vec::new();
        c.batches(o, t, batch_size, |b| {
            all.push(b);
            true
        })?;
        Ok(all)
    })?;
    arrow_pyarrow::Table::try_new(batches, t.schema())
        .map_err(|e| PyRuntimeError::new_err(e.to_string()))?
        .into_pyarrow(py)
}

/// The `pyarrow.Schema` of table `name`.
#[pyfunction]
fn schema<'py>(py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyAny>> {
    table_named(name)?.schema().as_ref().to_pyarrow(py)
}

/// Table `name` as an iterator of `pyarrow.RecordBatch`es, read while they are consumed.
#[pyfunction]
#[pyo3(signature = (name, path, *, batch_size=65536, threads=None, max_flows=None, decode_as=None, stream=vec![], port=vec![], progress=None))]
#[allow(clippy::too_many_arguments)]
fn batches(
    name: &str,
    path: PathBuf,
    batch_size: usize,
    threads: Option<usize>,
    max_flows: Option<usize>,
    decode_as: Option<HashMap<u16, String>>,
    stream: Vec<u32>,
    port: Vec<u16>,
    progress: Option<Py<PyAny>>,
) -> PyResult<Batches> {
    let t = table_named(name)?;
    let a = args(path, threads, max_flows, decode_as, stream, port)?;
    // One batch waits in the channel while the next is built: memory stays at a few
    // batches whatever the capture's length.
    let (tx, rx) = sync_channel::<RecordBatch>(1);
    let shared = a.shared.clone();
    let handle = std::thread::Builder::new()
        .name("tcpdx-batches".into())
        .spawn(move || produce(a, t, batch_size, tx))
        .map_err(|e| PyRuntimeError::new_err(format!("cannot start a thread: {e}")))?;
    Ok(Batches {
        rx: Mutex::new(Some(rx)),
        handle: Mutex::new(Some(handle)),
        shared,
        progress,
    })
}

/// The reading thread of [`Batches`]: stops once the consumer is gone.
fn produce(a: Args, t: Table, batch_size: usize, tx: SyncSender<RecordBatch>) -> Done<()> {
    let mut c = Capture::open(&a.path);
    let r = c.batches(&a.options, t, batch_size, |b| tx.send(b).is_ok());
    finished(&c, &a.options, r)
}

/// An iterator of record batches, filled by a reading thread.
#[pyclass(module = "tcpdx._native")]
struct Batches {
    rx: Mutex<Option<Receiver<RecordBatch>>>,
    handle: Mutex<Option<JoinHandle<Done<()>>>>,
    shared: Arc<Shared>,
    progress: Option<Py<PyAny>>,
}

impl Batches {
    /// Stops the reading thread (it ends at its next batch or progress update).
    fn cancel(&self) {
        self.shared.cancel.store(true, Ordering::Relaxed);
        if let Ok(mut rx) = self.rx.lock() {
            rx.take();
        }
        if let Ok(mut h) = self.handle.lock() {
            h.take();
        }
    }
}

#[pymethods]
impl Batches {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        let progress = self.progress.as_ref().map(|p| p.bind(py));
        loop {
            let got = py.detach(|| {
                self.rx
                    .lock()
                    .ok()?
                    .as_ref()
                    .map(|rx| rx.recv_timeout(TICK))
            });
            match got {
                Some(Ok(batch)) => {
                    self.shared.report(progress)?;
                    return batch.to_pyarrow(py).map(Some);
                }
                Some(Err(RecvTimeoutError::Timeout)) => {
                    let checked = py
                        .check_signals()
                        .and_then(|()| self.shared.report(progress));
                    if let Err(e) = checked {
                        self.cancel();
                        return Err(e);
                    }
                }
                Some(Err(RecvTimeoutError::Disconnected)) => {
                    self.rx.lock().map(|mut rx| rx.take()).ok();
                    let handle = self.handle.lock().ok().and_then(|mut h| h.take());
                    let Some(handle) = handle else {
                        return Ok(None);
                    };
                    let (r, lines) = py
                        .detach(|| handle.join())
                        .map_err(|_| PyRuntimeError::new_err("tcpdx: the reading thread failed"))?;
                    self.shared.report(progress)?;
                    // 2: the warning points at the loop over the batches.
                    warn(py, &lines, 2)?;
                    r.map_err(py_err)?;
                    return Ok(None);
                }
                None => return Ok(None),
            }
        }
    }

    /// Stops reading: the iterator ends.
    fn close(&self) {
        self.cancel();
    }
}

impl Drop for Batches {
    fn drop(&mut self) {
        self.cancel();
    }
}

/// The native half of the `tcpdx` package (see `tcpdx/__init__.py`).
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("CaptureError", py.get_type::<CaptureError>())?;
    m.add("CaptureWarning", py.get_type::<CaptureWarning>())?;
    m.add("VERSION", env!("CARGO_PKG_VERSION"))?;
    let names: Vec<&str> = Table::ALL.iter().map(|t| t.name()).collect();
    m.add("TABLES", names)?;
    m.add_function(wrap_pyfunction!(diagnose_json, m)?)?;
    m.add_function(wrap_pyfunction!(srt_json, m)?)?;
    m.add_function(wrap_pyfunction!(table, m)?)?;
    m.add_function(wrap_pyfunction!(schema, m)?)?;
    m.add_function(wrap_pyfunction!(batches, m)?)?;
    m.add_class::<Batches>()?;
    distributed::register(m)?;
    Ok(())
}
