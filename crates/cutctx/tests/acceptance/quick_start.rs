//! The README quick start: drop-oldest on five turns, budget (100, protected 1).

use std::collections::BTreeMap;

use cutctx::{
    Action, CompactionBudget, CompactionExecutor, CompactionPolicy, DropOldestPolicy, Role,
    Transcript, TranscriptTurn,
};

use crate::assert_view_of;

fn readme_transcript() -> Transcript {
    Transcript::new(vec![
        TranscriptTurn::new("s", Role::System, "You are a careful assistant.", 12).expect("an id"),
        TranscriptTurn::new("u1", Role::User, "What changed in the build?", 30).expect("an id"),
        TranscriptTurn::new("a1", Role::Assistant, "Let me look.", 20)
            .expect("an id")
            .with_tool_call_id("c1"),
        TranscriptTurn::new("t1", Role::Tool, "<4 kB of build log>", 900)
            .expect("an id")
            .with_tool_call_id("c1"),
        TranscriptTurn::new("a2", Role::Assistant, "The cache key changed.", 25).expect("an id"),
    ])
    .expect("unique ids")
}

#[test]
fn the_readme_quick_start() {
    let transcript = readme_transcript();
    let before = transcript.clone();
    let budget = CompactionBudget::new(100).with_protected_recent_turns(1);

    let plan = DropOldestPolicy
        .decide(&transcript, &budget)
        .expect("the floor of 37 fits 100");
    assert_eq!(
        (
            plan.tokens_before,
            plan.tokens_after_estimate,
            plan.budget_unmet
        ),
        (987, 37, false)
    );
    let actions: Vec<(&str, Action)> = plan
        .actions
        .iter()
        .map(|a| (a.turn_id(), a.action()))
        .collect();
    assert_eq!(
        actions,
        [
            ("s", Action::Keep),
            ("u1", Action::Drop),
            ("a1", Action::Drop),
            ("t1", Action::Drop),
            ("a2", Action::Keep),
        ]
    );

    let view = CompactionExecutor
        .apply(&transcript, &plan, &BTreeMap::new())
        .expect("no summaries needed");
    // The tool exchange leaves as a unit.
    assert_eq!(view.transcript.turn_ids().collect::<Vec<_>>(), ["s", "a2"]);
    assert_eq!(
        view.report.dropped_turn_ids,
        vec!["u1".into(), "a1".into(), "t1".into()]
    );
    assert_eq!(view.report.kept_turn_ids, vec!["s".into(), "a2".into()]);
    assert_eq!((view.report.turns_before, view.report.turns_after), (5, 2));
    assert_eq!(view.report.plan_hash, plan.plan_hash());
    // The input is untouched, and the view's turns are the input's own.
    assert_eq!(
        transcript.turn_ids().collect::<Vec<_>>(),
        ["s", "u1", "a1", "t1", "a2"]
    );
    assert_view_of(
        &transcript,
        &before,
        &view.transcript,
        &view.report.kept_turn_ids,
    );
}
