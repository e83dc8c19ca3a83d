//! The request shapes today's agents send (December 2026), compacted: Anthropic's
//! mid-conversation system messages and compaction blocks, and the roles, blocks and items a
//! format does not know, each carried untouched in its place while compaction goes on around it.

use cutctx_formats::{Format, ProviderTranscript, validate};
use cutctx_model::CompactionBudget;
use serde_json::Value;

use crate::{compact, list, orphans, policies};

/// A corpus request, by file name.
fn corpus_file(format: Format, name: &str) -> (String, Value) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/corpus")
        .join(format.as_str())
        .join(name);
    let text = std::fs::read_to_string(&path).expect("the corpus file reads");
    let value = serde_json::from_str(&text).expect("the corpus file is JSON");
    (text, value)
}

/// The messages of `input` that compaction must carry untouched: `untouchable(m)` says which.
fn carried(input: &[Value], untouchable: impl Fn(&Value) -> bool) -> Vec<Value> {
    input.iter().filter(|m| untouchable(m)).cloned().collect()
}

/// `wanted`, in order, is a subsequence of `out`.
fn in_order(wanted: &[Value], out: &[Value]) -> bool {
    let mut rest = out.iter();
    wanted.iter().all(|w| rest.any(|o| o == w))
}

/// Compacts `document` with every policy at budgets from a tenth of its size to all of it,
/// and checks that every output is valid, orphan-free and holds every message `untouchable`
/// picks, unchanged and in order. Returns how many outputs changed something.
fn compacts_around(
    format: Format,
    document: &Value,
    untouchable: impl Fn(&Value) -> bool,
) -> usize {
    let pt = ProviderTranscript::parse(format, document).expect("valid");
    let total = pt.transcript().token_estimate();
    let wanted = carried(&list(format, document), &untouchable);
    assert!(!wanted.is_empty(), "the request has nothing to carry");
    let mut changed = 0;
    for (name, policy) in policies() {
        for step in 1..=10_u64 {
            let budget = CompactionBudget::new(total * step / 10).with_protected_recent_turns(1);
            let Some(out) = compact(&pt, policy.as_ref(), &budget)
                .unwrap_or_else(|e| panic!("{name} / {step}: {e} {:?}", e.details()))
            else {
                continue;
            };
            let at = format!("{name} at {step}/10");
            validate(format, &out.document).unwrap_or_else(|v| panic!("{at}: {v}"));
            assert!(orphans(format, &out.document).is_empty(), "{at}");
            let messages = list(format, &out.document);
            assert!(
                in_order(&wanted, &messages),
                "{at}: a carried message moved or changed: {:?}",
                messages
                    .iter()
                    .map(|m| (role(m), m.to_string().len()))
                    .collect::<Vec<_>>()
            );
            changed += usize::from(out.document != *document);
        }
    }
    changed
}

fn role(m: &Value) -> &str {
    m.get("role").and_then(Value::as_str).unwrap_or("")
}

fn has_block(m: &Value, kinds: &[&str]) -> bool {
    m.get("content")
        .and_then(Value::as_array)
        .is_some_and(|blocks| {
            blocks
                .iter()
                .any(|b| kinds.contains(&b.get("type").and_then(Value::as_str).unwrap_or("")))
        })
}

/// Claude Code's shape: mid-conversation system messages after tool results, a compaction
/// block, a tool-set change, a block type and a role cutctx does not know, all among tool
/// calls. Every output keeps each of them, in place; compaction still happens.
#[test]
fn anthropic_system_messages_and_unknown_shapes_are_carried_while_compaction_goes_on() {
    let (_, document) = corpus_file(Format::Anthropic, "claude-code-today.json");
    let untouchable = |m: &Value| {
        matches!(role(m), "system" | "critic") || has_block(m, &["compaction", "tool_addition"])
    };
    let changed = compacts_around(Format::Anthropic, &document, untouchable);
    assert!(changed > 10, "only {changed} outputs were compacted");
}

/// A block type cutctx does not know is carried in its message, unchanged, by every policy
/// (the tool result beside it may still be masked).
#[test]
fn an_unknown_anthropic_block_stays_in_its_message() {
    let (_, document) = corpus_file(Format::Anthropic, "claude-code-today.json");
    let block = serde_json::json!({"type": "future_block", "payload": {"x": 1}});
    let pt = ProviderTranscript::parse(Format::Anthropic, &document).expect("valid");
    let total = pt.transcript().token_estimate();
    for (name, policy) in policies() {
        for step in 1..=10_u64 {
            let budget = CompactionBudget::new(total * step / 10).with_protected_recent_turns(1);
            let Ok(Some(out)) = compact(&pt, policy.as_ref(), &budget) else {
                continue;
            };
            let held = list(Format::Anthropic, &out.document)
                .iter()
                .filter_map(|m| m.get("content").and_then(Value::as_array))
                .flatten()
                .filter(|b| **b == block)
                .count();
            assert_eq!(held, 1, "{name} at {step}/10");
        }
    }
}

/// A system message is never first, and never follows an assistant message, even where
/// compaction removed the user message before it: the lead-in opens the way.
#[test]
fn a_compacted_anthropic_request_places_every_system_message_validly() {
    let (_, document) = corpus_file(Format::Anthropic, "claude-code-today.json");
    let pt = ProviderTranscript::parse(Format::Anthropic, &document).expect("valid");
    let total = pt.transcript().token_estimate();
    for (name, policy) in policies() {
        for step in 1..=10_u64 {
            let budget = CompactionBudget::new(total * step / 10);
            let Ok(Some(out)) = compact(&pt, policy.as_ref(), &budget) else {
                continue;
            };
            let messages = list(Format::Anthropic, &out.document);
            assert_eq!(role(&messages[0]), "user", "{name} at {step}/10");
            for pair in messages.windows(2) {
                if role(&pair[1]) == "system" {
                    assert!(
                        matches!(role(&pair[0]), "user" | "system"),
                        "{name} at {step}/10: a system message after a {} message",
                        role(&pair[0])
                    );
                }
            }
        }
    }
}

/// The request's other fields (thinking, context management, diagnostics, output config,
/// metadata) and every kept number (a 23-digit integer, `1e2`, `-0`) leave as they came.
#[test]
fn anthropic_fields_and_numbers_leave_as_they_came() {
    let (text, document) = corpus_file(Format::Anthropic, "claude-code-today.json");
    let pt = ProviderTranscript::parse(Format::Anthropic, &document).expect("valid");
    let budget = CompactionBudget::new(pt.transcript().token_estimate() / 2);
    let masking = &policies()[1].1;
    let out = compact(&pt, masking.as_ref(), &budget)
        .expect("compacts")
        .expect("fits");
    assert_ne!(out.document, document, "nothing was compacted");
    for key in [
        "thinking",
        "context_management",
        "diagnostics",
        "output_config",
        "metadata",
        "tools",
        "system",
    ] {
        assert_eq!(out.document.get(key), document.get(key), "{key}");
    }
    let written =
        cutctx_formats::to_string_as_written(Format::Anthropic, &out.document, &text, None, false)
            .expect("writes");
    for number in ["12345678901234567890123", "1e2", "-0"] {
        assert!(text.contains(number), "the corpus holds {number}");
        assert!(written.contains(&format!(": {number}")), "{number} changed");
    }
}

/// Codex's shape: a provider `compaction` item, a configuration update, added tools, an item
/// reference, an item type and a role cutctx does not know, all among reasoning and calls.
/// Every output keeps each of them, unchanged and in order; compaction still happens.
#[test]
fn responses_opaque_items_are_carried_while_compaction_goes_on() {
    let (_, document) = corpus_file(Format::OpenAiResponses, "codex-today.json");
    let untouchable = |m: &Value| {
        matches!(
            m.get("type").and_then(Value::as_str),
            Some(
                "compaction"
                    | "configuration_update"
                    | "additional_tools"
                    | "item_reference"
                    | "future_item"
            )
        ) || role(m) == "critic"
    };
    let changed = compacts_around(Format::OpenAiResponses, &document, untouchable);
    assert!(changed > 10, "only {changed} outputs were compacted");
    let found = cutctx_formats::opaque_items(Format::OpenAiResponses, &document);
    let reasons: Vec<&str> = found.iter().map(|o| o.reason).collect();
    assert_eq!(
        reasons,
        [
            "compaction",
            "configuration",
            "configuration",
            "unknown_item",
            "unknown_role",
            "item_reference"
        ]
    );
}

/// A Chat message of a role the format does not name, among tool calls, is carried in place.
#[test]
fn a_chat_message_of_an_unknown_role_is_carried_while_compaction_goes_on() {
    let (_, document) = corpus_file(Format::OpenAiChat, "unknown-role-among-calls.json");
    let changed = compacts_around(Format::OpenAiChat, &document, |m| role(m) == "critic");
    assert!(changed > 5, "only {changed} outputs were compacted");
    let found = cutctx_formats::opaque_items(Format::OpenAiChat, &document);
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].reason, "unknown_role");
}

/// An assistant message whose reasoning item was left out loses its `id`, and with it the
/// output-message shape: it leaves as the input message the API documents (role and string
/// content, no `status`), whatever `annotations` and `logprobs` its parts had.
#[test]
fn an_unlinked_responses_answer_takes_the_documented_input_shape() {
    let (_, document) = corpus_file(Format::OpenAiResponses, "codex-today.json");
    let pt = ProviderTranscript::parse(Format::OpenAiResponses, &document).expect("valid");
    let budget = CompactionBudget::new(pt.transcript().token_estimate() / 3);
    let drop_oldest = &policies()[0].1;
    let out = compact(&pt, drop_oldest.as_ref(), &budget)
        .expect("compacts")
        .expect("fits");
    let answer = list(Format::OpenAiResponses, &out.document)
        .into_iter()
        .find(|m| role(m) == "assistant")
        .expect("the answer is kept");
    assert!(answer.get("id").is_none(), "{answer}");
    assert!(answer.get("status").is_none(), "{answer}");
    assert_eq!(answer["content"], "Found it: the order id overflowed.");
}

/// A request whose last item is a `compaction_trigger` asks the provider to compact it.
#[test]
fn a_compaction_trigger_last_asks_the_provider() {
    let (_, mut document) = corpus_file(Format::OpenAiResponses, "codex-today.json");
    assert!(!cutctx_formats::asks_provider_to_compact(
        Format::OpenAiResponses,
        &document
    ));
    document["input"]
        .as_array_mut()
        .expect("items")
        .push(serde_json::json!({"type": "compaction_trigger"}));
    assert!(cutctx_formats::asks_provider_to_compact(
        Format::OpenAiResponses,
        &document
    ));
    assert!(!cutctx_formats::asks_provider_to_compact(
        Format::Anthropic,
        &document
    ));
}
