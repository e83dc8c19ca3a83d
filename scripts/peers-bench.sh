#!/usr/bin/env bash
# Installs the two peer libraries, pinned, each in its own throwaway venv, and runs
# scripts/peers-bench.py with them (every option is passed on):
#
#   scripts/peers-bench.sh [--cli target/release/cutctx] [--markdown] [--dump-only --keep DIR] ...
#
# The venvs live under one mktemp folder, removed on exit. Installing needs the package
# registry; the bench itself runs offline (scripts/peers-bench.py says how).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
HEADROOM_VERSION=0.42.0
LLMTRIM_VERSION=0.13.7
work=$(mktemp -d "${TMPDIR:-/tmp}/peers-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1
python=${PYTHON:-python3}

echo "== venvs: headroom-ai==$HEADROOM_VERSION, llmtrim==$LLMTRIM_VERSION" >&2
"$python" -m venv "$work/headroom"
"$work/headroom/bin/pip" install --quiet "headroom-ai==$HEADROOM_VERSION"
"$python" -m venv "$work/llmtrim"
"$work/llmtrim/bin/pip" install --quiet "llmtrim==$LLMTRIM_VERSION"

cd "$root"
"$python" scripts/peers-bench.py --headroom-python "$work/headroom/bin/python" \
    --llmtrim-python "$work/llmtrim/bin/python" "$@"
