//! OpenAI Responses: an `input` item list, or a request object holding `input` (a list or one
//! string) and optionally `instructions`.
//!
//! # Mapping
//!
//! * one turn per item, id `m{index}`; `instructions` is the system turn `instructions`, and an
//!   `input` string the user turn `m0`;
//! * message items map by role (`system`/`developer` → system, `user`, `assistant`); the call
//!   items (`function_call`, `custom_tool_call`, `computer_call`, `shell_call`,
//!   `apply_patch_call`) and `reasoning` and other model items are assistant turns; their
//!   `*_output` items are tool turns;
//! * one model step is one exchange, keyed by its first turn's id: a reasoning item, the
//!   items it precedes, the parallel calls of the step, and every output answering one of those
//!   calls (found by `call_id`, wherever it sits). A call after an output starts a new step,
//!   unless the step began with reasoning (then the calls are interleaved parallel calls);
//! * reasoning counts its summary and reasoning text (encrypted content counts nothing: the
//!   provider drops reasoning of earlier turns).
//!
//! Rendering re-emits each kept item as it was; a masked output keeps `call_id` and every
//! other field and carries the stub as its `output` (a masked message, as its `content`); a
//! summary is an assistant message item with string content.
//!
//! # Rules ([`validate`])
//!
//! Items are objects, each with a string `type` or a message `role`. Every call has exactly one
//! output of the matching type with its `call_id` after it, with no user, system or developer
//! message in between, and every output such a call before it; a reasoning item is followed
//! directly by a model item (reasoning, an assistant message, a call, or another model item).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use cutctx_model::{Role, TranscriptTurn};
use cutctx_policies::TokenEstimator;
use serde_json::{Map, Value};

use crate::content::Text;
use crate::mapping::{Built, Emit, Messages, TurnSource, ViewItem};
use crate::openai_chat::with_field;
use crate::validate::{Rule, Violation, shape};
use crate::{Format, FormatError};

const FORMAT: Format = Format::OpenAiResponses;

/// The call item types whose results are `{type}_output` items with the same `call_id`.
pub const CALL_TYPES: [&str; 5] = [
    "function_call",
    "custom_tool_call",
    "computer_call",
    "shell_call",
    "apply_patch_call",
];

/// What an item is, for pairing and grouping.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind<'a> {
    /// A user, system or developer message: it closes a model step.
    Prompt(Role),
    /// An assistant message.
    Answer,
    /// A reasoning item.
    Reasoning,
    /// A call, by type and `call_id`.
    Call(&'a str, &'a str),
    /// An output, by call type and `call_id`.
    Output(&'a str, &'a str),
    /// Any other item (web search, image generation, item references...): a model item.
    Other,
}

impl Kind<'_> {
    /// Whether the item may follow a reasoning item: reasoning, an answer, a call, or another
    /// model item (not an output, not a prompt).
    pub(crate) const fn is_model_item(&self) -> bool {
        matches!(
            self,
            Self::Reasoning | Self::Answer | Self::Call(..) | Self::Other
        )
    }
}

fn path(i: usize) -> String {
    format!("input[{i}]")
}

/// The kind of item `i`, or the shape violation that hides it.
pub(crate) fn kind(i: usize, item: &Value) -> Result<Kind<'_>, Violation> {
    let Value::Object(map) = item else {
        return Err(Violation::new(FORMAT, Rule::Malformed, Some(i), path(i)));
    };
    let ty = match map.get("type") {
        None => None,
        Some(Value::String(t)) => Some(t.as_str()),
        Some(_) => {
            return Err(Violation::new(
                FORMAT,
                Rule::Malformed,
                Some(i),
                format!("{}.type", path(i)),
            ));
        }
    };
    if ty.is_none() || ty == Some("message") {
        let role = map.get("role").and_then(Value::as_str);
        let Some(role) = role else {
            return Err(Violation::new(
                FORMAT,
                Rule::Malformed,
                Some(i),
                format!("{}.role", path(i)),
            ));
        };
        if let Some(c) = map.get("content") {
            shape(
                matches!(c, Value::String(_) | Value::Array(_)),
                FORMAT,
                Some(i),
                || format!("{}.content", path(i)),
            )?;
        }
        return match role {
            "user" => Ok(Kind::Prompt(Role::User)),
            "system" | "developer" => Ok(Kind::Prompt(Role::System)),
            "assistant" => Ok(Kind::Answer),
            _ => Err(Violation::new(
                FORMAT,
                Rule::UnknownRole,
                Some(i),
                format!("{}.role", path(i)),
            )),
        };
    }
    let ty = ty.unwrap_or_default();
    if ty == "reasoning" {
        return Ok(Kind::Reasoning);
    }
    let call_id = || -> Result<&str, Violation> {
        map.get("call_id").and_then(Value::as_str).ok_or_else(|| {
            Violation::new(
                FORMAT,
                Rule::Malformed,
                Some(i),
                format!("{}.call_id", path(i)),
            )
        })
    };
    if let Some(call) = CALL_TYPES.iter().find(|c| **c == ty) {
        return Ok(Kind::Call(call, call_id()?));
    }
    if let Some(call) = ty
        .strip_suffix("_output")
        .and_then(|base| CALL_TYPES.iter().find(|c| **c == base))
    {
        return Ok(Kind::Output(call, call_id()?));
    }
    Ok(Kind::Other)
}

/// The item list of a Responses document, and whether `input` is one string.
enum Input<'a> {
    Items(&'a Vec<Value>),
    Text(&'a str),
}

fn input(document: &Value) -> Result<Input<'_>, Violation> {
    let (list, path) = crate::mapping::messages_key(document, "input");
    match list {
        Some(Value::Array(items)) => Ok(Input::Items(items)),
        Some(Value::String(s)) if document.is_object() => Ok(Input::Text(s)),
        _ => Err(Violation::new(FORMAT, Rule::Malformed, None, path)),
    }
}

/// The request's `instructions`, when it has some.
fn instructions(document: &Value) -> Result<Option<&str>, Violation> {
    match document.get("instructions") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(Violation::new(
            FORMAT,
            Rule::Malformed,
            None,
            "instructions".into(),
        )),
    }
}

/// Checks a Responses document against the provider's structural rules.
///
/// # Errors
///
/// The first [`Violation`], in document order.
pub fn validate(document: &Value) -> Result<(), Violation> {
    if document.is_object() {
        instructions(document)?;
    }
    let Input::Items(items) = input(document)? else {
        return Ok(());
    };
    let kinds = items
        .iter()
        .enumerate()
        .map(|(i, item)| kind(i, item))
        .collect::<Result<Vec<_>, _>>()?;
    // Calls awaiting their output since the last prompt: call_id -> (type, index).
    let mut pending: BTreeMap<&str, (&str, usize)> = BTreeMap::new();
    // Calls answered since the last prompt.
    let mut answered: BTreeSet<&str> = BTreeSet::new();
    for (i, k) in kinds.iter().enumerate() {
        if !matches!(k, Kind::Output(..))
            && items
                .get(i)
                .and_then(|item| item.get("status"))
                .is_some_and(Value::is_null)
        {
            return Err(Violation::new(
                FORMAT,
                Rule::NullStatus,
                Some(i),
                format!("{}.status", path(i)),
            ));
        }
        match *k {
            Kind::Prompt(_) => {
                unanswered(&pending)?;
                pending.clear();
                answered.clear();
            }
            Kind::Call(ty, id) => {
                if pending.contains_key(id) || answered.contains(id) {
                    return Err(Violation::new(
                        FORMAT,
                        Rule::DuplicateCallId,
                        Some(i),
                        format!("{}.call_id", path(i)),
                    )
                    .with_id(id));
                }
                pending.insert(id, (ty, i));
            }
            Kind::Output(ty, id) => match pending.get(id) {
                Some((call_ty, _)) if *call_ty == ty => {
                    pending.remove(id);
                    answered.insert(id);
                }
                _ => {
                    let rule = if answered.contains(id) {
                        Rule::DuplicateResult
                    } else {
                        Rule::ResultWithoutCall
                    };
                    return Err(Violation::new(
                        FORMAT,
                        rule,
                        Some(i),
                        format!("{}.call_id", path(i)),
                    )
                    .with_id(id));
                }
            },
            Kind::Reasoning => {
                let follows = kinds.get(i + 1).is_some_and(Kind::is_model_item);
                if !follows {
                    return Err(Violation::new(
                        FORMAT,
                        Rule::ReasoningWithoutFollowingItem,
                        Some(i),
                        path(i),
                    ));
                }
            }
            Kind::Answer | Kind::Other => {}
        }
    }
    unanswered(&pending)
}

fn unanswered(pending: &BTreeMap<&str, (&str, usize)>) -> Result<(), Violation> {
    match pending.iter().min_by_key(|(_, (_, i))| *i) {
        Some((id, (_, i))) => Err(Violation::new(
            FORMAT,
            Rule::CallWithoutResult,
            Some(*i),
            format!("{}.call_id", path(*i)),
        )
        .with_id(id)),
        None => Ok(()),
    }
}

/// The model step being read: its key, whether it began with reasoning, and the kind of its
/// last item.
struct Step<'a> {
    key: Arc<str>,
    reasoning: bool,
    last: Kind<'a>,
}

/// Maps a valid Responses document to turns.
pub(crate) fn build(
    document: &Value,
    estimator: &dyn TokenEstimator,
) -> Result<Built, FormatError> {
    let mut built = Built::default();
    if let Some(text) = instructions(document)? {
        let mut t = Text::default();
        t.push(text);
        let (content, estimate) = t.finish(estimator);
        built.push(
            TranscriptTurn::new("instructions", Role::System, content, estimate)?,
            TurnSource::System,
        );
    }
    let items = match input(document)? {
        Input::Text(s) => {
            let mut t = Text::default();
            t.push(s);
            let (content, estimate) = t.finish(estimator);
            built.push(
                TranscriptTurn::new("m0", Role::User, content, estimate)?,
                TurnSource::InputText,
            );
            return Ok(built);
        }
        Input::Items(items) => items,
    };
    // call_id -> the key of the step that made the call (the latest wins).
    let mut calls: BTreeMap<&str, Arc<str>> = BTreeMap::new();
    // The keys of the steps that began with reasoning.
    let mut reasoning_steps: BTreeSet<Arc<str>> = BTreeSet::new();
    let mut step: Option<Step<'_>> = None;
    for (i, item) in items.iter().enumerate() {
        let id = format!("m{i}");
        let k = kind(i, item)?;
        let mut text = Text::default();
        let (role, key) = match k {
            Kind::Prompt(role) => {
                step = None;
                text.push_content(item.get("content").unwrap_or(&Value::Null));
                (role, None)
            }
            Kind::Output(_, call_id) => {
                text.push_content(item.get("output").unwrap_or(&Value::Null));
                let key = calls.get(call_id).cloned();
                // The open step is the step of the previous item.
                step = key.as_ref().map(|key| Step {
                    key: Arc::clone(key),
                    reasoning: reasoning_steps.contains(key),
                    last: k,
                });
                (Role::Tool, key)
            }
            Kind::Reasoning | Kind::Call(..) | Kind::Answer | Kind::Other => {
                model_text(&mut text, item);
                let joins = step.as_ref().is_some_and(|s| match (s.last, k) {
                    // Consecutive reasoning, or whatever the reasoning precedes.
                    (Kind::Reasoning, _) => true,
                    // A new reasoning item is a new step.
                    (_, Kind::Reasoning) => false,
                    // Parallel calls, and items of the step after its calls.
                    (Kind::Call(..) | Kind::Answer | Kind::Other, _) => true,
                    // A call after an output: interleaved parallel calls of a reasoning step.
                    (Kind::Output(..), Kind::Call(..)) => s.reasoning,
                    _ => false,
                });
                let grouped = matches!(k, Kind::Reasoning | Kind::Call(..));
                let key = match step.as_mut() {
                    Some(s) if joins => {
                        s.last = k;
                        Some(Arc::clone(&s.key))
                    }
                    _ if grouped => {
                        let key: Arc<str> = Arc::from(id.as_str());
                        if k == Kind::Reasoning {
                            reasoning_steps.insert(Arc::clone(&key));
                        }
                        step = Some(Step {
                            key: Arc::clone(&key),
                            reasoning: k == Kind::Reasoning,
                            last: k,
                        });
                        Some(key)
                    }
                    _ => {
                        step = None;
                        None
                    }
                };
                if let (Kind::Call(_, call_id), Some(key)) = (k, &key) {
                    calls.insert(call_id, Arc::clone(key));
                }
                (Role::Assistant, key)
            }
        };
        let (content, estimate) = text.finish(estimator);
        let turn = TranscriptTurn::new(id, role, content, estimate)?.with_tool_call_id_opt(key);
        built.push(turn, TurnSource::Message(i));
    }
    Ok(built)
}

/// The text of a model item: message content, reasoning summaries, call names and arguments.
fn model_text(text: &mut Text, item: &Value) {
    if let Some(c) = item.get("content") {
        text.push_content(c);
    }
    if let Some(Value::Array(summary)) = item.get("summary") {
        for part in summary {
            text.push_part(part);
        }
    }
    for key in ["name", "arguments", "input", "action", "operation", "query"] {
        if let Some(v) = item.get(key) {
            text.push_json(v);
        }
    }
}

/// Renders the view items of a Responses transcript back into a document of the input's shape.
pub(crate) fn render(
    document: &Value,
    mut listed: Option<Messages<'_>>,
    sources: &[TurnSource],
    items: &[ViewItem],
) -> Result<Value, FormatError> {
    let mut doc = crate::mapping::shell(document, "input");
    let mut out: Vec<Value> = Vec::with_capacity(items.len());
    let mut instructions_kept = false;
    let mut only_input_text = true;
    for item in items {
        match item {
            ViewItem::Source { position, stub } => match sources.get(*position) {
                Some(TurnSource::System) => {
                    instructions_kept = true;
                    if let (Some(stub), Value::Object(map)) = (stub, &mut doc) {
                        map.insert("instructions".into(), Value::from(&**stub));
                    }
                }
                Some(TurnSource::InputText) => {
                    let text = match (stub, document.get("input")) {
                        (Some(stub), _) => Value::from(&**stub),
                        (None, Some(v)) => v.clone(),
                        (None, None) => Value::from(""),
                    };
                    only_input_text &= stub.is_none();
                    let mut m = Map::new();
                    m.insert("role".into(), Value::from("user"));
                    m.insert("content".into(), text);
                    out.push(Value::Object(m));
                }
                Some(TurnSource::Message(i)) => {
                    only_input_text = false;
                    let value = match (stub, listed.as_mut()) {
                        (None, Some(l)) => l.take(*i),
                        (Some(stub), Some(l)) => {
                            l.get(*i).map(|o| masked(*i, o, stub)).transpose()?
                        }
                        (_, None) => None,
                    };
                    out.push(value.ok_or_else(|| crate::mapping::bad_position(*position))?);
                }
                _ => return Err(crate::mapping::bad_position(*position)),
            },
            ViewItem::Summary { text } => {
                only_input_text = false;
                out.push(summary_item(text));
            }
        }
    }
    if !instructions_kept && let Value::Object(map) = &mut doc {
        map.remove("instructions");
    }
    if listed.is_none() && only_input_text && out.len() == 1 {
        // The input string, kept: the document as it was.
        return Ok(doc);
    }
    if out.is_empty() {
        out.push(crate::mapping::lead_in_message());
    }
    Ok(Emit::replace(&doc, "input", out))
}

/// Item `i` with the stub in place of its payload.
fn masked(i: usize, original: &Value, stub: &str) -> Result<Value, FormatError> {
    let k = kind(i, original)?;
    match k {
        Kind::Output(..) => Ok(with_field(original, "output", Value::from(stub))),
        Kind::Prompt(_) | Kind::Answer => Ok(with_field(original, "content", Value::from(stub))),
        _ => Err(FormatError::unsupported(
            format!(
                "Item {i} is masked, but only messages and tool outputs have a payload a stub \
                 can replace."
            ),
            cutctx_model::details! { "index" => i, "format" => FORMAT.as_str() },
        )),
    }
}

/// A summary, as Responses spells it: an assistant message item with string content.
fn summary_item(text: &str) -> Value {
    let mut m = Map::new();
    m.insert("type".into(), Value::from("message"));
    m.insert("role".into(), Value::from("assistant"));
    m.insert("content".into(), Value::from(text));
    Value::Object(m)
}
