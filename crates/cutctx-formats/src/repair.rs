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
        *list = match format {
            Format::OpenAiChat => chat::repair(items, &mut repairs),
            Format::OpenAiResponses => responses::repair(items, &mut repairs),
            Format::Anthropic => anthropic::repair(items, &mut repairs),
        };
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

/// Records one drop.
fn record(repairs: &mut Vec<Repair>, kind: RepairKind, position: usize, id: Option<&str>) {
    repairs.push(Repair {
        kind,
        position,
        id: id.map(str::to_owned),
    });
}

/// Chat: one walk over the messages, with the validator's state (the calls the current run of
/// `tool` messages may answer).
mod chat {
    use std::collections::BTreeMap;

    use serde_json::{Map, Value};

    use super::{RepairKind, record};
    use crate::Repair;
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

    pub(super) fn repair(items: Vec<Value>, repairs: &mut Vec<Repair>) -> Vec<Value> {
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
        let content_ok = map
            .get("content")
            .is_none_or(|c| matches!(c, Value::String(_) | Value::Array(_) | Value::Null));
        if !content_ok {
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
        match crate::roles::openai_role(&role) {
            Some(Role::System | Role::User) => Step::Keep(m),
            Some(Role::Assistant) => assistant(m, position, kept.len(), open, repairs),
            // A tool message was stepped above.
            Some(Role::Tool) | None => Step::Stop(m),
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

    /// Whether an assistant message says something without calls: content, a refusal, an
    /// audio reply or a legacy function call.
    fn has_payload(map: &Map<String, Value>) -> bool {
        let content = match map.get("content") {
            None | Some(Value::Null) => false,
            Some(Value::Array(parts)) => !parts.is_empty(),
            Some(_) => true,
        };
        content
            || ["function_call", "refusal", "audio"]
                .iter()
                .any(|k| map.get(*k).is_some_and(|v| !v.is_null()))
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
}

/// Responses: one walk over the items, with the validator's state (calls pending and answered
/// since the last prompt), the dropped items unlinked so that a reasoning item always sees
/// the item now after it.
mod responses {
    use std::collections::{BTreeMap, BTreeSet};

    use serde_json::Value;

    use super::{RepairKind, record};
    use crate::Repair;
    use crate::openai_responses::{Kind, kind};

    /// The items still in the list, as a doubly linked list over input positions (`None` at
    /// either end).
    struct Links {
        prev: Vec<Option<usize>>,
        next: Vec<Option<usize>>,
        alive: Vec<bool>,
    }

    impl Links {
        fn new(n: usize) -> Self {
            Self {
                prev: (0..n).map(|i| i.checked_sub(1)).collect(),
                next: (0..n).map(|i| Some(i + 1).filter(|j| *j < n)).collect(),
                alive: vec![true; n],
            }
        }

        fn unlink(&mut self, i: usize) {
            let (p, n) = (self.prev[i], self.next[i]);
            if let Some(p) = p {
                self.next[p] = n;
            }
            if let Some(n) = n {
                self.prev[n] = p;
            }
            self.alive[i] = false;
        }
    }

    pub(super) fn repair(items: Vec<Value>, repairs: &mut Vec<Repair>) -> Vec<Value> {
        let Ok(kinds) = items
            .iter()
            .enumerate()
            .map(|(i, item)| kind(i, item))
            .collect::<Result<Vec<_>, _>>()
        else {
            // A shape error: the validator names it.
            return items;
        };
        let mut links = Links::new(items.len());
        let mut null_status = vec![false; items.len()];
        {
            let mut drop = |i: usize, what: RepairKind, id: Option<&str>| {
                drop_item(&kinds, &mut links, repairs, i, what, id);
            };
            let mut pending: BTreeMap<&str, (&str, usize)> = BTreeMap::new();
            let mut answered: BTreeSet<&str> = BTreeSet::new();
            for (i, k) in kinds.iter().enumerate() {
                if !matches!(k, Kind::Output(..))
                    && items[i].get("status").is_some_and(Value::is_null)
                {
                    // Only the field goes; `drop_item` records it and unlinks nothing.
                    null_status[i] = true;
                    drop(i, RepairKind::DroppedNullStatus, None);
                }
                match *k {
                    Kind::Prompt(_) => {
                        unanswered(&pending, &mut drop);
                        pending.clear();
                        answered.clear();
                    }
                    Kind::Call(ty, id) => {
                        if pending.contains_key(id) || answered.contains(id) {
                            drop(i, RepairKind::DroppedDuplicateCall, Some(id));
                        } else {
                            pending.insert(id, (ty, i));
                        }
                    }
                    Kind::Output(ty, id) => match pending.get(id) {
                        Some((call_ty, _)) if *call_ty == ty => {
                            pending.remove(id);
                            answered.insert(id);
                        }
                        _ => drop(i, RepairKind::DroppedResult, Some(id)),
                    },
                    Kind::Reasoning => {
                        // Nothing after `i` is dropped yet: the next item is the input's.
                        if !kinds.get(i + 1).is_some_and(Kind::is_model_item) {
                            drop(i, RepairKind::DroppedReasoning, None);
                        }
                    }
                    Kind::Answer | Kind::Other => {}
                }
            }
            unanswered(&pending, &mut drop);
        }
        let alive = links.alive;
        items
            .into_iter()
            .zip(alive.into_iter().zip(null_status))
            .filter(|(_, (alive, _))| *alive)
            .map(|(mut item, (_, null))| {
                if null && let Value::Object(map) = &mut item {
                    map.remove("status");
                }
                item
            })
            .collect()
    }

    /// The calls still pending at a prompt or at the end go, earliest first.
    fn unanswered(
        pending: &BTreeMap<&str, (&str, usize)>,
        drop: &mut impl FnMut(usize, RepairKind, Option<&str>),
    ) {
        let mut calls: Vec<(usize, &str)> = pending.iter().map(|(id, (_, i))| (*i, *id)).collect();
        calls.sort_unstable();
        for (i, id) in calls {
            drop(i, RepairKind::DroppedCall, Some(id));
        }
    }

    /// Drops item `i` (or, for a null status, only records it) and then each reasoning item
    /// the drop leaves without a model item after it, nearest first.
    fn drop_item(
        kinds: &[Kind<'_>],
        links: &mut Links,
        repairs: &mut Vec<Repair>,
        i: usize,
        what: RepairKind,
        id: Option<&str>,
    ) {
        record(repairs, what, i, id);
        if what == RepairKind::DroppedNullStatus {
            return;
        }
        links.unlink(i);
        let follows = links.next[i].is_some_and(|n| kinds[n].is_model_item());
        let mut before = links.prev[i];
        while let Some(p) = before
            && kinds[p] == Kind::Reasoning
            && !follows
        {
            record(repairs, RepairKind::DroppedReasoning, p, None);
            links.unlink(p);
            before = links.prev[p];
        }
    }
}

/// Anthropic: one walk over the messages, with the validator's state (the `tool_use` ids of
/// the previous message).
mod anthropic {
    use std::collections::BTreeSet;

    use serde_json::Value;

    use super::{RepairKind, record};
    use crate::Repair;

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

    pub(super) fn repair(items: Vec<Value>, repairs: &mut Vec<Repair>) -> Vec<Value> {
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
        // An unknown role, or a first message that is not a user message.
        if !user && (role != "assistant" || kept.is_empty()) {
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
                    "tool_result" => match b.get("tool_use_id").and_then(Value::as_str) {
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
                    "tool_use" => match b.get("id").and_then(Value::as_str) {
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
            !(block_type(b) == "tool_use"
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
}
