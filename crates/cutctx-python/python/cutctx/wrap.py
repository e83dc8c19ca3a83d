"""Compaction for the OpenAI and Anthropic SDK clients: ``wrap(client, window=...)``.

:func:`wrap` returns a stand-in for an ``openai.OpenAI``, ``openai.AsyncOpenAI``,
``anthropic.Anthropic`` or ``anthropic.AsyncAnthropic`` client (Azure, Bedrock and Vertex
clients too) whose model calls compact their request first, with one
:class:`~cutctx.integrations.compactor.Compactor` per conversation:

* ``chat.completions.create`` / ``parse`` / ``stream`` (format ``openai-chat``),
* ``responses.create`` / ``parse`` / ``stream`` (``openai-responses``; a call that continues
  a conversation the server holds, with ``previous_response_id`` or ``conversation``, is sent
  as it is),
* ``messages.create`` / ``stream`` (``anthropic``).

``with_raw_response`` and ``with_streaming_response`` of those resources compact too, and
``with_options(...)`` / ``copy(...)`` return a client wrapped alike that shares the
conversations. Everything else (``models``, ``files``, ``beta``, ...) is the client's own.
Send the conversation's whole history at every call, as without cutctx; the stand-in sends
what the conversation's session says (see :class:`cutctx.Session`).

Which conversation a call belongs to: the ``cutctx_conversation=`` argument of the call (taken
out before the request is sent), else ``conversation_id`` given to :func:`wrap`, else
:func:`~cutctx.integrations.compactor.conversation_key` of the request (its system prompt and
first user message).

**The retrieval tool.** When a request offers the model tools, the compactor adds one more,
``cutctx_retrieve``, with which the model reads back a tool result that a firing masked. Such
a call comes back to your loop like any other tool call, in the response you get; answer it
with ``wrapped.cutctx.answer(call)``, which returns the answer in the call's format (a Chat
``tool`` message, a Responses ``function_call_output`` item, an Anthropic ``tool_result``
block for the next user message), and append it as you append your own tools' results::

    client = wrap(openai.OpenAI(), window=100_000)
    while True:
        response = client.chat.completions.create(model=model, messages=messages, tools=tools)
        message = response.choices[0].message
        messages.append(message)
        if not message.tool_calls:
            break
        for call in message.tool_calls:
            if client.cutctx.is_retrieval(call):
                messages.append(client.cutctx.answer(call))
            else:
                messages.append(run_my_tool(call))

``control(wrapped)`` returns the same :class:`WrapControl` as ``wrapped.cutctx``, typed.

>>> from cutctx.wrap import wrap
>>> class Completions:
...     def create(self, **request): return request
>>> class Chat:
...     completions = Completions()
>>> class OpenAI:  # stands for openai.OpenAI here
...     chat = Chat()
...     api_key = "k"
>>> OpenAI.__module__ = "openai._client"
>>> client = wrap(OpenAI(), window=4000)
>>> client.chat.completions.create(model="m", messages=[{"role": "user", "content": "Hi"}])
{'model': 'm', 'messages': [{'role': 'user', 'content': 'Hi'}]}
>>> client.api_key
'k'
"""

from __future__ import annotations

import asyncio
import functools
import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final, Literal, TypeVar

from cutctx import _core
from cutctx.integrations.compactor import (
    Compactor,
    Compactors,
    Format,
    MaskStore,
    MemoryMaskStore,
    RetrievalResult,
    _answer,
    _call_of,
    _retrieve,
    is_retrieval_call,
)

__all__ = ["CONVERSATION_ARG", "WrapControl", "control", "wrap"]

CONVERSATION_ARG: Final = "cutctx_conversation"
"""The keyword argument of a wrapped call that names its conversation."""

_T = TypeVar("_T")

# Arguments of an SDK call that are not part of the request body.
_TRANSPORT: Final = frozenset({"extra_headers", "extra_query", "extra_body", "timeout"})
# Where each format keeps its history in a request (the core's, not a copy).
_LIST_KEY: Final[dict[str, str]] = _core.LIST_KEYS
_COMPACTED: Final = ("create", "parse", "stream")
# The views of a resource whose methods are the resource's own with another return type.
_VIEWS: Final = ("with_raw_response", "with_streaming_response")
# The client's methods that return a new client, wrapped again with the same compactors.
_CLIENT_COPIES: Final = ("with_options", "copy")


class WrapControl:
    """What a wrapped client adds, as ``wrapped.cutctx``: the compactors, one
    :class:`~cutctx.integrations.compactor.Compactors` per format sharing one mask store, and
    the answers to ``cutctx_retrieve`` calls."""

    def __init__(
        self,
        window: int,
        conversation_id: str | None,
        store: MaskStore | None,
        options: Mapping[str, Any],
    ) -> None:
        self.window: int = window
        """Each conversation's window."""
        self.conversation_id: str | None = conversation_id
        """The conversation of every call that names none (``None``: found per request)."""
        self.store: MaskStore = MemoryMaskStore() if store is None else store
        """Where the originals of masked results are kept, for every conversation."""
        self._options = dict(options)
        self._by_format: dict[str, Compactors] = {}
        self.last: Compactor | None = None
        """The compactor of the last compacted call (``last.fired``: whether it fired)."""

    def compactors(self, format: Format) -> Compactors:
        """The conversations of ``format``."""
        found = self._by_format.get(format)
        if found is None:
            found = self._by_format.setdefault(
                format, Compactors(format, self.window, store=self.store, **self._options)
            )
        return found

    def compactor(self, format: Format, request: Mapping[str, Any], key: str | None) -> Compactor:
        """The compactor of the conversation ``key`` (else the wrap's ``conversation_id``,
        else the request's own key)."""
        chosen = key if key is not None else self.conversation_id
        return self.compactors(format).for_request(request, chosen)

    def is_retrieval(self, call: Any) -> bool:
        """Whether the tool call ``call`` (an SDK object or a dict, of any format) calls
        ``cutctx_retrieve``."""
        return is_retrieval_call(call)

    def answer(self, call: Any) -> dict[str, Any]:
        """The answer to the ``cutctx_retrieve`` call ``call``, in its format: a Chat ``tool``
        message, a Responses ``function_call_output`` item, or an Anthropic ``tool_result``
        block. An unknown digest or bad arguments give an answer that says so (an Anthropic
        block then has ``is_error``). ``ValueError`` for a call of another tool."""
        return _answer(self.store, call)

    def retrieve(self, arguments: Mapping[str, Any] | str) -> RetrievalResult:
        """The answer to a ``cutctx_retrieve`` call's ``arguments``, as text."""
        return _retrieve(self.store, arguments)

    def call_format(self, call: Any) -> Format | None:
        """The format of the tool call ``call``, or ``None`` when it is not one."""
        parsed = _call_of(call)
        return None if parsed is None else parsed[0]


def _json_value(value: Any) -> Any:
    """An SDK argument as plain JSON values: pydantic models dumped as the SDK sends them,
    mappings as dicts, other iterables (tuples, generators) as lists."""
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, Mapping):
        return {str(k): _json_value(v) for k, v in value.items()}
    if isinstance(value, type):
        raise TypeError("a class is not JSON")
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return _json_value(dump(mode="json", exclude_unset=True, by_alias=True))
    if isinstance(value, Iterable) and not isinstance(value, (bytes, bytearray)):
        return [_json_value(v) for v in value]
    raise TypeError(f"{type(value).__name__} is not JSON")


def _is_sentinel(value: Any) -> bool:
    """The SDKs' ``NOT_GIVEN`` and ``omit``: an argument left out."""
    return type(value).__name__ in ("NotGiven", "Omit") and type(value).__module__.endswith(
        "._types"
    )


def _split(kwargs: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(request, aside)``: the body's JSON fields, and what goes to the SDK as it is (the
    transport arguments, values that are no JSON such as a ``response_format`` class)."""
    request: dict[str, Any] = {}
    aside: dict[str, Any] = {}
    for name, value in kwargs.items():
        if _is_sentinel(value):
            continue
        if name in _TRANSPORT:
            aside[name] = value
            continue
        try:
            plain = _json_value(value)
            json.dumps(plain)
        except (TypeError, ValueError):
            aside[name] = value
        else:
            request[name] = plain
    return request, aside


def _restore_tools(out: dict[str, Any], given: Mapping[str, Any]) -> dict[str, Any]:
    """``out`` with the caller's own tool objects where its tools are theirs unchanged: the
    SDKs' ``parse`` knows a ``pydantic_function_tool`` by the type of its ``function`` (a dict
    subclass that carries the model), which plain JSON would lose."""
    tools, originals = out.get("tools"), given.get("tools")
    if not isinstance(tools, list) or not isinstance(originals, (list, tuple)):
        return out
    restored = list(tools)
    for index, original in enumerate(originals):
        if index < len(restored) and isinstance(original, Mapping):
            try:
                same = _json_value(original) == restored[index]
            except TypeError:
                same = False
            if same:
                restored[index] = original
    return {**out, "tools": restored}


class _Endpoint:
    """A resource whose ``create``/``parse``/``stream`` compact; the rest is the resource's."""

    def __init__(self, target: Any, format: Format, control: WrapControl, is_async: bool) -> None:
        self._target = target
        self._format: Format = format
        self._control = control
        self._async = is_async

    def _prepared(self, kwargs: dict[str, Any]) -> tuple[Compactor, dict[str, Any], dict[str, Any]] | None:
        key = kwargs.pop(CONVERSATION_ARG, None)
        if key is not None and not isinstance(key, str):
            raise TypeError(f"{CONVERSATION_ARG} must be a str")
        if _LIST_KEY[self._format] not in kwargs:
            return None
        if self._format == "openai-responses" and any(
            not _is_sentinel(kwargs.get(k)) and kwargs.get(k) is not None
            for k in ("previous_response_id", "conversation")
        ):
            return None  # the history is the server's: there is nothing here to compact
        request, aside = _split(kwargs)
        if _LIST_KEY[self._format] not in request:
            return None
        compactor = self._control.compactor(self._format, request, key)
        return compactor, request, aside

    def _found(
        self, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> tuple[Compactor, dict[str, Any], dict[str, Any]] | None:
        if args:  # the SDKs' calls take keywords only: let the SDK say what is wrong
            kwargs.pop(CONVERSATION_ARG, None)
            return None
        return self._prepared(kwargs)

    def _sync(self, method: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(method)
        def call(*args: Any, **kwargs: Any) -> Any:
            found = self._found(args, kwargs)
            if found is None:
                return method(*args, **kwargs)
            compactor, request, aside = found
            out = _restore_tools(compactor.prepare(request), kwargs)
            self._control.last = compactor
            return method(**out, **aside)

        return call

    def _async_call(self, method: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(method)
        async def call(*args: Any, **kwargs: Any) -> Any:
            found = self._found(args, kwargs)
            if found is None:
                return await method(*args, **kwargs)
            compactor, request, aside = found
            # The core releases the interpreter lock; a thread keeps the event loop free.
            out = _restore_tools(await asyncio.to_thread(compactor.prepare, request), kwargs)
            self._control.last = compactor
            return await method(**out, **aside)

        return call

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._target, name)
        if name in _VIEWS:
            # An async client's streaming view returns its manager at once, as `stream` does.
            is_async = self._async and name != "with_streaming_response"
            return _Endpoint(value, self._format, self._control, is_async)
        if name not in _COMPACTED or not callable(value):
            return value
        # An async client's `stream` returns its manager at once (used with `async with`).
        if self._async and name != "stream":
            return self._async_call(value)
        return self._sync(value)

    def __repr__(self) -> str:
        return f"<cutctx {self._format} {self._target!r}>"


class _Through:
    """A part of a client whose attribute ``children`` are wrapped; the rest is its own."""

    def __init__(self, target: Any, children: Mapping[str, Callable[[Any], Any]]) -> None:
        self._target = target
        self._children = dict(children)

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._target, name)
        make = self._children.get(name)
        return value if make is None else make(value)

    def __repr__(self) -> str:
        return f"<cutctx {self._target!r}>"


class _Wrapped(_Through):
    """The stand-in :func:`wrap` returns."""

    def __init__(
        self, target: Any, children: Mapping[str, Callable[[Any], Any]], control: WrapControl
    ) -> None:
        super().__init__(target, children)
        self.cutctx: WrapControl = control
        """The compactors and the retrieval answers."""

    def __getattr__(self, name: str) -> Any:
        value = super().__getattr__(name)
        if name in _CLIENT_COPIES and callable(value):
            children, control = self._children, self.cutctx

            @functools.wraps(value)
            def copied(*args: Any, **kwargs: Any) -> Any:
                # The copy (other options, same conversations) compacts too.
                return _Wrapped(value(*args, **kwargs), children, control)

            return copied
        return value


def _sdk(client: Any) -> Literal["openai", "anthropic"]:
    package = type(client).__module__.split(".")[0]
    if package in ("openai", "anthropic"):
        return "openai" if package == "openai" else "anthropic"
    raise TypeError(
        "wrap() takes an openai.OpenAI, openai.AsyncOpenAI, anthropic.Anthropic or "
        f"anthropic.AsyncAnthropic client, not {type(client).__module__}.{type(client).__name__}"
    )


def wrap(
    client: _T,
    *,
    window: int,
    conversation_id: str | None = None,
    store: MaskStore | None = None,
    retrieval: bool = True,
    keep_retrieved_for: int = 3,
    max_conversations: int | None = 1024,
    **options: Any,
) -> _T:
    """``client`` with its model calls compacted, one session per conversation.

    Args:
        client: An OpenAI or Anthropic client, sync or async.
        window: Each conversation's whole prompt budget, in tokens.
        conversation_id: The conversation of every call that names none with
            ``cutctx_conversation=`` (default: found from each request's history).
        store: Where masked results' originals go (default: a new in-memory store).
        retrieval, keep_retrieved_for: As for
            :class:`~cutctx.integrations.compactor.Compactor`.
        max_conversations: How many conversations are held at once, per format.
        **options: :class:`cutctx.Session`'s settings (``trigger``, ``target``, ``policy``,
            ``reasoning``, ``summarize``, ``cache_breakpoints``, ...).

    Returns:
        A stand-in with the client's attributes (typed as the client), plus ``.cutctx``, the
        :class:`WrapControl`. It is not an instance of the client's class.
    """
    sdk = _sdk(client)
    if store is None:
        store = MemoryMaskStore()
    # Bad settings fail here (ValueError naming them), not at the first model call.
    Compactors(
        "openai-chat" if sdk == "openai" else "anthropic",
        window,
        store=store,
        retrieval=retrieval,
        keep_retrieved_for=keep_retrieved_for,
        max_conversations=max_conversations,
        **options,
    )
    control_ = WrapControl(
        window,
        conversation_id,
        store,
        dict(
            options,
            retrieval=retrieval,
            keep_retrieved_for=keep_retrieved_for,
            max_conversations=max_conversations,
        ),
    )
    is_async = type(client).__name__.startswith("Async")

    def endpoint(format: Format) -> Callable[[Any], Any]:
        return lambda target: _Endpoint(target, format, control_, is_async)

    children: dict[str, Callable[[Any], Any]]
    if sdk == "openai":
        children = {
            "chat": lambda chat: _Through(chat, {"completions": endpoint("openai-chat")}),
            "responses": endpoint("openai-responses"),
        }
    else:
        children = {"messages": endpoint("anthropic")}
    wrapped: Any = _Wrapped(client, children, control_)
    result: _T = wrapped
    return result


def control(wrapped: Any) -> WrapControl:
    """The :class:`WrapControl` of a client :func:`wrap` returned (``wrapped.cutctx``)."""
    found = getattr(wrapped, "cutctx", None) if isinstance(wrapped, _Wrapped) else None
    if not isinstance(found, WrapControl):
        raise TypeError("not a client cutctx.wrap() returned")
    return found
