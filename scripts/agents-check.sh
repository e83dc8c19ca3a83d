#!/usr/bin/env bash
# `cutctx serve` with the real coding agents: Claude Code and Codex CLI, from npm, loopback only.
#
#   scripts/agents-check.sh [CUTCTX]     # default target/release/cutctx
#   AGENTS_CHECK_KEEP=1 scripts/agents-check.sh   # keep the logs even when every check passes
#
# Installs the pinned clients with npm into a throwaway folder (each ships its native binary in
# a platform package, an optional dependency: they are installed with it), then runs
# scripts/agents_check.py: a scripted provider of Anthropic Messages and OpenAI Responses on
# 127.0.0.1, `cutctx serve` in front of it, each client headless through the proxy on a task of
# 12 shell-tool calls, and the checks (see that file). Nothing leaves the machine: the clients'
# HOME and config are in the scratch folder, their telemetry and update checks are off, and any
# call they make for another host goes through HTTPS_PROXY to the loopback provider, which
# refuses it.
#
# It runs twice: as the proxy is by default, then with `--summarizer auto` (the proxy's own
# summaries, checked too). Each ends with a summary per client (requests, tool calls, firings,
# unreadable, opaque items,
# sessions and restarts, largest request vs window, valid requests, prefix breaks by cause,
# Codex's own compaction), the compaction_trigger round trip, and its wall time. The logs (the
# proxy's log lines, /metrics, every request the provider received and how each differs from
# the one before) are kept when a check fails, or always with AGENTS_CHECK_KEEP=1.
#
# An npm registry that cannot be reached prints "SKIPPED: ..." and exits 0; every other failure
# (a missing binary, an install that fails, a client that fails, a check that fails) exits
# non-zero with a FAIL line naming it.
set -euo pipefail
CLAUDE_CODE=2.1.332   # @anthropic-ai/claude-code
CODEX=0.171.0         # @openai/codex

root=$(cd "$(dirname "$0")/.." && pwd)
cli=$(cd "$root" && realpath -m "${1:-target/release/cutctx}")
work=$(mktemp -d "${TMPDIR:-/tmp}/agents-check.XXXXXX")
started=$SECONDS
cleanup() {
    rc=$?
    rm -rf "$work/npm" "$work/home-claude" "$work/home-codex"
    if [[ $rc -eq 0 && -z ${AGENTS_CHECK_KEEP:-} ]]; then rm -rf "$work"; else echo "logs kept in $work/logs"; fi
    echo "agents check took $((SECONDS - started)) s in all (npm install included)"
}
trap cleanup EXIT
export PYTHONDONTWRITEBYTECODE=1 NPM_CONFIG_UPDATE_NOTIFIER=false NPM_CONFIG_FUND=false \
    NPM_CONFIG_AUDIT=false

if [[ ! -x "$cli" ]]; then echo "FAIL: no cutctx binary at $cli"; exit 1; fi
if ! command -v npm >/dev/null 2>&1; then
    apt-get install -y -qq nodejs npm >/dev/null 2>&1 ||
        { apt-get update -qq && apt-get install -y -qq nodejs npm >/dev/null; }
fi
if ! command -v python3 >/dev/null 2>&1; then echo "FAIL: no python3"; exit 1; fi

echo "== npm install @anthropic-ai/claude-code@$CLAUDE_CODE @openai/codex@$CODEX (node $(node --version), npm $(npm --version))"
if ! timeout 120 npm ping --fetch-retries=1 >/dev/null 2>&1; then
    echo "SKIPPED: the npm registry cannot be reached (agents check skipped)"; exit 0
fi
if ! timeout 900 npm install --prefix "$work/npm" --no-audit --no-fund --no-save \
        --include=optional --loglevel=error --fetch-timeout=120000 --fetch-retries=2 \
        "@anthropic-ai/claude-code@$CLAUDE_CODE" "@openai/codex@$CODEX" >"$work/npm-install.log" 2>&1; then
    if ! timeout 120 npm ping --fetch-retries=1 >/dev/null 2>&1; then
        echo "SKIPPED: the npm registry cannot be reached (agents check skipped)"; exit 0
    fi
    tail -20 "$work/npm-install.log"
    echo "FAIL: npm could not install the pinned clients"; exit 1
fi
bin="$work/npm/node_modules/.bin"

# Claude Code's postinstall puts its native binary in place of a stub; an npm that holds back
# install scripts leaves the stub, so run it then (it only links a file of the platform package).
if ! HOME="$work" "$bin/claude" --version >/dev/null 2>&1; then
    (cd "$work/npm/node_modules/@anthropic-ai/claude-code" && node install.cjs >/dev/null)
fi
for client in claude codex; do
    if ! version=$(HOME="$work" "$bin/$client" --version 2>/dev/null); then
        echo "FAIL: $client does not run (its platform package is missing?)"
        ls "$work/npm/node_modules/@anthropic-ai" "$work/npm/node_modules/@openai" || true
        exit 1
    fi
    echo "   $client: $version"
done

mkdir -p "$work/logs" "$work/summarized/logs"
python3 "$root/scripts/agents_check.py" --cutctx "$cli" --bin "$bin" --work "$work"
# Again with the proxy summarizing (--summarizer auto): its own native compaction calls, made
# in the background through the same provider with each client's credential, swapped in.
echo "== again, with cutctx serve --summarizer auto"
python3 "$root/scripts/agents_check.py" --cutctx "$cli" --bin "$bin" --work "$work/summarized" \
    --summarizer auto
