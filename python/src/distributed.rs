//! The stages of a distributed diagnosis (`tcpdx::distributed`) for `tcpdx.distributed`'s
//! Ray tasks: `shard` (stage 1, one capture file) and `diagnose_shards` (stage 2 and the
//! merge), or stage 2 one task per partition, `diagnose_partition` (its partial as
//! bytes), and `merge_partials`; each run with the GIL released.

use std::collections::HashMap;
use std::path::PathBuf;

use pyo3::prelude::*;
use pyo3::pybacked::PyBackedBytes;
use pyo3::types::PyBytes;
use tcpdx::{Options, distributed};

/// The options of both stages (they must be the same).
fn options(
    path: PathBuf,
    max_flows: Option<usize>,
    decode_as: Option<HashMap<u16, String>>,
    port: Vec<u16>,
) -> PyResult<Options> {
    let mut o = super::args(path, None, max_flows, decode_as, Vec::new(), port)?.options;
    // A task reports nothing while it runs; Ray shows the tasks' progress.
    o.progress = None;
    Ok(o)
}

/// Stage 1: the capture `file` (or the records that begin in its byte `range`, start and
/// end) into `partitions` shards in `out` as file `index` of the run; returns its shard
/// meta (`key value` lines).
#[pyfunction]
#[pyo3(signature = (file, out, index, partitions, *, range=None, max_flows=None, decode_as=None, port=vec![]))]
#[allow(clippy::too_many_arguments)]
fn shard(
    py: Python<'_>,
    file: PathBuf,
    out: PathBuf,
    index: u32,
    partitions: u16,
    range: Option<(u64, u64)>,
    max_flows: Option<usize>,
    decode_as: Option<HashMap<u16, String>>,
    port: Vec<u16>,
) -> PyResult<String> {
    let o = options(file.clone(), max_flows, decode_as, port)?;
    py.detach(|| match range {
        Some(r) => distributed::shard_range(&file, &out, index, partitions, r, &o),
        None => distributed::shard(&file, &out, index, partitions, &o),
    })
    .map(|m| m.to_text())
    .map_err(super::py_err)
}

/// Stage 2 and the merge over the shards in `dir`: what `tcpdx diagnose [--json|--all]`
/// prints, and the lines it would print on stderr.
#[pyfunction]
#[pyo3(signature = (dir, *, json=false, all=false, max_flows=None, decode_as=None, port=vec![]))]
#[allow(clippy::too_many_arguments)]
fn diagnose_shards(
    py: Python<'_>,
    dir: PathBuf,
    json: bool,
    all: bool,
    max_flows: Option<usize>,
    decode_as: Option<HashMap<u16, String>>,
    port: Vec<u16>,
) -> PyResult<(String, Vec<String>)> {
    let o = options(dir.clone(), max_flows, decode_as, port)?;
    py.detach(|| {
        let (d, summary) = distributed::diagnose_shards(&dir, &o)?;
        let text = distributed::render(&d, json, all)?;
        Ok((text, summary.messages(o.max_flows())))
    })
    .map_err(super::py_err)
}

/// Stage 2 of partition `partition` of the shards in `dir`: its partial, as bytes (for
/// `merge_partials`, in this process or another).
#[pyfunction]
#[pyo3(signature = (dir, partition, *, max_flows=None, decode_as=None, port=vec![]))]
fn diagnose_partition<'py>(
    py: Python<'py>,
    dir: PathBuf,
    partition: u16,
    max_flows: Option<usize>,
    decode_as: Option<HashMap<u16, String>>,
    port: Vec<u16>,
) -> PyResult<Bound<'py, PyBytes>> {
    let o = options(dir.clone(), max_flows, decode_as, port)?;
    let bytes = py
        .detach(|| distributed::diagnose_partition(&dir, partition, &o)?.to_bytes())
        .map_err(super::py_err)?;
    Ok(PyBytes::new(py, &bytes))
}

/// The merge of every partition's partial (`diagnose_partition`, any order) of the shards
/// in `dir`: what `tcpdx diagnose [--json|--all]` prints, and the lines it would print on
/// stderr.
#[pyfunction]
#[pyo3(signature = (dir, partials, *, json=false, all=false, max_flows=None, decode_as=None, port=vec![]))]
#[allow(clippy::too_many_arguments)]
fn merge_partials(
    py: Python<'_>,
    dir: PathBuf,
    partials: Vec<PyBackedBytes>,
    json: bool,
    all: bool,
    max_flows: Option<usize>,
    decode_as: Option<HashMap<u16, String>>,
    port: Vec<u16>,
) -> PyResult<(String, Vec<String>)> {
    let o = options(dir.clone(), max_flows, decode_as, port)?;
    py.detach(|| {
        let parts = partials
            .iter()
            .enumerate()
            .map(|(i, b)| {
                let name = PathBuf::from(format!("partial {i}"));
                distributed::Partial::read_from(b, &name)
            })
            .collect::<Result<Vec<_>, _>>()?;
        let (d, summary) = distributed::merge_partials(&dir, parts, &o)?;
        let text = distributed::render(&d, json, all)?;
        Ok((text, summary.messages(o.max_flows())))
    })
    .map_err(super::py_err)
}

/// The export of the shards in `dir`: the tables `tcpdx export` writes of the files
/// concatenated, into `out`, `source` as their `tcpdx.source`; returns each table's rows.
#[pyfunction]
#[pyo3(signature = (dir, out, source, *, max_flows=None, decode_as=None, port=vec![]))]
#[allow(clippy::too_many_arguments)]
fn export_shards(
    py: Python<'_>,
    dir: PathBuf,
    out: PathBuf,
    source: String,
    max_flows: Option<usize>,
    decode_as: Option<HashMap<u16, String>>,
    port: Vec<u16>,
) -> PyResult<Vec<(String, u64)>> {
    let o = options(dir.clone(), max_flows, decode_as, port)?;
    py.detach(|| distributed::export_shards(&dir, &out, &o, &[("tcpdx.source", &source)]))
        .map(|counts| {
            counts
                .into_iter()
                .map(|(t, n)| (t.to_string(), n))
                .collect()
        })
        .map_err(super::py_err)
}

/// Adds the stages to the native module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(shard, m)?)?;
    m.add_function(wrap_pyfunction!(diagnose_shards, m)?)?;
    m.add_function(wrap_pyfunction!(export_shards, m)?)?;
    m.add_function(wrap_pyfunction!(diagnose_partition, m)?)?;
    m.add_function(wrap_pyfunction!(merge_partials, m)?)?;
    Ok(())
}
