//! `build_plan` and `estimate_after` (BEHAVIOUR.md §6.3), and a plan's canonical bytes (§4).

use cutctx_invariants::{Analysis, CompactionPlan, Decisions, build_plan, estimate_after};
use cutctx_model::canonical::{canonical_json_value, sha256_hex};
use cutctx_model::{CompactionBudget, ErrorCode, Transcript, TurnAction, TurnReplacement};
use serde_json::json;

use crate::{
    accept, asst, budget, call, draft, drop_, keep, keep_all, mask, req, result, summ, sys,
    transcript, user,
};

/// s1 10 · u1 20 · a1 25 (c1) · t1 300 (c1) · a2 15 (c2) · t2 400 (c2) · a3 15 · u2 7; total 792.
fn mixed() -> Transcript {
    transcript(vec![
        sys("s1", 10),
        user("u1", 20),
        call("a1", "c1", 25),
        result("t1", "c1", 300),
        call("a2", "c2", 15),
        result("t2", "c2", 400),
        asst("a3", 15),
        user("u2", 7),
    ])
}

/// Every kind of action over `mixed()`: 10 (s1) + 12 (request) + 15 (a2) + 32 (t2 stub) + 7 (u2).
fn mixed_actions() -> Vec<TurnAction> {
    vec![
        keep("s1"),
        summ("u1", "g"),
        summ("a1", "g"),
        summ("t1", "g"),
        keep("a2"),
        mask("t2", 32),
        drop_("a3"),
        keep("u2"),
    ]
}

fn build(t: &Transcript, b: &CompactionBudget, actions: Vec<TurnAction>) -> CompactionPlan {
    build_plan(
        t,
        &Analysis::of(t, b),
        Decisions {
            actions,
            summarization_requests: vec![req("g", &["u1", "a1", "t1"], 12)],
            estimator_ratio: Some(4.0),
        },
        "mine",
        "2.0.0",
    )
    .expect("a valid plan")
}

#[test]
fn build_plan_derives_every_figure() {
    let t = mixed();
    let b = budget(1000, 1);
    let plan = build(&t, &b, mixed_actions());
    assert_eq!(plan.tokens_before, 792);
    assert_eq!(plan.tokens_after_estimate, 76);
    assert!(!plan.budget_unmet);
    assert_eq!(plan.actions, mixed_actions());
    assert_eq!(
        plan.summarization_requests,
        vec![req("g", &["u1", "a1", "t1"], 12)]
    );
    assert_eq!(
        (plan.policy_name.as_str(), plan.policy_version.as_str()),
        ("mine", "2.0.0")
    );
    assert_eq!(plan.estimator_ratio, Some(4.0));
    // The same draft, validated directly, is the same plan.
    let again = CompactionPlan::validate(plan.draft().clone(), &t, &b).expect("valid");
    assert_eq!(again, plan);
}

#[test]
fn build_plan_budget_unmet_is_strictly_greater() {
    let t = mixed();
    let at = build(&t, &budget(76, 1), mixed_actions());
    assert!(!at.budget_unmet, "76 fits a budget of 76");
    let over = build(&t, &budget(75, 1), mixed_actions());
    assert!(over.budget_unmet, "76 does not fit 75");
    assert_eq!(over.tokens_after_estimate, 76);
}

#[test]
fn build_plan_all_keep_counts_every_turn() {
    let t = mixed();
    let b = budget(791, 1);
    let plan = build_plan(
        &t,
        &Analysis::of(&t, &b),
        Decisions::actions(keep_all(&t)),
        "p",
        "1",
    )
    .expect("all keep is valid");
    assert_eq!(
        (
            plan.tokens_before,
            plan.tokens_after_estimate,
            plan.budget_unmet
        ),
        (792, 792, true)
    );
}

#[test]
fn build_plan_refuses_what_validate_refuses() {
    let t = mixed();
    let b = budget(1000, 1);
    // Dropping the system turn: rule 2.
    let mut actions = keep_all(&t);
    actions[0] = drop_("s1");
    let err = build_plan(
        &t,
        &Analysis::of(&t, &b),
        Decisions::actions(actions),
        "p",
        "1",
    )
    .expect_err("s1 is untouchable");
    assert_eq!(err.code(), ErrorCode::Validation);
    assert_eq!(
        serde_json::to_value(err.details()).expect("json"),
        json!({"touched_turn_ids": ["s1"], "actions": ["drop"], "protected_recent_turns": 1})
    );
    // An unsatisfiable budget comes first, whatever the actions.
    let b = budget(16, 1);
    let err = build_plan(
        &t,
        &Analysis::of(&t, &b),
        Decisions::actions(vec![]),
        "p",
        "1",
    )
    .expect_err("floor 17 > 16");
    assert_eq!(err.code(), ErrorCode::BudgetUnsatisfiable);
    assert_eq!(
        serde_json::to_value(err.details()).expect("json"),
        json!({
            "untouchable_tokens": 17,
            "max_tokens": 16,
            "untouchable_turn_count": 2,
            "protected_recent_turns": 1,
        })
    );
}

#[test]
fn estimate_after_counts_each_action_kind() {
    let t = mixed();
    let requests = vec![req("g", &["u1", "a1", "t1"], 12)];
    assert_eq!(estimate_after(&t, &mixed_actions(), &requests), 76);
    // Without the request, the summarized turns count nothing at all.
    assert_eq!(estimate_after(&t, &mixed_actions(), &[]), 64);
    // Each request counts once, whatever its size.
    let two = vec![req("g", &["u1", "a1", "t1"], 12), req("h", &["a3"], 1000)];
    assert_eq!(estimate_after(&t, &mixed_actions(), &two), 1076);
    // All keep is the transcript's total; all drop is zero.
    assert_eq!(estimate_after(&t, &keep_all(&t), &[]), 792);
    let dropped: Vec<TurnAction> = t.turn_ids().map(TurnAction::drop_turn).collect();
    assert_eq!(estimate_after(&t, &dropped, &[]), 0);
    // A mask counts its stub, not the turn, even when the stub is larger.
    let mut masked = keep_all(&t);
    masked[3] = mask("t1", 301);
    assert_eq!(estimate_after(&t, &masked, &[]), 792 - 300 + 301);
}

#[test]
fn canonical_json_has_the_reference_key_order() {
    let t = transcript(vec![
        sys("s1", 10),
        user("u1", 20),
        result("t1", "c1", 300),
        user("u2", 7),
    ]);
    let b = budget(100, 1);
    let actions = vec![
        keep("s1"),
        summ("u1", "g"),
        TurnAction::mask(
            "t1",
            TurnReplacement {
                content: "[masked]".into(),
                token_estimate: 2,
            },
        ),
        keep("u2"),
    ];
    let mut d = draft(actions, vec![req("g", &["u1"], 3)], 337, 22, false);
    d.estimator_ratio = Some(4.0);
    d.policy_name = "p".to_owned();
    let plan = accept(d, &t, &b);
    let expected = concat!(
        r#"{"actions":["#,
        r#"{"action":"keep","replacement":null,"summary_group":null,"turn_id":"s1"},"#,
        r#"{"action":"summarize","replacement":null,"summary_group":"g","turn_id":"u1"},"#,
        r#"{"action":"mask","replacement":{"content":"[masked]","token_estimate":2},"summary_group":null,"turn_id":"t1"},"#,
        r#"{"action":"keep","replacement":null,"summary_group":null,"turn_id":"u2"}],"#,
        r#""budget_unmet":false,"estimator_ratio":4.0,"policy_name":"p","policy_version":"1.0.0","#,
        r#""summarization_requests":[{"group_id":"g","prompt_id":"p.v1","target_tokens":3,"turn_ids":["u1"]}],"#,
        r#""tokens_after_estimate":22,"tokens_before":337}"#,
    );
    assert_eq!(plan.canonical_json(), expected);
    // The top-level keys, in order of appearance.
    let value: serde_json::Value = serde_json::from_str(&plan.canonical_json()).expect("json");
    let keys: Vec<&str> = value
        .as_object()
        .expect("object")
        .keys()
        .map(String::as_str)
        .collect();
    let mut positions: Vec<(usize, &str)> = keys
        .iter()
        .map(|k| {
            (
                expected.find(&format!("\"{k}\":")).expect("key present"),
                *k,
            )
        })
        .collect();
    positions.sort_unstable();
    let in_order: Vec<&str> = positions.into_iter().map(|(_, k)| k).collect();
    assert_eq!(
        in_order,
        [
            "actions",
            "budget_unmet",
            "estimator_ratio",
            "policy_name",
            "policy_version",
            "summarization_requests",
            "tokens_after_estimate",
            "tokens_before",
        ]
    );
    // Serializing the plan itself gives the same document, and the hash is of these bytes.
    let via_value = canonical_json_value(&serde_json::to_value(&plan).expect("plan serializes"));
    assert_eq!(via_value, expected);
    assert_eq!(plan.plan_hash(), sha256_hex(expected.as_bytes()));
}

#[test]
fn a_validated_plan_gives_back_its_draft() {
    let t = mixed();
    let b = budget(1000, 1);
    let plan = build(&t, &b, mixed_actions());
    let d = plan.draft().clone();
    assert_eq!(&*plan, &d);
    assert_eq!(plan.into_draft(), d);
}

#[test]
fn build_plan_reports_rule2_before_an_overflowing_estimate() {
    // The reference's integers do not overflow, so this plan is refused by rule 2, as
    // `CompactionPlan::validate` refuses the same actions. build_plan checks its u64 estimate
    // first and answers {"derived": "36893488147419103231"} instead.
    let t = transcript(vec![
        sys("s0", 1),
        result("t1", "c1", 1),
        result("t2", "c2", 1),
        user("u", 1),
    ]);
    let b = budget(100, 1);
    let actions = vec![
        drop_("s0"),
        mask("t1", u64::MAX),
        mask("t2", u64::MAX),
        keep("u"),
    ];
    let expected =
        json!({"touched_turn_ids": ["s0"], "actions": ["drop"], "protected_recent_turns": 1});
    let d = draft(actions.clone(), vec![], 4, u64::MAX, true);
    let err = CompactionPlan::validate(d, &t, &b).expect_err("s0 is dropped");
    assert_eq!(serde_json::to_value(err.details()).expect("json"), expected);
    let err = build_plan(
        &t,
        &Analysis::of(&t, &b),
        Decisions::actions(actions),
        "p",
        "1",
    )
    .expect_err("s0 is dropped");
    assert_eq!(err.code(), ErrorCode::Validation);
    assert_eq!(serde_json::to_value(err.details()).expect("json"), expected);
}
