//! The Anthropic repair ([`crate::repair()`]): one walk over the messages, with the validator's state (the `tool_use` ids of
//! the previous message).

use std::collections::BTreeSet;

use serde_json::Value;

use super::{Kind, TOOL_RESULT, TOOL_USE, TOOL_USE_ID};
use crate::Repair;
use crate::repair::{RepairKind, record};

/// The previous message's `tool_use` ids, in order.
struct Uses {
    position: usize,
    ids: Vec<String>,
    set: BTreeSet<String>,
}

enum Step {
    /// The message, and its `tool_use` ids.
    Keep(Value, Vec<String>),
    Drop,
    Stop(Value),
}

pub(crate) fn repair(items: Vec<Value>, repairs: &mut Vec<Repair>) -> Vec<Value> {
    let n = items.len();
    let mut kept: Vec<Value> = Vec::new();
    let mut open: Option<Uses> = None;
    let mut rest = items.into_iter().enumerate();
    while let Some((position, m)) = rest.next() {
        let last = position + 1 == n;
        match step(m, position, last, &mut open, &mut kept, repairs) {
            Step::Keep(m, ids) => {
                kept.push(m);
                open = (!ids.is_empty()).then(|| Uses {
                    position,
                    set: ids.iter().cloned().collect(),
                    ids,
                });
            }
            Step::Drop => {}
            Step::Stop(m) => {
                kept.push(m);
                kept.extend(rest.map(|(_, m)| m));
                return kept;
            }
        }
    }
    if let Some(uses) = open {
        let answered = BTreeSet::new();
        drop_unanswered(&uses, &answered, &mut kept, repairs);
    }
    kept
}

/// A system or opaque message `m`, after `before`: kept as it is when it holds no call or result
/// and is placed as the rules allow, else where the walk stops.
fn carried(m: Value, empty: bool, calls_open: bool, kind: Kind, before: Option<&Value>) -> Step {
    let tools = m
        .get("content")
        .and_then(Value::as_array)
        .is_some_and(|blocks| {
            blocks
                .iter()
                .any(|b| matches!(block_type(b), TOOL_USE | TOOL_RESULT))
        });
    let placed = kind != Kind::System
        || before.is_some_and(|b| matches!(Kind::of_message(b), Kind::User | Kind::System));
    if empty || calls_open || tools || !placed {
        return Step::Stop(m);
    }
    Step::Keep(m, Vec::new())
}

fn block_type(b: &Value) -> &str {
    b.get("type").and_then(Value::as_str).unwrap_or("")
}

fn step(
    mut m: Value,
    position: usize,
    last: bool,
    open: &mut Option<Uses>,
    kept: &mut Vec<Value>,
    repairs: &mut Vec<Repair>,
) -> Step {
    let Value::Object(map) = &mut m else {
        return Step::Stop(m);
    };
    let Some(role) = map.get("role").and_then(Value::as_str).map(str::to_owned) else {
        return Step::Stop(m);
    };
    let empty = match map.get("content") {
        Some(Value::String(s)) => s.is_empty(),
        Some(Value::Array(blocks)) => {
            if !blocks
                .iter()
                .all(|b| b.get("type").is_some_and(Value::is_string))
            {
                return Step::Stop(m);
            }
            blocks.is_empty()
        }
        _ => return Step::Stop(m),
    };
    let user = role == "user";
    let kind = Kind::of(&role);
    if matches!(kind, Kind::System | Kind::Opaque) {
        // Instructions, or a message of a role cutctx does not know: never dropped. One that
        // breaks a rule stops the walk, and the validator says which.
        return carried(m, empty, open.is_some(), kind, kept.last());
    }
    // A first message that is not a user message.
    if !user && kept.is_empty() {
        return Step::Stop(m);
    }
    // The provider allows an empty final assistant message (a prefill to continue from).
    if empty && (user || !last) {
        record(repairs, RepairKind::DroppedEmptyMessage, position, None);
        return Step::Drop;
    }
    let calls = open.take();
    let mut answered: BTreeSet<String> = BTreeSet::new();
    let mut uses: Vec<String> = Vec::new();
    let mut seen_uses: BTreeSet<String> = BTreeSet::new();
    if let Some(Value::Array(blocks)) = map.get_mut("content") {
        let mut kept_blocks = Vec::with_capacity(blocks.len());
        let mut rest = std::mem::take(blocks).into_iter();
        let mut seen_other = false;
        let mut stopped = false;
        let mut dropped_any = false;
        while let Some(b) = rest.next() {
            let ok = match block_type(&b) {
                TOOL_RESULT => match b.get(TOOL_USE_ID).and_then(Value::as_str) {
                    None => false,
                    Some(id) => {
                        let known = user && calls.as_ref().is_some_and(|c| c.set.contains(id));
                        if !known || answered.contains(id) {
                            record(repairs, RepairKind::DroppedResult, position, Some(id));
                            dropped_any = true;
                            continue;
                        }
                        answered.insert(id.to_owned());
                        !seen_other
                    }
                },
                TOOL_USE => match b.get("id").and_then(Value::as_str) {
                    Some(id) if !user && seen_uses.insert(id.to_owned()) => {
                        uses.push(id.to_owned());
                        seen_other = true;
                        true
                    }
                    // No id, a call in a user message, or a second call with one id.
                    _ => false,
                },
                _ => {
                    seen_other = true;
                    true
                }
            };
            kept_blocks.push(b);
            if !ok {
                kept_blocks.extend(rest.by_ref());
                stopped = true;
                break;
            }
        }
        let emptied = dropped_any && kept_blocks.is_empty();
        *blocks = kept_blocks;
        if stopped {
            return Step::Stop(m);
        }
        if emptied {
            // Its last block went: an empty message is refused, so it goes too, and the
            // previous message's calls wait for the next one.
            record(repairs, RepairKind::DroppedEmptyMessage, position, None);
            *open = calls;
            return Step::Drop;
        }
    }
    if let Some(calls) = calls {
        drop_unanswered(&calls, &answered, kept, repairs);
    }
    Step::Keep(m, uses)
}

/// The previous message's unanswered `tool_use` blocks go, in order, then the message if
/// it has nothing left.
fn drop_unanswered(
    uses: &Uses,
    answered: &BTreeSet<String>,
    kept: &mut Vec<Value>,
    repairs: &mut Vec<Repair>,
) {
    let gone: BTreeSet<&str> = uses
        .ids
        .iter()
        .filter(|id| !answered.contains(*id))
        .map(String::as_str)
        .collect();
    if gone.is_empty() {
        return;
    }
    for id in uses.ids.iter().filter(|id| gone.contains(id.as_str())) {
        record(repairs, RepairKind::DroppedCall, uses.position, Some(id));
    }
    // The message with the calls is the last one kept: the one before the current.
    let Some(Value::Array(blocks)) = kept.last_mut().and_then(|m| m.get_mut("content")) else {
        return;
    };
    blocks.retain(|b| {
        !(block_type(b) == TOOL_USE
            && b.get("id")
                .and_then(Value::as_str)
                .is_some_and(|id| gone.contains(id)))
    });
    if blocks.is_empty() {
        kept.pop();
        record(
            repairs,
            RepairKind::DroppedEmptyMessage,
            uses.position,
            None,
        );
    }
}
