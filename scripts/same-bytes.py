"""Whether two builds of `cutctx` give the same bytes: every command of a generated set run by
both, their standard output, standard error, exit codes and the files they write compared byte
for byte. For a restructuring that must change nothing a user sees.

    python3 scripts/same-bytes.py OLD_CUTCTX NEW_CUTCTX [--limit N] [--jobs 2]

The commands, over the request corpus (crates/cutctx-formats/tests/corpus), the examples, and
the real runs beside the project (../shared/realworld: tau-bench and the long coding runs, read
when present):

* `estimate` and `plan` of every request;
* `compact` of every request at budgets from 4% to 100% of its estimate, under every shipped
  policy (`default_chain` with no summaries fails the same way in both), with 0, 2 and 4
  protected turns, each `--reasoning`, with and without `--repair`, text and JSON errors;
* `session`, call by call over every real run and every corpus request's leading parts (the
  state file carried from call to call, compared after each), at windows of 30%, 50% and 70% of
  the whole run, under the policies that need no summaries, plain, with
  `--cache-breakpoints auto`, with `--fire-early`, and with a reserve and 2 protected turns;
* `replay` of every real run at three window fractions, as a table and as JSON, with `--compare`.

Prints the number of commands and of differences (each named); exits 1 on any difference.
`--expect OLD=>NEW` (repeatable) names a change of wording made on purpose: the old build's
bytes have OLD replaced by NEW before they are compared, and the count of commands whose bytes
differ only so is printed apart.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import glob
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.path.join(os.path.dirname(ROOT), "shared")
POLICIES = ["drop_oldest", "observation_masking", "summarizing", "default_chain"]
NO_SUMMARIES = ["drop_oldest", "observation_masking",
                '{"name":"chain","policies":[{"name":"observation_masking"},{"name":"drop_oldest"}]}']


def inputs():
    """(format, path) of every request and run."""
    out = []
    for fmt in ("openai-chat", "openai-responses", "anthropic"):
        for path in sorted(glob.glob(os.path.join(ROOT, "crates", "cutctx-formats", "tests", "corpus", fmt, "*.json"))):
            out.append((fmt, path, "request"))
        example = os.path.join(ROOT, "examples", f"{fmt}.json")
        if os.path.exists(example):
            out.append((fmt, example, "request"))
    for path in sorted(glob.glob(os.path.join(SHARED, "realworld", "*", "*.chat.json"))):
        out.append(("openai-chat", path, "run"))
    return out


def total(cli, fmt, path):
    r = subprocess.run([cli, "estimate", "--format", fmt, path], capture_output=True, text=True)
    try:
        return json.loads(r.stdout)["total"]
    except (ValueError, KeyError):
        return None


def list_key(fmt):
    return "input" if fmt == "openai-responses" else "messages"


def prefixes(fmt, path, every):
    """The run's requests call by call: the history cut after each assistant message (and
    whole at the end), every `every`th one."""
    with open(path, "rb") as f:
        doc = json.loads(f.read())
    items = doc if isinstance(doc, list) else doc.get(list_key(fmt)) if isinstance(doc, dict) else None
    if not isinstance(items, list) or not items:
        return []
    cuts = [i + 1 for i, m in enumerate(items)
            if isinstance(m, dict) and m.get("role") == "user"] or [len(items)]
    cuts = cuts[::every] + ([len(items)] if cuts[-1] != len(items) else [])
    out = []
    for k in cuts:
        out.append(json.dumps(items[:k] if isinstance(doc, list) else {**doc, list_key(fmt): items[:k]}))
    return out


def commands(cli, limit):
    """The generated commands: (name, argv with {cli}, files it reads, state chain or None)."""
    jobs = []
    for fmt, path, kind in inputs():
        name = os.path.relpath(path, os.path.dirname(ROOT))
        n = total(cli, fmt, path)
        jobs.append((f"estimate {name}", ["estimate", "--format", fmt, path], None))
        if n is None:
            jobs.append((f"compact {name}", ["compact", "--format", fmt, "--max-tokens", "100", path], None))
            continue
        for pct in range(4, 101, 4 if kind == "request" else 15):
            budget = max(1, n * pct // 100)
            for policy in POLICIES:
                for protected in ("0", "2", "4"):
                    for reasoning in ("strip", "keep", "refuse"):
                        for extra in ([], ["--repair"], ["--error-format", "json"]):
                            argv = ["compact", "--format", fmt, "--max-tokens", str(budget),
                                    "--policy", policy, "--protected-recent", protected,
                                    "--reasoning", reasoning, *extra, path]
                            jobs.append((f"{' '.join(argv[:-1])} {name}", argv, None))
            jobs.append((f"plan {pct}% {name}", ["plan", "--format", fmt, "--max-tokens", str(budget), "--policy", "drop_oldest", path], None))
        if kind == "run":
            for fraction in ("0.3", "0.5", "0.7"):
                for extra in ([], ["--json"], ["--compare", "--json"]):
                    argv = ["replay", "--format", fmt, "--window-fraction", fraction, *extra, path]
                    jobs.append((f"{' '.join(argv[:-1])} {name}", argv, None))
        calls = prefixes(fmt, path, 1)
        if not calls:
            continue
        for pct in (30, 50, 70):
            window = max(2, n * pct // 100)
            for policy in NO_SUMMARIES:
                for extra in ([], ["--cache-breakpoints", "auto"], ["--fire-early"],
                              ["--reserve-output", "64", "--protected-recent", "2"]):
                    argv = ["session", "--format", fmt, "--window", str(window), "--policy", policy, *extra]
                    jobs.append((f"session {pct}% {policy[:20]} {' '.join(extra)} {name}", argv, calls))
    return jobs[:limit] if limit else jobs


def run_one(cli, argv, calls, work, expect=()):
    """The bytes a command gave: for a session chain, every call's output, errors, code and
    state; with `expect`'s replacements made in them."""
    out = hashlib.sha256()

    def fix(part):
        for old, new in expect:
            part = part.replace(old, new)
        return part
    if calls is None:
        r = subprocess.run([cli, *argv], capture_output=True, cwd=work)
        for part in (r.stdout, r.stderr, str(r.returncode).encode()):
            part = fix(part)
            out.update(len(part).to_bytes(8, "big") + part)
        return out.hexdigest(), 1
    state = os.path.join(work, "state.json")
    request = os.path.join(work, "request.json")
    for text in calls:
        with open(request, "w") as f:
            f.write(text)
        r = subprocess.run([cli, *argv, "--state", state, request], capture_output=True, cwd=work)
        kept = open(state, "rb").read() if os.path.exists(state) else b""
        for part in (r.stdout, r.stderr, str(r.returncode).encode(), kept):
            part = fix(part)
            out.update(len(part).to_bytes(8, "big") + part)
    return out.hexdigest(), len(calls)


def compare(old, new, job, expect):
    name, argv, calls = job
    dirs = [tempfile.mkdtemp(prefix="same-bytes.") for _ in range(2)]
    try:
        (a, n), (b, _) = (run_one(old, argv, calls, dirs[0]), run_one(new, argv, calls, dirs[1]))
        if a == b:
            return name, "same", n
        if expect:
            # Again from nothing (a session chain's state file is in its folder).
            dirs.append(tempfile.mkdtemp(prefix="same-bytes."))
            if run_one(old, argv, calls, dirs[2], expect)[0] == b:
                return name, "expected", n
        return name, "differs", n
    finally:
        for d in dirs:
            shutil.rmtree(d, ignore_errors=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("old")
    parser.add_argument("new")
    parser.add_argument("--limit", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--expect", action="append", default=[], metavar="OLD=>NEW")
    args = parser.parse_args()
    # Both run under the same name, which usage errors print.
    bins = tempfile.mkdtemp(prefix="same-bytes-bin.")
    for side in ("old", "new"):
        os.makedirs(os.path.join(bins, side))
        shutil.copy2(getattr(args, side), os.path.join(bins, side, "cutctx"))
        setattr(args, side, os.path.join(bins, side, "cutctx"))
    jobs = commands(args.old, args.limit)
    expect = [tuple(e.encode().split(b"=>", 1)) for e in args.expect]
    differ, expected, count = [], 0, 0
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        for name, verdict, n in pool.map(lambda j: compare(args.old, args.new, j, expect), jobs):
            count += n
            if verdict == "differs":
                differ.append(name)
            expected += verdict == "expected"
    shutil.rmtree(bins, ignore_errors=True)
    print(f"{count} commands ({len(jobs)} jobs), {len(differ)} with different bytes, "
          f"{expected} differing only as --expect says")
    for name in differ[:50]:
        print(f"  differs: {name}")
    sys.exit(1 if differ else 0)


if __name__ == "__main__":
    main()
