#!/usr/bin/env bash
# Lab stage of CI: build the lab, install its Debian packages, run every scenario
# (short), verify each run, verify the committed fixtures, run the crate's tests
# (including the root-only end-to-end test) and print the relay benchmark.
# Needs root (network namespaces, tracefs, apt). About 4-5 minutes on 2 vCPUs.
#
#   lab/ci.sh                      # the CI stage
#   lab/ci.sh --update-fixtures    # also replace tests/data/lab/ with this run's output
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
MANIFEST=$ROOT/crates/tcpdx-lab/Cargo.toml
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target/lab}
if [ "$(id -u)" != 0 ]; then
  echo "lab/ci.sh must run as root" >&2
  exit 1
fi
t0=$(date +%s)
cargo build --release --manifest-path "$MANIFEST"
BIN=$CARGO_TARGET_DIR/release/tcpdx-lab
"$BIN" install
"$BIN" cleanup
OUT=${LAB_OUT:-$(mktemp -d /tmp/tcpdx-lab-ci.XXXXXX)}
trap '"$BIN" cleanup >/dev/null 2>&1 || true' EXIT
"$BIN" list
"$BIN" run all --short --verify --out "$OUT"
if [ "${1:-}" = "--update-fixtures" ]; then
  rm -rf "$ROOT/tests/data/lab"
  mkdir -p "$ROOT/tests/data/lab"
  cp -r "$OUT"/. "$ROOT/tests/data/lab/"
fi
"$BIN" verify "$ROOT"/tests/data/lab/*/
TCPDX_LAB_ROOT=1 cargo test --release --manifest-path "$MANIFEST"
"$BIN" bench-relay --secs 4 | tail -1
echo "lab stage OK in $(( $(date +%s) - t0 )) s (outputs in $OUT)"
