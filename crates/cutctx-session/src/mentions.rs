//! What a conversation's messages mention: the identifiers of a text, where each first
//! appeared, and which tool results the latest model messages refer to. The one rule for
//! both the session (a firing keeps the results the model is still working from) and the
//! replay's measure of what the model still needs.
//!
//! **Identifiers.** A text's identifiers are its maximal runs of ASCII letters, digits and
//! `_ . / -`, with leading and trailing `.`, `/` and `-` trimmed, that are either all digits
//! and at least 2 long, or at least 3 long and hold a digit, `_`, `.` or `/` (a path, a file
//! name, a snake-case name, a version, a number with letters). Plain words are left out: they
//! say little about what was kept. Every string of a message counts (content, tool-call
//! arguments, tool names); object keys do not.
//!
//! **Referred to.** A tool result is referred to by a model message when that message uses an
//! identifier whose first appearance in the request (its fixed part first, then its messages
//! in order) is in that result: the model read it there and is using it. What a model message
//! uses only because a user or the system said it first refers to no result.

use std::collections::{BTreeMap, BTreeSet};

use cutctx_formats::{Format, message_list as history};
use serde_json::Value;

/// The identifiers of `text`, in order (see the module's definition).
///
/// ```
/// use cutctx_session::mentions::identifiers;
/// let found = identifiers("Open src/main.rs at line 42, then call parse_args (v1.2).");
/// assert_eq!(found, ["src/main.rs", "42", "parse_args", "v1.2"]);
/// ```
#[must_use]
pub fn identifiers(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    each_identifier(text, &mut |t| out.push(t));
    out
}

/// Calls `f` on each identifier of `text`, in order.
pub fn each_identifier<'a>(text: &'a str, f: &mut dyn FnMut(&'a str)) {
    let bytes = text.as_bytes();
    let part = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'/' | b'-');
    let mut i = 0;
    while i < bytes.len() {
        if !part(bytes[i]) {
            i += 1;
            continue;
        }
        let start = i;
        while i < bytes.len() && part(bytes[i]) {
            i += 1;
        }
        // The run is ASCII, so its ends are character boundaries.
        let run = text
            .get(start..i)
            .unwrap_or("")
            .trim_matches(|c| matches!(c, '.' | '/' | '-'));
        if qualifies(run) {
            f(run);
        }
    }
}

fn qualifies(token: &str) -> bool {
    let b = token.as_bytes();
    if b.len() >= 2 && b.iter().all(u8::is_ascii_digit) {
        return true;
    }
    b.len() >= 3
        && b.iter()
            .any(|c| c.is_ascii_digit() || matches!(c, b'_' | b'.' | b'/'))
}

/// Calls `f` on every string of `value` (not object keys).
pub fn each_string<'a>(value: &'a Value, f: &mut dyn FnMut(&'a str)) {
    match value {
        Value::String(s) => f(s),
        Value::Array(list) => list.iter().for_each(|v| each_string(v, f)),
        Value::Object(map) => map.values().for_each(|v| each_string(v, f)),
        _ => {}
    }
}

/// Where an identifier first appeared in a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    /// The index of the message in the history; `None` for the fixed part (tools, system).
    pub message: Option<usize>,
    /// The id of the call whose result it first appeared in, when that is where.
    pub call: Option<String>,
}

/// Where each identifier of `request` first appears (see the module's definition).
///
/// ```
/// use cutctx_formats::Format;
/// use cutctx_session::mentions::first_seen;
/// use serde_json::json;
/// let request = json!({"model": "m", "messages": [
///     {"role": "user", "content": "fix the bug"},
///     {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
///         "function": {"name": "ls", "arguments": "{}"}}]},
///     {"role": "tool", "tool_call_id": "c1", "content": "src/lib.rs"},
/// ]});
/// let seen = first_seen(Format::OpenAiChat, &request);
/// assert_eq!(seen["src/lib.rs"].call.as_deref(), Some("c1"));
/// assert_eq!(seen["src/lib.rs"].message, Some(2));
/// ```
#[must_use]
pub fn first_seen(format: Format, request: &Value) -> BTreeMap<String, Origin> {
    let descriptor = format.descriptor();
    let mut seen: BTreeMap<String, Origin> = BTreeMap::new();
    if let Value::Object(map) = request {
        for (k, v) in map {
            if k != cutctx_formats::list_key(format) {
                note(&mut seen, v, None, None);
            }
        }
    }
    for (i, m) in history(format, request).iter().enumerate() {
        for (block, result) in descriptor.tool_results(m) {
            let call = descriptor.answered_call(m, block);
            note(&mut seen, result, Some(i), call);
        }
        note(&mut seen, m, Some(i), None);
    }
    seen
}

/// Records the identifiers of `value` not yet seen as first seen at `message` (`call`'s
/// result, if given).
fn note(
    seen: &mut BTreeMap<String, Origin>,
    value: &Value,
    message: Option<usize>,
    call: Option<&str>,
) {
    each_string(value, &mut |s| {
        each_identifier(s, &mut |t| {
            if !seen.contains_key(t) {
                let origin = Origin {
                    message,
                    call: call.map(str::to_owned),
                };
                seen.insert(t.to_owned(), origin);
            }
        });
    });
}

/// The ids of the calls whose results the last `recent` model messages of `request` refer to
/// (see the module's definition), each once, the most recently referred to first.
///
/// ```
/// use cutctx_formats::Format;
/// use cutctx_session::mentions::referred_results;
/// use serde_json::json;
/// let call = |id: &str, args: &str| json!({"role": "assistant", "content": null, "tool_calls": [
///     {"id": id, "type": "function", "function": {"name": "run", "arguments": args}}]});
/// let request = json!({"model": "m", "messages": [
///     {"role": "user", "content": "fix the bug"},
///     call("c1", "{\"cmd\": \"ls\"}"),
///     {"role": "tool", "tool_call_id": "c1", "content": "src/lib.rs src/io.rs"},
///     call("c2", "{\"cmd\": \"cat src/io.rs\"}"),
///     {"role": "tool", "tool_call_id": "c2", "content": "fn read_all() {}"},
/// ]});
/// // The last model message opens src/io.rs, which it read in c1's result.
/// assert_eq!(referred_results(Format::OpenAiChat, &request, 1), ["c1"]);
/// ```
#[must_use]
pub fn referred_results(format: Format, request: &Value, recent: usize) -> Vec<String> {
    let messages = history(format, request);
    let referrers: Vec<usize> = (0..messages.len())
        .rev()
        .filter(|&i| cutctx_formats::is_model_item(format, &messages[i]))
        .take(recent)
        .collect();
    if referrers.is_empty() {
        return Vec::new();
    }
    let seen = first_seen(format, request);
    let mut out = Vec::new();
    let mut have = BTreeSet::new();
    for &i in &referrers {
        each_string(&messages[i], &mut |s| {
            each_identifier(s, &mut |t| {
                if let Some(Origin {
                    message: Some(at),
                    call: Some(call),
                }) = seen.get(t)
                    && *at < i
                    && have.insert(call.as_str())
                {
                    out.push(call.clone());
                }
            });
        });
    }
    out
}
