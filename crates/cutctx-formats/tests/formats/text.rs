//! The text path: a request read from its text and written back by copying its bytes agrees
//! with the value path, keeps the input's key order and formatting where nothing changed, and
//! leaves what it does not take to the value path.

use std::collections::BTreeMap;

use cutctx_formats::{Format, ProviderTranscript};
use cutctx_model::CompactionBudget;
use cutctx_policies::{
    CharRatioEstimator, CompactionPolicy, DropOldestPolicy, ObservationMaskingPolicy,
};

use crate::{compare_text, corpus, policies};

/// Every corpus request, as its file's indentation and compact, under every policy and a range
/// of budgets: the same transcript, report and document as the value path.
#[test]
fn the_text_path_renders_what_the_value_path_renders() {
    let mut compared = 0;
    for case in corpus() {
        let compact = case.document.to_string();
        let pretty = serde_json::to_string_pretty(&case.document).expect("writes");
        let total = ProviderTranscript::parse(case.format, &case.document)
            .expect("corpus parses")
            .transcript()
            .token_estimate();
        for text in [&compact, &pretty] {
            for (name, policy) in policies() {
                for budget in [0, total / 4, total / 2, total] {
                    for protected in [0, 1, 4] {
                        let budget =
                            CompactionBudget::new(budget).with_protected_recent_turns(protected);
                        compare_text(case.format, text, policy.as_ref(), &budget)
                            .unwrap_or_else(|e| panic!("{} / {name}: {e}", case.name));
                        compared += 1;
                    }
                }
            }
        }
    }
    assert!(compared > 500, "only {compared} comparisons");
}

fn apply(format: Format, text: &str, policy: &dyn CompactionPolicy, budget: u64) -> String {
    let pt = ProviderTranscript::from_text_with(format, text, &CharRatioEstimator::default())
        .expect("the text path takes it");
    let budget = CompactionBudget::new(budget).with_protected_recent_turns(1);
    let plan = policy.decide(pt.transcript(), &budget).expect("plans");
    pt.apply_text(&plan, &BTreeMap::new(), text)
        .expect("applies")
        .text
}

const CHAT: &str = r#"{
  "model": "gpt-4.1",
  "messages": [
    {"role": "user",   "content": "Read the log, please."},
    {"role": "assistant", "content": null, "tool_calls": [{"type": "function", "id": "c1", "function": {"name": "read", "arguments": "{}"}}]},
    {"tool_call_id": "c1", "role": "tool", "content": "a very long log line, again and again and again and again and again"},
    {"role": "assistant", "content": "The log says it failed."},
    {"role": "user", "content": "Why?"}
  ],
  "temperature": 0
}"#;

#[test]
fn kept_messages_keep_their_bytes_and_the_request_its_key_order() {
    let out = apply(Format::OpenAiChat, CHAT, &DropOldestPolicy, 20);
    assert!(
        out.starts_with("{\n  \"model\": \"gpt-4.1\",\n  \"messages\": ["),
        "{out}"
    );
    assert!(out.ends_with("],\n  \"temperature\": 0\n}"), "{out}");
    assert!(!out.contains("Read the log"), "{out}");
    assert!(out.contains(r#"{"role": "assistant", "content": "The log says it failed."}"#));
    assert!(out.contains(r#"{"role": "user", "content": "Why?"}"#));
    serde_json::from_str::<serde_json::Value>(&out).expect("valid JSON");
}

#[test]
fn a_masked_result_keeps_its_bytes_around_the_stub() {
    let long = "again and ".repeat(200);
    let text = CHAT.replace("again and again and again and again and again", &long);
    let masking = ObservationMaskingPolicy::new(0).expect("valid");
    let out = apply(Format::OpenAiChat, &text, &masking, 100);
    let start = out
        .find(r#"{"tool_call_id": "c1", "role": "tool", "content": "#)
        .expect("kept in place");
    let rest = &out[start..];
    assert!(
        !rest.starts_with(r#"{"tool_call_id": "c1", "role": "tool", "content": "a very long"#),
        "{out}"
    );
    assert!(rest.contains(r#""}"#));
    serde_json::from_str::<serde_json::Value>(&out).expect("valid JSON");
}

#[test]
fn a_request_that_fits_comes_back_byte_for_byte() {
    for format in Format::ALL {
        let cases = corpus().into_iter().filter(|c| c.format == format);
        // A Responses `input` string is the value path's alone.
        for case in cases.filter(|c| !cutctx_formats::message_list(format, &c.document).is_empty())
        {
            let text = serde_json::to_string_pretty(&case.document).expect("writes");
            let out = apply(format, &text, &DropOldestPolicy, u64::MAX / 4);
            assert_eq!(out, text, "{}", case.name);
        }
    }
}

#[test]
fn what_the_text_path_does_not_take_goes_to_the_value_path() {
    let estimator = CharRatioEstimator::default();
    let read = |format, text: &str| ProviderTranscript::from_text_with(format, text, &estimator);
    // Not JSON, torn, or trailing text.
    assert!(read(Format::OpenAiChat, "{\"messages\": [").is_none());
    assert!(
        read(
            Format::OpenAiChat,
            "[{\"role\":\"user\",\"content\":\"hi\"}] x"
        )
        .is_none()
    );
    // A rule broken: the value path names it.
    assert!(
        read(
            Format::OpenAiChat,
            r#"[{"role":"tool","tool_call_id":"c","content":"x"}]"#
        )
        .is_none()
    );
    assert!(read(Format::OpenAiChat, "[]").is_none());
    // A Responses input string, and a repeated top-level key.
    assert!(read(Format::OpenAiResponses, r#"{"input": "hello"}"#).is_none());
    assert!(
        read(
            Format::OpenAiChat,
            r#"{"messages": [{"role":"user","content":"a"}], "messages": [{"role":"user","content":"b"}]}"#
        )
        .is_none()
    );
    // Nesting counts from the document's top, as when the request is read as a value.
    let nested = |depth: usize| {
        format!(
            r#"{{"messages": [{{"role": "user", "content": "hi", "x": {}{}}}]}}"#,
            "[".repeat(depth),
            "]".repeat(depth)
        )
    };
    assert!(read(Format::OpenAiChat, &nested(124)).is_some());
    assert!(serde_json::from_str::<serde_json::Value>(&nested(125)).is_err());
    assert!(read(Format::OpenAiChat, &nested(125)).is_none());
    // A bare list and a request are taken.
    assert!(read(Format::OpenAiChat, r#" [{"role":"user","content":"hi"}] "#).is_some());
    assert!(
        read(
            Format::Anthropic,
            r#"{"system": "s", "messages": [{"role":"user","content":"hi"}]}"#
        )
        .is_some()
    );
}

#[test]
fn a_transcript_read_from_text_renders_only_against_its_text() {
    let pt = ProviderTranscript::from_text_with(
        Format::OpenAiChat,
        CHAT,
        &CharRatioEstimator::default(),
    )
    .expect("takes it");
    assert!(pt.is_from_text());
    let view = pt.transcript().clone();
    assert_eq!(
        pt.render(&view).expect_err("needs the text").code(),
        "FORMAT_VIEW_MISMATCH"
    );
    assert_eq!(
        pt.render_text(&view, "[]")
            .expect_err("another text")
            .code(),
        "FORMAT_VIEW_MISMATCH"
    );
    // A text of the same length is not the text: one byte changed, inside a message or in
    // the request's own fields, is refused too, by render_text and by the parts it makes.
    for (from, to) in [("Read the log", "Read the LOG"), ("gpt-4.1", "gpt-4.2")] {
        let edited = CHAT.replacen(from, to, 1);
        assert_eq!(edited.len(), CHAT.len());
        assert_eq!(
            pt.render_text(&view, &edited)
                .expect_err("an edited copy")
                .code(),
            "FORMAT_VIEW_MISMATCH",
            "{to}"
        );
        let (parts, _) = pt.render_parts(&view, CHAT).expect("renders");
        assert_eq!(parts.to_text(&edited), None, "{to}");
        assert_eq!(parts.to_text(CHAT).as_deref(), Some(CHAT));
    }
    assert_eq!(pt.render_text(&view, CHAT).expect("renders"), CHAT);
}

#[test]
fn a_view_without_the_system_turn_is_written_from_values() {
    let text = r#"{"system": "Be brief.", "max_tokens": 64,
        "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}"#;
    let estimator = CharRatioEstimator::default();
    let by_text =
        ProviderTranscript::from_text_with(Format::Anthropic, text, &estimator).expect("takes it");
    let document: serde_json::Value = serde_json::from_str(text).expect("JSON");
    let by_value = ProviderTranscript::parse(Format::Anthropic, &document).expect("valid");
    let turns = by_value.transcript().turns()[1..].to_vec();
    let view = cutctx_model::Transcript::new(turns).expect("unique ids");
    let written = by_text.render_text(&view, text).expect("renders");
    let parsed: serde_json::Value = serde_json::from_str(&written).expect("JSON");
    assert_eq!(parsed, by_value.render(&view).expect("renders"));
    assert!(parsed.get("system").is_none());
}

/// The parts of a rendering, written, are the rendered text, for every corpus request under
/// every policy: what the command line streams is what `render_text` returns.
#[test]
fn the_parts_written_are_the_rendered_text() {
    let mut compared = 0;
    for case in corpus() {
        let text = serde_json::to_string_pretty(&case.document).expect("writes");
        let estimator = CharRatioEstimator::default();
        let Some(pt) = ProviderTranscript::from_text_with(case.format, &text, &estimator) else {
            // A shape the text path leaves to the value path (a Responses `input` string).
            continue;
        };
        let total = pt.transcript().token_estimate();
        for (name, policy) in policies() {
            for budget in [0, total / 2, total] {
                let budget = CompactionBudget::new(budget).with_protected_recent_turns(1);
                let Ok(plan) = policy.decide(pt.transcript(), &budget) else {
                    continue;
                };
                let Ok(parts) = pt.apply_parts(&plan, &BTreeMap::new(), &text) else {
                    continue;
                };
                let whole = pt
                    .apply_text(&plan, &BTreeMap::new(), &text)
                    .expect("renders as the parts did");
                let mut written = Vec::new();
                parts.parts.write_to(&text, &mut written).expect("writes");
                assert_eq!(written, whole.text.as_bytes(), "{} / {name}", case.name);
                assert_eq!(parts.parts.len(), whole.text.len());
                assert_eq!(parts.parts.last_byte(&text), whole.text.bytes().last());
                assert!(parts.parts.to_text("").is_none(), "another text is refused");
                compared += 1;
            }
        }
    }
    assert!(compared > 50, "only {compared} comparisons");
}

/// Freeing the contents of the turns a plan does not keep, as the command line does before it
/// applies the plan and renders from text, changes neither the output's bytes nor the report:
/// applying reads only the kept turns' contents and rendering from text reads none.
#[test]
fn freeing_what_a_plan_does_not_keep_changes_nothing_rendered() {
    let estimator = CharRatioEstimator::default();
    let mut released = 0;
    for case in corpus() {
        let text = case.document.to_string();
        let Some(pt) = ProviderTranscript::from_text_with(case.format, &text, &estimator) else {
            continue;
        };
        let total = pt.transcript().token_estimate();
        for (name, policy) in policies() {
            for budget in [total / 2, total / 4] {
                let budget = CompactionBudget::new(budget).with_protected_recent_turns(1);
                let Ok(plan) = policy.decide(pt.transcript(), &budget) else {
                    continue;
                };
                let summaries = crate::summaries_for(&plan);
                let whole = pt.apply_text(&plan, &summaries, &text);
                let mut freed = pt.clone();
                freed.release_unkept_contents(&plan);
                let emptied = freed
                    .transcript()
                    .turns()
                    .iter()
                    .filter(|t| t.content().is_empty())
                    .count();
                let after = freed.apply_text(&plan, &summaries, &text);
                match (whole, after) {
                    (Ok(a), Ok(b)) => {
                        assert_eq!(a.text, b.text, "{} / {name}", case.name);
                        assert_eq!(a.report, b.report, "{} / {name}", case.name);
                        assert_eq!(a.view, b.view, "{} / {name}", case.name);
                    }
                    (a, b) => assert_eq!(
                        a.map(|o| o.text).map_err(|e| e.to_string()),
                        b.map(|o| o.text).map_err(|e| e.to_string()),
                        "{} / {name}",
                        case.name
                    ),
                }
                released += usize::from(
                    emptied > 0
                        && plan
                            .actions
                            .iter()
                            .any(|a| !matches!(a.view(), cutctx_model::ActionView::Keep)),
                );
            }
        }
    }
    assert!(released > 20, "only {released} plans freed any content");
}

#[test]
fn results_are_pinned_by_call_id_in_every_format_and_never_silently_from_text() {
    use std::collections::BTreeSet;
    let requests = [
        (
            Format::OpenAiChat,
            r#"{"messages":[{"role":"user","content":"go"},{"role":"assistant","content":null,"tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":"{}"}},{"id":"b","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"a","content":"x"},{"role":"tool","tool_call_id":"b","content":"y"}]}"#,
        ),
        (
            Format::OpenAiResponses,
            r#"{"input":[{"role":"user","content":"go"},{"type":"function_call","call_id":"a","name":"f","arguments":"{}"},{"type":"function_call","call_id":"b","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"a","output":"x"},{"type":"function_call_output","call_id":"b","output":"y"}]}"#,
        ),
        (
            Format::Anthropic,
            r#"{"messages":[{"role":"user","content":"go"},{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"f","input":{}},{"type":"tool_use","id":"b","name":"f","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"a","content":"x"},{"type":"tool_result","tool_use_id":"b","content":"y"}]}]}"#,
        ),
    ];
    let ids = BTreeSet::from(["b".to_owned(), "unknown".to_owned()]);
    for (format, text) in requests {
        let value: serde_json::Value = serde_json::from_str(text).expect("json");
        let mut pt = ProviderTranscript::parse(format, &value).expect("valid");
        assert_eq!(pt.pin_results(&ids).expect("pins"), 1, "{format}");
        let pinned: Vec<&str> = pt
            .transcript()
            .turns()
            .iter()
            .filter(|t| t.pinned())
            .map(|t| t.content())
            .collect();
        assert_eq!(pinned, ["y"], "{format}: the result answering b alone");
        let estimator = cutctx_policies::CharRatioEstimator::default();
        let mut from_text =
            ProviderTranscript::from_text_with(format, text, &estimator).expect("plain");
        let e = from_text
            .pin_results(&ids)
            .expect_err("text keeps no messages");
        assert_eq!(e.code(), "FORMAT_UNSUPPORTED");
        assert_eq!(
            from_text
                .pin_results(&BTreeSet::new())
                .expect("nothing to pin"),
            0
        );
    }
}
