#!/usr/bin/env bash
# Peak memory of `tcpdx flows` on a synthetic capture of N packets streamed through stdin
# (nothing is written to disk): scripts/measure-rss.sh [PACKETS] [CONCURRENT] [PER_CONNECTION]
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-20000000}
cargo build --release -q -p tcpdx-cli -p tcpdx-testkit
target=${CARGO_TARGET_DIR:-target}
/usr/bin/time -v "$target/release/tcpdx" flows - < <("$target/release/tcpdx-synth" "$n" "${2:-64}" "${3:-20000}") \
  2> >(grep -E "Maximum resident|Elapsed|User time" >&2) | tail -n +2 | wc -l | sed 's/^/flow rows: /'
