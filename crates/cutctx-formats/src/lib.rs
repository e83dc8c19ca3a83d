//! `cutctx-formats`: compaction of provider transcripts, in the providers' own formats.
//!
//! Three formats map to a cutctx [`Transcript`] and back:
//!
//! * [`Format::OpenAiChat`]: a Chat Completions `messages` array, or a request holding one
//!   ([`openai_chat`]);
//! * [`Format::OpenAiResponses`]: a Responses `input` item list, or a request holding `input`
//!   and `instructions` ([`openai_responses`]);
//! * [`Format::Anthropic`]: a Messages request with `system` and `messages`, or a bare
//!   `messages` array ([`anthropic`]).
//!
//! [`ProviderTranscript::parse`] checks the document against the format's structural rules
//! ([`validate()`]) and builds one turn per message (per item; per `tool_result` block for
//! Anthropic), ids `m{index}`. An assistant message (or model step) with tool calls and every
//! result of every one of its calls share one exchange key, so cutctx keeps them together or
//! removes them together, parallel calls included; reasoning items and thinking blocks travel
//! with the call they precede.
//!
//! [`ProviderTranscript::render`] maps a compacted view back: kept messages are re-emitted as
//! they were (unknown fields, names, cache marks and images included), masked results keep
//! their ids and carry the stub, dropped ones are gone, and each summary becomes a message at
//! the position of the first turn it folds. Every output is checked against the format's
//! validator before it is returned, so a rendered request never holds an orphaned call or
//! result; with a budget that fits, it equals the input.
//!
//! ```
//! use std::collections::BTreeMap;
//! use cutctx_model::CompactionBudget;
//! use cutctx_policies::{CompactionPolicy, DropOldestPolicy};
//! use cutctx_formats::{Format, ProviderTranscript};
//! use serde_json::json;
//!
//! let request = json!({
//!     "model": "gpt-4.1",
//!     "messages": [
//!         {"role": "system", "content": "You are terse."},
//!         {"role": "user", "content": "Weather in Paris and Rome?"},
//!         {"role": "assistant", "content": null, "tool_calls": [
//!             {"id": "c1", "type": "function", "function": {"name": "weather", "arguments": "{\"city\":\"Paris\"}"}},
//!             {"id": "c2", "type": "function", "function": {"name": "weather", "arguments": "{\"city\":\"Rome\"}"}}
//!         ]},
//!         {"role": "tool", "tool_call_id": "c2", "content": "Rome: 24 °C, sunny"},
//!         {"role": "tool", "tool_call_id": "c1", "content": "Paris: 18 °C, light rain"},
//!         {"role": "assistant", "content": "Paris 18 °C with rain; Rome 24 °C and sunny."},
//!         {"role": "user", "content": "Thanks!"}
//!     ]
//! });
//! let pt = ProviderTranscript::parse(Format::OpenAiChat, &request)?;
//! assert_eq!(pt.transcript().len(), 7);
//!
//! // A budget that fits: the request comes back as it was.
//! let plan = DropOldestPolicy.decide(pt.transcript(), &CompactionBudget::new(10_000))?;
//! assert_eq!(pt.apply(&plan, &BTreeMap::new())?.document, request);
//!
//! // A tight one: the call and both results leave together.
//! let budget = CompactionBudget::new(25).with_protected_recent_turns(2);
//! let plan = DropOldestPolicy.decide(pt.transcript(), &budget)?;
//! let out = pt.apply(&plan, &BTreeMap::new())?;
//! let roles: Vec<&str> = out.document["messages"].as_array().unwrap().iter()
//!     .map(|m| m["role"].as_str().unwrap()).collect();
//! assert_eq!(roles, ["system", "assistant", "user"]);
//! cutctx_formats::validate(Format::OpenAiChat, &out.document)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Token estimates use cutctx's character ratio by default ([`ProviderTranscript::parse`]) or
//! any [`TokenEstimator`] ([`ProviderTranscript::parse_with`]); with the `bpe` feature,
//! `BpeEstimator` counts real OpenAI tokens (`o200k_base`, `cl100k_base`). See
//! [`EstimatorSpec`] for choosing one by name.
//!
//! **Architecture invariant:** pure. No I/O, clock, environment, process or randomness; maps
//! are `BTreeMap`s. Errors ([`FormatError`]) carry stable codes and details naming message
//! indices, fields, rules and ids, never content.
#![forbid(unsafe_code)]
#![warn(
    clippy::disallowed_methods,
    clippy::disallowed_types,
    reason = "pure crate: no I/O, clock or random order"
)]

pub mod anthropic;
#[cfg(feature = "bpe")]
mod bpe;
mod check_as_read;
mod content;
pub mod descriptor;
mod error;
mod estimate;
mod hand_read;
mod ids;
pub mod left_in_text;
mod mapping;
mod open_validation;
pub mod openai_chat;
pub mod openai_responses;
mod policies;
mod prompt;
mod provider_format;
mod read_ahead;
#[cfg(test)]
mod readers_agree;
mod reasoning;
#[cfg(test)]
mod recipe_format;
mod repair;
mod scan;
mod text;
mod tool_input;
mod validate;
mod written;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::str::FromStr;

use cutctx_invariants::CompactionPlan;
use cutctx_model::{CompactionReport, Parallelism, SummarizationRequest, Transcript, details};
use cutctx_policies::{CharRatioEstimator, TokenEstimator};
use serde_json::{Map, Value};

use crate::provider_format::{ProviderFormat, per_format};

#[cfg(feature = "bpe")]
pub use bpe::BpeEstimator;
pub use content::MEDIA_TOKEN_ESTIMATE;
pub use cutctx_policies::registry::POLICY_NAMES;
pub use descriptor::{Descriptor, descriptor};
pub use error::FormatError;
pub use estimate::{BpeEncoding, EstimatorSpec};
use hand_read::ReadMessage;
pub use mapping::{LEAD_IN_TEXT, TurnSource};
use mapping::{Messages, Rendered, Source};
pub use open_validation::OpenValidation;
pub use policies::policy_named;
pub use prompt::{
    PromptCount, TurnCount, fixed_tokens, list_key, message_list, message_tokens, report_text,
};
pub use reasoning::{
    InvalidatedReasoning, ReasoningMode, ReasoningOutcome, StaleReasoning, stale_reasoning,
    without_reasoning,
};
pub use repair::{Repair, RepairKind, first_repaired, is_repairable, repair};
pub use text::TextParts;
pub use validate::{Rule, Violation, validate};
pub use written::to_string_as_written;

/// A provider transcript format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Format {
    /// OpenAI Chat Completions: `openai-chat`.
    OpenAiChat,
    /// OpenAI Responses: `openai-responses`.
    OpenAiResponses,
    /// Anthropic Messages: `anthropic`.
    Anthropic,
}

impl Format {
    /// Every format, in a fixed order.
    pub const ALL: [Self; 3] = [Self::OpenAiChat, Self::OpenAiResponses, Self::Anthropic];

    /// The format's name: `"openai-chat"`, `"openai-responses"` or `"anthropic"`.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        self.descriptor().name
    }
}

/// Whether `item` (a message of an OpenAI Chat or Anthropic request, an item of a Responses
/// request) was written by the model: an assistant message, or for Responses any model item
/// (reasoning, any call type of [`openai_responses::CALL_TYPES`], a server tool's item). Each
/// format's own rule decides ([`Descriptor::is_model_item`]), so a replay or a session asks
/// here rather than knowing item types; anything that is not a valid item is not a model item.
///
/// ```
/// use cutctx_formats::{Format, is_model_item};
/// use serde_json::json;
/// assert!(is_model_item(Format::Anthropic, &json!({"role": "assistant", "content": "Hi"})));
/// let call = json!({"type": "shell_call", "call_id": "c1", "action": {}});
/// assert!(is_model_item(Format::OpenAiResponses, &call));
/// let output = json!({"type": "shell_call_output", "call_id": "c1", "output": []});
/// assert!(!is_model_item(Format::OpenAiResponses, &output));
/// ```
#[must_use]
pub fn is_model_item(format: Format, item: &serde_json::Value) -> bool {
    format.descriptor().is_model_item(item)
}

/// Whether `message` (of a `format` request's message list) is a system message: an OpenAI
/// `system` or `developer` message, an Anthropic mid-conversation `system` message (its
/// system prompt is not a message, and the list never opens with one): its role is one of the
/// format's [system roles](descriptor::Roles::system).
///
/// ```
/// use cutctx_formats::{Format, is_system_message};
/// use serde_json::json;
/// let developer = json!({"role": "developer", "content": "Be brief."});
/// assert!(is_system_message(Format::OpenAiResponses, &developer));
/// assert!(!is_system_message(Format::Anthropic, &json!({"role": "user", "content": "Hi"})));
/// ```
#[must_use]
pub fn is_system_message(format: Format, message: &serde_json::Value) -> bool {
    format.descriptor().is_system_message(message)
}

/// An item of a request's list that cutctx carries untouched, in its place, while compaction
/// goes on around it: its index and why (`unknown_role`, `unknown_block`, `unknown_item`,
/// `compaction`, `compaction_trigger`, `configuration`, `tool_change`, `item_reference`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Opaque {
    /// The item's index in the message list.
    pub index: usize,
    /// Why it is carried untouched: a stable name, never content.
    pub reason: &'static str,
}

/// The items of `document`'s list (a `format` request) that compaction carries untouched
/// ([`Opaque`]), in order: for a front end to count and log. Anthropic's mid-conversation
/// system messages are a known role and not listed.
///
/// ```
/// use cutctx_formats::{Format, opaque_items};
/// use serde_json::json;
/// let doc = json!({"messages": [
///     {"role": "user", "content": "Hi"},
///     {"role": "critic", "content": "?"},
///     {"role": "assistant", "content": [{"type": "future_block"}]},
/// ]});
/// let found = opaque_items(Format::Anthropic, &doc);
/// assert_eq!(found.iter().map(|o| (o.index, o.reason)).collect::<Vec<_>>(),
///            [(1, "unknown_role"), (2, "unknown_block")]);
/// ```
#[must_use]
pub fn opaque_items(format: Format, document: &serde_json::Value) -> Vec<Opaque> {
    let reason: fn(&serde_json::Value) -> Option<&'static str> = match format {
        Format::Anthropic => anthropic::opaque_reason,
        Format::OpenAiResponses => openai_responses::untouchable_item,
        Format::OpenAiChat => |m| {
            let role = m.get("role").and_then(serde_json::Value::as_str)?;
            let roles = Format::OpenAiChat.descriptor().roles;
            roles.role_of(role).is_none().then_some("unknown_role")
        },
    };
    message_list(format, document)
        .iter()
        .enumerate()
        .filter_map(|(index, m)| reason(m).map(|reason| Opaque { index, reason }))
        .collect()
}

/// Whether `document` asks the provider itself to compact the conversation: a Responses
/// request whose last input item is a `compaction_trigger`. Such a request goes to the
/// provider as it came, never compacted; the provider answers with one `compaction` item,
/// which later requests carry, untouched, in place of what it summarized.
///
/// ```
/// use cutctx_formats::{Format, asks_provider_to_compact};
/// use serde_json::json;
/// let doc = json!({"input": [{"role": "user", "content": "Hi"}, {"type": "compaction_trigger"}]});
/// assert!(asks_provider_to_compact(Format::OpenAiResponses, &doc));
/// ```
#[must_use]
pub fn asks_provider_to_compact(format: Format, document: &serde_json::Value) -> bool {
    format == Format::OpenAiResponses && openai_responses::asks_provider_to_compact(document)
}

/// The format a model call's body is most likely in, from its shape alone, for a caller that
/// was not told: `input` is Responses; a `claude*` model is Anthropic; a `gpt-*` or
/// `o<digit>*` model is Chat; a top-level `system`, or `max_tokens` with no message only Chat
/// has (a `developer` or `tool` role, `tool_calls`), is Anthropic; anything else is Chat. A
/// `system` message in the list says nothing: both Chat and, mid-conversation, Anthropic have
/// them.
///
/// ```
/// use cutctx_formats::{Format, guess_format};
/// use serde_json::json;
/// assert_eq!(guess_format(&json!({"input": "hi"})), Format::OpenAiResponses);
/// let anthropic = json!({"max_tokens": 9, "messages": [
///     {"role": "user", "content": "go"}, {"role": "system", "content": "Be brief."}]});
/// assert_eq!(guess_format(&anthropic), Format::Anthropic);
/// let chat = json!({"max_tokens": 9, "messages": [{"role": "developer", "content": "Be brief."}]});
/// assert_eq!(guess_format(&chat), Format::OpenAiChat);
/// ```
#[must_use]
pub fn guess_format(body: &serde_json::Value) -> Format {
    use serde_json::Value;
    let (chat, anthropic) = (
        Format::OpenAiChat.descriptor(),
        Format::Anthropic.descriptor(),
    );
    if body
        .get(Format::OpenAiResponses.descriptor().list_key)
        .is_some()
    {
        return Format::OpenAiResponses;
    }
    let model = body.get("model").and_then(Value::as_str).unwrap_or("");
    if model.starts_with("claude") {
        return Format::Anthropic;
    }
    let o_series = model
        .strip_prefix('o')
        .is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_digit()));
    if model.starts_with("gpt-") || o_series {
        return Format::OpenAiChat;
    }
    // A role Chat names and Anthropic does not (`developer`, `tool`), or Chat's tool calls.
    let chat_role = |m: &Value| {
        m.get("role").and_then(Value::as_str).is_some_and(|r| {
            chat.roles.role_of(r).is_some() && anthropic.roles.role_of(r).is_none()
        })
    };
    let chat_only = body
        .get(chat.list_key)
        .and_then(Value::as_array)
        .is_some_and(|ms| {
            ms.iter()
                .any(|m| chat_role(m) || m.get(openai_chat::TOOL_CALLS).is_some())
        });
    if body.get("system").is_some() || (body.get("max_tokens").is_some() && !chat_only) {
        Format::Anthropic
    } else {
        Format::OpenAiChat
    }
}

/// `message` (of a `format` request's list) as what names it in a history: the message
/// without what a client may rewrite between calls while meaning the same thing. Anthropic: no
/// `cache_control` marks (Claude Code moves its marks to the newest message at every call), and
/// content of one plain text block written as the string it holds (it sends a message as a
/// marked block, then as a string once the mark has moved on). Other formats: the message.
///
/// ```
/// use cutctx_formats::{Format, history_form};
/// use serde_json::json;
/// let marked = json!({"role": "user", "content": [{"type": "text", "text": "Hi", "cache_control": {"type": "ephemeral"}}]});
/// let plain = json!({"role": "user", "content": "Hi"});
/// assert_eq!(history_form(Format::Anthropic, &marked), history_form(Format::Anthropic, &plain));
/// assert_ne!(history_form(Format::OpenAiChat, &marked), history_form(Format::OpenAiChat, &plain));
/// ```
#[must_use]
pub fn history_form(
    format: Format,
    message: &serde_json::Value,
) -> std::borrow::Cow<'_, serde_json::Value> {
    match format {
        Format::Anthropic => anthropic::history_form(message),
        Format::OpenAiChat | Format::OpenAiResponses => std::borrow::Cow::Borrowed(message),
    }
}

/// Where each message of the list of `text` (a `format` request, or a bare list) lies in it:
/// the byte span of each, in order, found by a hand-written walk of its brackets and strings.
/// `None` where the walk declines the text (no list, a repeated key, a key with an escape, a
/// list of anything but objects): it checks only the structure it walks, so give it a text
/// already parsed. A front end that keeps a conversation's last body finds by them how much of
/// the next body's history is the same bytes.
///
/// ```
/// use cutctx_formats::{Format, message_spans};
/// let text = r#"{"model": "m", "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]}"#;
/// let spans = message_spans(Format::OpenAiChat, text).expect("a list");
/// assert_eq!(&text[spans[1].clone()], r#"{"role": "assistant", "content": "yo"}"#);
/// ```
#[must_use]
pub fn message_spans(format: Format, text: &str) -> Option<Vec<std::ops::Range<usize>>> {
    match scan::top(text, list_key(format))? {
        scan::Top::List(items) | scan::Top::Object(_, items) => Some(items),
    }
}

/// Whether `message` (of a `format` request's list) holds signed reasoning: an Anthropic
/// message with a `thinking` or `redacted_thinking` block, a Responses `reasoning` item.
/// Chat Completions messages carry none.
///
/// ```
/// use cutctx_formats::{Format, holds_reasoning};
/// use serde_json::json;
/// let item = json!({"type": "reasoning", "id": "rs_1", "encrypted_content": "gAAA", "summary": []});
/// assert!(holds_reasoning(Format::OpenAiResponses, &item));
/// assert!(!holds_reasoning(Format::OpenAiChat, &json!({"role": "assistant", "content": "hi"})));
/// ```
#[must_use]
pub fn holds_reasoning(format: Format, message: &serde_json::Value) -> bool {
    match format {
        Format::OpenAiChat => false,
        Format::Anthropic => anthropic::reasoning_blocks(message).next().is_some(),
        Format::OpenAiResponses => openai_responses::reasoning_text(message).is_some(),
    }
}

/// Where the tool loop in progress at the end of `list` (a `format` request's message list)
/// starts: the index of its first model message, when the list ends with tool results (a
/// Chat `tool` message, an Anthropic user message answering `tool_use` blocks, a Responses
/// call output) and so continues the model's turn; `None` when the list ends otherwise. The
/// providers ask for the loop's reasoning back intact: Anthropic requires the thinking within
/// a tool-use turn, and OpenAI every reasoning item since the last user message; the session
/// holds off a firing that would invalidate it while the request still fits.
///
/// ```
/// use cutctx_formats::{Format, open_tool_loop};
/// use serde_json::json;
/// let list = [
///     json!({"role": "user", "content": "go"}),
///     json!({"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "f", "input": {}}]}),
///     json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "ok"}]}),
/// ];
/// assert_eq!(open_tool_loop(Format::Anthropic, &list), Some(1));
/// assert_eq!(open_tool_loop(Format::Anthropic, &list[..2]), None);
/// ```
#[must_use]
pub fn open_tool_loop(format: Format, list: &[serde_json::Value]) -> Option<usize> {
    let results = |m: &serde_json::Value| format.descriptor().is_tool_result(m);
    if !list.last().is_some_and(results) {
        return None;
    }
    // The turn began after the last message that is neither the model's nor results.
    let start = list
        .iter()
        .rposition(|m| !is_model_item(format, m) && !results(m))
        .map_or(0, |i| i + 1);
    list.iter()
        .skip(start)
        .position(|m| is_model_item(format, m))
        .map(|k| start + k)
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Format {
    type Err = FormatError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|f| f.as_str() == s)
            .ok_or_else(|| {
                FormatError::unsupported(
                    format!(
                        "Unknown format {s:?}; expected openai-chat, openai-responses or anthropic."
                    ),
                    details! { "format" => s },
                )
            })
    }
}

/// A provider document, mapped to a cutctx transcript, remembering where each turn came from.
///
/// Build one with [`ProviderTranscript::parse`], plan against [`ProviderTranscript::transcript`]
/// with any policy, then [`ProviderTranscript::apply`] the plan (or
/// [`ProviderTranscript::render`] a view you applied yourself) to get the compacted document.
#[derive(Debug, Clone)]
pub struct ProviderTranscript {
    format: Format,
    document: Value,
    transcript: Transcript,
    sources: Vec<TurnSource>,
    positions: mapping::Positions,
    /// The tool definitions' estimate, counted with the turns' estimator.
    tools_tokens: u64,
    /// When read from text ([`ProviderTranscript::from_text_with`]): where the messages lie
    /// in it; `document` is then the request without its list.
    layout: Option<text::Layout>,
    /// The turns whose content is left in that text, by position
    /// ([`ProviderTranscript::from_text_deferred`]).
    deferred: Vec<mapping::LeftContent>,
    /// What rendering does with reasoning whose prefix the view changed.
    reasoning: ReasoningMode,
    /// The first message at which `document` already differs from the caller's request (a
    /// repair's first drop): reasoning from there on is invalid whatever the view keeps.
    changed_from: Option<usize>,
}

/// A compacted provider request as text, with cutctx's report and view: what
/// [`ProviderTranscript::apply_text`] returns.
#[derive(Debug, Clone)]
pub struct CompactedText {
    /// The compacted request: the input's bytes wherever compaction did not change them.
    pub text: String,
    /// What was kept, masked, summarized and dropped, by turn id.
    pub report: CompactionReport,
    /// The compacted view, as cutctx turns.
    pub view: Transcript,
    /// The thinking blocks and reasoning items whose prefix the compaction changed, and
    /// whether they were removed or kept ([`ProviderTranscript::set_reasoning`]).
    pub reasoning: ReasoningOutcome,
}

/// A compacted provider request as text parts, to write from the request's text, with
/// cutctx's report and view: what [`ProviderTranscript::apply_parts`] returns.
#[derive(Debug, Clone)]
pub struct CompactedParts {
    /// The compacted request, as parts of the input's text and text written anew.
    pub parts: TextParts,
    /// What was kept, masked, summarized and dropped, by turn id.
    pub report: CompactionReport,
    /// The compacted view, as cutctx turns.
    pub view: Transcript,
    /// The thinking blocks and reasoning items whose prefix the compaction changed, and
    /// whether they were removed or kept ([`ProviderTranscript::set_reasoning`]).
    pub reasoning: ReasoningOutcome,
}

/// A compacted provider document, with cutctx's report and view.
#[derive(Debug, Clone)]
pub struct Compacted {
    /// The compacted document, in the input's format and shape.
    pub document: Value,
    /// What was kept, masked, summarized and dropped, by turn id.
    pub report: CompactionReport,
    /// The compacted view, as cutctx turns.
    pub view: Transcript,
    /// The thinking blocks and reasoning items whose prefix the compaction changed, and
    /// whether they were removed or kept ([`ProviderTranscript::set_reasoning`]).
    pub reasoning: ReasoningOutcome,
}

impl ProviderTranscript {
    /// Maps `document` with the default estimator (4 code points per token).
    ///
    /// # Errors
    ///
    /// `FORMAT_ERROR` for a document without the format's shape, `FORMAT_INVALID_REQUEST` for
    /// one the provider would refuse (see [`validate()`]), both naming the rule and the path.
    pub fn parse(format: Format, document: &Value) -> Result<Self, FormatError> {
        Self::parse_with(format, document, &CharRatioEstimator::default())
    }

    /// Maps `document`, estimating each turn with `estimator`.
    ///
    /// # Errors
    ///
    /// As [`ProviderTranscript::parse`].
    pub fn parse_with(
        format: Format,
        document: &Value,
        estimator: &dyn TokenEstimator,
    ) -> Result<Self, FormatError> {
        Self::from_document_with(format, document.clone(), estimator)
    }

    /// As [`ProviderTranscript::parse_with`], keeping `document` itself rather than a copy:
    /// for a caller that has no further use for it (the command line), a large request is
    /// then held once.
    ///
    /// # Errors
    ///
    /// As [`ProviderTranscript::parse`].
    pub fn from_document_with(
        format: Format,
        document: Value,
        estimator: &dyn TokenEstimator,
    ) -> Result<Self, FormatError> {
        validate(format, &document).map_err(FormatError::from_violation)?;
        let built = per_format!(format, F => F::build(&document, estimator))?;
        let tools_tokens = prompt::tools_tokens(format, &document, estimator);

        let transcript = Transcript::new(built.turns)?;
        Ok(Self {
            format,
            document,
            positions: mapping::Positions::new(),
            transcript,
            sources: built.sources,
            tools_tokens,
            layout: None,
            deferred: Vec::new(),
            reasoning: ReasoningMode::default(),
            changed_from: None,
        })
    }

    /// Maps the request `text` without building a tree of the whole document: the list is
    /// scanned for where its messages lie, and each message is parsed, checked and mapped on
    /// its own. The transcript keeps only the request's other fields and the messages' spans;
    /// [`ProviderTranscript::apply_text`] writes the compacted request by copying them.
    ///
    /// `None` when the text is not JSON, breaks a rule of the format, or has a shape this path
    /// does not take (a Responses `input` string, an empty list, a repeated top-level key):
    /// parse it as a value and use [`ProviderTranscript::from_document_with`], which says what
    /// is wrong or maps it. The two agree on every text both take.
    #[must_use]
    pub fn from_text_with(
        format: Format,
        text: &str,
        estimator: &dyn TokenEstimator,
    ) -> Option<Self> {
        Self::read_text(format, text, estimator, Reading::Hand)
    }

    /// [`ProviderTranscript::from_text_with`], its messages read as `reading` says.
    fn read_text(
        format: Format,
        text: &str,
        estimator: &dyn TokenEstimator,
        reading: Reading,
    ) -> Option<Self> {
        let (text::Read { shell, layout }, mut built) = read_and_map(
            format,
            text,
            estimator,
            reading,
            read_ahead::AHEAD_FROM_BYTES,
        )?;
        // An Anthropic message may hold several turns, so its lists are sized by messages
        // and grow past that by doubling; the spare room would stay held to the end, through
        // the rendering, where the run's memory peaks.
        built.turns.shrink_to_fit();
        built.sources.shrink_to_fit();
        let tools_tokens = prompt::tools_tokens(format, &shell, estimator);

        // The builders make each turn's id before its content, Chat's all ahead, and give a
        // result the key its call holds: the ids need no second copy.
        let transcript = Transcript::with_packed_ids(built.turns).ok()?;
        Some(Self {
            format,
            document: shell,
            positions: mapping::Positions::new(),
            transcript,
            sources: built.sources,
            tools_tokens,
            layout: Some(layout),
            deferred: built.deferred,
            reasoning: ReasoningMode::default(),
            changed_from: None,
        })
    }

    /// The estimate of the request's tool definitions (`tools`, and Chat's legacy
    /// `functions`): the parse's estimator over their canonical JSON text (keys sorted, no
    /// whitespace). Tools are part of the prompt but not turns: no policy removes them.
    #[must_use]
    pub const fn tools_tokens(&self) -> u64 {
        self.tools_tokens
    }

    /// The completion room the request asks for itself, the default output reserve: Chat's
    /// `max_completion_tokens` (else `max_tokens`), the Responses `max_output_tokens`, the
    /// Anthropic `max_tokens`; `None` when the request names none (or is a bare list).
    ///
    /// # Errors
    ///
    /// `FORMAT_ERROR` naming the field when it is present but not a non-negative integer.
    pub fn requested_output(&self) -> Result<Option<u64>, FormatError> {
        prompt::requested_output(self.format, &self.document)
    }

    /// The whole prompt, part by part: tools, system turns, every turn by position, and
    /// `reserve` tokens kept for the completion. Use [`PromptCount::turn_budget`] to turn a
    /// whole-prompt budget into the budget of the turns.
    #[must_use]
    pub fn prompt_count(&self, reserve: u64) -> PromptCount {
        PromptCount::of(&self.transcript, self.tools_tokens, reserve)
    }

    /// As [`ProviderTranscript::prompt_count`], the parts' sums only: its `turns` is empty,
    /// for a caller that plans against the sums and reports them (the list of turns is a
    /// copy of every turn id, as large as the transcript's own).
    #[must_use]
    pub fn prompt_totals(&self, reserve: u64) -> PromptCount {
        PromptCount::totals(&self.transcript, self.tools_tokens, reserve)
    }

    /// The format.
    #[must_use]
    pub const fn format(&self) -> Format {
        self.format
    }

    /// The transcript to plan against.
    #[must_use]
    pub const fn transcript(&self) -> &Transcript {
        &self.transcript
    }

    /// The document as it was given (without its list when it was read from text) and the
    /// transcript it maps to, taken apart: for a caller
    /// that lent the document ([`ProviderTranscript::from_document_with`]) and wants it back,
    /// with the transcript, without a copy of either.
    ///
    /// ```
    /// use cutctx_formats::{Format, ProviderTranscript};
    /// let request = serde_json::json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]});
    /// let pt = ProviderTranscript::parse(Format::OpenAiChat, &request)?;
    /// let (document, transcript) = pt.into_parts();
    /// assert_eq!(document, request);
    /// assert_eq!(transcript.turns().len(), 1);
    /// # Ok::<(), cutctx_formats::FormatError>(())
    /// ```
    #[must_use]
    pub fn into_parts(self) -> (Value, Transcript) {
        (self.document, self.transcript)
    }

    /// The document as it was given.
    #[must_use]
    pub const fn document(&self) -> &Value {
        &self.document
    }

    /// Where each turn came from, by position.
    #[must_use]
    pub fn sources(&self) -> &[TurnSource] {
        &self.sources
    }

    /// Where the turn `turn_id` came from.
    #[must_use]
    pub fn source(&self, turn_id: &str) -> Option<&TurnSource> {
        self.positions
            .get(&self.transcript, turn_id)
            .and_then(|p| self.sources.get(p))
    }

    /// The original JSON the turn `turn_id` came from: its whole message (or item), the
    /// Anthropic `system`, the Responses `instructions` or its `input` string.
    #[must_use]
    pub fn original(&self, turn_id: &str) -> Option<&Value> {
        match self.source(turn_id)? {
            TurnSource::System => self
                .document
                .get("system")
                .or_else(|| self.document.get("instructions")),
            TurnSource::InputText => self.document.get("input"),
            source => {
                let i = source.message()?;
                let list = match &self.document {
                    Value::Array(list) => list,
                    doc => doc
                        .get("messages")
                        .or_else(|| doc.get("input"))
                        .and_then(Value::as_array)?,
                };
                list.get(i)
            }
        }
    }

    /// Maps a view derived from [`ProviderTranscript::transcript`] (by `cutctx_executor::apply`) back to
    /// a document of the input's format and shape, and checks it with [`validate()`].
    ///
    /// # Errors
    ///
    /// `FORMAT_VIEW_MISMATCH` when the view holds turns this transcript does not have, or out
    /// of order, or when the transcript was read from text (use
    /// [`ProviderTranscript::render_text`]); `FORMAT_UNSUPPORTED` for a mask on a turn with no
    /// payload a stub can replace (shipped policies mask tool results only);
    /// `FORMAT_INVALID_REQUEST` should the output break a rule of the provider, which no view
    /// of a valid plan produces.
    pub fn render(&self, view: &Transcript) -> Result<Value, FormatError> {
        self.render_settled(view).map(|(out, _)| out)
    }

    /// As [`ProviderTranscript::render`], with what became of the reasoning whose prefix the
    /// view changed ([`ProviderTranscript::set_reasoning`]).
    ///
    /// # Errors
    ///
    /// As [`ProviderTranscript::render`]; `FORMAT_REASONING_INVALIDATED` with
    /// [`ReasoningMode::Refuse`] when the view invalidates any.
    pub fn render_settled(
        &self,
        view: &Transcript,
    ) -> Result<(Value, ReasoningOutcome), FormatError> {
        self.render_traced(view)
            .map(|(out, outcome, _)| (out, outcome))
    }

    /// As [`ProviderTranscript::render_settled`], with the origin of each message of the
    /// output's list: the index of the input message it is, unchanged (kept whole: not
    /// masked, merged or stripped of reasoning), or `None` for one compaction made or
    /// changed. A writer that copies kept messages from the request's text
    /// ([`to_string_as_written`]) copies exactly these.
    ///
    /// # Errors
    ///
    /// As [`ProviderTranscript::render_settled`].
    pub fn render_traced(
        &self,
        view: &Transcript,
    ) -> Result<(Value, ReasoningOutcome, Vec<Option<usize>>), FormatError> {
        let list = Messages::borrowed(&self.document, list_key(self.format));
        let (rendered, outcome) = self.pieces(view, None)?;
        let (out, origins) =
            mapping::resolve_traced(rendered, list_key(self.format), self.list_or_empty(list)?)?;
        validate(self.format, &out).map_err(FormatError::Invalid)?;
        Ok((out, outcome, origins))
    }

    /// Says what rendering does with the thinking blocks and reasoning items after the first
    /// message a view changes (see [`ReasoningMode`]); [`ReasoningMode::Strip`] until set.
    pub const fn set_reasoning(&mut self, mode: ReasoningMode) {
        self.reasoning = mode;
    }

    /// Says that the request this transcript was read from already differs from the caller's
    /// at message `position` of its list (and maybe after): what `--repair` dropped first.
    /// The thinking blocks and reasoning items from there on had a different prefix when the
    /// provider made them, so rendering treats them as a compaction's change would, even when
    /// the view keeps everything.
    ///
    /// ```
    /// use cutctx_formats::{Format, ProviderTranscript};
    /// use serde_json::json;
    /// let request = json!({"messages": [
    ///     {"role": "user", "content": "go"},
    ///     {"role": "assistant", "content": [
    ///         {"type": "thinking", "thinking": "hm", "signature": "s"},
    ///         {"type": "text", "text": "done"}]}]});
    /// let mut pt = ProviderTranscript::parse(Format::Anthropic, &request)?;
    /// pt.set_changed_from(Some(0));
    /// let (out, outcome) = pt.render_settled(pt.transcript())?;
    /// assert_eq!(outcome.invalidated.len(), 1);
    /// assert_eq!(out["messages"][1]["content"].as_array().unwrap().len(), 1);
    /// # Ok::<(), cutctx_formats::FormatError>(())
    /// ```
    pub const fn set_changed_from(&mut self, position: Option<usize>) {
        self.changed_from = position;
    }

    /// Pins the tool results that answer the calls `call_ids` (Chat `tool_call_id`, Responses
    /// `call_id`, Anthropic `tool_use_id`): no policy masks, summarizes or drops them, and so
    /// none removes their calls, which stand in one exchange with them. Returns how many
    /// turns it pinned; an id no result answers pins nothing.
    ///
    /// For a result the model has just asked to see again (a retrieval of what a mask
    /// replaced), which a firing must not take away at once.
    ///
    /// ```
    /// use std::collections::BTreeSet;
    /// use cutctx_formats::{Format, ProviderTranscript};
    /// use serde_json::json;
    /// let request = json!({"messages": [
    ///     {"role": "user", "content": "look"},
    ///     {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function",
    ///         "function": {"name": "read", "arguments": "{}"}}]},
    ///     {"role": "tool", "tool_call_id": "c1", "content": "a long result"}]});
    /// let mut pt = ProviderTranscript::parse(Format::OpenAiChat, &request)?;
    /// assert_eq!(pt.pin_results(&BTreeSet::from(["c1".to_owned()]))?, 1);
    /// assert!(pt.transcript().turns()[2].pinned());
    /// # Ok::<(), cutctx_formats::FormatError>(())
    /// ```
    ///
    /// # Errors
    ///
    /// `FORMAT_UNSUPPORTED` for a transcript read from text, which keeps no messages to read
    /// the ids from; `VALIDATION_ERROR` should the pinned turns not make a transcript (they
    /// always do: only the flag changes).
    pub fn pin_results(&mut self, call_ids: &BTreeSet<String>) -> Result<usize, FormatError> {
        if call_ids.is_empty() {
            return Ok(0);
        }
        if self.layout.is_some() {
            return Err(FormatError::unsupported(
                "results can be pinned only in a request mapped from a value",
                details! { "format" => self.format.as_str() },
            ));
        }
        let pin: Vec<bool> = self
            .answered_calls()
            .iter()
            .map(|id| id.is_some_and(|id| call_ids.contains(id)))
            .collect();
        let count = pin.iter().filter(|p| **p).count();
        if count > 0 {
            let turns = self
                .transcript
                .turns()
                .iter()
                .zip(&pin)
                .map(|(t, &p)| {
                    if p {
                        t.clone().with_pinned(true)
                    } else {
                        t.clone()
                    }
                })
                .collect();
            self.transcript = Transcript::new(turns)?;
        }
        Ok(count)
    }

    /// Per turn, the id of the call it is the result of, as the request's messages say
    /// (`None` for every other turn, and for every turn of a transcript read from text, which
    /// keeps no messages to read the ids from).
    ///
    /// ```
    /// use cutctx_formats::{Format, ProviderTranscript};
    /// use serde_json::json;
    /// let request = json!({"model": "m", "messages": [
    ///     {"role": "user", "content": "read it"},
    ///     {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function",
    ///         "function": {"name": "read", "arguments": "{}"}}]},
    ///     {"role": "tool", "tool_call_id": "c1", "content": "a long result"}]});
    /// let pt = ProviderTranscript::parse(Format::OpenAiChat, &request)?;
    /// assert_eq!(pt.answered_calls(), [None, None, Some("c1")]);
    /// # Ok::<(), cutctx_formats::FormatError>(())
    /// ```
    #[must_use]
    pub fn answered_calls(&self) -> Vec<Option<&str>> {
        if self.layout.is_some() {
            return vec![None; self.sources.len()];
        }
        // A request without a list (a Responses `input` string) holds no results.
        let list = mapping::messages_key(&self.document, list_key(self.format))
            .0
            .and_then(Value::as_array)
            .map_or(&[][..], Vec::as_slice);
        let descriptor = self.format.descriptor();
        self.sources
            .iter()
            .map(|source| match source {
                TurnSource::Message(i) => descriptor.answered_call(list.get(*i)?, None),
                TurnSource::Block { message, block } => {
                    descriptor.answered_call(list.get(*message)?, Some(*block))
                }
                _ => None,
            })
            .collect()
    }

    /// Pins the request's first user turn (the task statement, in an agent loop), so that a
    /// plan keeps it as it is; returns whether there was one. A plan then never masks,
    /// summarizes or drops it, and it stays in place at the head of the history, where a
    /// prompt cache keeps reading it across compactions.
    ///
    /// # Errors
    ///
    /// As [`Transcript::new`]: the transcript with the pin is checked again.
    pub fn pin_first_user(&mut self) -> Result<bool, FormatError> {
        let first = self
            .transcript
            .roles()
            .iter()
            .position(|r| *r == cutctx_model::Role::User);
        self.pin_turn(first)
    }

    /// Pins the request's last user turn (the latest thing the user asked; tool results are
    /// tool turns, not user turns), as [`ProviderTranscript::pin_first_user`] pins the first;
    /// returns whether there was one.
    ///
    /// ```
    /// use cutctx_formats::{Format, ProviderTranscript};
    /// use serde_json::json;
    /// let request = json!({"model": "m", "messages": [
    ///     {"role": "user", "content": "the task"},
    ///     {"role": "assistant", "content": "ok"},
    ///     {"role": "user", "content": "and now this"},
    ///     {"role": "assistant", "content": "done"},
    /// ]});
    /// let estimator = cutctx_formats::EstimatorSpec::default().estimator()?;
    /// let mut pt = ProviderTranscript::from_document_with(Format::OpenAiChat, request, estimator.as_ref())?;
    /// assert!(pt.pin_latest_user()?);
    /// let pinned: Vec<bool> = pt.transcript().turns().iter().map(|t| t.pinned()).collect();
    /// assert_eq!(pinned, [false, false, true, false]);
    /// # Ok::<(), cutctx_formats::FormatError>(())
    /// ```
    ///
    /// # Errors
    ///
    /// As [`Transcript::new`]: the transcript with the pin is checked again.
    pub fn pin_latest_user(&mut self) -> Result<bool, FormatError> {
        let last = self
            .transcript
            .roles()
            .iter()
            .rposition(|r| *r == cutctx_model::Role::User);
        self.pin_turn(last)
    }

    /// Pins the turn at `at`, if any; whether there was one.
    fn pin_turn(&mut self, at: Option<usize>) -> Result<bool, FormatError> {
        let Some(at) = at else {
            return Ok(false);
        };
        if self.transcript.turns()[at].pinned() {
            return Ok(true);
        }
        let turns = self
            .transcript
            .turns()
            .iter()
            .enumerate()
            .map(|(i, t)| {
                if i == at {
                    t.clone().with_pinned(true)
                } else {
                    t.clone()
                }
            })
            .collect();
        self.transcript = Transcript::new(turns)?;
        Ok(true)
    }

    /// As [`ProviderTranscript::render`], consuming the transcript: kept messages are moved
    /// into the output rather than copied, so a large request is not held twice.
    ///
    /// # Errors
    ///
    /// As [`ProviderTranscript::render`].
    pub fn render_into(
        mut self,
        view: &Transcript,
    ) -> Result<(Value, ReasoningOutcome), FormatError> {
        let (rendered, outcome) = self.pieces(view, None)?;
        let list = Messages::owned(&mut self.document, list_key(self.format));
        let out = mapping::resolve(rendered, list_key(self.format), self.list_or_empty(list)?)?;
        validate(self.format, &out).map_err(FormatError::Invalid)?;
        Ok((out, outcome))
    }

    /// Maps a view back to the request's text: `text` must be the text this transcript was
    /// read from ([`ProviderTranscript::from_text_with`]). The bytes before and after the
    /// message list, and each kept message, are copied from `text`; a masked message is its
    /// own bytes with the stub in place of the replaced value; summaries and rebuilt messages
    /// are written as compact JSON (between messages of an indented request too: the output
    /// stays valid JSON, its new parts on one line each). A transcript mapped from a value
    /// writes its rendered document as compact JSON. The output is made by the renderers
    /// [`ProviderTranscript::render`] uses, whose outputs are checked against the format's
    /// rules; builds with debug assertions check this output too, message by message.
    ///
    /// # Errors
    ///
    /// As [`ProviderTranscript::render`]; `FORMAT_VIEW_MISMATCH` when `text` is not the text
    /// read.
    pub fn render_text(&self, view: &Transcript, text: &str) -> Result<String, FormatError> {
        let (parts, _) = self.render_parts(view, text)?;
        parts.to_text(text).ok_or_else(|| not_the_text(self.format))
    }

    /// Frees the contents of the turns `plan` does not keep as they are
    /// ([`Transcript::release_contents`]), for a caller about to apply it and render from
    /// text: applying reads only the kept turns' contents, and rendering from text
    /// ([`ProviderTranscript::render_parts`]) reads the view and the turns' ids and roles.
    /// [`ProviderTranscript::transcript`] and summarization inputs show those contents empty
    /// afterwards. A plan of another length frees nothing (applying it fails).
    ///
    /// ```
    /// use std::collections::BTreeMap;
    /// use cutctx_formats::{Format, ProviderTranscript};
    /// use cutctx_model::CompactionBudget;
    /// use cutctx_policies::{CharRatioEstimator, CompactionPolicy, DropOldestPolicy};
    /// let text = r#"{"messages":[{"role":"user","content":"an old question"},{"role":"user","content":"hi"}]}"#;
    /// let mut pt =
    ///     ProviderTranscript::from_text_with(Format::OpenAiChat, text, &CharRatioEstimator::default())
    ///         .expect("a plain request");
    /// let budget = CompactionBudget::new(1).with_protected_recent_turns(1);
    /// let plan = DropOldestPolicy.decide(pt.transcript(), &budget)?;
    /// pt.release_unkept_contents(&plan);
    /// assert_eq!(pt.transcript().turns()[0].content(), "");
    /// let out = pt.apply_text(&plan, &BTreeMap::new(), text)?;
    /// assert_eq!(out.text, r#"{"messages":[{"role":"user","content":"hi"}]}"#);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn release_unkept_contents(&mut self, plan: &CompactionPlan) {
        if plan.actions.len() != self.transcript.len() {
            return;
        }
        self.transcript.release_contents(|position| {
            plan.actions
                .get(position)
                .is_some_and(|a| matches!(a.view(), cutctx_model::ActionView::Keep))
        });
    }

    /// As [`ProviderTranscript::render_text`], the output as parts to write from `text`
    /// ([`TextParts::write_to`]) rather than whole: everything that can fail has been checked
    /// when it returns, and the output is never held whole.
    ///
    /// # Errors
    ///
    /// As [`ProviderTranscript::render_text`].
    pub fn render_parts(
        &self,
        view: &Transcript,
        text: &str,
    ) -> Result<(TextParts, ReasoningOutcome), FormatError> {
        let Some(layout) = &self.layout else {
            let (out, outcome) = self.render_settled(view)?;
            let written = serde_json::to_string(&out).map_err(|e| unwritable(self.format, &e))?;
            return Ok((TextParts::whole(written, text::TextId::of(text)), outcome));
        };
        if !layout.text.is(text) {
            return Err(not_the_text(self.format));
        }
        let source = Source::Text {
            text,
            spans: &layout.items,
        };
        let (mut rendered, outcome) = self.pieces(view, Some(source))?;
        self.locate_patches(&mut rendered);
        let out = match text::write(&rendered, &self.document, layout, text) {
            Some(written) => written.map_err(|e| unwritable(self.format, &e))?,
            None => {
                // A top-level field changed (the system text masked or dropped, which shipped
                // policies never do): the request is written from values.
                let Rendered { shell, list } = rendered;
                let mut document = shell;
                if let Some(pieces) = list {
                    let values = (0..layout.items.len())
                        .map(|i| source.get(i).map(std::borrow::Cow::into_owned))
                        .collect::<Option<Vec<Value>>>()
                        .ok_or_else(|| mapping::bad_position(0))?;
                    let rendered = Rendered {
                        shell: document,
                        list: Some(pieces),
                    };
                    document =
                        mapping::resolve(rendered, list_key(self.format), Messages::Owned(values))?;
                }
                let written =
                    serde_json::to_string(&document).map_err(|e| unwritable(self.format, &e))?;
                TextParts::whole(written, layout.text)
            }
        };
        // Every piece is a message the check accepted (kept, or masked in the payload the
        // check does not read) or one the renderers wrote, the renderers the value path
        // shares, whose outputs are checked in full: re-reading the whole output would cost
        // a second parse of the request. Builds with debug assertions (the tests) re-check it.
        if cfg!(debug_assertions) {
            let whole = out.to_text(text).ok_or_else(|| not_the_text(self.format))?;
            check_text(self.format, &whole)?;
        }
        Ok((out, outcome))
    }

    /// As [`ProviderTranscript::apply_text`], the output as parts (see
    /// [`ProviderTranscript::render_parts`]).
    ///
    /// # Errors
    ///
    /// As [`ProviderTranscript::apply_text`].
    pub fn apply_parts(
        &self,
        plan: &CompactionPlan,
        summaries: &BTreeMap<String, String>,
        text: &str,
    ) -> Result<CompactedParts, FormatError> {
        let out = cutctx_executor::apply(&self.transcript, plan, summaries)?;
        let (parts, reasoning) = self.render_parts(&out.transcript, text)?;
        Ok(CompactedParts {
            parts,
            report: out.report,
            view: out.transcript,
            reasoning,
        })
    }

    /// As [`ProviderTranscript::apply`], writing the compacted request as text (see
    /// [`ProviderTranscript::render_text`]).
    ///
    /// # Errors
    ///
    /// As [`ProviderTranscript::apply`] and [`ProviderTranscript::render_text`].
    pub fn apply_text(
        &self,
        plan: &CompactionPlan,
        summaries: &BTreeMap<String, String>,
        text: &str,
    ) -> Result<CompactedText, FormatError> {
        let out = self.apply_parts(plan, summaries, text)?;
        let text = out
            .parts
            .to_text(text)
            .ok_or_else(|| not_the_text(self.format))?;
        Ok(CompactedText {
            text,
            report: out.report,
            view: out.view,
            reasoning: out.reasoning,
        })
    }

    /// Whether this transcript was read from text, keeping spans rather than its messages.
    #[must_use]
    pub const fn is_from_text(&self) -> bool {
        self.layout.is_some()
    }

    /// The view's pieces, reading messages from `source` (else from the document).
    pub(crate) fn pieces(
        &self,
        view: &Transcript,
        source: Option<Source<'_>>,
    ) -> Result<(Rendered, ReasoningOutcome), FormatError> {
        // The view is read as it is rendered rather than held as a list beside the output's.
        // Its errors come before any other: a rendering that fails reads the view whole, and
        // says its first error when it has one (the renderers stop at the first error of the
        // items, so an error of the view before the rendering's own is that one).
        let rendered = self.pieces_of(view, source);
        if rendered.is_err() {
            mapping::view_items(&self.positions, &self.transcript, view)
                .try_for_each(|i| i.map(drop))?;
        }
        let mut rendered = rendered?;
        let list = match source {
            Some(s) => Some(s),
            None => match mapping::messages_key(&self.document, list_key(self.format)).0 {
                Some(Value::Array(list)) => Some(Source::Values(list)),
                _ => None,
            },
        };
        let outcome = reasoning::settle(
            self.format,
            self.reasoning,
            &self.document,
            list_key(self.format),
            list,
            self.changed_from,
            &mut rendered,
        )?;
        Ok((rendered, outcome))
    }

    /// [`ProviderTranscript::pieces`], the view's errors said as the rendering meets them.
    fn pieces_of(
        &self,
        view: &Transcript,
        source: Option<Source<'_>>,
    ) -> Result<Rendered, FormatError> {
        let items = mapping::view_items(&self.positions, &self.transcript, view);
        let document = &self.document;
        let key = list_key(self.format);
        let list = match source {
            Some(s) => Some(s),
            None if self.layout.is_some() => {
                return Err(FormatError::view(
                    "This transcript was read from text: render it with render_text.",
                    details! { "format" => self.format.as_str() },
                ));
            }
            None => match mapping::messages_key(document, key).0 {
                Some(Value::Array(list)) => Some(Source::Values(list)),
                _ => None,
            },
        };
        let turns = self.transcript.turns();
        per_format!(self.format, F => F::render(document, list, turns, &self.sources, items))
    }

    /// The list a rendering reads kept messages from; an empty one for a Responses `input`
    /// string.
    fn list_or_empty<'a>(&self, list: Option<Messages<'a>>) -> Result<Messages<'a>, FormatError> {
        match list {
            Some(l) => Ok(l),
            None if self.format == Format::OpenAiResponses => Ok(Messages::Owned(Vec::new())),
            None => Err(no_list(self.format, &self.document)),
        }
    }

    /// As [`ProviderTranscript::apply`], consuming the transcript (see
    /// [`ProviderTranscript::render_into`]).
    ///
    /// # Errors
    ///
    /// As [`ProviderTranscript::apply`].
    pub fn apply_into(
        self,
        plan: &CompactionPlan,
        summaries: &BTreeMap<String, String>,
    ) -> Result<Compacted, FormatError> {
        let out = cutctx_executor::apply(&self.transcript, plan, summaries)?;
        let (document, reasoning) = self.render_into(&out.transcript)?;
        Ok(Compacted {
            document,
            report: out.report,
            view: out.transcript,
            reasoning,
        })
    }

    /// Applies `plan` (made for [`ProviderTranscript::transcript`]) with `summaries`, and
    /// renders the view.
    ///
    /// # Errors
    ///
    /// `COMPACTION_PLAN_MISMATCH` or `COMPACTION_SUMMARY_MISSING` from `cutctx_executor::apply`; as
    /// [`ProviderTranscript::render`].
    pub fn apply(
        &self,
        plan: &CompactionPlan,
        summaries: &BTreeMap<String, String>,
    ) -> Result<Compacted, FormatError> {
        let out = cutctx_executor::apply(&self.transcript, plan, summaries)?;
        let (document, reasoning) = self.render_settled(&out.transcript)?;
        Ok(Compacted {
            document,
            report: out.report,
            view: out.transcript,
            reasoning,
        })
    }

    /// What a summarizer needs to fulfil `request`, as one JSON object:
    /// `{"format", "group_id", "prompt_id", "target_tokens", "turns", "messages"}`, where
    /// `turns` lists each folded turn as `{"turn_id", "role", "content", "token_estimate"}` and
    /// `messages` the original messages (or items) they came from, each once, in order, without
    /// their reasoning ([`without_reasoning`]: no thinking text is ever a summarizer's input).
    #[must_use]
    pub fn summarization_input(&self, request: &SummarizationRequest) -> Value {
        let mut turns = Vec::with_capacity(request.turn_ids().len());
        let mut messages = Vec::new();
        let mut seen: BTreeSet<Option<usize>> = BTreeSet::new();
        for id in request.turn_ids() {
            let Some(p) = self.positions.get(&self.transcript, id) else {
                continue;
            };
            let Some(turn) = self.transcript.turns().get(p) else {
                continue;
            };
            let mut t = Map::new();
            t.insert("turn_id".into(), Value::from(turn.turn_id()));
            t.insert("role".into(), Value::from(turn.role().as_str()));
            let content = match self.original(id) {
                Some(m) if holds_reasoning(self.format, m) => Value::from(
                    reasoning::content_without_reasoning(self.format, m, turn.content()),
                ),
                _ => Value::from(turn.content()),
            };
            t.insert("content".into(), content);
            t.insert("token_estimate".into(), Value::from(turn.token_estimate()));
            turns.push(Value::Object(t));
            let message = self.sources.get(p).and_then(TurnSource::message);
            // Never thinking text in a summarizer's input: its reasoning is left out.
            if seen.insert(message)
                && let Some(original) = self.original(id)
                && let Some(m) = without_reasoning(self.format, original.clone())
            {
                messages.push(m);
            }
        }
        let mut v = Map::new();
        v.insert("format".into(), Value::from(self.format.as_str()));
        v.insert("group_id".into(), Value::from(request.group_id()));
        v.insert("prompt_id".into(), Value::from(request.prompt_id()));
        v.insert("target_tokens".into(), Value::from(request.target_tokens()));
        v.insert("turns".into(), Value::Array(turns));
        v.insert("messages".into(), Value::Array(messages));
        Value::Object(v)
    }
}

/// What stopped a pass over the messages of a request read from text.
enum Pass {
    /// A message is not JSON (which the text path never meets: the list was scanned).
    Unreadable,
    /// A rule of the format is broken.
    Invalid(Violation),
    /// A turn could not be mapped.
    Format(FormatError),
}

/// Checks the messages of a request read from text, one parsed message at a time, against
/// the format's rules (the validators' own steps), and with an estimator maps them to turns
/// (`None` without one).
fn each_message(
    format: Format,
    shell: &Value,
    layout: &text::Layout,
    text: &str,
    estimator: Option<&dyn TokenEstimator>,
) -> Result<Option<mapping::Built>, Pass> {
    let n = layout.items.len();
    let each = |f: &mut dyn FnMut(usize, Value) -> Result<(), Pass>| {
        text::each_value(text, list_key(format), f).map_err(|e| e.unwrap_or(Pass::Unreadable))
    };
    /// The one walk, for the format `F`.
    fn walk<F: ProviderFormat>(
        shell: &Value,
        n: usize,
        estimator: Option<&dyn TokenEstimator>,
        each: impl FnOnce(&mut dyn FnMut(usize, Value) -> Result<(), Pass>) -> Result<(), Pass>,
    ) -> Result<Option<mapping::Built>, Pass> {
        let mut check = F::check_start(shell, n).map_err(Pass::Invalid)?;
        let mut build = match estimator {
            Some(e) => Some(F::build_start(shell, n, e).map_err(Pass::Format)?),
            None => None,
        };
        each(&mut |i, m| {
            F::check_value(&mut check, i, &m).map_err(Pass::Invalid)?;
            if let (Some(build), Some(e)) = (&mut build, estimator) {
                F::build_value(build, i, &m, e).map_err(Pass::Format)?;
            }
            Ok(())
        })?;
        F::check_finish(check).map_err(Pass::Invalid)?;
        Ok(build.map(F::built))
    }
    per_format!(format, F => walk::<F>(shell, n, estimator, each))
}

/// serde_json's nesting limit: a value nested this deep (counting the arrays and objects
/// around it) is refused.
const NESTING_LIMIT: usize = 128;

/// How deep `v` nests: 0 for a scalar, 1 for an array or object of scalars.
fn depth(v: &Value) -> usize {
    match v {
        Value::Array(items) => 1 + items.iter().map(depth).max().unwrap_or(0),
        Value::Object(map) => 1 + map.values().map(depth).max().unwrap_or(0),
        _ => 0,
    }
}

/// Messages the hand-written reader read as the scan of the list found them, by index
/// (`None` where it declined).
enum Plains<'a> {
    /// None read: each message is read from its span.
    None,
    /// Messages mapped as they were read, the rest waiting ([`check_as_read`]).
    Chat(ChatMapper<'a>),
    Responses(ResponsesMapper<'a>),
}

/// A Chat list mapped as the scan reads it.
type ChatMapper<'a> =
    check_as_read::Mapper<check_as_read::Mapping<openai_chat::Chat>, openai_chat::Plain<'a>>;
/// A Responses list mapped as the scan reads it.
type ResponsesMapper<'a> = check_as_read::Mapper<
    check_as_read::Mapping<openai_responses::Responses>,
    openai_responses::Plain<'a>,
>;

/// The room a list's turns are sized for as it is read: one turn for every this many bytes
/// of the request (most messages take more; a list of shorter ones grows its room). Room
/// never reached is never touched, and is given back once the list is read.
const MESSAGE_BYTES: usize = 64;

/// The request `text` read ([`text::read`]) and its messages checked and mapped
/// ([`map_messages`]): the common messages read by hand as the scan of the list finds them,
/// so that each is walked once (Chat and Responses messages mapped there too, [`check_as_read`]),
/// most of a list of `ahead_from` bytes or more read ahead on another core ([`read_ahead`]).
fn read_and_map(
    format: Format,
    text: &str,
    estimator: &dyn TokenEstimator,
    reading: Reading,
    ahead_from: usize,
) -> Option<(text::Read, mapping::Built)> {
    /// Reads the list with `read` taking each message it can, each reading checked and mapped
    /// by `mapping` as the scan has it ([`check_as_read`]); the mapper, unless the scan did not read
    /// the whole list, every message of it taken (then the readings were of a scan given up
    /// for the parser's). A large list's messages from a tenth of the way in are read ahead
    /// on another core ([`read_ahead`]), to the same readings: about where reading and mapping on
    /// this thread take as long as reading on the other. The helper's readings go back to it
    /// to be freed.
    fn scan_mapping<S: check_as_read::MapsAsRead<P>, P: Send>(
        text: &str,
        key: &str,
        read: impl Fn(usize) -> Option<(P, usize)> + Sync,
        mapping: S,
        estimator: &dyn TokenEstimator,
        ahead_from: usize,
    ) -> Option<(text::Read, Option<check_as_read::Mapper<S, P>>)> {
        let mut mapper = check_as_read::Mapper::new(mapping);
        let (read_list, scanned) = std::thread::scope(|scope| {
            let parallelism = Parallelism::Automatic;
            let cut = text.len() / 10;
            let mut ahead =
                read_ahead::Ahead::start(scope, text, parallelism, ahead_from, cut, &read);
            text::read_with(text, key, &mut |start| {
                let (reading, read_ahead) = ahead.take_or_read(start, &read);
                match reading {
                    Some((plain, end)) => {
                        if let Some(done) = mapper.take(Some(plain), estimator)
                            && read_ahead
                        {
                            ahead.give_back(done, end);
                        }
                        Some(end)
                    }
                    None => {
                        mapper.take(None, estimator);
                        None
                    }
                }
            })
        })?;
        let whole = scanned && mapper.taken() == read_list.layout.items.len();
        Some((read_list, whole.then_some(mapper)))
    }
    let key = list_key(format);
    let defer = reading == Reading::HandDeferring;
    let (read, plains) = match (reading, format) {
        (Reading::Values, _) => (text::read(text, key)?, Plains::None),
        (_, Format::OpenAiChat) => {
            let mapping = check_as_read::Mapping::<openai_chat::Chat> {
                check: openai_chat::Check::default(),
                build: openai_chat::Build::growing(text.len() / MESSAGE_BYTES),
            };
            let read_at = |start| openai_chat::Plain::read_at(text, start, defer);
            let (read, mapper) = scan_mapping(text, key, read_at, mapping, estimator, ahead_from)?;
            (read, mapper.map_or(Plains::None, Plains::Chat))
        }
        (_, Format::OpenAiResponses) => {
            let mapping = check_as_read::Mapping::<openai_responses::Responses> {
                check: openai_responses::Check::default(),
                build: openai_responses::Build::growing(text.len() / MESSAGE_BYTES),
            };
            let read_at = |start| openai_responses::Plain::read_at(text, start, defer);
            let (read, mapper) = scan_mapping(text, key, read_at, mapping, estimator, ahead_from)?;
            (read, mapper.map_or(Plains::None, Plains::Responses))
        }
        // An Anthropic message read by hand holds its blocks (a tool's input as a value),
        // several times the room of a Chat or Responses one: held for the whole list, they
        // would raise the run's peak by most of the input's size. Each is checked and mapped
        // as the scan finds it instead, and dropped there ([`anthropic::one_walk`]); what that walk does
        // not take is read from the scan's spans, each message as the builder takes it.
        (_, Format::Anthropic) => {
            if let Some(done) =
                anthropic::one_walk::anthropic(text, key, estimator, defer, ahead_from)
            {
                return Some(done);
            }
            (text::read(text, key)?, Plains::None)
        }
    };
    let built = map_messages(
        format,
        &read.shell,
        &read.layout,
        text,
        estimator,
        reading,
        plains,
    )?;
    Some((read, built))
}

/// How [`map_messages`] reads a request's messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reading {
    /// Each parsed as a value.
    Values,
    /// The common shapes by hand ([`hand_read`]), the others as values.
    Hand,
    /// As `Hand`, each turn made of one string of the request left as written there (see
    /// [`ProviderTranscript::from_text_deferred`]).
    HandDeferring,
}

/// Checks and maps the messages of a request read from text, each from its own span: a
/// message of a common shape is read by hand ([`hand_read`]), any other parsed as
/// a value and checked and mapped as [`each_message`] does. `None` exactly when
/// [`each_message`] fails: a rule broken, a turn that cannot be made, or a message (or other
/// field) the value parse refuses, its nesting counted from the document's top as there.
fn map_messages(
    format: Format,
    shell: &Value,
    layout: &text::Layout,
    text: &str,
    estimator: &dyn TokenEstimator,
    reading: Reading,
    plains: Plains<'_>,
) -> Option<mapping::Built> {
    let hand = reading != Reading::Values;
    let defer = reading == Reading::HandDeferring;
    // The arrays and objects around a message (the list, and the request object around it)
    // and around another field (the request object).
    let around = match shell {
        Value::Object(fields) => {
            if fields.values().any(|v| 1 + depth(v) >= NESTING_LIMIT) {
                return None;
            }
            2
        }
        _ => 1,
    };
    let value = |span: &std::ops::Range<usize>| -> Option<Value> {
        let v: Value = serde_json::from_str(text.get(span.clone())?).ok()?;
        (around + depth(&v) < NESTING_LIMIT).then_some(v)
    };
    /// The messages mapped for the format `F`, those the scan already mapped (`mapped`, a
    /// whole list's, Chat and Responses only) taken up where they stop.
    fn each_span<'a, F: ProviderFormat>(
        shell: &Value,
        layout: &text::Layout,
        text: &'a str,
        estimator: &dyn TokenEstimator,
        (hand, defer): (bool, bool),
        value: &dyn Fn(&std::ops::Range<usize>) -> Option<Value>,
        mapped: Option<check_as_read::Mapper<check_as_read::Mapping<F>, F::Plain<'a>>>,
    ) -> Option<mapping::Built> {
        let n = layout.items.len();
        // The request's own fields and the list's length checked (at least one message, for
        // Chat), whether its messages were mapped as read or not.
        let fresh = F::check_start(shell, n).ok()?;
        let (mut check, mut build, from, mut taken) = match mapped {
            Some(mapper) => {
                debug_assert_eq!(mapper.taken(), n, "a mapper is kept only for a whole list");
                let (mapping, from, rest) = mapper.finish()?;
                let build = F::build_resume(mapping.build, shell, estimator).ok()?;
                (mapping.check, build, from, Some(rest.into_iter()))
            }
            None => (fresh, F::build_start(shell, n, estimator).ok()?, 0, None),
        };
        for (i, span) in layout.items.iter().enumerate().skip(from) {
            let plain = match &mut taken {
                Some(taken) => taken.next().flatten(),
                None => hand
                    .then(|| F::Plain::read(text.get(span.clone())?, span.start, defer))
                    .flatten(),
            };
            if let Some(m) = plain
                && F::check_plain(&mut check, i, &m).is_some()
            {
                F::build_plain(&mut build, i, &m, estimator).ok()?;
                continue;
            }
            let m = value(span)?;
            F::check_value(&mut check, i, &m).ok()?;
            F::build_value(&mut build, i, &m, estimator).ok()?;
        }
        F::check_finish(check).ok()?;
        Some(F::built(build))
    }
    let how = (hand, defer);
    match plains {
        Plains::Chat(mapped) => {
            debug_assert_eq!(format, Format::OpenAiChat, "a Chat mapper for {format}");
            each_span::<openai_chat::Chat>(
                shell,
                layout,
                text,
                estimator,
                how,
                &value,
                Some(mapped),
            )
        }
        Plains::Responses(mapped) => {
            debug_assert_eq!(
                format,
                Format::OpenAiResponses,
                "a Responses mapper for {format}"
            );
            let f = each_span::<openai_responses::Responses>;
            f(shell, layout, text, estimator, how, &value, Some(mapped))
        }
        Plains::None => {
            per_format!(format, F => each_span::<F>(shell, layout, text, estimator, how, &value, None))
        }
    }
}

/// Checks a rendered request's text against the format's rules, message by message.
fn check_text(format: Format, out: &str) -> Result<(), FormatError> {
    let checked = match text::read(out, list_key(format)) {
        Some(read) => each_message(format, &read.shell, &read.layout, out, None).map(drop),
        None => {
            let document: Value = serde_json::from_str(out).map_err(|e| unwritable(format, &e))?;
            validate(format, &document).map_err(Pass::Invalid)
        }
    };
    match checked {
        Ok(()) => Ok(()),
        Err(Pass::Invalid(v)) => Err(FormatError::Invalid(v)),
        Err(Pass::Format(e)) => Err(e),
        Err(Pass::Unreadable) => Err(FormatError::unsupported(
            "The compacted request could not be read back as JSON.",
            details! { "format" => format.as_str() },
        )),
    }
}

/// `FORMAT_VIEW_MISMATCH`: the text given to render into is not the text read.
fn not_the_text(format: Format) -> FormatError {
    FormatError::view(
        "The text given is not the text this transcript was read from.",
        details! { "format" => format.as_str() },
    )
}

/// A rendered request that cannot be written as JSON (which a value never is not).
fn unwritable(format: Format, e: &serde_json::Error) -> FormatError {
    FormatError::unsupported(
        format!("The compacted request cannot be written as JSON: {e}"),
        details! { "format" => format.as_str() },
    )
}

/// The error of a document with no message list where the format needs one.
pub(crate) fn no_list(format: Format, document: &Value) -> FormatError {
    let path = mapping::messages_key(document, list_key(format)).1;
    FormatError::Malformed(Violation::new(
        format,
        validate::Rule::Malformed,
        None,
        path,
    ))
}
