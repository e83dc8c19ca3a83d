//! `docs/recipes/adding-a-policy.md`, followed once: a policy written step by step as the
//! recipe says (drop whole removable exchanges, newest first, deciding from the shape alone),
//! with the tests the recipe says to write first, in the order it gives them.
//!
//! Keep the two together: a change to the recipe's steps is a change to this file.

use cutctx_invariants::{Analysis, CompactionPlan, Decisions, build_plan};
use cutctx_model::{
    Action, CompactionBudget, CompactionError, ErrorCode, Role, Transcript, TurnAction,
    canonical::canonical_json,
};
use cutctx_policies::{
    CompactionPolicy, DropOldestPolicy, ObservationMaskingPolicy, PolicyChain, Reads, Shape,
    ShapeDecision, SummarizingPolicy,
};
use proptest::strategy::{Strategy, ValueTree};
use serde_json::json;

use crate::chain::{Opaque, agent_case};
use crate::{PROMPT, acts, budget, figures, invalid, transcript, turn, unsatisfiable};

// Step 1 of the recipe: the policy. Its decision is a function of the shape alone, so the
// trait's `decide` and `decide_shape` cannot disagree: both call `dropped`.

/// Drops whole removable exchanges, newest first (in reverse order of their earliest turn),
/// until the estimate fits the budget; an exchange with an untouchable member is skipped whole.
#[derive(Debug, Clone, Copy, Default)]
struct DropNewestExchange;

impl DropNewestExchange {
    const NAME: &'static str = "drop_newest_exchange";
    const VERSION: &'static str = "0.1.0";

    /// The positions to drop, strictly increasing, as `ShapeDecision::Drop` wants them.
    fn dropped(shape: &Shape<'_>) -> Vec<usize> {
        let analysis = shape.analysis();
        let exchanges = analysis.exchanges();
        let (estimates, removable) = (shape.estimates(), analysis.removable());
        let mut running = shape.total();
        let mut dropped = Vec::new();
        for e in (0..exchanges.len()).rev() {
            if running <= shape.budget().max_tokens {
                break;
            }
            let members = exchanges.members(e);
            // `removable` holds for every member of an exchange or for none.
            if !removable[members[0]] {
                continue;
            }
            for &p in members {
                dropped.push(p);
                running = running.saturating_sub(estimates[p]);
            }
        }
        dropped.sort_unstable();
        dropped
    }

    /// The plan dropping `dropped`: every turn gets an action, and `build_plan` derives the
    /// figures and checks every rule, so a wrong `dropped` is refused here, never applied.
    fn plan(
        t: &Transcript,
        analysis: &Analysis,
        dropped: &[usize],
    ) -> Result<CompactionPlan, CompactionError> {
        let actions = t
            .turn_id_arcs()
            .iter()
            .enumerate()
            .map(|(p, id)| {
                if dropped.binary_search(&p).is_ok() {
                    TurnAction::drop_turn(id.clone())
                } else {
                    TurnAction::keep(id.clone())
                }
            })
            .collect();
        build_plan(
            t,
            analysis,
            Decisions::actions(actions),
            Self::NAME,
            Self::VERSION,
        )
    }
}

impl CompactionPolicy for DropNewestExchange {
    fn name(&self) -> &str {
        Self::NAME
    }

    fn version(&self) -> &str {
        Self::VERSION
    }

    fn decide(
        &self,
        t: &Transcript,
        b: &CompactionBudget,
    ) -> Result<CompactionPlan, CompactionError> {
        self.decide_with_analysis(t, &Analysis::of(t, b))
    }

    fn decide_with_analysis(
        &self,
        t: &Transcript,
        analysis: &Analysis,
    ) -> Result<CompactionPlan, CompactionError> {
        // The floor first: an unsatisfiable budget is refused with both figures.
        analysis.require_satisfiable()?;
        let shape = Shape::new(t.token_estimates(), analysis)?;
        Self::plan(t, analysis, &Self::dropped(&shape))
    }

    fn reads(&self) -> Reads {
        Reads::Shape
    }

    fn decide_shape(&self, shape: &Shape<'_>) -> Option<Result<ShapeDecision, CompactionError>> {
        Some(
            shape
                .analysis()
                .require_satisfiable()
                .map(|()| ShapeDecision::Drop(Self::dropped(shape))),
        )
    }
}

/// The policy with its `decide` refused: chained, it plans only if the chain takes the shape
/// path, so the equivalence below cannot pass by quietly comparing `decide` with itself.
struct ShapeOnly;

impl CompactionPolicy for ShapeOnly {
    fn name(&self) -> &str {
        DropNewestExchange.name()
    }

    fn version(&self) -> &str {
        DropNewestExchange.version()
    }

    fn decide(
        &self,
        _: &Transcript,
        _: &CompactionBudget,
    ) -> Result<CompactionPlan, CompactionError> {
        Err(CompactionError::validation(
            "the chain asked a shape-reading policy for a transcript",
            cutctx_model::details! {},
        ))
    }

    fn reads(&self) -> Reads {
        Reads::Shape
    }

    fn decide_shape(&self, shape: &Shape<'_>) -> Option<Result<ShapeDecision, CompactionError>> {
        DropNewestExchange.decide_shape(shape)
    }
}

/// A system turn, two old questions, two tool exchanges and a recent pair; 350 tokens.
///
/// Exchanges, oldest first: `[s] [u1] [a1 t1] [u2] [a2 t2] [u3] [a3]`.
fn session() -> Transcript {
    transcript(vec![
        turn("s", Role::System, 10),
        turn("u1", Role::User, 30),
        turn("a1", Role::Assistant, 20).with_tool_call_id("c1"),
        turn("t1", Role::Tool, 100).with_tool_call_id("c1"),
        turn("u2", Role::User, 40),
        turn("a2", Role::Assistant, 50).with_tool_call_id("c2"),
        turn("t2", Role::Tool, 60).with_tool_call_id("c2"),
        turn("u3", Role::User, 15),
        turn("a3", Role::Assistant, 25),
    ])
}

fn chain(members: Vec<Box<dyn CompactionPolicy>>) -> PolicyChain {
    PolicyChain::new(members).expect("at least one member")
}

/// The plan's parts other than its name and version, as canonical JSON: a chain records its
/// own (`chain(...)`, `1.0.0`), and everything else must match the member's own plan.
fn without_name(plan: &CompactionPlan) -> String {
    let mut draft = plan.draft().clone();
    draft.policy_name = String::new();
    draft.policy_version = String::new();
    canonical_json(&draft).expect("a plan serializes")
}

// Step 2 of the recipe, written before the policy: its plans on a fixed transcript.

#[test]
fn recipe_policy_drops_the_newest_removable_exchanges_first() {
    let t = session();
    let cases = [
        // Fits: nothing to do.
        (
            400,
            2,
            "s:K u1:K a1:K t1:K u2:K a2:K t2:K u3:K a3:K",
            (350, 350, false, None),
        ),
        // The newest exchange goes whole (110), then u2 (40): 200.
        (
            200,
            2,
            "s:K u1:K a1:K t1:K u2:D a2:D t2:D u3:K a3:K",
            (350, 200, false, None),
        ),
        // t2 is in the protected tail, so [a2 t2] is skipped whole: u2, then [a1 t1].
        (
            200,
            3,
            "s:K u1:K a1:D t1:D u2:D a2:K t2:K u3:K a3:K",
            (350, 190, false, None),
        ),
        // Everything removable goes and 160 is still over 120: a plan, with the budget unmet.
        (
            120,
            3,
            "s:K u1:D a1:D t1:D u2:D a2:K t2:K u3:K a3:K",
            (350, 160, true, None),
        ),
        // The floor (s, u3, a3: 50) is all that is left.
        (
            60,
            2,
            "s:K u1:D a1:D t1:D u2:D a2:D t2:D u3:K a3:K",
            (350, 50, false, None),
        ),
    ];
    for (max, protected, expected, expected_figures) in cases {
        let plan = DropNewestExchange
            .decide(&t, &budget(max, protected))
            .expect("satisfiable");
        assert_eq!(acts(&plan), expected, "{max}/{protected}");
        assert_eq!(figures(&plan), expected_figures, "{max}/{protected}");
        assert_eq!(
            (plan.policy_name.as_str(), plan.policy_version.as_str()),
            ("drop_newest_exchange", "0.1.0")
        );
        assert!(plan.summarization_requests.is_empty());
    }
    // Not drop-oldest under another name: at 200/2 that one drops u1 and [a1 t1] instead.
    let oldest = DropOldestPolicy
        .decide(&t, &budget(200, 2))
        .expect("satisfiable");
    assert_eq!(acts(&oldest), "s:K u1:D a1:D t1:D u2:K a2:K t2:K u3:K a3:K");
}

// Step 3: an unsatisfiable budget is refused, with both figures, whichever way it is asked.

#[test]
fn recipe_policy_refuses_an_unsatisfiable_budget() {
    let t = session();
    let b = budget(49, 2);
    let expected = json!({
        "untouchable_tokens": 50,
        "max_tokens": 49,
        "untouchable_turn_count": 3,
        "protected_recent_turns": 2,
    });
    assert_eq!(unsatisfiable(DropNewestExchange.decide(&t, &b)), expected);
    assert_eq!(
        unsatisfiable(chain(vec![Box::new(ShapeOnly)]).decide(&t, &b)),
        expected
    );
    let analysis = Analysis::of(&t, &b);
    let shape = Shape::new(t.token_estimates(), &analysis).expect("one estimate per turn");
    let refused = DropNewestExchange
        .decide_shape(&shape)
        .expect("a shape-reading policy answers")
        .expect_err("unsatisfiable");
    assert_eq!(refused.code(), ErrorCode::BudgetUnsatisfiable);
    // At the floor exactly, it plans.
    assert!(DropNewestExchange.decide(&t, &budget(50, 2)).is_ok());
}

// Step 4: a decision that breaks a rule is refused by `build_plan`, or by the chain's final
// plan, and so is never applied.

#[test]
fn recipe_policy_decisions_that_break_a_rule_are_refused() {
    let t = session();
    let b = budget(200, 2);
    let analysis = Analysis::of(&t, &b);
    // The call a1 without its result t1: an orphaned result.
    let split = invalid(DropNewestExchange::plan(&t, &analysis, &[2]));
    assert_eq!(
        (&split["removed_turn_ids"], &split["retained_turn_ids"]),
        (&json!(["a1"]), &json!(["t1"]))
    );
    // The system turn, and a turn of the protected tail.
    for (position, id) in [(0, "s"), (8, "a3")] {
        let touched = invalid(DropNewestExchange::plan(&t, &analysis, &[position]));
        assert_eq!(touched["touched_turn_ids"], json!([id]), "{id}");
    }
    // The same decisions from the shape, in a chain: the final plan is refused. (A chain
    // drops a split exchange whole, so only untouchable turns are left to get wrong there.)
    for position in [0, 8] {
        let forged = Forged(ShapeDecision::Drop(vec![position]));
        let err = chain(vec![Box::new(forged)])
            .decide(&t, &b)
            .expect_err("an untouchable turn is dropped");
        assert_eq!(err.code(), ErrorCode::Validation, "{}", err.message());
        assert!(err.details().contains_key("touched_turn_ids"), "{err:?}");
    }
    // The policy's own decision passes the same checks.
    assert!(DropNewestExchange::plan(&t, &analysis, &[4, 5, 6]).is_ok());
}

/// Answers a fixed shape decision, whatever the shape.
struct Forged(ShapeDecision);

impl CompactionPolicy for Forged {
    fn name(&self) -> &str {
        "forged"
    }

    fn version(&self) -> &str {
        "1"
    }

    fn decide(
        &self,
        t: &Transcript,
        b: &CompactionBudget,
    ) -> Result<CompactionPlan, CompactionError> {
        ShapeOnly.decide(t, b)
    }

    fn reads(&self) -> Reads {
        Reads::Shape
    }

    fn decide_shape(&self, _: &Shape<'_>) -> Option<Result<ShapeDecision, CompactionError>> {
        Some(Ok(self.0.clone()))
    }
}

// Step 5: the capability changes nothing. Chained through its shape, the policy plans exactly
// as it does alone and as it does behind an opaque wrapper that the chain must run through
// `decide` over a projected transcript.

/// Plans of `a` and `b` agree: the same bytes, or the same refusal.
fn same(
    a: Result<String, CompactionError>,
    b: Result<String, CompactionError>,
) -> Result<(), String> {
    match (a, b) {
        (Ok(a), Ok(b)) if a == b => Ok(()),
        (Err(a), Err(b)) if a.code() == b.code() && a.details() == b.details() => Ok(()),
        (a, b) => Err(format!(
            "{:?} / {:?}",
            a.map_err(|e| e.message().to_owned()),
            b.map_err(|e| e.message().to_owned())
        )),
    }
}

fn masking() -> ObservationMaskingPolicy {
    ObservationMaskingPolicy::new(2).expect("any keep_recent_results is valid")
}

fn summarizing() -> SummarizingPolicy {
    SummarizingPolicy::new(PROMPT).expect("a prompt id")
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(300))]

    #[test]
    fn recipe_policy_plans_the_same_through_its_shape_and_behind_an_opaque_wrapper(
        (t, max, protected) in agent_case()
    ) {
        let b = budget(max, protected);
        let alone = DropNewestExchange.decide(&t, &b).map(|p| without_name(&p));
        let one = chain(vec![Box::new(ShapeOnly)]).decide(&t, &b).map(|p| without_name(&p));
        proptest::prop_assert_eq!(same(alone, one), Ok(()));

        let fast = chain(vec![
            Box::new(masking()),
            Box::new(summarizing()),
            Box::new(ShapeOnly),
        ]);
        let slow = chain(vec![
            Box::new(Opaque(Box::new(masking()))),
            Box::new(Opaque(Box::new(summarizing()))),
            Box::new(Opaque(Box::new(DropNewestExchange))),
        ]);
        let fast = fast.decide(&t, &b).map(|p| p.canonical_json());
        let slow = slow.decide(&t, &b).map(|p| p.canonical_json());
        proptest::prop_assert_eq!(same(fast, slow), Ok(()));
    }
}

/// The random cases above reach the policy with something to drop, after masking and
/// summarizing, and reach refusals: the property is not vacuous.
#[test]
fn random_cases_reach_the_recipe_policy_and_refusals() {
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let strategy = agent_case();
    let (mut drops, mut refusals) = (0, 0);
    for _ in 0..300 {
        let (t, max, protected) = strategy.new_tree(&mut runner).expect("a case").current();
        let b = budget(max, protected);
        let policy = chain(vec![
            Box::new(masking()),
            Box::new(summarizing()),
            Box::new(ShapeOnly),
        ]);
        match policy.decide(&t, &b) {
            Ok(plan) => {
                drops += usize::from(plan.actions.iter().any(|a| a.action() == Action::Drop));
            }
            Err(_) => refusals += 1,
        }
    }
    assert!(drops >= 30, "{drops} of 300 cases drop");
    assert!(refusals >= 10, "{refusals} of 300 cases are refused");
}
