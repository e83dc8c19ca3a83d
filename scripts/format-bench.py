#!/usr/bin/env python3
"""The formats path against the hardware: `cutctx compact --format F` as a ratio to SHA-256.

For each format and policy it runs the release CLI on a generated request (the
`format_request` example of cutctx-ops), alternating each run with one SHA-256 pass over the
same file (`openssl dgst -sha256`, which uses the CPU's SHA instructions where it has them;
`sha256sum` may not, and is several times slower), so that drift in the machine's speed touches both alike. It prints the
median ratio of the CLI's wall time to the SHA-256 pass's, and the CLI's peak resident memory
(from `wait4`, the child's own figure) as a multiple of the input's size.

    python3 scripts/format-bench.py [--messages 100000] [--runs 3] [--formats ...] [--policies ...]
    python3 scripts/format-bench.py --scale 10   # also 1/10 of the messages: the growth

It builds the binaries itself (`cargo build --release`), writes the requests under a temporary
folder, and checks that every compaction exits 0.
"""

import argparse
import os
import statistics
import subprocess
import tempfile

from benchlib import against_sha256, built

FORMATS = ["openai-chat", "openai-responses", "anthropic"]
POLICIES = ["drop_oldest", "observation_masking"]


def measure(cli, path, fmt, policy, max_tokens, runs):
    argv = [cli, "compact", "--format", fmt, "--policy", policy,
            "--max-tokens", str(max_tokens), path]
    return against_sha256(argv, path, runs)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--messages", type=int, default=100_000)
    p.add_argument("--result-bytes", type=int, default=1_000)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--formats", nargs="+", default=FORMATS)
    p.add_argument("--policies", nargs="+", default=POLICIES)
    p.add_argument("--scale", type=int, default=0,
                   help="also run 1/SCALE of the messages and report the growth of the ratio")
    p.add_argument("--cli", help="measure this cutctx binary instead of target/release/cutctx "
                   "(an older build, to compare)")
    args = p.parse_args()
    cli, gen = built("format_request", args.cli)
    sizes = [args.messages] + ([args.messages // args.scale] if args.scale else [])
    with tempfile.TemporaryDirectory() as tmp:
        print(f"{'format':<17} {'policy':<20} {'messages':>8} {'MB':>6} "
              f"{'x sha256 (median; runs)':<30} {'peak / input (runs)':<24}")
        results = {}
        for fmt in args.formats:
            for n in sizes:
                path = os.path.join(tmp, f"{fmt}-{n}.json")
                with open(path, "wb") as out:
                    subprocess.run([gen, fmt, str(n), str(args.result_bytes)], stdout=out,
                                   check=True)
                size = os.path.getsize(path)
                # About half the request's estimated tokens (4 bytes a token): drop-oldest
                # removes the older half, masking stubs every result but the last two.
                max_tokens = size // 8
                for policy in args.policies:
                    ratios, peaks, cli_t = measure(cli, path, fmt, policy, max_tokens,
                                                      args.runs)
                    med = statistics.median(ratios)
                    results[(fmt, policy, n)] = (med, statistics.median(cli_t))
                    print(f"{fmt:<17} {policy:<20} {n:>8} {size / 1e6:>6.1f} "
                          f"{med:>5.1f}  ({', '.join(f'{r:.1f}' for r in ratios)}){'':<6}"
                          f"{statistics.median(peaks) / size:>4.2f}  "
                          f"({', '.join(f'{m / size:.2f}' for m in peaks)})", flush=True)
        if args.scale:
            print(f"\ngrowth from {sizes[1]} to {sizes[0]} messages (time ratio; linear is "
                  f"{args.scale}):")
            for fmt in args.formats:
                for policy in args.policies:
                    big = results[(fmt, policy, sizes[0])][1]
                    small = results[(fmt, policy, sizes[1])][1]
                    print(f"  {fmt:<17} {policy:<20} {big / small:5.1f}")


if __name__ == "__main__":
    main()
