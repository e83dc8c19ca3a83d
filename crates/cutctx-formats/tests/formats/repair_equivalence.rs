//! [`repair`] against its definition, the drop-and-revalidate loop of `repair_oracle`: over
//! random histories of every format (orphan calls and results, duplicate ids and results,
//! misplaced reasoning, empty messages, null statuses, and now and then a violation no drop
//! fixes), both give the same document and repairs, or the same error.
//!
//! Ids come from a tiny alphabet so that calls and results meet, miss and collide often.

use cutctx_formats::{Format, repair};
use proptest::prelude::*;
use serde_json::{Value, json};

use crate::repair_oracle::repair_by_loop;

const IDS: [&str; 4] = ["a", "b", "c", "d"];

fn id() -> impl Strategy<Value = &'static str> {
    prop::sample::select(&IDS[..])
}

fn ids() -> impl Strategy<Value = Vec<&'static str>> {
    prop::collection::vec(id(), 0..4)
}

/// A Chat message.
pub(crate) fn chat_message() -> impl Strategy<Value = Value> {
    prop_oneof![
        2 => prop::sample::select(&["system", "developer", "user"][..])
            .prop_map(|role| json!({"role": role, "content": "hi"})),
        3 => (ids(), 0..4_u8, any::<bool>()).prop_map(|(ids, content, refusal)| {
            let mut m = json!({"role": "assistant"});
            match content {
                0 => {}
                1 => m["content"] = Value::Null,
                2 => m["content"] = json!([]),
                _ => m["content"] = json!("sure"),
            }
            if refusal {
                m["refusal"] = json!("no");
            }
            if !ids.is_empty() {
                let calls: Vec<Value> = ids
                    .iter()
                    .map(|id| json!({"id": id, "type": "function", "function": {"name": "f", "arguments": "{}"}}))
                    .collect();
                m["tool_calls"] = Value::Array(calls);
            } else if content == 3 {
                m["tool_calls"] = json!([]);
            }
            m
        }),
        5 => id().prop_map(|id| json!({"role": "tool", "tool_call_id": id, "content": "42"})),
        // Violations no drop fixes.
        1 => prop_oneof![
            Just(json!({"role": "tool", "content": "no id"})),
            Just(json!({"role": "robot", "content": "x"})),
            Just(json!({"role": "assistant", "tool_calls": [{"id": "a"}, {"type": "function"}]})),
            Just(json!({"role": "user", "content": 7})),
            Just(json!("not an object")),
        ],
    ]
}

/// A Responses item, with a null status now and then.
pub(crate) fn responses_item() -> impl Strategy<Value = Value> {
    let item = prop_oneof![
        2 => prop::sample::select(&["system", "developer", "user", "assistant"][..])
            .prop_map(|role| json!({"type": "message", "role": role, "content": "hi"})),
        1 => Just(json!({"role": "user", "content": [{"type": "input_text", "text": "hi"}]})),
        3 => Just(json!({"type": "reasoning", "summary": []})),
        4 => (prop::sample::select(&["function_call", "custom_tool_call"][..]), id())
            .prop_map(|(ty, id)| json!({"type": ty, "call_id": id, "name": "f"})),
        4 => (prop::sample::select(&["function_call_output", "custom_tool_call_output"][..]), id())
            .prop_map(|(ty, id)| json!({"type": ty, "call_id": id, "output": "42"})),
        1 => Just(json!({"type": "web_search_call", "id": "ws"})),
        // Violations no drop fixes (shape errors, found before anything else).
        1 => prop_oneof![
            Just(json!({"type": "function_call", "name": "f"})),
            Just(json!({"role": "robot", "content": "x"})),
            Just(json!({"type": 3})),
        ],
    ];
    (item, 0..6_u8).prop_map(|(mut item, status)| {
        if let Value::Object(map) = &mut item {
            match status {
                0 => {
                    map.insert("status".into(), Value::Null);
                }
                1 => {
                    map.insert("status".into(), json!("completed"));
                }
                _ => {}
            }
        }
        item
    })
}

/// An Anthropic message.
pub(crate) fn anthropic_message() -> impl Strategy<Value = Value> {
    let user_block = prop_oneof![
        4 => id().prop_map(|id| json!({"type": "tool_result", "tool_use_id": id, "content": "42"})),
        2 => Just(json!({"type": "text", "text": "hi"})),
        1 => Just(json!({"type": "image", "source": {"type": "url", "url": "u"}})),
    ];
    let assistant_block = prop_oneof![
        4 => id().prop_map(|id| json!({"type": "tool_use", "id": id, "name": "f", "input": {}})),
        2 => Just(json!({"type": "text", "text": "ok"})),
        1 => Just(json!({"type": "thinking", "thinking": "hmm", "signature": "s"})),
        1 => id().prop_map(|id| json!({"type": "tool_result", "tool_use_id": id, "content": "x"})),
    ];
    prop_oneof![
        4 => prop::collection::vec(user_block, 0..4)
            .prop_map(|b| json!({"role": "user", "content": b})),
        1 => prop::sample::select(&["", "hi"][..]).prop_map(|c| json!({"role": "user", "content": c})),
        4 => prop::collection::vec(assistant_block, 0..4)
            .prop_map(|b| json!({"role": "assistant", "content": b})),
        1 => prop::sample::select(&["", "ok"][..])
            .prop_map(|c| json!({"role": "assistant", "content": c})),
        // Violations no drop fixes.
        1 => prop_oneof![
            Just(json!({"role": "user", "content": [{"type": "tool_use", "id": "a", "name": "f", "input": {}}]})),
            Just(json!({"role": "system", "content": "x"})),
            Just(json!({"role": "user", "content": [{"type": "tool_result", "content": "no id"}]})),
            Just(json!({"role": "user", "content": null})),
        ],
    ]
}

/// The list, bare or in a request object.
pub(crate) fn wrap(format: Format, list: Vec<Value>, bare: bool) -> Value {
    if bare {
        return Value::Array(list);
    }
    match format {
        Format::OpenAiChat => json!({"model": "m", "messages": list}),
        Format::OpenAiResponses => {
            json!({"model": "m", "instructions": "Be brief.", "input": list})
        }
        Format::Anthropic => json!({"model": "m", "system": "Be brief.", "messages": list}),
    }
}

fn same_as_the_loop(format: Format, document: &Value) -> Result<(), TestCaseError> {
    let new = repair(format, document.clone());
    let old = repair_by_loop(format, document.clone());
    prop_assert_eq!(new, old, "{}", document);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1500))]

    #[test]
    fn chat_repair_equals_the_loop(list in prop::collection::vec(chat_message(), 0..24), bare in any::<bool>()) {
        same_as_the_loop(Format::OpenAiChat, &wrap(Format::OpenAiChat, list, bare))?;
    }

    #[test]
    fn responses_repair_equals_the_loop(list in prop::collection::vec(responses_item(), 0..24), bare in any::<bool>()) {
        same_as_the_loop(Format::OpenAiResponses, &wrap(Format::OpenAiResponses, list, bare))?;
    }

    #[test]
    fn anthropic_repair_equals_the_loop(list in prop::collection::vec(anthropic_message(), 0..24), bare in any::<bool>()) {
        same_as_the_loop(Format::Anthropic, &wrap(Format::Anthropic, list, bare))?;
    }
}

/// The generators reach the cases the property is about: documents repair repairs, with
/// every kind of drop, and documents it refuses.
#[test]
fn the_generators_reach_every_kind_of_drop_and_refusals() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    use std::collections::BTreeSet;

    let mut runner = TestRunner::deterministic();
    let mut kinds = BTreeSet::new();
    let mut refused = 0;
    for format in Format::ALL {
        let strategy = match format {
            Format::OpenAiChat => prop::collection::vec(chat_message(), 0..24).boxed(),
            Format::OpenAiResponses => prop::collection::vec(responses_item(), 0..24).boxed(),
            Format::Anthropic => prop::collection::vec(anthropic_message(), 0..24).boxed(),
        };
        for _ in 0..300 {
            let list = strategy.new_tree(&mut runner).expect("a value").current();
            match repair(format, wrap(format, list, false)) {
                Ok((_, repairs)) => kinds.extend(repairs.iter().map(|r| r.kind.as_str())),
                Err(_) => refused += 1,
            }
        }
    }
    assert_eq!(kinds.len(), 6, "{kinds:?}");
    assert!(refused > 0);
}
