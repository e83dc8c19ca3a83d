"""A session call that does not fire, at 1,000 and 10,000 messages of history.

Each sitting holds an OpenAI Chat history of N messages (about 400 characters each) in a
``cutctx.Session`` whose window is far above it, and times one call that appends two messages,
three ways, in alternation so that drift in the machine's speed touches all alike:

* ``prepare_appended``: the two new messages alone (``Session.prepare_appended``);
* ``prepare (dict)``: the whole history as a dict (``Session.prepare``);
* ``prepare (bytes)``: the whole history as JSON bytes, the path that builds no object per
  message;

and, to take ``prepare_appended`` apart, its Rust core alone (``append_json``: the check of the
new messages and the session's decision) and the one step that reads the history, a pointer per
message: the copy that gives each request a list of its own.

The floor is ``json.dumps`` of the two new messages, the least any call must do to hand them
over, timed in the same rounds, with the collector off while timing (as ``timeit``). It prints each median in microseconds and as a multiple of the
floor, and the growth (the time at 10,000 over the time at 1,000): a call that reads only the
new messages grows by about 1, one that reads the history by about 10.

    python crates/cutctx-python/bench/session_bench.py --rounds 200

It is not a test: figures depend on the machine.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

from cutctx.session import Session

NEW = [
    {"role": "assistant", "content": "answer: " + "a" * 400},
    {"role": "user", "content": "question: " + "q" * 400},
]


def history(n: int) -> dict[str, Any]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "Be brief."}]
    while len(messages) < n:
        i = len(messages)
        role = "user" if i % 2 else "assistant"
        messages.append({"role": role, "content": f"message {i}: " + "x" * 400})
    return {"model": "m", "messages": messages}


def sitting(n: int, rounds: int) -> dict[str, float]:
    """Median microseconds of each way at a history of ``n`` messages."""
    base = history(n)
    longer = {**base, "messages": [*base["messages"], *NEW]}
    longer_bytes = json.dumps(longer).encode()

    def appended() -> Callable[[], object]:
        session = Session("openai-chat", 10**9)
        session.prepare(base)
        session.prepare_appended(NEW)  # warm, as in a loop: the call measured is the next
        return lambda: session.prepare_appended(NEW)

    def core_alone() -> Callable[[], object]:
        session = Session("openai-chat", 10**9)
        session.prepare(base)
        core, data = session._core, json.dumps(NEW)
        core.append_json(data)
        return lambda: core.append_json(data)

    def whole_dict() -> Callable[[], object]:
        session = Session("openai-chat", 10**9)
        session.prepare(base)
        return lambda: session.prepare(longer)

    def whole_bytes() -> Callable[[], object]:
        session = Session("openai-chat", 10**9)
        session.prepare(json.dumps(base).encode())
        return lambda: session.prepare(longer_bytes)

    ways: dict[str, Callable[[], Callable[[], object]]] = {
        "floor (json.dumps of the new)": lambda: lambda: json.dumps(NEW),
        "prepare_appended": appended,
        "its Rust core (append_json)": core_alone,
        "copying the list (a new list per request)": lambda: lambda: list(longer["messages"]),
        "prepare (dict)": whole_dict,
        "prepare (bytes)": whole_bytes,
    }
    times: dict[str, list[float]] = {name: [] for name in ways}
    for _ in range(rounds):
        for name, make in ways.items():
            call = make()  # a fresh session each round
            # The collector off while timing, as timeit has it: a collection of the whole
            # heap, which grows with the history, would land on whichever call it falls in.
            gc.disable()
            start = time.perf_counter()
            call()
            elapsed = time.perf_counter() - start
            gc.enable()
            times[name].append(elapsed * 1e6)
    return {name: statistics.median(t) for name, t in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=200)
    args = parser.parse_args()
    small, large = sitting(1_000, args.rounds), sitting(10_000, args.rounds)
    floor_small = small["floor (json.dumps of the new)"]
    floor_large = large["floor (json.dumps of the new)"]
    print("| call | 1,000: µs | × floor | 10,000: µs | × floor | growth |")
    print("|---|---|---|---|---|---|")
    for name in small:
        print(
            f"| {name} | {small[name]:.1f} | {small[name] / floor_small:.1f} | "
            f"{large[name]:.1f} | {large[name] / floor_large:.1f} | {large[name] / small[name]:.2f} |"
        )


if __name__ == "__main__":
    main()
