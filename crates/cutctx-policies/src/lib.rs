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
//! [`registry`] builds any of them from a name or a JSON spec, for every front end.
//!
//! **Architecture invariant:** no I/O, clock, environment or randomness. Every plan goes
//! through `cutctx_invariants::build_plan`, so no policy can produce a plan that breaks a rule.
#![forbid(unsafe_code)]
#![warn(
    clippy::disallowed_methods,
    clippy::disallowed_types,
    reason = "pure crate: no I/O, clock or random order"
)]

pub mod ahead;
mod capability;
mod chain;
mod drop_oldest;
mod estimator;
mod masking;
pub mod registry;
mod summarizing;

pub use capability::{ContentDigests, DeferredMask, DeferredMasks, Reads, Shape, ShapeDecision};
pub use chain::{PolicyChain, default_chain};
pub use cutctx_model::Parallelism;
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
/// use cutctx_invariants::{Analysis, CompactionPlan, Decisions, build_plan};
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
///         let actions = t.turn_id_arcs().iter().map(|id| TurnAction::keep(id.clone())).collect();
///         build_plan(t, &analysis, Decisions::actions(actions), self.name(), self.version())
///     }
/// }
/// let plan = KeepAll.decide(&Transcript::default(), &CompactionBudget::new(0))?;
/// assert_eq!(plan.policy_name, "keep_all");
/// # Ok::<(), CompactionError>(())
/// ```
///
/// # Capabilities
///
/// Besides deciding, a policy can say how little it needs to see ([`CompactionPolicy::reads`])
/// and offer cheaper ways to decide ([`CompactionPolicy::decide_shape`],
/// [`CompactionPolicy::decide_masks`]). A [`PolicyChain`] uses them to skip building
/// projected transcripts and to defer digests a later member may discard; the shipped policies
/// answer them exactly as a user's own can. Whatever a policy answers, the chain's final plan
/// is validated against every rule.
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

    /// As [`CompactionPolicy::decide`], given [`Analysis::of`] `transcript` under the budget
    /// to fit ([`Analysis::budget`]), which a chain has at hand for every projection. Policies
    /// that compute an analysis should override it; the default ignores it.
    ///
    /// # Errors
    ///
    /// As [`CompactionPolicy::decide`]; and `VALIDATION_ERROR` when a plan is built with an
    /// analysis not computed for `transcript`.
    fn decide_with_analysis(
        &self,
        transcript: &Transcript,
        analysis: &Analysis,
    ) -> Result<CompactionPlan, CompactionError> {
        self.decide(transcript, analysis.budget())
    }

    /// What the policy reads of a transcript. The default, [`Reads::Content`], is always
    /// safe; a chain builds less for a policy that reads less.
    fn reads(&self) -> Reads {
        Reads::Content
    }

    /// The policy's decision over a transcript's [`Shape`] (estimates and analysis only), if
    /// it can decide from that alone. Policies that read only the shape answer it and say
    /// [`Reads::Shape`]; the default is `None`.
    fn decide_shape(&self, shape: &Shape<'_>) -> Option<Result<ShapeDecision, CompactionError>> {
        let _ = shape;
        None
    }

    /// The masks the policy would make over `transcript` (with [`Analysis::of`] it), with
    /// their digests left for the caller to compute, if it masks with the standard digest stub
    /// and its stubs' estimates never depend on the digest. The default is `None`.
    fn decide_masks(
        &self,
        transcript: &Transcript,
        analysis: &Analysis,
    ) -> Option<Result<DeferredMasks, CompactionError>> {
        let _ = (transcript, analysis);
        None
    }

    /// As [`CompactionPolicy::decide_with_analysis`], over a transcript whose contents are not
    /// at hand (its turns may show them empty): every digest of a turn's content the plan
    /// states is read from `digests`, and nothing else of the contents is read. `None`, the
    /// default for all but a policy of the shape alone ([`Reads::Shape`]), when the policy
    /// reads contents otherwise; the caller then gives it them. The masking policy with a
    /// length-only estimator answers it, and a chain of members that read no content.
    ///
    /// ```
    /// use cutctx_invariants::Analysis;
    /// use cutctx_model::{CompactionBudget, CompactionError, Role, Transcript, TranscriptTurn};
    /// use cutctx_policies::{CompactionPolicy, ContentDigests, ObservationMaskingPolicy};
    /// use sha2::{Digest, Sha256};
    /// /// The contents of a transcript, kept beside it.
    /// struct Beside(Vec<String>);
    /// impl ContentDigests for Beside {
    ///     fn digest(&self, position: usize) -> Result<[u8; 32], CompactionError> {
    ///         let literal = serde_json::to_string(&self.0[position]).unwrap();
    ///         Ok(Sha256::digest(literal.as_bytes()).into())
    ///     }
    ///     fn content_len(&self, position: usize) -> usize {
    ///         self.0[position].len()
    ///     }
    /// }
    /// let contents = vec![String::new(), "L".repeat(1200), "thanks".to_owned()];
    /// let turns = |with: bool| -> Result<Transcript, CompactionError> {
    ///     let c = |i: usize| if with { contents[i].clone() } else { String::new() };
    ///     Transcript::new(vec![
    ///         TranscriptTurn::new("a", Role::Assistant, c(0), 10)?.with_tool_call_id("c"),
    ///         TranscriptTurn::new("t", Role::Tool, c(1), 300)?.with_tool_call_id("c"),
    ///         TranscriptTurn::new("u", Role::User, c(2), 5)?,
    ///     ])
    /// };
    /// let policy = ObservationMaskingPolicy::new(0)?;
    /// let budget = CompactionBudget::new(100).with_protected_recent_turns(1);
    /// let without = turns(false)?;
    /// let analysis = Analysis::of(&without, &budget);
    /// let plan = policy
    ///     .decide_with_digests(&without, &analysis, &Beside(contents.clone()))
    ///     .expect("masks with the default estimator")?;
    /// assert_eq!(plan, policy.decide(&turns(true)?, &budget)?);
    /// # Ok::<(), CompactionError>(())
    /// ```
    fn decide_with_digests(
        &self,
        transcript: &Transcript,
        analysis: &Analysis,
        digests: &dyn ContentDigests,
    ) -> Option<Result<CompactionPlan, CompactionError>> {
        // A policy of the shape alone reads no content, nor any digest.
        let _ = digests;
        (self.reads() == Reads::Shape).then(|| self.decide_with_analysis(transcript, analysis))
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
        a: &Analysis,
    ) -> Result<CompactionPlan, CompactionError> {
        (**self).decide_with_analysis(t, a)
    }

    fn reads(&self) -> Reads {
        (**self).reads()
    }

    fn decide_shape(&self, shape: &Shape<'_>) -> Option<Result<ShapeDecision, CompactionError>> {
        (**self).decide_shape(shape)
    }

    fn decide_masks(
        &self,
        t: &Transcript,
        a: &Analysis,
    ) -> Option<Result<DeferredMasks, CompactionError>> {
        (**self).decide_masks(t, a)
    }

    fn decide_with_digests(
        &self,
        t: &Transcript,
        a: &Analysis,
        digests: &dyn ContentDigests,
    ) -> Option<Result<CompactionPlan, CompactionError>> {
        (**self).decide_with_digests(t, a, digests)
    }
}
