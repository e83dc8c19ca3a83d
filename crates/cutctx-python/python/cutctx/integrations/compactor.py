"""The shared core of cutctx's framework adapters: a conversation's compactor and its mask store.

A :class:`Compactor` runs one conversation's :class:`cutctx.Session` on each request the
conversation sends, and does the three things every adapter needs around it:

* it keeps the original of each tool result the session masked in a :class:`MaskStore`, under
  the digest the stub states (``[tool result masked by cutctx] (original: N tokens,
  sha256:DIGEST)``);
* when the request offers the model tools, it adds one more, ``cutctx_retrieve``
  (:func:`retrieval_tool`), with which the model asks for such an original back; the caller's
  tool loop answers it with :meth:`Compactor.answer` (or :meth:`Compactor.retrieve`);
* it pins the calls of ``cutctx_retrieve`` answered in the last ``keep_retrieved_for`` calls,
  so a result the model just retrieved is not masked again at once.

>>> from cutctx.integrations.compactor import Compactor
>>> compactor = Compactor("openai-chat", window=4000)
>>> request = {"model": "m", "messages": [{"role": "user", "content": "Hi"}]}
>>> compactor.prepare(request) == request, compactor.fired
(True, False)

:class:`Compactors` maps conversation keys to compactors, for a front end that serves many
conversations; :func:`conversation_key` finds a key in a request's history when the caller has
no conversation id.

Requests are the providers' own JSON, as dicts: OpenAI Chat Completions (``openai-chat``),
OpenAI Responses (``openai-responses``) and Anthropic Messages (``anthropic``). Failures of the
session raise :class:`cutctx.formats.FormatCompactionError`.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from os import PathLike, fspath
from typing import Any, Final, Literal, Protocol, runtime_checkable

from cutctx import _core
from cutctx.formats import FormatCompactionError
from cutctx.session import Session

__all__ = [
    "DEFAULT_POLICY",
    "TOOL_NAME",
    "Compactor",
    "Compactors",
    "Format",
    "MaskStore",
    "MemoryMaskStore",
    "RetrievalResult",
    "SQLiteMaskStore",
    "conversation_key",
    "is_retrieval_call",
    "retrieval_tool",
    "tool_result",
]

Format = Literal["openai-chat", "openai-responses", "anthropic"]

TOOL_NAME: Final = "cutctx_retrieve"
"""The name of the retrieval tool the compactor offers the model."""

_FORMATS: Final[tuple[str, ...]] = tuple(_core.FORMATS)

# A stub ends with its figures and digest; the placeholder before them is the policy's.
_STUB: Final = re.compile(r"\(original: \d+ tokens, sha256:([0-9a-f]{64})\)\Z")
_DIGEST: Final = re.compile(r"(?:sha256:)?([0-9a-f]{64})")

# Kept under the reference's 120-character bound on literal text (its ADR-0012): the stub itself
# tells the model what it replaced, and the parameter's description says where the digest is.
_DESCRIPTION: Final = (
    "Read back the full text of a tool result that was masked to save context, by its digest."
)
_PARAMETERS: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        "digest": {
            "type": "string",
            "description": "The 64 hexadecimal characters after 'sha256:' in the stub.",
        }
    },
    "required": ["digest"],
    "additionalProperties": False,
}


def retrieval_tool(format: Format) -> dict[str, Any]:
    """The ``cutctx_retrieve`` tool's definition, as ``format``'s requests spell a tool.

    >>> retrieval_tool("openai-chat")["function"]["name"]
    'cutctx_retrieve'
    >>> sorted(retrieval_tool("openai-responses"))
    ['description', 'name', 'parameters', 'strict', 'type']
    >>> sorted(retrieval_tool("anthropic"))
    ['description', 'input_schema', 'name']
    """
    parameters = copy.deepcopy(_PARAMETERS)
    if format == "openai-chat":
        return {
            "type": "function",
            "function": {
                "name": TOOL_NAME,
                "description": _DESCRIPTION,
                "parameters": parameters,
                "strict": True,
            },
        }
    if format == "openai-responses":
        return {
            "type": "function",
            "name": TOOL_NAME,
            "description": _DESCRIPTION,
            "parameters": parameters,
            "strict": True,
        }
    if format == "anthropic":
        return {"name": TOOL_NAME, "description": _DESCRIPTION, "input_schema": parameters}
    raise ValueError(f"unknown format {format!r}: one of {', '.join(_FORMATS)}")


@runtime_checkable
class MaskStore(Protocol):
    """Where the originals of masked tool results are kept, by digest (64 lowercase hex
    characters). A digest names one text: putting it twice puts the same text.

    Any object with these two methods will do (a Redis hash, a table of your own).
    """

    def put(self, digest: str, text: str) -> None:
        """Keep ``text`` under ``digest``; once it returns, :meth:`get` finds it."""
        ...

    def get(self, digest: str) -> str | None:
        """The text kept under ``digest``, or ``None``."""
        ...


class MemoryMaskStore:
    """A :class:`MaskStore` in a dict, for one process; safe across threads.

    >>> store = MemoryMaskStore()
    >>> store.put("ab" * 32, "the original")
    >>> store.get("ab" * 32), store.get("cd" * 32), len(store)
    ('the original', None, 1)
    """

    __slots__ = ("_lock", "_texts")

    def __init__(self) -> None:
        self._texts: dict[str, str] = {}
        self._lock = threading.Lock()

    def put(self, digest: str, text: str) -> None:
        """Keep ``text`` under ``digest``."""
        with self._lock:
            self._texts[digest] = text

    def get(self, digest: str) -> str | None:
        """The text kept under ``digest``, or ``None``."""
        with self._lock:
            return self._texts.get(digest)

    def __len__(self) -> int:
        with self._lock:
            return len(self._texts)


class SQLiteMaskStore:
    """A :class:`MaskStore` in an SQLite file (one table, ``cutctx_masks``), shared by threads
    and processes; each :meth:`put` is committed before it returns.

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "masks.db")
    >>> with SQLiteMaskStore(path) as store:
    ...     store.put("ab" * 32, "the original")
    >>> SQLiteMaskStore(path).get("ab" * 32)
    'the original'
    """

    __slots__ = ("_conn", "_lock", "path")

    def __init__(self, path: str | PathLike[str]) -> None:
        self.path: str = fspath(path)
        """The database file (``":memory:"`` for one in memory, for this object alone)."""
        self._lock = threading.Lock()
        # One connection, used under the lock: sqlite3 objects may cross threads so.
        self._conn = sqlite3.connect(self.path, check_same_thread=False, timeout=30.0)
        with self._lock, self._conn:
            if self.path != ":memory:":
                self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute(
                "CREATE TABLE IF NOT EXISTS cutctx_masks "
                "(digest TEXT PRIMARY KEY NOT NULL, text TEXT NOT NULL)"
            )

    def put(self, digest: str, text: str) -> None:
        """Keep ``text`` under ``digest``, committed."""
        with self._lock, self._conn:
            self._conn.execute(
                "INSERT OR REPLACE INTO cutctx_masks (digest, text) VALUES (?, ?)",
                (digest, text),
            )

    def get(self, digest: str) -> str | None:
        """The text kept under ``digest``, or ``None``."""
        with self._lock:
            row = self._conn.execute(
                "SELECT text FROM cutctx_masks WHERE digest = ?", (digest,)
            ).fetchone()
        return None if row is None else str(row[0])

    def __len__(self) -> int:
        with self._lock:
            (count,) = self._conn.execute("SELECT COUNT(*) FROM cutctx_masks").fetchone()
        return int(count)

    def close(self) -> None:
        """Close the connection."""
        with self._lock:
            self._conn.close()

    def __enter__(self) -> SQLiteMaskStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass(frozen=True, slots=True)
class RetrievalResult:
    """What a ``cutctx_retrieve`` call answers: the original text, or an error for the model.

    Attributes:
        text: The original tool result, or what went wrong (naming the digest asked for).
        is_error: Whether ``text`` is an error.
    """

    text: str
    is_error: bool = False


def tool_result(format: Format, call_id: str, result: RetrievalResult) -> dict[str, Any]:
    """``result`` as the answer to the tool call ``call_id`` in ``format``: a Chat ``tool``
    message, a Responses ``function_call_output`` item, or an Anthropic ``tool_result`` block
    (to put in the next user message).

    >>> tool_result("openai-chat", "call_1", RetrievalResult("text"))
    {'role': 'tool', 'tool_call_id': 'call_1', 'content': 'text'}
    >>> tool_result("anthropic", "toolu_1", RetrievalResult("no such digest", True))
    {'type': 'tool_result', 'tool_use_id': 'toolu_1', 'content': 'no such digest', 'is_error': True}
    """
    if format == "openai-chat":
        return {"role": "tool", "tool_call_id": call_id, "content": result.text}
    if format == "openai-responses":
        return {"type": "function_call_output", "call_id": call_id, "output": result.text}
    if format == "anthropic":
        block: dict[str, Any] = {"type": "tool_result", "tool_use_id": call_id, "content": result.text}
        if result.is_error:
            block["is_error"] = True
        return block
    raise ValueError(f"unknown format {format!r}: one of {', '.join(_FORMATS)}")


def _retrieve(store: MaskStore, arguments: Mapping[str, Any] | str | None) -> RetrievalResult:
    """The answer to a ``cutctx_retrieve`` call with ``arguments`` (a mapping, or its JSON)."""
    if isinstance(arguments, (str, bytes)):
        try:
            arguments = json.loads(arguments or "{}")
        except ValueError:
            return RetrievalResult(
                f"{TOOL_NAME}: the arguments are not JSON; pass "
                '{"digest": "<64 hex characters>"}.',
                True,
            )
    if not isinstance(arguments, Mapping) or not isinstance(arguments.get("digest"), str):
        return RetrievalResult(
            f'{TOOL_NAME}: pass {{"digest": "<64 hex characters>"}}, the digest after '
            "'sha256:' in a masked tool result.",
            True,
        )
    asked: str = arguments["digest"]
    match = _DIGEST.fullmatch(asked.strip().lower())
    if match is None:
        return RetrievalResult(
            f"{TOOL_NAME}: {asked!r} is not a digest; pass the 64 hexadecimal characters after "
            "'sha256:' in a masked tool result.",
            True,
        )
    digest = match.group(1)
    text = store.get(digest)
    if text is None:
        return RetrievalResult(
            f"{TOOL_NAME}: no tool result with digest sha256:{digest} is stored; check the "
            "digest against the masked result.",
            True,
        )
    return RetrievalResult(text)


def _plain(value: Any) -> Any:
    """An SDK object (a pydantic model) as plain JSON values; a mapping or list as itself."""
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json", exclude_unset=True, by_alias=True)
    return value


def _call_of(call: Any) -> tuple[Format, str, str, Any] | None:
    """``(format, call_id, name, arguments)`` of a tool call given as a dict or an SDK object,
    in any of the three formats, or ``None`` when it is not a tool call."""
    c = _plain(call)
    if not isinstance(c, Mapping):
        return None
    kind = c.get("type")
    function = c.get("function")
    if isinstance(function, Mapping) and isinstance(c.get("id"), str):
        return ("openai-chat", c["id"], str(function.get("name")), function.get("arguments"))
    if kind == "function_call" and isinstance(c.get("call_id"), str):
        return ("openai-responses", c["call_id"], str(c.get("name")), c.get("arguments"))
    if kind == "tool_use" and isinstance(c.get("id"), str):
        return ("anthropic", c["id"], str(c.get("name")), c.get("input"))
    return None


def is_retrieval_call(call: Any) -> bool:
    """Whether ``call`` (a tool call of any of the three formats, a dict or an SDK object) calls
    ``cutctx_retrieve``."""
    parsed = _call_of(call)
    return parsed is not None and parsed[2] == TOOL_NAME


def _answer(store: MaskStore, call: Any) -> dict[str, Any]:
    parsed = _call_of(call)
    if parsed is None or parsed[2] != TOOL_NAME:
        raise ValueError(f"not a {TOOL_NAME} tool call: {type(call).__name__}")
    format, call_id, _, arguments = parsed
    return tool_result(format, call_id, _retrieve(store, arguments))


def _list_of(format: str, request: Mapping[str, Any] | list[Any]) -> list[Any]:
    """The message (or item) list of a request."""
    if isinstance(request, list):
        return request
    key = "input" if format == "openai-responses" else "messages"
    items = request.get(key)
    return items if isinstance(items, list) else []


def _text_of(payload: Any) -> str:
    """What a tool result says: its text, or its text parts joined by a newline (media parts
    as ``[type]``), as a turn's content reads."""
    if isinstance(payload, str):
        return payload
    if isinstance(payload, list):
        parts: list[str] = []
        for part in payload:
            if isinstance(part, Mapping) and isinstance(part.get("text"), str):
                if part["text"]:
                    parts.append(part["text"])
            elif isinstance(part, Mapping):
                parts.append(f"[{part.get('type', 'part')}]")
            elif isinstance(part, str):
                parts.append(part)
        return "\n".join(parts)
    return "" if payload is None else json.dumps(payload, ensure_ascii=False)


def _results(format: str, items: list[Any], start: int = 0) -> Iterator[tuple[int, str, Any]]:
    """``(index, call_id, payload)`` of every tool result from ``items[start:]``."""
    for index in range(start, len(items)):
        item = items[index]
        if not isinstance(item, Mapping):
            continue
        if format == "openai-chat":
            if item.get("role") == "tool" and isinstance(item.get("tool_call_id"), str):
                yield index, item["tool_call_id"], item.get("content")
        elif format == "openai-responses":
            kind = item.get("type")
            if isinstance(kind, str) and kind.endswith("_output") and isinstance(
                item.get("call_id"), str
            ):
                yield index, item["call_id"], item.get("output")
        elif item.get("role") == "user" and isinstance(item.get("content"), list):
            for block in item["content"]:
                if (
                    isinstance(block, Mapping)
                    and block.get("type") == "tool_result"
                    and isinstance(block.get("tool_use_id"), str)
                ):
                    yield index, block["tool_use_id"], block.get("content")


def _calls(format: str, items: list[Any], start: int = 0) -> Iterator[tuple[str, str]]:
    """``(call_id, name)`` of every tool call from ``items[start:]``."""
    for item in items[start:]:
        if not isinstance(item, Mapping):
            continue
        if format == "openai-chat":
            for call in item.get("tool_calls") or ():
                if isinstance(call, Mapping) and isinstance(call.get("id"), str):
                    body = call.get("function") or call.get("custom") or {}
                    name = body.get("name") if isinstance(body, Mapping) else None
                    yield call["id"], str(name)
        elif format == "openai-responses":
            if isinstance(item.get("call_id"), str) and str(item.get("type", "")).endswith(
                "_call"
            ):
                yield item["call_id"], str(item.get("name"))
        elif item.get("role") == "assistant" and isinstance(item.get("content"), list):
            for block in item["content"]:
                if (
                    isinstance(block, Mapping)
                    and block.get("type") == "tool_use"
                    and isinstance(block.get("id"), str)
                ):
                    yield block["id"], str(block.get("name"))


def _digest(text: str) -> str:
    """The digest a stub states for ``text``: SHA-256 of its canonical JSON string literal."""
    return hashlib.sha256(json.dumps(text, ensure_ascii=False).encode()).hexdigest()


def _offers_tools(request: Mapping[str, Any]) -> bool:
    """Whether the model may call a tool in answer to ``request``."""
    tools = request.get("tools")
    if not isinstance(tools, list) or not tools:
        return False
    choice = request.get("tool_choice")
    if choice == "none" or (isinstance(choice, Mapping) and choice.get("type") == "none"):
        return False
    return True


def _has_tool(format: str, tools: list[Any], name: str) -> bool:
    for tool in tools:
        if not isinstance(tool, Mapping):
            continue
        body = tool.get("function") if format == "openai-chat" else tool
        if isinstance(body, Mapping) and body.get("name") == name:
            return True
    return False


DEFAULT_POLICY: Final[str] = _core.NO_SUMMARIZER_POLICY
"""The policy of a compactor given neither ``policy`` nor ``summarize``: mask old tool results,
then drop the oldest turns (the session's own default chain also summarizes, which needs a
``summarize`` callable)."""


def _check_settings(format: Any, window: Any, store: Any, keep_retrieved_for: Any) -> None:
    """``ValueError`` for a setting that cannot work, naming it."""
    if format not in _FORMATS:
        raise ValueError(f"unknown format {format!r}: one of {', '.join(_FORMATS)}")
    if isinstance(window, bool) or not isinstance(window, int) or window <= 0:
        raise ValueError(f"window must be a positive number of tokens, not {window!r}")
    if isinstance(keep_retrieved_for, bool) or not isinstance(keep_retrieved_for, int) or (
        keep_retrieved_for < 0
    ):
        raise ValueError(
            f"keep_retrieved_for must be a non-negative integer, not {keep_retrieved_for!r}"
        )
    if store is not None and not (
        callable(getattr(store, "put", None)) and callable(getattr(store, "get", None))
    ):
        raise ValueError(
            f"store must be a MaskStore (with put and get), not {type(store).__name__}"
        )


class Compactor:
    """One conversation's compaction: a :class:`cutctx.Session`, its mask store and the
    retrieval tool.

    Args:
        format: ``"openai-chat"``, ``"openai-responses"`` or ``"anthropic"``.
        window: The whole prompt's budget, in tokens (:class:`cutctx.Session`'s ``window``).
        store: Where masked results' originals go (default: a new :class:`MemoryMaskStore`).
        retrieval: Offer the model ``cutctx_retrieve`` whenever the request offers it tools.
        keep_retrieved_for: For how many calls, the one that first sends it included, a
            ``cutctx_retrieve`` result is pinned (kept as it is by a firing).
        **session_options: :class:`cutctx.Session`'s other settings (``trigger``, ``target``,
            ``policy``, ``reasoning``, ``reserve_output``, ``summarize``, ...). Given neither
            ``policy`` nor ``summarize``, the policy is :data:`DEFAULT_POLICY`.

    A setting that cannot work (an unknown format, a window that is not a positive integer,
    ``keep_retrieved_for`` below 0, a store without ``put``/``get``, a setting the session
    refuses) raises ``ValueError`` naming it.

    Call :meth:`prepare` with the conversation's whole history before every model call and
    send what it returns. When the model calls ``cutctx_retrieve``, answer the call with
    :meth:`answer` (or :meth:`retrieve`) and go on as with any tool.

    >>> c = Compactor("anthropic", window=2000, protected_recent_turns=1,
    ...               policy='{"name": "observation_masking", "keep_recent_results": 0}')
    >>> request = {"model": "m", "max_tokens": 100, "tools": [{"name": "read",
    ...     "input_schema": {"type": "object"}}], "messages": [
    ...     {"role": "user", "content": "Read it."},
    ...     {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "read",
    ...         "input": {}}]},
    ...     {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
    ...         "content": "word " * 2000}]},
    ...     {"role": "assistant", "content": "Read."},
    ...     {"role": "user", "content": "Now?"}]}
    >>> sent = c.prepare(request)
    >>> c.fired, [t["name"] for t in sent["tools"]]
    (True, ['read', 'cutctx_retrieve'])
    >>> stub = sent["messages"][2]["content"][0]["content"]
    >>> stub.startswith("[tool result masked by cutctx] (original: ")
    True
    >>> c.retrieve({"digest": stub[-65:-1]}).text == "word " * 2000
    True
    >>> c.retrieve({"digest": "0" * 64}).is_error
    True
    """

    TOOL_NAME: Final = TOOL_NAME
    """The retrieval tool's name, ``cutctx_retrieve``."""

    def __init__(
        self,
        format: Format,
        window: int,
        *,
        store: MaskStore | None = None,
        retrieval: bool = True,
        keep_retrieved_for: int = 3,
        **session_options: Any,
    ) -> None:
        _check_settings(format, window, store, keep_retrieved_for)
        if session_options.get("policy") is None and session_options.get("summarize") is None:
            # The default chain summarizes, which needs `summarize`: without one, mask, then drop.
            session_options = dict(session_options, policy=DEFAULT_POLICY)
        self.format: Format = format
        """The requests' format."""
        try:
            self.session: Session = Session(format, window, **session_options)
        except FormatCompactionError as error:  # a bad setting: say which, as ValueError
            raise ValueError(f"bad compaction settings: {error}") from error
        """The conversation's session."""
        self.store: MaskStore = MemoryMaskStore() if store is None else store
        """Where the originals of masked results are kept."""
        self.retrieval: bool = bool(retrieval)
        """Whether ``cutctx_retrieve`` is offered."""
        self.keep_retrieved_for: int = keep_retrieved_for
        """For how many calls a retrieval's result is pinned."""
        self._lock = threading.Lock()
        self._calls = 0
        self._seen = 0  # how many items of the history the retrieval scan has read
        self._names: dict[str, str] = {}  # call id -> tool name, of the calls read so far
        self._answered: dict[tuple[str, int], int] = {}  # (call id, index) -> call number
        self._stored: set[str] = set()  # digests put by this compactor

    @property
    def fired(self) -> bool:
        """Whether the last :meth:`prepare` compacted."""
        return self.session.fired

    @property
    def notes(self) -> list[str]:
        """What the last :meth:`prepare`'s session said (:attr:`cutctx.Session.notes`)."""
        return self.session.notes

    def with_retrieval_tool(self, request: Mapping[str, Any]) -> dict[str, Any]:
        """``request`` with ``cutctx_retrieve`` added to its tools when :attr:`retrieval` is
        on and the request offers the model tools (else ``request`` itself, as a dict)."""
        out = dict(request)
        if self.retrieval and _offers_tools(request):
            tools = list(request["tools"])
            if not _has_tool(self.format, tools, TOOL_NAME):
                out["tools"] = [*tools, retrieval_tool(self.format)]
        return out

    def prepare(self, request: Mapping[str, Any]) -> dict[str, Any]:
        """The request to send for the conversation's whole history ``request``.

        The session compacts it when it must (see :class:`cutctx.Session`); the originals of
        the results it masks go to :attr:`store`; ``cutctx_retrieve`` is added to the tools
        as :meth:`with_retrieval_tool` says, and recent retrievals are pinned. ``request``
        itself is left as it was.
        """
        with self._lock:
            self._calls += 1
            full = self.with_retrieval_tool(request)
            items = _list_of(self.format, full)
            out = self.session.prepare(full, pin=self._pins(items))
            if self.session.fired:
                self._record(items, _list_of(self.format, out))
            return out

    def _pins(self, items: list[Any]) -> list[str]:
        """The call ids of the retrievals answered in the last ``keep_retrieved_for`` calls,
        reading the history's new items (all of it again when it is shorter than before)."""
        if len(items) < self._seen:  # rewound or another history: start over
            self._seen, self._names, self._answered = 0, {}, {}
        start = max(self._seen - 1, 0)
        for call_id, name in _calls(self.format, items, start):
            self._names[call_id] = name
        for index, call_id, _ in _results(self.format, items, start):
            if self._names.get(call_id) == TOOL_NAME:
                self._answered.setdefault((call_id, index), self._calls)
        self._seen = len(items)
        keep = self.keep_retrieved_for
        return sorted(
            {cid for (cid, _), first in self._answered.items() if self._calls - first < keep}
        )

    def _record(self, before: list[Any], after: list[Any]) -> None:
        """Put the original of every result masked in ``after`` (the output) into the store:
        the input's result with the same call id, whose digest the stub states."""
        stubs: list[tuple[str, str]] = []
        for _, call_id, payload in _results(self.format, after):
            if isinstance(payload, str):
                match = _STUB.search(payload)
                if match is not None and match.group(1) not in self._stored:
                    stubs.append((call_id, match.group(1)))
        if not stubs:
            return
        originals: dict[str, list[str]] = {}
        for _, call_id, payload in _results(self.format, before):
            if isinstance(payload, str) and _STUB.search(payload):
                continue  # a stub sent back is no original
            originals.setdefault(call_id, []).append(_text_of(payload))
        for call_id, digest in stubs:
            candidates = originals.get(call_id, [])
            text = next((t for t in candidates if _digest(t) == digest), None)
            if text is None and candidates:
                # Media parts or a reused call id: the result of the most recent such call.
                text = candidates[-1]
            if text is not None:
                self.store.put(digest, text)
                self._stored.add(digest)

    def retrieve(self, arguments: Mapping[str, Any] | str) -> RetrievalResult:
        """The answer to a ``cutctx_retrieve`` call with ``arguments`` (``{"digest": ...}``,
        or its JSON). A digest the store does not hold, or arguments that name none, give an
        error result that says so, never an exception."""
        return _retrieve(self.store, arguments)

    def answer(self, call: Any) -> dict[str, Any]:
        """The answer to the ``cutctx_retrieve`` tool call ``call`` (a dict or an SDK object),
        as :func:`tool_result` writes it in the call's format. Raises ``ValueError`` for a
        call of another tool."""
        return _answer(self.store, call)


def _canonical(value: Any) -> Any:
    """``value`` without ``cache_control`` marks, which clients move from call to call."""
    if isinstance(value, Mapping):
        return {k: _canonical(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_canonical(v) for v in value]
    return value


def _opening(value: Any) -> Any:
    """A system prompt or first message as its words: a message as its role and content, a
    content of text parts as their text, so that the spellings a client moves between (a
    Responses ``input`` string, then the same text as a user message; ``type: message`` or
    not; a string or one text part) read alike."""
    if isinstance(value, str):
        return {"role": "user", "content": value}
    if isinstance(value, Mapping) and "role" in value:
        return {"role": value.get("role"), "content": _opening_content(value.get("content"))}
    if isinstance(value, list) and len(value) == 1 and isinstance(value[0], Mapping) and (
        "role" in value[0]
    ):
        return _opening(value[0])
    return _opening_content(value)


def _opening_content(content: Any) -> Any:
    if isinstance(content, list) and all(
        isinstance(p, Mapping) and isinstance(p.get("text"), str) for p in content
    ):
        return "\n".join(p["text"] for p in content)
    return _canonical(content)


def conversation_key(format: Format, request: Mapping[str, Any] | list[Any]) -> str:
    """A key for the conversation ``request`` belongs to, read from its history: the SHA-256
    of the canonical JSON of the format, the system prompt (or instructions) and the first
    user message, ``cache_control`` marks left out. Every request of one conversation has the
    same key; two conversations that open alike (same system prompt, same first message)
    share it too: give those an id of your own.

    >>> a = {"messages": [{"role": "system", "content": "Be brief."},
    ...                   {"role": "user", "content": "Hi"}]}
    >>> b = {"messages": a["messages"] + [{"role": "assistant", "content": "Hello."}]}
    >>> conversation_key("openai-chat", a) == conversation_key("openai-chat", b)
    True
    >>> len(conversation_key("openai-chat", a))
    64
    """
    items = _list_of(format, request)
    system: Any = None
    first: Any = None
    if format == "openai-chat":
        system = [
            m for m in items if isinstance(m, Mapping) and m.get("role") in ("system", "developer")
        ][:1]
        first = next((m for m in items if isinstance(m, Mapping) and m.get("role") == "user"), None)
    else:
        system = (
            request.get("instructions" if format == "openai-responses" else "system")
            if isinstance(request, Mapping)
            else None
        )
        if format == "openai-responses" and isinstance(request, Mapping):
            if isinstance(request.get("input"), str):
                first = request["input"]
        if first is None:
            first = next(
                (m for m in items if isinstance(m, Mapping) and m.get("role") == "user"), None
            )
            if format == "openai-responses" and first is None:
                first = next(
                    (m for m in items if isinstance(m, Mapping) and m.get("role") == "developer"),
                    None,
                )
    doc = {"format": format, "system": _opening(system), "first_user": _opening(first)}
    text = json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


class Compactors:
    """A thread-safe map from conversation keys to their :class:`Compactor`, each made on
    first use with the same settings and one shared :class:`MaskStore`.

    Args:
        format, window, store, retrieval, keep_retrieved_for, **session_options: As for
            :class:`Compactor`; ``store`` (default: one :class:`MemoryMaskStore`) is shared.
        max_conversations: How many conversations are held; past it, the one used least
            recently is forgotten (its next request starts a new session). ``None``: no limit.

    >>> compactors = Compactors("openai-chat", window=4000)
    >>> request = {"messages": [{"role": "user", "content": "Hi"}]}
    >>> compactors.prepare(request) == request
    True
    >>> compactors.get(conversation_key("openai-chat", request)) is compactors.for_request(request)
    True
    >>> len(compactors)
    1
    """

    def __init__(
        self,
        format: Format,
        window: int,
        *,
        store: MaskStore | None = None,
        retrieval: bool = True,
        keep_retrieved_for: int = 3,
        max_conversations: int | None = 1024,
        **session_options: Any,
    ) -> None:
        if max_conversations is not None and (
            isinstance(max_conversations, bool)
            or not isinstance(max_conversations, int)
            or max_conversations < 1
        ):
            raise ValueError(
                f"max_conversations must be a positive integer or None, not {max_conversations!r}"
            )
        self.format: Format = format
        """The requests' format."""
        self.window: int = window
        """Each conversation's window."""
        self.store: MaskStore = MemoryMaskStore() if store is None else store
        """The mask store every compactor shares."""
        self.max_conversations = max_conversations
        self._options: dict[str, Any] = dict(
            session_options, retrieval=retrieval, keep_retrieved_for=keep_retrieved_for
        )
        self._lock = threading.Lock()
        self._by_key: OrderedDict[str, Compactor] = OrderedDict()
        # Bad settings fail here, not at the first request.
        Compactor(format, window, store=self.store, **self._options)

    def get(self, key: str) -> Compactor:
        """The compactor of conversation ``key``, made now if it is new."""
        with self._lock:
            compactor = self._by_key.get(key)
            if compactor is None:
                compactor = Compactor(self.format, self.window, store=self.store, **self._options)
                self._by_key[key] = compactor
                if self.max_conversations is not None:
                    while len(self._by_key) > self.max_conversations:
                        self._by_key.popitem(last=False)
            else:
                self._by_key.move_to_end(key)
            return compactor

    def for_request(self, request: Mapping[str, Any], key: str | None = None) -> Compactor:
        """The compactor of conversation ``key``, else of :func:`conversation_key`'s."""
        return self.get(conversation_key(self.format, request) if key is None else key)

    def prepare(self, request: Mapping[str, Any], key: str | None = None) -> dict[str, Any]:
        """:meth:`Compactor.prepare` of ``request`` by its conversation's compactor."""
        return self.for_request(request, key).prepare(request)

    def retrieve(self, arguments: Mapping[str, Any] | str) -> RetrievalResult:
        """:meth:`Compactor.retrieve`, from the shared store."""
        return _retrieve(self.store, arguments)

    def answer(self, call: Any) -> dict[str, Any]:
        """:meth:`Compactor.answer`, from the shared store."""
        return _answer(self.store, call)

    def discard(self, key: str) -> None:
        """Forget conversation ``key`` (its next request starts a new session)."""
        with self._lock:
            self._by_key.pop(key, None)

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return key in self._by_key

    def __len__(self) -> int:
        with self._lock:
            return len(self._by_key)
