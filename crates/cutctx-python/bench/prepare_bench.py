"""``Session.prepare`` on a dict against the Rust core's step on the same request, in one sitting.

The request is an Anthropic Messages request shaped as a coding agent's after a long task (the
one ``scripts/serve-floor-bench.py`` sends: 12 tools, a 7 KB system prompt, tool calls and
their results, about 400 KB at 150 messages), at 150, 1,000 and 10,000 messages. A
``cutctx.Session`` (window far above it, so nothing fires) has taken the history without its last
two messages; the call times ``prepare`` on the whole request as a dict. The Rust core's step is
timed on the same request by ``session_step_timed`` (an example of ``cutctx-ops``, built with
``cargo build --release -p cutctx-ops --example session_step_timed``): its step on the parsed
request and its parse-and-step of the request's bytes, the two ways a Rust caller holds it.
Rounds alternate between the two so that the machine's drift touches both alike.

    python crates/cutctx-python/bench/prepare_bench.py [--rounds 15] [--example PATH]

Beside them, ``json.dumps`` of the dict alone: what the Python side pays to hand the core its
text. Prints the medians in microseconds and the ratios. It is not a test.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import json
import os
import statistics
import subprocess
import tempfile
import time

from cutctx.session import Session

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
_spec = importlib.util.spec_from_file_location("floor", os.path.join(ROOT, "scripts", "serve-floor-bench.py"))
assert _spec and _spec.loader
floor = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(floor)


def python_prepare(earlier: dict, request: dict) -> float:
    session = Session("anthropic", 10**9, policy="drop_oldest")
    session.prepare(earlier)
    gc.disable()
    try:
        start = time.perf_counter()
        session.prepare(request)
        return (time.perf_counter() - start) * 1e6
    finally:
        gc.enable()


def python_dumps(request: dict) -> float:
    """What any call that hands the dict to a core reading JSON pays first."""
    gc.disable()
    try:
        start = time.perf_counter()
        json.dumps(request, ensure_ascii=False, check_circular=False, separators=(",", ":"))
        return (time.perf_counter() - start) * 1e6
    finally:
        gc.enable()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--example", default=os.path.join(ROOT, "target", "release", "examples", "session_step_timed"))
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="prepare-bench.")
    rows = []
    for messages in (150, 1_000, 10_000):
        request = json.loads(floor.conversation("p", 0, 1, messages)[0])
        earlier = {**request, "messages": request["messages"][:-2]}
        paths = [os.path.join(work, n) for n in ("earlier.json", "request.json")]
        for path, doc in zip(paths, (earlier, request)):
            with open(path, "w") as f:
                json.dump(doc, f)
        py, dumps, rust_step, rust_parse_step = [], [], [], []
        for _ in range(args.rounds):
            py.append(python_prepare(earlier, request))
            dumps.append(python_dumps(request))
            out = subprocess.run([args.example, "anthropic", *paths, "3"], capture_output=True, text=True, check=True)
            figures = json.loads(out.stdout)
            rust_step.append(figures["step"])
            rust_parse_step.append(figures["parse_step"])
        p, d, s, ps = (statistics.median(v) for v in (py, dumps, rust_step, rust_parse_step))
        rows.append({"messages": messages, "python_prepare_dict_us": round(p, 1),
                     "python_dumps_us": round(d, 1), "rust_step_us": round(s, 1),
                     "rust_parse_step_us": round(ps, 1), "over_step": round(p / s, 2),
                     "over_parse_step": round(p / ps, 2)})
    print(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
