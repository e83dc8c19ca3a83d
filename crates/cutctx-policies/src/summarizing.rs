//! Summarizing: ask the caller to fold the oldest qualifying span into one summary.

use std::sync::Arc;

use cutctx_invariants::{Analysis, CompactionPlan, build_plan};
use cutctx_model::canonical::{py_float_repr, sha256_of_str};
use cutctx_model::{
    CompactionBudget, CompactionError, GROUP_ID_PREFIX, SummarizationRequest, Transcript,
    TurnAction, details, py_repr_str,
};

use crate::{CompactionPolicy, POLICY_VERSION};

/// Plans one summary of the oldest span of removable turns that is long enough and worth it.
///
/// A span is a run of consecutive removable turns, trimmed to the turns whose whole exchange
/// lies inside the run, then split again into consecutive runs. The first span (oldest first)
/// with at least `min_span_turns` turns whose target
/// `max(1, round_half_even(span_tokens × target_ratio))` is below its tokens is chosen. Its
/// group id is `span-` and the first 16 hex digits of `sha256_of` of its ids joined by U+0000.
///
/// The policy does not check that the result fits: `budget_unmet` may stay true.
///
/// ```
/// use cutctx_model::{CompactionBudget, Role, Transcript, TranscriptTurn};
/// use cutctx_policies::{CompactionPolicy, SummarizingPolicy};
/// let turns = (0..5)
///     .map(|i| TranscriptTurn::new(format!("m{i}"), Role::User, "text", 50))
///     .collect::<Result<Vec<_>, _>>()?;
/// let t = Transcript::new(turns)?;
/// let policy = SummarizingPolicy::new("compaction.summarize.v1")?;
/// let plan = policy.decide(&t, &CompactionBudget::new(100).with_protected_recent_turns(1))?;
/// let request = &plan.summarization_requests[0];
/// assert_eq!(request.target_tokens(), 40); // round(200 × 0.2)
/// assert_eq!(request.turn_ids().len(), 4);
/// # Ok::<(), cutctx_model::CompactionError>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct SummarizingPolicy {
    prompt_id: Arc<str>,
    target_ratio: f64,
    min_span_turns: usize,
}

impl SummarizingPolicy {
    /// The policy's name.
    pub const NAME: &'static str = "summarizing";
    /// The default `target_ratio`.
    pub const DEFAULT_TARGET_RATIO: f64 = 0.2;
    /// The default `min_span_turns`.
    pub const DEFAULT_MIN_SPAN_TURNS: usize = 4;

    /// A summarizing policy with the default ratio (0.2) and minimum span (4 turns).
    ///
    /// # Errors
    ///
    /// `VALIDATION_ERROR` when `prompt_id` is blank (details: `prompt_id`, as Python's repr).
    pub fn new(prompt_id: impl Into<Arc<str>>) -> Result<Self, CompactionError> {
        let prompt_id = prompt_id.into();
        if prompt_id.trim().is_empty() {
            return Err(CompactionError::validation(
                format!(
                    "prompt_id must name a versioned prompt record; cutctx carries no prompt \
                     text. Got {}.",
                    py_repr_str(&prompt_id)
                ),
                details! { "prompt_id" => py_repr_str(&prompt_id) },
            ));
        }
        Ok(Self {
            prompt_id,
            target_ratio: Self::DEFAULT_TARGET_RATIO,
            min_span_turns: Self::DEFAULT_MIN_SPAN_TURNS,
        })
    }

    /// The same policy with another target ratio.
    ///
    /// # Errors
    ///
    /// `VALIDATION_ERROR` unless `0 < ratio < inf` (details: `target_ratio`, as Python's repr).
    pub fn with_target_ratio(mut self, ratio: f64) -> Result<Self, CompactionError> {
        if !(ratio.is_finite() && ratio > 0.0) {
            let repr = py_float_repr(ratio).unwrap_or_else(|| {
                if ratio.is_nan() {
                    "nan".into()
                } else if ratio > 0.0 {
                    "inf".into()
                } else {
                    "-inf".into()
                }
            });
            return Err(CompactionError::validation(
                format!(
                    "target_ratio must be a finite number greater than zero; got {repr}. It is \
                     the share of a span's tokens its summary may take."
                ),
                details! { "target_ratio" => repr },
            ));
        }
        self.target_ratio = ratio;
        Ok(self)
    }

    /// The same policy with another minimum span length.
    ///
    /// # Errors
    ///
    /// `VALIDATION_ERROR` when `min_span_turns` is 0 (details: `min_span_turns`).
    pub fn with_min_span_turns(mut self, min_span_turns: usize) -> Result<Self, CompactionError> {
        if min_span_turns < 1 {
            return Err(CompactionError::validation(
                format!(
                    "min_span_turns must be at least 1; got {min_span_turns}. A span of no \
                     turns folds nothing."
                ),
                details! { "min_span_turns" => min_span_turns },
            ));
        }
        self.min_span_turns = min_span_turns;
        Ok(self)
    }

    /// The prompt record the summaries should be written with.
    #[must_use]
    pub fn prompt_id(&self) -> &str {
        &self.prompt_id
    }
}

/// The candidate spans, oldest first, as position ranges `start..end`.
fn spans(analysis: &Analysis) -> Vec<std::ops::Range<usize>> {
    let n = analysis.removable.len();
    let mut out = Vec::new();
    let mut i = 0;
    while i < n {
        if !analysis.removable[i] {
            i += 1;
            continue;
        }
        let start = i;
        while i < n && analysis.removable[i] {
            i += 1;
        }
        let end = i;
        // Keep the turns whose whole exchange lies in start..end, then split into runs.
        let inside = |p: usize| {
            let members = analysis
                .exchanges
                .members(analysis.exchanges.exchange_of(p));
            members.first().is_some_and(|&f| f >= start) && members.last().is_some_and(|&l| l < end)
        };
        let mut run_start: Option<usize> = None;
        for p in start..end {
            match (inside(p), run_start) {
                (true, None) => run_start = Some(p),
                (false, Some(s)) => {
                    out.push(s..p);
                    run_start = None;
                }
                _ => {}
            }
        }
        if let Some(s) = run_start {
            out.push(s..end);
        }
    }
    out
}

/// Python's `max(1, round(tokens * ratio))`: ties to even, on the IEEE double product.
#[allow(
    clippy::cast_precision_loss,
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    reason = "Python's int-to-float product and round(), reproduced on purpose"
)]
pub(crate) fn summary_target(span_tokens: u64, ratio: f64) -> u64 {
    let rounded = (span_tokens as f64 * ratio).round_ties_even();
    (rounded as u64).max(1)
}

impl CompactionPolicy for SummarizingPolicy {
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
        self.decide_with_analysis(t, b, &Analysis::of(t, b))
    }

    fn decide_with_analysis(
        &self,
        t: &Transcript,
        b: &CompactionBudget,
        analysis: &Analysis,
    ) -> Result<CompactionPlan, CompactionError> {
        analysis.require_satisfiable(b)?;
        let turns = t.turns();
        let mut chosen = None;
        if t.token_estimate() > b.max_tokens {
            for span in spans(analysis) {
                if span.len() < self.min_span_turns {
                    continue;
                }
                let span_tokens: u64 = turns[span.clone()]
                    .iter()
                    .map(|turn| turn.token_estimate())
                    .sum();
                let target = summary_target(span_tokens, self.target_ratio);
                if target >= span_tokens {
                    continue;
                }
                chosen = Some((span, target));
                break;
            }
        }
        let mut actions: Vec<TurnAction> = turns
            .iter()
            .map(|turn| TurnAction::keep(turn.turn_id_arc().clone()))
            .collect();
        let mut requests = Vec::new();
        if let Some((span, target)) = chosen {
            let ids: Vec<Arc<str>> = turns[span.clone()]
                .iter()
                .map(|turn| turn.turn_id_arc().clone())
                .collect();
            let group_id: Arc<str> = group_id_for(&ids).into();
            for p in span.clone() {
                actions[p] =
                    TurnAction::summarize(turns[p].turn_id_arc().clone(), group_id.clone());
            }
            let positions: Vec<usize> = span.collect();
            requests.push(SummarizationRequest::for_positions(
                group_id,
                t,
                &positions,
                target,
                self.prompt_id.clone(),
            )?);
        }
        build_plan(
            t,
            b,
            analysis,
            actions,
            requests,
            Self::NAME,
            POLICY_VERSION,
            None,
        )
    }

    fn reads_content(&self) -> bool {
        false
    }
}

/// `span-` and the first 16 hex digits of `sha256_of` of the ids joined by U+0000.
fn group_id_for(ids: &[Arc<str>]) -> String {
    let joined = ids.iter().map(|s| &**s).collect::<Vec<_>>().join("\u{0}");
    let digest = sha256_of_str(&joined);
    format!("{GROUP_ID_PREFIX}{}", &digest[..16])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_round_half_to_even_for_targets() {
        assert_eq!(summary_target(5, 0.5), 2);
        assert_eq!(summary_target(7, 0.5), 4);
        assert_eq!(summary_target(1, 0.2), 1);
        assert_eq!(summary_target(525, 0.2), 105);
    }

    #[test]
    fn group_ids_hash_the_json_literal_with_u0000_escapes() {
        let ids: Vec<Arc<str>> = (0..9).map(|i| Arc::from(format!("m{i}"))).collect();
        assert_eq!(group_id_for(&ids), "span-b2da65fee5a8bd16");
        let mut ids = ids;
        ids.push("m9".into());
        ids.push("u9".into());
        assert_eq!(group_id_for(&ids), "span-496ed38718261afc");
    }
}
