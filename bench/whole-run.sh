#!/usr/bin/env bash
# Whole-run benchmark: one generated capture, every tool on the same file in the same run,
# reported as packets/s and as ratios (this machine is shared and noisy: compare ratios).
# Usage: bench/whole-run.sh [PACKETS] [CONCURRENT] [PER_CONNECTION]   (default 1,000,000)
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-1000000}
target=${CARGO_TARGET_DIR:-target}
cargo build --release -q -p tcpdx-cli -p tcpdx-testkit --example capdump -p tcpdx-capture
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cap="$dir/bulk.pcap"
"$target/release/tcpdx-synth" "$n" "${2:-64}" "${3:-20000}" > "$cap"
size=$(stat -c %s "$cap")
echo "capture: $n packets, $((size / 1000000)) MB (bulk 1500-byte frames, headers only, snaplen 96)"

secs() { local s e; s=$(date +%s.%N); "$@" > /dev/null 2>&1; e=$(date +%s.%N); echo "$e - $s" | bc -l; }
row() { printf "%-34s %8.3f s %12.0f pkt/s %8.2f MB/s\n" "$1" "$2" "$(echo "$n / $2" | bc -l)" "$(echo "$size / $2 / 1000000" | bc -l)"; }

t_walk=$(secs "$target/release/examples/capdump" --count "$cap"); row "record walk (capdump --count)" "$t_walk"
t_events=$(secs "$target/release/tcpdx" events --format csv "$cap"); row "tcpdx events --format csv" "$t_events"
t_flows=$(secs "$target/release/tcpdx" flows "$cap"); row "tcpdx flows" "$t_flows"
if command -v tshark > /dev/null; then
  t_tshark=$(secs tshark -r "$cap" -q -z expert); row "tshark -q -z expert" "$t_tshark"
  printf "ratios: events is %.1fx tshark, %.2fx the record walk; flows is %.1fx tshark\n" \
    "$(echo "$t_tshark / $t_events" | bc -l)" "$(echo "$t_walk / $t_events" | bc -l)" "$(echo "$t_tshark / $t_flows" | bc -l)"
fi
