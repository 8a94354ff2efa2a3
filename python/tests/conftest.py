"""Shared fixtures: the repository's captures and the ``tcpdx`` command to compare with.

The command is ``$TCPDX_BIN`` when set, else built with cargo (``cargo build -p
tcpdx-cli``). The corpus is ``../shared/corpus`` beside the repository (CI has it).
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
from functools import lru_cache
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
LAB = REPO / "tests" / "data" / "lab"
CORPUS = REPO.parent / "shared" / "corpus"

#: Every lab fixture (client, server and router captures of each case).
LAB_CAPTURES = sorted(LAB.glob("*/*.pcap.gz"))


def corpus_sample(n_plain: int = 6, n_storage: int = 4) -> list[Path]:
    """A fixed sample of the corpus's TCP captures under 3 MB: evenly spread over the
    manifest, and over those with storage traffic (NFS, SMB2, iSCSI)."""
    manifest = CORPUS / "MANIFEST.tsv"
    if not manifest.is_file():
        raise RuntimeError(
            f"the capture corpus is missing: {manifest} (the tests need ../shared/corpus "
            "beside the repository)"
        )
    with manifest.open() as f:
        rows = [
            r
            for r in csv.DictReader(f, delimiter="\t")
            if r["tcp_streams"]
            and int(r["tcp_streams"]) > 0
            and int(r["bytes"]) < 3_000_000
            and "unreadable" not in r["format"]
        ]
    storage = [r for r in rows if any(p in r["protocols"] for p in ("nfs", "smb2", "iscsi"))]
    plain = [r for r in rows if r not in storage]

    def spread(rs: list[dict[str, str]], n: int) -> list[dict[str, str]]:
        step = max(1, len(rs) // n)
        return rs[::step][:n]

    picked = spread(plain, n_plain) + spread(storage, n_storage)
    return [CORPUS / r["local_path"] for r in picked]


@lru_cache(maxsize=1)
def tcpdx_bin() -> str:
    """The ``tcpdx`` command: ``$TCPDX_BIN``, else built by cargo."""
    env = os.environ.get("TCPDX_BIN")
    if env:
        return env
    out = subprocess.run(
        ["cargo", "build", "-q", "-p", "tcpdx-cli", "--message-format=json"],
        cwd=REPO,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    for line in out.splitlines():
        msg = json.loads(line)
        if msg.get("reason") == "compiler-artifact" and msg["target"]["name"] == "tcpdx":
            if msg.get("executable"):
                return msg["executable"]
    raise RuntimeError("cargo built no tcpdx executable")


def cli(*args: object, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Runs the command; by default it must succeed."""
    r = subprocess.run([tcpdx_bin(), *map(str, args)], capture_output=True, text=True, check=False)
    if check and r.returncode != 0:
        raise AssertionError(f"tcpdx {args} exited {r.returncode}: {r.stderr}")
    return r


def cli_json(*args: object) -> dict:
    return json.loads(cli(*args).stdout)


def cli_export(path: Path, out: Path, *args: object) -> Path:
    """``tcpdx export`` of ``path`` into ``out``; returns ``out``."""
    cli("export", path, "-o", out, *args)
    return out


@pytest.fixture(scope="session")
def exported(tmp_path_factory: pytest.TempPathFactory):
    """``tcpdx export`` of a capture, once per capture in the session."""
    done: dict[Path, Path] = {}

    def get(path: Path) -> Path:
        if path not in done:
            out = tmp_path_factory.mktemp("export")
            done[path] = cli_export(path, out)
        return done[path]

    return get


def short_id(p: Path) -> str:
    return f"{p.parent.name}/{p.name}"
