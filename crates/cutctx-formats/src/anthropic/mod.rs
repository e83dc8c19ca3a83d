//! Anthropic Messages: a request object with `messages` and optionally a top-level `system`,
//! or a bare `messages` array.
//!
//! # Mapping
//!
//! * the top-level `system` (a string or text blocks) is the system turn `system`;
//! * one turn per message, id `m{index}`, except user messages holding `tool_result` blocks:
//!   each such block is its own tool turn `m{index}.{block}`, and the message's other blocks
//!   (text after the results, images) one user turn `m{index}.{first block}`;
//! * an assistant message with `tool_use` blocks (one or several; its `thinking` blocks are in
//!   the same turn) opens an exchange keyed by its turn id; the turns of the next user message,
//!   which holds the results, join it;
//! * a mid-conversation `system` message, and a message of a role the format does not name
//!   (an opaque message), is a system turn `m{index}`: untouchable, kept in its place; a
//!   message holding a block carried untouched (`untouchable_block`: a `compaction` block, a
//!   tool-set change, a block type this crate does not know) has its turns pinned;
//! * the content is the text the model reads: text blocks, thinking, tool names and inputs,
//!   tool results; images and documents count
//!   [`MEDIA_TOKEN_ESTIMATE`](crate::MEDIA_TOKEN_ESTIMATE) tokens each, redacted thinking and
//!   signatures nothing.
//!
//! Rendering re-emits each kept message as it was (blocks, `cache_control` marks, unknown
//! fields); a masked `tool_result` keeps `tool_use_id`, `is_error` and `cache_control` and
//! carries the stub as its `content`; a summary is a user message with string content. Where
//! compaction makes two user or two assistant messages meet (a removal between them, or a
//! summary next to a user message), they are merged into one message, their blocks in order,
//! so roles alternate wherever cutctx changed something; a pinned message is never merged.
//! When the first remaining message would be an assistant or system message, or a system
//! message would follow an assistant message, the user message
//! [`LEAD_IN_TEXT`](crate::LEAD_IN_TEXT) goes before it.
//!
//! # Rules ([`validate`])
//!
//! `system` is a string or an array of text blocks; there is at least one message; messages
//! have a string role and string or block-array content, the first a user message; a `system`
//! message follows a user or system message (never an assistant message, so never between a
//! `tool_use` and its `tool_result`). Every `tool_use` of an assistant message has a `tool_result` with its id in the
//! next message, a user message; every `tool_result` answers a `tool_use` of the message right
//! before it, once; `tool_result` blocks open their message. Consecutive messages of one role
//! are accepted, as the provider accepts them (it combines them).

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Arc;

use cutctx_model::{Role, TranscriptTurn};
use cutctx_policies::TokenEstimator;
use serde_json::{Map, Value};

use crate::content::Text;
use crate::hand_read::{Lex, ReadMessage, Str, once};
use crate::ids::Ids;
use crate::mapping::{Built, Patch, Piece, Rendered, Source, TurnSource, ViewItem, message_id};
use crate::openai_chat::with_field;
use crate::provider_format::ProviderFormat;
use crate::tool_input;
use crate::validate::{Rule, Violation, shape};
use crate::{Format, FormatError};

const FORMAT: Format = Format::Anthropic;

mod build;
pub(crate) mod one_walk;
mod plain;
mod render;
mod repair;
mod rules;

pub(crate) use build::{Build, build};
pub(crate) use plain::Plain;
use plain::{Block, Content, Input};
pub(crate) use render::render;
pub use rules::validate;
pub(crate) use rules::{Check, system_shape};

/// Anthropic Messages, as the readers see it ([`ProviderFormat`]).
pub(crate) enum Anthropic {}

impl ProviderFormat for Anthropic {
    type Check = Check;
    type Build = Build;
    type Plain<'a> = Plain<'a>;

    crate::provider_format::delegations!();

    fn check_start(shell: &Value, n: usize) -> Result<Check, Violation> {
        system_shape(shell)?;
        Check::start(n)
    }
    fn check_value(check: &mut Check, i: usize, message: &Value) -> Result<(), Violation> {
        check.message(i, message)
    }
    fn check_plain(check: &mut Check, i: usize, message: &Plain<'_>) -> Option<()> {
        check.plain(i, message)
    }
    fn check_len(check: &mut Check, n: usize) {
        check.len = n;
    }
    fn build_start(
        shell: &Value,
        _n: usize,
        estimator: &dyn TokenEstimator,
    ) -> Result<Build, FormatError> {
        Build::start(shell, estimator)
    }
    fn build_value(
        build: &mut Build,
        i: usize,
        message: &Value,
        estimator: &dyn TokenEstimator,
    ) -> Result<(), FormatError> {
        build.message(i, message, estimator)
    }
    fn render(
        document: &Value,
        list: Option<Source<'_>>,
        turns: &[TranscriptTurn],
        sources: &[TurnSource],
        items: impl ExactSizeIterator<Item = Result<ViewItem, FormatError>>,
    ) -> Result<Rendered, FormatError> {
        let list = list.ok_or_else(|| crate::no_list(FORMAT, document))?;
        render(document, list, turns, sources, items)
    }
}

/// What a message of the list is, by its role: the one place Anthropic's roles are named.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    User,
    Assistant,
    /// A mid-conversation system message: instructions from that point on, untouchable.
    System,
    /// A role the format does not name: carried in its place, untouchable, never merged.
    Opaque,
}

impl Kind {
    /// The kind a `role` names, by the format's [roles](crate::descriptor::Roles::role_of).
    pub(crate) fn of(role: &str) -> Self {
        match FORMAT.descriptor().roles.role_of(role) {
            Some(Role::User) => Self::User,
            Some(Role::Assistant) => Self::Assistant,
            Some(Role::System) => Self::System,
            Some(Role::Tool) | None => Self::Opaque,
        }
    }

    /// The kind of `message`, by its `role` (a message without one is [`Kind::Opaque`]; the
    /// rules refuse it before anything asks).
    pub(crate) fn of_message(message: &Value) -> Self {
        Self::of(message.get("role").and_then(Value::as_str).unwrap_or(""))
    }
}

/// The block types cutctx reads, or carries knowing what they are; any other block type makes
/// its message untouchable ([`untouchable_block`]).
pub(crate) const KNOWN_BLOCKS: [&str; 22] = [
    "text",
    "image",
    "document",
    "search_result",
    TOOL_USE,
    TOOL_RESULT,
    "thinking",
    "redacted_thinking",
    "server_tool_use",
    "web_search_tool_result",
    "web_fetch_tool_result",
    "code_execution_tool_result",
    "bash_code_execution_tool_result",
    "text_editor_code_execution_tool_result",
    "tool_search_tool_result",
    "mcp_tool_use",
    "mcp_tool_result",
    "container_upload",
    "compaction",
    "tool_addition",
    "tool_removal",
    "tool_reference",
];

/// Why block `b` makes its message untouchable, if it does: a `compaction` block (the
/// provider's own summary, signed, which later requests carry first and byte-exact), a
/// `tool_addition` or `tool_removal` block (a change of the tool set from that point on), or
/// a block type this crate does not know (carried as it came, never summarized away).
pub(crate) fn untouchable_block(b: &Value) -> Option<&'static str> {
    match block_type(b) {
        "compaction" => Some("compaction"),
        "tool_addition" | "tool_removal" => Some("tool_change"),
        t if KNOWN_BLOCKS.contains(&t) => None,
        _ => Some("unknown_block"),
    }
}

/// Why `message` is carried untouched, if it is: a role the format does not name
/// (`unknown_role`), or a block that [`untouchable_block`] names. Mid-conversation system
/// messages are untouchable too, but they are a known role, not an opaque item.
pub(crate) fn opaque_reason(message: &Value) -> Option<&'static str> {
    if Kind::of_message(message) == Kind::Opaque {
        return Some("unknown_role");
    }
    blocks(message).iter().find_map(untouchable_block)
}

/// Whether `message` is the model's ([`crate::is_model_item`]): an assistant message.
pub(crate) fn is_model_message(message: &Value) -> bool {
    Kind::of_message(message) == Kind::Assistant
}

/// The block of an assistant message calling a tool.
pub(crate) const TOOL_USE: &str = "tool_use";
/// The block of a user message holding a tool's result.
pub(crate) const TOOL_RESULT: &str = "tool_result";
/// The field of a `tool_result` block naming the call it answers.
pub(crate) const TOOL_USE_ID: &str = "tool_use_id";

fn path(i: usize) -> String {
    format!("messages[{i}]")
}

fn messages(document: &Value) -> Result<&Vec<Value>, Violation> {
    let (list, path) = crate::mapping::messages_key(document, crate::list_key(FORMAT));
    match list {
        Some(Value::Array(items)) => Ok(items),
        _ => Err(Violation::new(FORMAT, Rule::Malformed, None, path)),
    }
}

/// The blocks of a message's content (none for string content).
fn blocks(m: &Value) -> &[Value] {
    m.get("content")
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

fn block_type(b: &Value) -> &str {
    b.get("type").and_then(Value::as_str).unwrap_or("")
}

/// The `tool_use_id` of the call that block `block` of `message` answers, when it is a
/// `tool_result` block.
pub(crate) fn answered_call(message: &Value, block: usize) -> Option<&str> {
    let b = blocks(message).get(block)?;
    (block_type(b) == TOOL_RESULT)
        .then(|| b.get(TOOL_USE_ID).and_then(Value::as_str))
        .flatten()
}

/// The block types Anthropic signs and checks against the request's prefix: a `thinking` block
/// (its `signature`) and a `redacted_thinking` block (its `data`).
pub(crate) const REASONING_BLOCKS: [&str; 2] = ["thinking", "redacted_thinking"];

/// Whether `block` is a thinking or redacted thinking block, whose bytes and place the
/// provider checks against the request's prefix (and on which no `cache_control` may sit).
///
/// ```
/// use cutctx_formats::anthropic::is_reasoning_block;
/// assert!(is_reasoning_block(&serde_json::json!({"type": "redacted_thinking", "data": "x"})));
/// assert!(!is_reasoning_block(&serde_json::json!({"type": "text", "text": "x"})));
/// ```
#[must_use]
pub fn is_reasoning_block(block: &Value) -> bool {
    REASONING_BLOCKS.contains(&block_type(block))
}

/// The reasoning blocks of `message`, in order: index, type, and the text a model reads (a
/// thinking block's `thinking`; nothing of a redacted one). Only an assistant message holds
/// reasoning: a message of a role cutctx does not know is carried untouched, its blocks too.
pub(crate) fn reasoning_blocks(
    message: &Value,
) -> impl Iterator<Item = (usize, &'static str, String)> + '_ {
    let assistant = message.get("role").and_then(Value::as_str) == Some("assistant");
    let held = if assistant { blocks(message) } else { &[] };
    held.iter().enumerate().filter_map(|(j, b)| {
        let kind = REASONING_BLOCKS.into_iter().find(|t| *t == block_type(b))?;
        let text = b
            .get("thinking")
            .and_then(Value::as_str)
            .unwrap_or_default();
        Some((j, kind, text.to_owned()))
    })
}

/// `message` without its reasoning blocks, every other block as it was; `None` when nothing is
/// left of its content.
pub(crate) fn without_reasoning(mut message: Value) -> Option<Value> {
    if let Some(Value::Array(content)) = message.get_mut("content") {
        content.retain(|b| !REASONING_BLOCKS.contains(&block_type(b)));
        if content.is_empty() {
            return None;
        }
    }
    Some(message)
}

/// Whether `document` asks for manual extended thinking (`"thinking": {"type": "enabled"}`),
/// under which Anthropic requires the final assistant turn of a tool loop in progress to start
/// with a thinking block ("a final `assistant` message must start with a thinking block");
/// adaptive thinking does not ("no assistant turn needs to start with one", *Building with
/// extended thinking*).
pub(crate) fn thinking_first_required(document: &Value) -> bool {
    document
        .get("thinking")
        .and_then(|t| t.get("type"))
        .and_then(Value::as_str)
        == Some("enabled")
}

/// Whether `message` is a user message answering tool calls: one with a `tool_result` block,
/// which continues the assistant turn before it (a tool loop in progress).
pub(crate) fn answers_tools(message: &Value) -> bool {
    tool_results(message).next().is_some()
}

/// The `tool_result` blocks of `message`, with their indices, when it is a user message (the
/// one place that says what an Anthropic tool result is, [`crate::Descriptor::tool_results`]).
pub(crate) fn tool_results(message: &Value) -> impl Iterator<Item = (usize, &Value)> {
    let user = Kind::of_message(message) == Kind::User;
    blocks(message)
        .iter()
        .enumerate()
        .filter(move |(_, b)| user && block_type(b) == TOOL_RESULT)
}

/// Whether `message` starts with a thinking or redacted thinking block.
pub(crate) fn starts_with_thinking(message: &Value) -> bool {
    blocks(message).first().is_some_and(is_reasoning_block)
}

/// `message` as what names it in a history ([`crate::history_form`]): without `cache_control`
/// marks, and content of one plain text block as its string. Borrowed when nothing differs.
pub(crate) fn history_form(message: &Value) -> Cow<'_, Value> {
    if !holds_mark(message) && !one_text_block(message) {
        return Cow::Borrowed(message);
    }
    let mut m = message.clone();
    strip_marks(&mut m);
    if one_text_block(&m)
        && let Some(content) = m.get_mut("content")
    {
        let text = content[0]["text"].clone();
        *content = text;
    }
    Cow::Owned(m)
}

/// Whether `message`'s content is one block holding only `type: text` and a string `text`
/// (with any `cache_control`, which [`history_form`] removes first).
fn one_text_block(message: &Value) -> bool {
    matches!(blocks(message), [Value::Object(b)]
        if b.get("type").and_then(Value::as_str) == Some("text")
            && b.get("text").is_some_and(Value::is_string)
            && b.keys().all(|k| matches!(k.as_str(), "type" | "text")))
}

/// Whether `value` holds a `cache_control` mark at any depth.
fn holds_mark(value: &Value) -> bool {
    match value {
        Value::Object(map) => map.contains_key("cache_control") || map.values().any(holds_mark),
        Value::Array(list) => list.iter().any(holds_mark),
        _ => false,
    }
}

fn strip_marks(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.remove("cache_control");
            map.values_mut().for_each(strip_marks);
        }
        Value::Array(list) => list.iter_mut().for_each(strip_marks),
        _ => {}
    }
}
