//! Signed reasoning after an edit: the one rule for thinking blocks (Anthropic) and reasoning
//! items (OpenAI Responses) whose prefix a compaction changed.
//!
//! A provider checks each signed thinking block or encrypted reasoning item it gets back
//! against everything before it in the request: the top-level fields (`system`, `tools`, the
//! instructions) and every message before it must be the bytes of the request that produced
//! it. Compaction changes that prefix at the first message it masks, drops, summarizes or
//! merges, and from there on every such block is invalid: Anthropic refuses the request
//! (`Invalid signature in thinking block`) or drops the blocks, as
//! `thinking.block_binding.prefix_mismatch_behavior` says; OpenAI's newer models drop the
//! reasoning items. `settle` finds that first changed position in a rendering and, as the
//! [`ReasoningMode`] says, removes what follows it, leaves it, or refuses the compaction; what
//! counts as reasoning is each format's own rule (`anthropic::is_reasoning_block`,
//! `openai_responses::is_reasoning_item`). Chat Completions requests carry no signed reasoning.
//!
//! A request that fits comes back as it was: nothing changed, so nothing is invalid.

use std::fmt;
use std::str::FromStr;

use cutctx_model::details;
use cutctx_policies::TokenEstimator;
use serde_json::{Map, Value};

use crate::mapping::{Piece, Rendered, Source};
use crate::{Format, FormatError, anthropic, openai_responses};

/// What compaction does with the thinking blocks and reasoning items whose prefix it changed.
///
/// ```
/// use cutctx_formats::ReasoningMode;
/// assert_eq!("refuse".parse::<ReasoningMode>(), Ok(ReasoningMode::Refuse));
/// assert_eq!(ReasoningMode::default().as_str(), "strip");
/// assert!("drop".parse::<ReasoningMode>().is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub enum ReasoningMode {
    /// Remove them (the default): the provider would refuse or drop them. No kept block's
    /// bytes are edited; a message left with no content is left out.
    #[default]
    Strip,
    /// Leave them as they are, still reported: for models without prefix checks, or a caller
    /// whose requests set `prefix_mismatch_behavior` to `drop_block`.
    Keep,
    /// Fail with `FORMAT_REASONING_INVALIDATED` when a compaction would invalidate any.
    Refuse,
}

impl ReasoningMode {
    /// Every mode, in the order the options list them.
    pub const ALL: [Self; 3] = [Self::Strip, Self::Keep, Self::Refuse];

    /// The name the options take: `strip`, `keep` or `refuse`.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Strip => "strip",
            Self::Keep => "keep",
            Self::Refuse => "refuse",
        }
    }
}

impl fmt::Display for ReasoningMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for ReasoningMode {
    type Err = FormatError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|m| m.as_str() == s)
            .ok_or_else(|| {
                FormatError::unsupported(
                    format!("unknown reasoning mode {s:?}: expected strip, keep or refuse"),
                    details! { "option" => "reasoning" },
                )
            })
    }
}

/// One thinking block or reasoning item whose prefix the compaction changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidatedReasoning {
    /// The index of its message (Anthropic) or item (Responses) in the input's list; `None`
    /// in a message compaction rebuilt (two of one role merged where a removal made them meet).
    pub message: Option<usize>,
    /// Anthropic: the block's index in the message's `content`; `None` for a Responses item.
    pub block: Option<usize>,
    /// `thinking`, `redacted_thinking` or `reasoning`.
    pub kind: &'static str,
    /// The text it carries that a model reads (thinking, a reasoning summary); empty for
    /// redacted or encrypted-only reasoning, which counts nothing.
    text: String,
}

impl InvalidatedReasoning {
    /// The text it carries, for an estimate of its tokens.
    #[must_use]
    pub fn text(&self) -> &str {
        &self.text
    }
}

/// What rendering found: the first changed position and the reasoning after it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReasoningOutcome {
    /// The mode it was settled in.
    pub mode: ReasoningMode,
    /// The index, in the input's list, of the first message or item whose bytes changed (0
    /// when a top-level field did); `None` when the prefix of every kept message is intact.
    pub first_changed: Option<usize>,
    /// Every thinking block or reasoning item after it, in order: removed with
    /// [`ReasoningMode::Strip`], kept with [`ReasoningMode::Keep`].
    pub invalidated: Vec<InvalidatedReasoning>,
    /// Responses: the items (by their index in the input's list) that lost their `id`
    /// because the reasoning item they were produced with was removed; their `call_id` stays.
    pub unlinked: Vec<usize>,
}

impl ReasoningOutcome {
    /// Whether the compaction invalidated any reasoning.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.invalidated.is_empty()
    }

    /// The estimated tokens of the invalidated reasoning's text, by `estimator`.
    #[must_use]
    pub fn tokens(&self, estimator: &dyn TokenEstimator) -> u64 {
        self.invalidated
            .iter()
            .map(|r| estimator.estimate_tokens(&r.text))
            .fold(0, u64::saturating_add)
    }

    /// The report's `"reasoning"` section: `{"mode", "first_changed", "removed", "tokens",
    /// "invalidated": [{"message", "block", "kind", "tokens"}], "unlinked"}`, `removed` saying
    /// whether they left the request (`strip`) or were sent as they were (`keep`), `unlinked`
    /// the Responses items that lost their `id` with them.
    ///
    /// ```
    /// use cutctx_formats::ReasoningOutcome;
    /// use cutctx_policies::CharRatioEstimator;
    /// let none = ReasoningOutcome::default();
    /// assert_eq!(none.to_json(&CharRatioEstimator::default())["invalidated"], serde_json::json!([]));
    /// ```
    #[must_use]
    pub fn to_json(&self, estimator: &dyn TokenEstimator) -> Value {
        let invalidated: Vec<Value> = self
            .invalidated
            .iter()
            .map(|r| {
                serde_json::json!({
                    "message": r.message,
                    "block": r.block,
                    "kind": r.kind,
                    "tokens": estimator.estimate_tokens(&r.text),
                })
            })
            .collect();
        serde_json::json!({
            "mode": self.mode.as_str(),
            "first_changed": self.first_changed,
            "removed": self.mode == ReasoningMode::Strip,
            "tokens": self.tokens(estimator),
            "invalidated": invalidated,
            "unlinked": self.unlinked,
        })
    }

    /// The line standard error gets when anything was invalidated, else `None`: how many
    /// blocks or items, where the prefix changed, their tokens, and what was done.
    #[must_use]
    pub fn notice(&self, format: Format, estimator: &dyn TokenEstimator) -> Option<String> {
        if self.is_empty() {
            return None;
        }
        let what = match format {
            Format::Anthropic => "thinking block(s)",
            _ => "reasoning item(s)",
        };
        let done = match self.mode {
            ReasoningMode::Strip => "removed them (the strip reasoning mode)",
            ReasoningMode::Keep => {
                "sent them as they were (the keep reasoning mode); a model that checks their prefix refuses or drops them"
            }
            ReasoningMode::Refuse => "refused",
        };
        Some(format!(
            "cutctx: the compaction changed the request at message {} and invalidated {} {what} after it ({} estimated tokens); {done}",
            self.first_changed.unwrap_or(0),
            self.invalidated.len(),
            self.tokens(estimator),
        ))
    }
}

/// The reasoning of one message: its blocks (Anthropic), or the item itself (Responses).
fn reasoning_of(
    format: Format,
    index: Option<usize>,
    message: &Value,
) -> Vec<InvalidatedReasoning> {
    match format {
        Format::OpenAiChat => Vec::new(),
        Format::Anthropic => anthropic::reasoning_blocks(message)
            .map(|(block, kind, text)| InvalidatedReasoning {
                message: index,
                block: Some(block),
                kind,
                text,
            })
            .collect(),
        Format::OpenAiResponses => openai_responses::reasoning_text(message)
            .map(|text| InvalidatedReasoning {
                message: index,
                block: None,
                kind: "reasoning",
                text,
            })
            .into_iter()
            .collect(),
    }
}

/// Whether message `i` of `list` may hold reasoning, read cheaply: in a text, a message whose
/// bytes neither name the type nor hold a `\u` escape (the one escape that could spell its
/// letters) cannot; anything else is parsed and read.
fn may_hold_reasoning(format: Format, list: Source<'_>, i: usize) -> bool {
    let name = match format {
        Format::OpenAiChat => return false,
        Format::Anthropic => "thinking",
        Format::OpenAiResponses => "reasoning",
    };
    match list {
        Source::Values(_) => true,
        Source::Text { text, spans } => spans
            .get(i)
            .and_then(|s| text.get(s.clone()))
            .is_none_or(|bytes| bytes.contains(name) || bytes.contains("\\u")),
    }
}

/// Applies the rule to `rendered`, the view's pieces over `list` (the input's messages) with
/// `document` the input's top-level fields: finds the first changed position (no later than
/// `changed_from`, where the caller's own request already differed from `list`: a repair's
/// first drop), then removes, keeps or refuses the reasoning after it as `mode` says.
///
/// Removing keeps the request valid by the provider's other rules: a message left with no
/// content is left out; on Responses, a call or answer that followed a removed reasoning item
/// loses its `id` (its `call_id` stays); on Anthropic, the final assistant message of a tool
/// loop in progress may lose its thinking only where the request's thinking mode allows a turn
/// without it.
///
/// # Errors
///
/// `FORMAT_REASONING_INVALIDATED` with [`ReasoningMode::Refuse`] when any is invalidated,
/// naming the first changed position and the messages; `FORMAT_REASONING_OPEN_TOOL_LOOP` with
/// [`ReasoningMode::Strip`] when removing would leave a manual-thinking tool loop in progress
/// without the thinking its last assistant message must start with, a request no provider
/// rule allows.
pub(crate) fn settle(
    format: Format,
    mode: ReasoningMode,
    document: &Value,
    key: &str,
    list: Option<Source<'_>>,
    changed_from: Option<usize>,
    rendered: &mut Rendered,
) -> Result<ReasoningOutcome, FormatError> {
    let mut outcome = ReasoningOutcome {
        mode,
        ..ReasoningOutcome::default()
    };
    if format == Format::OpenAiChat {
        return Ok(outcome);
    }
    let (Some(list), Some(pieces)) = (list, rendered.list.as_mut()) else {
        return Ok(outcome);
    };
    let top_changed = !same_top_level(document, &rendered.shell, key);
    let first = if top_changed {
        Some(0)
    } else {
        let moved = pieces
            .iter()
            .enumerate()
            .position(|(k, p)| !matches!(p, Piece::Kept(i) if *i == k));
        match (moved, changed_from) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    };
    let Some(first) = first else {
        return Ok(outcome);
    };
    // Before `first`, output message k is input message k: input message `first` is the
    // first one not sent as it was (dropped, masked, folded or merged).
    outcome.first_changed = Some(first);
    let strip_mode = mode == ReasoningMode::Strip;
    let mut settled: Vec<Piece> = Vec::with_capacity(pieces.len());
    // Responses: after a removed reasoning item, the model's items of the same step (up to
    // the next item that is not the model's) lose the `id` that names it.
    let mut unlinking = false;
    // Anthropic: where in `settled` the last message is whose thinking was removed.
    let mut last_stripped: Option<usize> = None;
    for (k, piece) in std::mem::take(pieces).into_iter().enumerate() {
        if k < first {
            settled.push(piece);
            continue;
        }
        let index = match &piece {
            Piece::New(_) => None,
            Piece::Kept(i) | Piece::Masked { index: i, .. } => Some(*i),
        };
        if !unlinking && index.is_some_and(|i| !may_hold_reasoning(format, list, i)) {
            settled.push(piece);
            continue;
        }
        // What to send instead of the piece, read while the piece is borrowed.
        let (found, instead) = {
            let value = piece_value(&piece, list, k)?;
            let found = reasoning_of(format, index, &value);
            if !found.is_empty() {
                let instead = strip_mode.then(|| strip(format, value.into_owned()));
                (found, instead)
            } else if unlinking && crate::is_model_item(format, &value) {
                (found, openai_responses::unlinked(&value).map(Some))
            } else {
                unlinking = false;
                (found, None)
            }
        };
        let stripped = !found.is_empty();
        outcome.invalidated.extend(found);
        match instead {
            None => settled.push(piece),
            Some(Some(message)) => {
                if stripped {
                    last_stripped = Some(settled.len());
                } else {
                    outcome.unlinked.extend(index);
                }
                settled.push(Piece::New(message));
            }
            // A reasoning item, or a message that held only thinking: nothing is left.
            Some(None) => unlinking = format == Format::OpenAiResponses,
        }
    }
    if format == Format::Anthropic && strip_mode {
        open_tool_loop(document, list, &settled, last_stripped, &outcome)?;
    }
    *pieces = settled;
    if mode == ReasoningMode::Refuse && !outcome.invalidated.is_empty() {
        let messages: Vec<Option<usize>> = outcome.invalidated.iter().map(|r| r.message).collect();
        return Err(FormatError::ReasoningInvalidated {
            message: format!(
                "the compaction changes the request at message {} and would invalidate {} thinking block(s) or reasoning item(s) after it; use the strip reasoning mode to remove them, or the keep mode to send them",
                outcome.first_changed.unwrap_or(0),
                outcome.invalidated.len()
            ),
            details: details! {
                "format" => format.as_str(),
                "first_changed" => outcome.first_changed.unwrap_or(0),
                "invalidated" => outcome.invalidated.len(),
                "messages" => messages,
            },
        });
    }
    Ok(outcome)
}

/// The message a piece sends: the input's (patched when masked) or the one rendering made.
fn piece_value<'a>(
    piece: &'a Piece,
    list: Source<'a>,
    k: usize,
) -> Result<std::borrow::Cow<'a, Value>, FormatError> {
    Ok(match piece {
        Piece::New(v) => std::borrow::Cow::Borrowed(v),
        Piece::Kept(i) => list
            .get(*i)
            .ok_or_else(|| crate::mapping::bad_position(k))?,
        Piece::Masked { index, patches } => {
            let original = list
                .get(*index)
                .ok_or_else(|| crate::mapping::bad_position(k))?;
            std::borrow::Cow::Owned(crate::mapping::patched(&original, patches))
        }
    })
}

/// `FORMAT_REASONING_OPEN_TOOL_LOOP` when `settled` ends in a tool loop in progress (its last
/// message answers tool calls) whose assistant message before it lost the thinking it started
/// with, and the request's manual thinking requires that message to start with it. Anthropic
/// documents no request that is valid then: the thinking is bound to the prefix the compaction
/// changed, the turn may not go without it, and its advice is not to compact between a
/// `tool_use` and the `tool_result` that answers it (*Preserved thinking*).
fn open_tool_loop(
    document: &Value,
    list: Source<'_>,
    settled: &[Piece],
    last_stripped: Option<usize>,
    outcome: &ReasoningOutcome,
) -> Result<(), FormatError> {
    let Some(n) = settled.len().checked_sub(1) else {
        return Ok(());
    };
    if last_stripped.is_none_or(|s| s + 1 != n) || !anthropic::thinking_first_required(document) {
        return Ok(());
    }
    let last = piece_value(&settled[n], list, n)?;
    if !anthropic::answers_tools(&last) {
        return Ok(());
    }
    let assistant = outcome
        .invalidated
        .last()
        .and_then(|r| r.message)
        .and_then(|i| list.get(i));
    if !assistant.is_some_and(|m| anthropic::starts_with_thinking(&m)) {
        return Ok(());
    }
    let message = outcome.invalidated.last().and_then(|r| r.message);
    Err(FormatError::ReasoningOpenToolLoop {
        message: format!(
            "the request ends in a tool loop in progress whose last assistant message (message {}) must start with its thinking under \"thinking\": {{\"type\": \"enabled\"}}, and the compaction changes the request before it (at message {}), which invalidates that thinking; compact once the loop has its final answer, use adaptive thinking, or choose the keep reasoning mode and send thinking.block_binding.prefix_mismatch_behavior \"drop_block\"",
            message.map_or_else(|| "?".to_owned(), |i| i.to_string()),
            outcome.first_changed.unwrap_or(0),
        ),
        details: details! {
            "format" => Format::Anthropic.as_str(),
            "first_changed" => outcome.first_changed.unwrap_or(0),
            "message" => message,
        },
    })
}

/// Whether the rendered top-level fields are the input's, the list aside.
fn same_top_level(document: &Value, shell: &Value, key: &str) -> bool {
    let (Value::Object(before), Value::Object(after)) = (document, shell) else {
        // A bare list has no top-level fields to change.
        return true;
    };
    let others = |m: &Map<String, Value>| m.iter().filter(|(k, _)| *k != key).count();
    others(before) == others(after)
        && before
            .iter()
            .filter(|(k, _)| *k != key)
            .all(|(k, v)| after.get(k) == Some(v))
}

/// `message` without its reasoning: `None` when nothing of it is left (a Responses reasoning
/// item; an Anthropic message that held only thinking).
/// `message` (of `format`) without its reasoning, for a reader that must never see thinking
/// text (a summarizer's input): an Anthropic message without its thinking and redacted-thinking
/// blocks (`None` when nothing else is left), a Responses reasoning item dropped (`None`),
/// anything else as it is.
///
/// ```
/// use cutctx_formats::{Format, without_reasoning};
/// use serde_json::json;
/// let m = json!({"role": "assistant", "content": [
///     {"type": "thinking", "thinking": "private", "signature": "s"}, {"type": "text", "text": "ok"}]});
/// assert_eq!(without_reasoning(Format::Anthropic, m),
///            Some(json!({"role": "assistant", "content": [{"type": "text", "text": "ok"}]})));
/// let item = json!({"type": "reasoning", "summary": [{"type": "summary_text", "text": "private"}]});
/// assert_eq!(without_reasoning(Format::OpenAiResponses, item), None);
/// ```
#[must_use]
pub fn without_reasoning(format: Format, message: Value) -> Option<Value> {
    if !crate::holds_reasoning(format, &message) {
        return Some(message);
    }
    strip(format, message)
}

/// `content`, a turn's text read from `message` (of `format`), less the thinking text the
/// message holds: what a summarizer may read of the turn.
pub(crate) fn content_without_reasoning(format: Format, message: &Value, content: &str) -> String {
    let texts: Vec<String> = match format {
        Format::Anthropic => crate::anthropic::reasoning_blocks(message)
            .map(|(_, _, text)| text)
            .collect(),
        Format::OpenAiResponses => crate::openai_responses::reasoning_text(message)
            .into_iter()
            .collect(),
        Format::OpenAiChat => Vec::new(),
    };
    let mut out = content.to_owned();
    for text in texts.iter().filter(|t| !t.is_empty()) {
        if out == *text {
            out.clear();
        } else if let Some(at) = out.find(&format!("{text}\n")) {
            out.replace_range(at..at + text.len() + 1, "");
        } else if let Some(at) = out.find(&format!("\n{text}")) {
            out.replace_range(at..at + text.len() + 1, "");
        }
    }
    out
}

fn strip(format: Format, message: Value) -> Option<Value> {
    match format {
        Format::Anthropic => anthropic::without_reasoning(message),
        Format::OpenAiResponses => None,
        Format::OpenAiChat => Some(message),
    }
}

/// A thinking block or reasoning item of an output whose prefix is not the input's: what
/// [`stale_reasoning`] finds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StaleReasoning {
    /// Its message's (or item's) index in the output's list.
    pub message: usize,
    /// Anthropic: its block's index in that message; `None` for a Responses item.
    pub block: Option<usize>,
}

/// Every thinking block or reasoning item of `output` whose prefix differs from the one it had
/// in `input`: those after the first message (or item) of `output` that is not the input's at
/// the same place, or all of them when a top-level field (the list aside) changed. Read from
/// the two documents alone, apart from how compaction made the output: the check the tests
/// hold every output to, and one a caller can run on any rewritten request.
///
/// ```
/// use cutctx_formats::{Format, stale_reasoning};
/// use serde_json::json;
/// let thinking = json!({"role": "assistant", "content": [
///     {"type": "thinking", "thinking": "hmm", "signature": "s"}, {"type": "text", "text": "ok"}]});
/// let input = json!({"messages": [{"role": "user", "content": "a"}, thinking.clone()]});
/// let edited = json!({"messages": [{"role": "user", "content": "b"}, thinking]});
/// assert!(stale_reasoning(Format::Anthropic, &input, &input).is_empty());
/// assert_eq!(stale_reasoning(Format::Anthropic, &input, &edited).len(), 1);
/// ```
#[must_use]
pub fn stale_reasoning(format: Format, input: &Value, output: &Value) -> Vec<StaleReasoning> {
    let key = crate::list_key(format);
    let before = crate::message_list(format, input);
    let after = crate::message_list(format, output);
    let first = if same_top_level(input, output, key) {
        after
            .iter()
            .enumerate()
            .position(|(k, m)| before.get(k) != Some(m))
    } else {
        Some(0)
    };
    let Some(first) = first else {
        return Vec::new();
    };
    let mut stale = Vec::new();
    for (k, message) in after.iter().enumerate().skip(first) {
        for r in reasoning_of(format, Some(k), message) {
            stale.push(StaleReasoning {
                message: k,
                block: r.block,
            });
        }
    }
    stale
}
