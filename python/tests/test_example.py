"""The example script runs and writes its plot."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "diagnose_and_plot.py"


def test_example_diagnoses_plots_and_queries(tmp_path):
    out = tmp_path / "timeseq.png"
    r = subprocess.run(
        [sys.executable, str(EXAMPLE), "--out", str(out)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "worst: rto-stall on tcp.stream 0" in r.stdout
    assert "NFS operations" in r.stdout and "WRITE" in r.stdout
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert out.stat().st_size > 10_000, "an empty plot"
