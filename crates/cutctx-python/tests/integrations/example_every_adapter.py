"""Every adapter set up as docs/PYTHON.md shows it, type-checked and run once.

``scripts/integrations-check.sh`` runs ``mypy --strict`` on this file with every framework
installed at its pinned version, then runs it: a change in a framework's types or in an
adapter's signature that would break the documented examples fails here. The agents run on
their framework's own test models (PydanticAI's ``FunctionModel``, LangChain's fake chat
model); the SDK clients are only wrapped, since calling them needs a server (``test_wrap.py``
runs them against one).
"""

from __future__ import annotations

import os
from typing import Any

# LiteLLM fetches its price list at import unless told to read its own copy.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("LITELLM_TELEMETRY", "False")

import anthropic  # noqa: E402
import litellm  # noqa: E402
import openai  # noqa: E402
from agents import Agent as AgentsAgent  # noqa: E402
from agents import RunConfig  # noqa: E402
from langchain.agents import create_agent  # noqa: E402
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel  # noqa: E402
from langchain_core.messages import AIMessage, HumanMessage  # noqa: E402
from pydantic_ai import Agent  # noqa: E402
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart  # noqa: E402
from pydantic_ai.models.function import AgentInfo, FunctionModel  # noqa: E402

import cutctx  # noqa: E402
from cutctx import Session  # noqa: E402
from cutctx.integrations.langchain import CutctxMiddleware  # noqa: E402
from cutctx.integrations.langgraph import pre_model_hook  # noqa: E402
from cutctx.integrations.litellm import CutctxCallback  # noqa: E402
from cutctx.integrations.openai_agents import CutctxInputFilter  # noqa: E402
from cutctx.integrations.pydantic_ai import CutctxHistoryProcessor  # noqa: E402

WINDOW = 100_000


def session() -> None:
    """``cutctx.Session``: a whole request, then only what is appended."""
    s = Session("openai-chat", window=WINDOW)
    request: dict[str, Any] = {"model": "m", "messages": [{"role": "user", "content": "Hi"}]}
    first = s.prepare(request)
    assert first == request, "a request that fits comes back as it is"
    reply = {"role": "assistant", "content": "Hello."}
    later = s.prepare_appended([reply])
    assert later["messages"] == [*request["messages"], reply]


def sdk_clients() -> None:
    """``cutctx.wrap``: the clients keep their type for the checker; nothing is sent here."""
    chat = cutctx.wrap(openai.OpenAI(api_key="unused", base_url="http://127.0.0.1:9/v1"), window=WINDOW)
    claude = cutctx.wrap(anthropic.Anthropic(api_key="unused", base_url="http://127.0.0.1:9"), window=WINDOW)
    models: openai.resources.Models = chat.models  # the SDK's own, unchanged
    assert models is not None and claude.messages is not None


def pydantic_ai() -> None:
    """A PydanticAI agent with the capability, on its own test model."""

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[TextPart("Done.")])

    agent = Agent(FunctionModel(model), capabilities=[CutctxHistoryProcessor(window=WINDOW)])
    assert agent.run_sync("Fix the failing test.").output == "Done."


def langchain() -> None:
    """A LangChain agent with the middleware, and the LangGraph hook."""
    model = GenericFakeChatModel(messages=iter([AIMessage(content="Done.")]))
    agent = create_agent(model, [], middleware=[CutctxMiddleware(window=WINDOW)])
    state = agent.invoke({"messages": [HumanMessage("Read the logs.")]})
    assert state["messages"][-1].content == "Done."
    hook = pre_model_hook(WINDOW, system_prompt="You read files.")
    assert hook.tools == [], "no retrieval tool without the agent's tools"


def openai_agents() -> None:
    """The OpenAI Agents SDK's run settings with the input filter."""
    cut = CutctxInputFilter(window=WINDOW)
    agent = AgentsAgent(name="coder", instructions="You read files.", tools=[cut.retrieval_tool])
    config = RunConfig(call_model_input_filter=cut)
    assert config.call_model_input_filter is cut and agent.tools


def litellm_callback() -> None:
    """LiteLLM's callback, compacting one call's arguments."""
    callback = CutctxCallback(window=WINDOW)
    litellm.callbacks = [callback]
    kwargs = {"model": "m", "messages": [{"role": "user", "content": "Hi"}]}
    assert callback.compact(kwargs)["messages"] == kwargs["messages"]
    litellm.callbacks = []


if __name__ == "__main__":
    session()
    sdk_clients()
    pydantic_ai()
    langchain()
    openai_agents()
    litellm_callback()
    print("every adapter set up and run")
