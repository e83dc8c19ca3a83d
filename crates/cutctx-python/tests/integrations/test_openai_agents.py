"""A scripted OpenAI Agents SDK loop through :mod:`cutctx.integrations.openai_agents`.

A model of the test's own (an ``agents.models.interface.Model`` that records what it is sent
and answers from a script) drives the real ``Runner``: it calls a real function tool whose
results are 2-20 KB, now and then with reasoning items carrying encrypted content, and once
calls ``cutctx_retrieve`` with the digest of a masked result it was sent; the SDK runs the
tool. Every request the model receives is checked by :class:`loopchecks.LoopChecks`.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from typing import Any

from agents import (
    Agent,
    FunctionTool,
    ModelResponse,
    RunConfig,
    Runner,
    SQLiteSession,
    Usage,
    function_tool,
)
from agents.models.interface import Model
from loopchecks import LoopChecks
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
    ResponseReasoningItem,
)

from cutctx.integrations.compactor import TOOL_NAME
from cutctx.integrations.openai_agents import (
    CompactingSession,
    CutctxInputFilter,
    from_request,
    to_request,
)

STUB = re.compile(r"\(original: \d+ tokens, sha256:([0-9a-f]{64})\)\Z")
POLICY = '{"name": "observation_masking", "keep_recent_results": 1}'


def size_of(n: int) -> int:
    """2-20 KB, varied deterministically."""
    return 2048 + (n * 7919) % (18 * 1024)


def file_text(path: str, size: int) -> str:
    line = f"{path}: the quick brown fox jumps over the lazy dog\n"
    return (line * (size // len(line) + 1))[:size]


@function_tool
def read_file(path: str, size: int) -> str:
    """Read a file of the workspace."""
    return file_text(path, size)


def message(n: int, text: str) -> ResponseOutputMessage:
    return ResponseOutputMessage(id=f"msg-{n}", type="message", role="assistant", status="completed",
                                 content=[ResponseOutputText(type="output_text", text=text,
                                                             annotations=[])])


def call(n: int, call_id: str, name: str, arguments: dict[str, Any]) -> ResponseFunctionToolCall:
    return ResponseFunctionToolCall(id=f"fc-{n}", type="function_call", call_id=call_id, name=name,
                                    arguments=json.dumps(arguments))


class ScriptedModel(Model):
    """Checks every request it is sent and answers with the script's next output."""

    def __init__(self, cut: CutctxInputFilter, window: int, calls: int) -> None:
        self.cut, self.calls = cut, calls
        self.checks = LoopChecks("openai-responses", window)
        self.n = 0
        self.retrieval: tuple[str, str] | None = None  # (call id, digest)
        self.retrieved_seen = False
        self.unknown: str | None = None  # the call id of the retrieval with an unknown digest
        self.unknown_answer: str | None = None
        self.originals: dict[str, str] = {}
        self.reasoning_sent = 0

    async def get_response(self, system_instructions: str | None, input: Any, model_settings: Any,
                           tools: list[Any], output_schema: Any, handoffs: Any, tracing: Any, *,
                           previous_response_id: Any, conversation_id: Any, prompt: Any,
                           **kwargs: Any) -> ModelResponse:
        self.n += 1
        items = list(input)
        request = to_request(items, instructions=system_instructions, tools=tools, model="scripted")
        assert self.cut.last is not None
        self.checks.see(request, fired=self.cut.last.fired)
        back = from_request(request, items)
        assert len(back) == len(items) and all(a is b for a, b in zip(back, items))
        assert [t.name for t in tools] == ["read_file", TOOL_NAME]
        outputs = {i["call_id"]: i["output"] for i in request["input"]
                   if i.get("type") == "function_call_output"}
        self.reasoning_sent += sum(1 for i in request["input"] if i.get("type") == "reasoning")
        if self.retrieval and self.retrieval[0] in outputs and not self.retrieved_seen:
            assert outputs[self.retrieval[0]] == self.originals[self.retrieval[1]]
            self.retrieved_seen = True
        if self.unknown and self.unknown in outputs and self.unknown_answer is None:
            self.unknown_answer = outputs[self.unknown]
        output: list[Any]
        if self.n >= self.calls:
            output = [message(self.n, "Done.")]
        elif self.retrieval is None and self.checks.firings >= 1 and (digest := self.stub(outputs)):
            self.originals[digest] = self.cut.compactors.store.get(digest)  # type: ignore[assignment]
            assert self.originals[digest].startswith("f")
            self.retrieval = (f"ret-{self.n}", digest)
            output = [call(self.n, f"ret-{self.n}", TOOL_NAME, {"digest": digest})]
        elif self.retrieved_seen and self.unknown is None:
            self.unknown = f"unk-{self.n}"
            output = [call(self.n, self.unknown, TOOL_NAME, {"digest": "0" * 64})]
        else:
            output = [call(self.n, f"call-{self.n}", "read_file",
                           {"path": f"f{self.n}.txt", "size": size_of(self.n)})]
            if self.n % 3 == 0:
                secret = f"enc-{self.n}"
                self.checks.produced(secret, request)
                output.insert(0, ResponseReasoningItem(id=f"rs-{self.n}", type="reasoning",
                                                       summary=[], encrypted_content=secret))
        return ModelResponse(output=output, usage=Usage(), response_id=None)

    def stub(self, outputs: dict[str, Any]) -> str | None:
        for text in outputs.values():
            match = STUB.search(text) if isinstance(text, str) else None
            if match:
                return match.group(1)
        return None

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise NotImplementedError("the scripted model answers get_response only")


def run(window: int, calls: int) -> tuple[ScriptedModel, Any]:
    cut = CutctxInputFilter(window, policy=POLICY, key=lambda data: "conversation-1")
    model = ScriptedModel(cut, window, calls)
    agent = Agent(name="reader", instructions="You read files.", model=model,
                  tools=[read_file, cut.retrieval_tool])
    config = RunConfig(call_model_input_filter=cut, tracing_disabled=True)
    result = Runner.run_sync(agent, "Read the files.", run_config=config, max_turns=1000)
    return model, result


def test_agent_loop() -> None:
    model, result = run(16000, 65)
    checks = model.checks
    assert checks.calls >= 60, checks.calls
    assert checks.firings >= 2, checks.firings
    assert model.retrieval is not None and model.retrieved_seen
    assert model.unknown_answer is not None and "no tool result" in model.unknown_answer
    assert model.reasoning_sent > 0
    # The run's own history keeps every tool result whole.
    results = [i for i in result.to_input_list() if i.get("type") == "function_call_output"]
    assert len(results) > 50 and not any(STUB.search(str(i["output"])) for i in results)
    print(f"{checks.calls} calls, {checks.firings} firings, largest {checks.largest}")


def test_no_retrieval_tool_without_it_on_the_agent() -> None:
    cut = CutctxInputFilter(4000)
    seen: list[list[str]] = []

    class Hello(ScriptedModel):
        async def get_response(self, system_instructions: str | None, input: Any,
                               model_settings: Any, tools: list[Any], *args: Any,
                               **kwargs: Any) -> ModelResponse:
            seen.append([t.name for t in tools])
            return ModelResponse(output=[message(1, "Hello.")], usage=Usage(), response_id=None)

    agent = Agent(name="plain", model=Hello(cut, 4000, 1))
    Runner.run_sync(agent, "Hi", run_config=RunConfig(call_model_input_filter=cut,
                                                      tracing_disabled=True))
    assert seen == [[]] and cut.last is not None and cut.last.retrieval is False


def test_retrieval_tool_unknown_digest_is_an_error_text() -> None:
    cut = CutctxInputFilter(4000)
    tool: FunctionTool = cut.retrieval_tool
    out = asyncio.run(tool.on_invoke_tool(None, json.dumps({"digest": "0" * 64})))  # type: ignore[arg-type]
    assert "no tool result" in out


def test_compacting_session_returns_a_compacted_history() -> None:
    returned: list[list[Any]] = []

    class Recording(SQLiteSession):
        async def get_items(self, limit: int | None = None) -> list[Any]:
            returned.append(await super().get_items(limit))
            return returned[-1]

    inner = Recording("s1")
    session = CompactingSession(inner, 4000, policy=POLICY)
    items: list[Any] = [{"role": "user", "content": "Read."}]
    for n in range(6):
        items.append({"type": "function_call", "call_id": f"c{n}", "name": "read_file",
                      "arguments": "{}"})
        items.append({"type": "function_call_output", "call_id": f"c{n}",
                      "output": file_text(f"f{n}", 4000)})
    asyncio.run(session.add_items(items))
    got = asyncio.run(session.get_items())
    whole = returned[-1]
    assert session.compactor.fired and len(whole) == len(items)
    assert any(STUB.search(str(i.get("output", ""))) for i in got)
    checks = LoopChecks("openai-responses", 4000)
    checks.see(to_request(got), fired=True)
    kept = [i for i in got if any(i is w for w in whole)]
    assert kept  # unchanged items are the inner session's own objects


def test_conversion_keeps_what_the_sdk_sends() -> None:
    image = {"type": "input_image", "image_url": "https://example.com/a.png", "detail": "auto"}
    user = {"role": "user", "content": [{"type": "input_text", "text": "Look."}, image]}
    reasoning = {"type": "reasoning", "id": "rs-1", "summary": [], "encrypted_content": "enc-1"}
    fc = {"type": "function_call", "id": "fc-1", "call_id": "c1", "name": "read_file",
          "arguments": '{"path": "p", "size": 1}'}
    result = {"type": "function_call_output", "call_id": "c1", "output": "x" * 50}
    items: list[Any] = [user, reasoning, fc, result]
    request = to_request(items, instructions="Sys.", tools=[read_file])
    assert request["input"] == items and request["instructions"] == "Sys."
    assert request["tools"][0]["name"] == "read_file"
    assert request["input"][0]["content"][1] is not image  # the request is a copy
    request["input"][-1]["output"] = "short"
    back = from_request(request, items)
    assert back[0] is user and back[1] is reasoning and back[2] is fc
    assert back[3] is not result and back[3] == {**result, "output": "short"}
    assert result["output"] == "x" * 50


def test_bad_settings_raise_value_error() -> None:
    for bad in ({"window": 0}, {"window": 1000, "key": "k"}, {"window": 1000, "keep_retrieved_for": -1}):
        try:
            CutctxInputFilter(**bad)  # type: ignore[arg-type]
        except ValueError:
            continue
        raise AssertionError(f"accepted {bad}")
    try:
        CompactingSession(object(), 1000)  # type: ignore[arg-type]
    except ValueError as error:
        assert "inner" in str(error)
    else:
        raise AssertionError("accepted a non-session")
