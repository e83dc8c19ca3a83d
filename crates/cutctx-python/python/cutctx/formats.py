"""Compact provider requests: OpenAI Chat, OpenAI Responses and Anthropic.

The same compaction as ``cutctx compact --format F``, in-process. Each message becomes a turn;
a model step with tool calls and every result of those calls form one exchange, kept or removed
together; everything cutctx does not model (unknown fields, names, cache marks, images) comes
back unchanged, and a request that fits comes back as it was.

Two entry points:

* :func:`compact` takes and returns a ``dict`` (or the bare ``messages``/``input`` list) and
  also gives the plan and the report;
* :func:`compact_json` takes JSON ``bytes`` or ``str`` and returns the compacted request's JSON
  ``bytes``, byte for byte what the CLI prints, without building a Python object per message.

>>> from cutctx.formats import compact
>>> request = {"model": "gpt-4.1", "messages": [
...     {"role": "system", "content": "Be brief."},
...     {"role": "user", "content": "x" * 4000},
...     {"role": "assistant", "content": "Noted."},
...     {"role": "user", "content": "And now?"},
... ]}
>>> result = compact(request, "openai-chat", 100, policy="drop_oldest", protected_recent_turns=2)
>>> [m["content"] for m in result.request["messages"]]
['Be brief.', 'Noted.', 'And now?']
>>> result.report["dropped_turn_ids"]
['m1']

Failures raise :class:`FormatCompactionError`, whose ``code`` is the CLI's stable code
(``FORMAT_ERROR``, ``FORMAT_UNSUPPORTED``, ``FORMAT_INVALID_REQUEST``, ``VALIDATION_ERROR``, ``INPUT_ERROR``,
``USAGE_ERROR``, ``COMPACTION_BUDGET_UNSATISFIABLE``, ``COMPACTION_SUMMARY_MISSING``,
``SUMMARIZER_ERROR``) and whose ``details`` name ids and figures, never content.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from cutctx._core import formats as _core

__all__ = [
    "DEFAULT_PROMPT_ID",
    "FORMATS",
    "POLICIES",
    "CompactedRequest",
    "FormatCompactionError",
    "compact",
    "compact_json",
    "compact_json_with_report",
]

FormatCompactionError = _core.FormatCompactionError
"""A request that could not be compacted: ``code``, ``message`` and ``details`` say why."""

DEFAULT_PROMPT_ID: str = _core.DEFAULT_PROMPT_ID
"""The prompt id of summarization requests when none is given."""

FORMATS = ("openai-chat", "openai-responses", "anthropic")
"""The provider formats, by the names the CLI's ``--format`` takes."""

POLICIES = ("drop_oldest", "observation_masking", "summarizing", "default_chain")
"""The policies, by the names the CLI's ``--policy`` takes."""

Format = Literal["openai-chat", "openai-responses", "anthropic"]
Policy = Literal["drop_oldest", "observation_masking", "summarizing", "default_chain"]
Summarize = Callable[[dict[str, Any]], str]


@dataclass(frozen=True, slots=True)
class CompactedRequest:
    """The outcome of :func:`compact`.

    Attributes:
        request: The compacted request, in the input's format and shape (a dict, or a list when
            a bare list came in). The input itself is left as it was.
        plan: The plan, as its canonical JSON reads (``to_dict()`` of the plan).
        report: What was kept, masked, summarized and dropped, by turn id.
    """

    request: Any
    plan: dict[str, Any]
    report: dict[str, Any]


def compact_json_with_report(
    data: bytes | str,
    format: Format,
    max_tokens: int,
    *,
    protected_recent_turns: int = 4,
    policy: Policy = "default_chain",
    prompt_id: str | None = None,
    estimator: str | None = None,
    summaries: Mapping[str, str] | None = None,
    summarize: Summarize | None = None,
) -> tuple[bytes, bytes]:
    """Like :func:`compact_json`, and also the report.

    Returns:
        ``(request, report)``: the compacted request's JSON, as the CLI prints it, and
        ``{"plan", "report"}`` as canonical JSON, as the CLI's ``--report FILE`` holds it. Both
        end with one newline.

    >>> out, report = compact_json_with_report(b'[{"role": "user", "content": "Hi"}]',
    ...                                        "openai-chat", 50)
    >>> out
    b'[{"role": "user", "content": "Hi"}]\\n'
    >>> json.loads(report)["report"]["kept_turn_ids"]
    ['m0']
    """
    return _core.compact_json(
        data,
        format,
        _count(max_tokens, "max_tokens"),
        protected_recent_turns=_count(protected_recent_turns, "protected_recent_turns"),
        policy=policy,
        prompt_id=prompt_id,
        estimator=estimator,
        summaries=None if summaries is None else dict(summaries),
        summarize=summarize,
    )


def compact_json(
    data: bytes | str,
    format: Format,
    max_tokens: int,
    *,
    protected_recent_turns: int = 4,
    policy: Policy = "default_chain",
    prompt_id: str | None = None,
    estimator: str | None = None,
    summaries: Mapping[str, str] | None = None,
    summarize: Summarize | None = None,
) -> bytes:
    """Compact a provider request held as JSON text; return the compacted request's JSON.

    The output is byte for byte what ``cutctx compact --format FORMAT --max-tokens MAX_TOKENS``
    prints for the same input and options: the input itself (plus a newline) when nothing was
    compacted, otherwise the compacted document, indented when the input spans lines. The work
    runs in Rust without the interpreter lock (except while ``summarize`` is called).

    Args:
        data: The request (or its ``messages``/``input`` list) as UTF-8 JSON.
        format: ``"openai-chat"``, ``"openai-responses"`` or ``"anthropic"``.
        max_tokens: The budget, in estimated tokens.
        protected_recent_turns: How many of the most recent turns are never touched.
        policy: ``"drop_oldest"``, ``"observation_masking"``, ``"summarizing"`` or
            ``"default_chain"`` (masking, then summarizing, then dropping).
        prompt_id: The prompt id of summarization requests (default :data:`DEFAULT_PROMPT_ID`).
        estimator: ``"chars:N"`` (the default is ``"chars:4"``), or ``"o200k_base"`` /
            ``"cl100k_base"`` when the extension was built with real BPE counts.
        summaries: ``{group_id: summary}`` fulfilling the plan's summarization requests.
        summarize: Instead of ``summaries``, a callable run once per summarization request, in
            order, with the document the CLI's ``--summarize-with`` command receives
            (``{"format", "group_id", "prompt_id", "target_tokens", "turns", "messages"}``);
            it returns the summary. An exception it raises fails the compaction with
            ``SUMMARIZER_ERROR`` (and is the error's ``__cause__``).

    Raises:
        FormatCompactionError: With the CLI's code. Without summaries, a plan that asks for
            some fails with ``COMPACTION_SUMMARY_MISSING``, listing the requests in
            ``details["requests"]``.

    >>> compact_json('{"messages": [{"role": "user", "content": "Hi"}]}', "openai-chat", 10)
    b'{"messages": [{"role": "user", "content": "Hi"}]}\\n'
    >>> try:
    ...     compact_json(b"{", "anthropic", 10)
    ... except FormatCompactionError as e:
    ...     (e.code, e.details["document"])
    ('INPUT_ERROR', 'the transcript')
    """
    return compact_json_with_report(
        data,
        format,
        max_tokens,
        protected_recent_turns=protected_recent_turns,
        policy=policy,
        prompt_id=prompt_id,
        estimator=estimator,
        summaries=summaries,
        summarize=summarize,
    )[0]


def compact(
    request: Mapping[str, Any] | list[Any],
    format: Format,
    max_tokens: int,
    *,
    protected_recent_turns: int = 4,
    policy: Policy = "default_chain",
    prompt_id: str | None = None,
    estimator: str | None = None,
    summaries: Mapping[str, str] | None = None,
    summarize: Summarize | None = None,
) -> CompactedRequest:
    """Compact a provider request held as Python objects.

    The request is written as JSON, compacted by :func:`compact_json`, and read back: the
    result equals ``json.loads`` of what the CLI prints. The arguments are those of
    :func:`compact_json`.

    Returns:
        A :class:`CompactedRequest` with the compacted request, the plan and the report.

    Raises:
        FormatCompactionError: As :func:`compact_json`; a request that cannot be written as
            JSON (a NaN, a non-string key, an object ``json`` cannot serialize) is an
            ``INPUT_ERROR``.

    A plan that summarizes needs its summaries; ``summarize`` writes them on demand:

    >>> turns = [{"role": "user", "content": f"step {i} " + "y" * 400} for i in range(0, 12, 2)]
    >>> msgs = [m for i, u in enumerate(turns)
    ...         for m in (u, {"role": "assistant", "content": f"done {i}"})]
    >>> result = compact(msgs, "openai-chat", 300, policy="summarizing",
    ...                  summarize=lambda doc: f"{len(doc['messages'])} messages folded")
    >>> result.request[0]["role"], result.request[0]["content"]
    ('assistant', '8 messages folded')
    >>> result.report["summarized_turn_ids"]
    ['m0', 'm1', 'm2', 'm3', 'm4', 'm5', 'm6', 'm7']
    """
    try:
        data = json.dumps(request, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as e:
        raise _input_error(type(e).__name__) from e
    out, report = compact_json_with_report(
        data,
        format,
        max_tokens,
        protected_recent_turns=protected_recent_turns,
        policy=policy,
        prompt_id=prompt_id,
        estimator=estimator,
        summaries=summaries,
        summarize=summarize,
    )
    both = json.loads(report)
    return CompactedRequest(request=json.loads(out), plan=both["plan"], report=both["report"])


def _count(value: int, name: str) -> int:
    """A non-negative int (not a bool), or a ``VALIDATION_ERROR`` naming the option."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise _error(
            "VALIDATION_ERROR",
            f"{name} must be an int; got {type(value).__name__}.",
            {name: type(value).__name__},
        )
    if value < 0:
        raise _error(
            "VALIDATION_ERROR", f"{name} must not be negative; got {value}.", {name: value}
        )
    return value


def _input_error(kind: str) -> FormatCompactionError:
    return _error(
        "INPUT_ERROR",
        f"the request cannot be written as JSON ({kind}).",
        {"document": "the transcript", "kind": kind},
    )


def _error(code: str, message: str, details: dict[str, Any]) -> FormatCompactionError:
    e = FormatCompactionError(message)
    e.code, e.message, e.details = code, message, details
    return e
