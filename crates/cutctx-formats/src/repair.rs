//! Repair: dropping (never inventing) what makes a logged history invalid for its provider,
//! so that a history the user's own stack accepted can be compacted, each drop named.
//!
//! Repair runs the format's validator, removes what the first violation names, and runs it
//! again, until the document is valid or a violation no drop can fix remains (a shape error,
//! roles out of order, a result block after text). What each violation costs:
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

/// Whether `--repair` (that is, [`repair`]) can fix a violation of `rule`.
#[must_use]
pub const fn is_repairable(rule: Rule) -> bool {
    RepairKind::for_rule(rule).is_some()
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
    // Input position of each message now in the list.
    let mut positions: Vec<usize> =
        (0..list(format, &mut document).map_or(0, |l| l.len())).collect();
    let mut repairs = Vec::new();
    loop {
        let v = match validate(format, &document) {
            Ok(()) => return Ok((document, repairs)),
            Err(v) => v,
        };
        let (Some(kind), Some(i)) = (RepairKind::for_rule(v.rule), v.index) else {
            return Err(FormatError::from_violation(v));
        };
        let Some(&position) = positions.get(i) else {
            return Err(FormatError::from_violation(v));
        };
        let dropped = drop_for(format, &mut document, &v)?;
        if !matches!(dropped, Dropped::Part) {
            positions.remove(i);
        }
        repairs.push(Repair {
            kind,
            position,
            id: v.id.clone(),
        });
        if matches!(dropped, Dropped::PartAndEmptiedMessage) {
            repairs.push(Repair {
                kind: RepairKind::DroppedEmptyMessage,
                position,
                id: None,
            });
        }
    }
}

/// The message (or item) list of a document.
fn list(format: Format, document: &mut Value) -> Option<&mut Vec<Value>> {
    let key = match format {
        Format::OpenAiResponses => "input",
        Format::OpenAiChat | Format::Anthropic => "messages",
    };
    match document {
        Value::Array(list) => Some(list),
        Value::Object(map) => map.get_mut(key).and_then(Value::as_array_mut),
        _ => None,
    }
}

/// The index after `key[` in `path`, as in `messages[3].tool_calls[1].id` for `tool_calls`.
fn index_after(path: &str, key: &str) -> Option<usize> {
    let start = path.find(&format!("{key}["))? + key.len() + 1;
    let rest = path.get(start..)?;
    rest.get(..rest.find(']')?)?.parse().ok()
}

/// Drops what `v` names.
fn drop_for(format: Format, document: &mut Value, v: &Violation) -> Result<Dropped, FormatError> {
    let unfixable = || FormatError::from_violation(v.clone());
    let i = v.index.ok_or_else(unfixable)?;
    let list = list(format, document).ok_or_else(unfixable)?;
    let message = list.get_mut(i).ok_or_else(unfixable)?;
    let whole = match (format, v.rule) {
        (_, Rule::EmptyContent)
        | (Format::OpenAiChat, Rule::ResultWithoutCall | Rule::DuplicateResult)
        | (
            Format::OpenAiResponses,
            Rule::CallWithoutResult
            | Rule::ResultWithoutCall
            | Rule::DuplicateResult
            | Rule::DuplicateCallId
            | Rule::ReasoningWithoutFollowingItem,
        ) => true,
        (Format::OpenAiResponses, Rule::NullStatus) => {
            message
                .as_object_mut()
                .ok_or_else(unfixable)?
                .remove("status");
            false
        }
        (Format::OpenAiChat, Rule::CallWithoutResult | Rule::DuplicateCallId) => {
            let map = message.as_object_mut().ok_or_else(unfixable)?;
            let calls = map
                .get_mut("tool_calls")
                .and_then(Value::as_array_mut)
                .ok_or_else(unfixable)?;
            let j = index_after(&v.path, "tool_calls")
                .filter(|j| *j < calls.len())
                .ok_or_else(unfixable)?;
            calls.remove(j);
            if calls.is_empty() {
                // An empty `tool_calls` is refused; without calls the key goes too.
                map.remove("tool_calls");
            }
            false
        }
        (Format::Anthropic, Rule::CallWithoutResult) => {
            let id = v.id.as_deref().ok_or_else(unfixable)?;
            let blocks = message
                .get_mut("content")
                .and_then(Value::as_array_mut)
                .ok_or_else(unfixable)?;
            let j = blocks
                .iter()
                .position(|b| {
                    b.get("type").and_then(Value::as_str) == Some("tool_use")
                        && b.get("id").and_then(Value::as_str) == Some(id)
                })
                .ok_or_else(unfixable)?;
            blocks.remove(j);
            false
        }
        (Format::Anthropic, Rule::ResultWithoutCall | Rule::DuplicateResult) => {
            let blocks = message
                .get_mut("content")
                .and_then(Value::as_array_mut)
                .ok_or_else(unfixable)?;
            let j = index_after(&v.path, "content")
                .filter(|j| *j < blocks.len())
                .ok_or_else(unfixable)?;
            blocks.remove(j);
            false
        }
        _ => return Err(unfixable()),
    };
    // A message whose last block went is empty, which the provider refuses (even a final
    // assistant message: an empty prefill is not what the history said): it goes too.
    let emptied = !whole
        && message
            .get("content")
            .and_then(Value::as_array)
            .is_some_and(Vec::is_empty)
        && format == Format::Anthropic;
    if whole || emptied {
        list.remove(i);
    }
    Ok(match (whole, emptied) {
        (true, _) => Dropped::Message,
        (false, true) => Dropped::PartAndEmptiedMessage,
        (false, false) => Dropped::Part,
    })
}

/// What one drop removed.
enum Dropped {
    /// Part of a message (a call, a result block, a field).
    Part,
    /// The whole message.
    Message,
    /// Part of a message, which then had nothing left and went too.
    PartAndEmptiedMessage,
}
