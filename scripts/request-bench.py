#!/usr/bin/env python3
"""`cutctx compact REQUEST` and `cutctx apply REQUEST --plan PLAN` against the hardware: a ratio
to one SHA-256 pass over what the command reads.

It runs the release CLI on a generated request document (the `request_document` example of
cutctx-ops: a system turn, then assistant-call / 1 KB tool result / user turns, the default
chain with every summary it asks for supplied), alternating each run with one SHA-256 pass over
the same files (`openssl dgst -sha256`, which uses the CPU's SHA instructions where it has
them), so that drift in the machine's speed touches both alike. `apply` applies the plan
`cutctx plan` stored for the same request (the plan-file path), its floor the pass over both
files. It prints the median ratio of the CLI's wall time to the SHA-256 pass's, and the CLI's
peak resident memory (from `wait4`, the child's own figure) as a multiple of what it reads.

    python3 scripts/request-bench.py [--turns 100000] [--runs 3] [--budgets 5 50]
    python3 scripts/request-bench.py --scale 10   # also 1/10 of the turns: the growth
    python3 scripts/request-bench.py --commands compact   # only compact (default: compact apply)
    python3 scripts/request-bench.py --cli OLD    # the same, for another build of cutctx

It builds the binaries itself (`cargo build --release`), writes the requests under a temporary
folder, and checks that every compaction exits 0.
"""

import argparse
import os
import statistics
import subprocess
import tempfile

from benchlib import against_sha256, built



def measure(cli, command, path, runs):
    """`command` on the request at `path`: (ratios, peaks, times, bytes read)."""
    if command == "compact":
        ratios, peaks, times = against_sha256([cli, "compact", path], path, runs)
        return ratios, peaks, times, os.path.getsize(path)
    plan = path + ".plan.json"
    with open(plan, "wb") as out:
        subprocess.run([cli, "plan", path], stdout=out, check=True)
    argv = [cli, "apply", path, "--plan", plan]
    ratios, peaks, times = against_sha256(argv, [path, plan], runs)
    return ratios, peaks, times, os.path.getsize(path) + os.path.getsize(plan)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--turns", type=int, default=100_000)
    p.add_argument("--result-bytes", type=int, default=1_000)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--budgets", type=int, nargs="+", default=[5, 50],
                   help="budgets, in percent of the transcript's estimate")
    p.add_argument("--scale", type=int, default=0,
                   help="also run 1/SCALE of the turns and report the growth of the time")
    p.add_argument("--commands", nargs="+", default=["compact", "apply"],
                   choices=["compact", "apply"], help="the commands to measure")
    p.add_argument("--cli", help="measure this cutctx binary instead of target/release/cutctx "
                   "(an older build, to compare)")
    args = p.parse_args()
    cli, gen = built("request_document", args.cli)
    sizes = [args.turns] + ([args.turns // args.scale] if args.scale else [])
    with tempfile.TemporaryDirectory() as tmp:
        print(f"{'command':<8} {'budget':>6} {'turns':>8} {'MB read':>7} "
              f"{'x sha256 (median; runs)':<30} {'peak / read (runs)':<24}")
        results = {}
        for percent in args.budgets:
            for n in sizes:
                path = os.path.join(tmp, f"request-{n}-{percent}.json")
                with open(path, "wb") as out:
                    subprocess.run([gen, str(n), str(percent), str(args.result_bytes)],
                                   stdout=out, check=True)
                for command in args.commands:
                    ratios, peaks, times, size = measure(cli, command, path, args.runs)
                    med = statistics.median(ratios)
                    results[(command, percent, n)] = statistics.median(times)
                    print(f"{command:<8} {percent:>5}% {n:>8} {size / 1e6:>7.1f} "
                          f"{med:>5.2f}  ({', '.join(f'{r:.2f}' for r in ratios)}){'':<6}"
                          f"{statistics.median(peaks) / size:>4.2f}  "
                          f"({', '.join(f'{m / size:.2f}' for m in peaks)})", flush=True)
        if args.scale:
            print(f"\ngrowth from {sizes[1]} to {sizes[0]} turns (time ratio; linear is "
                  f"{args.scale}):")
            for command in args.commands:
                for percent in args.budgets:
                    big = results[(command, percent, sizes[0])]
                    small = results[(command, percent, sizes[1])]
                    print(f"  {command:<8} {percent:>3}% {big / small:5.1f}")


if __name__ == "__main__":
    main()
