//! The whole prompt a provider counts as input: tool definitions, system text and messages,
//! part by part, and the budget left for the turns once the fixed parts and the completion's
//! room are taken out.
//!
//! Tool definitions are not turns: no policy can drop them, so they are counted apart, with the
//! same estimator as the turns, over their canonical JSON text (keys sorted, no whitespace), so
//! that the count does not depend on how the request was indented. System text (Chat `system`
//! and `developer` messages, the Responses `instructions`, the Anthropic `system`) is already
//! made of system turns, which policies never touch.

use crate::provider_format::{ProviderFormat, per_format};
use cutctx_model::{CompactionError, Role, Transcript, details};
use cutctx_policies::TokenEstimator;
use serde_json::{Map, Value};

use crate::Repair;
use crate::validate::{Rule, Violation};
use crate::{Format, FormatError};

/// One turn's share of the prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TurnCount {
    /// The turn's id (`m{index}`, `m{index}.{block}`, `system` or `instructions`).
    pub turn_id: String,
    /// Its role.
    pub role: Role,
    /// Its estimate, in tokens.
    pub tokens: u64,
}

/// Where the tokens of a request are, part by part, as [`ProviderTranscript::prompt_count`]
/// computes them.
///
/// `total` is what must fit in the model's window: `tools + system + messages + reserve`.
///
/// [`ProviderTranscript::prompt_count`]: crate::ProviderTranscript::prompt_count
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PromptCount {
    /// The tool definitions (`tools`, and Chat's legacy `functions`).
    pub tools: u64,
    /// The system turns: untouchable.
    pub system: u64,
    /// Every other turn.
    pub messages: u64,
    /// The room kept for the completion.
    pub reserve: u64,
    /// `tools + system + messages + reserve`.
    pub total: u64,
    /// Every turn, system turns included, by position.
    pub turns: Vec<TurnCount>,
}

impl PromptCount {
    /// Counts `transcript`'s turns beside `tools` tokens of tool definitions and `reserve`.
    #[must_use]
    pub fn of(transcript: &Transcript, tools: u64, reserve: u64) -> Self {
        let turns = transcript
            .turns()
            .iter()
            .map(|t| TurnCount {
                turn_id: t.turn_id().to_owned(),
                role: t.role(),
                tokens: t.token_estimate(),
            })
            .collect();
        Self {
            turns,
            ..Self::totals(transcript, tools, reserve)
        }
    }

    /// As [`PromptCount::of`], without the list of turns (`turns` is empty).
    #[must_use]
    pub fn totals(transcript: &Transcript, tools: u64, reserve: u64) -> Self {
        let (mut system, mut messages) = (0_u64, 0_u64);
        for t in transcript.turns() {
            let part = if t.role() == Role::System {
                &mut system
            } else {
                &mut messages
            };
            *part = part.saturating_add(t.token_estimate());
        }
        Self {
            tools,
            system,
            messages,
            reserve,
            total: tools
                .saturating_add(system)
                .saturating_add(messages)
                .saturating_add(reserve),
            turns: Vec::new(),
        }
    }

    /// The parts that no compaction changes: tools, system turns and the reserve.
    #[must_use]
    pub const fn fixed(&self) -> u64 {
        self.tools
            .saturating_add(self.system)
            .saturating_add(self.reserve)
    }

    /// The budget the turns get out of a whole-prompt budget of `max_tokens`: `max_tokens`
    /// less the tools and the reserve (system turns are turns, counted by the plan).
    ///
    /// # Errors
    ///
    /// `COMPACTION_BUDGET_UNSATISFIABLE` when the fixed parts alone exceed `max_tokens`, with
    /// both figures and each part, or when the parts sum beyond `u64::MAX`.
    ///
    /// ```
    /// use cutctx_formats::{Format, ProviderTranscript};
    /// let request = serde_json::json!({
    ///     "max_tokens": 100,
    ///     "tools": [{"name": "t", "description": "x".repeat(400), "input_schema": {}}],
    ///     "messages": [{"role": "user", "content": "hi"}]
    /// });
    /// let pt = ProviderTranscript::parse(Format::Anthropic, &request)?;
    /// let count = pt.prompt_count(pt.requested_output()?.unwrap_or(0));
    /// assert_eq!((count.tools, count.reserve), (113, 100)); // 449 characters of JSON, 4 a token
    /// assert_eq!(count.turn_budget(1_000)?, 787);
    /// assert_eq!(count.turn_budget(200).unwrap_err().code(), "COMPACTION_BUDGET_UNSATISFIABLE");
    /// # Ok::<(), cutctx_formats::FormatError>(())
    /// ```
    pub fn turn_budget(&self, max_tokens: u64) -> Result<u64, FormatError> {
        // A reserve is the caller's figure and may be anything a JSON integer holds: parts
        // that sum beyond `u64` fit no budget, and are refused here, before any figure of the
        // report (which adds them up) could wrap.
        let whole = [self.tools, self.system, self.messages, self.reserve]
            .into_iter()
            .try_fold(0_u64, u64::checked_add);
        if whole.is_none() {
            return Err(CompactionError::BudgetUnsatisfiable {
                message: format!(
                    "The parts of the request (tools {}, system {}, messages {}, output reserve \
                     {}) sum beyond {} tokens; no budget can hold them.",
                    self.tools,
                    self.system,
                    self.messages,
                    self.reserve,
                    u64::MAX
                ),
                details: details! {
                    "max_tokens" => max_tokens,
                    "tools_tokens" => self.tools,
                    "system_tokens" => self.system,
                    "messages_tokens" => self.messages,
                    "reserve_tokens" => self.reserve,
                },
            }
            .into());
        }
        let fixed = self.fixed();
        if fixed > max_tokens {
            return Err(CompactionError::BudgetUnsatisfiable {
                message: format!(
                    "The fixed parts of the request ({fixed} tokens: tools {}, system {}, output \
                     reserve {}) exceed max_tokens ({max_tokens}); no compaction of the messages \
                     can fit.",
                    self.tools, self.system, self.reserve
                ),
                details: details! {
                    "fixed_tokens" => fixed,
                    "max_tokens" => max_tokens,
                    "tools_tokens" => self.tools,
                    "system_tokens" => self.system,
                    "reserve_tokens" => self.reserve,
                },
            }
            .into());
        }
        Ok(max_tokens - self.tools - self.reserve)
    }

    /// The count as JSON: `{"tools", "system", "messages", "reserve", "total", "turns"}`, each
    /// turn as `{"turn_id", "role", "tokens"}`, in position order.
    #[must_use]
    pub fn to_json(&self) -> Value {
        let turns = self
            .turns
            .iter()
            .map(|t| {
                let mut m = Map::new();
                m.insert("turn_id".into(), Value::from(t.turn_id.as_str()));
                m.insert("role".into(), Value::from(t.role.as_str()));
                m.insert("tokens".into(), Value::from(t.tokens));
                Value::Object(m)
            })
            .collect();
        let mut m = Map::new();
        m.insert("tools".into(), Value::from(self.tools));
        m.insert("system".into(), Value::from(self.system));
        m.insert("messages".into(), Value::from(self.messages));
        m.insert("reserve".into(), Value::from(self.reserve));
        m.insert("total".into(), Value::from(self.total));
        m.insert("turns".into(), Value::Array(turns));
        Value::Object(m)
    }
}

/// The tool definitions of a request: `tools`, and for Chat also the legacy `functions`.
pub(crate) fn tool_definitions(format: Format, document: &Value) -> Vec<&Value> {
    let keys: &[&str] = match format {
        Format::OpenAiChat => &["tools", "functions"],
        Format::OpenAiResponses | Format::Anthropic => &["tools"],
    };
    keys.iter()
        .filter_map(|k| document.get(*k))
        .filter(|v| !v.is_null())
        .collect()
}

/// The completion room the request asks for itself: Chat's `max_completion_tokens` (else its
/// older `max_tokens`), the Responses `max_output_tokens`, the Anthropic `max_tokens`.
pub(crate) fn requested_output(
    format: Format,
    document: &Value,
) -> Result<Option<u64>, FormatError> {
    let keys: &[&str] = match format {
        Format::OpenAiChat => &["max_completion_tokens", "max_tokens"],
        Format::OpenAiResponses => &["max_output_tokens"],
        Format::Anthropic => &["max_tokens"],
    };
    for key in keys {
        match document.get(*key) {
            None | Some(Value::Null) => {}
            Some(v) => {
                return v.as_u64().map(Some).ok_or_else(|| {
                    Violation::new(format, Rule::Malformed, None, (*key).to_owned()).into()
                });
            }
        }
    }
    Ok(None)
}

/// The report of a provider compaction, as the command line's `--report` file and the Python
/// package write it, canonical JSON and a newline: `{"plan", "report"}`, with `"prompt"` when the tools or an output
/// reserve take part of `max_tokens` (so that requests without them keep their report's
/// bytes) and `"repairs"` when repair was asked for.
pub fn report_text(
    plan: &cutctx_invariants::CompactionPlan,
    report: &cutctx_model::CompactionReport,
    count: &PromptCount,
    max_tokens: u64,
    repairs: Option<&[Repair]>,
    reasoning: Option<&Value>,
) -> String {
    let mut text = format!("{{\"plan\":{}", plan.canonical_json());
    if count.tools > 0 || count.reserve > 0 {
        let prompt = serde_json::json!({
            "max_tokens": max_tokens,
            "tools_tokens": count.tools,
            "reserve_tokens": count.reserve,
            // Sums that `turn_budget` has checked fit in `u64` before any plan was made.
            "turn_budget": max_tokens.saturating_sub(count.tools.saturating_add(count.reserve)),
            "tokens_before": count.tools.saturating_add(count.reserve).saturating_add(plan.tokens_before),
            "tokens_after_estimate": count
                .tools
                .saturating_add(count.reserve)
                .saturating_add(plan.tokens_after_estimate),
        });
        text.push_str(",\"prompt\":");
        text.push_str(&cutctx_model::canonical::canonical_json_value(&prompt));
    }
    // Keys in canonical order: "prompt", "reasoning", "repairs", "report".
    if let Some(reasoning) = reasoning {
        text.push_str(",\"reasoning\":");
        text.push_str(&cutctx_model::canonical::canonical_json_value(reasoning));
    }
    if let Some(repairs) = repairs {
        let list = Value::Array(repairs.iter().map(Repair::to_json).collect());
        text.push_str(",\"repairs\":");
        text.push_str(&cutctx_model::canonical::canonical_json_value(&list));
    }
    text.push_str(",\"report\":");
    text.push_str(&report.canonical_json());
    text.push_str("}\n");
    text
}

/// The key of a format's message list: `input` for OpenAI Responses, `messages` otherwise
/// ([`Descriptor::list_key`](crate::Descriptor::list_key)).
#[must_use]
pub const fn list_key(format: Format) -> &'static str {
    format.descriptor().list_key
}

/// A request's message list (the document itself when it is a bare array); empty when it has
/// none, as a Responses request whose `input` is one string: that string is then one of the
/// request's fixed parts ([`fixed_tokens`]).
#[must_use]
pub fn message_list(format: Format, request: &Value) -> &[Value] {
    match request {
        Value::Array(list) => list,
        doc => doc
            .get(list_key(format))
            .and_then(Value::as_array)
            .map_or(&[], Vec::as_slice),
    }
}

/// The estimate of one message of a request's list, as [`ProviderTranscript::prompt_count`]
/// counts it: the sum of the turns the message maps to (an Anthropic message holding tool
/// results is several turns).
///
/// A turn's estimate depends on its own message alone, so the message is mapped on its own,
/// without the checks a whole request gets: `fixed_tokens + Σ message_tokens + reserve` is
/// `prompt_count(reserve).total` for every valid request, and a caller that keeps the count of
/// a growing history adds the new messages' estimates instead of counting it all again.
///
/// # Errors
///
/// `FORMAT_ERROR` for a message without its format's shape (a Responses item of no known
/// kind).
///
/// ```
/// use cutctx_formats::{Format, ProviderTranscript, fixed_tokens, message_tokens};
/// use cutctx_policies::CharRatioEstimator;
/// let request = serde_json::json!({
///     "tools": [{"type": "function", "function": {"name": "t", "parameters": {}}}],
///     "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}]
/// });
/// let e = CharRatioEstimator::default();
/// let list = request["messages"].as_array().unwrap();
/// let mut sum = fixed_tokens(Format::OpenAiChat, &request, &e)?;
/// for m in list {
///     sum += message_tokens(Format::OpenAiChat, m, &e)?;
/// }
/// let pt = ProviderTranscript::parse_with(Format::OpenAiChat, &request, &e)?;
/// assert_eq!(sum + 100, pt.prompt_count(100).total);
/// # Ok::<(), cutctx_formats::FormatError>(())
/// ```
///
/// [`ProviderTranscript::prompt_count`]: crate::ProviderTranscript::prompt_count
pub fn message_tokens(
    format: Format,
    message: &Value,
    estimator: &dyn TokenEstimator,
) -> Result<u64, FormatError> {
    let mut doc = Map::new();
    doc.insert(
        list_key(format).to_owned(),
        Value::Array(vec![message.clone()]),
    );
    turn_tokens(format, &Value::Object(doc), estimator)
}

/// The estimate of everything in `request` but its message list, as
/// [`ProviderTranscript::prompt_count`] counts it: the tool definitions, the Anthropic
/// `system`, the Responses `instructions` (and a Responses `input` given as one string). The
/// list itself is not read, so this costs nothing in the length of the history.
///
/// # Errors
///
/// `FORMAT_ERROR` when `system` or `instructions` has not the format's shape.
///
/// [`ProviderTranscript::prompt_count`]: crate::ProviderTranscript::prompt_count
pub fn fixed_tokens(
    format: Format,
    request: &Value,
    estimator: &dyn TokenEstimator,
) -> Result<u64, FormatError> {
    let Value::Object(map) = request else {
        return Ok(0);
    };
    let key = list_key(format);
    let mut rest = Map::new();
    for (k, v) in map {
        if k == key && v.is_array() {
            rest.insert(k.clone(), Value::Array(Vec::new()));
        } else if k != key || format == Format::OpenAiResponses {
            rest.insert(k.clone(), v.clone());
        }
    }
    if !rest.contains_key(key) && format != Format::OpenAiResponses {
        rest.insert(key.to_owned(), Value::Array(Vec::new()));
    }
    let rest = Value::Object(rest);
    Ok(tools_tokens(format, &rest, estimator)
        .saturating_add(turn_tokens(format, &rest, estimator)?))
}

/// The estimate of a request's tool definitions: `estimator` over their canonical JSON text.
pub(crate) fn tools_tokens(
    format: Format,
    document: &Value,
    estimator: &dyn TokenEstimator,
) -> u64 {
    tool_definitions(format, document)
        .into_iter()
        .map(|t| estimator.estimate_tokens(&cutctx_model::canonical::canonical_json_value(t)))
        .fold(0_u64, u64::saturating_add)
}

/// The sum of the turn estimates `document` maps to, unchecked.
fn turn_tokens(
    format: Format,
    document: &Value,
    estimator: &dyn TokenEstimator,
) -> Result<u64, FormatError> {
    let built = per_format!(format, F => F::build(document, estimator))?;
    Ok(built
        .turns
        .iter()
        .map(cutctx_model::TranscriptTurn::token_estimate)
        .fold(0_u64, u64::saturating_add))
}
