"""The tables against ``tcpdx export``'s Parquet files: same schema, same rows, same
values; batches; pandas and polars."""

from __future__ import annotations

import warnings

import pandas as pd
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import LAB, corpus_sample, short_id

import tcpdx

TABLE_CAPTURES = [
    LAB / "case000_rto_delack" / "client.pcap.gz",
    LAB / "case001_reorder_behind" / "router_s.pcap.gz",
    LAB / "nfs3_write_loss1pct" / "client.pcap.gz",
    LAB / "nfs4_read_clean" / "server.pcap.gz",
    LAB / "smb3_write_loss1pct" / "client.pcap.gz",
    LAB / "iscsi_read_qd1" / "client.pcap.gz",
    *corpus_sample(3, 2),
]


def quiet(f, *args, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", tcpdx.CaptureWarning)
        return f(*args, **kw)


@pytest.mark.parametrize("path", TABLE_CAPTURES, ids=short_id)
@pytest.mark.parametrize("name", ["segments", "flows", "transactions", "rounds"])
def test_table_equals_the_parquet_export(path, name, exported):
    want = pq.read_table(exported(path) / f"{name}.parquet")
    got = quiet(getattr(tcpdx, name), path)
    assert got.schema == want.schema
    assert got.num_rows == want.num_rows
    assert got.equals(want)


def test_tables_are_not_empty_where_the_capture_has_rows(exported):
    nfs = LAB / "nfs3_write_loss1pct" / "client.pcap.gz"
    t = tcpdx.transactions(nfs)
    assert t.num_rows == 10
    assert set(t.column("protocol").to_pylist()) == {"nfs"}
    s = tcpdx.segments(nfs)
    assert s.column("frame").to_pylist()[:3] == [1, 2, 3]
    assert s.num_rows == pq.read_metadata(exported(nfs) / "segments.parquet").num_rows
    f = tcpdx.flows(nfs)
    assert f.num_rows == 2 * len(tcpdx.diagnose(nfs).connections)
    assert set(f.column("dir").to_pylist()) == {"c2s", "s2c"}
    bulk = LAB / "case000_rto_delack" / "client.pcap.gz"
    r = tcpdx.rounds(bulk)
    assert r.num_rows > 10
    assert "timeout" in r.column("limit").to_pylist()


@pytest.mark.parametrize("name", tcpdx.TABLES)
def test_schema_is_the_parquet_schema(name, exported):
    path = LAB / "case000_rto_delack" / "client.pcap.gz"
    assert tcpdx.schema(name) == pq.read_schema(exported(path) / f"{name}.parquet")


def test_types_of_a_few_columns():
    s = tcpdx.schema("segments")
    assert s.field("frame").type == pa.int64()
    assert s.field("ts").type == pa.timestamp("ns", tz="UTC")
    assert s.field("ack_rtt").nullable and not s.field("frame").nullable
    assert s.field("dir").type == pa.string()


@pytest.mark.parametrize("batch_size", [1, 999, 4096, 1_000_000])
def test_segments_batches_stream_the_same_rows(batch_size):
    path = LAB / "case000_rto_delack" / "client.pcap.gz"
    whole = tcpdx.segments(path)
    batches = list(tcpdx.segments_batches(path, batch_size=batch_size if batch_size > 1 else 7))
    size = batch_size if batch_size > 1 else 7
    assert all(isinstance(b, pa.RecordBatch) for b in batches)
    assert all(b.num_rows == size for b in batches[:-1])
    assert 0 < batches[-1].num_rows <= size
    assert pa.Table.from_batches(batches).equals(whole)


def test_a_table_comes_in_batches_of_batch_size():
    path = LAB / "case000_rto_delack" / "client.pcap.gz"
    t = tcpdx.segments(path, batch_size=1000)
    sizes = [len(c) for c in t.column("frame").chunks]
    assert sizes[:-1] == [1000] * (len(sizes) - 1) and sizes[-1] <= 1000
    assert t.equals(tcpdx.segments(path))


def test_stopping_a_batch_stream_early():
    path = LAB / "case000_rto_delack" / "client.pcap.gz"
    it = tcpdx.segments_batches(path, batch_size=100)
    first = next(it)
    it.close()
    assert first.num_rows == 100
    assert list(it) == []


@pytest.mark.parametrize("name", ["segments", "flows", "transactions", "rounds"])
def test_threads_give_the_same_tables(name):
    path = LAB / "nfs3_write_loss1pct" / "client.pcap.gz"
    one = getattr(tcpdx, name)(path, threads=1)
    two = getattr(tcpdx, name)(path, threads=2)
    assert one.num_rows > 0
    assert one.equals(two)


def test_options_filter_the_tables_like_the_command(tmp_path):
    from conftest import cli_export

    path = LAB / "nfs3_write_loss1pct" / "client.pcap.gz"
    out = cli_export(path, tmp_path, "--port", "2049")
    for name in ("segments", "flows", "transactions"):
        want = pq.read_table(out / f"{name}.parquet")
        assert getattr(tcpdx, name)(path, port=2049).equals(want), name


def test_round_trip_to_pandas(exported):
    path = LAB / "nfs3_write_loss1pct" / "client.pcap.gz"
    for name in ("segments", "flows", "transactions"):
        got = getattr(tcpdx, name)(path).to_pandas()
        want = pd.read_parquet(exported(path) / f"{name}.parquet")
        pd.testing.assert_frame_equal(got, want)
    seg = tcpdx.segments(path).to_pandas()
    assert str(seg["ts"].dtype) == "datetime64[ns, UTC]"
    assert seg["frame"].is_monotonic_increasing


def test_round_trip_to_polars(exported):
    path = LAB / "smb3_write_loss1pct" / "client.pcap.gz"
    for name in ("segments", "flows", "transactions"):
        got = pl.from_arrow(getattr(tcpdx, name)(path))
        want = pl.read_parquet(exported(path) / f"{name}.parquet")
        assert got.schema == want.schema, name
        assert got.equals(want), name
    t = pl.from_arrow(tcpdx.transactions(path))
    assert t.height > 0 and t["protocol"].unique().to_list() == ["smb2"]


def test_unknown_table_is_a_value_error():
    with pytest.raises(ValueError, match="no table"):
        tcpdx.table("windows", LAB / "case000_rto_delack" / "client.pcap.gz")
