//! The derived sets of BEHAVIOUR.md §6.1 and the budget floor of §6.2.

use cutctx_invariants::{Analysis, Exchanges, require_satisfiable_budget};
use cutctx_model::{ErrorCode, Transcript};
use serde_json::json;

use crate::{asst, budget, call, result, sys, transcript, user};

/// The exchanges as lists of positions.
fn partition(t: &Transcript) -> Vec<Vec<usize>> {
    Exchanges::of(t).iter().map(<[usize]>::to_vec).collect()
}

/// The exchanges as lists of turn ids.
fn partition_ids(t: &Transcript) -> Vec<Vec<String>> {
    let ids: Vec<&str> = t.turn_ids().collect();
    partition(t)
        .iter()
        .map(|m| m.iter().map(|&p| ids[p].to_owned()).collect())
        .collect()
}

#[test]
fn exchanges_partition_by_tool_call_id_in_transcript_order() {
    let t = transcript(vec![
        call("a1", "c1", 1),
        user("u1", 1),
        result("t1", "c1", 1),
        call("a2", "c2", 1),
        result("t2", "c2", 1),
        result("t3", "c1", 1),
        user("u2", 1),
    ]);
    assert_eq!(
        partition(&t),
        vec![vec![0, 2, 5], vec![1], vec![3, 4], vec![6]]
    );
    let x = Exchanges::of(&t);
    assert_eq!(x.len(), 4);
    assert!(!x.is_empty());
    let of: Vec<usize> = (0..t.len()).map(|p| x.exchange_of(p)).collect();
    assert_eq!(of, [0, 1, 0, 2, 2, 0, 3]);
    assert_eq!(x.members(2), [3, 4]);
    // Every position is in exactly one exchange, and in the one `exchange_of` names.
    for (index, members) in x.iter().enumerate() {
        for &p in members {
            assert_eq!(x.exchange_of(p), index);
        }
    }
}

#[test]
fn exchanges_are_ordered_by_their_earliest_member() {
    // c2's result comes first; c1 starts later but ends earlier.
    let t = transcript(vec![
        result("x0", "c2", 1),
        call("y1", "c1", 1),
        result("y2", "c1", 1),
        call("x3", "c2", 1),
        user("u4", 1),
    ]);
    assert_eq!(
        partition_ids(&t),
        vec![vec!["x0", "x3"], vec!["y1", "y2"], vec!["u4"]]
    );
    // Call ids sorting before one another does not matter: "a" starts after "z".
    let t = transcript(vec![
        result("r0", "z", 1),
        result("r1", "a", 1),
        result("r2", "z", 1),
    ]);
    assert_eq!(partition(&t), vec![vec![0, 2], vec![1]]);
}

#[test]
fn a_tool_call_id_equal_to_a_turn_id_does_not_merge() {
    // t1's call id is "u1" (another turn's id), and t2's is "t2" (its own id).
    let t = transcript(vec![
        user("u1", 1),
        result("t1", "u1", 1),
        result("t2", "t2", 1),
        user("u3", 1),
        result("t4", "u1", 1),
    ]);
    assert_eq!(
        partition_ids(&t),
        vec![vec!["u1"], vec!["t1", "t4"], vec!["t2"], vec!["u3"]]
    );
}

#[test]
fn displaced_result_joins_its_distant_call() {
    let t = transcript(vec![
        call("a1", "c1", 200),
        user("u1", 60),
        user("u2", 60),
        result("t1", "c1", 15),
    ]);
    assert_eq!(
        partition_ids(&t),
        vec![vec!["a1", "t1"], vec!["u1"], vec!["u2"]]
    );
}

#[test]
fn orphaned_result_is_an_exchange_of_one_and_removable() {
    let t = transcript(vec![
        result("t0", "gone", 500),
        user("u1", 20),
        asst("a1", 20),
    ]);
    assert_eq!(partition_ids(&t), vec![vec!["t0"], vec!["u1"], vec!["a1"]]);
    let a = Analysis::of(&t, &budget(45, 1));
    assert_eq!(a.untouchable(), [false, false, true]);
    assert_eq!(a.removable(), [true, true, false]);
}

#[test]
fn empty_transcript_has_no_exchanges() {
    let t = Transcript::default();
    let x = Exchanges::of(&t);
    assert!(x.is_empty());
    assert_eq!(x.len(), 0);
    assert_eq!(x.iter().count(), 0);
    let a = Analysis::of(&t, &budget(0, 4));
    assert!(a.untouchable().is_empty() && a.removable().is_empty());
    assert_eq!((a.untouchable_tokens(), a.untouchable_count()), (0, 0));
}

#[test]
fn every_system_turn_is_untouchable_wherever_it_is() {
    let t = transcript(vec![
        sys("s0", 3),
        user("u1", 10),
        sys("s2", 5),
        user("u3", 10),
        sys("s4", 7),
    ]);
    let a = Analysis::of(&t, &budget(100, 0));
    assert_eq!(a.untouchable(), [true, false, true, false, true]);
    assert_eq!(a.untouchable_tokens(), 15);
    assert_eq!(a.untouchable_count(), 3);
}

#[test]
fn pinned_turns_are_untouchable() {
    let t = transcript(vec![
        user("u0", 10),
        asst("a1", 4).with_pinned(true),
        user("u2", 10),
        result("t3", "c", 6).with_pinned(true),
        user("u4", 10),
    ]);
    let a = Analysis::of(&t, &budget(100, 0));
    assert_eq!(a.untouchable(), [false, true, false, true, false]);
    assert_eq!((a.untouchable_tokens(), a.untouchable_count()), (10, 2));
}

#[test]
fn the_protected_tail_is_untouchable() {
    let t = transcript(vec![
        user("u0", 1),
        user("u1", 2),
        user("u2", 4),
        user("u3", 8),
        user("u4", 16),
    ]);
    let a = Analysis::of(&t, &budget(100, 2));
    assert_eq!(a.untouchable(), [false, false, false, true, true]);
    assert_eq!((a.untouchable_tokens(), a.untouchable_count()), (24, 2));
    // Zero protects nothing.
    let a = Analysis::of(&t, &budget(100, 0));
    assert_eq!(a.untouchable(), [false; 5]);
    assert_eq!(a.removable(), [true; 5]);
    assert_eq!((a.untouchable_tokens(), a.untouchable_count()), (0, 0));
    // Exactly the length protects everything, and so does more, up to u64::MAX.
    for protected in [5, 6, 1000, u64::MAX] {
        let a = Analysis::of(&t, &budget(100, protected));
        assert_eq!(a.untouchable(), [true; 5], "protected {protected}");
        assert_eq!(a.removable(), [false; 5], "protected {protected}");
        assert_eq!((a.untouchable_tokens(), a.untouchable_count()), (31, 5));
    }
}

#[test]
fn untouchable_sources_overlap_without_double_counting() {
    // A pinned system turn in the tail counts once.
    let t = transcript(vec![user("u0", 1), sys("s1", 100).with_pinned(true)]);
    let a = Analysis::of(&t, &budget(100, 1));
    assert_eq!(a.untouchable(), [false, true]);
    assert_eq!((a.untouchable_tokens(), a.untouchable_count()), (100, 1));
}

#[test]
fn protection_spreads_through_an_exchange() {
    let t = transcript(vec![
        sys("s0", 1),
        call("a1", "c1", 1), // locked by t5 in the tail
        call("a2", "c2", 1), // locked by its pinned result t3
        result("t3", "c2", 1).with_pinned(true),
        call("a4", "c3", 1), // locked only while its result t6 is in the tail
        result("t5", "c1", 1),
        result("t6", "c3", 1),
        user("u7", 1),
    ]);
    let a = Analysis::of(&t, &budget(100, 3));
    assert_eq!(
        a.untouchable(),
        [true, false, false, true, false, true, true, true]
    );
    // Every exchange holds an untouchable turn, so nothing is removable.
    assert_eq!(a.removable(), [false; 8]);
    // With a tail of 2, t5 is free and so is its call a1; a4 stays locked by t6.
    let a = Analysis::of(&t, &budget(100, 2));
    assert_eq!(
        a.untouchable(),
        [true, false, false, true, false, false, true, true]
    );
    assert_eq!(
        a.removable(),
        [false, true, false, false, false, true, false, false]
    );
    // A system turn carrying a call id locks that exchange as well.
    let t = transcript(vec![
        sys("s0", 1).with_tool_call_id("c"),
        result("t1", "c", 1),
        user("u2", 1),
    ]);
    let a = Analysis::of(&t, &budget(100, 0));
    assert_eq!(a.removable(), [false, false, true]);
}

#[test]
fn budget_equal_to_the_floor_is_satisfiable() {
    let t = transcript(vec![sys("s0", 12), user("u1", 30), asst("a1", 25)]);
    require_satisfiable_budget(&t, &budget(37, 1)).expect("37 == 12 + 25");
    Analysis::of(&t, &budget(37, 1))
        .require_satisfiable()
        .expect("equality fits");
    require_satisfiable_budget(&Transcript::default(), &budget(0, 4)).expect("empty fits zero");
    let zero = transcript(vec![sys("s0", 0), user("u1", 9)]);
    require_satisfiable_budget(&zero, &budget(0, 0)).expect("a zero floor fits a zero budget");
}

#[test]
fn budget_below_the_floor_is_unsatisfiable_with_exact_details() {
    let t = transcript(vec![
        sys("s0", 12),
        user("u1", 30).with_pinned(true),
        user("u2", 30),
        asst("a1", 25),
    ]);
    let b = budget(66, 1);
    let err = require_satisfiable_budget(&t, &b).expect_err("67 > 66");
    assert_eq!(err.code(), ErrorCode::BudgetUnsatisfiable);
    assert_eq!(
        serde_json::to_value(err.details()).expect("json"),
        json!({
            "untouchable_tokens": 67,
            "max_tokens": 66,
            "untouchable_turn_count": 3,
            "protected_recent_turns": 1,
        })
    );
    // The reference's message, word for word (checked against CutCtx 0.1.0 itself).
    assert_eq!(
        err.message(),
        "The untouchable turns alone are estimated at 67 tokens, which exceeds the budget of 66. \
         3 turns are untouchable: every SYSTEM turn, every pinned turn, and the last 1. Raise \
         max_tokens, unpin turns, or shorten the protected tail \u{2014} no compaction can fit \
         this budget without violating an invariant."
    );
    let via_analysis = Analysis::of(&t, &b)
        .require_satisfiable()
        .expect_err("same refusal");
    assert_eq!(via_analysis, err);
    // The protected figure in details is the budget's, even when it exceeds the transcript.
    let b = budget(0, 9);
    let err = require_satisfiable_budget(&t, &b).expect_err("97 > 0");
    assert_eq!(
        serde_json::to_value(err.details()).expect("json"),
        json!({
            "untouchable_tokens": 97,
            "max_tokens": 0,
            "untouchable_turn_count": 4,
            "protected_recent_turns": 9,
        })
    );
}
