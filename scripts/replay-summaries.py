#!/usr/bin/env python3
"""What the summaries cost on the long runs: each firing's summaries asked as a cached-prefix
request against the same summaries asked fresh, and each strategy's cost with its summaries
charged against free.

Every run of ../shared/realworld/long-runs is replayed as scripts/replay-long-runs.py replays it
(`cutctx replay --compare --warm-prefix --json`, windows of 50% and 30% of the run's final size;
options after `--` are passed on, e.g. `-- --policy summarizing` so that the session
summarizes). From the JSON's `summary_firings` (per firing: `cached_prefix` and `fresh`, each
with its `units`, in base-input-token units) and per strategy `cost_units` and
`summaries_free_units`, it prints per window:

* the session, run by run and in total: its summarizing firings; the summaries' cost over those
  firings as cached-prefix requests and fresh (sum and median over the firings) and fresh over
  cached-prefix (of the sums, and the median of the firings' own); its cost with the summaries
  charged (as it asked them) and free, and charged over free;
* every strategy that summarized, over the runs: the same figures, and both costs over none's.

Usage:

    scripts/replay-summaries.py [--cli target/release/cutctx] [--shared ../shared]
                                [--fractions 0.5 0.3] [--markdown] [-- extra cutctx replay options]
"""

import argparse
import importlib.util
import os
import statistics
import sys
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_spec = importlib.util.spec_from_file_location(
    "replay_long_runs", os.path.join(ROOT, "scripts", "replay-long-runs.py"))
long_runs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(long_runs)


def figures(strategies):
    """Sums one strategy's firings and costs over a list of its JSON reports (one per run)."""
    cp, fresh, ratios = [], [], []
    asked = []
    cost = free = 0.0
    for s in strategies:
        for f in s.get("summary_firings", []):
            if f.get("cached_prefix") and f.get("fresh"):
                cp.append(f["cached_prefix"]["units"])
                fresh.append(f["fresh"]["units"])
                if f["cached_prefix"]["units"]:
                    ratios.append(f["fresh"]["units"] / f["cached_prefix"]["units"])
            if f["asked"] not in asked:
                asked.append(f["asked"])
        cost += s["cost_units"]
        free += s["summaries_free_units"]
    return {"firings": len(cp), "asked": "/".join(asked) or "-", "cp": sum(cp),
            "fresh": sum(fresh), "cp_med": statistics.median(cp) if cp else None,
            "fresh_med": statistics.median(fresh) if fresh else None,
            "ratio_med": statistics.median(ratios) if ratios else None,
            "cost": cost, "free": free}


def num(x, digits=0):
    return "-" if x is None else f"{x:,.{digits}f}"


def ratio(a, b):
    return f"{a / b:.3f}" if b else "-"


def show(title, head, rows, markdown):
    print()
    print(title)
    if markdown:
        print("| " + " | ".join(head) + " |")
        print("|---|" + "---:|" * (len(head) - 1))
        for row in rows:
            print("| " + " | ".join(row) + " |")
    else:
        widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
        for row in [head, *rows]:
            print("  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                            for i, (c, w) in enumerate(zip(row, widths))))


def row(name, f, extra=()):
    return [name, str(f["firings"]), num(f["cp"]), num(f["fresh"]), num(f["cp_med"]),
            num(f["fresh_med"]), ratio(f["fresh"], f["cp"]), num(f["ratio_med"], 3),
            num(f["cost"]), num(f["free"]),
            ratio(f["cost"], f["free"]), *extra]


HEAD = ["firings", "cached-prefix Σ", "fresh Σ", "cached-prefix median", "fresh median",
        "fresh/cached-prefix Σ", "fresh/cached-prefix median", "cost, charged", "cost, free",
        "charged/free"]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--cli", default=os.path.join(ROOT, "target", "release", "cutctx"))
    parser.add_argument("--shared", default=os.path.join(ROOT, "..", "shared"))
    parser.add_argument("--fractions", type=float, nargs="+", default=long_runs.FRACTIONS)
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument("extra", nargs="*")
    args = parser.parse_args()
    folder = os.path.join(args.shared, "realworld", "long-runs")
    if not os.path.isdir(folder):
        print(f"skipped: {folder} is absent", file=sys.stderr)
        return 0
    names = sorted(n for n in os.listdir(folder) if n.endswith(".chat.json"))
    paths = [os.path.join(folder, n) for n in names]
    extra = "".join(" " + e for e in args.extra)
    print(f"{len(paths)} long runs, --compare --warm-prefix{extra}; units are base-input "
          "tokens; medians over the firings")
    for fraction in args.fractions:
        with ThreadPoolExecutor(max_workers=2) as pool:
            results = list(pool.map(
                lambda p: long_runs.replay(args.cli, p, fraction, args.extra), paths))
        by_name = {}
        for r in results:
            for s in r["strategies"]:
                by_name.setdefault(s["name"], []).append(s)
        rows = []
        for n, r in zip(names, results):
            session = [s for s in r["strategies"] if s["name"] == "session"]
            rows.append(row(n.removesuffix(".chat.json"), figures(session)))
        rows.append(row("total", figures(by_name.get("session", []))))
        show(f"window {fraction:.0%}: the session, run by run", ["run", *HEAD], rows,
             args.markdown)
        none = figures(by_name.get("none", []))["cost"]
        rows = []
        for name, reports in by_name.items():
            f = figures(reports)
            if f["firings"]:
                cells = row(name, f, [ratio(f["cost"], none), ratio(f["free"], none)])
                rows.append([cells[0], f["asked"], *cells[1:]])
        show(f"window {fraction:.0%}: every strategy that summarized, over the runs",
             ["strategy", "asked", *HEAD, "charged/none", "free/none"], rows, args.markdown)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (RuntimeError, long_runs.subprocess.TimeoutExpired) as e:
        sys.exit(f"replay-summaries: {e}")
