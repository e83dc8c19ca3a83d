//! Writes one deterministic provider request for the formats benchmark on standard output.
//!
//! `cargo run --release -p cutctx-ops --example format_request -- FORMAT MESSAGES [RESULT_BYTES]`
//! writes an `openai-chat`, `openai-responses` or `anthropic` request of `MESSAGES` messages
//! (items): a system prompt, then steps of a user message, a model message calling a tool and
//! the tool's result of `RESULT_BYTES` bytes (default 1,000), as one line of compact JSON.
//! The same arguments always give the same bytes, so runs of `scripts/format-bench.py` compare.

use std::io::Write as _;

use serde_json::{Value, json};

fn main() -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(format), Some(Ok(n))) = (args.first(), args.get(1).map(|s| s.parse::<usize>()))
    else {
        eprintln!(
            "usage: format_request openai-chat|openai-responses|anthropic MESSAGES [RESULT_BYTES]"
        );
        return std::process::ExitCode::from(2);
    };
    let result_bytes = match args.get(2).map(|s| s.parse::<usize>()) {
        None => 1_000,
        Some(Ok(b)) => b,
        Some(Err(_)) => {
            eprintln!("RESULT_BYTES must be a number");
            return std::process::ExitCode::from(2);
        }
    };
    let Some(request) = request(format, n, result_bytes) else {
        eprintln!("unknown format {format:?}");
        return std::process::ExitCode::from(2);
    };
    let mut out = std::io::stdout().lock();
    match out
        .write_all(request.to_string().as_bytes())
        .and_then(|()| out.write_all(b"\n"))
    {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("cannot write the request: {e}");
            std::process::ExitCode::from(1)
        }
    }
}

/// A tool result of `bytes` bytes that differs from step to step (log lines with a quote, so
/// escaping is exercised as it is in real logs).
fn result_text(step: usize, bytes: usize) -> String {
    let line =
        format!("2026-11-29T12:00:00Z INFO worker={step} \"cache\" key={step:x} hit=false\n");
    let mut s = line.repeat(bytes / line.len() + 1);
    s.truncate(bytes);
    s
}

pub(crate) fn request(format: &str, n: usize, result_bytes: usize) -> Option<Value> {
    let system = "You are a careful coding agent. Keep answers short.";
    let mut items = Vec::with_capacity(n);
    let steps = n.saturating_sub(1);
    for i in 0..steps {
        let step = i / 3;
        let call = format!("call_{step}");
        let args = format!("{{\"path\":\"logs/build-{step}.txt\"}}");
        let item = match (format, i % 3) {
            ("openai-chat", 0) | ("openai-responses", 0) => {
                json!({"role": "user", "content": format!("Step {step}: read the next build log.")})
            }
            ("openai-chat", 1) => json!({"role": "assistant", "content": null, "tool_calls": [
                {"id": call, "type": "function", "function": {"name": "read_file", "arguments": args}}
            ]}),
            ("openai-chat", _) => {
                json!({"role": "tool", "tool_call_id": call, "content": result_text(step, result_bytes)})
            }
            ("openai-responses", 1) => json!({"type": "function_call", "call_id": call,
                "name": "read_file", "arguments": args}),
            ("openai-responses", _) => json!({"type": "function_call_output", "call_id": call,
                "output": result_text(step, result_bytes)}),
            ("anthropic", 0) => {
                json!({"role": "user", "content": format!("Step {step}: read the next build log.")})
            }
            ("anthropic", 1) => json!({"role": "assistant", "content": [
                {"type": "text", "text": "Reading it."},
                {"type": "tool_use", "id": call, "name": "read_file", "input": {"path": format!("logs/build-{step}.txt")}}
            ]}),
            ("anthropic", _) => json!({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": call, "content": result_text(step, result_bytes)}
            ]}),
            _ => return None,
        };
        items.push(item);
    }
    Some(match format {
        "openai-chat" => {
            items.insert(0, json!({"role": "system", "content": system}));
            json!({"model": "gpt-4.1", "temperature": 0.2, "messages": items})
        }
        "openai-responses" => {
            items.insert(0, json!({"role": "developer", "content": system}));
            json!({"model": "gpt-4.1", "instructions": system, "input": items})
        }
        "anthropic" => {
            // Anthropic's system prompt is top-level; the first message is the first user one.
            items.insert(
                0,
                json!({"role": "user", "content": "Fix the failing build."}),
            );
            json!({"model": "claude-sonnet-4-5", "max_tokens": 4096, "system": system, "messages": items})
        }
        _ => return None,
    })
}
