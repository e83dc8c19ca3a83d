#!/usr/bin/env python3
"""Two other compaction libraries, run for real on recorded runs and priced beside cutctx.

For each run (the long coding-agent runs of ../shared/realworld/long-runs and the first 25
tau-bench runs of ../shared/realworld/tau-bench, in file order) and each window (70%, 50%, 30%
of the run's final size), every call of the run is handed to each peer's own library call, as a
stateless client would make it: call k sends the messages before the k-th model turn (the call
points of `cutctx replay`), each call compacted on its own, given the window as its budget where
the call takes one. The request the peer returns is written, one JSON line per call, to a
temporary folder, and `cutctx replay --external NAME=FILE` prices those requests with the same
cache model, marks and warm prefix as its own strategies (none, stateless `cutctx compact`,
session). It prints, per corpus and window, each strategy's cost over the runs' summed cost of
sending everything, and what the replay's JSON reports of it (cache hits, busts, calls over the
window, retention).

The peers, each in its own venv (scripts/peers-bench.sh makes them, pinned, and runs this):
  headroom  headroom-ai's `headroom.compress(messages, model=..., model_limit=WINDOW)`, its
            default configuration; its ML text compressor needs a model download and ONNX
            Runtime, neither of which the venv has, so headroom runs its offline path.
  llmtrim   llmtrim's `llmtrim.compress(request_json, None, None)`: provider auto-detected,
            no preset (the defaults of its CLI; no config file, no LLMTRIM_* variables). It
            takes no input budget, so its requests are the same at every window.
Each peer runs in a child process with a clean environment: a fresh HOME and TMPDIR, every
proxy variable pointed at 127.0.0.1:9 (nothing listens: any connection is refused at once),
HEADROOM_OFFLINE=1, HF_HUB_OFFLINE=1, PYTHONHASHSEED=0.

    scripts/peers-bench.sh [options]                      # makes the venvs, then runs this
    scripts/peers-bench.py --headroom-python H --llmtrim-python L [--cli target/release/cutctx]
        [--shared ../shared] [--tau-runs 25] [--fractions 0.7 0.5 0.3] [--keep DIR]
        [--dump-only] [--check-isolation] [--markdown] [-- extra cutctx replay options]

--check-isolation makes each run's middle and last call again alone, in a fresh process, and
fails unless the request is byte-identical. --dump-only writes the peers' requests (into
--keep DIR) without pricing them, for a CLI without `replay --external`; the window each peer is
given is then cutctx's own when the CLI can say it (`replay --json`), else estimated at four
characters a token (and said so).
"""

import argparse
import copy
import json
import os
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FRACTIONS = [0.7, 0.5, 0.3]
PEERS = ["headroom", "llmtrim"]
ORDER = ["none", "stateless", "session"]


# ---------------------------------------------------------------- the worker (in a peer's venv)

def call_points(messages):
    """The length of the list sent at each call: the index of every model turn that follows a
    turn of another kind (as `cutctx replay` counts calls in the OpenAI Chat format)."""
    points, previous = [], False
    for i, m in enumerate(messages):
        model = isinstance(m, dict) and m.get("role") == "assistant"
        if model and not previous:
            points.append(i)
        previous = model
    return points


def peer_call(peer):
    """The peer's library call: (request, window) -> the request it would send."""
    if peer == "headroom":
        import headroom

        def call(request, window):
            result = headroom.compress(copy.deepcopy(request["messages"]),
                                       model=request.get("model", ""), model_limit=window)
            out = dict(request)
            out["messages"] = result.messages
            return out
        return call
    if peer == "llmtrim":
        import llmtrim

        def call(request, _window):
            return json.loads(llmtrim.compress(json.dumps(request), None, None).request_json)
        return call
    raise SystemExit(f"unknown peer {peer}")


def worker(args):
    """Writes, for each job of the job file, one line per call: the peer's request."""
    import logging
    logging.disable(logging.WARNING)  # the peers' notices about their offline fallbacks
    call = peer_call(args.worker)
    with open(args.jobs) as f:
        jobs = json.load(f)
    for job in jobs:
        with open(job["run"]) as f:
            run = json.load(f)
        points = call_points(run["messages"])
        if job.get("calls") is not None:
            points = [points[k] for k in job["calls"]]
        tmp = job["out"] + ".part"
        with open(tmp, "w") as out:
            for n in points:
                request = dict(run)
                request["messages"] = run["messages"][:n]
                out.write(json.dumps(call(request, job["window"]), ensure_ascii=False,
                                     separators=(",", ":")) + "\n")
        os.replace(tmp, job["out"])
    return 0


# ---------------------------------------------------------------- the driver

def runs(shared, tau_runs, tmp):
    """[(corpus, name, path)]: the long runs as they are, the tau-bench runs written as
    requests the way scripts/replay-tau-bench.py writes them."""
    out = []
    long_dir = os.path.join(shared, "realworld", "long-runs")
    if os.path.isdir(long_dir):
        for name in sorted(os.listdir(long_dir)):
            if name.endswith(".chat.json"):
                out.append(("long-runs", name[: -len(".chat.json")], os.path.join(long_dir, name)))
    else:
        print(f"skipped: {long_dir} is absent", file=sys.stderr)
    tau = os.path.join(shared, "realworld", "tau-bench")
    if tau_runs and os.path.exists(os.path.join(tau, "gpt-4o-airline.json")):
        with open(os.path.join(tau, "gpt-4o-airline.json")) as f:
            trajs = json.load(f)
        with open(os.path.join(tau, "airline_tools.json")) as f:
            tools = json.load(f)
        os.makedirs(os.path.join(tmp, "tau-bench"), exist_ok=True)
        for i, run in enumerate(trajs[:tau_runs]):
            name = f"tau-bench-{i:03d}"
            path = os.path.join(tmp, "tau-bench", name + ".json")
            with open(path, "w") as f:
                json.dump({"model": "gpt-4o", "messages": run["traj"], "tools": tools}, f)
            out.append(("tau-bench", name, path))
    elif tau_runs:
        print(f"skipped: {tau} is absent", file=sys.stderr)
    return out


def replay(cli, path, fraction, extra, externals=()):
    # Anthropic's prices for every run, as the published tables say (the replay's default picks
    # the run's model's table, OpenAI's for the tau-bench gpt-4o runs).
    argv = [cli, "replay", "--format", "openai-chat", "--window-fraction", str(fraction),
            "--warm-prefix", "--json", "--pricing", "anthropic"]
    for name, file in externals:
        argv += ["--external", f"{name}={file}"]
    out = subprocess.run([*argv, *extra, path], capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} {path}: exit {out.returncode}: {out.stderr.strip()}")
    return json.loads(out.stdout)


def has_external(cli):
    if not os.path.exists(cli):
        return False
    out = subprocess.run([cli, "replay", "--help"], capture_output=True, text=True)
    return "--external" in out.stdout


def peer_env(home):
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": home, "TMPDIR": home,
           "XDG_CONFIG_HOME": os.path.join(home, ".config"), "PYTHONHASHSEED": "0",
           "HEADROOM_OFFLINE": "1", "HF_HUB_OFFLINE": "1", "LLMTRIM_NO_UPDATE_CHECK": "1",
           "NO_PROXY": "", "no_proxy": ""}
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        env[var] = "http://127.0.0.1:9"
    return env


def run_worker(python, peer, jobs, tmp, tag):
    """Runs one worker process over `jobs` in a fresh HOME."""
    home = tempfile.mkdtemp(prefix=f"home-{peer}-", dir=tmp)
    jobs_file = os.path.join(tmp, f"jobs-{peer}-{tag}.json")
    with open(jobs_file, "w") as f:
        json.dump(jobs, f)
    out = subprocess.run([python, os.path.abspath(__file__), "--worker", peer, "--jobs", jobs_file],
                         env=peer_env(home), capture_output=True, text=True, timeout=1800)
    if out.returncode != 0:
        raise RuntimeError(f"{peer} worker ({tag}) exit {out.returncode}: {out.stderr.strip()[-2000:]}")
    shutil.rmtree(home, ignore_errors=True)


def isolation(args, pythons, work, scratch):
    """Each run's middle and last call made again alone, in a process of its own: the line must
    be byte-identical to the one made in turn with the run's other calls (the peers keep no
    state between calls that changes what they send)."""
    checks = []
    for peer, job in work:
        with open(job["out"]) as f:
            lines = f.read().splitlines()
        for k in sorted({len(lines) // 2, len(lines) - 1}):
            out = os.path.join(scratch, f"alone-{len(checks)}.jsonl")
            checks.append((peer, {**job, "calls": [k], "out": out}, lines[k]))
    with ThreadPoolExecutor(max_workers=2) as pool:
        list(pool.map(lambda c: run_worker(pythons[c[0]], c[0], [c[1]], scratch,
                                           os.path.basename(c[1]["out"])), checks))
    differ = 0
    for peer, job, line in checks:
        with open(job["out"]) as f:
            if f.read().rstrip("\n") != line:
                differ += 1
                print(f"isolation: {peer} {os.path.basename(job['run'])} call {job['calls'][0]} "
                      "differs when made alone", file=sys.stderr)
    print(f"isolation: {len(checks) - differ} of {len(checks)} calls made alone identical",
          file=sys.stderr)
    if differ:
        sys.exit(1)


def estimated_window(path, fraction):
    with open(path) as f:
        return int(len(f.read()) / 4 * fraction)


def total(results):
    """Sums the replays' strategies by name, in the order the JSON names them."""
    sums, order = {}, []
    for r in results:
        for s in r["strategies"]:
            name = s["name"]
            if name not in sums:
                order.append(name)
                sums[name] = {"cost": 0.0, "sent": 0, "cached": 0, "busts": 0, "over": 0,
                              "stuck": 0, "calls": 0, "ret": {}, "ret_calls": 0, "counts": {}}
            t = sums[name]
            t["cost"] += s.get("cost_units", 0.0)
            t["sent"] += s.get("tokens_sent", 0)
            t["cached"] += s.get("cached_tokens", 0)
            t["busts"] += s.get("busts", 0)
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
    ranked = [n for n in ORDER if n in sums] + [n for n in order if n not in ORDER]
    return ranked, sums


# Retention figures that are counts of calls, summed over the runs rather than weighted.
COUNTS = {"users_cannot_fit"}


def table(title, results, markdown):
    names, sums = total(results)
    none = sums.get("none", {}).get("cost", 0.0)
    keys = []
    for n in names:
        keys += [k for k in sums[n]["ret"] if k not in keys]
    counts = sorted({k for n in names for k in sums[n]["counts"]})
    head = (["strategy", "cost/none", "cache hit", "busts", "over window", "untouchable over",
             "calls"] + keys + counts)
    rows = []
    for n in names:
        t = sums[n]
        row = [n, f"{t['cost'] / none:.3f}" if none else "-",
               f"{t['cached'] / t['sent']:.3f}" if t["sent"] else "-",
               str(t["busts"]), str(t["over"]), str(t["stuck"]), str(t["calls"])]
        row += [f"{t['ret'][k] / t['ret_calls']:.3f}" if t["ret_calls"] and k in t["ret"] else "-"
                for k in keys]
        row += [str(t["counts"].get(k, 0)) for k in counts]
        rows.append(row)
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


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--worker", choices=PEERS, help=argparse.SUPPRESS)
    parser.add_argument("--jobs", help=argparse.SUPPRESS)
    parser.add_argument("--cli", default=os.path.join(ROOT, "target", "release", "cutctx"))
    parser.add_argument("--shared", default=os.path.join(ROOT, "..", "shared"))
    parser.add_argument("--headroom-python")
    parser.add_argument("--llmtrim-python")
    parser.add_argument("--tau-runs", type=int, default=25)
    parser.add_argument("--fractions", type=float, nargs="+", default=FRACTIONS)
    parser.add_argument("--keep", help="write the peers' requests here (kept)")
    parser.add_argument("--dump-only", action="store_true")
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument("--check-isolation", action="store_true",
                        help="remake each run's middle and last call alone and compare")
    parser.add_argument("extra", nargs="*")
    args = parser.parse_args()
    if args.worker:
        return worker(args)
    pythons = {"headroom": args.headroom_python, "llmtrim": args.llmtrim_python}
    peers = [p for p in PEERS if pythons[p]]
    if not peers:
        sys.exit("no peer: pass --headroom-python and/or --llmtrim-python (scripts/peers-bench.sh does)")
    priced = has_external(args.cli)
    if not priced and not args.dump_only:
        sys.exit(f"{args.cli} has no `replay --external` (or is absent): "
                 "build it, or pass --dump-only (with --keep DIR) to write the peers' requests only")
    scratch = tempfile.mkdtemp(prefix="peers-bench-")
    try:
        out_dir = args.keep or os.path.join(scratch, "requests")
        os.makedirs(out_dir, exist_ok=True)
        todo = runs(args.shared, args.tau_runs, scratch)
        if not todo:
            return 0
        cli_ok = os.path.exists(args.cli)
        jobs = [(corpus, name, path, f) for corpus, name, path in todo for f in args.fractions]
        # The window each peer is given: cutctx's own for that run and fraction.
        with ThreadPoolExecutor(max_workers=2) as pool:
            windows = list(pool.map(
                lambda j: replay(args.cli, j[2], j[3], args.extra)["window"] if cli_ok
                else estimated_window(j[2], j[3]), jobs))
        if not cli_ok:
            print("windows ESTIMATED at four characters a token (no CLI)", file=sys.stderr)
        files = {}
        work = []
        for (corpus, name, path, f), window in zip(jobs, windows):
            for peer in peers:
                # llmtrim takes no budget: one set of requests serves every window.
                tag = "all" if peer == "llmtrim" else f"{round(f * 100)}"
                out = os.path.join(out_dir, f"{name}.{peer}.w{tag}.jsonl")
                files[(name, f, peer)] = out
                if peer == "llmtrim" and f != args.fractions[0]:
                    continue
                work.append((peer, {"run": path, "window": window, "out": out}))
        # One worker process per peer and run (its windows in turn), two at a time.
        groups = {}
        for peer, job in work:
            groups.setdefault((peer, job["run"]), []).append(job)
        with ThreadPoolExecutor(max_workers=2) as pool:
            list(pool.map(lambda kv: run_worker(pythons[kv[0][0]], kv[0][0], kv[1], scratch,
                                                os.path.basename(kv[0][1])), groups.items()))
        print(f"{len(todo)} runs; peer requests in {out_dir}", file=sys.stderr)
        if args.check_isolation:
            isolation(args, pythons, work, scratch)
        if not priced:
            print(f"not priced: {args.cli} has no `replay --external`", file=sys.stderr)
            return 0
        with ThreadPoolExecutor(max_workers=2) as pool:
            results = list(pool.map(
                lambda j: replay(args.cli, j[2], j[3], args.extra,
                                 [(p, files[(j[1], j[3], p)]) for p in peers]), jobs))
        by = {}
        for (corpus, name, path, f), r in zip(jobs, results):
            by.setdefault((corpus, f), []).append(r)
            by.setdefault(("all", f), []).append(r)
        counts = {c: sum(1 for t in todo if t[0] == c) for c in ("long-runs", "tau-bench")}
        counts["all"] = len(todo)
        extra = "".join(" " + e for e in args.extra)
        print(f"{len(todo)} runs ({counts['long-runs']} long, {counts['tau-bench']} tau-bench), "
              f"--warm-prefix{extra}; costs summed over the runs; retention "
              "weighted by calls")
        for corpus in ("long-runs", "tau-bench", "all"):
            for f in args.fractions:
                if (corpus, f) in by:
                    table(f"{corpus} ({counts[corpus]} runs), window {f:.0%}", by[(corpus, f)],
                          args.markdown)
        return 0
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
