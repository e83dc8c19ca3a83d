"""Token estimation: injected by the caller, or the character-ratio default.

    >>> from cutctx import CharRatioEstimator
    >>> CharRatioEstimator().estimate_tokens("twelve chars")
    3
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from cutctx.errors import ValidationError

__all__ = ["CharRatioEstimator", "TokenEstimator"]


@runtime_checkable
class TokenEstimator(Protocol):
    """Estimates what a text costs in tokens; pure and deterministic."""

    def estimate_tokens(self, text: str) -> int:
        """Return the estimated token cost of ``text``; never negative."""
        ...


@dataclass(frozen=True, slots=True)
class CharRatioEstimator:
    """The default: code points divided by ``chars_per_token``, rounded up.

    Raises:
        ValidationError: If ``chars_per_token`` is not a finite positive number.
    """

    chars_per_token: float = 4.0

    def __post_init__(self) -> None:
        """Refuse a ratio that could not produce an estimate."""
        if not math.isfinite(self.chars_per_token) or self.chars_per_token <= 0:
            raise ValidationError(
                f"chars_per_token must be a finite positive number; got "
                f"{self.chars_per_token!r}.",
                details={"chars_per_token": repr(self.chars_per_token)},
            )

    def estimate_tokens(self, text: str) -> int:
        """Return ``ceil(code points / chars_per_token)``, and 0 for the empty text."""
        return math.ceil(len(text) / self.chars_per_token) if text else 0
