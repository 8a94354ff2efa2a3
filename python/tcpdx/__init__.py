"""tcpdx: why is this TCP transfer slow? The tcpdx library for Python.

Reads pcap and pcapng captures (optionally gzip- or zstd-compressed) at the speed of the
``tcpdx`` command, with the same results::

    import tcpdx

    d = tcpdx.diagnose("client.pcap.gz")        # findings, time budget, connections
    print(d.findings[0].kind, d.findings[0].cost.seconds)
    seg = tcpdx.segments("client.pcap.gz")      # pyarrow.Table, one row per TCP segment
    df = seg.to_pandas()

Tables (``segments``, ``flows``, ``transactions``) have the columns and types of the
Parquet files of ``tcpdx export`` and are built in Rust a batch at a time: no Python object
per packet. ``segments_batches`` streams them, for captures that do not fit in memory.

Every function takes the command's analysis options as keyword arguments:

- ``threads``: analysis threads (default: every core, less one for a compressed file).
  Results are the same for any number.
- ``max_flows``: connections tracked at once (the command's ``--max-flows``).
- ``decode_as``: ``{port: "nfs" | "smb2" | "iscsi"}``, besides the default ports.
- ``stream``: only this ``tcp.stream`` (an int or a list of them).
- ``port``: only connections with this port at either end (an int or a list).
- ``progress``: ``True`` for a tqdm bar (when tqdm is installed), or a callable
  ``f(bytes_read, total_bytes_or_None, frames)`` called about ten times a second.

A capture that cannot be read raises :class:`CaptureError` (a ``ValueError``) with the
command's one-line message; a capture cut off is analysed up to the cut, with a
:class:`CaptureWarning`. Ctrl-C stops a running analysis.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any, Callable, Optional, Union

import pyarrow

from . import _native
from ._model import (
    Connection,
    ConnectionBudget,
    Cost,
    Diagnosis,
    Episode,
    Evidence,
    Finding,
    StateTime,
    TimeBudget,
)

CaptureError = _native.CaptureError
CaptureWarning = _native.CaptureWarning
__version__: str = _native.VERSION

#: The tables of :func:`table` (the Parquet files of ``tcpdx export`` of the same names).
TABLES: tuple[str, ...] = tuple(_native.TABLES)

#: Rows per record batch of the tables.
DEFAULT_BATCH_SIZE = 65536

__all__ = [
    "CaptureError",
    "CaptureWarning",
    "Connection",
    "ConnectionBudget",
    "Cost",
    "Diagnosis",
    "Episode",
    "Evidence",
    "Finding",
    "StateTime",
    "TABLES",
    "TimeBudget",
    "diagnose",
    "flows",
    "rounds",
    "schema",
    "segments",
    "segments_batches",
    "srt",
    "srt_report",
    "SRT_SCHEMA",
    "table",
    "transactions",
]

Path = Union[str, "os.PathLike[str]"]
Progress = Union[bool, Callable[[int, Optional[int], int], Any], None]


def _ints(v: Union[int, list[int], tuple[int, ...], None], name: str) -> list[int]:
    if v is None:
        return []
    if isinstance(v, int):
        return [v]
    out = list(v)
    if not all(isinstance(x, int) for x in out):
        raise TypeError(f"{name} must be an int or a list of ints")
    return out


class _Bar:
    """A tqdm bar over the bytes of the capture (callable as a progress callback)."""

    def __init__(self, label: str) -> None:
        from tqdm.auto import tqdm

        self._bar = tqdm(desc=label, unit="B", unit_scale=True, unit_divisor=1024)
        self._frames = 0

    def __call__(self, done: int, total: Optional[int], frames: int) -> None:
        if total is not None and self._bar.total != total:
            self._bar.total = total
        self._bar.update(done - self._bar.n)
        if frames != self._frames:
            self._frames = frames
            self._bar.set_postfix(packets=frames, refresh=False)

    def close(self) -> None:
        self._bar.close()


def _progress(progress: Progress, label: str) -> Any:
    """The callback for ``progress=``: a tqdm bar for True (None without tqdm)."""
    if progress is True:
        try:
            return _Bar(label)
        except ImportError:
            return None
    if progress is False or progress is None:
        return None
    if not callable(progress):
        raise TypeError("progress must be True, False, None or a callable")
    return progress


def _options(
    threads: Optional[int],
    max_flows: Optional[int],
    decode_as: Optional[dict[int, str]],
    stream: Union[int, list[int], None],
    port: Union[int, list[int], None],
) -> dict[str, Any]:
    return {
        "threads": threads,
        "max_flows": max_flows,
        "decode_as": dict(decode_as) if decode_as else None,
        "stream": _ints(stream, "stream"),
        "port": _ints(port, "port"),
    }


def _call(
    f: Callable[..., Any], label: str, progress: Progress, depth: int, *args: Any, **kw: Any
) -> Any:
    """Calls native ``f`` with the progress callback; its warnings point ``depth`` frames
    above this one (the user's code)."""
    cb = _progress(progress, label)
    try:
        return f(*args, progress=cb, stacklevel=depth + 1, **kw)
    finally:
        if isinstance(cb, _Bar):
            cb.close()


def diagnose(
    path: Path,
    *,
    threads: Optional[int] = None,
    max_flows: Optional[int] = None,
    decode_as: Optional[dict[int, str]] = None,
    stream: Union[int, list[int], None] = None,
    port: Union[int, list[int], None] = None,
    progress: Progress = None,
) -> Diagnosis:
    """Diagnose the capture at ``path``: what ``tcpdx diagnose`` reports.

    Returns a :class:`Diagnosis`: ``findings`` (most costly first; each with its kind,
    severity, ``stream``, cost in seconds and share, evidence frames with their roles, a
    Wireshark filter, an explanation and recommendations), ``time_budget`` (where the
    connection-seconds went) and ``connections``. ``Diagnosis.to_dict()`` is exactly the
    document ``tcpdx diagnose --json`` prints for the same file and options.

    Options (keyword only, the command's flags): ``threads``, ``max_flows``, ``decode_as``
    (e.g. ``{2050: "nfs"}``), ``stream``, ``port``, ``progress``; see the module's help.

    Raises :class:`CaptureError` when the file cannot be read (the command's message:
    file, byte offset, what was wrong); warns with :class:`CaptureWarning` when it is cut
    off (the diagnosis covers the frames up to the cut).
    """
    text = _call(
        _native.diagnose_json,
        "diagnose",
        progress,
        2,
        os.fspath(path),
        **_options(threads, max_flows, decode_as, stream, port),
    )
    return Diagnosis.from_dict(json.loads(text))


def srt_report(
    path: Path,
    *,
    interval: float = 1.0,
    slowest: int = 10,
    threads: Optional[int] = None,
    max_flows: Optional[int] = None,
    decode_as: Optional[dict[int, str]] = None,
    stream: Union[int, list[int], None] = None,
    port: Union[int, list[int], None] = None,
    progress: Progress = None,
) -> dict[str, Any]:
    """Service response times of the storage protocols: the document ``tcpdx srt --json``
    prints (per NFS procedure, SMB2 command and SCSI opcode: count, min, mean, p50/p95/p99,
    max, total; the ``slowest`` requests with their frames; a timeline of ``interval``
    seconds). For the per-operation rows as a table, see :func:`srt`; for one row per
    request, :func:`transactions`. Options as for :func:`diagnose`."""
    text = _call(
        _native.srt_json,
        "srt",
        progress,
        2,
        os.fspath(path),
        interval=interval,
        slowest=slowest,
        **_options(threads, max_flows, decode_as, stream, port),
    )
    return json.loads(text)


#: The columns of :func:`srt`: one row per protocol and operation.
SRT_SCHEMA = pyarrow.schema(
    [
        ("protocol", pyarrow.string()),
        ("version", pyarrow.int64()),
        ("by", pyarrow.string()),
        ("op", pyarrow.string()),
        ("code", pyarrow.int64()),
        ("count", pyarrow.int64()),
        ("min_s", pyarrow.float64()),
        ("max_s", pyarrow.float64()),
        ("mean_s", pyarrow.float64()),
        ("p50_s", pyarrow.float64()),
        ("p95_s", pyarrow.float64()),
        ("p99_s", pyarrow.float64()),
        ("total_s", pyarrow.float64()),
    ]
)


def srt(path: Path, **options: Any) -> pyarrow.Table:
    """Service response times per storage operation as a ``pyarrow.Table`` (columns
    :data:`SRT_SCHEMA`): one row per NFS procedure, SMB2 command or SCSI opcode seen, with
    count, min, max, mean, p50/p95/p99 and total seconds, the rows of the tables of
    ``tcpdx srt --json`` (a few rows per protocol: built from :func:`srt_report`). Options
    as for :func:`srt_report`."""
    report = srt_report(path, **options)
    rows = [
        {"protocol": t["protocol"], "version": t.get("version"), "by": t["by"], **r}
        for t in report["tables"]
        for r in t["rows"]
    ]
    names = SRT_SCHEMA.names
    return pyarrow.Table.from_pylist(
        [{k: r.get(k) for k in names} for r in rows], schema=SRT_SCHEMA
    )


def table(
    name: str,
    path: Path,
    *,
    batch_size: int = DEFAULT_BATCH_SIZE,
    threads: Optional[int] = None,
    max_flows: Optional[int] = None,
    decode_as: Optional[dict[int, str]] = None,
    stream: Union[int, list[int], None] = None,
    port: Union[int, list[int], None] = None,
    progress: Progress = None,
) -> pyarrow.Table:
    """Table ``name`` (one of :data:`TABLES`) of the capture at ``path``, as a
    ``pyarrow.Table`` with the schema of the Parquet file ``tcpdx export`` writes (see
    docs/parquet-format.md) and the same rows, in record batches of ``batch_size`` rows.
    Options as for :func:`diagnose`."""
    return _table(
        name, path, 3, batch_size, progress, _options(threads, max_flows, decode_as, stream, port)
    )


def _table(
    name: str, path: Path, depth: int, batch_size: int, progress: Progress, opts: dict[str, Any]
) -> pyarrow.Table:
    if batch_size < 1:
        raise ValueError("batch_size must be at least 1")
    return _call(
        _native.table, name, progress, depth, name, os.fspath(path), batch_size=batch_size, **opts
    )


def _named(
    name: str,
    path: Path,
    batch_size: int = DEFAULT_BATCH_SIZE,
    threads: Optional[int] = None,
    max_flows: Optional[int] = None,
    decode_as: Optional[dict[int, str]] = None,
    stream: Union[int, list[int], None] = None,
    port: Union[int, list[int], None] = None,
    progress: Progress = None,
) -> pyarrow.Table:
    """:func:`table` called from ``segments``, ``flows`` or ``transactions``."""
    return _table(
        name, path, 4, batch_size, progress, _options(threads, max_flows, decode_as, stream, port)
    )


def segments(path: Path, **options: Any) -> pyarrow.Table:
    """One row per TCP segment, in frame order: Wireshark's frame number and ``tcp.stream``,
    times, addresses and ports, relative sequence and ACK numbers, length, TCP flags, window,
    the ``tcp.analysis.*`` flags (``|``-joined), ACK RTT, bytes in flight and TCP options.
    The rows of ``tcpdx events`` and of ``segments.parquet`` (``tcpdx export``). Options as
    for :func:`table`. For captures too large for memory, see :func:`segments_batches`."""
    return _named("segments", path, **options)


def flows(path: Path, **options: Any) -> pyarrow.Table:
    """One row per connection and direction (stream order): packets, bytes, goodput,
    retransmissions, RTT statistics, MSS, window scale, SACK, window limits. The rows of
    ``flows.parquet``. Options as for :func:`table`."""
    return _named("flows", path, **options)


def transactions(path: Path, **options: Any) -> pyarrow.Table:
    """One row per storage request (NFS, SMB2, iSCSI) with its reply, in reply order
    (unanswered requests last): protocol, operation, frames, times and latency. The rows of
    ``transactions.parquet``; ``decode_as`` adds ports. Options as for :func:`table`."""
    return _named("transactions", path, **options)


def rounds(path: Path, **options: Any) -> pyarrow.Table:
    """One row per round trip of each sender (stream, direction): start and end, segments,
    retransmissions, largest flight, bytes delivered, the congestion-window estimate
    (segments; null where the capture cannot show it) and what limited the round (``cwnd``,
    ``receiver_window``, ``sender``, ``pacing``, ``recovery``, ``timeout``), and from which
    side the capture saw it. The rows of ``rounds.parquet``. Options as for :func:`table`."""
    return _named("rounds", path, **options)


def segments_batches(
    path: Path,
    *,
    batch_size: int = DEFAULT_BATCH_SIZE,
    threads: Optional[int] = None,
    max_flows: Optional[int] = None,
    decode_as: Optional[dict[int, str]] = None,
    stream: Union[int, list[int], None] = None,
    port: Union[int, list[int], None] = None,
    progress: Progress = None,
) -> Iterator[pyarrow.RecordBatch]:
    """The rows of :func:`segments` as an iterator of ``pyarrow.RecordBatch`` of
    ``batch_size`` rows (the last one fewer), read while they are consumed: memory holds a
    few batches whatever the capture's length. Stopping early (``break``, ``close()``)
    stops the reading. Errors and warnings come at the point of the capture where they
    arise."""
    return _batches(
        "segments", path, batch_size, progress, threads, max_flows, decode_as, stream, port
    )


def _batches(
    name: str,
    path: Path,
    batch_size: int,
    progress: Progress,
    *opts: Any,
) -> Iterator[pyarrow.RecordBatch]:
    if batch_size < 1:
        raise ValueError("batch_size must be at least 1")
    cb = _progress(progress, name)
    it = _native.batches(
        name, os.fspath(path), batch_size=batch_size, progress=cb, **_options(*opts)
    )
    return _Closing(it, cb)


class _Closing(Iterator[pyarrow.RecordBatch]):
    """The native batch iterator, closing the progress bar at its end."""

    def __init__(self, it: Any, bar: Any) -> None:
        self._it = it
        self._bar = bar

    def __iter__(self) -> _Closing:
        return self

    def __next__(self) -> pyarrow.RecordBatch:
        try:
            return next(self._it)
        except BaseException:
            self._close_bar()
            raise

    def close(self) -> None:
        """Stops reading the capture."""
        self._it.close()
        self._close_bar()

    def _close_bar(self) -> None:
        if isinstance(self._bar, _Bar):
            self._bar.close()
            self._bar = None


def schema(name: str) -> pyarrow.Schema:
    """The ``pyarrow.Schema`` of table ``name`` (one of :data:`TABLES`)."""
    return _native.schema(name)
