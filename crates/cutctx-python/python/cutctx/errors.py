"""The errors cutctx raises: ``CompactionError`` and its three outcome codes.

Each class has a stable ``code``, a human ``message`` and a ``details`` mapping of ids and
figures (never turn content). Malformed input raises ``ValidationError`` instead, from the
constructor that received it.

On Python 3.12 and later the classes derive from ``baseaicore.SuiteError`` and malformed input
raises ``baseaicore.ValidationError``, as with the reference. ``baseaicore`` needs Python 3.12,
so on 3.10 and 3.11 this module defines ``SuiteError`` and ``ValidationError`` itself, with the
same names, codes, constructor and attributes; code catching ``baseaicore.ValidationError``
there must catch ``cutctx.errors.ValidationError``.

    >>> from cutctx.errors import BudgetUnsatisfiable, CompactionError
    >>> issubclass(BudgetUnsatisfiable, CompactionError), BudgetUnsatisfiable.code
    (True, 'COMPACTION_BUDGET_UNSATISFIABLE')
"""

from __future__ import annotations

from typing import Any, ClassVar

try:
    # Named `as` themselves: importable from here under strict typing (README: catch
    # `cutctx.errors.ValidationError` on every version), while `__all__` stays the reference's.
    from baseaicore import SuiteError as SuiteError
    from baseaicore import ValidationError as ValidationError
except ImportError:  # Python 3.10 and 3.11, where baseaicore cannot be installed.

    class SuiteError(Exception):  # type: ignore[no-redef]
        """Base of every error with a stable ``code``, a ``message`` and ``details``."""

        code: ClassVar[str] = "INTERNAL_ERROR"

        def __init__(self, message: str, *, details: dict[str, Any] | None = None) -> None:
            """Keep the message and a copy of ``details``."""
            super().__init__(message)
            self.message = message
            self.details: dict[str, Any] = dict(details) if details is not None else {}

        def __str__(self) -> str:
            """Return the message alone."""
            return self.message

        def __repr__(self) -> str:
            """Name the class, the code, the message and the details."""
            return (
                f"{type(self).__name__}(code={self.code!r}, message={self.message!r}, "
                f"details={self.details!r})"
            )

        def __reduce__(self) -> tuple[Any, ...]:
            """Pickle with ``details`` intact."""
            return (_rebuild, (type(self), self.message, self.details))

    class ValidationError(SuiteError):  # type: ignore[no-redef]
        """Malformed input: a defect in the caller's data, refused where it arrives."""

        code: ClassVar[str] = "VALIDATION_ERROR"

    def _rebuild(cls: type[SuiteError], message: str, details: dict[str, Any]) -> SuiteError:
        return cls(message, details=details)


__all__ = [
    "BudgetUnsatisfiable",
    "CompactionError",
    "PlanTranscriptMismatch",
    "SummaryMissing",
]


class CompactionError(SuiteError):
    """Base of every outcome cutctx refuses; catch it to catch them all."""

    code: ClassVar[str] = "COMPACTION_ERROR"


class BudgetUnsatisfiable(CompactionError):
    """The untouchable turns alone need more tokens than the budget allows.

    ``details``: ``untouchable_tokens``, ``max_tokens``, ``untouchable_turn_count`` and
    ``protected_recent_turns``.
    """

    code: ClassVar[str] = "COMPACTION_BUDGET_UNSATISFIABLE"


class SummaryMissing(CompactionError):
    """A plan's summarization request has no summary supplied to ``apply``.

    ``details``: ``group_id``, ``turn_ids``, ``target_tokens`` and ``prompt_id``.
    """

    code: ClassVar[str] = "COMPACTION_SUMMARY_MISSING"


class PlanTranscriptMismatch(CompactionError):
    """A plan was applied to a transcript it was not built for.

    ``details``: ``unknown_turn_ids``, ``unplanned_turn_ids`` and ``reordered``.
    """

    code: ClassVar[str] = "COMPACTION_PLAN_MISMATCH"
