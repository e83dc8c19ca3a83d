//! The session's state: what the last call sent, as a small versioned JSON document that
//! names the history it describes by a chained digest and the compacted prefix by reference.
//!
//! The prefix is a list of items: `{"keep": [a, b]}` re-sends messages `a..b` of the history
//! as they are, `{"insert": message}` sends a message the compaction wrote (a summary, a
//! masked result, a lead-in). Kept messages are never copied into the state, so it stays a
//! few hundred bytes plus the summaries and stubs, whatever the history's size.

use cutctx_formats::Format;
use cutctx_model::{CompactionError, details};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

/// The version of the state document this build writes and reads.
pub const STATE_VERSION: u64 = 1;

/// The key marking a session state document.
const MARKER: &str = "cutctx_session";

/// One item of the compacted prefix.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum PrefixItem {
    /// The history's messages `[from, to)`, re-sent as they are.
    Keep([u64; 2]),
    /// A message the compaction wrote, sent as stored.
    Insert(Value),
}

/// What a session knows after a call: the history it has seen and the prefix it sends for it.
///
/// Build the first one with [`SessionState::new`]; every later one comes from
/// [`step`](crate::step). [`SessionState::to_json`] and [`SessionState::from_json`] are the
/// file form.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionState {
    pub(crate) format: Format,
    /// How many messages of the history the state describes.
    pub(crate) messages: usize,
    /// The chained digest of those messages.
    pub(crate) digest: [u8; 32],
    /// How many leading messages of the history the prefix replaces.
    pub(crate) prefix_len: usize,
    /// The compacted prefix; empty until the first firing.
    pub(crate) prefix: Vec<PrefixItem>,
    /// The estimate of the message list last sent (prefix and the messages after it).
    pub(crate) message_tokens: u64,
    /// How many times the session has compacted.
    pub(crate) firings: u64,
    /// Anthropic, `--cache-breakpoints auto`: whether the sent requests mark the end of
    /// `system` (set at a firing).
    pub(crate) marks_system: bool,
    /// Whether the last firing had to let the task statement go (it did not fit with the
    /// latest user message beside the protected turns): each call then reads the whole history
    /// to see whether a firing can bring it back.
    pub(crate) task_lost: bool,
    /// A summary made ahead of the next firing, waiting to be swapped in
    /// ([`crate::ahead`]); dropped at any firing or restart.
    pub(crate) ready: Option<Ready>,
}

/// A compacted prefix made ahead of a firing around a summary (the provider's compaction
/// block or item, or a summary message): it replaces the history's first `asked_at`
/// messages, and every message after them is appended unchanged.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Ready {
    /// How many messages of the history the prefix replaces.
    pub(crate) asked_at: u64,
    /// The prefix: kept ranges of those messages and the summary, in order.
    pub(crate) prefix: Vec<PrefixItem>,
    /// How the summary was made: a native compaction keeps the kept turns' reasoning valid.
    pub(crate) kind: crate::ahead::SummaryKind,
    /// The session's firings when it was asked: any firing since makes it useless.
    pub(crate) firings: u64,
    /// The chained digest of the history's first `asked_at` messages, in hex: a history that
    /// no longer begins with them does not take it.
    pub(crate) digest: String,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Body {
    format: String,
    messages: u64,
    history_digest: String,
    prefix_len: u64,
    prefix: Vec<PrefixItem>,
    message_tokens: u64,
    firings: u64,
    /// Absent (false) in states written before it existed, and whenever it is false.
    #[serde(default, skip_serializing_if = "is_false")]
    marks_system: bool,
    /// Absent (false) in states written before it existed, and whenever it is false.
    #[serde(default, skip_serializing_if = "is_false")]
    task_lost: bool,
    /// Absent whenever no summary waits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    ready: Option<Ready>,
}

#[expect(
    clippy::trivially_copy_pass_by_ref,
    reason = "serde's skip_serializing_if signature"
)]
const fn is_false(b: &bool) -> bool {
    !*b
}

impl SessionState {
    /// The state of a session that has seen nothing yet.
    #[must_use]
    pub fn new(format: Format) -> Self {
        Self {
            format,
            messages: 0,
            digest: seed(format),
            prefix_len: 0,
            prefix: Vec::new(),
            message_tokens: 0,
            firings: 0,
            marks_system: false,
            task_lost: false,
            ready: None,
        }
    }

    /// The format of the requests this session compacts.
    #[must_use]
    pub const fn format(&self) -> Format {
        self.format
    }

    /// How many messages of the history the state describes.
    #[must_use]
    pub const fn messages(&self) -> usize {
        self.messages
    }

    /// How many times the session has compacted.
    #[must_use]
    pub const fn firings(&self) -> u64 {
        self.firings
    }

    /// The compacted prefix and how many history messages it replaces.
    #[must_use]
    pub fn prefix(&self) -> (&[PrefixItem], usize) {
        (&self.prefix, self.prefix_len)
    }

    /// The origin of each message of the list this state sends for a history of `len`
    /// messages: the index of the history's message it is, unchanged (the prefix's kept
    /// ranges, then every message after the prefix), or `None` for one the prefix stores (a
    /// summary, a masked or merged message). A writer copies those from the request's text
    /// ([`cutctx_formats::to_string_as_written`]).
    ///
    /// ```
    /// use cutctx_formats::Format;
    /// use cutctx_session::SessionState;
    /// assert_eq!(SessionState::new(Format::OpenAiChat).origins(2), [Some(0), Some(1)]);
    /// ```
    #[must_use]
    pub fn origins(&self, len: usize) -> Vec<Option<usize>> {
        let mut out = Vec::with_capacity(self.prefix.len() + len.saturating_sub(self.prefix_len));
        for item in &self.prefix {
            match item {
                PrefixItem::Keep([a, b]) => {
                    let range = usize::try_from(*a).unwrap_or(usize::MAX)
                        ..usize::try_from(*b).unwrap_or(usize::MAX);
                    out.extend(range.map(Some));
                }
                PrefixItem::Insert(_) => out.push(None),
            }
        }
        out.extend((self.prefix_len..len).map(Some));
        out
    }

    /// The estimate of the message list last sent.
    #[must_use]
    pub const fn message_tokens(&self) -> u64 {
        self.message_tokens
    }

    /// The chained digest of the history, in hex.
    #[must_use]
    pub fn history_digest(&self) -> String {
        hex(&self.digest)
    }

    /// Advances the digest over `messages`, the ones after those already described.
    pub(crate) fn absorb(&mut self, messages: &[Value]) {
        for m in messages {
            self.digest = chain(self.format, &self.digest, m);
        }
        self.messages += messages.len();
    }

    /// The file form: `{"cutctx_session": 1, "state": {...}, "check": sha256(state)}` and a
    /// newline, keys sorted.
    #[must_use]
    pub fn to_json(&self) -> String {
        let body = Body {
            format: self.format.as_str().to_owned(),
            messages: self.messages as u64,
            history_digest: hex(&self.digest),
            prefix_len: self.prefix_len as u64,
            prefix: self.prefix.clone(),
            message_tokens: self.message_tokens,
            firings: self.firings,
            marks_system: self.marks_system,
            task_lost: self.task_lost,
            ready: self.ready.clone(),
        };
        // Through a Value, so that keys are sorted exactly as the reader re-serializes them.
        let body = serde_json::to_value(&body).unwrap_or(Value::Null);
        let text = body.to_string();
        let doc = serde_json::json!({
            MARKER: STATE_VERSION,
            "state": body,
            "check": hex(&Sha256::digest(text.as_bytes()).into()),
        });
        format!("{doc}\n")
    }

    /// Reads a state file's text, refusing anything this build did not write for `format`.
    ///
    /// # Errors
    ///
    /// `VALIDATION_ERROR` for text that is not a state document, a version this build does not
    /// read, a check that does not match (a corrupt or edited file), a state of another format,
    /// or figures that contradict each other; `details` name the field, never content.
    pub fn from_json(text: &str, format: Format) -> Result<Self, CompactionError> {
        let bad = |why: &str, field: &str| {
            CompactionError::validation(
                format!("the session state is not valid: {why}; remove it to start a new session"),
                details! { "field" => field, "document" => "session state" },
            )
        };
        let doc: Value = serde_json::from_str(text).map_err(|e| {
            CompactionError::validation(
                format!("the session state is not JSON (line {}, column {})", e.line(), e.column()),
                details! { "line" => e.line(), "column" => e.column(), "document" => "session state" },
            )
        })?;
        let Value::Object(map) = &doc else {
            return Err(bad("not a JSON object", "$"));
        };
        match map.get(MARKER).and_then(Value::as_u64) {
            Some(STATE_VERSION) => {}
            Some(_) => return Err(bad("a version this build does not read", MARKER)),
            None => return Err(bad("not a cutctx session state", MARKER)),
        }
        if map.len() != 3 {
            return Err(bad("unexpected keys", "$"));
        }
        let body = map.get("state").ok_or_else(|| bad("no state", "state"))?;
        let check = map
            .get("check")
            .and_then(Value::as_str)
            .ok_or_else(|| bad("no check", "check"))?;
        if hex(&Sha256::digest(body.to_string().as_bytes()).into()) != check {
            return Err(bad(
                "its check does not match its content (corrupt or edited)",
                "check",
            ));
        }
        let body: Body = serde_json::from_value(body.clone())
            .map_err(|_| bad("a field has the wrong shape", "state"))?;
        if body.format != format.as_str() {
            return Err(CompactionError::validation(
                format!(
                    "the session state is for {} requests, not {}",
                    body.format,
                    format.as_str()
                ),
                details! { "field" => "format", "state_format" => body.format.as_str(), "format" => format.as_str() },
            ));
        }
        let digest = unhex(&body.history_digest)
            .ok_or_else(|| bad("a digest that is not 64 hex digits", "history_digest"))?;
        let messages =
            usize::try_from(body.messages).map_err(|_| bad("too many messages", "messages"))?;
        let prefix_len =
            usize::try_from(body.prefix_len).map_err(|_| bad("too long a prefix", "prefix_len"))?;
        if prefix_len > messages {
            return Err(bad("a prefix longer than the history", "prefix_len"));
        }
        if !ranges_in_order(&body.prefix, body.prefix_len) {
            return Err(bad(
                "kept ranges out of order or beyond the prefix",
                "prefix",
            ));
        }
        if let Some(ready) = &body.ready
            // It may cover more than the state has seen: one asked before a call's step.
            && (!ranges_in_order(&ready.prefix, ready.asked_at) || unhex(&ready.digest).is_none())
        {
            return Err(bad(
                "a summary made ahead that keeps messages out of order or beyond what it covers",
                "ready",
            ));
        }
        Ok(Self {
            format,
            messages,
            digest,
            prefix_len,
            prefix: body.prefix,
            message_tokens: body.message_tokens,
            firings: body.firings,
            marks_system: body.marks_system,
            task_lost: body.task_lost,
            ready: body.ready,
        })
    }

    /// Whether a summary made ahead waits to be swapped in at the next firing.
    #[must_use]
    pub const fn has_ready(&self) -> bool {
        self.ready.is_some()
    }
}

/// Whether the kept ranges of `prefix` are in order, each non-empty and below `len`.
fn ranges_in_order(prefix: &[PrefixItem], len: u64) -> bool {
    let mut next = 0u64;
    for item in prefix {
        if let PrefixItem::Keep([a, b]) = item {
            if a < &next || b <= a || *b > len {
                return false;
            }
            next = *b;
        }
    }
    true
}

/// The digest of an empty history of `format`.
fn seed(format: Format) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(b"cutctx.session.v1:");
    h.update(format.as_str().as_bytes());
    h.finalize().into()
}

/// One link of the chain: `sha256(previous || sha256(JSON of the message's history form))`.
/// The history form ([`cutctx_formats::history_form`]) leaves out what a client rewrites
/// without changing the message (Anthropic's cache marks), so that its session goes on.
fn chain(format: Format, previous: &[u8; 32], message: &Value) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(previous);
    h.update(message_digest(&cutctx_formats::history_form(
        format, message,
    )));
    h.finalize().into()
}

/// The digest of one message's compact JSON text (keys sorted): what chains a session's
/// history (of the message's [`history_form`](cutctx_formats::history_form)), and what names a
/// message in the replay's cache model.
///
/// ```
/// use cutctx_session::message_digest;
/// let m = serde_json::json!({"role": "user", "content": "hi"});
/// assert_eq!(message_digest(&m), message_digest(&m.clone()));
/// ```
#[must_use]
pub fn message_digest(message: &Value) -> [u8; 32] {
    Sha256::digest(message.to_string().as_bytes()).into()
}

/// The chained digests of every leading part of the history `messages` of `format`, in hex:
/// entry `k` names the first `k` messages exactly as [`SessionState::history_digest`] names a
/// state that has seen them. A front end that keeps many sessions finds the one a request
/// extends by looking up entry `k` for the state of `k` messages (`messages.len() + 1`
/// entries, the empty history first).
///
/// ```
/// use cutctx_formats::Format;
/// use cutctx_session::{SessionState, history_digests};
/// let messages = [serde_json::json!({"role": "user", "content": "hi"})];
/// let digests = history_digests(Format::OpenAiChat, &messages);
/// assert_eq!(digests.len(), 2);
/// assert_eq!(digests[0], SessionState::new(Format::OpenAiChat).history_digest());
/// ```
#[must_use]
pub fn history_digests(format: Format, messages: &[Value]) -> Vec<String> {
    let mut digest = seed(format);
    let mut out = Vec::with_capacity(messages.len() + 1);
    out.push(hex(&digest));
    for m in messages {
        digest = chain(format, &digest, m);
        out.push(hex(&digest));
    }
    out
}

/// The chained digests of the history `last` names (in hex, as [`history_digests`] gives it)
/// grown by `messages`: entry `i` names it with the first `i + 1` of them. `None` when `last`
/// is not a digest. For a front end that knows a history's digest and hashes only what it grew
/// by.
///
/// ```
/// use cutctx_formats::Format;
/// use cutctx_session::{history_digests, history_digests_after};
/// let messages = [serde_json::json!({"role": "user", "content": "hi"}), serde_json::json!({"role": "assistant", "content": "yo"})];
/// let whole = history_digests(Format::OpenAiChat, &messages);
/// let grown = history_digests_after(Format::OpenAiChat, &whole[1], &messages[1..]).expect("a digest");
/// assert_eq!(grown, whole[2..]);
/// ```
#[must_use]
pub fn history_digests_after(
    format: Format,
    last: &str,
    messages: &[Value],
) -> Option<Vec<String>> {
    let mut digest = unhex(last)?;
    Some(
        messages
            .iter()
            .map(|m| {
                digest = chain(format, &digest, m);
                hex(&digest)
            })
            .collect(),
    )
}

/// The chained digest of `messages` from the empty history of `format`.
pub(crate) fn digest_of(format: Format, messages: &[Value]) -> [u8; 32] {
    messages
        .iter()
        .fold(seed(format), |d, m| chain(format, &d, m))
}

pub(crate) fn hex(bytes: &[u8; 32]) -> String {
    use std::fmt::Write as _;
    let mut s = String::with_capacity(64);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

fn unhex(text: &str) -> Option<[u8; 32]> {
    if text.len() != 64
        || !text
            .bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
    {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, o) in out.iter_mut().enumerate() {
        *o = u8::from_str_radix(text.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}
