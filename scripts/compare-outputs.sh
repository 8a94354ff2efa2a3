#!/usr/bin/env bash
# Byte-for-byte comparison of two tcpdx binaries' outputs (stdout, stderr, exit code) for
# `diagnose` (text and `--json`), `srt --json`, `srt --transactions`, `flows --json` and
# `events --format csv`, each with `--threads 1` and `--threads 2`, on every TCP capture of the corpus (../shared/corpus, MANIFEST.tsv), every
# capture under tests/data, and any capture given after the binaries:
#
#   scripts/compare-outputs.sh OLD_TCPDX NEW_TCPDX [CAPTURE...]
#
# COMPARE_COMMANDS replaces the commands compared (separated by ';'), e.g. for a change to
# the per-packet path: COMPARE_COMMANDS='events --format csv;flows --json;diagnose --json'.
#
# COMPARE_SHARD=I/N compares only every N-th capture from the I-th (0-based), so that N
# shards run side by side (the runs and differences of each are printed; add them up).
#
# A performance change must not change any output: run it with the binary before and after.
# The old binary's outputs are cached under ${COMPARE_CACHE:-/tmp/tcpdx-compare}, keyed by
# its checksum, so a second check only runs the new one. Prints the runs compared and every
# difference; exits 1 if there was one.
set -euo pipefail
[ $# -ge 2 ] || {
  echo "usage: $0 OLD_TCPDX NEW_TCPDX [CAPTURE...]" >&2
  exit 2
}
old=$(realpath "$1")
new=$(realpath "$2")
shift 2
cd "$(dirname "$0")/.."
corpus=../shared/corpus
cache=${COMPARE_CACHE:-/tmp/tcpdx-compare}/$(sha256sum "$old" | cut -c1-16)
mkdir -p "$cache"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

captures=()
# Column 11 of the manifest is the number of TCP streams, column 5 the path.
while IFS= read -r p; do captures+=("$corpus/$p"); done < <(awk -F'\t' 'NR > 1 && $11 > 0 { print $5 }' "$corpus/MANIFEST.tsv")
while IFS= read -r p; do captures+=("$p"); done < <(find tests/data -type f \( -name '*.pcap' -o -name '*.pcapng' -o -name '*.pcap.gz' -o -name '*.pcapng.gz' -o -name '*.pcap.zst' \) | sort)
captures+=("$@")
if [ -n "${COMPARE_SHARD:-}" ]; then
  shard=${COMPARE_SHARD%/*} shards=${COMPARE_SHARD#*/}
  mine=()
  for i in "${!captures[@]}"; do
    [ $((i % shards)) = "$shard" ] && mine+=("${captures[$i]}")
  done
  captures=("${mine[@]}")
fi

# run BIN OUT CAPTURE ARGS...: stdout, stderr and exit code of one run, in one file.
run() {
  local bin=$1 out=$2 cap=$3 rc=0
  shift 3
  "$bin" "$@" "$cap" > "$out.stdout" 2> "$out.stderr" || rc=$?
  { cat "$out.stdout"; echo "--- stderr"; cat "$out.stderr"; echo "--- exit $rc"; } > "$out"
  rm -f "$out.stdout" "$out.stderr"
}

IFS=';' read -ra commands <<< "${COMPARE_COMMANDS:-diagnose --json;diagnose;srt --json;srt --transactions;flows --json;events --format csv}"
runs=0 diffs=0
for cap in "${captures[@]}"; do
  key=$(echo "$(realpath "$cap") $(stat -c '%s %Y' "$cap")" | sha256sum | cut -c1-16)
  for threads in 1 2; do
    for args in "${commands[@]}"; do
      # shellcheck disable=SC2086 # the arguments are split on purpose
      set -- $args --threads "$threads" --no-progress
      ref=$cache/$key.$(echo "$*" | tr ' -' '_.')
      [ -f "$ref" ] || run "$old" "$ref" "$cap" "$@"
      run "$new" "$tmp/out" "$cap" "$@"
      runs=$((runs + 1))
      if ! cmp -s "$ref" "$tmp/out"; then
        diffs=$((diffs + 1))
        echo "DIFFERENT: tcpdx $* $cap"
        diff "$ref" "$tmp/out" | head -5
      fi
    done
  done
done
echo "compared $runs runs on ${#captures[@]} captures: $diffs different"
[ "$diffs" = 0 ]
