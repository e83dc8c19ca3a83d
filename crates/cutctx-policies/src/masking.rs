//! Observation masking: replace old tool results with a stub that carries their digest.

use std::sync::Arc;

use cutctx_invariants::{Analysis, CompactionPlan, Decisions, build_plan};
use cutctx_json::Digits;
use cutctx_model::canonical::push_sha256_of_str;
use cutctx_model::{
    CompactionBudget, CompactionError, DEFAULT_PLACEHOLDER, Role, Transcript, TurnAction,
    TurnReplacement, details,
};

use crate::{
    CharRatioEstimator, CompactionPolicy, ContentDigests, DeferredMask, DeferredMasks,
    POLICY_VERSION, Parallelism, Reads, TokenEstimator,
};

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
    placeholder: Arc<str>,
    estimator: Option<Box<dyn TokenEstimator>>,
    parallelism: Parallelism,
}

impl std::fmt::Debug for ObservationMaskingPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ObservationMaskingPolicy")
            .field("keep_recent_results", &self.keep_recent_results)
            .field("placeholder", &self.placeholder)
            .field("custom_estimator", &self.estimator.is_some())
            .field("parallelism", &self.parallelism)
            .finish()
    }
}

/// A stub to write: what it says, and the content its digest covers.
#[derive(Debug, Clone)]
pub(crate) struct StubJob {
    /// The placeholder, used unstripped.
    pub(crate) placeholder: Arc<str>,
    /// The estimate of the turn the stub replaces, as the stub states it.
    pub(crate) original_tokens: u64,
    /// The content the digest covers.
    pub(crate) source: StubSource,
}

/// The content a stub's digest covers.
#[derive(Debug, Clone)]
pub(crate) enum StubSource {
    /// The content of the turn at this position of the transcript the job is realized
    /// against. Held as a position, not a reference, so that deciding a mask never touches
    /// the content's allocation: the text is read once, when it is hashed.
    Turn(usize),
    /// Other text: an earlier stub, masked again.
    Text(Arc<str>),
}

impl StubJob {
    /// `"{placeholder} (original: {n} tokens, sha256:{digest})"`, with the digest of the source
    /// read from `transcript`.
    ///
    /// A job's position is always one of `transcript`'s: jobs are made from its positions.
    pub(crate) fn realize(&self, transcript: &Transcript) -> Arc<str> {
        let text = match &self.source {
            StubSource::Turn(p) => transcript.turns()[*p].content(),
            StubSource::Text(text) => text,
        };
        stub(&self.placeholder, self.original_tokens, |out| {
            push_sha256_of_str(out, text);
        })
    }

    /// As [`StubJob::realize`], a turn's digest read from `digests` when given (its contents
    /// are then elsewhere, and the transcript's turns may show them empty).
    pub(crate) fn realize_with(
        &self,
        transcript: &Transcript,
        digests: Option<&dyn ContentDigests>,
    ) -> Result<Arc<str>, CompactionError> {
        match (&self.source, digests) {
            (StubSource::Turn(p), Some(digests)) => {
                let digest = digests.digest(*p)?;
                Ok(stub(&self.placeholder, self.original_tokens, |out| {
                    cutctx_json::push_hex(out, &digest);
                }))
            }
            _ => Ok(self.realize(transcript)),
        }
    }

    /// The length of the text the digest covers, to share hashing work out evenly.
    fn source_len(&self, transcript: &Transcript, digests: Option<&dyn ContentDigests>) -> usize {
        match (&self.source, digests) {
            (StubSource::Turn(p), Some(digests)) => digests.content_len(*p),
            (StubSource::Turn(p), None) => transcript.turns()[*p].content().len(),
            (StubSource::Text(text), _) => text.len(),
        }
    }
}

/// `"{placeholder} (original: {original_tokens} tokens, sha256:{digest})"`, the digest's hex
/// written by `digest`: the one spelling of a stub, whoever computes the digest.
pub(crate) fn stub(
    placeholder: &str,
    original_tokens: u64,
    digest: impl FnOnce(&mut String),
) -> Arc<str> {
    // Written into a buffer this thread keeps, then copied into the stub's one allocation:
    // a masking policy writes a stub for every masked turn, tens of thousands at a time.
    STUB.with_borrow_mut(|stub| {
        stub.clear();
        stub.reserve(placeholder.len() + STUB_FRAME_CHARS + 20);
        stub.push_str(placeholder);
        stub.push_str(" (original: ");
        stub.push_str(Digits::new().of(original_tokens));
        stub.push_str(" tokens, sha256:");
        digest(stub);
        stub.push(')');
        Arc::from(stub.as_str())
    })
}

thread_local! {
    /// The buffer [`stub`] writes each stub into on this thread.
    static STUB: std::cell::RefCell<String> = const { std::cell::RefCell::new(String::new()) };
}

/// The plan that masks the turns of `masks` (by strictly increasing position) with `stubs`, in
/// the same order, and keeps every other turn of `t`.
pub(crate) fn masks_plan(
    t: &Transcript,
    analysis: &Analysis,
    masks: &[DeferredMask],
    stubs: Vec<Arc<str>>,
    estimator_ratio: Option<f64>,
    policy: (&str, &str),
) -> Result<CompactionPlan, CompactionError> {
    let turns = t.turns();
    let mut actions: Vec<TurnAction> = t
        .turn_id_arcs()
        .iter()
        .map(|id| TurnAction::keep(id.clone()))
        .collect();
    for (m, content) in masks.iter().zip(stubs) {
        let (Some(action), Some(turn)) = (actions.get_mut(m.position), turns.get(m.position))
        else {
            return Err(CompactionError::validation(
                "A mask names a position the transcript does not have.",
                details! { "position" => m.position, "turns" => turns.len() },
            ));
        };
        *action = TurnAction::mask(
            turn.turn_id_arc().clone(),
            TurnReplacement {
                content,
                token_estimate: m.estimate,
            },
        );
    }
    let decisions = Decisions {
        actions,
        summarization_requests: Vec::new(),
        estimator_ratio: if masks.is_empty() {
            None
        } else {
            estimator_ratio
        },
    };
    build_plan(t, analysis, decisions, policy.0, policy.1)
}

/// Code points of a stub besides the placeholder and the token count's digits.
const STUB_FRAME_CHARS: usize = " (original: ".len() + " tokens, sha256:".len() + 64 + ")".len();

impl ObservationMaskingPolicy {
    /// The policy's name.
    pub const NAME: &'static str = "observation_masking";

    /// The tool results the reference's default chain keeps unmasked, and every front end's
    /// default for `keep_recent_results`.
    pub const DEFAULT_KEEP_RECENT_RESULTS: usize = 2;

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
            placeholder: Arc::from(DEFAULT_PLACEHOLDER),
            estimator: None,
            parallelism: Parallelism::Automatic,
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
        self.placeholder = placeholder.into();
        Ok(self)
    }

    /// The same policy with a caller-supplied estimator for stubs. Plans then record no
    /// estimator ratio, as the reference does for any injected estimator.
    #[must_use]
    pub fn with_estimator(mut self, estimator: Box<dyn TokenEstimator>) -> Self {
        self.estimator = Some(estimator);
        self
    }

    /// The same policy computing digests on at most as many threads as `parallelism` allows.
    /// Plans do not depend on it.
    #[must_use]
    pub const fn with_parallelism(mut self, parallelism: Parallelism) -> Self {
        self.parallelism = parallelism;
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

    /// The stub job for a turn of `original_tokens` whose content is `source`.
    pub(crate) fn job(&self, original_tokens: u64, source: StubSource) -> StubJob {
        StubJob {
            placeholder: self.placeholder.clone(),
            original_tokens,
            source,
        }
    }

    /// The plan over `t`, each masked turn's digest read from `digests` when given, else
    /// from `t`'s contents.
    fn decide_reading(
        &self,
        t: &Transcript,
        analysis: &Analysis,
        digests: Option<&dyn ContentDigests>,
    ) -> Result<CompactionPlan, CompactionError> {
        analysis.require_satisfiable()?;
        let masks = self.pending_masks(t, analysis);
        let turns = t.turns();
        let jobs: Vec<StubJob> = masks
            .iter()
            .map(|m| {
                self.job(
                    turns[m.position].token_estimate(),
                    StubSource::Turn(m.position),
                )
            })
            .collect();
        let stubs = realize_all(&jobs, t, self.parallelism, digests)?;
        masks_plan(
            t,
            analysis,
            &masks,
            stubs,
            self.ratio(),
            (Self::NAME, POLICY_VERSION),
        )
    }

    /// Decides which turns to mask. Digests are not computed when the estimator depends on
    /// length alone, since a digest's length never varies.
    fn pending_masks(&self, t: &Transcript, analysis: &Analysis) -> Vec<DeferredMask> {
        let b = analysis.budget();
        let estimates = t.token_estimates();
        let untouchable = analysis.untouchable();
        let results: Vec<usize> = t
            .roles()
            .iter()
            .enumerate()
            .filter(|(_, role)| **role == Role::Tool)
            .map(|(i, _)| i)
            .collect();
        let recent_from = results.len().saturating_sub(self.keep_recent_results);
        let placeholder_chars = self.placeholder.chars().count();
        let mut running = t.token_estimate();
        // At most one mask a result: room reserved for all, and only what is used is touched.
        let mut masks = Vec::with_capacity(results.len());
        for (rank, &p) in results.iter().enumerate() {
            if running <= b.max_tokens {
                break;
            }
            if untouchable[p] || (self.keep_recent_results > 0 && rank >= recent_from) {
                continue;
            }
            let original = estimates[p];
            let chars = placeholder_chars + STUB_FRAME_CHARS + decimal_digits(original);
            let estimate = self.estimate(chars, || {
                self.job(original, StubSource::Turn(p))
                    .realize(t)
                    .to_string()
            });
            if estimate >= original {
                continue;
            }
            running -= original - estimate;
            masks.push(DeferredMask {
                position: p,
                estimate,
            });
        }
        masks
    }
}

fn decimal_digits(n: u64) -> usize {
    Digits::new().of(n).len()
}

/// Realizes every job, on as many cores as `parallelism` allows when the work is large enough
/// to pay for the threads, each turn's digest read from `digests` when given. The output
/// order is the input order.
pub(crate) fn realize_all(
    jobs: &[StubJob],
    transcript: &Transcript,
    parallelism: Parallelism,
    digests: Option<&dyn ContentDigests>,
) -> Result<Vec<Arc<str>>, CompactionError> {
    const PARALLEL_BYTES: usize = 1 << 20;
    let realize = |job: &StubJob| job.realize_with(transcript, digests);
    let bytes: usize = jobs.iter().map(|j| j.source_len(transcript, digests)).sum();
    if bytes < PARALLEL_BYTES || jobs.len() < 2 {
        return jobs.iter().map(realize).collect();
    }
    // Only now: asking the system for its cores reads files (the cgroup's quota), a cost a
    // small compaction (a batch's line, say) must not pay every time.
    let threads = parallelism.threads();
    if threads < 2 {
        return jobs.iter().map(realize).collect();
    }
    // Split by bytes, not by count, so one core does not get all the large results; on a
    // pool into a few shares a thread, so that a thread that falls behind is helped.
    let share = bytes.div_ceil(cutctx_model::beside::shares(threads));
    let mut chunks: Vec<&[StubJob]> = Vec::with_capacity(threads);
    let (mut start, mut acc) = (0, 0);
    for (i, job) in jobs.iter().enumerate() {
        acc += job.source_len(transcript, digests);
        if acc >= share {
            chunks.push(&jobs[start..=i]);
            start = i + 1;
            acc = 0;
        }
    }
    if start < jobs.len() {
        chunks.push(&jobs[start..]);
    }
    let realize_chunk =
        |chunk: &[StubJob]| chunk.iter().map(realize).collect::<Result<Vec<_>, _>>();
    // The first share on this thread, the others beside it.
    let (first, rest) = chunks
        .split_first()
        .map_or((&[][..], &[][..]), |(f, r)| (*f, r));
    let (mine, theirs) =
        cutctx_model::beside::beside(|| realize_chunk(first), rest.to_vec(), realize_chunk);
    let mut all = Vec::with_capacity(jobs.len());
    all.extend(mine?);
    for (part, chunk) in theirs.into_iter().zip(rest) {
        // Hashing a string cannot panic; should a job be lost anyway, redo its share here.
        all.extend(part.unwrap_or_else(|_| realize_chunk(chunk))?);
    }
    Ok(all)
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
        self.decide_with_analysis(t, &Analysis::of(t, b))
    }

    fn decide_with_analysis(
        &self,
        t: &Transcript,
        analysis: &Analysis,
    ) -> Result<CompactionPlan, CompactionError> {
        self.decide_reading(t, analysis, None)
    }

    /// With the default estimator, stubs' estimates never depend on their digests: the masks
    /// are decided from the structure and only their digests read from `digests`.
    fn decide_with_digests(
        &self,
        t: &Transcript,
        analysis: &Analysis,
        digests: &dyn ContentDigests,
    ) -> Option<Result<CompactionPlan, CompactionError>> {
        self.defers_digests()
            .then(|| self.decide_reading(t, analysis, Some(digests)))
    }

    /// Content only when the estimator needs a stub's text; the default estimator counts
    /// characters, and a stub's length never depends on its digest.
    fn reads(&self) -> Reads {
        if self.defers_digests() {
            Reads::Structure
        } else {
            Reads::Content
        }
    }

    fn decide_masks(
        &self,
        t: &Transcript,
        analysis: &Analysis,
    ) -> Option<Result<DeferredMasks, CompactionError>> {
        if !self.defers_digests() {
            return None;
        }
        let decided = analysis.require_satisfiable().map(|()| {
            let masks = self.pending_masks(t, analysis);
            DeferredMasks {
                placeholder: self.placeholder.clone(),
                estimator_ratio: if masks.is_empty() { None } else { self.ratio() },
                masks,
            }
        });
        Some(decided)
    }
}
