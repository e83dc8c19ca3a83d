//! Fuzz target: a session state document's text → `Session::restore`, in each format, with
//! the session options the proxy builds.
//!
//! A state file is read back from disk or from the proxy's store. No text may panic, and a
//! state that restores writes a document (`state_json`) that restores again to the same
//! document. The text is also read as a state's body with its check made to match, so that
//! the fields behind the check are parsed too. A state restored from the text as given (as a
//! session wrote it) steps a fixed request of its format without panicking.
#![no_main]

use std::fmt::Write as _;
use std::sync::LazyLock;

use cutctx_ops::Format;
use cutctx_ops::session::{Call, Session, SessionOptions};
use libfuzzer_sys::fuzz_target;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// The window the sessions are built with: small, so that the fixed requests fire.
const WINDOW: u64 = 230;

/// The session options the proxy builds for each format (`Format::ALL`'s order).
static OPTIONS: LazyLock<Vec<SessionOptions>> = LazyLock::new(|| {
    Format::ALL
        .into_iter()
        .map(|format| {
            cutctx_serve::fuzzing::session_options(format, WINDOW)
                .expect("the proxy's default settings")
        })
        .collect()
});

/// The request each format's session is stepped on (the seed states were written by stepping
/// sessions over these).
fn request(format: Format) -> Value {
    let result = "line of a long tool result ".repeat(30);
    let last = "Again? Read it once more, please, and tell me what it says now.";
    match format {
        Format::OpenAiChat => json!({"model": "gpt-4o", "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Read the file."},
            {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "read", "arguments": "{\"path\":\"a\"}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": result},
            {"role": "assistant", "content": "It says hello."},
            {"role": "user", "content": "Thanks."},
            {"role": "assistant", "content": "You are welcome."},
            {"role": "user", "content": last}
        ]}),
        Format::OpenAiResponses => json!({"model": "gpt-4.1", "input": [
            {"role": "user", "content": "Read the file."},
            {"type": "function_call", "call_id": "c1", "name": "read", "arguments": "{\"path\":\"a\"}"},
            {"type": "function_call_output", "call_id": "c1", "output": result},
            {"role": "assistant", "content": "It says hello."},
            {"role": "user", "content": "Thanks."},
            {"role": "assistant", "content": "You are welcome."},
            {"role": "user", "content": last}
        ]}),
        Format::Anthropic => {
            json!({"model": "claude-sonnet-4-5", "max_tokens": 64, "system": "Be brief.", "messages": [
                {"role": "user", "content": "Read the file."},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "read", "input": {"path": "a"}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": result}]},
                {"role": "assistant", "content": "It says hello."},
                {"role": "user", "content": "Thanks."},
                {"role": "assistant", "content": "You are welcome."},
                {"role": "user", "content": last}
            ]})
        }
    }
}

/// Restores `text`; when it restores, checks the round trip, and steps the session when
/// `step`.
fn restore(options: &SessionOptions, text: &str, step: bool) {
    let Ok(mut session) = Session::restore(options, text) else {
        return;
    };
    let written = session
        .state_json()
        .expect("a restored session has a state");
    let again = Session::restore(options, &written).expect("a state the session wrote restores");
    assert_eq!(
        again.state_json().as_deref(),
        Some(written.as_str()),
        "a state restores to the state it was"
    );
    if step {
        let _ = session.step(request(options.format), Call::default());
    }
}

/// A state document holding `body`, with its check made to match.
fn document(body: &Value) -> String {
    let mut check = String::with_capacity(64);
    for b in Sha256::digest(body.to_string().as_bytes()) {
        let _ = write!(check, "{b:02x}");
    }
    json!({"cutctx_session": 1, "state": body, "check": check}).to_string()
}

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    // The body of the state: the document's `state`, or the whole text as a body.
    let body = serde_json::from_str::<Value>(&text)
        .ok()
        .map(|mut v| match v.get_mut("state") {
            Some(state) => state.take(),
            None => v,
        });
    for options in OPTIONS.iter() {
        restore(options, &text, true);
        if let Some(body) = &body {
            // Its check recomputed, so that every field is parsed. Such a state may hold what no
            // session wrote (a count that is not its prefix's), which a step trusts: it is
            // restored, not stepped.
            restore(options, &document(body), false);
        }
    }
});
