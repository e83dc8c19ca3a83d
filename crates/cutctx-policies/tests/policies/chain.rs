//! `PolicyChain` and `default_chain` (BEHAVIOUR.md §7.5): composition over a projection.

use cutctx_invariants::CompactionPlan;
use cutctx_model::canonical::canonical_json;
use cutctx_model::{CompactionBudget, Role, Transcript, TranscriptTurn};
use cutctx_policies::{
    CharRatioEstimator, CompactionPolicy, DropOldestPolicy, ObservationMaskingPolicy, PolicyChain,
    SummarizingPolicy, default_chain,
};
use serde_json::json;

use crate::custom::Recorder;
use crate::fixtures::{self, CASES, by_name};
use crate::{
    DEFAULT_CHAIN_NAME, Figures, PROMPT, acts, budget, digest, figures, group_id, invalid,
    requests, unsatisfiable,
};

fn chain(members: Vec<Box<dyn CompactionPolicy>>) -> PolicyChain {
    PolicyChain::new(members).expect("at least one member")
}

fn masking(keep: usize) -> ObservationMaskingPolicy {
    ObservationMaskingPolicy::new(keep).expect("any keep_recent_results is valid")
}

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

/// The plan's parts other than its name, as canonical JSON.
fn without_name(plan: &CompactionPlan) -> String {
    let mut draft = plan.draft().clone();
    draft.policy_name = String::new();
    canonical_json(&draft).expect("a plan serializes")
}

const M0_M8: [&str; 9] = ["m0", "m1", "m2", "m3", "m4", "m5", "m6", "m7", "m8"];
const M0_U9: [&str; 11] = [
    "m0", "m1", "m2", "m3", "m4", "m5", "m6", "m7", "m8", "m9", "u9",
];
const U1_U2: [&str; 10] = ["u1", "a1", "t1", "a2", "a3", "t2", "a4", "a5", "t3", "u2"];

#[test]
fn the_default_chain_is_named_after_its_members() {
    let policy = default_chain(PROMPT).expect("a prompt id");
    assert_eq!(policy.name(), DEFAULT_CHAIN_NAME);
    assert_eq!(policy.version(), "1.0.0");
    assert_eq!(policy.policies().len(), 3);
    assert_eq!(invalid(default_chain(" ")), json!({ "prompt_id": "' '" }));
    assert_eq!(invalid(PolicyChain::new(vec![])), json!({}));
}

/// `(fixture, max_tokens, protected, actions, figures, [(group, turn ids, target)])`.
type Case<'a> = (
    &'a str,
    u64,
    u64,
    String,
    Figures,
    Vec<(&'a str, &'a [&'a str], u64)>,
);

#[test]
fn the_default_chain_on_every_reference_case() {
    let all_keep = |name: &str| {
        by_name(name)
            .turn_ids()
            .map(|id| format!("{id}:K"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let th = "span-df373641db082650";
    let lc = "span-496ed38718261afc";
    let lc2 = "span-b2da65fee5a8bd16";
    let cases: Vec<Case<'_>> = vec![
        (
            "simple_chat",
            200,
            2,
            all_keep("simple_chat"),
            (125, 125, false, None),
            vec![],
        ),
        (
            "simple_chat",
            60,
            1,
            "s1:K u1:D a1:D u2:D a2:K".into(),
            (125, 52, false, None),
            vec![],
        ),
        (
            "multi_call_exchange",
            100,
            1,
            "s1:K a1:D t1:D t2:D a2:K".into(),
            (812, 42, false, None),
            vec![],
        ),
        (
            "multi_call_exchange",
            900,
            2,
            all_keep("multi_call_exchange"),
            (812, 812, false, None),
            vec![],
        ),
        (
            "displaced_result",
            240,
            1,
            "a1:K u1:D u2:D t1:K".into(),
            (335, 215, false, None),
            vec![],
        ),
        (
            "entirely_pinned",
            30,
            0,
            all_keep("entirely_pinned"),
            (30, 30, false, None),
            vec![],
        ),
        (
            "orphaned_result",
            45,
            1,
            "t0:D u1:K a1:K".into(),
            (540, 40, false, None),
            vec![],
        ),
        ("empty", 0, 4, String::new(), (0, 0, false, None), vec![]),
        (
            "tool_heavy",
            1400,
            0,
            all_keep("tool_heavy"),
            (1070, 1070, false, None),
            vec![],
        ),
        (
            "tool_heavy",
            700,
            0,
            format!("s1:K {}", folded(&U1_U2, th)),
            (1070, 168, false, Some(4.0)),
            vec![(th, &U1_U2, 158)],
        ),
        (
            "tool_heavy",
            400,
            2,
            "s1:K u1:D a1:D t1:D a2:D a3:D t2:D a4:D a5:K t3:K u2:K".into(),
            (1070, 350, false, Some(4.0)),
            vec![],
        ),
        (
            "tool_heavy",
            200,
            0,
            format!("s1:K {}", folded(&U1_U2, th)),
            (1070, 168, false, Some(4.0)),
            vec![(th, &U1_U2, 158)],
        ),
        (
            "long_chat",
            400,
            0,
            format!("s1:K {}", folded(&M0_U9, lc)),
            (525, 113, false, None),
            vec![(lc, &M0_U9, 103)],
        ),
        (
            "long_chat",
            200,
            2,
            format!("s1:K {} m9:K u9:K", folded(&M0_M8, lc2)),
            (525, 165, false, None),
            vec![(lc2, &M0_M8, 90)],
        ),
        (
            "long_chat",
            100,
            0,
            "s1:K m0:D m1:D m2:D m3:D m4:D m5:D m6:D m7:D m8:D m9:D u9:D".into(),
            (525, 10, false, None),
            vec![],
        ),
    ];
    let policy = default_chain(PROMPT).expect("a prompt id");
    for (name, max, protected, expected, expected_figures, expected_requests) in cases {
        let plan = policy
            .decide(&by_name(name), &budget(max, protected))
            .expect("satisfiable");
        let case = format!("{name}-{max}-{protected}");
        assert_eq!(acts(&plan), expected, "{case}");
        assert_eq!(figures(&plan), expected_figures, "{case}");
        let expected_requests: Vec<(String, Vec<String>, u64, String)> = expected_requests
            .into_iter()
            .map(|(g, ids, target)| {
                (
                    g.to_owned(),
                    ids.iter().map(|s| (*s).to_owned()).collect(),
                    target,
                    PROMPT.to_owned(),
                )
            })
            .collect();
        assert_eq!(requests(&plan), expected_requests, "{case}");
        assert_eq!(
            (plan.policy_name.as_str(), plan.policy_version.as_str()),
            (DEFAULT_CHAIN_NAME, "1.0.0")
        );
    }
}

#[test]
fn dropping_a_summary_stand_in_drops_its_members_and_the_request() {
    // long_chat at 100: summarizing folds m0..u9 (10 + 103 = 113 > 100), then drop-oldest
    // drops the stand-in: all eleven members become drop and the request goes.
    let plan = default_chain(PROMPT)
        .expect("a prompt id")
        .decide(&fixtures::long_chat(), &budget(100, 0))
        .expect("satisfiable");
    let dropped = plan
        .actions
        .iter()
        .filter(|a| a.action().is_removal())
        .count();
    assert_eq!(dropped, 11);
    assert!(
        plan.actions[1..]
            .iter()
            .all(|a| a.action() == cutctx_model::Action::Drop)
    );
    assert!(plan.summarization_requests.is_empty());
    assert_eq!(plan.tokens_after_estimate, 10);
}

#[test]
fn a_discarded_stub_still_leaves_its_ratio_on_the_plan() {
    // tool_heavy at 400/2: masking masks t1 (ratio 4.0), then drop-oldest drops u1..a4, t1
    // with it. No mask remains, and the ratio stays.
    let plan = default_chain(PROMPT)
        .expect("a prompt id")
        .decide(&fixtures::tool_heavy(), &budget(400, 2))
        .expect("satisfiable");
    assert!(
        plan.actions
            .iter()
            .all(|a| a.action() != cutctx_model::Action::Mask)
    );
    assert_eq!(plan.estimator_ratio, Some(4.0));
    assert!(plan.canonical_json().contains(r#""estimator_ratio":4.0"#));
}

#[test]
fn later_members_count_stubs_at_their_stub_estimate() {
    // Alone, summarizing targets round(1060 × 0.2) = 212; after the mask of t1 the span
    // weighs 1060 - 300 + 32 = 792, and the target is round(158.4) = 158.
    let policy = chain(vec![Box::new(masking(2)), Box::new(summarizing())]);
    let plan = policy
        .decide(&fixtures::tool_heavy(), &budget(700, 0))
        .expect("satisfiable");
    assert_eq!(
        requests(&plan),
        [(
            group_id(&U1_U2),
            U1_U2.iter().map(|s| (*s).to_owned()).collect(),
            158,
            PROMPT.to_owned()
        )]
    );
    assert_eq!(figures(&plan), (1070, 168, false, Some(4.0)));
}

#[test]
fn the_chain_stops_as_soon_as_the_projection_fits() {
    let t = fixtures::tool_heavy();
    // Masking everything maskable leaves 1070 - 3 × 268 = 266.
    for (max, runs) in [(800, 0), (266, 0), (265, 1), (100, 1)] {
        let (recorder, seen) = Recorder::new();
        let policy = chain(vec![Box::new(masking(0)), Box::new(recorder)]);
        policy.decide(&t, &budget(max, 0)).expect("satisfiable");
        assert_eq!(seen.lock().expect("not poisoned").len(), runs, "max {max}");
    }
    // A transcript that fits runs no member at all.
    let (recorder, seen) = Recorder::new();
    let plan = chain(vec![Box::new(recorder)])
        .decide(&t, &budget(1070, 0))
        .expect("satisfiable");
    assert!(seen.lock().expect("not poisoned").is_empty());
    assert_eq!(figures(&plan), (1070, 1070, false, None));
}

#[test]
fn a_member_that_never_runs_reports_no_ratio() {
    // Drop-oldest alone fits the budget, so the masking member never runs.
    let policy = chain(vec![Box::new(DropOldestPolicy), Box::new(masking(0))]);
    let plan = policy
        .decide(&fixtures::tool_heavy(), &budget(200, 0))
        .expect("satisfiable");
    assert_eq!(
        acts(&plan),
        "s1:K u1:D a1:D t1:D a2:D a3:D t2:D a4:D a5:D t3:D u2:K"
    );
    assert_eq!(figures(&plan), (1070, 25, false, None));
}

#[test]
fn a_one_member_chain_plans_as_its_member() {
    let members: [fn() -> Box<dyn CompactionPolicy>; 4] = [
        || Box::new(DropOldestPolicy),
        || Box::new(masking(2)),
        || Box::new(masking(0)),
        || Box::new(summarizing()),
    ];
    for make in members {
        let alone = make();
        let chained = chain(vec![make()]);
        assert_eq!(
            chained.name(),
            format!("chain({}@{})", alone.name(), alone.version())
        );
        for (name, max, protected) in CASES {
            let t = by_name(name);
            let b = budget(max, protected);
            let a = alone.decide(&t, &b).expect("satisfiable");
            let c = chained.decide(&t, &b).expect("satisfiable");
            assert_eq!(
                without_name(&a),
                without_name(&c),
                "{} on {name}-{max}-{protected}",
                alone.name()
            );
        }
    }
}

#[test]
fn a_nested_chain_plans_as_the_flat_one() {
    let nested = chain(vec![
        Box::new(chain(vec![Box::new(masking(2)), Box::new(summarizing())])),
        Box::new(DropOldestPolicy),
    ]);
    assert_eq!(
        nested.name(),
        "chain(chain(observation_masking@1.0.0+summarizing@1.0.0)@1.0.0+drop_oldest@1.0.0)"
    );
    let flat = default_chain(PROMPT).expect("a prompt id");
    for (name, max, protected) in CASES {
        let t = by_name(name);
        let b = budget(max, protected);
        let n = nested.decide(&t, &b).expect("satisfiable");
        let f = flat.decide(&t, &b).expect("satisfiable");
        assert_eq!(
            without_name(&n),
            without_name(&f),
            "{name}-{max}-{protected}"
        );
    }
}

#[test]
fn summarizing_a_stand_in_folds_its_group_into_the_new_one() {
    let one = || summarizing().with_min_span_turns(1).expect("at least 1");
    let policy = chain(vec![Box::new(one()), Box::new(one())]);
    let plan = policy
        .decide(&fixtures::long_chat(), &budget(100, 0))
        .expect("satisfiable");
    // The second member's span is the stand-in alone: round(103 × 0.2) = 21.
    let gid = group_id(&["summary:span-496ed38718261afc"]);
    assert_eq!(acts(&plan), format!("s1:K {}", folded(&M0_U9, &gid)));
    assert_eq!(
        requests(&plan),
        [(
            gid.clone(),
            M0_U9.iter().map(|s| (*s).to_owned()).collect(),
            21,
            PROMPT.to_owned()
        )]
    );
    assert_eq!(figures(&plan), (525, 31, false, None));
}

#[test]
fn deciding_twice_gives_the_same_bytes() {
    let policy = default_chain(PROMPT).expect("a prompt id");
    for (name, max, protected) in CASES {
        let t = by_name(name);
        let b = budget(max, protected);
        let first = policy.decide(&t, &b).expect("satisfiable").canonical_json();
        let again = default_chain(PROMPT)
            .expect("a prompt id")
            .decide(&t, &b)
            .expect("satisfiable")
            .canonical_json();
        assert_eq!(first, again, "{name}-{max}-{protected}");
    }
}

#[test]
fn the_chain_refuses_an_unsatisfiable_budget_before_any_member_runs() {
    let (recorder, seen) = Recorder::new();
    let policy = chain(vec![Box::new(recorder)]);
    let details = unsatisfiable(policy.decide(&fixtures::displaced_result(), &budget(14, 1)));
    assert_eq!(
        details,
        json!({
            "untouchable_tokens": 15,
            "max_tokens": 14,
            "untouchable_turn_count": 1,
            "protected_recent_turns": 1,
        })
    );
    assert!(seen.lock().expect("not poisoned").is_empty());
}

/// A member that hides what it is: the chain takes its decisions through `decide` over a
/// projected transcript, never through the shortcuts it has for the shipped policies.
pub(crate) struct Opaque(pub(crate) Box<dyn CompactionPolicy>);

impl CompactionPolicy for Opaque {
    fn name(&self) -> &str {
        self.0.name()
    }

    fn version(&self) -> &str {
        self.0.version()
    }

    fn decide(
        &self,
        t: &cutctx_model::Transcript,
        b: &cutctx_model::CompactionBudget,
    ) -> Result<CompactionPlan, cutctx_model::CompactionError> {
        self.0.decide(t, b)
    }
}

/// Random agent-like transcripts: system turns, user and assistant turns, tool exchanges
/// with one or two results, some of them displaced, some turns pinned.
pub(crate) fn agent_case()
-> impl proptest::strategy::Strategy<Value = (cutctx_model::Transcript, u64, u64)> {
    use cutctx_model::{Role, TranscriptTurn};
    use proptest::prelude::*;
    let step = (0_u8..6, 1_u64..400, any::<bool>(), 0_u8..8);
    (proptest::collection::vec(step, 1..40), 0_u64..100, 0_u64..6).prop_map(
        |(steps, percent, protected)| {
            let mut turns = Vec::new();
            let mut open: Vec<String> = Vec::new();
            for (i, (kind, tokens, pin, shape)) in steps.into_iter().enumerate() {
                let content = "log line \"x\"\n".repeat(usize::from(shape) + 1);
                let made = match kind {
                    0 => TranscriptTurn::new(format!("s{i}"), Role::System, "rules", tokens),
                    1 => TranscriptTurn::new(format!("u{i}"), Role::User, content, tokens),
                    2 => TranscriptTurn::new(format!("a{i}"), Role::Assistant, content, tokens),
                    3 => {
                        let call = format!("c{i}");
                        open.push(call.clone());
                        TranscriptTurn::new(format!("a{i}"), Role::Assistant, "call", tokens)
                            .map(|t| t.with_tool_call_id(call))
                    }
                    _ => match open.pop() {
                        Some(call) => {
                            // Sometimes a second result for the same call.
                            if shape % 3 == 0 {
                                open.push(call.clone());
                            }
                            TranscriptTurn::new(format!("t{i}"), Role::Tool, content, tokens)
                                .map(|t| t.with_tool_call_id(call))
                        }
                        None => TranscriptTurn::new(format!("t{i}"), Role::Tool, content, tokens),
                    },
                };
                let made = made.expect("a valid turn");
                turns.push(if pin && shape == 0 {
                    made.with_pinned(true)
                } else {
                    made
                });
            }
            let t = cutctx_model::Transcript::new(turns).expect("unique ids");
            let max = t.token_estimate() * percent / 100;
            (t, max, protected)
        },
    )
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(400))]

    /// The chain decides the shipped drop-oldest and summarizing members over the shape of a
    /// projection, and defers masking's digests; an opaque member goes the long way. Both
    /// must give the same bytes, or the same refusal.
    #[test]
    fn shipped_members_plan_as_opaque_members_do((t, max, protected) in agent_case()) {
        let b = cutctx_model::CompactionBudget::new(max).with_protected_recent_turns(protected);
        let fast = default_chain(PROMPT).expect("valid");
        let slow = chain(vec![
            Box::new(Opaque(Box::new(masking(2)))),
            Box::new(Opaque(Box::new(summarizing()))),
            Box::new(Opaque(Box::new(DropOldestPolicy))),
        ]);
        match (fast.decide(&t, &b), slow.decide(&t, &b)) {
            (Ok(a), Ok(b)) => proptest::prop_assert_eq!(a.canonical_json(), b.canonical_json()),
            (Err(a), Err(b)) => {
                proptest::prop_assert_eq!(a.code(), b.code());
                proptest::prop_assert_eq!(a.details(), b.details());
            }
            (a, b) => proptest::prop_assert!(
                false,
                "one path plans, the other refuses: {:?} / {:?}",
                a.map(|p| p.canonical_json()),
                b.map(|p| p.canonical_json())
            ),
        }
    }
}

proptest::proptest! {
    // About one case in fifty reaches the second round of masking (see the test below).
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]

    /// A member that reads content makes the chain compute every pending digest mid-chain;
    /// a masking member after it defers its own again. Both rounds must give the bytes the
    /// long way gives.
    #[test]
    fn masking_after_a_content_reading_member_plans_as_opaque_members_do(
        (t, max, protected) in agent_case()
    ) {
        let b = cutctx_model::CompactionBudget::new(max).with_protected_recent_turns(protected);
        let fast = chain(vec![
            Box::new(masking(3)),
            Box::new(Opaque(Box::new(DropOldestPolicy))),
            Box::new(masking(0)),
        ]);
        let slow = chain(vec![
            Box::new(Opaque(Box::new(masking(3)))),
            Box::new(Opaque(Box::new(DropOldestPolicy))),
            Box::new(Opaque(Box::new(masking(0)))),
        ]);
        match (fast.decide(&t, &b), slow.decide(&t, &b)) {
            (Ok(a), Ok(b)) => proptest::prop_assert_eq!(a.canonical_json(), b.canonical_json()),
            (Err(a), Err(b)) => proptest::prop_assert_eq!(a.details(), b.details()),
            (a, b) => proptest::prop_assert!(false, "{:?} / {:?}", a.is_ok(), b.is_ok()),
        }
    }
}

/// In the cases above, the last masking member does mask turns after the mid-chain digests.
#[test]
fn random_agent_cases_mask_again_after_a_content_reading_member() {
    use proptest::strategy::{Strategy, ValueTree};
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let strategy = agent_case();
    let masks = |p: &CompactionPlan| {
        p.actions
            .iter()
            .filter(|a| a.action() == cutctx_model::Action::Mask)
            .count()
    };
    let mut again = 0;
    for _ in 0..2_000 {
        let (t, max, protected) = strategy.new_tree(&mut runner).expect("a case").current();
        let b = cutctx_model::CompactionBudget::new(max).with_protected_recent_turns(protected);
        let first_two = chain(vec![
            Box::new(masking(3)),
            Box::new(Opaque(Box::new(DropOldestPolicy))),
        ]);
        let all_three = chain(vec![
            Box::new(masking(3)),
            Box::new(Opaque(Box::new(DropOldestPolicy))),
            Box::new(masking(0)),
        ]);
        if let (Ok(a), Ok(b)) = (first_two.decide(&t, &b), all_three.decide(&t, &b))
            && masks(&b) > masks(&a)
        {
            again += 1;
        }
    }
    assert!(again >= 20, "{again} of 2000 cases");
}

/// The cases above reach every kind of decision, and refusals, so the property is not vacuous.
#[test]
fn random_agent_cases_reach_masks_summaries_drops_and_refusals() {
    use proptest::strategy::{Strategy, ValueTree};
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let strategy = agent_case();
    let fast = default_chain(PROMPT).expect("valid");
    let (mut masks, mut summaries, mut drops, mut refusals) = (0, 0, 0, 0);
    for _ in 0..2_000 {
        let (t, max, protected) = strategy.new_tree(&mut runner).expect("a case").current();
        let b = cutctx_model::CompactionBudget::new(max).with_protected_recent_turns(protected);
        match fast.decide(&t, &b) {
            Ok(plan) => {
                let kinds: Vec<cutctx_model::Action> = plan
                    .actions
                    .iter()
                    .map(cutctx_model::TurnAction::action)
                    .collect();
                masks += usize::from(kinds.contains(&cutctx_model::Action::Mask));
                summaries += usize::from(!plan.summarization_requests.is_empty());
                drops += usize::from(kinds.contains(&cutctx_model::Action::Drop));
            }
            Err(_) => refusals += 1,
        }
    }
    for (what, count) in [
        ("masks", masks),
        ("summaries", summaries),
        ("drops", drops),
        ("refusals", refusals),
    ] {
        assert!(count >= 50, "{what}: {count} of 2000 cases");
    }
}

/// A chain nested after another member receives a projection; a masker inside it defers its
/// digests to that nested chain, which computes them from the transcript it was given. It was
/// once given a projection without content, and its stubs digested the empty placeholder.
#[test]
fn a_masker_nested_in_a_chain_digests_the_real_content() {
    let turn = |i: usize, role, content: &str, estimate| {
        TranscriptTurn::new(format!("t{i}"), role, content, estimate).expect("a valid turn")
    };
    let t = Transcript::new(vec![
        turn(0, Role::Tool, "the old result", 43),
        turn(1, Role::Tool, "", 0),
        turn(2, Role::Tool, "", 0),
        turn(3, Role::Tool, "", 0),
        turn(4, Role::System, "", 0),
    ])
    .expect("unique ids");
    let b = CompactionBudget::new(0).with_protected_recent_turns(4);
    let masker =
        || masking(0).with_estimator(Box::new(CharRatioEstimator::new(3.0).expect("a ratio")));
    let nested = chain(vec![
        Box::new(summarizing().with_min_span_turns(2).expect("at least 1")),
        Box::new(chain(vec![Box::new(masker())])),
    ]);
    let stub = |plan: &CompactionPlan| {
        plan.actions[0]
            .replacement()
            .map(|r| r.content.to_string())
            .expect("the old result is masked")
    };
    let nested_stub = stub(&nested.decide(&t, &b).expect("a plan"));
    assert!(
        nested_stub.ends_with(&format!("sha256:{})", digest("the old result"))),
        "{nested_stub}"
    );
    assert_eq!(nested_stub, stub(&masker().decide(&t, &b).expect("a plan")));
}
