"""cutctx inside agent frameworks and provider SDKs: one compaction session per conversation.

Every adapter builds on :mod:`cutctx.integrations.compactor`:

* :class:`~cutctx.integrations.compactor.Compactor`: one conversation's
  :class:`cutctx.Session`, a :class:`~cutctx.integrations.compactor.MaskStore` that keeps the
  original of every tool result the session masked (keyed by the digest its stub states), and
  the ``cutctx_retrieve`` tool through which the model reads such an original back;
* :class:`~cutctx.integrations.compactor.Compactors`: a thread-safe map from a conversation key
  to its ``Compactor``, for front ends that see many conversations;
  :func:`~cutctx.integrations.compactor.conversation_key` finds a key in a request when the
  caller gives none.

The adapters, each importable only with its framework installed (the extras of the
``cutctx-rs`` distribution, as ``pip install 'cutctx-rs[litellm]'``):

==========================================  ==============================  =================
module                                      what it wraps                   extra
==========================================  ==============================  =================
:mod:`cutctx.wrap`                          ``openai.OpenAI`` /             ``openai``,
                                            ``AsyncOpenAI``,                ``anthropic``
                                            ``anthropic.Anthropic`` /
                                            ``AsyncAnthropic`` clients
:mod:`cutctx.integrations.litellm`          LiteLLM's SDK and proxy         ``litellm``
                                            (a ``CustomLogger``)
:mod:`cutctx.integrations.langchain`        LangChain chat models           ``langchain``
:mod:`cutctx.integrations.langgraph`        LangGraph agents                ``langgraph``
:mod:`cutctx.integrations.openai_agents`    the OpenAI Agents SDK           ``openai-agents``
:mod:`cutctx.integrations.pydantic_ai`      PydanticAI agents               ``pydantic-ai``
==========================================  ==============================  =================

Importing this package imports no framework.
"""

from __future__ import annotations

from cutctx.integrations.compactor import (
    DEFAULT_POLICY,
    TOOL_NAME,
    Compactor,
    Compactors,
    MaskStore,
    MemoryMaskStore,
    RetrievalResult,
    SQLiteMaskStore,
    conversation_key,
    is_retrieval_call,
    retrieval_tool,
    tool_result,
)

__all__ = [
    "DEFAULT_POLICY",
    "TOOL_NAME",
    "Compactor",
    "Compactors",
    "MaskStore",
    "MemoryMaskStore",
    "RetrievalResult",
    "SQLiteMaskStore",
    "conversation_key",
    "is_retrieval_call",
    "retrieval_tool",
    "tool_result",
]
