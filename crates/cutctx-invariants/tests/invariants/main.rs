//! Integration tests of `cutctx-invariants`: the plan rules, the derived sets, plan building,
//! a property test against a naive re-implementation, and the conformance round-trip.
//!
//! Shared builders live here; each module covers one part of BEHAVIOUR.md §6.

mod goldens;
mod oracle;
mod plans;
mod rules;
mod sealed;
mod sets;

use std::sync::Arc;

use cutctx_invariants::{CompactionPlan, PlanDraft};
use cutctx_model::{
    Action, CompactionBudget, ErrorCode, Role, SummarizationRequest, Transcript, TranscriptTurn,
    TurnAction, TurnReplacement,
};
use serde_json::Value;

/// A turn with content `content of <id>`, unpinned, without a `tool_call_id`.
pub(crate) fn turn(id: &str, role: Role, tokens: u64) -> TranscriptTurn {
    TranscriptTurn::new(id, role, format!("content of {id}"), tokens).expect("a non-empty turn id")
}

/// A system turn.
pub(crate) fn sys(id: &str, tokens: u64) -> TranscriptTurn {
    turn(id, Role::System, tokens)
}

/// A user turn.
pub(crate) fn user(id: &str, tokens: u64) -> TranscriptTurn {
    turn(id, Role::User, tokens)
}

/// An assistant turn.
pub(crate) fn asst(id: &str, tokens: u64) -> TranscriptTurn {
    turn(id, Role::Assistant, tokens)
}

/// An assistant turn issuing the call `call`.
pub(crate) fn call(id: &str, call: &str, tokens: u64) -> TranscriptTurn {
    turn(id, Role::Assistant, tokens).with_tool_call_id(call)
}

/// A tool result for the call `call`.
pub(crate) fn result(id: &str, call: &str, tokens: u64) -> TranscriptTurn {
    turn(id, Role::Tool, tokens).with_tool_call_id(call)
}

/// A transcript of these turns (ids must be unique).
pub(crate) fn transcript(turns: Vec<TranscriptTurn>) -> Transcript {
    Transcript::new(turns).expect("unique turn ids")
}

/// A budget of `max` tokens protecting the last `protected` turns.
pub(crate) fn budget(max: u64, protected: u64) -> CompactionBudget {
    CompactionBudget::new(max).with_protected_recent_turns(protected)
}

/// `keep` for every id.
pub(crate) fn keep_all(t: &Transcript) -> Vec<TurnAction> {
    t.turn_ids().map(TurnAction::keep).collect()
}

/// A mask stub of `tokens` tokens.
pub(crate) fn stub(tokens: u64) -> TurnReplacement {
    TurnReplacement {
        content: format!("stub of {tokens}").into(),
        token_estimate: tokens,
    }
}

/// `mask` with a stub of `tokens` tokens.
pub(crate) fn mask(id: &str, tokens: u64) -> TurnAction {
    TurnAction::mask(id, stub(tokens))
}

/// `drop`.
pub(crate) fn drop_(id: &str) -> TurnAction {
    TurnAction::drop_turn(id)
}

/// `summarize` into `group`.
pub(crate) fn summ(id: &str, group: &str) -> TurnAction {
    TurnAction::summarize(id, Arc::from(group))
}

/// `keep`.
pub(crate) fn keep(id: &str) -> TurnAction {
    TurnAction::keep(id)
}

/// A request for `group` over `ids`, with prompt `p.v1`.
pub(crate) fn req(group: &str, ids: &[&str], target: u64) -> SummarizationRequest {
    let ids: Vec<Arc<str>> = ids.iter().map(|id| Arc::from(*id)).collect();
    SummarizationRequest::new(group, ids, target, "p.v1").expect("a well-formed request")
}

/// The view estimate, computed naively by id lookup as the reference does: `keep` counts the
/// turn, `mask` its stub, the rest nothing, plus each request's target once.
pub(crate) fn naive_after(
    t: &Transcript,
    actions: &[TurnAction],
    requests: &[SummarizationRequest],
) -> u64 {
    let mut total = 0;
    for a in actions {
        match a.action() {
            Action::Keep => {
                total += t
                    .turns()
                    .iter()
                    .find(|turn| turn.turn_id() == a.turn_id())
                    .map_or(0, TranscriptTurn::token_estimate);
            }
            Action::Mask => {
                total += a.replacement().expect("a mask has a stub").token_estimate;
            }
            Action::Drop | Action::Summarize => {}
        }
    }
    total
        + requests
            .iter()
            .map(SummarizationRequest::target_tokens)
            .sum::<u64>()
}

/// The naive sum of the transcript's estimates.
pub(crate) fn naive_before(t: &Transcript) -> u64 {
    t.turns().iter().map(TranscriptTurn::token_estimate).sum()
}

/// A draft with exactly these figures.
pub(crate) fn draft(
    actions: Vec<TurnAction>,
    requests: Vec<SummarizationRequest>,
    before: u64,
    after: u64,
    unmet: bool,
) -> PlanDraft {
    PlanDraft {
        actions,
        budget_unmet: unmet,
        estimator_ratio: None,
        policy_name: "test".to_owned(),
        policy_version: "1.0.0".to_owned(),
        summarization_requests: requests,
        tokens_after_estimate: after,
        tokens_before: before,
    }
}

/// A draft whose three figures are the correct ones, derived naively.
pub(crate) fn honest(
    t: &Transcript,
    b: &CompactionBudget,
    actions: Vec<TurnAction>,
    requests: Vec<SummarizationRequest>,
) -> PlanDraft {
    let after = naive_after(t, &actions, &requests);
    draft(
        actions,
        requests,
        naive_before(t),
        after,
        after > b.max_tokens,
    )
}

/// Validates and expects a refusal; returns its code and its whole `details` as JSON.
pub(crate) fn refusal(d: PlanDraft, t: &Transcript, b: &CompactionBudget) -> (ErrorCode, Value) {
    let err = CompactionPlan::validate(d, t, b).expect_err("the draft must be refused");
    let details = serde_json::to_value(err.details()).expect("details are JSON");
    (err.code(), details)
}

/// Validates and expects acceptance.
pub(crate) fn accept(d: PlanDraft, t: &Transcript, b: &CompactionBudget) -> CompactionPlan {
    match CompactionPlan::validate(d, t, b) {
        Ok(plan) => plan,
        Err(e) => panic!(
            "the draft must be accepted, got {}: {} {:?}",
            e.code(),
            e.message(),
            e.details()
        ),
    }
}
