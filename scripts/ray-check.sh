#!/usr/bin/env bash
# The Ray example against `cutctx batch`: examples/ray_compact.py on a local Ray cluster over the
# 200 tau-bench runs, every output line byte for byte what the binary writes.
#
#   scripts/ray-check.sh target/release/cutctx
#
# Installs ray[data] (with pyarrow and pandas) and pytest into a throwaway venv of Python 3.12
# (~/.pyenv/versions/3.12.1, else python3.12 on PATH), builds and installs the package's wheel
# there, and runs crates/cutctx-python/tests/test_ray_example.py and test_batch.py. Prints
# "SKIP: ..." and exits 0 when ../shared, Python 3.12 or a ray wheel is missing.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
binary=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
if [[ ! -f "$root/../shared/realworld/tau-bench/gpt-4o-airline.json" ]]; then
    echo "SKIP: ../shared/realworld is absent"
    exit 0
fi
if [[ -x "$HOME/.pyenv/versions/3.12.1/bin/python" ]]; then
    py="$HOME/.pyenv/versions/3.12.1/bin/python"
elif command -v python3.12 >/dev/null 2>&1; then
    py=$(command -v python3.12)
else
    echo "SKIP: no Python 3.12 (~/.pyenv/versions/3.12.1 or python3.12 on PATH)"
    exit 0
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/ray-check.XXXXXX")
trap 'rm -rf "$work"' EXIT
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1
"$py" -m venv "$work/venv"
if ! "$work/venv/bin/pip" install --quiet "ray[data]" pytest >"$work/pip.log" 2>&1; then
    echo "SKIP: ray could not be installed: $(tail -n 1 "$work/pip.log")"
    exit 0
fi
"$work/venv/bin/pip" wheel --quiet --no-deps -w "$work/wheels" "$root/crates/cutctx-python"
"$work/venv/bin/pip" install --quiet "$work"/wheels/cutctx_rs-*.whl
echo "== the Ray example against cutctx batch ($("$work/venv/bin/python" -c 'import ray; print("ray", ray.__version__)'))"
(cd "$work" && CUTCTX_BIN="$binary" RAY_ADDRESS= "$work/venv/bin/python" -m pytest -q \
    -p no:cacheprovider -rs "$root/crates/cutctx-python/tests/test_ray_example.py" \
    "$root/crates/cutctx-python/tests/test_batch.py")
echo "ray check passed"
