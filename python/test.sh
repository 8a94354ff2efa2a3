#!/usr/bin/env bash
# The Python package's checks from a fresh clone: a virtual environment ($TCPDX_VENV,
# default target/py-venv) with `pip install ./python` and the test dependencies, ruff on
# python/, clippy on the extension crate, then pytest python/tests.
#
# The extension is built unoptimised by default (the tests' captures are small); set
# TCPDX_PY_PROFILE=release for an optimised build (bench/python.sh does). The tests compare
# with the `tcpdx` command: $TCPDX_BIN, else built by cargo.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
venv=${TCPDX_VENV:-$root/target/py-venv}
profile=${TCPDX_PY_PROFILE:-dev}
python=${PYTHON:-python3}
# One target directory for the workspace and the extension: their dependencies are shared.
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$root/target}

if [ ! -x "$venv/bin/python" ]; then
    "$python" -m venv "$venv"
fi
py=$venv/bin/python
"$py" -m pip install -q --disable-pip-version-check \
    maturin pyarrow pytest pandas polars duckdb matplotlib tqdm ruff "ray[client]"

echo "python/test.sh: pip install ./python (profile $profile)"
MATURIN_PEP517_ARGS="--profile $profile" \
    "$py" -m pip install -q --disable-pip-version-check --force-reinstall --no-deps "$root/python"

echo "python/test.sh: ruff"
"$venv/bin/ruff" check "$root/python"
"$venv/bin/ruff" format --check "$root/python"

echo "python/test.sh: clippy (extension crate)"
PYO3_PYTHON=$py cargo clippy -q --manifest-path "$root/python/Cargo.toml" --all-targets -- -D warnings

echo "python/test.sh: pytest"
# From the repository root, not python/: there `import tcpdx` would find the source
# directory (without the built extension) instead of the installed package.
cd "$root"
"$venv/bin/pytest" python/tests -q -p no:cacheprovider
