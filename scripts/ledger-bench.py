#!/usr/bin/env python3
"""`cutctx ledger verify LEDGER` against the hardware: a ratio to one SHA-256 pass over the ledger.

It runs the release CLI on a generated receipts ledger (the `ledger_rows` example of
cutctx-ops: chained compaction receipts of eight items, half of them dropped, with a tool-call
row after every tenth receipt), alternating each run with one SHA-256 pass over the same file
(`openssl dgst -sha256`), as the request and formats benchmarks do. It prints the median ratio
of the two wall times and the CLI's peak resident memory as a multiple of the ledger's size.
Every row is parsed, chained again (the chain rule re-serializes it and hashes it after the
row before) and, for a receipt, verified (its digests and counts checked and its
`receipt_digest` recomputed from its canonical form), and the verdict lists every receipt.

    python3 scripts/ledger-bench.py [--rows 50000] [--runs 3]
    python3 scripts/ledger-bench.py --scale 10   # also 1/10 of the rows: the growth
    python3 scripts/ledger-bench.py --cli OLD    # the same, for another build of cutctx

It builds the binaries itself (`cargo build --release`), writes the ledgers under a temporary
folder, and checks that every verification exits 0.
"""

import argparse
import os
import statistics
import subprocess
import tempfile

from benchlib import against_sha256, built



def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=50_000)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--scale", type=int, default=0,
                   help="also run 1/SCALE of the rows and report the growth of the time")
    p.add_argument("--cli", help="measure this cutctx binary instead of target/release/cutctx "
                   "(an older build, to compare)")
    args = p.parse_args()
    cli, gen = built("ledger_rows", args.cli)
    sizes = [args.rows] + ([args.rows // args.scale] if args.scale else [])
    with tempfile.TemporaryDirectory() as tmp:
        print(f"{'rows':>8} {'MB':>6} {'x sha256 (median; runs)':<30} {'peak / input (runs)':<24}")
        times = {}
        for n in sizes:
            path = os.path.join(tmp, f"ledger-{n}.jsonl")
            with open(path, "wb") as out:
                subprocess.run([gen, str(n)], stdout=out, check=True)
            size = os.path.getsize(path)
            ratios, peaks, took = against_sha256([cli, "ledger", "verify", path], path, args.runs)
            times[n] = statistics.median(took)
            print(f"{n:>8} {size / 1e6:>6.1f} {statistics.median(ratios):>5.2f}  "
                  f"({', '.join(f'{r:.2f}' for r in ratios)}){'':<6}"
                  f"{statistics.median(peaks) / size:>4.2f}  "
                  f"({', '.join(f'{m / size:.2f}' for m in peaks)})", flush=True)
        if args.scale:
            print(f"\ngrowth from {sizes[1]} to {sizes[0]} rows (time ratio; linear is "
                  f"{args.scale}): {times[sizes[0]] / times[sizes[1]]:.1f}")


if __name__ == "__main__":
    main()
