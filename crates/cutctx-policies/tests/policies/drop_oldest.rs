//! `DropOldestPolicy` (BEHAVIOUR.md §7.1): whole exchanges, oldest first, until the budget fits.

use cutctx_model::Role;
use cutctx_policies::{CompactionPolicy, DropOldestPolicy};
use serde_json::json;

use crate::fixtures::{self, by_name};
use crate::{Figures, acts, budget, figures, transcript, turn, unsatisfiable};

#[test]
fn phase_one_cases_give_the_reference_plans() {
    let cases: [(&str, u64, u64, &str, Figures); 8] = [
        (
            "simple_chat",
            200,
            2,
            "s1:K u1:K a1:K u2:K a2:K",
            (125, 125, false, None),
        ),
        (
            "simple_chat",
            60,
            1,
            "s1:K u1:D a1:D u2:D a2:K",
            (125, 52, false, None),
        ),
        (
            "multi_call_exchange",
            100,
            1,
            "s1:K a1:D t1:D t2:D a2:K",
            (812, 42, false, None),
        ),
        (
            "multi_call_exchange",
            900,
            2,
            "s1:K a1:K t1:K t2:K a2:K",
            (812, 812, false, None),
        ),
        (
            "displaced_result",
            240,
            1,
            "a1:K u1:D u2:D t1:K",
            (335, 215, false, None),
        ),
        (
            "entirely_pinned",
            30,
            0,
            "p1:K p2:K p3:K",
            (30, 30, false, None),
        ),
        (
            "orphaned_result",
            45,
            1,
            "t0:D u1:K a1:K",
            (540, 40, false, None),
        ),
        ("empty", 0, 4, "", (0, 0, false, None)),
    ];
    for (name, max, protected, expected, expected_figures) in cases {
        let plan = DropOldestPolicy
            .decide(&by_name(name), &budget(max, protected))
            .expect("a satisfiable case");
        assert_eq!(acts(&plan), expected, "{name}-{max}-{protected}");
        assert_eq!(figures(&plan), expected_figures, "{name}-{max}-{protected}");
        assert!(plan.summarization_requests.is_empty());
        assert_eq!(
            (plan.policy_name.as_str(), plan.policy_version.as_str()),
            ("drop_oldest", "1.0.0")
        );
    }
}

#[test]
fn stops_as_soon_as_the_running_total_fits_and_equality_fits() {
    let t = fixtures::simple_chat();
    // 125 - 30 = 95: dropping u1 is enough for 100 and, exactly, for 95.
    for max in [100, 95] {
        let plan = DropOldestPolicy
            .decide(&t, &budget(max, 1))
            .expect("satisfiable");
        assert_eq!(acts(&plan), "s1:K u1:D a1:K u2:K a2:K", "max {max}");
        assert_eq!(figures(&plan), (125, 95, false, None));
    }
    let plan = DropOldestPolicy
        .decide(&t, &budget(94, 1))
        .expect("satisfiable");
    assert_eq!(acts(&plan), "s1:K u1:D a1:D u2:K a2:K");
    assert_eq!(figures(&plan), (125, 70, false, None));
}

#[test]
fn exchanges_go_whole_in_the_order_of_their_earliest_member() {
    // The exchange c1 starts at a1 (second), so it goes before u1 although t1 sits after u1.
    let t = transcript(vec![
        turn("u0", Role::User, 10),
        turn("a1", Role::Assistant, 10).with_tool_call_id("c1"),
        turn("u1", Role::User, 10),
        turn("t1", Role::Tool, 10).with_tool_call_id("c1"),
        turn("u2", Role::User, 10),
    ]);
    let plan = DropOldestPolicy
        .decide(&t, &budget(35, 1))
        .expect("satisfiable");
    assert_eq!(acts(&plan), "u0:D a1:D u1:K t1:D u2:K");
    assert_eq!(figures(&plan), (50, 20, false, None));
}

#[test]
fn an_exchange_with_a_pinned_member_is_skipped_whole_and_the_next_one_taken() {
    let t = transcript(vec![
        turn("a1", Role::Assistant, 50).with_tool_call_id("c1"),
        turn("t1", Role::Tool, 50)
            .with_tool_call_id("c1")
            .with_pinned(true),
        turn("u1", Role::User, 50),
        turn("u2", Role::User, 10),
    ]);
    let plan = DropOldestPolicy
        .decide(&t, &budget(70, 1))
        .expect("floor 60 fits 70");
    assert_eq!(acts(&plan), "a1:K t1:K u1:D u2:K");
    // Nothing else is removable: the plan says so instead of truncating.
    assert_eq!(figures(&plan), (160, 110, true, None));
}

#[test]
fn budget_unmet_when_no_exchange_is_removable() {
    // The protected t2 locks the whole exchange c1.
    let plan = DropOldestPolicy
        .decide(&fixtures::multi_call_exchange(), &budget(400, 2))
        .expect("floor 392 fits 400");
    assert_eq!(acts(&plan), "s1:K a1:K t1:K t2:K a2:K");
    assert_eq!(figures(&plan), (812, 812, true, None));
}

#[test]
fn a_tool_call_id_equal_to_a_turn_id_merges_nothing() {
    // y's tool_call_id is "x", the id of another turn: the two key spaces stay apart.
    let t = transcript(vec![
        turn("x", Role::User, 10),
        turn("y", Role::Tool, 10).with_tool_call_id("x"),
        turn("z", Role::User, 10),
    ]);
    let plan = DropOldestPolicy
        .decide(&t, &budget(20, 1))
        .expect("satisfiable");
    assert_eq!(acts(&plan), "x:D y:K z:K");
    assert_eq!(figures(&plan), (30, 20, false, None));
}

#[test]
fn the_untouchable_floor_above_the_budget_is_refused_with_both_figures() {
    let details =
        unsatisfiable(DropOldestPolicy.decide(&fixtures::entirely_pinned(), &budget(29, 0)));
    assert_eq!(
        details,
        json!({
            "untouchable_tokens": 30,
            "max_tokens": 29,
            "untouchable_turn_count": 3,
            "protected_recent_turns": 0,
        })
    );
    // A protected tail longer than the transcript makes every turn untouchable.
    let details = unsatisfiable(DropOldestPolicy.decide(&fixtures::simple_chat(), &budget(124, 9)));
    assert_eq!(
        details,
        json!({
            "untouchable_tokens": 125,
            "max_tokens": 124,
            "untouchable_turn_count": 5,
            "protected_recent_turns": 9,
        })
    );
}
