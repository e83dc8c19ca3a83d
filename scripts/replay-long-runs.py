#!/usr/bin/env python3
"""Replays every long coding-agent run with `cutctx replay --compare` and prints the corpus table.

Each run of ../shared/realworld/long-runs (a Chat Completions request holding the whole run) is
replayed warm (`--warm-prefix`: the tools and system prompt cached before the first call) at
windows of 50% and 30% of its final size, with `--compare`, which adds the peer strategies and
the dynamic-programming reference to none, stateless and session. Per strategy, summed over the
runs: cost over none's, over stateless's and over session's; the cache-hit rate; the calls sent
over the window, and those whose untouchable part alone is over it (no strategy can fit them);
the retention figures the JSON gives (weighted by calls; counts, such as `users_cannot_fit`,
summed). The lower bound the replay computes
per run is printed under each table, over none's cost. A strategy the script does not know is
printed all the same, under the name the JSON gives it. Usage:

    scripts/replay-long-runs.py [--cli target/release/cutctx] [--shared ../shared]
                                [--fractions 0.5 0.3] [--markdown] [-- extra cutctx replay options]
"""

import argparse
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FRACTIONS = [0.5, 0.3]
ORDER = ["none", "stateless", "session"]


def replay(cli, path, fraction, extra):
    argv = [cli, "replay", "--format", "openai-chat", "--window-fraction", str(fraction),
            "--compare", "--warm-prefix", "--json", *extra, path]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: exit {out.returncode}: {out.stderr.strip()}")
    return json.loads(out.stdout)


def total(results):
    """Sums the replays' strategies by name: none, stateless, session first, then the others
    in the order the JSON names them."""
    sums, order = {}, []
    for r in results:
        for s in r["strategies"]:
            name = s["name"]
            if name not in sums:
                order.append(name)
                sums[name] = {"cost": 0.0, "sent": 0, "cached": 0, "over": 0, "stuck": 0,
                              "calls": 0, "ret": {}, "ret_calls": 0, "counts": {}}
            t = sums[name]
            t["cost"] += s.get("cost_units", 0.0)
            t["sent"] += s.get("tokens_sent", 0)
            t["cached"] += s.get("cached_tokens", 0)
            t["over"] += s.get("over_window", 0)
            t["stuck"] += s.get("untouchable_over", s.get("fixed_over", 0))
            t["calls"] += s.get("calls", 0)
            ret = s.get("retention")
            if isinstance(ret, dict):
                t["ret_calls"] += s.get("calls", 0)
                for k, v in ret.items():
                    if k in COUNTS:
                        t["counts"][k] = t["counts"].get(k, 0) + v
                    elif isinstance(v, (int, float)):
                        t["ret"][k] = t["ret"].get(k, 0.0) + v * s.get("calls", 0)
    return [n for n in ORDER if n in sums] + [n for n in order if n not in ORDER], sums


# Retention figures that are counts of calls, summed over the runs rather than weighted.
COUNTS = {"users_cannot_fit"}


def table(title, results, markdown):
    names, sums = total(results)
    base = {n: sums[n]["cost"] for n in ORDER if n in sums}
    keys = []
    for n in names:
        keys += [k for k in sums[n]["ret"] if k not in keys]
    ratio = lambda a, n: f"{a / base[n]:.3f}" if base.get(n) else "-"
    counts = sorted({k for n in names for k in sums[n]["counts"]})
    head = (["strategy", "cost/none", "cost/stateless", "cost/session", "cache hit",
             "over window", "untouchable over", "calls"] + keys + counts)
    rows = []
    for n in names:
        t = sums[n]
        rows.append([n, ratio(t["cost"], "none"), ratio(t["cost"], "stateless"),
                     ratio(t["cost"], "session"),
                     f"{t['cached'] / t['sent']:.3f}" if t["sent"] else "-",
                     str(t["over"]), str(t["stuck"]), str(t["calls"])]
                    + [f"{t['ret'][k] / t['ret_calls']:.3f}" if t["ret_calls"] and k in t["ret"]
                       else "-" for k in keys]
                    + [str(t["counts"].get(k, 0)) for k in counts])
    bound = sum(r.get("bound_units", 0.0) for r in results)
    print()
    print(title)
    if markdown:
        print("| " + " | ".join(head) + " |")
        print("|---|" + "---:|" * (len(head) - 1))
        for row in rows:
            print("| " + " | ".join(row) + " |")
        print()
        print(f"Lower bound: {ratio(bound, 'none')} of none's cost.")
    else:
        widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
        for row in [head, *rows]:
            print("  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                            for i, (c, w) in enumerate(zip(row, widths))))
        print(f"lower bound: {ratio(bound, 'none')} of none")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--cli", default=os.path.join(ROOT, "target", "release", "cutctx"))
    parser.add_argument("--shared", default=os.path.join(ROOT, "..", "shared"))
    parser.add_argument("--fractions", type=float, nargs="+", default=FRACTIONS)
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument("extra", nargs="*")
    args = parser.parse_args()
    folder = os.path.join(args.shared, "realworld", "long-runs")
    if not os.path.isdir(folder):
        print(f"skipped: {folder} is absent", file=sys.stderr)
        return 0
    paths = [os.path.join(folder, n) for n in sorted(os.listdir(folder)) if n.endswith(".chat.json")]
    extra = "".join(" " + e for e in args.extra)
    print(f"{len(paths)} long runs, --compare --warm-prefix{extra}; costs summed "
          "over the runs; retention weighted by calls")
    for fraction in args.fractions:
        with ThreadPoolExecutor(max_workers=2) as pool:
            results = list(pool.map(lambda p: replay(args.cli, p, fraction, args.extra), paths))
        table(f"window {fraction:.0%}", results, args.markdown)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (RuntimeError, subprocess.TimeoutExpired) as e:
        sys.exit(f"replay-long-runs: {e}")
