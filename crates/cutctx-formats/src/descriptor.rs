//! What cutctx knows of each provider format, in one place: a [`Descriptor`] per [`Format`]
//! (`Format::descriptor`, [`descriptor`]) with the format's name, the key of its message list,
//! its role names, where a tool call and a tool result are written, and the usage fields a
//! response reports; and the questions asked of one message (a model item, a system message,
//! a tool result, the call a result answers), answered by the format's own readers.
//!
//! The readers of this crate read the same names and ask the same questions: the roles of
//! Chat and Responses (`developer` is the newer name of `system`; Responses has no `tool` role,
//! its results being items of their own) and Anthropic's message kinds come from
//! [`Roles::role_of`]; [`list_key`](crate::list_key) and [`Format::as_str`] from the
//! descriptor's `list_key` and `name`. A crate above (the session, the replay, the proxy) asks
//! here instead of knowing a format's names. Which format an unlabelled body is in is
//! [`guess_format`](crate::guess_format) ([`Descriptor::guess`]).
//!
//! ```
//! use cutctx_formats::{Format, descriptor::Carrier};
//! use serde_json::json;
//!
//! let anthropic = Format::Anthropic.descriptor();
//! assert_eq!((anthropic.name, anthropic.list_key), ("anthropic", "messages"));
//! assert_eq!(anthropic.tool_result.carrier, Carrier::Block { block_type: "tool_result", role: "user" });
//! let answer = json!({"role": "user", "content": [
//!     {"type": "tool_result", "tool_use_id": "t1", "content": "ok"},
//!     {"type": "text", "text": "and then?"}]});
//! assert!(anthropic.is_tool_result(&answer));
//! let results: Vec<_> = anthropic.tool_results(&answer).map(|(block, _)| block).collect();
//! assert_eq!(results, [Some(0)]);
//! assert_eq!(anthropic.answered_call(&answer, Some(0)), Some("t1"));
//! // The usage a response reports: Anthropic counts the cache apart from `input_tokens`.
//! assert_eq!(anthropic.usage.cache_creation_tokens, Some(&["cache_creation_input_tokens"][..]));
//! ```

use cutctx_model::Role;
use serde_json::Value;

use crate::{Format, anthropic, openai_chat, openai_responses};

/// What cutctx knows of one provider format: its names, and the rules other crates ask of
/// one message. Reached as `Format::descriptor` or [`descriptor`].
///
/// ```
/// use cutctx_formats::{Format, descriptor};
/// use serde_json::json;
/// let chat = descriptor(Format::OpenAiChat);
/// assert_eq!(chat.roles.system, ["system", "developer"]);
/// assert!(chat.is_tool_result(&json!({"role": "tool", "tool_call_id": "c1", "content": "ok"})));
/// assert_eq!(chat.user_text("Hi"), json!({"role": "user", "content": "Hi"}));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Descriptor {
    /// The format described.
    pub format: Format,
    /// The format's name: `openai-chat`, `openai-responses` or `anthropic`.
    pub name: &'static str,
    /// The key of the request's message list: `messages`, or `input` for Responses.
    pub list_key: &'static str,
    /// The role names of the messages of the list.
    pub roles: Roles,
    /// Where the model writes a tool call.
    pub tool_call: ToolCall,
    /// Where a tool's result is written.
    pub tool_result: ToolResult,
    /// The usage a response reports: the fields of its prompt count.
    pub usage: UsageFields,
}

/// The role names of a format's messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Roles {
    /// The names of a system message of the list: OpenAI's `system` and `developer`,
    /// Anthropic's mid-conversation `system` (its system prompt is the request's `system`
    /// field, not a message).
    pub system: &'static [&'static str],
    /// The user's role: `user`.
    pub user: &'static str,
    /// The model's role: `assistant`.
    pub assistant: &'static str,
    /// The role of a message holding a tool result: Chat's `tool`; `None` where results are
    /// items (Responses) or blocks (Anthropic) of their own.
    pub tool: Option<&'static str>,
}

impl Roles {
    /// The turn role a message's `role` names in this format; `None` for a name the format
    /// does not have (an opaque message, carried untouched).
    ///
    /// ```
    /// use cutctx_formats::Format;
    /// use cutctx_model::Role;
    /// let responses = Format::OpenAiResponses.descriptor().roles;
    /// assert_eq!(responses.role_of("developer"), Some(Role::System));
    /// assert_eq!(responses.role_of("tool"), None);
    /// assert_eq!(Format::OpenAiChat.descriptor().roles.role_of("tool"), Some(Role::Tool));
    /// ```
    #[must_use]
    #[inline]
    pub fn role_of(&self, name: &str) -> Option<Role> {
        if self.system.contains(&name) {
            Some(Role::System)
        } else if name == self.user {
            Some(Role::User)
        } else if name == self.assistant {
            Some(Role::Assistant)
        } else if self.tool == Some(name) {
            Some(Role::Tool)
        } else {
            None
        }
    }
}

/// Where a format writes a tool call or a tool result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Carrier {
    /// A message of the list of its own, of this role (Chat's `tool` results).
    Message {
        /// The message's role.
        role: &'static str,
    },
    /// A list under this key of the model's message (Chat's `tool_calls`).
    Field {
        /// The key.
        key: &'static str,
    },
    /// An item of the list, of one of these `type`s (Responses' calls and their outputs).
    Item {
        /// The item types.
        types: &'static [&'static str],
    },
    /// A content block of this `type` in a message of this role (Anthropic's `tool_use` in
    /// an assistant message, `tool_result` in a user message).
    Block {
        /// The block type.
        block_type: &'static str,
        /// The role of the message that holds it.
        role: &'static str,
    },
}

/// Where a format writes a tool call, and the field naming it.
///
/// ```
/// use cutctx_formats::{Format, descriptor::Carrier};
/// let call = Format::OpenAiChat.descriptor().tool_call;
/// assert_eq!((call.carrier, call.id), (Carrier::Field { key: "tool_calls" }, "id"));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ToolCall {
    /// Where it is written.
    pub carrier: Carrier,
    /// The field holding the call's id: `id` (Chat, Anthropic) or `call_id` (Responses).
    pub id: &'static str,
}

/// Where a format writes a tool's result, the field naming the call it answers and the field
/// holding what the tool returned.
///
/// ```
/// use cutctx_formats::Format;
/// let result = Format::OpenAiResponses.descriptor().tool_result;
/// assert_eq!((result.call_id, result.payload), ("call_id", "output"));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ToolResult {
    /// Where it is written.
    pub carrier: Carrier,
    /// The field naming the call it answers: `tool_call_id`, `call_id` or `tool_use_id`.
    pub call_id: &'static str,
    /// The field holding what the tool returned: `content` (Chat, Anthropic) or `output`
    /// (Responses).
    pub payload: &'static str,
}

/// Where a provider's response reports the prompt it counted, and under which names (what
/// `cutctx serve` reads from every response as it streams past).
///
/// ```
/// use cutctx_formats::Format;
/// let chat = Format::OpenAiChat.descriptor().usage;
/// assert_eq!(chat.prompt_tokens, ["prompt_tokens"]);
/// assert_eq!(chat.cached_tokens, ["prompt_tokens_details", "cached_tokens"]);
/// assert!(chat.prompt_includes_cache && chat.cache_creation_tokens.is_none());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct UsageFields {
    /// Where the usage object sits in a response body or a stream event: the first entry
    /// whose event type matches and whose path leads to a value is read (when that value is
    /// an object).
    pub at: &'static [UsageAt],
    /// The prompt's tokens, within the usage object: `prompt_tokens` (Chat), `input_tokens`
    /// (Responses; Anthropic, where it is only the part neither read from nor written to the
    /// cache).
    pub prompt_tokens: &'static [&'static str],
    /// The part of the prompt read from the cache: `prompt_tokens_details.cached_tokens`,
    /// `input_tokens_details.cached_tokens`, `cache_read_input_tokens`.
    pub cached_tokens: &'static [&'static str],
    /// The part of the prompt written to the cache, where the provider reports it apart:
    /// Anthropic's `cache_creation_input_tokens`.
    pub cache_creation_tokens: Option<&'static [&'static str]>,
    /// Whether `prompt_tokens` counts the cached part already (OpenAI); otherwise the whole
    /// prompt is `prompt_tokens` plus the cached and cache-creation tokens (Anthropic).
    pub prompt_includes_cache: bool,
}

/// One place a response puts its usage object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct UsageAt {
    /// The stream event's `type` this place is for; `None` for any body or event.
    pub event_type: Option<&'static str>,
    /// The path to the usage object.
    pub path: &'static [&'static str],
}

/// The prompt counts a usage object reports, each `None` when it is absent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ReportedUsage {
    /// [`UsageFields::prompt_tokens`].
    pub prompt_tokens: Option<u64>,
    /// [`UsageFields::cached_tokens`].
    pub cached_tokens: Option<u64>,
    /// [`UsageFields::cache_creation_tokens`].
    pub cache_creation_tokens: Option<u64>,
}

impl UsageFields {
    /// The usage object of a response body or stream event `value`, where this format puts
    /// it; `None` when there is none.
    ///
    /// ```
    /// use cutctx_formats::Format;
    /// use serde_json::json;
    /// let usage = Format::OpenAiResponses.descriptor().usage;
    /// let done = json!({"type": "response.completed", "response": {"usage": {"input_tokens": 20}}});
    /// assert_eq!(usage.find(&done), Some(&json!({"input_tokens": 20})));
    /// assert_eq!(usage.find(&json!({"type": "response.created", "response": {"usage": null}})), None);
    /// ```
    #[must_use]
    pub fn find<'v>(&self, value: &'v Value) -> Option<&'v Value> {
        let event = value.get("type").and_then(Value::as_str);
        let found = self
            .at
            .iter()
            .filter(|at| at.event_type.is_none_or(|t| Some(t) == event))
            .find_map(|at| at_path(value, at.path))?;
        found.is_object().then_some(found)
    }

    /// The counts the usage object `usage` reports.
    ///
    /// ```
    /// use cutctx_formats::Format;
    /// use serde_json::json;
    /// let chat = Format::OpenAiChat.descriptor().usage;
    /// let read = chat.read(&json!({"prompt_tokens": 50, "prompt_tokens_details": {"cached_tokens": 32}}));
    /// assert_eq!((read.prompt_tokens, read.cached_tokens, read.cache_creation_tokens), (Some(50), Some(32), None));
    /// ```
    #[must_use]
    pub fn read(&self, usage: &Value) -> ReportedUsage {
        let count = |path: &[&str]| at_path(usage, path).and_then(Value::as_u64);
        ReportedUsage {
            prompt_tokens: count(self.prompt_tokens),
            cached_tokens: count(self.cached_tokens),
            cache_creation_tokens: self.cache_creation_tokens.and_then(count),
        }
    }

    /// The whole prompt and its cached part from the counts read (those of several events
    /// together, for a provider that spreads them); `None` without the prompt's count. The
    /// counts come from a response, unchecked: their sum stops at `u64::MAX`.
    ///
    /// ```
    /// use cutctx_formats::{Format, descriptor::ReportedUsage};
    /// let anthropic = Format::Anthropic.descriptor().usage;
    /// let read = ReportedUsage { prompt_tokens: Some(10), cached_tokens: Some(90), cache_creation_tokens: Some(5) };
    /// assert_eq!(anthropic.prompt_and_cached(&read), Some((105, 90)));
    /// ```
    #[must_use]
    pub fn prompt_and_cached(&self, read: &ReportedUsage) -> Option<(u64, u64)> {
        let prompt = read.prompt_tokens?;
        let cached = read.cached_tokens.unwrap_or(0);
        if self.prompt_includes_cache {
            Some((prompt, cached))
        } else {
            let created = read.cache_creation_tokens.unwrap_or(0);
            Some((
                prompt.saturating_add(cached).saturating_add(created),
                cached,
            ))
        }
    }
}

/// The value at `path` under `value`.
fn at_path<'v>(value: &'v Value, path: &[&str]) -> Option<&'v Value> {
    path.iter().try_fold(value, |v, key| v.get(key))
}

/// The role names OpenAI's two formats share.
const OPENAI_SYSTEM: [&str; 2] = ["system", "developer"];

const OPENAI_CHAT: Descriptor = Descriptor {
    format: Format::OpenAiChat,
    name: "openai-chat",
    list_key: "messages",
    roles: Roles {
        system: &OPENAI_SYSTEM,
        user: "user",
        assistant: "assistant",
        tool: Some(openai_chat::TOOL_ROLE),
    },
    tool_call: ToolCall {
        carrier: Carrier::Field {
            key: openai_chat::TOOL_CALLS,
        },
        id: "id",
    },
    tool_result: ToolResult {
        carrier: Carrier::Message {
            role: openai_chat::TOOL_ROLE,
        },
        call_id: openai_chat::TOOL_CALL_ID,
        payload: "content",
    },
    usage: UsageFields {
        at: &[UsageAt {
            event_type: None,
            path: &["usage"],
        }],
        prompt_tokens: &["prompt_tokens"],
        cached_tokens: &["prompt_tokens_details", "cached_tokens"],
        cache_creation_tokens: None,
        prompt_includes_cache: true,
    },
};

const OPENAI_RESPONSES: Descriptor = Descriptor {
    format: Format::OpenAiResponses,
    name: "openai-responses",
    list_key: "input",
    roles: Roles {
        system: &OPENAI_SYSTEM,
        user: "user",
        assistant: "assistant",
        tool: None,
    },
    tool_call: ToolCall {
        carrier: Carrier::Item {
            types: &openai_responses::CALL_TYPES,
        },
        id: openai_responses::CALL_ID,
    },
    tool_result: ToolResult {
        carrier: Carrier::Item {
            types: &openai_responses::OUTPUT_TYPES,
        },
        call_id: openai_responses::CALL_ID,
        payload: "output",
    },
    usage: UsageFields {
        at: &[
            UsageAt {
                event_type: Some("response.completed"),
                path: &["response", "usage"],
            },
            UsageAt {
                event_type: None,
                path: &["usage"],
            },
        ],
        prompt_tokens: &["input_tokens"],
        cached_tokens: &["input_tokens_details", "cached_tokens"],
        cache_creation_tokens: None,
        prompt_includes_cache: true,
    },
};

const ANTHROPIC: Descriptor = Descriptor {
    format: Format::Anthropic,
    name: "anthropic",
    list_key: "messages",
    roles: Roles {
        system: &["system"],
        user: "user",
        assistant: "assistant",
        tool: None,
    },
    tool_call: ToolCall {
        carrier: Carrier::Block {
            block_type: anthropic::TOOL_USE,
            role: "assistant",
        },
        id: "id",
    },
    tool_result: ToolResult {
        carrier: Carrier::Block {
            block_type: anthropic::TOOL_RESULT,
            role: "user",
        },
        call_id: anthropic::TOOL_USE_ID,
        payload: "content",
    },
    usage: UsageFields {
        at: &[
            UsageAt {
                event_type: None,
                path: &["usage"],
            },
            UsageAt {
                event_type: None,
                path: &["message", "usage"],
            },
        ],
        prompt_tokens: &["input_tokens"],
        cached_tokens: &["cache_read_input_tokens"],
        cache_creation_tokens: Some(&["cache_creation_input_tokens"]),
        prompt_includes_cache: false,
    },
};

/// The descriptor of `format` (the same as `format.descriptor()`).
///
/// ```
/// use cutctx_formats::{Format, descriptor};
/// assert_eq!(descriptor(Format::OpenAiResponses).list_key, "input");
/// ```
#[must_use]
pub const fn descriptor(format: Format) -> &'static Descriptor {
    match format {
        Format::OpenAiChat => &OPENAI_CHAT,
        Format::OpenAiResponses => &OPENAI_RESPONSES,
        Format::Anthropic => &ANTHROPIC,
    }
}

impl Format {
    /// This format's [`Descriptor`]: its names, and the rules asked of one message.
    ///
    /// ```
    /// use cutctx_formats::Format;
    /// assert_eq!(Format::Anthropic.descriptor().roles.system, ["system"]);
    /// ```
    #[must_use]
    pub const fn descriptor(self) -> &'static Descriptor {
        descriptor(self)
    }
}

impl Descriptor {
    /// Every format's descriptor, in the order of [`Format::ALL`].
    pub const ALL: [&'static Self; 3] = [&OPENAI_CHAT, &OPENAI_RESPONSES, &ANTHROPIC];

    /// The descriptor of the format a model call's body is most likely in, from its shape
    /// alone ([`guess_format`](crate::guess_format), the one place that guess is made).
    ///
    /// ```
    /// use cutctx_formats::{Format, descriptor::Descriptor};
    /// let body = serde_json::json!({"model": "claude-sonnet-4", "messages": []});
    /// assert_eq!(Descriptor::guess(&body).format, Format::Anthropic);
    /// ```
    #[must_use]
    pub fn guess(body: &Value) -> &'static Self {
        crate::guess_format(body).descriptor()
    }

    /// Whether `item` (a message of a Chat or Anthropic request, an item of a Responses
    /// request) was written by the model: an assistant message, or for Responses any model
    /// item (reasoning, a call of any type of [`openai_responses::CALL_TYPES`], a server
    /// tool's item). Anything that is not a valid item is not a model item.
    ///
    /// ```
    /// use cutctx_formats::Format;
    /// use serde_json::json;
    /// let call = json!({"type": "shell_call", "call_id": "c1", "action": {}});
    /// assert!(Format::OpenAiResponses.descriptor().is_model_item(&call));
    /// ```
    #[must_use]
    pub fn is_model_item(&self, item: &Value) -> bool {
        match self.format {
            Format::OpenAiChat => openai_chat::is_model_message(item),
            Format::OpenAiResponses => openai_responses::is_model_item(item),
            Format::Anthropic => anthropic::is_model_message(item),
        }
    }

    /// Whether `message` is a system message of the list (its role is one of
    /// [`Roles::system`]).
    ///
    /// ```
    /// use cutctx_formats::Format;
    /// let developer = serde_json::json!({"role": "developer", "content": "Be brief."});
    /// assert!(Format::OpenAiChat.descriptor().is_system_message(&developer));
    /// assert!(!Format::Anthropic.descriptor().is_system_message(&developer));
    /// ```
    #[must_use]
    pub fn is_system_message(&self, message: &Value) -> bool {
        message
            .get("role")
            .and_then(Value::as_str)
            .and_then(|r| self.roles.role_of(r))
            == Some(Role::System)
    }

    /// Whether `message` is, or holds, a tool result ([`Descriptor::tool_result`]): a Chat
    /// `tool` message, a Responses call output (of a call type of
    /// [`openai_responses::CALL_TYPES`]), an Anthropic user message with a `tool_result`
    /// block.
    ///
    /// ```
    /// use cutctx_formats::Format;
    /// use serde_json::json;
    /// let responses = Format::OpenAiResponses.descriptor();
    /// assert!(responses.is_tool_result(&json!({"type": "function_call_output", "call_id": "c", "output": "ok"})));
    /// assert!(!responses.is_tool_result(&json!({"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"})));
    /// ```
    #[must_use]
    pub fn is_tool_result(&self, message: &Value) -> bool {
        match self.format {
            Format::OpenAiChat => openai_chat::is_result(message),
            Format::OpenAiResponses => openai_responses::is_output(message),
            Format::Anthropic => anthropic::answers_tools(message),
        }
    }

    /// The tool results `message` holds, in order: `(None, message)` for a message or item
    /// that is one, `(Some(block), block)` for each result block of an Anthropic message.
    ///
    /// ```
    /// use cutctx_formats::Format;
    /// use serde_json::json;
    /// let chat = Format::OpenAiChat.descriptor();
    /// let result = json!({"role": "tool", "tool_call_id": "c1", "content": "ok"});
    /// assert_eq!(chat.tool_results(&result).collect::<Vec<_>>(), [(None, &result)]);
    /// ```
    pub fn tool_results<'v>(
        &self,
        message: &'v Value,
    ) -> impl Iterator<Item = (Option<usize>, &'v Value)> + 'v {
        let (whole, blocks) = match self.format {
            Format::Anthropic => (None, Some(anthropic::tool_results(message))),
            _ => (
                self.is_tool_result(message).then_some((None, message)),
                None,
            ),
        };
        whole
            .into_iter()
            .chain(blocks.into_iter().flatten().map(|(b, v)| (Some(b), v)))
    }

    /// The id of the call the result at `block` of `message` answers (`None` for the message
    /// or item itself), when it is a tool result.
    ///
    /// ```
    /// use cutctx_formats::Format;
    /// use serde_json::json;
    /// let result = json!({"type": "function_call_output", "call_id": "c1", "output": "ok"});
    /// assert_eq!(Format::OpenAiResponses.descriptor().answered_call(&result, None), Some("c1"));
    /// ```
    #[must_use]
    pub fn answered_call<'v>(&self, message: &'v Value, block: Option<usize>) -> Option<&'v str> {
        match (self.format, block) {
            (Format::OpenAiChat, None) => openai_chat::answered_call(message),
            (Format::OpenAiResponses, None) => openai_responses::answered_call(message),
            (Format::Anthropic, Some(block)) => anthropic::answered_call(message, block),
            _ => None,
        }
    }

    /// A user message of this format holding `text`: string content, or for Anthropic one
    /// text block (on which a cache mark can sit).
    ///
    /// ```
    /// use cutctx_formats::Format;
    /// use serde_json::json;
    /// assert_eq!(
    ///     Format::Anthropic.descriptor().user_text("Go on."),
    ///     json!({"role": "user", "content": [{"type": "text", "text": "Go on."}]}),
    /// );
    /// ```
    #[must_use]
    pub fn user_text(&self, text: &str) -> Value {
        let content = match self.format {
            Format::Anthropic => serde_json::json!([{"type": "text", "text": text}]),
            Format::OpenAiChat | Format::OpenAiResponses => Value::String(text.to_owned()),
        };
        serde_json::json!({"role": self.roles.user, "content": content})
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn each_openai_name_is_its_role_and_nothing_else_is_one() {
        let chat = OPENAI_CHAT.roles;
        let named = [
            ("system", Role::System),
            ("developer", Role::System),
            ("user", Role::User),
            ("assistant", Role::Assistant),
            ("tool", Role::Tool),
        ];
        for (name, role) in named {
            assert_eq!(chat.role_of(name), Some(role), "{name}");
        }
        for name in ["", "System", "function", "model", "critic"] {
            assert_eq!(chat.role_of(name), None, "{name}");
        }
        // Responses has no tool role: its results are items of their own.
        let responses = OPENAI_RESPONSES.roles;
        assert_eq!(responses.role_of("tool"), None);
        for (name, role) in named.iter().filter(|(n, _)| *n != "tool") {
            assert_eq!(responses.role_of(name), Some(*role), "{name}");
        }
        let anthropic = ANTHROPIC.roles;
        assert_eq!(anthropic.role_of("developer"), None);
        assert_eq!(anthropic.role_of("system"), Some(Role::System));
    }

    #[test]
    fn every_format_has_its_descriptor_in_order() {
        for (f, d) in Format::ALL.into_iter().zip(Descriptor::ALL) {
            assert_eq!(d.format, f);
            assert_eq!(f.descriptor(), d);
            assert_eq!(f.as_str(), d.name);
            assert_eq!(crate::list_key(f), d.list_key);
        }
    }

    #[test]
    fn each_output_type_is_its_call_type_with_output_appended() {
        for (call, output) in openai_responses::CALL_TYPES
            .iter()
            .zip(openai_responses::OUTPUT_TYPES)
        {
            assert_eq!(format!("{call}_output"), output);
        }
    }

    /// The usage a provider reports, read as `cutctx serve` reads it (its `usage.rs` tests'
    /// figures).
    #[test]
    fn usage_is_read_where_each_provider_reports_it() {
        let read = |f: Format, events: &[Value]| {
            let u = f.descriptor().usage;
            let mut all = ReportedUsage::default();
            for e in events {
                if let Some(found) = u.find(e) {
                    let r = u.read(found);
                    all.prompt_tokens = r.prompt_tokens.or(all.prompt_tokens);
                    all.cached_tokens = r.cached_tokens.or(all.cached_tokens);
                    all.cache_creation_tokens =
                        r.cache_creation_tokens.or(all.cache_creation_tokens);
                }
            }
            u.prompt_and_cached(&all)
        };
        let chat = [
            json!({"choices": [], "usage": null}),
            json!({"choices": [], "usage": {"prompt_tokens": 50, "prompt_tokens_details": {"cached_tokens": 32}}}),
        ];
        assert_eq!(read(Format::OpenAiChat, &chat), Some((50, 32)));
        assert_eq!(
            read(
                Format::OpenAiChat,
                &[json!({"usage": {"prompt_tokens": 7}})]
            ),
            Some((7, 0))
        );
        let responses = [
            json!({"type": "response.created", "response": {"usage": null}}),
            json!({"type": "response.completed", "response": {"usage": {"input_tokens": 20, "input_tokens_details": {"cached_tokens": 8}}}}),
        ];
        assert_eq!(read(Format::OpenAiResponses, &responses), Some((20, 8)));
        let anthropic = [
            json!({"type": "message_start", "message": {"usage": {"input_tokens": 10, "cache_read_input_tokens": 90, "cache_creation_input_tokens": 5}}}),
            json!({"type": "message_delta", "usage": {"output_tokens": 3}}),
        ];
        assert_eq!(read(Format::Anthropic, &anthropic), Some((105, 90)));
        assert_eq!(
            read(
                Format::Anthropic,
                &[json!({"usage": {"input_tokens": 4, "output_tokens": 1}})]
            ),
            Some((4, 0))
        );
        assert_eq!(read(Format::Anthropic, &[json!({"usage": {}})]), None);
    }

    #[test]
    fn the_tool_results_of_each_format() {
        let chat = json!({"role": "tool", "tool_call_id": "c", "content": "x"});
        assert_eq!(OPENAI_CHAT.answered_call(&chat, None), Some("c"));
        assert_eq!(OPENAI_CHAT.answered_call(&chat, Some(0)), None);
        // Responses: only the outputs of the call types it pairs.
        for (ty, result) in [
            ("function_call_output", true),
            ("shell_call_output", true),
            ("local_shell_call_output", false),
            ("tool_search_output", false),
            ("function_call", false),
        ] {
            let item = json!({"type": ty, "call_id": "c", "output": "x"});
            assert_eq!(OPENAI_RESPONSES.is_tool_result(&item), result, "{ty}");
            assert_eq!(
                OPENAI_RESPONSES.tool_results(&item).count(),
                usize::from(result)
            );
        }
        let anthropic = json!({"role": "user", "content": [
            {"type": "text", "text": "before"},
            {"type": "tool_result", "tool_use_id": "a", "content": "x"},
            {"type": "tool_result", "tool_use_id": "b", "content": "y"}]});
        let blocks: Vec<_> = ANTHROPIC.tool_results(&anthropic).map(|(b, _)| b).collect();
        assert_eq!(blocks, [Some(1), Some(2)]);
        assert_eq!(ANTHROPIC.answered_call(&anthropic, Some(2)), Some("b"));
        assert_eq!(ANTHROPIC.answered_call(&anthropic, None), None);
        // Results are a user's: an assistant message holds none.
        let mut from_model = anthropic.clone();
        from_model["role"] = json!("assistant");
        assert!(!ANTHROPIC.is_tool_result(&from_model));
        assert_eq!(ANTHROPIC.tool_results(&from_model).count(), 0);
    }

    #[test]
    fn counts_a_response_reports_beyond_u64_add_up_to_u64_max() {
        let read = ReportedUsage {
            prompt_tokens: Some(u64::MAX),
            cached_tokens: Some(1),
            cache_creation_tokens: Some(u64::MAX),
        };
        assert_eq!(
            ANTHROPIC.usage.prompt_and_cached(&read),
            Some((u64::MAX, 1))
        );
        assert_eq!(
            OPENAI_CHAT.usage.prompt_and_cached(&read),
            Some((u64::MAX, 1))
        );
    }
}
