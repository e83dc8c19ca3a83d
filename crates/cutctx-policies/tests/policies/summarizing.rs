//! `SummarizingPolicy` (BEHAVIOUR.md §7.3): one request for the oldest qualifying span.

use cutctx_model::{Role, Transcript};
use cutctx_policies::{CompactionPolicy, SummarizingPolicy};
use serde_json::json;

use crate::fixtures::{self, by_name};
use crate::{
    Figures, PROMPT, acts, budget, figures, group_id, invalid, requests, transcript, turn,
    unsatisfiable,
};

fn summarizing() -> SummarizingPolicy {
    SummarizingPolicy::new(PROMPT).expect("a prompt id")
}

/// `id:S<group>` for each id, space separated.
fn folded(ids: &[&str], group: &str) -> String {
    ids.iter()
        .map(|id| format!("{id}:S<{group}>"))
        .collect::<Vec<_>>()
        .join(" ")
}

fn owned(ids: &[&str]) -> Vec<String> {
    ids.iter().map(|s| (*s).to_owned()).collect()
}

const M0_M8: [&str; 9] = ["m0", "m1", "m2", "m3", "m4", "m5", "m6", "m7", "m8"];
const M0_U9: [&str; 11] = [
    "m0", "m1", "m2", "m3", "m4", "m5", "m6", "m7", "m8", "m9", "u9",
];
const U1_U2: [&str; 10] = ["u1", "a1", "t1", "a2", "a3", "t2", "a4", "a5", "t3", "u2"];
const U1_A4: [&str; 7] = ["u1", "a1", "t1", "a2", "a3", "t2", "a4"];

#[test]
fn long_chat_with_a_protected_tail_folds_m0_to_m8() {
    let plan = summarizing()
        .decide(&fixtures::long_chat(), &budget(200, 2))
        .expect("satisfiable");
    let gid = "span-b2da65fee5a8bd16";
    assert_eq!(group_id(&M0_M8), gid);
    assert_eq!(
        acts(&plan),
        format!("s1:K {} m9:K u9:K", folded(&M0_M8, gid))
    );
    // round(450 × 0.2) = 90; 10 + 90 + 50 + 15.
    assert_eq!(figures(&plan), (525, 165, false, None));
    assert_eq!(
        requests(&plan),
        [(gid.to_owned(), owned(&M0_M8), 90, PROMPT.to_owned())]
    );
    assert_eq!(
        (plan.policy_name.as_str(), plan.policy_version.as_str()),
        ("summarizing", "1.0.0")
    );
}

#[test]
fn long_chat_without_a_tail_folds_everything_but_the_system_turn() {
    let gid = "span-496ed38718261afc";
    assert_eq!(group_id(&M0_U9), gid);
    // The policy does not check the result fits: at 100 the plan stays over budget.
    for (max, unmet) in [(400, false), (100, true)] {
        let plan = summarizing()
            .decide(&fixtures::long_chat(), &budget(max, 0))
            .expect("satisfiable");
        assert_eq!(acts(&plan), format!("s1:K {}", folded(&M0_U9, gid)));
        // round(515 × 0.2) = 103.
        assert_eq!(figures(&plan), (525, 113, unmet, None), "{max}");
        assert_eq!(
            requests(&plan),
            [(gid.to_owned(), owned(&M0_U9), 103, PROMPT.to_owned())]
        );
    }
}

#[test]
fn tool_heavy_spans_take_whole_exchanges() {
    let gid = "span-df373641db082650";
    assert_eq!(group_id(&U1_U2), gid);
    for (max, unmet) in [(700, false), (200, true)] {
        let plan = summarizing()
            .decide(&fixtures::tool_heavy(), &budget(max, 0))
            .expect("satisfiable");
        assert_eq!(acts(&plan), format!("s1:K {}", folded(&U1_U2, gid)));
        // round(1060 × 0.2) = 212.
        assert_eq!(figures(&plan), (1070, 222, unmet, None));
        assert_eq!(
            requests(&plan),
            [(gid.to_owned(), owned(&U1_U2), 212, PROMPT.to_owned())]
        );
    }

    // The protected t3 locks its call a5: the span ends at a4.
    let gid = "span-e2e5c3725fedca45";
    assert_eq!(group_id(&U1_A4), gid);
    let plan = summarizing()
        .decide(&fixtures::tool_heavy(), &budget(400, 2))
        .expect("satisfiable");
    assert_eq!(
        acts(&plan),
        format!("s1:K {} a5:K t3:K u2:K", folded(&U1_A4, gid))
    );
    // round(720 × 0.2) = 144; 10 + 144 + 25 + 300 + 15.
    assert_eq!(figures(&plan), (1070, 494, true, None));
    assert_eq!(
        requests(&plan),
        [(gid.to_owned(), owned(&U1_A4), 144, PROMPT.to_owned())]
    );
}

#[test]
fn no_qualifying_span_or_a_fitting_transcript_keeps_everything() {
    let cases: [(&str, u64, u64, Figures); 9] = [
        ("simple_chat", 200, 2, (125, 125, false, None)),
        // u1, a1, u2: three turns, below min_span_turns = 4.
        ("simple_chat", 60, 1, (125, 125, true, None)),
        ("multi_call_exchange", 100, 1, (812, 812, true, None)),
        ("multi_call_exchange", 900, 2, (812, 812, false, None)),
        ("displaced_result", 240, 1, (335, 335, true, None)),
        ("entirely_pinned", 30, 0, (30, 30, false, None)),
        ("orphaned_result", 45, 1, (540, 540, true, None)),
        ("empty", 0, 4, (0, 0, false, None)),
        ("tool_heavy", 1400, 0, (1070, 1070, false, None)),
    ];
    for (name, max, protected, expected) in cases {
        let t = by_name(name);
        let plan = summarizing()
            .decide(&t, &budget(max, protected))
            .expect("satisfiable");
        let all_keep: Vec<String> = t.turn_ids().map(|id| format!("{id}:K")).collect();
        assert_eq!(acts(&plan), all_keep.join(" "), "{name}-{max}-{protected}");
        assert_eq!(figures(&plan), expected, "{name}-{max}-{protected}");
        assert!(plan.summarization_requests.is_empty());
    }
}

#[test]
fn min_span_turns_decides_which_spans_qualify() {
    let policy = summarizing().with_min_span_turns(3).expect("at least 1");
    let plan = policy
        .decide(&fixtures::simple_chat(), &budget(60, 1))
        .expect("satisfiable");
    let gid = group_id(&["u1", "a1", "u2"]);
    assert_eq!(
        acts(&plan),
        format!("s1:K {} a2:K", folded(&["u1", "a1", "u2"], &gid))
    );
    // round(73 × 0.2) = round(14.6) = 15; 12 + 15 + 40 = 67, still over 60.
    assert_eq!(figures(&plan), (125, 67, true, None));
    assert_eq!(
        requests(&plan),
        [(
            gid.clone(),
            owned(&["u1", "a1", "u2"]),
            15,
            PROMPT.to_owned()
        )]
    );

    let plan = policy
        .decide(&fixtures::multi_call_exchange(), &budget(100, 1))
        .expect("satisfiable");
    let gid = group_id(&["a1", "t1", "t2"]);
    assert_eq!(
        acts(&plan),
        format!("s1:K {} a2:K", folded(&["a1", "t1", "t2"], &gid))
    );
    assert_eq!(figures(&plan), (812, 196, true, None));
}

/// Four user turns with these estimates, then one protected 1-token turn.
fn four_then_tail(estimates: [u64; 4]) -> Transcript {
    let mut turns: Vec<_> = estimates
        .iter()
        .enumerate()
        .map(|(i, &e)| turn(&format!("m{i}"), Role::User, e))
        .collect();
    turns.push(turn("tail", Role::User, 1));
    transcript(turns)
}

#[test]
fn targets_round_half_to_even() {
    let policy = summarizing().with_target_ratio(0.5).expect("a valid ratio");
    for (estimates, span_tokens, target) in [
        ([2, 1, 1, 1], 5, 2),
        ([2, 2, 2, 1], 7, 4),
        ([10, 5, 5, 5], 25, 12),
        ([10, 5, 5, 7], 27, 14),
    ] {
        let t = four_then_tail(estimates);
        let plan = policy.decide(&t, &budget(1, 1)).expect("floor 1");
        let ids = ["m0", "m1", "m2", "m3"];
        assert_eq!(
            requests(&plan),
            [(group_id(&ids), owned(&ids), target, PROMPT.to_owned())],
            "{span_tokens}"
        );
        assert_eq!(figures(&plan), (span_tokens + 1, target + 1, true, None));
    }
}

#[test]
fn a_span_its_summary_would_not_shrink_is_passed_over_for_the_next() {
    // The first span holds 0 tokens: max(1, round(0)) = 1 is not below 0.
    let mut turns: Vec<_> = (0..4)
        .map(|i| turn(&format!("z{i}"), Role::User, 0))
        .collect();
    turns.push(turn("p", Role::User, 10).with_pinned(true));
    turns.extend((0..4).map(|i| turn(&format!("m{i}"), Role::Assistant, 50)));
    turns.push(turn("tail", Role::User, 5));
    let t = transcript(turns);
    let plan = summarizing().decide(&t, &budget(100, 1)).expect("floor 15");
    let ids = ["m0", "m1", "m2", "m3"];
    let gid = group_id(&ids);
    assert_eq!(
        acts(&plan),
        format!("z0:K z1:K z2:K z3:K p:K {} tail:K", folded(&ids, &gid))
    );
    assert_eq!(figures(&plan), (215, 55, false, None));

    // A ratio of 1 never shrinks anything: no request at all.
    let plan = summarizing()
        .with_target_ratio(1.0)
        .expect("a valid ratio")
        .decide(&t, &budget(100, 1))
        .expect("floor 15");
    assert!(plan.summarization_requests.is_empty());
    assert_eq!(figures(&plan), (215, 215, true, None));
}

#[test]
fn spans_keep_only_turns_whose_whole_exchange_lies_in_the_run() {
    // Run u0..u4 is cut by the pinned p; a1's result t1 lies past p, so a1 leaves the run and
    // splits it into [u0] and [u2, u3, u4]. t1's run holds nothing whole.
    let t = transcript(vec![
        turn("u0", Role::User, 10),
        turn("a1", Role::Assistant, 10).with_tool_call_id("c1"),
        turn("u2", Role::User, 10),
        turn("u3", Role::User, 10),
        turn("u4", Role::User, 10),
        turn("p", Role::User, 10).with_pinned(true),
        turn("t1", Role::Tool, 10).with_tool_call_id("c1"),
        turn("u5", Role::User, 10),
    ]);
    let policy = summarizing().with_min_span_turns(3).expect("at least 1");
    let plan = policy.decide(&t, &budget(30, 1)).expect("floor 20");
    let ids = ["u2", "u3", "u4"];
    let gid = group_id(&ids);
    assert_eq!(
        acts(&plan),
        format!("u0:K a1:K {} p:K t1:K u5:K", folded(&ids, &gid))
    );
    // round(30 × 0.2) = 6.
    assert_eq!(figures(&plan), (80, 56, true, None));

    // With spans of one allowed, the oldest span [u0] is the one taken.
    let policy = summarizing().with_min_span_turns(1).expect("at least 1");
    let plan = policy.decide(&t, &budget(30, 1)).expect("floor 20");
    let gid = group_id(&["u0"]);
    assert_eq!(
        acts(&plan),
        format!("u0:S<{gid}> a1:K u2:K u3:K u4:K p:K t1:K u5:K")
    );
    assert_eq!(
        requests(&plan),
        [(gid, owned(&["u0"]), 2, PROMPT.to_owned())]
    );
}

#[test]
fn bad_arguments_are_refused_with_python_reprs() {
    for (prompt, repr) in [("", "''"), ("  ", "'  '")] {
        assert_eq!(
            invalid(SummarizingPolicy::new(prompt)),
            json!({ "prompt_id": repr })
        );
    }
    for (ratio, repr) in [
        (0.0, "0.0"),
        (-1.0, "-1.0"),
        (f64::NAN, "nan"),
        (f64::INFINITY, "inf"),
        (f64::NEG_INFINITY, "-inf"),
    ] {
        assert_eq!(
            invalid(summarizing().with_target_ratio(ratio)),
            json!({ "target_ratio": repr })
        );
    }
    assert_eq!(
        invalid(summarizing().with_min_span_turns(0)),
        json!({ "min_span_turns": 0 })
    );
    assert_eq!(summarizing().prompt_id(), PROMPT);
}

#[test]
fn summarizing_refuses_an_unsatisfiable_budget() {
    let details = unsatisfiable(summarizing().decide(&fixtures::long_chat(), &budget(100, 3)));
    // s1 (10) and the last three, m8, m9 and u9 (50 + 50 + 15).
    assert_eq!(
        details,
        json!({
            "untouchable_tokens": 125,
            "max_tokens": 100,
            "untouchable_turn_count": 4,
            "protected_recent_turns": 3,
        })
    );
}

/// Two parallel calls; c2's result arrives after a pinned turn. The run a1..r1 loses a2 (its
/// exchange leaves the run), which splits what remains into [a1, u1, u2, u3] and [r1]: the
/// first span qualifies and would fold a1 without its result r1.
fn parallel_calls_around_a_pin() -> Transcript {
    transcript(vec![
        turn("s", Role::System, 10),
        turn("a1", Role::Assistant, 50).with_tool_call_id("c1"),
        turn("u1", Role::User, 50),
        turn("u2", Role::User, 50),
        turn("u3", Role::User, 50),
        turn("a2", Role::Assistant, 50).with_tool_call_id("c2"),
        turn("r1", Role::Tool, 50).with_tool_call_id("c1"),
        turn("p", Role::User, 10).with_pinned(true),
        turn("r2", Role::Tool, 50).with_tool_call_id("c2"),
        turn("u4", Role::User, 10),
    ])
}

#[test]
fn a_span_never_separates_a_call_from_its_result() {
    let t = parallel_calls_around_a_pin();
    let b = budget(200, 1);
    for policy in [
        Box::new(summarizing()) as Box<dyn CompactionPolicy>,
        Box::new(cutctx_policies::default_chain(PROMPT).expect("a prompt id")),
    ] {
        let plan = policy
            .decide(&t, &b)
            .unwrap_or_else(|e| panic!("{}: {} {:?}", policy.name(), e.message(), e.details()));
        let action = |id: &str| {
            plan.actions
                .iter()
                .find(|a| a.turn_id() == id)
                .map(|a| (a.action(), a.summary_group().map(str::to_owned)))
                .expect("planned")
        };
        assert_eq!(action("a1"), action("r1"), "{}", policy.name());
        assert_eq!(action("a2"), action("r2"), "{}", policy.name());
    }
}
