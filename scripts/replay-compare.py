#!/usr/bin/env python3
"""Replays every run of a corpus with `cutctx replay --compare --json` at the given windows and
prints, per window, each strategy's cost summed over the runs, its ratio to the session's, and
its retention averaged over the runs: needed identifiers sent verbatim (recall) and behind a
digest, all identifiers, the task statement, the latest user message, the recent results;
then the session's ratios to stateless, none, hindsight and the cheapest peer recalling at
least as much, and per run any strategy cheaper than the session with a higher recall.

    python3 scripts/replay-compare.py --cli target/release/cutctx \
        ../shared/realworld/long-runs --fractions 0.5 0.3 -- --warm-prefix
    python3 scripts/replay-compare.py --cli target/release/cutctx \
        data/heldout --fractions 0.5 0.3 -- --warm-prefix      # the held-out set

With `--summary-json FILE` the figures are also written as JSON (per window, per strategy:
cost, its ratio to the session's, and the retention averages), which
`scripts/frontier-chart.py` draws.

A corpus is tau-bench's folder, or a folder of runs named `*.chat.json`, `*.responses.json` or
`*.anthropic.json` (each optionally `.gz`), each replayed in the format its name says.

Standard library only; the figures go in docs/SESSIONS.md.
"""

import argparse
import gzip
import json
import pathlib
import subprocess
import sys
import tempfile

PEERS = ["claude-code", "codex", "openhands", "clear-tool-uses", "server-compaction", "deep-agents"]


RETENTION = ["needed", "needed_behind_digest", "identifiers", "task_intact", "latest_user",
             "users_where_they_fit", "recent_results"]

FORMATS = {".chat.json": "openai-chat", ".responses.json": "openai-responses",
           ".anthropic.json": "anthropic"}


def format_of(run):
    """The format a run's file name says (`NAME.chat.json`, `.responses.json`, `.anthropic.json`)."""
    name = run.name
    return next(f for suffix, f in FORMATS.items() if name.endswith(suffix))


def replay(cli, run, fraction, extra):
    out = subprocess.run(
        [cli, "replay", "--format", format_of(run), "--window-fraction", str(fraction),
         "--compare", "--json", *extra, str(run)],
        check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", required=True)
    ap.add_argument("corpus")
    ap.add_argument("--fractions", type=float, nargs="+", default=[0.5, 0.3])
    ap.add_argument("--every", type=int, default=1, help="take every n-th run")
    ap.add_argument("--summary-json", help="also write the figures as JSON to this file")
    argv = sys.argv[1:]
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    args = ap.parse_args(argv[:argv.index("--")] if "--" in argv else argv)
    args.extra = extra
    corpus = pathlib.Path(args.corpus)
    tmp = tempfile.TemporaryDirectory()
    if (corpus / "gpt-4o-airline.json").exists():
        # tau-bench: each run's body is {"model", "messages": traj, "tools": airline_tools}.
        tools = json.loads((corpus / "airline_tools.json").read_text())
        runs = []
        for i, run in enumerate(json.loads((corpus / "gpt-4o-airline.json").read_text())):
            path = pathlib.Path(tmp.name) / f"run{i:03}.chat.json"
            path.write_text(json.dumps({"model": "gpt-4o", "messages": run["traj"], "tools": tools}))
            runs.append(path)
        runs = runs[::args.every]
    else:
        runs = []
        for path in sorted(p for p in corpus.iterdir() if p.is_file()):
            name = path.name.removesuffix(".gz")
            if not any(name.endswith(suffix) for suffix in FORMATS):
                continue
            if path.name.endswith(".gz"):
                plain = pathlib.Path(tmp.name) / name
                plain.write_bytes(gzip.decompress(path.read_bytes()))
                path = plain
            runs.append(path)
        runs = runs[::args.every]
    summary = {"corpus": corpus.name, "runs": len(runs), "windows": {}}
    for fraction in args.fractions:
        totals, retention, over, bound, cannot = {}, {}, {}, 0.0, {}
        dominated, cheaper_recalling = [], []
        for run in runs:
            v = replay(args.cli, run, fraction, args.extra)
            by = {s["name"]: s for s in v["strategies"]}
            me = by["session"]
            for name, s in by.items():
                if name == "session" or s["fitting_over"] != 0 or s["cost_units"] >= me["cost_units"] \
                        or s["retention"]["needed"] <= me["retention"]["needed"]:
                    continue
                line = (f"{run.name}: {name} {s['cost_units']:.0f} < {me['cost_units']:.0f}, "
                        f"recall {s['retention']['needed']:.3f} > {me['retention']['needed']:.3f}")
                (dominated if name in PEERS else cheaper_recalling).append(line)
            bound += v["bound_units"]
            for s in v["strategies"]:
                totals[s["name"]] = totals.get(s["name"], 0.0) + s["cost_units"]
                over[s["name"]] = over.get(s["name"], 0) + s["fitting_over"]
                cannot[s["name"]] = cannot.get(s["name"], 0) + s["retention"]["users_cannot_fit"]
                r = retention.setdefault(s["name"], [0.0] * len(RETENTION))
                for i, k in enumerate(RETENTION):
                    r[i] += s["retention"][k] / len(runs)
        session = totals["session"]
        summary["windows"][f"{fraction}"] = {
            name: {"cost_units": cost, "per_session": cost / session, "over": over[name],
                   **{k: retention[name][i] for i, k in enumerate(RETENTION)}}
            for name, cost in totals.items()}
        print(f"window {fraction:.0%} of each run's final size, {len(runs)} runs; bound {bound:,.0f} units")
        print("| strategy | cost (units) | / session | recall | behind a digest | identifiers | task | latest user "
              "| both, where they fit | recent | calls over the window (untouchable fits) |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for name, cost in totals.items():
            cells = " | ".join(f"{x:.3f}" for x in retention[name])
            print(f"| {name} | {cost:,.0f} | {cost / session:.3f} | {cells} | {over[name]} |")
        si = retention["session"][0]
        peers = [p for p in PEERS if p in totals and retention[p][0] >= si]
        cheapest = min(peers, key=lambda p: totals[p]) if peers else None
        line = (f"session / stateless {session / totals['stateless']:.3f}; / none {session / totals['none']:.3f}; "
                f"/ hindsight {session / totals['hindsight']:.3f}; / bound {session / bound:.3f}")
        if cheapest:
            line += f"; / cheapest peer recalling as much ({cheapest}) {session / totals[cheapest]:.3f}"
        print(line)
        print(f"calls where the task and the latest user message cannot fit the window together: {cannot['session']}")
        print(f"runs where a peer within the window is cheaper and recalls more: {len(dominated)}")
        for d in dominated:
            print("  " + d)
        print(f"runs where another strategy within the window is cheaper and recalls more: {len(cheaper_recalling)}")
        for d in cheaper_recalling:
            print("  " + d)
        print()
    if args.summary_json:
        pathlib.Path(args.summary_json).write_text(json.dumps(summary, indent=1) + "\n")


if __name__ == "__main__":
    sys.exit(main())
