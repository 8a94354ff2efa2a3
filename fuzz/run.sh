#!/usr/bin/env bash
# Runs one fuzz target (or all of them, one after the other) for a wall-clock time, at low
# CPU priority, and prints one summary line per target: executions, coverage, crashes.
#
#   fuzz/run.sh TARGET SECONDS      e.g. fuzz/run.sh capture 1800
#   fuzz/run.sh all SECONDS         every target for SECONDS each (CI smoke: fuzz/run.sh all 30)
#
# Needs cargo-fuzz (`cargo install cargo-fuzz`) and a nightly toolchain. The corpus lives in
# fuzz/corpus/TARGET (built by fuzz/seeds.sh if missing), crashes in fuzz/artifacts/TARGET,
# the libFuzzer log in fuzz/logs/TARGET.log. Exit status: 1 if a target found a crash.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-/tmp/target-tcpdx-fuzz}"
TARGETS=(capture wire analyzer storage)

# Longest input per target: a capture prefix, one frame, a few hundred segments.
max_len() {
    case "$1" in
        capture) echo 65536 ;;
        wire) echo 4096 ;;
        storage) echo 65536 ;;
        *) echo 16384 ;;
    esac
}

run_one() {
    local target="$1" secs="$2"
    mkdir -p "corpus/$target" "artifacts/$target" logs
    if [ -z "$(ls -A "corpus/$target")" ]; then ./seeds.sh >/dev/null; fi
    local log="logs/$target.log"
    local start=$SECONDS status=0
    # -a: debug assertions, so arithmetic overflow is a crash too. No sanitizer: the code is
    # safe Rust (forbid(unsafe_code)), and ASan would halve the executions.
    nice -n 19 cargo +nightly fuzz run -a --sanitizer none "$target" "corpus/$target" -- \
        -max_total_time="$secs" -max_len="$(max_len "$target")" -timeout=10 \
        -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="artifacts/$target/" \
        >"$log" 2>&1 || status=$?
    local execs cov ft crashes
    execs="$(grep -a -o 'stat::number_of_executed_units: *[0-9]*' "$log" | tail -1 | grep -o '[0-9]*$' || echo '?')"
    # Coverage from libFuzzer's closing DONE line (else its last status line).
    local last
    last="$(tr '\r' '\n' <"$log" | grep -a -E '^#[0-9]+.*cov: ' | grep -a DONE | tail -1)"
    [ -n "$last" ] || last="$(tr '\r' '\n' <"$log" | grep -a -E '^#[0-9]+.*cov: ' | tail -1)"
    cov="$(grep -o 'cov: [0-9]*' <<<"$last" | grep -o '[0-9]*' || echo '?')"
    ft="$(grep -o 'ft: [0-9]*' <<<"$last" | grep -o '[0-9]*' || echo '?')"
    crashes="$(find "artifacts/$target" -type f | wc -l)"
    echo "$target: ${execs} execs in $((SECONDS - start)) s, cov ${cov}, features ${ft}, corpus $(ls "corpus/$target" | wc -l), artifacts ${crashes}, exit ${status}"
    return "$status"
}

if [ $# -ne 2 ]; then
    echo "usage: $0 TARGET|all SECONDS (targets: ${TARGETS[*]})" >&2
    exit 2
fi
if [ "$1" = all ]; then
    rc=0
    for t in "${TARGETS[@]}"; do run_one "$t" "$2" || rc=1; done
    exit "$rc"
fi
run_one "$1" "$2"
