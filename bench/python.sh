#!/usr/bin/env bash
# The Python API's benchmark (bench/python_bench.py): tcpdx.segments() against tcpdx
# export, dpkt and pyshark on the 1M-packet bulk capture of bench/run.sh, and the peak RSS
# of segments_batches at 1M and $BENCH_RSS_PACKETS (default 20M) packets. Not a test.
#
#   bench/python.sh                 # venv in target/py-bench-venv ($TCPDX_BENCH_VENV)
#   BENCH_RSS_PACKETS=0 bench/python.sh   # without the big capture (it needs ~2.3 GB)
set -euo pipefail
cd "$(dirname "$0")/.."
target=${CARGO_TARGET_DIR:-target}
export CARGO_TARGET_DIR=$target
cargo build --release -q -p tcpdx-cli -p tcpdx-testkit --bins
venv=${TCPDX_BENCH_VENV:-$target/py-bench-venv}
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/python" -m pip install -q --disable-pip-version-check maturin pyarrow dpkt pyshark
MATURIN_PEP517_ARGS="--profile release" \
    "$venv/bin/python" -m pip install -q --disable-pip-version-check --force-reinstall --no-deps ./python
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$target/release/tcpdx-synth" "${BENCH_PACKETS:-1000000}" 64 20000 > "$dir/bulk1500.pcap"
"$venv/bin/python" bench/python_bench.py --capture "$dir/bulk1500.pcap" \
    --tcpdx "$target/release/tcpdx" --synth "$target/release/tcpdx-synth" \
    --big-packets "${BENCH_RSS_PACKETS:-20000000}" --loops "${BENCH_LOOPS:-3}"
