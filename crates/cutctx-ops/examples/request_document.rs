//! Writes one deterministic request document for `cutctx compact` on standard output.
//!
//! `cargo run --release -p cutctx-ops --example request_document -- TURNS PERCENT [RESULT_BYTES]`
//! writes a request of `TURNS` turns: a system turn, then steps of an assistant turn calling a
//! tool, the tool's result of about `RESULT_BYTES` bytes (default 1,000) and a user turn, as the
//! benchmarks of `cutctx` generate them. The budget is `PERCENT` of the transcript's estimate,
//! the policy `default_chain`, and every summary its plan asks for is supplied, so the command
//! runs to its end. The same arguments always give the same bytes, so runs of
//! `scripts/request-bench.py` compare.

use std::collections::BTreeMap;
use std::io::Write as _;

use cutctx::{CompactionBudget, CompactionPolicy, Role, Transcript, TranscriptTurn, default_chain};

const PROMPT_ID: &str = "compaction.summarize.v1";

fn main() -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let parsed = (
        args.first().map(|s| s.parse::<usize>()),
        args.get(1).map(|s| s.parse::<u64>()),
        args.get(2).map_or(Ok(1_000), |s| s.parse::<usize>()),
    );
    let (Some(Ok(n)), Some(Ok(percent)), Ok(result_bytes)) = parsed else {
        eprintln!("usage: request_document TURNS PERCENT [RESULT_BYTES]");
        return std::process::ExitCode::from(2);
    };
    match document(n, percent, result_bytes) {
        Ok(text) => {
            let mut out = std::io::stdout().lock();
            match out.write_all(text.as_bytes()) {
                Ok(()) => std::process::ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("cannot write the request: {e}");
                    std::process::ExitCode::from(1)
                }
            }
        }
        Err(e) => {
            eprintln!("cannot build the request: {e}");
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

fn transcript(n: usize, result_bytes: usize) -> Result<Transcript, cutctx::CompactionError> {
    let mut turns = Vec::with_capacity(n);
    turns.push(TranscriptTurn::new(
        "s",
        Role::System,
        "You are a careful coding agent.",
        20,
    )?);
    for i in 0..n.saturating_sub(1) {
        let step = i / 3;
        let call = format!("c{step}");
        turns.push(match i % 3 {
            0 => TranscriptTurn::new(format!("a{i}"), Role::Assistant, "Reading the log.", 40)?
                .with_tool_call_id(call),
            1 => TranscriptTurn::new(
                format!("t{i}"),
                Role::Tool,
                result_text(step, result_bytes),
                (result_bytes / 4) as u64,
            )?
            .with_tool_call_id(call),
            _ => TranscriptTurn::new(format!("u{i}"), Role::User, "Keep going.", 30)?,
        });
    }
    Transcript::new(turns)
}

/// The document's text: keys in code point order, one line and a newline.
pub(crate) fn document(n: usize, percent: u64, result_bytes: usize) -> Result<String, String> {
    let t = transcript(n, result_bytes).map_err(|e| e.to_string())?;
    let max_tokens = t.token_estimate() * percent / 100;
    let plan = default_chain(PROMPT_ID)
        .and_then(|chain| chain.decide(&t, &CompactionBudget::new(max_tokens)))
        .map_err(|e| e.to_string())?;
    let summaries: BTreeMap<&str, String> = plan
        .summarization_requests
        .iter()
        .map(|r| {
            (
                r.group_id(),
                format!("Summary of {} turns.", r.turn_ids().len()),
            )
        })
        .collect();
    let summaries = serde_json::to_string(&summaries).map_err(|e| e.to_string())?;
    Ok(format!(
        "{{\"budget\":{{\"max_tokens\":{max_tokens},\"protected_recent_turns\":4}},\
         \"policy\":{{\"name\":\"default_chain\",\"prompt_id\":\"{PROMPT_ID}\"}},\
         \"summaries\":{summaries},\"transcript\":{}}}\n",
        t.canonical_json()
    ))
}
