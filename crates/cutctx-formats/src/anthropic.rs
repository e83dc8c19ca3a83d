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
//! * the content is the text the model reads: text blocks, thinking, tool names and inputs,
//!   tool results; images and documents count
//!   [`MEDIA_TOKEN_ESTIMATE`](crate::MEDIA_TOKEN_ESTIMATE) tokens each, redacted thinking and
//!   signatures nothing.
//!
//! Rendering re-emits each kept message as it was (blocks, `cache_control` marks, unknown
//! fields); a masked `tool_result` keeps `tool_use_id`, `is_error` and `cache_control` and
//! carries the stub as its `content`; a summary is a user message with string content. Where
//! compaction makes two messages of one role meet (a removal between them, or a summary next to
//! a user message), they are merged into one message, their blocks in order, so roles alternate
//! wherever cutctx changed something; when the first remaining message would be an assistant
//! message, the user message [`LEAD_IN_TEXT`](crate::LEAD_IN_TEXT) opens the request.
//!
//! # Rules ([`validate`])
//!
//! `system` is a string or an array of text blocks; there is at least one message; messages
//! are `user` or `assistant` messages with string or block-array content, the first a user
//! message. Every `tool_use` of an assistant message has a `tool_result` with its id in the
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
use crate::tool_input;
use crate::validate::{Rule, Violation, shape};
use crate::{Format, FormatError};

const FORMAT: Format = Format::Anthropic;

/// Whether `message` is the model's ([`crate::is_model_item`]): an assistant message.
pub(crate) fn is_model_message(message: &Value) -> bool {
    message.get("role").and_then(Value::as_str) == Some("assistant")
}

fn path(i: usize) -> String {
    format!("messages[{i}]")
}

fn messages(document: &Value) -> Result<&Vec<Value>, Violation> {
    let (list, path) = crate::mapping::messages_key(document, "messages");
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
    (block_type(b) == "tool_result")
        .then(|| b.get("tool_use_id").and_then(Value::as_str))
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
/// thinking block's `thinking`; nothing of a redacted one).
pub(crate) fn reasoning_blocks(
    message: &Value,
) -> impl Iterator<Item = (usize, &'static str, String)> + '_ {
    blocks(message).iter().enumerate().filter_map(|(j, b)| {
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
    message.get("role").and_then(Value::as_str) == Some("user")
        && blocks(message)
            .iter()
            .any(|b| block_type(b) == "tool_result")
}

/// Whether `message` starts with a thinking or redacted thinking block.
pub(crate) fn starts_with_thinking(message: &Value) -> bool {
    blocks(message).first().is_some_and(is_reasoning_block)
}

/// Checks an Anthropic document against the provider's structural rules.
///
/// # Errors
///
/// The first [`Violation`], in document order.
pub fn validate(document: &Value) -> Result<(), Violation> {
    system_shape(document)?;
    let list = messages(document)?;
    let mut check = Check::start(list.len())?;
    for (i, m) in list.iter().enumerate() {
        check.message(i, m)?;
    }
    check.finish()
}

/// The shape of the top-level `system`: a string or text blocks.
pub(crate) fn system_shape(document: &Value) -> Result<(), Violation> {
    if let Some(system) = document.as_object().and_then(|d| d.get("system")) {
        let ok = match system {
            Value::Null | Value::String(_) => true,
            Value::Array(blocks) => blocks
                .iter()
                .all(|b| block_type(b) == "text" && b.get("text").is_some_and(Value::is_string)),
            _ => false,
        };
        shape(ok, FORMAT, None, || "system".into())?;
    }
    Ok(())
}

/// What [`Check::rules`] reads of a content block, from either reader: a result or a call by
/// its id (`None` when it has none), or any other block.
enum BlockFact<'m> {
    Result(Option<&'m str>),
    Use(Option<&'m str>),
    Other,
}

/// The rules, message by message: [`validate`] over a document, and the text path over one
/// parsed message at a time.
#[derive(Debug)]
pub(crate) struct Check {
    /// How many messages the list holds: a final assistant message may be empty.
    len: usize,
    /// The tool_use ids of the previous message, when it was an assistant message with calls
    /// (a message of many parallel calls costs no more than its length).
    open: Option<(usize, Ids<String>)>,
}

impl Check {
    /// A check of a list of `len` messages: at least one.
    pub(crate) fn start(len: usize) -> Result<Self, Violation> {
        if len == 0 {
            return Err(Violation::new(
                FORMAT,
                Rule::NoMessages,
                None,
                "messages".into(),
            ));
        }
        Ok(Self { len, open: None })
    }

    /// A check of a list whose length is not known yet: as [`Check::start`] of a list longer
    /// than any, so that it takes no empty final assistant message (a prefill), which only a
    /// known length allows. Whatever it accepts, a check of the list's true length accepts.
    pub(crate) const fn open_ended() -> Self {
        Self {
            len: usize::MAX,
            open: None,
        }
    }

    /// Message `i`, in order: its value's shape, then [`Check::rules`].
    pub(crate) fn message(&mut self, i: usize, m: &Value) -> Result<(), Violation> {
        let Value::Object(map) = m else {
            return Err(Violation::new(FORMAT, Rule::Malformed, Some(i), path(i)));
        };
        let Some(role) = map.get("role").and_then(Value::as_str) else {
            return Err(Violation::new(
                FORMAT,
                Rule::Malformed,
                Some(i),
                format!("{}.role", path(i)),
            ));
        };
        let content = map.get("content");
        shape(
            matches!(content, Some(Value::String(_) | Value::Array(_))),
            FORMAT,
            Some(i),
            || format!("{}.content", path(i)),
        )?;
        for (j, b) in blocks(m).iter().enumerate() {
            shape(
                b.get("type").is_some_and(Value::is_string),
                FORMAT,
                Some(i),
                || format!("{}.content[{j}].type", path(i)),
            )?;
        }
        let empty = match content {
            Some(Value::String(s)) => s.is_empty(),
            Some(Value::Array(b)) => b.is_empty(),
            _ => false,
        };
        let facts = blocks(m).iter().map(|b| match block_type(b) {
            "tool_result" => BlockFact::Result(b.get("tool_use_id").and_then(Value::as_str)),
            "tool_use" => BlockFact::Use(b.get("id").and_then(Value::as_str)),
            _ => BlockFact::Other,
        });
        self.rules(i, role, empty, facts)
    }

    /// Message `i`, in order, read as a [`Plain`] message: [`Check::rules`] over what it holds.
    /// `None` when the message breaks a rule (the check's state is then as it was), and for an
    /// empty message, which the value path reads (a final assistant prefill, allowed only when
    /// the list's length is known): the caller checks its value, which says what is wrong.
    pub(crate) fn plain(&mut self, i: usize, m: &Plain<'_>) -> Option<()> {
        if m.content.is_empty() {
            return None;
        }
        let facts = m.content.blocks().iter().map(|b| match b {
            Block::ToolResult { id, .. } => BlockFact::Result(Some(id)),
            Block::ToolUse { id, .. } => BlockFact::Use(Some(id)),
            Block::Text(_) => BlockFact::Other,
        });
        self.rules(i, &m.role, false, facts).ok()
    }

    /// The format's rules on message `i`, whichever reader read it: roles `user` and
    /// `assistant`, a `user` first; content unless it is the final assistant message; the
    /// results of the previous message's calls first in a user message, each once, every
    /// call answered; `tool_use` only from the assistant, its ids distinct. The state changes
    /// only when the message passes.
    fn rules<'m>(
        &mut self,
        i: usize,
        role: &str,
        empty: bool,
        blocks: impl Iterator<Item = BlockFact<'m>>,
    ) -> Result<(), Violation> {
        if role != "user" && role != "assistant" {
            return Err(Violation::new(
                FORMAT,
                Rule::UnknownRole,
                Some(i),
                format!("{}.role", path(i)),
            ));
        }
        if i == 0 && role != "user" {
            return Err(Violation::new(
                FORMAT,
                Rule::FirstMessageNotUser,
                Some(0),
                format!("{}.role", path(0)),
            ));
        }
        // The provider allows an empty final assistant message (a prefill to continue from).
        if empty && !(role == "assistant" && i + 1 == self.len) {
            return Err(Violation::new(
                FORMAT,
                Rule::EmptyContent,
                Some(i),
                format!("{}.content", path(i)),
            ));
        }
        let calls = self.open.as_ref();
        let mut answered: Ids<&str> = Ids::default();
        let mut seen_other = false;
        let mut uses: Ids<String> = Ids::default();
        for (j, b) in blocks.enumerate() {
            let at = || format!("{}.content[{j}]", path(i));
            match b {
                BlockFact::Result(id) => {
                    let Some(id) = id else {
                        return Err(Violation::new(
                            FORMAT,
                            Rule::Malformed,
                            Some(i),
                            format!("{}.tool_use_id", at()),
                        ));
                    };
                    let known = role == "user" && calls.is_some_and(|(_, set)| set.contains(id));
                    if !known {
                        return Err(
                            Violation::new(FORMAT, Rule::ResultWithoutCall, Some(i), at())
                                .with_id(id),
                        );
                    }
                    if !answered.insert(id) {
                        return Err(Violation::new(FORMAT, Rule::DuplicateResult, Some(i), at())
                            .with_id(id));
                    }
                    if seen_other {
                        return Err(Violation::new(
                            FORMAT,
                            Rule::ToolResultNotFirst,
                            Some(i),
                            at(),
                        )
                        .with_id(id));
                    }
                }
                BlockFact::Use(id) => {
                    let Some(id) = id else {
                        return Err(Violation::new(
                            FORMAT,
                            Rule::Malformed,
                            Some(i),
                            format!("{}.id", at()),
                        ));
                    };
                    if role != "assistant" {
                        return Err(Violation::new(
                            FORMAT,
                            Rule::Malformed,
                            Some(i),
                            format!("{}.type", at()),
                        ));
                    }
                    if !uses.insert(id.to_owned()) {
                        return Err(Violation::new(FORMAT, Rule::DuplicateCallId, Some(i), at())
                            .with_id(id));
                    }
                    seen_other = true;
                }
                BlockFact::Other => seen_other = true,
            }
        }
        if let Some((at, ids)) = calls
            && let Some(id) = ids.iter().find(|id| !answered.contains(id.as_str()))
        {
            return Err(
                Violation::new(FORMAT, Rule::CallWithoutResult, Some(*at), path(*at)).with_id(id),
            );
        }
        self.open = (!uses.is_empty()).then_some((i, uses));
        Ok(())
    }

    /// The end of the list: the last message's calls must have their results.
    pub(crate) fn finish(self) -> Result<(), Violation> {
        if let Some((at, ids)) = self.open
            && let Some(id) = ids.first()
        {
            return Err(
                Violation::new(FORMAT, Rule::CallWithoutResult, Some(at), path(at)).with_id(id),
            );
        }
        Ok(())
    }
}

/// Maps a valid Anthropic document to turns.
pub(crate) fn build(
    document: &Value,
    estimator: &dyn TokenEstimator,
) -> Result<Built, FormatError> {
    let mut build = Build::start(document, estimator)?;
    let list = messages(document)?;
    for (i, m) in list.iter().enumerate() {
        build.message(i, m, estimator)?;
    }
    Ok(build.built)
}

/// The turn of the request's top-level `system`, when it has one that is not `null`.
fn system_turn(
    document: &Value,
    estimator: &dyn TokenEstimator,
) -> Result<Option<TranscriptTurn>, FormatError> {
    let Some(system) = document.get("system").filter(|s| !s.is_null()) else {
        return Ok(None);
    };
    let mut t = Text::default();
    t.push_content(system);
    let (content, estimate) = t.finish(estimator);
    Ok(Some(TranscriptTurn::new(
        "system",
        Role::System,
        content,
        estimate,
    )?))
}

/// The turns, message by message.
#[derive(Debug, Default)]
pub(crate) struct Build {
    pub(crate) built: Built,
    /// tool_use id -> the key of the exchange the latest assistant message with calls
    /// opened. A valid list answers only those calls (in the message right after it), so the
    /// map is emptied at each such message: it holds one message's calls rather than every
    /// call of the request, each looked up among thousands.
    keys: BTreeMap<String, Arc<str>>,
}

impl Build {
    /// The turn of the request's top-level `system`.
    pub(crate) fn start(
        document: &Value,
        estimator: &dyn TokenEstimator,
    ) -> Result<Self, FormatError> {
        let mut build = Self::default();
        if let Some(turn) = system_turn(document, estimator)? {
            build.built.push(turn, TurnSource::System);
        }
        Ok(build)
    }

    /// The turns built, with the turn of the request's top-level `system` put first, as
    /// [`Build::start`] puts it: for a reader that builds the messages before it has read the
    /// rest of the request (its `system` may come after `messages`).
    pub(crate) fn finish_with_system(
        mut self,
        document: &Value,
        estimator: &dyn TokenEstimator,
    ) -> Result<Built, FormatError> {
        if let Some(turn) = system_turn(document, estimator)? {
            self.built.insert_first(turn, TurnSource::System);
        }
        Ok(self.built)
    }

    /// The turns of message `i`, which the check accepted.
    pub(crate) fn message(
        &mut self,
        i: usize,
        m: &Value,
        estimator: &dyn TokenEstimator,
    ) -> Result<(), FormatError> {
        let built = &mut self.built;
        let keys = &mut self.keys;
        let id = message_id(i, None);
        let assistant = m.get("role").and_then(Value::as_str) == Some("assistant");
        let blocks = blocks(m);
        if assistant {
            let key: Option<Arc<str>> = blocks
                .iter()
                .any(|b| block_type(b) == "tool_use")
                .then(|| Arc::clone(&id));
            if let Some(key) = &key {
                keys.clear();
                for b in blocks.iter().filter(|b| block_type(b) == "tool_use") {
                    if let Some(use_id) = b.get("id").and_then(Value::as_str) {
                        keys.insert(use_id.to_owned(), Arc::clone(key));
                    }
                }
            }
            let mut t = Text::default();
            t.push_content(m.get("content").unwrap_or(&Value::Null));
            let (content, estimate) = t.finish(estimator);
            let turn = TranscriptTurn::new(id, Role::Assistant, content, estimate)?
                .with_tool_call_id_opt(key);
            built.push(turn, TurnSource::Message(i));
            return Ok(());
        }
        if !blocks.iter().any(|b| block_type(b) == "tool_result") {
            let mut t = Text::default();
            t.push_content(m.get("content").unwrap_or(&Value::Null));
            let (content, estimate) = t.finish(estimator);
            built.push(
                TranscriptTurn::new(id, Role::User, content, estimate)?,
                TurnSource::Message(i),
            );
            return Ok(());
        }
        // A user message holding results: one tool turn per result, one turn for the rest.
        let mut message_key: Option<Arc<str>> = None;
        let mut rest: Vec<usize> = Vec::new();
        let mut rest_text = Text::default();
        for (j, b) in blocks.iter().enumerate() {
            if block_type(b) != "tool_result" {
                rest.push(j);
                rest_text.push_part(b);
                continue;
            }
            let use_id = b.get("tool_use_id").and_then(Value::as_str).unwrap_or("");
            let key = keys.get(use_id).cloned();
            if message_key.is_none() {
                message_key.clone_from(&key);
            }
            let mut t = Text::default();
            t.push_content(b.get("content").unwrap_or(&Value::Null));
            push_result(built, (i, j), t, key, estimator)?;
        }
        push_rest(built, i, rest, rest_text, message_key, estimator)
    }
}

impl Build {
    /// The turns of message `i`, read as a [`Plain`] message, which [`Check::plain`]
    /// accepted: the turns [`Build::message`] makes of its value.
    pub(crate) fn plain(
        &mut self,
        i: usize,
        m: &Plain<'_>,
        estimator: &dyn TokenEstimator,
    ) -> Result<(), FormatError> {
        let built = &mut self.built;
        let keys = &mut self.keys;
        let id = message_id(i, None);
        let blocks = m.content.blocks();
        if m.role == "assistant" {
            let key: Option<Arc<str>> = blocks
                .iter()
                .any(|b| matches!(b, Block::ToolUse { .. }))
                .then(|| Arc::clone(&id));
            if key.is_some() {
                keys.clear();
            }
            let mut t = Text::default();
            for b in blocks {
                match b {
                    Block::Text(text) => t.push_str(text),
                    Block::ToolUse {
                        id: use_id,
                        name,
                        input,
                    } => {
                        if let Some(key) = &key {
                            keys.insert(use_id.clone().into_owned(), Arc::clone(key));
                        }
                        t.push(name);
                        match input {
                            Input::Written(written) => t.push_json_text(written),
                            Input::Value(value) => t.push_json(value),
                        }
                    }
                    Block::ToolResult { .. } => {}
                }
            }
            if let Content::Text(text) = &m.content {
                t.push_str(text);
            }
            let (content, estimate, written) = t.finish_deferring(estimator);
            let turn = TranscriptTurn::new(id, Role::Assistant, content, estimate)?
                .with_tool_call_id_opt(key);
            built.push_deferring(turn, TurnSource::Message(i), written);
            return Ok(());
        }
        let mut message_key: Option<Arc<str>> = None;
        let mut rest: Vec<usize> = Vec::new();
        let mut rest_text = Text::default();
        if let Content::Text(text) = &m.content {
            rest_text.push_str(text);
        }
        let results = blocks.iter().any(|b| matches!(b, Block::ToolResult { .. }));
        for (j, b) in blocks.iter().enumerate() {
            let Block::ToolResult {
                id: use_id,
                content,
            } = b
            else {
                if let Block::Text(text) = b {
                    rest_text.push_str(text);
                }
                rest.push(j);
                continue;
            };
            let key = keys.get(&**use_id).cloned();
            if message_key.is_none() {
                message_key.clone_from(&key);
            }
            let mut t = Text::default();
            for piece in content {
                t.push_str(piece);
            }
            push_result(built, (i, j), t, key, estimator)?;
        }
        if !results {
            // No results: the message is one user turn.
            let (content, estimate, written) = rest_text.finish_deferring(estimator);
            let turn = TranscriptTurn::new(id, Role::User, content, estimate)?;
            built.push_deferring(turn, TurnSource::Message(i), written);
            return Ok(());
        }
        push_rest(built, i, rest, rest_text, message_key, estimator)
    }
}

/// The tool turn of result block `j` of message `i` (`m{i}.{j}`), in its call's exchange:
/// the same from either reading of the message.
fn push_result(
    built: &mut Built,
    (i, j): (usize, usize),
    text: Text<'_>,
    key: Option<Arc<str>>,
    estimator: &dyn TokenEstimator,
) -> Result<(), FormatError> {
    let (content, estimate, written) = text.finish_deferring(estimator);
    let turn = TranscriptTurn::new(message_id(i, Some(j)), Role::Tool, content, estimate)?
        .with_tool_call_id_opt(key);
    built.push_deferring(
        turn,
        TurnSource::Block {
            message: i,
            block: j,
        },
        written,
    );
    Ok(())
}

/// The one user turn of the other blocks `rest` of a message holding results (none when it
/// has no others), named after the first of them and in the exchange of the message's first
/// result: the same from either reading of the message.
fn push_rest(
    built: &mut Built,
    i: usize,
    rest: Vec<usize>,
    text: Text<'_>,
    key: Option<Arc<str>>,
    estimator: &dyn TokenEstimator,
) -> Result<(), FormatError> {
    let Some(&first) = rest.first() else {
        return Ok(());
    };
    let (content, estimate, written) = text.finish_deferring(estimator);
    let turn = TranscriptTurn::new(message_id(i, Some(first)), Role::User, content, estimate)?
        .with_tool_call_id_opt(key);
    built.push_deferring(
        turn,
        TurnSource::Blocks {
            message: i,
            blocks: rest,
        },
        written,
    );
    Ok(())
}

/// An Anthropic message of the shapes most requests are made of, read from its text without
/// a value: a `role` and string content, or content of `text` blocks, `tool_use` blocks (a
/// string `id` and `name`, any `input`) and `tool_result` blocks (a string `tool_use_id`,
/// string content or `text` blocks, `is_error`). Anything else is declined.
#[derive(Debug)]
pub(crate) struct Plain<'a> {
    role: Cow<'a, str>,
    content: Content<'a>,
}

/// The content of a [`Plain`] message.
#[derive(Debug)]
enum Content<'a> {
    Text(Str<'a>),
    Blocks(Vec<Block<'a>>),
}

impl Content<'_> {
    fn blocks(&self) -> &[Block<'_>] {
        match self {
            Content::Text(_) => &[],
            Content::Blocks(blocks) => blocks,
        }
    }

    fn is_empty(&self) -> bool {
        match self {
            Content::Text(text) => text.is_empty(),
            Content::Blocks(blocks) => blocks.is_empty(),
        }
    }
}

/// A block of a [`Plain`] message.
#[derive(Debug)]
enum Block<'a> {
    Text(Str<'a>),
    ToolUse {
        id: Cow<'a, str>,
        name: Cow<'a, str>,
        input: Input<'a>,
    },
    /// A result: its call's id and the pieces of its content.
    ToolResult {
        id: Cow<'a, str>,
        content: Vec<Str<'a>>,
    },
}

/// A `tool_use` block's `input`, as a turn's text holds it (see [`Text::push_json`]).
#[derive(Debug)]
enum Input<'a> {
    /// An object written from the request's text (see [`tool_input::plain_object`]).
    Written(Cow<'a, str>),
    /// Any other value, parsed.
    Value(Value),
}

impl<'a> Input<'a> {
    fn read(lex: &mut Lex<'a>) -> Option<Self> {
        let raw = lex.raw()?;
        match tool_input::plain_object(raw) {
            Some(written) => Some(Self::Written(written)),
            None => serde_json::from_str(raw).ok().map(Self::Value),
        }
    }
}

impl<'a> ReadMessage<'a> for Plain<'a> {
    /// One message, from the cursor.
    fn read_lex(lex: &mut Lex<'a>) -> Option<Self> {
        let (mut role, mut content) = (None, None);
        lex.object(|lex, key| match key {
            "role" => once(&mut role, lex.string()),
            "content" => once(&mut content, read_content(lex, true)),
            _ => None,
        })?;
        Some(Self {
            role: role?,
            content: content?,
        })
    }
}

/// String content, or an array of blocks (with `tool_use` and `tool_result` blocks when
/// `calls`, else of `text` blocks only).
fn read_content<'a>(lex: &mut Lex<'a>, calls: bool) -> Option<Content<'a>> {
    if let Some(text) = lex.text_or_null().flatten() {
        return Some(Content::Text(text.in_field("content")));
    }
    let mut blocks = Vec::new();
    lex.array(|lex| {
        blocks.push(read_block(lex, calls)?);
        Some(())
    })?;
    Some(Content::Blocks(blocks))
}

fn read_block<'a>(lex: &mut Lex<'a>, calls: bool) -> Option<Block<'a>> {
    let (mut kind, mut text, mut id, mut name, mut input) = (None, None, None, None, None);
    let (mut use_id, mut content, mut is_error) = (None, None, None);
    lex.object(|lex, key| match key {
        "type" => once(&mut kind, lex.string()),
        "text" => once(&mut text, lex.text()),
        "id" if calls => once(&mut id, lex.string()),
        "name" if calls => once(&mut name, lex.string()),
        "input" if calls => once(&mut input, Input::read(lex)),
        "tool_use_id" if calls => once(&mut use_id, lex.string()),
        "content" if calls => once(&mut content, read_content(lex, false)),
        // Neither the check nor the turn reads whether a result is an error.
        "is_error" if calls => once(&mut is_error, lex.value().filter(Value::is_boolean)),
        _ => None,
    })?;
    match &*kind? {
        "text" if id.is_none() && name.is_none() && input.is_none() => {
            (use_id.is_none() && content.is_none() && is_error.is_none())
                .then_some(Block::Text(text?))
        }
        "tool_use" if text.is_none() && use_id.is_none() && content.is_none() => {
            is_error.is_none().then_some(())?;
            Some(Block::ToolUse {
                id: id?,
                name: name?,
                input: input?,
            })
        }
        "tool_result" if text.is_none() && id.is_none() && name.is_none() && input.is_none() => {
            let content = match content {
                None => Vec::new(),
                Some(Content::Text(text)) => vec![text],
                Some(Content::Blocks(blocks)) => blocks
                    .into_iter()
                    .map(|b| match b {
                        Block::Text(text) => Some(text),
                        _ => None,
                    })
                    .collect::<Option<Vec<_>>>()?,
            };
            Some(Block::ToolResult {
                id: use_id?,
                content,
            })
        }
        _ => None,
    }
}

/// One message of the output, before roles are reconciled.
struct Out {
    piece: Piece,
    assistant: bool,
    /// The input message it starts with, if it starts with one (not with a summary).
    first: Option<usize>,
    /// The input message it ends with, if it ends with one.
    last: Option<usize>,
}

/// A user message being rebuilt from its blocks, as its turns come.
struct Pending {
    message: usize,
    /// The position of one of the message's turns, the first that came.
    position: usize,
    blocks: BTreeMap<usize, Part>,
    /// How many of the message's turns came.
    turns: usize,
}

/// One block of a pending message.
enum Part {
    /// Block `j` of the message, the turn at position `turn`, as it was, or with the stub as
    /// its `content`.
    Block { stub: Option<Arc<str>>, turn: usize },
    /// The stub standing for the message's blocks other than results.
    Stub(Arc<str>),
}

/// Renders the view items of an Anthropic transcript: each kept message as it was, a user
/// message some of whose blocks changed rebuilt from them, each summary a new user message,
/// messages of one role that compaction made meet merged; `system` stays only when its turn
/// does.
pub(crate) fn render(
    document: &Value,
    list: Source<'_>,
    turns: &[TranscriptTurn],
    sources: &[TurnSource],
    items: impl ExactSizeIterator<Item = Result<ViewItem, FormatError>>,
) -> Result<Rendered, FormatError> {
    let mut doc = crate::mapping::shell(document, "messages");
    let mut system_kept = false;
    let mut outs: Vec<Out> = Vec::with_capacity(items.len());
    let mut pending: Option<Pending> = None;
    for item in items {
        let item = item?;
        let (position, stub) = match &item {
            ViewItem::Summary { text } => {
                flush(list, sources, &mut pending, &mut outs);
                let mut m = Map::new();
                m.insert("role".into(), Value::from("user"));
                m.insert("content".into(), Value::from(&**text));
                outs.push(Out {
                    piece: Piece::New(Value::Object(m)),
                    assistant: false,
                    first: None,
                    last: None,
                });
                continue;
            }
            ViewItem::Source { position, stub } => (*position, stub.as_ref()),
        };
        match sources.get(position) {
            Some(TurnSource::System) => {
                system_kept = true;
                if let (Some(stub), Value::Object(map)) = (stub, &mut doc) {
                    map.insert("system".into(), Value::from(&**stub));
                }
            }
            Some(TurnSource::Message(i)) => {
                flush(list, sources, &mut pending, &mut outs);
                if !list.has(*i) {
                    return Err(crate::mapping::bad_position(position));
                }
                // A message turn is an assistant turn exactly when the message is one.
                let assistant =
                    turns.get(position).map(TranscriptTurn::role) == Some(Role::Assistant);
                let piece = match stub {
                    None => Piece::Kept(*i),
                    Some(stub) => {
                        if assistant {
                            let original = list
                                .get(*i)
                                .ok_or_else(|| crate::mapping::bad_position(position))?;
                            maskable(*i, &original)?;
                        }
                        Piece::masked(*i, "content", stub, position)
                    }
                };
                outs.push(Out {
                    assistant,
                    piece,
                    first: Some(*i),
                    last: Some(*i),
                });
            }
            Some(TurnSource::Block { message: i, block }) => {
                if !list.has(*i) {
                    return Err(crate::mapping::bad_position(position));
                }
                let p = open_pending(list, sources, &mut pending, &mut outs, *i, position);
                p.turns += 1;
                p.blocks.insert(
                    *block,
                    Part::Block {
                        stub: stub.cloned(),
                        turn: position,
                    },
                );
            }
            Some(TurnSource::Blocks { message: i, blocks }) => {
                if !list.has(*i) {
                    return Err(crate::mapping::bad_position(position));
                }
                let p = open_pending(list, sources, &mut pending, &mut outs, *i, position);
                p.turns += 1;
                match stub {
                    Some(stub) => {
                        if let Some(&first) = blocks.first() {
                            p.blocks.insert(first, Part::Stub(Arc::clone(stub)));
                        }
                    }
                    None => {
                        for &j in blocks {
                            p.blocks.insert(
                                j,
                                Part::Block {
                                    stub: None,
                                    turn: position,
                                },
                            );
                        }
                    }
                }
            }
            _ => return Err(crate::mapping::bad_position(position)),
        }
    }
    flush(list, sources, &mut pending, &mut outs);
    if !system_kept && let Value::Object(map) = &mut doc {
        map.remove("system");
    }
    let mut messages = reconcile(outs, list);
    if messages.first().is_none_or(|m| m.assistant) {
        messages.insert(
            0,
            Out {
                piece: Piece::New(crate::mapping::lead_in_message()),
                assistant: false,
                first: None,
                last: None,
            },
        );
    }
    Ok(Rendered {
        shell: doc,
        list: Some(messages.into_iter().map(|o| o.piece).collect()),
    })
}

/// The pending rebuilt message for message `i`, whose turn at `position` came, flushing
/// another one first.
fn open_pending<'p>(
    list: Source<'_>,
    sources: &[TurnSource],
    pending: &'p mut Option<Pending>,
    outs: &mut Vec<Out>,
    i: usize,
    position: usize,
) -> &'p mut Pending {
    if pending.as_ref().is_some_and(|p| p.message != i) {
        flush(list, sources, pending, outs);
    }
    pending.get_or_insert_with(|| Pending {
        message: i,
        position,
        blocks: BTreeMap::new(),
        turns: 0,
    })
}

/// Emits the pending message: when every turn of it came and none stands for its other
/// blocks with a stub, the message itself with its masked results patched; else the original
/// with the present blocks, in order.
fn flush(
    list: Source<'_>,
    sources: &[TurnSource],
    pending: &mut Option<Pending>,
    outs: &mut Vec<Out>,
) {
    let Some(p) = pending.take() else {
        return;
    };
    // The turns of one message are neighbours: counted from the one that came, outwards (a
    // search of the whole list for the message's first and last turn, twice for each
    // message, cost more than rendering it).
    let of_message = |s: &TurnSource| s.message() == Some(p.message);
    let after = sources
        .get(p.position..)
        .map_or(0, |s| s.iter().take_while(|s| of_message(s)).count());
    let before = sources
        .get(..p.position)
        .map_or(0, |s| s.iter().rev().take_while(|s| of_message(s)).count());
    let all = before + after;
    let whole = p.turns == all && p.blocks.values().all(|b| matches!(b, Part::Block { .. }));
    let piece = if whole {
        let patches: Vec<Patch> = p
            .blocks
            .iter()
            .filter_map(|(&j, b)| match b {
                Part::Block {
                    stub: Some(stub),
                    turn,
                } => Some(Patch {
                    block: Some(j),
                    key: "content",
                    stub: Arc::clone(stub),
                    at: None,
                    turn: Some(*turn),
                }),
                _ => None,
            })
            .collect();
        if patches.is_empty() {
            Piece::Kept(p.message)
        } else {
            Piece::Masked {
                index: p.message,
                patches,
            }
        }
    } else {
        let original = list.get(p.message);
        let original = original.as_deref().unwrap_or(&Value::Null);
        let all_blocks = blocks(original);
        let present: Vec<Value> = p
            .blocks
            .into_iter()
            .filter_map(|(j, part)| match part {
                Part::Block { stub: None, .. } => all_blocks.get(j).cloned(),
                Part::Block {
                    stub: Some(stub), ..
                } => all_blocks
                    .get(j)
                    .map(|b| with_field(b, "content", Value::from(&*stub))),
                Part::Stub(stub) => {
                    let mut text = Map::new();
                    text.insert("type".into(), Value::from("text"));
                    text.insert("text".into(), Value::from(&*stub));
                    Some(Value::Object(text))
                }
            })
            .collect();
        Piece::New(with_field(original, "content", Value::Array(present)))
    };
    outs.push(Out {
        piece,
        assistant: false,
        first: Some(p.message),
        last: Some(p.message),
    });
}

/// Whether message `i` may be masked: not an assistant message with blocks other than text.
fn maskable(i: usize, original: &Value) -> Result<(), FormatError> {
    let assistant = original.get("role").and_then(Value::as_str) == Some("assistant");
    let plain = blocks(original).iter().all(|b| block_type(b) == "text");
    if assistant && !plain {
        return Err(FormatError::unsupported(
            format!(
                "Message {i} is masked, but it is an assistant message with blocks other than \
                 text (tool uses or thinking), which a stub cannot replace."
            ),
            cutctx_model::details! { "index" => i, "format" => FORMAT.as_str() },
        ));
    }
    Ok(())
}

/// Merges consecutive messages of one role that did not meet in the input.
fn reconcile(mut outs: Vec<Out>, list: Source<'_>) -> Vec<Out> {
    // In place (a request's worth of messages is not held twice): a message merged into the
    // one kept before it is removed.
    outs.dedup_by(|out, prev| {
        let met_in_input = matches!(
            (prev.last, out.first),
            (Some(last), Some(first)) if last + 1 == first
        );
        if prev.assistant != out.assistant || met_in_input {
            return false;
        }
        let next = Out {
            piece: std::mem::replace(&mut out.piece, Piece::New(Value::Null)),
            ..*out
        };
        merge(prev, next, list);
        true
    });
    outs
}

/// A piece as a value: merging looks inside the messages it joins. A kept or masked piece
/// names a message of `list`, which the rendering made it from.
fn value_of(piece: Piece, list: Source<'_>) -> Value {
    match piece {
        Piece::New(v) => v,
        Piece::Kept(i) => list
            .get(i)
            .map(Cow::into_owned)
            .expect("a kept piece names a message of its list"),
        Piece::Masked { index, patches } => list
            .get(index)
            .map(|o| crate::mapping::patched(&o, &patches))
            .expect("a masked piece names a message of its list"),
    }
}

/// Appends `next`'s blocks to `prev`; fields `prev` lacks are taken from `next`.
fn merge(prev: &mut Out, next: Out, list: Source<'_>) {
    let mut value = value_of(
        std::mem::replace(&mut prev.piece, Piece::New(Value::Null)),
        list,
    );
    let next_value = value_of(next.piece, list);
    let mut content = content_blocks(&value);
    content.extend(content_blocks(&next_value));
    if let (Value::Object(p), Value::Object(n)) = (&mut value, next_value) {
        for (k, v) in n {
            if k != "content" && !p.contains_key(&k) {
                p.insert(k, v);
            }
        }
        p.insert("content".into(), Value::Array(content));
    }
    prev.piece = Piece::New(value);
    prev.last = next.last;
}

/// A message's content as blocks: string content becomes one text block.
fn content_blocks(m: &Value) -> Vec<Value> {
    match m.get("content") {
        Some(Value::Array(b)) => b.clone(),
        Some(Value::String(s)) if !s.is_empty() => {
            let mut text = Map::new();
            text.insert("type".into(), Value::from("text"));
            text.insert("text".into(), Value::from(s.as_str()));
            vec![Value::Object(text)]
        }
        _ => Vec::new(),
    }
}
