"""Plan a summary of the oldest contiguous span; never write one (the caller does)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from cutctx import _core, _invariants
from cutctx.errors import ValidationError

if TYPE_CHECKING:
    from collections.abc import Sequence

    from cutctx.types import CompactionBudget, CompactionPlan, Transcript

__all__ = ["GROUP_ID_PREFIX", "SummarizingPolicy"]

GROUP_ID_PREFIX: Final = "span-"
"""What a derived group id starts with."""


def group_id_for(turn_ids: Sequence[str]) -> str:
    """Return ``span-`` and the first 16 hex digits of the sha256 of the ids joined by NUL."""
    return _core.group_id_for(list(turn_ids))


def _spans(transcript: Transcript, budget: CompactionBudget) -> list[tuple[str, ...]]:
    """Return the summarizable spans, oldest first.

    A span is a run of adjacent removable turns, cut down to the turns whose whole exchange
    lies inside the run, and split again wherever that leaves a gap.
    """
    removable = _invariants.removable_turn_ids(transcript, budget)
    ids = transcript.turn_ids()
    exchange_of = {
        turn_id: members
        for members in _invariants.exchanges(transcript)
        for turn_id in members
    }
    runs: list[list[int]] = [[]]
    for position, turn_id in enumerate(ids):
        if turn_id in removable:
            runs[-1].append(position)
        elif runs[-1]:
            runs.append([])
    spans: list[tuple[str, ...]] = []
    for run in runs:
        inside = {ids[position] for position in run}
        current: list[int] = []
        for position in run:
            if not all(member in inside for member in exchange_of[ids[position]]):
                continue
            if current and position != current[-1] + 1:
                spans.append(tuple(ids[p] for p in current))
                current = []
            current.append(position)
        if current:
            spans.append(tuple(ids[p] for p in current))
    return spans


class SummarizingPolicy:
    """Folds the oldest qualifying span into one planned summary turn.

    One span and one ``SummarizationRequest`` per plan. A span qualifies when it has at least
    ``min_span_turns`` turns and its summary (``target_ratio`` of its estimate, rounded half
    to even, at least 1) is smaller than the span.

    Raises:
        ValidationError: If ``prompt_id`` is blank, ``target_ratio`` is not a finite positive
            number, or ``min_span_turns`` is not an int of at least 1.
    """

    name: str = "summarizing"
    version: str = "1.0.0"

    def __init__(
        self,
        prompt_id: str,
        target_ratio: float = _core.DEFAULT_TARGET_RATIO,
        min_span_turns: int = _core.DEFAULT_MIN_SPAN_TURNS,
    ) -> None:
        """Check the configuration and bind the core policy."""
        if not isinstance(prompt_id, str):
            raise ValidationError(
                "prompt_id must name a versioned prompt record; got "
                f"{type(prompt_id).__name__}.",
                details={"prompt_id": repr(prompt_id)},
            )
        if isinstance(target_ratio, bool) or not isinstance(target_ratio, int | float):
            raise ValidationError(
                f"target_ratio must be a finite number greater than zero; got {target_ratio!r}.",
                details={"target_ratio": repr(target_ratio)},
            )
        if isinstance(min_span_turns, bool) or not isinstance(min_span_turns, int):
            raise ValidationError(
                f"min_span_turns must be an int; got {type(min_span_turns).__name__}.",
                details={"min_span_turns": repr(min_span_turns)},
            )
        if min_span_turns < 1:
            raise ValidationError(
                f"min_span_turns must be at least 1; got {min_span_turns}.",
                details={"min_span_turns": min_span_turns},
            )
        self._core = _core.summarizing_core(prompt_id, float(target_ratio), min_span_turns)
        self._prompt_id = prompt_id
        self._target_ratio = float(target_ratio)
        self._min_span_turns = min_span_turns

    @property
    def prompt_id(self) -> str:
        """The versioned prompt record the request names."""
        return self._prompt_id

    @property
    def target_ratio(self) -> float:
        """What share of a span's estimate its summary is planned to cost."""
        return self._target_ratio

    @property
    def min_span_turns(self) -> int:
        """The shortest span this policy folds."""
        return self._min_span_turns

    def decide(self, transcript: Transcript, budget: CompactionBudget) -> CompactionPlan:
        """Return the plan folding the oldest qualifying span, or keeping every turn.

        Raises:
            BudgetUnsatisfiable: If the untouchable turns alone exceed ``budget.max_tokens``.
        """
        return self._core.decide(transcript, budget)
