"""tcpdx in a notebook, as a script: diagnose a capture, plot the time-sequence of its
worst connection, query storage transactions with DuckDB.

    python python/examples/diagnose_and_plot.py [--out timeseq.png]

Needs matplotlib and duckdb besides tcpdx (pip install matplotlib duckdb). Run from
anywhere: the captures are the repository's lab fixtures.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import duckdb
import matplotlib

matplotlib.use("Agg")  # a file, no window
import matplotlib.pyplot as plt  # noqa: E402

import tcpdx  # noqa: E402

LAB = Path(__file__).resolve().parents[2] / "tests" / "data" / "lab"
CAPTURE = LAB / "case000_rto_delack" / "client.pcap.gz"
STORAGE = LAB / "nfs3_write_loss1pct" / "client.pcap.gz"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("timeseq.png"), help="the plot (PNG)")
    args = ap.parse_args()

    # 1. Why is it slow? The findings, most costly first.
    d = tcpdx.diagnose(CAPTURE)
    print(d)
    for line in d.verdict:
        print(" ", line)
    worst = d.worst
    if worst is None:
        print("no finding: nothing to plot")
        return
    print(f"\nworst: {worst.kind} on tcp.stream {worst.stream}: {worst.cost.seconds:.3f} s")
    print(f"  Wireshark: {worst.wireshark_filter}")
    for e in worst.evidence[:4]:
        print(f"  frame {e.frame}: {e.role}")

    # 2. Its time-sequence graph from the segments table (one row per TCP segment).
    seg = tcpdx.segments(CAPTURE, stream=worst.stream).to_pandas()
    data = seg[seg["len"] > 0]
    sender = data["dir"].mode()[0]  # the direction that carried the data
    data = data[data["dir"] == sender]
    acks = seg[(seg["dir"] != sender) & ((seg["tcp_flags"] & 16) != 0)]
    retx = data[data["flags"].str.contains("retransmission")]
    fig, ax = plt.subplots(figsize=(10, 5))
    ax.plot(data["time"], data["seq"] + data["len"], ".", ms=1, label="data (end seq)")
    ax.step(acks["time"], acks["ack"], where="post", lw=0.8, label="ACK")
    ax.plot(retx["time"], retx["seq"], "rx", ms=4, label="retransmission")
    for ep in worst.episode_list:
        ax.axvspan(ep.start_s, ep.start_s + ep.duration_s, color="orange", alpha=0.25)
    ax.set_xlabel("seconds since the first frame")
    ax.set_ylabel("relative sequence number (bytes)")
    ax.set_title(f"tcp.stream {worst.stream}: {worst.kind} shaded ({worst.cost.seconds:.3f} s)")
    ax.legend(loc="upper left")
    fig.tight_layout()
    fig.savefig(args.out, dpi=120)
    print(f"\nwrote {args.out} ({len(data)} data segments, {len(retx)} retransmissions)")

    # 3. Storage: the NFS transactions, queried with SQL (DuckDB reads the Arrow table).
    transactions = tcpdx.transactions(STORAGE)  # noqa: F841 (DuckDB finds it by name)
    print("\nNFS operations, slowest first:")
    print(
        duckdb.sql(
            """
            SELECT op, count(*) AS n, round(avg(srt) * 1000, 2) AS mean_ms,
                   round(max(srt) * 1000, 2) AS max_ms, sum(length) AS bytes
            FROM transactions
            GROUP BY op ORDER BY max_ms DESC NULLS LAST
            """
        )
    )


if __name__ == "__main__":
    main()
