#!/usr/bin/env bash
# Compacted requests against the providers' published request schemas.
#
#   scripts/schema-check.sh CUTCTX_BINARY [schema-check.py options, e.g. --calls 0]
#
# 1. Skips with "SKIP: ..." (exit 0) when ../shared is absent, or when the pinned validators
#    cannot be installed (no python3, no venv module, no registry): jsonschema, the anthropic
#    SDK and pydantic, at the versions below, in a throwaway venv under /tmp.
# 2. Runs `schema-check.py --self-test`: deliberately broken outputs (a tool message without
#    `tool_call_id`, a Responses call without `call_id`, an Anthropic message with an unknown
#    role) must be reported, and valid ones must not.
# 3. Runs `schema-check.py --cli CUTCTX_BINARY`: the formats crate's test corpus and a sample of
#    the tau-bench calls of ../shared/realworld, in all three formats, through `cutctx compact
#    --format` for every policy and several budgets; an output with a schema error its input
#    did not have fails. See the header of scripts/schema-check.py for the schemas and rules.
set -euo pipefail

if [[ $# -lt 1 ]]; then
    echo "usage: $0 CUTCTX_BINARY [schema-check.py options]" >&2
    exit 2
fi
bin=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
shift
here=$(cd "$(dirname "$0")" && pwd)
shared=$(cd "$here/../.." && pwd)/shared
if [[ ! -x "$bin" ]]; then
    echo "FAIL: $bin is not an executable cutctx binary" >&2
    exit 2
fi
if [[ ! -f "$shared/schemas/openai-openapi.json" || ! -d "$shared/realworld/tau-bench" ]]; then
    echo "SKIP: schema check: ../shared (schemas/, realworld/) is absent"
    exit 0
fi

pins=(jsonschema==4.26.0 anthropic==2.14.0 pydantic==2.14.4)

work=$(mktemp -d "${TMPDIR:-/tmp}/schema-check.XXXXXX")
trap 'rm -rf "$work"' EXIT

skip() {
    echo "SKIP: the schema validators could not be installed: $*"
    exit 0
}

python=${PYTHON:-python3}
command -v "$python" >/dev/null 2>&1 || skip "no $python on PATH"
"$python" -m venv "$work/venv" >"$work/venv.log" 2>&1 ||
    skip "python -m venv failed: $(tail -n 1 "$work/venv.log")"
if ! "$work/venv/bin/python" -m pip install --quiet --disable-pip-version-check \
    --no-input "${pins[@]}" >"$work/pip.log" 2>&1; then
    skip "pip install ${pins[*]} failed: $(grep -E 'ERROR|error' "$work/pip.log" | tail -n 1)"
fi
echo "installed ${pins[*]} in a throwaway venv"

py="$work/venv/bin/python"
echo "== the checker catches broken outputs (self-test)"
"$py" "$here/schema-check.py" --shared "$shared" --self-test
echo "== every compacted request against the schemas"
"$py" "$here/schema-check.py" --shared "$shared" --cli "$bin" "$@"
