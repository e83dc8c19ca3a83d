"""A typed tour of the public API: `mypy --strict` must accept it, and it runs.

scripts/python-check.sh checks it against the installed package (never the source tree) and
runs it, so each annotation below is also a value the package really returns.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import cutctx
from cutctx import (
    Action,
    BudgetUnsatisfiable,
    CharRatioEstimator,
    CompactedTranscript,
    CompactionBudget,
    CompactionError,
    CompactionExecutor,
    CompactionPlan,
    CompactionPolicy,
    CompactionReport,
    DropOldestPolicy,
    ObservationMaskingPolicy,
    PolicyChain,
    Role,
    SummarizationRequest,
    SummaryMissing,
    TokenEstimator,
    Transcript,
    TranscriptTurn,
    TurnAction,
    TurnReplacement,
    SummarizingPolicy,
    default_chain,
)
from cutctx import _invariants, formats, receipts
from cutctx.errors import ValidationError


def conversation() -> Transcript:
    """A system prompt, a tool exchange and chat, each turn with the caller's estimate."""
    turns: list[TranscriptTurn] = [
        TranscriptTurn("s", Role.SYSTEM, "You are terse.", 5, pinned=True),
        TranscriptTurn("u0", Role.USER, "List the files.", 10),
        TranscriptTurn("a0", Role.ASSISTANT, "calling ls", 10, tool_call_id="c0"),
        TranscriptTurn("t0", Role.TOOL, "a.txt\nb.txt\n" * 40, 120, tool_call_id="c0"),
    ]
    for i in range(1, 6):
        turns.append(TranscriptTurn(f"u{i}", Role.USER, f"question {i}", 20, metadata={"n": str(i)}))
        turns.append(TranscriptTurn(f"a{i}", Role.ASSISTANT, f"answer {i}", 20))
    return Transcript(tuple(turns))


class DropToolResults:
    """A policy written here: drop every removable tool exchange, whole, oldest first."""

    name: str = "drop_tool_results"
    version: str = "1.0.0"

    def decide(self, transcript: Transcript, budget: CompactionBudget) -> CompactionPlan:
        removable: frozenset[str] = _invariants.removable_turn_ids(transcript, budget)
        roles: dict[str, Role] = {turn.turn_id: turn.role for turn in transcript.turns}
        dropped: set[str] = set()
        for members in _invariants.exchanges(transcript):
            whole = all(member in removable for member in members)
            if whole and any(roles[member] is Role.TOOL for member in members):
                dropped.update(members)
        actions = [
            TurnAction(turn_id, Action.DROP if turn_id in dropped else Action.KEEP)
            for turn_id in transcript.turn_ids()
        ]
        return _invariants.build_plan(
            transcript=transcript,
            budget=budget,
            actions=actions,
            policy_name=self.name,
            policy_version=self.version,
        )


class KeepAll(CompactionPolicy):
    """A policy subclassing the protocol explicitly, as the package's docstring shows."""

    name = "keep_all"
    version = "1.0.0"

    def decide(self, transcript: Transcript, budget: CompactionBudget) -> CompactionPlan:
        actions = [TurnAction(t, Action.KEEP) for t in transcript.turn_ids()]
        return _invariants.build_plan(
            transcript=transcript,
            budget=budget,
            actions=actions,
            policy_name=self.name,
            policy_version=self.version,
        )


def summarize(request: SummarizationRequest) -> str:
    """Stands in for the caller's model, under the prompt record `request.prompt_id`."""
    return f"Summary of {len(request.turn_ids)} turns, in {request.target_tokens} tokens."


def compact(
    policy: CompactionPolicy, transcript: Transcript, budget: CompactionBudget
) -> CompactedTranscript:
    plan: CompactionPlan = policy.decide(transcript, budget)
    summaries: dict[str, str] = {r.group_id: summarize(r) for r in plan.summarization_requests}
    return CompactionExecutor().apply(transcript, plan, summaries)


def read_report(report: CompactionReport) -> dict[str, Any]:
    figures: tuple[int, int, int, int] = (
        report.tokens_before,
        report.tokens_after_estimate,
        report.turns_before,
        report.turns_after,
    )
    removed: tuple[str, ...] = report.dropped_turn_ids + report.summarized_turn_ids
    ratio: float | None = report.estimator_ratio
    assert figures[1] <= figures[0] and len(removed) <= figures[2]
    assert ratio is None or ratio > 0
    event: dict[str, Any] = report.to_dict()
    assert event["plan_hash"] == report.plan_hash
    assert event["budget_unmet"] is report.budget_unmet
    return event


def rules(transcript: Transcript, budget: CompactionBudget) -> None:
    untouchable: frozenset[str] = _invariants.untouchable_turn_ids(transcript, budget)
    floor: int = _invariants.untouchable_tokens(transcript, budget)
    _invariants.require_satisfiable_budget(transcript, budget)
    keep = [TurnAction(t, Action.KEEP) for t in transcript.turn_ids()]
    after: int = _invariants.estimate_after(transcript, keep, ())
    assert "s" in untouchable and floor <= after == transcript.token_estimate()
    plan = CompactionPlan(
        actions=keep,
        tokens_before=after,
        tokens_after_estimate=after,
        policy_name="by_hand",
        policy_version="0",
        budget_unmet=after > budget.max_tokens,
        transcript=transcript,
        budget=budget,
    )
    _invariants.validate_plan(plan, transcript, budget)


def main() -> None:
    transcript = conversation()
    budget = CompactionBudget(max_tokens=200, protected_recent_turns=4)
    estimator: TokenEstimator = CharRatioEstimator(chars_per_token=3.5)
    policies: Sequence[CompactionPolicy] = (
        DropOldestPolicy(),
        ObservationMaskingPolicy(keep_recent_results=0, estimator=estimator),
        SummarizingPolicy(prompt_id="summary.v1", target_ratio=0.25, min_span_turns=2),
        default_chain(prompt_id="summary.v1", keep_recent_results=0),
        PolicyChain([ObservationMaskingPolicy(0), DropToolResults(), DropOldestPolicy()]),
        PolicyChain([KeepAll(), default_chain(prompt_id="summary.v1")]),
        DropToolResults(),
    )
    for policy in policies:
        view = compact(policy, transcript, budget)
        event = read_report(view.report)
        assert event["policy_name"] == view.report.policy_name
        kept: tuple[TranscriptTurn, ...] = view.transcript.turns
        for turn in kept:
            meta: Mapping[str, str] = turn.metadata
            assert turn.role in Role and isinstance(meta.get("n", ""), str)

    plan = default_chain(prompt_id="summary.v1").decide(transcript, budget)
    assert not plan.budget_unmet and plan.tokens_after_estimate <= budget.max_tokens
    for action in plan.actions:
        replacement: TurnReplacement | None = action.replacement
        if action.action is Action.SUMMARIZE:
            assert action.summary_group is not None
        if replacement is not None:
            assert replacement.to_dict()["token_estimate"] == replacement.token_estimate
    saved: dict[str, Any] = plan.to_dict()
    assert json.loads(plan.canonical_json()) == saved and len(plan.plan_hash()) == 64
    rules(transcript, budget)

    try:
        DropOldestPolicy().decide(transcript, CompactionBudget(1))
    except BudgetUnsatisfiable as err:
        code: str = err.code
        assert code == BudgetUnsatisfiable.code and err.details["max_tokens"] == 1
    else:
        raise AssertionError("a budget below the untouchable floor was accepted")
    try:
        CompactionExecutor().apply(transcript, plan)
    except SummaryMissing as err:
        assert err.details["group_id"] == plan.summarization_requests[0].group_id
    except CompactionError:
        raise
    else:
        raise AssertionError("a plan with a summarization request applied without its summary")
    try:
        CompactionBudget(-1)
    except ValidationError as err:
        message: str = err.message
        assert "max_tokens" in message
    else:
        raise AssertionError("a negative budget was accepted")

    request: dict[str, Any] = {
        "model": "m",
        "messages": [{"role": "user", "content": f"message {i} " * 8} for i in range(12)],
    }
    result = formats.compact(request, "openai-chat", 200, policy="drop_oldest")
    report: dict[str, Any] = result.report
    out: bytes = formats.compact_json(json.dumps(request), "openai-chat", 200, policy="drop_oldest")
    assert json.loads(out) == result.request and report["tokens_after_estimate"] <= 200

    # The whole prompt: a reserve for the answer, repairs listed, and the counts.
    repaired = formats.compact(
        request, "openai-chat", 300, policy="drop_oldest", reserve_output=100, repair=True
    )
    prompt: dict[str, Any] | None = repaired.prompt
    repairs: list[dict[str, Any]] | None = repaired.repairs
    assert prompt is not None and prompt["reserve_tokens"] == 100 and repairs == []
    count: dict[str, Any] = formats.estimate(request, "openai-chat", reserve_output=100)
    counted: bytes = formats.estimate_json(json.dumps(request), "openai-chat")
    assert count["total"] == json.loads(counted)["total"] + 100
    batch, reports = formats.compact_batch_with_reports(
        [json.dumps(request)], "openai-chat", 200, policy="drop_oldest"
    )
    first_report: str | None = reports[0]
    assert first_report is not None and batch[0] is not None

    with tempfile.TemporaryDirectory() as folder:
        ledger = Path(folder) / "receipts.jsonl"
        pre = [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]
        receipts.seal(pre, pre[1:], ledger, compactor="usage/1", method="trim")
        verdict = receipts.verify(ledger, pin=receipts.head(ledger))
        ok: bool = verdict.ok
        assert ok, verdict.text
    assert cutctx.__version__ == "0.1.0"


if __name__ == "__main__":
    main()
