//! `--summarizer`: agent loops of 100 calls through the proxy, in each format, streamed and
//! not, against a scripted provider that implements the summarizing calls as the providers
//! document them and refuses (400) any that does not have their shape:
//!
//! * Anthropic on-demand compaction: a top-level `compaction` object, the
//!   `compact-2026-09-04` beta, not streamed; it answers `stop_reason: "compaction"` with one
//!   signed `compaction` block;
//! * OpenAI Responses: a final `compaction_trigger` input item (the only one), not streamed; it
//!   answers with one encrypted `compaction` item;
//! * Chat Completions (no native compaction): the request exactly as the proxy sends it, plus
//!   the summarizing instruction as the last message, not streamed, its output capped.
//!
//! Every later request must be valid (cutctx's own validation), fit the window, carry the
//! compaction first, keep its prefix between firings, and re-send a signed reasoning block
//! only after the prefix it was made after, or after a native compaction followed by the
//! unchanged kept turns (the condition the providers state).

mod common;

use std::collections::BTreeSet;

use common::{Received, Reply, Upstream, call, proxy};
use cutctx::formats::Format;
use serde_json::{Value, json};

const WINDOW: u64 = 3000;
const BETA: &str = "compact-2026-09-04";

fn result_text(i: usize) -> String {
    format!("result {i}: ") + &"lorem ipsum dolor sit amet ".repeat(20)
}

/// A simulated agent: the whole history, as a client keeps it.
struct Agent {
    format: Format,
    base: Value,
    history: Vec<Value>,
}

impl Agent {
    fn new(format: Format, streamed: bool) -> Self {
        let (mut base, history) = match format {
            Format::OpenAiChat => (
                json!({"model": "gpt-4o", "tools": [{"type": "function", "function": {"name": "read", "parameters": {"type": "object"}}}]}),
                vec![
                    json!({"role": "system", "content": "You are a careful agent."}),
                    json!({"role": "user", "content": "read the files"}),
                ],
            ),
            Format::OpenAiResponses => (
                json!({"model": "gpt-5", "instructions": "You are a careful agent.", "store": false}),
                vec![json!({"type": "message", "role": "user", "content": "read the files"})],
            ),
            Format::Anthropic => (
                json!({"model": "claude-sonnet-4-5", "max_tokens": 256, "system": "You are a careful agent.",
                       "thinking": {"type": "enabled", "budget_tokens": 1024}}),
                vec![json!({"role": "user", "content": "read the files"})],
            ),
        };
        if streamed {
            base["stream"] = Value::Bool(true);
        }
        Self {
            format,
            base,
            history,
        }
    }

    fn key(&self) -> &'static str {
        list_key(self.format)
    }

    fn request(&self) -> Vec<u8> {
        let mut r = self.base.clone();
        r[self.key()] = Value::from(self.history.clone());
        serde_json::to_vec(&r).expect("json")
    }

    /// The model's turn after call `i` and the next input: a tool call and its result, every
    /// tenth call an answer and a new question.
    fn advance(&mut self, i: usize) {
        let answer = i % 10 == 9;
        let h = &mut self.history;
        match self.format {
            Format::OpenAiChat => {
                if answer {
                    h.push(json!({"role": "assistant", "content": format!("answer {i}")}));
                    h.push(json!({"role": "user", "content": format!("question {i}")}));
                } else {
                    h.push(json!({"role": "assistant", "content": null, "tool_calls": [
                        {"id": format!("c{i}"), "type": "function", "function": {"name": "read", "arguments": format!("{{\"n\":{i}}}")}}]}));
                    h.push(json!({"role": "tool", "tool_call_id": format!("c{i}"), "content": result_text(i)}));
                }
            }
            Format::OpenAiResponses => {
                h.push(json!({"type": "reasoning", "id": format!("rs_{i}"), "summary": [], "encrypted_content": format!("sig-{i}")}));
                if answer {
                    h.push(json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": format!("answer {i}")}]}));
                    h.push(json!({"type": "message", "role": "user", "content": format!("question {i}")}));
                } else {
                    h.push(json!({"type": "function_call", "call_id": format!("c{i}"), "name": "read", "arguments": format!("{{\"n\":{i}}}")}));
                    h.push(json!({"type": "function_call_output", "call_id": format!("c{i}"), "output": result_text(i)}));
                }
            }
            Format::Anthropic => {
                let thinking = json!({"type": "thinking", "thinking": format!("thinking {i}"), "signature": format!("sig-{i}")});
                if answer {
                    h.push(json!({"role": "assistant", "content": [thinking, {"type": "text", "text": format!("answer {i}")}]}));
                    h.push(json!({"role": "user", "content": format!("question {i}")}));
                } else {
                    h.push(json!({"role": "assistant", "content": [thinking,
                        {"type": "tool_use", "id": format!("t{i}"), "name": "read", "input": {"n": i}}]}));
                    h.push(json!({"role": "user", "content": [
                        {"type": "tool_result", "tool_use_id": format!("t{i}"), "content": result_text(i)}]}));
                }
            }
        }
    }
}

fn list_key(format: Format) -> &'static str {
    match format {
        Format::OpenAiResponses => "input",
        Format::OpenAiChat | Format::Anthropic => "messages",
    }
}

fn path(format: Format) -> &'static str {
    match format {
        Format::OpenAiChat => "/v1/chat/completions",
        Format::OpenAiResponses => "/v1/responses",
        Format::Anthropic => "/v1/messages",
    }
}

/// Whether `doc` is a summarizing call, by the shape its provider documents.
fn is_summary(format: Format, doc: &Value) -> bool {
    let list = doc[list_key(format)]
        .as_array()
        .cloned()
        .unwrap_or_default();
    match format {
        Format::Anthropic => doc.get("compaction").is_some(),
        Format::OpenAiResponses => list.iter().any(|i| i["type"] == "compaction_trigger"),
        Format::OpenAiChat => list
            .last()
            .is_some_and(|m| m["content"] == cutctx::session::SUMMARY_INSTRUCTION),
    }
}

/// Why a summarizing call does not have its documented shape, if it does not.
fn summary_shape(format: Format, r: &Received, doc: &Value) -> Result<(), String> {
    if doc["stream"] != false {
        return Err("a summarizing call is not streamed".into());
    }
    let list = doc[list_key(format)]
        .as_array()
        .cloned()
        .unwrap_or_default();
    match format {
        Format::Anthropic => {
            let betas = r.header("anthropic-beta").unwrap_or("");
            if !betas.split(',').any(|b| b.trim() == BETA) {
                return Err(format!("no {BETA} beta: {betas:?}"));
            }
            if !doc["compaction"].is_object() || list.is_empty() {
                return Err("compaction is an object, with messages to compact".into());
            }
        }
        Format::OpenAiResponses => {
            let triggers = list
                .iter()
                .filter(|i| i["type"] == "compaction_trigger")
                .count();
            if triggers != 1
                || list.last().map(|i| &i["type"]) != Some(&json!("compaction_trigger"))
            {
                return Err("one compaction_trigger, the last input item".into());
            }
        }
        Format::OpenAiChat => {
            if doc["max_completion_tokens"].as_u64().is_none() {
                return Err("the summary's output is capped".into());
            }
        }
    }
    let mut body = doc.clone();
    if format == Format::OpenAiResponses
        && let Some(items) = body["input"].as_array_mut()
    {
        items.pop();
    }
    if format == Format::Anthropic {
        body.as_object_mut().map(|m| m.remove("compaction"));
    }
    cutctx::formats::validate(format, &body).map_err(|e| format!("not valid: {e}"))
}

/// The scripted provider's answer to a summarizing call `n`.
fn summary_answer(format: Format, n: usize) -> Value {
    match format {
        Format::Anthropic => {
            json!({"id": format!("msg_c{n}"), "type": "message", "role": "assistant",
            "model": "claude-sonnet-4-5", "stop_reason": "compaction",
            "content": [{"type": "compaction", "content": format!("summary {n}: the files read so far"), "signature": format!("cmp-{n}")}],
            "usage": {"input_tokens": 40, "cache_read_input_tokens": 2000, "output_tokens": 60}})
        }
        Format::OpenAiResponses => {
            json!({"id": format!("resp_c{n}"), "object": "response", "status": "completed",
            "output": [{"type": "compaction", "id": format!("cmp_{n}"), "encrypted_content": format!("enc-{n}")}],
            "usage": {"input_tokens": 2040, "input_tokens_details": {"cached_tokens": 2000}, "output_tokens": 60}})
        }
        Format::OpenAiChat => json!({"id": format!("chatcmpl-c{n}"), "object": "chat.completion",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": format!("## Task and constraints\nRead the files.\n## Next steps\nSummary {n}.")}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 2100, "prompt_tokens_details": {"cached_tokens": 2000}, "completion_tokens": 60}}),
    }
}

/// The scripted provider's answer to an agent's call: a short text, streamed when asked, with
/// no usage (a usage far from the estimate would recalibrate the window).
fn turn_answer(format: Format, streamed: bool) -> Reply {
    if !streamed {
        let body = match format {
            Format::Anthropic => {
                json!({"id": "msg", "type": "message", "role": "assistant", "content": [{"type": "text", "text": "ok"}],
                "stop_reason": "end_turn"})
            }
            Format::OpenAiResponses => {
                json!({"id": "resp", "object": "response", "status": "completed",
                "output": [{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "ok"}]}]})
            }
            Format::OpenAiChat => json!({"id": "c", "object": "chat.completion",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}]}),
        };
        return Reply::json(200, &body);
    }
    let events: Vec<String> = match format {
        Format::Anthropic => vec![
            "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg\",\"role\":\"assistant\",\"content\":[]}}\n\n".into(),
            "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n".into(),
            "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"ok\"}}\n\n".into(),
            "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n".into(),
            "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"}}\n\n".into(),
            "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n".into(),
        ],
        Format::OpenAiResponses => vec![
            "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"resp\",\"status\":\"in_progress\"}}\n\n".into(),
            "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"resp\",\"status\":\"completed\"}}\n\n".into(),
        ],
        Format::OpenAiChat => vec![
            "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"ok\"}}]}\n\n".into(),
            "data: [DONE]\n\n".into(),
        ],
    };
    Reply::Stream {
        headers: vec![("content-type".into(), "text/event-stream".into())],
        chunks: events.into_iter().map(String::into_bytes).collect(),
        gap: std::time::Duration::ZERO,
    }
}

fn metric(text: &str, name: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{name} ")))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

/// Whether the list holds a native compaction (an Anthropic message holding a `compaction`
/// block, a Responses `compaction` item), and where.
fn compactions(format: Format, list: &[Value]) -> Vec<usize> {
    list.iter()
        .enumerate()
        .filter(|(_, m)| match format {
            Format::Anthropic => m["content"]
                .as_array()
                .is_some_and(|c| c.iter().any(|b| b["type"] == "compaction")),
            Format::OpenAiResponses => m["type"] == "compaction",
            Format::OpenAiChat => false,
        })
        .map(|(i, _)| i)
        .collect()
}

/// The signature of a signed reasoning block in message `m`, if it has one.
fn signature(format: Format, m: &Value) -> Option<usize> {
    let sig = match format {
        Format::OpenAiResponses => m.get("encrypted_content").and_then(Value::as_str),
        Format::Anthropic => m["content"].as_array().and_then(|c| {
            c.iter()
                .filter(|b| b["type"] == "thinking")
                .find_map(|b| b.get("signature").and_then(Value::as_str))
        }),
        Format::OpenAiChat => None,
    }?;
    sig.strip_prefix("sig-")?.parse().ok()
}

/// One loop of `calls` calls through a proxy summarizing as `mode` says, from `ahead` of the
/// trigger; the checks of the module's header.
fn summarized_loop(format: Format, streamed: bool, mode: &str, ahead: f64) {
    let summaries = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = summaries.clone();
    let up = Upstream::start(move |r, _| {
        let doc = r.json();
        if is_summary(format, &doc) {
            let n = counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            return match summary_shape(format, r, &doc) {
                Ok(()) => Reply::json(200, &summary_answer(format, n)),
                Err(why) => Reply::json(400, &json!({"error": {"message": why}})),
            };
        }
        turn_answer(format, doc["stream"] == true)
    });
    let p = proxy(&up, |o| {
        o.window = Some(WINDOW);
        o.summarizer = mode.to_owned();
        o.summary_ahead = ahead;
        if format == Format::Anthropic {
            // As in the loops without summaries: a manual-thinking tool loop waits for its
            // answer before it fires.
            o.tuning.trigger = Some(0.5);
        }
    });
    let mut agent = Agent::new(format, streamed);
    let calls = 100;
    for i in 0..calls {
        let r = call(
            p.addr(),
            "POST",
            path(format),
            &[
                ("content-type", "application/json"),
                ("authorization", "Bearer sk-test"),
            ],
            &agent.request(),
        );
        assert_eq!(r.status, 200, "call {i}");
        assert!(r.complete, "call {i}: the answer came whole");
        agent.advance(i);
    }
    let received = up.requests();
    let (summary_calls, turns): (Vec<&Received>, Vec<&Received>) =
        received.iter().partition(|r| is_summary(format, &r.json()));
    assert_eq!(turns.len(), calls, "every call reached the provider once");
    for s in &summary_calls {
        assert_eq!(
            s.header("authorization"),
            Some("Bearer sk-test"),
            "a summary goes with the caller's own credential"
        );
        summary_shape(format, s, &s.json()).expect("the documented shape");
    }
    let key = list_key(format);
    let lists: Vec<Vec<Value>> = turns
        .iter()
        .map(|r| r.json()[key].as_array().expect("a list").clone())
        .collect();
    let estimator = cutctx::CharRatioEstimator::default();
    let mut breaks = 0;
    let mut carried = BTreeSet::new();
    for (j, r) in turns.iter().enumerate() {
        let doc = r.json();
        let tokens = cutctx::session::prompt_tokens(format, &doc, &estimator).expect("counted");
        assert!(tokens <= WINDOW, "call {j}: {tokens} over the window");
        if let Err(v) = cutctx::formats::validate(format, &doc) {
            panic!("call {j} is not valid: {v}");
        }
        let list = &lists[j];
        let at = compactions(format, list);
        assert!(at.len() <= 1, "call {j}: one compaction at most: {at:?}");
        if let Some(&k) = at.first() {
            assert_eq!(k, 0, "call {j}: the compaction goes first");
            carried.insert(j);
        }
        if j > 0 && !list.starts_with(&lists[j - 1]) {
            breaks += 1;
        }
        for (pos, m) in list.iter().enumerate() {
            let Some(n) = signature(format, m) else {
                continue;
            };
            let before = &list[..pos];
            let made_after = &lists[n][..];
            let same = before == made_after;
            // After a native compaction, the kept turns follow it unchanged.
            let kept = at.first() == Some(&0) && made_after.ends_with(&before[1..]);
            assert!(
                same || kept,
                "call {j}: signed block {n} follows a prefix other than its own or a compaction and the kept turns"
            );
        }
    }
    let m = call(p.addr(), "GET", "/metrics", &[], b"").text();
    let kind = match (format, mode) {
        (Format::OpenAiChat, _) | (_, "cached") => "cached",
        _ => "native",
    };
    let count = |outcome: &str| {
        metric(
            &m,
            &format!("cutctx_serve_summaries_total{{kind=\"{kind}\",outcome=\"{outcome}\"}}"),
        )
    };
    let firings = metric(&m, "cutctx_serve_firings_total");
    assert!(count("swapped") >= 1, "a summary was swapped in: {m}");
    assert_eq!(count("failed"), 0, "no summarizing call failed: {m}");
    assert_eq!(breaks, firings, "the prefix changes only at a firing");
    assert!(firings <= 30, "it fires rarely: {firings}");
    assert_eq!(metric(&m, "cutctx_serve_fail_open_total"), 0);
    assert!(metric(&m, "cutctx_serve_summary_cached_tokens_total") > 0);
    if kind == "native" {
        assert!(!carried.is_empty(), "later requests carry the compaction");
    }
}

#[test]
fn anthropic_native_compaction_through_the_proxy() {
    summarized_loop(Format::Anthropic, false, "auto", 0.8);
}

#[test]
fn anthropic_native_compaction_through_the_proxy_streamed() {
    summarized_loop(Format::Anthropic, true, "auto", 0.8);
}

#[test]
fn responses_compaction_trigger_through_the_proxy() {
    summarized_loop(Format::OpenAiResponses, false, "auto", 0.8);
}

#[test]
fn responses_compaction_trigger_through_the_proxy_streamed() {
    summarized_loop(Format::OpenAiResponses, true, "auto", 0.8);
}

#[test]
fn chat_cached_prefix_summaries_through_the_proxy() {
    summarized_loop(Format::OpenAiChat, false, "auto", 0.8);
}

#[test]
fn chat_cached_prefix_summaries_through_the_proxy_streamed() {
    summarized_loop(Format::OpenAiChat, true, "auto", 0.8);
}

#[test]
fn summaries_made_at_the_firing_call_are_swapped_in_too() {
    summarized_loop(Format::OpenAiChat, false, "auto", 1.0);
    summarized_loop(Format::OpenAiResponses, true, "native", 1.0);
}

#[test]
fn a_failing_summarizer_never_fails_a_call_the_policy_fires_instead() {
    let up = Upstream::start(move |r, _| {
        let doc = r.json();
        if is_summary(Format::OpenAiChat, &doc) {
            return Reply::json(500, &json!({"error": {"message": "down"}}));
        }
        turn_answer(Format::OpenAiChat, false)
    });
    let p = proxy(&up, |o| {
        o.window = Some(WINDOW);
        o.summarizer = "auto".to_owned();
    });
    let mut agent = Agent::new(Format::OpenAiChat, false);
    for i in 0..60 {
        let r = call(
            p.addr(),
            "POST",
            "/v1/chat/completions",
            &[],
            &agent.request(),
        );
        assert_eq!(r.status, 200, "call {i}");
        agent.advance(i);
    }
    let m = call(p.addr(), "GET", "/metrics", &[], b"").text();
    let failed = metric(
        &m,
        "cutctx_serve_summaries_total{kind=\"cached\",outcome=\"failed\"}",
    );
    let fallback = metric(
        &m,
        "cutctx_serve_summaries_total{kind=\"cached\",outcome=\"fallback\"}",
    );
    assert!(failed >= 1, "{m}");
    assert!(fallback >= 1, "the firing compacted with the policy: {m}");
    assert_eq!(metric(&m, "cutctx_serve_firings_total"), fallback);
}

#[test]
fn a_model_whose_provider_refuses_native_compaction_gets_cached_prefix_summaries() {
    let up = Upstream::start(move |r, _| {
        let doc = r.json();
        if doc.get("compaction").is_some() {
            return Reply::json(
                400,
                &json!({"type": "error", "error": {"type": "invalid_request_error", "message": "compaction is not supported for this model"}}),
            );
        }
        let asks_summary = doc["messages"]
            .as_array()
            .and_then(|l| l.last())
            .is_some_and(|m| m["content"][0]["text"] == cutctx::session::SUMMARY_INSTRUCTION);
        if asks_summary {
            return Reply::json(
                200,
                &json!({"type": "message", "role": "assistant", "stop_reason": "end_turn",
                    "content": [{"type": "text", "text": "## Task and constraints\nRead the files."}],
                    "usage": {"input_tokens": 10, "cache_read_input_tokens": 1500, "output_tokens": 30}}),
            );
        }
        turn_answer(Format::Anthropic, false)
    });
    let p = proxy(&up, |o| {
        o.window = Some(WINDOW);
        o.summarizer = "auto".to_owned();
        o.tuning.trigger = Some(0.5);
    });
    let mut agent = Agent::new(Format::Anthropic, false);
    for i in 0..100 {
        let r = call(p.addr(), "POST", "/v1/messages", &[], &agent.request());
        assert_eq!(r.status, 200, "call {i}");
        agent.advance(i);
    }
    let m = call(p.addr(), "GET", "/metrics", &[], b"").text();
    let count = |kind: &str, outcome: &str| {
        metric(
            &m,
            &format!("cutctx_serve_summaries_total{{kind=\"{kind}\",outcome=\"{outcome}\"}}"),
        )
    };
    assert_eq!(count("native", "failed"), 1, "asked natively once: {m}");
    assert!(
        count("cached", "swapped") >= 1,
        "then cached-prefix summaries: {m}"
    );
    let natives = up
        .requests()
        .iter()
        .filter(|r| r.json().get("compaction").is_some())
        .count();
    assert_eq!(natives, 1, "the refusal is remembered for the model");
}
