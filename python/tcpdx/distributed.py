"""tcpdx on a Ray cluster: ``tcpdx-ray diagnose --address ADDR [--json] FILES...`` and
``tcpdx-ray export --address ADDR FILES... -o DIR``.

The run has the stages of ``tcpdx::distributed`` (crates/tcpdx/src/distributed):

- stage 1, one Ray task per capture file, or per byte range of a large uncompressed pcap
  file (``--split-bytes``: each range's task finds its first record boundary by resync,
  and its frames are numbered after those of the ranges before it): ``shard`` reads and
  decodes it and writes
  each TCP frame's analysis input (headers, and storage payloads where a storage parser
  reads them) into one shard per partition, by the direction-free connection hash;
- stage 2, one Ray task per partition: ``diagnose_partition`` analyses and diagnoses
  the partition's connections (fed as among the others) and returns its partial as bytes,
  through Ray's object store (so no file system is needed between stage 2 and the merge:
  a partial is a few hundred bytes per connection diagnosed);
- the merge, one Ray task given every partial: ``merge_partials`` numbers streams
  globally, ranks the findings, and prints what ``tcpdx diagnose`` prints on the files
  read as one capture;
- or, for ``export``, one Ray task replays the shards in capture order into one analyzer
  and writes the tables ``tcpdx export`` writes.

The shards go to a directory every node sees (``--shard-dir``: a shared file system on a
real cluster; a local temporary directory for ``--address local``). Consecutive files (a
ring buffer) are read as one capture, in time order; files overlapping in time are
refused (merge them with ``mergecap`` first). The tasks run the stages in this package's
native module, or (without it, or with ``TCPDX_RAY_STAGES=binary``) the ``tcpdx`` binary
found as ``$TCPDX_BIN`` or on ``PATH`` on each node, whose hidden subcommands ``tcpdx
shard``, ``tcpdx diagnose-partition`` and ``tcpdx merge-partials`` are the same stages.

``--address``: ``local`` starts Ray in this process with 2 CPUs; ``auto`` joins the
cluster started on this machine by ``ray start --head``; ``ray://host:10001`` a remote
one.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import ray

MAX_PARTITIONS = 255
# Uncompressed pcap files above this many bytes are read by one stage-1 task per range of
# this many bytes (``--split-bytes``).
SPLIT_BYTES = 256 << 20
# The pcap magic numbers (microsecond, nanosecond, modified; either byte order).
PCAP_MAGICS = {
    bytes.fromhex(m)
    for m in ("d4c3b2a1", "a1b2c3d4", "4d3cb2a1", "a1b23c4d", "34cdb2a1", "a1b2cd34")
}


class TcpdxError(RuntimeError):
    """A stage failed: the message is tcpdx's one line (file, offset, what was wrong)."""


def native_stages() -> bool:
    """Whether this package's native module runs the stages (else the tcpdx binary does;
    ``TCPDX_RAY_STAGES=binary`` forces the binary)."""
    if os.environ.get("TCPDX_RAY_STAGES") == "binary":
        return False
    try:
        from tcpdx import _native
    except ImportError:
        return False
    return all(hasattr(_native, f) for f in ("shard", "diagnose_partition", "merge_partials"))


def tcpdx_binary() -> str:
    """The tcpdx binary the tasks run: ``$TCPDX_BIN``, else ``tcpdx`` on ``PATH``."""
    found = os.environ.get("TCPDX_BIN") or shutil.which("tcpdx")
    if not found:
        raise TcpdxError("tcpdx not found: set TCPDX_BIN or put tcpdx on PATH")
    return found


def cli_flags(options: dict) -> list[str]:
    """The tcpdx flags of analysis ``options`` (port, decode_as, max_flows)."""
    flags = [x for port in options.get("port", []) for x in ("--port", str(port))]
    for port, proto in sorted((options.get("decode_as") or {}).items()):
        flags += ["--decode-as", f"{port}={proto}"]
    if options.get("max_flows") is not None:
        flags += ["--max-flows", str(options["max_flows"])]
    return flags


def _run(args: list[str]) -> str:
    return _run_both(args)[0]


def _run_both(args: list[str]) -> tuple[str, str]:
    """The command's standard output and error; a failure raises its error line."""
    p = subprocess.run(args, check=False, capture_output=True, text=True)
    if p.returncode != 0:
        raise TcpdxError(p.stderr.strip() or f"{args[1]} exited with {p.returncode}")
    return p.stdout, p.stderr


def _native_call(f, *args, **kwargs):
    """A native stage; its errors as :class:`TcpdxError` (their one line)."""
    try:
        return f(*args, **kwargs)
    except (ValueError, RuntimeError, OSError) as e:
        raise TcpdxError(str(e)) from None


@ray.remote
def shard_task(
    binary: str | None,
    file: str,
    out: str,
    index: int,
    partitions: int,
    options: dict,
    byte_range: tuple[int, int] | None = None,
) -> dict:
    """Stage 1 of one file, or of the records that begin in ``byte_range`` (start, end) of
    it (native, or ``binary`` when given): its shard meta as a dict."""
    if binary is None:
        from tcpdx import _native

        extra = {} if byte_range is None else {"range": byte_range}
        text = _native_call(_native.shard, file, out, index, partitions, **extra, **options)
    else:
        cut = [] if byte_range is None else ["--range", f"{byte_range[0]}:{byte_range[1]}"]
        text = _run(
            [binary, "shard", file, "--out", out, "--index", str(index)]
            + ["--partitions", str(partitions), *cut, *cli_flags(options)]
        )
    return parse_meta(text)


def is_plain_pcap(path: str) -> bool:
    """Whether ``path`` is an uncompressed pcap file (the files read in byte ranges)."""
    with open(path, "rb") as f:
        return f.read(4) in PCAP_MAGICS


def stage1_tasks(paths: list[str], split_bytes: int | None) -> list[tuple[str, tuple | None]]:
    """The stage-1 tasks of ``paths``: (file, byte range or None for the whole file), in
    the files' order. An uncompressed pcap file above ``split_bytes`` (default
    :data:`SPLIT_BYTES`; 0 never splits) is cut into ranges of that many bytes; pcapng and
    compressed files are read whole."""
    size = SPLIT_BYTES if split_bytes is None else split_bytes
    if size < 0:
        raise TcpdxError(f"--split-bytes {size}: give 0 (never split) or a byte count")
    tasks: list[tuple[str, tuple | None]] = []
    for f in paths:
        length = Path(f).stat().st_size if Path(f).is_file() else 0
        if size == 0 or length <= size or not is_plain_pcap(f):
            tasks.append((f, None))
            continue
        tasks += [(f, (start, min(start + size, length))) for start in range(0, length, size)]
    return tasks


def run_stage1(
    binary: str | None,
    paths: list[str],
    out: str,
    partitions: int,
    options: dict,
    split_bytes: int | None,
) -> list[dict]:
    """Stage 1 of ``paths`` as Ray tasks (one per file or byte range): their metas."""
    tasks = stage1_tasks(paths, split_bytes)
    return ray.get(
        [
            shard_task.remote(binary, f, out, i, partitions, options, byte_range)
            for i, (f, byte_range) in enumerate(tasks)
        ]
    )


@ray.remote(num_returns=2)
def diagnose_partition_task(
    binary: str | None, out: str, partition: int, options: dict
) -> tuple[dict, bytes]:
    """Stage 2 of one partition: where it ran (``partition``, ``pid``, ``worker``: the Ray
    worker id, ``bytes``: of the partial) and its partial, as two results (the merge task
    takes the partials, the driver only the first)."""
    if binary is None:
        from tcpdx import _native

        data = _native_call(_native.diagnose_partition, out, partition, **options)
    else:
        with tempfile.TemporaryDirectory(prefix="tcpdx-partial-") as tmp:
            path = Path(tmp) / f"p{partition:03}.partial"
            _run(
                [binary, "diagnose-partition", out, str(partition), "-o", str(path)]
                + cli_flags(options)
            )
            data = path.read_bytes()
    ran = {
        "partition": partition,
        "pid": os.getpid(),
        "worker": ray.get_runtime_context().get_worker_id(),
        "bytes": len(data),
    }
    return ran, data


@ray.remote
def merge_partials_task(
    binary: str | None, out: str, json: bool, all_findings: bool, options: dict, *partials: bytes
) -> tuple[str, str]:
    """The merge of every partition's partial, in partition order (Ray hands the stage 2
    tasks' results over as arguments): what ``tcpdx diagnose`` prints, and its stderr
    lines."""
    if binary is None:
        from tcpdx import _native

        text, lines = _native_call(
            _native.merge_partials, out, partials, json=json, all=all_findings, **options
        )
        return text, "".join(f"tcpdx: {line}\n" for line in lines)
    render = (["--json"] if json else []) + (["--all"] if all_findings else [])
    with tempfile.TemporaryDirectory(prefix="tcpdx-partials-") as tmp:
        files = []
        for i, data in enumerate(partials):
            path = Path(tmp) / f"p{i:03}.partial"
            path.write_bytes(data)
            files.append(str(path))
        return _run_both([binary, "merge-partials", out, *files, *cli_flags(options), *render])


def stage2(
    binary: str | None, out: str, n: int, json: bool, all_findings: bool, options: dict
) -> tuple[str, str, list[dict]]:
    """Stage 2, one task per partition, then the merge task: what ``tcpdx diagnose``
    prints, its stderr lines, and each stage 2 task's ``partition``, ``pid``, ``worker``
    and ``bytes`` (of its partial)."""
    tasks = [diagnose_partition_task.remote(binary, out, p, options) for p in range(n)]
    partials = [partial for _, partial in tasks]
    merged = merge_partials_task.remote(binary, out, json, all_findings, options, *partials)
    text, warnings = ray.get(merged)
    return text, warnings, ray.get([ran for ran, _ in tasks])


@ray.remote
def export_shards_task(
    binary: str | None, out: str, tables: str, source: str, options: dict
) -> str:
    """The tables ``tcpdx export`` writes of the sharded files, into ``tables``; returns
    the summary line tcpdx prints."""
    if binary is None:
        from tcpdx import _native

        counts = _native_call(_native.export_shards, out, tables, source, **options)
        rows = ", ".join(f"{t} {n}" for t, n in counts)
        return f"tcpdx: wrote {len(counts)} tables to {tables}: {rows}\n"
    cmd = [binary, "export-shards", out, "-o", tables, "--source", source]
    return _run_both(cmd + cli_flags(options))[1]


def parse_meta(text: str) -> dict:
    """A shard meta (``key value`` lines after the magic line) as a dict."""
    lines = text.splitlines()
    if not lines or lines[0] != "tcpdx-shard 1":
        raise TcpdxError(f"not a shard meta: {text[:40]!r}")
    meta: dict = {"warnings": []}
    for line in lines[1:]:
        key, _, value = line.partition(" ")
        if key == "warning":
            meta["warnings"].append(value)
        elif key == "range":
            start, end, began, stopped, length = (int(x) for x in value.split())
            meta[key] = {
                "start": start,
                "end": end,
                "began": began,
                "stopped": stopped,
                "file_len": length,
            }
        elif key == "file":
            meta[key] = value
        elif value == "-":
            meta[key] = None
        else:
            meta[key] = int(value)
    return meta


def connect(address: str) -> None:
    """Joins (or starts, for ``local``) the Ray cluster at ``address``: ``auto`` is the one
    ``RAY_ADDRESS`` names, else the latest ``ray start`` of this machine."""
    if ray.is_initialized():
        return
    try:
        if address == "local":
            # "local", not None: Ray would join a cluster `ray start` left on the machine.
            ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
        else:
            ray.init(address=address, log_to_driver=False)
    except (ConnectionError, RuntimeError, ValueError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise TcpdxError(f"cannot join the Ray cluster at {address!r}: {first}") from None


def default_partitions() -> int:
    """One partition per CPU of the cluster (at least 1, at most 255)."""
    cpus = int(ray.cluster_resources().get("CPU", 1))
    return max(1, min(MAX_PARTITIONS, cpus))


def diagnose(
    files: list[str],
    *,
    json: bool = False,
    all_findings: bool = False,
    partitions: int | None = None,
    shard_dir: str | None = None,
    options: dict | None = None,
    stats: dict | None = None,
    split_bytes: int | None = None,
) -> str:
    """The text ``tcpdx diagnose [--json] FILES...`` prints for ``files`` read as one
    capture, computed on the connected Ray cluster. ``options``: analysis options of both
    stages, as the package's functions take them (``port``, ``decode_as``,
    ``max_flows``). ``split_bytes``: see :func:`stage1_tasks`. ``stats``, if given, gets
    the stage-1 metas (one per task) and the shard bytes, and where each stage 2 task ran
    and its partial's bytes. The stages' warnings go to stderr
    as tcpdx prints them."""
    if not files:
        raise TcpdxError("no capture files given")
    binary = None if native_stages() else tcpdx_binary()
    options = dict(options or {})
    n = partitions or default_partitions()
    if not 1 <= n <= MAX_PARTITIONS:
        raise TcpdxError(f"{n} partitions: give 1 to {MAX_PARTITIONS}")
    own = shard_dir is None
    out = shard_dir or tempfile.mkdtemp(prefix="tcpdx-shards-")
    try:
        Path(out).mkdir(parents=True, exist_ok=True)
        paths = [str(Path(f).resolve()) for f in files]
        metas = run_stage1(binary, paths, out, n, options, split_bytes)
        text, warnings, ran = stage2(binary, out, n, json, all_findings, options)
        sys.stderr.write(warnings)
        if stats is not None:
            stats["stage2"] = ran
            stats["partial_bytes"] = sum(r["bytes"] for r in ran)
            stats["metas"] = metas
            stats["shard_bytes"] = sum(m["shard_bytes"] for m in metas)
            stats["frames"] = sum(m["frames"] for m in metas)
            stats["native"] = binary is None
        return text
    finally:
        if own:
            shutil.rmtree(out, ignore_errors=True)


def export(
    files: list[str],
    out: str,
    *,
    partitions: int | None = None,
    shard_dir: str | None = None,
    options: dict | None = None,
    flat: bool = False,
    split_bytes: int | None = None,
) -> str:
    """The tables ``tcpdx export FILE -o OUT`` writes, for ``files`` read as one capture:
    stage 1 as Ray tasks, then one task replays the shards in capture order into the tables
    (one analyzer: the segments table is in frame order). Their ``tcpdx.source`` names the
    files as given. Written Hive-partitioned (:func:`hive_layout`), or as ``tcpdx export``
    writes them if ``flat``. Returns the summary line tcpdx prints on stderr."""
    if not files:
        raise TcpdxError("no capture files given")
    if Path(out).exists() and not Path(out).is_dir():
        raise TcpdxError(f"{out}: exists and is not a directory")
    if not flat:
        with tempfile.TemporaryDirectory(prefix="tcpdx-tables-") as tables:
            line = export(
                files,
                tables,
                partitions=partitions,
                shard_dir=shard_dir,
                options=options,
                flat=True,
                split_bytes=split_bytes,
            )
            hive_layout(tables, out)
        return line.replace(f" to {Path(tables).resolve()}:", f" to {out} (hive: date, hour):")
    binary = None if native_stages() else tcpdx_binary()
    options = dict(options or {})
    n = partitions or default_partitions()
    own = shard_dir is None
    shards = shard_dir or tempfile.mkdtemp(prefix="tcpdx-shards-")
    try:
        Path(shards).mkdir(parents=True, exist_ok=True)
        paths = [str(Path(f).resolve()) for f in files]
        run_stage1(binary, paths, shards, n, options, split_bytes)
        tables = str(Path(out).resolve())
        return ray.get(export_shards_task.remote(binary, shards, tables, " ".join(files), options))
    finally:
        if own:
            shutil.rmtree(shards, ignore_errors=True)


HIVE_KEYS = ("date", "hour")


def hive_layout(tables: str, out: str) -> None:
    """Rewrites the flat tables of ``tcpdx export`` in ``tables`` as Hive-partitioned
    datasets, ``out/<table>/date=YYYY-MM-DD/hour=HH/part-0.parquet``: the UTC date and hour
    a row's subject began (a segment's own time; a connection's first segment for the rows
    of a connection: flows, transactions, time budget, rounds, findings; a finding's for
    its evidence and episodes; the capture's first segment for capture-wide findings).
    Time is what a query over days of traffic selects first ("what happened between 08:00
    and 10:00"): DuckDB, Spark and Trino then read only those directories, and the rows of
    a connection stay in the hour it began. The rows are those of the flat tables (the two
    keys are in the paths, not in the files), in their order within each directory, with
    the same key-value metadata; read a batch at a time."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.dataset as ds
    import pyarrow.parquet as pq

    src = Path(tables)
    names = sorted(p.stem for p in src.glob("*.parquet"))
    if "segments" not in names:
        raise TcpdxError(f"{tables}: no segments.parquet to partition by")
    # Each connection's first segment, and the capture's.
    first: dict = {}
    for batch in pq.ParquetFile(src / "segments.parquet").iter_batches(columns=["stream", "ts"]):
        mins = pa.Table.from_batches([batch]).group_by("stream").aggregate([("ts", "min")])
        for st, t in zip(mins["stream"].to_pylist(), mins["ts_min"].cast(pa.int64()).to_pylist()):
            if t < first.get(st, t + 1):
                first[st] = t
    start = min(first.values()) if first else 0
    finding_start: dict = {}

    def begun(streams) -> pa.Array:
        return pa.array([start if x is None else first.get(x, start) for x in streams], pa.int64())

    keys = pa.schema([("date", pa.string()), ("hour", pa.string())])

    def keyed(batch: pa.RecordBatch, when: pa.Array) -> pa.RecordBatch:
        at = pc.cast(when, pa.timestamp("ns", tz="UTC"))
        cols = batch.columns + [pc.strftime(at, "%Y-%m-%d"), pc.strftime(at, "%H")]
        schema = batch.schema
        for f in keys:
            schema = schema.append(f)
        return pa.RecordBatch.from_arrays(cols, schema=schema)

    # Findings before evidence and episodes, which take their findings' times.
    order = sorted(names, key=lambda n: (n not in ("segments", "findings"), n))
    for name in order:
        f = pq.ParquetFile(src / f"{name}.parquet")
        schema = f.schema_arrow

        def batches(f=f, name=name, schema=schema):
            for batch in f.iter_batches():
                batch = pa.RecordBatch.from_arrays(batch.columns, schema=schema)
                if name == "segments":
                    when = batch.column("ts").cast(pa.int64())
                elif "stream" in schema.names:
                    when = begun(batch.column("stream").to_pylist())
                    if name == "findings":
                        ids = batch.column("finding_id").to_pylist()
                        finding_start.update(zip(ids, when.to_pylist()))
                elif "finding_id" in schema.names:
                    ids = batch.column("finding_id").to_pylist()
                    when = pa.array([finding_start.get(i, start) for i in ids], pa.int64())
                else:
                    when = pa.array([start] * batch.num_rows, pa.int64())
                yield keyed(batch, when)

        full = schema
        for k in keys:
            full = full.append(k)
        if f.metadata.num_rows == 0:
            # A table with no rows is still written (schema only), as the flat export
            # writes it: in the capture's first hour.
            at = pc.cast(pa.array([start], pa.int64()), pa.timestamp("ns", tz="UTC"))
            d = pc.strftime(at, "%Y-%m-%d")[0].as_py()
            h = pc.strftime(at, "%H")[0].as_py()
            where = Path(out) / name / f"date={d}" / f"hour={h}"
            where.mkdir(parents=True, exist_ok=True)
            pq.write_table(schema.empty_table(), where / "part-0.parquet", compression="zstd")
            continue
        ds.write_dataset(
            batches(),
            Path(out) / name,
            schema=full,
            format="parquet",
            partitioning=ds.partitioning(keys, flavor="hive"),
            basename_template="part-{i}.parquet",
            existing_data_behavior="delete_matching",
            preserve_order=True,
            file_options=ds.ParquetFileFormat().make_write_options(compression="zstd"),
        )


def analysis_options(a: argparse.Namespace) -> dict:
    """The analysis options of the command line's flags."""
    decode_as = {}
    for d in a.decode_as:
        port, sep, proto = d.partition("=")
        if not sep or not port.isdigit():
            raise TcpdxError(f"--decode-as {d!r}: give PORT=PROTO (e.g. 2050=nfs)")
        decode_as[int(port)] = proto
    options: dict = {"port": a.port}
    if decode_as:
        options["decode_as"] = decode_as
    if a.max_flows is not None:
        options["max_flows"] = a.max_flows
    return options


def main(argv: list[str] | None = None) -> int:
    """``tcpdx-ray``: exit 0, or 2 with one line on stderr when a stage failed."""
    ap = argparse.ArgumentParser(
        prog="tcpdx-ray", description="tcpdx on a Ray cluster (see tcpdx.distributed)"
    )
    sub = ap.add_subparsers(dest="command", required=True)
    for name in ("diagnose", "export"):
        p = sub.add_parser(name)
        p.add_argument(
            "--address",
            default="auto",
            help="local (Ray in this process, 2 CPUs), auto (the cluster of `ray start "
            "--head` on this machine) or ray://host:10001",
        )
        p.add_argument("--port", action="append", type=int, default=[], help="as tcpdx --port")
        p.add_argument("--decode-as", action="append", default=[], help="PORT=PROTO, as tcpdx")
        p.add_argument("--max-flows", type=int, help="as tcpdx --max-flows")
        p.add_argument("files", nargs="+")
        p.add_argument("--partitions", type=int, help="stage 2 partitions (default: CPUs)")
        p.add_argument(
            "--split-bytes",
            type=int,
            metavar="N",
            help="uncompressed pcap files above N bytes are read by one stage-1 task per "
            f"N-byte range (default {SPLIT_BYTES >> 20} MiB; 0: one task per file); pcapng "
            "and compressed files are read whole",
        )
        p.add_argument(
            "--shard-dir",
            help="a directory every node sees (default: a temporary one, removed after)",
        )
        if name == "diagnose":
            p.add_argument("--json", action="store_true")
            p.add_argument("--all", action="store_true")
        else:
            p.add_argument("-o", "--output", required=True)
            p.add_argument(
                "--flat",
                action="store_true",
                help="DIR/NAME.parquet as tcpdx export writes them (default: Hive-"
                "partitioned, DIR/NAME/date=YYYY-MM-DD/hour=HH/part-0.parquet)",
            )
    a = ap.parse_args(argv)
    try:
        options = analysis_options(a)
        connect(a.address)
        if a.command == "diagnose":
            sys.stdout.write(
                diagnose(
                    a.files,
                    json=a.json,
                    all_findings=a.all,
                    partitions=a.partitions,
                    shard_dir=a.shard_dir,
                    options=options,
                    split_bytes=a.split_bytes,
                )
            )
        else:
            sys.stderr.write(
                export(
                    a.files,
                    a.output,
                    partitions=a.partitions,
                    shard_dir=a.shard_dir,
                    options=options,
                    flat=a.flat,
                    split_bytes=a.split_bytes,
                )
            )
    except (TcpdxError, ray.exceptions.RayTaskError) as e:
        cause = getattr(e, "cause", None) or e
        print(f"tcpdx-ray: {cause}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
