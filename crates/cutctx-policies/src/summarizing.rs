//! Summarizing: ask the caller to fold the oldest qualifying span into one summary.

use std::ops::Range;
use std::sync::Arc;

use cutctx_invariants::{Analysis, CompactionPlan, Decisions, build_plan};
use cutctx_model::canonical::{py_float_repr, sha256_of_joined};
use cutctx_model::{
    CompactionBudget, CompactionError, GROUP_ID_PREFIX, SummarizationRequest, Transcript,
    TurnAction, details, py_repr_str,
};

use crate::{CompactionPolicy, POLICY_VERSION, Reads, Shape, ShapeDecision};

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
fn spans(analysis: &Analysis) -> Vec<Range<usize>> {
    let n = analysis.removable().len();
    let mut out = Vec::new();
    let mut i = 0;
    while i < n {
        if !analysis.removable()[i] {
            i += 1;
            continue;
        }
        let start = i;
        while i < n && analysis.removable()[i] {
            i += 1;
        }
        let end = i;
        // Keep the turns whose whole exchange lies in start..end, then split into runs.
        let inside = |p: usize| {
            let members = analysis
                .exchanges()
                .members(analysis.exchanges().exchange_of(p));
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
// The `as` casts are Python's int-to-float product and round(), reproduced on purpose.
pub(crate) fn summary_target(span_tokens: u64, ratio: f64) -> u64 {
    let rounded = (span_tokens as f64 * ratio).round_ties_even();
    (rounded as u64).max(1)
}

/// Whether every exchange with a member in `span` lies wholly inside it.
fn closed(span: &Range<usize>, analysis: &Analysis) -> bool {
    span.clone().all(|p| {
        let members = analysis
            .exchanges()
            .members(analysis.exchanges().exchange_of(p));
        members.first().is_some_and(|&f| f >= span.start)
            && members.last().is_some_and(|&l| l < span.end)
    })
}

/// Splits a span that is not closed into the closed spans it contains, oldest first.
///
/// A turn goes when its exchange reaches outside the span, or when its exchange's interval
/// (first to last member) holds a turn that went: summarizing the rest would leave that
/// exchange split. This repeats until nothing more goes. Each exchange is examined once, found
/// through a max-tree over the exchanges' last positions, so the cost is `O(n log n)`.
fn refine(span: &Range<usize>, analysis: &Analysis) -> Vec<Range<usize>> {
    let ex = analysis.exchanges();
    // Every exchange has at least one member: the partition is of the turns themselves.
    let bounds = |e: usize| {
        let m = ex.members(e);
        debug_assert!(!m.is_empty(), "an exchange without members");
        (
            m.first().copied().unwrap_or(0),
            m.last().copied().unwrap_or(0),
        )
    };
    let inside = |e: usize| {
        let (f, l) = bounds(e);
        f >= span.start && l < span.end
    };
    // Exchanges wholly inside, by first member; and the turns that go at once.
    let mut local: Vec<usize> = Vec::new();
    let mut gone = vec![false; span.len()];
    let mut queue: Vec<usize> = Vec::new();
    for p in span.clone() {
        let e = ex.exchange_of(p);
        if !inside(e) {
            gone[p - span.start] = true;
            queue.push(p);
        } else if bounds(e).0 == p {
            local.push(e);
        }
    }
    let firsts: Vec<usize> = local.iter().map(|&e| bounds(e).0).collect();
    let mut tree = MaxTree::new(local.iter().map(|&e| bounds(e).1));
    while let Some(p) = queue.pop() {
        // Every live exchange starting at or before `p` and ending at or after it covers `p`.
        let prefix = firsts.partition_point(|&f| f <= p);
        while let Some(i) = tree.find(prefix, p) {
            tree.kill(i);
            for &m in ex.members(local[i]) {
                if !gone[m - span.start] {
                    gone[m - span.start] = true;
                    queue.push(m);
                }
            }
        }
    }
    let mut out = Vec::new();
    let mut run: Option<usize> = None;
    for p in span.clone() {
        match (gone[p - span.start], run) {
            (false, None) => run = Some(p),
            (true, Some(s)) => {
                out.push(s..p);
                run = None;
            }
            _ => {}
        }
    }
    if let Some(s) = run {
        out.push(s..span.end);
    }
    out
}

/// A max segment tree over exchanges' last positions; a dead exchange holds `None`.
struct MaxTree {
    size: usize,
    node: Vec<Option<usize>>,
}

impl MaxTree {
    fn new(values: impl ExactSizeIterator<Item = usize>) -> Self {
        let size = values.len().next_power_of_two().max(1);
        let mut node = vec![None; 2 * size];
        for (i, v) in values.enumerate() {
            node[size + i] = Some(v);
        }
        for i in (1..size).rev() {
            node[i] = node[2 * i].max(node[2 * i + 1]);
        }
        Self { size, node }
    }

    /// Some live index below `limit` whose value is at least `at`.
    fn find(&self, limit: usize, at: usize) -> Option<usize> {
        self.find_in(1, 0, self.size, limit, at)
    }

    fn find_in(&self, i: usize, lo: usize, hi: usize, limit: usize, at: usize) -> Option<usize> {
        if lo >= limit || self.node[i].is_none_or(|v| v < at) {
            return None;
        }
        if hi - lo == 1 {
            return Some(lo);
        }
        let mid = (lo + hi) / 2;
        self.find_in(2 * i, lo, mid, limit, at)
            .or_else(|| self.find_in(2 * i + 1, mid, hi, limit, at))
    }

    fn kill(&mut self, index: usize) {
        let mut i = self.size + index;
        self.node[i] = None;
        while i > 1 {
            i /= 2;
            self.node[i] = self.node[2 * i].max(self.node[2 * i + 1]);
        }
    }
}

impl SummarizingPolicy {
    /// The target for `span`, if it qualifies: long enough, and its summary would be smaller.
    fn target_for(&self, estimate: &impl Fn(usize) -> u64, span: &Range<usize>) -> Option<u64> {
        if span.len() < self.min_span_turns {
            return None;
        }
        let tokens: u64 = span.clone().map(estimate).sum();
        let target = summary_target(tokens, self.target_ratio);
        (target < tokens).then_some(target)
    }

    /// The span of `shape` to summarize and its target, if any.
    ///
    /// The reference's spans are taken oldest first. One that qualifies but is not closed (an
    /// exchange reaches across its edge, which happens when a pinned turn cuts a run between
    /// a call and its result) would make the reference fail with a split exchange; here it is
    /// refined into the closed spans it contains, and those are tried in turn. Whenever the
    /// reference produces a plan, this chooses the same span.
    ///
    fn choose(&self, shape: &Shape<'_>) -> Option<(Range<usize>, u64)> {
        let analysis = shape.analysis();
        if shape.total() <= shape.budget().max_tokens {
            return None;
        }
        let estimates = shape.estimates();
        let estimate = |p: usize| estimates[p];
        for span in spans(analysis) {
            let Some(target) = self.target_for(&estimate, &span) else {
                continue;
            };
            if closed(&span, analysis) {
                return Some((span, target));
            }
            for piece in refine(&span, analysis) {
                if let Some(target) = self.target_for(&estimate, &piece) {
                    return Some((piece, target));
                }
            }
        }
        None
    }
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
        self.decide_with_analysis(t, &Analysis::of(t, b))
    }

    fn decide_with_analysis(
        &self,
        t: &Transcript,
        analysis: &Analysis,
    ) -> Result<CompactionPlan, CompactionError> {
        analysis.require_satisfiable()?;
        let shape = Shape::with_total(t.token_estimates(), t.token_estimate(), analysis)?;
        let ids = t.turn_id_arcs();
        let Some((span, target)) = self.choose(&shape) else {
            let actions = ids.iter().map(|id| TurnAction::keep(id.clone())).collect();
            return build_plan(
                t,
                analysis,
                Decisions::actions(actions),
                Self::NAME,
                POLICY_VERSION,
            );
        };
        let group_id: Arc<str> = group_id_for(&ids[span.clone()]).into();
        // One pass: a turn is summarized exactly when it lies in the span.
        let actions = ids
            .iter()
            .enumerate()
            .map(|(p, id)| {
                let id = id.clone();
                if span.contains(&p) {
                    TurnAction::summarize(id, group_id.clone())
                } else {
                    TurnAction::keep(id)
                }
            })
            .collect();
        let requests = vec![SummarizationRequest::for_span(
            group_id,
            t,
            span,
            target,
            self.prompt_id.clone(),
        )?];
        let decisions = Decisions {
            actions,
            summarization_requests: requests,
            estimator_ratio: None,
        };
        build_plan(t, analysis, decisions, Self::NAME, POLICY_VERSION)
    }

    fn reads(&self) -> Reads {
        Reads::Shape
    }

    fn decide_shape(&self, shape: &Shape<'_>) -> Option<Result<ShapeDecision, CompactionError>> {
        let decision = shape.analysis().require_satisfiable().map(|()| {
            self.choose(shape)
                .map_or(ShapeDecision::Nothing, |(span, target_tokens)| {
                    ShapeDecision::Summarize {
                        span,
                        target_tokens,
                        prompt_id: self.prompt_id.clone(),
                    }
                })
        });
        Some(decision)
    }
}

/// `span-` and the first 16 hex digits of `sha256_of` of the ids joined by U+0000.
pub(crate) fn group_id_for<S: AsRef<str>>(ids: impl IntoIterator<Item = S>) -> String {
    let digest = sha256_of_joined(ids, "\u{0}");
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
