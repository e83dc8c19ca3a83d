//! The pieces of a plan, the plan's unvalidated form, and the report of an applied plan.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use cutctx_json::{Sink, Style, Writer};

use crate::canonical::write_opt_ratio;
use crate::hash_sink::HashSink;
use crate::{CompactionError, SUMMARY_TURN_ID_PREFIX, Transcript, details, py_repr_str};

/// What a plan does to one turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    /// The turn stays as it is.
    Keep,
    /// A tool result is replaced by a stub carrying its digest; the turn stays in place.
    Mask,
    /// The turn is folded into a summary the caller writes.
    Summarize,
    /// The turn leaves the view.
    Drop,
}

impl Action {
    /// The wire value: `"keep"`, `"mask"`, `"summarize"` or `"drop"`.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Keep => "keep",
            Self::Mask => "mask",
            Self::Summarize => "summarize",
            Self::Drop => "drop",
        }
    }

    /// Whether the action takes the turn out of the view (`drop` and `summarize`).
    #[must_use]
    pub const fn is_removal(self) -> bool {
        matches!(self, Self::Drop | Self::Summarize)
    }
}

impl<'de> Deserialize<'de> for Action {
    /// Only the four strings: a derived enum would also take `{"keep": null}`.
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = crate::wire::WireStr::deserialize(d)?.0;
        match s.as_str() {
            "keep" => Ok(Self::Keep),
            "mask" => Ok(Self::Mask),
            "summarize" => Ok(Self::Summarize),
            "drop" => Ok(Self::Drop),
            _ => Err(serde::de::Error::custom(
                "action must be one of \"keep\", \"mask\", \"summarize\", \"drop\"",
            )),
        }
    }
}

/// The stub that replaces a masked turn: its new content and estimate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TurnReplacement {
    // Fields in code point order: the canonical writer relies on it.
    /// The stub text.
    pub content: Arc<str>,
    /// The stub's estimate.
    pub token_estimate: u64,
}

/// One turn's action. `summary_group` is set exactly for `summarize`, `replacement` exactly
/// for `mask`; the constructors enforce it.
///
/// ```
/// use cutctx_model::{Action, TurnAction};
/// assert!(TurnAction::keep("a").summary_group().is_none());
/// assert!(TurnAction::new("a", Action::Summarize, None, None).is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(try_from = "crate::wire::ObjectOnly<TurnActionRecord>")]
pub struct TurnAction {
    what: What,
    turn_id: Arc<str>,
}

/// The action with what only it carries: one field where the wire has three, so that a plan
/// of a hundred thousand actions is a quarter smaller in memory.
#[derive(Debug, Clone, PartialEq, Eq)]
enum What {
    Keep,
    Drop,
    Mask(TurnReplacement),
    Summarize(Arc<str>),
}

impl Serialize for TurnAction {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        // Keys in code point order, as the canonical form wants them.
        let mut st = serializer.serialize_struct("TurnAction", 4)?;
        st.serialize_field("action", &self.action())?;
        st.serialize_field("replacement", &self.replacement())?;
        st.serialize_field("summary_group", &self.summary_group())?;
        st.serialize_field("turn_id", &*self.turn_id)?;
        st.end()
    }
}

impl TurnAction {
    /// An action, checked.
    ///
    /// # Errors
    ///
    /// `VALIDATION_ERROR` when `summary_group` is not set exactly for `summarize`, or
    /// `replacement` not exactly for `mask` (details: `turn_id`, `action`).
    pub fn new(
        turn_id: impl Into<Arc<str>>,
        action: Action,
        summary_group: Option<Arc<str>>,
        replacement: Option<TurnReplacement>,
    ) -> Result<Self, CompactionError> {
        let turn_id = turn_id.into();
        if summary_group.is_some() != (action == Action::Summarize) {
            return Err(CompactionError::validation(
                format!(
                    "summary_group is set exactly when the action is summarize; turn {} has \
                     action {} and summary_group={}.",
                    py_repr_str(&turn_id),
                    py_repr_str(action.as_str()),
                    summary_group
                        .as_deref()
                        .map_or_else(|| "None".to_owned(), py_repr_str),
                ),
                details! { "turn_id" => &*turn_id, "action" => action.as_str() },
            ));
        }
        if replacement.is_some() != (action == Action::Mask) {
            return Err(CompactionError::validation(
                format!(
                    "replacement is set exactly when the action is mask; turn {} has action {} \
                     and {}.",
                    py_repr_str(&turn_id),
                    py_repr_str(action.as_str()),
                    if replacement.is_some() {
                        "a replacement"
                    } else {
                        "none"
                    },
                ),
                details! { "turn_id" => &*turn_id, "action" => action.as_str() },
            ));
        }
        let what = match (action, replacement, summary_group) {
            (Action::Mask, Some(r), _) => What::Mask(r),
            (Action::Summarize, _, Some(g)) => What::Summarize(g),
            (Action::Drop, _, _) => What::Drop,
            // Keep, and the pairs refused above.
            _ => What::Keep,
        };
        Ok(Self { what, turn_id })
    }

    /// `keep` for this turn.
    #[must_use]
    pub fn keep(turn_id: impl Into<Arc<str>>) -> Self {
        Self {
            what: What::Keep,
            turn_id: turn_id.into(),
        }
    }

    /// `drop` for this turn.
    #[must_use]
    pub fn drop_turn(turn_id: impl Into<Arc<str>>) -> Self {
        Self {
            what: What::Drop,
            turn_id: turn_id.into(),
        }
    }

    /// `mask` for this turn, with its stub.
    #[must_use]
    pub fn mask(turn_id: impl Into<Arc<str>>, replacement: TurnReplacement) -> Self {
        Self {
            what: What::Mask(replacement),
            turn_id: turn_id.into(),
        }
    }

    /// `summarize` for this turn, into `group`.
    #[must_use]
    pub fn summarize(turn_id: impl Into<Arc<str>>, group: Arc<str>) -> Self {
        Self {
            what: What::Summarize(group),
            turn_id: turn_id.into(),
        }
    }

    /// The turn acted on.
    #[must_use]
    pub fn turn_id(&self) -> &str {
        &self.turn_id
    }

    /// The turn's id as a shared string.
    #[must_use]
    pub const fn turn_id_arc(&self) -> &Arc<str> {
        &self.turn_id
    }

    /// Whether this action names `turn`: a pointer comparison when the action was built from
    /// the turn's own id, a string comparison otherwise.
    #[must_use]
    pub fn names(&self, turn: &crate::TranscriptTurn) -> bool {
        self.names_id(turn.turn_id_arc())
    }

    /// Whether this action names the turn whose id is `id`, compared as [`TurnAction::names`]
    /// does.
    #[must_use]
    pub fn names_id(&self, id: &Arc<str>) -> bool {
        Arc::ptr_eq(&self.turn_id, id) || *self.turn_id == **id
    }

    /// The action.
    #[must_use]
    pub const fn action(&self) -> Action {
        match self.what {
            What::Keep => Action::Keep,
            What::Drop => Action::Drop,
            What::Mask(_) => Action::Mask,
            What::Summarize(_) => Action::Summarize,
        }
    }

    /// The group, for `summarize`.
    #[must_use]
    pub fn summary_group(&self) -> Option<&str> {
        self.summary_group_arc().map(|g| &**g)
    }

    /// The group as a shared string, for `summarize`.
    #[must_use]
    pub const fn summary_group_arc(&self) -> Option<&Arc<str>> {
        match &self.what {
            What::Summarize(g) => Some(g),
            _ => None,
        }
    }

    /// Whether two actions name the same summary group (or both none): by pointer first, as
    /// one policy's actions share one group string.
    #[must_use]
    pub fn same_group(&self, other: &Self) -> bool {
        match (self.summary_group_arc(), other.summary_group_arc()) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b) || a == b,
            (None, None) => true,
            _ => false,
        }
    }

    /// The stub, for `mask`.
    #[must_use]
    pub const fn replacement(&self) -> Option<&TurnReplacement> {
        match &self.what {
            What::Mask(r) => Some(r),
            _ => None,
        }
    }
}

/// The wire form of a [`TurnAction`]: all four keys, absent values as `null`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TurnActionRecord {
    /// The turn.
    pub turn_id: String,
    /// The action.
    pub action: Action,
    /// The group, for `summarize`.
    #[serde(default)]
    pub summary_group: Option<String>,
    /// The stub, for `mask`.
    #[serde(default)]
    pub replacement: Option<crate::wire::ObjectOnly<TurnReplacement>>,
}

impl TryFrom<crate::wire::ObjectOnly<TurnActionRecord>> for TurnAction {
    type Error = CompactionError;

    fn try_from(r: crate::wire::ObjectOnly<TurnActionRecord>) -> Result<Self, Self::Error> {
        let r = r.0;
        Self::new(
            r.turn_id,
            r.action,
            r.summary_group.map(Arc::from),
            r.replacement.map(|o| o.0),
        )
    }
}

/// A request the caller fulfils with its own model: fold these turns into about
/// `target_tokens` tokens, using the prompt named `prompt_id`.
///
/// ```
/// use cutctx_model::SummarizationRequest;
/// let r = SummarizationRequest::new("g", vec!["a".into(), "b".into()], 7, "p.v1")?;
/// assert_eq!(r.summary_turn_id(), "summary:g");
/// # Ok::<(), cutctx_model::CompactionError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "crate::wire::ObjectOnly<SummarizationRequestRecord>")]
pub struct SummarizationRequest {
    // Fields in code point order: the canonical writer relies on it.
    group_id: Arc<str>,
    prompt_id: Arc<str>,
    target_tokens: u64,
    turn_ids: Vec<Arc<str>>,
}

/// The error for a request whose positions are not increasing or not in the transcript.
fn positions_outside(group_id: &str) -> CompactionError {
    CompactionError::validation(
        format!(
            "Summarization request {} names positions that are not increasing or not in the \
             transcript.",
            py_repr_str(group_id)
        ),
        details! { "group_id" => group_id },
    )
}

impl SummarizationRequest {
    /// A request, checked as the reference checks it, in the same order.
    ///
    /// # Errors
    ///
    /// `VALIDATION_ERROR` for an empty `group_id`, an empty `prompt_id`, no turns, or a
    /// repeated turn id (details: `group_id` where there is one).
    pub fn new(
        group_id: impl Into<Arc<str>>,
        turn_ids: Vec<Arc<str>>,
        target_tokens: u64,
        prompt_id: impl Into<Arc<str>>,
    ) -> Result<Self, CompactionError> {
        let group_id = group_id.into();
        let prompt_id = prompt_id.into();
        if group_id.is_empty() {
            return Err(CompactionError::validation(
                "A summarization request needs a non-empty group_id: the plan, the missing-summary \
                 error and the summary turn's id all name it.",
                details! {},
            ));
        }
        let gid = py_repr_str(&group_id);
        if prompt_id.is_empty() {
            return Err(CompactionError::validation(
                format!(
                    "Summarization request {gid} needs a prompt_id naming a versioned prompt \
                     record; cutctx carries no prompt text."
                ),
                details! { "group_id" => &*group_id },
            ));
        }
        if turn_ids.is_empty() {
            return Err(CompactionError::validation(
                format!("Summarization request {gid} covers no turns; it would fold nothing."),
                details! { "group_id" => &*group_id },
            ));
        }
        let mut sorted: Vec<&str> = turn_ids.iter().map(|t| &**t).collect();
        sorted.sort_unstable();
        if sorted.windows(2).any(|w| w[0] == w[1]) {
            return Err(CompactionError::validation(
                format!("Summarization request {gid} repeats a turn id."),
                details! { "group_id" => &*group_id },
            ));
        }
        Ok(Self {
            group_id,
            prompt_id,
            target_tokens,
            turn_ids,
        })
    }

    /// A request for the turns at `positions` of `transcript`, which must be strictly
    /// increasing: their ids are then distinct without being compared, so this is `O(k)`.
    ///
    /// # Errors
    ///
    /// As [`SummarizationRequest::new`], and `VALIDATION_ERROR` when a position is out of range
    /// or not increasing.
    pub fn for_positions(
        group_id: impl Into<Arc<str>>,
        transcript: &Transcript,
        positions: &[usize],
        target_tokens: u64,
        prompt_id: impl Into<Arc<str>>,
    ) -> Result<Self, CompactionError> {
        let group_id = group_id.into();
        let prompt_id = prompt_id.into();
        let ids = transcript.turn_id_arcs();
        let increasing = positions.windows(2).all(|w| w[0] < w[1]);
        if !increasing || positions.last().is_some_and(|&p| p >= ids.len()) {
            return Err(positions_outside(&group_id));
        }
        // Checks 1-3 of `new` on an empty list, which cannot repeat an id.
        if group_id.is_empty() || prompt_id.is_empty() || positions.is_empty() {
            return Self::new(group_id, Vec::new(), target_tokens, prompt_id);
        }
        let turn_ids = positions.iter().map(|&p| ids[p].clone()).collect();
        Ok(Self {
            group_id,
            prompt_id,
            target_tokens,
            turn_ids,
        })
    }

    /// A request for the contiguous turns at `span` of `transcript`: what
    /// [`SummarizationRequest::for_positions`] gives for the positions of `span`, without
    /// listing them.
    ///
    /// ```
    /// use cutctx_model::{Role, SummarizationRequest, Transcript, TranscriptTurn};
    /// let t = Transcript::new(vec![
    ///     TranscriptTurn::new("a", Role::User, "", 1)?,
    ///     TranscriptTurn::new("b", Role::User, "", 1)?,
    ///     TranscriptTurn::new("c", Role::User, "", 1)?,
    /// ])?;
    /// let r = SummarizationRequest::for_span("g", &t, 1..3, 1, "p")?;
    /// assert_eq!(r, SummarizationRequest::for_positions("g", &t, &[1, 2], 1, "p")?);
    /// assert!(SummarizationRequest::for_span("g", &t, 2..4, 1, "p").is_err());
    /// # Ok::<(), cutctx_model::CompactionError>(())
    /// ```
    ///
    /// # Errors
    ///
    /// As [`SummarizationRequest::for_positions`]; a span reaching past the transcript, or
    /// ending before it starts, names positions not in it.
    pub fn for_span(
        group_id: impl Into<Arc<str>>,
        transcript: &Transcript,
        span: std::ops::Range<usize>,
        target_tokens: u64,
        prompt_id: impl Into<Arc<str>>,
    ) -> Result<Self, CompactionError> {
        let group_id = group_id.into();
        let prompt_id = prompt_id.into();
        let Some(ids) = transcript.turn_id_arcs().get(span) else {
            return Err(positions_outside(&group_id));
        };
        if group_id.is_empty() || prompt_id.is_empty() || ids.is_empty() {
            return Self::new(group_id, Vec::new(), target_tokens, prompt_id);
        }
        Ok(Self {
            group_id,
            prompt_id,
            target_tokens,
            turn_ids: ids.to_vec(),
        })
    }

    /// The group id.
    #[must_use]
    pub fn group_id(&self) -> &str {
        &self.group_id
    }

    /// The group id as a shared string.
    #[must_use]
    pub fn group_id_arc(&self) -> &Arc<str> {
        &self.group_id
    }

    /// The turns to fold, in transcript order.
    #[must_use]
    pub fn turn_ids(&self) -> &[Arc<str>] {
        &self.turn_ids
    }

    /// The estimate the summary turn will count for.
    #[must_use]
    pub const fn target_tokens(&self) -> u64 {
        self.target_tokens
    }

    /// The name of the prompt record to summarize with.
    #[must_use]
    pub fn prompt_id(&self) -> &str {
        &self.prompt_id
    }

    /// The id the summary turn will take: `summary:` and the group id.
    #[must_use]
    pub fn summary_turn_id(&self) -> String {
        format!("{SUMMARY_TURN_ID_PREFIX}{}", self.group_id)
    }
}

/// The wire form of a [`SummarizationRequest`].
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SummarizationRequestRecord {
    /// The group.
    pub group_id: String,
    /// The turns.
    pub turn_ids: Vec<String>,
    /// The target.
    pub target_tokens: u64,
    /// The prompt.
    pub prompt_id: String,
}

impl TryFrom<crate::wire::ObjectOnly<SummarizationRequestRecord>> for SummarizationRequest {
    type Error = CompactionError;

    fn try_from(
        r: crate::wire::ObjectOnly<SummarizationRequestRecord>,
    ) -> Result<Self, Self::Error> {
        let r = r.0;
        Self::new(
            r.group_id,
            r.turn_ids.into_iter().map(Arc::from).collect(),
            r.target_tokens,
            r.prompt_id,
        )
    }
}

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
        let mut out = String::with_capacity(128 + 96 * self.actions.len());
        self.write(&mut out);
        out
    }

    /// The lower-case SHA-256 hex of [`PlanDraft::canonical_json`], streamed into the hasher
    /// without building the text.
    #[must_use]
    pub fn plan_hash(&self) -> String {
        // Writing a large plan costs about half as much as hashing it: on two cores, one
        // writes while the other hashes what is written.
        const PIPELINED_ACTIONS: usize = 20_000;
        if self.actions.len() >= PIPELINED_ACTIONS {
            crate::hash_sink::hash_pipelined(self)
        } else {
            let mut sink = HashSink::on_heap();
            self.write(&mut sink);
            sink.finish_hex()
        }
    }

    fn write<S: Sink>(&self, out: &mut S) {
        let w = &mut Writer::new(out, Style::CANONICAL);
        w.raw("{\"actions\":[");
        for (i, a) in self.actions.iter().enumerate() {
            if i > 0 {
                w.item_separator();
            }
            match &a.what {
                // The common cases in one piece.
                What::Keep => w.raw("{\"action\":\"keep\",\"replacement\":null,\"summary_group\":null,\"turn_id\":"),
                What::Drop => w.raw("{\"action\":\"drop\",\"replacement\":null,\"summary_group\":null,\"turn_id\":"),
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
            w.str(&r.group_id);
            w.raw(",\"prompt_id\":");
            w.str(&r.prompt_id);
            w.raw(",\"target_tokens\":");
            w.u64(r.target_tokens);
            w.raw(",\"turn_ids\":");
            w.str_list(r.turn_ids.iter().map(|s| &**s));
            w.raw("}");
        }
        w.raw("],\"tokens_after_estimate\":");
        w.u64(self.tokens_after_estimate);
        w.raw(",\"tokens_before\":");
        w.u64(self.tokens_before);
        w.raw("}");
    }
}

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
        let ids = |v: &[Arc<str>]| v.iter().map(|s| s.len() + 3).sum::<usize>();
        let mut out = String::with_capacity(
            512 + ids(&self.kept_turn_ids)
                + ids(&self.masked_turn_ids)
                + ids(&self.summarized_turn_ids)
                + ids(&self.dropped_turn_ids),
        );
        let w = &mut Writer::new(&mut out, Style::CANONICAL);
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
        out
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::canonical::canonical_json;

    #[test]
    #[cfg(target_pointer_width = "64")]
    fn an_action_is_an_id_and_one_tagged_field() {
        // 16 bytes of id, 24 of stub, a tag: a plan of 100,000 actions is 4.8 MB, not 6.4.
        assert_eq!(std::mem::size_of::<TurnAction>(), 48);
    }

    #[test]
    fn actions_serialize_all_four_keys_in_code_point_order() {
        let group: Arc<str> = Arc::from("g");
        let stub = TurnReplacement {
            content: Arc::from("[masked]"),
            token_estimate: 3,
        };
        let cases = [
            (
                TurnAction::keep("k"),
                r#"{"action":"keep","replacement":null,"summary_group":null,"turn_id":"k"}"#,
            ),
            (
                TurnAction::drop_turn("d"),
                r#"{"action":"drop","replacement":null,"summary_group":null,"turn_id":"d"}"#,
            ),
            (
                TurnAction::mask("m", stub),
                r#"{"action":"mask","replacement":{"content":"[masked]","token_estimate":3},"summary_group":null,"turn_id":"m"}"#,
            ),
            (
                TurnAction::summarize("s", group),
                r#"{"action":"summarize","replacement":null,"summary_group":"g","turn_id":"s"}"#,
            ),
        ];
        for (action, expected) in cases {
            assert_eq!(
                serde_json::to_string(&action).ok().as_deref(),
                Some(expected)
            );
        }
    }

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
    fn for_positions_refuses_unordered_positions_and_names_ids_in_order() {
        let t = Transcript::new(vec![
            crate::TranscriptTurn::new("a", crate::Role::User, "", 1).expect("valid"),
            crate::TranscriptTurn::new("b", crate::Role::User, "", 1).expect("valid"),
        ])
        .expect("valid");
        let r = SummarizationRequest::for_positions("g", &t, &[0, 1], 1, "p").expect("valid");
        assert_eq!(r.turn_ids(), [Arc::from("a"), Arc::from("b")]);
        let e = SummarizationRequest::for_positions("g", &t, &[1, 0], 1, "p").expect_err("order");
        assert_eq!(
            e.to_string(),
            "Summarization request 'g' names positions that are not increasing or not in the \
             transcript."
        );
        assert_eq!(e.details()["group_id"], "g");
        assert!(SummarizationRequest::for_positions("g", &t, &[0, 0], 1, "p").is_err());
        assert!(SummarizationRequest::for_positions("g", &t, &[2], 1, "p").is_err());
        assert!(SummarizationRequest::for_positions("g", &t, &[], 1, "p").is_err());
    }

    #[test]
    fn draft_round_trips_through_json() {
        let d = sample_draft();
        let back: PlanDraft = serde_json::from_str(&d.canonical_json()).expect("parses");
        assert_eq!(back, d);
        assert_eq!(back.plan_hash(), d.plan_hash());
    }

    #[test]
    fn action_shape_is_checked_on_the_wire() {
        let bad = r#"{"action":"mask","replacement":null,"summary_group":null,"turn_id":"t"}"#;
        assert!(serde_json::from_str::<TurnAction>(bad).is_err());
        let bad = r#"{"action":"keep","replacement":null,"summary_group":"g","turn_id":"t"}"#;
        assert!(serde_json::from_str::<TurnAction>(bad).is_err());
    }

    #[test]
    fn request_checks_run_in_reference_order() {
        let e = SummarizationRequest::new("", vec![], 0, "").expect_err("empty gid first");
        assert!(e.details().is_empty());
        let e = SummarizationRequest::new("g", vec![], 0, "").expect_err("prompt second");
        assert!(e.message().contains("prompt_id"));
        let e = SummarizationRequest::new("g", vec![], 0, "p").expect_err("turns third");
        assert!(e.message().contains("no turns"));
        let e = SummarizationRequest::new("g", vec!["a".into(), "a".into()], 0, "p")
            .expect_err("repeat");
        assert!(e.message().contains("repeats"));
    }
}
