#!/usr/bin/env bash
# Builds the seed corpora of every fuzz target into fuzz/corpus/TARGET/ (not committed:
# fuzz/.gitignore) from the repository's tests/data and the shared public corpus.
# Usage: fuzz/seeds.sh [CAPTURE_OR_DIR...]   (default: tests/data and ../shared/corpus/captures)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$here")"
if [ $# -eq 0 ]; then
    set -- "$root/tests/data"
    for c in "$root/../shared/corpus/captures" /work/shared/corpus/captures; do
        if [ -d "$c" ]; then set -- "$@" "$c"; break; fi
    done
fi
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-/tmp/target-tcpdx-fuzz}"
cd "$here"
nice -n 10 cargo +nightly run --quiet --release --features tools --bin make-seeds -- "$here/corpus" "$@"
# The few committed seeds (fuzz/seeds/TARGET/) are part of every corpus.
shopt -s nullglob
for d in "$here"/seeds/*/; do
    t="$(basename "$d")"
    mkdir -p "$here/corpus/$t"
    cp -n "$d"* "$here/corpus/$t/" 2>/dev/null || true
done
for d in "$here"/corpus/*/; do
    echo "$(basename "$d"): $(find "$d" -type f | wc -l) seeds"
done
