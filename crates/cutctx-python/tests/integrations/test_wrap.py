"""``cutctx.wrap`` around the official OpenAI and Anthropic SDK clients, through a loopback server.

Each format's scripted agent loop makes 60 model calls through a wrapped ``openai.OpenAI`` /
``openai.AsyncOpenAI`` (Chat Completions, Responses) or ``anthropic.Anthropic`` /
``anthropic.AsyncAnthropic`` (Messages) whose ``base_url`` is a :class:`FakeProvider`. The fake
model calls a tool most turns and the loop answers with results of 2 to 20 KB, so the session
fires several times; every request the server received must pass :class:`LoopChecks`. Along the
way the model reads a masked result back with ``cutctx_retrieve`` (the original must come back
exactly, and stay unmasked for ``keep_retrieved_for`` calls) and asks for a digest nobody stored
(an error result, never an exception).
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable
from typing import Any

import anthropic
import openai
import pytest
from fake_provider import (
    FakeProvider,
    chat_completion,
    function_call_item,
    message,
    message_item,
    reasoning_item,
    response,
)
from loopchecks import LoopChecks


from cutctx.formats import estimate
from cutctx.wrap import control, wrap

WINDOW = 20_000
CALLS = 60
KEEP = 3
TOOL = "cutctx_retrieve"
UNKNOWN = "f" * 64
STUB = re.compile(r"\(original: (\d+) tokens, sha256:([0-9a-f]{64})\)\Z")
PATHS = {"openai-chat": "/v1/chat/completions", "openai-responses": "/v1/responses",
         "anthropic": "/v1/messages"}
_WORDS = ("alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta")


def tool_output(n: int) -> str:
    """The ``n``-th tool result: 2 to 20 KB, different at every ``n``."""
    size = 2000 + (n * 7919) % 18001
    head = f"file-{n}.txt:\n"
    words = " ".join(f"{_WORDS[(n + i) % 8]}{i % 89}" for i in range(size // 6 + 2))
    return (head + words)[:size]


# --- reading a request as the model sees it --------------------------------------------------

def results(format: str, body: dict[str, Any]) -> list[tuple[str, Any]]:
    """``(call_id, content)`` of every tool result in ``body``."""
    out: list[tuple[str, Any]] = []
    if format == "openai-chat":
        out = [(m["tool_call_id"], m.get("content")) for m in body["messages"]
               if m.get("role") == "tool"]
    elif format == "openai-responses":
        out = [(i["call_id"], i.get("output")) for i in body["input"]
               if isinstance(i, dict) and i.get("type") == "function_call_output"]
    else:
        for m in body["messages"]:
            if m["role"] == "user" and isinstance(m["content"], list):
                out += [(b["tool_use_id"], b.get("content")) for b in m["content"]
                        if b.get("type") == "tool_result"]
    return out


def result_block(body: dict[str, Any], call_id: str) -> dict[str, Any]:
    """The Anthropic ``tool_result`` block answering ``call_id``."""
    for m in body["messages"]:
        if m["role"] == "user" and isinstance(m["content"], list):
            for b in m["content"]:
                if b.get("type") == "tool_result" and b["tool_use_id"] == call_id:
                    return dict(b)
    raise AssertionError(f"no result for {call_id}")


def tool_names(format: str, body: dict[str, Any]) -> list[str]:
    tools = body.get("tools") or []
    if format == "openai-chat":
        return [t["function"]["name"] for t in tools]
    return [t["name"] for t in tools]


# --- the scripted model ------------------------------------------------------------------------

class Model:
    """The fake model of one conversation: reads the request, picks the next step."""

    retrieve_above = 0.6  # read a stub back once the request is this full

    def __init__(self, format: str) -> None:
        self.format = format
        self.n = 0
        self.retrieval: dict[str, Any] | None = None  # the call reading a stub back
        self.unknown: dict[str, Any] | None = None  # the call asking for an unknown digest

    def step(self, body: dict[str, Any]) -> tuple[str, list[tuple[str, str, dict[str, Any]]], bool]:
        """``(text, calls, reasoning)`` for this call."""
        n = self.n
        self.n += 1
        offered = TOOL in tool_names(self.format, body)
        stubs = [(cid, int(m.group(1)), m.group(2)) for cid, content in results(self.format, body)
                 if isinstance(content, str) and (m := STUB.search(content))]
        total = estimate(body, self.format)["total"]  # type: ignore[arg-type]
        if self.retrieval is None and offered and stubs and n >= 10 and total > self.retrieve_above * WINDOW:
            of, _, digest = max(stubs, key=lambda s: s[1])
            self.retrieval = {"call": f"call_ret{n}", "of": of, "digest": digest, "at": n}
            return "", [(f"call_ret{n}", TOOL, {"digest": digest})], False
        if self.retrieval is not None and self.unknown is None and n > self.retrieval["at"] + KEEP:
            self.unknown = {"call": f"call_unk{n}", "at": n}
            return "", [(f"call_unk{n}", TOOL, {"digest": UNKNOWN})], False
        if n % 6 == 5:
            return f"Step {n} is done.", [], n % 4 == 1
        return f"Reading file {n}.", [(f"call_{n}", "read_file", {"path": f"file-{n}.txt"})], n % 3 == 0

    def respond(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        assert path == PATHS[self.format], path
        number = self.n
        text, calls, reasoning = self.step(body)
        if self.format == "openai-chat":
            return chat_completion(text=text or None, tool_calls=tuple(calls), request=body,
                                   number=number)
        if self.format == "openai-responses":
            output = [reasoning_item(number, f"enc-{number}")] if reasoning else []
            if text:
                output.append(message_item(number, text))
            output += [function_call_item(number, cid, name, args) for cid, name, args in calls]
            return response(output=output, request=body, number=number)
        content: list[dict[str, Any]] = []
        if reasoning:
            content.append({"type": "thinking", "thinking": f"Plan for step {number}.",
                            "signature": f"sig-{number}"})
        if text:
            content.append({"type": "text", "text": text})
        content += [{"type": "tool_use", "id": cid, "name": name, "input": args}
                    for cid, name, args in calls]
        return message(content=content, request=body, number=number)


# --- the agent loops, through the SDK clients --------------------------------------------------

TOOLS = {
    "openai-chat": [{"type": "function", "function": {
        "name": "read_file", "description": "Read a file.",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}},
                       "required": ["path"]}}}],
    "openai-responses": [{"type": "function", "name": "read_file", "description": "Read a file.",
                          "parameters": {"type": "object",
                                         "properties": {"path": {"type": "string"}},
                                         "required": ["path"]}}],
    "anthropic": [{"name": "read_file", "description": "Read a file.",
                   "input_schema": {"type": "object", "properties": {"path": {"type": "string"}},
                                    "required": ["path"]}}],
}


def client_for(format: str, server: FakeProvider, is_async: bool) -> Any:
    if format == "anthropic":
        cls: Any = anthropic.AsyncAnthropic if is_async else anthropic.Anthropic
        return cls(base_url=server.anthropic_base_url, api_key="test", max_retries=0)
    cls = openai.AsyncOpenAI if is_async else openai.OpenAI
    return cls(base_url=server.openai_base_url, api_key="test", max_retries=0)


def sender(wrapped: Any, format: str, is_async: bool) -> Callable[..., Any]:
    """A function making one model call with the given arguments, sync or async underneath."""
    if format == "openai-chat":
        method = wrapped.chat.completions.create
    elif format == "openai-responses":
        method = wrapped.responses.create
    else:
        method = wrapped.messages.create
    if not is_async:
        return method  # type: ignore[no-any-return]
    loop = asyncio.new_event_loop()

    def send(**kwargs: Any) -> Any:
        return loop.run_until_complete(method(**kwargs))

    send.loop = loop  # type: ignore[attr-defined]
    return send


class Loop:
    """One conversation's agent loop; keeps what the checks need."""

    def __init__(self, format: str, wrapped: Any, send: Callable[..., Any], server: FakeProvider,
                 model: Model) -> None:
        self.format, self.wrapped, self.send, self.server, self.model = (
            format, wrapped, send, server, model)
        self.checks = LoopChecks(format, WINDOW)
        self.outputs: dict[str, str] = {}
        self.answers: dict[str, Any] = {}
        self.fired: list[bool] = []
        if format == "openai-chat":
            self.history: list[Any] = [{"role": "system", "content": "You are a careful agent."},
                                       {"role": "user", "content": "Read every file."}]
        else:
            self.history = [{"role": "user", "content": "Read every file."}]

    def call(self) -> Any:
        tools = TOOLS[self.format]
        if self.format == "openai-chat":
            return self.send(model="fake-model", messages=self.history, tools=tools)
        if self.format == "openai-responses":
            return self.send(model="fake-model", instructions="You are a careful agent.",
                             input=self.history, tools=tools, store=False,
                             include=["reasoning.encrypted_content"])
        return self.send(model="fake-model", max_tokens=2048, system="You are a careful agent.",
                         messages=self.history, tools=tools,
                         thinking={"type": "adaptive"})

    def run(self) -> None:
        cutctx_control = control(self.wrapped)
        for _ in range(CALLS):
            before = len(self.server.requests)
            reply = self.call()
            assert len(self.server.requests) == before + 1
            body = self.server.requests[-1][1]
            assert cutctx_control.last is not None
            fired = cutctx_control.last.fired
            self.fired.append(fired)
            self.checks.see(body, fired=fired)
            self.take(reply, body)
        assert not self.server.errors, self.server.errors

    def tool(self, call_id: str, n_text: str) -> str:
        n = int(n_text.removeprefix("call_"))
        self.outputs[call_id] = tool_output(n)
        return self.outputs[call_id]

    def take(self, reply: Any, body: dict[str, Any]) -> None:
        cutctx_control = control(self.wrapped)
        if self.format == "openai-chat":
            msg = reply.choices[0].message
            self.history.append(msg)  # the SDK object, as loops do
            for call in msg.tool_calls or []:
                if cutctx_control.is_retrieval(call):
                    self.answers[call.id] = cutctx_control.answer(call)
                    self.history.append(self.answers[call.id])
                else:
                    self.history.append({"role": "tool", "tool_call_id": call.id,
                                         "content": self.tool(call.id, call.id)})
            if not msg.tool_calls:
                self.history.append({"role": "user", "content": "Go on."})
        elif self.format == "openai-responses":
            calls = [item for item in reply.output if item.type == "function_call"]
            for item in reply.output:
                if item.type == "reasoning":
                    self.checks.produced(item.encrypted_content, body)
            self.history.extend(reply.output)
            for call in calls:
                if cutctx_control.is_retrieval(call):
                    self.answers[call.call_id] = cutctx_control.answer(call)
                    self.history.append(self.answers[call.call_id])
                else:
                    self.history.append({"type": "function_call_output", "call_id": call.call_id,
                                         "output": self.tool(call.call_id, call.call_id)})
            if not calls:
                self.history.append({"role": "user", "content": "Go on."})
        else:
            for block in reply.content:
                if block.type == "thinking":
                    self.checks.produced(block.signature, body)
            self.history.append({"role": "assistant", "content": reply.content})
            blocks: list[Any] = []
            for block in reply.content:
                if block.type != "tool_use":
                    continue
                if cutctx_control.is_retrieval(block):
                    self.answers[block.id] = cutctx_control.answer(block)
                    blocks.append(self.answers[block.id])
                else:
                    blocks.append({"type": "tool_result", "tool_use_id": block.id,
                                   "content": self.tool(block.id, block.id)})
            self.history.append({"role": "user", "content": blocks or "Go on."})


def result_of(format: str, body: dict[str, Any], call_id: str) -> Any:
    found = [content for cid, content in results(format, body) if cid == call_id]
    assert len(found) == 1, f"{call_id}: {len(found)} results"
    return found[0]


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("format", ["openai-chat", "openai-responses", "anthropic"])
def test_agent_loop(format: str, is_async: bool) -> None:
    model = Model(format)
    with FakeProvider(model.respond) as server:
        # One protected turn: past its first call, only the pin keeps a retrieved result.
        wrapped = wrap(client_for(format, server, is_async), window=WINDOW,
                       keep_retrieved_for=KEEP, protected_recent_turns=1)
        send = sender(wrapped, format, is_async)
        loop = Loop(format, wrapped, send, server, model)
        try:
            loop.run()
        finally:
            if is_async:
                send.loop.close()  # type: ignore[attr-defined]
    bodies = [body for _, body in server.requests]
    checks = loop.checks
    assert checks.calls == CALLS
    assert checks.firings >= 2, checks.firings
    assert checks.firings == sum(loop.fired)
    # The masked results went out as stubs, their originals kept.
    assert any(isinstance(c, str) and STUB.search(c) for b in bodies for _, c in results(format, b))
    # Every request offered the caller's tool and the retrieval tool, in that order.
    assert all(tool_names(format, b) == ["read_file", TOOL] for b in bodies)
    # Signed reasoning went out with its prefix at least once, and was checked.
    if format != "openai-chat":
        assert checks._produced

    # The retrieval round trip.
    retrieval = model.retrieval
    assert retrieval is not None, "the model never saw a stub to read back"
    at = retrieval["at"]
    original = loop.outputs[retrieval["of"]]
    answer = loop.answers[retrieval["call"]]
    assert "is_error" not in answer
    for j in range(at + 1, at + 1 + KEEP):
        sent = result_of(format, bodies[j], retrieval["call"])
        assert sent == original, f"call {j}: the retrieved result is not the original"
    # A firing happened while it was pinned and no longer the newest turn: the pin kept it.
    assert any(loop.fired[at + 2:at + 1 + KEEP]), loop.fired[at:at + 1 + KEEP]

    # An unknown digest: an error result, sent to the model like any other.
    unknown = model.unknown
    assert unknown is not None
    answer = loop.answers[unknown["call"]]
    sent_after = bodies[unknown["at"] + 1]
    if format == "anthropic":
        assert answer["is_error"] is True
        block = result_block(sent_after, unknown["call"])
        assert block["is_error"] is True and UNKNOWN in block["content"]
    else:
        text = result_of(format, sent_after, unknown["call"])
        assert UNKNOWN in text and "no tool result" in text


@pytest.mark.parametrize("format", ["openai-chat", "openai-responses", "anthropic"])
def test_no_tools_no_retrieval_tool(format: str) -> None:
    model = Model(format)
    model.n = 5  # a text answer
    with FakeProvider(model.respond) as server:
        wrapped = wrap(client_for(format, server, False), window=WINDOW)
        history = [{"role": "user", "content": "Hi"}]
        if format == "openai-chat":
            wrapped.chat.completions.create(model="m", messages=history)
        elif format == "openai-responses":
            wrapped.responses.create(model="m", input=history)
        else:
            wrapped.messages.create(model="m", max_tokens=100, messages=history)
        (path, body), = server.requests
    assert path == PATHS[format]
    assert "tools" not in body
    assert body[{"openai-responses": "input"}.get(format, "messages")] == history


def test_conversations_apart_and_by_id() -> None:
    """Two conversations through one wrapped client keep their own sessions."""
    model = Model("openai-chat")
    with FakeProvider(model.respond) as server:
        wrapped = wrap(client_for("openai-chat", server, False), window=WINDOW)
        a = [{"role": "user", "content": "Conversation A"}]
        b = [{"role": "user", "content": "Conversation B"}]
        wrapped.chat.completions.create(model="m", messages=a)
        first = control(wrapped).last
        wrapped.chat.completions.create(model="m", messages=b)
        second = control(wrapped).last
        wrapped.chat.completions.create(model="m", messages=a, cutctx_conversation="mine")
        third = control(wrapped).last
        bodies = [body for _, body in server.requests]
    assert first is not second and third not in (first, second)
    assert all("cutctx_conversation" not in body for body in bodies)


def test_wrap_refuses_other_clients_and_bad_settings() -> None:
    with pytest.raises(TypeError, match="openai.OpenAI"):
        wrap(object(), window=1000)
    client = openai.OpenAI(base_url="http://127.0.0.1:9/v1", api_key="test")
    with pytest.raises(ValueError, match="window"):
        wrap(client, window=0)
    with pytest.raises(ValueError, match="keep_retrieved_for"):
        wrap(client, window=1000, keep_retrieved_for=-1)


def test_raw_responses_copies_and_parse_compact_too() -> None:
    """``with_raw_response``, ``with_options`` and ``parse`` with a pydantic tool go through
    the same conversations."""
    import pydantic

    class ReadFile(pydantic.BaseModel):
        path: str

    model = Model("openai-chat")
    with FakeProvider(model.respond) as server:
        wrapped = wrap(client_for("openai-chat", server, False), window=WINDOW)
        history: list[Any] = [{"role": "user", "content": "Read a file."}]
        raw = wrapped.chat.completions.with_raw_response.create(
            model="m", messages=history, tools=TOOLS["openai-chat"])
        first = control(wrapped).last
        assert raw.parse().choices[0].message.tool_calls[0].function.name == "read_file"
        history.append(raw.parse().choices[0].message)
        history.append({"role": "tool", "tool_call_id": "call_0", "content": tool_output(0)})
        copy = wrapped.with_options(timeout=5.0)
        assert control(copy) is control(wrapped)
        parsed = copy.chat.completions.parse(
            model="m", messages=history, tools=[openai.pydantic_function_tool(ReadFile, name="read_file")])
        assert control(wrapped).last is first  # the same conversation
        call = parsed.choices[0].message.tool_calls[0]
        assert call.function.parsed_arguments == ReadFile(path="file-1.txt")
        bodies = [body for _, body in server.requests]
    assert [tool_names("openai-chat", b) for b in bodies] == [["read_file", TOOL]] * 2
    assert bodies[1]["messages"][:2] == bodies[0]["messages"] + [bodies[1]["messages"][1]]


def test_responses_opened_with_a_string_stays_one_conversation() -> None:
    model = Model("openai-responses")
    model.n = 5  # a text answer
    with FakeProvider(model.respond) as server:
        wrapped = wrap(client_for("openai-responses", server, False), window=WINDOW)
        first = wrapped.responses.create(model="m", input="Hi")
        opened = control(wrapped).last
        history: list[Any] = [{"role": "user", "content": "Hi"}, *first.output,
                              {"role": "user", "content": "And then?"}]
        wrapped.responses.create(model="m", input=history)
        assert control(wrapped).last is opened
        # A call continuing a conversation the server holds is sent as it is.
        wrapped.responses.create(model="m", input=[{"role": "user", "content": "More"}],
                                 previous_response_id=first.id, cutctx_conversation="x")
        assert control(wrapped).last is opened
        bodies = [body for _, body in server.requests]
    assert bodies[2] == {"model": "m", "input": [{"role": "user", "content": "More"}],
                         "previous_response_id": "resp_5"}
