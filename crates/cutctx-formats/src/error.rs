//! The errors of this crate: a stable code, one line for people, and details naming message
//! indices, fields and ids, never content.

use cutctx_model::{CompactionError, Details};

use crate::validate::Violation;

/// Everything that can go wrong while mapping a provider document to a transcript and back.
///
/// Match on [`FormatError::code`] for a stable identity across languages; [`FormatError::details`]
/// names indices, fields, rules and ids, never the text of a message.
///
/// ```
/// use cutctx_formats::{Format, ProviderTranscript};
/// let err = ProviderTranscript::parse(Format::OpenAiChat, &serde_json::json!({"messages": 3}))
///     .unwrap_err();
/// assert_eq!(err.code(), "FORMAT_ERROR");
/// assert_eq!(err.details()["path"], "messages");
/// ```
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum FormatError {
    /// `FORMAT_ERROR`: the document does not have the shape of the format (a message that is
    /// not an object, a role that is not a string, content of the wrong type).
    #[error("{0}")]
    Malformed(Violation),
    /// `FORMAT_INVALID_REQUEST`: the document has the shape, but the provider would refuse it
    /// (an orphaned call or result, a result that does not follow its call, roles out of order).
    #[error("{0}")]
    Invalid(Violation),
    /// `FORMAT_VIEW_MISMATCH`: the view given to render was not derived from this transcript.
    #[error("{message}")]
    ViewMismatch {
        /// What is wrong, in one line.
        message: String,
        /// `turn_id`, `position`.
        details: Details,
    },
    /// `FORMAT_UNSUPPORTED`: something this build or this mapping cannot do (a BPE estimator
    /// without the `bpe` feature; a mask on a turn whose payload has no place for a stub).
    #[error("{message}")]
    Unsupported {
        /// What is wrong, in one line.
        message: String,
        /// The names and figures involved.
        details: Details,
    },
    /// `FORMAT_REASONING_INVALIDATED`: with `ReasoningMode::Refuse`, the compaction would
    /// change the prefix of signed thinking blocks or reasoning items the request keeps.
    #[error("{message}")]
    ReasoningInvalidated {
        /// What is wrong, in one line.
        message: String,
        /// `format`, `first_changed`, `invalidated` (a count) and `messages` (their indices).
        details: Details,
    },
    /// `FORMAT_REASONING_OPEN_TOOL_LOOP`: with `ReasoningMode::Strip`, the request ends in an
    /// Anthropic tool loop in progress under manual thinking, and the compaction would
    /// invalidate the thinking its last assistant message must start with.
    #[error("{message}")]
    ReasoningOpenToolLoop {
        /// What is wrong, in one line.
        message: String,
        /// `format`, `first_changed` and `message` (the assistant message's index).
        details: Details,
    },
    /// An error of cutctx itself: planning, validating or applying a plan, or a bad option.
    #[error(transparent)]
    Compaction(#[from] CompactionError),
}

impl FormatError {
    /// The stable code: `FORMAT_ERROR`, `FORMAT_INVALID_REQUEST`, `FORMAT_VIEW_MISMATCH`,
    /// `FORMAT_UNSUPPORTED`, `FORMAT_REASONING_INVALIDATED`, `FORMAT_REASONING_OPEN_TOOL_LOOP`, or the code of the wrapped [`CompactionError`].
    #[must_use]
    pub fn code(&self) -> &'static str {
        match self {
            Self::Malformed(_) => "FORMAT_ERROR",
            Self::Invalid(_) => "FORMAT_INVALID_REQUEST",
            Self::ViewMismatch { .. } => "FORMAT_VIEW_MISMATCH",
            Self::Unsupported { .. } => "FORMAT_UNSUPPORTED",
            Self::ReasoningInvalidated { .. } => "FORMAT_REASONING_INVALIDATED",
            Self::ReasoningOpenToolLoop { .. } => "FORMAT_REASONING_OPEN_TOOL_LOOP",
            Self::Compaction(e) => e.code().as_str(),
        }
    }

    /// The human message (also the `Display` form).
    #[must_use]
    pub fn message(&self) -> String {
        self.to_string()
    }

    /// The structured details: ids, indices, fields and figures, never content.
    #[must_use]
    pub fn details(&self) -> Details {
        match self {
            Self::Malformed(v) | Self::Invalid(v) => v.details(),
            Self::ViewMismatch { details, .. }
            | Self::Unsupported { details, .. }
            | Self::ReasoningInvalidated { details, .. }
            | Self::ReasoningOpenToolLoop { details, .. } => details.clone(),
            Self::Compaction(e) => e.details().clone(),
        }
    }

    /// The violation behind a `FORMAT_ERROR` or `FORMAT_INVALID_REQUEST`.
    #[must_use]
    pub const fn violation(&self) -> Option<&Violation> {
        match self {
            Self::Malformed(v) | Self::Invalid(v) => Some(v),
            _ => None,
        }
    }

    /// A [`FormatError::Malformed`] or [`FormatError::Invalid`], by the violation's rule.
    pub(crate) fn from_violation(v: Violation) -> Self {
        if v.rule.is_shape() {
            Self::Malformed(v)
        } else {
            Self::Invalid(v)
        }
    }

    pub(crate) fn view(message: impl Into<String>, details: Details) -> Self {
        Self::ViewMismatch {
            message: message.into(),
            details,
        }
    }

    pub(crate) fn unsupported(message: impl Into<String>, details: Details) -> Self {
        Self::Unsupported {
            message: message.into(),
            details,
        }
    }
}

impl From<Violation> for FormatError {
    fn from(v: Violation) -> Self {
        Self::from_violation(v)
    }
}
