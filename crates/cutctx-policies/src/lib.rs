//! `cutctx-policies`: the shipped compaction policies, and the trait to write your own.
//!
//! A policy looks at a transcript and a budget and returns a validated
//! [`CompactionPlan`]. Four ship, each byte-compatible with the reference (version `1.0.0`):
//!
//! * [`DropOldestPolicy`]: drops whole exchanges, oldest first, until the budget fits;
//! * [`ObservationMaskingPolicy`]: replaces old tool results with a stub carrying their digest;
//! * [`SummarizingPolicy`]: asks the caller to fold the oldest qualifying span into a summary;
//! * [`PolicyChain`]: runs policies in turn over a projection of the transcript, and
//!   [`default_chain`] (masking, then summarizing, then drop-oldest).
//!
//! Token counts of stubs come from a [`TokenEstimator`]; [`CharRatioEstimator`] is the default.
//!
//! **Architecture invariant:** no I/O, clock, environment or randomness. Every plan goes
//! through `cutctx_invariants::build_plan`, so no policy can produce a plan that breaks a rule.
#![forbid(unsafe_code)]
#![warn(
    clippy::disallowed_methods,
    clippy::disallowed_types,
    reason = "pure crate: no I/O, clock or random order"
)]

mod chain;
mod drop_oldest;
mod estimator;
mod masking;
mod summarizing;

pub use chain::{PolicyChain, default_chain};
pub use drop_oldest::DropOldestPolicy;
pub use estimator::{CharRatioEstimator, TokenEstimator};
pub use masking::ObservationMaskingPolicy;
pub use summarizing::SummarizingPolicy;

use cutctx_invariants::{Analysis, CompactionPlan};
use cutctx_model::{CompactionBudget, CompactionError, Transcript};

/// The version every shipped policy carries. A behaviour change bumps it.
pub const POLICY_VERSION: &str = "1.0.0";

/// A compaction policy: decides a plan for a transcript under a budget.
///
/// Implement it to write your own; build the plan with `cutctx_invariants::build_plan`, which
/// derives the figures and validates every rule. A custom policy can be chained with the
/// shipped ones in a [`PolicyChain`].
///
/// ```
/// use cutctx_invariants::{Analysis, CompactionPlan, build_plan};
/// use cutctx_model::{CompactionBudget, CompactionError, Transcript, TurnAction};
/// use cutctx_policies::CompactionPolicy;
///
/// /// Keeps everything: a policy that never compacts.
/// struct KeepAll;
///
/// impl CompactionPolicy for KeepAll {
///     fn name(&self) -> &str { "keep_all" }
///     fn version(&self) -> &str { "1" }
///     fn decide(&self, t: &Transcript, b: &CompactionBudget) -> Result<CompactionPlan, CompactionError> {
///         let analysis = Analysis::of(t, b);
///         let actions = t.turns().iter().map(|turn| TurnAction::keep(turn.turn_id_arc().clone())).collect();
///         build_plan(t, b, &analysis, actions, vec![], self.name(), self.version(), None)
///     }
/// }
/// let plan = KeepAll.decide(&Transcript::default(), &CompactionBudget::new(0))?;
/// assert_eq!(plan.policy_name, "keep_all");
/// # Ok::<(), CompactionError>(())
/// ```
pub trait CompactionPolicy: Send + Sync {
    /// The policy's name, as plans record it.
    fn name(&self) -> &str;

    /// The policy's version, as plans record it.
    fn version(&self) -> &str;

    /// The plan for `transcript` under `budget`.
    ///
    /// # Errors
    ///
    /// `COMPACTION_BUDGET_UNSATISFIABLE` when the untouchable turns alone exceed the budget;
    /// `VALIDATION_ERROR` when the policy's decisions break a rule.
    fn decide(
        &self,
        transcript: &Transcript,
        budget: &CompactionBudget,
    ) -> Result<CompactionPlan, CompactionError>;

    /// As [`CompactionPolicy::decide`], given the analysis of `transcript` under `budget`, which
    /// a chain has at hand for every projection. Policies that compute an [`Analysis`] should
    /// override it; the default ignores the analysis.
    ///
    /// # Errors
    ///
    /// As [`CompactionPolicy::decide`].
    fn decide_with_analysis(
        &self,
        transcript: &Transcript,
        budget: &CompactionBudget,
        analysis: &Analysis,
    ) -> Result<CompactionPlan, CompactionError> {
        let _ = analysis;
        self.decide(transcript, budget)
    }

    /// The masking policy behind this member, if it is one: lets a chain defer digests that
    /// a later member may discard. Other policies keep the default.
    #[doc(hidden)]
    fn as_masking(&self) -> Option<&ObservationMaskingPolicy> {
        None
    }

    /// The drop-oldest policy behind this member, if it is one: lets a chain take its
    /// decisions without building an intermediate plan. Other policies keep the default.
    #[doc(hidden)]
    fn as_drop_oldest(&self) -> Option<&DropOldestPolicy> {
        None
    }

    /// The summarizing policy behind this member, if it is one; as
    /// [`CompactionPolicy::as_drop_oldest`].
    #[doc(hidden)]
    fn as_summarizing(&self) -> Option<&SummarizingPolicy> {
        None
    }

    /// Whether the policy reads turn content. A chain computes deferred digests before it
    /// runs a member that does. The default is the safe answer, `true`.
    fn reads_content(&self) -> bool {
        true
    }
}

impl<P: CompactionPolicy + ?Sized> CompactionPolicy for Box<P> {
    fn name(&self) -> &str {
        (**self).name()
    }

    fn version(&self) -> &str {
        (**self).version()
    }

    fn decide(
        &self,
        t: &Transcript,
        b: &CompactionBudget,
    ) -> Result<CompactionPlan, CompactionError> {
        (**self).decide(t, b)
    }

    fn decide_with_analysis(
        &self,
        t: &Transcript,
        b: &CompactionBudget,
        a: &Analysis,
    ) -> Result<CompactionPlan, CompactionError> {
        (**self).decide_with_analysis(t, b, a)
    }

    fn as_masking(&self) -> Option<&ObservationMaskingPolicy> {
        (**self).as_masking()
    }

    fn as_drop_oldest(&self) -> Option<&DropOldestPolicy> {
        (**self).as_drop_oldest()
    }

    fn as_summarizing(&self) -> Option<&SummarizingPolicy> {
        (**self).as_summarizing()
    }

    fn reads_content(&self) -> bool {
        (**self).reads_content()
    }
}
