//! Compacted outputs: valid for their provider at every budget, and faithful to the plan.

use std::collections::BTreeMap;

use cutctx_formats::{Format, LEAD_IN_TEXT, ProviderTranscript, TurnSource, validate};
use cutctx_model::{CompactionBudget, DEFAULT_PLACEHOLDER, Transcript};
use cutctx_policies::{
    CharRatioEstimator, CompactionPolicy, DropOldestPolicy, ObservationMaskingPolicy,
    SummarizingPolicy,
};
use serde_json::{Value, json};

use crate::{PROMPT, compact, corpus, list, orphans, policies, role, summary_text};

/// Every corpus request, under every policy, at budgets from nothing to everything and several
/// protected tails: the output is valid, has no orphan, and says what the report says.
#[test]
fn every_output_at_every_budget_is_valid_and_orphan_free() {
    let mut outputs = 0_usize;
    let mut changed = 0_usize;
    for case in corpus() {
        let pt = ProviderTranscript::parse(case.format, &case.document).expect("valid");
        let total = pt.transcript().token_estimate();
        for (name, policy) in policies() {
            for protected in [0_u64, 1, 2, 4] {
                for step in 0..=20_u64 {
                    let budget = CompactionBudget::new(total * step / 20)
                        .with_protected_recent_turns(protected);
                    let out = compact(&pt, policy.as_ref(), &budget).unwrap_or_else(|e| {
                        panic!("{} / {name} / {budget:?}: {e} {:?}", case.name, e.details())
                    });
                    let Some(out) = out else { continue };
                    let at = format!("{} / {name} / {budget:?}", case.name);
                    validate(case.format, &out.document).unwrap_or_else(|v| panic!("{at}: {v}"));
                    let problems = orphans(case.format, &out.document);
                    assert!(problems.is_empty(), "{at}: {problems:?}");
                    let stale =
                        cutctx_formats::stale_reasoning(case.format, &case.document, &out.document);
                    assert!(stale.is_empty(), "{at}: stale reasoning {stale:?}");
                    let removed_items = if case.format == Format::OpenAiResponses {
                        out.reasoning.invalidated.len()
                    } else {
                        0
                    };
                    check_faithful(&pt, &out.view, &out.document, &at, removed_items);
                    outputs += 1;
                    changed += usize::from(out.document != case.document);
                }
            }
        }
    }
    assert!(outputs > 1000, "only {outputs} outputs were checked");
    assert!(changed > 500, "only {changed} outputs were compacted");
}

/// Every message of the output is an input message (whole, or masked, or for Anthropic a
/// merge of them), a summary, or the lead-in; kept messages are unchanged.
/// `removed_items` Responses reasoning items were left out after the first change.
fn check_faithful(
    pt: &ProviderTranscript,
    view: &Transcript,
    out: &Value,
    at: &str,
    removed_items: usize,
) {
    let format = pt.format();
    let input = list(format, pt.document());
    // After the first change, an Anthropic message is sent without its thinking.
    let unthought: Vec<Value> = input.iter().map(without_thinking).collect();
    // After a removed reasoning item, a Responses call or answer is sent without its `id`
    // (an answer then as an input message: no `status`, its output text as string content).
    let unlinked: Vec<Value> = input
        .iter()
        .map(|m| {
            let mut m = m.clone();
            if let Some(map) = m.as_object_mut() {
                map.remove("id");
                if map.get("role").and_then(Value::as_str) == Some("assistant") {
                    map.remove("status");
                    let parts = map.get("content").and_then(Value::as_array).cloned();
                    if let Some(parts) = parts
                        && parts.iter().all(|p| p["type"] == "output_text")
                    {
                        let text: String =
                            parts.iter().filter_map(|p| p["text"].as_str()).collect();
                        map.insert("content".into(), Value::String(text));
                    }
                }
            }
            m
        })
        .collect();
    let output = list(format, out);
    let summaries: Vec<&str> = view
        .turns()
        .iter()
        .filter(|t| t.turn_id().starts_with("summary:"))
        .map(|t| t.content())
        .collect();
    let masked: Vec<&str> = view
        .turns()
        .iter()
        .filter(|t| t.metadata().get("cutctx.kind").map(String::as_str) == Some("masked"))
        .map(|t| t.content())
        .collect();
    for m in &output {
        let text = m.to_string();
        let ok = input.contains(m)
            || unthought.contains(m)
            || (format == Format::OpenAiResponses && unlinked.contains(m))
            || summaries
                .iter()
                .any(|s| text.contains(&json!(s).to_string()))
            || masked.iter().any(|s| text.contains(&json!(s).to_string()))
            || text.contains(LEAD_IN_TEXT)
            || (format == Format::Anthropic && is_merge(m, &input));
        assert!(ok, "{at}: output message {text} comes from nowhere");
    }
    if format != Format::Anthropic {
        // One message per view turn (a lead-in only when the view is empty of messages).
        let turns = view
            .turns()
            .iter()
            .filter(|t| !matches!(pt.source(t.turn_id()), Some(TurnSource::System)))
            .count();
        assert_eq!(output.len() + removed_items, turns.max(1), "{at}");
    }
}

/// A message without its thinking and redacted thinking blocks.
fn without_thinking(m: &Value) -> Value {
    let mut m = m.clone();
    if let Some(Value::Array(blocks)) = m.get_mut("content") {
        blocks.retain(|b| b["type"] != "thinking" && b["type"] != "redacted_thinking");
    }
    m
}

/// Whether an Anthropic message's blocks are all blocks of input messages of its role.
fn is_merge(m: &Value, input: &[Value]) -> bool {
    let Some(blocks) = m.get("content").and_then(Value::as_array) else {
        return false;
    };
    blocks.iter().all(|b| {
        input.iter().any(|i| {
            i.get("role") == m.get("role")
                && match i.get("content") {
                    Some(Value::Array(ib)) => ib.contains(b),
                    Some(Value::String(s)) => b.get("text").and_then(Value::as_str) == Some(s),
                    _ => false,
                }
        }) || b.get("text").and_then(Value::as_str).is_some_and(|t| {
            t.starts_with("Summary of ") || t.starts_with(DEFAULT_PLACEHOLDER) || t == LEAD_IN_TEXT
        }) || b
            .get("content")
            .and_then(Value::as_str)
            .is_some_and(|t| t.starts_with(DEFAULT_PLACEHOLDER))
    })
}

fn messages(out: &Value, format: Format) -> Vec<Value> {
    list(format, out)
}

fn example(format: Format) -> Value {
    corpus()
        .into_iter()
        .find(|c| c.format == format && c.name == format!("{}.json", format.as_str()))
        .expect("the example is in the corpus")
        .document
}

#[test]
fn chat_masked_results_keep_their_ids_and_fields_and_carry_the_stub() {
    let doc = example(Format::OpenAiChat);
    let pt = ProviderTranscript::parse(Format::OpenAiChat, &doc).expect("valid");
    let policy = ObservationMaskingPolicy::new(0).expect("valid");
    let budget = CompactionBudget::new(900).with_protected_recent_turns(2);
    let out = compact(&pt, &policy, &budget)
        .expect("compacts")
        .expect("satisfiable");
    assert!(!out.report.masked_turn_ids.is_empty());
    let before = messages(&doc, Format::OpenAiChat);
    let after = messages(&out.document, Format::OpenAiChat);
    assert_eq!(before.len(), after.len(), "masking keeps every message");
    for id in &out.report.masked_turn_ids {
        let i: usize = id[1..].parse().expect("m{index}");
        let (b, a) = (&before[i], &after[i]);
        assert_eq!(a["tool_call_id"], b["tool_call_id"]);
        assert_eq!(a["role"], "tool");
        let stub = a["content"].as_str().expect("the stub is a string");
        assert!(stub.starts_with(DEFAULT_PLACEHOLDER), "{stub}");
        assert!(stub.contains("sha256:"), "{stub}");
    }
}

#[test]
fn chat_parallel_calls_leave_with_all_their_displaced_results() {
    let doc = corpus()
        .into_iter()
        .find(|c| c.name == "bare-parallel-displaced.json")
        .expect("corpus")
        .document;
    let pt = ProviderTranscript::parse(Format::OpenAiChat, &doc).expect("valid");
    // The three results of m2 answer c3, c1, c2: one exchange with the call message.
    let key = pt.transcript().turns()[2]
        .tool_call_id()
        .expect("a call message")
        .to_owned();
    for i in 3..=5 {
        assert_eq!(
            pt.transcript().turns()[i].tool_call_id(),
            Some(key.as_str())
        );
    }
    let total = pt.transcript().token_estimate();
    let out = compact(
        &pt,
        &DropOldestPolicy,
        &CompactionBudget::new(total / 2).with_protected_recent_turns(1),
    )
    .expect("compacts")
    .expect("satisfiable");
    assert!(out.report.dropped_turn_ids.contains(&"m2".into()));
    for id in ["m3", "m4", "m5"] {
        assert!(out.report.dropped_turn_ids.contains(&id.into()), "{id}");
    }
    // The bare array comes back as a bare array, starting with the developer message.
    let after = out.document.as_array().expect("a bare array stays bare");
    assert_eq!(after[0]["role"], "developer");
}

#[test]
fn a_summary_replaces_the_folded_turns_at_the_first_ones_position() {
    for format in Format::ALL {
        let doc = example(format);
        let pt = ProviderTranscript::parse(format, &doc).expect("valid");
        let policy = SummarizingPolicy::new(PROMPT)
            .expect("valid")
            .with_min_span_turns(2)
            .expect("valid");
        let budget = CompactionBudget::new(pt.transcript().token_estimate() / 3)
            .with_protected_recent_turns(2);
        let out = compact(&pt, &policy, &budget)
            .expect("compacts")
            .expect("satisfiable");
        assert_eq!(out.report.summary_turn_ids.len(), 1, "{format}");
        let first_folded = &out.report.summarized_turn_ids[0];
        let first_index = pt
            .source(first_folded)
            .and_then(TurnSource::message)
            .expect("a message");
        let after = messages(&out.document, format);
        let text = summary_text(
            out.report.summary_turn_ids[0].trim_start_matches("summary:"),
            out.report.summarized_turn_ids.len(),
        );
        let at = after
            .iter()
            .position(|m| m.to_string().contains(&text))
            .unwrap_or_else(|| panic!("{format}: the summary is in the output"));
        // Messages before the folded span are unchanged and in place.
        let before = messages(&doc, format);
        assert_eq!(
            after[..first_index.min(at)],
            before[..first_index.min(at)],
            "{format}"
        );
        let expected_role = if format == Format::Anthropic {
            "user"
        } else {
            "assistant"
        };
        assert_eq!(after[at]["role"], expected_role, "{format}");
        assert!(
            at <= first_index,
            "{format}: summary at {at}, folded from {first_index}"
        );
    }
}

#[test]
fn anthropic_outputs_alternate_and_start_with_a_user_message() {
    let doc = example(Format::Anthropic);
    let pt = ProviderTranscript::parse(Format::Anthropic, &doc).expect("valid");
    let total = pt.transcript().token_estimate();
    let mut lead_ins = 0;
    let mut merges = 0;
    for (name, policy) in policies() {
        for protected in [0, 1, 2, 3] {
            for step in 0..=10 {
                let budget =
                    CompactionBudget::new(total * step / 10).with_protected_recent_turns(protected);
                let Some(out) = compact(&pt, policy.as_ref(), &budget).expect("compacts") else {
                    continue;
                };
                let after = messages(&out.document, Format::Anthropic);
                assert_eq!(after[0]["role"], "user", "{name}");
                for w in after.windows(2) {
                    assert_ne!(
                        w[0]["role"], w[1]["role"],
                        "{name} {budget:?}: roles alternate"
                    );
                }
                lead_ins += usize::from(after[0]["content"] == LEAD_IN_TEXT);
                merges += usize::from(after.len() < out.view.len().saturating_sub(1));
            }
        }
    }
    assert!(lead_ins > 0, "some budget removes the first user message");
    assert!(merges > 0, "some budget makes two user messages meet");
}

#[test]
fn anthropic_masked_results_keep_ids_flags_and_cache_marks() {
    let doc = corpus()
        .into_iter()
        .find(|c| c.name == "bare-parallel-errors.json")
        .expect("corpus")
        .document;
    let pt = ProviderTranscript::parse(Format::Anthropic, &doc).expect("valid");
    // Message 2 holds three results and a text block: four turns of one exchange.
    let ids: Vec<&str> = pt.transcript().turn_ids().collect();
    assert_eq!(&ids[..6], ["m0", "m1", "m2.0", "m2.1", "m2.2", "m2.3"]);
    let policy = ObservationMaskingPolicy::new(0).expect("valid");
    let out = compact(
        &pt,
        &policy,
        &CompactionBudget::new(200).with_protected_recent_turns(2),
    )
    .expect("compacts")
    .expect("satisfiable");
    assert!(out.report.masked_turn_ids.contains(&"m2.0".into()));
    let after = messages(&out.document, Format::Anthropic);
    let blocks = after[2]["content"].as_array().expect("blocks");
    assert_eq!(blocks.len(), 4, "every block stays");
    assert_eq!(blocks[0]["tool_use_id"], "t3");
    assert_eq!(blocks[0]["is_error"], true);
    assert!(
        blocks[0]["content"]
            .as_str()
            .is_some_and(|s| s.starts_with(DEFAULT_PLACEHOLDER))
    );
    assert_eq!(
        blocks[3], doc[2]["content"][3],
        "the text after the results is kept"
    );

    let doc = example(Format::Anthropic);
    let pt = ProviderTranscript::parse(Format::Anthropic, &doc).expect("valid");
    let out = compact(
        &pt,
        &policy,
        &CompactionBudget::new(900).with_protected_recent_turns(1),
    )
    .expect("compacts")
    .expect("satisfiable");
    assert!(out.report.masked_turn_ids.contains(&"m8.0".into()));
    let block = &out.document["messages"][8]["content"][0];
    assert_eq!(block["cache_control"], json!({"type": "ephemeral"}));
    assert_eq!(block["tool_use_id"], "toolu_04Cache");
    // The top-level system, tools and thinking settings are untouched.
    for key in ["system", "tools", "thinking", "model", "max_tokens"] {
        assert_eq!(out.document[key], doc[key], "{key}");
    }
}

#[test]
fn anthropic_thinking_blocks_stay_with_their_tool_use_and_consecutive_user_messages_stay_apart() {
    let doc = corpus()
        .into_iter()
        .find(|c| c.name == "server-tools-redacted.json")
        .expect("corpus")
        .document;
    let pt = ProviderTranscript::parse(Format::Anthropic, &doc).expect("valid");
    let out = compact(
        &pt,
        &DropOldestPolicy,
        &CompactionBudget::new(pt.transcript().token_estimate() - 1).with_protected_recent_turns(4),
    )
    .expect("compacts")
    .expect("satisfiable");
    // Only the first exchange goes; the two user messages that met in the input still do.
    let after = messages(&out.document, Format::Anthropic);
    let before = messages(&doc, Format::Anthropic);
    assert!(after.contains(&before[2]) && after.contains(&before[3]));
    // The assistant message with redacted thinking and a server tool is one turn.
    assert_eq!(pt.transcript().turns()[2].turn_id(), "m1");
}

#[test]
fn responses_reasoning_travels_with_the_calls_it_precedes() {
    for case in corpus()
        .into_iter()
        .filter(|c| c.format == Format::OpenAiResponses)
    {
        let pt = ProviderTranscript::parse(case.format, &case.document).expect("valid");
        let items = list(case.format, &case.document);
        for (p, turn) in pt.transcript().turns().iter().enumerate() {
            let Some(TurnSource::Message(i)) = pt.sources().get(p) else {
                continue;
            };
            if role(&items[*i]) == "reasoning" {
                let next = &pt.transcript().turns()[p + 1];
                assert!(
                    turn.tool_call_id().is_some(),
                    "{}: {}",
                    case.name,
                    turn.turn_id()
                );
                assert_eq!(turn.tool_call_id(), next.tool_call_id(), "{}", case.name);
            }
        }
    }
    let doc = example(Format::OpenAiResponses);
    let pt = ProviderTranscript::parse(Format::OpenAiResponses, &doc).expect("valid");
    // rs, two parallel calls and both (displaced) outputs: one exchange.
    let key = |p: usize| pt.transcript().turns()[p].tool_call_id().map(str::to_owned);
    // Position 0 is `instructions`; items start at 1.
    for p in 2..=6 {
        assert_eq!(key(p), key(2), "item {}", p - 1);
    }
    assert_ne!(key(7), key(2), "the next reasoning item starts a new step");
}

#[test]
fn responses_a_call_id_used_again_after_a_prompt_keys_the_later_step() {
    // A step of many parallel calls, prompts, then steps that use its call ids again: each
    // output joins the step of the call since its prompt, read by value and from the text.
    let mut input = vec![json!({"role": "user", "content": "go"})];
    for c in 0..40 {
        input.push(json!({"type": "function_call", "call_id": format!("c{c}"), "name": "f", "arguments": "{}"}));
    }
    for c in 0..40 {
        input.push(
            json!({"type": "function_call_output", "call_id": format!("c{c}"), "output": "r"}),
        );
    }
    for round in 0..3 {
        input.push(json!({"role": "user", "content": format!("again {round}")}));
        input.push(
            json!({"type": "function_call", "call_id": "c7", "name": "f", "arguments": "{}"}),
        );
        input.push(json!({"type": "function_call_output", "call_id": "c7", "output": "r"}));
    }
    let doc = json!({ "input": input });
    let text = doc.to_string();
    let by_value = ProviderTranscript::parse(Format::OpenAiResponses, &doc).expect("valid");
    let estimator = CharRatioEstimator::default();
    let by_text = ProviderTranscript::from_text_with(Format::OpenAiResponses, &text, &estimator)
        .expect("read from the text");
    for pt in [&by_value, &by_text] {
        let keys = crate::call_keys(pt);
        // The big step: keyed by its first call, m1, outputs included.
        assert!(keys[1..81].iter().all(|k| *k == Some("m1")));
        // Each later call and its output: the step of that round's call.
        for (round, call) in [82_usize, 85, 88].into_iter().enumerate() {
            let own = format!("m{call}");
            assert_eq!(keys[call], Some(own.as_str()), "round {round}");
            assert_eq!(keys[call + 1], Some(own.as_str()), "round {round}");
        }
    }
    assert_eq!(by_value.transcript(), by_text.transcript());
}

#[test]
fn responses_masked_outputs_keep_call_ids_and_strings_stay_strings() {
    let doc = example(Format::OpenAiResponses);
    let mut pt = ProviderTranscript::parse(Format::OpenAiResponses, &doc).expect("valid");
    // Positions are compared item for item: the reasoning after the first mask stays.
    pt.set_reasoning(cutctx_formats::ReasoningMode::Keep);
    let policy = ObservationMaskingPolicy::new(0).expect("valid");
    let out = compact(
        &pt,
        &policy,
        &CompactionBudget::new(1200).with_protected_recent_turns(2),
    )
    .expect("compacts")
    .expect("satisfiable");
    assert!(!out.report.masked_turn_ids.is_empty());
    for id in &out.report.masked_turn_ids {
        let i: usize = id[1..].parse().expect("m{index}");
        let (b, a) = (&doc["input"][i], &out.document["input"][i]);
        assert_eq!(a["call_id"], b["call_id"]);
        assert_eq!(a["type"], "function_call_output");
        assert!(
            a["output"]
                .as_str()
                .is_some_and(|s| s.starts_with(DEFAULT_PLACEHOLDER))
        );
    }
    assert_eq!(out.document["instructions"], doc["instructions"]);

    let doc = json!({"model": "m", "instructions": "Be brief.", "input": "Hello?"});
    let pt = ProviderTranscript::parse(Format::OpenAiResponses, &doc).expect("valid");
    assert_eq!(pt.render(pt.transcript()).expect("renders"), doc);
    let out = compact(
        &pt,
        &DropOldestPolicy,
        &CompactionBudget::new(3).with_protected_recent_turns(0),
    )
    .expect("compacts")
    .expect("satisfiable");
    assert_eq!(out.document["input"][0]["content"], LEAD_IN_TEXT);
}

#[test]
fn summarization_input_names_the_folded_turns_and_their_original_messages() {
    let doc = example(Format::Anthropic);
    let pt = ProviderTranscript::parse(Format::Anthropic, &doc).expect("valid");
    let policy = SummarizingPolicy::new(PROMPT)
        .expect("valid")
        .with_min_span_turns(2)
        .expect("valid");
    let plan = policy
        .decide(
            pt.transcript(),
            &CompactionBudget::new(pt.transcript().token_estimate() / 3)
                .with_protected_recent_turns(2),
        )
        .expect("plans");
    let request = &plan.summarization_requests[0];
    let input = pt.summarization_input(request);
    assert_eq!(input["format"], "anthropic");
    assert_eq!(input["group_id"], request.group_id());
    assert_eq!(input["prompt_id"], PROMPT);
    assert_eq!(input["target_tokens"], request.target_tokens());
    let turns = input["turns"].as_array().expect("turns");
    assert_eq!(turns.len(), request.turn_ids().len());
    assert_eq!(turns[0]["turn_id"], &*request.turn_ids()[0]);
    // Message 2 holds two results: it is listed once.
    let messages = input["messages"].as_array().expect("messages");
    let mut distinct = messages.clone();
    distinct.dedup();
    assert_eq!(distinct.len(), messages.len());
    assert_eq!(messages[0], doc["messages"][0]);
}

/// No thinking text is ever a summarizer's input: an Anthropic thinking block and a Responses
/// reasoning item's summary stay out of the document, their messages' other parts in it.
#[test]
fn summarization_input_never_holds_thinking_text() {
    let anthropic = json!({"thinking": {"type": "enabled", "budget_tokens": 1024}, "messages": [
        {"role": "user", "content": "task"},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "SECRET-A", "signature": "s"},
            {"type": "text", "text": "first answer"}]},
        {"role": "user", "content": "again"},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "SECRET-B", "signature": "s2"},
            {"type": "text", "text": "second answer"}]},
        {"role": "user", "content": "last"},
        {"role": "assistant", "content": "done"},
    ]});
    let responses = json!({"input": [
        {"role": "user", "content": "task"},
        {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "SECRET-A"}]},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "first answer"}]},
        {"role": "user", "content": "again"},
        {"type": "reasoning", "id": "rs_2", "summary": [{"type": "summary_text", "text": "SECRET-B"}]},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "second answer"}]},
        {"role": "user", "content": "last"},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "done"}]},
    ]});
    for (format, doc) in [
        (Format::Anthropic, anthropic),
        (Format::OpenAiResponses, responses),
    ] {
        let pt = ProviderTranscript::parse(format, &doc).expect("valid");
        let policy = SummarizingPolicy::new(PROMPT)
            .expect("valid")
            .with_min_span_turns(2)
            .expect("valid");
        let plan = policy
            .decide(
                pt.transcript(),
                &CompactionBudget::new(pt.transcript().token_estimate() / 3)
                    .with_protected_recent_turns(1),
            )
            .expect("plans");
        assert!(
            !plan.summarization_requests.is_empty(),
            "{format:?}: it summarizes"
        );
        for request in &plan.summarization_requests {
            let text = pt.summarization_input(request).to_string();
            assert!(!text.contains("SECRET"), "{format:?}: {text}");
        }
        let all = plan
            .summarization_requests
            .iter()
            .map(|r| pt.summarization_input(r).to_string())
            .collect::<String>();
        assert!(
            all.contains("first answer"),
            "{format:?}: the answers are there"
        );
    }
}

/// A message some of whose turns the view leaves out is rebuilt from the blocks of the turns it
/// keeps, whichever of its turns those are; one of which it keeps every turn is copied as it
/// was.
#[test]
fn anthropic_a_message_some_of_whose_turns_are_kept_is_rebuilt_from_them() {
    let doc = json!({"messages": [
        {"role": "user", "content": "look"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "ls", "input": {}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": "a"},
            {"type": "text", "text": "note"}
        ]},
        {"role": "assistant", "content": "done"}
    ]});
    let pt = ProviderTranscript::parse(Format::Anthropic, &doc).expect("valid");
    let turns = pt.transcript().turns();
    let ids: Vec<&str> = turns
        .iter()
        .map(cutctx_model::TranscriptTurn::turn_id)
        .collect();
    assert_eq!(ids, ["m0", "m1", "m2.0", "m2.1", "m3"]);
    let rendered = |keep: &[usize]| {
        let view =
            Transcript::new(keep.iter().map(|&k| turns[k].clone()).collect()).expect("unique ids");
        pt.render(&view).expect("renders")["messages"].clone()
    };
    let blocks = &doc["messages"][2]["content"];
    assert_eq!(rendered(&[0, 1, 2, 3, 4])[2]["content"], *blocks);
    assert_eq!(rendered(&[0, 1, 2, 4])[2]["content"], json!([blocks[0]]));
    // Only the message's second turn, its text: the result it follows is not written (nor
    // its call), and the text joins the user message before it.
    let out = rendered(&[0, 3, 4]);
    assert!(!out.to_string().contains("tool_result"), "{out}");
    assert!(out.to_string().contains("note"), "{out}");
}

/// A view may fail twice: a turn the transcript does not have, and a stub no message can take
/// (an assistant message with a tool use, masked). Whichever comes first in the view, the
/// view's own error is the one said, as when the view was read whole before rendering.
#[test]
fn a_views_error_comes_before_the_renderings_own() {
    let doc = json!({"messages": [
        {"role": "user", "content": "look"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "ls", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "a b"}]},
        {"role": "assistant", "content": "done"}
    ]});
    let pt = ProviderTranscript::parse(Format::Anthropic, &doc).expect("valid");
    let turns = pt.transcript().turns();
    let masked_call = turns[1]
        .clone()
        .with_content("[masked]".into(), 2)
        .with_metadata(BTreeMap::from([(
            "cutctx.kind".to_owned(),
            "masked".to_owned(),
        )]));
    let foreign = cutctx_model::TranscriptTurn::new("elsewhere", cutctx_model::Role::User, "x", 1)
        .expect("an id");
    let view = |list: Vec<cutctx_model::TranscriptTurn>| Transcript::new(list).expect("unique ids");
    let only_the_mask = view(vec![
        turns[0].clone(),
        masked_call.clone(),
        turns[2].clone(),
    ]);
    assert_eq!(
        pt.render(&only_the_mask)
            .expect_err("a stub for a tool use")
            .code(),
        "FORMAT_UNSUPPORTED"
    );
    // The foreign turn after the mask: the rendering meets the mask first, the view's error
    // is still the one said.
    let both = view(vec![
        turns[0].clone(),
        masked_call,
        turns[2].clone(),
        foreign,
    ]);
    let e = pt.render(&both).expect_err("a turn of another transcript");
    assert_eq!(e.code(), "FORMAT_VIEW_MISMATCH");
    assert_eq!(e.details()["turn_id"], "elsewhere");
}

#[test]
fn a_view_of_another_transcript_is_refused() {
    let a =
        ProviderTranscript::parse(Format::OpenAiChat, &example(Format::OpenAiChat)).expect("valid");
    let b =
        ProviderTranscript::parse(Format::Anthropic, &example(Format::Anthropic)).expect("valid");
    let e = a
        .render(b.transcript())
        .expect_err("m2.0 is not a chat turn");
    assert_eq!(e.code(), "FORMAT_VIEW_MISMATCH");
    assert_eq!(e.details()["turn_id"], "system");
    // Reordered turns are refused too.
    let mut turns = a.transcript().turns().to_vec();
    turns.swap(1, 2);
    let view = Transcript::new(turns).expect("unique ids");
    assert_eq!(
        a.render(&view).expect_err("reordered").code(),
        "FORMAT_VIEW_MISMATCH"
    );
    // Summaries must be supplied: the plan's requests reach the caller.
    let plan = SummarizingPolicy::new(PROMPT)
        .expect("valid")
        .decide(
            a.transcript(),
            &CompactionBudget::new(600).with_protected_recent_turns(2),
        )
        .expect("plans");
    assert!(!plan.summarization_requests.is_empty());
    let e = a.apply(&plan, &BTreeMap::new()).expect_err("missing");
    assert_eq!(e.code(), "COMPACTION_SUMMARY_MISSING");
}

#[test]
fn thinking_whose_type_is_written_with_escapes_is_still_found_after_a_change() {
    use cutctx_formats::{ReasoningMode, stale_reasoning};
    // `\u0074hinking` is "thinking", as type and key: the text path must still find the block.
    let result = "r".repeat(4000);
    let text = format!(
        r#"{{"messages":[{{"role":"user","content":"go"}},{{"role":"assistant","content":[{{"type":"tool_use","id":"t0","name":"f","input":{{}}}}]}},{{"role":"user","content":[{{"type":"tool_result","tool_use_id":"t0","content":"{result}"}}]}},{{"role":"assistant","content":[{{"type":"\u0074hinking","\u0074hinking":"hmm","signature":"s"}},{{"type":"tool_use","id":"t1","name":"f","input":{{}}}}]}},{{"role":"user","content":[{{"type":"tool_result","tool_use_id":"t1","content":"ok"}}]}}]}}"#
    );
    let input: Value = serde_json::from_str(&text).expect("json");
    let estimator = cutctx_policies::CharRatioEstimator::default();
    let mut pt = ProviderTranscript::from_text_with(Format::Anthropic, &text, &estimator)
        .expect("the text path reads it");
    pt.set_reasoning(ReasoningMode::Strip);
    let policy = ObservationMaskingPolicy::new(0).expect("valid");
    let plan = policy
        .decide(
            pt.transcript(),
            &CompactionBudget::new(200).with_protected_recent_turns(2),
        )
        .expect("plans");
    let out = pt
        .apply_text(&plan, &std::collections::BTreeMap::new(), &text)
        .expect("applies");
    let output: Value = serde_json::from_str(&out.text).expect("json");
    assert_ne!(output, input, "the first result is masked");
    assert_eq!(out.reasoning.invalidated.len(), 1, "{}", out.text);
    assert!(stale_reasoning(Format::Anthropic, &input, &output).is_empty());
}
