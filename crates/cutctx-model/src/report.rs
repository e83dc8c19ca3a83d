//! The report of an applied plan, and the view it comes with.

use std::sync::Arc;

use cutctx_json::{Style, Writer};
use serde::{Deserialize, Serialize};

use crate::Transcript;
use crate::canonical::write_opt_ratio;

/// What applying a plan did: the body of the `context.compacted` event.
///
/// Every figure is copied from the plan; nothing is computed by the report itself, and there
/// is no timestamp.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CompactionReport {
    // Fields in code point order: the canonical writer relies on it.
    /// Copied from the plan.
    pub budget_unmet: bool,
    /// Dropped turns, in transcript order.
    pub dropped_turn_ids: Vec<Arc<str>>,
    /// Copied from the plan.
    pub estimator_ratio: Option<f64>,
    /// Kept turns, in transcript order.
    pub kept_turn_ids: Vec<Arc<str>>,
    /// Masked turns, in transcript order.
    pub masked_turn_ids: Vec<Arc<str>>,
    /// The applied plan's hash.
    pub plan_hash: String,
    /// Copied from the plan.
    pub policy_name: String,
    /// Copied from the plan.
    pub policy_version: String,
    /// Summarized turns, in transcript order.
    pub summarized_turn_ids: Vec<Arc<str>>,
    /// The summary turns, in the order they appear in the view.
    pub summary_turn_ids: Vec<String>,
    /// Copied from the plan.
    pub tokens_after_estimate: u64,
    /// Copied from the plan.
    pub tokens_before: u64,
    /// The number of view turns, summary turns included.
    pub turns_after: u64,
    /// The number of input turns.
    pub turns_before: u64,
}

impl CompactionReport {
    /// The report's canonical JSON, without a trailing newline.
    #[must_use]
    pub fn canonical_json(&self) -> String {
        let mut out = String::with_capacity(self.canonical_len_hint());
        self.write_canonical_into(&mut out);
        out
    }

    /// About the length of [`CompactionReport::canonical_json`], to size a buffer once.
    #[must_use]
    pub fn canonical_len_hint(&self) -> usize {
        let ids = |v: &[Arc<str>]| v.iter().map(|s| s.len() + 3).sum::<usize>();
        512 + ids(&self.kept_turn_ids)
            + ids(&self.masked_turn_ids)
            + ids(&self.summarized_turn_ids)
            + ids(&self.dropped_turn_ids)
    }

    /// Appends [`CompactionReport::canonical_json`] to `out`, so that a caller assembling a
    /// larger document writes it in place instead of copying it there.
    pub fn write_canonical_into(&self, out: &mut String) {
        self.write_canonical_before_hash(out);
        self.write_canonical_from_hash(out);
    }

    /// [`CompactionReport::canonical_json`] up to its `plan_hash` value (the key written, the
    /// value not): most of the report, its lists of ids, written before the hash is known.
    /// [`CompactionReport::write_canonical_from_hash`] writes the rest.
    ///
    /// ```
    /// use cutctx_model::CompactionReport;
    /// let mut report = CompactionReport {
    ///     budget_unmet: false,
    ///     dropped_turn_ids: vec!["a".into()],
    ///     estimator_ratio: None,
    ///     kept_turn_ids: vec!["b".into()],
    ///     masked_turn_ids: vec![],
    ///     plan_hash: String::new(),
    ///     policy_name: "drop_oldest".into(),
    ///     policy_version: "1".into(),
    ///     summarized_turn_ids: vec![],
    ///     summary_turn_ids: vec![],
    ///     tokens_after_estimate: 5,
    ///     tokens_before: 9,
    ///     turns_after: 1,
    ///     turns_before: 2,
    /// };
    /// let mut text = String::new();
    /// report.write_canonical_before_hash(&mut text);
    /// report.plan_hash = "ab".repeat(32);
    /// report.write_canonical_from_hash(&mut text);
    /// assert_eq!(text, report.canonical_json());
    /// ```
    pub fn write_canonical_before_hash(&self, out: &mut String) {
        let w = &mut Writer::new(out, Style::CANONICAL);
        w.raw("{\"budget_unmet\":");
        w.bool(self.budget_unmet);
        w.raw(",\"dropped_turn_ids\":");
        w.str_list(self.dropped_turn_ids.iter().map(|s| &**s));
        w.raw(",\"estimator_ratio\":");
        write_opt_ratio(w, self.estimator_ratio);
        w.raw(",\"kept_turn_ids\":");
        w.str_list(self.kept_turn_ids.iter().map(|s| &**s));
        w.raw(",\"masked_turn_ids\":");
        w.str_list(self.masked_turn_ids.iter().map(|s| &**s));
        w.raw(",\"plan_hash\":");
    }

    /// [`CompactionReport::canonical_json`] from its `plan_hash` value on (see
    /// [`CompactionReport::write_canonical_before_hash`]).
    pub fn write_canonical_from_hash(&self, out: &mut String) {
        let w = &mut Writer::new(out, Style::CANONICAL);
        w.str(&self.plan_hash);
        w.raw(",\"policy_name\":");
        w.str(&self.policy_name);
        w.raw(",\"policy_version\":");
        w.str(&self.policy_version);
        w.raw(",\"summarized_turn_ids\":");
        w.str_list(self.summarized_turn_ids.iter().map(|s| &**s));
        w.raw(",\"summary_turn_ids\":");
        w.str_list(self.summary_turn_ids.iter().map(String::as_str));
        w.raw(",\"tokens_after_estimate\":");
        w.u64(self.tokens_after_estimate);
        w.raw(",\"tokens_before\":");
        w.u64(self.tokens_before);
        w.raw(",\"turns_after\":");
        w.u64(self.turns_after);
        w.raw(",\"turns_before\":");
        w.u64(self.turns_before);
        w.raw("}");
    }
}

/// The result of applying a plan: the new view and the report of what was done.
#[derive(Debug, Clone, PartialEq)]
pub struct CompactedTranscript {
    /// The view.
    pub transcript: Transcript,
    /// The report.
    pub report: CompactionReport,
}
