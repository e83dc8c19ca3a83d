"""cutctx in PydanticAI agents: a capability (and history processor) for ``pydantic_ai.Agent``.

:class:`CutctxHistoryProcessor` runs one :class:`~cutctx.integrations.compactor.Compactor` per
conversation (the run's ``conversation_id``, unless given a key) before every model request. It
converts the messages PydanticAI is about to send (with the request's instructions and tool
definitions) to the provider request of ``format`` (:func:`to_request`), lets the compactor
prepare it, and converts the result back (:func:`from_request`): messages and parts the
compaction left alone are the very objects of the history, a masked tool return is a copy of its
part with the stub as content, dropped messages are gone.

Given to the agent as a capability, it changes only what the model is sent: the run's message
history (``result.all_messages()``) keeps every message whole, and between firings the model is
sent the previous messages with the new ones appended, so the provider's prompt cache keeps
serving the prefix. It also registers ``cutctx_retrieve`` (:attr:`CutctxHistoryProcessor.tools`),
a PydanticAI tool that answers with the original of a masked tool return from the mask store,
offered whenever the model is offered other tools::

    from pydantic_ai import Agent
    agent = Agent("anthropic:claude-sonnet-4-5", tools=[read_file],
                  capabilities=[CutctxHistoryProcessor(window=100_000)])

The instance is also a history processor (``(RunContext, list[ModelMessage]) -> list[ModelMessage]``)
for ``pydantic_ai.capabilities.ProcessHistory``, which writes what a processor returns into the
run's history as well: there, give the processor the agent's tools (they count in the window) and
add its ``tools`` to the agent's.

``format`` is the provider's request shape the budget is counted in: ``"anthropic"`` (default;
PydanticAI keeps Anthropic's thinking signatures, so signed thinking follows cutctx's reasoning
rule), ``"openai-chat"`` (which has no place for reasoning: it is left out of the count and kept
on the messages) or ``"openai-responses"`` (reasoning with ``encrypted_content``).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal, TypeGuard

from pydantic_ai import Tool
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.exceptions import ToolFailed
from pydantic_ai.messages import (
    ERROR_OUTCOMES,
    BinaryContent,
    CachePoint,
    DocumentUrl,
    ImageUrl,
    InstructionPart,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryFeedbackPart,
    RetryPromptPart,
    SystemPromptPart,
    TextContent,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models import ModelRequestContext
from pydantic_ai.tools import RunContext, ToolDefinition
from pydantic_ai.toolsets import FunctionToolset

from cutctx.integrations.compactor import (
    TOOL_NAME,
    Compactor,
    Compactors,
    Format,
    MaskStore,
    _retrieve,
    retrieval_tool,
)

__all__ = [
    "CutctxHistoryProcessor",
    "from_request",
    "make_retrieval_tool",
    "to_request",
    "tool_schema",
]

_FORMATS: Final = ("anthropic", "openai-chat", "openai-responses")
# Thinking signed by these providers is Anthropic's to check (a part without a provider is the
# application's own, taken as meant for the format it is counted in).
_ANTHROPIC_PROVIDERS: Final = (None, "anthropic", "bedrock")
_OPENAI_PROVIDERS: Final = (None, "openai")
_REDACTED_IDS: Final = ("redacted_thinking", "redacted_content")

ToolLike = ToolDefinition | Tool[Any] | Mapping[str, Any]
"""A tool as :func:`to_request` takes it: a ``ToolDefinition``, a ``pydantic_ai.Tool``, or a tool
definition already in the format's JSON."""

KeyFunc = Callable[[RunContext[Any]], str | None]


def _check(format: str) -> None:
    if format not in _FORMATS:
        raise ValueError(f"format {format!r} is not supported here: one of {', '.join(_FORMATS)}")


def _canon(value: Any) -> str:
    """``value``'s canonical JSON, without ``cache_control`` marks (a session may add them to a
    prefix it compacted, and PydanticAI's messages hold none)."""
    return json.dumps(_unmarked(value), sort_keys=True, ensure_ascii=False)


def _unmarked(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _unmarked(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_unmarked(v) for v in value]
    return value


# ---------------------------------------------------------------------------------------------
# Tools


def _definition(tool: ToolDefinition | Tool[Any]) -> ToolDefinition:
    return tool.tool_def if isinstance(tool, Tool) else tool


def _tool_name(tool: ToolLike) -> str | None:
    if isinstance(tool, Mapping):
        body = tool.get("function")
        name = body.get("name") if isinstance(body, Mapping) else tool.get("name")
        return name if isinstance(name, str) else None
    return _definition(tool).name


def tool_schema(tool: ToolLike, format: Format = "anthropic") -> dict[str, Any]:
    """A PydanticAI tool (a ``ToolDefinition`` or a ``Tool``) as ``format``'s request spells a tool
    definition; a mapping is taken to be one already. ``cutctx_retrieve`` is always
    :func:`cutctx.integrations.compactor.retrieval_tool`'s.

    >>> from pydantic_ai.tools import ToolDefinition
    >>> tool_schema(ToolDefinition(name="read", description="Read a file."))["input_schema"]
    {'type': 'object', 'properties': {}}
    """
    _check(format)
    if _tool_name(tool) == TOOL_NAME:
        return retrieval_tool(format)
    if isinstance(tool, Mapping):
        return dict(tool)
    td = _definition(tool)
    schema = dict(td.parameters_json_schema)
    if format == "anthropic":
        out: dict[str, Any] = {"name": td.name}
        if td.description:
            out["description"] = td.description
        out["input_schema"] = schema
        return out
    body: dict[str, Any] = {"name": td.name}
    if td.description:
        body["description"] = td.description
    body["parameters"] = schema
    if td.strict is not None:
        body["strict"] = td.strict
    if format == "openai-chat":
        return {"type": "function", "function": body}
    return {"type": "function", **body}


def make_retrieval_tool(store: MaskStore | Compactors) -> Tool[Any]:
    """``cutctx_retrieve`` as a PydanticAI tool that reads the originals from ``store`` (a
    :class:`~cutctx.integrations.compactor.MaskStore`, or the ``Compactors`` whose store it is).

    A digest the store does not hold, or arguments that name none, raise
    ``pydantic_ai.exceptions.ToolFailed``: the model reads a failed tool return saying so and the
    run goes on (no retry budget is spent, as a ``ModelRetry`` would).

    >>> from cutctx.integrations.compactor import MemoryMaskStore
    >>> make_retrieval_tool(MemoryMaskStore()).name
    'cutctx_retrieve'
    """
    masks = store.store if isinstance(store, Compactors) else store
    spec = retrieval_tool("openai-chat")["function"]

    def cutctx_retrieve(**arguments: Any) -> str:
        # The schema is the shared core's; the arguments are checked by the core, which says
        # what is wrong rather than failing validation.
        result = _retrieve(masks, arguments)
        if result.is_error:
            raise ToolFailed(result.text)
        return result.text

    return Tool.from_schema(
        cutctx_retrieve,
        name=TOOL_NAME,
        description=spec["description"],
        json_schema=spec["parameters"],
    )


# ---------------------------------------------------------------------------------------------
# What a history renders to


Ref = tuple[int, int]
"""A part of the history: (message index, part index)."""

ElementKind = Literal["result", "call", "content"]


@dataclass
class _Piece:
    """What some parts rendered to within one provider item: the item's elements they made."""

    refs: list[Ref]
    elements: list[tuple[ElementKind, str | None, Any]]
    derived: bool = False  # a tool return's files, sent beside it: the return decides its fate


@dataclass
class _Unit:
    role: str
    pieces: list[_Piece] = field(default_factory=list)
    item: dict[str, Any] = field(default_factory=dict)


@dataclass
class _Rendered:
    format: str
    units: list[_Unit]
    represented: dict[int, set[int]]  # message index -> the part indices some item sends
    system: Any = None  # Anthropic's system
    system_refs: list[Ref] = field(default_factory=list)
    instructions: str | None = None


def _text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def _media_ref(item: Any) -> str:
    """A text naming a file the format has no part for: its kind and URL (or media type)."""
    url = getattr(item, "url", None)
    kind = getattr(item, "kind", type(item).__name__)
    if isinstance(url, str):
        return f"[{kind}: {url}]"
    return f"[{kind}: {getattr(item, 'media_type', 'file')}]"


def _user_parts(content: Any, format: str) -> list[dict[str, Any]]:
    """A ``UserPromptPart``'s content items as ``format``'s content parts (files by reference:
    a URL, or the data of a ``BinaryContent``); a ``CachePoint`` makes none."""
    items = [content] if isinstance(content, str) else list(content)
    out: list[dict[str, Any]] = []
    for item in items:
        if isinstance(item, CachePoint):
            continue
        if isinstance(item, (str, TextContent)):
            text = item if isinstance(item, str) else item.content
            if text or format != "anthropic":
                out.append(
                    {"type": "input_text", "text": text} if format == "openai-responses" else _text(text)
                )
            continue
        part = _file_part(item, format)
        out.append(part if part is not None else _fallback_text(_media_ref(item), format))
    return out


def _fallback_text(text: str, format: str) -> dict[str, Any]:
    return {"type": "input_text", "text": text} if format == "openai-responses" else _text(text)


def _file_part(item: Any, format: str) -> dict[str, Any] | None:
    """A file as ``format``'s part, or ``None`` when the format has none for it."""
    if isinstance(item, ImageUrl):
        if format == "anthropic":
            return {"type": "image", "source": {"type": "url", "url": item.url}}
        if format == "openai-chat":
            return {"type": "image_url", "image_url": {"url": item.url}}
        return {"type": "input_image", "image_url": item.url, "detail": "auto"}
    if isinstance(item, DocumentUrl) and format == "anthropic":
        return {"type": "document", "source": {"type": "url", "url": item.url}}
    if isinstance(item, BinaryContent):
        if item.is_image:
            if format == "anthropic":
                return {
                    "type": "image",
                    "source": {"type": "base64", "media_type": item.media_type, "data": item.base64},
                }
            if format == "openai-chat":
                return {"type": "image_url", "image_url": {"url": item.data_uri}}
            return {"type": "input_image", "image_url": item.data_uri, "detail": "auto"}
        if item.is_document:
            if format == "anthropic":
                return {
                    "type": "document",
                    "source": {"type": "base64", "media_type": item.media_type, "data": item.base64},
                }
            name = f"{item.identifier}.{item.format}"
            if format == "openai-chat":
                return {"type": "file", "file": {"file_data": item.data_uri, "filename": name}}
            return {"type": "input_file", "file_data": item.data_uri, "filename": name}
        if item.is_audio and format == "openai-chat":
            return {"type": "input_audio", "input_audio": {"data": item.base64, "format": item.format}}
    return None


def _is_tool_answer(part: object) -> TypeGuard[ToolReturnPart | RetryPromptPart]:
    """Whether ``part`` answers a tool call: a tool return, or a retry naming its call."""
    if isinstance(part, ToolReturnPart):
        return True
    return isinstance(part, RetryPromptPart) and part.tool_name is not None


def _answer_text(part: Any, *, wrap: bool) -> str:
    """What a tool return (or a retry naming a tool) says, as text; errors wrapped as
    ``{"error": ...}`` when the format has no error channel (``wrap``)."""
    if isinstance(part, RetryPromptPart):
        return part.model_response()
    text: str = part.model_response_str(wrap_if_error=wrap)
    return text


def _is_error(part: Any) -> bool:
    return isinstance(part, RetryPromptPart) or getattr(part, "outcome", "success") in ERROR_OUTCOMES


def _files_of(part: Any) -> list[Any]:
    return list(part.files) if isinstance(part, ToolReturnPart) else []


def _prompt_text(part: Any) -> str | None:
    """The text of a request part that is neither a tool answer nor the user's prompt: a system
    prompt, a retry's feedback; ``None`` for a part no format sends."""
    if isinstance(part, SystemPromptPart):
        return part.content
    if isinstance(part, RetryFeedbackPart):
        return part.model_response()
    if isinstance(part, RetryPromptPart):
        return part.model_response()
    return None


def _render(messages: Sequence[ModelMessage], format: str, instructions: str | None) -> _Rendered:
    _check(format)
    if format == "anthropic":
        return _render_anthropic(messages, instructions)
    return _render_openai(messages, format, instructions)


def _leading_system(messages: Sequence[ModelMessage]) -> list[Ref]:
    if not messages or not isinstance(messages[0], ModelRequest):
        return []
    refs: list[Ref] = []
    for index, part in enumerate(messages[0].parts):
        if not isinstance(part, SystemPromptPart):
            break
        refs.append((0, index))
    return refs


def _render_anthropic(messages: Sequence[ModelMessage], instructions: str | None) -> _Rendered:
    lead = _leading_system(messages)
    texts = [instructions] if instructions else []
    first = messages[0] if messages else None
    for _, index in lead:
        assert isinstance(first, ModelRequest)
        prompt = first.parts[index]
        assert isinstance(prompt, SystemPromptPart)
        if prompt.content:
            texts.append(prompt.content)
    rendered = _Rendered(
        "anthropic", [], {}, "\n\n".join(texts) if texts else None, lead, instructions
    )
    for ref in lead:
        rendered.represented.setdefault(0, set()).add(ref[1])
    skip = set(lead)
    for mi, message in enumerate(messages):
        pieces: list[_Piece] = []
        role = "user" if isinstance(message, ModelRequest) else "assistant"
        for pi, part in enumerate(message.parts):
            if (mi, pi) in skip:
                continue
            piece = _anthropic_piece(part, (mi, pi))
            if piece is not None:
                pieces.append(piece)
                rendered.represented.setdefault(mi, set()).add(pi)
        if not pieces:
            continue
        units = rendered.units
        if units and units[-1].role == role:
            units[-1].pieces.extend(pieces)  # Anthropic's turns alternate: adjacent ones merge
        else:
            units.append(_Unit(role, pieces))
    for unit in rendered.units:
        if unit.role == "user":
            # Tool results lead the user turn that answers the calls.
            unit.pieces.sort(key=lambda p: 0 if p.elements[0][0] == "result" else 1)
        content = [element for piece in unit.pieces for _, _, element in piece.elements]
        unit.item = {"role": unit.role, "content": content}
    return rendered


def _anthropic_piece(part: Any, ref: Ref) -> _Piece | None:
    if _is_tool_answer(part):
        files = [f for f in (_file_part(x, "anthropic") for x in _files_of(part)) if f]
        text = _answer_text(part, wrap=False)
        content: Any = text
        if files:
            content = ([_text(text)] if text else []) + files
        block: dict[str, Any] = {
            "type": "tool_result",
            "tool_use_id": part.tool_call_id,
            "content": content,
        }
        if _is_error(part):
            block["is_error"] = True
        return _Piece([ref], [("result", part.tool_call_id, block)])
    if isinstance(part, UserPromptPart):
        blocks = _user_parts(part.content, "anthropic")
        return _Piece([ref], [("content", None, b) for b in blocks]) if blocks else None
    if isinstance(part, TextPart):
        return _Piece([ref], [("content", None, _text(part.content))]) if part.content else None
    if isinstance(part, ThinkingPart):
        if part.signature and part.provider_name in _ANTHROPIC_PROVIDERS:
            if part.id in _REDACTED_IDS:
                block = {"type": "redacted_thinking", "data": part.signature}
            else:
                block = {"type": "thinking", "thinking": part.content, "signature": part.signature}
            return _Piece([ref], [("content", None, block)])
        # Another provider's reasoning goes back as text, if it says anything.
        return _Piece([ref], [("content", None, _text(part.content))]) if part.content else None
    if isinstance(part, ToolCallPart):
        block = {
            "type": "tool_use",
            "id": part.tool_call_id,
            "name": part.tool_name,
            "input": part.args_as_dict(),
        }
        return _Piece([ref], [("call", part.tool_call_id, block)])
    prompt = _prompt_text(part)
    return _Piece([ref], [("content", None, _text(prompt))]) if prompt else None


def _role(format: str, item: Mapping[str, Any]) -> str:
    """An item's role, or for a Responses item that is no message, its kind."""
    if format == "openai-responses":
        kind = item.get("type", "message")
        if kind == "function_call":
            return "call"
        if kind == "function_call_output":
            return "result"
        if kind == "reasoning":
            return "reasoning"
    return str(item.get("role"))


class _OpenAIUnits:
    """The units of an OpenAI request (one per item), and which parts they send."""

    def __init__(self, rendered: _Rendered) -> None:
        self.rendered = rendered

    def add(self, item: dict[str, Any], *pieces: _Piece) -> None:
        self.rendered.units.append(_Unit(_role(self.rendered.format, item), list(pieces), item))
        for piece in pieces:
            if not piece.derived:
                for mi, pi in piece.refs:
                    self.rendered.represented.setdefault(mi, set()).add(pi)


def _render_openai(messages: Sequence[ModelMessage], format: str, instructions: str | None) -> _Rendered:
    chat = format == "openai-chat"
    rendered = _Rendered(format, [], {}, instructions=instructions)
    units = _OpenAIUnits(rendered)
    if instructions and chat:
        rendered.units.append(_Unit("system", [], {"role": "system", "content": instructions}))
    for mi, message in enumerate(messages):
        if isinstance(message, ModelRequest):
            _render_openai_request(message, mi, format, units)
        elif chat:
            _render_chat_response(message, mi, units)
        else:
            _render_responses_response(message, mi, units)
    return rendered


def _render_openai_request(message: ModelRequest, mi: int, format: str, units: _OpenAIUnits) -> None:
    chat = format == "openai-chat"
    answers: list[tuple[dict[str, Any], _Piece]] = []
    files: list[tuple[dict[str, Any], _Piece]] = []
    others: list[tuple[dict[str, Any], _Piece]] = []
    for pi, part in enumerate(message.parts):
        ref = (mi, pi)
        item: dict[str, Any]
        if _is_tool_answer(part):
            text = _answer_text(part, wrap=True)
            if chat:
                item = {"role": "tool", "tool_call_id": part.tool_call_id, "content": text}
            else:
                item = {"type": "function_call_output", "call_id": part.tool_call_id, "output": text}
            answers.append((item, _Piece([ref], [("result", part.tool_call_id, item)])))
            attached = _files_of(part)
            if attached:
                # Tool outputs are text there: the files follow as the user's, as providers take them.
                user = {"role": "user", "content": _user_parts(attached, format)}
                files.append((user, _Piece([ref], [("content", None, user)], derived=True)))
        elif isinstance(part, UserPromptPart):
            content: Any = part.content
            if not isinstance(content, str):
                content = _user_parts(content, format)
            item = {"role": "user", "content": content}
            others.append((item, _Piece([ref], [("content", None, item)])))
        else:
            prompt = _prompt_text(part)
            if prompt is None:
                continue
            role = "system" if isinstance(part, SystemPromptPart) else "user"
            item = {"role": role, "content": prompt}
            others.append((item, _Piece([ref], [("content", None, item)])))
    # Tool results first: they answer the calls of the turn before.
    for item, piece in [*answers, *files, *others]:
        units.add(item, piece)


def _render_chat_response(message: ModelResponse, mi: int, units: _OpenAIUnits) -> None:
    texts = [(pi, p.content) for pi, p in enumerate(message.parts) if isinstance(p, TextPart) and p.content]
    calls = [(pi, p) for pi, p in enumerate(message.parts) if isinstance(p, ToolCallPart)]
    if not texts and not calls:
        return
    text = "\n\n".join(t for _, t in texts)
    item: dict[str, Any] = {"role": "assistant", "content": text or None}
    pieces: list[_Piece] = []
    if texts:
        pieces.append(_Piece([(mi, pi) for pi, _ in texts], [("content", None, text)]))
    if calls:
        item["tool_calls"] = []
        for pi, call in calls:
            entry = {
                "id": call.tool_call_id,
                "type": "function",
                "function": {"name": call.tool_name, "arguments": call.args_as_json_str()},
            }
            item["tool_calls"].append(entry)
            pieces.append(_Piece([(mi, pi)], [("call", call.tool_call_id, entry)]))
    units.add(item, *pieces)


def _render_responses_response(message: ModelResponse, mi: int, units: _OpenAIUnits) -> None:
    for pi, part in enumerate(message.parts):
        ref = (mi, pi)
        if isinstance(part, TextPart) and part.content:
            item: dict[str, Any] = {"role": "assistant", "content": part.content}
            units.add(item, _Piece([ref], [("content", None, item)]))
        elif isinstance(part, ThinkingPart):
            if part.signature and part.provider_name in _OPENAI_PROVIDERS:
                item = {"type": "reasoning"}
                if part.id:
                    item["id"] = part.id
                item["summary"] = (
                    [{"type": "summary_text", "text": part.content}] if part.content else []
                )
                item["encrypted_content"] = part.signature
                units.add(item, _Piece([ref], [("content", None, item)]))
        elif isinstance(part, ToolCallPart):
            item = {
                "type": "function_call",
                "call_id": part.tool_call_id,
                "name": part.tool_name,
                "arguments": part.args_as_json_str(),
            }
            units.add(item, _Piece([ref], [("call", part.tool_call_id, item)]))


def _list_key(format: str) -> str:
    return "input" if format == "openai-responses" else "messages"


def to_request(
    messages: Sequence[ModelMessage],
    *,
    format: Format = "anthropic",
    tools: Sequence[ToolLike] = (),
    instructions: str | None = None,
    model: str = "pydantic-ai",
    tool_choice: Literal["none"] | None = None,
) -> dict[str, Any]:
    """The provider request (``format``'s JSON, as a dict) that sends ``messages``.

    ``instructions`` go in Anthropic's ``system`` (with the system prompts that open the
    history), Responses' ``instructions``, or a first Chat ``system`` message; ``tools`` become
    the request's tool definitions (:func:`tool_schema`). Tool calls and returns keep their ids
    (a failed return is an Anthropic ``is_error`` result, ``{"error": ...}`` elsewhere, as
    PydanticAI sends them), user prompts their text and files (by URL, or a ``BinaryContent``'s
    data), signed thinking is an Anthropic ``thinking`` block or a Responses ``reasoning`` item.
    What the format has no place for (reasoning in Chat Completions, native tools' parts) is
    left out.

    >>> from pydantic_ai.messages import ModelRequest
    >>> to_request([ModelRequest.user_text_prompt("Hi")], instructions="Be brief.", model="m")
    {'model': 'm', 'system': 'Be brief.', 'messages': [{'role': 'user', 'content': [{'type': 'text', 'text': 'Hi'}]}]}
    """
    rendered = _render(messages, format, instructions)
    return _request_of(rendered, tools, model, tool_choice)


def _request_of(
    rendered: _Rendered, tools: Sequence[ToolLike], model: str, tool_choice: str | None
) -> dict[str, Any]:
    format = rendered.format
    request: dict[str, Any] = {"model": model}
    if format == "anthropic" and rendered.system is not None:
        request["system"] = rendered.system
    if format == "openai-responses" and rendered.instructions:
        request["instructions"] = rendered.instructions
    request[_list_key(format)] = [unit.item for unit in rendered.units]
    if tools:
        request["tools"] = [tool_schema(t, format) for t in tools]  # type: ignore[arg-type]
    if tool_choice == "none":
        request["tool_choice"] = {"type": "none"} if format == "anthropic" else "none"
    return request


# ---------------------------------------------------------------------------------------------
# A request back to messages


Element = tuple[ElementKind, str | None, Any]


def _elements(format: str, item: Mapping[str, Any]) -> list[Element]:
    """The parts of an item a part of the history may have made: tool results, tool calls and
    content, with their call ids."""
    if format == "anthropic":
        content = item.get("content")
        if isinstance(content, str):
            return [("content", None, _text(content))] if content else []
        out: list[Element] = []
        for block in content if isinstance(content, list) else []:
            kind = block.get("type") if isinstance(block, Mapping) else None
            if kind == "tool_result":
                out.append(("result", str(block.get("tool_use_id")), block))
            elif kind == "tool_use":
                out.append(("call", str(block.get("id")), block))
            else:
                out.append(("content", None, block))
        return out
    if format == "openai-chat":
        role = item.get("role")
        if role == "tool":
            return [("result", str(item.get("tool_call_id")), item)]
        if role == "assistant":
            out = []
            text = _flat_text(item.get("content"))
            if text:
                out.append(("content", None, text))
            for call in item.get("tool_calls") or []:
                if isinstance(call, Mapping):
                    out.append(("call", str(call.get("id")), call))
            return out
        return [("content", None, item)]
    role = _role(format, item)
    if role == "result":
        return [("result", str(item.get("call_id")), item)]
    if role == "call":
        return [("call", str(item.get("call_id")), item)]
    return [("content", None, item)]


def _flat_text(content: Any) -> str:
    """A content's text: a string as itself, text parts joined by newlines."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(p["text"]) for p in content if isinstance(p, Mapping) and isinstance(p.get("text"), str)
        )
    return "" if content is None else json.dumps(content, ensure_ascii=False)


def _identity(format: str, item: Mapping[str, Any]) -> tuple[str, ...]:
    """What names an item across a compaction: its role and the call ids it holds."""
    ids = sorted(str(e[1]) for e in _elements(format, item) if e[0] != "content")
    return (_role(format, item), *ids) if ids else ()


def _payload_text(format: str, value: Mapping[str, Any]) -> str:
    """What a tool result element says, as text."""
    if format == "openai-responses":
        return _flat_text(value.get("output"))
    return _flat_text(value.get("content"))


def _call_args(format: str, value: Mapping[str, Any]) -> Any:
    if format == "anthropic":
        return value.get("input")
    raw = value["function"].get("arguments") if format == "openai-chat" else value.get("arguments")
    return raw if isinstance(raw, str) else json.dumps(raw, ensure_ascii=False)


def _call_name(format: str, value: Mapping[str, Any]) -> str:
    name = value["function"].get("name") if format == "openai-chat" else value.get("name")
    return str(name)


def _user_content_back(content: Any, format: str) -> str | list[Any]:
    """A user content of ``format`` as a ``UserPromptPart``'s content (text, and images and
    documents by URL)."""
    if isinstance(content, str):
        return content
    out: list[Any] = []
    for part in content if isinstance(content, list) else []:
        if not isinstance(part, Mapping):
            continue
        if isinstance(part.get("text"), str):
            out.append(part["text"])
            continue
        url: Any = None
        if part.get("type") == "image_url" and isinstance(part.get("image_url"), Mapping):
            url = part["image_url"].get("url")
        elif part.get("type") == "input_image":
            url = part.get("image_url")
        elif part.get("type") in ("image", "document") and isinstance(part.get("source"), Mapping):
            source = part["source"]
            if source.get("type") == "url":
                url = source.get("url")
            elif source.get("type") == "base64":
                url = f"data:{source.get('media_type')};base64,{source.get('data')}"
        if isinstance(url, str) and url.startswith("data:"):
            out.append(BinaryContent.from_data_uri(url))
        elif isinstance(url, str):
            out.append(DocumentUrl(url) if part.get("type") == "document" else ImageUrl(url))
        else:
            out.append(json.dumps(part, ensure_ascii=False))
    if all(isinstance(p, str) for p in out):
        return "\n".join(out)
    return out


def _new_parts(format: str, role: str, element: Element, names: Mapping[str, str]) -> list[Any]:
    """The PydanticAI parts that send ``element`` of an item with ``role``, made anew (an item
    the compaction wrote, such as a summary, or a changed part)."""
    kind, call_id, value = element
    if kind == "result":
        assert call_id is not None
        failed = format == "anthropic" and bool(value.get("is_error"))
        return [
            ToolReturnPart(
                tool_name=names.get(call_id, "unknown"),
                content=_payload_text(format, value),
                tool_call_id=call_id,
                outcome="failed" if failed else "success",
            )
        ]
    if kind == "call":
        assert call_id is not None
        return [ToolCallPart(_call_name(format, value), _call_args(format, value), tool_call_id=call_id)]
    assistant = role in ("assistant", "reasoning")
    if format == "anthropic":
        block_type = value.get("type")
        if block_type == "thinking":
            return [
                ThinkingPart(
                    str(value.get("thinking", "")),
                    signature=value.get("signature"),
                    provider_name="anthropic",
                )
            ]
        if block_type == "redacted_thinking":
            return [
                ThinkingPart("", id="redacted_thinking", signature=value.get("data"), provider_name="anthropic")
            ]
        if assistant:
            return [TextPart(_flat_text([value]))]
        return [UserPromptPart(_user_content_back([value], format))]
    if format == "openai-chat" and isinstance(value, str):
        return [TextPart(value)]
    item_role = value.get("role")
    if format == "openai-responses" and value.get("type") == "reasoning":
        summary = "\n".join(
            str(s.get("text", "")) for s in value.get("summary") or [] if isinstance(s, Mapping)
        )
        return [
            ThinkingPart(
                summary,
                id=value.get("id"),
                signature=value.get("encrypted_content"),
                provider_name="openai",
            )
        ]
    if item_role == "assistant":
        return [TextPart(_flat_text(value.get("content")))]
    if item_role in ("system", "developer"):
        return [SystemPromptPart(_flat_text(value.get("content")))]
    return [UserPromptPart(_user_content_back(value.get("content"), format))]


_SortKey = tuple[int, int, int]


class _Restorer:
    """Maps a compacted request back onto the history it was rendered from."""

    def __init__(self, rendered: _Rendered, originals: Sequence[ModelMessage]) -> None:
        self.r = rendered
        self.originals = originals
        self.fate: dict[Ref, Any] = {}  # a part sent: itself, or its changed copy
        self.new_parts: dict[int, list[tuple[_SortKey, Any]]] = {}
        self.names: dict[str, str] = {
            p.tool_call_id: p.tool_name
            for m in originals
            if isinstance(m, ModelResponse)
            for p in m.parts
            if isinstance(p, ToolCallPart)
        }
        self._seq = 0

    def part(self, ref: Ref) -> Any:
        return self.originals[ref[0]].parts[ref[1]]

    def keep(self, piece: _Piece) -> None:
        if not piece.derived:
            for ref in piece.refs:
                self.fate[ref] = self.part(ref)

    def restore(self, items: list[Any]) -> list[ModelMessage]:
        fmt = self.r.format
        units = self.r.units
        canon = [_canon(u.item) for u in units]
        idents = [_identity(fmt, u.item) for u in units]
        for ref in self.r.system_refs:
            self.fate[ref] = self.part(ref)
        events: list[int | Mapping[str, Any]] = []
        j = 0
        for item in items:
            if not isinstance(item, Mapping):
                continue
            text = _canon(item)
            hit = next((k for k in range(j, len(units)) if canon[k] == text), None)
            if hit is not None:
                for piece in units[hit].pieces:
                    self.keep(piece)
            else:
                hit = self._match(item, j, idents)
                if hit is not None:
                    self._rebuild(item, units[hit])
            if hit is None:
                events.append(item)
            else:
                events.append(hit)
                j = hit + 1
        return self._emit(events)

    def _match(self, item: Mapping[str, Any], start: int, idents: list[tuple[str, ...]]) -> int | None:
        """The unit ``item`` is a changed version of: the same role and call ids (or some of
        them), else the next of its role whose elements hold all of ``item``'s."""
        fmt = self.r.format
        units = self.r.units
        ident = _identity(fmt, item)
        if ident:
            for k in range(start, len(units)):
                if idents[k] == ident:
                    return k
            for k in range(start, len(units)):
                if idents[k] and idents[k][0] == ident[0] and set(ident[1:]) <= set(idents[k][1:]):
                    return k
            return None
        wanted = [_canon(e[2]) for e in _elements(fmt, item)]
        if not wanted:
            return None
        role = _role(fmt, item)
        for k in range(start, len(units)):
            have = {_canon(e[2]) for p in units[k].pieces for e in p.elements}
            if units[k].role == role and all(w in have for w in wanted):
                return k
        return None

    def _rebuild(self, item: Mapping[str, Any], unit: _Unit) -> None:
        fmt = self.r.format
        found = _elements(fmt, item)
        used = [False] * len(found)
        owner: list[Ref | None] = [None] * len(found)
        pos = 0
        for piece in unit.pieces:
            if piece.derived:
                continue
            kind, call_id, value = piece.elements[0]
            if kind != "content":
                index = next(
                    (i for i, e in enumerate(found) if not used[i] and e[0] == kind and e[1] == call_id),
                    None,
                )
                if index is None:
                    continue  # dropped
                used[index], owner[index] = True, piece.refs[-1]
                ref = piece.refs[0]
                if _canon(found[index][2]) == _canon(value):
                    self.fate[ref] = self.part(ref)
                else:
                    self.fate[ref] = self._changed(self.part(ref), kind, found[index][2])
                continue
            want = [_canon(e[2]) for e in piece.elements]
            at = next(
                (
                    s
                    for s in range(pos, len(found) - len(want) + 1)
                    if all(
                        not used[s + t] and found[s + t][0] == "content" and _canon(found[s + t][2]) == w
                        for t, w in enumerate(want)
                    )
                ),
                None,
            )
            if at is None:
                continue  # dropped (as reasoning a firing invalidated)
            for t in range(len(want)):
                used[at + t], owner[at + t] = True, piece.refs[-1]
            pos = at + len(want)
            self.keep(piece)
        first = next((p.refs[0] for p in unit.pieces if not p.derived), None)
        anchor: Ref | None = None
        for index, element in enumerate(found):
            if used[index]:
                anchor = owner[index]
                continue
            if anchor is not None:
                mi, key = anchor[0], (anchor[1], 1, self._seq)
            elif first is not None:
                mi, key = first[0], (first[1], -1, self._seq)
            else:
                continue
            self._seq += 1
            for part in _new_parts(fmt, unit.role, element, self.names):
                self.new_parts.setdefault(mi, []).append((key, part))

    def _changed(self, part: Any, kind: ElementKind, value: Mapping[str, Any]) -> Any:
        """``part`` as ``value`` changed it: a tool return with the new content (a stub), a
        call with new arguments."""
        if kind == "result":
            return dataclasses.replace(part, content=_payload_text(self.r.format, value))
        return dataclasses.replace(part, args=_call_args(self.r.format, value))

    def _assemble(self, mi: int) -> ModelMessage | None:
        message = self.originals[mi]
        sent = self.r.represented.get(mi, set())
        entries: list[tuple[_SortKey, Any]] = []
        for pi, part in enumerate(message.parts):
            if pi not in sent:
                entries.append(((pi, 0, 0), part))  # a part no format sends stays with its message
            elif (mi, pi) in self.fate:
                entries.append(((pi, 0, 0), self.fate[(mi, pi)]))
        extra = self.new_parts.get(mi, [])
        if not extra and not any((mi, pi) in self.fate for pi in sent):
            return None
        entries.extend(extra)
        entries.sort(key=lambda e: e[0])
        parts = [p for _, p in entries]
        if len(parts) == len(message.parts) and all(a is b for a, b in zip(parts, message.parts)):
            return message
        if isinstance(message, ModelRequest):
            return dataclasses.replace(message, parts=parts)
        return dataclasses.replace(message, parts=parts)

    def _emit(self, events: list[int | Mapping[str, Any]]) -> list[ModelMessage]:
        out: list[ModelMessage] = []
        done: set[int] = set()
        unsent = [mi for mi in range(len(self.originals)) if not self.r.represented.get(mi)]
        cursor = 0

        def emit(mi: int) -> None:
            nonlocal cursor
            if mi in done:
                return
            # A message nothing of which is sent keeps its place before the next one kept.
            while cursor < len(unsent) and unsent[cursor] < mi:
                out.append(self.originals[unsent[cursor]])
                done.add(unsent[cursor])
                cursor += 1
            done.add(mi)
            message = self._assemble(mi)
            if message is not None:
                out.append(message)

        if self.r.system_refs:
            emit(0)
        for event in events:
            if isinstance(event, int):
                for mi in sorted({ref[0] for p in self.r.units[event].pieces for ref in p.refs}):
                    emit(mi)
                continue
            fmt = self.r.format
            role = _role(fmt, event)
            parts = [
                part for e in _elements(fmt, event) for part in _new_parts(fmt, role, e, self.names)
            ]
            if parts:
                response = role in ("assistant", "call", "reasoning")
                out.append(ModelResponse(parts=parts) if response else ModelRequest(parts=parts))
        for mi in unsent[cursor:]:
            if mi not in done:
                out.append(self.originals[mi])
        return out


def from_request(
    request: Mapping[str, Any],
    *,
    format: Format = "anthropic",
    originals: Sequence[ModelMessage] = (),
    instructions: str | None = None,
) -> list[ModelMessage]:
    """The PydanticAI messages that send ``request`` (``format``'s JSON), the inverse of
    :func:`to_request` over ``originals`` (the messages, and ``instructions``, the request was
    made from).

    A message none of whose parts changed is that very message; one some of whose parts cutctx
    changed or dropped is a copy (``dataclasses.replace``) holding the same part objects for the
    rest: a masked tool return is a copy of its part with the stub as content, thinking a firing
    invalidated is left out. Messages dropped whole are gone; one the compaction wrote (a
    summary) is a new message. Parts the format does not send (native tools' parts, reasoning in
    Chat Completions) stay with their message.

    >>> from pydantic_ai.messages import ModelRequest
    >>> hi = ModelRequest.user_text_prompt("Hi")
    >>> from_request(to_request([hi]), originals=[hi])[0] is hi
    True
    """
    rendered = _render(originals, format, instructions)
    items = request.get(_list_key(format))
    if isinstance(items, str):
        items = [{"role": "user", "content": items}]
    return _Restorer(rendered, originals).restore(list(items or []))


# ---------------------------------------------------------------------------------------------
# The capability


def _instructions_of(request_context: ModelRequestContext, messages: Sequence[ModelMessage]) -> str | None:
    """The instructions the request sends ahead of its messages."""
    params = request_context.model_request_parameters
    if params.instruction_parts is not None:
        parts = [p for p in params.instruction_parts if params.instruction_visibility_of(p) == "prefix"]
        return InstructionPart.join(parts) if parts else None
    return _recorded_instructions(messages)


def _recorded_instructions(messages: Sequence[ModelMessage]) -> str | None:
    """The instructions the history's last request recorded."""
    for message in reversed(messages):
        if isinstance(message, ModelRequest) and message.instructions is not None:
            return message.instructions
    return None


class CutctxHistoryProcessor(AbstractCapability[Any]):
    """Compacts what a PydanticAI agent sends its model, one session per conversation.

    Args:
        window: The whole prompt's budget, in tokens (instructions, tools and messages).
        format: The request shape counted and compacted: ``"anthropic"``, ``"openai-chat"`` or
            ``"openai-responses"``.
        tools: Tools counted in the window besides those of the request (as a capability it reads
            the request's own; as a history processor, the agent's tool manager's, so give the
            output tools and any others here).
        store: Where masked results' originals go (default: one in memory, shared by every
            conversation of this processor).
        retrieval: Offer the model ``cutctx_retrieve`` when it is offered other tools.
        keep_retrieved_for: For how many calls a retrieved original is kept as it is.
        key: The conversation's key, or a function of the ``RunContext`` giving it (``None``: the
            default); by default the run's ``conversation_id``, else a key read from the history
            (:func:`cutctx.integrations.compactor.conversation_key`).
        max_conversations: How many conversations' sessions are held.
        model: The ``model`` of the requests counted (a label; it costs nothing).
        **session_options: :class:`cutctx.Session`'s settings (``policy``, ``trigger``,
            ``target``, ``reasoning``, ``summarize``, ...).

    >>> from pydantic_ai import Agent
    >>> from pydantic_ai.models.test import TestModel
    >>> processor = CutctxHistoryProcessor(window=50_000)
    >>> agent = Agent(TestModel(), capabilities=[processor])
    >>> agent.run_sync("Hi").output
    'success (no tool calls)'

    As a capability (``Agent(capabilities=[processor])``), the model is sent the compacted
    messages and the run's history keeps every message whole. As a history processor
    (``ProcessHistory(processor)``, adding ``processor.tools`` to the agent's tools), PydanticAI
    writes the compacted messages into the run's history too.
    """

    def __init__(
        self,
        window: int,
        *,
        format: Format = "anthropic",
        tools: Sequence[ToolLike] = (),
        store: MaskStore | None = None,
        retrieval: bool = True,
        keep_retrieved_for: int = 3,
        key: str | KeyFunc | None = None,
        max_conversations: int | None = 1024,
        model: str = "pydantic-ai",
        **session_options: Any,
    ) -> None:
        _check(format)
        if key is not None and not (isinstance(key, str) or callable(key)):
            raise ValueError(f"key must be a string, a function of the RunContext or None, not {key!r}")
        for tool in tools:
            # Caught here rather than on the first model request, deep inside a run.
            if not isinstance(tool, (ToolDefinition, Tool, Mapping)) or _tool_name(tool) is None:
                raise ValueError(f"tools must hold ToolDefinitions, Tools or named tool JSON, not {tool!r}")
        if not isinstance(model, str):
            raise ValueError(f"model must be a string, not {model!r}")
        self.format: Format = format
        """The request shape counted and compacted."""
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
        self.retrieval = bool(retrieval)
        """Whether ``cutctx_retrieve`` is offered."""
        self.retrieval_tool: Tool[Any] = make_retrieval_tool(self.compactors)
        """``cutctx_retrieve``, the tool the agent runs for the model's retrievals."""
        self.tools: list[Tool[Any]] = [self.retrieval_tool] if retrieval else []
        """The tools to add to the agent's when the processor is used as a history processor
        (a capability registers them itself)."""
        self.extra_tools: list[ToolLike] = list(tools)
        """The tools counted in the window besides the request's own."""
        self.model = model
        self._key = key

    @classmethod
    def get_serialization_name(cls) -> str | None:
        return None  # holds a store and callables: not built from an agent spec

    def key_of(self, ctx: RunContext[Any] | None) -> str | None:
        """The conversation key of the run ``ctx`` (``None``: the history's own)."""
        if isinstance(self._key, str):
            return self._key
        if self._key is not None and ctx is not None:
            return self._key(ctx)
        return None if ctx is None else ctx.conversation_id

    def compactor(self, ctx: RunContext[Any] | None, request: Mapping[str, Any]) -> Compactor:
        """The compactor of the conversation of ``ctx`` (or of ``request``'s history)."""
        return self.compactors.for_request(request, self.key_of(ctx))

    def process(
        self,
        messages: Sequence[ModelMessage],
        *,
        tools: Sequence[ToolLike] = (),
        instructions: str | None = None,
        ctx: RunContext[Any] | None = None,
    ) -> list[ModelMessage]:
        """The messages to send for the history ``messages``, sent with ``instructions`` and
        ``tools`` (and the processor's own ``tools=``): the conversation's compactor prepares
        the request they make, converted back to the history's messages."""
        counted: dict[str, ToolLike] = {}
        for tool in [*tools, *self.extra_tools]:
            name = _tool_name(tool)
            if name is not None and name != TOOL_NAME:
                counted.setdefault(name, tool)
        rendered = _render(messages, self.format, instructions)
        request = _request_of(rendered, list(counted.values()), self.model, None)
        compactor = self.compactor(ctx, request)
        out = compactor.prepare(request)
        key = _list_key(self.format)
        if not compactor.fired and _canon(out.get(key)) == _canon(request[key]):
            return list(messages)  # sent as it is
        return _Restorer(rendered, messages).restore(list(out.get(key) or []))

    def __call__(self, ctx: RunContext[Any], messages: list[ModelMessage]) -> list[ModelMessage]:
        """The history processor: ``messages`` as :meth:`process` compacts them, counting the
        tools of the run's tool manager."""
        tools: list[ToolLike] = []
        manager = ctx.tool_manager
        if manager is not None:
            tools.extend(manager.tool_defs)
        return self.process(messages, tools=tools, instructions=_recorded_instructions(messages), ctx=ctx)

    # The capability's hooks.

    def get_toolset(self) -> FunctionToolset[Any] | None:
        return FunctionToolset(self.tools) if self.tools else None

    async def prepare_tools(
        self, ctx: RunContext[Any], tool_defs: list[ToolDefinition]
    ) -> list[ToolDefinition]:
        # Offered only beside other tools: alone, the model has no tool results to read back.
        if all(t.name == TOOL_NAME for t in tool_defs):
            return [t for t in tool_defs if t.name != TOOL_NAME]
        return tool_defs

    async def before_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        params = request_context.model_request_parameters
        messages = list(request_context.messages)
        # A new list: what the model is sent changes, the run's history does not.
        request_context.messages = self.process(
            messages,
            tools=[*params.function_tools, *params.output_tools],
            instructions=_instructions_of(request_context, messages),
            ctx=ctx,
        )
        return request_context
