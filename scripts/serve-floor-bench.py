"""What `cutctx serve` adds to a call that does not fire, against the floor, on the request a
coding agent sends after a long task; and the same for an earlier build, in the same sitting.

    python3 scripts/serve-floor-bench.py [--cli target/release/cutctx] [--before OLD_CUTCTX]
        [--floor target/release/examples/floor] [--rounds 3] [--calls-1 40] [--calls-64 4]
        [--messages 150] [--state sqlite|memory]

One run, one machine, loopback only. The provider is the tests' fake
(crates/cutctx-serve/tests/sdk/fake_upstream.py, keeping no records). Each conversation is an
Anthropic Messages request shaped as Claude Code's after a long task: 12 tools, a 7 KB system
prompt, `--messages` messages (tool calls and their results, about 400 KB in all at 150), its
session id in `metadata.user_id` as Claude Code writes it, and two more messages (a call and its
result) at every call. The proxies are started with a window
the requests fit, so nothing fires: every call is a session step and a byte-for-byte forward.

Modes, each round's back to back so that the machine's drift touches them alike: straight to
the fake (`direct`); through the floor (`cargo build --release -p cutctx-serve --example
floor`: a bare pass-through proxy on the same hyper stack that parses and counts each request
once); through `cutctx serve` (SQLite state, the default; its log in a file, as a deployment
keeps it); and, with `--before`, through an earlier build. A request's added latency is its time through a proxy minus the same request's
time straight to the fake in the same round; the table gives p50 and p99 of those at 1 and 64
concurrent conversations, and each proxy's as a ratio to the floor's.

Nothing here is a test: the figures go in docs/BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_spec = importlib.util.spec_from_file_location("serve_bench", os.path.join(ROOT, "scripts", "serve-bench.py"))
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)

MODEL = "claude-bench"
WINDOW = 2_000_000


def tools():
    """12 tool definitions with schemas of a coding agent's size."""
    out = []
    for i in range(12):
        props = {f"arg_{j}": {"type": "string", "description": f"argument {j} of tool {i}: " + "what it names. " * 6}
                 for j in range(8)}
        out.append({"name": f"tool_{i}", "description": f"Tool {i}. " + "It does one thing well. " * 20,
                    "input_schema": {"type": "object", "properties": props, "required": ["arg_0"]}})
    return out


def file_view(seed, n, size=4_600):
    lines = []
    while sum(len(x) + 1 for x in lines) < size:
        k = len(lines)
        lines.append(f"{k:5d}  def function_{seed}_{n}_{k}(value): return value * {k}  # step {n}")
    return "\n".join(lines)[:size]


def conversation(seed, conv, calls, messages):
    """The bodies of one conversation: `messages` messages, then a tool call and its result
    more at every call."""
    system = [{"type": "text", "text": f"You are a coding agent ({seed}-{conv}). " + "Follow the rules. " * 380}]
    history = [{"role": "user", "content": f"Fix the failing test in module {seed}-{conv}."}]
    n = 0

    def pair(n):
        use = {"role": "assistant", "content": [
            {"type": "text", "text": f"Reading file {n}."},
            {"type": "tool_use", "id": f"toolu_{conv:03d}_{n:05d}", "name": f"tool_{n % 12}",
             "input": {"arg_0": f"src/file_{n}.py"}}]}
        result = {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": f"toolu_{conv:03d}_{n:05d}",
             "content": file_view(f"{seed}{conv}", n)}]}
        return [use, result]

    while len(history) + 2 <= messages:
        history += pair(n)
        n += 1
    spec = tools()
    # As Claude Code names its conversation (the proxy reads the session id in it).
    session = f"{seed}-{conv}".replace("_", "-")
    metadata = {"user_id": json.dumps({"device_id": "bench", "account_uuid": "bench", "session_id": session})}
    bodies = []
    for _ in range(calls):
        bodies.append(json.dumps({"model": MODEL, "max_tokens": 4096, "system": system,
                                  "tools": spec, "messages": history, "metadata": metadata}).encode())
        history = history + pair(n)
        n += 1
    return bodies


def started_logging(argv, prefix, log, timeout=30.0):
    """Start `cutctx serve` with its log (standard error) in the file `log`, as a deployment
    keeps it, rather than in a pipe this process must drain: (process, port)."""
    import subprocess
    import time
    with open(log, "wb") as out:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=out)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with open(log, "rb") as f:
            for line in f:
                if line.decode(errors="replace").startswith(prefix):
                    return proc, int(line.decode().strip().rsplit(":", 1)[1])
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    proc.kill()
    sys.exit(f"{argv[0]} did not start; see {log}")


def run(port, workload, mode):
    return bench.run(port, workload, "sk-bench", mode, path="/v1/messages")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cli", default=os.path.join(ROOT, "target", "release", "cutctx"))
    parser.add_argument("--before", help="an earlier cutctx binary, measured alike")
    parser.add_argument("--floor", default=os.path.join(ROOT, "target", "release", "examples", "floor"))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--calls-1", type=int, default=40)
    parser.add_argument("--calls-64", type=int, default=4)
    parser.add_argument("--messages", type=int, default=150)
    parser.add_argument("--state", choices=["sqlite", "memory"], default="sqlite",
                        help="the proxies' session store (default sqlite, the shipped default)")
    args = parser.parse_args()
    for path in (args.cli, args.floor, *([args.before] if args.before else [])):
        if not os.path.exists(path):
            sys.exit(f"no binary at {path}: cargo build --release -p cutctx-cli && "
                     "cargo build --release -p cutctx-serve --example floor")
    work = tempfile.mkdtemp(prefix="serve-floor-bench.")
    procs = []
    try:
        fake, fake_port = bench.started([sys.executable, bench.FAKE, "0", "--no-records"],
                                        "fake upstream: listening on")
        procs.append(fake)
        upstream = f"http://127.0.0.1:{fake_port}"
        floor, floor_port = bench.started([args.floor, upstream], "floor: listening on")
        procs.append(floor)
        ports = {"direct": fake_port, "floor": floor_port}
        builds = {"after": args.cli, **({"before": args.before} if args.before else {})}
        for name, cli in builds.items():
            copy = os.path.join(work, f"cutctx-{name}")
            shutil.copy2(cli, copy)
            proc, port = started_logging(
                [copy, "serve", "--listen", "127.0.0.1:0", "--anthropic-upstream", upstream,
                 "--window", str(WINDOW), "--state",
                 "memory" if args.state == "memory" else f"sqlite:{os.path.join(work, name + '.db')}"],
                "cutctx serve: listening on", os.path.join(work, f"{name}.log"))
            procs.append(proc)
            ports[name] = port
        size = len(conversation("size", 0, 1, args.messages)[0])
        print(f"request: {size} bytes at {args.messages} messages")
        for mode, port in ports.items():
            run(port, [conversation("warm", 0, 3, args.messages)], mode)
        table = []
        for concurrency, calls in ((1, args.calls_1), (64, args.calls_64)):
            times = {mode: {} for mode in ports}
            for r in range(args.rounds):
                workload = [conversation(f"c{concurrency}r{r}", c, calls, args.messages)
                            for c in range(concurrency)]
                order = list(ports) if r % 2 == 0 else [list(ports)[0], *reversed(list(ports)[1:])]
                for mode in order:
                    for key, t in run(ports[mode], workload, mode).items():
                        times[mode][(r, *key)] = t
            direct = times["direct"]
            row = {"concurrency": concurrency, "requests": len(direct)}
            for mode in ports:
                if mode == "direct":
                    continue
                added = [max(0.0, times[mode][k] - direct[k]) for k in direct]
                row[f"{mode}_added_p50_ms"] = 1000 * bench.percentile(added, 50)
                row[f"{mode}_added_p99_ms"] = 1000 * bench.percentile(added, 99)
            for mode in builds:
                for q in ("p50", "p99"):
                    floor_ms = row[f"floor_added_{q}_ms"]
                    row[f"{mode}_{q}_over_floor"] = row[f"{mode}_added_{q}_ms"] / max(floor_ms, 1e-6)
            table.append(row)
        print(json.dumps({"request_bytes": size, "messages": args.messages, "rows": table}, indent=1))
    finally:
        for proc in procs:
            bench.stopped(proc)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
