//! Signed reasoning after a compaction, on requests shaped as the providers document them:
//! Anthropic's signed `thinking` and `redacted_thinking` blocks interleaved with tool use, a
//! tool loop in progress under manual and adaptive thinking, and Responses' encrypted
//! `reasoning` items before the calls and answers they were produced with. Each case holds the
//! output to `stale_reasoning`, the format's validator, and the text path's agreement.

use std::collections::BTreeMap;

use cutctx_formats::{Format, ProviderTranscript, ReasoningMode, stale_reasoning, validate};
use cutctx_model::CompactionBudget;
use cutctx_policies::{CharRatioEstimator, CompactionPolicy, ObservationMaskingPolicy};
use serde_json::{Value, json};

/// Compacts `request` with observation masking to `budget` (two recent turns protected), by
/// value and from its text: the two outputs must be the same request with the same outcome.
fn compact(
    format: Format,
    request: &Value,
    budget: u64,
    mode: ReasoningMode,
) -> Result<(Value, cutctx_formats::ReasoningOutcome), cutctx_formats::FormatError> {
    let mut pt = ProviderTranscript::parse(format, request)?;
    pt.set_reasoning(mode);
    let plan = ObservationMaskingPolicy::new(0)
        .expect("valid")
        .decide(
            pt.transcript(),
            &CompactionBudget::new(budget).with_protected_recent_turns(2),
        )
        .expect("plans");
    let by_value = pt.apply(&plan, &BTreeMap::new());
    let text = serde_json::to_string(request).expect("serializes");
    let mut from_text =
        ProviderTranscript::from_text_with(format, &text, &CharRatioEstimator::default())
            .expect("the text path reads it");
    from_text.set_reasoning(mode);
    let by_text = from_text.apply_text(&plan, &BTreeMap::new(), &text);
    match (by_value, by_text) {
        (Ok(v), Ok(t)) => {
            let t_value: Value = serde_json::from_str(&t.text).expect("json");
            assert_eq!(v.document, t_value, "the two paths render the same request");
            assert_eq!(
                v.reasoning, t.reasoning,
                "and say the same of its reasoning"
            );
            Ok((v.document, v.reasoning))
        }
        (Err(a), Err(b)) => {
            assert_eq!(a.code(), b.code());
            assert_eq!(a.details(), b.details());
            Err(a)
        }
        (a, b) => panic!("the paths disagree: {:?} / {:?}", a.err(), b.err()),
    }
}

/// The request: six assistant messages, each a signed thinking block and a `tool_use`,
/// each answered by a 4,000-character result; `thinking` as given; then the model's answer and
/// a new question, unless `open` (then the request ends with the sixth result: a tool loop in
/// progress).
fn anthropic_loop(thinking: Value, open: bool) -> Value {
    let mut messages = vec![json!({"role": "user", "content": "Audit the repository."})];
    for i in 0..6 {
        messages.push(json!({"role": "assistant", "content": [
            {"type": "thinking", "thinking": format!("Step {i}: read the next file."), "signature": format!("sig-{i}")},
            {"type": "tool_use", "id": format!("toolu_{i}"), "name": "read_file", "input": {"path": format!("src/{i}.rs")}}]}));
        messages.push(json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": format!("toolu_{i}"), "content": "x".repeat(4000)}]}));
    }
    if !open {
        // The loop closed: the model answered, and the user asked something new.
        messages.push(json!({"role": "assistant", "content": [{"type": "text", "text": "Found three issues."}]}));
        messages.push(json!({"role": "user", "content": "Summarize what you found."}));
    }
    json!({"model": "claude-fable-5-1", "max_tokens": 2048, "thinking": thinking, "messages": messages})
}

fn blocks_of(m: &Value) -> Vec<&str> {
    m["content"]
        .as_array()
        .map(|b| b.iter().filter_map(|b| b["type"].as_str()).collect())
        .unwrap_or_default()
}

#[test]
fn masking_early_results_strips_every_later_thinking_block_and_keeps_those_before() {
    let request = anthropic_loop(json!({"type": "adaptive"}), false);
    let (out, outcome) =
        compact(Format::Anthropic, &request, 5000, ReasoningMode::Strip).expect("compacts");
    let messages = out["messages"].as_array().expect("list");
    let first = outcome.first_changed.expect("a result was masked");
    assert_eq!(first, 2, "the first result is the first change");
    // Before the change: byte for byte, thinking included.
    assert_eq!(messages[1], request["messages"][1]);
    // After it: no thinking anywhere, every tool_use kept with its id.
    for m in &messages[first..] {
        assert!(!blocks_of(m).contains(&"thinking"), "{m}");
    }
    assert_eq!(
        outcome.invalidated.len(),
        5,
        "assistant messages 3, 5, 7, 9, 11"
    );
    assert_eq!(
        outcome
            .invalidated
            .iter()
            .map(|r| r.message)
            .collect::<Vec<_>>(),
        [3, 5, 7, 9, 11].map(Some)
    );
    assert!(outcome.invalidated.iter().all(|r| r.block == Some(0)));
    assert!(stale_reasoning(Format::Anthropic, &request, &out).is_empty());
    validate(Format::Anthropic, &out).expect("valid");
    // Keep sends them and still counts them; refuse refuses.
    let (kept, outcome) =
        compact(Format::Anthropic, &request, 5000, ReasoningMode::Keep).expect("compacts");
    assert_eq!(outcome.invalidated.len(), 5);
    assert_eq!(stale_reasoning(Format::Anthropic, &request, &kept).len(), 5);
    let e = compact(Format::Anthropic, &request, 5000, ReasoningMode::Refuse).expect_err("refused");
    assert_eq!(e.code(), "FORMAT_REASONING_INVALIDATED");
    assert_eq!(e.details()["first_changed"], 2);
    assert_eq!(e.details()["messages"], json!([3, 5, 7, 9, 11]));
}

#[test]
fn a_request_that_fits_keeps_its_reasoning_byte_for_byte() {
    let request = anthropic_loop(json!({"type": "enabled", "budget_tokens": 1024}), true);
    for mode in ReasoningMode::ALL {
        let (out, outcome) = compact(Format::Anthropic, &request, 1_000_000, mode).expect("fits");
        assert_eq!(out, request);
        assert!(outcome.is_empty() && outcome.first_changed.is_none());
    }
}

#[test]
fn redacted_thinking_is_removed_with_the_thinking_and_counts_no_tokens() {
    let mut request = anthropic_loop(json!({"type": "adaptive"}), false);
    // The fourth assistant message's reasoning came back redacted, before its thinking.
    request["messages"][7]["content"]
        .as_array_mut()
        .expect("blocks")
        .insert(
            0,
            json!({"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix"}),
        );
    let (out, outcome) =
        compact(Format::Anthropic, &request, 5000, ReasoningMode::Strip).expect("compacts");
    let redacted: Vec<_> = outcome
        .invalidated
        .iter()
        .filter(|r| r.kind == "redacted_thinking")
        .collect();
    assert_eq!(redacted.len(), 1);
    assert_eq!((redacted[0].message, redacted[0].block), (Some(7), Some(0)));
    assert_eq!(
        redacted[0].text(),
        "",
        "nothing of it is read, so nothing counts"
    );
    assert_eq!(blocks_of(&out["messages"][7]), ["tool_use"]);
    assert!(stale_reasoning(Format::Anthropic, &request, &out).is_empty());
    let report = outcome.to_json(&CharRatioEstimator::default());
    let kinds: Vec<_> = report["invalidated"]
        .as_array()
        .expect("list")
        .iter()
        .map(|r| r["kind"].clone())
        .collect();
    assert!(kinds.contains(&json!("redacted_thinking")));
}

#[test]
fn an_open_tool_loop_under_adaptive_thinking_loses_its_invalid_thinking_and_stays_valid() {
    // Adaptive thinking lets any assistant turn go without a thinking block.
    let request = anthropic_loop(json!({"type": "adaptive"}), true);
    let (out, outcome) =
        compact(Format::Anthropic, &request, 5000, ReasoningMode::Strip).expect("compacts");
    let messages = out["messages"].as_array().expect("list");
    assert_eq!(blocks_of(&messages[messages.len() - 2]), ["tool_use"]);
    assert_eq!(outcome.invalidated.len(), 5);
    validate(Format::Anthropic, &out).expect("valid");
    assert!(stale_reasoning(Format::Anthropic, &request, &out).is_empty());
}

#[test]
fn an_open_tool_loop_under_manual_thinking_is_refused_rather_sent_invalid() {
    // Manual thinking requires the final assistant turn to start with thinking, and that
    // thinking is bound to the prefix the masks change: no valid request exists.
    let request = anthropic_loop(json!({"type": "enabled", "budget_tokens": 1024}), true);
    let e = compact(Format::Anthropic, &request, 5000, ReasoningMode::Strip)
        .expect_err("no valid request");
    assert_eq!(e.code(), "FORMAT_REASONING_OPEN_TOOL_LOOP");
    assert_eq!(e.details()["message"], 11, "the last assistant message");
    assert_eq!(e.details()["first_changed"], 2);
    assert!(!e.message().contains("xxxx"), "never the content");
    // Keep is the caller's choice (with drop_block): sent as it was, counted.
    let (out, outcome) =
        compact(Format::Anthropic, &request, 5000, ReasoningMode::Keep).expect("kept");
    assert_eq!(outcome.invalidated.len(), 5);
    assert_eq!(blocks_of(&out["messages"][11]), ["thinking", "tool_use"]);
    // Once the loop has its answer and the user speaks, strip works under manual thinking.
    let closed = anthropic_loop(json!({"type": "enabled", "budget_tokens": 1024}), false);
    let (out, _) =
        compact(Format::Anthropic, &closed, 5000, ReasoningMode::Strip).expect("compacts");
    assert!(stale_reasoning(Format::Anthropic, &closed, &out).is_empty());
}

/// A Responses request as a stateless (`store: false`) agent sends it: each step a reasoning
/// item with `encrypted_content` and a summary, then the `function_call` it produced (with
/// its `fc_` id), then the output; the last step answers with a message (`msg_` id).
fn responses_loop() -> Value {
    let mut input = vec![json!({"role": "user", "content": "Audit the repository."})];
    for i in 0..4 {
        input.push(json!({"type": "reasoning", "id": format!("rs_{i}"), "encrypted_content": format!("gAAAA{i}"),
            "summary": [{"type": "summary_text", "text": format!("Read file {i} next.")}]}));
        input.push(
            json!({"type": "function_call", "id": format!("fc_{i}"), "call_id": format!("call_{i}"),
            "name": "read_file", "arguments": format!("{{\"path\":\"src/{i}.rs\"}}")}),
        );
        input.push(json!({"type": "function_call_output", "call_id": format!("call_{i}"), "output": "y".repeat(4000)}));
    }
    input.push(
        json!({"type": "reasoning", "id": "rs_9", "encrypted_content": "gAAAA9", "summary": []}),
    );
    input.push(
        json!({"type": "message", "id": "msg_9", "role": "assistant", "status": "completed",
        "content": [{"type": "output_text", "text": "Done."}]}),
    );
    input.push(json!({"role": "user", "content": "Thanks: now the tests."}));
    json!({"model": "gpt-6.2", "store": false, "include": ["reasoning.encrypted_content"], "input": input})
}

#[test]
fn responses_reasoning_after_a_change_is_removed_and_its_calls_lose_the_ids_that_name_it() {
    let request = responses_loop();
    let (out, outcome) = compact(
        Format::OpenAiResponses,
        &request,
        2500,
        ReasoningMode::Strip,
    )
    .expect("compacts");
    let first = outcome.first_changed.expect("an output was masked");
    assert_eq!(first, 3, "the first output");
    let items = out["input"].as_array().expect("list");
    // Before the change, the reasoning and its call are as they were.
    assert_eq!(items[1], request["input"][1]);
    assert_eq!(items[2], request["input"][2]);
    // After it: no reasoning; the calls and the answer keep everything but their `id`.
    assert!(items[first..].iter().all(|i| i["type"] != "reasoning"));
    let calls: Vec<_> = items
        .iter()
        .filter(|i| i["type"] == "function_call")
        .collect();
    assert_eq!(calls.len(), 4);
    assert_eq!(calls[0]["id"], "fc_0");
    for (n, call) in calls.iter().enumerate().skip(1) {
        assert!(call.get("id").is_none(), "{call}");
        assert_eq!(call["call_id"], format!("call_{n}"));
    }
    let answer = items.iter().find(|i| i["type"] == "message").expect("kept");
    // Without its id it is an input message of the assistant: its text as string content.
    assert!(answer.get("id").is_none());
    assert!(answer.get("status").is_none());
    let text = request["input"][14]["content"][0]["text"].clone();
    assert_eq!(answer["content"], text);
    assert_eq!(outcome.unlinked, [5, 8, 11, 14], "by input position");
    assert_eq!(
        outcome
            .invalidated
            .iter()
            .map(|r| r.message)
            .collect::<Vec<_>>(),
        [4, 7, 10, 13].map(Some)
    );
    let estimator = CharRatioEstimator::default();
    // Three summaries of 17 characters (5 tokens at 4 a token) and one empty.
    assert_eq!(outcome.tokens(&estimator), 3 * 5);
    assert_eq!(
        outcome.to_json(&estimator)["unlinked"],
        json!([5, 8, 11, 14])
    );
    assert!(stale_reasoning(Format::OpenAiResponses, &request, &out).is_empty());
    validate(Format::OpenAiResponses, &out).expect("valid");
    // Keep leaves items and ids alone.
    let (kept, outcome) =
        compact(Format::OpenAiResponses, &request, 2500, ReasoningMode::Keep).expect("kept");
    assert!(outcome.unlinked.is_empty());
    assert_eq!(
        kept["input"]
            .as_array()
            .expect("list")
            .iter()
            .filter(|i| i["type"] == "reasoning")
            .count(),
        5
    );
}

#[test]
fn an_item_reference_after_removed_reasoning_keeps_the_id_it_names() {
    let mut request = responses_loop();
    let input = request["input"].as_array_mut().expect("list");
    // The answer is sent by reference instead.
    input[14] = json!({"type": "item_reference", "id": "msg_9"});
    let (out, outcome) = compact(
        Format::OpenAiResponses,
        &request,
        2500,
        ReasoningMode::Strip,
    )
    .expect("compacts");
    let reference = out["input"]
        .as_array()
        .expect("list")
        .iter()
        .find(|i| i["type"] == "item_reference")
        .expect("kept");
    assert_eq!(reference["id"], "msg_9");
    assert!(!outcome.unlinked.contains(&14));
}

#[test]
fn a_repair_before_the_reasoning_invalidates_it_even_when_the_view_keeps_everything() {
    let request = anthropic_loop(json!({"type": "adaptive"}), false);
    let mut pt = ProviderTranscript::parse(Format::Anthropic, &request).expect("valid");
    pt.set_changed_from(Some(4));
    let (out, outcome) = pt.render_settled(pt.transcript()).expect("renders");
    assert_eq!(outcome.first_changed, Some(4));
    assert_eq!(
        blocks_of(&out["messages"][3]),
        ["thinking", "tool_use"],
        "before the drop"
    );
    assert_eq!(outcome.invalidated.len(), 4, "messages 5, 7, 9 and 11");
    assert_eq!(blocks_of(&out["messages"][5]), ["tool_use"]);
}

#[test]
fn thinking_in_a_message_of_an_unknown_role_is_carried_untouched_and_the_request_stays_valid() {
    // Found by the provider_formats fuzz target: dropping the first user message, then
    // stripping the only block of the unknown-role message after it, left the assistant's
    // message first. Only an assistant message holds reasoning; the other is carried as it is.
    let request = json!({"model": "claude-opus-4-1", "max_tokens": 2048, "system": "s",
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "Who maintains ripgrep? ".repeat(20)}]},
            {"role": "asskstant", "content": [{"type": "redacted_thinking", "data": "EmwKAhgB"}]},
            {"role": "assistant", "content": "Since 2016, and it is still active."},
            {"role": "user", "content": "Thanks."}]});
    let pt = ProviderTranscript::parse(Format::Anthropic, &request).expect("parses");
    let total = pt.transcript().token_estimate();
    let budget = CompactionBudget::new(total * 40 / 64).with_protected_recent_turns(1);
    let chain = cutctx_policies::default_chain("fuzz.v1").expect("a chain");
    let plan = chain.decide(pt.transcript(), &budget).expect("a plan");
    let summaries: BTreeMap<String, String> = plan
        .summarization_requests
        .iter()
        .map(|r| (r.group_id().to_owned(), "a summary".to_owned()))
        .collect();
    let out = pt.apply(&plan, &summaries).expect("a valid plan renders");
    validate(Format::Anthropic, &out.document).expect("the compacted request is valid");
    let messages = out.document["messages"].as_array().expect("messages");
    let odd = messages
        .iter()
        .find(|m| m["role"] == "asskstant")
        .expect("the unknown-role message is kept");
    assert_eq!(odd, &request["messages"][1], "byte for byte");
}
