//! The reference for [`repair`](cutctx_formats::repair): the drop-and-revalidate loop that
//! defines what repair does. Each round runs the validator, drops what its first violation
//! names, and records the drop at the message's input position. Quadratic, and kept only here,
//! as the oracle the one-walk repair is compared with.

use cutctx_formats::{Format, FormatError, Repair, RepairKind, Rule, Violation, validate};
use serde_json::Value;

/// The repair for a broken `rule`, if a drop can fix it.
const fn kind_for(rule: Rule) -> Option<RepairKind> {
    match rule {
        Rule::CallWithoutResult => Some(RepairKind::DroppedCall),
        Rule::ResultWithoutCall | Rule::DuplicateResult => Some(RepairKind::DroppedResult),
        Rule::DuplicateCallId => Some(RepairKind::DroppedDuplicateCall),
        Rule::ReasoningWithoutFollowingItem => Some(RepairKind::DroppedReasoning),
        Rule::EmptyContent => Some(RepairKind::DroppedEmptyMessage),
        Rule::NullStatus => Some(RepairKind::DroppedNullStatus),
        _ => None,
    }
}

/// `document` repaired one first violation at a time.
pub(crate) fn repair_by_loop(
    format: Format,
    mut document: Value,
) -> Result<(Value, Vec<Repair>), FormatError> {
    // Input position of each message now in the list.
    let mut positions: Vec<usize> =
        (0..list(format, &mut document).map_or(0, |l| l.len())).collect();
    let mut repairs = Vec::new();
    loop {
        let v = match validate(format, &document) {
            Ok(()) => return Ok((document, repairs)),
            Err(v) => v,
        };
        let (Some(kind), Some(i)) = (kind_for(v.rule), v.index) else {
            return Err(FormatError::from(v));
        };
        let Some(&position) = positions.get(i) else {
            return Err(FormatError::from(v));
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
    let unfixable = || FormatError::from(v.clone());
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
