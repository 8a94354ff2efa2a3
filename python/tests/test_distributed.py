"""tcpdx-ray on a local Ray cluster (2 CPUs, in this process): it prints what tcpdx
prints, on lab fixtures whole and cut into a ring buffer; the stages run in the package's
native module (one test runs them through the tcpdx binary instead).

Needs the tcpdx binary to compare with (and for export): $TCPDX_BIN, else built by cargo
(conftest.tcpdx_bin).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import ray
from conftest import tcpdx_bin

from tcpdx import distributed

REPO = Path(__file__).resolve().parents[2]
LAB = REPO / "tests" / "data" / "lab"


def binary() -> str:
    # The command the other tests compare with: a stale release build next to a fresh debug
    # one must not be picked.
    return tcpdx_bin()


@pytest.fixture(scope="module", autouse=True)
def cluster():
    os.environ["TCPDX_BIN"] = binary()
    distributed.connect("local")
    yield
    ray.shutdown()


def tcpdx(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([binary(), *args], check=False, capture_output=True, text=True)


def ray_cli(capsys, *args: str) -> tuple[int, str, str]:
    code = distributed.main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def ring(path: Path, tmp: Path, per_file: int) -> list[str]:
    """`path` cut into consecutive files of `per_file` frames (as dumpcap -b would)."""
    subprocess.run(
        [
            "editcap",
            "-F",
            "pcap",
            "-c",
            str(per_file),
            str(path),
            str(tmp / "ring.pcap"),
        ],
        check=True,
    )
    files = sorted(str(p) for p in tmp.glob("ring_*.pcap"))
    assert len(files) > 2, files
    return files


@pytest.mark.parametrize(
    "case",
    ["case000_rto_delack/server.pcap.gz", "case003_nfs_write_stall/server.pcap.gz"],
)
def test_diagnose_json_equals_tcpdx(capsys, case):
    assert distributed.native_stages(), "the native module has the stages"
    f = str(LAB / case)
    want = tcpdx("diagnose", "--json", f)
    assert want.returncode == 0, want.stderr
    code, out, err = ray_cli(capsys, "diagnose", "--address", "local", "--json", f)
    assert code == 0, err
    assert out == want.stdout
    assert '"findings"' in out


def test_diagnose_text_equals_tcpdx_in_three_partitions(capsys):
    f = str(LAB / "smb3_write_loss1pct" / "server.pcap.gz")
    want = tcpdx("diagnose", f)
    assert want.returncode == 0, want.stderr
    code, out, err = ray_cli(capsys, "diagnose", "--address", "local", "--partitions", "3", f)
    assert code == 0, err
    assert out == want.stdout
    assert out.startswith("Verdict:")


def test_ring_buffer_equals_the_whole_capture(capsys, tmp_path):
    whole = LAB / "case001_reorder_behind" / "client.pcap.gz"
    files = ring(whole, tmp_path, 200)
    want = tcpdx("diagnose", "--json", str(whole))
    assert want.returncode == 0, want.stderr
    # Given newest first: the files are read in time order all the same.
    stats: dict = {}
    out = distributed.diagnose(list(reversed(files)), json=True, partitions=2, stats=stats)
    assert out == want.stdout
    # Every file sharded: all but the last hold 200 frames.
    counts = sorted(m["frames"] for m in stats["metas"])
    assert len(counts) == len(files) and counts[-1] == 200
    assert stats["frames"] == sum(counts) > 200 * (len(files) - 1)


def check_stage2_tasks(stats: dict, n: int) -> None:
    """Stage 2 ran as ``n`` Ray tasks, one per partition, none in the driver, each
    returning its partial."""
    ran = stats["stage2"]
    assert sorted(r["partition"] for r in ran) == list(range(n))
    assert all(r["pid"] != os.getpid() and r["worker"] for r in ran), ran
    assert all(r["bytes"] > 0 for r in ran), ran
    assert stats["partial_bytes"] == sum(r["bytes"] for r in ran)


def test_stage_two_is_one_task_per_partition(capsys, tmp_path):
    whole = LAB / "case003_nfs_write_stall" / "server.pcap.gz"
    files = ring(whole, tmp_path, 150)
    want = tcpdx("diagnose", "--json", str(whole))
    assert want.returncode == 0, want.stderr
    for n in (1, 3):
        stats: dict = {}
        out = distributed.diagnose(files, json=True, partitions=n, stats=stats)
        assert out == want.stdout, n
        assert stats["native"]
        check_stage2_tasks(stats, n)


def test_overlapping_files_are_refused(capsys, tmp_path):
    whole = str(LAB / "case000_rto_delack" / "server.pcap.gz")
    piece = ring(LAB / "case000_rto_delack" / "server.pcap.gz", tmp_path, 100)[1]
    code, out, err = ray_cli(capsys, "diagnose", "--address", "local", whole, piece)
    assert code == 2
    assert out == ""
    assert "overlap" in err and "mergecap" in err


def test_bad_input_is_one_line_and_exit_2(capsys, tmp_path):
    bad = tmp_path / "bad.pcap"
    bad.write_bytes(b"not a capture at all")
    code, _, err = ray_cli(capsys, "diagnose", "--address", "local", str(bad))
    assert code == 2
    assert err.startswith("tcpdx-ray: ") and "bad.pcap" in err
    assert len(err.strip().splitlines()) == 1


def test_export_writes_the_tables_of_tcpdx_export(capsys, tmp_path):
    f = str(LAB / "case003_nfs_write_stall" / "server.pcap.gz")
    want_dir, got_dir = tmp_path / "want", tmp_path / "got"
    r = tcpdx("export", f, "-o", str(want_dir))
    assert r.returncode == 0, r.stderr
    code, _, err = ray_cli(capsys, "export", "--address", "local", "--flat", f, "-o", str(got_dir))
    assert code == 0, err
    want = sorted(p.name for p in want_dir.iterdir())
    assert want and sorted(p.name for p in got_dir.iterdir()) == want
    for name in want:
        assert (got_dir / name).read_bytes() == (want_dir / name).read_bytes(), name


def test_the_binary_runs_the_same_stages(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("TCPDX_RAY_STAGES", "binary")
    assert not distributed.native_stages()
    whole = LAB / "case003_nfs_write_stall" / "server.pcap.gz"
    files = ring(whole, tmp_path, 150)
    want = tcpdx("diagnose", "--json", "--port", "2049", str(whole))
    assert want.returncode == 0, want.stderr
    stats: dict = {}
    out = distributed.diagnose(
        files, json=True, partitions=3, options={"port": [2049]}, stats=stats
    )
    assert out == want.stdout
    assert not stats["native"]
    check_stage2_tasks(stats, 3)
    # The flags reach the binary: --port leaves the other connections out.
    assert out != tcpdx("diagnose", "--json", str(whole)).stdout


def test_options_reach_the_native_stages(capsys):
    f = str(LAB / "case003_nfs_write_stall" / "server.pcap.gz")
    want = tcpdx("diagnose", "--json", "--port", "2049", "--decode-as", "2050=nfs", f)
    assert want.returncode == 0, want.stderr
    code, out, err = ray_cli(
        capsys,
        "diagnose",
        "--address",
        "local",
        "--json",
        "--port",
        "2049",
        "--decode-as",
        "2050=nfs",
        f,
    )
    assert code == 0, err
    assert out == want.stdout
    code, _, err = ray_cli(capsys, "diagnose", "--address", "local", "--decode-as", "nfs", f)
    assert code == 2 and "PORT=PROTO" in err


def test_export_of_a_ring_buffer_equals_the_whole_capture(capsys, tmp_path):
    import pyarrow.parquet as pq

    whole = LAB / "smb3_write_loss1pct" / "client.pcap.gz"
    files = ring(whole, tmp_path, 300)
    want_dir, got_dir = tmp_path / "want", tmp_path / "got"
    r = tcpdx("export", str(whole), "-o", str(want_dir))
    assert r.returncode == 0, r.stderr
    code, _, err = ray_cli(
        capsys,
        "export",
        "--address",
        "local",
        "--flat",
        "--partitions",
        "3",
        *files,
        "-o",
        str(got_dir),
    )
    assert code == 0, err
    assert err.startswith(f"tcpdx: wrote {len(list(want_dir.iterdir()))} tables to ")
    names = sorted(p.name for p in want_dir.iterdir())
    assert sorted(p.name for p in got_dir.iterdir()) == names
    for name in names:
        want, got = pq.read_table(want_dir / name), pq.read_table(got_dir / name)
        assert got.equals(want), name
        # The tables name their source: the files, as given.
        source = pq.read_metadata(got_dir / name).metadata[b"tcpdx.source"].decode()
        assert source == " ".join(files)
    assert pq.read_table(got_dir / "segments.parquet").num_rows > 1000


TABLES = [
    "segments",
    "flows",
    "transactions",
    "findings",
    "evidence",
    "episodes",
    "time_budget",
    "rounds",
]


def test_export_is_hive_partitioned_by_date_and_hour(capsys, tmp_path):
    import duckdb

    # A ring buffer whose last files come an hour later (as `tcpdump -G` files after a
    # pause): its rows fall in two hours.
    files = ring(LAB / "case003_nfs_write_stall" / "server.pcap.gz", tmp_path, 600)
    late = []
    for f in files[len(files) // 2 :]:
        shifted = f.replace(".pcap", "_late.pcap")
        subprocess.run(["editcap", "-t", "3600", f, shifted], check=True)
        late.append(shifted)
    files = files[: len(files) // 2] + late
    merged = tmp_path / "merged.pcap"
    subprocess.run(["mergecap", "-F", "pcap", "-a", "-w", str(merged), *files], check=True)
    want_dir, got_dir = tmp_path / "want", tmp_path / "got"
    r = tcpdx("export", str(merged), "-o", str(want_dir))
    assert r.returncode == 0, r.stderr
    code, _, err = ray_cli(capsys, "export", "--address", "local", *files, "-o", str(got_dir))
    assert code == 0, err
    assert "(hive: date, hour)" in err
    con = duckdb.connect()
    for name in TABLES:
        parts = sorted(p.relative_to(got_dir / name) for p in (got_dir / name).rglob("*.parquet"))
        assert parts and all(str(p).startswith("date=") for p in parts), (name, parts)
        got = con.sql(
            f"select * exclude (date, hour) from read_parquet('{got_dir}/{name}/**/*.parquet', "
            "hive_partitioning = true)"
        )
        want = con.sql(f"select * from read_parquet('{want_dir}/{name}.parquet')")
        assert got.columns == want.columns, name
        assert sorted(map(repr, got.fetchall())) == sorted(map(repr, want.fetchall())), name
    # Two hours; each segment in the hour of its own time, each flow in its first segment's.
    hours = con.sql(
        f"select distinct hour from read_parquet('{got_dir}/segments/**/*.parquet', "
        "hive_partitioning = true)"
    ).fetchall()
    assert len(hours) == 2, hours
    wrong = con.sql(
        f"select count(*) from read_parquet('{got_dir}/segments/**/*.parquet', "
        "hive_partitioning = true) where hour <> hour(ts at time zone 'UTC') "
        "or date <> cast(ts at time zone 'UTC' as date)"
    ).fetchall()[0][0]
    assert wrong == 0
    misplaced = con.sql(
        f"""select count(*) from read_parquet('{got_dir}/flows/**/*.parquet',
                hive_partitioning = true) f
            join (select stream, min(ts) as t from read_parquet('{want_dir}/segments.parquet')
                  group by 1) s using (stream)
            where f.hour <> hour(s.t at time zone 'UTC')"""
    ).fetchall()[0][0]
    assert misplaced == 0
    # A query that selects one hour reads that hour's rows only.
    one = con.sql(
        f"select count(*) from read_parquet('{got_dir}/segments/**/*.parquet', "
        f"hive_partitioning = true) where hour = {hours[0][0]}"
    ).fetchall()[0][0]
    assert 0 < one < con.sql(f"select count(*) from '{want_dir}/segments.parquet'").fetchall()[0][0]


def plain_pcap(case: str, tmp: Path) -> Path:
    """The lab fixture ``case`` as one uncompressed pcap file (byte ranges are of such)."""
    out = tmp / "whole.pcap"
    subprocess.run(["editcap", "-F", "pcap", str(LAB / case), str(out)], check=True)
    return out


def test_byte_ranges_of_one_file_equal_tcpdx(capsys, tmp_path):
    plain = plain_pcap("case003_nfs_write_stall/server.pcap.gz", tmp_path)
    want = tcpdx("diagnose", "--json", str(plain))
    assert want.returncode == 0, want.stderr
    size = plain.stat().st_size
    # Ranges of an odd size: cuts in the middle of records.
    split = size // 5 + 13
    stats: dict = {}
    out = distributed.diagnose(
        [str(plain)], json=True, partitions=2, stats=stats, split_bytes=split
    )
    assert out == want.stdout
    # One stage-1 task per range, tiling the file; each began where the one before stopped.
    ranges = sorted((m["range"] for m in stats["metas"]), key=lambda r: r["start"])
    assert len(ranges) == -(-size // split) == 5
    assert ranges[0]["start"] == 0 and ranges[-1]["end"] == size
    for a, b in zip(ranges, ranges[1:]):
        assert a["end"] == b["start"] and a["stopped"] == b["began"]
    assert all(m["frames"] > 0 for m in stats["metas"])
    # The command line's --split-bytes, and the binary's --range, give the same.
    code, out, err = ray_cli(
        capsys, "diagnose", "--address", "local", "--json", "--split-bytes", str(split), str(plain)
    )
    assert code == 0, err
    assert out == want.stdout


def test_the_binary_reads_byte_ranges_too(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("TCPDX_RAY_STAGES", "binary")
    plain = plain_pcap("case001_reorder_behind/client.pcap.gz", tmp_path)
    want = tcpdx("diagnose", "--json", str(plain))
    stats: dict = {}
    split = plain.stat().st_size // 3 + 1
    out = distributed.diagnose(
        [str(plain)], json=True, partitions=3, stats=stats, split_bytes=split
    )
    assert out == want.stdout
    assert not stats["native"] and len(stats["metas"]) == 3


def test_only_uncompressed_pcap_files_are_split(tmp_path):
    gz = str(LAB / "case001_reorder_behind" / "client.pcap.gz")
    assert distributed.stage1_tasks([gz], 1000) == [(gz, None)]
    plain = str(plain_pcap("case001_reorder_behind/client.pcap.gz", tmp_path))
    size = Path(plain).stat().st_size
    # At the threshold: whole; a byte above: two ranges; 0: never split.
    assert distributed.stage1_tasks([plain], size) == [(plain, None)]
    assert distributed.stage1_tasks([plain], size - 1) == [
        (plain, (0, size - 1)),
        (plain, (size - 1, size)),
    ]
    assert distributed.stage1_tasks([plain], 0) == [(plain, None)]
    # The default: files up to 256 MB whole.
    assert distributed.stage1_tasks([plain], None) == [(plain, None)]


def test_export_of_byte_ranges_writes_the_tables_of_tcpdx_export(capsys, tmp_path):
    plain = plain_pcap("smb3_write_loss1pct/client.pcap.gz", tmp_path)
    want_dir, got_dir = tmp_path / "want", tmp_path / "got"
    r = tcpdx("export", str(plain), "-o", str(want_dir))
    assert r.returncode == 0, r.stderr
    split = str(plain.stat().st_size // 4 + 5)
    args = ["export", "--address", "local", "--flat", "--split-bytes", split, str(plain)]
    code, _, err = ray_cli(capsys, *args, "-o", str(got_dir))
    assert code == 0, err
    want = sorted(p.name for p in want_dir.iterdir())
    assert want and sorted(p.name for p in got_dir.iterdir()) == want
    for name in want:
        assert (got_dir / name).read_bytes() == (want_dir / name).read_bytes(), name
