"""A compaction session held in memory: ``cutctx session`` for an agent loop in Python.

Call :meth:`Session.prepare` before every model call with the whole history, as the client
would send it; it returns the request to send. The session fires only when the request would
cross ``trigger × window``, then compacts once, down to the untouchable part plus ``target`` of
the room above it; between firings it sends the previous request with the new messages
appended, byte for byte, so the provider's prompt cache keeps serving the prefix. The calls are
those of ``cutctx session`` with its state kept here rather than in a file: the same requests
give the same bytes. :meth:`Session.state` and :meth:`Session.from_state` persist and restore
it (the document ``cutctx session --state`` writes).

>>> from cutctx.session import Session
>>> session = Session("openai-chat", window=1000, policy="drop_oldest")
>>> history = {"model": "m", "messages": [{"role": "user", "content": "Hi"}]}
>>> session.prepare(history) == history
True
>>> session.fired
False

An agent loop that keeps its history itself can hand over only what it appended since the
last call: :meth:`Session.prepare_appended` costs time in proportion to those messages, not to
the history, until a call must fire, and gives what :meth:`Session.prepare` would.

>>> reply = {"role": "assistant", "content": "Hello."}
>>> sent = session.prepare_appended([reply, {"role": "user", "content": "Bye"}])
>>> [m["content"] for m in sent["messages"]]
['Hi', 'Hello.', 'Bye']

A session may be shared between threads: its calls are serialized, and the interpreter lock is
released while the Rust core works. Failures raise
:class:`cutctx.formats.FormatCompactionError` with the command's stable code.

Given an async ``summarize`` (a coroutine function), the session summarizes ahead in an
asyncio loop: :meth:`Session.aprepare` starts the summary as a task once a request reaches
``summary_ahead`` (default 0.8) of the trigger, the conversation going on meanwhile, and the
call that crosses the trigger swaps it in without waiting. The summarizer is given
``{"format", "request", "covered", "instruction"}``: ``request`` is what to send to the model
(the request exactly as last sent plus the summarizing instruction, so it reads the
provider's cache). A summary that failed or is not ready yet never fails a call: the firing
compacts with the policy (masking, then dropping) and says so in :attr:`Session.notes`.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import threading
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from typing import Any, Literal, overload

from cutctx import _core as _core_module
from cutctx._core import session as _core

__all__ = ["Session"]

Format = Literal["openai-chat", "openai-responses", "anthropic"]
Reasoning = Literal["strip", "keep", "refuse"]
Summarize = Callable[[dict[str, Any]], str]
SummarizeAsync = Callable[[dict[str, Any]], Awaitable[str]]

# Where each format keeps its history in a request (the core's, not a copy).
_LIST_KEY: dict[str, str] = _core_module.LIST_KEYS


class Session:
    """One conversation's session: its settings, and its state in memory.

    The arguments are those of ``cutctx session``: ``format`` and ``window`` (the whole prompt,
    tools and system included, plus ``reserve_output``), then ``trigger`` (default 1.0),
    ``target`` (default 0.2), ``policy`` (a name or a policy object's JSON; by default
    ``default_chain`` when ``summarize`` is given, else masking then dropping, which never needs
    a summary), ``prompt_id``, ``estimator`` (``chars:N``, ``o200k_base``,
    ``cl100k_base``), ``protected_recent_turns`` (default 4), ``reserve_output`` (default 0),
    ``reasoning`` (``strip``, ``keep`` or ``refuse``), ``cache_breakpoints`` (Anthropic: mark
    the compacted prefix's end after a firing), ``repair``, and ``summarize``: a callable given
    the summarization document (as ``--summarize-with`` sends it, a dict) that returns the
    summary, for policies that summarize; or an async one, for summaries made ahead
    (:meth:`aprepare`, from ``summary_ahead`` of the trigger; the policy then defaults to
    masking and dropping, used when no summary is ready). Bad settings are refused here, not at
    the first call.
    """

    __slots__ = (
        "_ahead", "_async_summarize", "_core", "_given", "_lock", "_sent", "_summarize",
        "_task", "fired", "notes",
    )

    def __init__(
        self,
        format: Format,
        window: int,
        *,
        trigger: float | None = None,
        target: float | None = None,
        policy: str | None = None,
        prompt_id: str | None = None,
        estimator: str | None = None,
        protected_recent_turns: int | None = None,
        reserve_output: int = 0,
        reasoning: Reasoning = "strip",
        cache_breakpoints: bool = False,
        repair: bool = False,
        summarize: Summarize | SummarizeAsync | None = None,
        summary_ahead: float = 0.8,
        _state: bytes | str | None = None,
    ) -> None:
        if not 0 < summary_ahead <= 1:
            raise ValueError(f"summary_ahead is a share of the trigger in (0, 1], not {summary_ahead}")
        made_ahead = summarize is not None and inspect.iscoroutinefunction(summarize)
        self._core = _core.SessionCore(
            format,
            window,
            trigger=trigger,
            target=target,
            policy=policy,
            prompt_id=prompt_id,
            estimator=estimator,
            protected_recent_turns=protected_recent_turns,
            reserve_output=reserve_output,
            reasoning=reasoning,
            cache_breakpoints=cache_breakpoints,
            repair=repair,
            summarizes=summarize is not None and not made_ahead,
            state=_state,
        )
        self._summarize: Summarize | None = None if made_ahead else summarize  # type: ignore[assignment]
        self._async_summarize: SummarizeAsync | None = summarize if made_ahead else None  # type: ignore[assignment]
        self._ahead = summary_ahead
        self._task: asyncio.Task[str] | None = None
        # The last dict (or list) call's history and the request sent for it, each with a list
        # of its own, for prepare_appended; None after a call that gave JSON text.
        self._given: tuple[dict[str, Any] | None, list[Any]] | None = None
        self._sent: tuple[dict[str, Any] | None, list[Any]] | None = None
        self._lock = threading.Lock()
        self.fired: bool = False
        """Whether the last call compacted."""
        self.notes: list[str] = []
        """What the last call would have printed on standard error: a restart, the repairs,
        the reasoning a firing invalidated, a firing held off."""

    @classmethod
    def from_state(cls, state: bytes | str, format: Format, window: int, **options: Any) -> Session:
        """A session continuing from ``state`` (what :meth:`state` returned, or the file
        ``cutctx session --state`` wrote), with the same settings as :class:`Session`.

        A state that is corrupt, of another version or of another format raises
        ``FormatCompactionError`` with ``VALIDATION_ERROR``.
        """
        return cls(format, window, _state=state, **options)

    @overload
    def prepare(
        self, request: Mapping[str, Any], *, pin: Collection[str] = ()
    ) -> dict[str, Any]: ...
    @overload
    def prepare(self, request: list[Any], *, pin: Collection[str] = ()) -> list[Any]: ...
    @overload
    def prepare(self, request: bytes | str, *, pin: Collection[str] = ()) -> bytes: ...
    def prepare(
        self, request: Mapping[str, Any] | list[Any] | bytes | str, *, pin: Collection[str] = ()
    ) -> Any:
        """The request to send for the whole history ``request``.

        A dict (or a bare message list) gives a dict (or list); JSON ``bytes`` or ``str`` gives
        the JSON ``bytes`` ``cutctx session`` prints, without a Python object per message.
        ``pin`` names tool calls (their ids) whose results, and so the calls, a firing at this
        call keeps as they are (``cutctx session --pin``): a result the model just retrieved.
        A request sent as it came is the given one (its list a copy, its messages shared), read
        from no JSON: treat the messages as read-only.
        """
        pins = _pins(pin)
        with self._lock:
            if isinstance(request, (bytes, str)):
                self._given = self._sent = None
                return self._call(request, pins)
            return self._prepare_value(request, pins)

    def prepare_appended(self, messages: Sequence[Any], *, pin: Collection[str] = ()) -> Any:
        """The request to send for the last call's history with ``messages`` appended.

        The same request :meth:`prepare` gives for that longer history, and the same state,
        read from the new messages alone: the request sent last time with them appended, until
        they cross the trigger (or while the last firing had to let the task go); then the whole
        history is prepared (and may fire). The rest of
        the request (model, tools, system) is the last call's. The last call must have given a
        dict or a list with a message list (a ``ValueError`` otherwise: none yet, JSON text, a
        Responses ``input`` that is one string). The messages of the request returned are
        shared with the last one's (its list is its own): treat them as read-only.
        """
        pins = _pins(pin)
        new = list(messages)
        with self._lock:
            if self._given is None or self._sent is None:
                raise ValueError(
                    "prepare_appended continues the history of a prepare call given a dict or "
                    "a list with a message list; call prepare with the whole history first"
                )
            fields, given = self._given
            appended: bool | None = self._core.append_json(json.dumps(new, ensure_ascii=False))
            if not appended:
                return self._prepare_value(_request(fields, self._key, [*given, *new]), pins)
            given.extend(new)
            sent_fields, sent = self._sent
            sent.extend(new)
            self.fired, self.notes = False, []
            return _request(sent_fields, self._key, list(sent))

    async def aprepare(
        self, request: Mapping[str, Any] | list[Any], *, pin: Collection[str] = ()
    ) -> Any:
        """:meth:`prepare`, in an asyncio loop, with the summaries of an async ``summarize``
        made ahead: a summary that has come back is given to the session first (the call that
        crosses the trigger swaps it in), then the request is prepared, then, once it is over
        ``summary_ahead`` of the trigger and no summary waits, the next one is started as a task
        on the prefix as sent. Without an async ``summarize`` it is :meth:`prepare`.
        """
        note = self._take_summary()
        out = self.prepare(request, pin=pin)
        if note is not None:
            self.notes = [*self.notes, note]
        swapped = any("by swapping in the summary made ahead" in n for n in self.notes)
        if self.fired and self._async_summarize is not None and not swapped:
            self.notes = [*self.notes, "cutctx session: no summary made ahead was ready; the firing compacted with the policy"]
        if self._async_summarize is not None and self._task is None:
            text = json.dumps(request, ensure_ascii=False, check_circular=False, separators=(",", ":"))
            with self._lock:
                asked: tuple[bytes, int] | None = self._core.ask_json(text, self._ahead)
            if asked is not None:
                document = {
                    "format": self.format,
                    "request": json.loads(asked[0]),
                    "covered": asked[1],
                    "instruction": _core_module.SUMMARY_INSTRUCTION,
                }
                self._task = asyncio.ensure_future(self._async_summarize(document))
        return out

    def _take_summary(self) -> str | None:
        """Gives the session the summary its task made, if the task is done; the line to note
        when it failed."""
        task = self._task
        if task is None or not task.done():
            return None
        self._task = None
        if task.cancelled():
            return None
        error = task.exception()
        if error is not None:
            # Never a failed call: the firing compacts with the policy instead.
            return f"cutctx session: the summary made ahead failed ({type(error).__name__}); a firing compacts with the policy"
        summary = task.result()
        if not isinstance(summary, str) or not summary.strip():
            return "cutctx session: the summary made ahead was empty; a firing compacts with the policy"
        with self._lock:
            self._core.offer_text(summary)
        return None

    @property
    def _key(self) -> str:
        return _LIST_KEY[self.format]

    def _prepare_value(self, request: Mapping[str, Any] | list[Any], pins: list[str]) -> Any:
        # Compact, unchecked for cycles (JSON has none): the text is read, never kept.
        text = json.dumps(request, ensure_ascii=False, check_circular=False, separators=(",", ":"))
        sent = self._call(text, pins, as_given=True)
        given = _parts(request, self._key)
        if sent is None:
            # Sent as given: the request itself, with a list of its own, read from no JSON.
            out: Any = list(request) if isinstance(request, list) else dict(request)
            if given is not None:
                out = _request(given[0], self._key, list(given[1]))
        else:
            out = json.loads(sent)
        self._given = given
        self._sent = _parts(out, self._key)
        return out

    def _call(self, data: bytes | str, pin: list[str], *, as_given: bool = False) -> Any:
        result: tuple[bytes | None, bool, list[str]] = self._core.prepare_json(
            data, self._summarize, pin, as_given
        )
        out, self.fired, self.notes = result
        return out

    def state(self) -> bytes | None:
        """The state, as ``cutctx session --state`` writes it; ``None`` before the first call."""
        state: bytes | None = self._core.state()
        return state

    @property
    def format(self) -> str:
        """The requests' format."""
        name: str = self._core.format
        return name

    @property
    def window(self) -> int:
        """The window, in tokens."""
        window: int = self._core.window
        return window


def _pins(pin: Collection[str]) -> list[str]:
    if isinstance(pin, str):
        raise TypeError("pin is a collection of tool call ids, not one string")
    return list(pin)


def _parts(request: Mapping[str, Any] | list[Any], key: str) -> tuple[dict[str, Any] | None, list[Any]] | None:
    """A request as its other fields and a copy of its history's list; ``None`` when it has no
    list to append to (a Responses ``input`` that is one string)."""
    if isinstance(request, list):
        return None, list(request)
    history = request.get(key)
    if not isinstance(history, list):
        return None
    # The list's key stays among the fields, so a request rebuilt from them keeps its order.
    return dict(request), list(history)


def _request(fields: dict[str, Any] | None, key: str, history: list[Any]) -> Any:
    """The request of ``fields`` with ``history`` as its list, at the list's place."""
    if fields is None:
        return history
    return {**fields, key: history}
