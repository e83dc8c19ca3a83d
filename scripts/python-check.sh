#!/usr/bin/env bash
# The Python package against the reference's own test suite, and its own suite on 3.12 and 3.10.
#
#   scripts/python-check.sh
#
# 1. Builds one abi3 wheel of crates/cutctx-python (maturin, through pip; cargo's target/ is
#    reused, so an unchanged tree does not rebuild) and installs it, with pytest, hypothesis and
#    baseaicore, into a throwaway venv of Python 3.12 (~/.pyenv/versions/3.12.1, else
#    python3.12 on PATH).
# 2. Downloads the reference sdist (cutctx==0.1.0), extracts only its tests/ into a temporary
#    folder (its src/ is never importable) and runs them against the installed package. The
#    deselected tests are listed below with their reasons; docs/PYTHON.md lists them too.
# 3. Runs the package's own suite (crates/cutctx-python/tests) there, then mypy --strict on
#    crates/cutctx-python/tests/typing/{usage,misuse}.py against the installed package (and runs
#    usage.py), and the suite again on Python 3.10 (~/.pyenv/versions/3.10.13, else python3.10)
#    with the same wheel.
#
# A missing Python prints "SKIP: ..." and exits 0 for that part; every failure exits non-zero.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/python-check.XXXXXX")
trap 'rm -rf "$work"' EXIT
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1

find_python() { # version, pyenv path
    if [[ -x "$2" ]]; then echo "$2"; elif command -v "python$1" >/dev/null 2>&1; then
        command -v "python$1"; fi
}
py312=$(find_python 3.12 "$HOME/.pyenv/versions/3.12.1/bin/python")
py310=$(find_python 3.10 "$HOME/.pyenv/versions/3.10.13/bin/python")
if [[ -z "$py312" ]]; then
    echo "SKIP: no Python 3.12 (~/.pyenv/versions/3.12.1 or python3.12 on PATH)"
    exit 0
fi

echo "== build the wheel once (abi3: one wheel for every CPython >= 3.10)"
"$py312" -m venv "$work/v312"
"$work/v312/bin/pip" install --quiet pytest hypothesis "baseaicore>=0.4.1,<0.5"
"$work/v312/bin/pip" wheel --quiet --no-deps -w "$work/wheels" "$root/crates/cutctx-python"
wheel=$(ls "$work"/wheels/cutctx_rs-*.whl)
"$work/v312/bin/pip" install --quiet "$wheel"

echo "== the reference's test suite (cutctx 0.1.0) against the installed package"
# Deselected: the tests that use the reference's private chain internals (the chain here is the
# Rust core's; scripts/python_check_plugin.py lets the rest of their file be collected), the
# performance tests (deselected by default in the reference too, by marker), and the tests that
# cannot hold for this distribution, each with its reason.
deselect=(
    # _Resolution and _project: the reference chain's private projection.
    "unit/test_chain.py::TestTheProjectionMatchesTheView::test_a_masked_turn_keeps_its_id_and_its_correlation_id_in_the_projection"
    # _reconcile_exchanges and _Resolution: the reference chain's private reconciliation.
    "unit/test_chain.py::TestExchangeReconciliation"
    # Reads the policy modules' Python source for a `build_plan(...)` call: the policies here
    # are the Rust core's, whose plans all go through cutctx_invariants::build_plan.
    "unit/test_invariants.py::test_no_shipped_policy_builds_its_own_plan"
    # Checks every module's imports; cutctx.formats and cutctx.receipts, which the reference
    # does not have, parse JSON and name ledger files by design. The package's own suite holds
    # the reference's modules to the same rule (test_package.py).
    "unit/test_packaging.py::test_no_module_imports_a_client_a_store_a_clock_or_a_source_of_randomness"
    # Read the metadata of a distribution named `cutctx`: this one is `cutctx-rs`.
    "unit/test_packaging.py::test_the_distribution_declares_only_baseaicore_at_runtime"
    "unit/test_packaging.py::test_the_version_is_what_the_metadata_says"
)
ref_ok=1
if "$work/v312/bin/pip" download --quiet --no-deps --no-binary :all: -d "$work/sdist" \
    "cutctx==0.1.0" >"$work/download.log" 2>&1; then
    mkdir -p "$work/ref"
    tar -xzf "$work"/sdist/cutctx-0.1.0.tar.gz -C "$work/ref" --strip-components=1 \
        cutctx-0.1.0/tests
    args=()
    for node in "${deselect[@]}"; do args+=(--deselect "$node"); done
    (cd "$work/ref/tests" && PYTHONPATH="$root/scripts" "$work/v312/bin/python" -m pytest -q \
        -p python_check_plugin -p no:cacheprovider -m "not live and not performance" \
        -W ignore::pytest.PytestUnknownMarkWarning "${args[@]}") || ref_ok=0
else
    echo "SKIP: the reference sdist could not be downloaded: $(tail -n 1 "$work/download.log")"
fi

echo "== the package's own suite on $("$work/v312/bin/python" -V)"
# The framework adapters' tests need the frameworks; scripts/integrations-check.sh runs them.
(cd "$work" && "$work/v312/bin/python" -m pytest -q -p no:cacheprovider \
    --ignore="$root/crates/cutctx-python/tests/integrations" "$root/crates/cutctx-python/tests")

echo "== mypy --strict on a usage example and on deliberate misuse, against the installed package"
# From a folder holding only the two files, so that `import cutctx` resolves to the installed
# package (its py.typed, .pyi stubs and annotated modules), never the source tree. misuse.py marks
# each mistake with the error it must raise; --warn-unused-ignores fails when one is not caught.
"$work/v312/bin/pip" install --quiet mypy
mkdir -p "$work/typing"
cp "$root"/crates/cutctx-python/tests/typing/{usage,misuse}.py "$work/typing/"
(cd "$work/typing" && "$work/v312/bin/python" -m mypy --strict --warn-unused-ignores \
    --cache-dir "$work/mypy-cache" usage.py misuse.py)
# The usage example also runs: its annotations are the values the package really returns.
(cd "$work/typing" && "$work/v312/bin/python" usage.py)
# The package's own modules too: errors there are hidden from its users' mypy, not harmless.
# The framework adapters import their frameworks, which this venv does not hold;
# scripts/integrations-check.sh checks the whole package with every framework installed.
framework_adapters=(langchain langgraph litellm openai_agents pydantic_ai)
own_modules=()
while IFS= read -r f; do
    name=$(basename "$f" .py)
    if [[ "$f" == cutctx/integrations/* && " ${framework_adapters[*]} " == *" $name "* ]]; then
        continue
    fi
    # As modules (-m), not files: a module with a .pyi beside it is checked through its stub.
    module=${f%.py}; module=${module%/__init__}
    own_modules+=(-m "${module//\//.}")
done < <(cd "$root/crates/cutctx-python/python" && find cutctx -name '*.py' | sort)
(cd "$root/crates/cutctx-python/python" && "$work/v312/bin/python" -m mypy --strict \
    --warn-unused-ignores --cache-dir "$work/mypy-cache" "${own_modules[@]}")

if [[ -n "$py310" ]]; then
    echo "== the package's own suite on $("$py310" -V) (the same wheel)"
    "$py310" -m venv "$work/v310"
    "$work/v310/bin/pip" install --quiet pytest "$wheel"
    (cd "$work" && "$work/v310/bin/python" -m pytest -q -p no:cacheprovider \
        --ignore="$root/crates/cutctx-python/tests/integrations" "$root/crates/cutctx-python/tests")
else
    echo "SKIP: no Python 3.10 (~/.pyenv/versions/3.10.13 or python3.10 on PATH)"
fi

if [[ $ref_ok -ne 1 ]]; then
    echo "FAIL: the reference's test suite failed against the package" >&2
    exit 1
fi
echo "python check passed"
