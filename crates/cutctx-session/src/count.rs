//! The one count of a request's whole prompt: everything but the message list (tool
//! definitions, system, instructions, settings) plus every message, each estimated over its
//! JSON text, so a session's trigger, a compaction's goal and the replay's bill agree.

use cutctx_formats::Format;
use cutctx_policies::TokenEstimator;
use serde_json::Value;

/// The key of a format's message list: `input` for OpenAI Responses, `messages` otherwise.
#[must_use]
pub const fn list_key(format: Format) -> &'static str {
    match format {
        Format::OpenAiResponses => "input",
        Format::OpenAiChat | Format::Anthropic => "messages",
    }
}

/// The request's message list (the document itself when it is a bare array); empty when it
/// has none, as a Responses request whose `input` is one string: such a request has nothing a
/// session could compact, and its string is counted with the rest of the request.
#[must_use]
pub fn history(format: Format, request: &Value) -> &[Value] {
    match request {
        Value::Array(list) => list,
        doc => doc
            .get(list_key(format))
            .and_then(Value::as_array)
            .map_or(&[], Vec::as_slice),
    }
}

/// The estimate of one message: its compact JSON text, structure included, because a
/// provider bills the role, the call ids and the arguments as well as the words.
#[must_use]
pub fn message_tokens(message: &Value, estimator: &dyn TokenEstimator) -> u64 {
    estimator.estimate_tokens(&message.to_string())
}

/// The estimate of everything in the request but its message list: tool definitions, the
/// system prompt or instructions, the model's settings.
#[must_use]
pub fn fixed_tokens(format: Format, request: &Value, estimator: &dyn TokenEstimator) -> u64 {
    match request {
        Value::Object(map) => {
            let key = list_key(format);
            let has_list = map.get(key).is_some_and(Value::is_array);
            if !has_list {
                return estimator.estimate_tokens(&request.to_string());
            }
            let mut rest = map.clone();
            rest.remove(key);
            estimator.estimate_tokens(&Value::Object(rest).to_string())
        }
        _ => 0,
    }
}

/// The whole prompt of `request`: [`fixed_tokens`] plus [`message_tokens`] of every message.
///
/// ```
/// use cutctx_formats::Format;
/// use cutctx_policies::CharRatioEstimator;
/// use cutctx_session::prompt_tokens;
/// let request = serde_json::json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]});
/// // {"model":"m"} is 13 characters, the message 30: 4 + 8 tokens at 4 characters a token.
/// assert_eq!(prompt_tokens(Format::OpenAiChat, &request, &CharRatioEstimator::default()), 12);
/// ```
#[must_use]
pub fn prompt_tokens(format: Format, request: &Value, estimator: &dyn TokenEstimator) -> u64 {
    fixed_tokens(format, request, estimator)
        + history(format, request)
            .iter()
            .map(|m| message_tokens(m, estimator))
            .sum::<u64>()
}
