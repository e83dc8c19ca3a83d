//! Drop-oldest: remove whole exchanges, oldest first, until the budget fits.

use cutctx_invariants::{Analysis, CompactionPlan, Decisions, build_plan};
use cutctx_model::{CompactionBudget, CompactionError, Transcript, TurnAction};

use crate::{CompactionPolicy, POLICY_VERSION, Reads, Shape, ShapeDecision};

/// Drops removable exchanges in order of their earliest turn until the estimate fits.
///
/// An exchange with any untouchable member is skipped whole. Records no estimator ratio and
/// makes no summarization request.
///
/// ```
/// use cutctx_model::{CompactionBudget, Role, Transcript, TranscriptTurn};
/// use cutctx_policies::{CompactionPolicy, DropOldestPolicy};
/// let t = Transcript::new(vec![
///     TranscriptTurn::new("s", Role::System, "rules", 10)?,
///     TranscriptTurn::new("a", Role::User, "old question", 40)?,
///     TranscriptTurn::new("b", Role::Assistant, "old answer", 40)?,
/// ])?;
/// let plan = DropOldestPolicy.decide(&t, &CompactionBudget::new(60).with_protected_recent_turns(1))?;
/// assert_eq!((plan.tokens_before, plan.tokens_after_estimate, plan.budget_unmet), (90, 50, false));
/// # Ok::<(), cutctx_model::CompactionError>(())
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DropOldestPolicy;

impl DropOldestPolicy {
    /// The policy's name.
    pub const NAME: &'static str = "drop_oldest";
}

impl DropOldestPolicy {
    /// The positions to drop, in order: whole removable exchanges, oldest first, until the
    /// shape's estimate fits its budget.
    fn dropped(shape: &Shape<'_>) -> Vec<usize> {
        let analysis = shape.analysis();
        let (estimates, removable) = (shape.estimates(), analysis.removable());
        let max_tokens = shape.budget().max_tokens;
        let mut dropped = Vec::new();
        let mut running = shape.total();
        for members in analysis.exchanges().iter() {
            if running <= max_tokens {
                break;
            }
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
}

impl CompactionPolicy for DropOldestPolicy {
    fn name(&self) -> &str {
        Self::NAME
    }

    fn version(&self) -> &str {
        POLICY_VERSION
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
        analysis.require_satisfiable()?;
        let shape = Shape::with_total(t.token_estimates(), t.token_estimate(), analysis)?;
        let mut dropped = vec![false; t.len()];
        for p in Self::dropped(&shape) {
            dropped[p] = true;
        }
        let actions = t
            .turn_id_arcs()
            .iter()
            .zip(&dropped)
            .map(|(id, &d)| {
                let id = id.clone();
                if d {
                    TurnAction::drop_turn(id)
                } else {
                    TurnAction::keep(id)
                }
            })
            .collect();
        build_plan(
            t,
            analysis,
            Decisions::actions(actions),
            Self::NAME,
            POLICY_VERSION,
        )
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
