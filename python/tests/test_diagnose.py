"""``tcpdx.diagnose`` against ``tcpdx diagnose --json``: the same document, typed objects
over it, the command's options as keyword arguments."""

from __future__ import annotations

import warnings

import pytest
from conftest import LAB, LAB_CAPTURES, cli, cli_json, corpus_sample, short_id

import tcpdx


@pytest.mark.parametrize("path", LAB_CAPTURES, ids=short_id)
def test_to_dict_is_the_command_json_on_every_lab_capture(path):
    assert tcpdx.diagnose(path).to_dict() == cli_json("diagnose", "--json", path)


@pytest.mark.parametrize("path", corpus_sample(), ids=short_id)
def test_to_dict_is_the_command_json_on_corpus_captures(path):
    with warnings.catch_warnings():
        # Some corpus captures are cut off: the warning is tested elsewhere.
        warnings.simplefilter("ignore", tcpdx.CaptureWarning)
        d = tcpdx.diagnose(path)
    assert d.to_dict() == cli_json("diagnose", "--json", path)


def test_lab_captures_are_all_found():
    # 19 cases, two or three captures each: a glob that found nothing would pass above.
    assert len(LAB_CAPTURES) >= 38


def test_typed_objects_carry_the_document_values():
    path = LAB / "case000_rto_delack" / "client.pcap.gz"
    d = tcpdx.diagnose(path)
    doc = d.to_dict()
    worst = d.findings[0]
    assert worst is d.worst
    assert worst.kind == "rto-stall" == doc["findings"][0]["kind"]
    assert worst.severity == doc["findings"][0]["severity"]
    assert worst.stream == 0
    assert worst.cost.seconds == doc["findings"][0]["cost"]["seconds"] > 0
    assert [(e.frame, e.role) for e in worst.evidence] == [
        (e["frame"], e["role"]) for e in doc["findings"][0]["evidence"]
    ]
    assert worst.wireshark_filter.startswith("frame.number in {")
    assert worst.recommendations and all(isinstance(r, str) for r in worst.recommendations)
    assert len(worst.episode_list) == worst.episodes == 2
    assert worst.to_dict() == doc["findings"][0]
    tb = d.time_budget
    assert tb.seconds == doc["time_budget"]["seconds"] > 0
    assert tb.states["retransmission_timeout"].seconds == worst.cost.seconds
    assert sum(s.seconds for s in tb.states.values()) == pytest.approx(tb.seconds, rel=1e-6)
    assert tb.connections[0].stream == 0
    c = d.connections[0]
    assert (c.client, c.server) == ("10.233.1.2:48758", "10.233.2.2:15301")
    assert c.to_dict() == doc["connections"][0]
    assert d.verdict == doc["verdict"]["lines"]
    assert "rto-stall" in repr(d) and "Finding(kind='rto-stall'" in repr(worst)


def test_to_dict_is_a_copy():
    d = tcpdx.diagnose(LAB / "case000_rto_delack" / "client.pcap.gz")
    doc = d.to_dict()
    doc["findings"].clear()
    assert d.to_dict()["findings"], "changing the copy changed the diagnosis"


def test_help_explains_diagnose():
    doc = tcpdx.diagnose.__doc__
    for word in ("findings", "time_budget", "to_dict", "CaptureError", "decode_as"):
        assert word in doc, word


@pytest.mark.parametrize(
    ("kwargs", "flags"),
    [
        ({"stream": 0}, ["--stream", "0"]),
        ({"stream": [0, 1]}, ["--stream", "0", "--stream", "1"]),
        ({"port": 2049}, ["--port", "2049"]),
        ({"port": [1, 2]}, ["--port", "1", "--port", "2"]),
        ({"decode_as": {2050: "nfs"}}, ["--decode-as", "2050=nfs"]),
        ({"max_flows": 5}, ["--max-flows", "5"]),
    ],
    ids=lambda v: str(v),
)
def test_options_are_the_command_flags(kwargs, flags):
    path = LAB / "nfs3_write_loss1pct" / "client.pcap.gz"
    got = tcpdx.diagnose(path, **kwargs).to_dict()
    assert got == cli_json("diagnose", "--json", *flags, path)


def test_a_stream_filter_keeps_only_that_stream():
    path = LAB / "nfs3_write_loss1pct" / "client.pcap.gz"
    d = tcpdx.diagnose(path, stream=0)
    assert d.connections and {c.stream for c in d.connections} == {0}


def test_max_flows_evicts_and_warns_with_the_command_text():
    path = corpus_sample()[0]
    many = [p for p in corpus_sample() if len(tcpdx.diagnose(p).connections) > 3]
    assert many, "no corpus capture in the sample has more than 3 connections"
    path = many[0]
    r = cli("diagnose", "--json", "--max-flows", "1", path)
    want = [
        line.removeprefix("tcpdx: warning: ") for line in r.stderr.splitlines() if "evicted" in line
    ]
    assert want
    with pytest.warns(tcpdx.CaptureWarning) as w:
        tcpdx.diagnose(path, max_flows=1)
    assert [str(x.message) for x in w if "evicted" in str(x.message)] == want


def test_threads_give_the_same_diagnosis():
    path = LAB / "case001_reorder_behind" / "client.pcap.gz"
    assert tcpdx.diagnose(path, threads=1).to_dict() == tcpdx.diagnose(path, threads=2).to_dict()


def test_bad_options_are_value_errors():
    path = LAB / "case000_rto_delack" / "client.pcap.gz"
    with pytest.raises(ValueError, match="decode_as"):
        tcpdx.diagnose(path, decode_as={2050: "ftp"})
    with pytest.raises(ValueError, match="threads"):
        tcpdx.diagnose(path, threads=0)
    with pytest.raises(TypeError):
        tcpdx.diagnose(path, stream="0")


def test_progress_callback_sees_the_file_read():
    path = LAB / "case000_rto_delack" / "client.pcap.gz"
    calls = []
    tcpdx.diagnose(path, progress=lambda done, total, frames: calls.append((done, total, frames)))
    assert calls, "the callback was never called"
    done, total, frames = calls[-1]
    assert total == path.stat().st_size
    assert 0 < done <= total
    assert frames >= 4096, "one update per 4096 frames: the capture has more"


def test_an_exception_in_the_progress_callback_stops_and_propagates():
    path = LAB / "case000_rto_delack" / "client.pcap.gz"

    def stop(*_):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        tcpdx.diagnose(path, progress=stop)


@pytest.mark.parametrize(
    "path",
    [
        LAB / "nfs3_write_loss1pct" / "client.pcap.gz",
        LAB / "smb3_read_clean" / "server.pcap.gz",
        LAB / "iscsi_read_qd1" / "client.pcap.gz",
    ],
    ids=short_id,
)
def test_srt_is_the_command_json(path):
    got = tcpdx.srt_report(path)
    assert got == cli_json("srt", "--json", path)
    assert got["tables"], "storage traffic gives response-time tables"
    assert tcpdx.srt_report(path, interval=0.25, slowest=3) == cli_json(
        "srt", "--json", "--interval", "0.25", "--slowest", "3", path
    )


@pytest.mark.parametrize(
    "path",
    [
        LAB / "nfs3_write_loss1pct" / "client.pcap.gz",
        LAB / "smb3_read_clean" / "server.pcap.gz",
        LAB / "iscsi_read_qd1" / "client.pcap.gz",
    ],
    ids=short_id,
)
def test_srt_table_has_a_row_per_operation_of_the_command(path):
    want = cli_json("srt", "--json", path)
    t = tcpdx.srt(path)
    assert t.schema == tcpdx.SRT_SCHEMA
    rows = t.to_pylist()
    assert len(rows) == sum(len(tab["rows"]) for tab in want["tables"]) > 0
    i = 0
    for tab in want["tables"]:
        for r in tab["rows"]:
            got = rows[i]
            assert (got["protocol"], got["op"], got["count"]) == (
                tab["protocol"],
                r["op"],
                r["count"],
            )
            assert got["p95_s"] == r["p95_s"] and got["total_s"] == r["total_s"]
            i += 1
