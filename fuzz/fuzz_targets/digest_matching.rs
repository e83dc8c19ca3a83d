//! Fuzz target: the history digests the proxy hashes for a named session's body from where
//! its last body's grew (`cutctx_serve`'s `prior`), against the same digests hashed whole.
//!
//! The input is a selector byte, then a first body and a second text separated by a NUL byte.
//! The second body is that text, or the first body grown by it (inserted after its last
//! message), rewound, or resent as it was. Whatever the bodies, the digests hashed with the
//! first body remembered are exactly `history_digests` of the second's messages: a remembered
//! digest is reused only where the bytes are the same. A chain continued from any of its
//! digests (`history_digests_after`) is the whole chain's tail, and no text taken as the last
//! digest panics.
#![no_main]

use cutctx_ops::Format;
use cutctx_ops::provider::{history, history_digests, history_digests_after, message_spans};
use cutctx_serve::fuzzing::hash_history;
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

/// The second body, from the first and the second text, as `how` says.
fn second(format: Format, first: &[u8], text: &[u8], how: u8) -> Vec<u8> {
    let spans = std::str::from_utf8(first)
        .ok()
        .and_then(|t| message_spans(format, t))
        .unwrap_or_default();
    let Some(last) = spans.last().map(|s| s.end) else {
        return text.to_vec();
    };
    match how {
        // Grown: the text inserted as more messages after the last one.
        1 => [&first[..last], b",", text, &first[last..]].concat(),
        // Rewound: the messages after one of them left out.
        2 => {
            let keep = spans[text.len() % spans.len()].end;
            [&first[..keep], &first[last..]].concat()
        }
        // Resent as it was.
        3 => first.to_vec(),
        _ => text.to_vec(),
    }
}

/// The body's messages, when it parses (the proxy hashes only a parsed body).
fn parse(body: &[u8]) -> Option<Value> {
    serde_json::from_slice(body).ok()
}

fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    let format = Format::ALL[usize::from(selector) % Format::ALL.len()];
    let (first, text) = match rest.iter().position(|b| *b == 0) {
        Some(i) => (&rest[..i], &rest[i + 1..]),
        None => (rest, &[][..]),
    };
    let mut prior = None;
    if let Some(request) = parse(first) {
        let messages = history(format, &request);
        let (digests, kept) = hash_history(format, first, messages, None);
        assert_eq!(digests, history_digests(format, messages), "hashed whole");
        prior = kept;
    }
    let body = second(format, first, text, (selector / 3) % 4);
    if let Some(request) = parse(&body) {
        let messages = history(format, &request);
        let whole = history_digests(format, messages);
        let (digests, _) = hash_history(format, &body, messages, prior.as_ref());
        assert_eq!(digests, whole, "hashed from the remembered body");
        for i in [0, messages.len() / 2, messages.len()] {
            let after = history_digests_after(format, &whole[i], &messages[i..]);
            assert_eq!(
                after.as_deref(),
                Some(&whole[i + 1..]),
                "continued from entry {i}"
            );
        }
    }
    if let Ok(last) = std::str::from_utf8(text) {
        let grown = history_digests_after(format, last, &[]);
        assert!(grown.is_none_or(|g| g.is_empty()));
    }
});
