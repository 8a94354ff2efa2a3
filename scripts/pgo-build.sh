#!/usr/bin/env bash
# Profile-guided build of tcpdx: the release binary, optimised with a profile of its own
# runs. On the benchmark captures it executes 10-20% fewer instructions per packet than the
# plain release build (`flows` 18-20%, `events` 15-16%, `diagnose` and `srt` 10-12%;
# bench/results.md), with the same output.
#
#   scripts/pgo-build.sh          # prints the binary's path: target/pgo/<host>/release/tcpdx
#   PGO_PACKETS=N scripts/pgo-build.sh   # training captures of N packets (default 200000)
#
# Steps (about twice a release build): an instrumented build; training runs of every
# per-packet command in each output format (1 and 2 threads; plain, gzip and zstd input) on
# generated captures of the benchmark's kinds (bulk, many short connections, NFS storage
# mix) and on every capture under tests/data (the pathologies), and of report, export and
# annotate on a few small ones; the profiles merged with the toolchain's
# llvm-profdata (rustup component llvm-tools, added if missing); the optimised build.
# Last, each training run is repeated with the optimised binary and its output compared
# byte for byte with the instrumented one's: a difference stops the script (exit 1).
set -euo pipefail
case "${1:-}" in
"") ;;
-h | --help)
  sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
  exit 0
  ;;
*)
  echo "usage: $0 (no arguments; --help explains)" >&2
  exit 2
  ;;
esac
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
# their length), and compressed copies for the reading threads. The generator, built
# instrumented too, adds its own runs to the profile; leaving them out (LLVM_PROFILE_FILE
# elsewhere) made `flows` execute 13% more instructions (821 -> 929 a packet on bulk1500):
# its counts in the code it shares with tcpdx (tcpdx-wire) tip inlining the right way.
n=${PGO_PACKETS:-200000}
"$train/tcpdx-synth" "$n" 64 20000 > "$work/bulk.pcap"
"$train/tcpdx-synth" "$n" 2000 40 > "$work/many.pcap"
"$train/tcpdx-synth" storage "$n" > "$work/storage.pcap"
gzip -c -1 "$work/bulk.pcap" > "$work/bulk.pcap.gz"
zstd -q -c -3 "$work/bulk.pcap" > "$work/bulk.pcap.zst"
captures=("$work"/bulk.pcap "$work"/many.pcap "$work"/storage.pcap "$work"/bulk.pcap.gz "$work"/bulk.pcap.zst)
while IFS= read -r f; do captures+=("$f"); done < <(find tests/data -name '*.pcap*' -not -path '*/malformed/*' | sort)
# report, export and annotate: their own code needs covering, not weight (on the large
# captures their share of the profile took a tenth off the gain of `flows`, whose statistics
# they skip), so small captures: the two shipped ones and the NFS, SMB and iSCSI lab ones.
writers=(tests/data/fast-retransmission.pcapng tests/data/zero-window.pcapng
  tests/data/lab/nfs3_write_loss1pct/client.pcap.gz tests/data/lab/smb3_read_clean/client.pcap.gz
  tests/data/lab/iscsi_read_slow_server/client.pcap.gz)

# one OUTDIR BIN ARGS...: one run of BIN ARGS; its standard output, then whatever it wrote
# to $work/written (a file, or a directory of files), and its exit code kept as
# OUTDIR/<number>; its standard error as OUTDIR/<number>.err, without the profiling runtime's
# own warnings (only the instrumented build prints them).
one() {
  local out=$1
  shift
  i=$((i + 1))
  rm -rf "$work/written"
  "$@" > "$out/$i" 2> "$work/err" || echo "exit $?" >> "$out/$i"
  if [ -d "$work/written" ]; then
    cat "$work/written"/* >> "$out/$i"
  elif [ -f "$work/written" ]; then
    cat "$work/written" >> "$out/$i"
  fi
  grep -v '^LLVM Profile Warning' "$work/err" > "$out/$i.err" || true
}
# runs BIN OUTDIR: every training run of BIN into OUTDIR; prints their number. Every
# command, each output format, one and two threads.
runs() {
  local bin=$1 out=$2 f cmd threads
  i=0
  mkdir -p "$out"
  for f in "${captures[@]}"; do
    for cmd in "flows" "flows --json" "events --format csv" "events --format jsonl --flagged" \
      "diagnose" "diagnose --json" "srt --json" "srt --transactions"; do
      for threads in 1 2; do
        # shellcheck disable=SC2086 # $cmd is a command and its options
        one "$out" "$bin" $cmd --threads "$threads" --no-progress "$f"
      done
    done
  done
  for f in "${writers[@]}"; do
    one "$out" "$bin" report --no-progress -o "$work/written" "$f"
    one "$out" "$bin" export --no-progress -o "$work/written" "$f"
    one "$out" "$bin" annotate --no-progress -o "$work/written" "$f"
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
