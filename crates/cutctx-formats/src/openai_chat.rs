//! OpenAI Chat Completions: a `messages` array, or a request object holding one.
//!
//! # Mapping
//!
//! * one turn per message, id `m{index}`;
//! * `system` and `developer` are system turns (untouchable), `user` user turns, `assistant`
//!   assistant turns, `tool` tool turns;
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
//! Messages are objects with a role among `system`, `developer`, `user`, `assistant`, `tool`;
//! content is a string, an array or null. An assistant message with calls is followed directly
//! by one `tool` message per call (in any order), each naming a call of that message; a `tool`
//! message anywhere else is an orphan. At least one message.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use cutctx_model::{Role, TranscriptTurn};
use cutctx_policies::TokenEstimator;
use serde_json::{Map, Value};

use crate::check_as_read::{Mapping, MapsAsRead};
use crate::content::Text;
use crate::hand_read::{Lex, ReadMessage, Str, once};
use crate::mapping::{
    Built, MessageIds, Piece, Rendered, Source, TurnSource, ViewItem, messages_key,
};
use crate::roles::openai_role;
use crate::validate::{Rule, Violation, shape};
use crate::{Format, FormatError};

const FORMAT: Format = Format::OpenAiChat;

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

/// Whether `message` is the model's ([`crate::is_model_item`]): an assistant message.
pub(crate) fn is_model_message(message: &Value) -> bool {
    message.get("role").and_then(Value::as_str) == Some("assistant")
}

/// The `tool_call_id` of the call `message` answers, when it is a `tool` message.
pub(crate) fn answered_call(message: &Value) -> Option<&str> {
    if message.get("role").and_then(Value::as_str) != Some("tool") {
        return None;
    }
    message.get("tool_call_id").and_then(Value::as_str)
}

/// The message list of a Chat document: the array itself, or the request's `messages`.
fn messages(document: &Value) -> Result<&Vec<Value>, Violation> {
    let (list, path) = messages_key(document, "messages");
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
    match m.get("tool_calls") {
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

/// What the rules read of one message, from its value ([`Check::message`]) or from its text
/// ([`Check::plain`]).
struct Facts<'m> {
    role: &'m str,
    /// A `tool` message's `tool_call_id` (`None` when it has none).
    tool_call_id: Option<&'m str>,
    /// Whether the content is absent, null or an empty array.
    no_content: bool,
    /// Whether the message carries a payload of its own in place of content: a refusal, an
    /// audio reply, a legacy `function_call`.
    own_payload: bool,
}

/// A run of tool messages being checked: the calling message's position, its call ids in
/// order and as a set, and the ids answered so far. Ids are owned: a message is read once and
/// may be gone (the text path parses one message at a time).
type OpenRun = (usize, Vec<String>, BTreeSet<String>, BTreeSet<String>);

/// Checks a Chat document against the provider's structural rules.
///
/// # Errors
///
/// The first [`Violation`], in document order.
pub fn validate(document: &Value) -> Result<(), Violation> {
    let list = messages(document)?;
    let mut check = Check::start(list.len())?;
    for (i, m) in list.iter().enumerate() {
        check.message(i, m)?;
    }
    check.finish()
}

/// The rules, message by message: [`validate`] over a document, and the text path over one
/// parsed message at a time.
#[derive(Debug, Default)]
pub(crate) struct Check {
    /// The calls the current run of tool messages may answer (in order, and as a set, so that
    /// a message of many parallel calls costs no more than its length), and those answered.
    open: Option<OpenRun>,
}

impl Check {
    /// A check of a list of `len` messages: at least one.
    pub(crate) fn start(len: usize) -> Result<Self, Violation> {
        if len == 0 {
            return Err(Violation::new(
                FORMAT,
                Rule::NoMessages,
                None,
                "messages".to_owned(),
            ));
        }
        Ok(Self { open: None })
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
        if let Some(c) = map.get("content") {
            shape(
                matches!(c, Value::String(_) | Value::Array(_) | Value::Null),
                FORMAT,
                Some(i),
                || format!("{}.content", path(i)),
            )?;
        }
        let facts = Facts {
            role,
            tool_call_id: map.get("tool_call_id").and_then(Value::as_str),
            no_content: match map.get("content") {
                None | Some(Value::Null) => true,
                Some(Value::Array(parts)) => parts.is_empty(),
                Some(_) => false,
            },
            own_payload: ["function_call", "refusal", "audio"]
                .iter()
                .any(|k| map.get(*k).is_some_and(|v| !v.is_null())),
        };
        self.rules(i, &facts, || call_ids(i, map))
    }

    /// Message `i`, in order, read as a [`Plain`] message: [`Check::rules`] over what it holds.
    /// `None` when the message breaks a rule (the check's state is then as it was): the
    /// caller checks its value, which says what is wrong.
    pub(crate) fn plain(&mut self, i: usize, m: &Plain<'_>) -> Option<()> {
        let facts = Facts {
            role: &m.role,
            tool_call_id: m.tool_call_id.as_deref(),
            no_content: !matches!(m.content, Some(Some(_))),
            // The reader takes none of those fields.
            own_payload: false,
        };
        // An assistant message without `tool_calls` calls nothing.
        let calls = m.calls.as_deref().unwrap_or_default();
        self.rules(i, &facts, || {
            distinct_calls(i, calls.iter().map(|c| Some(&*c.id)))
        })
        .ok()
    }

    /// The format's rules on message `i`, whichever reader read it: a `tool` message answers
    /// a call of the run open before it, once; any other message closes that run, every call
    /// answered; an assistant message's call ids are distinct (`calls`, asked only of an
    /// assistant message), and it has content unless it calls a tool or carries its own
    /// payload. The state changes only when the message passes.
    fn rules<'m>(
        &mut self,
        i: usize,
        m: &Facts<'_>,
        calls: impl FnOnce() -> Result<Vec<&'m str>, Violation>,
    ) -> Result<(), Violation> {
        let at_id = || format!("{}.tool_call_id", path(i));
        if m.role == "tool" {
            let Some(id) = m.tool_call_id else {
                return Err(Violation::new(FORMAT, Rule::Malformed, Some(i), at_id()));
            };
            let Some((_, _, calls, answered)) = self.open.as_mut() else {
                return Err(
                    Violation::new(FORMAT, Rule::ResultWithoutCall, Some(i), at_id()).with_id(id),
                );
            };
            if !calls.contains(id) {
                return Err(
                    Violation::new(FORMAT, Rule::ResultWithoutCall, Some(i), at_id()).with_id(id),
                );
            }
            if answered.contains(id) {
                return Err(
                    Violation::new(FORMAT, Rule::DuplicateResult, Some(i), at_id()).with_id(id),
                );
            }
            answered.insert(id.to_owned());
            return Ok(());
        }
        close(self.open.as_ref())?;
        match openai_role(m.role) {
            Some(Role::System | Role::User) => self.open = None,
            Some(Role::Assistant) => {
                let ids = calls()?;
                // Content is required unless the message calls a tool (or is a refusal or
                // an audio reply, which carry their own payload).
                if m.no_content && ids.is_empty() && !m.own_payload {
                    return Err(Violation::new(
                        FORMAT,
                        Rule::EmptyContent,
                        Some(i),
                        format!("{}.content", path(i)),
                    ));
                }
                self.open = (!ids.is_empty()).then(|| {
                    let ids: Vec<String> = ids.into_iter().map(str::to_owned).collect();
                    let set = ids.iter().cloned().collect();
                    (i, ids, set, BTreeSet::new())
                });
            }
            // A tool message was checked above.
            Some(Role::Tool) | None => {
                return Err(Violation::new(
                    FORMAT,
                    Rule::UnknownRole,
                    Some(i),
                    format!("{}.role", path(i)),
                ));
            }
        }
        Ok(())
    }

    /// The end of the list: the last calls must have been answered.
    pub(crate) fn finish(self) -> Result<(), Violation> {
        close(self.open.as_ref())
    }
}

/// Every call of the closing run must have been answered.
fn close(open: Option<&OpenRun>) -> Result<(), Violation> {
    if let Some(&(i, ref ids, _, ref answered)) = open
        && let Some((j, id)) = ids
            .iter()
            .enumerate()
            .find(|(_, id)| !answered.contains(id.as_str()))
    {
        return Err(Violation::new(
            FORMAT,
            Rule::CallWithoutResult,
            Some(i),
            format!("{}.tool_calls[{j}].id", path(i)),
        )
        .with_id(id));
    }
    Ok(())
}

/// Maps a valid Chat document to turns.
pub(crate) fn build(
    document: &Value,
    estimator: &dyn TokenEstimator,
) -> Result<Built, FormatError> {
    let list = messages(document)?;
    let mut build = Build::default();
    for (i, m) in list.iter().enumerate() {
        build.message(i, m, estimator)?;
    }
    Ok(build.built)
}

/// The turns, message by message.
#[derive(Debug, Default)]
pub(crate) struct Build {
    pub(crate) built: Built,
    /// Call id -> the key of the exchange the latest assistant message with calls opened.
    /// A valid list answers only those calls (the check holds a tool message to the run of
    /// calls before it), so the map is emptied at each such message: it holds one message's
    /// calls rather than every call of the request, each looked up among thousands.
    keys: BTreeMap<String, Arc<str>>,
    ids: MessageIds,
}

impl Build {
    /// The turns of a list of `n` messages: room for them, and their ids made ahead.
    pub(crate) fn of(n: usize) -> Self {
        Self {
            built: Built::with_capacity(n),
            keys: BTreeMap::new(),
            ids: MessageIds::ahead(n),
        }
    }

    /// The turns of a list whose length is not known yet, room made for `capacity` of them:
    /// a list read as it is scanned.
    pub(crate) fn growing(capacity: usize) -> Self {
        Self {
            built: Built::with_capacity(capacity),
            keys: BTreeMap::new(),
            ids: MessageIds::growing(),
        }
    }

    /// The turn of message `i`, which the check accepted.
    pub(crate) fn message(
        &mut self,
        i: usize,
        m: &Value,
        estimator: &dyn TokenEstimator,
    ) -> Result<(), FormatError> {
        let id = self.ids.get(i);
        let role_name = m
            .get("role")
            .and_then(Value::as_str)
            .ok_or_else(|| missing(i, "role"))?;
        let mut text = Text::default();
        text.push_content(m.get("content").unwrap_or(&Value::Null));
        let (role, key) = match openai_role(role_name) {
            Some(Role::System) => (Role::System, None),
            Some(Role::User) => (Role::User, None),
            Some(Role::Tool) => {
                let call = m
                    .get("tool_call_id")
                    .and_then(Value::as_str)
                    .ok_or_else(|| missing(i, "tool_call_id"))?;
                (Role::Tool, self.keys.get(call).cloned())
            }
            _ => {
                if let Some(r) = m.get("refusal").and_then(Value::as_str) {
                    text.push(r);
                }
                let calls = m.get("tool_calls").and_then(Value::as_array);
                // The exchange's key is the message's id, shared.
                let key: Option<Arc<str>> =
                    calls.filter(|c| !c.is_empty()).map(|_| Arc::clone(&id));
                if key.is_some() {
                    self.keys.clear();
                }
                for call in calls.into_iter().flatten() {
                    if let (Some(call_id), Some(k)) = (call.get("id").and_then(Value::as_str), &key)
                    {
                        self.keys.insert(call_id.to_owned(), Arc::clone(k));
                    }
                    // `function` calls and `custom` calls.
                    for kind in ["function", "custom"] {
                        if let Some(f) = call.get(kind) {
                            text.push_json(f.get("name").unwrap_or(&Value::Null));
                            text.push_json(f.get("arguments").unwrap_or(&Value::Null));
                            text.push_json(f.get("input").unwrap_or(&Value::Null));
                        }
                    }
                }
                (Role::Assistant, key)
            }
        };
        self.push(i, id, role, text, key, estimator)
    }

    /// The turn of message `i`, read as a [`Plain`] message, which [`Check::plain`] accepted:
    /// the turn [`Build::message`] makes of its value.
    pub(crate) fn plain(
        &mut self,
        i: usize,
        m: &Plain<'_>,
        estimator: &dyn TokenEstimator,
    ) -> Result<(), FormatError> {
        let id = self.ids.get(i);
        let mut text = Text::default();
        if let Some(Some(content)) = &m.content {
            text.push_str(content);
        }
        let (role, key) = match openai_role(&m.role) {
            Some(Role::System) => (Role::System, None),
            Some(Role::User) => (Role::User, None),
            Some(Role::Tool) => {
                let call = m
                    .tool_call_id
                    .as_deref()
                    .ok_or_else(|| missing(i, "tool_call_id"))?;
                (Role::Tool, self.keys.get(call).cloned())
            }
            _ => {
                let calls = m.calls.as_deref().unwrap_or_default();
                let key: Option<Arc<str>> = (!calls.is_empty()).then(|| Arc::clone(&id));
                if key.is_some() {
                    self.keys.clear();
                }
                for call in calls {
                    if let Some(k) = &key {
                        self.keys
                            .insert(call.id.clone().into_owned(), Arc::clone(k));
                    }
                    text.push(&call.name);
                    text.push(&call.arguments);
                }
                (Role::Assistant, key)
            }
        };
        self.push(i, id, role, text, key, estimator)
    }

    /// Adds the turn of message `i`.
    fn push(
        &mut self,
        i: usize,
        id: Arc<str>,
        role: Role,
        text: Text<'_>,
        key: Option<Arc<str>>,
        estimator: &dyn TokenEstimator,
    ) -> Result<(), FormatError> {
        let (content, estimate, written) = text.finish_deferring(estimator);
        let turn = TranscriptTurn::new(id, role, content, estimate)?.with_tool_call_id_opt(key);
        self.built
            .push_deferring(turn, TurnSource::Message(i), written);
        Ok(())
    }
}

/// A Chat list's check and turns, mapping its messages as the scan reads them.
impl<'a> MapsAsRead<Plain<'a>> for Mapping<Check, Build> {
    fn plain(
        &mut self,
        i: usize,
        m: &Plain<'a>,
        estimator: &dyn TokenEstimator,
    ) -> Option<Result<(), FormatError>> {
        self.check.plain(i, m)?;
        Some(self.build.plain(i, m, estimator))
    }
}

/// A Chat message of the shapes most requests are made of, read from its text without a
/// value: `role`, string or null `content`, `tool_call_id`, `name`, and `tool_calls` of
/// `function` calls whose name and arguments are strings. Anything else is declined.
#[derive(Debug)]
pub(crate) struct Plain<'a> {
    role: Cow<'a, str>,
    /// Absent, null (`Some(None)`) or a string.
    content: Option<Option<Str<'a>>>,
    tool_call_id: Option<Cow<'a, str>>,
    calls: Option<Vec<PlainCall<'a>>>,
}

/// A `function` call of a [`Plain`] message.
#[derive(Debug)]
struct PlainCall<'a> {
    id: Cow<'a, str>,
    name: Cow<'a, str>,
    arguments: Cow<'a, str>,
}

impl<'a> ReadMessage<'a> for Plain<'a> {
    /// One message, from the cursor.
    fn read_lex(lex: &mut Lex<'a>) -> Option<Self> {
        let (mut role, mut content, mut tool_call_id, mut calls, mut name) =
            (None, None, None, None, None);
        lex.object(|lex, key| match key {
            "role" => once(&mut role, lex.string()),
            "content" => once(
                &mut content,
                lex.text_or_null().map(|t| t.map(|t| t.in_field("content"))),
            ),
            "tool_call_id" => once(&mut tool_call_id, lex.string()),
            // Neither the check nor the turn reads a participant's name.
            "name" => once(&mut name, lex.string()),
            "tool_calls" => once(&mut calls, read_calls(lex)),
            _ => None,
        })?;
        Some(Self {
            role: role?,
            content,
            tool_call_id,
            calls,
        })
    }
}

/// A `tool_calls` array of `function` calls, each with a string `id`, an optional string
/// `type`, and a `function` of a string `name` and string `arguments`.
fn read_calls<'a>(lex: &mut Lex<'a>) -> Option<Vec<PlainCall<'a>>> {
    let mut calls = Vec::new();
    lex.array(|lex| {
        let (mut id, mut kind, mut function) = (None, None, None);
        lex.object(|lex, key| match key {
            "id" => once(&mut id, lex.string()),
            "type" => once(&mut kind, lex.string()),
            "function" => {
                let (mut name, mut arguments) = (None, None);
                let read = lex.object(|lex, key| match key {
                    "name" => once(&mut name, lex.string()),
                    "arguments" => once(&mut arguments, lex.string()),
                    _ => None,
                });
                once(&mut function, read.and(name.zip(arguments)))
            }
            _ => None,
        })?;
        let (name, arguments) = function?;
        calls.push(PlainCall {
            id: id?,
            name,
            arguments,
        });
        Some(())
    })?;
    Some(calls)
}

/// Renders the view items of a Chat transcript: each kept message as it was, a masked one
/// with the stub as its `content`, each summary a new message.
pub(crate) fn render(
    document: &Value,
    list: Source<'_>,
    sources: &[TurnSource],
    items: impl ExactSizeIterator<Item = Result<ViewItem, FormatError>>,
) -> Result<Rendered, FormatError> {
    let mut out: Vec<Piece> = Vec::with_capacity(items.len());
    for item in items {
        let item = item?;
        match &item {
            ViewItem::Source { position, stub } => {
                let Some(TurnSource::Message(i)) = sources.get(*position) else {
                    return Err(crate::mapping::bad_position(*position));
                };
                if !list.has(*i) {
                    return Err(crate::mapping::bad_position(*position));
                }
                out.push(match stub {
                    None => Piece::Kept(*i),
                    Some(stub) => Piece::masked(*i, "content", stub, *position),
                });
            }
            ViewItem::Summary { text, .. } => out.push(Piece::New(summary_message(text))),
        }
    }
    if out.is_empty() {
        out.push(Piece::New(crate::mapping::lead_in_message()));
    }
    Ok(Rendered {
        shell: crate::mapping::shell(document, "messages"),
        list: Some(out),
    })
}

/// A summary, as Chat spells it: an assistant message with string content.
fn summary_message(text: &str) -> Value {
    let mut m = Map::new();
    m.insert("role".into(), Value::from("assistant"));
    m.insert("content".into(), Value::from(text));
    Value::Object(m)
}

/// `original` with `key` set to `value`, every other field as it was.
pub(crate) fn with_field(original: &Value, key: &str, value: Value) -> Value {
    match original {
        // The replaced field is not cloned: it is a tool result's payload, the bulk of it.
        Value::Object(map) => {
            let mut map: Map<String, Value> = map
                .iter()
                .filter(|(k, _)| k.as_str() != key)
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            map.insert(key.to_owned(), value);
            Value::Object(map)
        }
        other => other.clone(),
    }
}
