//! How the replay sizes and charges every strategy's summaries: one length rule
//! ([`summary_tokens`]) and one charging rule ([`SummaryKind`]), and the per-firing report
//! ([`SummaryFiring`]) that sets each firing's summary as a cached-prefix request against the
//! same summary made fresh.
//!
//! **Length.** A summary is as long as the compaction plan asks: a policy's summarization
//! request carries its `target_tokens`, which `cutctx-policies`' summarizing policy sets to
//! `max(1, round_half_even(span_tokens × target_ratio))`
//! (`crates/cutctx-policies/src/summarizing.rs`, `summary_target`; default ratio
//! [`SummarizingPolicy::DEFAULT_TARGET_RATIO`], 0.2). A strategy without a plan (a peer of
//! [`peers`](crate::peers)) gets the same rule at the default ratio for the tokens it
//! replaces: [`summary_tokens`]. So every strategy's summary of the same span is as long.
//!
//! **Charge.** Every summarizing call is priced by
//! [`PriceTable::summary_units`](cutctx_session::PriceTable::summary_units) (cached input at
//! the read price, the rest of the input at the base price, the output at the output price),
//! with its input taken by one rule per way of asking ([`SummaryKind`]):
//!
//! * **native** (the provider compacts on its side, as Anthropic's `compact_20260112`): as the
//!   provider bills the extra sampling step, the conversation as sent, read from the cache as
//!   far as the cache holds it, plus the instruction, plus the summary as output;
//! * **cached-prefix** (the client sends the conversation as last sent plus the instruction):
//!   the same figures, the cache reads found by the replay's cache model;
//! * **fresh** (the client sends the span alone in a prompt of its own): the span plus the
//!   instruction, none of it cached, plus the summary as output; one call per span;
//! * **given** (an external strategy): the figures its file gives.
//!
//! The instruction is the replay's summarization instruction
//! ([`SUMMARY_INSTRUCTION`](cutctx_session::SUMMARY_INSTRUCTION)) as a user message of the
//! run's format, counted by the run's estimator; a fresh prompt's framing is counted at that
//! length too.

use cutctx_policies::SummarizingPolicy;

/// The ratio of a summary's tokens to the tokens it replaces: the default summarizing
/// policy's ([`SummarizingPolicy::DEFAULT_TARGET_RATIO`]).
pub const SUMMARY_RATIO: f64 = SummarizingPolicy::DEFAULT_TARGET_RATIO;

/// The summary length rule for `replaced` tokens: `max(1, round_half_even(replaced × 0.2))`,
/// what the default summarizing policy plans for a span of that many tokens
/// (`crates/cutctx-policies/src/summarizing.rs`, `summary_target`). A policy's summaries take
/// the plan's `target_tokens`, which that policy computes by this rule at its own ratio; a
/// peer's take this.
///
/// ```
/// use cutctx_replay::summaries::summary_tokens;
/// assert_eq!(
///     (summary_tokens(50_000), summary_tokens(525), summary_tokens(5), summary_tokens(0)),
///     (10_000, 105, 1, 1)
/// );
/// ```
#[must_use]
#[expect(
    clippy::cast_precision_loss,
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    reason = "the policy's own arithmetic: an int-to-float product, rounded half to even"
)]
pub fn summary_tokens(replaced: u64) -> u64 {
    let rounded = (replaced as f64 * SUMMARY_RATIO).round_ties_even();
    (rounded as u64).max(1)
}

/// How a strategy asks for a summary, and so how the replay charges it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SummaryKind {
    /// The provider compacts on its side; billed as its extra sampling step: the conversation
    /// as sent (its cached part at the read price), the instruction, the output.
    Native,
    /// The conversation as last sent plus the instruction: the cache holds what it shares with
    /// earlier calls.
    CachedPrefix,
    /// The span alone plus the instruction, in a prompt of its own: nothing of it is cached.
    Fresh,
    /// Figures given by the caller (an external strategy).
    Given,
}

impl SummaryKind {
    /// The kind's name in the report: `native`, `cached-prefix`, `fresh` or `given`.
    ///
    /// ```
    /// assert_eq!(cutctx_replay::summaries::SummaryKind::CachedPrefix.as_str(), "cached-prefix");
    /// ```
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Native => "native",
            Self::CachedPrefix => "cached-prefix",
            Self::Fresh => "fresh",
            Self::Given => "given",
        }
    }
}

/// The summarizing calls of one firing, asked one way, and what they cost.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct SummaryCost {
    /// Summarizing calls made (a fresh firing makes one per span).
    pub calls: usize,
    /// Input tokens, the instruction included.
    pub input_tokens: u64,
    /// Of those, read from the cache.
    pub cached_tokens: u64,
    /// The summaries' tokens: the calls' output.
    pub output_tokens: u64,
    /// The cost in base-input-token units
    /// ([`PriceTable::summary_units`](cutctx_session::PriceTable::summary_units)).
    pub units: f64,
}

/// One firing that summarized: what it was charged, and what the same summaries would cost
/// asked as a cached-prefix request and asked fresh.
#[derive(Debug, Clone, PartialEq)]
pub struct SummaryFiring {
    /// The call the firing came before, counted from 1 (call `k` sends the messages before
    /// the `k`-th model turn).
    pub call: usize,
    /// How the strategy asked.
    pub kind: SummaryKind,
    /// What the strategy was charged: [`Self::cached_prefix`] for `native` and
    /// `cached-prefix`, [`Self::fresh`] for `fresh`, the given figures for `given`.
    pub charged: SummaryCost,
    /// The summaries asked as the conversation as the strategy would send it at this call plus
    /// the instruction, once (`None` for a given one).
    pub cached_prefix: Option<SummaryCost>,
    /// The summaries asked fresh: each span plus the instruction, uncached (`None` for a given
    /// one).
    pub fresh: Option<SummaryCost>,
}
