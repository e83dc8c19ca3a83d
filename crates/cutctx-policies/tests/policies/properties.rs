//! Properties of every policy over random transcripts, budgets and policies (chains included).
//!
//! Transcripts mix all roles, draw `tool_call_id`s from a small pool (some equal to turn ids),
//! so multi-call, displaced and orphaned exchanges occur, pin some turns, use estimates from 0
//! to 2000 with an occasional 10^12, and fill content with characters from every plane,
//! control characters and stub-like text. Budgets land below, at and above the untouchable
//! floor and the total.

use cutctx_invariants::CompactionPlan;
use cutctx_model::{
    Action, CompactionBudget, CompactionError, DEFAULT_PLACEHOLDER, ErrorCode, Role, Transcript,
    TranscriptTurn,
};
use cutctx_policies::{
    CharRatioEstimator, CompactionPolicy, ContentDigests, DropOldestPolicy,
    ObservationMaskingPolicy, PolicyChain, SummarizingPolicy, TokenEstimator,
};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use serde_json::json;

use crate::custom::{ByteThirds, DropLargestExchange};
use crate::oracle::{self, Planned};
use crate::{PROMPT, digest, group_id};

/// The placeholders a random masking policy may use.
const PLACEHOLDERS: [&str; 3] = [DEFAULT_PLACEHOLDER, "[gone]", " <masked> "];

/// The tool-call pool: `t0` and `t1` are also turn ids, which must merge nothing.
const CALLS: [&str; 6] = ["c0", "c1", "c2", "c3", "t0", "t1"];

/// A policy to build: a shipped one with options, the custom one, or a chain of them.
#[derive(Debug, Clone)]
enum Spec {
    Drop,
    /// `estimator`: 0 the default, 1 `ByteThirds` (text-dependent), 2 an injected ratio of 3.
    Mask {
        keep: usize,
        placeholder: usize,
        estimator: usize,
    },
    Summ {
        ratio: f64,
        min_span: usize,
    },
    Custom,
    Chain(Vec<Spec>),
}

impl Spec {
    fn build(&self) -> Box<dyn CompactionPolicy> {
        match self {
            Self::Drop => Box::new(DropOldestPolicy),
            Self::Mask {
                keep,
                placeholder,
                estimator,
            } => {
                let policy = ObservationMaskingPolicy::new(*keep)
                    .expect("any keep is valid")
                    .with_placeholder(PLACEHOLDERS[*placeholder])
                    .expect("not blank");
                match estimator {
                    0 => Box::new(policy),
                    1 => Box::new(policy.with_estimator(Box::new(ByteThirds))),
                    _ => Box::new(policy.with_estimator(Box::new(
                        CharRatioEstimator::new(3.0).expect("a valid ratio"),
                    ))),
                }
            }
            Self::Summ { ratio, min_span } => Box::new(
                SummarizingPolicy::new(PROMPT)
                    .expect("a prompt id")
                    .with_target_ratio(*ratio)
                    .expect("a valid ratio")
                    .with_min_span_turns(*min_span)
                    .expect("at least 1"),
            ),
            Self::Custom => Box::new(DropLargestExchange),
            Self::Chain(members) => Box::new(
                PolicyChain::new(members.iter().map(Self::build).collect())
                    .expect("at least one member"),
            ),
        }
    }

    /// The masking leaves, nested chains included.
    fn masking_leaves(&self) -> Vec<&Self> {
        match self {
            Self::Mask { .. } => vec![self],
            Self::Chain(members) => members.iter().flat_map(Self::masking_leaves).collect(),
            _ => vec![],
        }
    }

    /// The stub estimate this masking leaf's estimator gives `stub`.
    fn stub_estimate(&self, stub: &str) -> u64 {
        let chars = u64::try_from(stub.chars().count()).expect("a small stub");
        match self {
            Self::Mask { estimator: 0, .. } => chars.div_ceil(4),
            Self::Mask { estimator: 1, .. } => ByteThirds.estimate_tokens(stub),
            Self::Mask { .. } => chars.div_ceil(3),
            _ => unreachable!("only masking leaves estimate stubs"),
        }
    }
}

fn mask_leaf() -> impl Strategy<Value = Spec> {
    (0..4_usize, 0..3_usize, 0..3_usize).prop_map(|(keep, placeholder, estimator)| Spec::Mask {
        keep,
        placeholder,
        estimator,
    })
}

fn summ_leaf() -> impl Strategy<Value = Spec> {
    (
        prop::sample::select(vec![0.2, 0.5, 0.05, 0.333, 1.0, 2.5]),
        1..6_usize,
    )
        .prop_map(|(ratio, min_span)| Spec::Summ { ratio, min_span })
}

fn leaf() -> impl Strategy<Value = Spec> {
    prop_oneof![
        Just(Spec::Drop),
        mask_leaf(),
        summ_leaf(),
        Just(Spec::Custom),
    ]
}

fn spec() -> impl Strategy<Value = Spec> {
    prop_oneof![
        2 => leaf(),
        3 => prop::collection::vec(leaf(), 1..=4).prop_map(Spec::Chain),
        1 => leaf().prop_recursive(2, 10, 4, |inner| {
            prop::collection::vec(inner, 1..=4).prop_map(Spec::Chain)
        }),
    ]
}

fn character() -> impl Strategy<Value = char> {
    prop_oneof![
        4 => any::<char>(),
        2 => prop::sample::select(vec![
            '\u{0}', '\u{1}', '\u{8}', '\t', '\n', '\u{c}', '\r', '\u{1b}', '\u{1f}', '"', '\\',
            '/', '\u{7f}', '\u{80}', '\u{2028}', '\u{2029}', '\u{fffd}', '\u{e000}', '😀',
            '\u{10ffff}', '\u{20000}', 'é', '漢',
        ]),
        1 => prop::char::range('a', 'f'),
    ]
}

fn content() -> impl Strategy<Value = String> {
    prop_oneof![
        6 => prop::collection::vec(character(), 0..24).prop_map(String::from_iter),
        1 => (character(), 1..40_usize).prop_map(|(c, n)| std::iter::repeat_n(c, n).collect()),
        1 => Just(format!("{DEFAULT_PLACEHOLDER} (original: 300 tokens, sha256:")),
        1 => "[0-9a-f]{0,80}",
    ]
}

fn estimate() -> impl Strategy<Value = u64> {
    prop_oneof![
        8 => 0..2000_u64,
        3 => 0..40_u64,
        1 => Just(1_000_000_000_000_u64),
    ]
}

/// One turn: role, call index, pinned, estimate, content.
type TurnSpec = (usize, Option<usize>, bool, u64, String);

/// Turns that give masking and summarizing work: no system turns, mostly large tool results.
fn busy_turn_spec() -> impl Strategy<Value = TurnSpec> {
    (
        prop::sample::select(vec![1, 2, 3, 3, 3]),
        prop::option::weighted(0.3, 0..CALLS.len()),
        prop::bool::weighted(0.04),
        prop_oneof![4 => 40..2000_u64, 1 => 0..40_u64],
        content(),
    )
}

fn turn_spec() -> impl Strategy<Value = TurnSpec> {
    (
        // System turns are rare enough to leave room for compaction; tool turns common.
        prop::sample::select(vec![0, 1, 1, 1, 2, 2, 2, 3, 3, 3]),
        prop::option::weighted(0.4, 0..CALLS.len()),
        prop::bool::weighted(0.08),
        estimate(),
        content(),
    )
}

fn build_transcript(specs: &[TurnSpec]) -> Transcript {
    let roles = [Role::System, Role::User, Role::Assistant, Role::Tool];
    let turns = specs
        .iter()
        .enumerate()
        .map(|(i, (role, call, pinned, estimate, content))| {
            let role = roles[*role];
            TranscriptTurn::new(format!("t{i}"), role, content.as_str(), *estimate)
                .expect("a non-empty id")
                .with_tool_call_id_opt(call.map(|c| CALLS[c].into()))
                .with_pinned(*pinned)
        })
        .collect();
    Transcript::new(turns).expect("unique ids")
}

/// `(untouchable tokens, untouchable count)`, computed from the definition.
fn floor(t: &Transcript, b: &CompactionBudget) -> (u64, u64) {
    let n = t.len();
    let protected = usize::try_from(b.protected_recent_turns).unwrap_or(usize::MAX);
    let from = n.saturating_sub(protected);
    t.turns()
        .iter()
        .enumerate()
        .filter(|(i, turn)| turn.role() == Role::System || turn.pinned() || *i >= from)
        .fold((0, 0), |(tokens, count), (_, turn)| {
            (tokens + turn.token_estimate(), count + 1)
        })
}

/// A budget from a mode and a random figure, placed relative to the floor and the total.
fn place_budget(t: &Transcript, mode: usize, r: u64, protected: u64) -> CompactionBudget {
    let b = CompactionBudget::new(0).with_protected_recent_turns(protected);
    let (floor, _) = floor(t, &b);
    let total = t.token_estimate();
    let max = match mode {
        0 => floor.saturating_sub(1 + r % 50),
        1 => floor,
        2..=6 => floor + r % (total - floor + 1),
        7 => total,
        8 => r % 5000,
        _ => total.saturating_sub(r % 600),
    };
    CompactionBudget::new(max).with_protected_recent_turns(protected)
}

/// Splits a stub into (placeholder, original count, digest), if it has the stub's shape.
fn parse_stub(stub: &str) -> Option<(&str, &str, &str)> {
    let (placeholder, rest) = stub.rsplit_once(" (original: ")?;
    let (count, rest) = rest.split_once(" tokens, sha256:")?;
    let hex = rest.strip_suffix(')')?;
    let well_formed = !count.is_empty()
        && count.bytes().all(|b| b.is_ascii_digit())
        && hex.len() == 64
        && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    well_formed.then_some((placeholder, count, hex))
}

fn fail(message: String) -> TestCaseError {
    TestCaseError::fail(message)
}

/// Every property of one decision.
fn check(
    specs: &[TurnSpec],
    mode: usize,
    r: u64,
    protected: u64,
    spec: &Spec,
) -> Result<(), TestCaseError> {
    let t = build_transcript(specs);
    let b = place_budget(&t, mode, r, protected);
    let policy = spec.build();
    let (floor_tokens, floor_count) = floor(&t, &b);
    let result = policy.decide(&t, &b);

    // BudgetUnsatisfiable exactly when the floor exceeds the budget.
    if floor_tokens > b.max_tokens {
        let err = result.err().ok_or_else(|| {
            fail(format!(
                "floor {floor_tokens} > {} but a plan came back",
                b.max_tokens
            ))
        })?;
        prop_assert_eq!(err.code(), ErrorCode::BudgetUnsatisfiable);
        let details = serde_json::to_value(err.details()).expect("details are JSON");
        prop_assert_eq!(
            details,
            json!({
                "untouchable_tokens": floor_tokens,
                "max_tokens": b.max_tokens,
                "untouchable_turn_count": floor_count,
                "protected_recent_turns": b.protected_recent_turns,
            })
        );
        return Ok(());
    }
    // Where the reference's own span would split an exchange (it then fails with a split
    // exchange), cutctx refines the span instead: the plan must exist and re-validate, but the
    // oracle, which follows the reference, has nothing to compare it with.
    let refined = matches!(spec, Spec::Summ { ratio, min_span }
        if oracle::summarizing(&t, &b, *ratio, *min_span).splits_an_exchange);
    let plan = match result {
        Ok(plan) => plan,
        Err(e) => {
            return Err(fail(format!(
                "{} refused a satisfiable budget: {} {} {:?}",
                policy.name(),
                e.code(),
                e.message(),
                e.details()
            )));
        }
    };

    // A shipped policy alone plans exactly as its naive re-implementation.
    if !refined {
        check_oracle(&t, &b, &plan, spec)?;
    }

    // The plan re-validates, unchanged.
    let again = CompactionPlan::validate(plan.draft().clone(), &t, &b).map_err(|e| {
        fail(format!(
            "re-validation failed: {} {:?}",
            e.message(),
            e.details()
        ))
    })?;
    prop_assert_eq!(&again, &plan);

    // The figures.
    let total = t.token_estimate();
    prop_assert_eq!(plan.tokens_before, total);
    prop_assert!(plan.tokens_after_estimate <= plan.tokens_before);
    prop_assert_eq!(plan.budget_unmet, plan.tokens_after_estimate > b.max_tokens);
    prop_assert_eq!(plan.policy_name.as_str(), policy.name());

    // Deciding again, with the same policy or a fresh one, gives the same bytes.
    let bytes = plan.canonical_json();
    let twice = policy.decide(&t, &b).map_err(|e| fail(e.to_string()))?;
    prop_assert_eq!(&twice.canonical_json(), &bytes);
    let fresh = spec
        .build()
        .decide(&t, &b)
        .map_err(|e| fail(e.to_string()))?;
    prop_assert_eq!(&fresh.canonical_json(), &bytes);

    // A transcript that fits is kept whole.
    if total <= b.max_tokens {
        prop_assert!(plan.actions.iter().all(|a| a.action() == Action::Keep));
        prop_assert!(plan.summarization_requests.is_empty());
        prop_assert_eq!(plan.tokens_after_estimate, total);
        prop_assert_eq!(plan.estimator_ratio, None);
    }

    check_masks(&t, &plan, spec)?;
    check_requests(&t, &plan, spec)?;
    check_ratio(&plan, spec)
}

/// The plan's actions in the oracle's terms.
fn planned(plan: &CompactionPlan) -> Vec<Planned> {
    plan.actions
        .iter()
        .map(|a| match (a.action(), a.replacement(), a.summary_group()) {
            (Action::Mask, Some(r), _) => Planned::Mask(r.content.to_string(), r.token_estimate),
            (Action::Summarize, _, Some(g)) => Planned::Summarize(g.to_owned()),
            (Action::Drop, ..) => Planned::Drop,
            _ => Planned::Keep,
        })
        .collect()
}

fn check_oracle(
    t: &Transcript,
    b: &CompactionBudget,
    plan: &CompactionPlan,
    spec: &Spec,
) -> Result<(), TestCaseError> {
    match spec {
        Spec::Drop => prop_assert_eq!(planned(plan), oracle::drop_oldest(t, b)),
        Spec::Mask {
            keep, placeholder, ..
        } => {
            let estimate = |stub: &str| spec.stub_estimate(stub);
            let expected = oracle::masking(t, b, *keep, PLACEHOLDERS[*placeholder], &estimate);
            prop_assert_eq!(planned(plan), expected);
        }
        Spec::Summ { ratio, min_span } => {
            let expected = oracle::summarizing(t, b, *ratio, *min_span);
            prop_assert_eq!(planned(plan), expected.actions);
            let request = plan.summarization_requests.first().map(|r| {
                (
                    r.group_id().to_owned(),
                    r.turn_ids()
                        .iter()
                        .map(|id| id.to_string())
                        .collect::<Vec<_>>(),
                    r.target_tokens(),
                )
            });
            prop_assert_eq!(request, expected.request);
        }
        Spec::Custom | Spec::Chain(_) => {}
    }
    Ok(())
}

fn check_masks(t: &Transcript, plan: &CompactionPlan, spec: &Spec) -> Result<(), TestCaseError> {
    let leaves = spec.masking_leaves();
    let mut alphabet: Vec<char> = PLACEHOLDERS.concat().chars().collect();
    alphabet.extend(" (original:tokens,sha256)0123456789abcdef".chars());
    for (turn, action) in t.turns().iter().zip(&plan.actions) {
        let Some(stub) = action.replacement() else {
            continue;
        };
        prop_assert_eq!(turn.role(), Role::Tool, "only tool turns are masked");
        prop_assert!(
            stub.token_estimate < turn.token_estimate(),
            "a stub never enlarges"
        );
        let content = &*stub.content;
        let (placeholder, count, hex) =
            parse_stub(content).ok_or_else(|| fail(format!("not a stub: {content:?}")))?;
        prop_assert!(PLACEHOLDERS.contains(&placeholder), "{placeholder:?}");
        if let [leaf] = leaves.as_slice() {
            // One masking member: the stub is exactly its stub of the real content.
            prop_assert_eq!(count, turn.token_estimate().to_string());
            prop_assert_eq!(hex, digest(turn.content()));
            prop_assert_eq!(stub.token_estimate, leaf.stub_estimate(content));
        }
        // No run of 8 characters of the content survives in the stub, except runs made only of
        // characters the stub's own template uses (placeholders, digits, hex, punctuation).
        let chars: Vec<char> = turn.content().chars().collect();
        for window in chars.windows(8) {
            if window.iter().all(|c| alphabet.contains(c)) {
                continue;
            }
            let window: String = window.iter().collect();
            prop_assert!(
                !content.contains(&window),
                "{window:?} leaked into {content:?}"
            );
        }
    }
    Ok(())
}

fn check_requests(t: &Transcript, plan: &CompactionPlan, spec: &Spec) -> Result<(), TestCaseError> {
    for request in &plan.summarization_requests {
        let gid = request.group_id();
        let hex = gid
            .strip_prefix("span-")
            .ok_or_else(|| fail(format!("group id {gid:?}")))?;
        prop_assert!(
            hex.len() == 16 && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
        );
        prop_assert_eq!(request.prompt_id(), PROMPT);
        let members: u64 = t
            .turns()
            .iter()
            .filter(|turn| request.turn_ids().iter().any(|id| &**id == turn.turn_id()))
            .map(TranscriptTurn::token_estimate)
            .sum();
        prop_assert!(request.target_tokens() >= 1);
        prop_assert!(
            request.target_tokens() < members,
            "target {} for {} tokens",
            request.target_tokens(),
            members
        );
    }
    if let Spec::Summ { .. } = spec {
        prop_assert!(plan.summarization_requests.len() <= 1);
        if let Some(request) = plan.summarization_requests.first() {
            let ids: Vec<&str> = request.turn_ids().iter().map(|id| &**id).collect();
            prop_assert_eq!(request.group_id(), group_id(&ids));
        }
    }
    Ok(())
}

fn check_ratio(plan: &CompactionPlan, spec: &Spec) -> Result<(), TestCaseError> {
    let masked = plan.actions.iter().any(|a| a.action() == Action::Mask);
    match spec {
        Spec::Mask { estimator: 0, .. } => {
            prop_assert_eq!(plan.estimator_ratio, masked.then_some(4.0));
        }
        Spec::Chain(_) => {
            let default_masker = spec
                .masking_leaves()
                .iter()
                .any(|leaf| matches!(leaf, Spec::Mask { estimator: 0, .. }));
            prop_assert!(matches!(plan.estimator_ratio, None | Some(4.0)));
            if !default_masker {
                prop_assert_eq!(plan.estimator_ratio, None);
            }
        }
        _ => prop_assert_eq!(plan.estimator_ratio, None),
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 1000,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn every_policy_keeps_every_guarantee(
        specs in prop::collection::vec(turn_spec(), 0..16),
        mode in 0..10_usize,
        r in 0..100_000_u64,
        protected in prop::sample::select(vec![0_u64, 0, 0, 1, 1, 2, 2, 3, 4, 7]),
        spec in spec(),
    ) {
        check(&specs, mode, r, protected, &spec)?;
    }

    #[test]
    fn masking_and_summarizing_chains_keep_every_guarantee(
        specs in prop::collection::vec(busy_turn_spec(), 4..16),
        mode in 2..10_usize,
        r in 0..100_000_u64,
        protected in 0..3_u64,
        members in prop::collection::vec(
            prop_oneof![3 => mask_leaf(), 3 => summ_leaf(), 1 => Just(Spec::Drop)],
            1..=3,
        ),
    ) {
        let spec = match <[Spec; 1]>::try_from(members) {
            Ok([only]) => only,
            Err(members) => Spec::Chain(members),
        };
        check(&specs, mode, r, protected, &spec)?;
    }
}

/// The contents of a transcript held beside it, hashed on demand, counting what was asked.
struct Beside {
    contents: Vec<String>,
    asked: std::sync::atomic::AtomicUsize,
}

impl ContentDigests for Beside {
    fn digest(&self, position: usize) -> Result<[u8; 32], CompactionError> {
        use sha2::{Digest, Sha256};
        self.asked
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let literal =
            cutctx_model::canonical::canonical_json_value(&json!(self.contents[position]));
        Ok(Sha256::digest(literal.as_bytes()).into())
    }

    fn content_len(&self, position: usize) -> usize {
        self.contents[position].len()
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 400,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// A policy that answers `decide_with_digests` decides over a transcript without its
    /// contents, given their digests, exactly what it decides over the transcript itself.
    #[test]
    fn deciding_with_digests_instead_of_contents_makes_the_same_plan(
        specs in prop::collection::vec(busy_turn_spec(), 1..16),
        mode in 2..10_usize,
        r in 0..100_000_u64,
        protected in 0..3_u64,
        members in prop::collection::vec(
            prop_oneof![3 => mask_leaf(), 2 => summ_leaf(), 1 => Just(Spec::Drop)],
            1..=3,
        ),
    ) {
        let spec = match <[Spec; 1]>::try_from(members) {
            Ok([only]) => only,
            Err(members) => Spec::Chain(members),
        };
        let policy = spec.build();
        let t = build_transcript(&specs);
        let budget = place_budget(&t, mode, r, protected);
        let mut emptied = t.clone();
        emptied.release_contents(|_| false);
        let analysis = cutctx_invariants::Analysis::of(&emptied, &budget);
        let beside = Beside {
            contents: t.turns().iter().map(|turn| turn.content().to_owned()).collect(),
            asked: std::sync::atomic::AtomicUsize::new(0),
        };
        let Some(with_digests) = policy.decide_with_digests(&emptied, &analysis, &beside) else {
            // Only a policy that reads contents otherwise declines.
            prop_assert_eq!(policy.reads(), cutctx_policies::Reads::Content);
            return Ok(());
        };
        match (policy.decide(&t, &budget), with_digests) {
            (Ok(a), Ok(b)) => {
                prop_assert_eq!(&a, &b);
                // A digest is asked for each mask the plan keeps, and no more than one per
                // mask a member made.
                let masked = a
                    .actions
                    .iter()
                    .filter(|x| matches!(x.view(), cutctx_model::ActionView::Mask(_)))
                    .count();
                let asked = beside.asked.load(std::sync::atomic::Ordering::Relaxed);
                prop_assert!(asked >= masked, "{} < {}", asked, masked);
                prop_assert!(asked <= t.len() * 3, "{}", asked);
            }
            (Err(a), Err(b)) => prop_assert_eq!(a.to_string(), b.to_string()),
            (a, b) => prop_assert!(false, "one failed: {:?} / {:?}", a.map(|_| ()), b.map(|_| ())),
        }
    }
}

#[test]
fn the_shipped_chain_and_masking_decide_with_digests_and_a_digest_error_is_the_plans() {
    struct Failing;
    impl ContentDigests for Failing {
        fn digest(&self, position: usize) -> Result<[u8; 32], CompactionError> {
            Err(CompactionError::validation(
                "no content here",
                cutctx_model::details! { "position" => position },
            ))
        }
        fn content_len(&self, _: usize) -> usize {
            0
        }
    }
    // Four exchanges of a large result, then a question: masking two results fits.
    let mut specs: Vec<TurnSpec> = (0..4)
        .flat_map(|k| {
            [
                (2, Some(k), false, 10, String::new()),
                (3, Some(k), false, 900, "x".repeat(3600)),
            ]
        })
        .collect();
    specs.push((1, None, false, 5, "thanks".into()));
    let t = build_transcript(&specs);
    let budget = CompactionBudget::new(2_000).with_protected_recent_turns(1);
    let analysis = cutctx_invariants::Analysis::of(&t, &budget);
    let chain = cutctx_policies::default_chain(PROMPT).expect("the default chain");
    let masking = ObservationMaskingPolicy::new(0).expect("a policy");
    for policy in [&chain as &dyn CompactionPolicy, &masking] {
        let err = policy
            .decide_with_digests(&t, &analysis, &Failing)
            .expect("answers")
            .expect_err("the digest fails");
        assert_eq!(err.message(), "no content here");
    }
    // A policy reading contents declines: stubs estimated by their words, not their length.
    struct Words;
    impl TokenEstimator for Words {
        fn estimate_tokens(&self, text: &str) -> u64 {
            text.split_whitespace().count() as u64
        }
    }
    let custom = ObservationMaskingPolicy::new(0)
        .expect("a policy")
        .with_estimator(Box::new(Words));
    assert!(
        custom
            .decide_with_digests(&t, &analysis, &Failing)
            .is_none()
    );
}
