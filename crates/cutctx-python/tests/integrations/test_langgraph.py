"""A scripted ``create_react_agent`` loop through :func:`cutctx.integrations.langgraph.pre_model_hook`.

The same scripted chat model as the LangChain test (``test_langchain.ScriptedModel``) drives
LangGraph's prebuilt agent, whose pre-model hook is cutctx's: the model is sent
``llm_input_messages`` (checked by :class:`loopchecks.LoopChecks` call by call), it retrieves a
masked result through the agent's tool node, and the state's ``messages`` stay whole.
"""

from __future__ import annotations

import warnings
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from test_langchain import POLICY, STUB, Script, ScriptedModel, read_file

from cutctx.integrations.langgraph import pre_model_hook

warnings.filterwarnings("ignore")
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
from langgraph.prebuilt import create_react_agent  # noqa: E402


class GraphScript(Script):
    def request(self, messages: list[BaseMessage], tools: list[dict[str, Any]]) -> dict[str, Any]:
        from cutctx.integrations.langchain import to_request

        return to_request(messages, format=self.fmt, tools=tools, model="langgraph")  # type: ignore[arg-type]


@pytest.mark.parametrize("fmt", ["openai-chat", "anthropic"])
def test_agent_loop(fmt: str) -> None:
    window = 16000
    hook = pre_model_hook(window, format=fmt, tools=[read_file],  # type: ignore[arg-type]
                          system_prompt="You read files.", policy=POLICY)
    script = GraphScript(fmt, window, hook, "thread-g", 65)  # type: ignore[arg-type]
    model = ScriptedModel(script=script, received=[])
    agent = create_react_agent(model, [read_file, *hook.tools], pre_model_hook=hook,
                               checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "thread-g"}, "recursion_limit": 1000}
    agent.invoke({"messages": [HumanMessage("Read the files.", id="u1")]}, config)
    state = agent.invoke({"messages": [HumanMessage("Read more.", id="u2")]}, config)
    checks = script.checks
    assert checks.calls >= 61 and checks.firings >= 2, (checks.calls, checks.firings)
    assert script.retrieval is not None and script.retrieved_seen
    results = [m for m in state["messages"] if isinstance(m, ToolMessage) and m.name == "read_file"]
    assert len(results) > 50 and not any(STUB.search(m.content) for m in results)
    if fmt == "anthropic":
        last = model.received[-1][0]
        kept = [m for m in last if isinstance(m, AIMessage) and isinstance(m.content, list)
                and any(b.get("type") == "thinking" for b in m.content)]
        assert len(kept) < (65 - 1) // 3  # the reasoning rule left signed turns out
    print(f"{fmt}: {checks.calls} calls, {checks.firings} firings, largest {checks.largest}")


def test_no_tools_no_retrieval_tool() -> None:
    seen: list[list[dict[str, Any]]] = []

    def script(messages: list[BaseMessage], tools: list[dict[str, Any]]) -> AIMessage:
        seen.append(tools)
        return AIMessage(content="Hello.")

    hook = pre_model_hook(4000)
    assert hook.tools == []
    agent = create_react_agent(ScriptedModel(script=script, received=[]), [*hook.tools],
                               pre_model_hook=hook)
    state = agent.invoke({"messages": [HumanMessage("Hi")]})
    assert seen == [[]] and state["messages"][-1].content == "Hello."
