#!/usr/bin/env python3
"""Every compacted request checked against the providers' published request schemas.

    python3 scripts/schema-check.py --cli target/release/cutctx [--shared ../shared]
                                    [--calls N] [--jobs J]
    python3 scripts/schema-check.py --self-test

Run by scripts/schema-check.sh, which installs its pinned dependencies (jsonschema, anthropic,
pydantic) in a throwaway venv. What it holds: compaction never gives a request a schema error
that its input did not have. It prints file, format, policy and budget of a failure, with
instance and schema paths, never message content (validators' messages quote the instance, so
they are not printed).

The schemas:

* OpenAI: `components.schemas.CreateChatCompletionRequest` and `CreateResponse` of
  `shared/schemas/openai-openapi.json` (OpenAPI 3.1), validated as JSON Schema 2020-12 with
  jsonschema. Three adaptations turn the OpenAPI dialect into plain JSON Schema, all in
  `openapi_to_json_schema`: `oneOf` is read as `anyOf` (the published lists overlap: a user
  message with `input_text` parts matches two branches); `nullable: true` (OpenAPI 3.0's
  keyword, still used 109 times) adds `null` to the schema's `type` (and to its `enum`), or
  wraps a schema without `type` in `anyOf [null, schema]`; `discriminator` is dropped, since it
  only tells code generators which branch to try first and each branch already constrains the
  discriminating property itself. `$ref`s point into `#/components/schemas/...`, so the
  components travel in the root schema and resolve as JSON pointers. Other OpenAPI-only keys
  (`x-*`, `example`) are annotations JSON Schema ignores.
* Anthropic: the JSON Schema pydantic derives from the SDK's
  `anthropic.types.message_create_params.MessageCreateParamsNonStreaming` TypedDict (with
  `TypeAdapter(...).json_schema()`), validated with jsonschema, and not
  `TypeAdapter(...).validate_python`: pydantic validates `Iterable[...]` fields lazily, and the
  SDK types `messages` and every content list as `Iterable`, so validate_python accepts any
  message without looking at it. The derived schema checks every element eagerly, and the two
  providers share one error machinery (paths, comparison). It keeps the SDK's openness: keys
  the TypedDicts do not declare are allowed, as pydantic's default for TypedDicts is.

The inputs: every request of crates/cutctx-formats/tests/corpus/FORMAT/*.json, and calls
replayed from shared/realworld/tau-bench/gpt-4o-airline.json (see `tau_bench_calls`). Each
goes through `cutctx compact --format F --max-tokens N --policy P` for every policy, budget and
flag set of the tables below. A bare message array (the formats accept one) is validated
inside a minimal request body (`wrap_for_schema`), the same for input and output.

A failure is one leaf of a validation error (under an `anyOf`, the failures of the branch the
instance came closest to), identified by where and what (`failures`): the instance path with
array positions erased (compaction moves messages, so positions change), the failing keyword
and its schema path. An output fails the check when it has more failures of some identity than
its input had: compaction only drops, masks and adds summaries, so it never needs a new one.
"""

from __future__ import annotations

import argparse
import collections
import copy
import hashlib
import json
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

# -- the sweep: one CLI run per (flag set, policy, budget) for every input -------------------------

# Every policy name `cutctx compact --policy` accepts; `check_policies_are_known` holds this list
# to the CLI's own help text.
POLICIES = ["drop_oldest", "observation_masking", "summarizing", "default_chain"]
# Budgets, in percent of the room between the request's untouchable floor (system, pinned and
# protected turns: any lower budget is refused) and its whole estimate; 0 is the tightest budget
# the CLI accepts. Percentages of the whole estimate would leave most runs refused: a tau-bench
# system prompt alone is over half of a typical call.
BUDGETS = [100, 50, 20, 5, 0]
# Extra flags, one sweep per set. `--repair` drops what a provider rejects: its outputs must be as
# valid as any other. (`--reserve-output` only moves the budget, which the budgets above already
# sweep, so it gets no set of its own.)
FLAG_SETS: list[tuple[str, list[str]]] = [
    ("plain", []),
    ("repair", ["--repair"]),
]
# Summaries come from this command (run by `sh -c`, one summary per request): a fixed line.
SUMMARIZER = "printf %s 'Earlier turns, summarized.'"

FORMATS = ["openai-chat", "openai-responses", "anthropic"]
# Default number of tau-bench calls replayed (each in three formats); 0 replays them all.
DEFAULT_CALLS = 150

# -- schemas ---------------------------------------------------------------------------------------


def openapi_to_json_schema(node: Any) -> Any:
    """The OpenAPI 3.1 schema `node` as plain JSON Schema (see the module's docstring)."""
    if isinstance(node, list):
        return [openapi_to_json_schema(v) for v in node]
    if not isinstance(node, dict):
        return node
    out = {
        ("anyOf" if k == "oneOf" else k): openapi_to_json_schema(v)
        for k, v in node.items()
        if k not in ("nullable", "discriminator")
    }
    if node.get("nullable") is True:
        kind = out.get("type")
        if isinstance(kind, str):
            out["type"] = [kind, "null"]
        elif isinstance(kind, list):
            out["type"] = kind + ["null"]
        else:
            out = {"anyOf": [{"type": "null"}, out]}
        if "enum" in out and None not in out["enum"]:
            out["enum"] = out["enum"] + [None]
    return out


def load_validators(shared: Path) -> dict[str, Any]:
    """One jsonschema validator per format."""
    from jsonschema import Draft202012Validator

    openapi = json.loads((shared / "schemas" / "openai-openapi.json").read_text("utf-8"))
    components = openapi_to_json_schema(openapi["components"])

    def openai(name: str) -> Any:
        root = {"components": components, "$ref": f"#/components/schemas/{name}"}
        return Draft202012Validator(root)

    return {
        "openai-chat": openai("CreateChatCompletionRequest"),
        "openai-responses": openai("CreateResponse"),
        "anthropic": Draft202012Validator(anthropic_schema()),
    }


def anthropic_schema() -> dict[str, Any]:
    """The JSON Schema pydantic derives from the Anthropic SDK's request parameters."""
    from anthropic.types.message_create_params import MessageCreateParamsNonStreaming
    from pydantic import TypeAdapter

    with warnings.catch_warnings():
        # Branches pydantic cannot express (file handles for uploads) are skipped, with a warning.
        warnings.simplefilter("ignore")
        return TypeAdapter(MessageCreateParamsNonStreaming).json_schema()


def wrap_for_schema(fmt: str, doc: Any) -> Any:
    """A bare message array (or Responses item list) inside a minimal request body."""
    if not isinstance(doc, list):
        return doc
    if fmt == "openai-chat":
        return {"model": "gpt-4o", "messages": doc}
    if fmt == "openai-responses":
        return {"model": "gpt-4o", "input": doc}
    return {"model": "claude-sonnet-4-5", "max_tokens": 1024, "messages": doc}


# -- error identity --------------------------------------------------------------------------------

WEAK = ("type", "enum", "const")


def ref_name(schema: Any) -> str | None:
    """The last segment of a branch's `$ref`, if it is one: the branch's readable name."""
    if isinstance(schema, dict) and isinstance(schema.get("$ref"), str):
        return schema["$ref"].rsplit("/", 1)[-1]
    return None


def closest_branch(error: Any) -> tuple[int, list[Any]]:
    """The anyOf branch the instance came closest to: fewest type/enum/const failures (a
    branch for another kind of item fails on its `type` or `role`), then fewest failures,
    then the first."""
    branches: dict[int, list[Any]] = collections.defaultdict(list)
    for sub in error.context:
        branches[sub.relative_schema_path[0]].append(sub)
    return min(
        branches.items(),
        key=lambda kv: (sum(e.validator in WEAK for e in kv[1]), len(kv[1]), kv[0]),
    )


def leaves(error: Any, names: tuple[str, ...] = ()) -> list[tuple[Any, tuple[str, ...]]]:
    """The failures that explain `error`, with the branch names taken to reach them."""
    if not error.context:
        return [(error, names)]
    index, subs = closest_branch(error)
    branch = error.schema[error.validator][index] if isinstance(error.schema, dict) else None
    name = ref_name(branch) or f"{error.validator}[{index}]"
    out: list[tuple[Any, tuple[str, ...]]] = []
    for sub in sorted(subs, key=lambda e: (list(map(str, e.absolute_path)), e.validator)):
        out.extend(leaves(sub, names + (name,)))
    return out


def erase_positions(path: Any) -> str:
    return "/".join("*" if isinstance(p, int) else str(p) for p in path)


def exact_path(path: Any) -> str:
    return "/".join(str(p) for p in path) or "(root)"


def failures(validator: Any, fmt: str, doc: Any) -> list[tuple[tuple[str, str, str], str]]:
    """Every failure of `doc`, each as (identity, description), in document order.

    A failure is a leaf of `leaves`: an error under an `anyOf` is its closest branch's
    failures, so an array whose items fail in two places gives two failures, and dropping one
    of those items drops one. The identity is where and what, with array positions erased
    (compaction moves messages); the description names the exact place and the branches taken,
    never the instance's content."""
    out = []
    for error in schema_errors(validator, fmt, doc):
        for leaf, names in leaves(error):
            schema_path = "/".join(map(str, leaf.absolute_schema_path))
            identity = (erase_positions(leaf.absolute_path), leaf.validator, schema_path)
            described = (f"at {exact_path(leaf.absolute_path)}: {leaf.validator} "
                         f"(via {' > '.join(names) or '-'}; schema path {schema_path})")
            out.append((identity, described))
    return out


def schema_errors(validator: Any, fmt: str, doc: Any) -> list[Any]:
    errors = list(validator.iter_errors(wrap_for_schema(fmt, doc)))
    return sorted(errors, key=lambda e: (list(map(str, e.absolute_path)), e.validator))


def new_errors(validator: Any, fmt: str, before: Any, after: Any) -> list[str]:
    """Failures of `after` beyond those of `before`, counted by identity, described."""
    have = collections.Counter(identity for identity, _ in failures(validator, fmt, before))
    out = []
    for identity, described in failures(validator, fmt, after):
        if have[identity] > 0:
            have[identity] -= 1
        else:
            out.append(described)
    return out


# -- inputs ----------------------------------------------------------------------------------------


def corpus_inputs(root: Path) -> list[tuple[str, str, Any]]:
    """(label, format, request) for every file of the formats crate's test corpus."""
    corpus = root / "crates" / "cutctx-formats" / "tests" / "corpus"
    out = []
    for fmt in FORMATS:
        for path in sorted((corpus / fmt).glob("*.json")):
            out.append((str(path.relative_to(root)), fmt, json.loads(path.read_text("utf-8"))))
    return out


def tau_bench_calls(shared: Path, calls: int) -> tuple[int, list[tuple[str, str, Any]]]:
    """The tau-bench runs replayed call by call, each call in all three formats.

    Call k of a run is its messages before the k-th assistant message, with the task's 14
    tools. Calls are numbered across all runs in file order; `calls` of them are taken at even
    strides (all of them when `calls` is 0 or larger than the total). Returns the total number
    of calls and the sampled requests.
    """
    folder = shared / "realworld" / "tau-bench"
    runs = json.loads((folder / "gpt-4o-airline.json").read_text("utf-8"))
    tools = json.loads((folder / "airline_tools.json").read_text("utf-8"))
    every = []
    for run, entry in enumerate(runs):
        traj = entry["traj"]
        starts = [i for i, m in enumerate(traj) if m.get("role") == "assistant"]
        every.extend((run, k + 1, traj[:start]) for k, start in enumerate(starts))
    total = len(every)
    if 0 < calls < total:
        every = [every[(j * total) // calls] for j in range(calls)]
    out = []
    for run, k, messages in every:
        label = f"tau-bench run {run} call {k}"
        out.append((label, "openai-chat", {"model": "gpt-4o", "messages": messages, "tools": tools}))
        out.append((label, "openai-responses", to_responses(messages, tools)))
        out.append((label, "anthropic", to_anthropic(messages, tools)))
    return total, out


def positional_ids(messages: list[dict[str, Any]]) -> list[list[str]]:
    """New call ids by position: call n of the request is `call_n`, and a tool message answers
    the oldest unanswered call with its id. 49 of the runs give one id to two calls; pairing
    by position keeps the converted requests' ids unique."""
    pending: dict[str, collections.deque[str]] = collections.defaultdict(collections.deque)
    ids: list[list[str]] = []
    n = 0
    for m in messages:
        if m.get("role") == "assistant":
            row = []
            for call in m.get("tool_calls") or []:
                n += 1
                row.append(f"call_{n}")
                pending[call["id"]].append(row[-1])
            ids.append(row)
        elif m.get("role") == "tool":
            queue = pending[m.get("tool_call_id", "")]
            ids.append([queue.popleft() if queue else f"unanswered_{len(ids)}"])
        else:
            ids.append([])
    return ids


def to_anthropic(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
    """A Chat history as an Anthropic request, message by message: the system message becomes
    `system`; assistant text and calls become text and `tool_use` blocks; tool messages become
    `tool_result` blocks of a user message; neighbours of one role are merged so roles
    alternate."""
    out: list[dict[str, Any]] = []
    system = None

    def push(role: str, blocks: list[dict[str, Any]]) -> None:
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})

    for m, ids in zip(messages, positional_ids(messages)):
        role, content = m.get("role"), m.get("content")
        if role == "system":
            system = content
        elif role == "user":
            push("user", [{"type": "text", "text": content or ""}])
        elif role == "assistant":
            blocks = [{"type": "text", "text": content}] if content else []
            for call, new_id in zip(m.get("tool_calls") or [], ids):
                arguments = json.loads(call["function"]["arguments"] or "{}")
                blocks.append({"type": "tool_use", "id": new_id, "name": call["function"]["name"], "input": arguments})
            push("assistant", blocks or [{"type": "text", "text": content or ""}])
        elif role == "tool":
            push("user", [{"type": "tool_result", "tool_use_id": ids[0], "content": content or ""}])
    body: dict[str, Any] = {"model": "claude-sonnet-4-5", "max_tokens": 1024}
    if system is not None:
        body["system"] = system
    body["messages"] = out
    body["tools"] = [
        {"name": t["function"]["name"], "description": t["function"].get("description", ""),
         "input_schema": t["function"]["parameters"]}
        for t in tools
    ]
    return body


def to_responses(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
    """A Chat history as a Responses request, message by message: the system message becomes
    `instructions`; user and assistant text become role messages; each call a `function_call`
    item and each tool message a `function_call_output` item."""
    items: list[dict[str, Any]] = []
    instructions = None
    for m, ids in zip(messages, positional_ids(messages)):
        role, content = m.get("role"), m.get("content")
        if role == "system":
            instructions = content
        elif role in ("user", "assistant"):
            if content or not m.get("tool_calls"):
                items.append({"role": role, "content": content or ""})
            for call, new_id in zip(m.get("tool_calls") or [], ids):
                items.append({"type": "function_call", "call_id": new_id, "name": call["function"]["name"],
                              "arguments": call["function"]["arguments"]})
        elif role == "tool":
            items.append({"type": "function_call_output", "call_id": ids[0], "output": content or ""})
    body: dict[str, Any] = {"model": "gpt-4o"}
    if instructions is not None:
        body["instructions"] = instructions
    body["input"] = items
    body["tools"] = [
        {"type": "function", "name": t["function"]["name"], "description": t["function"].get("description"),
         "parameters": t["function"]["parameters"], "strict": False}
        for t in tools
    ]
    return body


# -- one input through the sweep -------------------------------------------------------------------

_STATE: dict[str, Any] = {}


def init_worker(cli: str, shared: str) -> None:
    _STATE["cli"] = cli
    _STATE["validators"] = load_validators(Path(shared))


def run_cli(fmt: str, body: bytes, budget: int, policy: str, flags: list[str],
            report: str | None = None) -> tuple[str | None, dict[str, Any], bytes]:
    """(None, {}, stdout) on success; (error code, its details, b"") on a refusal."""
    cmd = [_STATE["cli"], "compact", "--error-format", "json", "--format", fmt, "--max-tokens", str(budget),
           "--policy", policy, "--summarize-with", SUMMARIZER, *flags]
    if report:
        cmd += ["--report", report]
    done = subprocess.run(cmd + ["-"], input=body, capture_output=True, check=False)
    if done.returncode == 0:
        return None, {}, done.stdout
    lines = done.stderr.decode("utf-8", "replace").strip().splitlines()
    try:
        error = json.loads(lines[-1])
        return str(error["code"]), error.get("details") or {}, b""
    except (IndexError, ValueError, KeyError, TypeError):
        return f"EXIT_{done.returncode}", {}, b""


def budgets(fmt: str, body: bytes, flags: list[str]) -> tuple[str | None, list[tuple[int, int]]]:
    """(refusal code, []) or (None, [(percent, budget)]) for the BUDGETS of one input.

    The whole prompt's estimate is `cutctx estimate`'s `total` (tools, system, messages and the
    output reserve). The floor is what no budget below can meet: the tools and the reserve,
    which never shrink, plus the untouchable turns (`untouchable_tokens` of the core's
    COMPACTION_BUDGET_UNSATISFIABLE, probed with a budget of just the fixed parts)."""
    estimate_flags = [f for f in flags if f == "--repair"]
    cmd = [_STATE["cli"], "estimate", "--error-format", "json", "--format", fmt, *estimate_flags, "-"]
    done = subprocess.run(cmd, input=body, capture_output=True, check=False)
    if done.returncode != 0:
        code, _, _ = run_cli(fmt, body, 2**62, "drop_oldest", flags)
        return code or f"EXIT_{done.returncode}", []
    counts = json.loads(done.stdout)
    estimate = int(counts["total"])
    outside_turns = int(counts["tools"]) + int(counts["reserve"])
    # Just the fixed parts (tools, reserve, system): they pass their own check, and the turns'
    # budget is then the system text alone, below the untouchable turns whenever any other is.
    probe = outside_turns + int(counts["system"])
    code, details, _ = run_cli(fmt, body, probe, "drop_oldest", flags)
    floor = outside_turns
    if code == "COMPACTION_BUDGET_UNSATISFIABLE" and "untouchable_tokens" in details:
        floor += int(details["untouchable_tokens"])
    floor = min(floor, estimate)
    return None, [(pct, max(1, floor + (estimate - floor) * pct // 100)) for pct in BUDGETS]


def sweep_one(job: tuple[str, str, Any]) -> dict[str, Any]:
    """Every sweep run of one input: validated outputs, refusals by code, new errors."""
    label, fmt, doc = job
    validator = _STATE["validators"][fmt]
    body = json.dumps(doc, ensure_ascii=False).encode("utf-8")
    result: dict[str, Any] = {"label": label, "fmt": fmt, "validated": 0, "refused": collections.Counter(),
                              "input_refused": None, "failures": [], "input_errors": []}
    result["input_errors"] = sorted({f"{i[0]}: {i[1]} ({i[2]})" for i, _ in failures(validator, fmt, doc)})
    seen: dict[str, list[str]] = {hashlib.sha256(body).hexdigest(): []}
    for flag_name, flags in FLAG_SETS:
        code, table = budgets(fmt, body, flags)
        if code is not None:
            # Refused whatever the budget: counted once per input and flag set, not per run.
            result["input_refused"] = code
            continue
        for policy in POLICIES:
            for pct, budget in table:
                code, _, out = run_cli(fmt, body, budget, policy, flags)
                if code is not None:
                    result["refused"][code] += 1
                    continue
                result["validated"] += 1
                digest = hashlib.sha256(out).hexdigest()
                if digest not in seen:
                    seen[digest] = new_errors(validator, fmt, doc, json.loads(out))
                for line in seen[digest]:
                    result["failures"].append(
                        f"{label} [{fmt}] flags={flag_name} policy={policy} budget={pct}% ({budget}): {line}")
    return result


def check_policies_are_known(cli: str) -> None:
    help_text = subprocess.run([cli, "compact", "--help"], capture_output=True, check=True).stdout.decode()
    missing = [p for p in POLICIES if p not in help_text]
    if missing:
        sys.exit(f"FAIL: `cutctx compact --help` does not name the policies {missing}")


def sweep(cli: str, root: Path, shared: Path, calls: int, jobs: int) -> int:
    start = time.monotonic()
    check_policies_are_known(cli)
    corpus = corpus_inputs(root)
    total_calls, replay = tau_bench_calls(shared, calls)
    inputs = corpus + replay
    print(f"inputs: {len(corpus)} corpus requests, {len(replay) // 3} of {total_calls} tau-bench calls "
          f"x 3 formats = {len(replay)}; {len(FLAG_SETS)} flag set(s) x {len(POLICIES)} policies x "
          f"{len(BUDGETS)} budgets ({', '.join(f'{b}%' for b in BUDGETS)} of the room above the untouchable floor) each", flush=True)
    validated = 0
    refused: collections.Counter[str] = collections.Counter()
    input_refused: dict[str, list[str]] = collections.defaultdict(list)
    input_errors: collections.Counter[str] = collections.Counter()
    failures: list[str] = []
    by_format: collections.Counter[str] = collections.Counter()
    with multiprocessing.Pool(jobs, initializer=init_worker, initargs=(cli, str(shared))) as pool:
        for r in pool.imap(sweep_one, inputs, chunksize=4):
            validated += r["validated"]
            by_format[r["fmt"]] += r["validated"]
            refused.update(r["refused"])
            if r["input_refused"]:
                input_refused[r["input_refused"]].append(f"{r['label']} [{r['fmt']}]")
            for e in r["input_errors"]:
                input_errors[f"[{r['fmt']}] {e}"] += 1
            failures.extend(r["failures"])
    elapsed = time.monotonic() - start
    print(f"outputs validated: {validated} ({', '.join(f'{f} {by_format[f]}' for f in FORMATS)})")
    for err, n in sorted(input_errors.items()):
        print(f"inputs with this schema error already: {n}: {err}")
    for code, labels in sorted(input_refused.items()):
        print(f"inputs refused by the CLI: {code}: {len(labels)}")
        for label in labels[:10]:
            print(f"  {label}")
        if len(labels) > 10:
            print(f"  ... and {len(labels) - 10} more")
    for code, n in sorted(refused.items()):
        print(f"sweep runs refused by the CLI: {code}: {n}")
    print(f"time: {elapsed:.1f} s")
    if failures:
        for line in failures:
            print(f"NEW SCHEMA ERROR: {line}")
        print(f"FAIL: {len(failures)} new schema error(s) in compacted requests")
        return 1
    print("schema check passed: no compacted request has a schema error its input did not have")
    return 0


# -- self-test: the checker must catch a broken output ---------------------------------------------


def self_test(shared: Path) -> int:
    """Deliberately broken outputs must be reported; valid changes must not."""
    validators = load_validators(shared)
    chat = {"model": "gpt-4o", "temperature": None, "messages": [
        {"role": "system", "content": "rules"},
        {"role": "user", "content": [{"type": "text", "text": "look it up"}]},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "result"},
        {"role": "user", "content": "thanks"}]}
    responses = {"model": "gpt-4o", "input": [
        {"role": "user", "content": [{"type": "input_text", "text": "look it up"}]},
        {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "result"}]}
    anthropic = {"model": "claude-sonnet-4-5", "max_tokens": 64, "messages": [
        {"role": "user", "content": "look it up"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "result"}]}]}

    def broken(doc: Any, edit: Any) -> Any:
        doc = copy.deepcopy(doc)
        edit(doc)
        return doc

    def drop_tool_call_id(d: Any) -> None:
        del d["messages"][3]["tool_call_id"]

    def drop_call_id(d: Any) -> None:
        # The published schema leaves a function_call_output's call_id optional; a call's is required.
        del d["input"][1]["call_id"]

    def unknown_role(d: Any) -> None:
        d["messages"][0]["role"] = "moderator"

    def shorter(key: str) -> Any:
        return lambda d: d[key].pop(0)

    cases = [
        # (name, format, input, output, must an error be reported?)
        ("chat: the inputs are valid (nullable temperature, text parts)", "openai-chat", {"model": "x", "messages": [{"role": "user", "content": "x"}]}, chat, False),
        ("chat: a tool message without tool_call_id", "openai-chat", chat, broken(chat, drop_tool_call_id), True),
        ("chat: a message dropped", "openai-chat", chat, broken(chat, shorter("messages")), False),
        ("chat: a bare array keeps the input's error", "openai-chat",
         broken(chat, drop_tool_call_id)["messages"], broken(chat, drop_tool_call_id)["messages"][1:], False),
        ("responses: input_text parts (two oneOf branches match)", "openai-responses", {"model": "x", "input": "x"}, responses, False),
        ("responses: a function_call without call_id", "openai-responses", responses, broken(responses, drop_call_id), True),
        ("anthropic: a valid request", "anthropic", {"model": "x", "max_tokens": 1, "messages": []}, anthropic, False),
        ("anthropic: a message with an unknown role", "anthropic", anthropic, broken(anthropic, unknown_role), True),
        ("anthropic: the same invalid message before and after", "anthropic",
         broken(anthropic, unknown_role), broken(anthropic, unknown_role), False),
    ]
    failed = 0
    for name, fmt, before, after, expect in cases:
        found = new_errors(validators[fmt], fmt, before, after)
        ok = bool(found) == expect
        failed += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {name}: {len(found)} new error(s)" + (f": {found[0]}" if found else ""))
    # The unbroken documents must be valid on their own, not only equally invalid.
    for fmt, doc in (("openai-chat", chat), ("openai-responses", responses), ("anthropic", anthropic)):
        if schema_errors(validators[fmt], fmt, doc):
            failed += 1
            print(f"FAIL the valid {fmt} request has schema errors")
    print(f"self-test: {len(cases) + 3 - failed} passed, {failed} failed")
    return 1 if failed else 0


def main() -> int:
    root = Path(__file__).resolve().parent.parent
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cli", help="the cutctx binary (release build)")
    parser.add_argument("--shared", default=str(root.parent / "shared"), help="the shared folder (default ../shared)")
    parser.add_argument("--calls", type=int, default=DEFAULT_CALLS,
                        help=f"tau-bench calls to replay, evenly spread (default {DEFAULT_CALLS}; 0: all)")
    parser.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1), help="worker processes (default 2)")
    parser.add_argument("--self-test", action="store_true", help="check that the checker catches broken outputs")
    args = parser.parse_args()
    shared = Path(args.shared)
    if args.self_test:
        return self_test(shared)
    if not args.cli:
        parser.error("--cli is required unless --self-test")
    return sweep(os.path.abspath(args.cli), root, shared, args.calls, max(1, args.jobs))


if __name__ == "__main__":
    sys.exit(main())
