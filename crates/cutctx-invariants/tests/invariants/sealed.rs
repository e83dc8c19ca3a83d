//! No public path yields a `CompactionPlan` that breaks a rule: an analysis vouches only for
//! the transcript and budget it was computed for, and each former way around that is refused.
//! (Assembling or editing an analysis, or a plan from a draft, does not compile: see the
//! `compile_fail` examples on `Analysis` and `CompactionPlan`.)

use cutctx_invariants::{Analysis, CompactionPlan, Decisions, build_plan};
use cutctx_model::{ErrorCode, Transcript};

use crate::{budget, drop_, keep, transcript, user};

/// Three user turns of 10; the last is protected under `budget(_, 1)`.
fn three() -> Transcript {
    transcript(vec![user("u1", 10), user("u2", 10), user("u3", 10)])
}

/// Drops `u2`, which is protected when the tail is two turns long.
fn drop_u2() -> Decisions {
    Decisions::actions(vec![keep("u1"), drop_("u2"), keep("u3")])
}

#[test]
fn an_analysis_under_another_budget_is_refused_by_build_plan() {
    let t = three();
    let tail_of_one = Analysis::of(&t, &budget(25, 1));
    // Under its own budget the drop is fine: the analysis carries the budget it was made for.
    let plan = build_plan(&t, &tail_of_one, drop_u2(), "p", "1").expect("u2 is removable");
    assert_eq!(plan.budget(), &budget(25, 1));
    // Validated against the budget that protects u2, the same decisions are refused.
    let err = CompactionPlan::validate(plan.into_draft(), &t, &budget(25, 2))
        .expect_err("u2 is protected under a tail of two");
    assert_eq!(err.code(), ErrorCode::Validation);
    // And an analysis is never silently re-read under another budget: `is_for` says no.
    assert!(!tail_of_one.is_for(&t, &budget(25, 2)));
}

#[test]
fn an_analysis_of_another_transcript_is_refused_even_when_it_looks_the_same() {
    let t = three();
    // The same turns, but u2 pinned: an analysis of the unpinned twin says u2 is removable.
    let pinned = transcript(vec![
        user("u1", 10),
        user("u2", 10).with_pinned(true),
        user("u3", 10),
    ]);
    let twin = Analysis::of(&t, &budget(25, 1));
    let err = build_plan(&pinned, &twin, drop_u2(), "p", "1").expect_err("not pinned's analysis");
    assert_eq!(err.code(), ErrorCode::Validation);
    assert_eq!(err.details()["analysis_turn_count"], 3);
    let err = CompactionPlan::validate_with(
        cutctx_invariants::PlanDraft {
            actions: vec![keep("u1"), drop_("u2"), keep("u3")],
            budget_unmet: false,
            estimator_ratio: None,
            policy_name: "p".into(),
            policy_version: "1".into(),
            summarization_requests: vec![],
            tokens_after_estimate: 20,
            tokens_before: 30,
        },
        &pinned,
        &twin,
    )
    .expect_err("not pinned's analysis");
    assert_eq!(err.code(), ErrorCode::Validation);
    // A clone shares the partition, so its analysis is the original's.
    let copy = t.clone();
    assert!(twin.is_for(&copy, &budget(25, 1)));
    build_plan(&copy, &twin, drop_u2(), "p", "1").expect("a clone is the same transcript");
}

#[test]
fn an_analysis_of_another_length_is_refused_not_recomputed() {
    let t = three();
    let short = transcript(vec![user("u1", 10)]);
    let err = build_plan(
        &t,
        &Analysis::of(&short, &budget(25, 1)),
        drop_u2(),
        "p",
        "1",
    )
    .expect_err("another transcript");
    assert_eq!(err.code(), ErrorCode::Validation);
}

#[test]
fn a_shape_analysis_never_vouches_for_a_plan() {
    let t = three();
    let b = budget(25, 1);
    let a = Analysis::of(&t, &b);
    let identity: Vec<Option<usize>> = (0..t.len()).map(Some).collect();
    let shape = a.project_shape(&identity, |_| false, |_| 10);
    // The same sets as the transcript's own analysis...
    assert_eq!(shape.untouchable(), a.untouchable());
    assert_eq!(shape.removable(), a.removable());
    // ...but bound to no transcript.
    assert!(!shape.is_for(&t, &b));
    let err = build_plan(&t, &shape, drop_u2(), "p", "1").expect_err("unbound");
    assert_eq!(err.code(), ErrorCode::Validation);
    let reestimated = a.with_estimates(&[10, 10, 10]).expect("same length");
    assert!(!reestimated.is_for(&t, &b));
    assert!(build_plan(&t, &reestimated, drop_u2(), "p", "1").is_err());
}
