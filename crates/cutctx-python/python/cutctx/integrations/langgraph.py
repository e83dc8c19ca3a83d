"""cutctx in LangGraph agents: a pre-model hook for ``langgraph.prebuilt.create_react_agent``.

:func:`pre_model_hook` makes a :class:`CutctxPreModelHook`, a node the agent runs before each
model call. It converts the state's ``messages`` (with the hook's system prompt and tools) to
the provider request of ``format`` (:func:`cutctx.integrations.langchain.to_request`), lets the
conversation's :class:`~cutctx.integrations.compactor.Compactor` (the graph's ``thread_id``,
else a key read from the history) prepare it, and returns the result as LangChain messages
under ``llm_input_messages``: the model is sent those, the state's ``messages`` stay whole.

A pre-model hook cannot change the tools bound to the model, so give the hook the agent's tools
(they count in the window) and add the hook's ``tools`` (``cutctx_retrieve``) to the agent's,
so its tool node answers the model's retrievals from the mask store; give the system prompt to
the hook too, instead of ``prompt=``, so that it is counted::

    from langgraph.prebuilt import create_react_agent
    hook = pre_model_hook(100_000, tools=tools, system_prompt="You read files.")
    agent = create_react_agent(model, [*tools, *hook.tools], pre_model_hook=hook)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import BaseMessage, SystemMessage
from langchain_core.tools import BaseTool

from cutctx.integrations.compactor import TOOL_NAME, Compactor, Compactors, Format, MaskStore
from cutctx.integrations.langchain import (
    _check,
    _thread_id,
    _tool_name,
    from_request,
    make_retrieval_tool,
    to_request,
)

__all__ = ["CutctxPreModelHook", "pre_model_hook"]


class CutctxPreModelHook:
    """A LangGraph pre-model hook that compacts what the model is sent (see
    :func:`pre_model_hook`). Call it with the agent's state; it returns
    ``{"llm_input_messages": [...]}``."""

    def __init__(
        self,
        window: int,
        *,
        format: Format = "openai-chat",
        tools: Sequence[BaseTool | Mapping[str, Any]] = (),
        system_prompt: str | SystemMessage | None = None,
        model: str = "langgraph",
        store: MaskStore | None = None,
        retrieval: bool = True,
        keep_retrieved_for: int = 3,
        key: str | None = None,
        max_conversations: int | None = 1024,
        **session_options: Any,
    ) -> None:
        _check(format)
        self.format: Format = format
        self.agent_tools = [t for t in tools if _tool_name(t) != TOOL_NAME]
        """The tools the agent gives the model, as counted in the window."""
        self.system: SystemMessage | None = (
            SystemMessage(system_prompt) if isinstance(system_prompt, str) else system_prompt
        )
        self.model = model
        self.compactors = Compactors(
            format,
            window,
            store=store,
            retrieval=retrieval,
            keep_retrieved_for=keep_retrieved_for,
            max_conversations=max_conversations,
            **session_options,
        )
        """The conversations' compactors, by key."""
        self.retrieval_tool: BaseTool = make_retrieval_tool(self.compactors.store)
        """``cutctx_retrieve`` as a LangChain tool reading the mask store."""
        self.tools: list[BaseTool] = (
            [self.retrieval_tool] if retrieval and self.agent_tools else []
        )
        """What to add to the agent's tools: ``cutctx_retrieve`` when the agent has tools."""
        self._key = key

    def compactor(self, request: Mapping[str, Any]) -> Compactor:
        """The compactor of the current conversation (``request`` is its provider JSON)."""
        return self.compactors.for_request(request, self._key or _thread_id())

    def compact(self, messages: Sequence[BaseMessage]) -> list[BaseMessage]:
        """The messages to send the model for the history ``messages``, the system prompt
        first when the hook has one."""
        tools: list[Any] = list(self.agent_tools)
        if self.tools:
            tools.append(self.retrieval_tool)
        request = to_request(
            messages, format=self.format, tools=tools, system=self.system, model=self.model
        )
        out = self.compactor(request).prepare(request)
        originals = list(messages)
        if self.system is not None:
            originals.insert(0, self.system)
        return from_request(out, format=self.format, originals=originals)

    def __call__(self, state: Any) -> dict[str, Any]:
        messages = state["messages"] if isinstance(state, Mapping) else state.messages
        return {"llm_input_messages": self.compact(messages)}


def pre_model_hook(
    window: int,
    *,
    format: Format = "openai-chat",
    tools: Sequence[BaseTool | Mapping[str, Any]] = (),
    system_prompt: str | SystemMessage | None = None,
    **options: Any,
) -> CutctxPreModelHook:
    """A pre-model hook for ``create_react_agent`` that sends the model the conversation as
    cutctx compacts it into ``window`` tokens, one session per thread.

    Args:
        window: The whole prompt's budget, in tokens.
        format: The request shape counted and compacted (``"openai-chat"``, ``"anthropic"``).
        tools: The agent's tools (counted in the window; with any, ``cutctx_retrieve`` is
            offered: add the hook's ``tools`` to the agent's).
        system_prompt: The agent's system prompt, sent first (pass it here, not ``prompt=``).
        **options: :class:`CutctxPreModelHook`'s others: ``model`` (the request's model
            name), ``store``, ``retrieval``, ``keep_retrieved_for``, ``key`` (a fixed
            conversation key), ``max_conversations`` and :class:`cutctx.Session`'s settings.
    """
    return CutctxPreModelHook(
        window, format=format, tools=tools, system_prompt=system_prompt, **options
    )
