"""cutctx in the OpenAI Agents SDK: a model input filter, a compacting session and a tool.

:class:`CutctxInputFilter` is a ``RunConfig.call_model_input_filter``: before each model call
the SDK hands it the instructions and the input items (Responses items); it builds the
``openai-responses`` request they make with the agent's tools (:func:`to_request`), lets the
conversation's :class:`~cutctx.integrations.compactor.Compactor` prepare it, and returns the
items to send (:func:`from_request`: the very item objects the compactor left as they were,
new dicts for the ones it changed). The run's own history is left whole; between firings the
model is sent the previous items with the new ones appended, so the prompt cache holds.

:class:`CompactingSession` wraps another SDK session (``SQLiteSession``, ...) and answers
``get_items`` with the compacted history; what is stored stays whole.

:func:`make_retrieval_tool` (and :attr:`CutctxInputFilter.retrieval_tool`) is
``cutctx_retrieve`` as an SDK ``FunctionTool`` reading the mask store: give it to the agent
next to its own tools, so the model can ask for the original of a masked result.

::

    from agents import Agent, RunConfig, Runner
    from cutctx.integrations.openai_agents import CutctxInputFilter
    cut = CutctxInputFilter(window=100_000)
    agent = Agent(name="a", tools=[read_file, cut.retrieval_tool])
    Runner.run_sync(agent, "Read the files.", run_config=RunConfig(call_model_input_filter=cut))
"""

from __future__ import annotations

import json
from collections import defaultdict, deque
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, cast

from agents import FunctionTool, Tool
from agents.items import TResponseInputItem
from agents.memory import Session, SessionSettings
from agents.run_config import CallModelData, ModelInputData
from agents.tool_context import ToolContext

from cutctx.integrations.compactor import (
    TOOL_NAME,
    Compactor,
    Compactors,
    MaskStore,
    _retrieve,
    retrieval_tool,
)

__all__ = [
    "CompactingSession",
    "CutctxInputFilter",
    "from_request",
    "make_retrieval_tool",
    "to_request",
    "tool_schema",
]

FORMAT: Final = "openai-responses"
"""The request format the SDK speaks: Responses items."""


def _canon(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)


def _plain(item: Any) -> dict[str, Any]:
    """An input item as plain JSON (the SDK's items are dicts; pydantic models are dumped)."""
    dump = getattr(item, "model_dump", None)
    if callable(dump):
        return cast(dict[str, Any], dump(exclude_unset=True, mode="json"))
    return cast(dict[str, Any], json.loads(json.dumps(item, default=str)))


# ---------------------------------------------------------------------------------------------
# Tools


def tool_schema(tool: Tool | Mapping[str, Any]) -> dict[str, Any] | None:
    """An SDK tool as a Responses request's tool definition (``None`` for a hosted tool whose
    definition the SDK builds itself). ``cutctx_retrieve`` is always
    :func:`cutctx.integrations.compactor.retrieval_tool`'s.

    >>> tool_schema({"type": "function", "name": "cutctx_retrieve"})["strict"]
    True
    """
    if isinstance(tool, Mapping):
        if tool.get("name") == TOOL_NAME:
            return retrieval_tool(FORMAT)
        return dict(tool)
    if isinstance(tool, FunctionTool):
        if tool.name == TOOL_NAME:
            return retrieval_tool(FORMAT)
        return {
            "type": "function",
            "name": tool.name,
            "description": tool.description,
            "parameters": tool.params_json_schema,
            "strict": tool.strict_json_schema,
        }
    return None


def make_retrieval_tool(store: MaskStore) -> FunctionTool:
    """``cutctx_retrieve`` as an SDK ``FunctionTool`` answering from ``store``. A digest the
    store lacks (or bad arguments) is answered with an error text for the model, not raised.

    >>> from cutctx.integrations.compactor import MemoryMaskStore
    >>> make_retrieval_tool(MemoryMaskStore()).name
    'cutctx_retrieve'
    """
    spec = retrieval_tool(FORMAT)

    async def invoke(context: ToolContext[Any], arguments: str) -> str:
        return _retrieve(store, arguments).text

    return FunctionTool(
        name=TOOL_NAME,
        description=spec["description"],
        params_json_schema=spec["parameters"],
        on_invoke_tool=invoke,
        strict_json_schema=True,
    )


# ---------------------------------------------------------------------------------------------
# Items to a request and back


def to_request(
    items: Sequence[Any] | str,
    *,
    instructions: str | None = None,
    tools: Sequence[Tool | Mapping[str, Any]] = (),
    model: str = "agents",
) -> dict[str, Any]:
    """The Responses request the SDK's ``items`` (and instructions and tools) make, as JSON.

    >>> to_request([{"role": "user", "content": "Hi"}], instructions="Be brief.")["input"]
    [{'role': 'user', 'content': 'Hi'}]
    """
    listed: Sequence[Any] = [{"role": "user", "content": items}] if isinstance(items, str) else items
    request: dict[str, Any] = {"model": model, "input": [_plain(i) for i in listed]}
    if instructions is not None:
        request["instructions"] = instructions
    schemas = [s for t in tools if (s := tool_schema(t)) is not None]
    if schemas:
        request["tools"] = schemas
    return request


def from_request(request: Mapping[str, Any], originals: Sequence[Any]) -> list[TResponseInputItem]:
    """The input items of ``request``: each one equal to an item of ``originals`` is that very
    object (in order); the others are the request's dicts.

    >>> item = {"role": "user", "content": "Hi"}
    >>> from_request({"input": [dict(item)]}, [item])[0] is item
    True
    """
    unused: defaultdict[str, deque[Any]] = defaultdict(deque)
    for original in originals:
        unused[_canon(_plain(original))].append(original)
    out: list[TResponseInputItem] = []
    for item in request.get("input") or []:
        same = unused.get(_canon(item))
        out.append(same.popleft() if same else cast(TResponseInputItem, item))
    return out


# ---------------------------------------------------------------------------------------------
# The input filter


class CutctxInputFilter:
    """A ``RunConfig.call_model_input_filter`` compacting what each model call is sent.

    Args:
        window: The whole prompt's budget, in tokens.
        key: The conversation key of a call (given the SDK's ``CallModelData``); default: the
            key :func:`~cutctx.integrations.compactor.conversation_key` finds in the history.
        store, retrieval, keep_retrieved_for, max_conversations, **session_options: As for
            :class:`~cutctx.integrations.compactor.Compactors`.

    >>> cut = CutctxInputFilter(window=8000)
    >>> cut.retrieval_tool.name
    'cutctx_retrieve'
    """

    def __init__(
        self,
        window: int,
        *,
        key: Callable[[CallModelData[Any]], str] | None = None,
        store: MaskStore | None = None,
        retrieval: bool = True,
        keep_retrieved_for: int = 3,
        max_conversations: int | None = 1024,
        **session_options: Any,
    ) -> None:
        if key is not None and not callable(key):
            raise ValueError(f"key must be a callable or None, not {key!r}")
        self.compactors = Compactors(
            FORMAT,
            window,
            store=store,
            retrieval=retrieval,
            keep_retrieved_for=keep_retrieved_for,
            max_conversations=max_conversations,
            **session_options,
        )
        """The conversations' compactors and their shared store."""
        self.key = key
        self.retrieval = bool(retrieval)
        self.last: Compactor | None = None
        """The compactor of the last call filtered (its ``fired`` says whether it compacted)."""
        self.retrieval_tool: FunctionTool = make_retrieval_tool(self.compactors.store)
        """``cutctx_retrieve``, for the agent's tools."""

    def __call__(self, data: CallModelData[Any]) -> ModelInputData:
        items = list(data.model_data.input)
        tools = [t for t in data.agent.tools if isinstance(t, FunctionTool)]
        request = to_request(items, instructions=data.model_data.instructions, tools=tools)
        compactor = self.compactors.for_request(request, self.key(data) if self.key else None)
        # Only an agent that runs cutctx_retrieve may be told of it: the filter cannot add tools.
        compactor.retrieval = self.retrieval and any(t.name == TOOL_NAME for t in tools)
        self.last = compactor
        sent = compactor.prepare(request)
        return ModelInputData(input=from_request(sent, items), instructions=data.model_data.instructions)


# ---------------------------------------------------------------------------------------------
# The compacting session


class CompactingSession:
    """An SDK session answering ``get_items`` with ``inner``'s history, compacted.

    Args:
        inner: The session that stores the history (kept whole).
        window: The budget of the history (with ``instructions`` and ``tools``), in tokens.
        instructions, tools: What the agent sends with the history, counted in the budget.
        store, **session_options: As for :class:`~cutctx.integrations.compactor.Compactor`.

    >>> from agents import SQLiteSession
    >>> session = CompactingSession(SQLiteSession("s1"), window=8000)
    >>> session.session_id
    's1'
    """

    session_settings: SessionSettings | None = None

    def __init__(
        self,
        inner: Session,
        window: int,
        *,
        instructions: str | None = None,
        tools: Sequence[Tool | Mapping[str, Any]] = (),
        store: MaskStore | None = None,
        **session_options: Any,
    ) -> None:
        if not all(hasattr(inner, m) for m in ("get_items", "add_items", "pop_item", "clear_session")):
            raise ValueError(f"inner must be an agents Session, not {inner!r}")
        self.inner = inner
        self.session_id: str = inner.session_id
        self.session_settings = getattr(inner, "session_settings", None)
        self.instructions = instructions
        self.tools = list(tools)
        # The history holds no cutctx_retrieve for the session to offer: count tools only.
        self.compactor = Compactor(FORMAT, window, store=store, retrieval=False, **session_options)
        """The history's compactor (``fired`` says whether the last ``get_items`` compacted)."""

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        items = await self.inner.get_items(limit)
        request = to_request(items, instructions=self.instructions, tools=self.tools)
        return from_request(self.compactor.prepare(request), items)

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        await self.inner.add_items(items)

    async def pop_item(self) -> TResponseInputItem | None:
        return await self.inner.pop_item()

    async def clear_session(self) -> None:
        await self.inner.clear_session()
