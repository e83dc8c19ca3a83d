"""The rules every plan obeys, in one place (private: not part of ``cutctx.__all__``).

A plan names every turn once, in order; keeps every system, pinned and protected turn; removes
a tool exchange whole or not at all; agrees with its summarization requests; and carries the
figures its actions produce. The checks run in the Rust core.
"""

from __future__ import annotations

from cutctx._core import (
    build_plan,
    estimate_after,
    exchanges,
    removable_turn_ids,
    require_satisfiable_budget,
    untouchable_tokens,
    untouchable_turn_ids,
    validate_plan,
)

__all__ = [
    "build_plan",
    "estimate_after",
    "exchanges",
    "removable_turn_ids",
    "require_satisfiable_budget",
    "untouchable_tokens",
    "untouchable_turn_ids",
    "validate_plan",
]
