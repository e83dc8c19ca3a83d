#!/usr/bin/env bash
# `cutctx serve` through the official SDKs and curl.
#
#   scripts/serve-check.sh [CUTCTX]     # default target/release/cutctx
#
# Makes a throwaway venv with the clients pinned in crates/cutctx-serve/tests/sdk/requirements.txt
# (openai, anthropic, httpx, pytest), then runs crates/cutctx-serve/tests/sdk: a loopback provider
# of OpenAI Chat, Responses and Anthropic Messages, 100-call agent loops through the proxy per
# format, whole and streamed, and the faults (provider errors, resets, timeouts, a client that
# leaves, SIGKILL and restart, limits, malformed bodies).
#
# An index that cannot be reached prints "SKIP: ..." and exits 0; every test failure, or a
# missing binary, exits non-zero.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cli=$(cd "$root" && realpath -m "${1:-target/release/cutctx}")
tests="$root/crates/cutctx-serve/tests/sdk"
work=$(mktemp -d "${TMPDIR:-/tmp}/serve-check.XXXXXX")
trap 'rm -rf "$work"' EXIT
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1 PYTHONDONTWRITEBYTECODE=1

if [[ ! -x "$cli" ]]; then echo "FAIL: no cutctx binary at $cli"; exit 1; fi
if ! command -v curl >/dev/null 2>&1; then
    apt-get install -y -qq curl >/dev/null || { apt-get update -qq && apt-get install -y -qq curl >/dev/null; }
fi

py=""
if [[ -x "$HOME/.pyenv/versions/3.12.1/bin/python" ]]; then py="$HOME/.pyenv/versions/3.12.1/bin/python"
elif command -v python3 >/dev/null 2>&1; then py=$(command -v python3); fi
if [[ -z "$py" ]]; then echo "FAIL: no Python"; exit 1; fi

echo "== a venv with the pinned clients"
"$py" -m venv "$work/venv"
if ! "$work/venv/bin/pip" install --quiet -r "$tests/requirements.txt"; then
    if ! "$work/venv/bin/pip" download --quiet --no-deps -d "$work/probe" pytest >/dev/null 2>&1; then
        echo "SKIP: the package index cannot be reached"; exit 0
    fi
    echo "FAIL: the pinned clients did not install"; exit 1
fi

echo "== the proxy's SDK tests against $cli"
cd "$work"
CUTCTX_BIN="$cli" "$work/venv/bin/python" -m pytest -q -p no:cacheprovider "$tests"
