//! What a policy can say about how it decides, so that a chain can take the cheapest path to
//! its decisions: [`Reads`], deciding over a [`Shape`], and masks whose digests are deferred.
//!
//! Every shipped policy answers these through the same trait methods a user's own policy can
//! implement; the chain has no knowledge of concrete policy types.

use std::ops::Range;
use std::sync::Arc;

use cutctx_invariants::Analysis;
use cutctx_model::{CompactionBudget, CompactionError};

/// What a policy reads of the transcript it is given: the less, the less a chain must build
/// for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Reads {
    /// Turn content: the policy gets a transcript with every turn's real content. The safe
    /// answer, and the default.
    #[default]
    Content,
    /// Ids, roles, estimates and calls, never content: the policy gets a transcript whose
    /// turns may show empty content.
    Structure,
    /// The [`Shape`] alone. The policy must answer
    /// [`CompactionPolicy::decide_shape`](crate::CompactionPolicy::decide_shape); a chain then
    /// builds no transcript for it.
    Shape,
}

/// A transcript reduced to what a shape-reading policy decides from: each turn's estimate,
/// the total, and the [`Analysis`] (exchanges, untouchable and removable turns, the budget).
///
/// Positions are those of the transcript (or, inside a chain, of the projection the member
/// is given); a turn may be a summary stand-in, which a policy cannot tell and need not.
///
/// ```
/// use cutctx_invariants::Analysis;
/// use cutctx_model::{CompactionBudget, Role, Transcript, TranscriptTurn};
/// use cutctx_policies::Shape;
/// let t = Transcript::new(vec![TranscriptTurn::new("u", Role::User, "hi", 5)?])?;
/// let analysis = Analysis::of(&t, &CompactionBudget::new(10));
/// let shape = Shape::new(t.token_estimates(), &analysis)?;
/// assert_eq!((shape.len(), shape.total(), shape.budget().max_tokens), (1, 5, 10));
/// # Ok::<(), cutctx_model::CompactionError>(())
/// ```
#[derive(Debug, Clone, Copy)]
pub struct Shape<'a> {
    estimates: &'a [u64],
    total: u64,
    analysis: &'a Analysis,
}

impl<'a> Shape<'a> {
    /// The shape with these estimates, one per turn the analysis describes.
    ///
    /// # Errors
    ///
    /// `VALIDATION_ERROR` when the lengths differ or the estimates sum beyond `u64::MAX`.
    pub fn new(
        estimates: &'a [u64],
        analysis: &'a Analysis,
    ) -> Result<Self, cutctx_model::CompactionError> {
        let total = estimates
            .iter()
            .try_fold(0_u64, |acc, &e| acc.checked_add(e))
            .ok_or_else(|| {
                cutctx_model::CompactionError::validation(
                    format!("The shape's estimates sum beyond {}.", u64::MAX),
                    cutctx_model::details! { "turn_count" => estimates.len() },
                )
            })?;
        Self::with_total(estimates, total, analysis)
    }

    /// As [`Shape::new`], with the total already known (a chain sums it while building the
    /// estimates).
    pub(crate) fn with_total(
        estimates: &'a [u64],
        total: u64,
        analysis: &'a Analysis,
    ) -> Result<Self, cutctx_model::CompactionError> {
        debug_assert_eq!(
            Some(total),
            estimates.iter().try_fold(0_u64, |a, &e| a.checked_add(e)),
            "the total is the sum of the estimates"
        );
        if estimates.len() != analysis.len() {
            return Err(cutctx_model::CompactionError::validation(
                format!(
                    "A shape of {} estimates cannot take the analysis of {} turns.",
                    estimates.len(),
                    analysis.len()
                ),
                cutctx_model::details! {
                    "estimate_count" => estimates.len(),
                    "turn_count" => analysis.len(),
                },
            ));
        }
        Ok(Self {
            estimates,
            total,
            analysis,
        })
    }

    /// How many turns.
    #[must_use]
    pub const fn len(&self) -> usize {
        self.estimates.len()
    }

    /// Whether there is no turn.
    #[must_use]
    pub const fn is_empty(&self) -> bool {
        self.estimates.is_empty()
    }

    /// Each turn's estimate.
    #[must_use]
    pub const fn estimates(&self) -> &'a [u64] {
        self.estimates
    }

    /// The sum of the estimates.
    #[must_use]
    pub const fn total(&self) -> u64 {
        self.total
    }

    /// The exchanges, untouchable and removable turns, and floor.
    #[must_use]
    pub const fn analysis(&self) -> &'a Analysis {
        self.analysis
    }

    /// The budget to fit.
    #[must_use]
    pub const fn budget(&self) -> &'a CompactionBudget {
        self.analysis.budget()
    }
}

/// What a policy decided over a [`Shape`]. Positions are the shape's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ShapeDecision {
    /// Nothing to do.
    Nothing,
    /// Drop these turns (strictly increasing positions). Whole exchanges only: the plan is
    /// validated like any other.
    Drop(Vec<usize>),
    /// Fold the turns of `span` into one summary of `target_tokens`, written with the prompt
    /// `prompt_id`.
    Summarize {
        /// The turns to fold, a non-empty range of positions.
        span: Range<usize>,
        /// The summary's estimate.
        target_tokens: u64,
        /// The prompt record the summary should be written with.
        prompt_id: Arc<str>,
    },
}

/// Masks decided with their stubs' digests left for later: each masked turn's content becomes
/// `"{placeholder} (original: {n} tokens, sha256:{digest})"`, where `n` is the turn's estimate
/// in the transcript the policy decided over and the digest is that of the content the policy
/// was given (as `ObservationMaskingPolicy` writes it). Whoever applies them computes the
/// digests, only for the masks that survive.
#[derive(Debug, Clone, PartialEq)]
pub struct DeferredMasks {
    /// The stubs' visible part, used unstripped.
    pub placeholder: Arc<str>,
    /// The masks, by strictly increasing position.
    pub masks: Vec<DeferredMask>,
    /// The ratio the plan records when anything was masked.
    pub estimator_ratio: Option<f64>,
}

/// The digests of turns' contents, for a policy deciding over a transcript whose contents are
/// not at hand ([`CompactionPolicy::decide_with_digests`](crate::CompactionPolicy::decide_with_digests)): a provider request read without
/// copying its contents out, say, which hashes them where they lie.
pub trait ContentDigests: Sync {
    /// The SHA-256 of the content of the turn at `position` as a canonical JSON string literal:
    /// the digest [`cutctx_model::canonical::sha256_of_str`] writes in hex, and a masked
    /// turn's stub states.
    ///
    /// # Errors
    ///
    /// Whatever keeps the content from being read; the policy's decision fails with it.
    fn digest(&self, position: usize) -> Result<[u8; 32], CompactionError>;

    /// About how many bytes [`ContentDigests::digest`] hashes for `position`: to share the
    /// hashing out evenly among threads.
    fn content_len(&self, position: usize) -> usize;
}

/// One deferred mask: the turn at `position` gets a stub estimated at `estimate`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeferredMask {
    /// The masked turn's position.
    pub position: usize,
    /// The stub's estimate.
    pub estimate: u64,
}
