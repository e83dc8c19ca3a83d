"""The shipped compaction policies: masking, summarizing, drop-oldest, and their chain."""

from __future__ import annotations

from cutctx.policies.chain import PolicyChain, default_chain
from cutctx.policies.drop_oldest import DropOldestPolicy
from cutctx.policies.masking import DEFAULT_PLACEHOLDER, ObservationMaskingPolicy
from cutctx.policies.summarizing import GROUP_ID_PREFIX, SummarizingPolicy

__all__ = [
    "DEFAULT_PLACEHOLDER",
    "GROUP_ID_PREFIX",
    "DropOldestPolicy",
    "ObservationMaskingPolicy",
    "PolicyChain",
    "SummarizingPolicy",
    "default_chain",
]
