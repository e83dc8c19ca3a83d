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

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use cutctx_model::{IdHashMap, Role, TranscriptTurn};
use cutctx_policies::TokenEstimator;
use serde_json::{Map, Value};

use crate::check_as_read::{Mapping, MapsAsRead};
use crate::content::Text;
use crate::hand_read::{Lex, ReadMessage, Str, once};
use crate::mapping::{Built, MessageIds, Piece, Rendered, Source, TurnSource, ViewItem};
use crate::roles::openai_role;
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
pub(crate) fn unlinked(item: &Value) -> Option<Value> {
    if !matches!(kind(0, item), Ok(Kind::Answer | Kind::Call(..))) {
        return None;
    }
    let mut item = item.clone();
    item.as_object_mut()?.remove("id")?;
    Some(item)
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
        return match openai_role(role) {
            Some(Role::User) => Ok(Kind::Prompt(Role::User)),
            Some(Role::System) => Ok(Kind::Prompt(Role::System)),
            Some(Role::Assistant) => Ok(Kind::Answer),
            Some(Role::Tool) | None => Err(Violation::new(
                FORMAT,
                Rule::UnknownRole,
                Some(i),
                format!("{}.role", path(i)),
            )),
        };
    };
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
    let mut check = Check::start(document)?;
    let Input::Items(items) = input(document)? else {
        return Ok(());
    };
    for (i, item) in items.iter().enumerate() {
        check.item(i, item)?;
    }
    check.finish()
}

/// The rules, item by item: [`validate`] over a document, and the text path over one parsed
/// item at a time.
///
/// An item's shape (its kind) is checked before any pairing rule of any item: a malformed
/// item is reported wherever it is, and the first broken pairing rule only when every item is
/// well formed.
#[derive(Debug, Default)]
pub(crate) struct Check {
    /// Calls awaiting their output since the last prompt: call_id -> (type, index).
    pending: BTreeMap<String, (&'static str, usize)>,
    /// Calls answered since the last prompt.
    answered: BTreeSet<String>,
    /// The previous item, when it was reasoning: the next must be a model item.
    reasoning: Option<usize>,
    /// The first pairing rule broken, reported once every item's shape is known.
    broken: Option<Violation>,
}

impl Check {
    /// The check of a request's top-level fields (`instructions`), before its items.
    pub(crate) fn start(document: &Value) -> Result<Self, Violation> {
        if document.is_object() {
            instructions(document)?;
        }
        Ok(Self::default())
    }

    /// Item `i`, in order: its shape now, its pairing rules unless one broke before.
    pub(crate) fn item(&mut self, i: usize, item: &Value) -> Result<(), Violation> {
        let k = kind(i, item)?;
        self.of_kind(i, k, item.get("status").is_some_and(Value::is_null));
        Ok(())
    }

    /// Item `i`, read as a [`Plain`] item: what [`Check::item`] does with its value (a plain
    /// item is always well formed, and its `status` never null).
    pub(crate) fn plain(&mut self, i: usize, item: &Plain<'_>) {
        self.of_kind(i, item.kind(), false);
    }

    /// The pairing rules for item `i` of kind `k`, unless one broke before.
    fn of_kind(&mut self, i: usize, k: Kind<'_>, null_status: bool) {
        if self.broken.is_none()
            && let Err(v) = self.rules(i, k, null_status)
        {
            self.broken = Some(v);
        }
    }

    fn rules(&mut self, i: usize, k: Kind<'_>, null_status: bool) -> Result<(), Violation> {
        if let Some(r) = self.reasoning.take()
            && !k.is_model_item()
        {
            return Err(reasoning_alone(r));
        }
        if !matches!(k, Kind::Output(..)) && null_status {
            return Err(Violation::new(
                FORMAT,
                Rule::NullStatus,
                Some(i),
                format!("{}.status", path(i)),
            ));
        }
        match k {
            Kind::Prompt(_) => {
                unanswered(&self.pending)?;
                self.pending.clear();
                self.answered.clear();
            }
            Kind::Call(ty, id) => {
                if self.pending.contains_key(id) || self.answered.contains(id) {
                    return Err(Violation::new(
                        FORMAT,
                        Rule::DuplicateCallId,
                        Some(i),
                        format!("{}.call_id", path(i)),
                    )
                    .with_id(id));
                }
                self.pending.insert(id.to_owned(), (ty, i));
            }
            Kind::Output(ty, id) => match self.pending.get(id) {
                Some((call_ty, _)) if *call_ty == ty => {
                    self.pending.remove(id);
                    self.answered.insert(id.to_owned());
                }
                _ => {
                    let rule = if self.answered.contains(id) {
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
            Kind::Reasoning => self.reasoning = Some(i),
            Kind::Answer | Kind::Other => {}
        }
        Ok(())
    }

    /// The end of the list: the first rule broken, a trailing reasoning item, or a call left
    /// without its output.
    pub(crate) fn finish(self) -> Result<(), Violation> {
        if let Some(v) = self.broken {
            return Err(v);
        }
        if let Some(r) = self.reasoning {
            return Err(reasoning_alone(r));
        }
        unanswered(&self.pending)
    }
}

/// A reasoning item at `i` not followed by a model item.
fn reasoning_alone(i: usize) -> Violation {
    Violation::new(
        FORMAT,
        Rule::ReasoningWithoutFollowingItem,
        Some(i),
        path(i),
    )
}

fn unanswered(pending: &BTreeMap<String, (&'static str, usize)>) -> Result<(), Violation> {
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
#[derive(Debug)]
struct Step {
    key: Arc<str>,
    reasoning: bool,
    last: Kind<'static>,
}

/// Maps a valid Responses document to turns.
pub(crate) fn build(
    document: &Value,
    estimator: &dyn TokenEstimator,
) -> Result<Built, FormatError> {
    let mut build = Build::start(document, estimator)?;
    let items = match input(document)? {
        Input::Text(s) => {
            let mut t = Text::default();
            t.push(s);
            let (content, estimate) = t.finish(estimator);
            build.built.push(
                TranscriptTurn::new("m0", Role::User, content, estimate)?,
                TurnSource::InputText,
            );
            return Ok(build.built);
        }
        Input::Items(items) => items,
    };
    for (i, item) in items.iter().enumerate() {
        build.item(i, item, estimator)?;
    }
    Ok(build.built)
}

/// The turns, item by item.
#[derive(Debug, Default)]
pub(crate) struct Build {
    pub(crate) built: Built,
    /// call_id -> the key of the step that made the call, for the calls since the last
    /// prompt: looked up by each output, hashed, never iterated. An output answers a call
    /// made since the last prompt (the check refuses any other list, and the turns built for
    /// it are dropped), so the calls before a prompt are let go at the prompt: the map holds
    /// a step's calls, not every call of the request.
    calls: IdHashMap<String, Arc<str>>,
    /// The keys of the steps since the last prompt that began with reasoning.
    reasoning_steps: BTreeSet<Arc<str>>,
    step: Option<Step>,
    ids: MessageIds,
}

impl Build {
    /// The same, with room for the turns of `n` items and their ids made ahead (a step's
    /// key is then its first turn's id, shared).
    pub(crate) fn sized(mut self, n: usize) -> Self {
        self.built.turns.reserve(n);
        self.built.sources.reserve(n);
        self.ids = MessageIds::ahead(n);
        self
    }

    /// The turns of a request's top-level fields: `instructions`, the system turn.
    pub(crate) fn start(
        document: &Value,
        estimator: &dyn TokenEstimator,
    ) -> Result<Self, FormatError> {
        let mut build = Self::default();
        if let Some(turn) = instructions_turn(document, estimator)? {
            build.built.push(turn, TurnSource::System);
        }
        Ok(build)
    }

    /// The turns of a list whose length is not known yet, with room for `capacity` of them,
    /// before the request's top-level fields are known: [`Build::finish_growing`] puts their
    /// turn first.
    pub(crate) fn growing(capacity: usize) -> Self {
        Self {
            built: Built::with_capacity(capacity),
            ids: MessageIds::growing(),
            ..Self::default()
        }
    }

    /// The turns of a list read as [`Build::growing`] says, with the turn of the request's
    /// `instructions` put first, as [`Build::start`] would have.
    pub(crate) fn finish_growing(
        mut self,
        document: &Value,
        estimator: &dyn TokenEstimator,
    ) -> Result<Self, FormatError> {
        if let Some(turn) = instructions_turn(document, estimator)? {
            self.built.insert_first(turn, TurnSource::System);
        }
        Ok(self)
    }

    /// The turn of item `i`, which the check accepted.
    pub(crate) fn item(
        &mut self,
        i: usize,
        item: &Value,
        estimator: &dyn TokenEstimator,
    ) -> Result<(), FormatError> {
        let k = kind(i, item)?;
        let mut text = Text::default();
        match k {
            Kind::Prompt(_) => text.push_content(item.get("content").unwrap_or(&Value::Null)),
            Kind::Output(..) => text.push_content(item.get("output").unwrap_or(&Value::Null)),
            _ => model_text(&mut text, item),
        }
        self.push(i, k, text, estimator)
    }

    /// The turn of item `i`, read as a [`Plain`] item: the turn [`Build::item`] makes of its
    /// value.
    pub(crate) fn plain(
        &mut self,
        i: usize,
        item: &Plain<'_>,
        estimator: &dyn TokenEstimator,
    ) -> Result<(), FormatError> {
        let mut text = Text::default();
        // The pieces in the order the value path reads them: content (or output), then a
        // call's name and arguments.
        for piece in &item.content {
            text.push_str(piece);
        }
        for piece in item.name.iter().chain(&item.arguments) {
            text.push(piece);
        }
        self.push(i, item.kind(), text, estimator)
    }

    /// Lets the calls since the last prompt go, at a prompt: no output after it answers one.
    /// A map grown far past what it holds (a step of many parallel calls, long gone) is
    /// replaced rather than cleared, so that clearing costs what was put in, not what the
    /// largest step once needed.
    fn forget_calls(&mut self) {
        if self.calls.capacity() > 4 * self.calls.len() + 16 {
            self.calls = IdHashMap::default();
        } else {
            self.calls.clear();
        }
        self.reasoning_steps.clear();
    }

    /// Adds the turn of item `i`, of kind `k` and text `text`, to its step.
    fn push(
        &mut self,
        i: usize,
        k: Kind<'_>,
        text: Text<'_>,
        estimator: &dyn TokenEstimator,
    ) -> Result<(), FormatError> {
        let id = self.ids.get(i);
        let (role, key) = match k {
            Kind::Prompt(role) => {
                self.step = None;
                self.forget_calls();
                (role, None)
            }
            Kind::Output(_, call_id) => {
                let key = self.calls.get(call_id).cloned();
                // The open step is the step of the previous item.
                self.step = key.as_ref().map(|key| Step {
                    key: Arc::clone(key),
                    reasoning: self.reasoning_steps.contains(key),
                    last: k.erased(),
                });
                (Role::Tool, key)
            }
            Kind::Reasoning | Kind::Call(..) | Kind::Answer | Kind::Other => {
                let joins = self.step.as_ref().is_some_and(|s| match (s.last, k) {
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
                let key = match self.step.as_mut() {
                    Some(s) if joins => {
                        s.last = k.erased();
                        Some(Arc::clone(&s.key))
                    }
                    _ if grouped => {
                        let key = Arc::clone(&id);
                        if k == Kind::Reasoning {
                            self.reasoning_steps.insert(Arc::clone(&key));
                        }
                        self.step = Some(Step {
                            key: Arc::clone(&key),
                            reasoning: k == Kind::Reasoning,
                            last: k.erased(),
                        });
                        Some(key)
                    }
                    _ => {
                        self.step = None;
                        None
                    }
                };
                if let (Kind::Call(_, call_id), Some(key)) = (k, &key) {
                    self.calls.insert(call_id.to_owned(), Arc::clone(key));
                }
                (Role::Assistant, key)
            }
        };
        let (content, estimate, written) = text.finish_deferring(estimator);
        let turn = TranscriptTurn::new(id, role, content, estimate)?.with_tool_call_id_opt(key);
        self.built
            .push_deferring(turn, TurnSource::Message(i), written);
        Ok(())
    }
}

/// The system turn of a request's `instructions`, when it has them.
fn instructions_turn(
    document: &Value,
    estimator: &dyn TokenEstimator,
) -> Result<Option<TranscriptTurn>, FormatError> {
    let Some(text) = instructions(document)? else {
        return Ok(None);
    };
    let mut t = Text::default();
    t.push(text);
    let (content, estimate) = t.finish(estimator);
    Ok(Some(TranscriptTurn::new(
        "instructions",
        Role::System,
        content,
        estimate,
    )?))
}

/// A Responses list's check and turns, mapping its items as the scan reads them (the
/// request's top-level turn is put first once it is known, [`Build::finish_growing`]).
impl<'a> MapsAsRead<Plain<'a>> for Mapping<Check, Build> {
    fn plain(
        &mut self,
        i: usize,
        item: &Plain<'a>,
        estimator: &dyn TokenEstimator,
    ) -> Option<Result<(), FormatError>> {
        // A plain item is always one the check takes (its rules are checked as it goes, and
        // the first broken one is reported at the end).
        self.check.plain(i, item);
        Some(self.build.plain(i, item, estimator))
    }
}

/// The text of a model item: message content, reasoning summaries, call names and arguments.
fn model_text<'a>(text: &mut Text<'a>, item: &'a Value) {
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

/// A Responses item of the shapes most requests are made of, read from its text without a
/// value: a message (a `role`, and string content or `input_text`/`output_text` parts), a
/// `function_call` (string `call_id`, `name`, `arguments`) or a `function_call_output`
/// (string `call_id`, string output or text parts), each with an optional string `id` and
/// `status`. Anything else is declined.
#[derive(Debug)]
pub(crate) struct Plain<'a> {
    /// What the item is: `Call` and `Output` of `function_call` only.
    shape: Shape,
    call_id: Cow<'a, str>,
    /// A message's text pieces, or an output's.
    content: Vec<Str<'a>>,
    name: Option<Cow<'a, str>>,
    arguments: Option<Cow<'a, str>>,
}

/// The kinds of item a [`Plain`] item can be.
#[derive(Debug, Clone, Copy)]
enum Shape {
    Message(Kind<'static>),
    Call,
    Output,
}

impl<'a> ReadMessage<'a> for Plain<'a> {
    /// One message, from the cursor.
    fn read_lex(lex: &mut Lex<'a>) -> Option<Self> {
        let (mut ty, mut role, mut content, mut output) = (None, None, None, None);
        let (mut call_id, mut name, mut arguments, mut id, mut status) =
            (None, None, None, None, None);
        lex.object(|lex, key| match key {
            "type" => once(&mut ty, lex.string()),
            "role" => once(&mut role, lex.string()),
            "content" => once(&mut content, read_text(lex, "content")),
            "output" => once(&mut output, read_text(lex, "output")),
            "call_id" => once(&mut call_id, lex.string()),
            "name" => once(&mut name, lex.string()),
            "arguments" => once(&mut arguments, lex.string()),
            // Neither the check nor the turn reads an item's id, nor a status that is set.
            "id" => once(&mut id, lex.string()),
            "status" => once(&mut status, lex.string()),
            _ => None,
        })?;
        let shape = match ty.as_deref() {
            None | Some("message") => {
                let kind = match openai_role(role?.as_ref()) {
                    Some(Role::User) => Kind::Prompt(Role::User),
                    Some(Role::System) => Kind::Prompt(Role::System),
                    Some(Role::Assistant) => Kind::Answer,
                    Some(Role::Tool) | None => return None,
                };
                let other = call_id.is_some() || name.is_some() || arguments.is_some();
                if other || output.is_some() {
                    return None;
                }
                return Some(Self {
                    shape: Shape::Message(kind),
                    call_id: Cow::Borrowed(""),
                    // A message may have no content (the value's check allows it): no text.
                    content: content.unwrap_or_default(),
                    name: None,
                    arguments: None,
                });
            }
            Some("function_call") if output.is_none() => Shape::Call,
            Some("function_call_output") if name.is_none() && arguments.is_none() => Shape::Output,
            _ => return None,
        };
        if role.is_some() || content.is_some() {
            return None;
        }
        Some(Self {
            shape,
            call_id: call_id?,
            // A call has no output (declined above when it has one): no text of its own.
            content: output.unwrap_or_default(),
            name,
            arguments,
        })
    }
}

impl Plain<'_> {
    /// What the item is, as [`kind`] says of its value.
    fn kind(&self) -> Kind<'_> {
        match self.shape {
            Shape::Message(kind) => kind,
            Shape::Call => Kind::Call("function_call", &self.call_id),
            Shape::Output => Kind::Output("function_call", &self.call_id),
        }
    }
}

/// A string, or an array of `input_text`, `output_text` or `text` parts (each with a string
/// `text`, and `annotations`, which no turn reads): the pieces of text it holds.
fn read_text<'a>(lex: &mut Lex<'a>, key: &'static str) -> Option<Vec<Str<'a>>> {
    // A string, else (nothing consumed) an array.
    if let Some(text) = lex.text_or_null().flatten() {
        return Some(vec![text.in_field(key)]);
    }
    let mut pieces = Vec::new();
    lex.array(|lex| {
        let (mut ty, mut text, mut annotations) = (None, None, None);
        lex.object(|lex, key| match key {
            "type" => once(&mut ty, lex.string()),
            "text" => once(&mut text, lex.text()),
            "annotations" => once(&mut annotations, lex.value()),
            _ => None,
        })?;
        matches!(ty?.as_ref(), "input_text" | "output_text" | "text").then_some(())?;
        pieces.push(text?);
        Some(())
    })?;
    Some(pieces)
}

/// Renders the view items of a Responses transcript: each kept item as it was, a masked
/// output with the stub as its `output` (a message, as its `content`), each summary a new
/// item; `instructions` stays only when its turn does.
pub(crate) fn render(
    document: &Value,
    listed: Option<Source<'_>>,
    turns: &[TranscriptTurn],
    sources: &[TurnSource],
    items: impl ExactSizeIterator<Item = Result<ViewItem, FormatError>>,
) -> Result<Rendered, FormatError> {
    let mut doc = crate::mapping::shell(document, "input");
    let mut out: Vec<Piece> = Vec::with_capacity(items.len());
    let mut instructions_kept = false;
    let mut only_input_text = true;
    for item in items {
        let item = item?;
        match &item {
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
                    out.push(Piece::New(Value::Object(m)));
                }
                Some(TurnSource::Message(i)) => {
                    only_input_text = false;
                    let Some(list) = listed.filter(|l| l.has(*i)) else {
                        return Err(crate::mapping::bad_position(*position));
                    };
                    let piece = match stub {
                        None => Piece::Kept(*i),
                        Some(stub) => {
                            let role = turns.get(*position).map(TranscriptTurn::role);
                            let key = masked_key(*i, role, list)?;
                            Piece::masked(*i, key, stub, *position)
                        }
                    };
                    out.push(piece);
                }
                _ => return Err(crate::mapping::bad_position(*position)),
            },
            ViewItem::Summary { text } => {
                only_input_text = false;
                out.push(Piece::New(summary_item(text)));
            }
        }
    }
    if !instructions_kept && let Value::Object(map) = &mut doc {
        map.remove("instructions");
    }
    if listed.is_none() && only_input_text && out.len() == 1 {
        // The input string, kept: the document as it was.
        return Ok(Rendered {
            shell: doc,
            list: None,
        });
    }
    if out.is_empty() {
        out.push(Piece::New(crate::mapping::lead_in_message()));
    }
    Ok(Rendered {
        shell: doc,
        list: Some(out),
    })
}

/// The field of item `i` the stub replaces: an output's `output`, a message's `content`. A
/// tool turn is always an output, so only other turns are read again to know.
fn masked_key(i: usize, role: Option<Role>, list: Source<'_>) -> Result<&'static str, FormatError> {
    if role == Some(Role::Tool) {
        return Ok("output");
    }
    let original = list.get(i).ok_or_else(|| crate::mapping::bad_position(i))?;
    match kind(i, &original)? {
        Kind::Output(..) => Ok("output"),
        Kind::Prompt(_) | Kind::Answer => Ok("content"),
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
