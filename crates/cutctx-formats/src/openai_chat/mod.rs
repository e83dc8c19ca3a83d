//! OpenAI Chat Completions: a `messages` array, or a request object holding one.
//!
//! # Mapping
//!
//! * one turn per message, id `m{index}`;
//! * `system` and `developer` are system turns (untouchable), `user` user turns, `assistant`
//!   assistant turns, `tool` tool turns; a message of any other role (the legacy `function`,
//!   a role of tomorrow) is an opaque message, a system turn carried untouched in its place;
//! * an assistant message with `tool_calls` (one or several) opens an exchange whose key is
//!   the message's turn id; every `tool` message answering one of its calls joins it, so the
//!   message and all its results are kept or removed together;
//! * the content is the text the model reads: string content or text parts, refusals, and each
//!   call's function name and arguments; images, audio and files count
//!   [`MEDIA_TOKEN_ESTIMATE`](crate::MEDIA_TOKEN_ESTIMATE) tokens each.
//!
//! Rendering re-emits each kept message as it was; a masked message keeps every field
//! (`tool_call_id`, `name`, unknown fields) and carries the stub as its `content`; a summary is
//! an `assistant` message with string content.
//!
//! # Rules ([`validate`])
//!
//! Messages are objects with a string role; content is a string, an array or null. An assistant message with calls is followed directly
//! by one `tool` message per call (in any order), each naming a call of that message; a `tool`
//! message anywhere else is an orphan. At least one message.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use cutctx_model::{Role, TranscriptTurn};
use cutctx_policies::TokenEstimator;
use serde_json::{Map, Value};

use crate::content::Text;
use crate::hand_read::{Lex, ReadMessage, Str, once};
use crate::mapping::{
    Built, MessageIds, Piece, Rendered, Source, TurnSource, ViewItem, messages_key,
};
use crate::provider_format::ProviderFormat;
use crate::validate::{Rule, Violation, shape};
use crate::{Format, FormatError};

const FORMAT: Format = Format::OpenAiChat;

mod build;
mod plain;
mod render;
mod repair;
mod rules;

pub(crate) use build::{Build, build};
pub(crate) use plain::Plain;
pub(crate) use render::{render, with_field};
pub(crate) use rules::Check;
pub use rules::validate;

/// Chat Completions, as the readers see it ([`ProviderFormat`]).
pub(crate) enum Chat {}

impl ProviderFormat for Chat {
    type Check = Check;
    type Build = Build;
    type Plain<'a> = Plain<'a>;

    crate::provider_format::delegations!();

    fn check_start(_shell: &Value, n: usize) -> Result<Check, Violation> {
        Check::start(n)
    }
    fn check_value(check: &mut Check, i: usize, message: &Value) -> Result<(), Violation> {
        check.message(i, message)
    }
    fn check_plain(check: &mut Check, i: usize, message: &Plain<'_>) -> Option<()> {
        check.plain(i, message)
    }
    fn build_start(
        _shell: &Value,
        n: usize,
        _estimator: &dyn TokenEstimator,
    ) -> Result<Build, FormatError> {
        Ok(Build::of(n))
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
        _turns: &[TranscriptTurn],
        sources: &[TurnSource],
        items: impl ExactSizeIterator<Item = Result<ViewItem, FormatError>>,
    ) -> Result<Rendered, FormatError> {
        let list = list.ok_or_else(|| crate::no_list(FORMAT, document))?;
        render(document, list, sources, items)
    }
}

/// The error of message `i` lacking `field`, which the check requires of it: a builder given
/// a message the check did not accept says so as the check would, never building a turn of
/// a default.
fn missing(i: usize, field: &str) -> FormatError {
    FormatError::from_violation(Violation::new(
        FORMAT,
        Rule::Malformed,
        Some(i),
        format!("{}.{field}", path(i)),
    ))
}

/// The role of a message holding a tool's result ([`crate::descriptor::Roles::tool`]).
pub(crate) const TOOL_ROLE: &str = "tool";
/// The field of an assistant message listing its tool calls.
pub(crate) const TOOL_CALLS: &str = "tool_calls";
/// The field of a `tool` message naming the call it answers.
pub(crate) const TOOL_CALL_ID: &str = "tool_call_id";

/// The turn role a Chat message's `role` names, from the format's
/// [descriptor](crate::descriptor::Roles::role_of); `None` for an opaque message.
fn role_of(name: &str) -> Option<Role> {
    FORMAT.descriptor().roles.role_of(name)
}

/// Whether `message` is the model's ([`crate::is_model_item`]): an assistant message.
pub(crate) fn is_model_message(message: &Value) -> bool {
    message.get("role").and_then(Value::as_str) == Some(FORMAT.descriptor().roles.assistant)
}

/// Whether `message` is a tool's result: a `tool` message.
pub(crate) fn is_result(message: &Value) -> bool {
    message.get("role").and_then(Value::as_str) == Some(TOOL_ROLE)
}

/// The `tool_call_id` of the call `message` answers, when it is a `tool` message.
pub(crate) fn answered_call(message: &Value) -> Option<&str> {
    if !is_result(message) {
        return None;
    }
    message.get(TOOL_CALL_ID).and_then(Value::as_str)
}

/// The message list of a Chat document: the array itself, or the request's `messages`.
fn messages(document: &Value) -> Result<&Vec<Value>, Violation> {
    let (list, path) = messages_key(document, crate::list_key(FORMAT));
    match list {
        Some(Value::Array(items)) => Ok(items),
        _ => Err(Violation::new(FORMAT, Rule::Malformed, None, path)),
    }
}

fn path(i: usize) -> String {
    format!("messages[{i}]")
}

/// The ids of an assistant message's calls, in order (empty when it has none), as its value
/// gives them.
fn call_ids(i: usize, m: &Map<String, Value>) -> Result<Vec<&str>, Violation> {
    match m.get(TOOL_CALLS) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(calls)) => distinct_calls(
            i,
            calls
                .iter()
                .map(|call| call.get("id").and_then(Value::as_str)),
        ),
        Some(_) => Err(Violation::new(
            FORMAT,
            Rule::Malformed,
            Some(i),
            format!("{}.tool_calls", path(i)),
        )),
    }
}

/// The rule on a message's call ids, from whichever reader: each present (`None` is one
/// missing) and none given twice. The ids, in order.
fn distinct_calls<'m>(
    i: usize,
    ids: impl ExactSizeIterator<Item = Option<&'m str>>,
) -> Result<Vec<&'m str>, Violation> {
    let mut out = Vec::with_capacity(ids.len());
    let mut seen = BTreeSet::new();
    for (j, id) in ids.enumerate() {
        let at = || format!("{}.tool_calls[{j}].id", path(i));
        let Some(id) = id else {
            return Err(Violation::new(FORMAT, Rule::Malformed, Some(i), at()));
        };
        if !seen.insert(id) {
            return Err(Violation::new(FORMAT, Rule::DuplicateCallId, Some(i), at()).with_id(id));
        }
        out.push(id);
    }
    Ok(out)
}
