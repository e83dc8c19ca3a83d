"""Benchmark: the default chain's plan + apply, this package against the reference cutctx 0.1.0.

On one generated agent transcript (a system turn, then repeating assistant-call / tool-result /
user turns, tool results of about 1 KB; 100,000 turns by default) held as Python objects, it
times, as the median of several runs:

1. the reference (``cutctx==0.1.0``, in its own venv, in a subprocess): with the turns held as
   ``TranscriptTurn`` objects, ``Transcript(turns)`` (for this package, the conversion into the
   Rust core), ``default_chain`` plan, summaries fulfilled, apply; and the same with building
   the turn objects from plain records included;
2. this package, in-process, the same steps through the same public API;
3. the JSON path: the same conversation as an OpenAI Chat request's JSON bytes in, the
   compacted request's bytes out, through ``cutctx.formats.compact_json``.

and prints the times and the ratios reference / ours (target 50x) and reference / JSON path
(target 150x). Usage: ``python bench/bench.py [--turns N] [--runs K] [--ours-python PY]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

PROMPT_ID = "bench.summarize.v1"


def records(turns: int) -> list[dict[str, Any]]:
    """The transcript as plain records, the same on every run and on both sides."""
    out: list[dict[str, Any]] = [
        {"turn_id": "sys", "role": "system", "content": "You are a build agent.",
         "token_estimate": 6, "tool_call_id": None}
    ]
    i = 0
    while len(out) < turns:
        call = f"call_{i}"
        body = f"step {i}: " + ("log line with a path /src/m{0}.rs and a status ok; " * 20)
        out.append({"turn_id": f"a{i}", "role": "assistant", "content": f"Running check {i}.",
                    "token_estimate": 8, "tool_call_id": call})
        out.append({"turn_id": f"t{i}", "role": "tool", "content": body,
                    "token_estimate": len(body) // 4, "tool_call_id": call})
        out.append({"turn_id": f"u{i}", "role": "user", "content": f"Continue with {i + 1}.",
                    "token_estimate": 6, "tool_call_id": None})
        i += 1
    return out[:turns]


def budget_of(recs: list[dict[str, Any]]) -> int:
    return sum(r["token_estimate"] for r in recs) // 10


def openai_chat_request(recs: list[dict[str, Any]]) -> bytes:
    """The same conversation as an OpenAI Chat Completions request."""
    messages: list[dict[str, Any]] = []
    for r in recs:
        if r["role"] == "assistant" and r["tool_call_id"]:
            messages.append({"role": "assistant", "content": r["content"], "tool_calls": [
                {"id": r["tool_call_id"], "type": "function",
                 "function": {"name": "run_check", "arguments": "{}"}}]})
        elif r["role"] == "tool":
            messages.append({"role": "tool", "tool_call_id": r["tool_call_id"],
                             "content": r["content"]})
        else:
            messages.append({"role": r["role"], "content": r["content"]})
    if messages and messages[-1]["role"] == "assistant" and "tool_calls" in messages[-1]:
        messages.pop()  # a trailing call without its result is not a valid request
    return json.dumps({"model": "gpt-4.1", "messages": messages}).encode()


def turn_objects(recs: list[dict[str, Any]]) -> tuple[Any, ...]:
    """The records as the package's turn objects."""
    import cutctx

    return tuple(
        cutctx.TranscriptTurn(r["turn_id"], cutctx.Role(r["role"]), r["content"],
                              r["token_estimate"], tool_call_id=r["tool_call_id"])
        for r in recs
    )


def plan_and_apply(turns: tuple[Any, ...], budget: int) -> int:
    """A transcript of turn objects (the conversion into the core happens here, for this
    package), plan, fulfil, apply; the view's length, so that nothing is skipped."""
    import cutctx

    transcript = cutctx.Transcript(turns)
    plan = cutctx.default_chain(prompt_id=PROMPT_ID).decide(
        transcript, cutctx.CompactionBudget(budget)
    )
    summaries = {r.group_id: "Earlier checks passed." for r in plan.summarization_requests}
    view = cutctx.CompactionExecutor().apply(transcript, plan, summaries)
    return len(view.transcript.turns)


def timed(fn, runs: int) -> tuple[float, Any]:
    times, result = [], None
    for _ in range(runs):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def side(turns: int, runs: int) -> dict[str, Any]:
    """One side's measurements, in this interpreter: with the turns held as objects (the
    target's measure), and with building those objects from records included."""
    recs = records(turns)
    budget = budget_of(recs)
    held = turn_objects(recs)
    seconds, size = timed(lambda: plan_and_apply(held, budget), runs)
    built, _ = timed(lambda: plan_and_apply(turn_objects(recs), budget), runs)
    return {"seconds": seconds, "with_building": built, "view_turns": size}


def json_path(turns: int, runs: int) -> tuple[float, int]:
    from cutctx.formats import FormatCompactionError, compact_json

    recs = records(turns)
    data = openai_chat_request(recs)
    budget = budget_of(recs)
    try:
        compact_json(data, "openai-chat", budget)
        summaries: dict[str, str] = {}
    except FormatCompactionError as e:
        if e.code != "COMPACTION_SUMMARY_MISSING":
            raise
        summaries = {r["group_id"]: "Earlier checks passed." for r in e.details["requests"]}
    seconds, out = timed(lambda: compact_json(data, "openai-chat", budget, summaries=summaries),
                         runs)
    return seconds, len(out)


def in_subprocess(python: str, turns: int, runs: int) -> dict[str, Any]:
    run = subprocess.run(
        [python, str(Path(__file__).resolve()), "--side", "--turns", str(turns), "--runs",
         str(runs)],
        capture_output=True, text=True, check=True, cwd="/",
    )
    return json.loads(run.stdout)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--turns", type=int, default=100_000)
    ap.add_argument("--runs", type=int, default=5, help="runs per measurement (median)")
    ap.add_argument("--ref-runs", type=int, default=3, help="runs of the reference (median)")
    ap.add_argument("--ours-python", help="run our side under this interpreter, in a subprocess")
    ap.add_argument("--side", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.side:
        json.dump(side(args.turns, args.runs), sys.stdout)
        return

    import differential_runner

    reference, why = differential_runner.reference_python()
    if reference is None:
        sys.exit(f"cannot run the reference: {why}")
    print(f"transcript: {args.turns:,} turns; default_chain, budget a tenth of the total")
    ref = in_subprocess(str(reference), args.turns, args.ref_runs)
    print(f"reference cutctx 0.1.0 (subprocess), Transcript(turns) -> plan -> apply: "
          f"{ref['seconds']:.3f} s ({ref['with_building']:.3f} s building the turns too)")

    import cutctx

    if args.ours_python:
        ours = in_subprocess(args.ours_python, args.turns, args.runs)
        where = f"subprocess {args.ours_python}"
    elif hasattr(cutctx, "CompactionExecutor"):
        ours = side(args.turns, args.runs)
        where = "in-process"
    else:
        ours = in_subprocess(str(reference), args.turns, args.runs)
        where = "the reference again: this cutctx has no core API"
    assert ours["view_turns"] == ref["view_turns"], (ours, ref)
    print(f"ours ({where}), Transcript(turns) -> plan -> apply: {ours['seconds']:.3f} s"
          f" ({ours['with_building']:.3f} s building the turns too)")

    j_seconds, j_size = json_path(args.turns, args.runs)
    print(f"ours, JSON bytes -> compacted JSON bytes (compact_json): {j_seconds:.3f} s"
          f" ({j_size:,} bytes out)")
    print(f"ratio reference / ours:      {ref['seconds'] / ours['seconds']:8.1f}x  (target 50x)")
    print(f"  the same, building the turns too: {ref['with_building'] / ours['with_building']:.1f}x")
    print(f"ratio reference / JSON path: {ref['seconds'] / j_seconds:8.1f}x  (target 150x)")


if __name__ == "__main__":
    main()
