#!/usr/bin/env bash
# Runs the cargo-fuzz targets of fuzz/ for a bounded time each: every target listed in
# fuzz/Cargo.toml, or only those named as arguments, FUZZ_SECONDS seconds each (default 10),
# one after the other. Each runs on a copy of its corpus (fuzz/corpus/<target>) in a temporary
# directory, so the committed corpus never grows, and prints one line:
#
#   fuzz <target>: <N> inputs executed in <S> s, no crash
#
# A crash (or a timeout, or running out of memory) fails the script and names the input
# libFuzzer wrote under fuzz/artifacts/<target>/. The targets are built in release mode with
# debug assertions and overflow checks, under the address sanitizer, into fuzz/target.
# cargo-fuzz is installed at a pinned version under the target directory (target/tools).
# Without a nightly toolchain the script prints "fuzz skipped: <reason>" and exits 0.
#
#   scripts/fuzz-check.sh                              # every target, 10 s each
#   FUZZ_SECONDS=120 scripts/fuzz-check.sh serve_usage # one target, two minutes
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

seconds="${FUZZ_SECONDS:-10}"
cargo_fuzz_version="0.13.2"
tools="${CARGO_TARGET_DIR:-$root/target}/tools"

if ! [[ "$seconds" =~ ^[1-9][0-9]*$ ]]; then
    echo "fuzz-check: FUZZ_SECONDS must be a whole number of seconds above 0, not '$seconds'" >&2
    exit 2
fi

if ! command -v rustup >/dev/null 2>&1; then
    echo "fuzz skipped: rustup is not installed, so there is no nightly toolchain"
    exit 0
fi
if ! cargo +nightly --version >/dev/null 2>&1; then
    echo "fuzz skipped: no nightly toolchain (rustup toolchain install nightly)"
    exit 0
fi

# The targets fuzz/Cargo.toml lists, in its order.
mapfile -t listed < <(awk '
    /^\[\[bin\]\]/ { in_bin = 1; next }
    /^\[/ { in_bin = 0 }
    in_bin && /^name *= *"/ { sub(/^name *= *"/, ""); sub(/".*/, ""); print }
' fuzz/Cargo.toml)
if [[ ${#listed[@]} -eq 0 ]]; then
    echo "fuzz-check: fuzz/Cargo.toml lists no [[bin]] target" >&2
    exit 2
fi
if [[ $# -gt 0 ]]; then
    targets=("$@")
    for t in "${targets[@]}"; do
        if ! printf '%s\n' "${listed[@]}" | grep -qx -- "$t"; then
            echo "fuzz-check: no fuzz target '$t' in fuzz/Cargo.toml (targets: ${listed[*]})" >&2
            exit 2
        fi
    done
else
    targets=("${listed[@]}")
fi

if [[ "$("$tools/bin/cargo-fuzz" --version 2>/dev/null || true)" != "cargo-fuzz $cargo_fuzz_version" ]]; then
    echo "fuzz-check: installing cargo-fuzz $cargo_fuzz_version into $tools"
    cargo install cargo-fuzz --version "$cargo_fuzz_version" --locked --root "$tools" --quiet
fi
export PATH="$tools/bin:$PATH"

# The fuzz workspace's own target directory, whatever the caller's CARGO_TARGET_DIR.
unset CARGO_TARGET_DIR
build_flags=(--fuzz-dir fuzz --release --debug-assertions --target-dir "$root/fuzz/target")

echo "fuzz-check: building ${#targets[@]} target(s)"
for t in "${targets[@]}"; do
    cargo +nightly fuzz build "${build_flags[@]}" "$t"
done

scratch="$(mktemp -d "${TMPDIR:-/tmp}/fuzz-check.XXXXXX")"
trap 'rm -rf "$scratch"' EXIT

failed=()
for t in "${targets[@]}"; do
    corpus="$scratch/corpus-$t"
    mkdir -p "$corpus"
    if [[ -d "fuzz/corpus/$t" ]]; then
        cp -R "fuzz/corpus/$t/." "$corpus/"
    fi
    log="$scratch/$t.log"
    start=$(date +%s)
    status=0
    cargo +nightly fuzz run "${build_flags[@]}" "$t" "$corpus" -- \
        -max_total_time="$seconds" -rss_limit_mb=4096 -timeout=60 -print_final_stats=1 \
        >"$log" 2>&1 || status=$?
    elapsed=$(($(date +%s) - start))
    executed=$(sed -n 's/^stat::number_of_executed_units: *\([0-9][0-9]*\).*/\1/p' "$log" | tail -n 1)
    # libFuzzer's own figure of the time it fuzzed ("Done N runs in S second(s)"), which leaves
    # out a rebuild by cargo fuzz run; the wall time when it printed none.
    fuzzed=$(sed -n 's/^Done [0-9][0-9]* runs in \([0-9][0-9]*\) second.*/\1/p' "$log" | tail -n 1)
    elapsed="${fuzzed:-$elapsed}"
    artifact=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -n 1)
    if [[ $status -eq 0 && -z "$artifact" && -n "$executed" ]]; then
        echo "fuzz $t: $executed inputs executed in $elapsed s, no crash"
        continue
    fi
    failed+=("$t")
    echo "fuzz $t: FAILED after ${executed:-an unknown number of} inputs in $elapsed s (exit status $status)"
    # The panic and its message, or libFuzzer's and the sanitizer's own verdict; then the end.
    grep -E -A2 "panicked at|ERROR: (libFuzzer|AddressSanitizer)" "$log" | head -n 12 | sed 's/^/    /' || true
    tail -n 15 "$log" | sed 's/^/    /'
    if [[ -n "$artifact" ]]; then
        echo "fuzz $t: the failing input is $artifact"
        echo "fuzz $t: reproduce with: PATH=$tools/bin:\$PATH cargo +nightly fuzz run ${build_flags[*]} $t $artifact"
    fi
done

if [[ ${#failed[@]} -gt 0 ]]; then
    echo "fuzz-check: ${#failed[@]} target(s) failed: ${failed[*]}" >&2
    exit 1
fi
