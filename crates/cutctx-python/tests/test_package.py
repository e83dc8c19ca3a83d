"""The package's own behaviour: Python policies in chains, error classes, `to_dict` round trips."""

from __future__ import annotations

import pickle

import pytest

import cutctx
from cutctx import (
    Action,
    BudgetUnsatisfiable,
    CompactionBudget,
    CompactionError,
    CompactionExecutor,
    CompactionPlan,
    CompactionPolicy,
    DropOldestPolicy,
    PlanTranscriptMismatch,
    PolicyChain,
    Role,
    SummarizationRequest,
    SummaryMissing,
    Transcript,
    TranscriptTurn,
    TurnAction,
    TurnReplacement,
    default_chain,
)
from cutctx import _invariants
from cutctx.errors import ValidationError


def chat(n: int, tokens: int = 20) -> Transcript:
    turns = [TranscriptTurn("s", Role.SYSTEM, "rules", 5)]
    for i in range(n):
        turns.append(TranscriptTurn(f"u{i}", Role.USER, f"question {i}", tokens))
        turns.append(TranscriptTurn(f"a{i}", Role.ASSISTANT, f"answer {i}", tokens))
    return Transcript(tuple(turns))


class DropFirstUser(CompactionPolicy):
    """Drops the first droppable user turn: a policy written in Python."""

    name = "drop_first_user"
    version = "0.1.0"

    def __init__(self) -> None:
        self.calls = 0

    def decide(self, transcript: Transcript, budget: CompactionBudget) -> CompactionPlan:
        self.calls += 1
        removable = _invariants.removable_turn_ids(transcript, budget)
        target = next(
            (t.turn_id for t in transcript.turns if t.role is Role.USER and t.turn_id in removable),
            None,
        )
        actions = [
            TurnAction(t.turn_id, Action.DROP if t.turn_id == target else Action.KEEP)
            for t in transcript.turns
        ]
        return _invariants.build_plan(
            transcript=transcript,
            budget=budget,
            actions=actions,
            policy_name=self.name,
            policy_version=self.version,
        )


class Raises(CompactionPolicy):
    name = "raises"
    version = "1"

    def decide(self, transcript: Transcript, budget: CompactionBudget) -> CompactionPlan:
        raise LookupError("the policy's own failure")


def test_a_python_policy_decides_alone() -> None:
    plan = DropFirstUser().decide(chat(3), CompactionBudget(100, protected_recent_turns=2))
    assert [a.action for a in plan.actions].count(Action.DROP) == 1
    assert plan.policy_name == "drop_first_user"


def test_a_python_policy_runs_inside_a_chain_after_the_shipped_ones() -> None:
    mine = DropFirstUser()
    chain = PolicyChain((DropOldestPolicy(), mine))
    budget = CompactionBudget(70, protected_recent_turns=2)
    plan = chain.decide(chat(3), budget)
    assert plan.policy_name == "chain(drop_oldest@1.0.0+drop_first_user@0.1.0)"
    # Drop-oldest met the budget, so the Python member was never asked.
    assert mine.calls == 0
    assert plan.tokens_after_estimate <= 70


def test_a_python_policy_first_in_a_chain_is_called_with_the_projection() -> None:
    mine = DropFirstUser()
    chain = PolicyChain((mine, default_chain(prompt_id="p.v1")))
    plan = chain.decide(chat(6), CompactionBudget(120, protected_recent_turns=2))
    assert mine.calls == 1
    dropped = [a.turn_id for a in plan.actions if a.action is Action.DROP]
    assert dropped[:1] == ["u0"]
    assert not plan.budget_unmet


def test_an_exception_in_a_python_member_is_raised_as_it_was() -> None:
    chain = PolicyChain((Raises(), DropOldestPolicy()))
    with pytest.raises(LookupError, match="the policy's own failure"):
        chain.decide(chat(3), CompactionBudget(30, protected_recent_turns=1))


def test_the_error_classes_carry_code_message_and_details() -> None:
    assert issubclass(BudgetUnsatisfiable, CompactionError)
    assert issubclass(SummaryMissing, CompactionError)
    assert issubclass(PlanTranscriptMismatch, CompactionError)
    transcript = Transcript((TranscriptTurn("s", Role.SYSTEM, "rules", 50),))
    with pytest.raises(BudgetUnsatisfiable) as refusal:
        DropOldestPolicy().decide(transcript, CompactionBudget(10))
    error = refusal.value
    assert error.code == "COMPACTION_BUDGET_UNSATISFIABLE"
    assert error.details["untouchable_tokens"] == 50
    assert error.details["max_tokens"] == 10
    assert str(error) == error.message and "50" in error.message
    again = pickle.loads(pickle.dumps(error))
    assert type(again) is BudgetUnsatisfiable and again.details == error.details


def test_malformed_input_is_a_validation_error_with_details() -> None:
    with pytest.raises(ValidationError) as refusal:
        TranscriptTurn("a", Role.USER, "x", -1)
    assert refusal.value.code == "VALIDATION_ERROR"
    assert refusal.value.details == {"turn_id": "a", "token_estimate": -1}


def test_a_missing_summary_names_its_group() -> None:
    transcript = chat(6)
    budget = CompactionBudget(150)
    plan = default_chain(prompt_id="p.v1").decide(transcript, budget)
    (request,) = plan.summarization_requests
    with pytest.raises(SummaryMissing) as refusal:
        CompactionExecutor().apply(transcript, plan)
    assert refusal.value.details["group_id"] == request.group_id


def test_to_dict_round_trips_through_the_constructors() -> None:
    transcript = chat(6)
    budget = CompactionBudget(150)
    plan = default_chain(prompt_id="p.v1").decide(transcript, budget)
    body = plan.to_dict()
    rebuilt = CompactionPlan(
        actions=tuple(
            TurnAction(
                a["turn_id"],
                Action(a["action"]),
                a["summary_group"],
                None if a["replacement"] is None else TurnReplacement(**a["replacement"]),
            )
            for a in body["actions"]
        ),
        summarization_requests=tuple(
            SummarizationRequest(r["group_id"], tuple(r["turn_ids"]), r["target_tokens"], r["prompt_id"])
            for r in body["summarization_requests"]
        ),
        tokens_before=body["tokens_before"],
        tokens_after_estimate=body["tokens_after_estimate"],
        policy_name=body["policy_name"],
        policy_version=body["policy_version"],
        estimator_ratio=body["estimator_ratio"],
        budget_unmet=body["budget_unmet"],
        transcript=transcript,
        budget=budget,
    )
    assert rebuilt == plan and hash(rebuilt) == hash(plan)
    assert rebuilt.plan_hash() == plan.plan_hash()
    summaries = {r.group_id: "earlier turns" for r in plan.summarization_requests}
    report = CompactionExecutor().apply(transcript, plan, summaries).report
    assert cutctx.CompactionReport(**report.to_dict()) == report


def test_a_reports_plan_hash_is_its_plans_whenever_it_is_read() -> None:
    transcript = chat(6)
    plan = default_chain(prompt_id="p.v1").decide(transcript, CompactionBudget(150))
    summaries = {r.group_id: "earlier turns" for r in plan.summarization_requests}
    executor = CompactionExecutor()
    first, second = (executor.apply(transcript, plan, summaries) for _ in range(2))
    # Compared before either hash is read, then after, and against one built with its hash.
    assert first == second and first.report == second.report
    assert hash(first.report) == hash(second.report)
    assert first.report.plan_hash == plan.plan_hash() == first.report.to_dict()["plan_hash"]
    assert f"plan_hash={plan.plan_hash()!r}" in repr(second.report)
    given = cutctx.CompactionReport(**first.report.to_dict())
    assert given == first.report and hash(given) == hash(first.report)
    other = cutctx.CompactionReport(**{**first.report.to_dict(), "plan_hash": "0" * 64})
    assert other != first.report


def test_a_view_makes_its_turns_on_first_read_and_keeps_the_inputs() -> None:
    transcript = chat(6)
    plan = DropOldestPolicy().decide(transcript, CompactionBudget(150))
    view = CompactionExecutor().apply(transcript, plan).transcript
    kept = {t.turn_id: t for t in transcript.turns}
    assert all(turn is kept[turn.turn_id] for turn in view.turns)
    assert view.turns is view.turns


# The modules the reference has, and what they may import: the standard library's pure
# modules and the package itself. The reference's own check of this runs over every module,
# and `cutctx.formats` and `cutctx.receipts` (which it does not have) parse JSON and name ledger
# files by design, so that check is deselected (docs/PYTHON.md) and this one holds the rest.
_REFERENCE_MODULES = (
    "__init__", "__about__", "types", "errors", "estimator", "executor", "_invariants",
    "policies/__init__", "policies/chain", "policies/drop_oldest", "policies/masking",
    "policies/summarizing",
)
_PURE = {"__future__", "collections", "dataclasses", "enum", "types", "typing", "math",
         "functools", "cutctx", "baseaicore"}


def test_the_reference_modules_import_no_client_store_clock_or_randomness() -> None:
    import ast
    from pathlib import Path

    root = Path(cutctx.__file__).parent
    for name in _REFERENCE_MODULES:
        tree = ast.parse((root / f"{name}.py").read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                tops = [a.name.split(".")[0] for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                tops = [node.module.split(".")[0]]
            else:
                continue
            for top in tops:
                assert top in _PURE, f"{name}.py imports {top}"


@pytest.mark.parametrize("module", ["cutctx.formats", "cutctx.receipts"])
def test_the_docstring_examples_run(module: str) -> None:
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(module))
    assert result.attempted > 0, "the module's docstrings hold examples"
    assert result.failed == 0
