//! Fuzz target: a request's text → its format guessed from its shape (`guess_format`), and
//! where each message of its list lies (`message_spans`), in each format.
//!
//! No text may panic. The spans are in order, non-empty, within the text and on character
//! boundaries. For a text that parses as JSON (the walk checks only the structure it walks,
//! so its callers parse first), there is one span per message of the request's list
//! (`history`), and each span's text is that message.
#![no_main]

use cutctx_ops::Format;
use cutctx_ops::provider::{guess_format, history, message_spans};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let parsed: Option<Value> = serde_json::from_str(text).ok();
    if let Some(request) = &parsed {
        let guessed = guess_format(request);
        if request.get("input").is_some() {
            assert_eq!(guessed, Format::OpenAiResponses, "`input` is Responses");
        }
    }
    for format in Format::ALL {
        let Some(spans) = message_spans(format, text) else {
            continue;
        };
        let mut at = 0;
        for span in &spans {
            assert!(
                at <= span.start && span.start < span.end && span.end <= text.len(),
                "spans in order within the text: {spans:?}"
            );
            assert!(
                text.get(span.clone()).is_some(),
                "a span on char boundaries"
            );
            at = span.end;
        }
        let Some(request) = &parsed else {
            continue;
        };
        let list = history(format, request);
        assert_eq!(list.len(), spans.len(), "one span per message");
        for (span, message) in spans.iter().zip(list) {
            let read: Value =
                serde_json::from_str(&text[span.clone()]).expect("a message of a parsed text");
            assert_eq!(&read, message, "the span is the message");
        }
    }
});
