"""Mistakes the published types must catch: each line carries the one error code it earns.

Checked with `mypy --strict --warn-unused-ignores`: if the types stop catching a mistake, its
`type: ignore` goes unused and mypy fails. Never run; only type-checked.
"""

from __future__ import annotations

from cutctx import (
    Action,
    CompactionBudget,
    CompactionExecutor,
    CompactionPlan,
    DropOldestPolicy,
    ObservationMaskingPolicy,
    PolicyChain,
    Role,
    Transcript,
    TranscriptTurn,
    TurnAction,
    default_chain,
)
from cutctx import _invariants, formats, receipts


class NotAPolicy:
    """Has a name and a version, but `decide` takes the wrong arguments."""

    name = "not_a_policy"
    version = "1.0.0"

    def decide(self, transcript: Transcript) -> CompactionPlan:
        raise NotImplementedError


def mistakes(transcript: Transcript, plan: CompactionPlan) -> None:
    # A token figure is an int, never a string or a float.
    CompactionBudget(max_tokens="8000")  # type: ignore[arg-type]
    TranscriptTurn("u", Role.USER, "hi", 1.5)  # type: ignore[arg-type]
    # Keyword arguments are checked by name.
    default_chain(promptid="summary.v1")  # type: ignore[call-arg]
    CompactionBudget(8000, protected_turns=2)  # type: ignore[call-arg]
    # build_plan takes keywords only.
    _invariants.build_plan(  # type: ignore[call-arg]
        transcript, budget=CompactionBudget(10), actions=[], policy_name="p", policy_version="1"
    )
    # A plan's actions are TurnAction values, not turn ids.
    first: str = plan.actions[0]  # type: ignore[assignment]
    ", ".join(plan.actions)  # type: ignore[arg-type]
    # Values are frozen, and their sequences are tuples.
    plan.tokens_before = 0  # type: ignore[misc]
    plan.summarization_requests.append(plan.summarization_requests[0])  # type: ignore[attr-defined]
    # An action is an Action, a replacement a TurnReplacement.
    TurnAction("u", Action.MASK, replacement="stub")  # type: ignore[arg-type]
    # Summaries are text keyed by group id.
    CompactionExecutor().apply(transcript, plan, {"span-1": 3})  # type: ignore[dict-item]
    # An estimator must have estimate_tokens(text) -> int.
    ObservationMaskingPolicy(estimator=object())  # type: ignore[arg-type]
    # A chain member must be a policy.
    PolicyChain([DropOldestPolicy(), NotAPolicy()])  # type: ignore[list-item]
    # Formats are named, and a ledger is verified by keyword.
    formats.compact({"messages": []}, "gemini", 100)  # type: ignore[arg-type]
    # The reserve is a number of tokens, and the counts are of a named format.
    formats.compact_json("[]", "openai-chat", 100, reserve_output="all")  # type: ignore[arg-type]
    formats.estimate("[]", "gemini")  # type: ignore[arg-type]
    receipts.verify("receipts.jsonl", "pin")  # type: ignore[call-arg]
    del first
