//! Summaries: a missing one is refused with the request's details; extra ones are ignored.

use std::collections::BTreeMap;
use std::sync::Arc;

use cutctx_executor::apply;
use cutctx_invariants::{CompactionPlan, PlanDraft};
use cutctx_model::{ErrorCode, Role, SummarizationRequest, TurnAction};
use serde_json::{Value, json};

use crate::{budget, ids, mixed, summaries, transcript, turn};

fn missing(
    result: Result<cutctx_model::CompactedTranscript, cutctx_model::CompactionError>,
) -> (String, Value) {
    let err = result.expect_err("a summary is missing");
    assert_eq!(err.code(), ErrorCode::SummaryMissing, "{}", err.message());
    (
        err.message().to_owned(),
        serde_json::to_value(err.details()).expect("details are JSON"),
    )
}

#[test]
fn the_first_request_without_a_summary_is_named_with_its_details() {
    let (t, _, plan) = mixed();
    let g1 = json!({
        "group_id": "g1",
        "turn_ids": ["u2", "a2", "u5"],
        "target_tokens": 7,
        "prompt_id": "p.v1",
    });
    let g2 = json!({
        "group_id": "g2",
        "turn_ids": ["a3", "t3"],
        "target_tokens": 9,
        "prompt_id": "p.v1",
    });
    let (message, details) = missing(apply(&t, &plan, &BTreeMap::new()));
    assert_eq!(details, g1);
    assert!(message.contains("'g1'"), "{message}");
    let (_, details) = missing(apply(&t, &plan, &summaries(&[("g2", "only the second")])));
    assert_eq!(details, g1);
    let (message, details) = missing(apply(&t, &plan, &summaries(&[("g1", "only the first")])));
    assert_eq!(details, g2);
    assert!(message.contains("'g2'"), "{message}");
    // A summary under the summary turn's id is not a summary for the group.
    let (_, details) = missing(apply(
        &t,
        &plan,
        &summaries(&[("summary:g1", "x"), ("g2", "y")]),
    ));
    assert_eq!(details, g1);
}

#[test]
fn missing_summary_turn_ids_are_the_first_ten_in_request_order() {
    // Ids in descending order, so the first ten in order differ from the ten smallest.
    let names: Vec<String> = (0..12).rev().map(|i| format!("x{i:02}")).collect();
    let mut turns: Vec<_> = names.iter().map(|id| turn(id, Role::User, 10)).collect();
    turns.push(turn("tail", Role::User, 1));
    let t = transcript(turns);
    let group: Arc<str> = Arc::from("g");
    let mut actions: Vec<TurnAction> = names
        .iter()
        .map(|id| TurnAction::summarize(id.as_str(), group.clone()))
        .collect();
    actions.push(TurnAction::keep("tail"));
    let all: Vec<&str> = names.iter().map(String::as_str).collect();
    let draft = PlanDraft {
        actions,
        budget_unmet: false,
        estimator_ratio: None,
        policy_name: "p".to_owned(),
        policy_version: "1".to_owned(),
        summarization_requests: vec![
            SummarizationRequest::new(group, ids(&all), 5, "p.v1").expect("a request"),
        ],
        tokens_after_estimate: 6,
        tokens_before: 121,
    };
    let plan = CompactionPlan::validate(draft, &t, &budget(10, 1)).expect("valid");
    let (_, details) = missing(apply(&t, &plan, &BTreeMap::new()));
    assert_eq!(
        details,
        json!({
            "group_id": "g",
            "turn_ids": ["x11", "x10", "x09", "x08", "x07", "x06", "x05", "x04", "x03", "x02"],
            "target_tokens": 5,
            "prompt_id": "p.v1",
        })
    );
    // Twelve turns are summarized all the same once the summary is there.
    let out = apply(&t, &plan, &summaries(&[("g", "s")])).expect("fulfilled");
    assert_eq!(
        out.transcript.turns()[0]
            .metadata()
            .get("cutctx.replaced_turn_count")
            .map(String::as_str),
        Some("12")
    );
    assert_eq!(out.report.summarized_turn_ids.len(), 12);
}

#[test]
fn summaries_for_groups_the_plan_lacks_are_ignored() {
    let (t, _, plan) = mixed();
    let exact = apply(&t, &plan, &summaries(&[("g1", "a"), ("g2", "b")])).expect("valid");
    let extra = apply(
        &t,
        &plan,
        &summaries(&[
            ("g0", "c"),
            ("g1", "a"),
            ("g2", "b"),
            ("g3", "d"),
            ("summary:g1", "e"),
        ]),
    )
    .expect("extra summaries are ignored");
    assert_eq!(extra, exact);
}

#[test]
fn a_plan_without_requests_needs_no_summaries_and_ignores_any() {
    let t = transcript(vec![turn("a", Role::User, 5), turn("b", Role::User, 5)]);
    let draft = PlanDraft {
        actions: vec![TurnAction::drop_turn("a"), TurnAction::keep("b")],
        budget_unmet: false,
        estimator_ratio: None,
        policy_name: "p".to_owned(),
        policy_version: "1".to_owned(),
        summarization_requests: vec![],
        tokens_after_estimate: 5,
        tokens_before: 10,
    };
    let plan = CompactionPlan::validate(draft, &t, &budget(5, 1)).expect("valid");
    let none = apply(&t, &plan, &BTreeMap::new()).expect("no requests");
    let some = apply(&t, &plan, &summaries(&[("g", "unused")])).expect("ignored");
    assert_eq!(none, some);
    assert_eq!(none.transcript.turn_ids().collect::<Vec<_>>(), ["b"]);
    assert!(none.report.summary_turn_ids.is_empty());
}
