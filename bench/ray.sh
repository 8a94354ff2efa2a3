#!/usr/bin/env bash
# The distributed run (tcpdx.distributed / tcpdx-ray) against the single process, on one
# capture set: PACKETS frames (default 20M) of 2,000 concurrent bulk connections (headers
# only, snaplen 96, as bench/run.sh's "many"), cut into FILES consecutive files (default 10,
# a ring buffer). Prints a Markdown table: wall and CPU seconds of
#   - tcpdx diagnose on the whole capture, 1 thread and 2 threads (the reference);
#   - stage 1 (tcpdx shard, each file in turn), stage 2 + merge (tcpdx diagnose-shards),
#     and stage 2 one process per partition (tcpdx diagnose-partition) then the merge
#     (tcpdx merge-partials);
#   - tcpdx-ray diagnose --address local (Ray in-process, 2 CPUs), end to end;
# CPU-seconds per million packets per stage, and the bytes shuffled per packet (shards),
# of the timelines and of the partials. Checks every output equal to the single run's. Not a test.
#
#   bench/ray.sh                          # 20M packets, 10 files, 2 partitions
#   BENCH_PACKETS=2000000 bench/ray.sh    # smaller
#   BENCH_PYTHON=target/py-venv/bin/python  # a Python with tcpdx and ray installed (python/test.sh makes one)
set -euo pipefail
cd "$(dirname "$0")/.."
n=${BENCH_PACKETS:-20000000}
files=${BENCH_FILES:-10}
parts=${BENCH_PARTITIONS:-2}
py=${BENCH_PYTHON:-target/py-venv/bin/python}
target=${CARGO_TARGET_DIR:-target}
cargo build --release -q -p tcpdx-cli -p tcpdx-testkit --bins
bin=$target/release
dir=$(mktemp -d "${BENCH_DIR:-/tmp}/tcpdx-ray-bench.XXXXXX")
trap 'rm -rf "$dir"' EXIT

"$bin/tcpdx-synth" "$n" 2000 400 > "$dir/whole.pcap"
editcap -c $(((n + files - 1) / files)) "$dir/whole.pcap" "$dir/ring.pcap"
mapfile -t ring < <(ls "$dir"/ring_*.pcap)

# timed OUT CMD...: runs CMD with stdout to OUT; sets $wall and $cpu (user+sys seconds).
timed() {
  local out=$1
  shift
  /usr/bin/time -f "%e %U %S" -o "$dir/time" "$@" > "$out"
  read -r wall u s < "$dir/time"
  cpu=$(echo "$u + $s" | bc -l)
}
rows=()
row() { rows+=("| $1 | $2 | $3 | $(echo "scale=2; $3 * 1000000 / $n" | bc -l) |"); }

timed "$dir/one.json" "$bin/tcpdx" diagnose --json --threads 1 "$dir/whole.pcap"
row "tcpdx diagnose, 1 thread" "$wall" "$cpu"
timed "$dir/two.json" "$bin/tcpdx" diagnose --json --threads 2 "$dir/whole.pcap"
row "tcpdx diagnose, 2 threads" "$wall" "$cpu"
cmp -s "$dir/one.json" "$dir/two.json" || { echo "2 threads differ from 1" >&2; exit 1; }

# Stage 1 then stage 2 as processes, one after the other (what the Ray tasks run).
shards=$dir/shards
s1_wall=0 s1_cpu=0
for i in "${!ring[@]}"; do
  timed /dev/null "$bin/tcpdx" shard "${ring[$i]}" --out "$shards" --index "$i" --partitions "$parts"
  s1_wall=$(echo "$s1_wall + $wall" | bc -l)
  s1_cpu=$(echo "$s1_cpu + $cpu" | bc -l)
done
row "stage 1: tcpdx shard, $files files one after the other" "$s1_wall" "$s1_cpu"
timed "$dir/staged.json" "$bin/tcpdx" diagnose-shards --json "$shards"
row "stage 2 + merge: tcpdx diagnose-shards, $parts partitions" "$wall" "$cpu"
cmp -s "$dir/one.json" "$dir/staged.json" || { echo "the staged run differs" >&2; exit 1; }
# Stage 2 one process per partition (what each Ray task runs), then the merge.
s2_wall=0 s2_cpu=0 partials=()
for ((p = 0; p < parts; p++)); do
  timed /dev/null "$bin/tcpdx" diagnose-partition "$shards" "$p" -o "$dir/p$p.partial"
  s2_wall=$(echo "$s2_wall + $wall" | bc -l)
  s2_cpu=$(echo "$s2_cpu + $cpu" | bc -l)
  partials+=("$dir/p$p.partial")
done
row "stage 2: tcpdx diagnose-partition, $parts processes one after the other" "$s2_wall" "$s2_cpu"
timed "$dir/merged.json" "$bin/tcpdx" merge-partials "$shards" "${partials[@]}" --json
row "merge: tcpdx merge-partials" "$wall" "$cpu"
cmp -s "$dir/one.json" "$dir/merged.json" || { echo "the merged partials differ" >&2; exit 1; }
partial_bytes=$(cat "${partials[@]}" | wc -c)
shard_bytes=$(cat "$shards"/*.p*.shard | wc -c)
timeline_bytes=$(cat "$shards"/*.timeline | wc -c)
capture_bytes=$(stat -c %s "$dir/whole.pcap")

# Ray, in-process local cluster of 2 CPUs: stage 1 as 10 tasks, stage 2 as one task per
# partition, the merge as one; the stages
# run by the release binary (a package installed by `maturin develop` is a debug build).
export TCPDX_BIN=$bin/tcpdx TCPDX_RAY_STAGES=${TCPDX_RAY_STAGES:-binary}
timed "$dir/ray.json" "$py" -m tcpdx.distributed diagnose \
  --address local --json --partitions "$parts" --shard-dir "$dir/ray-shards" "${ring[@]}"
row "tcpdx-ray diagnose --address local (2 CPUs), end to end*" "$wall" "$cpu"
cmp -s "$dir/one.json" "$dir/ray.json" || { echo "the Ray run differs" >&2; exit 1; }

echo "$n packets in $files files ($((capture_bytes / 1000000)) MB), $parts partitions, $(nproc) cores"
echo
echo "| run | wall s | CPU s | CPU s per M packets |"
echo "| --- | ---: | ---: | ---: |"
printf '%s\n' "${rows[@]}"
echo
echo "\* CPU of the driver process only (the Ray workers' subprocesses are not its children)."
echo
echo "shuffled: $(echo "scale=1; $shard_bytes / $n" | bc -l) bytes per packet in the shards" \
  "($((shard_bytes / 1000000)) MB; the capture: $(echo "scale=1; $capture_bytes / $n" | bc -l) bytes per packet)," \
  "timelines $(echo "scale=1; $timeline_bytes / $n" | bc -l) bytes per packet (read once, by stage 2)," \
  "partials $(echo "scale=2; $partial_bytes / $n" | bc -l) bytes per packet ($partial_bytes bytes, to the merge)"
echo "every output equal to tcpdx diagnose --json --threads 1 on the whole capture"
