"""A scripted ``Agent.run_sync`` loop through :class:`cutctx.integrations.pydantic_ai.CutctxHistoryProcessor`.

PydanticAI's own ``FunctionModel`` is the model: it is handed the messages the processor
compacted, answers from a script, and calls a real tool whose results are 2-20 KB, now and then
with signed thinking, once ``cutctx_retrieve`` with the digest of a masked result it was sent and
once with a digest nobody stored; the agent runs both. Every request the model receives is
converted to the provider's JSON (:func:`to_request`) and checked by :class:`loopchecks.LoopChecks`.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from typing import Any

import pytest
from loopchecks import LoopChecks
from pydantic_ai import Agent
from pydantic_ai.capabilities import ProcessHistory
from pydantic_ai.messages import (
    BinaryContent,
    ImageUrl,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, FunctionModel
from pydantic_ai.usage import UsageLimits

from cutctx.integrations.compactor import TOOL_NAME
from cutctx.integrations.pydantic_ai import CutctxHistoryProcessor, from_request, to_request

STUB = re.compile(r"\(original: \d+ tokens, sha256:([0-9a-f]{64})\)\Z")
POLICY = '{"name": "observation_masking", "keep_recent_results": 1}'
UNKNOWN = "0" * 64
UNLIMITED = UsageLimits(request_limit=None)


def size_of(n: int) -> int:
    """2-20 KB, varied deterministically."""
    return 2048 + (n * 7919) % (18 * 1024)


def file_text(path: str, size: int) -> str:
    line = f"{path}: the quick brown fox jumps over the lazy dog\n"
    return (line * (size // len(line) + 1))[:size]


def read_file(path: str, size: int) -> str:
    """Read a file of the workspace."""
    return file_text(path, size)


def tool_returns(messages: list[ModelMessage]) -> list[ToolReturnPart]:
    return [p for m in messages if isinstance(m, ModelRequest) for p in m.parts
            if isinstance(p, ToolReturnPart)]


class Script:
    """The model's side of the loop, checking each request it is sent."""

    def __init__(self, fmt: str, window: int, processor: CutctxHistoryProcessor, key: str,
                 calls: int, *, check_identity: bool = True) -> None:
        self.fmt, self.processor, self.key, self.calls = fmt, processor, key, calls
        self.check_identity = check_identity
        self.checks = LoopChecks(fmt, window)
        self.n = 0
        self.retrieval: tuple[str, str] | None = None  # (call id, digest)
        self.retrieved_seen = False
        self.unknown: str | None = None  # the call id of the retrieval of an unknown digest
        self.unknown_seen = False
        self.originals: dict[str, str] = {}
        self.thinking = 0

    def request(self, messages: list[ModelMessage], info: AgentInfo) -> dict[str, Any]:
        return to_request(messages, format=self.fmt, tools=info.function_tools,  # type: ignore[arg-type]
                          instructions=info.instructions, model="scripted")

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.n += 1
        request = self.request(messages, info)
        self.checks.see(request, fired=self.processor.compactors.get(self.key).fired)
        if self.check_identity:
            # The conversion is lossless both ways on what the model was sent.
            back = from_request(request, format=self.fmt, originals=messages,  # type: ignore[arg-type]
                                instructions=info.instructions)
            assert len(back) == len(messages) and all(a is b for a, b in zip(back, messages))
        assert sorted(t.name for t in info.function_tools) == [TOOL_NAME, "read_file"]
        for part in tool_returns(messages):
            if self.retrieval and part.tool_call_id == self.retrieval[0] and not self.retrieved_seen:
                # The call right after the retrieval: the model reads the original text.
                assert part.content == self.originals[self.retrieval[1]]
                self.retrieved_seen = True
            if part.tool_call_id == self.unknown and not self.unknown_seen:
                assert part.outcome == "failed" and "no tool result" in str(part.content)
                self.unknown_seen = True
        if self.n >= self.calls:
            return ModelResponse(parts=[TextPart("Done.")])
        if self.retrieval is None and self.checks.firings >= 1:
            for part in tool_returns(messages):
                match = STUB.search(part.content) if isinstance(part.content, str) else None
                if match:
                    digest = match.group(1)
                    original = self.processor.compactors.store.get(digest)
                    assert original and original.startswith("f")
                    self.originals[digest] = original
                    self.retrieval = (f"ret-{self.n}", digest)
                    return ModelResponse(parts=[ToolCallPart(TOOL_NAME, {"digest": digest},
                                                             tool_call_id=f"ret-{self.n}")])
        if self.retrieved_seen and self.unknown is None:
            self.unknown = f"unk-{self.n}"
            return ModelResponse(parts=[ToolCallPart(TOOL_NAME, {"digest": UNKNOWN},
                                                     tool_call_id=self.unknown)])
        call = ToolCallPart("read_file", {"path": f"f{self.n}.txt", "size": size_of(self.n)},
                            tool_call_id=f"call-{self.n}")
        text = TextPart(f"Reading f{self.n}.")
        if self.fmt != "openai-chat" and self.n % 3 == 0:
            signature = f"sig-{self.n}"
            self.checks.produced(signature, request)
            self.thinking += 1
            provider = "anthropic" if self.fmt == "anthropic" else "openai"
            thinking = ThinkingPart(f"step {self.n}", id=f"rs_{self.n}", signature=signature,
                                    provider_name=provider)
            return ModelResponse(parts=[thinking, text, call])
        return ModelResponse(parts=[text, call])


def run(fmt: str, window: int, calls: int) -> tuple[Script, Any]:
    processor = CutctxHistoryProcessor(window, format=fmt, key="conv-1", policy=POLICY)  # type: ignore[arg-type]
    script = Script(fmt, window, processor, "conv-1", calls)
    agent = Agent(FunctionModel(script), tools=[read_file], instructions="You read files.",
                  capabilities=[processor])
    result = agent.run_sync("Read the files.", usage_limits=UNLIMITED)
    return script, result


@pytest.mark.parametrize("fmt", ["anthropic", "openai-chat", "openai-responses"])
def test_agent_loop(fmt: str) -> None:
    script, result = run(fmt, 16000, 65)
    checks = script.checks
    assert checks.calls >= 60, checks.calls
    assert checks.firings >= 2, checks.firings
    assert script.retrieval is not None and script.retrieved_seen
    assert script.unknown_seen  # an unknown digest was a failed tool return, and the run went on
    assert result.output == "Done."
    # The run's own history keeps every tool return whole.
    returns = [p for p in tool_returns(result.all_messages()) if p.tool_name == "read_file"]
    assert len(returns) > 50
    for part in returns:
        assert isinstance(part.content, str) and not STUB.search(part.content)
        n = int(part.tool_call_id.removeprefix("call-"))
        assert part.content == file_text(f"f{n}.txt", size_of(n))
    if fmt != "openai-chat":
        assert script.thinking >= 15
    print(f"{fmt}: {checks.calls} calls, {checks.firings} firings, largest {checks.largest} of 16000")


def test_reasoning_a_firing_invalidated_is_not_sent() -> None:
    seen: list[list[ModelMessage]] = []
    processor = CutctxHistoryProcessor(16000, key="k", policy=POLICY)
    script = Script("anthropic", 16000, processor, "k", 62)

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(messages)
        return script(messages, info)

    agent = Agent(FunctionModel(model), tools=[read_file], capabilities=[processor])
    result = agent.run_sync("Read the files.", usage_limits=UNLIMITED)

    def signed(messages: list[ModelMessage]) -> int:
        return sum(isinstance(p, ThinkingPart) for m in messages if isinstance(m, ModelResponse)
                   for p in m.parts)

    assert signed(result.all_messages()) == script.thinking  # the history keeps them all
    # Thinking was sent back (LoopChecks held it to its prefix), and a firing left out what it
    # invalidated: the last call is sent fewer than were produced.
    assert max(signed(m) for m in seen) > 0
    assert signed(seen[-1]) < script.thinking


def test_no_tools_no_retrieval_tool() -> None:
    offered: list[list[str]] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        offered.append([t.name for t in info.function_tools])
        return ModelResponse(parts=[TextPart("Hello.")])

    agent = Agent(FunctionModel(model), capabilities=[CutctxHistoryProcessor(4000)])
    assert agent.run_sync("Hi").output == "Hello."
    assert offered == [[]]


def test_retrieval_tool_unknown_digest_is_a_tool_error() -> None:
    from pydantic_ai.exceptions import ToolFailed

    processor = CutctxHistoryProcessor(4000)
    function: Any = processor.retrieval_tool.function
    with pytest.raises(ToolFailed, match="no tool result with digest"):
        function(digest=UNKNOWN)
    with pytest.raises(ToolFailed, match="pass"):
        function()
    processor.compactors.store.put("ab" * 32, "the original")
    assert function(digest="sha256:" + "ab" * 32) == "the original"


def test_async_run_compacts_too() -> None:
    processor = CutctxHistoryProcessor(16000, format="openai-chat", key="a", policy=POLICY)
    script = Script("openai-chat", 16000, processor, "a", 30)
    agent = Agent(FunctionModel(script), tools=[read_file], capabilities=[processor])
    asyncio.run(agent.run("Read the files.", usage_limits=UNLIMITED))
    assert script.checks.calls == 30 and script.checks.firings >= 2


def test_streamed_run_compacts_too() -> None:
    processor = CutctxHistoryProcessor(16000, key="s", policy=POLICY)
    script = Script("anthropic", 16000, processor, "s", 30)

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[Any]:
        response = script(messages, info)
        for part in response.parts:
            if isinstance(part, ToolCallPart):
                yield {0: DeltaToolCall(name=part.tool_name, json_args=part.args_as_json_str(),
                                        tool_call_id=part.tool_call_id)}
            elif isinstance(part, TextPart) and len(response.parts) == 1:
                # A streamed text is the run's output: sent only as the last answer.
                yield part.content

    agent = Agent(FunctionModel(stream_function=stream), tools=[read_file], capabilities=[processor])

    async def main() -> str:
        async with agent.run_stream("Read the files.", usage_limits=UNLIMITED) as streamed:
            return await streamed.get_output()

    assert asyncio.run(main()) == "Done."
    assert script.checks.calls == 30 and script.checks.firings >= 2 and script.retrieved_seen


def test_conversation_id_is_the_default_key() -> None:
    processor = CutctxHistoryProcessor(16000, policy=POLICY)
    agent = Agent(FunctionModel(lambda m, i: ModelResponse(parts=[TextPart("Hi.")])),
                  capabilities=[processor])
    first = agent.run_sync("Hello.", conversation_id="c-1")
    agent.run_sync("Again.", message_history=first.all_messages())
    assert "c-1" in processor.compactors and len(processor.compactors) == 1


def test_as_a_history_processor() -> None:
    # ProcessHistory writes what the processor returns into the run's history: the model is
    # sent the compacted messages and the history holds the stubs.
    processor = CutctxHistoryProcessor(16000, key="h", policy=POLICY)
    script = Script("anthropic", 16000, processor, "h", 40, check_identity=False)
    agent = Agent(FunctionModel(script), tools=[read_file, *processor.tools],
                  capabilities=[ProcessHistory(processor)])
    result = agent.run_sync("Read the files.", usage_limits=UNLIMITED)
    assert script.checks.calls == 40 and script.checks.firings >= 1
    assert script.retrieved_seen
    assert any(isinstance(p.content, str) and STUB.search(p.content)
               for p in tool_returns(result.all_messages()))


@pytest.mark.parametrize("fmt", ["anthropic", "openai-chat", "openai-responses"])
def test_conversion_keeps_what_pydantic_ai_models(fmt: str) -> None:
    image = ImageUrl("https://example.com/a.png")
    data = BinaryContent(b"\x89PNG....", media_type="image/png")
    opening = ModelRequest(parts=[SystemPromptPart("Sys."),
                                  UserPromptPart(["Look.", image, data])])
    thinking = ThinkingPart("hmm", signature="sig", provider_name="anthropic" if fmt == "anthropic"
                            else "openai", id="rs_1")
    call = ToolCallPart("read_file", {"path": "p", "size": 1}, tool_call_id="c1")
    response = ModelResponse(parts=[thinking, TextPart("Reading."), call], model_name="x")
    result = ToolReturnPart("read_file", "x" * 50, tool_call_id="c1")
    answer = ModelRequest(parts=[result, UserPromptPart("And now?")])
    history: list[ModelMessage] = [opening, response, answer]
    request = to_request(history, format=fmt, instructions="Be brief.")  # type: ignore[arg-type]
    items = request["input" if fmt == "openai-responses" else "messages"]
    # Files go by reference.
    if fmt == "anthropic":
        assert request["system"] == "Be brief.\n\nSys."
        assert items[0]["content"][1]["source"] == {"type": "url", "url": image.url}
        assert items[0]["content"][2]["source"]["type"] == "base64"
        assert items[1]["content"][0] == {"type": "thinking", "thinking": "hmm", "signature": "sig"}
    elif fmt == "openai-chat":
        assert items[2]["content"][1] == {"type": "image_url", "image_url": {"url": image.url}}
        assert items[2]["content"][2]["image_url"]["url"].startswith("data:image/png;base64,")
    else:
        assert items[1]["content"][1]["image_url"] == image.url
        assert {"type": "reasoning", "id": "rs_1", "encrypted_content": "sig",
                "summary": [{"type": "summary_text", "text": "hmm"}]} in items
    back = from_request(request, format=fmt, originals=history, instructions="Be brief.")  # type: ignore[arg-type]
    assert len(back) == 3 and all(a is b for a, b in zip(back, history))
    # A masked tool return comes back as a copy of its part with the new content; the other
    # parts and messages are the history's own objects.
    for item in items:
        if fmt == "anthropic" and item["role"] == "user" and item["content"][0]["type"] == "tool_result":
            item["content"][0]["content"] = "short"
        elif item.get("role") == "tool" or item.get("type") == "function_call_output":
            item["content" if fmt == "openai-chat" else "output"] = "short"
    back = from_request(request, format=fmt, originals=history, instructions="Be brief.")  # type: ignore[arg-type]
    assert back[0] is opening and back[1] is response and back[2] is not answer
    copy = back[2].parts[0]
    assert isinstance(copy, ToolReturnPart) and copy.content == "short"
    assert (copy.tool_call_id, copy.tool_name) == ("c1", "read_file")
    assert back[2].parts[1] is answer.parts[1]
    # Dropped messages are gone; a message the compaction wrote is a new one.
    request[("input" if fmt == "openai-responses" else "messages")] = [
        *([items[0]] if fmt == "openai-chat" else []), {"role": "user", "content": "Summary."}]
    back = from_request(request, format=fmt, originals=history, instructions="Be brief.")  # type: ignore[arg-type]
    fresh = back[-1]
    assert isinstance(fresh, ModelRequest) and fresh.parts[0].content == "Summary."  # type: ignore[union-attr]
    assert answer not in back and response not in back


def test_bad_settings_are_value_errors() -> None:
    with pytest.raises(ValueError, match="format"):
        CutctxHistoryProcessor(4000, format="gemini")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="window"):
        CutctxHistoryProcessor(0)
    with pytest.raises(ValueError, match="keep_retrieved_for"):
        CutctxHistoryProcessor(4000, keep_retrieved_for=-1)
    with pytest.raises(ValueError, match="tools"):
        CutctxHistoryProcessor(4000, tools=["read_file"])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="tools"):
        CutctxHistoryProcessor(4000, tools=[{"description": "no name"}])
    with pytest.raises(ValueError, match="model"):
        CutctxHistoryProcessor(4000, model=None)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="key"):
        CutctxHistoryProcessor(4000, key=3)  # type: ignore[arg-type]
