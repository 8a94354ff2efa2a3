#!/usr/bin/env bash
# Profile-guided build of tcpdx: the release binary, optimised with a profile of its own
# runs. On the benchmark captures it executes 11-20% fewer instructions than the plain
# release build (`flows` 19%, `events` 14%, `diagnose` 11%; bench/results.md), with the
# same output.
#
#   scripts/pgo-build.sh          # prints the binary's path: target/pgo/<host>/release/tcpdx
#
# Steps (about twice a release build): an instrumented build; training runs of every
# per-packet command (1 and 2 threads, plain, gzip and zstd input) on generated captures
# of the benchmark's kinds (bulk, many short connections, NFS storage mix) and on every
# capture under tests/data (the pathologies); the profiles merged with the toolchain's
# llvm-profdata (rustup component llvm-tools, added if missing); the optimised build.
# Last, each training run is repeated with the optimised binary and its output compared
# byte for byte with the instrumented one's: a difference stops the script (exit 1).
set -euo pipefail
cd "$(dirname "$0")/.."
target=$(realpath -m "${CARGO_TARGET_DIR:-target}")
host=$(rustc -vV | sed -n 's/^host: //p')
profdata=$(rustc --print sysroot)/lib/rustlib/$host/bin/llvm-profdata
if [ ! -x "$profdata" ]; then
  rustup component add llvm-tools >&2
fi
gen=$target/pgo-gen
use=$target/pgo
raw=$gen/profiles
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
rm -rf "$raw"
mkdir -p "$raw"

# --target: RUSTFLAGS then apply to tcpdx's code only, not to build scripts and proc macros
# (which would write profiles while building, or miss theirs when optimised).
echo "pgo: instrumented build ($gen)" >&2
RUSTFLAGS="-Cprofile-generate=$raw" cargo build --release -q --target "$host" --target-dir "$gen" \
  -p tcpdx-cli -p tcpdx-testkit --bins
train=$gen/$host/release

# Training captures: the benchmark's kinds, smaller (the profile needs the paths taken, not
# their length), and compressed copies for the reading threads.
n=${PGO_PACKETS:-200000}
"$train/tcpdx-synth" "$n" 64 20000 > "$work/bulk.pcap"
"$train/tcpdx-synth" "$n" 2000 40 > "$work/many.pcap"
"$train/tcpdx-synth" storage "$n" > "$work/storage.pcap"
gzip -c -1 "$work/bulk.pcap" > "$work/bulk.pcap.gz"
zstd -q -c -3 "$work/bulk.pcap" > "$work/bulk.pcap.zst"
captures=("$work"/bulk.pcap "$work"/many.pcap "$work"/storage.pcap "$work"/bulk.pcap.gz "$work"/bulk.pcap.zst)
while IFS= read -r f; do captures+=("$f"); done < <(find tests/data -name '*.pcap*' -not -path '*/malformed/*' | sort)

# runs BIN OUTDIR: every training run of BIN, its standard output and exit code kept as
# OUTDIR/<run number>, its standard error as OUTDIR/<run number>.err (without the profiling
# runtime's own warnings, which only the instrumented build prints).
runs() {
  local bin=$1 out=$2 i=0 f cmd threads
  mkdir -p "$out"
  for f in "${captures[@]}"; do
    for cmd in "flows" "events --format csv" "diagnose --json" "srt --json"; do
      for threads in 1 2; do
        i=$((i + 1))
        # shellcheck disable=SC2086 # $cmd is a command and its options
        "$bin" $cmd --threads "$threads" --no-progress "$f" > "$out/$i" 2> "$work/err" || echo "exit $?" >> "$out/$i"
        grep -v '^LLVM Profile Warning' "$work/err" > "$out/$i.err" || true
      done
    done
  done
  echo "$i"
}
echo "pgo: training runs on ${#captures[@]} captures" >&2
count=$(runs "$train/tcpdx" "$work/trained")

# Named by its checksum: cargo does not look into the file a flag names, so a new profile
# under the same name would leave the optimised build as it was.
"$profdata" merge -o "$work/merged.profdata" "$raw"
sum=$(sha256sum "$work/merged.profdata" | cut -c1-16)
mkdir -p "$use"
cp "$work/merged.profdata" "$use/tcpdx-$sum.profdata"
find "$use" -maxdepth 1 -name 'tcpdx-*.profdata' -not -name "tcpdx-$sum.profdata" -delete
echo "pgo: optimised build ($use)" >&2
RUSTFLAGS="-Cprofile-use=$use/tcpdx-$sum.profdata" cargo build --release -q --target "$host" \
  --target-dir "$use" -p tcpdx-cli
bin=$use/$host/release/tcpdx

runs "$bin" "$work/optimised" > /dev/null
if ! diff -rq "$work/trained" "$work/optimised" >&2; then
  echo "pgo: the optimised binary's output differs from the instrumented one's (above)" >&2
  exit 1
fi
echo "pgo: $count training runs, same output from both builds" >&2
echo "$bin"
