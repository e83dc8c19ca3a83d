"""Mask old tool results: the turn stays, its body becomes a stub with the original's digest."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from cutctx import _core
from cutctx.errors import ValidationError
from cutctx.estimator import CharRatioEstimator

if TYPE_CHECKING:
    from cutctx.estimator import TokenEstimator
    from cutctx.types import CompactionBudget, CompactionPlan, Transcript, TranscriptTurn

__all__ = ["DEFAULT_PLACEHOLDER", "ObservationMaskingPolicy"]

DEFAULT_PLACEHOLDER: Final[str] = _core.DEFAULT_PLACEHOLDER
"""The stub's label; the original's estimate and sha256 always follow it."""


def stub_for(turn: TranscriptTurn, *, placeholder: str) -> str:
    """Return the text that replaces a masked turn's body.

    ``"<placeholder> (original: <n> tokens, sha256:<digest of the content>)"``.
    """
    return _core.stub_for(turn, placeholder)


class ObservationMaskingPolicy:
    """Replaces old ``TOOL`` bodies with labelled stubs, oldest first, until the budget fits.

    Never masks the ``keep_recent_results`` most recent results, an untouchable turn, or a turn
    whose stub would cost as much as the turn itself.

    Args:
        keep_recent_results: How many of the most recent tool results are never masked.
        placeholder: The stub's label.
        estimator: What estimates a stub's cost; ``None`` for the default
            ``CharRatioEstimator``, whose ratio plans then record.

    Raises:
        ValidationError: If ``keep_recent_results`` is not a non-negative int, the placeholder
            is blank, or the estimator has no ``estimate_tokens``.
    """

    name: str = "observation_masking"
    version: str = "1.0.0"

    def __init__(
        self,
        keep_recent_results: int = _core.DEFAULT_KEEP_RECENT_RESULTS,
        placeholder: str = DEFAULT_PLACEHOLDER,
        *,
        estimator: TokenEstimator | None = None,
    ) -> None:
        """Check the configuration and bind the core policy."""
        if isinstance(keep_recent_results, bool) or not isinstance(keep_recent_results, int):
            raise ValidationError(
                f"keep_recent_results must be an int; got {type(keep_recent_results).__name__}.",
                details={"keep_recent_results": repr(keep_recent_results)},
            )
        if keep_recent_results < 0:
            raise ValidationError(
                f"keep_recent_results must not be negative; got {keep_recent_results}.",
                details={"keep_recent_results": keep_recent_results},
            )
        if not isinstance(placeholder, str):
            raise ValidationError(
                f"placeholder must be a non-empty string; got {type(placeholder).__name__}.",
                details={"placeholder": repr(placeholder)},
            )
        if estimator is not None and not callable(getattr(estimator, "estimate_tokens", None)):
            raise ValidationError(
                "estimator must have estimate_tokens(text) -> int.",
                details={"estimator": type(estimator).__name__},
            )
        ratio = (
            estimator.chars_per_token if type(estimator) is CharRatioEstimator else None
        )
        self._core = _core.masking_core(
            keep_recent_results,
            placeholder,
            None if ratio is not None else estimator,
            ratio,
        )
        self._keep_recent_results = keep_recent_results
        self._placeholder = placeholder

    @property
    def keep_recent_results(self) -> int:
        """How many of the most recent tool results are never masked."""
        return self._keep_recent_results

    @property
    def placeholder(self) -> str:
        """The stub's label."""
        return self._placeholder

    def decide(self, transcript: Transcript, budget: CompactionBudget) -> CompactionPlan:
        """Return the plan that masks the oldest eligible tool results until the budget fits.

        Raises:
            BudgetUnsatisfiable: If the untouchable turns alone exceed ``budget.max_tokens``.
        """
        return self._core.decide(transcript, budget)
