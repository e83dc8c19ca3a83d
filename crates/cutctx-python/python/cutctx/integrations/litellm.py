"""Compaction for LiteLLM: a callback compacting each chat call, for the SDK and for the proxy.

:class:`CutctxCallback` is a LiteLLM ``CustomLogger``. Each chat request LiteLLM is about to send
(OpenAI Chat messages, format ``openai-chat``) goes through one
:class:`~cutctx.integrations.compactor.Compactor` per conversation, and what the compactor
returns is what the model is sent:

* **the proxy** calls its ``async_pre_call_hook`` with the request body and sends the body it
  returns (list the callback under ``litellm_settings.callbacks`` in the proxy's config);
* **the SDK's** ``litellm.acompletion`` calls its ``async_pre_call_deployment_hook`` with the
  call's arguments and goes on with the ones it returns (put the callback in
  ``litellm.callbacks``). The SDK's sync ``litellm.completion`` runs no hook that may change
  the request, so call :meth:`CutctxCallback.completion` instead: it compacts, then calls
  ``litellm.completion`` with the same arguments.

Send the conversation's whole history at every call, as without cutctx. A request is compacted
once: the proxy hook marks what it compacted, so the deployment hook that runs after it in the
proxy's router passes the request on as it is.

Which conversation a call belongs to: ``metadata={"cutctx_conversation": ID}`` of the call,
else ``conversation_id`` given to the callback, else
:func:`~cutctx.integrations.compactor.conversation_key` of the messages (the system prompt and
the first user message).

**The retrieval tool.** When a request offers the model tools, ``cutctx_retrieve`` is offered
too, with which the model reads back a tool result that a firing masked. Such a call comes back
in the response like any other; answer it with :meth:`CutctxCallback.answer` (a Chat ``tool``
message) and append it as you append your own tools' results. A digest the store lacks gives a
tool error result, not an exception::

    cutctx = CutctxCallback(window=100_000)
    litellm.callbacks = [cutctx]                  # acompletion, and the proxy
    response = cutctx.completion(model=model, messages=messages, tools=tools)
    for call in response.choices[0].message.tool_calls or []:
        if cutctx.is_retrieval(call):
            messages.append(cutctx.answer(call))

>>> from cutctx.integrations.litellm import CutctxCallback
>>> cutctx = CutctxCallback(window=4000)
>>> kwargs = {"model": "m", "messages": [{"role": "user", "content": "Hi"}]}
>>> cutctx.compact(kwargs)["messages"]
[{'role': 'user', 'content': 'Hi'}]
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

from litellm.integrations.custom_logger import CustomLogger

from cutctx.integrations.compactor import (
    Compactor,
    Compactors,
    MaskStore,
    MemoryMaskStore,
    RetrievalResult,
    is_retrieval_call,
)
from cutctx.wrap import _json_value

if TYPE_CHECKING:
    from litellm.caching.dual_cache import DualCache
    from litellm.types.utils import CallTypes

__all__ = ["COMPACTED_MARK", "CONVERSATION_FIELD", "CutctxCallback"]

CONVERSATION_FIELD: Final = "cutctx_conversation"
"""The ``metadata`` field of a call that names its conversation."""

COMPACTED_MARK: Final = "cutctx_compacted"
"""The ``metadata`` field set on a request already compacted (a later hook leaves it be)."""

# The call types whose request is a Chat Completions request.
_CHAT_CALLS: Final = frozenset({"completion", "acompletion"})
# The fields of the arguments that make up what the model is sent and counts against the window.
_REQUEST_FIELDS: Final = ("model", "messages", "tools", "tool_choice")
# Where LiteLLM keeps a call's metadata: the SDK's argument, the proxy's other routes' field.
_METADATA_FIELDS: Final = ("metadata", "litellm_metadata")


def _metadata_of(kwargs: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    found = [kwargs.get(name) for name in _METADATA_FIELDS]
    params = kwargs.get("litellm_params")
    if isinstance(params, Mapping):
        found += [params.get(name) for name in _METADATA_FIELDS]
    return [m for m in found if isinstance(m, Mapping)]


def _call_type_name(call_type: Any) -> str:
    """The name of a call type given as a ``CallTypes`` member or as its string value."""
    value = getattr(call_type, "value", call_type)
    return value if isinstance(value, str) else ""


class CutctxCallback(CustomLogger):
    """A LiteLLM callback compacting each chat call's messages, one session per conversation.

    Args:
        window: Each conversation's whole prompt budget, in tokens.
        conversation_id: The conversation of every call whose ``metadata`` names none
            (default: found from each request's history).
        store: Where masked results' originals go (default: a new in-memory store).
        retrieval, keep_retrieved_for: As for
            :class:`~cutctx.integrations.compactor.Compactor`.
        max_conversations: How many conversations are held at once.
        **options: :class:`cutctx.Session`'s settings (``trigger``, ``target``, ``policy``, ...).

    A bad setting raises ``ValueError`` naming it.

    >>> CutctxCallback(window=0)
    Traceback (most recent call last):
    ...
    ValueError: window must be a positive number of tokens, not 0
    """

    def __init__(
        self,
        window: int,
        *,
        conversation_id: str | None = None,
        store: MaskStore | None = None,
        retrieval: bool = True,
        keep_retrieved_for: int = 3,
        max_conversations: int | None = 1024,
        **options: Any,
    ) -> None:
        if conversation_id is not None and not isinstance(conversation_id, str):
            raise ValueError(f"conversation_id must be a str or None, not {conversation_id!r}")
        self.compactors: Compactors = Compactors(
            "openai-chat",
            window,
            store=MemoryMaskStore() if store is None else store,
            retrieval=retrieval,
            keep_retrieved_for=keep_retrieved_for,
            max_conversations=max_conversations,
            **options,
        )
        """The conversations, sharing one mask store."""
        self.conversation_id: str | None = conversation_id
        """The conversation of every call that names none (``None``: found per request)."""
        self.last: Compactor | None = None
        """The compactor of the last compacted call (``last.fired``: whether it fired)."""
        super().__init__()

    @property
    def store(self) -> MaskStore:
        """Where the originals of masked results are kept."""
        return self.compactors.store

    def _key(self, kwargs: Mapping[str, Any]) -> str | None:
        for metadata in _metadata_of(kwargs):
            key = metadata.get(CONVERSATION_FIELD)
            if key is not None:
                if not isinstance(key, str):
                    raise ValueError(f"metadata {CONVERSATION_FIELD} must be a str, not {key!r}")
                return key
        return self.conversation_id

    def compact(self, kwargs: Mapping[str, Any]) -> dict[str, Any]:
        """``kwargs`` (a chat call's arguments or a proxy request body) with its messages and
        tools as the conversation's session says, marked compacted; itself (as a new dict)
        when it has no messages or was compacted already.

        >>> cutctx = CutctxCallback(window=4000)
        >>> out = cutctx.compact({"model": "m", "messages": [{"role": "user", "content": "Hi"}],
        ...     "tools": [{"type": "function", "function": {"name": "read"}}]})
        >>> [t["function"]["name"] for t in out["tools"]], out["metadata"]
        (['read', 'cutctx_retrieve'], {'cutctx_compacted': True})
        """
        out = dict(kwargs)
        if "messages" not in kwargs or any(m.get(COMPACTED_MARK) for m in _metadata_of(kwargs)):
            return out
        request = {
            name: _json_value(kwargs[name])
            for name in _REQUEST_FIELDS
            if kwargs.get(name) is not None
        }
        compactor = self.compactors.for_request(request, self._key(kwargs))
        sent = compactor.prepare(request)
        self.last = compactor
        out["messages"] = sent["messages"]
        if "tools" in sent:
            out["tools"] = sent["tools"]
        metadata = kwargs.get("metadata")
        given = metadata if isinstance(metadata, Mapping) else {}
        out["metadata"] = {**given, COMPACTED_MARK: True}
        return out

    async def acompact(self, kwargs: Mapping[str, Any]) -> dict[str, Any]:
        """:meth:`compact` in a thread, leaving the event loop free."""
        return await asyncio.to_thread(self.compact, kwargs)

    # --- LiteLLM's hooks -------------------------------------------------------------------

    async def async_pre_call_hook(
        self,
        user_api_key_dict: Any,
        cache: DualCache,
        data: dict[str, Any],
        call_type: Any,
    ) -> dict[str, Any]:
        """The proxy's hook: the request body ``data`` to send, compacted when it is a chat
        call's."""
        if _call_type_name(call_type) not in _CHAT_CALLS:
            return data
        return await self.acompact(data)

    async def async_pre_call_deployment_hook(
        self, kwargs: dict[str, Any], call_type: CallTypes | None
    ) -> dict[str, Any] | None:
        """The SDK's hook, run by ``litellm.acompletion``: the call's arguments compacted, or
        ``None`` (go on as they are) for other calls and those compacted already."""
        if _call_type_name(call_type) not in _CHAT_CALLS:
            return None
        if any(m.get(COMPACTED_MARK) for m in _metadata_of(kwargs)):
            return None
        return await self.acompact(kwargs)

    # --- calls that compact first ------------------------------------------------------------

    def completion(self, **kwargs: Any) -> Any:
        """``litellm.completion(**kwargs)`` with the messages compacted first (the sync SDK
        call runs no hook that may change the request).

        >>> # response = cutctx.completion(model="openai/gpt-5", messages=messages, tools=tools)
        """
        import litellm

        return litellm.completion(**self.compact(kwargs))

    async def acompletion(self, **kwargs: Any) -> Any:
        """``litellm.acompletion(**kwargs)`` with the messages compacted first, for a callback
        not in ``litellm.callbacks``."""
        import litellm

        return await litellm.acompletion(**await self.acompact(kwargs))

    # --- the retrieval tool ------------------------------------------------------------------

    def is_retrieval(self, call: Any) -> bool:
        """Whether the tool call ``call`` (LiteLLM's object or a dict) calls ``cutctx_retrieve``."""
        return is_retrieval_call(_json_value(call))

    def answer(self, call: Any) -> dict[str, Any]:
        """The Chat ``tool`` message answering the ``cutctx_retrieve`` call ``call``; an unknown
        digest gives a message that says so. ``ValueError`` for a call of another tool."""
        return self.compactors.answer(_json_value(call))

    def retrieve(self, arguments: Mapping[str, Any] | str) -> RetrievalResult:
        """The answer to a ``cutctx_retrieve`` call's ``arguments``, as text."""
        return self.compactors.retrieve(arguments)
