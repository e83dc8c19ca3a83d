//! Whole-prompt counts and [`repair`]: each rollout shape that breaks a rule is dropped, named
//! at its input position, and the repaired request is valid; without repair it is refused.

use cutctx_formats::{
    Format, ProviderTranscript, RepairKind, Rule, is_repairable, repair, validate,
};
use serde_json::{Value, json};

fn kinds(format: Format, doc: Value) -> (Value, Vec<(RepairKind, usize, Option<String>)>) {
    let (fixed, repairs) = repair(format, doc).expect("repairable");
    validate(format, &fixed).expect("valid once repaired");
    let listed = repairs
        .into_iter()
        .map(|r| (r.kind, r.position, r.id))
        .collect();
    (fixed, listed)
}

fn id(s: &str) -> Option<String> {
    Some(s.to_owned())
}

#[test]
fn tools_count_with_the_turns_estimator_and_the_fixed_parts_can_be_unsatisfiable() {
    let request = json!({
        "max_tokens": 64,
        "system": "Be brief.",
        "tools": [{"name": "lookup", "description": "d".repeat(40_000), "input_schema": {"type": "object"}}],
        "messages": [{"role": "user", "content": "hello there"}]
    });
    let pt = ProviderTranscript::parse(Format::Anthropic, &request).expect("valid");
    assert_eq!(pt.requested_output().expect("an integer"), Some(64));
    let count = pt.prompt_count(64);
    // 40,069 characters of canonical JSON, four a token.
    assert_eq!(count.tools, 10_018);
    assert_eq!((count.system, count.messages, count.reserve), (3, 3, 64));
    assert_eq!(count.total, 10_018 + 3 + 3 + 64);
    let err = count
        .turn_budget(500)
        .expect_err("the tools alone exceed 500");
    assert_eq!(err.code(), "COMPACTION_BUDGET_UNSATISFIABLE");
    assert_eq!(err.details()["fixed_tokens"], 10_085);
    assert_eq!(err.details()["max_tokens"], 500);
    assert_eq!(
        count.turn_budget(20_000).expect("fits"),
        20_000 - 10_018 - 64
    );
}

#[test]
fn a_reserve_whose_sum_with_the_prompt_passes_u64_fits_no_budget_and_wraps_nothing() {
    let request = json!({
        "system": "Be brief.",
        "messages": [{"role": "user", "content": "hello there"}]
    });
    let pt = ProviderTranscript::parse(Format::Anthropic, &request).expect("valid");
    // System 3 + messages 3 + this reserve is u64::MAX + 1: no figure of the report can hold it.
    let count = pt.prompt_count(u64::MAX - 5);
    let err = count
        .turn_budget(u64::MAX)
        .expect_err("refused, not wrapped into a small budget");
    assert_eq!(err.code(), "COMPACTION_BUDGET_UNSATISFIABLE");
    assert_eq!(err.details()["reserve_tokens"], u64::MAX - 5);
    assert_eq!(err.details()["messages_tokens"], 3);
    // One less and the parts just fit: the turns get what the reserve leaves.
    assert_eq!(
        pt.prompt_count(u64::MAX - 6)
            .turn_budget(u64::MAX)
            .expect("fits"),
        6
    );
}

#[test]
fn the_requested_output_is_read_per_format_and_must_be_an_integer() {
    let chat = json!({"max_tokens": 10, "max_completion_tokens": 20, "messages": [{"role": "user", "content": "x"}]});
    let pt = ProviderTranscript::parse(Format::OpenAiChat, &chat).expect("valid");
    assert_eq!(pt.requested_output().expect("ok"), Some(20));
    let responses = json!({"max_output_tokens": 30, "input": "x"});
    let pt = ProviderTranscript::parse(Format::OpenAiResponses, &responses).expect("valid");
    assert_eq!(pt.requested_output().expect("ok"), Some(30));
    let bare = json!([{"role": "user", "content": "x"}]);
    let pt = ProviderTranscript::parse(Format::OpenAiChat, &bare).expect("valid");
    assert_eq!(pt.requested_output().expect("ok"), None);
    let bad = json!({"max_tokens": -1, "messages": [{"role": "user", "content": "x"}]});
    let pt = ProviderTranscript::parse(Format::Anthropic, &bad).expect("valid");
    assert_eq!(
        pt.requested_output().expect_err("negative").code(),
        "FORMAT_ERROR"
    );
}

#[test]
fn chat_drops_unanswered_calls_orphan_results_and_the_emptied_message() {
    let doc = json!([
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": null, "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}},
            {"id": "b", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "a", "content": "1"},
        {"role": "tool", "tool_call_id": "z", "content": "orphan"},
        {"role": "user", "content": "next"},
        {"role": "tool", "tool_call_id": "q", "content": "orphan"},
        {"role": "assistant", "content": null, "tool_calls": [
            {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "user", "content": "end"}
    ]);
    assert_eq!(
        validate(Format::OpenAiChat, &doc).map_err(|v| v.rule),
        Err(Rule::ResultWithoutCall)
    );
    let (fixed, repairs) = kinds(Format::OpenAiChat, doc);
    assert_eq!(
        repairs,
        [
            (RepairKind::DroppedResult, 3, id("z")),
            (RepairKind::DroppedCall, 1, id("b")),
            (RepairKind::DroppedResult, 5, id("q")),
            (RepairKind::DroppedCall, 6, id("c")),
            (RepairKind::DroppedEmptyMessage, 6, None),
        ]
    );
    assert_eq!(fixed.as_array().map(Vec::len), Some(5));
    assert_eq!(fixed[1]["tool_calls"].as_array().map(Vec::len), Some(1));
}

#[test]
fn chat_reusing_an_id_in_later_calls_is_valid_by_position() {
    let call = |id: &str| {
        json!({"role": "assistant", "content": null, "tool_calls": [
        {"id": id, "type": "function", "function": {"name": "f", "arguments": "{}"}}]})
    };
    let doc = json!([
        {"role": "user", "content": "go"}, call("same"),
        {"role": "tool", "tool_call_id": "same", "content": "1"}, call("same"),
        {"role": "tool", "tool_call_id": "same", "content": "2"},
        {"role": "user", "content": "end"}
    ]);
    assert!(validate(Format::OpenAiChat, &doc).is_ok());
    let pt = ProviderTranscript::parse(Format::OpenAiChat, &doc).expect("valid");
    let keys = crate::call_keys(&pt);
    assert_eq!(
        keys,
        [None, Some("m1"), Some("m1"), Some("m3"), Some("m3"), None]
    );
}

#[test]
fn responses_drops_misplaced_reasoning_reused_ids_and_null_statuses() {
    let doc = json!({"input": [
        {"role": "user", "content": "go"},
        {"type": "function_call", "call_id": "a", "name": "f", "arguments": "{}", "status": null},
        {"type": "reasoning", "summary": []},
        {"type": "function_call_output", "call_id": "a", "output": "1", "status": null},
        {"type": "function_call", "call_id": "a", "name": "f", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "a", "output": "2"},
        {"type": "function_call", "call_id": "lost", "name": "f", "arguments": "{}"},
        {"role": "user", "content": "end"}
    ]});
    let (fixed, repairs) = kinds(Format::OpenAiResponses, doc);
    assert_eq!(
        repairs,
        [
            (RepairKind::DroppedNullStatus, 1, None),
            (RepairKind::DroppedReasoning, 2, None),
            (RepairKind::DroppedDuplicateCall, 4, id("a")),
            (RepairKind::DroppedResult, 5, id("a")),
            (RepairKind::DroppedCall, 6, id("lost")),
        ]
    );
    // A null status stays on an output item, whose schema allows it.
    assert_eq!(fixed["input"][2]["status"], Value::Null);
    assert!(fixed["input"][2].get("status").is_some());
    assert_eq!(fixed["input"].as_array().map(Vec::len), Some(4));
}

#[test]
fn anthropic_drops_unanswered_uses_stray_results_and_empty_messages() {
    let doc = json!({"messages": [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": []},
        {"role": "user", "content": "again"},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "u1", "name": "f", "input": {}},
            {"type": "tool_use", "id": "u2", "name": "f", "input": {}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "u1", "content": "1"},
            {"type": "tool_result", "tool_use_id": "nope", "content": "x"}]},
        {"role": "assistant", "content": "done"}
    ]});
    assert_eq!(
        validate(Format::Anthropic, &doc).map_err(|v| v.rule),
        Err(Rule::EmptyContent)
    );
    let (_, repairs) = kinds(Format::Anthropic, doc);
    assert_eq!(
        repairs,
        [
            (RepairKind::DroppedEmptyMessage, 1, None),
            (RepairKind::DroppedResult, 4, id("nope")),
            (RepairKind::DroppedCall, 3, id("u2")),
        ]
    );
    // An empty final assistant message (a prefill) is allowed.
    let prefill = json!({"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": ""}]});
    assert!(validate(Format::Anthropic, &prefill).is_ok());
}

#[test]
fn what_no_drop_fixes_is_still_refused_and_valid_requests_are_untouched() {
    let doc = json!({"messages": [{"role": "assistant", "content": "hi"}]});
    let err = repair(Format::Anthropic, doc).expect_err("no drop makes a user message first");
    assert_eq!(err.code(), "FORMAT_INVALID_REQUEST");
    let first = validate(
        Format::Anthropic,
        &json!({"messages": [{"role": "assistant", "content": "hi"}]}),
    )
    .expect_err("an assistant message first");
    assert_eq!(first.rule, Rule::FirstMessageNotUser);
    assert!(!is_repairable(&first));
    // Two `tool_use` blocks with one id: which one a result answers is unknowable, so repair
    // refuses, and the refusal must not advise `--repair`.
    let twice = json!({"messages": [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "t1", "name": "f", "input": {}},
            {"type": "tool_use", "id": "t1", "name": "f", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]}
    ]});
    let v = validate(Format::Anthropic, &twice).expect_err("a reused tool_use id");
    assert_eq!(v.rule, Rule::DuplicateCallId);
    assert!(!is_repairable(&v));
    assert_eq!(
        repair(Format::Anthropic, twice)
            .expect_err("refused")
            .code(),
        "FORMAT_INVALID_REQUEST"
    );
    let valid = json!([{"role": "user", "content": "x"}]);
    assert_eq!(
        repair(Format::OpenAiChat, valid.clone()).expect("valid"),
        (valid, vec![])
    );
}

#[test]
fn the_per_message_count_adds_up_to_the_whole_prompt_over_the_corpus() {
    let cases = crate::corpus();
    assert!(cases.len() >= 10, "{} corpus requests", cases.len());
    for case in &cases {
        crate::assert_count_adds_up(case.format, &case.document, &case.name);
    }
    // A Responses `input` given as one string is a fixed part, with the instructions.
    let one = json!({"instructions": "Be brief.", "input": "What is two and two?"});
    crate::assert_count_adds_up(Format::OpenAiResponses, &one, "string input");
    let e = cutctx_policies::CharRatioEstimator::default();
    assert_eq!(
        cutctx_formats::fixed_tokens(Format::OpenAiResponses, &one, &e).expect("counts"),
        3 + 5
    );
}
