//! Properties over random provider transcripts, budgets and policies: no output ever has an
//! orphaned call or result, every output passes its validator, Anthropic outputs only have
//! same-role neighbours that were neighbours in the input, and a budget that fits changes
//! nothing.

use cutctx_formats::{Format, ProviderTranscript, validate};
use cutctx_model::CompactionBudget;
use proptest::prelude::*;
use serde_json::{Value, json};

use crate::{compact, list, orphans, policies};

/// One step of a random conversation.
#[derive(Debug, Clone)]
enum Step {
    /// A user message, possibly with an image.
    User { len: usize, image: bool },
    /// A plain answer, possibly after reasoning or thinking.
    Answer { len: usize, reasoning: bool },
    /// An assistant message with parallel calls, then every result.
    Tools {
        /// The results' lengths: one call each.
        results: Vec<usize>,
        /// How the results are displaced: rotated by this, and reversed when odd.
        shuffle: usize,
        reasoning: bool,
        text: bool,
        /// Anthropic: a text block after the results; Responses: calls and outputs interleaved.
        extra: bool,
    },
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        1 => (1..400_usize, any::<bool>()).prop_map(|(len, image)| Step::User { len, image }),
        1 => (1..400_usize, any::<bool>()).prop_map(|(len, reasoning)| Step::Answer { len, reasoning }),
        3 => (
            proptest::collection::vec(1..3000_usize, 1..4),
            any::<usize>(),
            any::<bool>(),
            any::<bool>(),
            any::<bool>()
        )
            .prop_map(|(results, shuffle, reasoning, text, extra)| Step::Tools {
                results,
                shuffle,
                reasoning,
                text,
                extra,
            }),
    ]
}

/// A conversation: it opens with a user message.
fn conversation() -> impl Strategy<Value = Vec<Step>> {
    (1..400_usize, proptest::collection::vec(step(), 0..14)).prop_map(|(len, rest)| {
        let mut steps = vec![Step::User { len, image: false }];
        steps.extend(rest);
        steps
    })
}

fn order(n: usize, shuffle: usize) -> Vec<usize> {
    let mut o: Vec<usize> = (0..n).map(|j| (j + shuffle) % n).collect();
    if shuffle % 2 == 1 {
        o.reverse();
    }
    o
}

fn text(tag: &str, len: usize) -> String {
    let mut s = format!("{tag}: ");
    while s.len() < len {
        s.push_str("lorem ipsum ");
    }
    s
}

fn chat(steps: &[Step]) -> Value {
    let mut m = vec![json!({"role": "system", "content": "Be careful."})];
    for (k, s) in steps.iter().enumerate() {
        match s {
            Step::User { len, image } => m.push(if *image {
                json!({"role": "user", "content": [{"type": "text", "text": text("u", *len)}, {"type": "image_url", "image_url": {"url": "https://example.invalid/i.png"}}]})
            } else {
                json!({"role": "user", "content": text("u", *len)})
            }),
            Step::Answer { len, .. } => m.push(json!({"role": "assistant", "content": text("a", *len)})),
            Step::Tools { results, shuffle, text: t, .. } => {
                // Ids are reused from step to step, as some models do.
                let calls: Vec<Value> = (0..results.len())
                    .map(|j| json!({"id": format!("c{j}"), "type": "function", "function": {"name": "f", "arguments": format!("{{\"step\":{k}}}")}}))
                    .collect();
                let content = if *t { json!(text("a", 40)) } else { Value::Null };
                m.push(json!({"role": "assistant", "content": content, "tool_calls": calls}));
                for j in order(results.len(), *shuffle) {
                    m.push(json!({"role": "tool", "tool_call_id": format!("c{j}"), "content": text("r", results[j])}));
                }
            }
        }
    }
    json!({"model": "gpt-4.1", "messages": m})
}

fn responses(steps: &[Step]) -> Value {
    let mut items = Vec::new();
    let rs = |k: usize| json!({"type": "reasoning", "id": format!("rs_{k}"), "summary": [{"type": "summary_text", "text": "thinking"}], "encrypted_content": "gAAA"});
    for (k, s) in steps.iter().enumerate() {
        match s {
            Step::User { len, image } => items.push(if *image {
                json!({"role": "user", "content": [{"type": "input_text", "text": text("u", *len)}, {"type": "input_image", "image_url": "https://example.invalid/i.png"}]})
            } else {
                json!({"role": "user", "content": text("u", *len)})
            }),
            Step::Answer { len, reasoning } => {
                if *reasoning {
                    items.push(rs(k));
                }
                items.push(json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text("a", *len)}]}));
            }
            Step::Tools { results, shuffle, reasoning, text: t, extra } => {
                if *reasoning {
                    items.push(rs(k));
                }
                if *t {
                    items.push(json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text("a", 40)}]}));
                }
                let id = |j: usize| format!("s{k}c{j}");
                let call = |j: usize| json!({"type": "function_call", "call_id": id(j), "name": "f", "arguments": "{}"});
                let output = |j: usize| json!({"type": "function_call_output", "call_id": id(j), "output": text("r", results[j])});
                if *extra {
                    for j in 0..results.len() {
                        items.push(call(j));
                        items.push(output(j));
                    }
                } else {
                    for j in 0..results.len() {
                        items.push(call(j));
                    }
                    for j in order(results.len(), *shuffle) {
                        items.push(output(j));
                    }
                }
            }
        }
    }
    json!({"model": "o4-mini", "instructions": "Be careful.", "input": items})
}

fn anthropic(steps: &[Step]) -> Value {
    let mut m = Vec::new();
    let thinking = || json!({"type": "thinking", "thinking": "hmm", "signature": "sig"});
    for s in steps {
        match s {
            Step::User { len, image } => m.push(if *image {
                json!({"role": "user", "content": [{"type": "text", "text": text("u", *len), "cache_control": {"type": "ephemeral"}}, {"type": "image", "source": {"type": "url", "url": "https://example.invalid/i.png"}}]})
            } else {
                json!({"role": "user", "content": text("u", *len)})
            }),
            Step::Answer { len, reasoning } => {
                let mut blocks = Vec::new();
                if *reasoning {
                    blocks.push(thinking());
                }
                blocks.push(json!({"type": "text", "text": text("a", *len)}));
                m.push(json!({"role": "assistant", "content": blocks}));
            }
            Step::Tools { results, shuffle, reasoning, text: t, extra } => {
                let mut blocks = Vec::new();
                if *reasoning {
                    blocks.push(thinking());
                }
                if *t {
                    blocks.push(json!({"type": "text", "text": text("a", 40)}));
                }
                for j in 0..results.len() {
                    blocks.push(json!({"type": "tool_use", "id": format!("t{j}"), "name": "f", "input": {}}));
                }
                m.push(json!({"role": "assistant", "content": blocks}));
                let mut answers: Vec<Value> = order(results.len(), *shuffle)
                    .into_iter()
                    .map(|j| json!({"type": "tool_result", "tool_use_id": format!("t{j}"), "content": text("r", results[j])}))
                    .collect();
                if *extra {
                    answers.push(json!({"type": "text", "text": "continue"}));
                }
                m.push(json!({"role": "user", "content": answers}));
            }
        }
    }
    json!({"model": "claude-sonnet-4-5", "max_tokens": 1024, "system": "Be careful.", "messages": m})
}

/// A message with the content of each of its `tool_result` blocks replaced by null.
fn blank_results(m: &Value) -> Value {
    let mut m = m.clone();
    if let Some(Value::Array(blocks)) = m.get_mut("content") {
        for b in blocks {
            if b["type"] == "tool_result" {
                b["content"] = Value::Null;
            }
        }
    }
    m
}

/// A message without its thinking and redacted thinking blocks.
fn without_thinking(m: &Value) -> Value {
    let mut m = m.clone();
    if let Some(Value::Array(blocks)) = m.get_mut("content") {
        blocks.retain(|b| b["type"] != "thinking" && b["type"] != "redacted_thinking");
    }
    m
}

/// A message's content as blocks: string content is one text block.
fn blocks_of(m: &Value) -> Vec<Value> {
    match &m["content"] {
        Value::Array(b) => b.clone(),
        Value::String(t) if !t.is_empty() => vec![json!({"type": "text", "text": t})],
        _ => Vec::new(),
    }
}

/// Compacts `doc` under the given budget and policy, and checks every property.
fn check(
    format: Format,
    doc: &Value,
    fraction: u64,
    protected: u64,
    policy: usize,
) -> Result<(), TestCaseError> {
    validate(format, doc).map_err(|v| TestCaseError::fail(format!("generated: {v}")))?;
    let pt =
        ProviderTranscript::parse(format, doc).map_err(|e| TestCaseError::fail(e.to_string()))?;
    let total = pt.transcript().token_estimate();
    let budget =
        CompactionBudget::new(total * fraction / 100).with_protected_recent_turns(protected);
    let policies = policies();
    let (name, policy) = &policies[policy % policies.len()];
    // The text path, on the request indented, agrees with the value path.
    let text = serde_json::to_string_pretty(doc).map_err(|e| TestCaseError::fail(e.to_string()))?;
    crate::compare_text(format, &text, policy.as_ref(), &budget)
        .map_err(|e| TestCaseError::fail(format!("{name}: text path: {e}")))?;
    let out = compact(&pt, policy.as_ref(), &budget)
        .map_err(|e| TestCaseError::fail(format!("{name}: {e} {:?}", e.details())))?;
    let Some(out) = out else {
        return Ok(());
    };
    prop_assert!(validate(format, &out.document).is_ok());
    // No thinking block or reasoning item is sent after the first changed message.
    let stale = cutctx_formats::stale_reasoning(format, doc, &out.document);
    prop_assert!(stale.is_empty(), "{name}: stale reasoning {stale:?}");
    let problems = orphans(format, &out.document);
    prop_assert!(problems.is_empty(), "{name}: {problems:?}");
    if fraction >= 100 {
        prop_assert_eq!(&out.document, doc);
    }
    if format == Format::Anthropic {
        let input = list(format, doc);
        let output = list(format, &out.document);
        prop_assert_eq!(output[0]["role"].as_str(), Some("user"));
        // Messages are told apart with their results' contents blanked, as masks change those,
        // and without their thinking, which compaction strips after the first change.
        let input: Vec<Value> = input
            .iter()
            .map(|m| without_thinking(&blank_results(m)))
            .collect();
        // A merged message ends with the blocks of its last input message and starts with
        // those of its first: same-role neighbours must have met there in the input.
        for w in output.windows(2) {
            if w[0]["role"] == w[1]["role"] {
                let (a, b) = (
                    blocks_of(&without_thinking(&blank_results(&w[0]))),
                    blocks_of(&without_thinking(&blank_results(&w[1]))),
                );
                let met = input.windows(2).any(|iw| {
                    let (x, y) = (blocks_of(&iw[0]), blocks_of(&iw[1]));
                    iw[0]["role"] == w[0]["role"]
                        && iw[1]["role"] == w[1]["role"]
                        && !x.is_empty()
                        && !y.is_empty()
                        && a.ends_with(&x)
                        && b.starts_with(&y)
                });
                prop_assert!(
                    met,
                    "{name}: two {} messages meet that did not in the input",
                    w[0]["role"]
                );
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn openai_chat_outputs_never_orphan(steps in conversation(), fraction in 0..=110_u64, protected in 0..5_u64, policy in 0..5_usize) {
        check(Format::OpenAiChat, &chat(&steps), fraction, protected, policy)?;
    }

    #[test]
    fn openai_responses_outputs_never_orphan(steps in conversation(), fraction in 0..=110_u64, protected in 0..5_u64, policy in 0..5_usize) {
        check(Format::OpenAiResponses, &responses(&steps), fraction, protected, policy)?;
    }

    #[test]
    fn anthropic_outputs_never_orphan(steps in conversation(), fraction in 0..=110_u64, protected in 0..5_u64, policy in 0..5_usize) {
        check(Format::Anthropic, &anthropic(&steps), fraction, protected, policy)?;
    }
}
