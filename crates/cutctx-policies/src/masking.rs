//! Observation masking: replace old tool results with a stub that carries their digest.

use std::sync::Arc;

use cutctx_invariants::{Analysis, CompactionPlan, build_plan};
use cutctx_model::canonical::sha256_of_str;
use cutctx_model::{
    CompactionBudget, CompactionError, DEFAULT_PLACEHOLDER, Role, Transcript, TurnAction,
    TurnReplacement, details,
};

use crate::{CharRatioEstimator, CompactionPolicy, POLICY_VERSION, TokenEstimator};

/// Masks tool results, oldest first, until the budget fits.
///
/// Each masked result becomes `"{placeholder} (original: {n} tokens, sha256:{digest})"`, where
/// the digest is the reference's `sha256_of(content)` (the hash of the content's JSON string
/// literal). The most recent `keep_recent_results` tool results are never masked, nor is any
/// untouchable turn, and a stub that would not be smaller than its turn is not used.
///
/// With the default estimator the plan records `estimator_ratio: 4.0` when anything was
/// masked; with an estimator supplied by the caller it records none.
///
/// ```
/// use cutctx_model::{CompactionBudget, Role, Transcript, TranscriptTurn};
/// use cutctx_policies::{CompactionPolicy, ObservationMaskingPolicy};
/// let t = Transcript::new(vec![
///     TranscriptTurn::new("a", Role::Assistant, "", 10)?.with_tool_call_id("c"),
///     TranscriptTurn::new("t", Role::Tool, "L".repeat(1200), 300)?.with_tool_call_id("c"),
///     TranscriptTurn::new("u", Role::User, "thanks", 5)?,
/// ])?;
/// let policy = ObservationMaskingPolicy::new(0)?;
/// let plan = policy.decide(&t, &CompactionBudget::new(100).with_protected_recent_turns(1))?;
/// assert_eq!(plan.tokens_after_estimate, 10 + 32 + 5);
/// assert_eq!(plan.estimator_ratio, Some(4.0));
/// # Ok::<(), cutctx_model::CompactionError>(())
/// ```
pub struct ObservationMaskingPolicy {
    keep_recent_results: usize,
    placeholder: String,
    estimator: Option<Box<dyn TokenEstimator>>,
}

impl std::fmt::Debug for ObservationMaskingPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ObservationMaskingPolicy")
            .field("keep_recent_results", &self.keep_recent_results)
            .field("placeholder", &self.placeholder)
            .field("custom_estimator", &self.estimator.is_some())
            .finish()
    }
}

/// One decided mask, before its digest is computed.
#[derive(Debug, Clone)]
pub(crate) struct PendingMask {
    /// Position in the transcript the policy looked at.
    pub(crate) position: usize,
    /// Everything of the stub before the digest.
    pub(crate) prefix: Arc<str>,
    /// The stub's estimate.
    pub(crate) estimate: u64,
}

/// The length of a digest's hex, plus the closing parenthesis.
const DIGEST_TAIL_CHARS: usize = 64 + 1;

impl ObservationMaskingPolicy {
    /// The policy's name.
    pub const NAME: &'static str = "observation_masking";

    /// A masking policy that keeps the `keep_recent_results` most recent tool results, with the
    /// default placeholder and estimator.
    ///
    /// # Errors
    ///
    /// None today; the signature leaves room for the reference's argument checks, which the
    /// type system already covers for this argument.
    pub fn new(keep_recent_results: usize) -> Result<Self, CompactionError> {
        Ok(Self {
            keep_recent_results,
            placeholder: DEFAULT_PLACEHOLDER.to_owned(),
            estimator: None,
        })
    }

    /// The same policy with another placeholder, used unstripped.
    ///
    /// # Errors
    ///
    /// `VALIDATION_ERROR` when the placeholder is blank after stripping whitespace.
    pub fn with_placeholder(
        mut self,
        placeholder: impl Into<String>,
    ) -> Result<Self, CompactionError> {
        let placeholder = placeholder.into();
        if placeholder.trim().is_empty() {
            return Err(CompactionError::validation(
                format!(
                    "placeholder must be a non-empty string: it is the visible part of every \
                     stub; got {}.",
                    cutctx_model::py_repr_str(&placeholder)
                ),
                details! { "placeholder" => cutctx_model::py_repr_str(&placeholder) },
            ));
        }
        self.placeholder = placeholder;
        Ok(self)
    }

    /// The same policy with a caller-supplied estimator for stubs. Plans then record no
    /// estimator ratio, as the reference does for any injected estimator.
    #[must_use]
    pub fn with_estimator(mut self, estimator: Box<dyn TokenEstimator>) -> Self {
        self.estimator = Some(estimator);
        self
    }

    /// How many recent tool results are never masked.
    #[must_use]
    pub const fn keep_recent_results(&self) -> usize {
        self.keep_recent_results
    }

    /// Whether stub estimates depend on length alone, so digests may be computed later.
    pub(crate) fn defers_digests(&self) -> bool {
        self.estimator
            .as_ref()
            .is_none_or(|e| e.estimate_chars(0).is_some())
    }

    /// The ratio a plan records when this policy masked something.
    pub(crate) fn ratio(&self) -> Option<f64> {
        if self.estimator.is_none() {
            Some(CharRatioEstimator::DEFAULT_CHARS_PER_TOKEN)
        } else {
            None
        }
    }

    fn estimate(&self, chars: usize, text: impl FnOnce() -> String) -> u64 {
        match &self.estimator {
            None => CharRatioEstimator::default()
                .estimate_chars(chars)
                .unwrap_or(0),
            Some(e) => e
                .estimate_chars(chars)
                .unwrap_or_else(|| e.estimate_tokens(&text())),
        }
    }

    /// Decides which turns to mask, without computing digests when the estimator allows.
    pub(crate) fn pending_masks(
        &self,
        t: &Transcript,
        b: &CompactionBudget,
        analysis: &Analysis,
    ) -> Vec<PendingMask> {
        let turns = t.turns();
        let results: Vec<usize> = turns
            .iter()
            .enumerate()
            .filter(|(_, turn)| turn.role() == Role::Tool)
            .map(|(i, _)| i)
            .collect();
        let recent_from = results.len().saturating_sub(self.keep_recent_results);
        let placeholder_chars = self.placeholder.chars().count();
        let mut running = t.token_estimate();
        let mut masks = Vec::new();
        for (rank, &p) in results.iter().enumerate() {
            if running <= b.max_tokens {
                break;
            }
            if analysis.untouchable[p] || (self.keep_recent_results > 0 && rank >= recent_from) {
                continue;
            }
            let turn = &turns[p];
            let prefix = format!(
                "{} (original: {} tokens, sha256:",
                self.placeholder,
                turn.token_estimate()
            );
            let chars =
                placeholder_chars + (prefix.len() - self.placeholder.len()) + DIGEST_TAIL_CHARS;
            let estimate = self.estimate(chars, || realize(&prefix, turn.content()));
            if estimate >= turn.token_estimate() {
                continue;
            }
            running -= turn.token_estimate() - estimate;
            masks.push(PendingMask {
                position: p,
                prefix: prefix.into(),
                estimate,
            });
        }
        masks
    }
}

/// The stub text for `prefix` over `source`: computes the digest.
pub(crate) fn realize(prefix: &str, source: &str) -> String {
    let mut out = String::with_capacity(prefix.len() + DIGEST_TAIL_CHARS);
    out.push_str(prefix);
    out.push_str(&sha256_of_str(source));
    out.push(')');
    out
}

/// Computes `realize(prefix, source)` for every job, on all available cores when the work is
/// large enough to pay for the threads. The output order is the input order.
pub(crate) fn realize_all(jobs: &[(Arc<str>, Arc<str>)]) -> Vec<Arc<str>> {
    const PARALLEL_BYTES: usize = 1 << 20;
    let bytes: usize = jobs.iter().map(|(_, s)| s.len()).sum();
    let threads = std::thread::available_parallelism()
        .map_or(1, std::num::NonZeroUsize::get)
        .min(8);
    if bytes < PARALLEL_BYTES || threads < 2 || jobs.len() < 2 {
        return jobs.iter().map(|(p, s)| Arc::from(realize(p, s))).collect();
    }
    // Split by bytes, not by count, so one core does not get all the large results.
    let share = bytes.div_ceil(threads);
    let mut chunks: Vec<&[(Arc<str>, Arc<str>)]> = Vec::with_capacity(threads);
    let (mut start, mut acc) = (0, 0);
    for (i, (_, s)) in jobs.iter().enumerate() {
        acc += s.len();
        if acc >= share {
            chunks.push(&jobs[start..=i]);
            start = i + 1;
            acc = 0;
        }
    }
    if start < jobs.len() {
        chunks.push(&jobs[start..]);
    }
    std::thread::scope(|scope| {
        let handles: Vec<_> = chunks
            .iter()
            .map(|chunk| {
                scope.spawn(move || {
                    chunk
                        .iter()
                        .map(|(p, s)| Arc::from(realize(p, s)))
                        .collect::<Vec<Arc<str>>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .zip(&chunks)
            .flat_map(|(h, chunk)| {
                // A hashing thread cannot panic on valid strings; recompute inline if it did.
                h.join().unwrap_or_else(|_| {
                    chunk
                        .iter()
                        .map(|(p, s)| Arc::from(realize(p, s)))
                        .collect()
                })
            })
            .collect()
    })
}

impl CompactionPolicy for ObservationMaskingPolicy {
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
        let analysis = Analysis::of(t, b);
        analysis.require_satisfiable(b)?;
        let masks = self.pending_masks(t, b, &analysis);
        let turns = t.turns();
        let jobs: Vec<(Arc<str>, Arc<str>)> = masks
            .iter()
            .map(|m| (m.prefix.clone(), turns[m.position].content_arc().clone()))
            .collect();
        let stubs = realize_all(&jobs);
        let mut actions: Vec<TurnAction> = turns
            .iter()
            .map(|turn| TurnAction::keep(turn.turn_id_arc().clone()))
            .collect();
        for (m, content) in masks.iter().zip(stubs) {
            actions[m.position] = TurnAction::mask(
                turns[m.position].turn_id_arc().clone(),
                TurnReplacement {
                    content,
                    token_estimate: m.estimate,
                },
            );
        }
        let ratio = if masks.is_empty() { None } else { self.ratio() };
        build_plan(
            t,
            b,
            &analysis,
            actions,
            Vec::new(),
            Self::NAME,
            POLICY_VERSION,
            ratio,
        )
    }

    fn as_masking(&self) -> Option<&ObservationMaskingPolicy> {
        Some(self)
    }
}
