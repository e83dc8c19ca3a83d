//! With a budget that fits, every corpus request comes back identical, whatever the policy.

use cutctx_formats::{Format, ProviderTranscript, validate};
use cutctx_model::{CompactionBudget, Role};

use crate::{compact, corpus, policies};

#[test]
fn every_corpus_request_is_valid_for_its_format() {
    let cases = corpus();
    assert!(cases.len() >= 10, "the corpus has {} requests", cases.len());
    for case in &cases {
        validate(case.format, &case.document)
            .unwrap_or_else(|v| panic!("{} ({}): {v}", case.name, case.format));
    }
}

#[test]
fn every_format_has_samples_with_tools_media_and_reasoning() {
    let cases = corpus();
    for format in Format::ALL {
        let text: String = cases
            .iter()
            .filter(|c| c.format == format)
            .map(|c| c.document.to_string())
            .collect();
        for needle in match format {
            Format::OpenAiChat => &["tool_calls", "image_url", "tool_call_id"][..],
            Format::OpenAiResponses => &["reasoning", "function_call_output", "input_image"][..],
            Format::Anthropic => &["thinking", "tool_result", "cache_control", "image"][..],
        } {
            assert!(text.contains(needle), "{format} corpus lacks {needle}");
        }
    }
}

#[test]
fn a_budget_that_fits_gives_the_input_back_under_every_policy() {
    for case in corpus() {
        let pt = ProviderTranscript::parse(case.format, &case.document)
            .unwrap_or_else(|e| panic!("{}: {e}", case.name));
        let total = pt.transcript().token_estimate();
        for (name, policy) in policies() {
            for protected in [0, 4] {
                let budget = CompactionBudget::new(total).with_protected_recent_turns(protected);
                let out = compact(&pt, policy.as_ref(), &budget)
                    .unwrap_or_else(|e| panic!("{} / {name}: {e}", case.name))
                    .expect("a budget equal to the total is satisfiable");
                assert_eq!(
                    out.document, case.document,
                    "{} / {name}: the output differs from the input",
                    case.name
                );
                assert!(out.report.masked_turn_ids.is_empty());
            }
        }
    }
}

#[test]
fn rendering_the_transcript_itself_gives_the_input_back() {
    for case in corpus() {
        let pt = ProviderTranscript::parse(case.format, &case.document).expect("valid");
        assert_eq!(
            pt.render(pt.transcript()).expect("renders"),
            case.document,
            "{}",
            case.name
        );
    }
}

#[test]
fn turn_ids_are_positional_and_exchanges_hold_calls_with_all_their_results() {
    for case in corpus() {
        let pt = ProviderTranscript::parse(case.format, &case.document).expect("valid");
        let t = pt.transcript();
        for (turn, source) in t.turns().iter().zip(pt.sources()) {
            if let Some(i) = source.message() {
                assert!(
                    turn.turn_id() == format!("m{i}")
                        || turn.turn_id().starts_with(&format!("m{i}.")),
                    "{}: {} from message {i}",
                    case.name,
                    turn.turn_id()
                );
            }
            // Every result turn belongs to an exchange opened by an assistant turn.
            if turn.role() == Role::Tool {
                let key = turn.tool_call_id().expect("a result has an exchange");
                let opener = t
                    .turns()
                    .iter()
                    .find(|o| o.tool_call_id() == Some(key))
                    .expect("the exchange has members");
                assert_eq!(opener.role(), Role::Assistant, "{}", case.name);
            }
        }
    }
}

/// A call id given again by a later assistant message names that message's exchange: each
/// result joins the exchange of the calls right before it, by text and by value alike.
#[test]
fn a_call_id_given_again_joins_the_later_exchange() {
    let chat = serde_json::json!({"messages": [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": null, "tool_calls": [
            {"id": "c0", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c0", "content": "first"},
        {"role": "assistant", "content": null, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}},
            {"id": "c0", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c0", "content": "second"},
        {"role": "tool", "tool_call_id": "c1", "content": "third"}
    ]});
    let anthropic = serde_json::json!({"max_tokens": 10, "messages": [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "c0", "name": "f", "input": {}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "c0", "content": "first"}]},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "c1", "name": "f", "input": {}},
            {"type": "tool_use", "id": "c0", "name": "f", "input": {}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "c0", "content": "second"},
            {"type": "tool_result", "tool_use_id": "c1", "content": "third"}]}
    ]});
    let estimator = cutctx_policies::CharRatioEstimator::default();
    for (format, document) in [(Format::OpenAiChat, chat), (Format::Anthropic, anthropic)] {
        let text = document.to_string();
        let by_text =
            ProviderTranscript::from_text_with(format, &text, &estimator).expect("read as text");
        let by_value = ProviderTranscript::from_document_with(format, document, &estimator)
            .expect("read as a value");
        for pt in [&by_text, &by_value] {
            let keys: Vec<(&str, Option<&str>)> = pt
                .transcript()
                .turns()
                .iter()
                .filter(|t| t.role() == Role::Tool)
                .map(|t| (t.content(), t.tool_call_id()))
                .collect();
            assert_eq!(
                keys,
                [
                    ("first", Some("m1")),
                    ("second", Some("m3")),
                    ("third", Some("m3"))
                ],
                "{format}"
            );
        }
    }
}

/// The consuming path (`from_document_with`, `apply_into`), which moves kept messages into
/// the output, renders exactly what the borrowing path renders, for every corpus request,
/// policy and a range of budgets, summaries and the lead-in included.
#[test]
fn the_consuming_path_renders_what_the_borrowing_path_renders() {
    let mut compared = 0;
    for case in crate::corpus() {
        let pt = ProviderTranscript::parse(case.format, &case.document).expect("corpus parses");
        let owned = ProviderTranscript::from_document_with(
            case.format,
            case.document.clone(),
            &cutctx_policies::CharRatioEstimator::default(),
        )
        .expect("corpus parses");
        assert_eq!(owned.transcript(), pt.transcript(), "{}", case.name);
        let total: u64 = pt
            .transcript()
            .turns()
            .iter()
            .map(|t| t.token_estimate())
            .sum();
        for (name, policy) in crate::policies() {
            for budget in [0, total / 4, total / 2, total] {
                let budget = CompactionBudget::new(budget).with_protected_recent_turns(1);
                let Ok(plan) = policy.decide(pt.transcript(), &budget) else {
                    continue;
                };
                let summaries = crate::summaries_for(&plan);
                let borrowed = pt.apply(&plan, &summaries).expect("applies");
                let consumed = owned
                    .clone()
                    .apply_into(&plan, &summaries)
                    .expect("applies");
                assert_eq!(consumed.document, borrowed.document, "{} {name}", case.name);
                assert_eq!(consumed.report, borrowed.report, "{} {name}", case.name);
                compared += 1;
            }
        }
    }
    // The corpus reaches every format with plans that compact (and some that fit).
    assert!(compared > 100, "only {compared} comparisons");
}
