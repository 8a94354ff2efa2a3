#!/usr/bin/env python3
"""Scores `tcpdx diagnose --vantage client server` on lab cases against their truth.

For each case directory (client.pcap.gz, server.pcap.gz, truth.json): the relay's injected
drops located between the two captures (by direction and raw sequence number), losses
reported on cases without any injected loss (invented), losses placed elsewhere, and the
clock offset's error (both captures use the host's one clock: the truth is 0).

    python3 lab/vantage_sweep.py --tcpdx target/debug/tcpdx /work/sweep-runs/report/seed01*/
"""

import argparse
import collections
import concurrent.futures
import json
import pathlib
import subprocess
import sys


def score(tcpdx: str, case: pathlib.Path) -> dict:
    truth = json.loads((case / "truth.json").read_text())
    params = truth["params"]
    out = subprocess.run(
        [
            tcpdx,
            "diagnose",
            "--no-progress",
            "--json",
            "--vantage",
            str(case / "client.pcap.gz"),
            str(case / "server.pcap.gz"),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        return {"case": case.name, "error": out.stderr.strip()[:300]}
    v = json.loads(out.stdout)["vantage"]
    want = collections.Counter()
    for d in truth["injected"]["drops"]:
        direction = "a_to_b" if d["dir"] == "c2s" else "b_to_a"
        want[(direction, d["seq"])] += 1
    injected = sum(want.values())
    right = 0
    for loss in v["losses"]:
        key = (loss["direction"], loss["seq_raw"])
        if loss["location"] == "between" and want[key] > 0:
            want[key] -= 1
            right += 1
    places = collections.Counter(loss["location"] for loss in v["losses"])
    nft = params.get("nft_loss")
    retransmitted = sum(len(c.get("retransmissions", [])) for c in truth["connections"])
    # Nothing injected and the kernels retransmitted nothing: any loss is invented.
    clean = injected == 0 and not nft and not params.get("tbf") and retransmitted == 0
    return {
        "case": case.name,
        "capture": params["capture"],
        "nft_hook": nft["hook"] if nft else None,
        "asymmetric": params["relay"]["delay_c2s_ms"] is not None
        or params["relay"]["delay_s2c_ms"] is not None,
        "tbf": bool(params.get("tbf")),
        "injected": injected,
        "located_right": right,
        "losses": len(v["losses"]),
        "places": dict(places),
        "invented": len(v["losses"]) if clean else 0,
        "clean": clean,
        "kernel_retransmissions": retransmitted,
        "capture_drops": len(v["capture_drops"]),
        "offset_us": v["offset_s"] * 1e6,
        "drift_ppm": v["drift_ppm"],
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--tcpdx", required=True)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--json", help="write the per-case rows here")
    ap.add_argument("cases", nargs="+", type=pathlib.Path)
    a = ap.parse_args()
    cases = [c for c in a.cases if (c / "truth.json").is_file()]
    with concurrent.futures.ThreadPoolExecutor(a.jobs) as pool:
        rows = list(pool.map(lambda c: score(a.tcpdx, c), cases))
    if a.json:
        pathlib.Path(a.json).write_text(json.dumps(rows, indent=1))
    ok = [r for r in rows if "error" not in r]
    for r in rows:
        if "error" in r:
            print(f"{r['case']}: error {r['error']}")
        elif r["located_right"] < r["injected"]:
            print(
                f"{r['case']}: {r['injected'] - r['located_right']} relay drops not located "
                f"between (losses {r['places']}, capture drops {r['capture_drops']})"
            )
    injected = sum(r["injected"] for r in ok)
    right = sum(r["located_right"] for r in ok)
    clean = [r for r in ok if r["clean"]]
    offsets = sorted(abs(r["offset_us"]) for r in ok)
    sym = sorted(
        abs(r["offset_us"]) for r in ok if not r["asymmetric"] and not r["tbf"]
    )
    print(f"cases {len(rows)} (errors {len(rows) - len(ok)})")
    if injected:
        print(
            f"relay drops located between: {right}/{injected} = {100 * right / injected:.2f}%"
        )
    print(
        f"clean cases {len(clean)}: invented losses {sum(r['invented'] for r in clean)} "
        f"in {sum(1 for r in clean if r['invented'])} cases"
    )
    other = [
        r for r in ok if not r["clean"] and r["injected"] == 0 and not r["nft_hook"]
    ]
    print(
        f"no injected drop, but tbf or kernel retransmissions ({len(other)} cases): "
        f"{sum(r['losses'] for r in other)} losses for "
        f"{sum(r['kernel_retransmissions'] for r in other)} kernel retransmissions"
    )
    by_hook = collections.defaultdict(collections.Counter)
    for r in ok:
        if r["nft_hook"]:
            by_hook[r["nft_hook"]].update(r["places"])
    for hook, places in sorted(by_hook.items()):
        print(f"nftables drops at {hook}: losses located {dict(places)}")

    def pct(xs: list, q: float) -> float:
        return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")

    for name, xs in [("all", offsets), ("symmetric, no tbf", sym)]:
        within = sum(1 for x in xs if x < 100)
        print(
            f"offset error ({name}, {len(xs)} cases): median {pct(xs, 0.5):.1f} us, "
            f"p95 {pct(xs, 0.95):.1f} us, max {max(xs, default=float('nan')):.1f} us, "
            f"{within} within 100 us"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
