//! The six plan rules of BEHAVIOUR.md §6.4, one broken at a time, and the order they run in.
//!
//! Every refusal is checked for its exact code and its whole `details` map.

use cutctx_invariants::CompactionPlan;
use cutctx_model::{ErrorCode, Transcript, TranscriptTurn, TurnAction};
use serde_json::json;

use crate::{
    accept, asst, budget, call, draft, drop_, honest, keep, keep_all, mask, refusal, req, result,
    summ, sys, transcript, user,
};

/// `{prefix}{i:02}` for `i` in `range`, in the order given.
fn ids(prefix: &str, range: impl Iterator<Item = usize>) -> Vec<String> {
    range.map(|i| format!("{prefix}{i:02}")).collect()
}

/// s0 system 10 · u1 20 · a1 25 (c1) · t1 300 (c1) · a2 15 · u2 7; total 377.
fn chat() -> Transcript {
    transcript(vec![
        sys("s0", 10),
        user("u1", 20),
        call("a1", "c1", 25),
        result("t1", "c1", 300),
        asst("a2", 15),
        user("u2", 7),
    ])
}

// ---------------------------------------------------------------------------------------------
// Rule 0: the budget is satisfiable.

#[test]
fn rule0_unsatisfiable_budget_is_refused_with_both_figures() {
    // Untouchable: p0 (pinned), s1 and s2 (system, s2 mid-transcript), a1 (the protected tail).
    let t = transcript(vec![
        user("p0", 5).with_pinned(true),
        sys("s1", 50),
        user("u1", 10),
        sys("s2", 3),
        asst("a1", 30),
    ]);
    let b = budget(87, 1);
    let (code, details) = refusal(honest(&t, &b, keep_all(&t), vec![]), &t, &b);
    assert_eq!(code, ErrorCode::BudgetUnsatisfiable);
    assert_eq!(
        details,
        json!({
            "untouchable_tokens": 88,
            "max_tokens": 87,
            "untouchable_turn_count": 4,
            "protected_recent_turns": 1,
        })
    );
    // One more token of budget and the same all-keep plan is valid (equality is satisfiable).
    let b = budget(88, 1);
    let plan = accept(honest(&t, &b, keep_all(&t), vec![]), &t, &b);
    assert!(plan.budget_unmet, "98 tokens kept against 88");
}

#[test]
fn rule0_is_checked_before_every_other_rule() {
    let t = chat();
    let b = budget(16, 1); // floor: s0 10 + u2 7 = 17
    // Breaks coverage, untouchable, and every figure as well.
    let d = draft(vec![drop_("s0")], vec![req("g", &["zz"], 3)], 0, 0, true);
    let (code, details) = refusal(d, &t, &b);
    assert_eq!(code, ErrorCode::BudgetUnsatisfiable);
    assert_eq!(
        details,
        json!({
            "untouchable_tokens": 17,
            "max_tokens": 16,
            "untouchable_turn_count": 2,
            "protected_recent_turns": 1,
        })
    );
}

// ---------------------------------------------------------------------------------------------
// Rule 1: coverage.

#[test]
fn rule1_unplanned_turn() {
    let t = chat();
    let b = budget(1000, 1);
    let actions = vec![keep("s0"), keep("u1"), keep("a1"), keep("t1"), keep("u2")];
    let err = CompactionPlan::validate(honest(&t, &b, actions, vec![]), &t, &b)
        .expect_err("a2 is unplanned");
    assert_eq!(err.code(), ErrorCode::Validation);
    assert_eq!(
        serde_json::to_value(err.details()).expect("json"),
        json!({"unplanned_turn_ids": ["a2"], "unknown_turn_ids": [], "repeated_turn_ids": []})
    );
    assert!(
        err.message()
            .contains("(1 unplanned, 0 unknown, 0 repeated)."),
        "{}",
        err.message()
    );
}

#[test]
fn rule1_unknown_turn() {
    let t = chat();
    let b = budget(1000, 1);
    let mut actions = keep_all(&t);
    actions.insert(3, keep("x9"));
    let (code, details) = refusal(honest(&t, &b, actions, vec![]), &t, &b);
    assert_eq!(code, ErrorCode::Validation);
    assert_eq!(
        details,
        json!({"unplanned_turn_ids": [], "unknown_turn_ids": ["x9"], "repeated_turn_ids": []})
    );
}

#[test]
fn rule1_repeated_turn() {
    let t = chat();
    let b = budget(1000, 1);
    let mut actions = keep_all(&t);
    actions.insert(2, keep("u1"));
    let (code, details) = refusal(honest(&t, &b, actions, vec![]), &t, &b);
    assert_eq!(code, ErrorCode::Validation);
    assert_eq!(
        details,
        json!({"unplanned_turn_ids": [], "unknown_turn_ids": [], "repeated_turn_ids": ["u1"]})
    );
}

#[test]
fn rule1_reordered_turns() {
    let t = chat();
    let b = budget(1000, 1);
    let mut actions = keep_all(&t);
    actions.swap(1, 4);
    let err = CompactionPlan::validate(honest(&t, &b, actions, vec![]), &t, &b)
        .expect_err("u1 and a2 are swapped");
    assert_eq!(err.code(), ErrorCode::Validation);
    assert_eq!(
        serde_json::to_value(err.details()).expect("json"),
        json!({"unplanned_turn_ids": [], "unknown_turn_ids": [], "repeated_turn_ids": []})
    );
    assert!(
        err.message()
            .contains("(0 unplanned, 0 unknown, 0 repeated, order differs)."),
        "{}",
        err.message()
    );
}

#[test]
fn rule1_lists_are_sorted() {
    let t = transcript(vec![
        user("z1", 1),
        user("b1", 1),
        user("m1", 1),
        user("a1", 1),
    ]);
    let b = budget(1000, 0);
    let actions = vec![
        keep("m1"),
        keep("q2"),
        keep("m1"),
        keep("c3"),
        keep("a1"),
        keep("q2"),
    ];
    let (code, details) = refusal(honest(&t, &b, actions, vec![]), &t, &b);
    assert_eq!(code, ErrorCode::Validation);
    assert_eq!(
        details,
        json!({
            "unplanned_turn_ids": ["b1", "z1"],
            "unknown_turn_ids": ["c3", "q2"],
            "repeated_turn_ids": ["m1", "q2"],
        })
    );
}

#[test]
fn rule1_lists_are_capped_at_ten() {
    // 12 turns named in reverse order; 12 unknown ids, each named twice.
    let turn_ids = ids("u", (0..12).rev());
    let t = transcript(turn_ids.iter().map(|id| user(id, 1)).collect());
    let b = budget(1000, 0);
    let unknown = ids("x", (0..12).rev());
    let actions: Vec<TurnAction> = unknown
        .iter()
        .chain(unknown.iter())
        .map(|id| keep(id))
        .collect();
    let (code, details) = refusal(honest(&t, &b, actions, vec![]), &t, &b);
    assert_eq!(code, ErrorCode::Validation);
    assert_eq!(
        details,
        json!({
            "unplanned_turn_ids": ids("u", 0..10),
            "unknown_turn_ids": ids("x", 0..10),
            "repeated_turn_ids": ids("x", 0..10),
        })
    );
}

// ---------------------------------------------------------------------------------------------
// Rule 2: untouchable turns are kept.

#[test]
fn rule2_system_turn_mid_transcript_is_untouchable() {
    let t = transcript(vec![
        user("u0", 5),
        sys("s1", 10),
        user("u2", 5),
        user("u3", 5),
    ]);
    let b = budget(100, 0);
    let actions = vec![keep("u0"), drop_("s1"), keep("u2"), keep("u3")];
    let (code, details) = refusal(honest(&t, &b, actions, vec![]), &t, &b);
    assert_eq!(code, ErrorCode::Validation);
    assert_eq!(
        details,
        json!({"touched_turn_ids": ["s1"], "actions": ["drop"], "protected_recent_turns": 0})
    );
}

#[test]
fn rule2_pinned_turn_is_untouchable_even_by_mask() {
    let t = transcript(vec![
        sys("s0", 5),
        result("p1", "c1", 40).with_pinned(true),
        user("u2", 5),
        user("u3", 5),
    ]);
    let b = budget(100, 0);
    let actions = vec![keep("s0"), mask("p1", 3), keep("u2"), keep("u3")];
    let (code, details) = refusal(honest(&t, &b, actions, vec![]), &t, &b);
    assert_eq!(code, ErrorCode::Validation);
    assert_eq!(
        details,
        json!({"touched_turn_ids": ["p1"], "actions": ["mask"], "protected_recent_turns": 0})
    );
}

#[test]
fn rule2_protected_tail_turn_is_untouchable() {
    let t = transcript(vec![
        sys("s0", 5),
        user("u1", 5),
        user("u2", 5),
        user("u3", 5),
    ]);
    let b = budget(100, 2);
    // u3 sits in the tail; its group and request are otherwise well formed.
    let actions = vec![keep("s0"), keep("u1"), keep("u2"), summ("u3", "g")];
    let (code, details) = refusal(honest(&t, &b, actions, vec![req("g", &["u3"], 1)]), &t, &b);
    assert_eq!(code, ErrorCode::Validation);
    assert_eq!(
        details,
        json!({"touched_turn_ids": ["u3"], "actions": ["summarize"], "protected_recent_turns": 2})
    );
    // One turn before the tail is free to go.
    let actions = vec![keep("s0"), drop_("u1"), keep("u2"), keep("u3")];
    accept(honest(&t, &b, actions, vec![]), &t, &b);
}

#[test]
fn rule2_ids_are_sorted_with_their_actions_alongside() {
    let t = transcript(vec![
        sys("zs", 1),
        user("am", 4).with_pinned(true),
        user("u1", 5),
        user("qt", 2),
    ]);
    let b = budget(100, 1);
    let actions = vec![drop_("zs"), mask("am", 1), keep("u1"), drop_("qt")];
    let (code, details) = refusal(honest(&t, &b, actions, vec![]), &t, &b);
    assert_eq!(code, ErrorCode::Validation);
    assert_eq!(
        details,
        json!({
            "touched_turn_ids": ["am", "qt", "zs"],
            "actions": ["mask", "drop", "drop"],
            "protected_recent_turns": 1,
        })
    );
}

#[test]
fn rule2_lists_are_capped_at_ten() {
    // 12 system turns named in reverse order, alternately dropped and masked, then one user.
    let sys_ids = ids("s", (0..12).rev());
    let mut turns: Vec<TranscriptTurn> = sys_ids.iter().map(|id| sys(id, 1)).collect();
    turns.push(user("u", 1));
    let t = transcript(turns);
    let b = budget(100, 0);
    let mut actions: Vec<TurnAction> = sys_ids
        .iter()
        .map(|id| {
            let n: usize = id[1..].parse().expect("two digits");
            if n.is_multiple_of(2) {
                drop_(id)
            } else {
                mask(id, 0)
            }
        })
        .collect();
    actions.push(keep("u"));
    let (code, details) = refusal(honest(&t, &b, actions, vec![]), &t, &b);
    assert_eq!(code, ErrorCode::Validation);
    assert_eq!(
        details,
        json!({
            "touched_turn_ids": ids("s", 0..10),
            "actions": ["drop", "mask", "drop", "mask", "drop", "mask", "drop", "mask", "drop", "mask"],
            "protected_recent_turns": 0,
        })
    );
}

// ---------------------------------------------------------------------------------------------
// Rule 3: exchanges travel together.

/// s0 system 5 · a1 20 (c1) · u1 10 · t1 300 (c1) · u2 5.
fn exchange() -> Transcript {
    transcript(vec![
        sys("s0", 5),
        call("a1", "c1", 20),
        user("u1", 10),
        result("t1", "c1", 300),
        user("u2", 5),
    ])
}

#[test]
fn rule3_partly_dropped_exchange() {
    let t = exchange();
    let b = budget(1000, 1);
    let actions = vec![keep("s0"), drop_("a1"), keep("u1"), keep("t1"), keep("u2")];
    let (code, details) = refusal(honest(&t, &b, actions, vec![]), &t, &b);
    assert_eq!(code, ErrorCode::Validation);
    assert_eq!(
        details,
        json!({"removed_turn_ids": ["a1"], "retained_turn_ids": ["t1"]})
    );
}

#[test]
fn rule3_a_masked_member_counts_as_retained() {
    let t = exchange();
    let b = budget(1000, 1);
    let actions = vec![
        keep("s0"),
        mask("a1", 2),
        keep("u1"),
        drop_("t1"),
        keep("u2"),
    ];
    let (code, details) = refusal(honest(&t, &b, actions, vec![]), &t, &b);
    assert_eq!(code, ErrorCode::Validation);
    assert_eq!(
        details,
        json!({"removed_turn_ids": ["t1"], "retained_turn_ids": ["a1"]})
    );
    // Mask and keep mix freely.
    let actions = vec![
        keep("s0"),
        keep("a1"),
        keep("u1"),
        mask("t1", 30),
        keep("u2"),
    ];
    accept(honest(&t, &b, actions, vec![]), &t, &b);
}

#[test]
fn rule3_partly_summarized_exchange() {
    let t = exchange();
    let b = budget(1000, 1);
    let actions = vec![
        keep("s0"),
        keep("a1"),
        keep("u1"),
        summ("t1", "g"),
        keep("u2"),
    ];
    let (code, details) = refusal(honest(&t, &b, actions, vec![req("g", &["t1"], 4)]), &t, &b);
    assert_eq!(code, ErrorCode::Validation);
    assert_eq!(
        details,
        json!({"removed_turn_ids": ["t1"], "retained_turn_ids": ["a1"]})
    );
}

#[test]
fn rule3_displaced_result_in_the_tail_locks_its_call() {
    // BEHAVIOUR §10.1 displaced_result: the call is far from its protected result.
    let t = transcript(vec![
        call("a1", "c1", 200),
        user("u1", 60),
        user("u2", 60),
        result("t1", "c1", 15),
    ]);
    let b = budget(240, 1);
    let actions = vec![drop_("a1"), keep("u1"), keep("u2"), keep("t1")];
    let (code, details) = refusal(honest(&t, &b, actions, vec![]), &t, &b);
    assert_eq!(code, ErrorCode::Validation);
    assert_eq!(
        details,
        json!({"removed_turn_ids": ["a1"], "retained_turn_ids": ["t1"]})
    );
}

#[test]
fn rule3_partial_lists_are_sorted() {
    let t = transcript(vec![
        call("zz", "c", 1),
        result("aa", "c", 1),
        result("mm", "c", 1),
        result("qq", "c", 1),
        user("u", 1),
    ]);
    let b = budget(1000, 1);
    let actions = vec![
        drop_("zz"),
        keep("aa"),
        drop_("mm"),
        mask("qq", 0),
        keep("u"),
    ];
    let (code, details) = refusal(honest(&t, &b, actions, vec![]), &t, &b);
    assert_eq!(code, ErrorCode::Validation);
    assert_eq!(
        details,
        json!({"removed_turn_ids": ["mm", "zz"], "retained_turn_ids": ["aa", "qq"]})
    );
}

#[test]
fn rule3_partial_lists_are_capped_at_ten() {
    // One exchange of 12 members named in reverse order; all but m00 (the last) dropped.
    let members = ids("m", (0..12).rev());
    let mut turns: Vec<TranscriptTurn> = members.iter().map(|id| result(id, "c", 1)).collect();
    turns.push(user("u", 1));
    let t = transcript(turns);
    let b = budget(1000, 1);
    let mut actions: Vec<TurnAction> = members
        .iter()
        .map(|id| if id == "m00" { keep(id) } else { drop_(id) })
        .collect();
    actions.push(keep("u"));
    let (code, details) = refusal(honest(&t, &b, actions, vec![]), &t, &b);
    assert_eq!(code, ErrorCode::Validation);
    assert_eq!(
        details,
        json!({"removed_turn_ids": ids("m", 1..11), "retained_turn_ids": ["m00"]})
    );
}

#[test]
fn rule3_exchange_removed_by_mixed_actions() {
    let t = exchange();
    let b = budget(1000, 1);
    let actions = vec![
        keep("s0"),
        drop_("a1"),
        keep("u1"),
        summ("t1", "g"),
        keep("u2"),
    ];
    let (code, details) = refusal(honest(&t, &b, actions, vec![req("g", &["t1"], 4)]), &t, &b);
    assert_eq!(code, ErrorCode::Validation);
    assert_eq!(
        details,
        json!({"turn_ids": ["a1", "t1"], "actions": ["drop", "summarize"], "summary_groups": ["", "g"]})
    );
}

#[test]
fn rule3_exchange_summarized_into_two_groups() {
    let t = exchange();
    let b = budget(1000, 1);
    let actions = vec![
        keep("s0"),
        summ("a1", "g2"),
        keep("u1"),
        summ("t1", "g1"),
        keep("u2"),
    ];
    let requests = vec![req("g2", &["a1"], 4), req("g1", &["t1"], 4)];
    let (code, details) = refusal(honest(&t, &b, actions, requests), &t, &b);
    assert_eq!(code, ErrorCode::Validation);
    assert_eq!(
        details,
        json!({"turn_ids": ["a1", "t1"], "actions": ["summarize"], "summary_groups": ["g1", "g2"]})
    );
    // The same exchange in one group is fine.
    let actions = vec![
        keep("s0"),
        summ("a1", "g"),
        summ("u1", "g"),
        summ("t1", "g"),
        keep("u2"),
    ];
    accept(
        honest(&t, &b, actions, vec![req("g", &["a1", "u1", "t1"], 4)]),
        &t,
        &b,
    );
}

#[test]
fn rule3_mixed_lists_are_capped_at_ten() {
    // 12 members named in reverse order, each summarized into its own group g<same number>.
    let members = ids("m", (0..12).rev());
    let mut turns: Vec<TranscriptTurn> = members.iter().map(|id| result(id, "c", 1)).collect();
    turns.push(user("u", 1));
    let t = transcript(turns);
    let b = budget(1000, 1);
    let group = |id: &str| format!("g{}", &id[1..]);
    let mut actions: Vec<TurnAction> = members.iter().map(|id| summ(id, &group(id))).collect();
    actions.push(keep("u"));
    let requests = members
        .iter()
        .map(|id| req(&group(id), &[id.as_str()], 1))
        .collect();
    let (code, details) = refusal(honest(&t, &b, actions, requests), &t, &b);
    assert_eq!(code, ErrorCode::Validation);
    assert_eq!(
        details,
        json!({"turn_ids": ids("m", 0..10), "actions": ["summarize"], "summary_groups": ids("g", 0..10)})
    );
}

#[test]
fn rule3_reports_the_exchange_with_the_earliest_member_first() {
    // Exchange c2 starts at position 0, c1 at position 1; both are split.
    let t = transcript(vec![
        result("x0", "c2", 1),
        call("y1", "c1", 1),
        result("y2", "c1", 1),
        call("x3", "c2", 1),
        user("u", 1),
    ]);
    let b = budget(1000, 1);
    let actions = vec![drop_("x0"), drop_("y1"), keep("y2"), keep("x3"), keep("u")];
    let (code, details) = refusal(honest(&t, &b, actions, vec![]), &t, &b);
    assert_eq!(code, ErrorCode::Validation);
    assert_eq!(
        details,
        json!({"removed_turn_ids": ["x0"], "retained_turn_ids": ["x3"]})
    );
}

#[test]
fn rule3_a_call_id_equal_to_a_turn_id_does_not_merge() {
    // "t1"'s tool_call_id is "u1", another turn's id: dropping t1 alone splits nothing.
    let t = transcript(vec![user("u1", 5), result("t1", "u1", 5), user("u2", 5)]);
    let b = budget(1000, 1);
    let actions = vec![keep("u1"), drop_("t1"), keep("u2")];
    accept(honest(&t, &b, actions, vec![]), &t, &b);
}

// ---------------------------------------------------------------------------------------------
// Rule 4: summary groups and requests.

/// s0 system 5 · u1 20 · a1 20 · u2 20 · a2 20 · u3 5.
fn groups() -> Transcript {
    transcript(vec![
        sys("s0", 5),
        user("u1", 20),
        asst("a1", 20),
        user("u2", 20),
        asst("a2", 20),
        user("u3", 5),
    ])
}

/// `n` user turns `u00`.. then a tail user `tail`.
fn users(n: usize) -> Transcript {
    let mut turns: Vec<TranscriptTurn> = ids("u", 0..n).iter().map(|id| user(id, 1)).collect();
    turns.push(user("tail", 1));
    transcript(turns)
}

#[test]
fn rule4_duplicate_group_ids_are_listed_sorted_with_repeats() {
    let t = groups();
    let b = budget(1000, 1);
    let actions = vec![
        keep("s0"),
        summ("u1", "h"),
        summ("a1", "g"),
        summ("u2", "g"),
        keep("a2"),
        keep("u3"),
    ];
    let requests = vec![
        req("h", &["u1"], 1),
        req("g", &["a1"], 1),
        req("g", &["u2"], 1),
    ];
    let (code, details) = refusal(honest(&t, &b, actions, requests), &t, &b);
    assert_eq!(code, ErrorCode::Validation);
    assert_eq!(details, json!({"group_ids": ["g", "g", "h"]}));
}

#[test]
fn rule4_duplicate_group_ids_are_capped_at_ten() {
    // Groups k10..k00 (reverse), each one turn, plus a second request for k00.
    let t = users(11);
    let b = budget(1000, 1);
    let turn_ids = ids("u", 0..11);
    let group_ids = ids("k", (0..11).rev());
    let mut actions: Vec<TurnAction> = turn_ids
        .iter()
        .zip(&group_ids)
        .map(|(id, g)| summ(id, g))
        .collect();
    actions.push(keep("tail"));
    let mut requests: Vec<_> = turn_ids
        .iter()
        .zip(&group_ids)
        .map(|(id, g)| req(g, &[id.as_str()], 1))
        .collect();
    requests.push(req("k00", &["u00"], 1));
    let (code, details) = refusal(honest(&t, &b, actions, requests), &t, &b);
    assert_eq!(code, ErrorCode::Validation);
    assert_eq!(
        details,
        json!({"group_ids": ["k00", "k00", "k01", "k02", "k03", "k04", "k05", "k06", "k07", "k08"]})
    );
}

#[test]
fn rule4_group_without_request() {
    let t = groups();
    let b = budget(1000, 1);
    let actions = vec![
        keep("s0"),
        summ("u1", "g"),
        keep("a1"),
        keep("u2"),
        keep("a2"),
        keep("u3"),
    ];
    let (code, details) = refusal(honest(&t, &b, actions, vec![]), &t, &b);
    assert_eq!(code, ErrorCode::Validation);
    assert_eq!(
        details,
        json!({"groups_without_request": ["g"], "requests_without_turns": []})
    );
}

#[test]
fn rule4_request_without_turns() {
    let t = groups();
    let b = budget(1000, 1);
    let (code, details) = refusal(
        honest(&t, &b, keep_all(&t), vec![req("h", &["u1"], 3)]),
        &t,
        &b,
    );
    assert_eq!(code, ErrorCode::Validation);
    assert_eq!(
        details,
        json!({"groups_without_request": [], "requests_without_turns": ["h"]})
    );
}

#[test]
fn rule4_group_and_request_sets_are_sorted() {
    let t = groups();
    let b = budget(1000, 1);
    let actions = vec![
        keep("s0"),
        summ("u1", "zz"),
        summ("a1", "bb"),
        keep("u2"),
        keep("a2"),
        keep("u3"),
    ];
    let requests = vec![req("yy", &["u2"], 1), req("aa", &["a2"], 1)];
    let (code, details) = refusal(honest(&t, &b, actions, requests), &t, &b);
    assert_eq!(code, ErrorCode::Validation);
    assert_eq!(
        details,
        json!({"groups_without_request": ["bb", "zz"], "requests_without_turns": ["aa", "yy"]})
    );
}

#[test]
fn rule4_group_and_request_sets_are_capped_at_ten() {
    let t = users(12);
    let b = budget(1000, 1);
    let turn_ids = ids("u", 0..12);
    let mut actions: Vec<TurnAction> = turn_ids
        .iter()
        .zip(ids("a", (0..12).rev()))
        .map(|(id, g)| summ(id, &g))
        .collect();
    actions.push(keep("tail"));
    let requests = turn_ids
        .iter()
        .zip(ids("b", (0..12).rev()))
        .map(|(id, g)| req(&g, &[id.as_str()], 1))
        .collect();
    let (code, details) = refusal(honest(&t, &b, actions, requests), &t, &b);
    assert_eq!(code, ErrorCode::Validation);
    assert_eq!(
        details,
        json!({"groups_without_request": ids("a", 0..10), "requests_without_turns": ids("b", 0..10)})
    );
}

#[test]
fn rule4_request_turns_in_another_order() {
    let t = groups();
    let b = budget(1000, 1);
    let actions = vec![
        keep("s0"),
        summ("u1", "g"),
        summ("a1", "g"),
        keep("u2"),
        keep("a2"),
        keep("u3"),
    ];
    let (code, details) = refusal(
        honest(&t, &b, actions, vec![req("g", &["a1", "u1"], 4)]),
        &t,
        &b,
    );
    assert_eq!(code, ErrorCode::Validation);
    assert_eq!(
        details,
        json!({"group_id": "g", "request_turn_ids": ["a1", "u1"], "action_turn_ids": ["u1", "a1"]})
    );
}

#[test]
fn rule4_request_turns_missing_or_extra() {
    let t = groups();
    let b = budget(1000, 1);
    let actions = vec![
        keep("s0"),
        summ("u1", "g"),
        summ("a1", "g"),
        keep("u2"),
        keep("a2"),
        keep("u3"),
    ];
    let (code, details) = refusal(
        honest(&t, &b, actions.clone(), vec![req("g", &["u1"], 4)]),
        &t,
        &b,
    );
    assert_eq!(code, ErrorCode::Validation);
    assert_eq!(
        details,
        json!({"group_id": "g", "request_turn_ids": ["u1"], "action_turn_ids": ["u1", "a1"]})
    );
    let (code, details) = refusal(
        honest(&t, &b, actions, vec![req("g", &["u1", "a1", "u2"], 4)]),
        &t,
        &b,
    );
    assert_eq!(code, ErrorCode::Validation);
    assert_eq!(
        details,
        json!({"group_id": "g", "request_turn_ids": ["u1", "a1", "u2"], "action_turn_ids": ["u1", "a1"]})
    );
}

#[test]
fn rule4_the_first_disagreeing_request_in_plan_order_is_reported() {
    let t = groups();
    let b = budget(1000, 1);
    let actions = vec![
        keep("s0"),
        summ("u1", "g"),
        summ("a1", "g"),
        summ("u2", "h"),
        summ("a2", "h"),
        keep("u3"),
    ];
    let requests = vec![req("g", &["u1"], 1), req("h", &["a2"], 1)];
    let (code, details) = refusal(honest(&t, &b, actions, requests), &t, &b);
    assert_eq!(code, ErrorCode::Validation);
    assert_eq!(
        details,
        json!({"group_id": "g", "request_turn_ids": ["u1"], "action_turn_ids": ["u1", "a1"]})
    );
}

#[test]
fn rule4_request_turn_lists_are_capped_at_ten_and_not_sorted() {
    // Turns u00..u11 summarized into one group; the request lists them in reverse.
    let t = users(12);
    let b = budget(1000, 1);
    let turn_ids = ids("u", 0..12);
    let mut actions: Vec<TurnAction> = turn_ids.iter().map(|id| summ(id, "g")).collect();
    actions.push(keep("tail"));
    let reversed: Vec<&str> = turn_ids.iter().rev().map(String::as_str).collect();
    let (code, details) = refusal(
        honest(&t, &b, actions, vec![req("g", &reversed, 4)]),
        &t,
        &b,
    );
    assert_eq!(code, ErrorCode::Validation);
    assert_eq!(
        details,
        json!({
            "group_id": "g",
            "request_turn_ids": ids("u", (2..12).rev()),
            "action_turn_ids": ids("u", 0..10),
        })
    );
}

#[test]
fn rule4_summary_turn_id_collides_with_an_existing_turn() {
    let t = transcript(vec![
        sys("s0", 5),
        user("summary:g", 5),
        user("u1", 20),
        asst("a1", 20),
        user("u3", 5),
    ]);
    let b = budget(1000, 1);
    let actions = vec![
        keep("s0"),
        keep("summary:g"),
        summ("u1", "g"),
        keep("a1"),
        keep("u3"),
    ];
    let (code, details) = refusal(honest(&t, &b, actions, vec![req("g", &["u1"], 3)]), &t, &b);
    assert_eq!(code, ErrorCode::Validation);
    assert_eq!(details, json!({"group_ids": ["g"]}));
}

#[test]
fn rule4_collisions_are_sorted_and_capped_at_ten() {
    // Groups k11..k00 (reverse) over u00..u11; every summary:kNN is already a turn, except
    // that the extra group "free" does not collide.
    let mut turns: Vec<TranscriptTurn> = ids("summary:k", 0..12)
        .iter()
        .map(|id| user(id, 1))
        .collect();
    turns.extend(ids("u", 0..13).iter().map(|id| user(id, 1)));
    turns.push(user("tail", 1));
    let t = transcript(turns);
    let b = budget(1000, 1);
    let groups = ids("k", (0..12).rev());
    let mut actions: Vec<TurnAction> = ids("summary:k", 0..12).iter().map(|id| keep(id)).collect();
    let mut requests = Vec::new();
    for (i, id) in ids("u", 0..13).iter().enumerate() {
        let g = groups.get(i).cloned().unwrap_or_else(|| "free".to_owned());
        actions.push(summ(id, &g));
        requests.push(req(&g, &[id.as_str()], 1));
    }
    actions.push(keep("tail"));
    let (code, details) = refusal(honest(&t, &b, actions, requests), &t, &b);
    assert_eq!(code, ErrorCode::Validation);
    assert_eq!(details, json!({"group_ids": ids("k", 0..10)}));
}

#[test]
fn rule4_requests_out_of_order_are_listed_in_plan_order() {
    let t = groups();
    let b = budget(1000, 1);
    let actions = vec![
        keep("s0"),
        summ("u1", "aa"),
        keep("a1"),
        summ("u2", "zz"),
        keep("a2"),
        keep("u3"),
    ];
    let requests = vec![req("zz", &["u2"], 1), req("aa", &["u1"], 1)];
    let (code, details) = refusal(honest(&t, &b, actions.clone(), requests), &t, &b);
    assert_eq!(code, ErrorCode::Validation);
    assert_eq!(details, json!({"group_ids": ["zz", "aa"]}));
    // In transcript order, the same plan is valid.
    let requests = vec![req("aa", &["u1"], 1), req("zz", &["u2"], 1)];
    accept(honest(&t, &b, actions, requests), &t, &b);
}

#[test]
fn rule4_out_of_order_list_is_capped_at_ten() {
    let t = users(12);
    let b = budget(1000, 1);
    let turn_ids = ids("u", 0..12);
    let group_ids = ids("g", 0..12);
    let mut actions: Vec<TurnAction> = turn_ids
        .iter()
        .zip(&group_ids)
        .map(|(id, g)| summ(id, g))
        .collect();
    actions.push(keep("tail"));
    let requests = turn_ids
        .iter()
        .zip(&group_ids)
        .rev()
        .map(|(id, g)| req(g, &[id.as_str()], 1))
        .collect();
    let (code, details) = refusal(honest(&t, &b, actions, requests), &t, &b);
    assert_eq!(code, ErrorCode::Validation);
    assert_eq!(details, json!({"group_ids": ids("g", (2..12).rev())}));
}

#[test]
fn rule4_checks_run_in_order() {
    let t = groups();
    let b = budget(1000, 1);
    // Duplicate ids and a group without request: the duplicate is reported.
    let actions = vec![
        keep("s0"),
        summ("u1", "g"),
        summ("a1", "x"),
        keep("u2"),
        keep("a2"),
        keep("u3"),
    ];
    let requests = vec![req("g", &["u1"], 1), req("g", &["u1"], 1)];
    assert_eq!(
        refusal(honest(&t, &b, actions, requests), &t, &b).1,
        json!({"group_ids": ["g", "g"]})
    );
    // A request without turns and a disagreeing request: the set mismatch is reported.
    let actions = vec![
        keep("s0"),
        summ("u1", "g"),
        summ("a1", "g"),
        keep("u2"),
        keep("a2"),
        keep("u3"),
    ];
    let requests = vec![req("g", &["u1"], 1), req("h", &["u2"], 1)];
    assert_eq!(
        refusal(honest(&t, &b, actions, requests), &t, &b).1,
        json!({"groups_without_request": [], "requests_without_turns": ["h"]})
    );
    // A disagreeing request and a collision: the disagreement is reported.
    let t2 = transcript(vec![
        sys("s0", 5),
        user("summary:g", 5),
        user("u1", 5),
        user("a1", 5),
        user("u3", 5),
    ]);
    let actions = vec![
        keep("s0"),
        keep("summary:g"),
        summ("u1", "g"),
        summ("a1", "g"),
        keep("u3"),
    ];
    assert_eq!(
        refusal(
            honest(&t2, &b, actions, vec![req("g", &["a1", "u1"], 1)]),
            &t2,
            &b
        )
        .1,
        json!({"group_id": "g", "request_turn_ids": ["a1", "u1"], "action_turn_ids": ["u1", "a1"]})
    );
    // A collision and requests out of order: the collision is reported.
    let actions = vec![
        keep("s0"),
        keep("summary:g"),
        summ("u1", "h"),
        summ("a1", "g"),
        keep("u3"),
    ];
    let requests = vec![req("g", &["a1"], 1), req("h", &["u1"], 1)];
    assert_eq!(
        refusal(honest(&t2, &b, actions, requests), &t2, &b).1,
        json!({"group_ids": ["g"]})
    );
}

// ---------------------------------------------------------------------------------------------
// Rule 5: the figures.

/// Over `chat()`: keep s0, drop u1, keep a1, mask t1 to 32, keep a2, keep u2: 10+25+32+15+7 = 89.
fn figures_actions() -> Vec<TurnAction> {
    vec![
        keep("s0"),
        drop_("u1"),
        keep("a1"),
        mask("t1", 32),
        keep("a2"),
        keep("u2"),
    ]
}

#[test]
fn rule5_wrong_tokens_before() {
    let t = chat();
    let b = budget(100, 1);
    accept(draft(figures_actions(), vec![], 377, 89, false), &t, &b);
    let (code, details) = refusal(draft(figures_actions(), vec![], 376, 89, false), &t, &b);
    assert_eq!(code, ErrorCode::Validation);
    assert_eq!(details, json!({"declared": 376, "transcript": 377}));
}

#[test]
fn rule5_wrong_tokens_after() {
    let t = chat();
    let b = budget(100, 1);
    let (code, details) = refusal(draft(figures_actions(), vec![], 377, 90, false), &t, &b);
    assert_eq!(code, ErrorCode::Validation);
    assert_eq!(details, json!({"declared": 90, "derived": 89}));
}

#[test]
fn rule5_forged_tokens_after_that_claims_to_fit() {
    // The view is 89 against a budget of 80; the draft claims 80 and budget_unmet false.
    let t = chat();
    let b = budget(80, 1);
    let (code, details) = refusal(draft(figures_actions(), vec![], 377, 80, false), &t, &b);
    assert_eq!(code, ErrorCode::Validation);
    assert_eq!(details, json!({"declared": 80, "derived": 89}));
    accept(draft(figures_actions(), vec![], 377, 89, true), &t, &b);
}

#[test]
fn rule5_derived_after_counts_each_request_target_once() {
    let t = chat();
    let b = budget(1000, 1);
    // keep s0 10, summarize u1 (g), keep a1 25, mask t1 32, summarize a2 (h), keep u2 7;
    // targets 6 and 4: 10+25+32+7+6+4 = 84.
    let actions = vec![
        keep("s0"),
        summ("u1", "g"),
        keep("a1"),
        mask("t1", 32),
        summ("a2", "h"),
        keep("u2"),
    ];
    let requests = vec![req("g", &["u1"], 6), req("h", &["a2"], 4)];
    let (code, details) = refusal(
        draft(actions.clone(), requests.clone(), 377, 89, false),
        &t,
        &b,
    );
    assert_eq!(code, ErrorCode::Validation);
    assert_eq!(details, json!({"declared": 89, "derived": 84}));
    accept(draft(actions, requests, 377, 84, false), &t, &b);
}

#[test]
fn rule5_budget_unmet_false_while_over() {
    let t = chat();
    let b = budget(88, 1);
    let (code, details) = refusal(draft(figures_actions(), vec![], 377, 89, false), &t, &b);
    assert_eq!(code, ErrorCode::Validation);
    assert_eq!(
        details,
        json!({"declared": false, "tokens_after_estimate": 89, "max_tokens": 88})
    );
}

#[test]
fn rule5_budget_unmet_true_while_fitting_exactly() {
    let t = chat();
    let b = budget(89, 1);
    let (code, details) = refusal(draft(figures_actions(), vec![], 377, 89, true), &t, &b);
    assert_eq!(code, ErrorCode::Validation);
    assert_eq!(
        details,
        json!({"declared": true, "tokens_after_estimate": 89, "max_tokens": 89})
    );
    accept(draft(figures_actions(), vec![], 377, 89, false), &t, &b);
}

#[test]
fn rule5_checks_run_in_order() {
    let t = chat();
    let b = budget(50, 1);
    // All three wrong: tokens_before is reported.
    assert_eq!(
        refusal(draft(figures_actions(), vec![], 1, 2, true), &t, &b).1,
        json!({"declared": 1, "transcript": 377})
    );
    // After and the flag wrong: tokens_after_estimate is reported.
    assert_eq!(
        refusal(draft(figures_actions(), vec![], 377, 40, true), &t, &b).1,
        json!({"declared": 40, "derived": 89})
    );
}

// ---------------------------------------------------------------------------------------------
// The order of the rules.

#[test]
fn rule1_is_reported_before_rule5() {
    let t = chat();
    let b = budget(1000, 1);
    let actions = vec![keep("s0"), keep("u1"), keep("a1"), keep("t1"), keep("u2")];
    let (code, details) = refusal(draft(actions, vec![], 1, 2, true), &t, &b);
    assert_eq!(code, ErrorCode::Validation);
    assert_eq!(
        details,
        json!({"unplanned_turn_ids": ["a2"], "unknown_turn_ids": [], "repeated_turn_ids": []})
    );
}

#[test]
fn rule1_is_reported_before_rule2() {
    let t = chat();
    let b = budget(1000, 1);
    let actions = vec![
        drop_("s0"),
        keep("a1"),
        keep("u1"),
        keep("t1"),
        keep("a2"),
        keep("u2"),
    ];
    let (_, details) = refusal(honest(&t, &b, actions, vec![]), &t, &b);
    assert_eq!(
        details,
        json!({"unplanned_turn_ids": [], "unknown_turn_ids": [], "repeated_turn_ids": []})
    );
}

#[test]
fn rule2_is_reported_before_rule3() {
    let t = chat();
    let b = budget(1000, 1);
    let actions = vec![
        drop_("s0"),
        keep("u1"),
        drop_("a1"),
        keep("t1"),
        keep("a2"),
        keep("u2"),
    ];
    let (code, details) = refusal(honest(&t, &b, actions, vec![]), &t, &b);
    assert_eq!(code, ErrorCode::Validation);
    assert_eq!(
        details,
        json!({"touched_turn_ids": ["s0"], "actions": ["drop"], "protected_recent_turns": 1})
    );
}

#[test]
fn rule3_is_reported_before_rule4() {
    let t = chat();
    let b = budget(1000, 1);
    // a1/t1 split, and group g has no request.
    let actions = vec![
        keep("s0"),
        summ("u1", "g"),
        drop_("a1"),
        keep("t1"),
        keep("a2"),
        keep("u2"),
    ];
    let (code, details) = refusal(honest(&t, &b, actions, vec![]), &t, &b);
    assert_eq!(code, ErrorCode::Validation);
    assert_eq!(
        details,
        json!({"removed_turn_ids": ["a1"], "retained_turn_ids": ["t1"]})
    );
}

#[test]
fn rule4_is_reported_before_rule5() {
    let t = chat();
    let b = budget(1000, 1);
    let actions = vec![
        keep("s0"),
        summ("u1", "g"),
        keep("a1"),
        keep("t1"),
        keep("a2"),
        keep("u2"),
    ];
    let (code, details) = refusal(draft(actions, vec![], 0, 0, true), &t, &b);
    assert_eq!(code, ErrorCode::Validation);
    assert_eq!(
        details,
        json!({"groups_without_request": ["g"], "requests_without_turns": []})
    );
}

#[test]
fn rule2_is_reported_before_rule5() {
    let t = chat();
    let b = budget(1000, 1);
    let actions = vec![
        keep("s0"),
        keep("u1"),
        keep("a1"),
        keep("t1"),
        keep("a2"),
        drop_("u2"),
    ];
    let (_, details) = refusal(draft(actions, vec![], 0, 0, true), &t, &b);
    assert_eq!(
        details,
        json!({"touched_turn_ids": ["u2"], "actions": ["drop"], "protected_recent_turns": 1})
    );
}
