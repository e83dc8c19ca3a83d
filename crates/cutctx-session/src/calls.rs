//! Where the calls of a recorded agent loop were made: the message counts at which the model
//! was called, read from the format's own rule of which items are the model's. A session's
//! early firing counts the calls so far with it, and the replay calls at each of them.

use cutctx_formats::Format;
use serde_json::Value;

/// The lengths of the message lists sent at each call of `messages`: the index of every model
/// turn that follows a turn of another kind
/// ([`Descriptor::is_model_item`](cutctx_formats::Descriptor::is_model_item)).
///
/// ```
/// use cutctx_formats::Format;
/// use cutctx_session::call_points;
/// use serde_json::json;
/// let chat = [
///     json!({"role": "user", "content": "Go."}),
///     json!({"role": "assistant", "content": "On it."}),
///     json!({"role": "tool", "tool_call_id": "c1", "content": "ok"}),
///     json!({"role": "assistant", "content": "Done."}),
/// ];
/// assert_eq!(call_points(Format::OpenAiChat, &chat), [1, 3]);
/// ```
#[must_use]
pub fn call_points(format: Format, messages: &[Value]) -> Vec<usize> {
    let descriptor = format.descriptor();
    let mut points = Vec::new();
    let mut previous = false;
    for (i, m) in messages.iter().enumerate() {
        let model = descriptor.is_model_item(m);
        if model && !previous {
            points.push(i);
        }
        previous = model;
    }
    points
}
