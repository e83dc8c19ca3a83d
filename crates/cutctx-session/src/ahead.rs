//! Summaries made around a cut rather than by a plan, ready before the firing that uses them:
//! the provider's own compaction (Anthropic's on-demand `compaction`, OpenAI Responses'
//! `compaction_trigger`) or a summarizing request that reads the cache (the prefix exactly as
//! last sent plus one instruction).
//!
//! [`ask`] says, for a request, whether the session is close enough to its trigger to want a
//! summary, where the cut goes and what to send for it ([`SummaryAsk`]); the caller sends it
//! (this crate does no I/O) and gives the provider's answer to [`SummaryAsk::ready`], which
//! makes the [`Ready`] prefix, and [`SessionState::offer`] keeps it. The next call that must
//! fire swaps it in ([`crate::step`]): the prefix replaces the messages it covers, and every
//! message after them is appended unchanged. A summary that comes too late, or a history that
//! moved on, is simply not used: that call fires with the session's policy.
//!
//! **The cut.** The kept tail starts where no tool call is open (not at a tool result; for
//! Responses, not between a reasoning item and the item it leads), never at a system message,
//! and is made of messages the last request sent unchanged. It is the longest such tail that
//! still leaves the protected recent messages kept and fits `target` of the room the window
//! leaves; without one, the shortest that keeps the protected messages; without that, none
//! (everything is summarized).
//!
//! **Reasoning.** A native compaction keeps the tail's thinking blocks and reasoning items as
//! they are: the providers document them valid after their own compaction (Anthropic: the kept
//! turns follow unchanged, with system and tools unchanged; Responses: the provider drops what it
//! no longer reads). A cached-prefix summary is the session's own edit, so its tail holds no
//! reasoning at all: the cut moves past the last message that has any.
//!
//! **What a summarizer reads.** The native request is the session's own prefix, cut; the cached
//! one is the request exactly as last sent plus [`crate::SUMMARY_INSTRUCTION`]: both carry
//! thinking only as the signed or encrypted blocks the client sent, never as text cutctx wrote.
//!
//! ```
//! use cutctx_formats::{EstimatorSpec, Format, policy_named};
//! use cutctx_session::ahead::{SummaryKind, ask};
//! use cutctx_session::SessionConfig;
//! use serde_json::json;
//! let config = SessionConfig {
//!     format: Format::OpenAiChat, window: 400, reserve_output: 0,
//!     trigger: 1.0, target: 0.2, protected_recent: 2,
//!     policy: policy_named("drop_oldest", "p", &EstimatorSpec::default())?.expect("known"),
//!     estimator: EstimatorSpec::default().estimator()?, cache_breakpoints: false,
//!     reasoning: cutctx_formats::ReasoningMode::Strip, pinned_results: Default::default(),
//!     early: None,
//! };
//! let mut messages = vec![json!({"role": "system", "content": "Be brief."})];
//! for i in 0..12 {
//!     messages.push(json!({"role": "user", "content": format!("question {i} {}", "x".repeat(80))}));
//!     messages.push(json!({"role": "assistant", "content": "ok"}));
//! }
//! let request = json!({"model": "m", "messages": messages});
//! let asked = ask(&config, None, &request, SummaryKind::Cached, 0.5, None)?.expect("over half");
//! // The request as it would be sent, plus the instruction.
//! let list = asked.request["messages"].as_array().expect("a list");
//! assert_eq!(list.len(), 26);
//! # Ok::<(), cutctx_formats::FormatError>(())
//! ```

use cutctx_formats::{Format, FormatError, fixed_tokens, list_key, message_list as history};
use cutctx_model::{CompactionError, details};
use serde_json::{Map, Value, json};

use crate::count::messages_tokens;
use crate::session::{SessionConfig, continue_from, fraction, references, with_list};
use crate::state::{PrefixItem, Ready, SessionState, digest_of, hex};

/// The Anthropic beta that on-demand compaction needs, added to the request's
/// `anthropic-beta` header by the caller that sends [`SummaryAsk::request`].
pub const ANTHROPIC_COMPACTION_BETA: &str = "compact-2026-09-04";

/// The most output tokens a cached-prefix summary may take, and the most estimated tokens of
/// the user's own messages it quotes verbatim after the model's text (newest first, whole
/// messages only): each is also at most half the room the target leaves
/// ([`summary_budget`]), so that a swapped-in summary leaves the request well under the
/// trigger in any window. The request's own output cap is replaced by it.
pub const SUMMARY_OUTPUT_TOKENS: u64 = 2_000;

/// See [`SUMMARY_OUTPUT_TOKENS`].
pub const USER_QUOTE_TOKENS: u64 = 2_000;

/// The least output a cached-prefix summary is allowed, however small the window.
const LEAST_SUMMARY_TOKENS: u64 = 64;

/// The summary length rule of the summaries made ahead: the output cap and the quotes' budget
/// for a request whose fixed part (tools, system, reserve) leaves `room` tokens of the window:
/// each at most half of `target` of that room, and at most its constant.
///
/// ```
/// use cutctx_session::ahead::summary_budget;
/// assert_eq!(summary_budget(100_000, 0.2), (2_000, 2_000));
/// assert_eq!(summary_budget(2_000, 0.2), (200, 200));
/// assert_eq!(summary_budget(100, 0.2), (64, 10));
/// ```
#[must_use]
pub fn summary_budget(room: u64, target: f64) -> (u64, u64) {
    let half = fraction(room, target) / 2;
    (
        half.clamp(LEAST_SUMMARY_TOKENS, SUMMARY_OUTPUT_TOKENS),
        half.min(USER_QUOTE_TOKENS),
    )
}

/// The reason of a provider answer a summary cannot be read from.
pub const SUMMARY_UNREADABLE: &str = "SUMMARY_UNREADABLE";

/// How a summary made ahead is made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SummaryKind {
    /// The provider compacts: Anthropic's on-demand `compaction`, Responses'
    /// `compaction_trigger`. The answer is one signed block or encrypted item, kept as it came.
    Native,
    /// The request exactly as last sent plus one instruction: it reads the provider's cache,
    /// and the answer's text becomes a summary message.
    Cached,
}

impl SummaryKind {
    /// The name the state, the log and the options use: `native` or `cached`.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Native => "native",
            Self::Cached => "cached",
        }
    }

    /// The kind a format gets when `native` is wanted (or `auto`): the provider's own
    /// compaction where the format has one (Anthropic Messages, OpenAI Responses), else a
    /// cached-prefix request (Chat Completions).
    ///
    /// ```
    /// use cutctx_formats::Format;
    /// use cutctx_session::ahead::SummaryKind;
    /// assert_eq!(SummaryKind::for_format(Format::Anthropic, true), SummaryKind::Native);
    /// assert_eq!(SummaryKind::for_format(Format::OpenAiChat, true), SummaryKind::Cached);
    /// assert_eq!(SummaryKind::for_format(Format::OpenAiResponses, false), SummaryKind::Cached);
    /// ```
    #[must_use]
    pub const fn for_format(format: Format, native: bool) -> Self {
        match format {
            Format::Anthropic | Format::OpenAiResponses if native => Self::Native,
            _ => Self::Cached,
        }
    }
}

/// A summary to make: what to send, and where its answer goes.
#[derive(Debug, Clone)]
pub struct SummaryAsk {
    /// How it is made.
    pub kind: SummaryKind,
    /// The request to send, to the same endpoint as the conversation's own calls
    /// (`stream: false`). Anthropic native also needs [`ANTHROPIC_COMPACTION_BETA`].
    pub request: Value,
    /// How many messages of the history the summary replaces, with what it keeps of them.
    pub asked_at: usize,
    /// Messages the summary covers (for the log).
    pub covered: usize,
    /// The state's firings when asked: a firing since then makes the summary useless.
    firings: u64,
    /// The chained digest of the history's first `asked_at` messages.
    digest: [u8; 32],
    /// What comes before the summary: the leading system messages (and, for a cached
    /// summary, the task), as the request sent them.
    head: Vec<PrefixItem>,
    /// The history's messages kept after the summary, `[cut, asked_at)`; empty for none.
    tail: [u64; 2],
    /// The user's own messages quoted after a cached summary, newest first.
    quotes: Vec<String>,
}

/// The summary the session would want at `request`: `None` while the request as it would be
/// sent (the state's prefix, the new messages appended) is at most `at` of the trigger, or
/// when the state already holds one. `model` replaces the request's model for a cached-prefix
/// summary (a cheaper model; it then reads no cache).
///
/// # Errors
///
/// `FORMAT_*` for a request without its format's shape; `VALIDATION_ERROR` for a state of
/// another format.
pub fn ask(
    config: &SessionConfig,
    previous: Option<&SessionState>,
    request: &Value,
    kind: SummaryKind,
    at: f64,
    model: Option<&str>,
) -> Result<Option<SummaryAsk>, FormatError> {
    let format = config.format;
    let messages = history(format, request);
    let (mut state, _) = continue_from(format, previous, messages, None)?;
    if state.ready.is_some() {
        return Ok(None);
    }
    let seen = state.messages;
    let new = messages.get(seen..).unwrap_or(&[]);
    let estimator = config.estimator.as_ref();
    let fixed = fixed_tokens(format, request, estimator)?;
    // Counted as a step counts it: the state's estimate of what it sent, plus the new messages.
    let prompt = fixed
        + state.message_tokens
        + messages_tokens(format, new, estimator)?
        + config.reserve_output;
    if prompt <= fraction(config.trigger_tokens(), at) {
        return Ok(None);
    }
    state.absorb(new);
    let sent = with_list(format, request, &state)?;
    let list = history(format, &sent);
    let origins = state.origins(messages.len());
    let descriptor = format.descriptor();
    let mut head_end = list
        .iter()
        .take_while(|m| descriptor.is_system_message(m))
        .count();
    if kind == SummaryKind::Cached
        && list
            .get(head_end)
            .is_some_and(|m| plain_user_text(format, m).is_some())
    {
        head_end += 1;
    }
    let room = config.window.saturating_sub(fixed + config.reserve_output);
    let cut = cut(config, kind, list, &origins, head_end, room)?;
    let head = references(&origins[..head_end], &list[..head_end]);
    let tail = match origins.get(cut) {
        Some(Some(c)) => [*c as u64, messages.len() as u64],
        _ => [0, 0],
    };
    let (output_cap, quote_cap) = summary_budget(room, config.target);
    let quotes = match kind {
        SummaryKind::Cached => quotes(config, &list[head_end..cut], quote_cap)?,
        SummaryKind::Native => Vec::new(),
    };
    let request = match kind {
        SummaryKind::Native => native_request(format, &sent, cut),
        SummaryKind::Cached => cached_request(format, &sent, model, output_cap),
    };
    Ok(Some(SummaryAsk {
        kind,
        request,
        asked_at: messages.len(),
        covered: cut - head_end,
        firings: state.firings,
        digest: state.digest,
        head,
        tail,
        quotes,
    }))
}

/// Where the kept tail starts in the sent list `list` (see the module's header): an index in
/// `head_end + 1 ..= list.len()`.
fn cut(
    config: &SessionConfig,
    kind: SummaryKind,
    list: &[Value],
    origins: &[Option<usize>],
    head_end: usize,
    room: u64,
) -> Result<usize, FormatError> {
    let format = config.format;
    let len = list.len();
    let descriptor = format.descriptor();
    // Cached: no reasoning in the tail, so it starts after the last message holding any.
    let after_reasoning = match kind {
        SummaryKind::Cached => list
            .iter()
            .rposition(|m| cutctx_formats::holds_reasoning(format, m))
            .map_or(0, |i| i + 1),
        SummaryKind::Native => 0,
    };
    // The tail's messages must be the history's, unchanged and in order, to the end.
    let mut contiguous_from = len;
    for q in (0..len).rev() {
        let here = origins.get(q).copied().flatten();
        let next = origins.get(q + 1).copied().flatten();
        let ok = match here {
            Some(i) => q + 1 == len || next == Some(i + 1),
            None => false,
        };
        if !ok {
            break;
        }
        contiguous_from = q;
    }
    // Not a result (its call would be summarized), not a system message, and not an item a
    // Responses reasoning item leads (the two go together).
    let led_by_reasoning = |q: usize| {
        format == Format::OpenAiResponses
            && q > 0
            && list[q - 1].get("type").and_then(Value::as_str) == Some("reasoning")
    };
    let opens_cleanly = |q: usize| {
        let m = &list[q];
        !descriptor.is_tool_result(m) && !descriptor.is_system_message(m) && !led_by_reasoning(q)
    };
    let protected = usize::try_from(config.protected_recent).unwrap_or(usize::MAX);
    let lowest = (head_end + 1).max(after_reasoning).max(contiguous_from);
    let candidates: Vec<usize> = (lowest..len).filter(|&q| opens_cleanly(q)).collect();
    let budget = fraction(room, config.target);
    let keeps_protected = |q: usize| len - q >= protected;
    // The tail's estimate from each message on, summed once from the end.
    let mut tail = vec![0u64; len + 1];
    for q in (lowest..len).rev() {
        let m = cutctx_formats::message_tokens(format, &list[q], config.estimator.as_ref())?;
        tail[q] = tail[q + 1].saturating_add(m);
    }
    let fitting = candidates
        .iter()
        .take_while(|q| keeps_protected(**q))
        .find(|q| tail[**q] <= budget)
        .copied();
    let shortest_protected = candidates
        .iter()
        .rev()
        .find(|q| keeps_protected(**q))
        .copied();
    Ok(fitting
        .or(shortest_protected)
        .unwrap_or(len)
        .max(head_end + 1)
        .min(len))
}

/// The user's own texts among `covered`, newest first, whole, up to `budget` tokens.
fn quotes(
    config: &SessionConfig,
    covered: &[Value],
    budget: u64,
) -> Result<Vec<String>, FormatError> {
    let format = config.format;
    let mut out = Vec::new();
    let mut used = 0u64;
    for m in covered.iter().rev() {
        let Some(text) = plain_user_text(format, m) else {
            continue;
        };
        let tokens = cutctx_formats::message_tokens(format, m, config.estimator.as_ref())?;
        if used + tokens > budget {
            continue;
        }
        used += tokens;
        out.push(text);
    }
    Ok(out)
}

/// The text of a message the user wrote (not a tool result, not a system message), when it
/// has any: a string content, or its text parts joined.
fn plain_user_text(format: Format, m: &Value) -> Option<String> {
    if m.get("role").and_then(Value::as_str) != Some("user")
        || format.descriptor().is_tool_result(m)
    {
        return None;
    }
    match m.get("content")? {
        Value::String(s) => Some(s.clone()),
        Value::Array(parts) => {
            let texts: Vec<&str> = parts
                .iter()
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect();
            (!texts.is_empty()).then(|| texts.join("\n"))
        }
        _ => None,
    }
}

/// `sent`'s fields, its list replaced by `list`, not streamed.
fn with_messages(format: Format, sent: &Value, list: Vec<Value>) -> Map<String, Value> {
    let mut out = match sent {
        Value::Object(map) => map.clone(),
        _ => Map::new(),
    };
    out.insert(list_key(format).to_owned(), Value::Array(list));
    out.insert("stream".to_owned(), Value::Bool(false));
    out.remove("stream_options");
    out
}

/// The provider's own compaction of `sent`'s messages before `cut`.
fn native_request(format: Format, sent: &Value, cut: usize) -> Value {
    let list = history(format, sent);
    let mut covered: Vec<Value> = list[..cut].to_vec();
    if format == Format::OpenAiResponses {
        covered.push(json!({"type": "compaction_trigger"}));
    }
    let mut out = with_messages(format, sent, covered);
    if format == Format::Anthropic {
        out.insert("compaction".to_owned(), json!({}));
    }
    Value::Object(out)
}

/// `sent` exactly as it is sent, plus the instruction: its output capped at `output_cap`,
/// never forced to call a tool, on `model` when given.
fn cached_request(format: Format, sent: &Value, model: Option<&str>, output_cap: u64) -> Value {
    let asked = crate::session::with_instruction(format, sent);
    let list = history(format, &asked).to_vec();
    let mut out = with_messages(format, &asked, list);
    let cap = match format {
        Format::OpenAiChat => {
            out.remove("max_tokens");
            "max_completion_tokens"
        }
        Format::Anthropic => "max_tokens",
        Format::OpenAiResponses => "max_output_tokens",
    };
    out.insert(cap.to_owned(), Value::from(output_cap));
    let forced = match out.get("tool_choice") {
        Some(Value::String(s)) => s == "required" || s == "any",
        Some(Value::Object(o)) => o.get("type").and_then(Value::as_str) != Some("auto"),
        _ => false,
    };
    if forced {
        out.remove("tool_choice");
    }
    if let Some(m) = model {
        out.insert("model".to_owned(), Value::String(m.to_owned()));
    }
    Value::Object(out)
}

impl SummaryAsk {
    /// Reads the provider's answer to [`SummaryAsk::request`] (its JSON body) into the prefix
    /// to swap in: the compaction block (in an assistant message, Anthropic) or item
    /// (Responses), kept exactly as it came; or a summary message holding the answer's text and
    /// the user's quoted messages.
    ///
    /// # Errors
    ///
    /// `VALIDATION_ERROR` with `reason` [`SUMMARY_UNREADABLE`] when the answer holds no
    /// compaction, more than one, or no text.
    pub fn ready(&self, format: Format, answer: &Value) -> Result<Ready, CompactionError> {
        match self.kind {
            SummaryKind::Native => Ok(self.around(native_item(format, answer)?)),
            SummaryKind::Cached => {
                let text = answer_text(format, answer).unwrap_or_default();
                self.ready_text(format, &text)
            }
        }
    }

    /// The prefix to swap in around `summary`, the text a caller's own model wrote for a
    /// cached-prefix ask ([`SummaryAsk::request`] is what it read).
    ///
    /// # Errors
    ///
    /// `VALIDATION_ERROR` with `reason` [`SUMMARY_UNREADABLE`] for an empty or blank text, or
    /// for an ask of the provider's native compaction, whose answer is no text.
    pub fn ready_text(&self, format: Format, summary: &str) -> Result<Ready, CompactionError> {
        if self.kind == SummaryKind::Native {
            return Err(unreadable(
                "a native compaction's answer is the provider's, not a text",
            ));
        }
        if summary.trim().is_empty() {
            return Err(unreadable("the summary is empty"));
        }
        let message = format.descriptor().user_text(&self.summary_text(summary));
        Ok(self.around(message))
    }

    /// The ready prefix: the head, `summary`, the kept tail.
    fn around(&self, summary: Value) -> Ready {
        let mut prefix = self.head.clone();
        prefix.push(PrefixItem::Insert(summary));
        if self.tail[1] > self.tail[0] {
            prefix.push(PrefixItem::Keep(self.tail));
        }
        Ready {
            asked_at: self.asked_at as u64,
            prefix,
            kind: self.kind,
            firings: self.firings,
            digest: hex(&self.digest),
        }
    }

    /// The text of a cached summary's message: a lead-in, the model's summary, and the
    /// user's own words.
    fn summary_text(&self, summary: &str) -> String {
        let mut out = format!(
            "[Summary of the earlier conversation, written for you to continue the task]\n\n{}",
            summary.trim_end()
        );
        if !self.quotes.is_empty() {
            out.push_str("\n\n## The user's own messages, verbatim, newest first\n");
            for q in &self.quotes {
                out.push_str("\n> ");
                out.push_str(&q.replace('\n', "\n> "));
                out.push('\n');
            }
        }
        out
    }
}

/// The one compaction block (Anthropic, in an assistant message) or item (Responses) of a
/// native compaction's answer.
fn native_item(format: Format, answer: &Value) -> Result<Value, CompactionError> {
    let is_compaction = |v: &&Value| v.get("type").and_then(Value::as_str) == Some("compaction");
    let (list, wrap) = match format {
        Format::Anthropic => {
            if answer.get("stop_reason").and_then(Value::as_str) != Some("compaction") {
                return Err(unreadable(
                    "the compaction call did not stop with stop_reason \"compaction\"",
                ));
            }
            (answer.get("content"), true)
        }
        Format::OpenAiResponses => (answer.get("output"), false),
        Format::OpenAiChat => {
            return Err(unreadable("Chat Completions has no native compaction"));
        }
    };
    let found: Vec<&Value> = list
        .and_then(Value::as_array)
        .map(|l| l.iter().filter(is_compaction).collect())
        .unwrap_or_default();
    let [item] = found.as_slice() else {
        return Err(unreadable(
            "the compaction call's answer does not hold exactly one compaction",
        ));
    };
    Ok(if wrap {
        json!({"role": "user", "content": [(*item).clone()]})
    } else {
        (*item).clone()
    })
}

/// The text of a model's answer in `format`: Chat's first choice, Anthropic's text blocks,
/// Responses' output text.
fn answer_text(format: Format, answer: &Value) -> Option<String> {
    let texts = |parts: &Value, kind: &str| -> Vec<String> {
        parts
            .as_array()
            .map(|l| {
                l.iter()
                    .filter(|p| p.get("type").and_then(Value::as_str) == Some(kind))
                    .filter_map(|p| p.get("text").and_then(Value::as_str).map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    };
    match format {
        Format::OpenAiChat => answer
            .pointer("/choices/0/message/content")
            .and_then(Value::as_str)
            .map(str::to_owned),
        Format::Anthropic => Some(texts(answer.get("content")?, "text").join("\n")),
        Format::OpenAiResponses => {
            let out: Vec<String> = answer
                .get("output")?
                .as_array()?
                .iter()
                .filter(|i| i.get("type").and_then(Value::as_str) == Some("message"))
                .flat_map(|i| texts(i.get("content").unwrap_or(&Value::Null), "output_text"))
                .collect();
            Some(out.join("\n"))
        }
    }
}

/// A `VALIDATION_ERROR` with `reason` [`SUMMARY_UNREADABLE`], saying `why` (never the
/// answer's content).
fn unreadable(why: &str) -> CompactionError {
    CompactionError::validation(
        format!("{why}; the session fires with its own policy instead"),
        details! { "reason" => SUMMARY_UNREADABLE },
    )
}

impl SessionState {
    /// Keeps `ready` for the next firing, when it still applies: no firing happened since it
    /// was asked and none waits already. Returns whether it was kept. (Whether the history
    /// still begins with what it was asked at is checked where it is swapped in.)
    pub fn offer(&mut self, ready: Ready) -> bool {
        let applies = self.firings == ready.firings && self.ready.is_none();
        if applies {
            self.ready = Some(ready);
        }
        applies
    }
}

/// The swap at a firing: `state` (the history `messages` taken in) with its ready summary
/// made the prefix, when the history still begins with what it was asked at and the request
/// then fits under the trigger; the summary's kind and the estimate of the new list. The
/// ready summary is taken out of `state` either way.
pub(crate) fn swap(
    config: &SessionConfig,
    state: &mut SessionState,
    messages: &[Value],
    fixed: u64,
) -> Result<Option<(SummaryKind, u64)>, FormatError> {
    let Some(ready) = state.ready.take() else {
        return Ok(None);
    };
    let format = config.format;
    let Some(asked) = usize::try_from(ready.asked_at)
        .ok()
        .and_then(|n| messages.get(..n))
    else {
        return Ok(None);
    };
    if hex(&digest_of(format, asked)) != ready.digest {
        return Ok(None);
    }
    let estimator = config.estimator.as_ref();
    let mut tokens = messages_tokens(format, &messages[asked.len()..], estimator)?;
    for item in &ready.prefix {
        tokens += match item {
            PrefixItem::Keep([a, b]) => {
                let kept = usize::try_from(*a)
                    .ok()
                    .zip(usize::try_from(*b).ok())
                    .and_then(|(a, b)| asked.get(a..b));
                let Some(kept) = kept else {
                    return Ok(None);
                };
                messages_tokens(format, kept, estimator)?
            }
            PrefixItem::Insert(m) => cutctx_formats::message_tokens(format, m, estimator)?,
        };
    }
    if fixed + tokens + config.reserve_output > config.trigger_tokens() {
        return Ok(None);
    }
    state.prefix = ready.prefix;
    state.prefix_len = asked.len();
    state.message_tokens = tokens;
    Ok(Some((ready.kind, tokens)))
}
