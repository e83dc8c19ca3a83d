#!/usr/bin/env python3
"""Replays every tau-bench run with `cutctx replay` and prints the aggregate table.

Each run's request body is {"model": "gpt-4o", "messages": traj, "tools": airline_tools}; it is
replayed at windows of 70%, 50% and 35% of its final size (and 100%, where everything fits).
Costs are summed over the runs, per strategy; the ratios are session/stateless and
session/none, over all calls and over the "fitting" calls (those whose untouchable part, the
tools, system and protected recent turns, fits the window: the others are sent whole by every
strategy and counted under "untouchable over"); the cache-hit rates are given over all calls and
over the fitting calls alone. The last columns compare with the lower bound `cutctx replay`
computes per run (the least any strategy that stays under the window could pay, summed):
bound/stateless is the best session/stateless ratio any design could reach. Pass
`-- --warm-prefix` to start every run with its tools and system prompt cached. Usage:

    scripts/replay-tau-bench.py [--cli target/release/cutctx] [--pricing anthropic] [--runs N]
                                [-- extra cutctx replay options]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

SHARED = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "realworld", "tau-bench")
FRACTIONS = [1.0, 0.7, 0.5, 0.35]


def replay(cli, path, fraction, pricing, extra):
    out = subprocess.run(
        [cli, "replay", "--format", "openai-chat", path, "--window-fraction", str(fraction),
         "--pricing", pricing, "--json", *extra],
        check=True, capture_output=True, text=True,
    )
    return json.loads(out.stdout)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--cli", default="target/release/cutctx")
    parser.add_argument("--pricing", default="anthropic")
    parser.add_argument("--runs", type=int, default=None)
    parser.add_argument("extra", nargs="*")
    args = parser.parse_args()
    runs_path = os.path.join(SHARED, "gpt-4o-airline.json")
    if not os.path.exists(runs_path):
        print("skipped: ../shared/realworld/tau-bench is absent", file=sys.stderr)
        return 0
    with open(runs_path) as f:
        runs = json.load(f)
    with open(os.path.join(SHARED, "airline_tools.json")) as f:
        tools = json.load(f)
    runs = runs[: args.runs] if args.runs else runs
    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for i, run in enumerate(runs):
            path = os.path.join(tmp, f"run{i}.json")
            with open(path, "w") as f:
                json.dump({"model": "gpt-4o", "messages": run["traj"], "tools": tools}, f)
            paths.append(path)
        print(f"{len(paths)} runs, {args.pricing} prices")
        print(f"{'window':>6} {'s/stateless':>11} {'s/none':>7} {'stateless/none':>14} "
              f"{'fitting s/sl':>12} {'fitting s/none':>14} "
              f"{'hit none':>8} {'hit sl':>7} {'hit session':>11} "
              f"{'over sl':>7} {'over s':>6} {'untouchable over':>16} {'calls':>6} {'busts s':>7} "
              f"{'fitting hit none':>16} {'sl':>5} {'session':>7} "
              f"{'bound/sl':>8} {'bound/none':>10} {'s/bound':>7}")
        for fraction in FRACTIONS:
            with ThreadPoolExecutor(max_workers=2) as pool:
                results = list(pool.map(lambda p: replay(args.cli, p, fraction, args.pricing, args.extra), paths))
            total = {}
            bound = sum(r["bound_units"] for r in results)
            for r in results:
                for s in r["strategies"]:
                    t = total.setdefault(s["name"], {"cost": 0.0, "fit": 0.0, "sent": 0, "cached": 0,
                                                     "over": 0, "stuck": 0, "calls": 0, "busts": 0,
                                                     "fsent": 0, "fcached": 0})
                    t["cost"] += s["cost_units"]
                    t["fit"] += s["fitting_units"]
                    t["sent"] += s["tokens_sent"]
                    t["cached"] += s["cached_tokens"]
                    t["over"] += s["over_window"]
                    t["stuck"] += s["untouchable_over"]
                    t["calls"] += s["calls"]
                    t["busts"] += s["busts"]
                    t["fsent"] += s["fitting_tokens"]
                    t["fcached"] += s["fitting_cached"]
            hit = {n: t["cached"] / t["sent"] for n, t in total.items()}
            fhit = {n: t["fcached"] / t["fsent"] if t["fsent"] else float("nan") for n, t in total.items()}
            ratio = lambda a, b: a / b if b else 1.0
            print(f"{fraction:>6.0%} {ratio(total['session']['cost'], total['stateless']['cost']):>11.3f} "
                  f"{ratio(total['session']['cost'], total['none']['cost']):>7.3f} "
                  f"{ratio(total['stateless']['cost'], total['none']['cost']):>14.3f} "
                  f"{ratio(total['session']['fit'], total['stateless']['fit']):>12.3f} "
                  f"{ratio(total['session']['fit'], total['none']['fit']):>14.3f} "
                  f"{hit['none']:>8.3f} {hit['stateless']:>7.3f} {hit['session']:>11.3f} "
                  f"{total['stateless']['over']:>7} {total['session']['over']:>6} "
                  f"{total['session']['stuck']:>16} {total['session']['calls']:>6} {total['session']['busts']:>7} "
                  f"{fhit['none']:>16.3f} {fhit['stateless']:>5.3f} {fhit['session']:>7.3f} "
                  f"{ratio(bound, total['stateless']['cost']):>8.3f} {ratio(bound, total['none']['cost']):>10.3f} "
                  f"{ratio(total['session']['cost'], bound):>7.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
