"""What each framework adapter adds to a model call, beside what the framework itself costs.

Each framework runs the same scripted agent loop on its own test model (LangChain's chat model
interface, the OpenAI Agents SDK's ``Model``, PydanticAI's ``FunctionModel``, a LiteLLM
``CustomLLM``): ``--calls`` model calls, each but the last asking for a tool whose result is
2 to 20 KB, so the history grows to a few hundred KB. Three ways, in alternation so that drift in
the machine's speed touches all alike:

* ``framework``: the loop without the adapter (the floor: what the framework spends per call,
  its test model answering at once);
* ``adapter, no firing``: with the adapter and a window far above the history (conversion to
  the provider request and back, the session's check, no compaction);
* ``adapter, window 16,000``: with the adapter and a window the history crosses, so that the
  session fires and masks as it would in a real run.

It prints the median time per model call in microseconds for each way, the adapter's own time
per call (the difference from the framework's), and that as a share of the framework's.

    python crates/cutctx-python/bench/adapters_bench.py --rounds 5

It needs the frameworks at the versions of ``tests/integrations/requirements-*.txt`` and is not
a test: figures depend on the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
import warnings
from collections.abc import Callable
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("LITELLM_TELEMETRY", "False")
warnings.filterwarnings("ignore", category=DeprecationWarning)

POLICY = '{"name": "observation_masking", "keep_recent_results": 1}'
NO_FIRING = 10**9
WINDOW = 16_000


def size_of(n: int) -> int:
    """2-20 KB, varied deterministically."""
    return 2048 + (n * 7919) % (18 * 1024)


def file_text(path: str, size: int) -> str:
    line = f"{path}: the quick brown fox jumps over the lazy dog\n"
    return (line * (size // len(line) + 1))[:size]


def read_file(path: str, size: int) -> str:
    """Read a file of the workspace."""
    return file_text(path, size)


# Each runner takes the window (None: no adapter) and the number of model calls, runs the loop
# once and returns the number of model calls it made.


def langchain(window: int | None, calls: int) -> int:
    from langchain.agents import create_agent
    from langchain_core.language_models.chat_models import BaseChatModel
    from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
    from langchain_core.outputs import ChatGeneration, ChatResult
    from langchain_core.tools import tool
    from langchain_core.utils.function_calling import convert_to_openai_tool

    from cutctx.integrations.langchain import CutctxMiddleware

    class Model(BaseChatModel):
        made: int = 0

        @property
        def _llm_type(self) -> str:
            return "scripted"

        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            kwargs.pop("tool_choice", None)
            return self.bind(tools=[convert_to_openai_tool(t) for t in tools], **kwargs)

        def _generate(self, messages: list[BaseMessage], stop: Any = None,
                      run_manager: Any = None, **kwargs: Any) -> ChatResult:
            self.made += 1
            n = self.made
            if n >= calls:
                reply = AIMessage(content="Done.", id=f"ai-{n}")
            else:
                call = {"name": "read_file", "args": {"path": f"f{n}.txt", "size": size_of(n)},
                        "id": f"call-{n}", "type": "tool_call"}
                reply = AIMessage(content=f"Reading f{n}.", id=f"ai-{n}", tool_calls=[call])
            return ChatResult(generations=[ChatGeneration(message=reply)])

    model = Model()
    middleware = [] if window is None else [CutctxMiddleware(window, policy=POLICY)]
    agent = create_agent(model, [tool(read_file)], system_prompt="You read files.",
                         middleware=middleware)
    agent.invoke({"messages": [HumanMessage("Read the files.")]}, {"recursion_limit": 10_000})
    return model.made


def openai_agents(window: int | None, calls: int) -> int:
    from agents import Agent, ModelResponse, RunConfig, Runner, Usage, function_tool
    from agents.models.interface import Model
    from openai.types.responses import (
        ResponseFunctionToolCall,
        ResponseOutputMessage,
        ResponseOutputText,
    )

    from cutctx.integrations.openai_agents import CutctxInputFilter

    class Scripted(Model):
        made = 0

        async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
            self.made += 1
            n = self.made
            output: list[Any]
            if n >= calls:
                text = ResponseOutputText(type="output_text", text="Done.", annotations=[])
                output = [ResponseOutputMessage(id=f"m{n}", type="message", role="assistant",
                                                status="completed", content=[text])]
            else:
                arguments = json.dumps({"path": f"f{n}.txt", "size": size_of(n)})
                output = [ResponseFunctionToolCall(id=f"fc{n}", type="function_call",
                                                   call_id=f"call-{n}", name="read_file",
                                                   arguments=arguments)]
            return ModelResponse(output=output, usage=Usage(), response_id=None)

        def stream_response(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError

    model = Scripted()
    tools: list[Any] = [function_tool(read_file)]
    config = RunConfig(tracing_disabled=True)
    if window is not None:
        cut = CutctxInputFilter(window, policy=POLICY, key=lambda data: "conversation")
        tools.append(cut.retrieval_tool)
        config = RunConfig(call_model_input_filter=cut, tracing_disabled=True)
    agent = Agent(name="reader", instructions="You read files.", model=model, tools=tools)
    Runner.run_sync(agent, "Read the files.", run_config=config, max_turns=10_000)
    return model.made


def pydantic_ai(window: int | None, calls: int) -> int:
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel
    from pydantic_ai.usage import UsageLimits

    from cutctx.integrations.pydantic_ai import CutctxHistoryProcessor

    made = 0

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        nonlocal made
        made += 1
        if made >= calls:
            return ModelResponse(parts=[TextPart("Done.")])
        args = {"path": f"f{made}.txt", "size": size_of(made)}
        return ModelResponse(parts=[TextPart(f"Reading f{made}."),
                                    ToolCallPart("read_file", args, tool_call_id=f"call-{made}")])

    capabilities = [] if window is None else [CutctxHistoryProcessor(window, policy=POLICY)]
    agent = Agent(FunctionModel(model), tools=[read_file], instructions="You read files.",
                  capabilities=capabilities)
    agent.run_sync("Read the files.", usage_limits=UsageLimits(request_limit=None))
    return made


def litellm(window: int | None, calls: int) -> int:
    import litellm as lite
    from litellm import CustomLLM
    from litellm import ModelResponse as LiteResponse

    from cutctx.integrations.litellm import CutctxCallback

    class Scripted(CustomLLM):
        made = 0

        def completion(self, *args: Any, **kwargs: Any) -> Any:
            self.made += 1
            n = self.made
            message: dict[str, Any] = {"role": "assistant", "content": f"Reading f{n}."}
            if n < calls:
                arguments = json.dumps({"path": f"f{n}.txt", "size": size_of(n)})
                message["tool_calls"] = [{"id": f"call_{n}", "type": "function", "function": {
                    "name": "read_file", "arguments": arguments}}]
            return LiteResponse(model="scripted", choices=[{
                "index": 0, "message": message, "finish_reason": "stop"}],
                usage={"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2})

    model = Scripted()
    lite.custom_provider_map = [{"provider": "cutctx-bench", "custom_handler": model}]
    lite.callbacks = []
    tools = [{"type": "function", "function": {
        "name": "read_file", "description": "Read a file.", "parameters": {
            "type": "object", "properties": {"path": {"type": "string"},
                                             "size": {"type": "integer"}}}}}]
    send: Callable[..., Any] = lite.completion
    if window is not None:
        send = CutctxCallback(window, policy=POLICY).completion
    history: list[Any] = [{"role": "system", "content": "You read files."},
                          {"role": "user", "content": "Read the files."}]
    for _ in range(calls):
        reply = send(model="cutctx-bench/agent", messages=list(history), tools=tools,
                     metadata={"cutctx_conversation": "loop"})
        message = reply.choices[0].message
        history.append(message)
        if not message.tool_calls:
            break
        for call in message.tool_calls:
            args = json.loads(call.function.arguments)
            history.append({"role": "tool", "tool_call_id": call.id,
                            "content": read_file(args["path"], args["size"])})
    return model.made


FRAMEWORKS: dict[str, Callable[[int | None, int], int]] = {
    "langchain": langchain,
    "openai_agents": openai_agents,
    "pydantic_ai": pydantic_ai,
    "litellm": litellm,
}
WAYS: dict[str, int | None] = {"framework": None, "adapter, no firing": NO_FIRING,
                               f"adapter, window {WINDOW:,}": WINDOW}


def timed(run: Callable[[int | None, int], int], window: int | None, calls: int) -> float:
    """Microseconds per model call of one loop."""
    start = time.perf_counter()
    made = run(window, calls)
    elapsed = time.perf_counter() - start
    assert made == calls, (made, calls)
    return elapsed / made * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=60)
    parser.add_argument("--only", choices=sorted(FRAMEWORKS), action="append")
    args = parser.parse_args()
    names = args.only or list(FRAMEWORKS)
    print(f"{args.calls} model calls a loop, median of {args.rounds} rounds, µs per call")
    print(f"{'framework':<14} {'way':<24} {'µs/call':>9} {'adapter µs':>11} {'share':>7}")
    for name in names:
        run = FRAMEWORKS[name]
        for way, window in WAYS.items():
            timed(run, window, 3)  # imports and first-call setup out of the timings
        samples: dict[str, list[float]] = {way: [] for way in WAYS}
        for _ in range(args.rounds):
            for way, window in WAYS.items():
                samples[way].append(timed(run, window, args.calls))
        floor = statistics.median(samples["framework"])
        for way, times in samples.items():
            median = statistics.median(times)
            own = "" if way == "framework" else f"{median - floor:>11.0f}"
            share = "" if way == "framework" else f"{(median - floor) / floor:>7.0%}"
            print(f"{name:<14} {way:<24} {median:>9.0f} {own:>11} {share:>7}")


if __name__ == "__main__":
    main()
