"""Compose policies over a projection of the transcript, and build one plan at the end."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from cutctx import _core
from cutctx.errors import ValidationError
from cutctx.policies.drop_oldest import DropOldestPolicy
from cutctx.policies.masking import ObservationMaskingPolicy
from cutctx.policies.summarizing import SummarizingPolicy

if TYPE_CHECKING:
    from cutctx.types import CompactionBudget, CompactionPlan, CompactionPolicy, Transcript

__all__ = ["PolicyChain", "default_chain"]

_SHIPPED = (DropOldestPolicy, ObservationMaskingPolicy, SummarizingPolicy)


class PolicyChain:
    """Runs policies in order over a projection, stopping as soon as the budget fits.

    Each member decides over the view the decisions so far would produce (a summary's
    stand-in in place of its group); the chain then builds one plan over the real transcript.
    Members may be the shipped policies, other chains, or policies written in Python.

        >>> from cutctx import CompactionBudget, Role, Transcript, TranscriptTurn, default_chain
        >>> t = Transcript(tuple(TranscriptTurn(f"u{i}", Role.USER, "x" * 40, 10) for i in range(8)))
        >>> plan = default_chain(prompt_id="summary.v1").decide(t, CompactionBudget(50))
        >>> plan.policy_name
        'chain(observation_masking@1.0.0+summarizing@1.0.0+drop_oldest@1.0.0)'
        >>> [r.target_tokens for r in plan.summarization_requests], plan.tokens_after_estimate
        ([8], 48)

    Raises:
        ValidationError: If ``policies`` is empty or holds something that is not a policy.
    """

    version: str = "1.0.0"

    def __init__(self, policies: Sequence[CompactionPolicy]) -> None:
        """Check the members and bind the core chain."""
        members = tuple(policies)
        if not members:
            raise ValidationError(
                "A PolicyChain needs at least one policy: an empty chain decides nothing.",
                details={},
            )
        for policy in members:
            if not callable(getattr(policy, "decide", None)) or not isinstance(
                getattr(policy, "name", None), str
            ):
                raise ValidationError(
                    "Every member of a PolicyChain must be a CompactionPolicy, with a `name`, "
                    "a `version` and `decide(transcript, budget)`.",
                    details={"member": type(policy).__name__},
                )
        self._policies = members
        self._core = _core.chain_core([_core_of(policy) for policy in members])
        self.name = self._core.name

    @property
    def policies(self) -> tuple[CompactionPolicy, ...]:
        """The members, in the order they run."""
        return self._policies

    def decide(self, transcript: Transcript, budget: CompactionBudget) -> CompactionPlan:
        """Return the one plan the whole chain composes.

        Raises:
            BudgetUnsatisfiable: If the untouchable turns alone exceed ``budget.max_tokens``.
        """
        return self._core.decide(transcript, budget)


def _core_of(policy: CompactionPolicy) -> _core.PolicyCore | CompactionPolicy:
    """Return a shipped member's core policy, which decides in the core; any other is called back.

    A subclass of a shipped policy may decide otherwise, so only the exact classes qualify
    (``isinstance`` narrows the type for the attribute; the ``type`` test excludes subclasses).
    """
    shipped = (*_SHIPPED, PolicyChain)
    if isinstance(policy, shipped) and type(policy) in shipped:
        return policy._core
    return policy


def default_chain(
    *,
    prompt_id: str,
    keep_recent_results: int = _core.DEFAULT_KEEP_RECENT_RESULTS,
    target_ratio: float = _core.DEFAULT_TARGET_RATIO,
    min_span_turns: int = _core.DEFAULT_MIN_SPAN_TURNS,
) -> PolicyChain:
    """Return the default chain: mask, then summarize, then drop."""
    return PolicyChain(
        (
            ObservationMaskingPolicy(keep_recent_results=keep_recent_results),
            SummarizingPolicy(
                prompt_id=prompt_id, target_ratio=target_ratio, min_span_turns=min_span_turns
            ),
            DropOldestPolicy(),
        )
    )
