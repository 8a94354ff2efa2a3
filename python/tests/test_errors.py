"""Bad input: ``CaptureError`` with the command's one-line message; a capture cut off warns
with the command's text and is analysed up to the cut."""

from __future__ import annotations

import gzip

import pyarrow as pa
import pytest
from conftest import LAB, cli

import tcpdx


def cli_error(path) -> str:
    r = cli("diagnose", path, check=False)
    assert r.returncode == 2, r
    (line,) = r.stderr.splitlines()
    assert line.startswith("tcpdx: ")
    return line.removeprefix("tcpdx: ")


@pytest.fixture
def capture_bytes() -> bytes:
    return gzip.decompress((LAB / "case000_rto_delack" / "client.pcap.gz").read_bytes())


@pytest.mark.parametrize(
    "content",
    [b"garbage, not a capture\n", b"", b"\xd4\xc3\xb2\xa1\x02\x00"],
    ids=["text", "empty", "short-header"],
)
def test_bad_files_raise_capture_error_with_the_command_message(tmp_path, content):
    path = tmp_path / "bad.pcap"
    path.write_bytes(content)
    want = cli_error(path)
    assert str(path) in want
    for f in (tcpdx.diagnose, tcpdx.segments, tcpdx.flows, tcpdx.transactions):
        with pytest.raises(tcpdx.CaptureError) as e:
            f(path)
        assert str(e.value) == want, f.__name__
    with pytest.raises(tcpdx.CaptureError) as e:
        list(tcpdx.segments_batches(path))
    assert str(e.value) == want


def test_a_missing_file_is_a_capture_error(tmp_path):
    path = tmp_path / "nope.pcap"
    want = cli_error(path)
    assert "cannot open" in want
    with pytest.raises(tcpdx.CaptureError, match="cannot open") as e:
        tcpdx.diagnose(path)
    assert str(e.value) == want


def test_capture_error_is_a_value_error():
    assert issubclass(tcpdx.CaptureError, ValueError)
    assert issubclass(tcpdx.CaptureWarning, UserWarning)


def test_a_capture_cut_off_warns_and_is_analysed_up_to_the_cut(tmp_path, capture_bytes):
    path = tmp_path / "cut.pcap"
    path.write_bytes(capture_bytes[:200_000])
    r = cli("diagnose", "--json", path)
    want = [line.removeprefix("tcpdx: warning: ") for line in r.stderr.splitlines()]
    assert len(want) == 1 and "cut off at byte" in want[0], r.stderr
    with pytest.warns(tcpdx.CaptureWarning) as w:
        d = tcpdx.diagnose(path)
    assert [str(x.message) for x in w] == want
    assert w[0].filename == __file__, "the warning points at the caller"
    import json

    assert d.to_dict() == json.loads(r.stdout)
    with pytest.warns(tcpdx.CaptureWarning, match="cut off"):
        seg = tcpdx.segments(path)
    full = tcpdx.segments(LAB / "case000_rto_delack" / "client.pcap.gz")
    assert 0 < seg.num_rows < full.num_rows
    frame = int(want[0].split("(frame ")[1].split(")")[0])
    assert seg.column("frame").to_pylist()[-1] == frame - 1, "every frame before the cut"
    with pytest.warns(tcpdx.CaptureWarning, match="cut off"):
        batches = list(tcpdx.segments_batches(path, batch_size=500))
    assert pa.Table.from_batches(batches).equals(seg)


def test_warnings_can_be_errors(tmp_path, capture_bytes):
    path = tmp_path / "cut.pcap"
    path.write_bytes(capture_bytes[:50_000])
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", tcpdx.CaptureWarning)
        with pytest.raises(tcpdx.CaptureWarning, match="cut off"):
            tcpdx.diagnose(path)
