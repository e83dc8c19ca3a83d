//! The capability methods a user's own policy can answer: a chain gives a shape-reading
//! policy the shape (never a transcript), checks what any member decides, and runs digests on
//! as many threads as it is allowed.

use std::num::NonZeroUsize;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use cutctx_invariants::{Analysis, CompactionPlan, Decisions, build_plan};
use cutctx_model::{CompactionBudget, CompactionError, ErrorCode, Role, Transcript, TurnAction};
use cutctx_policies::{
    CompactionPolicy, DropOldestPolicy, ObservationMaskingPolicy, Parallelism, PolicyChain, Reads,
    Shape, ShapeDecision, default_chain,
};

use crate::{PROMPT, budget, transcript, turn, turn_with};

/// Drops the newest removable turn first: a policy that decides from the shape alone, and
/// counts how it was asked.
#[derive(Default)]
struct DropNewest {
    shapes: AtomicUsize,
    transcripts: AtomicUsize,
    /// Answer this instead of deciding (to test what the chain does with a bad answer).
    forced: Option<ShapeDecision>,
}

impl DropNewest {
    fn positions(shape: &Shape<'_>) -> Vec<usize> {
        let removable = shape.analysis().removable();
        let mut running = shape.total();
        let mut out = Vec::new();
        for p in (0..shape.len()).rev() {
            if running <= shape.budget().max_tokens {
                break;
            }
            if removable[p]
                && shape
                    .analysis()
                    .exchanges()
                    .members(shape.analysis().exchanges().exchange_of(p))
                    .len()
                    == 1
            {
                running -= shape.estimates()[p];
                out.push(p);
            }
        }
        out.reverse();
        out
    }
}

impl CompactionPolicy for DropNewest {
    fn name(&self) -> &str {
        "drop_newest"
    }

    fn version(&self) -> &str {
        "1"
    }

    fn decide(
        &self,
        t: &Transcript,
        b: &CompactionBudget,
    ) -> Result<CompactionPlan, CompactionError> {
        self.transcripts.fetch_add(1, Ordering::SeqCst);
        let analysis = Analysis::of(t, b);
        let shape = Shape::new(t.token_estimates(), &analysis)?;
        let dropped = Self::positions(&shape);
        let actions = t
            .turn_id_arcs()
            .iter()
            .enumerate()
            .map(|(p, id)| {
                if dropped.contains(&p) {
                    TurnAction::drop_turn(id.clone())
                } else {
                    TurnAction::keep(id.clone())
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

    fn reads(&self) -> Reads {
        Reads::Shape
    }

    fn decide_shape(&self, shape: &Shape<'_>) -> Option<Result<ShapeDecision, CompactionError>> {
        self.shapes.fetch_add(1, Ordering::SeqCst);
        Some(Ok(self.forced.clone().unwrap_or_else(|| {
            ShapeDecision::Drop(Self::positions(shape))
        })))
    }
}

/// The same policy behind `decide` alone.
struct Plain(Arc<DropNewest>);

impl CompactionPolicy for Plain {
    fn name(&self) -> &str {
        self.0.name()
    }

    fn version(&self) -> &str {
        self.0.version()
    }

    fn decide(
        &self,
        t: &Transcript,
        b: &CompactionBudget,
    ) -> Result<CompactionPlan, CompactionError> {
        self.0.decide(t, b)
    }
}

/// The policy itself, shared so that the test can read its counts.
struct Shared(Arc<DropNewest>);

impl CompactionPolicy for Shared {
    fn name(&self) -> &str {
        self.0.name()
    }

    fn version(&self) -> &str {
        self.0.version()
    }

    fn decide(
        &self,
        t: &Transcript,
        b: &CompactionBudget,
    ) -> Result<CompactionPlan, CompactionError> {
        self.0.decide(t, b)
    }

    fn reads(&self) -> Reads {
        self.0.reads()
    }

    fn decide_shape(&self, shape: &Shape<'_>) -> Option<Result<ShapeDecision, CompactionError>> {
        self.0.decide_shape(shape)
    }
}

/// A system turn, old chatter, a tool exchange and recent chatter.
fn session() -> Transcript {
    transcript(vec![
        turn("s", Role::System, 10),
        turn("u1", Role::User, 40),
        turn("a1", Role::Assistant, 40),
        turn("c1", Role::Assistant, 10).with_tool_call_id("k"),
        turn_with("t1", Role::Tool, &"x".repeat(800), 200).with_tool_call_id("k"),
        turn("u2", Role::User, 30),
        turn("a2", Role::Assistant, 30),
        turn("u3", Role::User, 5),
    ])
}

#[test]
fn a_users_shape_policy_gets_the_shape_in_a_chain_and_plans_as_through_decide() {
    let t = session();
    let b = budget(120, 1);
    let fast = Arc::new(DropNewest::default());
    let slow = Arc::new(DropNewest::default());
    let chained = |member: Box<dyn CompactionPolicy>| {
        PolicyChain::new(vec![
            Box::new(ObservationMaskingPolicy::new(0).expect("valid")),
            member,
        ])
        .expect("two members")
    };
    let a = chained(Box::new(Shared(Arc::clone(&fast))))
        .decide(&t, &b)
        .expect("plans");
    let z = chained(Box::new(Plain(Arc::clone(&slow))))
        .decide(&t, &b)
        .expect("plans");
    assert_eq!(a.canonical_json(), z.canonical_json());
    assert!(
        a.actions
            .iter()
            .any(|x| x.action() == cutctx_model::Action::Drop),
        "{}",
        a.canonical_json()
    );
    // The shape-reading member was never given a transcript; the plain one always was.
    assert_eq!(
        (
            fast.shapes.load(Ordering::SeqCst),
            fast.transcripts.load(Ordering::SeqCst)
        ),
        (1, 0)
    );
    assert_eq!(
        (
            slow.shapes.load(Ordering::SeqCst),
            slow.transcripts.load(Ordering::SeqCst)
        ),
        (0, 1)
    );
}

#[test]
fn a_shape_decision_outside_the_projection_is_an_error_not_a_panic() {
    let t = session();
    let b = budget(120, 1);
    for forced in [
        ShapeDecision::Drop(vec![1, 99]),
        ShapeDecision::Drop(vec![2, 1]),
        ShapeDecision::Summarize {
            span: 3..3,
            target_tokens: 1,
            prompt_id: PROMPT.into(),
        },
        ShapeDecision::Summarize {
            span: 5..40,
            target_tokens: 1,
            prompt_id: PROMPT.into(),
        },
    ] {
        let member = DropNewest {
            forced: Some(forced.clone()),
            ..DropNewest::default()
        };
        let err = PolicyChain::new(vec![Box::new(member)])
            .expect("one member")
            .decide(&t, &b);
        let err = err.expect_err("refused");
        assert_eq!(err.code(), ErrorCode::Validation, "{forced:?}");
        assert_eq!(err.details()["policy_name"], "drop_newest", "{forced:?}");
    }
}

#[test]
fn a_shape_decision_that_breaks_a_rule_is_refused_by_the_final_plan() {
    let t = session();
    let b = budget(120, 1);
    // The system turn, and the last (protected) turn.
    for position in [0, 7] {
        let member = DropNewest {
            forced: Some(ShapeDecision::Drop(vec![position])),
            ..DropNewest::default()
        };
        let err = PolicyChain::new(vec![Box::new(member)])
            .expect("one member")
            .decide(&t, &b);
        let err = err.expect_err("untouchable");
        assert_eq!(err.code(), ErrorCode::Validation);
        assert!(
            err.details().get("touched_turn_ids").is_some(),
            "{:?}",
            err.details()
        );
    }
}

#[test]
fn a_chain_refuses_the_analysis_of_another_transcript() {
    let t = session();
    let other = session();
    let b = budget(120, 1);
    let chain = default_chain(PROMPT).expect("valid");
    let err = chain
        .decide_with_analysis(&t, &Analysis::of(&other, &b))
        .expect_err("another transcript");
    assert_eq!(err.code(), ErrorCode::Validation);
    let err = DropOldestPolicy
        .decide_with_analysis(&t, &Analysis::of(&other, &b))
        .expect_err("another transcript");
    assert_eq!(err.code(), ErrorCode::Validation);
    // Its own analysis: the plan of `decide`.
    let own = chain
        .decide_with_analysis(&t, &Analysis::of(&t, &b))
        .expect("plans");
    assert_eq!(own, chain.decide(&t, &b).expect("plans"));
}

#[test]
fn parallelism_bounds_threads_and_never_changes_a_plan() {
    // Forty results of 64 KiB: past the mebibyte where digests spread over threads.
    let mut turns = vec![turn("s", Role::System, 10)];
    for i in 0..40 {
        let call = format!("k{i}");
        turns.push(turn(&format!("c{i}"), Role::Assistant, 10).with_tool_call_id(call.as_str()));
        turns.push(
            turn_with(
                &format!("t{i}"),
                Role::Tool,
                &format!("{i}").repeat(65_536),
                16_384,
            )
            .with_tool_call_id(call.as_str()),
        );
    }
    let t = transcript(turns);
    let b = budget(40_000, 2);
    let plans: Vec<String> = [
        Parallelism::Automatic,
        Parallelism::Sequential,
        Parallelism::AtMost(NonZeroUsize::new(3).expect("non-zero")),
    ]
    .into_iter()
    .flat_map(|p| {
        let masking = ObservationMaskingPolicy::new(2)
            .expect("valid")
            .with_parallelism(p);
        let chain = default_chain(PROMPT).expect("valid").with_parallelism(p);
        [masking.decide(&t, &b), chain.decide(&t, &b)]
    })
    .map(|plan| plan.expect("plans").canonical_json())
    .collect();
    assert!(plans[0].contains("sha256:"), "something was masked");
    for (i, plan) in plans.iter().enumerate() {
        assert_eq!(plan, &plans[i % 2], "plan {i}");
    }
}
