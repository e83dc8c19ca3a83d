"""A scripted ``create_agent`` loop through :class:`cutctx.integrations.langchain.CutctxMiddleware`.

A chat model of the test's own (a ``BaseChatModel`` that records what it is sent and answers
from a script) drives the real LangChain agent: it calls a real tool whose results are 2-20 KB,
now and then with signed thinking blocks, and once calls ``cutctx_retrieve`` with the digest of
a masked result it was sent; the agent's tool node runs it. Every request the model receives is
converted back to the provider's JSON and checked by :class:`loopchecks.LoopChecks`.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.checkpoint.memory import InMemorySaver
from loopchecks import LoopChecks

from cutctx.integrations.compactor import TOOL_NAME
from cutctx.integrations.langchain import CutctxMiddleware, from_request, to_request

warnings.filterwarnings("ignore", category=DeprecationWarning)

STUB = re.compile(r"\(original: \d+ tokens, sha256:([0-9a-f]{64})\)\Z")
POLICY = '{"name": "observation_masking", "keep_recent_results": 1}'


def size_of(n: int) -> int:
    """2-20 KB, varied deterministically."""
    return 2048 + (n * 7919) % (18 * 1024)


def file_text(path: str, size: int) -> str:
    line = f"{path}: the quick brown fox jumps over the lazy dog\n"
    return (line * (size // len(line) + 1))[:size]


@tool
def read_file(path: str, size: int) -> str:
    """Read a file of the workspace."""
    return file_text(path, size)


class ScriptedModel(BaseChatModel):
    """Records every call's messages and tools and answers with ``script``'s message."""

    script: Any
    received: list[tuple[list[BaseMessage], list[dict[str, Any]]]] = []

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        kwargs.pop("tool_choice", None)
        return self.bind(tools=[convert_to_openai_tool(t) for t in tools], **kwargs)

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:
        tools = list(kwargs.get("tools") or [])
        self.received.append((list(messages), tools))
        return ChatResult(generations=[ChatGeneration(message=self.script(messages, tools))])


class Script:
    """The model's side of the loop, checking each request it is sent."""

    def __init__(self, fmt: str, window: int, middleware: CutctxMiddleware, thread: str,
                 calls: int) -> None:
        self.fmt, self.middleware, self.thread, self.calls = fmt, middleware, thread, calls
        self.checks = LoopChecks(fmt, window)
        self.n = 0
        self.retrieval: tuple[str, str] | None = None  # (call id, digest)
        self.retrieved_seen = False
        self.originals: dict[str, str] = {}

    def request(self, messages: list[BaseMessage], tools: list[dict[str, Any]]) -> dict[str, Any]:
        return to_request(messages, format=self.fmt, tools=tools, model="scripted")  # type: ignore[arg-type]

    def __call__(self, messages: list[BaseMessage], tools: list[dict[str, Any]]) -> AIMessage:
        self.n += 1
        request = self.request(messages, tools)
        fired = self.middleware.compactors.get(self.thread).fired
        self.checks.see(request, fired=fired)
        # The conversion is lossless both ways on what the model was sent.
        back = from_request(request, format=self.fmt, originals=messages)  # type: ignore[arg-type]
        assert all(a is b for a, b in zip(back, messages)) and len(back) == len(messages)
        names = [t["function"]["name"] for t in tools]
        assert names == ["read_file", TOOL_NAME]
        for m in messages:
            if (isinstance(m, ToolMessage) and self.retrieval and not self.retrieved_seen
                    and m.tool_call_id == self.retrieval[0]):
                # The call right after the retrieval: the original text is what the model sees.
                original = self.originals[self.retrieval[1]]
                assert m.content == original
                self.retrieved_seen = True
        if self.n >= self.calls:
            return AIMessage(content="Done.", id=f"ai-{self.n}")
        if self.retrieval is None and self.checks.firings >= 1:
            for m in messages:
                match = STUB.search(m.content) if isinstance(m, ToolMessage) and isinstance(m.content, str) else None
                if match:
                    digest = match.group(1)
                    self.originals[digest] = self.middleware.compactors.store.get(digest)  # type: ignore[assignment]
                    assert self.originals[digest] and self.originals[digest].startswith("f")
                    self.retrieval = (f"ret-{self.n}", digest)
                    return AIMessage(content="", id=f"ai-{self.n}", tool_calls=[
                        {"id": f"ret-{self.n}", "name": TOOL_NAME, "args": {"digest": digest}}])
        call = {"id": f"call-{self.n}", "name": "read_file",
                "args": {"path": f"f{self.n}.txt", "size": size_of(self.n)}}
        if self.fmt == "anthropic" and self.n % 3 == 0:
            signature = f"sig-{self.n}"
            self.checks.produced(signature, request)
            content: Any = [{"type": "thinking", "thinking": f"step {self.n}", "signature": signature},
                            {"type": "text", "text": f"Reading f{self.n}."}]
            return AIMessage(content=content, id=f"ai-{self.n}", tool_calls=[call])
        return AIMessage(content=f"Reading f{self.n}.", id=f"ai-{self.n}", tool_calls=[call])


def run(fmt: str, window: int, calls: int) -> tuple[Script, ScriptedModel, dict[str, Any]]:
    middleware = CutctxMiddleware(window, format=fmt, policy=POLICY)  # type: ignore[arg-type]
    script = Script(fmt, window, middleware, "thread-1", calls)
    model = ScriptedModel(script=script, received=[])
    agent = create_agent(model, [read_file], system_prompt="You read files.",
                         middleware=[middleware], checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "thread-1"}, "recursion_limit": 1000}
    agent.invoke({"messages": [HumanMessage("Read the files.", id="u1")]}, config)
    state = agent.invoke({"messages": [HumanMessage("Read more.", id="u2")]}, config)
    return script, model, state


@pytest.mark.parametrize("fmt", ["openai-chat", "anthropic"])
def test_agent_loop(fmt: str) -> None:
    script, model, state = run(fmt, 16000, 65)
    checks = script.checks
    assert checks.calls >= 60 + 1, checks.calls
    assert checks.firings >= 2, checks.firings
    assert script.retrieval is not None and script.retrieved_seen
    assert "thread-1" in script.middleware.compactors
    # The state keeps every tool result whole.
    results = [m for m in state["messages"] if isinstance(m, ToolMessage) and m.name == "read_file"]
    assert len(results) > 50
    for m in results:
        assert not STUB.search(m.content)
    print(f"{fmt}: {checks.calls} calls, {checks.firings} firings, largest {checks.largest}")


def test_reasoning_is_sent_only_after_its_prefix() -> None:
    script, model, _ = run("anthropic", 16000, 62)
    signed = [m for msgs, _ in model.received for m in msgs if isinstance(m, AIMessage)
              and isinstance(m.content, list) and any(b.get("type") == "thinking" for b in m.content)]
    assert signed  # thinking blocks were sent back (checked by LoopChecks after their prefix)
    # and some were left out by a firing (the reasoning rule), so not every one is in the last call
    last = model.received[-1][0]
    kept = [m for m in last if isinstance(m, AIMessage) and isinstance(m.content, list)
            and any(b.get("type") == "thinking" for b in m.content)]
    produced = (62 - 1) // 3
    assert len(kept) < produced


def test_no_tools_no_retrieval_tool() -> None:
    seen: list[list[dict[str, Any]]] = []

    def script(messages: list[BaseMessage], tools: list[dict[str, Any]]) -> AIMessage:
        seen.append(tools)
        return AIMessage(content="Hello.")

    middleware = CutctxMiddleware(4000)
    model = ScriptedModel(script=script, received=[])
    agent = create_agent(model, [], middleware=[middleware])
    agent.invoke({"messages": [HumanMessage("Hi")]})
    assert seen == [[]]


def test_retrieval_unknown_digest_is_an_error_message() -> None:
    middleware = CutctxMiddleware(4000)
    out = middleware.retrieval_tool.invoke({"name": TOOL_NAME, "args": {"digest": "0" * 64},
                                            "id": "x", "type": "tool_call"})
    assert out.status == "error" and "no tool result" in out.content


_: Callable[..., Any] = run


def test_async_agent_compacts_too() -> None:
    import asyncio

    middleware = CutctxMiddleware(16000, policy=POLICY)
    script = Script("openai-chat", 16000, middleware, "thread-a", 30)
    model = ScriptedModel(script=script, received=[])
    agent = create_agent(model, [read_file], system_prompt="You read files.",
                         middleware=[middleware], checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "thread-a"}, "recursion_limit": 1000}
    asyncio.run(agent.ainvoke({"messages": [HumanMessage("Read the files.")]}, config))
    assert script.checks.calls == 30 and script.checks.firings >= 2


def test_conversion_keeps_what_langchain_models() -> None:
    image = {"type": "image", "url": "https://example.com/a.png"}
    human = HumanMessage(content=[{"type": "text", "text": "Look."}, image], id="h1", name="ann")
    ai = AIMessage(content="", id="a1", tool_calls=[{"id": "c1", "name": "read_file",
                                                      "args": {"path": "p", "size": 1}}],
                   additional_kwargs={"k": 1}, response_metadata={"model": "x"})
    result = ToolMessage("x" * 50, tool_call_id="c1", id="t1", name="read_file")
    for fmt in ("openai-chat", "anthropic"):
        request = to_request([human, ai, result], format=fmt, system="Sys.")  # type: ignore[arg-type]
        # A changed tool result comes back as a copy of its message with the new content.
        items = request["messages"]
        if fmt == "openai-chat":
            assert items[1]["content"][1] == {"type": "image_url",
                                              "image_url": {"url": "https://example.com/a.png"}}
            items[-1]["content"] = "short"
        else:
            assert items[0]["content"][1]["source"] == {"type": "url",
                                                        "url": "https://example.com/a.png"}
            items[-1]["content"][0]["content"] = "short"
        back = from_request(request, format=fmt, originals=[human, ai, result])  # type: ignore[arg-type]
        assert back[-3] is human and back[-2] is ai
        assert isinstance(back[-1], ToolMessage) and back[-1].content == "short"
        assert (back[-1].id, back[-1].tool_call_id, back[-1].name) == ("t1", "c1", "read_file")
        assert back[0].content == "Sys."
