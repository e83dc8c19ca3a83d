//! The validated plan type and the functions that make one.

use std::ops::Deref;

use cutctx_model::{
    Action, CompactionBudget, CompactionError, PlanDraft, SummarizationRequest, Transcript,
    TurnAction,
};
use serde::Serialize;

use crate::Analysis;

/// A plan that has passed every rule against the transcript and budget it was made for.
///
/// Read it through [`Deref`] to its [`PlanDraft`]. Serialize it to get the reference's plan
/// bytes. The only ways to make one are [`build_plan`] and [`CompactionPlan::validate`].
///
/// ```
/// use cutctx_invariants::{CompactionPlan, PlanDraft};
/// use cutctx_model::{CompactionBudget, Transcript, TurnAction};
/// let t = Transcript::default();
/// let draft = PlanDraft {
///     actions: vec![],
///     budget_unmet: false,
///     estimator_ratio: None,
///     policy_name: "mine".into(),
///     policy_version: "1".into(),
///     summarization_requests: vec![],
///     tokens_after_estimate: 0,
///     tokens_before: 0,
/// };
/// let plan = CompactionPlan::validate(draft, &t, &CompactionBudget::new(0))?;
/// assert_eq!(plan.canonical_json(), r#"{"actions":[],"budget_unmet":false,"estimator_ratio":null,"policy_name":"mine","policy_version":"1","summarization_requests":[],"tokens_after_estimate":0,"tokens_before":0}"#);
/// # Ok::<(), cutctx_model::CompactionError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(transparent)]
pub struct CompactionPlan {
    draft: PlanDraft,
}

impl CompactionPlan {
    /// Checks `draft` against `transcript` and `budget` by every rule, and vouches for it.
    ///
    /// # Errors
    ///
    /// `COMPACTION_BUDGET_UNSATISFIABLE` when the untouchable floor exceeds the budget, and
    /// `VALIDATION_ERROR` for the first rule the draft breaks, with the reference's details.
    pub fn validate(
        draft: PlanDraft,
        transcript: &Transcript,
        budget: &CompactionBudget,
    ) -> Result<Self, CompactionError> {
        let analysis = Analysis::of(transcript, budget);
        Self::validate_with(draft, transcript, budget, &analysis)
    }

    /// As [`CompactionPlan::validate`], reusing an analysis of the same transcript and budget.
    ///
    /// The analysis must be of `transcript` under `budget` ([`Analysis::of`] or
    /// [`Analysis::project`]); one of a transcript of another length is ignored and recomputed.
    ///
    /// # Errors
    ///
    /// As [`CompactionPlan::validate`].
    pub fn validate_with(
        draft: PlanDraft,
        transcript: &Transcript,
        budget: &CompactionBudget,
        analysis: &Analysis,
    ) -> Result<Self, CompactionError> {
        if analysis.fits(transcript) {
            crate::validate::validate(&draft, transcript, budget, analysis)?;
        } else {
            crate::validate::validate(
                &draft,
                transcript,
                budget,
                &Analysis::of(transcript, budget),
            )?;
        }
        Ok(Self { draft })
    }

    /// The plan's parts.
    #[must_use]
    pub const fn draft(&self) -> &PlanDraft {
        &self.draft
    }

    /// The plan's parts, giving up the guarantee.
    #[must_use]
    pub fn into_draft(self) -> PlanDraft {
        self.draft
    }
}

impl Deref for CompactionPlan {
    type Target = PlanDraft;

    fn deref(&self) -> &PlanDraft {
        &self.draft
    }
}

/// The estimated tokens of the view `actions` would produce over `transcript`.
///
/// `keep` counts the turn's estimate, `mask` its stub's, `drop` and `summarize` nothing; each
/// request counts its `target_tokens` once. Actions are matched to turns by position. The
/// figure is wide so that a forged plan cannot overflow it.
#[must_use]
pub fn estimate_after(
    transcript: &Transcript,
    actions: &[TurnAction],
    requests: &[SummarizationRequest],
) -> u128 {
    let kept: u128 = transcript
        .token_estimates()
        .iter()
        .zip(actions)
        .map(|(&estimate, action)| match action.action() {
            Action::Keep => u128::from(estimate),
            Action::Mask => action
                .replacement()
                .map_or(0, |r| u128::from(r.token_estimate)),
            Action::Drop | Action::Summarize => 0,
        })
        .sum();
    kept + requests
        .iter()
        .map(|r| u128::from(r.target_tokens()))
        .sum::<u128>()
}

/// Builds a validated plan from a policy's decisions: the way every policy makes a plan.
///
/// It derives the figures no policy should compute for itself (`tokens_before`,
/// `tokens_after_estimate`, `budget_unmet`) and then validates the whole.
///
/// # Errors
///
/// As [`CompactionPlan::validate`].
#[allow(
    clippy::too_many_arguments,
    reason = "mirrors the plan's fields one for one"
)]
pub fn build_plan(
    transcript: &Transcript,
    budget: &CompactionBudget,
    analysis: &Analysis,
    actions: Vec<TurnAction>,
    summarization_requests: Vec<SummarizationRequest>,
    policy_name: &str,
    policy_version: &str,
    estimator_ratio: Option<f64>,
) -> Result<CompactionPlan, CompactionError> {
    analysis.require_satisfiable(budget)?;
    let mut draft = PlanDraft {
        actions,
        budget_unmet: false,
        estimator_ratio,
        policy_name: policy_name.to_owned(),
        policy_version: policy_version.to_owned(),
        summarization_requests,
        tokens_after_estimate: 0,
        tokens_before: transcript.token_estimate(),
    };
    // One pass checks rules 1 to 4 and yields the figure rule 5 wants; set from it, the
    // figures hold by construction, and the plan is valid.
    if analysis.fits(transcript)
        && let Some(after) = crate::validate::structure_holds(&draft, transcript, analysis)
        && let Ok(after) = u64::try_from(after)
    {
        draft.tokens_after_estimate = after;
        draft.budget_unmet = after > budget.max_tokens;
        return Ok(CompactionPlan { draft });
    }
    // A fault: derive the figures apart and let the rules, one by one, name the first. A
    // figure beyond 64 bits cannot be declared; the arithmetic rule then reports it, after
    // the structural rules have had their say.
    let after = estimate_after(transcript, &draft.actions, &draft.summarization_requests);
    let after = u64::try_from(after).unwrap_or(u64::MAX);
    draft.tokens_after_estimate = after;
    draft.budget_unmet = after > budget.max_tokens;
    CompactionPlan::validate_with(draft, transcript, budget, analysis)
}
