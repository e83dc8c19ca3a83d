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
//! * an item carried untouched (`untouchable_item`: a provider `compaction` item, a
//!   `compaction_trigger`, a configuration or tool change, an `item_reference`, a role or item
//!   type this crate does not know) is a model item whose turn is pinned, in its place;
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
//! Items are objects, each with a string `type` or a string message `role`. Every call has exactly one
//! output of the matching type with its `call_id` after it, with no user, system or developer
//! message in between, and every output such a call before it; a reasoning item is followed
//! directly by a model item (reasoning, an assistant message, a call, or another model item).

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use cutctx_model::{IdHashMap, Role, TranscriptTurn};
use cutctx_policies::TokenEstimator;
use serde_json::{Map, Value};

use crate::content::Text;
use crate::hand_read::{Lex, ReadMessage, Str, once};
use crate::mapping::{Built, MessageIds, Piece, Rendered, Source, TurnSource, ViewItem};
use crate::provider_format::ProviderFormat;
use crate::validate::{Rule, Violation, shape};
use crate::{Format, FormatError};

const FORMAT: Format = Format::OpenAiResponses;

mod build;
mod plain;
mod render;
mod repair;
mod rules;

pub(crate) use build::{Build, build};
pub(crate) use plain::Plain;
pub(crate) use render::render;
pub(crate) use rules::Check;
pub use rules::validate;

/// Responses, as the readers see it ([`ProviderFormat`]).
pub(crate) enum Responses {}

impl ProviderFormat for Responses {
    type Check = Check;
    type Build = Build;
    type Plain<'a> = Plain<'a>;

    crate::provider_format::delegations!();

    fn check_start(shell: &Value, _n: usize) -> Result<Check, Violation> {
        Check::start(shell)
    }
    fn check_value(check: &mut Check, i: usize, item: &Value) -> Result<(), Violation> {
        check.item(i, item)
    }
    /// Every hand-read item is judged alone.
    fn check_plain(check: &mut Check, i: usize, item: &Plain<'_>) -> Option<()> {
        check.plain(i, item);
        Some(())
    }
    fn build_start(
        shell: &Value,
        n: usize,
        estimator: &dyn TokenEstimator,
    ) -> Result<Build, FormatError> {
        Ok(Build::start(shell, estimator)?.sized(n))
    }
    /// The `instructions` turn put first, now that the request's fields are known.
    fn build_resume(
        build: Build,
        shell: &Value,
        estimator: &dyn TokenEstimator,
    ) -> Result<Build, FormatError> {
        build.finish_growing(shell, estimator)
    }
    fn build_value(
        build: &mut Build,
        i: usize,
        item: &Value,
        estimator: &dyn TokenEstimator,
    ) -> Result<(), FormatError> {
        build.item(i, item, estimator)
    }
    fn render(
        document: &Value,
        list: Option<Source<'_>>,
        turns: &[TranscriptTurn],
        sources: &[TurnSource],
        items: impl ExactSizeIterator<Item = Result<ViewItem, FormatError>>,
    ) -> Result<Rendered, FormatError> {
        render(document, list, turns, sources, items)
    }
}

/// The call item types whose results are `{type}_output` items with the same `call_id`.
pub const CALL_TYPES: [&str; 5] = [
    "function_call",
    "custom_tool_call",
    "computer_call",
    "shell_call",
    "apply_patch_call",
];

/// The outputs of the calls of [`CALL_TYPES`], in the same order: each call type with
/// `_output` appended, an item of its own with the call's `call_id`.
pub const OUTPUT_TYPES: [&str; 5] = [
    "function_call_output",
    "custom_tool_call_output",
    "computer_call_output",
    "shell_call_output",
    "apply_patch_call_output",
];

/// The field of a call, and of its output, naming the call.
pub(crate) const CALL_ID: &str = "call_id";

/// The turn role a message item's `role` names, from the format's
/// [descriptor](crate::descriptor::Roles::role_of); `None` for an opaque message (Responses
/// has no `tool` role: its results are items of their own).
fn role_of(name: &str) -> Option<Role> {
    FORMAT.descriptor().roles.role_of(name)
}

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
    Call(&'static str, &'a str),
    /// An output, by call type and `call_id`.
    Output(&'static str, &'a str),
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

    /// The same kind without its call id, to remember once the item is gone.
    const fn erased(self) -> Kind<'static> {
        match self {
            Self::Prompt(r) => Kind::Prompt(r),
            Self::Answer => Kind::Answer,
            Self::Reasoning => Kind::Reasoning,
            Self::Call(t, _) => Kind::Call(t, ""),
            Self::Output(t, _) => Kind::Output(t, ""),
            Self::Other => Kind::Other,
        }
    }
}

fn path(i: usize) -> String {
    format!("input[{i}]")
}

/// Whether `item` is a model item ([`crate::is_model_item`]): its [`Kind`] says so.
pub(crate) fn is_model_item(item: &Value) -> bool {
    kind(0, item).is_ok_and(|k| k.is_model_item())
}

/// Whether `item` is a call's output (of any type of [`CALL_TYPES`]).
pub(crate) fn is_output(item: &Value) -> bool {
    matches!(kind(0, item), Ok(Kind::Output(..)))
}

/// The `call_id` of the call `item` answers, when it is a call's output.
pub(crate) fn answered_call(item: &Value) -> Option<&str> {
    match kind(0, item) {
        Ok(Kind::Output(_, call_id)) => Some(call_id),
        _ => None,
    }
}

/// The text a model reads of `item` when it is a reasoning item (its `summary` and `content`
/// texts, one per line; empty for encrypted-only reasoning), `None` for any other item.
pub(crate) fn reasoning_text(item: &Value) -> Option<String> {
    if !matches!(kind(0, item), Ok(Kind::Reasoning)) {
        return None;
    }
    let texts = ["summary", "content"].into_iter().flat_map(|key| {
        item.get(key)
            .and_then(Value::as_array)
            .map_or(&[][..], Vec::as_slice)
            .iter()
            .filter_map(|part| part.get("text").and_then(Value::as_str))
    });
    Some(texts.collect::<Vec<_>>().join("\n"))
}

/// `item` without the `id` that ties it to a reasoning item left out, when it is a call or an
/// assistant message that has one; `None` when there is nothing to remove (any other item: an
/// `item_reference`'s `id` is the item it names). OpenAI refuses a
/// call or message whose `id` was produced with a reasoning item the request no longer carries
/// ("provided without its required 'reasoning' item"); the item's `id` is optional in a
/// request, and a call's `call_id`, which is kept, is what pairs it with its output.
///
/// An assistant message without its `id` is no longer an output message (whose schema
/// requires `id` and `status`, and alone allows `output_text` parts): it takes the shape the
/// API documents for an assistant message in the input, `role` and string `content`, its
/// `output_text` and `refusal` parts written as the text they hold, one after another
/// (`annotations` and `logprobs` describe that text and go with the parts), and no `status`.
pub(crate) fn unlinked(item: &Value) -> Option<Value> {
    let answer = match kind(0, item) {
        Ok(Kind::Answer) => true,
        Ok(Kind::Call(..)) => false,
        _ => return None,
    };
    let mut item = item.clone();
    let map = item.as_object_mut()?;
    map.remove("id")?;
    if answer {
        map.remove("status");
        if let Some(text) = map.get("content").and_then(output_parts_text) {
            map.insert("content".to_owned(), Value::String(text));
        }
    }
    Some(item)
}

/// The text of an assistant message's content when every part is an `output_text` or a
/// `refusal` part (`None` for string content or any other part).
fn output_parts_text(content: &Value) -> Option<String> {
    let parts = content.as_array()?;
    let mut text = String::new();
    for part in parts {
        let piece = match part.get("type").and_then(Value::as_str) {
            Some("output_text") => part.get("text"),
            Some("refusal") => part.get("refusal"),
            _ => None,
        };
        text.push_str(piece.and_then(Value::as_str)?);
    }
    Some(text)
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
    // A message: no `type`, or `"message"`.
    let Some(ty) = ty.filter(|&t| t != "message") else {
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
        return match role_of(role) {
            Some(Role::User) => Ok(Kind::Prompt(Role::User)),
            Some(Role::System) => Ok(Kind::Prompt(Role::System)),
            Some(Role::Assistant) => Ok(Kind::Answer),
            // A role the format does not name: an opaque item ([`untouchable_item`]), paired
            // and grouped as any other item the model's step may hold.
            Some(Role::Tool) | None => Ok(Kind::Other),
        };
    };
    if ty == "reasoning" {
        return Ok(Kind::Reasoning);
    }
    let call_id = || -> Result<&str, Violation> {
        map.get(CALL_ID).and_then(Value::as_str).ok_or_else(|| {
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
    if let Some(k) = OUTPUT_TYPES.iter().position(|o| *o == ty) {
        return Ok(Kind::Output(CALL_TYPES[k], call_id()?));
    }
    Ok(Kind::Other)
}

/// The item types cutctx reads, or carries knowing what they are; any other item type is
/// carried untouched ([`untouchable_item`]).
pub(crate) const KNOWN_ITEMS: [&str; 27] = [
    "message",
    "reasoning",
    "function_call",
    "function_call_output",
    "custom_tool_call",
    "custom_tool_call_output",
    "computer_call",
    "computer_call_output",
    "shell_call",
    "shell_call_output",
    "apply_patch_call",
    "apply_patch_call_output",
    "local_shell_call",
    "local_shell_call_output",
    "web_search_call",
    "file_search_call",
    "image_generation_call",
    "code_interpreter_call",
    "mcp_call",
    "mcp_list_tools",
    "mcp_approval_request",
    "mcp_approval_response",
    "tool_search_call",
    "tool_search_output",
    "item_reference",
    "compaction",
    "compaction_trigger",
];

/// Why `item` is carried untouched, if it is: a `compaction` item (the provider's own
/// summary, encrypted, readable only by the provider that made it), the `compaction_trigger`
/// that asks for one, a `configuration_update` or `additional_tools` item (a change of the
/// request's setup from that point on), an `item_reference` (a stored item, by id), a message
/// of a role the format does not name (`unknown_role`) or an item type this crate does not
/// know (`unknown_item`).
pub(crate) fn untouchable_item(item: &Value) -> Option<&'static str> {
    let ty = item.get("type").and_then(Value::as_str);
    match ty {
        None | Some("message") => {
            let role = item.get("role").and_then(Value::as_str).unwrap_or("");
            matches!(role_of(role), None | Some(Role::Tool)).then_some("unknown_role")
        }
        Some("compaction") => Some("compaction"),
        Some("compaction_trigger") => Some("compaction_trigger"),
        Some("configuration_update" | "additional_tools") => Some("configuration"),
        Some("item_reference") => Some("item_reference"),
        Some(t) if KNOWN_ITEMS.contains(&t) => None,
        Some(_) => Some("unknown_item"),
    }
}

/// Whether the request asks the provider to compact it: its last input item is a
/// `compaction_trigger` ("must be the final input item"). Such a request goes as it came.
pub(crate) fn asks_provider_to_compact(document: &Value) -> bool {
    matches!(input(document), Ok(Input::Items(items))
        if items.last().and_then(|i| i.get("type")).and_then(Value::as_str) == Some("compaction_trigger"))
}

/// The item list of a Responses document, and whether `input` is one string.
enum Input<'a> {
    Items(&'a Vec<Value>),
    Text(&'a str),
}

fn input(document: &Value) -> Result<Input<'_>, Violation> {
    let (list, path) = crate::mapping::messages_key(document, crate::list_key(FORMAT));
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
