"""The adapters' shared core, :mod:`cutctx.integrations.compactor`, on its own.

The mask stores (the SQLite one outliving its object), one compactor shared by threads, many
conversations kept apart by :class:`Compactors`, the pin on a retrieved result, the retrieval
tool's answers, and the settings refused with ``ValueError``.
"""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path
from typing import Any

import pytest

from cutctx.integrations.compactor import (
    TOOL_NAME,
    Compactor,
    Compactors,
    MemoryMaskStore,
    SQLiteMaskStore,
    conversation_key,
    is_retrieval_call,
)

STUB = re.compile(r"\(original: \d+ tokens, sha256:([0-9a-f]{64})\)\Z")
MASK_ALL = '{"name": "observation_masking", "keep_recent_results": 0}'
TOOLS = [{"type": "function", "function": {"name": "read", "parameters": {"type": "object"}}}]


def big(n: int, size: int = 8000) -> str:
    return (f"result {n}: " + " ".join(f"w{n}x{i}" for i in range(size)))[:size]


def call(cid: str, name: str = "read", arguments: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"role": "assistant", "content": None, "tool_calls": [
        {"id": cid, "type": "function",
         "function": {"name": name, "arguments": json.dumps(arguments or {})}}]}


def history(n: int, first: str = "Read them.") -> list[dict[str, Any]]:
    """A chat history of ``n`` tool calls, each with a large result."""
    out: list[dict[str, Any]] = [{"role": "system", "content": "Be brief."},
                                 {"role": "user", "content": first}]
    for i in range(n):
        out += [call(f"c{i}"), {"role": "tool", "tool_call_id": f"c{i}", "content": big(i)}]
    return out


def request(messages: list[dict[str, Any]], tools: bool = True) -> dict[str, Any]:
    body: dict[str, Any] = {"model": "m", "messages": messages}
    if tools:
        body["tools"] = TOOLS
    return body


def stubs(out: dict[str, Any]) -> dict[str, str]:
    """call id -> digest of every masked result in ``out``."""
    return {m["tool_call_id"]: match.group(1) for m in out["messages"]
            if m.get("role") == "tool" and (match := STUB.search(m["content"] or ""))}


def compactor(**options: Any) -> Compactor:
    options.setdefault("policy", MASK_ALL)
    options.setdefault("protected_recent_turns", 1)
    return Compactor("openai-chat", 4000, **options)


def test_masked_originals_come_back_and_sqlite_keeps_them(tmp_path: Path) -> None:
    path = tmp_path / "masks.db"
    store = SQLiteMaskStore(path)
    c = compactor(store=store)
    messages = history(4)
    out = c.prepare(request(messages))
    assert c.fired
    masked = stubs(out)
    assert masked, "the firing masked no result"
    store.close()
    # A new object on the same file (another process, a restart) finds every original.
    again = SQLiteMaskStore(path)
    assert len(again) == len(set(masked.values()))
    for cid, digest in masked.items():
        i = int(cid[1:])
        assert again.get(digest) == big(i)
        assert Compactor("openai-chat", 4000, store=again).retrieve({"digest": digest}).text == big(i)
    assert again.get("0" * 64) is None
    again.close()


def test_one_compactor_shared_by_threads_answers_as_serially() -> None:
    requests = [request(history(n)) for n in range(1, 9)]
    threads_n = 4
    serial = compactor()
    expected = [[serial.prepare(r) for _ in range(threads_n)] for r in requests]
    # Round by round, every thread sends the round's history at once to one compactor.
    shared = compactor()
    got: list[list[dict[str, Any]]] = [[] for _ in requests]
    barrier = threading.Barrier(threads_n, timeout=30)
    lock = threading.Lock()

    def worker() -> None:
        for i, r in enumerate(requests):
            barrier.wait()
            out = shared.prepare(r)
            with lock:
                got[i].append(out)

    threads = [threading.Thread(target=worker) for _ in range(threads_n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert got == expected
    assert shared.session.state() == serial.session.state()
    assert len(shared.store) == len(serial.store) > 0  # type: ignore[arg-type]


def test_compactors_keep_conversations_sharing_a_prefix_apart() -> None:
    compactors = Compactors("openai-chat", 4000, policy=MASK_ALL, protected_recent_turns=1)
    a = history(3)
    b = history(3)[:4] + [{"role": "user", "content": "Something else."}]
    # Same system prompt and first message: the same key from the history alone...
    assert conversation_key("openai-chat", request(a)) == conversation_key("openai-chat", request(b))
    # ...so the callers give their own ids.
    out_a = compactors.prepare(request(a), key="a")
    out_b = compactors.prepare(request(b), key="b")
    assert compactors.get("a") is not compactors.get("b") and len(compactors) == 2
    assert out_a == compactor().prepare(request(a))
    assert out_b == compactor().prepare(request(b))
    # Next calls of each continue its own session.
    a2 = a + [call("c9"), {"role": "tool", "tool_call_id": "c9", "content": "short"}]
    assert compactors.prepare(request(a2), key="a")["messages"][: len(out_a["messages"])] == (
        out_a["messages"]
    )
    # Different first messages: different keys, without ids.
    other = history(1, first="Another task.")
    assert conversation_key("openai-chat", request(other)) != conversation_key(
        "openai-chat", request(a))
    compactors.prepare(request(other))
    assert len(compactors) == 3
    # A Responses conversation opened with a string reads as the same one once it is a list.
    assert conversation_key("openai-responses", {"input": "Hi"}) == conversation_key(
        "openai-responses",
        {"input": [{"role": "user", "content": [{"type": "input_text", "text": "Hi"}]},
                   {"type": "message", "role": "assistant", "content": "Hello"}]})


def test_a_retrieved_result_is_pinned_for_keep_retrieved_for_calls() -> None:
    def run(keep: int) -> list[tuple[bool, str]]:
        c = compactor(keep_retrieved_for=keep)
        messages = history(3)
        out = c.prepare(request(messages))
        digest = stubs(out)["c0"]
        messages += [call("r1", TOOL_NAME, {"digest": digest})]
        messages.append(c.answer(messages[-1]["tool_calls"][0]))
        sent: list[tuple[bool, str]] = []
        for n in range(10, 18):  # large results: the session fires often
            out = c.prepare(request(messages))
            (retrieved,) = [m["content"] for m in out["messages"]
                            if m.get("tool_call_id") == "r1"]
            sent.append((c.fired, retrieved))
            messages += [call(f"c{n}"), {"role": "tool", "tool_call_id": f"c{n}",
                                         "content": big(n, 5000)}]
        return sent

    sent = run(3)
    assert [text for _, text in sent[:3]] == [big(0)] * 3  # pinned for three calls
    assert sent[2][0]  # the third fired, and kept it
    assert any(STUB.search(text) for _, text in sent[3:])  # then masked like any result
    unpinned = run(0)
    assert unpinned[2][0] and STUB.search(unpinned[2][1])  # the same firing, unpinned


def test_retrieval_answers_and_the_tool_offered() -> None:
    c = compactor()
    out = c.prepare(request(history(3)))
    assert [t["function"]["name"] for t in out["tools"]] == ["read", TOOL_NAME]
    digest = next(iter(stubs(out).values()))
    good = call("r", TOOL_NAME, {"digest": f"sha256:{digest.upper()}"})["tool_calls"][0]
    assert is_retrieval_call(good)
    assert c.answer(good)["content"].startswith("result ")
    unknown = c.answer(call("u", TOOL_NAME, {"digest": "0" * 64})["tool_calls"][0])
    assert unknown["tool_call_id"] == "u" and "no tool result" in unknown["content"]
    assert c.retrieve("not json").is_error
    assert c.retrieve({"digest": "abc"}).is_error
    assert c.retrieve({}).is_error
    anthropic = Compactor("anthropic", 4000).answer(
        {"type": "tool_use", "id": "t", "name": TOOL_NAME, "input": {"digest": "1" * 64}})
    assert anthropic["is_error"] is True and anthropic["tool_use_id"] == "t"
    with pytest.raises(ValueError, match=TOOL_NAME):
        c.answer(call("x")["tool_calls"][0])
    # No tools, or tools the model may not call: no retrieval tool.
    bare = compactor()
    assert "tools" not in bare.prepare(request(history(1), tools=False))
    none = dict(request(history(1)), tool_choice="none")
    assert compactor().prepare(none)["tools"] == TOOLS
    assert compactor(retrieval=False).prepare(request(history(1)))["tools"] == TOOLS


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"format": "openai"}, "unknown format 'openai'"),
        ({"window": 0}, "window must be a positive number"),
        ({"window": -3}, "window must be a positive number"),
        ({"window": "big"}, "window must be a positive number"),
        ({"keep_retrieved_for": -1}, "keep_retrieved_for must be a non-negative integer"),
        ({"store": object()}, "store must be a MaskStore"),
        ({"trigger": 2.0}, "bad compaction settings"),
        ({"policy": "nope"}, "bad compaction settings: unknown policy"),
    ],
)
def test_bad_arguments_raise_value_error(kwargs: dict[str, Any], message: str) -> None:
    arguments: dict[str, Any] = {"format": "openai-chat", "window": 4000, **kwargs}
    with pytest.raises(ValueError, match=re.escape(message)):
        Compactor(**arguments)
    with pytest.raises(ValueError, match=re.escape(message)):
        Compactors(**arguments)


def test_compactors_bad_max_conversations_and_eviction() -> None:
    with pytest.raises(ValueError, match="max_conversations"):
        Compactors("openai-chat", 4000, max_conversations=0)
    compactors = Compactors("openai-chat", 4000, max_conversations=2, store=MemoryMaskStore())
    first = compactors.get("a")
    compactors.get("b")
    compactors.get("a")
    compactors.get("c")  # "b" was used least recently
    assert "a" in compactors and "b" not in compactors and compactors.get("a") is first
