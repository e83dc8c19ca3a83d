//! Error codes, and details that never carry content.

use cutctx_formats::{EstimatorSpec, Format, FormatError, ProviderTranscript};
use serde_json::{Value, json};

const SECRET: &str = "SECRET-CONTENT-xyz";

fn refused(format: Format, doc: &Value) -> FormatError {
    ProviderTranscript::parse(format, doc).expect_err("refused")
}

#[test]
fn shape_errors_are_format_errors_and_rule_breaks_invalid_requests() {
    let e = refused(Format::OpenAiChat, &json!([{"role": "user", "content": 5}]));
    assert_eq!(e.code(), "FORMAT_ERROR");
    assert_eq!(e.details()["path"], "messages[0].content");
    let e = refused(
        Format::Anthropic,
        &json!({"messages": [{"role": "assistant", "content": SECRET}]}),
    );
    assert_eq!(e.code(), "FORMAT_INVALID_REQUEST");
    assert_eq!(e.details()["rule"], "first_message_not_user");
    assert!(e.violation().is_some());
}

#[test]
fn no_error_names_content() {
    let docs = [
        (
            Format::OpenAiChat,
            json!([{"role": "user", "content": SECRET}, {"role": "tool", "tool_call_id": "c", "content": SECRET}]),
        ),
        (Format::OpenAiChat, json!([{"role": 5, "content": SECRET}])),
        (
            Format::OpenAiResponses,
            json!([{"role": "user", "content": SECRET}, {"type": "reasoning", "summary": [{"type": "summary_text", "text": SECRET}]}]),
        ),
        (
            Format::Anthropic,
            json!({"system": SECRET, "messages": [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": SECRET}]}]}),
        ),
        (Format::Anthropic, json!(SECRET)),
    ];
    for (format, doc) in docs {
        let e = refused(format, &doc);
        assert!(!e.message().contains(SECRET), "{}", e.message());
        let details = serde_json::to_string(&e.details()).expect("details serialize");
        assert!(!details.contains(SECRET), "{details}");
    }
}

#[test]
fn estimator_specs_and_their_errors() {
    let e = "chars:0".parse::<EstimatorSpec>().expect_err("zero ratio");
    assert_eq!(e.code(), "VALIDATION_ERROR");
    let e = "words".parse::<EstimatorSpec>().expect_err("unknown");
    assert_eq!(e.details()["estimator"], "words");
    let spec: EstimatorSpec = "chars:2".parse().expect("valid");
    assert_eq!(
        cutctx_policies::TokenEstimator::estimate_tokens(
            spec.estimator().expect("builds").as_ref(),
            "abcd"
        ),
        2
    );
    assert!(EstimatorSpec::default().is_default());
    let bpe: EstimatorSpec = "cl100k_base".parse().expect("valid");
    if cfg!(feature = "bpe") {
        assert!(bpe.estimator().is_ok());
    } else {
        assert_eq!(
            bpe.estimator().err().map(|e| e.code()),
            Some("FORMAT_UNSUPPORTED")
        );
    }
    assert_eq!(
        "anthropic".parse::<Format>().expect("known"),
        Format::Anthropic
    );
    assert!("gemini".parse::<Format>().is_err());
}

#[test]
fn arbitrary_json_never_panics() {
    let shapes = [
        json!(null),
        json!(1),
        json!("text"),
        json!({}),
        json!({"messages": {}}),
        json!({"input": [null, 1, [], {"type": 3}]}),
        json!([[], {}, {"role": null}, {"role": "assistant", "tool_calls": [1, {"id": 2}]}]),
        json!([{"role": "user", "content": [1, null, {"type": "image"}, {"type": "tool_result"}]}]),
    ];
    for format in Format::ALL {
        for doc in &shapes {
            let _ = ProviderTranscript::parse(format, doc);
            let _ = cutctx_formats::validate(format, doc);
        }
    }
}
