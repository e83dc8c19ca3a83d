"""cutctx in LangChain agents: a middleware for ``langchain.agents.create_agent``.

:class:`CutctxMiddleware` runs one :class:`~cutctx.integrations.compactor.Compactor` per
conversation (the graph's ``thread_id`` when there is one) on every model call. Its
``wrap_model_call`` converts the messages the agent is about to send (and its system message
and tools) to the provider request of ``format`` (:func:`to_request`), lets the compactor
prepare it, converts the result back (:func:`from_request`) and hands those messages to the
model with ``request.override(messages=...)``. The agent's state is left as it was: every call
sees the whole history, and between firings the model is sent the previous messages with the
new ones appended, so the provider's prompt cache keeps serving the prefix.

When the agent gives the model tools, the model is also offered ``cutctx_retrieve``, a real
LangChain tool registered through the middleware's ``tools``: the agent's tool node runs it
and it answers with the original of a masked tool result, read from the mask store.

::

    from langchain.agents import create_agent
    agent = create_agent(model, tools, middleware=[CutctxMiddleware(window=100_000)])

``format`` is the provider's request shape the budget is counted in: ``"openai-chat"``
(default) or ``"anthropic"`` (use it with Anthropic models, so signed thinking blocks follow
cutctx's reasoning rule).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.tools import BaseTool, StructuredTool, ToolException
from langchain_core.utils.function_calling import convert_to_openai_tool

from cutctx.integrations.compactor import (
    TOOL_NAME,
    Compactor,
    Compactors,
    Format,
    MaskStore,
    retrieval_tool,
)

__all__ = [
    "CutctxMiddleware",
    "from_request",
    "make_retrieval_tool",
    "to_request",
    "tool_schema",
]

_SUPPORTED = ("openai-chat", "anthropic")


def _check(format: str) -> None:
    if format not in _SUPPORTED:
        raise ValueError(f"format {format!r} is not supported here: one of {', '.join(_SUPPORTED)}")


def _canon(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


# ---------------------------------------------------------------------------------------------
# Tools


def tool_schema(tool: BaseTool | Mapping[str, Any], format: Format = "openai-chat") -> dict[str, Any]:
    """A LangChain tool (or a tool dict) as ``format``'s request spells a tool definition.
    ``cutctx_retrieve`` is always :func:`cutctx.integrations.compactor.retrieval_tool`'s."""
    _check(format)
    name = tool.get("name") if isinstance(tool, Mapping) else tool.name
    if isinstance(tool, Mapping) and "function" in tool:
        name = tool["function"].get("name")
    if name == TOOL_NAME:
        return retrieval_tool(format)
    if format == "anthropic" and isinstance(tool, Mapping) and "input_schema" in tool:
        return dict(tool)
    spec = convert_to_openai_tool(tool)
    if format == "openai-chat":
        return spec
    fn = spec["function"]
    out: dict[str, Any] = {"name": fn["name"], "description": fn.get("description", "")}
    out["input_schema"] = fn.get("parameters") or {"type": "object", "properties": {}}
    return out


def _tool_name(tool: Any) -> str | None:
    if isinstance(tool, Mapping):
        fn = tool.get("function")
        return str(fn.get("name")) if isinstance(fn, Mapping) else tool.get("name")
    return getattr(tool, "name", None)


def make_retrieval_tool(store: MaskStore) -> BaseTool:
    """``cutctx_retrieve`` as a LangChain tool that reads the originals from ``store``; a
    digest the store does not hold gives an error tool message (``status="error"``)."""
    spec = retrieval_tool("openai-chat")["function"]
    from cutctx.integrations.compactor import _retrieve

    def cutctx_retrieve(digest: str) -> str:
        result = _retrieve(store, {"digest": digest})
        if result.is_error:
            raise ToolException(result.text)
        return result.text

    return StructuredTool.from_function(
        func=cutctx_retrieve,
        name=TOOL_NAME,
        description=spec["description"],
        args_schema=spec["parameters"],
        handle_tool_error=True,
    )


# ---------------------------------------------------------------------------------------------
# Content parts


def _image_url_of(block: Mapping[str, Any]) -> str | None:
    """The URL (or data URL) of a LangChain image block (v1 or v0 shape)."""
    if isinstance(block.get("url"), str):
        return str(block["url"])
    data = block.get("base64") or (block.get("data") if block.get("source_type") == "base64" else None)
    if isinstance(data, str):
        mime = block.get("mime_type") or "image/png"
        return f"data:{mime};base64,{data}"
    return None


def _part(block: Any, format: str, role: str) -> dict[str, Any] | None:
    """One LangChain content block as a part of ``format``, or ``None`` when the format has no
    place for it (reasoning in Chat Completions, tool calls kept in ``tool_calls``)."""
    if isinstance(block, str):
        return {"type": "text", "text": block}
    if not isinstance(block, Mapping):
        return None
    kind = block.get("type")
    if kind == "text":
        return {"type": "text", "text": block.get("text", "")}
    if kind in ("tool_use", "tool_call", "function_call", "server_tool_call", "server_tool_result"):
        if format == "anthropic" and kind == "tool_use" and role == "assistant":
            return {k: block[k] for k in ("type", "id", "name", "input") if k in block}
        return None
    if kind in ("thinking", "redacted_thinking"):
        return dict(block) if format == "anthropic" and role == "assistant" else None
    if kind == "reasoning":
        signature = (block.get("extras") or {}).get("signature")
        if format == "anthropic" and role == "assistant" and isinstance(signature, str):
            return {"type": "thinking", "thinking": block.get("reasoning", ""), "signature": signature}
        return None
    if format == "openai-chat":
        if kind == "image":
            url = _image_url_of(block)
            return {"type": "image_url", "image_url": {"url": url}} if url else dict(block)
        return dict(block)
    # anthropic
    if kind == "image_url":
        url = block["image_url"]["url"] if isinstance(block.get("image_url"), Mapping) else block.get("image_url")
        if isinstance(url, str) and url.startswith("data:") and ";base64," in url:
            mime, data = url[5:].split(";base64,", 1)
            return {"type": "image", "source": {"type": "base64", "media_type": mime, "data": data}}
        return {"type": "image", "source": {"type": "url", "url": url}}
    if kind == "image" and "source" not in block:
        url = _image_url_of(block)
        if url and url.startswith("data:"):
            mime, data = url[5:].split(";base64,", 1)
            return {"type": "image", "source": {"type": "base64", "media_type": mime, "data": data}}
        return {"type": "image", "source": {"type": "url", "url": url}}
    return dict(block)


def _content(content: Any, format: str, role: str) -> tuple[Any, list[tuple[Any, Any]]]:
    """``content`` in ``format``, and the pairs (part, LangChain block) it was made of."""
    if isinstance(content, str):
        return content, [({"type": "text", "text": content}, content)]
    pairs = [(p, b) for b in content or [] if (p := _part(b, format, role)) is not None]
    return [p for p, _ in pairs], pairs


# ---------------------------------------------------------------------------------------------
# Messages to a request


def _units(messages: Sequence[BaseMessage], format: str) -> list[tuple[dict[str, Any], list[BaseMessage]]]:
    """Each provider message with the LangChain messages it was made of."""
    units: list[tuple[dict[str, Any], list[BaseMessage]]] = []
    for m in messages:
        if isinstance(m, SystemMessage):
            role = "system" if format == "openai-chat" else "user"
            units.append(({"role": role, "content": _content(m.content, format, role)[0]}, [m]))
        elif isinstance(m, ToolMessage):
            content = _content(m.content, format, "tool")[0]
            if format == "openai-chat":
                units.append(({"role": "tool", "tool_call_id": m.tool_call_id, "content": content}, [m]))
                continue
            block: dict[str, Any] = {"type": "tool_result", "tool_use_id": m.tool_call_id, "content": content}
            if m.status == "error":
                block["is_error"] = True
            prev = units[-1] if units else None
            if prev and prev[1] and all(isinstance(x, ToolMessage) for x in prev[1]):
                prev[0]["content"].append(block)
                prev[1].append(m)
            else:
                units.append(({"role": "user", "content": [block]}, [m]))
        elif isinstance(m, AIMessage):
            units.append((_assistant(m, format), [m]))
        else:  # HumanMessage and any other kind of message: the user's
            item: dict[str, Any] = {"role": "user", "content": _content(m.content, format, "user")[0]}
            if format == "openai-chat" and getattr(m, "name", None):
                item["name"] = m.name
            units.append((item, [m]))
    return units


def _calls_of(m: AIMessage) -> list[tuple[str, str, Any]]:
    calls: list[tuple[str, str, Any]] = [
        (str(c["id"]), c["name"], c["args"]) for c in m.tool_calls if c.get("id")
    ]
    calls += [
        (str(c["id"]), c.get("name") or "", c.get("args")) for c in m.invalid_tool_calls if c.get("id")
    ]
    return calls


def _assistant(m: AIMessage, format: str) -> dict[str, Any]:
    content, _ = _content(m.content, format, "assistant")
    calls = _calls_of(m)
    if format == "openai-chat":
        if isinstance(content, list) and all(p.get("type") == "text" for p in content):
            content = "".join(p["text"] for p in content)
        item: dict[str, Any] = {"role": "assistant", "content": content or (None if calls else "")}
        if calls:
            item["tool_calls"] = [
                {
                    "id": cid,
                    "type": "function",
                    "function": {
                        "name": name,
                        "arguments": args if isinstance(args, str) else json.dumps(args, ensure_ascii=False),
                    },
                }
                for cid, name, args in calls
            ]
        return item
    if not calls and isinstance(content, str):
        return {"role": "assistant", "content": content}
    blocks = [{"type": "text", "text": content}] if isinstance(content, str) and content else list(content or [])
    have = {b.get("id") for b in blocks if b.get("type") == "tool_use"}
    for cid, name, args in calls:
        if cid not in have:
            if isinstance(args, str):
                try:
                    args = json.loads(args or "{}")
                except ValueError:
                    args = {}
            blocks.append({"type": "tool_use", "id": cid, "name": name, "input": args or {}})
    return {"role": "assistant", "content": blocks}


def to_request(
    messages: Sequence[BaseMessage],
    *,
    format: Format = "openai-chat",
    tools: Sequence[BaseTool | Mapping[str, Any]] = (),
    system: SystemMessage | str | None = None,
    model: str = "langchain",
    tool_choice: Any = None,
) -> dict[str, Any]:
    """The provider request (``format``'s JSON, as a dict) that sends ``messages``.

    ``system`` (a message or its text) goes first (Chat) or in ``system`` (Anthropic, with
    the leading system messages of ``messages``); ``tools`` become the request's tool
    definitions (:func:`tool_schema`); ``tool_choice="none"`` is kept. Text and media parts
    go as the provider's parts (images by their URL or data), tool calls with their ids,
    tool results with their call ids, Anthropic thinking blocks (or standard reasoning
    blocks with a signature) as thinking blocks; what the format has no place for (reasoning
    in Chat Completions) is left out.

    >>> from langchain_core.messages import HumanMessage
    >>> to_request([HumanMessage("Hi")], model="m")
    {'model': 'm', 'messages': [{'role': 'user', 'content': 'Hi'}]}
    """
    _check(format)
    msgs = list(messages)
    if isinstance(system, str):
        system = SystemMessage(system)
    if system is not None:
        msgs.insert(0, system)
    request: dict[str, Any] = {"model": model}
    if format == "anthropic":
        lead = 0
        while lead < len(msgs) and isinstance(msgs[lead], SystemMessage):
            lead += 1
        if lead:
            parts = [p for m in msgs[:lead] for p in _as_parts(_content(m.content, format, "system")[0])]
            request["system"] = (
                parts[0]["text"] if len(parts) == 1 and parts[0].get("type") == "text" and isinstance(msgs[0].content, str) else parts
            )
        msgs = msgs[lead:]
    request["messages"] = [u for u, _ in _units(msgs, format)]
    if tools:
        request["tools"] = [tool_schema(t, format) for t in tools]
    if tool_choice == "none":
        request["tool_choice"] = {"type": "none"} if format == "anthropic" else "none"
    return request


def _as_parts(content: Any) -> list[dict[str, Any]]:
    return [{"type": "text", "text": content}] if isinstance(content, str) else list(content)


# ---------------------------------------------------------------------------------------------
# A request back to messages


def _back(part: Any, pairs: list[tuple[Any, Any]], used: set[int]) -> Any:
    for i, (p, b) in enumerate(pairs):
        if i not in used and _canon(p) == _canon(part):
            used.add(i)
            return b
    if isinstance(part, Mapping) and part.get("type") == "text":
        return {"type": "text", "text": part.get("text", "")}
    return dict(part) if isinstance(part, Mapping) else part


def _content_back(content: Any, original: BaseMessage | None, format: str, role: str, skip_tool_use: bool = False) -> Any:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    pairs = _content(original.content, format, role)[1] if original is not None else []
    used: set[int] = set()
    out = []
    for part in content:
        if skip_tool_use and isinstance(part, Mapping) and part.get("type") == "tool_use":
            if not any(_canon(p) == _canon(part) for p, _ in pairs):
                continue
        out.append(_back(part, pairs, used))
    if len(out) == 1 and isinstance(out[0], str):
        return out[0]
    return out


def _ai_back(item: Mapping[str, Any], original: AIMessage | None, format: str) -> AIMessage:
    calls: list[dict[str, Any]] = []
    if format == "openai-chat":
        for c in item.get("tool_calls") or []:
            raw = c["function"].get("arguments")
            try:
                args = json.loads(raw or "{}")
            except ValueError:
                args = {}
            calls.append({"id": c["id"], "name": c["function"]["name"], "args": args, "type": "tool_call"})
    elif isinstance(item.get("content"), list):
        for b in item["content"]:
            if isinstance(b, Mapping) and b.get("type") == "tool_use":
                calls.append({"id": b["id"], "name": b["name"], "args": b.get("input") or {}, "type": "tool_call"})
    content = _content_back(item.get("content"), original, format, "assistant", skip_tool_use=True)
    if original is None:
        return AIMessage(content=content, tool_calls=calls)
    by_id: dict[Any, Any] = {c["id"]: c for c in original.tool_calls}
    kept = [by_id.get(c["id"], c) if by_id.get(c["id"], {}).get("args") == c["args"] else c for c in calls]
    return original.model_copy(update={"content": content, "tool_calls": kept})


def _fresh(item: Mapping[str, Any], format: str) -> list[BaseMessage]:
    role = item.get("role")
    if role == "system":
        return [SystemMessage(content=_content_back(item.get("content"), None, format, "system"))]
    if role == "assistant":
        return [_ai_back(item, None, format)]
    if role == "tool":
        return [ToolMessage(content=_content_back(item.get("content"), None, format, "tool"), tool_call_id=item["tool_call_id"])]
    return [HumanMessage(content=_content_back(item.get("content"), None, format, "user"))]


def _rebuild(item: Mapping[str, Any], unit: tuple[dict[str, Any], list[BaseMessage]], format: str) -> list[BaseMessage]:
    """``item``, a changed version of ``unit``'s message, as LangChain messages."""
    provider, originals = unit
    if all(isinstance(m, ToolMessage) for m in originals):
        by_id = {m.tool_call_id: m for m in originals if isinstance(m, ToolMessage)}
        if format == "openai-chat":
            m = by_id[item["tool_call_id"]]
            return [m.model_copy(update={"content": _content_back(item.get("content"), m, format, "tool")})]
        out: list[BaseMessage] = []
        rest = []
        for b in item.get("content") or []:
            if isinstance(b, Mapping) and b.get("type") == "tool_result" and b.get("tool_use_id") in by_id:
                m = by_id[b["tool_use_id"]]
                out.append(m.model_copy(update={"content": _content_back(b.get("content"), m, format, "tool")}))
            else:
                rest.append(b)
        if rest:
            out.append(HumanMessage(content=rest))
        return out
    original = originals[0]
    if isinstance(original, AIMessage):
        return [_ai_back(item, original, format)]
    role = "system" if isinstance(original, SystemMessage) and format == "openai-chat" else "user"
    return [original.model_copy(update={"content": _content_back(item.get("content"), original, format, role)})]


def _identity(item: Mapping[str, Any], format: str) -> tuple[str, ...]:
    """What names a provider message across a compaction: its role and call ids."""
    role = str(item.get("role"))
    if role == "tool":
        return ("tool", str(item.get("tool_call_id")))
    if role == "assistant" and format == "openai-chat" and item.get("tool_calls"):
        return ("assistant", *sorted(str(c.get("id")) for c in item["tool_calls"]))
    content = item.get("content")
    if isinstance(content, list):
        ids = sorted(
            str(b.get("id") or b.get("tool_use_id"))
            for b in content
            if isinstance(b, Mapping) and b.get("type") in ("tool_use", "tool_result")
        )
        if ids:
            return (role, *ids)
    return ()


def from_request(
    request: Mapping[str, Any],
    *,
    format: Format = "openai-chat",
    originals: Sequence[BaseMessage] = (),
) -> list[BaseMessage]:
    """The LangChain messages that send ``request`` (``format``'s JSON), the inverse of
    :func:`to_request`.

    A message of ``request`` that :func:`to_request` made from one of ``originals`` (the
    messages the request was made of) gives that very message back (ids, names, tool call
    ids, ``additional_kwargs``, ``response_metadata`` and content blocks as they were); one
    cutctx changed (a masked tool result, reasoning left out) gives a copy of its original
    with the new content (each unchanged part its original block); one it added (a summary)
    gives a new message. Anthropic's ``system`` comes back as a leading ``SystemMessage``.

    >>> from langchain_core.messages import HumanMessage
    >>> hi = HumanMessage("Hi", id="m1")
    >>> from_request(to_request([hi]), originals=[hi])[0] is hi
    True
    """
    _check(format)
    originals = list(originals)
    out: list[BaseMessage] = []
    if format == "anthropic":
        lead = 0
        while lead < len(originals) and isinstance(originals[lead], SystemMessage):
            lead += 1
        if "system" in request:
            probe = to_request(originals[:lead], format="anthropic")
            if lead and _canon(probe.get("system")) == _canon(request["system"]):
                out.extend(originals[:lead])
            else:
                out.append(SystemMessage(content=_content_back(request["system"], None, format, "system")))
        originals = originals[lead:]
    units = _units(originals, format)
    canon = [_canon(u) for u, _ in units]
    idents = [_identity(u, format) for u, _ in units]
    j = 0
    for item in request.get("messages") or []:
        text = _canon(item)
        hit = next((k for k in range(j, len(units)) if canon[k] == text), None)
        if hit is not None:
            out.extend(units[hit][1])
            j = hit + 1
            continue
        ident = _identity(item, format)
        hit = next((k for k in range(j, len(units)) if ident and idents[k] == ident), None)
        if hit is None and ident:
            hit = next(
                (k for k in range(j, len(units)) if idents[k] and idents[k][0] == ident[0] and set(ident[1:]) <= set(idents[k][1:])),
                None,
            )
        if hit is not None:
            out.extend(_rebuild(item, units[hit], format))
            j = hit + 1
            continue
        out.extend(_fresh(item, format))
    return out


# ---------------------------------------------------------------------------------------------
# The middleware


def _thread_id() -> str | None:
    try:
        from langgraph.config import get_config

        config = get_config()
    except Exception:
        return None
    thread = (config.get("configurable") or {}).get("thread_id")
    return None if thread is None else str(thread)


def _model_name(model: Any) -> str:
    for attr in ("model_name", "model"):
        value = getattr(model, attr, None)
        if isinstance(value, str) and value:
            return value
    return type(model).__name__


class CutctxMiddleware(AgentMiddleware):
    """Compacts what a ``create_agent`` agent sends its model, one session per conversation.

    Args:
        window: The whole prompt's budget, in tokens (system, tools and messages).
        format: The request shape counted and compacted: ``"openai-chat"`` or ``"anthropic"``.
        store: Where masked results' originals go (default: one in memory, shared by every
            conversation of this middleware).
        retrieval: Offer the model ``cutctx_retrieve`` when it is given tools.
        keep_retrieved_for: For how many calls a retrieved original is kept as it is.
        key: A function of the ``ModelRequest`` giving its conversation's key; by default
            the graph's ``thread_id``, else a key read from the history
            (:func:`cutctx.integrations.compactor.conversation_key`).
        max_conversations: How many conversations' sessions are held.
        **session_options: :class:`cutctx.Session`'s settings (``policy``, ``trigger``,
            ``target``, ``reasoning``, ``summarize``, ...).

    The model sees the compacted messages; the agent's state keeps every message as it was.
    """

    def __init__(
        self,
        window: int,
        *,
        format: Format = "openai-chat",
        store: MaskStore | None = None,
        retrieval: bool = True,
        keep_retrieved_for: int = 3,
        key: Callable[[ModelRequest], str | None] | None = None,
        max_conversations: int | None = 1024,
        **session_options: Any,
    ) -> None:
        super().__init__()
        _check(format)
        self.format: Format = format
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
        self.retrieval = retrieval
        self.retrieval_tool: BaseTool = make_retrieval_tool(self.compactors.store)
        """``cutctx_retrieve``, as the tool the agent's tool node runs."""
        self.tools = [self.retrieval_tool] if retrieval else []
        self._key = key

    def key_of(self, request: ModelRequest) -> str | None:
        """The conversation key of ``request`` (``None``: the history's own)."""
        if self._key is not None:
            return self._key(request)
        return _thread_id()

    def compactor(self, request: ModelRequest, provider: Mapping[str, Any]) -> Compactor:
        """The compactor of ``request``'s conversation."""
        return self.compactors.for_request(provider, self.key_of(request))

    def compact(self, request: ModelRequest) -> ModelRequest:
        """``request`` with its messages (and tools) as the compactor prepares them."""
        others = [t for t in request.tools if _tool_name(t) != TOOL_NAME]
        provider = to_request(
            request.messages,
            format=self.format,
            tools=others,
            system=request.system_message,
            model=_model_name(request.model),
            tool_choice=request.tool_choice,
        )
        out = self.compactor(request, provider).prepare(provider)
        originals: list[BaseMessage] = list(request.messages)
        if request.system_message is not None:
            originals.insert(0, request.system_message)
        messages = from_request(out, format=self.format, originals=originals)
        system = request.system_message
        if system is not None and messages and messages[0] is system:
            messages = messages[1:]
        elif system is not None and messages and isinstance(messages[0], SystemMessage):
            system, messages = messages[0], messages[1:]
        tools: list[Any] = list(others)
        if any(_tool_name(t) == TOOL_NAME for t in out.get("tools") or []):
            tools.append(self.retrieval_tool)
        return request.override(
            messages=messages,  # type: ignore[arg-type]
            system_message=system,
            tools=tools,
        )

    def wrap_model_call(
        self,
        request: ModelRequest,
        handler: Callable[[ModelRequest], ModelResponse],
    ) -> ModelResponse:
        return handler(self.compact(request))

    async def awrap_model_call(
        self,
        request: ModelRequest,
        handler: Callable[[ModelRequest], Awaitable[ModelResponse]],
    ) -> ModelResponse:
        return await handler(self.compact(request))
