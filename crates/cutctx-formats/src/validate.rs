//! The structural validators' vocabulary: the rules a provider request obeys, and the
//! [`Violation`] that names the first one broken, where, and for which id.

use crate::provider_format::{ProviderFormat, per_format};
use std::fmt;

use cutctx_model::Details;
use serde_json::Value;

use crate::Format;

/// One rule of a provider's request structure. The string forms ([`Rule::as_str`]) are stable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum Rule {
    /// `malformed`: a value of the wrong JSON type or a missing field (a shape error).
    Malformed,
    /// `unknown_role`: a role the format does not have (or one this crate does not map).
    UnknownRole,
    /// `no_messages`: an empty message list where the provider requires at least one.
    NoMessages,
    /// `first_message_not_user`: Anthropic's first message must be a user message.
    FirstMessageNotUser,
    /// `duplicate_call_id`: two calls of one step share an id, so results would be ambiguous.
    DuplicateCallId,
    /// `call_without_result`: a tool call whose result does not follow it.
    CallWithoutResult,
    /// `result_without_call`: a tool result with no matching call right before it.
    ResultWithoutCall,
    /// `duplicate_result`: two results answer one call.
    DuplicateResult,
    /// `tool_result_not_first`: Anthropic tool results must open their user message.
    ToolResultNotFirst,
    /// `reasoning_without_following_item`: an OpenAI Responses reasoning item must be followed
    /// by the output item it belongs to.
    ReasoningWithoutFollowingItem,
    /// `empty_content`: a message with nothing in it where the provider requires content
    /// (Anthropic: `""` or `[]` anywhere but a final assistant message; Chat: an assistant
    /// message with neither content nor calls).
    EmptyContent,
    /// `null_status`: an OpenAI Responses item other than a call output with `"status": null`,
    /// which the provider's schema does not allow (outputs may carry a null status).
    NullStatus,
    /// `system_message_misplaced`: an Anthropic mid-conversation system message must follow a
    /// user message (or tool results) or another system message; never first, never between a
    /// `tool_use` and its `tool_result`.
    SystemMessageMisplaced,
}

impl Rule {
    /// The rule's stable name, for example `"call_without_result"`.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Malformed => "malformed",
            Self::UnknownRole => "unknown_role",
            Self::NoMessages => "no_messages",
            Self::FirstMessageNotUser => "first_message_not_user",
            Self::DuplicateCallId => "duplicate_call_id",
            Self::CallWithoutResult => "call_without_result",
            Self::ResultWithoutCall => "result_without_call",
            Self::DuplicateResult => "duplicate_result",
            Self::ToolResultNotFirst => "tool_result_not_first",
            Self::ReasoningWithoutFollowingItem => "reasoning_without_following_item",
            Self::EmptyContent => "empty_content",
            Self::NullStatus => "null_status",
            Self::SystemMessageMisplaced => "system_message_misplaced",
        }
    }

    /// What the rule requires, in one sentence.
    #[must_use]
    pub const fn explain(self) -> &'static str {
        match self {
            Self::Malformed => "every field must have the type the provider documents",
            Self::UnknownRole => "every message needs a role the format has",
            Self::NoMessages => "a request needs at least one message",
            Self::FirstMessageNotUser => "the first message must be a user message",
            Self::DuplicateCallId => "the calls of one step need distinct ids",
            Self::CallWithoutResult => "every tool call needs its result right after it",
            Self::ResultWithoutCall => "every tool result needs its call right before it",
            Self::DuplicateResult => "a tool call is answered once",
            Self::ToolResultNotFirst => {
                "tool_result blocks come before any other block of their user message"
            }
            Self::ReasoningWithoutFollowingItem => {
                "a reasoning item is followed by the output item it belongs to"
            }
            Self::EmptyContent => "a message has content, unless it is a final assistant message",
            Self::NullStatus => "an item's status is one of the provider's values, never null",
            Self::SystemMessageMisplaced => {
                "a system message in the list follows a user message or tool results, never an assistant message"
            }
        }
    }

    /// Whether the rule is about the document's shape rather than the provider's semantics.
    #[must_use]
    pub const fn is_shape(self) -> bool {
        matches!(self, Self::Malformed | Self::UnknownRole)
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The first rule a document breaks: which rule, at which message, where, and for which id.
///
/// `path` is a JSON path such as `messages[3].content[1]` or `input[0].call_id`; `index` is the
/// message's (or item's) index when the problem is inside the message list. Neither names
/// content: ids are call ids, never text.
///
/// ```
/// use cutctx_formats::{Format, Rule, validate};
/// let chat = serde_json::json!([
///     {"role": "user", "content": "hi"},
///     {"role": "tool", "tool_call_id": "call_1", "content": "42"},
/// ]);
/// let v = validate(Format::OpenAiChat, &chat).unwrap_err();
/// assert_eq!((v.rule, v.index, v.id.as_deref()), (Rule::ResultWithoutCall, Some(1), Some("call_1")));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// The format whose rule is broken.
    pub format: Format,
    /// The rule.
    pub rule: Rule,
    /// The index of the message or item, when the problem is in the list.
    pub index: Option<usize>,
    /// Where, as a JSON path.
    pub path: String,
    /// The call id involved, if any.
    pub id: Option<String>,
}

impl Violation {
    pub(crate) fn new(format: Format, rule: Rule, index: Option<usize>, path: String) -> Self {
        Self {
            format,
            rule,
            index,
            path,
            id: None,
        }
    }

    pub(crate) fn with_id(mut self, id: &str) -> Self {
        self.id = Some(id.to_owned());
        self
    }

    /// `format`, `rule`, `path`, and `index` and `id` when known.
    #[must_use]
    pub fn details(&self) -> Details {
        let mut d = Details::new();
        d.insert("format".into(), Value::from(self.format.as_str()));
        d.insert("rule".into(), Value::from(self.rule.as_str()));
        d.insert("path".into(), Value::from(self.path.as_str()));
        if let Some(i) = self.index {
            d.insert("index".into(), Value::from(i));
        }
        if let Some(id) = &self.id {
            d.insert("id".into(), Value::from(id.as_str()));
        }
        d
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} request breaks rule `{}` at {}",
            self.format.as_str(),
            self.rule.as_str(),
            self.path
        )?;
        if let Some(id) = &self.id {
            write!(f, " (id {id:?})")?;
        }
        write!(f, ": {}.", self.rule.explain())
    }
}

impl std::error::Error for Violation {}

/// Checks `document` against the structural rules of `format`: every result right after its
/// call, no orphan on either side, roles in an order the provider accepts, and the shapes this
/// crate relies on. Returns the first violation, in document order.
///
/// # Errors
///
/// The first [`Violation`].
pub fn validate(format: Format, document: &Value) -> Result<(), Violation> {
    per_format!(format, F => F::validate(document))
}

/// A shape check: `Err(malformed)` at `path` unless `ok`.
pub(crate) fn shape(
    ok: bool,
    format: Format,
    index: Option<usize>,
    path: impl FnOnce() -> String,
) -> Result<(), Violation> {
    if ok {
        Ok(())
    } else {
        Err(Violation::new(format, Rule::Malformed, index, path()))
    }
}
