//! Integration tests of `cutctx-executor` (BEHAVIOUR.md §8): what applying a plan produces,
//! how mismatched plans and missing summaries are refused, and properties over random plans.
//!
//! Shared builders live here, with `mixed`: one hand-made plan that uses every action.

mod apply;
mod mismatch;
mod properties;
mod summaries;

use std::collections::BTreeMap;
use std::sync::Arc;

use cutctx_invariants::{CompactionPlan, PlanDraft};
use cutctx_model::{
    CompactionBudget, Role, SummarizationRequest, Transcript, TranscriptTurn, TurnAction,
    TurnReplacement,
};

/// A turn with content `content of <id>`.
pub(crate) fn turn(id: &str, role: Role, tokens: u64) -> TranscriptTurn {
    TranscriptTurn::new(id, role, format!("content of {id}"), tokens).expect("a non-empty turn id")
}

/// A transcript of these turns.
pub(crate) fn transcript(turns: Vec<TranscriptTurn>) -> Transcript {
    Transcript::new(turns).expect("unique turn ids")
}

/// A budget of `max` tokens protecting the last `protected` turns.
pub(crate) fn budget(max: u64, protected: u64) -> CompactionBudget {
    CompactionBudget::new(max).with_protected_recent_turns(protected)
}

/// Metadata from pairs.
pub(crate) fn meta(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

/// Summaries from pairs.
pub(crate) fn summaries(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    meta(pairs)
}

/// A list of ids, as the report holds them.
pub(crate) fn ids(list: &[&str]) -> Vec<Arc<str>> {
    list.iter().map(|s| Arc::from(*s)).collect()
}

/// The stub `t1` is masked with in [`mixed`].
pub(crate) const T1_STUB: &str = "[tool result masked by cutctx] (original: 300 tokens, sha256:0)";

/// Eleven turns and a plan using every action, with two summary groups; `g1` is not
/// contiguous (u2, a2, then u5 after g2's turns).
///
/// | turn | est | action |
/// |---|---|---|
/// | s1 system, metadata `source=sys` | 10 | keep |
/// | u1 | 20 | drop |
/// | a1 c1 | 25 | keep |
/// | t1 c1 tool, metadata `origin=grep`, `cutctx.kind=raw` | 300 | mask (32) |
/// | u2 | 30 | summarize g1 |
/// | a2 | 40 | summarize g1 |
/// | u3 | 15 | drop |
/// | a3 c3 | 35 | summarize g2 |
/// | t3 c3 tool | 200 | summarize g2 |
/// | u5 | 18 | summarize g1 |
/// | u4 | 12 | keep (protected) |
///
/// Requests: g1 (u2, a2, u5) target 7, g2 (a3, t3) target 9, prompt `p.v1`. Before 705, after
/// 10 + 25 + 32 + 12 + 7 + 9 = 95, budget (100, 1).
pub(crate) fn mixed() -> (Transcript, CompactionBudget, CompactionPlan) {
    let t = transcript(vec![
        turn("s1", Role::System, 10).with_metadata(Arc::new(meta(&[("source", "sys")]))),
        turn("u1", Role::User, 20),
        turn("a1", Role::Assistant, 25).with_tool_call_id("c1"),
        turn("t1", Role::Tool, 300)
            .with_tool_call_id("c1")
            .with_metadata(Arc::new(meta(&[
                ("origin", "grep"),
                ("cutctx.kind", "raw"),
            ]))),
        turn("u2", Role::User, 30),
        turn("a2", Role::Assistant, 40),
        turn("u3", Role::User, 15),
        turn("a3", Role::Assistant, 35).with_tool_call_id("c3"),
        turn("t3", Role::Tool, 200).with_tool_call_id("c3"),
        turn("u5", Role::User, 18),
        turn("u4", Role::User, 12),
    ]);
    let b = budget(100, 1);
    let g1: Arc<str> = Arc::from("g1");
    let g2: Arc<str> = Arc::from("g2");
    let draft = PlanDraft {
        actions: vec![
            TurnAction::keep("s1"),
            TurnAction::drop_turn("u1"),
            TurnAction::keep("a1"),
            TurnAction::mask(
                "t1",
                TurnReplacement {
                    content: T1_STUB.into(),
                    token_estimate: 32,
                },
            ),
            TurnAction::summarize("u2", g1.clone()),
            TurnAction::summarize("a2", g1.clone()),
            TurnAction::drop_turn("u3"),
            TurnAction::summarize("a3", g2.clone()),
            TurnAction::summarize("t3", g2.clone()),
            TurnAction::summarize("u5", g1.clone()),
            TurnAction::keep("u4"),
        ],
        budget_unmet: false,
        estimator_ratio: Some(4.0),
        policy_name: "hand_made".to_owned(),
        policy_version: "9.9.9".to_owned(),
        summarization_requests: vec![
            SummarizationRequest::new(g1, ids(&["u2", "a2", "u5"]), 7, "p.v1")
                .expect("a well-formed request"),
            SummarizationRequest::new(g2, ids(&["a3", "t3"]), 9, "p.v1")
                .expect("a well-formed request"),
        ],
        tokens_after_estimate: 95,
        tokens_before: 705,
    };
    let plan = CompactionPlan::validate(draft, &t, &b).expect("the hand-made plan is valid");
    (t, b, plan)
}
