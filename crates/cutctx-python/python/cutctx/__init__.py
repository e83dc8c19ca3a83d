"""cutctx: fit an LLM transcript into a token budget, deterministically and auditably.

CutCtx 0.1.0's Python API, served by the cutctx Rust core. A policy turns a transcript and a
budget into a plan; the caller fulfils the plan's summarization requests with its own model;
the executor applies the plan and reports exactly what it did.

    >>> from cutctx import CompactionBudget, CompactionExecutor, DropOldestPolicy
    >>> from cutctx import Role, Transcript, TranscriptTurn
    >>> transcript = Transcript((
    ...     TranscriptTurn("s", Role.SYSTEM, "rules", 10),
    ...     TranscriptTurn("a", Role.USER, "old question", 40),
    ...     TranscriptTurn("b", Role.ASSISTANT, "old answer", 40),
    ... ))
    >>> plan = DropOldestPolicy().decide(transcript, CompactionBudget(60, protected_recent_turns=1))
    >>> plan.tokens_before, plan.tokens_after_estimate, plan.budget_unmet
    (90, 50, False)
    >>> view = CompactionExecutor().apply(transcript, plan)
    >>> view.transcript.turn_ids()
    ('s', 'b')

A turn loop with the default chain: plan, write the requested summaries, apply.

    >>> from cutctx import default_chain
    >>> turns = [TranscriptTurn("s", Role.SYSTEM, "You are terse.", 5)]
    >>> for i in range(6):
    ...     turns.append(TranscriptTurn(f"u{i}", Role.USER, f"question {i}", 20))
    ...     turns.append(TranscriptTurn(f"a{i}", Role.ASSISTANT, f"answer {i}", 20))
    >>> transcript = Transcript(tuple(turns))
    >>> plan = default_chain(prompt_id="summary.v1").decide(transcript, CompactionBudget(150))
    >>> summaries = {r.group_id: "Earlier: questions 0 to 3, answered." for r in plan.summarization_requests}
    >>> view = CompactionExecutor().apply(transcript, plan, summaries)
    >>> view.transcript.turn_ids()[:2], view.report.tokens_after_estimate
    (('s', 'summary:span-c5171129abd094ab'), 117)

Anything not in ``__all__`` is private, ``cutctx._invariants`` included, except
``cutctx.Session`` (:mod:`cutctx.session`) and ``cutctx.wrap`` (:func:`cutctx.wrap.wrap`, the
SDK clients' compaction), kept out of ``__all__`` so that the package's public list stays the
reference's.
"""

from __future__ import annotations

from cutctx.__about__ import __version__
from cutctx.errors import (
    BudgetUnsatisfiable,
    CompactionError,
    PlanTranscriptMismatch,
    SummaryMissing,
)
from cutctx.estimator import CharRatioEstimator, TokenEstimator
from cutctx.executor import CompactionExecutor
from cutctx.policies import (
    DEFAULT_PLACEHOLDER,
    GROUP_ID_PREFIX,
    DropOldestPolicy,
    ObservationMaskingPolicy,
    PolicyChain,
    SummarizingPolicy,
    default_chain,
)
from cutctx.session import Session as Session  # the class, over the module of its name
from cutctx.wrap import wrap as wrap  # the function, over the module of its name
from cutctx.types import (
    EMPTY_METADATA,
    SUMMARY_TURN_ID_PREFIX,
    Action,
    CompactedTranscript,
    CompactionBudget,
    CompactionPlan,
    CompactionPolicy,
    CompactionReport,
    Role,
    SummarizationRequest,
    Transcript,
    TranscriptTurn,
    TurnAction,
    TurnReplacement,
)

__all__ = [
    "default_chain",
    "SummarizingPolicy",
    "PolicyChain",
    "ObservationMaskingPolicy",
    "GROUP_ID_PREFIX",
    "DEFAULT_PLACEHOLDER",
    "EMPTY_METADATA",
    "SUMMARY_TURN_ID_PREFIX",
    "Action",
    "BudgetUnsatisfiable",
    "CharRatioEstimator",
    "CompactedTranscript",
    "CompactionBudget",
    "CompactionError",
    "CompactionExecutor",
    "CompactionPlan",
    "CompactionPolicy",
    "CompactionReport",
    "DropOldestPolicy",
    "PlanTranscriptMismatch",
    "Role",
    "SummarizationRequest",
    "SummaryMissing",
    "TokenEstimator",
    "Transcript",
    "TranscriptTurn",
    "TurnAction",
    "TurnReplacement",
    "__version__",
]
