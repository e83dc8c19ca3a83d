"""The LiteLLM adapter (``cutctx.integrations.litellm``) in scripted agent loops through LiteLLM.

The model is a ``litellm.CustomLLM`` registered in ``litellm.custom_provider_map``: it receives
the exact messages and tools LiteLLM would send a provider, and answers from a script (no
network). It calls a tool most turns and the loop answers with results of 2 to 20 KB, so the
session fires several times; every request the model receives must pass :class:`LoopChecks`.
The loops run through the real ``litellm.completion`` (with :meth:`CutctxCallback.completion`)
and ``litellm.acompletion`` (with the callback in ``litellm.callbacks``); the proxy's
``async_pre_call_hook`` is called as the proxy calls it. Along the way the model reads a masked
result back with ``cutctx_retrieve`` (the original must come back exactly) and asks for a
digest nobody stored (an error result, never an exception).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("LITELLM_TELEMETRY", "False")

import litellm  # noqa: E402
import pytest  # noqa: E402
from litellm import CustomLLM, ModelResponse  # noqa: E402
from loopchecks import LoopChecks  # noqa: E402

from cutctx.formats import estimate  # noqa: E402
from cutctx.integrations.litellm import COMPACTED_MARK, CutctxCallback  # noqa: E402

WINDOW = 20_000
CALLS = 60
TOOL = "cutctx_retrieve"
UNKNOWN = "f" * 64
PROVIDER = "cutctx-script"
STUB = re.compile(r"\(original: (\d+) tokens, sha256:([0-9a-f]{64})\)\Z")
_WORDS = ("alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta")
TOOLS = [{"type": "function", "function": {
    "name": "read_file", "description": "Read a file.",
    "parameters": {"type": "object", "properties": {"path": {"type": "string"}},
                   "required": ["path"]}}}]


def tool_output(n: int) -> str:
    """The ``n``-th tool result: 2 to 20 KB, different at every ``n``."""
    size = 2000 + (n * 7919) % 18001
    words = " ".join(f"{_WORDS[(n + i) % 8]}{i % 89}" for i in range(size // 6 + 2))
    return (f"file-{n}.txt:\n" + words)[:size]


def plain(value: Any) -> Any:
    """A request part as JSON, as a provider would receive it."""
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        value = dump(exclude_none=True)
    return json.loads(json.dumps(value, default=str))


class ScriptedModel(CustomLLM):
    """The model: records each request it receives, answers from the script."""

    def __init__(self) -> None:
        super().__init__()
        self.requests: list[dict[str, Any]] = []
        self.n = 0
        self.retrieval: dict[str, Any] | None = None
        self.unknown: dict[str, Any] | None = None

    def _request(self, model: str, messages: list[Any],
                 optional_params: dict[str, Any]) -> dict[str, Any]:
        request: dict[str, Any] = {"model": model, "messages": [plain(m) for m in messages]}
        if optional_params.get("tools"):
            request["tools"] = plain(optional_params["tools"])
        self.requests.append(request)
        return request

    def _step(self, request: dict[str, Any]) -> tuple[str | None, list[tuple[str, str, Any]]]:
        n = self.n
        self.n += 1
        names = [t["function"]["name"] for t in request.get("tools") or []]
        stubs = [(m["tool_call_id"], int(s.group(1)), s.group(2)) for m in request["messages"]
                 if m.get("role") == "tool" and isinstance(m.get("content"), str)
                 and (s := STUB.search(m["content"]))]
        total = estimate(request, "openai-chat")["total"]  # type: ignore[arg-type]
        if self.retrieval is None and TOOL in names and stubs and n >= 10 and total > 0.6 * WINDOW:
            of, _, digest = max(stubs, key=lambda s: s[1])
            self.retrieval = {"call": f"call_ret{n}", "of": of, "digest": digest, "at": n}
            return None, [(f"call_ret{n}", TOOL, {"digest": digest})]
        if self.retrieval is not None and self.unknown is None and n > self.retrieval["at"] + 3:
            self.unknown = {"call": f"call_unk{n}", "at": n}
            return None, [(f"call_unk{n}", TOOL, {"digest": UNKNOWN})]
        if n % 6 == 5:
            return f"Step {n} is done.", []
        return f"Reading file {n}.", [(f"call_{n}", "read_file", {"path": f"file-{n}.txt"})]

    def _respond(self, model: str, messages: list[Any], optional_params: dict[str, Any],
                 model_response: ModelResponse) -> ModelResponse:
        text, calls = self._step(self._request(model, messages, optional_params))
        message: dict[str, Any] = {"role": "assistant", "content": text}
        if calls:
            message["tool_calls"] = [{"id": cid, "type": "function", "function": {
                "name": name, "arguments": json.dumps(args)}} for cid, name, args in calls]
        return ModelResponse(model=model, choices=[{
            "index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}],
            usage={"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2})

    def completion(self, model: str, messages: list[Any], api_base: str,
                   custom_prompt_dict: dict[str, Any], model_response: ModelResponse,
                   print_verbose: Any, encoding: Any, api_key: Any, logging_obj: Any,
                   optional_params: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        return self._respond(model, messages, optional_params, model_response)

    async def acompletion(self, model: str, messages: list[Any], api_base: str,
                          custom_prompt_dict: dict[str, Any], model_response: ModelResponse,
                          print_verbose: Any, encoding: Any, api_key: Any, logging_obj: Any,
                          optional_params: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        return self._respond(model, messages, optional_params, model_response)


@pytest.fixture()
def model() -> Any:
    scripted = ScriptedModel()
    saved_map, saved_callbacks = litellm.custom_provider_map, litellm.callbacks
    litellm.custom_provider_map = [{"provider": PROVIDER, "custom_handler": scripted}]
    litellm.callbacks = []
    litellm.telemetry = False
    try:
        yield scripted
    finally:
        litellm.custom_provider_map, litellm.callbacks = saved_map, saved_callbacks


def run_loop(model: ScriptedModel, cutctx: CutctxCallback,
             send: Any) -> tuple[LoopChecks, dict[str, str], dict[str, Any]]:
    """The agent loop: ``CALLS`` model calls, the tools' results appended each turn."""
    checks = LoopChecks("openai-chat", WINDOW)
    history: list[Any] = [{"role": "system", "content": "You are a careful agent."},
                          {"role": "user", "content": "Read every file."}]
    outputs: dict[str, str] = {}
    answers: dict[str, Any] = {}
    for _ in range(CALLS):
        before = len(model.requests)
        reply = send(model=f"{PROVIDER}/agent", messages=list(history), tools=TOOLS,
                     metadata={"cutctx_conversation": "loop"})
        assert len(model.requests) == before + 1
        assert cutctx.last is not None
        checks.see(model.requests[-1], fired=cutctx.last.fired)
        message = reply.choices[0].message
        history.append(message)  # LiteLLM's own object, as loops do
        for call in message.tool_calls or []:
            if cutctx.is_retrieval(call):
                answers[call.id] = cutctx.answer(call)
                history.append(answers[call.id])
            else:
                outputs[call.id] = tool_output(int(call.id.removeprefix("call_")))
                history.append({"role": "tool", "tool_call_id": call.id,
                                "content": outputs[call.id]})
        if not message.tool_calls:
            history.append({"role": "user", "content": "Go on."})
    return checks, outputs, answers


def assert_loop(model: ScriptedModel, checks: LoopChecks, outputs: dict[str, str],
                answers: dict[str, Any]) -> None:
    assert checks.calls == CALLS
    assert checks.firings >= 2, checks.firings
    assert checks.largest <= WINDOW
    # Every request offered the caller's tool, then the retrieval tool.
    assert all([t["function"]["name"] for t in r["tools"]] == ["read_file", TOOL]
               for r in model.requests)
    retrieval, unknown = model.retrieval, model.unknown
    assert retrieval is not None, "the model never saw a stub to read back"
    answer = answers[retrieval["call"]]
    assert answer["role"] == "tool" and answer["tool_call_id"] == retrieval["call"]
    assert answer["content"] == outputs[retrieval["of"]]
    # The next request sends the original back to the model, unmasked.
    sent = [m for m in model.requests[retrieval["at"] + 1]["messages"]
            if m.get("tool_call_id") == retrieval["call"]]
    assert sent and sent[0]["content"] == outputs[retrieval["of"]]
    assert unknown is not None
    error = answers[unknown["call"]]
    assert error["role"] == "tool" and UNKNOWN in error["content"]
    assert error["content"] != outputs[retrieval["of"]]


def test_sync_completion_loop(model: ScriptedModel) -> None:
    cutctx = CutctxCallback(window=WINDOW, protected_recent_turns=1)
    checks, outputs, answers = run_loop(model, cutctx, cutctx.completion)
    assert_loop(model, checks, outputs, answers)
    print(f"sync: {checks.calls} calls, {checks.firings} firings, largest {checks.largest}")


def test_acompletion_loop_through_the_registered_hook(model: ScriptedModel) -> None:
    cutctx = CutctxCallback(window=WINDOW, protected_recent_turns=1)
    litellm.callbacks = [cutctx]
    loop = asyncio.new_event_loop()
    try:
        def send(**kwargs: Any) -> Any:
            return loop.run_until_complete(litellm.acompletion(**kwargs))

        checks, outputs, answers = run_loop(model, cutctx, send)
    finally:
        loop.close()
    assert_loop(model, checks, outputs, answers)
    print(f"async: {checks.calls} calls, {checks.firings} firings, largest {checks.largest}")


def test_proxy_pre_call_hook() -> None:
    """Called as the proxy calls it: the body it returns is what the router is handed."""
    from litellm.caching.dual_cache import DualCache
    from litellm.proxy._types import UserAPIKeyAuth

    cutctx = CutctxCallback(window=WINDOW, protected_recent_turns=1)
    checks = LoopChecks("openai-chat", WINDOW)
    history: list[Any] = [{"role": "system", "content": "You proxy."},
                          {"role": "user", "content": "Read every file."}]
    bodies = []
    for n in range(24):
        data = {"model": "agent", "messages": list(history), "tools": TOOLS,
                "metadata": {"cutctx_conversation": "proxied"}}
        out = asyncio.run(cutctx.async_pre_call_hook(UserAPIKeyAuth(), DualCache(), data,
                                                     "acompletion"))
        assert isinstance(out, dict)
        assert out["metadata"][COMPACTED_MARK] is True
        sent = {k: out[k] for k in ("model", "messages", "tools")}
        assert cutctx.last is not None
        checks.see(sent, fired=cutctx.last.fired)
        bodies.append(sent)
        # The deployment hook the router runs after it leaves the compacted body be.
        assert asyncio.run(cutctx.async_pre_call_deployment_hook(out, None)) is None
        history.append({"role": "assistant", "content": None, "tool_calls": [{
            "id": f"call_{n}", "type": "function",
            "function": {"name": "read_file", "arguments": "{}"}}]})
        history.append({"role": "tool", "tool_call_id": f"call_{n}", "content": tool_output(n)})
    assert checks.firings >= 1
    # Other call types pass as they are.
    other = {"model": "agent", "input": "text"}
    assert asyncio.run(cutctx.async_pre_call_hook(UserAPIKeyAuth(), DualCache(), other,
                                                  "aembedding")) is other


def test_no_tools_no_retrieval_tool_and_bad_settings() -> None:
    cutctx = CutctxCallback(window=WINDOW)
    out = cutctx.compact({"model": "m", "messages": [{"role": "user", "content": "Hi"}]})
    assert "tools" not in out
    with pytest.raises(ValueError, match="window"):
        CutctxCallback(window=-1)
    with pytest.raises(ValueError, match="conversation_id"):
        CutctxCallback(window=WINDOW, conversation_id=3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="cutctx_conversation"):
        cutctx.compact({"messages": [{"role": "user", "content": "Hi"}],
                        "metadata": {"cutctx_conversation": 7}})
