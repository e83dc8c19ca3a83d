"""The last resort: drop the oldest exchanges nothing protects, until the budget fits."""

from __future__ import annotations

from typing import TYPE_CHECKING

from cutctx import _core

if TYPE_CHECKING:
    from cutctx.types import CompactionBudget, CompactionPlan, Transcript

__all__ = ["DropOldestPolicy"]


class DropOldestPolicy:
    """Drops whole tool exchanges, oldest first, until the budget fits or none is left.

    Never touches a system, pinned or protected turn, never splits an exchange, and says
    ``budget_unmet`` rather than truncating. Its plans record no estimator ratio.

        >>> from cutctx import CompactionBudget, DropOldestPolicy, Role, Transcript, TranscriptTurn
        >>> t = Transcript((TranscriptTurn("a", Role.USER, "x", 50), TranscriptTurn("b", Role.USER, "y", 5)))
        >>> DropOldestPolicy().decide(t, CompactionBudget(10, protected_recent_turns=1)).tokens_after_estimate
        5
    """

    name: str = "drop_oldest"
    version: str = "1.0.0"

    def __init__(self) -> None:
        """Bind the core policy."""
        self._core = _core.drop_oldest_core()

    def decide(self, transcript: Transcript, budget: CompactionBudget) -> CompactionPlan:
        """Return the plan that drops the oldest droppable exchanges until the budget fits.

        Raises:
            BudgetUnsatisfiable: If the untouchable turns alone exceed ``budget.max_tokens``.
        """
        return self._core.decide(transcript, budget)
