"""cutctx.Session against ``cutctx session``: the same bytes, call for call, and its own
promises (settings refused when it is made, state that persists and is checked, calls that
serialize across threads, a summarizer's failure named).

The equality runs the 200 tau-bench runs of ``../shared/realworld`` (each in one of the three
formats, by turn) call by call through both, with ``target/release/cutctx`` (or
``$CUTCTX_BIN``) keeping its state in a file and the session keeping it in memory.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

import cutctx
from cutctx.formats import FormatCompactionError
from cutctx.session import Session

ROOT = Path(__file__).resolve().parents[3]
BIN = Path(os.environ.get("CUTCTX_BIN", ROOT / "target" / "release" / "cutctx"))
RUNS = ROOT.parent / "shared" / "realworld" / "tau-bench"
SUMMARY = "Earlier turns of this conversation, summarized."

needs_cli = pytest.mark.skipif(
    not BIN.is_file(), reason=f"the CLI binary is not built ({BIN}): cargo build --release -p cutctx-cli"
)


def _text(m: dict[str, Any]) -> str:
    c = m.get("content")
    return c if isinstance(c, str) else ""


def to_anthropic(chat: dict[str, Any]) -> dict[str, Any]:
    """A Chat request as an Anthropic one, by position (as the Rust corpus test converts)."""
    system: list[str] = []
    messages: list[dict[str, Any]] = []
    for m in chat["messages"]:
        role = m["role"]
        if role == "system":
            system.append(_text(m))
            continue
        if role == "assistant":
            blocks: list[dict[str, Any]] = []
            if _text(m):
                blocks.append({"type": "text", "text": _text(m)})
            for c in m.get("tool_calls") or []:
                try:
                    args = json.loads(c["function"].get("arguments") or "{}")
                except ValueError:
                    args = {}
                blocks.append({"type": "tool_use", "id": c["id"], "name": c["function"]["name"],
                               "input": args if isinstance(args, dict) else {}})
        elif role == "tool":
            role = "user"
            blocks = [{"type": "tool_result", "tool_use_id": m["tool_call_id"], "content": _text(m)}]
        else:
            role = "user"
            blocks = [{"type": "text", "text": _text(m)}]
        if not blocks:
            continue
        if messages and messages[-1]["role"] == role:
            messages[-1]["content"].extend(blocks)
        else:
            messages.append({"role": role, "content": blocks})
    tools = [{"name": t["function"]["name"], "description": t["function"].get("description"),
              "input_schema": t["function"].get("parameters")} for t in chat.get("tools") or []]
    return {"model": "claude", "max_tokens": 1024, "system": "\n".join(system), "tools": tools,
            "messages": messages}


def to_responses(chat: dict[str, Any]) -> dict[str, Any]:
    """A Chat request as a Responses one, by position."""
    items: list[dict[str, Any]] = []
    for m in chat["messages"]:
        role = m["role"]
        if role == "tool":
            items.append({"type": "function_call_output", "call_id": m["tool_call_id"],
                          "output": _text(m)})
        elif role == "assistant":
            if _text(m):
                items.append({"type": "message", "role": "assistant",
                              "content": [{"type": "output_text", "text": _text(m)}]})
            for c in m.get("tool_calls") or []:
                items.append({"type": "function_call", "call_id": c["id"],
                              "name": c["function"]["name"],
                              "arguments": c["function"].get("arguments") or "{}"})
        else:
            items.append({"role": role, "content": _text(m)})
    tools = [{"type": "function", **{k: t["function"].get(k) for k in ("name", "description", "parameters")}}
             for t in chat.get("tools") or []]
    return {"model": "gpt-4o", "tools": tools, "input": items}


FORMATS = ("openai-chat", "openai-responses", "anthropic")
KEY = {"openai-chat": "messages", "anthropic": "messages", "openai-responses": "input"}


def _is_model(fmt: str, item: dict[str, Any]) -> bool:
    if fmt == "openai-responses":
        return item.get("role") == "assistant" or item.get("type") in ("function_call", "reasoning")
    return item.get("role") == "assistant"


def _calls(fmt: str, request: dict[str, Any]) -> list[dict[str, Any]]:
    """The request of every call of the run: the list before each model turn."""
    items = request[KEY[fmt]]
    points = [i for i, m in enumerate(items) if _is_model(fmt, m) and (i == 0 or not _is_model(fmt, items[i - 1]))]
    return [{**request, KEY[fmt]: items[:i]} for i in points]


def _cli_session(args: list[str], request: bytes, state: Path) -> tuple[bytes, dict[str, Any] | None]:
    run = subprocess.run(
        [str(BIN), "--error-format", "json", "session", *args, "--state", str(state), "-"],
        input=request, capture_output=True, check=False,
    )
    if run.returncode != 0:
        return b"", json.loads(run.stderr.decode().strip().splitlines()[-1])
    return run.stdout, None


def _summary_command(tmp: Path) -> str:
    script = tmp / "summarize.py"
    script.write_text(f"import sys\nsys.stdin.read()\nsys.stdout.write({SUMMARY!r})\n")
    return f"{sys.executable} {script}"


@needs_cli
def test_the_session_gives_the_commands_bytes_over_the_tau_bench_runs(tmp_path: Path):
    runs_file, tools_file = RUNS / "gpt-4o-airline.json", RUNS / "airline_tools.json"
    if not (runs_file.is_file() and tools_file.is_file()):
        pytest.skip("../shared/realworld/tau-bench is absent")
    tools = json.loads(tools_file.read_bytes())
    runs = json.loads(runs_file.read_bytes())
    assert len(runs) == 200
    policies = ("drop_oldest", "observation_masking", "summarizing")
    command = _summary_command(tmp_path)
    calls = fired = errors = 0
    fired_in: dict[str, int] = dict.fromkeys(FORMATS, 0)
    codes: set[str] = set()
    for n, record in enumerate(runs):
        chat = {"model": "gpt-4o", "messages": record["traj"], "tools": tools}
        fmt = FORMATS[n % 3]
        run = {"openai-chat": chat, "openai-responses": to_responses(chat),
               "anthropic": to_anthropic(chat)}[fmt]
        requests = _calls(fmt, run)
        if not requests:
            continue
        policy = policies[(n // 3) % 3]
        whole = len(json.dumps(run)) // 4
        window = max(whole * 7 // 10, 1)
        args = ["--format", fmt, "--window", str(window), "--policy", policy, "--repair",
                "--summarize-with", command]
        state = tmp_path / f"state-{n}.json"
        session = Session(fmt, window, policy=policy, repair=True, summarize=lambda _: SUMMARY)
        for k, request in enumerate(requests):
            data = json.dumps(request).encode()
            out, error = _cli_session(args, data, state)
            case = (n, fmt, policy, k)
            if error is not None:
                with pytest.raises(FormatCompactionError) as e:
                    session.prepare(data)
                assert (e.value.code, e.value.details) == (error["code"], error["details"]), case
                errors += 1
                codes.add(error["code"])
                continue
            assert session.prepare(data) == out, case
            assert session.state() == state.read_bytes(), case
            calls += 1
            fired += session.fired
            fired_in[fmt] += session.fired
    # Measured with the release CLI: the 200 runs make 2,454 calls, every one compared (about
    # 10 s, so no sampling stride is needed): 1,789 give the same bytes and state on both sides,
    # 213 of them firings (Chat 63, Responses 79, Anthropic 71), and 665 (27%) are refused by
    # both with COMPACTION_BUDGET_UNSATISFIABLE: calls whose untouchable part (about 3,700
    # tokens of tools and system, and the protected recent turns) exceeds the window. The window,
    # 0.7 of a quarter of the run's JSON, is about 0.81 of its final estimated size; the
    # replay's 0.7 of that size would leave about 1,024 calls untouchable (docs/SESSIONS.md).
    assert calls + errors == 2454, (calls, errors)
    assert calls >= 1750 and fired >= 200, (calls, fired, errors)
    assert min(fired_in.values()) >= 50, fired_in
    assert errors <= 0.3 * (calls + errors), (calls, errors)
    assert codes == {"COMPACTION_BUDGET_UNSATISFIABLE"}, codes


class _CountingCore:
    """The session's core, counting the appended calls it answered without the history."""

    def __init__(self, core: Any) -> None:
        self.core, self.sent = core, 0

    def append_json(self, data: str) -> bool | None:
        appended: bool | None = self.core.append_json(data)
        self.sent += appended is True
        return appended

    def __getattr__(self, name: str) -> Any:
        return getattr(self.core, name)


def test_prepare_appended_gives_what_prepare_gives_over_the_tau_bench_runs():
    runs_file, tools_file = RUNS / "gpt-4o-airline.json", RUNS / "airline_tools.json"
    if not (runs_file.is_file() and tools_file.is_file()):
        pytest.skip("../shared/realworld/tau-bench is absent")
    tools = json.loads(tools_file.read_bytes())
    runs = json.loads(runs_file.read_bytes())
    policies = ("drop_oldest", "observation_masking", "summarizing")
    calls = fired = errors = sent = 0
    for n, record in enumerate(runs):
        chat = {"model": "gpt-4o", "messages": record["traj"], "tools": tools}
        fmt = FORMATS[n % 3]
        run = {"openai-chat": chat, "openai-responses": to_responses(chat),
               "anthropic": to_anthropic(chat)}[fmt]
        policy = policies[(n // 3) % 3]
        window = max(len(json.dumps(run)) // 4 * 7 // 10, 1)
        whole = Session(fmt, window, policy=policy, summarize=lambda _: SUMMARY)
        appending = Session(fmt, window, policy=policy, summarize=lambda _: SUMMARY)
        core = _CountingCore(appending._core)
        appending._core = core
        base: list[Any] | None = None  # the history of the appending side's last success
        for k, request in enumerate(_calls(fmt, run)):
            case = (n, fmt, policy, k)
            items = request[KEY[fmt]]
            try:
                expected: Any = whole.prepare(request)
            except FormatCompactionError as e:
                expected = (e.code, e.details)
            try:
                if base is None:
                    got: Any = appending.prepare(request)
                else:
                    assert items[: len(base)] == base, case
                    got = appending.prepare_appended(items[len(base):])
            except FormatCompactionError as e:
                assert (e.code, e.details) == expected, case
                errors += 1
                continue
            # Equal as values: after a firing the core writes keys in its own order, while
            # appended messages keep the caller's.
            assert got == expected, case
            assert appending.state() == whole.state(), case
            assert appending.fired == whole.fired, case
            base = items
            calls += 1
            fired += whole.fired
        sent += core.sent
    # Measured: 1,721 calls answered alike, 208 of them firings and 1,383 answered from the
    # appended messages alone; 733 refused alike (without repair, a run's first invalid request
    # stops it; and the windows the untouchable part exceeds, as above).
    assert calls >= 1700 and fired >= 200, (calls, fired, errors)
    assert sent >= 0.75 * calls, (sent, calls)


def test_prepare_appended_needs_a_history_to_continue():
    session = Session("openai-chat", 1000)
    with pytest.raises(ValueError, match="call prepare with the whole history first"):
        session.prepare_appended([{"role": "user", "content": "Hi"}])
    session.prepare(b'{"model": "m", "messages": [{"role": "user", "content": "Hi"}]}')
    with pytest.raises(ValueError, match="call prepare with the whole history first"):
        session.prepare_appended([{"role": "assistant", "content": "Hello."}])
    history = {"model": "m", "messages": [{"role": "user", "content": "Hi"}], "tools": []}
    session.prepare(history)
    # A message its provider would refuse after the history: the error, and nothing taken in.
    with pytest.raises(FormatCompactionError) as e:
        session.prepare_appended([{"role": "tool", "tool_call_id": "c9", "content": "x"}])
    assert e.value.code.startswith("FORMAT_")
    state = session.state()
    sent = session.prepare_appended([{"role": "assistant", "content": "Hello."}])
    assert list(sent) == ["model", "messages", "tools"], "the request keeps its order"
    assert [m["content"] for m in sent["messages"]] == ["Hi", "Hello."]
    assert session.state() != state


def test_bad_settings_are_refused_when_the_session_is_made():
    with pytest.raises(FormatCompactionError) as e:
        Session("openai-chat", 1000, trigger=0.5, target=0.8)
    assert e.value.code == "VALIDATION_ERROR"
    with pytest.raises(FormatCompactionError) as e:
        Session("openai-chat", 1000, policy="no_such_policy")
    assert e.value.code == "VALIDATION_ERROR"
    with pytest.raises(FormatCompactionError) as e:
        Session("gemini", 1000)  # type: ignore[arg-type]
    assert e.value.code == "FORMAT_UNSUPPORTED"
    with pytest.raises(FormatCompactionError) as e:
        Session("openai-chat", 1000, reasoning="drop")  # type: ignore[arg-type]
    assert e.value.code == "FORMAT_UNSUPPORTED"


def _history(exchanges: int, size: int = 400) -> dict[str, Any]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "Be brief."}]
    for i in range(exchanges):
        messages.append({"role": "user", "content": f"question {i} " + "q" * size})
        messages.append({"role": "assistant", "content": f"answer {i} " + "a" * size})
    return {"model": "m", "messages": messages}


def test_between_firings_each_request_is_the_last_with_the_new_messages_appended():
    session = Session("openai-chat", 3000, policy="drop_oldest", protected_recent_turns=2)
    previous: list[Any] | None = None
    firings = 0
    for n in range(1, 40):
        sent = session.prepare(_history(n))["messages"]
        if session.fired:
            firings += 1
        elif previous is not None:
            assert sent[: len(previous)] == previous
        previous = sent
    assert firings >= 2


def test_the_state_persists_restores_and_is_checked():
    session = Session("openai-chat", 3000, policy="drop_oldest")
    assert session.state() is None
    for n in range(1, 20):
        session.prepare(_history(n))
    state = session.state()
    assert state is not None and json.loads(state)
    again = Session.from_state(state, "openai-chat", 3000, policy="drop_oldest")
    data = json.dumps(_history(20)).encode()
    assert again.prepare(data) == session.prepare(data)
    with pytest.raises(FormatCompactionError) as e:
        Session.from_state(state[:-5], "openai-chat", 3000)
    assert e.value.code == "VALIDATION_ERROR"
    with pytest.raises(FormatCompactionError) as e:
        Session.from_state(state, "anthropic", 3000)
    assert e.value.code == "VALIDATION_ERROR"
    assert "q" * 20 not in e.value.message


def test_a_request_that_fits_comes_back_byte_for_byte():
    data = b'{"model":"m",  "messages":[{"role":"user","content":"Hi"}]}'
    session = Session("openai-chat", 1000)
    assert session.prepare(data) == data + b"\n"
    assert session.prepare(data.decode()) == data + b"\n"
    assert session.fired is False and session.notes == []


def test_calls_from_many_threads_on_one_session_serialize():
    session = Session("openai-chat", 3000, policy="drop_oldest")
    data = json.dumps(_history(30)).encode()
    expected = Session("openai-chat", 3000, policy="drop_oldest").prepare(data)
    results: list[bytes] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def work() -> None:
        try:
            for _ in range(20):
                out = session.prepare(data)
                with lock:
                    results.append(out)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    # The first call fires; every later one re-sends its prefix with nothing new.
    assert len(results) == 80 and set(results) == {expected}


def test_a_summarizer_that_raises_is_named_and_kept_as_the_cause():
    def broken(_: dict[str, Any]) -> str:
        raise RuntimeError("model down")

    session = Session("openai-chat", 3000, policy="summarizing", summarize=broken)
    with pytest.raises(FormatCompactionError) as e:
        session.prepare(_history(30))
    assert e.value.code == "SUMMARIZER_ERROR"
    assert isinstance(e.value.__cause__, RuntimeError)
    assert session.state() is None, "a failed call leaves the state as it was"
    # Without a summarizer, a firing that needs summaries says which, in this package's words.
    with pytest.raises(FormatCompactionError) as e:
        Session("openai-chat", 3000, policy="summarizing").prepare(_history(30))
    assert e.value.code == "COMPACTION_SUMMARY_MISSING"
    assert "summarize=" in e.value.message and "--summarize-with" not in e.value.message


def test_with_no_summarizer_and_no_policy_a_session_fires_and_never_fails():
    session = Session("openai-chat", 3000)
    firings = 0
    for n in range(1, 40):
        sent = session.prepare(_history(n))
        firings += session.fired
        assert len(sent["messages"]) <= len(_history(n)["messages"])
    assert firings >= 1, "it fired, masking and dropping"
    # Given a summarizer, the default chain asks it.
    asked: list[str] = []

    def summarize(document: dict[str, Any]) -> str:
        asked.append(document["group_id"])
        return SUMMARY

    summarizing = Session("openai-chat", 3000, summarize=summarize)
    for n in range(1, 40):
        summarizing.prepare(_tool_history(n))
    assert asked, "the default chain summarized"


def _agent_loop(n: int) -> dict[str, Any]:
    """A tool loop of ``n`` calls: a system turn, a task, then a call and its result each."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a careful agent."},
        {"role": "user", "content": "Read the files and report."},
    ]
    for i in range(n):
        call = {"id": f"c{i}", "type": "function", "function": {"name": "read", "arguments": "{}"}}
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": f"c{i}", "content": f"file {i}: " + "w " * 200})
    return {"model": "m", "messages": messages}


def test_an_async_summarizer_summarizes_ahead_and_the_firing_swaps_it_in():
    documents: list[dict[str, Any]] = []

    async def summarize(document: dict[str, Any]) -> str:
        documents.append(document)
        await asyncio.sleep(0)
        return "## Task and constraints\nRead the files."

    async def loop() -> list[Any]:
        session = Session("openai-chat", 3000, summarize=summarize)
        sent = []
        for n in range(60):
            sent.append(await session.aprepare(_agent_loop(n)))
            await asyncio.sleep(0)
        return sent

    sent = asyncio.run(loop())
    assert documents, "a summary was asked for"
    document = documents[0]
    assert set(document) == {"format", "request", "covered", "instruction"}
    # What the summarizer reads is the request as last sent plus the instruction: it reads the
    # provider's cache.
    asked = document["request"]["messages"]
    assert asked[-1]["content"] == document["instruction"]
    assert any(asked[:-1] == s["messages"] for s in sent), "the prefix as sent"
    assert document["request"]["stream"] is False
    swapped = [s for s in sent if "Read the files." in json.dumps(s) and "[Summary" in json.dumps(s)]
    assert swapped, "a firing swapped the summary in"
    first = swapped[0]["messages"]
    assert first[0]["role"] == "system" and first[1]["content"] == "Read the files and report."
    assert first[2]["content"].startswith("[Summary of the earlier conversation")


def test_an_async_summarizer_that_fails_never_fails_a_call():
    async def summarize(document: dict[str, Any]) -> str:
        raise RuntimeError("the model is down")

    async def loop() -> tuple[int, list[str]]:
        session = Session("openai-chat", 3000, summarize=summarize)
        fired, notes = 0, []
        for n in range(60):
            await session.aprepare(_agent_loop(n))
            await asyncio.sleep(0)
            fired += session.fired
            notes += session.notes
        return fired, notes

    fired, notes = asyncio.run(loop())
    assert fired >= 1, "the firing compacted with the policy"
    assert any("failed (RuntimeError)" in n for n in notes), notes
    assert any("compacted with the policy" in n for n in notes), notes


def test_a_sync_prepare_never_calls_an_async_summarizer():
    called: list[int] = []

    async def summarize(document: dict[str, Any]) -> str:
        called.append(1)
        return "s"

    session = Session("openai-chat", 3000, summarize=summarize)
    for n in range(60):
        session.prepare(_agent_loop(n))
    assert not called
    with pytest.raises(ValueError, match="summary_ahead"):
        Session("openai-chat", 3000, summary_ahead=0)


def test_the_session_is_exported_at_the_top():
    assert cutctx.Session is Session


def _tool_history(exchanges: int, size: int = 400) -> dict[str, Any]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "Be brief."}]
    for i in range(exchanges):
        call = {"id": f"call_{i}", "type": "function", "function": {"name": "read", "arguments": "{}"}}
        messages.append({"role": "user", "content": f"question {i} " + "q" * size})
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": f"call_{i}", "content": f"result {i} " + "r" * size})
        messages.append({"role": "assistant", "content": f"answer {i} " + "a" * size})
    return {"model": "m", "messages": messages}


@needs_cli
def test_a_pinned_result_survives_a_firing_as_the_commands_pin_keeps_it(tmp_path: Path):
    history = _tool_history(12)
    pinned = history["messages"][7]  # the result of call_1
    assert pinned["tool_call_id"] == "call_1"
    plain = Session("openai-chat", 3000).prepare(history)
    assert pinned not in plain["messages"], "without the pin the firing takes it"
    session = Session("openai-chat", 3000)
    kept = session.prepare(history, pin=["call_1"])
    assert session.fired
    assert pinned in kept["messages"] and history["messages"][6] in kept["messages"]
    out, error = _cli_session(
        ["--format", "openai-chat", "--window", "3000", "--pin", "call_1"],
        json.dumps(history).encode(), tmp_path / "state.json",
    )
    assert error is None and json.loads(out) == kept
    with pytest.raises(TypeError):
        session.prepare(history, pin="call_1")  # type: ignore[arg-type]
