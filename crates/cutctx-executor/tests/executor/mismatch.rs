//! A plan names its transcript's turns exactly, in order, or it is refused as a mismatch.

use std::collections::BTreeMap;

use cutctx_executor::{apply, check_match};
use cutctx_model::{CompactionError, ErrorCode, Role, TurnAction};
use serde_json::{Value, json};

use crate::{budget, ids, mixed, summaries, transcript, turn};

fn actions(ids: &[&str]) -> Vec<TurnAction> {
    ids.iter().map(|id| TurnAction::keep(*id)).collect()
}

fn users(ids: &[&str]) -> cutctx_model::Transcript {
    transcript(ids.iter().map(|id| turn(id, Role::User, 1)).collect())
}

fn mismatch(err: CompactionError) -> (String, Value) {
    assert_eq!(err.code(), ErrorCode::PlanMismatch, "{}", err.message());
    (
        err.message().to_owned(),
        serde_json::to_value(err.details()).expect("details are JSON"),
    )
}

#[test]
fn matching_ids_in_order_pass() {
    check_match(&users(&["a", "b", "c"]), &actions(&["a", "b", "c"])).expect("a match");
    check_match(&users(&[]), &[]).expect("empty matches empty");
}

#[test]
fn unknown_and_unplanned_ids_are_listed() {
    let (message, details) = mismatch(
        check_match(&users(&["a", "b", "d"]), &actions(&["a", "b", "c"])).expect_err("c vs d"),
    );
    assert_eq!(
        details,
        json!({ "unknown_turn_ids": ["c"], "unplanned_turn_ids": ["d"], "reordered": false })
    );
    assert!(message.contains("3 turns"), "{message}");

    let (_, details) = mismatch(
        check_match(&users(&["a", "b", "c"]), &actions(&["a", "b"])).expect_err("c unplanned"),
    );
    assert_eq!(
        details,
        json!({ "unknown_turn_ids": [], "unplanned_turn_ids": ["c"], "reordered": false })
    );

    let (_, details) =
        mismatch(check_match(&users(&["a"]), &actions(&["a", "z"])).expect_err("z unknown"));
    assert_eq!(
        details,
        json!({ "unknown_turn_ids": ["z"], "unplanned_turn_ids": [], "reordered": false })
    );
}

#[test]
fn the_same_ids_in_another_order_are_reordered() {
    let (message, details) = mismatch(
        check_match(&users(&["b", "a", "c"]), &actions(&["a", "b", "c"])).expect_err("order"),
    );
    assert_eq!(
        details,
        json!({ "unknown_turn_ids": [], "unplanned_turn_ids": [], "reordered": true })
    );
    assert!(message.contains("order"), "{message}");
    // As the reference computes it: the same sets with a repeat also count as reordered.
    let (_, details) =
        mismatch(check_match(&users(&["a", "b"]), &actions(&["a", "b", "a"])).expect_err("repeat"));
    assert_eq!(
        details,
        json!({ "unknown_turn_ids": [], "unplanned_turn_ids": [], "reordered": true })
    );
}

#[test]
fn listed_ids_are_sorted_and_capped_at_ten() {
    let planned: Vec<String> = (0..12).rev().map(|i| format!("p{i:02}")).collect();
    let actual: Vec<String> = (0..12).rev().map(|i| format!("q{i:02}")).collect();
    let planned: Vec<&str> = planned.iter().map(String::as_str).collect();
    let actual: Vec<&str> = actual.iter().map(String::as_str).collect();
    let (_, details) =
        mismatch(check_match(&users(&actual), &actions(&planned)).expect_err("disjoint"));
    let first_ten =
        |prefix: char| -> Vec<String> { (0..10).map(|i| format!("{prefix}{i:02}")).collect() };
    assert_eq!(
        details,
        json!({
            "unknown_turn_ids": first_ten('p'),
            "unplanned_turn_ids": first_ten('q'),
            "reordered": false,
        })
    );
}

#[test]
fn applying_a_plan_to_another_transcript_is_a_mismatch() {
    let (t, _, plan) = mixed();
    let fulfilled = summaries(&[("g1", "x"), ("g2", "y")]);

    // u3 replaced by x.
    let other = transcript(
        t.turns()
            .iter()
            .map(|turn| {
                if turn.turn_id() == "u3" {
                    crate::turn("x", Role::User, 15)
                } else {
                    turn.clone()
                }
            })
            .collect(),
    );
    let (_, details) = mismatch(apply(&other, &plan, &fulfilled).expect_err("another transcript"));
    assert_eq!(
        details,
        json!({ "unknown_turn_ids": ["u3"], "unplanned_turn_ids": ["x"], "reordered": false })
    );

    // The same turns, two of them swapped.
    let mut swapped: Vec<_> = t.turns().to_vec();
    swapped.swap(1, 2);
    let (_, details) =
        mismatch(apply(&transcript(swapped), &plan, &fulfilled).expect_err("reordered"));
    assert_eq!(
        details,
        json!({ "unknown_turn_ids": [], "unplanned_turn_ids": [], "reordered": true })
    );

    // The mismatch is found before any summary is looked for.
    let shorter = transcript(t.turns()[..10].to_vec());
    let (_, details) = mismatch(
        apply(&shorter, &plan, &BTreeMap::new()).expect_err("a mismatch, not a missing summary"),
    );
    assert_eq!(
        details,
        json!({ "unknown_turn_ids": ["u4"], "unplanned_turn_ids": [], "reordered": false })
    );
}

/// A plan validated against one transcript is validated again before it is applied to
/// another with the same ids: a turn pinned there and not here is never dropped.
#[test]
fn a_plan_for_a_twin_transcript_is_validated_again_before_it_is_applied() {
    use cutctx_policies::{CompactionPolicy, DropOldestPolicy};
    let free = transcript(vec![
        turn("u1", Role::User, 50),
        turn("u2", Role::User, 50),
        turn("u3", Role::User, 5),
    ]);
    let pinned = transcript(vec![
        turn("u1", Role::User, 50).with_pinned(true),
        turn("u2", Role::User, 50),
        turn("u3", Role::User, 5),
    ]);
    let b = budget(60, 1);
    let plan = DropOldestPolicy.decide(&free, &b).expect("fits");
    assert_eq!(plan.actions[0].action(), cutctx_model::Action::Drop);
    assert!(plan.is_for(&free) && !plan.is_for(&pinned));
    // Same ids, same order: the match check passes, the rules do not.
    let err =
        cutctx_executor::apply(&pinned, &plan, &BTreeMap::new()).expect_err("u1 is pinned here");
    assert_eq!(err.code(), cutctx_model::ErrorCode::Validation);
    // An equal transcript built again is another transcript, and the plan holds there.
    let rebuilt = transcript(free.turns().to_vec());
    let out = cutctx_executor::apply(&rebuilt, &plan, &BTreeMap::new()).expect("valid here too");
    assert_eq!(out.report.dropped_turn_ids, ids(&["u1"]));
}
