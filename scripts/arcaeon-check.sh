#!/usr/bin/env bash
# Interop check: ledgers written by cutctx pass arcaeon 0.10.0's own verification, and
# ledgers arcaeon writes (alone, and concurrently with cutctx) pass cutctx's.
#
#   scripts/arcaeon-check.sh CUTCTX_BINARY
#
# 1. Installs arcaeon==0.10.0 from PyPI into a throwaway virtual environment. When that is not
#    possible (no python3, no venv module, no network), prints "SKIP: arcaeon could not be
#    installed: <reason>" and exits 0; every other failure exits non-zero.
# 2. Writes a ledger with the cutctx binary: `receipt seal` over mixed content (bytes, floats,
#    -0.0, integers beyond 64 bits, non-ASCII, duplicates), `compact --ledger` over a request
#    that masks and summarizes, takes `ledger head` as a pin, and holds it all to arcaeon's
#    verify_file, verify_receipt (with content, on every receipt row) and chain_at.
#    A binary without the receipt subcommands falls back to cutctx-receipts' test binary
#    (`cargo test -p cutctx-ledger --test ledger`, role `interop`) to write the ledger.
# 3. With the subcommands: arcaeon appends its own receipts and rows, and `cutctx ledger
#    verify` (with content, strict) must accept the result; then arcaeon and cutctx append to
#    one ledger at the same time, and both verifiers must accept it.
set -euo pipefail

if [[ $# -ne 1 ]]; then
    echo "usage: $0 CUTCTX_BINARY" >&2
    exit 2
fi
bin=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
check="$here/arcaeon_check.py"
if [[ ! -x "$bin" ]]; then
    echo "FAIL: $1 is not an executable cutctx binary" >&2
    exit 2
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/arcaeon-check.XXXXXX")
trap 'rm -rf "$work"' EXIT

skip() {
    echo "SKIP: arcaeon could not be installed: $*"
    exit 0
}

python=${PYTHON:-python3}
command -v "$python" >/dev/null 2>&1 || skip "no $python on PATH"
"$python" -m venv "$work/venv" >"$work/venv.log" 2>&1 ||
    skip "python -m venv failed: $(tail -n 1 "$work/venv.log")"
if ! "$work/venv/bin/python" -m pip install --quiet --disable-pip-version-check \
    --no-input "arcaeon==0.10.0" >"$work/pip.log" 2>&1; then
    skip "pip install arcaeon==0.10.0 failed: $(grep -E 'ERROR|error' "$work/pip.log" | tail -n 1)"
fi
py="$work/venv/bin/python"
version=$("$py" -c 'import importlib.metadata as m; print(m.version("arcaeon"))')
echo "arcaeon $version installed in a throwaway venv"

ledger="$work/receipts.jsonl"
content="$work/content.json"
pin="$work/pin.txt"

lines() { if [[ -f "$ledger" ]]; then wc -l <"$ledger" | tr -d ' '; else echo 0; fi; }

if "$bin" receipt seal --help >/dev/null 2>&1 && "$bin" ledger head --help >/dev/null 2>&1; then
    mode=cli
    # -- receipts over mixed content ---------------------------------------------------------
    cat >"$work/pre1.json" <<'EOF'
[{"$b64": "AAFiaW5hcnn/"},
 {"price": 19.99, "qty": 3, "big": 1152921504606846976, "huge": 12345678901234567890123,
  "zero": -0.0, "sci": 1e+100, "tiny": 1e-05, "ok": true, "none": null},
 [1, "two", [3.5, {}], []], "", "κείμενο / テキスト / 😀", 42,
 "duplicate", "duplicate", "tab\there \"quoted\" \u0001"]
EOF
    cat >"$work/post1.json" <<'EOF'
[{"price": 19.99, "qty": 3, "big": 1152921504606846976, "huge": 12345678901234567890123,
  "zero": -0.0, "sci": 1e+100, "tiny": 1e-05, "ok": true, "none": null},
 "κείμενο / テキスト / 😀", "duplicate", "summary: dropped a blob, a list, 42 ✓"]
EOF
    cat >"$work/pre2.json" <<'EOF'
["a", "b", "c"]
EOF
    cat >"$work/post2.json" <<'EOF'
[]
EOF
    "$bin" receipt seal --pre "$work/pre1.json" --post "$work/post1.json" --ledger "$ledger" \
        --compactor "fifo+summary ✓" --method salience-prune >/dev/null
    "$py" "$check" items-content "$content" "$(lines)" "$work/pre1.json" "$work/post1.json"
    "$bin" receipt seal --pre "$work/pre2.json" --post "$work/post2.json" --ledger "$ledger" \
        --compactor "truncator" --method fifo-truncate >/dev/null
    "$py" "$check" items-content "$content" "$(lines)" "$work/pre2.json" "$work/post2.json"
    # -- a cutctx compaction: masks and a summary ---------------------------------------------
    "$py" - "$work/request.json" <<'EOF'
import json, sys
turns = [{"turn_id": "s1", "role": "system", "content": "rules é", "token_estimate": 10}]
for i in range(4):
    turns.append({"turn_id": f"u{i}", "role": "user", "content": f"question {i}", "token_estimate": 20})
    turns.append({"turn_id": f"a{i}", "role": "assistant", "content": "calling",
                  "token_estimate": 10, "tool_call_id": f"c{i}"})
    turns.append({"turn_id": f"t{i}", "role": "tool", "content": "log line\n" * 150,
                  "token_estimate": 300, "tool_call_id": f"c{i}",
                  "metadata": {"source": "db", "n": str(i)}})
turns.append({"turn_id": "a8", "role": "assistant", "content": "done", "token_estimate": 10})
turns.append({"turn_id": "u9", "role": "user", "content": "thanks", "token_estimate": 10,
              "pinned": True})
req = {"transcript": turns, "budget": {"max_tokens": 200, "protected_recent_turns": 2},
       "policy": {"name": "default_chain", "prompt_id": "p.v1", "keep_recent_results": 0}}
json.dump(req, open(sys.argv[1], "w"))
EOF
    "$bin" plan "$work/request.json" >"$work/plan.json"
    "$py" - "$work/request.json" "$work/plan.json" <<'EOF'
import json, sys
req = json.load(open(sys.argv[1]))
plan = json.load(open(sys.argv[2]))
req["summaries"] = {r["group_id"]: "Earlier: four log reads, nothing new."
                    for r in plan["summarization_requests"]}
json.dump(req, open(sys.argv[1], "w"))
EOF
    "$bin" compact "$work/request.json" >"$work/plain.json"
    "$bin" compact "$work/request.json" --ledger "$ledger" --compactor "cutctx-interop" \
        >"$work/compact.json"
    cmp -s "$work/plain.json" "$work/compact.json" ||
        { echo "FAIL: compact --ledger changed standard output" >&2; exit 1; }
    "$py" "$check" compaction-content "$content" "$(lines)" "$work/request.json" "$work/compact.json"
    "$bin" compact "$work/request.json" --ledger "$ledger" >/dev/null
    "$py" "$check" compaction-content "$content" "$(lines)" "$work/request.json" "$work/compact.json"
    "$bin" ledger head "$ledger" >"$pin"
else
    mode=fallback
    echo "note: $1 has no \`receipt seal\`/\`ledger head\` yet; writing the ledger with" \
        "cutctx-receipts' test binary instead"
    (cd "$root" && CUTCTX_RECEIPTS_CHILD=interop LEDGER="$ledger" CONTENT_OUT="$content" \
        PIN_OUT="$pin" cargo test --quiet -p cutctx-ledger --test ledger -- \
        --exact processes::child_role --test-threads 1 >"$work/cargo.log" 2>&1) ||
        { cat "$work/cargo.log" >&2; echo "FAIL: the fallback writer failed" >&2; exit 1; }
fi

echo "== arcaeon verifies the ledger cutctx wrote ($mode mode) =="
"$py" "$check" verify "$ledger" "$content" "$pin" >"$work/report.json" ||
    { cat "$work/report.json"; exit 1; }

if [[ $mode == cli ]]; then
    echo "== cutctx verifies rows arcaeon appended =="
    "$py" "$check" append "$ledger" "$content" 4
    "$bin" ledger verify "$ledger" --content "$content" --pin "$pin" --strict >"$work/verdict.json" ||
        { cat "$work/verdict.json"; echo "FAIL: cutctx rejects arcaeon's rows" >&2; exit 1; }
    "$py" "$check" verify "$ledger" "$content" "$pin" >"$work/report.json" ||
        { cat "$work/report.json"; exit 1; }

    echo "== arcaeon and cutctx append to one ledger at the same time =="
    shared="$work/shared.jsonl"
    pids=()
    "$py" "$check" flood "$shared" 60 &
    pids+=($!)
    for i in $(seq 1 30); do
        "$bin" receipt seal --pre "$work/pre2.json" --post "$work/post2.json" \
            --ledger "$shared" --compactor "cutctx-$i" --method concurrent >/dev/null &
        pids+=($!)
    done
    for pid in "${pids[@]}"; do
        wait "$pid" || { echo "FAIL: a concurrent writer failed" >&2; exit 1; }
    done
    "$bin" ledger verify "$shared" --strict >"$work/shared-verdict.json" ||
        { cat "$work/shared-verdict.json"; echo "FAIL: cutctx rejects the shared ledger" >&2; exit 1; }
    "$py" - "$shared" <<'EOF'
import sys
from arcaeon.record.ledger import verify_file
v = verify_file(sys.argv[1], strict=True)
print(f"arcaeon verify_file on the shared ledger: ok={v.ok} rows={v.rows} breaks={v.breaks}")
sys.exit(0 if v.ok is True and v.rows == 90 else 1)
EOF
fi
echo "arcaeon interop check passed ($mode mode)"
