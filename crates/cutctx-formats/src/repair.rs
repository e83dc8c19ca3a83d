//! Repair: dropping (never inventing) what makes a logged history invalid for its provider,
//! so that a history the user's own stack accepted can be compacted, each drop named.
//!
//! What repair does is defined by a loop: run the format's validator, remove what the first
//! violation names, run it again, until the document is valid or a violation no drop can fix
//! remains (a shape error, roles out of order, a result block after text). That loop costs a
//! validation per drop, quadratic in a long broken history, so each format instead walks its
//! list once, keeping the validator's state (the open calls, the ids answered) and dropping
//! as it goes, in the order the loop would. Where the loop would drop something before the
//! walk's current message (a call that never got its result, the reasoning left before a
//! dropped item), the walk drops it when the validator would notice. A final validation
//! confirms the result, or names the violation no drop fixes, at its position in the document
//! as repaired so far. What each violation costs:
//!
//! | rule | dropped |
//! |---|---|
//! | `call_without_result` | the call (Chat: the entry of `tool_calls`, the key itself once empty; Anthropic: the `tool_use` block; Responses: the call item) |
//! | `result_without_call`, `duplicate_result` | the result (the `tool` message, the `tool_result` block, the output item) |
//! | `duplicate_call_id` | the later call with the id |
//! | `reasoning_without_following_item` | the reasoning item (a reasoning item between a call and its output, or at the end) |
//! | `empty_content` | the message (also one emptied by an earlier drop) |
//! | `null_status` | the `status` field |
//!
//! Positions in the [`Repair`] list are those of the input, not of the repaired document.

use serde_json::Value;

use crate::provider_format::{ProviderFormat, per_format};
use crate::validate::{Rule, Violation, validate};
use crate::{Format, FormatError};

/// What one repair dropped. The string forms ([`RepairKind::as_str`]) are stable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum RepairKind {
    /// `dropped_call`: a call whose result never came.
    DroppedCall,
    /// `dropped_result`: a result with no call before it, or a second result for one call.
    DroppedResult,
    /// `dropped_duplicate_call`: a second call with an id its step already used.
    DroppedDuplicateCall,
    /// `dropped_reasoning`: a reasoning item not followed by the model item it belongs to.
    DroppedReasoning,
    /// `dropped_empty_message`: a message with no content left.
    DroppedEmptyMessage,
    /// `dropped_null_status`: a `"status": null` field the provider refuses.
    DroppedNullStatus,
}

impl RepairKind {
    /// The kind's stable name, for example `"dropped_call"`.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::DroppedCall => "dropped_call",
            Self::DroppedResult => "dropped_result",
            Self::DroppedDuplicateCall => "dropped_duplicate_call",
            Self::DroppedReasoning => "dropped_reasoning",
            Self::DroppedEmptyMessage => "dropped_empty_message",
            Self::DroppedNullStatus => "dropped_null_status",
        }
    }

    /// The repair for a broken `rule`, if a drop can fix it.
    const fn for_rule(rule: Rule) -> Option<Self> {
        match rule {
            Rule::CallWithoutResult => Some(Self::DroppedCall),
            Rule::ResultWithoutCall | Rule::DuplicateResult => Some(Self::DroppedResult),
            Rule::DuplicateCallId => Some(Self::DroppedDuplicateCall),
            Rule::ReasoningWithoutFollowingItem => Some(Self::DroppedReasoning),
            Rule::EmptyContent => Some(Self::DroppedEmptyMessage),
            Rule::NullStatus => Some(Self::DroppedNullStatus),
            _ => None,
        }
    }
}

/// One repair: what was dropped, at which message (or item) of the input, for which call id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repair {
    /// What was dropped.
    pub kind: RepairKind,
    /// The index of the message (or item) in the input's list.
    pub position: usize,
    /// The call id involved, if any.
    pub id: Option<String>,
}

impl Repair {
    /// `{"kind", "position", "id"}` (`id` null when there is none).
    #[must_use]
    pub fn to_json(&self) -> Value {
        let mut m = serde_json::Map::new();
        m.insert("kind".into(), Value::from(self.kind.as_str()));
        m.insert("position".into(), Value::from(self.position));
        m.insert(
            "id".into(),
            self.id.as_deref().map_or(Value::Null, Value::from),
        );
        Value::Object(m)
    }
}

/// The first message (or item) of the repaired list that is not the input's at the same
/// place, given what [`repair`] made: the first repair's input position, as nothing before it
/// was dropped; `None` when nothing was. Every thinking block or reasoning item from there on
/// had another prefix when the provider produced it
/// ([`ProviderTranscript::set_changed_from`](crate::ProviderTranscript::set_changed_from)).
///
/// ```
/// use cutctx_formats::{Format, first_repaired, repair};
/// let chat = serde_json::json!([
///     {"role": "user", "content": "book it"},
///     {"role": "tool", "tool_call_id": "c0", "content": "stray"},
///     {"role": "user", "content": "well?"},
/// ]);
/// let (_, repairs) = repair(Format::OpenAiChat, chat)?;
/// assert_eq!(first_repaired(&repairs), Some(1));
/// assert_eq!(first_repaired(&[]), None);
/// # Ok::<(), cutctx_formats::FormatError>(())
/// ```
#[must_use]
pub fn first_repaired(repairs: &[Repair]) -> Option<usize> {
    repairs.iter().map(|r| r.position).min()
}

/// Whether `--repair` (that is, [`repair`]) fixes the violation `v` by a drop: a repairable
/// rule, at a message of the list. Anthropic's duplicate `tool_use` ids are not repairable:
/// which of the two calls a result answers is unknowable, so neither can be dropped.
///
/// ```
/// use cutctx_formats::{Format, is_repairable, validate};
/// let unanswered = serde_json::json!({"messages": [
///     {"role": "user", "content": "go"},
///     {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {}}]},
///     {"role": "user", "content": "well?"}]});
/// let v = validate(Format::Anthropic, &unanswered).unwrap_err();
/// assert!(is_repairable(&v));
/// let assistant_first = serde_json::json!({"messages": [{"role": "assistant", "content": "hi"}]});
/// assert!(!is_repairable(&validate(Format::Anthropic, &assistant_first).unwrap_err()));
/// ```
#[must_use]
pub fn is_repairable(v: &Violation) -> bool {
    RepairKind::for_rule(v.rule).is_some()
        && v.index.is_some()
        && !(v.format == Format::Anthropic && v.rule == Rule::DuplicateCallId)
}

/// `document` with everything dropped that makes it invalid for `format` and that a drop can
/// fix, and the list of drops in the order they were made. A valid document comes back
/// unchanged with no repairs.
///
/// # Errors
///
/// `FORMAT_ERROR` for a document without the format's shape; `FORMAT_INVALID_REQUEST` for a
/// violation no drop fixes, named as [`validate`] names it, at its position in the repaired
/// document.
///
/// ```
/// use cutctx_formats::{Format, RepairKind, repair, validate};
/// let chat = serde_json::json!([
///     {"role": "user", "content": "book it"},
///     {"role": "assistant", "content": null, "tool_calls": [
///         {"id": "c1", "type": "function", "function": {"name": "book", "arguments": "{}"}}]},
///     {"role": "user", "content": "well?"},
/// ]);
/// let (fixed, repairs) = repair(Format::OpenAiChat, chat)?;
/// let kinds: Vec<_> = repairs.iter().map(|r| (r.kind, r.position)).collect();
/// assert_eq!(kinds, [(RepairKind::DroppedCall, 1), (RepairKind::DroppedEmptyMessage, 1)]);
/// assert_eq!(fixed.as_array().unwrap().len(), 2);
/// assert!(validate(Format::OpenAiChat, &fixed).is_ok());
/// # Ok::<(), cutctx_formats::FormatError>(())
/// ```
pub fn repair(format: Format, mut document: Value) -> Result<(Value, Vec<Repair>), FormatError> {
    // Most requests are valid, and a first violation no drop fixes ends repair at once.
    match validate(format, &document) {
        Ok(()) => return Ok((document, Vec::new())),
        Err(v) if !is_repairable(&v) => return Err(FormatError::from_violation(v)),
        Err(_) => {}
    }
    let mut repairs = Vec::new();
    if let Some(list) = list(format, &mut document) {
        let items = std::mem::take(list);
        *list = per_format!(format, F => F::repair(items, &mut repairs));
    }
    // The walk stops where the drop-and-revalidate loop would: a valid document, or one whose
    // first violation no drop fixes. Anything else is a walk that disagrees with the validator;
    // it is refused, naming the violation, rather than returned half-repaired.
    match validate(format, &document) {
        Ok(()) => Ok((document, repairs)),
        Err(v) => {
            debug_assert!(!is_repairable(&v), "repair left a fixable violation: {v}");
            Err(FormatError::from_violation(v))
        }
    }
}

/// The message (or item) list of a document.
fn list(format: Format, document: &mut Value) -> Option<&mut Vec<Value>> {
    let key = crate::list_key(format);
    match document {
        Value::Array(list) => Some(list),
        Value::Object(map) => map.get_mut(key).and_then(Value::as_array_mut),
        _ => None,
    }
}

/// Records one drop.
pub(crate) fn record(
    repairs: &mut Vec<Repair>,
    kind: RepairKind,
    position: usize,
    id: Option<&str>,
) {
    repairs.push(Repair {
        kind,
        position,
        id: id.map(str::to_owned),
    });
}
