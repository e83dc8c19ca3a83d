//! The Chat repair ([`crate::repair()`]): one walk over the messages, with the validator's state (the calls the current run of
//! `tool` messages may answer).

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::rules::{content_shape_ok, no_content, own_payload};
use crate::Repair;
use crate::repair::{RepairKind, record};
use cutctx_model::Role;

/// The assistant message whose calls the following `tool` messages answer.
struct Run {
    /// Its index among the kept messages, and its input position.
    index: usize,
    position: usize,
    /// Its call ids in order, and for each whether a result answered it.
    order: Vec<String>,
    answered: BTreeMap<String, bool>,
}

/// What the walk does with one message.
enum Step {
    Keep(Value),
    Drop,
    /// A violation no drop fixes: the message (as the drops so far left it) and the rest
    /// go back unchanged for the validator to name.
    Stop(Value),
}

pub(crate) fn repair(items: Vec<Value>, repairs: &mut Vec<Repair>) -> Vec<Value> {
    let mut kept: Vec<Value> = Vec::new();
    let mut open: Option<Run> = None;
    let mut rest = items.into_iter().enumerate();
    while let Some((position, m)) = rest.next() {
        match step(m, position, &mut open, &mut kept, repairs) {
            Step::Keep(m) => kept.push(m),
            Step::Drop => {}
            Step::Stop(m) => {
                kept.push(m);
                kept.extend(rest.map(|(_, m)| m));
                return kept;
            }
        }
    }
    close(open, &mut kept, repairs);
    kept
}

fn step(
    mut m: Value,
    position: usize,
    open: &mut Option<Run>,
    kept: &mut Vec<Value>,
    repairs: &mut Vec<Repair>,
) -> Step {
    let Value::Object(map) = &mut m else {
        return Step::Stop(m);
    };
    let Some(role) = map.get("role").and_then(Value::as_str).map(str::to_owned) else {
        return Step::Stop(m);
    };
    if !content_shape_ok(map) {
        return Step::Stop(m);
    }
    if role == "tool" {
        let Some(id) = map.get("tool_call_id").and_then(Value::as_str) else {
            return Step::Stop(m);
        };
        // An orphan and a second answer are both dropped as results.
        let first_answer = open
            .as_mut()
            .and_then(|run| run.answered.get_mut(id))
            .is_some_and(|answered| !std::mem::replace(answered, true));
        if first_answer {
            return Step::Keep(m);
        }
        record(repairs, RepairKind::DroppedResult, position, Some(id));
        return Step::Drop;
    }
    close(open.take(), kept, repairs);
    match super::role_of(&role) {
        // An opaque message (a role the format does not name) is kept as a system one is.
        Some(Role::System | Role::User) | None => Step::Keep(m),
        Some(Role::Assistant) => assistant(m, position, kept.len(), open, repairs),
        // A tool message was stepped above.
        Some(Role::Tool) => Step::Stop(m),
    }
}

/// An assistant message: its duplicate calls dropped, then itself if it is empty.
fn assistant(
    mut m: Value,
    position: usize,
    index: usize,
    open: &mut Option<Run>,
    repairs: &mut Vec<Repair>,
) -> Step {
    let Value::Object(map) = &mut m else {
        return Step::Stop(m);
    };
    let mut order: Vec<String> = Vec::new();
    let mut answered: BTreeMap<String, bool> = BTreeMap::new();
    match map.get_mut("tool_calls") {
        None | Some(Value::Null) => {}
        Some(Value::Array(calls)) => {
            let mut unique = Vec::with_capacity(calls.len());
            let mut rest = std::mem::take(calls).into_iter();
            let mut stopped = false;
            while let Some(call) = rest.next() {
                let Some(id) = call.get("id").and_then(Value::as_str) else {
                    unique.push(call);
                    unique.extend(rest.by_ref());
                    stopped = true;
                    break;
                };
                if answered.contains_key(id) {
                    record(
                        repairs,
                        RepairKind::DroppedDuplicateCall,
                        position,
                        Some(id),
                    );
                    continue;
                }
                answered.insert(id.to_owned(), false);
                order.push(id.to_owned());
                unique.push(call);
            }
            *calls = unique;
            if stopped {
                return Step::Stop(m);
            }
        }
        Some(_) => return Step::Stop(m),
    }
    if order.is_empty() && !has_payload(map) {
        record(repairs, RepairKind::DroppedEmptyMessage, position, None);
        return Step::Drop;
    }
    if !order.is_empty() {
        *open = Some(Run {
            index,
            position,
            order,
            answered,
        });
    }
    Step::Keep(m)
}

/// Whether an assistant message says something without calls (the empty-content rule's
/// reading): content, a refusal, an audio reply or a legacy function call.
fn has_payload(map: &Map<String, Value>) -> bool {
    !no_content(map) || own_payload(map)
}

/// Ends a run: its unanswered calls go, in order, then its message if nothing is left.
fn close(open: Option<Run>, kept: &mut Vec<Value>, repairs: &mut Vec<Repair>) {
    let Some(run) = open else {
        return;
    };
    let unanswered = run.order.iter().filter(|id| !run.answered[*id]).count();
    if unanswered == 0 {
        return;
    }
    for id in run.order.iter().filter(|id| !run.answered[*id]) {
        record(repairs, RepairKind::DroppedCall, run.position, Some(id));
    }
    let Some(Value::Object(map)) = kept.get_mut(run.index) else {
        return;
    };
    if let Some(Value::Array(calls)) = map.get_mut("tool_calls") {
        calls.retain(|c| {
            c.get("id")
                .and_then(Value::as_str)
                .is_some_and(|id| run.answered.get(id).copied().unwrap_or(true))
        });
        if calls.is_empty() {
            // An empty `tool_calls` is refused; without calls the key goes too.
            map.remove("tool_calls");
            // With every call unanswered the run has no result at all: the message is the
            // last one kept.
            if !has_payload(map) && run.index + 1 == kept.len() {
                kept.pop();
                record(repairs, RepairKind::DroppedEmptyMessage, run.position, None);
            }
        }
    }
}
