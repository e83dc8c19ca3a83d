"""Compact provider requests: OpenAI Chat, OpenAI Responses and Anthropic.

The same compaction as ``cutctx compact --format F``, in-process. Each message becomes a turn;
a model step with tool calls and every result of those calls form one exchange, kept or removed
together; everything cutctx does not model (unknown fields, names, cache marks, images) comes
back unchanged, and a request that fits comes back as it was.

Entry points:

* :func:`compact` takes and returns a ``dict`` (or the bare ``messages``/``input`` list) and
  also gives the plan, the report, the whole prompt's figures and the repairs;
* :func:`compact_json` takes JSON ``bytes`` or ``str`` and returns the compacted request's JSON
  ``bytes``, byte for byte what the CLI prints, without building a Python object per message
  (:func:`compact_json_with_report` also returns the CLI's ``--report`` file);
* :func:`compact_batch` and :class:`BatchCompactor` compact a batch, as ``cutctx batch`` does;
* :func:`estimate` (and :func:`estimate_json`) say where a request's tokens are, as
  ``cutctx estimate`` prints it.

The budget is the whole prompt, as the CLI counts it: tool definitions, system text and
messages, plus ``reserve_output`` tokens kept for the answer (by default the request's own
``max_completion_tokens``/``max_tokens``, ``max_output_tokens`` or ``max_tokens``; else 0).
With ``repair=True``, what makes a logged history invalid for its provider (a call without
its result, a result without its call, ...) is dropped first, never invented, and each drop is
listed in the report's ``"repairs"``. Signed reasoning (Anthropic ``thinking`` and
``redacted_thinking`` blocks, OpenAI Responses ``reasoning`` items) after the first message the
compaction changed no longer matches the request's prefix: ``reasoning="strip"`` (the default)
removes it, ``"keep"`` leaves it, ``"refuse"`` fails; the report's ``"reasoning"`` lists it.

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
``SUMMARIZER_ERROR``, ``FORMAT_REASONING_INVALIDATED``) and whose ``details`` name ids and
figures, never content.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from cutctx._core import formats as _core

__all__ = [
    "DEFAULT_PROMPT_ID",
    "FORMATS",
    "POLICIES",
    "BatchCompactor",
    "CompactedRequest",
    "FormatCompactionError",
    "compact",
    "compact_batch",
    "compact_batch_with_reports",
    "compact_json",
    "compact_json_with_report",
    "estimate",
    "estimate_json",
]

FormatCompactionError = _core.FormatCompactionError
"""A request that could not be compacted: ``code``, ``message`` and ``details`` say why."""

DEFAULT_PROMPT_ID: str = _core.DEFAULT_PROMPT_ID
"""The prompt id of summarization requests when none is given."""

FORMATS: tuple[str, ...] = tuple(_core.FORMATS)
"""The provider formats, by the names the CLI's ``--format`` takes (the core's own list)."""

POLICIES: tuple[str, ...] = tuple(_core.POLICY_NAMES)
"""The policies, by the names the CLI's ``--policy`` takes (the core's policy registry)."""

Format = Literal["openai-chat", "openai-responses", "anthropic"]
Policy = Literal["drop_oldest", "observation_masking", "summarizing", "default_chain"]
Reasoning = Literal["strip", "keep", "refuse"]
Summarize = Callable[[dict[str, Any]], str]


@dataclass(frozen=True, slots=True)
class CompactedRequest:
    """The outcome of :func:`compact`.

    Attributes:
        request: The compacted request, in the input's format and shape (a dict, or a list when
            a bare list came in). The input itself is left as it was.
        plan: The plan, as its canonical JSON reads (``to_dict()`` of the plan).
        report: What was kept, masked, summarized and dropped, by turn id.
        prompt: The whole prompt's figures when tools or an output reserve take part of the
            budget (``{"max_tokens", "tools_tokens", "reserve_tokens", "turn_budget",
            "tokens_before", "tokens_after_estimate"}``), else ``None``: the report file's
            ``"prompt"``.
        repairs: With ``repair=True``, each drop as ``{"kind", "position", "id"}`` (positions
            in the input; empty when nothing needed it), else ``None``: the report file's
            ``"repairs"``.
        reasoning: When the compaction invalidated signed reasoning, ``{"mode",
            "first_changed", "removed", "tokens", "invalidated"}`` (each invalidated block or
            item as ``{"message", "block", "kind", "tokens"}``), else ``None``: the report
            file's ``"reasoning"``.
    """

    request: Any
    plan: dict[str, Any]
    report: dict[str, Any]
    prompt: dict[str, Any] | None = None
    repairs: list[dict[str, Any]] | None = None
    reasoning: dict[str, Any] | None = None


def compact_json_with_report(
    data: bytes | str,
    format: Format,
    max_tokens: int,
    *,
    protected_recent_turns: int = 4,
    policy: Policy | str | None = None,
    prompt_id: str | None = None,
    estimator: str | None = None,
    summaries: Mapping[str, str] | None = None,
    summarize: Summarize | None = None,
    reserve_output: int | None = None,
    repair: bool = False,
    reasoning: Reasoning = "strip",
) -> tuple[bytes, bytes]:
    """Like :func:`compact_json`, and also the report.

    Returns:
        ``(request, report)``: the compacted request's JSON, as the CLI prints it, and
        ``{"plan", "report"}`` as canonical JSON, as the CLI's ``--report FILE`` holds it, with
        ``"prompt"`` when tools or an output reserve count, ``"repairs"`` with
        ``repair=True``, and ``"reasoning"`` when signed reasoning was invalidated (see
        ``reasoning`` in :func:`compact_json`). Both end with one newline.

    >>> out, report = compact_json_with_report(b'[{"role": "user", "content": "Hi"}]',
    ...                                        "openai-chat", 50)
    >>> out
    b'[{"role": "user", "content": "Hi"}]\\n'
    >>> json.loads(report)["report"]["kept_turn_ids"]
    ['m0']

    A logged history with a call that never got its result is refused, naming the fix;
    ``repair=True`` drops the call and lists the drop:

    >>> history = {"max_tokens": 20, "messages": [
    ...     {"role": "user", "content": "Go."},
    ...     {"role": "assistant", "content": "On it.", "tool_calls": [
    ...         {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
    ...     {"role": "user", "content": "Well?"}]}
    >>> try:
    ...     compact_json_with_report(json.dumps(history), "openai-chat", 100)
    ... except FormatCompactionError as e:
    ...     (e.code, e.details["hint"])
    ('FORMAT_INVALID_REQUEST', '--repair')
    >>> out, report = compact_json_with_report(json.dumps(history), "openai-chat", 100,
    ...                                        repair=True)
    >>> [m.get("tool_calls") for m in json.loads(out)["messages"]]
    [None, None, None]
    >>> json.loads(report)["repairs"]
    [{'id': 'c1', 'kind': 'dropped_call', 'position': 1}]
    >>> json.loads(report)["prompt"]["reserve_tokens"]  # the request's own max_tokens
    20
    """
    request, report = _compact_json(
        data, format, max_tokens, protected_recent_turns, policy, prompt_id, estimator,
        summaries, summarize, reserve_output, repair, reasoning, report=True,
    )
    assert report is not None  # asked for
    return request, report


def compact_json(
    data: bytes | str,
    format: Format,
    max_tokens: int,
    *,
    protected_recent_turns: int = 4,
    policy: Policy | str | None = None,
    prompt_id: str | None = None,
    estimator: str | None = None,
    summaries: Mapping[str, str] | None = None,
    summarize: Summarize | None = None,
    reserve_output: int | None = None,
    repair: bool = False,
    reasoning: Reasoning = "strip",
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
            ``"default_chain"`` (masking, then summarizing, then dropping), or a policy
            object's JSON. By default ``"default_chain"`` when ``summaries`` or ``summarize``
            is given, else masking then dropping, which never needs a summary.
        prompt_id: The prompt id of summarization requests (default :data:`DEFAULT_PROMPT_ID`).
        estimator: ``"chars:N"`` (the default is ``"chars:4"``), or ``"o200k_base"`` /
            ``"cl100k_base"`` when the extension was built with real BPE counts.
        summaries: ``{group_id: summary}`` fulfilling the plan's summarization requests.
        summarize: Instead of ``summaries``, a callable run once per summarization request, in
            order, with the document the CLI's ``--summarize-with`` command receives
            (``{"format", "group_id", "prompt_id", "target_tokens", "turns", "messages"}``);
            it returns the summary. An exception it raises fails the compaction with
            ``SUMMARIZER_ERROR`` (and is the error's ``__cause__``).
        reserve_output: Tokens of ``max_tokens`` kept for the answer (``--reserve-output``);
            by default the request's own output limit, else 0.
        repair: Drop what makes the history invalid for its provider first
            (``--repair``); without it such a request fails with ``FORMAT_INVALID_REQUEST``
            and ``details["hint"] == "--repair"``.
        reasoning: What becomes of signed reasoning after the first changed message
            (``--reasoning``): ``"strip"`` removes it, ``"keep"`` leaves it (both report it in
            ``"reasoning"``), ``"refuse"`` fails with ``FORMAT_REASONING_INVALIDATED``; with
            ``"strip"``, an Anthropic tool loop in progress under manual thinking whose
            thinking the compaction would invalidate fails with
            ``FORMAT_REASONING_OPEN_TOOL_LOOP``.

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
    # The report is not made: nor is the plan hashed, which for a long transcript costs about
    # as much as reading the request.
    request, _ = _compact_json(
        data, format, max_tokens, protected_recent_turns, policy, prompt_id, estimator,
        summaries, summarize, reserve_output, repair, reasoning, report=False,
    )
    return request


def _compact_json(
    data: bytes | str,
    format: Format,
    max_tokens: int,
    protected_recent_turns: int,
    policy: Policy,
    prompt_id: str | None,
    estimator: str | None,
    summaries: Mapping[str, str] | None,
    summarize: Summarize | None,
    reserve_output: int | None,
    repair: bool,
    reasoning: Reasoning,
    *,
    report: bool,
) -> tuple[bytes, bytes | None]:
    """The core's ``compact_json`` with the arguments checked as both public functions check
    them; the report only when asked for."""
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
        reserve_output=_reserve(reserve_output),
        repair=bool(repair),
        report=report,
        reasoning=reasoning,
    )


def compact(
    request: Mapping[str, Any] | list[Any],
    format: Format,
    max_tokens: int,
    *,
    protected_recent_turns: int = 4,
    policy: Policy | str | None = None,
    prompt_id: str | None = None,
    estimator: str | None = None,
    summaries: Mapping[str, str] | None = None,
    summarize: Summarize | None = None,
    reserve_output: int | None = None,
    repair: bool = False,
    reasoning: Reasoning = "strip",
) -> CompactedRequest:
    """Compact a provider request held as Python objects.

    The request is written as JSON, compacted by :func:`compact_json`, and read back: the
    result equals ``json.loads`` of what the CLI prints. The arguments are those of
    :func:`compact_json`.

    Returns:
        A :class:`CompactedRequest` with the compacted request, the plan and the report (and
        the report file's ``prompt``, ``repairs`` and ``reasoning``).

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
        reserve_output=reserve_output,
        repair=repair,
        reasoning=reasoning,
    )
    both = json.loads(report)
    return CompactedRequest(
        request=json.loads(out),
        plan=both["plan"],
        report=both["report"],
        prompt=both.get("prompt"),
        repairs=both.get("repairs"),
        reasoning=both.get("reasoning"),
    )


def estimate_json(
    data: bytes | str,
    format: Format,
    *,
    estimator: str | None = None,
    reserve_output: int | None = None,
    repair: bool = False,
) -> bytes:
    """Where a request's tokens are: byte for byte what ``cutctx estimate --format FORMAT``
    prints (canonical JSON and a newline).

    The arguments are those of :func:`compact_json`; see :func:`estimate` for the fields.

    >>> estimate_json(b'[{"role": "user", "content": "Hello there"}]', "openai-chat")
    b'{"messages":3,"reserve":0,"system":0,"tools":0,"total":3,"turns":[{"role":"user","tokens":3,"turn_id":"m0"}]}\\n'
    """
    return _core.estimate_json(
        data,
        format,
        estimator=estimator,
        reserve_output=_reserve(reserve_output),
        repair=bool(repair),
    )


def estimate(
    request: Mapping[str, Any] | list[Any] | bytes | str,
    format: Format,
    *,
    estimator: str | None = None,
    reserve_output: int | None = None,
    repair: bool = False,
) -> dict[str, Any]:
    """Where a request's tokens are, part by part: ``cutctx estimate --format FORMAT``, read.

    Returns:
        ``{"tools", "system", "messages", "reserve", "total", "turns"}``: the tool
        definitions (over their canonical JSON), the system turns, every other turn, the room
        kept for the answer (``reserve_output``, by default the request's own limit), their
        sum, and each turn as ``{"turn_id", "role", "tokens"}`` by position. ``total`` is what
        ``max_tokens`` must hold for :func:`compact` to leave the request as it is.

    Raises:
        FormatCompactionError: As :func:`compact_json`.

    >>> count = estimate({"max_tokens": 100, "system": "Be brief.",
    ...                   "messages": [{"role": "user", "content": "x" * 400}]}, "anthropic")
    >>> (count["system"], count["messages"], count["reserve"], count["total"])
    (3, 100, 100, 203)
    >>> [(t["turn_id"], t["tokens"]) for t in count["turns"]]
    [('system', 3), ('m0', 100)]
    """
    if isinstance(request, (bytes, str)):
        data: bytes | str = request
    else:
        try:
            data = json.dumps(request, ensure_ascii=False, allow_nan=False)
        except (TypeError, ValueError) as e:
            raise _input_error(type(e).__name__) from e
    counted: dict[str, Any] = json.loads(
        estimate_json(
            data, format, estimator=estimator, reserve_output=reserve_output, repair=repair
        )
    )
    return counted


def _reserve(value: int | None) -> int | None:
    """``reserve_output``: ``None`` (the request's own limit) or a non-negative int."""
    return None if value is None else _count(value, "reserve_output")


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


def _batch_texts(
    requests: Sequence[str | bytes],
    format: Format,
    max_tokens: int,
    options: Mapping[str, Any],
    reports: list[str | None] | None = None,
) -> list[bytes | None]:
    """Each request's compacted JSON (no final newline), or ``None`` where it failed; when
    ``reports`` is a list, each request's report text is appended to it."""
    outputs, _errors, texts = _core.compact_batch_json(
        list(requests),
        format,
        _count(max_tokens, "max_tokens"),
        reports=reports is not None,
        **options,
    )
    if reports is not None:
        reports.extend(None if t is None else t.decode() for t in texts)
    return outputs


def compact_batch(
    requests: Any,
    format: Format,
    max_tokens: int,
    *,
    protected_recent_turns: int = 4,
    policy: Policy | str | None = None,
    prompt_id: str | None = None,
    estimator: str | None = None,
    reserve_output: int | None = None,
    repair: bool = False,
    jobs: int | None = None,
    reasoning: Reasoning = "strip",
) -> Any:
    """Compact a batch of provider requests held as JSON text; return the batch compacted.

    Each output is what ``cutctx batch`` writes on that request's line, without the newline:
    byte for byte ``cutctx compact --format FORMAT`` on it (the same function runs). A request
    that fails becomes ``None`` (``cutctx batch`` writes ``null``); the others go on. The
    whole batch is compacted in Rust without the interpreter lock, on ``cutctx batch``'s own
    workers: every core unless ``jobs`` says how many.

    Args:
        requests: A list (or any sequence) of ``str`` or ``bytes``, a ``pyarrow`` array or
            chunked array of strings or binaries, or a ``pandas`` Series of them.
        format, max_tokens, protected_recent_turns, policy, prompt_id, estimator: As for
            :func:`compact_json`.
        reserve_output: Tokens kept free for the reply (default: the request's own limit).
        repair: Drop what makes a history invalid (orphaned calls or results, ...) first.
        jobs: How many requests are compacted at once (default: every core), as
            ``cutctx batch --jobs``.
        reasoning: ``"strip"``, ``"keep"`` or ``"refuse"``, as for :func:`compact_json` (a
            request it refuses becomes ``None``).

    Returns:
        The same kind as ``requests``: a list of ``str``/``bytes`` (each as its input was),
        a ``pyarrow`` array of the input's type, or a ``pandas`` Series with the same index
        and name, with ``None`` where a request failed.

    >>> compact_batch(['[{"role": "user", "content": "Hi"}]', "{"], "openai-chat", 50)
    ['[{"role": "user", "content": "Hi"}]', None]
    """
    return _compact_batch(
        requests,
        format,
        max_tokens,
        _batch_options(
            protected_recent_turns, policy, prompt_id, estimator, reserve_output, repair, jobs,
            reasoning,
        ),
        None,
    )


def compact_batch_with_reports(
    requests: Any,
    format: Format,
    max_tokens: int,
    *,
    protected_recent_turns: int = 4,
    policy: Policy | str | None = None,
    prompt_id: str | None = None,
    estimator: str | None = None,
    reserve_output: int | None = None,
    repair: bool = False,
    jobs: int | None = None,
    reasoning: Reasoning = "strip",
) -> tuple[Any, list[str | None]]:
    """:func:`compact_batch`, and each request's report.

    Returns:
        ``(compacted, reports)``: ``compacted`` as :func:`compact_batch` returns it, and
        ``reports[i]``, the text the CLI's ``--report FILE`` holds for request ``i`` (without
        its newline: ``{"plan", "report"}``, with ``"prompt"``, ``"repairs"`` and
        ``"reasoning"`` as :func:`compact_json_with_report` has them), or ``None`` where it
        failed. This is how the repairs and the invalidated reasoning of a batch are seen:
        ``cutctx batch`` prints them on standard error.

    >>> unanswered = json.dumps([{"role": "user", "content": "Go."}, {"role": "assistant",
    ...     "content": "On it.", "tool_calls": [{"id": "c9", "type": "function",
    ...     "function": {"name": "f", "arguments": "{}"}}]}, {"role": "user", "content": "?"}])
    >>> out, reports = compact_batch_with_reports([unanswered, "{"], "openai-chat", 50,
    ...                                           repair=True)
    >>> out[1], reports[1]
    (None, None)
    >>> json.loads(reports[0])["repairs"]
    [{'id': 'c9', 'kind': 'dropped_call', 'position': 1}]
    """
    reports: list[str | None] = []
    compacted = _compact_batch(
        requests,
        format,
        max_tokens,
        _batch_options(
            protected_recent_turns, policy, prompt_id, estimator, reserve_output, repair, jobs,
            reasoning,
        ),
        reports,
    )
    return compacted, reports


def _batch_options(
    protected_recent_turns: int,
    policy: Policy,
    prompt_id: str | None,
    estimator: str | None,
    reserve_output: int | None,
    repair: bool,
    jobs: int | None,
    reasoning: Reasoning,
) -> dict[str, Any]:
    if jobs is not None and (isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1):
        raise _error(
            "VALIDATION_ERROR",
            "jobs must be a positive integer or None.",
            {"field": "jobs"},
        )
    return {
        "protected_recent_turns": _count(protected_recent_turns, "protected_recent_turns"),
        "policy": policy,
        "prompt_id": prompt_id,
        "estimator": estimator,
        "reserve_output": _reserve(reserve_output),
        "repair": bool(repair),
        "jobs": jobs,
        "reasoning": reasoning,
    }


def _compact_batch(
    requests: Any,
    format: Format,
    max_tokens: int,
    options: Mapping[str, Any],
    reports: list[str | None] | None,
) -> Any:
    kind = type(requests).__module__.split(".")[0]
    if kind == "pyarrow":
        pa = importlib.import_module("pyarrow")  # only when given one, so never required
        items = requests.to_pylist()
        outputs = _batch_texts(items, format, max_tokens, options, reports)
        if pa.types.is_binary(requests.type) or pa.types.is_large_binary(requests.type):
            return pa.array(outputs, type=requests.type)
        return pa.array(
            [None if o is None else o.decode() for o in outputs], type=requests.type
        )
    if kind == "pandas":
        pd = importlib.import_module("pandas")
        items = requests.tolist()
        texts = _as_inputs(items, _batch_texts(items, format, max_tokens, options, reports))
        return pd.Series(texts, index=requests.index, name=requests.name, dtype=object)
    items = list(requests)
    return _as_inputs(items, _batch_texts(items, format, max_tokens, options, reports))


def _as_inputs(items: Sequence[Any], outputs: Sequence[bytes | None]) -> list[Any]:
    """Each output as its input was: ``str`` for a ``str``, ``bytes`` otherwise."""
    return [
        None if out is None else out.decode() if isinstance(item, str) else out
        for item, out in zip(items, outputs, strict=True)
    ]


@dataclass(frozen=True, slots=True)
class BatchCompactor:
    """A picklable batch function: Ray Data's ``map_batches`` and Spark's ``mapInPandas``.

    It holds only its options (no client, no cache, no global state), so every worker that
    unpickles it compacts the same way. Called on a batch, it replaces ``column`` (JSON
    requests) with the compacted requests (``None`` where one failed, see
    :func:`compact_batch`) and leaves the other columns as they are. With ``report_column``,
    it also sets that column to each request's report text (see
    :func:`compact_batch_with_reports`: the whole prompt's figures and, with ``repair``, the
    repairs), ``None`` where a request failed. ``reasoning`` is :func:`compact_batch`'s.

    >>> compactor = BatchCompactor("openai-chat", 50, column="text")
    >>> compactor({"text": ['[{"role": "user", "content": "Hi"}]']})["text"]
    ['[{"role": "user", "content": "Hi"}]']
    >>> with_reports = BatchCompactor("openai-chat", 50, column="text", report_column="report")
    >>> json.loads(with_reports({"text": ['[{"role": "user", "content": "Hi"}]']})["report"][0])[
    ...     "report"]["kept_turn_ids"]
    ['m0']

    Ray Data: ``ds.map_batches(BatchCompactor("openai-chat", 8000, column="text"))``; Spark:
    ``df.mapInPandas(BatchCompactor(...).map_in_pandas, schema=df.schema)``.
    """

    format: Format
    max_tokens: int
    column: str = "request"
    protected_recent_turns: int = 4
    policy: Policy | str | None = None
    prompt_id: str | None = None
    estimator: str | None = None
    reserve_output: int | None = None
    repair: bool = False
    report_column: str | None = None
    reasoning: Reasoning = "strip"

    def compact(self, requests: Any) -> Any:
        """:func:`compact_batch` of ``requests`` with this compactor's options."""
        return compact_batch(
            requests,
            self.format,
            self.max_tokens,
            protected_recent_turns=self.protected_recent_turns,
            policy=self.policy,
            prompt_id=self.prompt_id,
            estimator=self.estimator,
            reserve_output=self.reserve_output,
            repair=self.repair,
            reasoning=self.reasoning,
        )

    def compact_with_reports(self, requests: Any) -> tuple[Any, list[str | None]]:
        """:func:`compact_batch_with_reports` of ``requests`` with this compactor's options."""
        return compact_batch_with_reports(
            requests,
            self.format,
            self.max_tokens,
            protected_recent_turns=self.protected_recent_turns,
            policy=self.policy,
            prompt_id=self.prompt_id,
            estimator=self.estimator,
            reserve_output=self.reserve_output,
            repair=self.repair,
            reasoning=self.reasoning,
        )

    def _run(self, requests: Any) -> tuple[Any, list[str | None] | None]:
        if self.report_column is None:
            return self.compact(requests), None
        return self.compact_with_reports(requests)

    def __call__(self, batch: Any) -> Any:
        """A batch with ``column`` compacted (and ``report_column`` set, when given): a dict
        of columns (Ray's numpy or default format), a pandas DataFrame, or a pyarrow Table;
        the same kind comes back."""
        if isinstance(batch, Mapping):
            out = dict(batch)
            column = batch[self.column]
            if type(column).__module__.split(".")[0] == "numpy":
                np = importlib.import_module("numpy")
                compacted, reports = self._run(column.tolist())
                out[self.column] = np.array(compacted, dtype=object)
                if self.report_column is not None:
                    out[self.report_column] = np.array(reports, dtype=object)
            else:
                out[self.column], reports = self._run(column)
                if self.report_column is not None:
                    out[self.report_column] = reports
            return out
        kind = type(batch).__module__.split(".")[0]
        if kind == "pandas":
            frame = batch.copy()
            frame[self.column], reports = self._run(batch[self.column])
            if self.report_column is not None:
                frame[self.report_column] = reports
            return frame
        if kind == "pyarrow":
            pa = importlib.import_module("pyarrow")
            compacted, reports = self._run(batch[self.column])
            index = batch.schema.get_field_index(self.column)
            table = batch.set_column(index, self.column, compacted)
            if self.report_column is None:
                return table
            column = pa.array(reports, type=pa.string())
            at = table.schema.get_field_index(self.report_column)
            if at < 0:
                return table.append_column(self.report_column, column)
            return table.set_column(at, self.report_column, column)
        raise TypeError(
            f"a batch must be a mapping of columns, a pandas DataFrame or a pyarrow Table; "
            f"got {type(batch).__name__}"
        )

    def map_in_pandas(self, frames: Iterable[Any]) -> Iterator[Any]:
        """Spark's ``mapInPandas`` form: each DataFrame with ``column`` compacted."""
        for frame in frames:
            yield self(frame)
