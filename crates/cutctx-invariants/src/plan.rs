//! The validated plan type and the functions that make one.

use std::ops::Deref;
use std::sync::Arc;

use cutctx_model::{
    ActionView, CompactionBudget, CompactionError, Exchanges, PlanDraft, SummarizationRequest,
    Transcript, TurnAction,
};
use serde::Serialize;

use crate::Analysis;

/// A plan that has passed every rule against the transcript and budget it was made for.
///
/// Read it through [`Deref`] to its [`PlanDraft`]. Serialize it to get the reference's plan
/// bytes. The only ways to make one are [`build_plan`] and [`CompactionPlan::validate`] (or
/// [`CompactionPlan::validate_with`]), each of which checks every rule against the transcript
/// and budget it is given, with an analysis computed for exactly those.
///
/// A plan remembers what it was validated against ([`CompactionPlan::is_for`]): the executor
/// applies it to that transcript (or a clone) directly, and validates it again, under the
/// same budget, before applying it to any other.
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
/// assert!(plan.is_for(&t));
/// # Ok::<(), cutctx_model::CompactionError>(())
/// ```
///
/// There is no other way in: no public field, no `Deserialize`, no `From<PlanDraft>`.
///
/// ```compile_fail
/// # use cutctx_invariants::{CompactionPlan, PlanDraft};
/// # fn forge(draft: PlanDraft) -> CompactionPlan {
/// CompactionPlan::from(draft)
/// # }
/// ```
///
/// ```compile_fail
/// # use cutctx_invariants::CompactionPlan;
/// let plan: CompactionPlan = serde_json::from_str("{}").unwrap();
/// ```
#[derive(Debug, Clone, Serialize)]
#[serde(transparent)]
pub struct CompactionPlan {
    draft: PlanDraft,
    /// What the plan was validated against. Not part of the plan's bytes or its equality.
    #[serde(skip)]
    basis: Basis,
}

/// The transcript (by the identity of its partition, which a clone shares) and the budget a
/// plan was validated against.
#[derive(Debug, Clone)]
struct Basis {
    exchanges: Arc<Exchanges>,
    budget: CompactionBudget,
}

impl PartialEq for CompactionPlan {
    /// Plans are equal when their bytes are: what they were validated against is provenance.
    fn eq(&self, other: &Self) -> bool {
        self.draft == other.draft
    }
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
        Self::validate_with(draft, transcript, &Analysis::of(transcript, budget))
    }

    /// As [`CompactionPlan::validate`], reusing the analysis of the transcript under the
    /// budget the plan is for (the budget is the analysis's own).
    ///
    /// # Errors
    ///
    /// `VALIDATION_ERROR` when `analysis` was not computed by [`Analysis::of`] for
    /// `transcript`; otherwise as [`CompactionPlan::validate`].
    ///
    /// ```
    /// use cutctx_invariants::{Analysis, CompactionPlan};
    /// use cutctx_model::{CompactionBudget, Role, Transcript, TranscriptTurn};
    /// let t = Transcript::new(vec![TranscriptTurn::new("u", Role::User, "hi", 5)?])?;
    /// let other = Transcript::new(vec![TranscriptTurn::new("u", Role::User, "hi", 5)?])?;
    /// let plan = CompactionPlan::validate(
    ///     cutctx_model::PlanDraft {
    ///         actions: vec![cutctx_model::TurnAction::keep("u")],
    ///         budget_unmet: false,
    ///         estimator_ratio: None,
    ///         policy_name: "p".into(),
    ///         policy_version: "1".into(),
    ///         summarization_requests: vec![],
    ///         tokens_after_estimate: 5,
    ///         tokens_before: 5,
    ///     },
    ///     &t,
    ///     &CompactionBudget::new(10),
    /// )?;
    /// // The analysis of another transcript, however alike, vouches for nothing here.
    /// let foreign = Analysis::of(&other, &CompactionBudget::new(10));
    /// let err = CompactionPlan::validate_with(plan.into_draft(), &t, &foreign).unwrap_err();
    /// assert_eq!(err.code().as_str(), "VALIDATION_ERROR");
    /// # Ok::<(), cutctx_model::CompactionError>(())
    /// ```
    pub fn validate_with(
        draft: PlanDraft,
        transcript: &Transcript,
        analysis: &Analysis,
    ) -> Result<Self, CompactionError> {
        analysis.require_for(transcript, analysis.budget())?;
        crate::validate::validate(&draft, transcript, analysis.budget(), analysis)?;
        Ok(Self::vouched(draft, analysis))
    }

    /// The plan, once every rule has held under `analysis`.
    fn vouched(draft: PlanDraft, analysis: &Analysis) -> Self {
        debug_assert!(analysis.bound, "only a bound analysis vouches for a plan");
        Self {
            draft,
            basis: Basis {
                exchanges: Arc::clone(analysis.exchanges()),
                budget: *analysis.budget(),
            },
        }
    }

    /// Whether the plan was validated against `transcript` (or a clone of it). `O(1)`.
    #[must_use]
    pub fn is_for(&self, transcript: &Transcript) -> bool {
        Arc::ptr_eq(&self.basis.exchanges, transcript.exchanges())
    }

    /// The budget the plan was validated under.
    #[must_use]
    pub const fn budget(&self) -> &CompactionBudget {
        &self.basis.budget
    }

    /// The same plan, validated against `transcript` under the budget it was validated
    /// under: the check to run before applying a plan to a transcript other than its own.
    /// Free when the plan is already for `transcript`.
    ///
    /// # Errors
    ///
    /// As [`CompactionPlan::validate`].
    pub fn revalidated_for(&self, transcript: &Transcript) -> Result<Self, CompactionError> {
        if self.is_for(transcript) {
            return Ok(self.clone());
        }
        Self::validate(self.draft.clone(), transcript, &self.basis.budget)
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
        .map(|(&estimate, action)| match action.view() {
            ActionView::Keep => u128::from(estimate),
            ActionView::Mask(r) => u128::from(r.token_estimate),
            ActionView::Drop | ActionView::Summarize(_) => 0,
        })
        .sum();
    kept + requests
        .iter()
        .map(|r| u128::from(r.target_tokens()))
        .sum::<u128>()
}

/// What a policy decided, before the figures are derived: the parts of a plan only a policy
/// can say.
#[derive(Debug, Clone, PartialEq)]
pub struct Decisions {
    /// One action per turn, in transcript order.
    pub actions: Vec<TurnAction>,
    /// One request per summary group, ordered by each group's first turn.
    pub summarization_requests: Vec<SummarizationRequest>,
    /// The characters-per-token ratio the policy's stubs were estimated with, if it records
    /// one.
    pub estimator_ratio: Option<f64>,
}

impl Decisions {
    /// Decisions with these actions, no summarization request and no estimator ratio.
    #[must_use]
    pub const fn actions(actions: Vec<TurnAction>) -> Self {
        Self {
            actions,
            summarization_requests: Vec::new(),
            estimator_ratio: None,
        }
    }
}

/// Builds a validated plan from a policy's decisions: the way every policy makes a plan.
///
/// It derives the figures no policy should compute for itself (`tokens_before`,
/// `tokens_after_estimate`, `budget_unmet`) and then validates the whole, under the budget
/// `analysis` was computed for. The analysis must be [`Analysis::of`] this transcript: any
/// other is refused.
///
/// ```
/// use cutctx_invariants::{Analysis, Decisions, build_plan};
/// use cutctx_model::{CompactionBudget, Role, Transcript, TranscriptTurn, TurnAction};
/// let t = Transcript::new(vec![
///     TranscriptTurn::new("old", Role::User, "hi", 50)?,
///     TranscriptTurn::new("new", Role::User, "hi", 5)?,
/// ])?;
/// let budget = CompactionBudget::new(10).with_protected_recent_turns(1);
/// let analysis = Analysis::of(&t, &budget);
/// let drop_old = || Decisions::actions(vec![TurnAction::drop_turn("old"), TurnAction::keep("new")]);
/// let plan = build_plan(&t, &analysis, drop_old(), "mine", "1")?;
/// assert_eq!((plan.tokens_after_estimate, plan.budget_unmet), (5, false));
///
/// // The analysis of the same transcript under a budget that protects both turns does not
/// // vouch for a plan under the first budget, and under its own the drop breaks a rule.
/// let other = Analysis::of(&t, &CompactionBudget::new(100).with_protected_recent_turns(2));
/// assert!(build_plan(&t, &other, drop_old(), "mine", "1").is_err());
/// # Ok::<(), cutctx_model::CompactionError>(())
/// ```
///
/// # Errors
///
/// `VALIDATION_ERROR` when `analysis` is not of `transcript`; otherwise as
/// [`CompactionPlan::validate`].
pub fn build_plan(
    transcript: &Transcript,
    analysis: &Analysis,
    decisions: Decisions,
    policy_name: &str,
    policy_version: &str,
) -> Result<CompactionPlan, CompactionError> {
    let budget = analysis.budget();
    analysis.require_for(transcript, budget)?;
    analysis.require_satisfiable()?;
    let Decisions {
        actions,
        summarization_requests,
        estimator_ratio,
    } = decisions;
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
    if let Some(after) = crate::validate::structure_holds(&draft, transcript, analysis)
        && let Ok(after) = u64::try_from(after)
    {
        draft.tokens_after_estimate = after;
        draft.budget_unmet = after > budget.max_tokens;
        return Ok(CompactionPlan::vouched(draft, analysis));
    }
    // A fault: derive the figures apart and let the rules, one by one, name the first. A
    // figure beyond 64 bits cannot be declared: it is declared as `u64::MAX`, which the
    // arithmetic rule then reports as wrong, after the structural rules have had their say.
    let after = estimate_after(transcript, &draft.actions, &draft.summarization_requests);
    let after = u64::try_from(after).unwrap_or(u64::MAX);
    draft.tokens_after_estimate = after;
    draft.budget_unmet = after > budget.max_tokens;
    CompactionPlan::validate_with(draft, transcript, analysis)
}
