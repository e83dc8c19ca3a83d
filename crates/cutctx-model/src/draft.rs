//! A plan as proposed, and its canonical bytes and hash.

use cutctx_json::{Sink, Style, Writer};
use serde::{Deserialize, Serialize};

use crate::action::What;
use crate::canonical::write_opt_ratio;
use crate::hash_sink::HashSink;
use crate::{SummarizationRequest, TurnAction};

/// A plan as proposed: its parts, not yet checked against any transcript.
///
/// A draft is what a policy assembles and what a stored plan file parses to. It cannot be
/// applied: `cutctx-invariants` turns a draft into a `CompactionPlan` only after checking it
/// against the transcript and budget by every rule.
///
/// Its serialized form is the plan's: the same keys, the same bytes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlanDraft {
    // Fields in code point order: the canonical writer relies on it.
    /// One action per turn, in transcript order.
    pub actions: Vec<TurnAction>,
    /// Whether the estimate after exceeds the budget.
    pub budget_unmet: bool,
    /// The character ratio of the default estimator, when it produced a figure in this plan.
    pub estimator_ratio: Option<f64>,
    /// The deciding policy's name.
    pub policy_name: String,
    /// The deciding policy's version.
    pub policy_version: String,
    /// The summaries the caller must supply, ordered by each group's first turn.
    #[serde(default)]
    pub summarization_requests: Vec<SummarizationRequest>,
    /// The estimate of the view the actions produce.
    pub tokens_after_estimate: u64,
    /// The transcript's total estimate.
    pub tokens_before: u64,
}

impl crate::hash_sink::WritesCanonical for PlanDraft {
    fn write_canonical<S: Sink>(&self, out: &mut S) {
        self.write(out);
    }
}

impl PlanDraft {
    /// The plan's canonical JSON, without a trailing newline: the reference's golden bytes.
    #[must_use]
    pub fn canonical_json(&self) -> String {
        let mut out = String::with_capacity(self.canonical_len_hint());
        self.write(&mut out);
        out
    }

    /// Appends [`PlanDraft::canonical_json`] to `out`, so that a caller assembling a larger
    /// document writes it in place instead of copying it there.
    pub fn write_canonical_into(&self, out: &mut String) {
        self.write(out);
    }

    /// Writes [`PlanDraft::canonical_json`] into any [`Sink`]: for a caller that hands the
    /// text on (to a hasher, to an output) as it is written.
    ///
    /// ```
    /// use cutctx_model::PlanDraft;
    /// let draft = PlanDraft {
    ///     actions: vec![],
    ///     budget_unmet: false,
    ///     estimator_ratio: None,
    ///     policy_name: "p".into(),
    ///     policy_version: "1".into(),
    ///     summarization_requests: vec![],
    ///     tokens_after_estimate: 0,
    ///     tokens_before: 0,
    /// };
    /// let mut bytes = Vec::new();
    /// draft.write_canonical_to(&mut bytes);
    /// assert_eq!(bytes, draft.canonical_json().into_bytes());
    /// ```
    pub fn write_canonical_to<S: Sink>(&self, out: &mut S) {
        self.write(out);
    }

    /// About the length of [`PlanDraft::canonical_json`], to size a buffer once.
    ///
    /// Text is counted with an eighth more for escapes: a buffer a little too large costs
    /// nothing until written, one too small is copied whole when it grows.
    #[must_use]
    pub fn canonical_len_hint(&self) -> usize {
        let text = |s: &str| s.len() + s.len() / 8 + 2;
        let actions: usize = self
            .actions
            .iter()
            .map(|a| {
                80 + text(&a.turn_id)
                    + match &a.what {
                        What::Keep | What::Drop => 0,
                        What::Mask(r) => 64 + text(&r.content),
                        What::Summarize(g) => text(g),
                    }
            })
            .sum();
        let requests: usize = self
            .summarization_requests
            .iter()
            .map(|r| {
                96 + text(r.group_id())
                    + text(r.prompt_id())
                    + r.turn_ids().iter().map(|id| text(id) + 1).sum::<usize>()
            })
            .sum();
        256 + text(&self.policy_name) + text(&self.policy_version) + actions + requests
    }

    /// The lower-case SHA-256 hex of [`PlanDraft::canonical_json`], streamed into the hasher
    /// without building the text.
    #[must_use]
    pub fn plan_hash(&self) -> String {
        self.plan_hash_with(crate::Parallelism::Automatic)
    }

    /// As [`PlanDraft::plan_hash`], starting no thread when `parallelism` allows only one.
    /// The hash is the same.
    ///
    /// ```
    /// use cutctx_model::{Parallelism, PlanDraft};
    /// let draft = PlanDraft {
    ///     actions: vec![],
    ///     budget_unmet: false,
    ///     estimator_ratio: None,
    ///     policy_name: "p".into(),
    ///     policy_version: "1".into(),
    ///     summarization_requests: vec![],
    ///     tokens_after_estimate: 0,
    ///     tokens_before: 0,
    /// };
    /// assert_eq!(draft.plan_hash_with(Parallelism::Sequential), draft.plan_hash());
    /// ```
    #[must_use]
    pub fn plan_hash_with(&self, parallelism: crate::Parallelism) -> String {
        // Writing a large plan costs about half as much as hashing it: on two cores, one
        // writes while the other hashes what is written.
        const PIPELINED_ACTIONS: usize = 20_000;
        if self.actions.len() >= PIPELINED_ACTIONS && parallelism.threads() > 1 {
            crate::hash_sink::hash_pipelined(self)
        } else {
            let mut sink = HashSink::on_heap();
            self.write(&mut sink);
            sink.finish_hex()
        }
    }

    fn write<S: Sink>(&self, out: &mut S) {
        self.write_canonical_opening(out);
        self.write_canonical_actions(0..self.actions.len(), out);
        self.write_canonical_closing(out);
    }

    /// [`PlanDraft::canonical_json`]'s first part, up to its first action: with
    /// [`PlanDraft::write_canonical_actions`] and [`PlanDraft::write_canonical_closing`], for a
    /// writer that writes the actions in blocks, on more than one thread.
    ///
    /// ```
    /// use cutctx_model::{PlanDraft, TurnAction};
    /// let draft = PlanDraft {
    ///     actions: vec![TurnAction::keep("a"), TurnAction::drop_turn("b"), TurnAction::keep("c")],
    ///     budget_unmet: false,
    ///     estimator_ratio: None,
    ///     policy_name: "p".into(),
    ///     policy_version: "1".into(),
    ///     summarization_requests: vec![],
    ///     tokens_after_estimate: 0,
    ///     tokens_before: 0,
    /// };
    /// let (mut first, mut rest) = (String::new(), String::new());
    /// draft.write_canonical_opening(&mut first);
    /// draft.write_canonical_actions(0..1, &mut first);
    /// draft.write_canonical_actions(1..3, &mut rest);
    /// draft.write_canonical_closing(&mut rest);
    /// assert_eq!(first + &rest, draft.canonical_json());
    /// ```
    pub fn write_canonical_opening<S: Sink>(&self, out: &mut S) {
        Writer::new(out, Style::CANONICAL).raw("{\"actions\":[");
    }

    /// The actions at positions `range` of [`PlanDraft::canonical_json`], each after the
    /// separator that precedes it there (none before the first action): the writings of
    /// adjacent ranges join. A range past the actions is a caller's defect; what lies in it
    /// is written.
    pub fn write_canonical_actions<S: Sink>(&self, range: std::ops::Range<usize>, out: &mut S) {
        let from = range.start;
        let actions = self
            .actions
            .get(range)
            .expect("the range is one of the plan's actions");
        let w = &mut Writer::new(out, Style::CANONICAL);
        for (i, a) in (from..).zip(actions) {
            if i > 0 {
                w.item_separator();
            }
            match &a.what {
                // The common cases in one piece.
                What::Keep => w.raw(
                    "{\"action\":\"keep\",\"replacement\":null,\"summary_group\":null,\"turn_id\":",
                ),
                What::Drop => w.raw(
                    "{\"action\":\"drop\",\"replacement\":null,\"summary_group\":null,\"turn_id\":",
                ),
                What::Mask(r) => {
                    w.raw("{\"action\":\"mask\",\"replacement\":{\"content\":");
                    w.str(&r.content);
                    w.raw(",\"token_estimate\":");
                    w.u64(r.token_estimate);
                    w.raw("},\"summary_group\":null,\"turn_id\":");
                }
                What::Summarize(g) => {
                    w.raw("{\"action\":\"summarize\",\"replacement\":null,\"summary_group\":");
                    w.str(g);
                    w.raw(",\"turn_id\":");
                }
            }
            w.str(&a.turn_id);
            w.raw("}");
        }
    }

    /// [`PlanDraft::canonical_json`]'s last part, after its last action (see
    /// [`PlanDraft::write_canonical_opening`]).
    pub fn write_canonical_closing<S: Sink>(&self, out: &mut S) {
        let w = &mut Writer::new(out, Style::CANONICAL);
        w.raw("],\"budget_unmet\":");
        w.bool(self.budget_unmet);
        w.raw(",\"estimator_ratio\":");
        write_opt_ratio(w, self.estimator_ratio);
        w.raw(",\"policy_name\":");
        w.str(&self.policy_name);
        w.raw(",\"policy_version\":");
        w.str(&self.policy_version);
        w.raw(",\"summarization_requests\":[");
        for (i, r) in self.summarization_requests.iter().enumerate() {
            if i > 0 {
                w.item_separator();
            }
            w.raw("{\"group_id\":");
            w.str(r.group_id());
            w.raw(",\"prompt_id\":");
            w.str(r.prompt_id());
            w.raw(",\"target_tokens\":");
            w.u64(r.target_tokens());
            w.raw(",\"turn_ids\":");
            w.str_list(r.turn_ids().iter().map(|s| &**s));
            w.raw("}");
        }
        w.raw("],\"tokens_after_estimate\":");
        w.u64(self.tokens_after_estimate);
        w.raw(",\"tokens_before\":");
        w.u64(self.tokens_before);
        w.raw("}");
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::canonical::canonical_json;
    use crate::{CompactionReport, Transcript, TurnReplacement};

    fn sample_draft() -> PlanDraft {
        PlanDraft {
            actions: vec![
                TurnAction::keep("s1"),
                TurnAction::mask(
                    "t1",
                    TurnReplacement {
                        content: "stub".into(),
                        token_estimate: 1,
                    },
                ),
                TurnAction::summarize("u1", "g".into()),
                TurnAction::drop_turn("u2"),
            ],
            budget_unmet: false,
            estimator_ratio: Some(4.0),
            policy_name: "p".into(),
            policy_version: "1.0.0".into(),
            summarization_requests: vec![
                SummarizationRequest::new("g", vec!["u1".into()], 3, "pid").expect("valid"),
            ],
            tokens_after_estimate: 5,
            tokens_before: 9,
        }
    }

    #[test]
    fn the_plan_written_in_parts_split_anywhere_is_its_canonical_json() {
        let draft = sample_draft();
        let n = draft.actions.len();
        assert!(n >= 2, "a split between actions is tested");
        for k in 0..=n {
            let mut text = String::new();
            draft.write_canonical_opening(&mut text);
            draft.write_canonical_actions(0..k, &mut text);
            let mut rest = String::new();
            draft.write_canonical_actions(k..n, &mut rest);
            draft.write_canonical_closing(&mut rest);
            assert_eq!(text + &rest, draft.canonical_json(), "split at {k}");
        }
    }

    #[test]
    fn fast_writer_equals_sorted_writer_for_plans_and_reports() {
        let d = sample_draft();
        assert_eq!(d.canonical_json(), canonical_json(&d).expect("plan"));
        let r = CompactionReport {
            budget_unmet: true,
            dropped_turn_ids: vec!["u2".into()],
            estimator_ratio: None,
            kept_turn_ids: vec!["s1".into()],
            masked_turn_ids: vec!["t1".into()],
            plan_hash: d.plan_hash(),
            policy_name: "p".into(),
            policy_version: "1.0.0".into(),
            summarized_turn_ids: vec!["u1".into()],
            summary_turn_ids: vec!["summary:g".into()],
            tokens_after_estimate: 5,
            tokens_before: 9,
            turns_after: 3,
            turns_before: 4,
        };
        assert_eq!(r.canonical_json(), canonical_json(&r).expect("report"));
    }

    #[test]
    fn python_float_repr_of_estimator_ratio_and_null_fields() {
        let j = sample_draft().canonical_json();
        assert!(j.contains(r#""estimator_ratio":4.0"#), "{j}");
        assert!(
            j.contains(
                r#"{"action":"keep","replacement":null,"summary_group":null,"turn_id":"s1"}"#
            ),
            "{j}"
        );
    }

    proptest::proptest! {
        /// The hand-written writer and the serde path agree on every string and float.
        #[test]
        fn fast_writer_equals_serde_canonical_form(
            ids in proptest::collection::vec(".{1,12}", 1..6),
            text in ".{0,40}",
            ratio in proptest::option::of(proptest::num::f64::NORMAL | proptest::num::f64::SUBNORMAL | proptest::num::f64::ZERO),
            n in proptest::num::u64::ANY,
            meta in proptest::collection::btree_map(".{0,6}", ".{0,6}", 0..3),
        ) {
            let mut ids = ids;
            ids.sort();
            ids.dedup();
            let group: Arc<str> = Arc::from(text.as_str());
            let mut actions: Vec<TurnAction> = Vec::new();
            for (i, id) in ids.iter().enumerate() {
                actions.push(match i % 4 {
                    0 => TurnAction::keep(id.as_str()),
                    1 => TurnAction::mask(id.as_str(), TurnReplacement { content: text.as_str().into(), token_estimate: n }),
                    2 => TurnAction::summarize(id.as_str(), group.clone()),
                    _ => TurnAction::drop_turn(id.as_str()),
                });
            }
            let d = PlanDraft {
                actions,
                budget_unmet: n % 2 == 0,
                estimator_ratio: ratio,
                policy_name: text.clone(),
                policy_version: "1.0.0".into(),
                summarization_requests: vec![SummarizationRequest::new(
                    "g", ids.iter().map(|s| Arc::from(s.as_str())).collect(), n, text.as_str().to_owned() + "p",
                ).expect("valid")],
                tokens_after_estimate: n,
                tokens_before: n / 3,
            };
            proptest::prop_assert_eq!(d.canonical_json(), canonical_json(&d).expect("plan"));
            let turns: Vec<crate::TranscriptTurn> = ids
                .iter()
                .map(|id| {
                    crate::TranscriptTurn::new(id.as_str(), crate::Role::Tool, text.as_str(), n / 8)
                        .expect("valid")
                        .with_tool_call_id(text.as_str())
                        .with_metadata(Arc::new(meta.clone()))
                })
                .collect();
            let t = Transcript::new(turns.clone()).expect("unique");
            proptest::prop_assert_eq!(t.canonical_json(), canonical_json(&turns).expect("turns"));
        }
    }

    #[test]
    fn streamed_plan_hash_equals_hash_of_canonical_bytes() {
        let d = sample_draft();
        assert_eq!(
            d.plan_hash(),
            crate::canonical::sha256_hex(d.canonical_json().as_bytes())
        );
    }

    #[test]
    fn pipelined_plan_hash_of_a_large_plan_equals_hash_of_canonical_bytes() {
        // Above the threshold the plan is written on one thread and hashed on another, in
        // blocks; every kind of action, and escapes, cross the block boundaries.
        let group: Arc<str> = Arc::from("g");
        let actions: Vec<TurnAction> = (0..30_000)
            .map(|i| match i % 4 {
                0 => TurnAction::keep(format!("k{i}")),
                1 => TurnAction::drop_turn(format!("d{i}")),
                2 => TurnAction::mask(
                    format!("m{i}"),
                    TurnReplacement {
                        content: Arc::from(format!("[masked \"{i}\"]\n").as_str()),
                        token_estimate: i,
                    },
                ),
                _ => TurnAction::summarize(format!("s{i}"), group.clone()),
            })
            .collect();
        let d = PlanDraft {
            actions,
            ..sample_draft()
        };
        assert_eq!(
            d.plan_hash(),
            crate::canonical::sha256_hex(d.canonical_json().as_bytes())
        );
    }

    #[test]
    fn draft_round_trips_through_json() {
        let d = sample_draft();
        let back: PlanDraft = serde_json::from_str(&d.canonical_json()).expect("parses");
        assert_eq!(back, d);
        assert_eq!(back.plan_hash(), d.plan_hash());
    }
}
