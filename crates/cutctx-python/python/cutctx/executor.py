"""Applying a plan: the view and the report, with the caller's summaries.

    >>> from cutctx import CompactionBudget, CompactionExecutor, DropOldestPolicy
    >>> from cutctx import Role, Transcript, TranscriptTurn
    >>> t = Transcript((TranscriptTurn("a", Role.USER, "old", 50), TranscriptTurn("b", Role.USER, "new", 5)))
    >>> plan = DropOldestPolicy().decide(t, CompactionBudget(10, protected_recent_turns=1))
    >>> view = CompactionExecutor().apply(t, plan)
    >>> view.transcript.turn_ids(), view.report.dropped_turn_ids
    (('b',), ('a',))
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

from cutctx import _core
from cutctx.types import CompactedTranscript, CompactionPlan, Transcript

__all__ = ["CompactionExecutor"]

_NO_SUMMARIES: Final[Mapping[str, str]] = MappingProxyType({})


class CompactionExecutor:
    """Applies a plan, with the caller's summaries, to produce the view and its report.

    Stateless: every input is an argument, so one executor serves for a lifetime.
    """

    def apply(
        self,
        transcript: Transcript,
        plan: CompactionPlan,
        summaries: Mapping[str, str] = _NO_SUMMARIES,
    ) -> CompactedTranscript:
        """Apply ``plan`` to ``transcript``; return the compacted view and its report.

        Kept turns are shared with the input; masked turns carry ``cutctx.kind = "masked"``;
        each fulfilled request becomes one assistant turn ``summary:<group_id>`` at the position
        of its group's earliest turn. Entries of ``summaries`` for other groups are ignored.

        Raises:
            PlanTranscriptMismatch: If the plan does not name this transcript's turns, in order.
            SummaryMissing: If a summarization request has no entry in ``summaries``.
        """
        return _core.apply(transcript, plan, summaries)
