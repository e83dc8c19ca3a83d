//! The issue's own case through the proxy's firing: an Anthropic `tool_use.input` of
//! `{"order_id": 12345678901234567890123, "price": 1e2}` with a `-0`, in a request over the
//! window, reaches the upstream byte for byte (not `1.2345678901234568e22`, `100.0` or `0`),
//! and so do the top-level fields the compaction does not touch. The property over every path
//! and format is `crates/cutctx-cli/tests/lossless`.

mod common;

use common::{Reply, Upstream, call, proxy};
use serde_json::{Value, json};

/// The issue's tool call, as the client wrote it (keys out of order, spaced).
const ISSUE_CALL: &str = r#"{"content": [{"type": "tool_use", "input": {"order_id": 12345678901234567890123, "price": 1e2, "discount": -0}, "id": "toolu_issue", "name": "lookup"}], "role": "assistant"}"#;

/// Top-level fields no compaction touches, holding what a rewrite would change.
const METADATA: &str = r#"{"user_id": "caf\u00e9 \/ \ud83d\ude00", "n": 12345678901234567890123}"#;
const CLIENT_METADATA: &str = r#"{"zeta": 1E+2, "alpha": -0, "mid": 0.10}"#;

/// An Anthropic request over a window of 800: six large tool results, then the issue's call
/// (in the recent turns, kept) with a small result, an answer and a question.
fn request() -> String {
    let mut messages = vec![r#"{"role": "user", "content": "Look up my orders."}"#.to_owned()];
    for i in 0..6 {
        messages.push(format!(
            r#"{{"role": "assistant", "content": [{{"type": "tool_use", "id": "toolu_{i}", "name": "lookup", "input": {{"page": {i}, "limit": 1E+2}}}}]}}"#
        ));
        messages.push(format!(
            r#"{{"role": "user", "content": [{{"type": "tool_result", "tool_use_id": "toolu_{i}", "content": "{}"}}]}}"#,
            format!("order {i}: shipped \\u00e9 \\/ ").repeat(40)
        ));
    }
    messages.push(ISSUE_CALL.to_owned());
    messages.push(
        r#"{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_issue", "content": "found"}]}"#
            .to_owned(),
    );
    messages.push(r#"{"role": "assistant", "content": "Order found."}"#.to_owned());
    messages.push(r#"{"role": "user", "content": "And its price?"}"#.to_owned());
    format!(
        r#"{{"model": "claude-sonnet-4-5", "max_tokens": 256, "metadata": {METADATA}, "messages": [{}], "client_metadata": {CLIENT_METADATA}}}"#,
        messages.join(", ")
    )
}

#[test]
fn a_firing_forwards_a_23_digit_order_id_1e2_and_minus_zero_byte_for_byte() {
    let up = Upstream::start(|_, _| Reply::json(200, &json!({})));
    let p = proxy(&up, |o| o.window = Some(800));
    let body = request();
    let r = call(
        p.addr(),
        "POST",
        "/v1/messages",
        &[("content-type", "application/json")],
        body.as_bytes(),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    let got = up.requests();
    assert_eq!(got.len(), 1);
    let sent = String::from_utf8(got[0].body.clone()).expect("UTF-8");
    assert_ne!(
        sent, body,
        "the request is over the window: the proxy fired"
    );
    assert!(
        sent.contains("masked by cutctx") || sent.len() < body.len() / 2,
        "compacted: {sent}"
    );
    let doc: Value = serde_json::from_str(&sent).expect("the upstream received JSON");
    cutctx::formats::validate(cutctx::formats::Format::Anthropic, &doc)
        .unwrap_or_else(|v| panic!("{v}"));
    assert!(
        sent.contains(ISSUE_CALL),
        "the issue's tool call reached the upstream with other bytes:\n  before: {ISSUE_CALL}\n  sent:   {sent}"
    );
    for (name, field) in [("metadata", METADATA), ("client_metadata", CLIENT_METADATA)] {
        assert!(
            sent.contains(field),
            "top-level {name} reached the upstream with other bytes:\n  before: {field}\n  sent:   {sent}"
        );
    }
    for rewritten in ["1.2345678901234568e22", "100.0", "\"discount\":0"] {
        assert!(!sent.contains(rewritten), "{rewritten} in {sent}");
    }
}
