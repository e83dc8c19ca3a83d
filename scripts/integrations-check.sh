#!/usr/bin/env bash
# The framework adapters (cutctx.integrations, cutctx.wrap) through the real frameworks.
#
#   scripts/integrations-check.sh [NAME...]
#
# Builds the package's abi3 wheel once (maturin through pip; cargo's target/ is reused), makes
# one throwaway venv of Python 3.12 with the wheel, pytest, mypy and every framework at the
# versions pinned in crates/cutctx-python/tests/integrations/requirements-*.txt (one file per
# adapter; the pins are the versions docs/PYTHON.md names), then runs
# crates/cutctx-python/tests/integrations (each adapter's scripted agent loop against the
# framework's own test model, or a loopback server shaped from the provider's documented
# responses for the SDK clients) and mypy --strict on the example that uses every adapter.
# With NAMEs, only those requirement files and test_NAME*.py run; without, every test does.
#
# A missing Python or an index that cannot be reached prints "SKIP: ..." and exits 0; every
# test failure exits non-zero.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/integrations-check.XXXXXX")
trap 'rm -rf "$work"' EXIT
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1
tests="$root/crates/cutctx-python/tests/integrations"

py=""
if [[ -x "$HOME/.pyenv/versions/3.12.1/bin/python" ]]; then py="$HOME/.pyenv/versions/3.12.1/bin/python"
elif command -v python3.12 >/dev/null 2>&1; then py=$(command -v python3.12); fi
if [[ -z "$py" ]]; then echo "SKIP: no Python 3.12"; exit 0; fi

names=("$@")
reqs=(); selected=()
if [[ ${#names[@]} -eq 0 ]]; then
    # Every adapter's pins, and every test (the shared core's too, which needs no framework).
    for f in "$tests"/requirements-*.txt; do
        n=${f##*/requirements-}; names+=("${n%.txt}")
    done
    for t in "$tests"/test_*.py; do selected+=("$t"); done
fi
for n in "${names[@]}"; do
    reqs+=(-r "$tests/requirements-$n.txt")
    if [[ $# -gt 0 ]]; then
        for t in "$tests"/test_"$n"*.py; do [[ -f "$t" ]] && selected+=("$t"); done
    fi
done

echo "== one venv with the wheel and the pinned frameworks: ${names[*]}"
"$py" -m venv "$work/venv"
"$work/venv/bin/pip" wheel --quiet --no-deps -w "$work/wheels" "$root/crates/cutctx-python"
if ! "$work/venv/bin/pip" install --quiet "$work"/wheels/cutctx_rs-*.whl pytest mypy "${reqs[@]}"; then
    if ! "$work/venv/bin/pip" download --quiet --no-deps -d "$work/probe" pytest >/dev/null 2>&1; then
        echo "SKIP: the package index cannot be reached"; exit 0
    fi
    echo "FAIL: the pinned frameworks did not install together"; exit 1
fi

echo "== the adapters' tests (scripted loops through each framework)"
cd "$work"  # the installed package, never the source tree, is imported
"$work/venv/bin/python" -m pytest -q -p no:cacheprovider "${selected[@]}"

if [[ $# -eq 0 ]]; then
    echo "== mypy --strict on the whole package, its adapters against the frameworks they import"
    (cd "$root/crates/cutctx-python/python" && "$work/venv/bin/python" -m mypy --strict \
        --warn-unused-ignores --no-incremental -p cutctx)
fi

if [[ $# -eq 0 && -f "$tests/example_every_adapter.py" ]]; then
    echo "== mypy --strict on the example that uses every adapter"
    "$work/venv/bin/python" -m mypy --strict --no-incremental "$tests/example_every_adapter.py"
    "$work/venv/bin/python" "$tests/example_every_adapter.py"
fi
