//! Long broken histories for the repair benchmarks: each repeats a short block where about
//! every other message breaks a rule the format's repair fixes (Chat, an unanswered call next
//! to an answered one and an orphan `tool` message; Responses, a null status, an answered
//! call, an unanswered call and an orphan output; Anthropic, an unanswered `tool_use` and a
//! stray `tool_result`).

use cutctx_formats::Format;
use serde_json::{Value, json};

/// A history of `n` messages.
pub(crate) type History = fn(usize) -> Value;

/// The three formats, each with its history.
pub(crate) fn histories() -> [(Format, History); 3] {
    [
        (Format::OpenAiChat, chat),
        (Format::OpenAiResponses, responses),
        (Format::Anthropic, anthropic),
    ]
}

/// `n` Chat messages in blocks of four, two of each block broken.
pub(crate) fn chat(n: usize) -> Value {
    let mut messages = Vec::with_capacity(n);
    for k in 0..n.div_ceil(4) {
        let (c, u, x) = (format!("c{k}"), format!("u{k}"), format!("x{k}"));
        messages.extend([
            json!({"role": "user", "content": "look it up"}),
            json!({"role": "assistant", "content": null, "tool_calls": [
                {"id": c, "type": "function", "function": {"name": "lookup", "arguments": "{}"}},
                {"id": u, "type": "function", "function": {"name": "lookup", "arguments": "{}"}}]}),
            json!({"role": "tool", "tool_call_id": c, "content": "found"}),
            json!({"role": "tool", "tool_call_id": x, "content": "stray"}),
        ]);
    }
    messages.truncate(n);
    json!({"model": "m", "messages": messages})
}

/// `n` Responses items in blocks of six, three of each block broken.
pub(crate) fn responses(n: usize) -> Value {
    let mut input = Vec::with_capacity(n);
    for k in 0..n.div_ceil(6) {
        let (c, u, x) = (format!("c{k}"), format!("u{k}"), format!("x{k}"));
        input.extend([
            json!({"type": "message", "role": "user", "content": "look it up", "status": null}),
            json!({"type": "reasoning", "summary": []}),
            json!({"type": "function_call", "call_id": c, "name": "lookup", "arguments": "{}"}),
            json!({"type": "function_call_output", "call_id": c, "output": "found"}),
            json!({"type": "function_call", "call_id": u, "name": "lookup", "arguments": "{}"}),
            json!({"type": "function_call_output", "call_id": x, "output": "stray"}),
        ]);
    }
    input.truncate(n);
    json!({"model": "m", "input": input})
}

/// `n` Anthropic messages in blocks of four, two of each block broken.
pub(crate) fn anthropic(n: usize) -> Value {
    let mut messages = Vec::with_capacity(n);
    for k in 0..n.div_ceil(4) {
        let (c, u, x) = (format!("c{k}"), format!("u{k}"), format!("x{k}"));
        messages.extend([
            json!({"role": "user", "content": "look it up"}),
            json!({"role": "assistant", "content": [
                {"type": "tool_use", "id": c, "name": "lookup", "input": {}},
                {"type": "tool_use", "id": u, "name": "lookup", "input": {}}]}),
            json!({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": c, "content": "found"},
                {"type": "tool_result", "tool_use_id": x, "content": "stray"}]}),
            json!({"role": "assistant", "content": "done"}),
        ]);
    }
    messages.truncate(n);
    json!({"model": "m", "messages": messages})
}
