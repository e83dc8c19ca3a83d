"""The vocabulary a compaction is expressed in: transcripts, budgets, plans and reports.

Every class here is a frozen value held by the Rust core: a turn's content, id and metadata are
shared, never copied, by the transcripts, plans and views built from it. Values compare by
value; all but turns and transcripts (which hold mappings) are hashable.

    >>> from cutctx.types import Role, Transcript, TranscriptTurn
    >>> t = Transcript((TranscriptTurn("u1", Role.USER, "hi", 3), TranscriptTurn("u2", Role.USER, "yo", 4)))
    >>> t.token_estimate(), t.turn_ids()
    (7, ('u1', 'u2'))
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum
from types import MappingProxyType, SimpleNamespace
from typing import Final, Protocol

from cutctx import _core
from cutctx.errors import (
    BudgetUnsatisfiable,
    PlanTranscriptMismatch,
    SummaryMissing,
    ValidationError,
)

try:
    from enum import StrEnum
except ImportError:  # Python 3.10: the same behaviour, spelled out.

    class StrEnum(str, Enum):  # type: ignore[no-redef]
        """A string enumeration whose members format as their values."""

        def __str__(self) -> str:
            """Return the member's value."""
            return str(self.value)

        def __format__(self, spec: str) -> str:
            """Format the member's value."""
            return format(str(self.value), spec)


__all__ = [
    "Action",
    "CompactedTranscript",
    "CompactionBudget",
    "CompactionPlan",
    "CompactionPolicy",
    "CompactionReport",
    "Role",
    "SummarizationRequest",
    "Transcript",
    "TranscriptTurn",
    "TurnAction",
    "TurnReplacement",
]

EMPTY_METADATA: Final[Mapping[str, str]] = MappingProxyType({})
"""The immutable default for ``TranscriptTurn.metadata``: an empty, read-only mapping."""

SUMMARY_TURN_ID_PREFIX: Final = "summary:"
"""Prefix of the id the executor gives a summary turn: ``summary:<group_id>``."""


class Role(StrEnum):
    """Who produced a turn. The value is the serialized form."""

    SYSTEM = "system"
    """Instructions. Every system turn is untouchable."""

    USER = "user"
    """The human, or the application speaking for them."""

    ASSISTANT = "assistant"
    """The model, including a turn that issues tool calls."""

    TOOL = "tool"
    """A tool's result. Travels with the turn that called it."""


class Action(StrEnum):
    """What a plan does to one turn.

    ``KEEP`` and ``MASK`` retain the turn at its position; ``SUMMARIZE`` and ``DROP`` remove it,
    and a removal applies to a whole tool exchange or to none of it.
    """

    KEEP = "keep"
    """Pass the turn through unchanged."""

    MASK = "mask"
    """Put the action's replacement in place of the turn's body."""

    SUMMARIZE = "summarize"
    """Fold the turn into the summarization request named by the action's group."""

    DROP = "drop"
    """Remove the turn from the view."""


_core._bind(
    ValidationError,
    BudgetUnsatisfiable,
    SummaryMissing,
    PlanTranscriptMismatch,
    Role,
    Action,
    MappingProxyType,
)

TranscriptTurn = _core.TranscriptTurn
Transcript = _core.Transcript
CompactionBudget = _core.CompactionBudget
TurnReplacement = _core.TurnReplacement
TurnAction = _core.TurnAction
SummarizationRequest = _core.SummarizationRequest
CompactionPlan = _core.CompactionPlan
CompactionReport = _core.CompactionReport
CompactedTranscript = _core.CompactedTranscript


class _ValidationInput:
    """What a plan's ``transcript`` and ``budget`` resolve to: inputs checked, not carried."""

    __slots__ = ()

    def __repr__(self) -> str:
        """Say that the plan does not carry the value."""
        return "<validation input; not carried on the plan>"


def _fields(*names: str, inputs: tuple[str, ...] = ()) -> dict[str, SimpleNamespace]:
    """Describe a class's constructor arguments as dataclass introspection reads them."""
    return {name: SimpleNamespace(name=name, init=True) for name in (*names, *inputs)}


_NOT_CARRIED: Final = _ValidationInput()
# The constructor takes the transcript and budget a plan is for; introspection that reads
# every constructor argument back finds this marker rather than an error.
# Set by name: the classes' declared (typed) faces have no such attributes, and none is public.
setattr(CompactionPlan, "transcript", _NOT_CARRIED)
setattr(CompactionPlan, "budget", _NOT_CARRIED)
_PLAN_FIELDS: Final = _fields(
    "actions",
    "summarization_requests",
    "tokens_before",
    "tokens_after_estimate",
    "policy_name",
    "policy_version",
    "estimator_ratio",
    "budget_unmet",
    inputs=("transcript", "budget"),
)
_REPORT_FIELDS: Final = _fields(
    "plan_hash",
    "policy_name",
    "policy_version",
    "tokens_before",
    "tokens_after_estimate",
    "estimator_ratio",
    "budget_unmet",
    "turns_before",
    "turns_after",
    "kept_turn_ids",
    "masked_turn_ids",
    "summarized_turn_ids",
    "dropped_turn_ids",
    "summary_turn_ids",
)
setattr(CompactionPlan, "__dataclass_fields__", _PLAN_FIELDS)
setattr(CompactionReport, "__dataclass_fields__", _REPORT_FIELDS)


class CompactionPolicy(Protocol):
    """Decides what happens to a transcript that must fit a budget.

    A policy has a ``name``, a ``version`` and ``decide(transcript, budget)``, a pure function
    returning a plan, built through ``cutctx._invariants.build_plan``. Subclass this to write
    one; it works alone and as a member of a ``PolicyChain``.

        >>> from cutctx import Action, CompactionBudget, CompactionPolicy, TurnAction
        >>> from cutctx import _invariants
        >>> class KeepAll(CompactionPolicy):
        ...     name = "keep_all"
        ...     version = "1.0.0"
        ...     def decide(self, transcript, budget):
        ...         actions = [TurnAction(t, Action.KEEP) for t in transcript.turn_ids()]
        ...         return _invariants.build_plan(transcript=transcript, budget=budget,
        ...             actions=actions, policy_name=self.name, policy_version=self.version)
    """

    name: str
    """Stable identifier, recorded on every plan and report."""

    version: str
    """The behaviour's version, bumped whenever the decisions change."""

    def decide(self, transcript: Transcript, budget: CompactionBudget) -> CompactionPlan:
        """Return the plan for this transcript and budget."""
        ...
