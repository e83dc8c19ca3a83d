//! Policies and estimators written outside the crate: the `CompactionPolicy` and
//! `TokenEstimator` traits as a user implements them, alone and chained with shipped policies.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use cutctx_invariants::{Analysis, CompactionPlan, Decisions, build_plan};
use cutctx_model::{
    CompactionBudget, CompactionError, Role, Transcript, TurnAction, canonical::canonical_json,
};
use cutctx_policies::{
    CharRatioEstimator, CompactionPolicy, DropOldestPolicy, ObservationMaskingPolicy, PolicyChain,
    SummarizingPolicy, TokenEstimator,
};

use crate::fixtures::{self, CASES, by_name};
use crate::{
    PROMPT, acts, budget, default_stub, digest, figures, requests, stub_of, transcript, turn,
    turn_with,
};

/// Drops the largest removable exchange (ties: the earliest), again and again until the
/// transcript fits or nothing removable is left.
#[derive(Debug, Clone, Copy)]
pub(crate) struct DropLargestExchange;

impl CompactionPolicy for DropLargestExchange {
    fn name(&self) -> &str {
        "drop_largest_exchange"
    }

    fn version(&self) -> &str {
        "0.1.0"
    }

    fn decide(
        &self,
        t: &Transcript,
        b: &CompactionBudget,
    ) -> Result<CompactionPlan, CompactionError> {
        let analysis = Analysis::of(t, b);
        analysis.require_satisfiable()?;
        let turns = t.turns();
        let mut candidates: Vec<(u64, usize, &[usize])> = analysis
            .exchanges()
            .iter()
            .enumerate()
            .filter(|(_, members)| analysis.removable()[members[0]])
            .map(|(i, members)| {
                let size = members.iter().map(|&p| turns[p].token_estimate()).sum();
                (size, i, members)
            })
            .collect();
        // Largest first; among equals, the earliest exchange first.
        candidates.sort_by(|x, y| y.0.cmp(&x.0).then(x.1.cmp(&y.1)));
        let mut dropped = vec![false; turns.len()];
        let mut running = t.token_estimate();
        for (size, _, members) in candidates {
            if running <= b.max_tokens {
                break;
            }
            for &p in members {
                dropped[p] = true;
            }
            running -= size;
        }
        let actions = turns
            .iter()
            .zip(&dropped)
            .map(|(turn, &d)| {
                if d {
                    TurnAction::drop_turn(turn.turn_id_arc().clone())
                } else {
                    TurnAction::keep(turn.turn_id_arc().clone())
                }
            })
            .collect();
        build_plan(
            t,
            &analysis,
            Decisions::actions(actions),
            self.name(),
            self.version(),
        )
    }
}

/// What a [`Recorder`] saw of one turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Seen {
    pub(crate) id: String,
    pub(crate) role: Role,
    pub(crate) content: String,
    pub(crate) estimate: u64,
    pub(crate) tool_call_id: Option<String>,
    pub(crate) pinned: bool,
    pub(crate) metadata: BTreeMap<String, String>,
}

/// Keeps everything, and records every transcript it is asked to decide for.
#[derive(Debug, Default)]
pub(crate) struct Recorder {
    pub(crate) seen: Arc<Mutex<Vec<Vec<Seen>>>>,
}

impl Recorder {
    /// A recorder and a handle on what it will see.
    pub(crate) fn new() -> (Self, Arc<Mutex<Vec<Vec<Seen>>>>) {
        let seen = Arc::new(Mutex::new(Vec::new()));
        (
            Self {
                seen: Arc::clone(&seen),
            },
            seen,
        )
    }
}

impl CompactionPolicy for Recorder {
    fn name(&self) -> &str {
        "recorder"
    }

    fn version(&self) -> &str {
        "1"
    }

    fn decide(
        &self,
        t: &Transcript,
        b: &CompactionBudget,
    ) -> Result<CompactionPlan, CompactionError> {
        let view = t
            .turns()
            .iter()
            .map(|turn| Seen {
                id: turn.turn_id().to_owned(),
                role: turn.role(),
                content: turn.content().to_owned(),
                estimate: turn.token_estimate(),
                tool_call_id: turn.tool_call_id().map(str::to_owned),
                pinned: turn.pinned(),
                metadata: (**turn.metadata()).clone(),
            })
            .collect();
        self.seen.lock().expect("not poisoned").push(view);
        let analysis = Analysis::of(t, b);
        let actions = t
            .turns()
            .iter()
            .map(|turn| TurnAction::keep(turn.turn_id_arc().clone()))
            .collect();
        build_plan(t, &analysis, Decisions::actions(actions), "recorder", "1")
    }
}

/// `ceil(bytes / 3)`: depends on the text, so it offers no `estimate_chars`, and a chain must
/// give it the finished stub.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ByteThirds;

impl TokenEstimator for ByteThirds {
    fn estimate_tokens(&self, text: &str) -> u64 {
        u64::try_from(text.len().div_ceil(3)).expect("a small text")
    }
}

/// `ByteThirds`, recording every text it is asked about.
#[derive(Debug, Default)]
struct RecordingEstimator {
    texts: Arc<Mutex<Vec<String>>>,
}

impl TokenEstimator for RecordingEstimator {
    fn estimate_tokens(&self, text: &str) -> u64 {
        self.texts
            .lock()
            .expect("not poisoned")
            .push(text.to_owned());
        ByteThirds.estimate_tokens(text)
    }
}

fn masking(keep: usize) -> ObservationMaskingPolicy {
    ObservationMaskingPolicy::new(keep).expect("any keep_recent_results is valid")
}

fn masking_with(keep: usize, estimator: Box<dyn TokenEstimator>) -> ObservationMaskingPolicy {
    masking(keep).with_estimator(estimator)
}

fn chain(members: Vec<Box<dyn CompactionPolicy>>) -> PolicyChain {
    PolicyChain::new(members).expect("at least one member")
}

#[test]
fn a_custom_policy_decides_on_its_own() {
    // c1, c2 and c3 are 325 tokens each: the earliest goes first.
    let plan = DropLargestExchange
        .decide(&fixtures::tool_heavy(), &budget(700, 0))
        .expect("satisfiable");
    assert_eq!(
        acts(&plan),
        "s1:K u1:K a1:D t1:D a2:K a3:D t2:D a4:K a5:K t3:K u2:K"
    );
    assert_eq!(figures(&plan), (1070, 420, false, None));
    assert_eq!(plan.policy_name, "drop_largest_exchange");
}

#[test]
fn a_custom_policy_chains_with_shipped_ones_over_the_projection() {
    let policy = chain(vec![
        Box::new(masking(2)),
        Box::new(DropLargestExchange),
        Box::new(DropOldestPolicy),
    ]);
    assert_eq!(
        policy.name(),
        "chain(observation_masking@1.0.0+drop_largest_exchange@0.1.0+drop_oldest@1.0.0)"
    );
    // After masking, c1 weighs 25 + 32: the largest exchange is now c2 (tied with c3).
    let plan = policy
        .decide(&fixtures::tool_heavy(), &budget(700, 0))
        .expect("satisfiable");
    assert_eq!(
        acts(&plan),
        "s1:K u1:K a1:K t1:M32 a2:K a3:D t2:D a4:K a5:K t3:K u2:K"
    );
    assert_eq!(figures(&plan), (1070, 477, false, Some(4.0)));
    assert_eq!(plan.policy_version, "1.0.0");
    assert_eq!(stub_of(&plan, "t1"), default_stub(300, &"L".repeat(1200)));
}

#[test]
fn a_custom_policy_dropping_a_summary_stand_in_drops_the_whole_group() {
    let policy = chain(vec![
        Box::new(SummarizingPolicy::new(PROMPT).expect("a prompt id")),
        Box::new(DropLargestExchange),
    ]);
    let plan = policy
        .decide(&fixtures::long_chat(), &budget(100, 0))
        .expect("satisfiable");
    assert_eq!(
        acts(&plan),
        "s1:K m0:D m1:D m2:D m3:D m4:D m5:D m6:D m7:D m8:D m9:D u9:D"
    );
    assert!(plan.summarization_requests.is_empty());
    assert_eq!(figures(&plan), (525, 10, false, None));
}

#[test]
fn a_member_that_reads_content_sees_finished_stubs() {
    let (recorder, seen) = Recorder::new();
    let policy = chain(vec![Box::new(masking(2)), Box::new(recorder)]);
    let t = fixtures::tool_heavy();
    let plan = policy.decide(&t, &budget(200, 0)).expect("satisfiable");
    assert_eq!(figures(&plan), (1070, 802, true, Some(4.0)));
    let seen = seen.lock().expect("not poisoned");
    assert_eq!(seen.len(), 1, "the recorder runs once");
    let view = &seen[0];
    assert_eq!(
        view.iter().map(|s| s.id.as_str()).collect::<Vec<_>>(),
        t.turn_ids().collect::<Vec<_>>()
    );
    for (s, real) in view.iter().zip(t.turns()) {
        if s.id == "t1" {
            assert_eq!(s.content, default_stub(300, &"L".repeat(1200)));
            assert_eq!(s.estimate, 32);
        } else {
            assert_eq!(
                (s.content.as_str(), s.estimate),
                (real.content(), real.token_estimate())
            );
        }
    }
}

#[test]
fn a_masked_turn_in_the_projection_keeps_role_call_id_pin_and_metadata() {
    let metadata: BTreeMap<String, String> = [("origin".to_owned(), "grep".to_owned())]
        .into_iter()
        .collect();
    let t = transcript(vec![
        turn("a", Role::Assistant, 10).with_tool_call_id("c"),
        turn_with("r", Role::Tool, "result", 300)
            .with_tool_call_id("c")
            .with_metadata(Arc::new(metadata.clone())),
        turn("u", Role::User, 400),
    ]);
    let (recorder, seen) = Recorder::new();
    let policy = chain(vec![Box::new(masking(0)), Box::new(recorder)]);
    // The stub brings 710 down to 442, still over 420: the recorder runs.
    let plan = policy
        .decide(&t, &budget(420, 1))
        .expect("floor 400 fits 420");
    assert_eq!(acts(&plan), "a:K r:M32 u:K");
    assert_eq!(figures(&plan), (710, 442, true, Some(4.0)));
    let seen = seen.lock().expect("not poisoned");
    let r = seen[0]
        .iter()
        .find(|s| s.id == "r")
        .expect("r is in the projection");
    assert_eq!(
        r,
        &Seen {
            id: "r".into(),
            role: Role::Tool,
            content: default_stub(300, "result"),
            estimate: 32,
            tool_call_id: Some("c".into()),
            pinned: false,
            metadata,
        }
    );
}

#[test]
fn a_later_member_sees_a_summary_stand_in() {
    let (recorder, seen) = Recorder::new();
    let policy = chain(vec![
        Box::new(SummarizingPolicy::new(PROMPT).expect("a prompt id")),
        Box::new(recorder),
    ]);
    let plan = policy
        .decide(&fixtures::long_chat(), &budget(100, 0))
        .expect("satisfiable");
    assert_eq!(figures(&plan), (525, 113, true, None));
    let seen = seen.lock().expect("not poisoned");
    assert_eq!(
        seen[0],
        [
            Seen {
                id: "s1".into(),
                role: Role::System,
                content: "You are careful.".into(),
                estimate: 10,
                tool_call_id: None,
                pinned: false,
                metadata: BTreeMap::new(),
            },
            Seen {
                id: "summary:span-496ed38718261afc".into(),
                role: Role::Assistant,
                content: String::new(),
                estimate: 103,
                tool_call_id: None,
                pinned: false,
                metadata: BTreeMap::new(),
            },
        ]
    );
}

#[test]
fn a_text_dependent_estimator_gets_the_finished_stub_and_records_no_ratio() {
    let t = fixtures::tool_heavy();
    let texts = Arc::new(Mutex::new(Vec::new()));
    let estimator = RecordingEstimator {
        texts: Arc::clone(&texts),
    };
    let plan = masking_with(2, Box::new(estimator))
        .decide(&t, &budget(700, 0))
        .expect("satisfiable");
    let stub = default_stub(300, &"L".repeat(1200));
    // 126 bytes: ceil(126 / 3) = 42.
    assert_eq!(
        acts(&plan),
        "s1:K u1:K a1:K t1:M42 a2:K a3:K t2:K a4:K a5:K t3:K u2:K"
    );
    assert_eq!(figures(&plan), (1070, 812, true, None));
    assert_eq!(stub_of(&plan, "t1"), stub);
    assert_eq!(
        texts.lock().expect("not poisoned").as_slice(),
        std::slice::from_ref(&stub)
    );

    // Chained, the estimator is asked about the same finished stub.
    texts.lock().expect("not poisoned").clear();
    let estimator = RecordingEstimator {
        texts: Arc::clone(&texts),
    };
    let plan = chain(vec![Box::new(masking_with(2, Box::new(estimator)))])
        .decide(&t, &budget(700, 0))
        .expect("satisfiable");
    assert_eq!(figures(&plan), (1070, 812, true, None));
    assert_eq!(*texts.lock().expect("not poisoned"), [stub]);
}

/// The plan's parts other than its name, as canonical JSON.
fn without_name(plan: &CompactionPlan) -> String {
    let mut draft = plan.draft().clone();
    draft.policy_name = String::new();
    canonical_json(&draft).expect("a plan serializes")
}

#[test]
fn a_masking_member_with_a_custom_estimator_plans_as_it_does_alone() {
    let estimators: [fn() -> Box<dyn TokenEstimator>; 2] = [
        || Box::new(ByteThirds),
        || Box::new(CharRatioEstimator::new(2.0).expect("a valid ratio")),
    ];
    for make in estimators {
        for keep in [0, 2] {
            for (name, max, protected) in CASES {
                let t = by_name(name);
                let b = budget(max, protected);
                let alone = masking_with(keep, make())
                    .decide(&t, &b)
                    .expect("satisfiable");
                let chained = chain(vec![Box::new(masking_with(keep, make()))])
                    .decide(&t, &b)
                    .expect("satisfiable");
                assert_eq!(
                    without_name(&alone),
                    without_name(&chained),
                    "{name}-{max}-{protected} keep {keep}"
                );
                assert_eq!(alone.estimator_ratio, None);
                assert_eq!(chained.policy_name, "chain(observation_masking@1.0.0)");
            }
        }
    }
    // An injected char-ratio estimator of 2.0: 126 characters are 63 tokens, and no ratio.
    let plan = masking_with(
        2,
        Box::new(CharRatioEstimator::new(2.0).expect("a valid ratio")),
    )
    .decide(&fixtures::tool_heavy(), &budget(700, 0))
    .expect("satisfiable");
    assert_eq!(figures(&plan), (1070, 833, true, None));
    assert_eq!(
        acts(&plan),
        "s1:K u1:K a1:K t1:M63 a2:K a3:K t2:K a4:K a5:K t3:K u2:K"
    );
}

#[test]
fn a_second_masking_member_hashes_the_stub_it_was_shown() {
    // Text-dependent masking first (no ratio), then the default masking: the default one masks
    // the 42-token stubs again, hashing them, and its ratio is the first one reported.
    let policy = chain(vec![
        Box::new(masking_with(0, Box::new(ByteThirds))),
        Box::new(masking(0)),
    ]);
    let t = fixtures::tool_heavy();
    let plan = policy.decide(&t, &budget(200, 0)).expect("satisfiable");
    assert_eq!(
        acts(&plan),
        "s1:K u1:K a1:K t1:M32 a2:K a3:K t2:M32 a4:K a5:K t3:M32 u2:K"
    );
    assert_eq!(figures(&plan), (1070, 266, true, Some(4.0)));
    for (id, fill) in [("t1", "L"), ("t2", "D"), ("t3", "M")] {
        let first = default_stub(300, &fill.repeat(1200));
        assert_eq!(
            stub_of(&plan, id),
            format!(
                "[tool result masked by cutctx] (original: 42 tokens, sha256:{})",
                digest(&first)
            )
        );
    }

    // The other way round: the default member masks t1 (keeping two results), then the
    // text-dependent one masks t2 and t3 but cannot shrink t1's 32-token stub.
    let policy = chain(vec![
        Box::new(masking(2)),
        Box::new(masking_with(0, Box::new(ByteThirds))),
    ]);
    let plan = policy.decide(&t, &budget(200, 0)).expect("satisfiable");
    assert_eq!(
        acts(&plan),
        "s1:K u1:K a1:K t1:M32 a2:K a3:K t2:M42 a4:K a5:K t3:M42 u2:K"
    );
    assert_eq!(figures(&plan), (1070, 286, true, Some(4.0)));
    assert_eq!(stub_of(&plan, "t1"), default_stub(300, &"L".repeat(1200)));
    assert_eq!(stub_of(&plan, "t2"), default_stub(300, &"D".repeat(1200)));
    assert_eq!(stub_of(&plan, "t3"), default_stub(300, &"M".repeat(1200)));
    assert!(requests(&plan).is_empty());
}
