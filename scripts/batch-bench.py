#!/usr/bin/env python3
"""`cutctx batch` against the single-request path, per core, and its peak memory at two sizes.

    scripts/batch-bench.py [--lines 20000] [--runs 3]

Builds (once, under /tmp) a JSONL file of `--lines` OpenAI Chat requests of 2-200 KB: the
tau-bench runs of ../shared/realworld replayed call by call (the request at the k-th model
call: the messages before it, with airline_tools.json as tools), and generated agent runs
whose tool results are sized to spread the requests over the range. Then, `--runs` times:

* single: the `format_lines` example, which calls `formats::compact_detailed` without a report (the function behind
  `cutctx compact --format`) on each line in one thread and sums the time of those calls
  only: the single-request path's per-core cost, without process start-up or I/O;
* `cutctx batch --jobs 1` and `--jobs 2` over the same file, wall time and peak RSS.

It prints the per-core ratio (single seconds / batch-jobs-1 seconds; the target is >= 0.90),
the 2-job speed-up over the single path's 2-core ideal (single / 2 / batch-jobs-2 seconds),
and batch's peak RSS on the whole file and on a quarter of it (it must not grow with lines).
Needs a release build: `cargo build --release -p cutctx-ops --examples`.
"""

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGET = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target")) / "release"
RUNS = ROOT.parent / "shared" / "realworld" / "tau-bench"
OPTIONS = ["--format", "openai-chat", "--max-tokens", "8000", "--policy", "observation_masking"]


def tau_requests(tools):
    """Each tau-bench run's request at each model call: the messages before that call."""
    runs = json.loads((RUNS / "gpt-4o-airline.json").read_text(encoding="utf-8"))
    for run in runs:
        traj = run["traj"]
        for k, message in enumerate(traj):
            if message.get("role") == "assistant" and k > 0:
                yield {"model": "gpt-4o", "messages": traj[:k], "tools": tools}


def generated(rng, size):
    """A generated agent run of about `size` bytes: tool rounds with sized results."""
    messages = [{"role": "system", "content": "You are a careful build agent."}]
    r = 0
    while sum(len(json.dumps(m)) for m in messages) < size:
        call = f"call_{r}"
        body = "".join(rng.choice("abcdefghij klmnop\n") for _ in range(rng.randint(500, 8000)))
        messages += [
            {"role": "user", "content": f"Step {r}: read the next log."},
            {"role": "assistant", "content": None, "tool_calls": [{"id": call, "type": "function",
             "function": {"name": "read_log", "arguments": json.dumps({"part": r})}}]},
            {"role": "tool", "tool_call_id": call, "content": body},
            {"role": "assistant", "content": f"Part {r} read."},
        ]
        r += 1
    return {"model": "gpt-4o", "messages": messages}


def build(path, lines):
    tools = json.loads((RUNS / "airline_tools.json").read_text(encoding="utf-8"))
    tau = [json.dumps(r, ensure_ascii=False) for r in tau_requests(tools)]
    tau = [t for t in tau if 2_000 <= len(t) <= 200_000]
    rng = random.Random(16)
    made = []
    # Half tau-bench (cycled), half generated runs of 2-200 KB (a pool reused at random).
    pool = [json.dumps(generated(rng, int(2_000 * 100 ** rng.random()))) for _ in range(400)]
    for i in range(lines):
        made.append(tau[i % len(tau)] if i % 2 == 0 else pool[rng.randrange(len(pool))])
    path.write_text("\n".join(made) + "\n", encoding="utf-8")


def timed(argv):
    """(wall seconds, peak RSS bytes) of argv, standard output discarded; exit 0 or 1 only."""
    start = time.perf_counter()
    with open(os.devnull, "wb") as null:
        proc = subprocess.Popen(argv, stdout=null, stderr=subprocess.DEVNULL)
        _, status, usage = os.wait4(proc.pid, 0)
    code = os.waitstatus_to_exitcode(status)
    if code not in (0, 1):
        sys.exit(f"{argv} failed with status {code}")
    return time.perf_counter() - start, usage.ru_maxrss * 1024


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--lines", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    if not RUNS.exists():
        print("SKIP: ../shared/realworld is absent")
        return
    work = Path("/tmp/cutctx-batch-bench")
    work.mkdir(exist_ok=True)
    full, quarter = work / f"requests-{args.lines}.jsonl", work / f"requests-{args.lines // 4}.jsonl"
    if not full.exists():
        build(full, args.lines)
        with full.open() as src, quarter.open("w") as dst:
            for i, line in enumerate(src):
                if i == args.lines // 4:
                    break
                dst.write(line)
    # Line by line: this process's own peak would otherwise be inherited by the children's
    # ru_maxrss (Linux carries the high-water mark across exec).
    with full.open("rb") as f:
        sizes = [len(line) - 1 for line in f]
    print(f"{len(sizes)} requests, {sum(sizes) / 1e6:.0f} MB, {min(sizes)}-{max(sizes)} bytes, "
          f"median {statistics.median(sizes):.0f}")
    cutctx = str(TARGET / "cutctx")
    single_bin = str(TARGET / "examples" / "format_lines")
    single, one, two, rss, rss_quarter = [], [], [], [], []
    for _ in range(args.runs):
        out = subprocess.run([single_bin, str(full), "openai-chat", "8000", "observation_masking"],
                             capture_output=True, check=True, text=True)
        single.append(json.loads(out.stdout)["seconds"])
        t, m = timed([cutctx, "batch", "--jobs", "1", *OPTIONS, str(full)])
        one.append(t)
        rss.append(m)
        two.append(timed([cutctx, "batch", "--jobs", "2", *OPTIONS, str(full)])[0])
        rss_quarter.append(timed([cutctx, "batch", "--jobs", "1", *OPTIONS, str(quarter)])[1])
    s, b1, b2 = statistics.median(single), statistics.median(one), statistics.median(two)
    # Ratios run by run, each of three measurements taken back to back, then their median:
    # the machine's speed drifts between runs more than between neighbouring measurements.
    r1 = statistics.median(a / b for a, b in zip(single, one))
    r2 = statistics.median(a / 2 / b for a, b in zip(single, two))
    print(f"single path (in-process compaction only, 1 core): {s:.2f} s (runs: "
          f"{', '.join(f'{x:.2f}' for x in single)})")
    print(f"batch --jobs 1: {b1:.2f} s  -> per-core ratio {r1:.3f} (median of runs; target >= 0.90)")
    print(f"batch --jobs 2: {b2:.2f} s  -> {r2:.3f} of the 2-core ideal (single / 2; median of runs)")
    print(f"peak RSS --jobs 1: {max(rss) / 2**20:.0f} MiB on {args.lines} lines, "
          f"{max(rss_quarter) / 2**20:.0f} MiB on {args.lines // 4}")


if __name__ == "__main__":
    main()
