#!/usr/bin/env bash
# Every test of the project, as CI runs them: the Rust workspace (unit, end-to-end on the lab
# fixtures and the corpus, differential against tshark), then the Python package
# (python/test.sh: a virtual environment, `pip install ./python`, ruff, pytest, the Ray
# tests on a local cluster).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo test --workspace
python/test.sh
