//! A summarization request: the turns a caller's model folds into one summary turn.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::{CompactionError, SUMMARY_TURN_ID_PREFIX, Transcript, details, py_repr_str};

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

#[cfg(test)]
mod tests {
    use super::*;

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
