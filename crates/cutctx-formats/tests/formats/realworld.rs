//! The real corpus: the 200 tau-bench GPT-4o airline runs of `../shared/realworld`, replayed
//! call by call (call k is the messages before the k-th assistant message, with the task's 14
//! tools) in OpenAI Chat, and converted by position to Anthropic and Responses, through every
//! named policy at three whole-prompt budgets. Every output is valid, every budget is met or
//! reported unmet, and none is refused.
//!
//! Debug builds replay a sample of the calls (every `STRIDE`-th call of every run, and each
//! run's last) so that `cargo test` stays quick; the sample is fixed, so runs are repeatable.

use std::collections::BTreeMap;
use std::path::PathBuf;

use cutctx_formats::{
    EstimatorSpec, Format, POLICY_NAMES, ProviderTranscript, policy_named, repair, validate,
};
use cutctx_invariants::Analysis;
use cutctx_model::CompactionBudget;
use serde_json::{Map, Value, json};

use crate::{PROMPT, summary_text};

/// Every `STRIDE`-th call of a run is replayed, plus its last.
const STRIDE: usize = if cfg!(debug_assertions) { 6 } else { 1 };

/// Where the runs are, when `../shared` is present.
fn dir() -> Option<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/realworld/tau-bench");
    dir.join("gpt-4o-airline.json").is_file().then_some(dir)
}

fn read(path: PathBuf) -> Value {
    let text = std::fs::read_to_string(&path).expect("readable");
    serde_json::from_str(&text).expect("JSON")
}

/// The Chat request of each sampled call of each run.
fn calls(runs: &Value, tools: &Value) -> Vec<Value> {
    let mut out = Vec::new();
    for run in runs.as_array().expect("a list of runs") {
        let traj = run["traj"].as_array().expect("traj");
        let ends: Vec<usize> = traj
            .iter()
            .enumerate()
            .filter(|(_, m)| m["role"] == "assistant")
            .map(|(i, _)| i)
            .collect();
        for (k, &end) in ends.iter().enumerate() {
            if k % STRIDE == 0 || k + 1 == ends.len() {
                out.push(json!({"model": "gpt-4o", "tools": tools, "messages": traj[..end]}));
            }
        }
    }
    out
}

fn text(m: &Value) -> String {
    m["content"].as_str().unwrap_or_default().to_owned()
}

/// A Chat request as an Anthropic one, by position: system messages become `system`, calls
/// `tool_use` blocks, and results `tool_result` blocks opening the next user message.
fn to_anthropic(chat: &Value) -> Value {
    let mut system = Vec::new();
    let mut messages: Vec<Value> = Vec::new();
    for m in chat["messages"].as_array().expect("messages") {
        let (role, blocks) = match m["role"].as_str().unwrap_or_default() {
            "system" => {
                system.push(text(m));
                continue;
            }
            "assistant" => {
                let mut blocks = Vec::new();
                if !text(m).is_empty() {
                    blocks.push(json!({"type": "text", "text": text(m)}));
                }
                for c in m["tool_calls"].as_array().into_iter().flatten() {
                    let args = c["function"]["arguments"].as_str().unwrap_or("{}");
                    let input: Value = serde_json::from_str(args).unwrap_or_else(|_| json!({}));
                    blocks.push(json!({"type": "tool_use", "id": c["id"],
                        "name": c["function"]["name"], "input": input}));
                }
                ("assistant", blocks)
            }
            "tool" => (
                "user",
                vec![
                    json!({"type": "tool_result", "tool_use_id": m["tool_call_id"],
                    "content": text(m)}),
                ],
            ),
            _ => ("user", vec![json!({"type": "text", "text": text(m)})]),
        };
        if blocks.is_empty() {
            continue;
        }
        match messages.last_mut() {
            Some(last) if last["role"] == role => {
                if let Some(list) = last["content"].as_array_mut() {
                    list.extend(blocks);
                }
            }
            _ => messages.push(json!({"role": role, "content": blocks})),
        }
    }
    let tools: Vec<Value> = chat["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|t| {
            let f = &t["function"];
            json!({"name": f["name"], "description": f["description"], "input_schema": f["parameters"]})
        })
        .collect();
    json!({"model": "claude", "max_tokens": 1024, "system": system.join("\n"),
        "tools": tools, "messages": messages})
}

/// A Chat request as a Responses one, by position: messages become message items, calls
/// `function_call` items and results `function_call_output` items.
fn to_responses(chat: &Value) -> Value {
    let mut input = Vec::new();
    for m in chat["messages"].as_array().expect("messages") {
        let role = m["role"].as_str().unwrap_or_default();
        match role {
            "tool" => input.push(json!({"type": "function_call_output",
                "call_id": m["tool_call_id"], "output": text(m)})),
            "assistant" => {
                if !text(m).is_empty() {
                    input.push(json!({"type": "message", "role": "assistant",
                        "content": [{"type": "output_text", "text": text(m)}]}));
                }
                for c in m["tool_calls"].as_array().into_iter().flatten() {
                    input.push(json!({"type": "function_call", "call_id": c["id"],
                        "name": c["function"]["name"], "arguments": c["function"]["arguments"]}));
                }
            }
            _ => input.push(json!({"role": role, "content": text(m)})),
        }
    }
    let tools: Vec<Value> = chat["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|t| {
            let f = &t["function"];
            let mut m = Map::new();
            m.insert("type".into(), json!("function"));
            for k in ["name", "description", "parameters"] {
                m.insert(k.into(), f[k].clone());
            }
            Value::Object(m)
        })
        .collect();
    json!({"model": "gpt-4o", "tools": tools, "input": input})
}

/// Figures of one replay, for the message when something fails and for the final check.
#[derive(Default)]
struct Tally {
    compactions: usize,
    unmet: usize,
    repairs: usize,
}

fn replay(format: Format, document: Value, tally: &mut Tally) {
    let (document, repairs) = repair(format, document).expect("repairable");
    tally.repairs += repairs.len();
    let text = document.to_string();
    let pt = ProviderTranscript::parse(format, &document).expect("valid once repaired");
    crate::assert_count_adds_up(format, &document, format.as_str());
    let count = pt.prompt_count(0);
    let protected = CompactionBudget::DEFAULT_PROTECTED_RECENT_TURNS;
    let floor = Analysis::of(
        pt.transcript(),
        &CompactionBudget::new(0).with_protected_recent_turns(protected),
    )
    .untouchable_tokens();
    // The whole prompt, half of what can go, and nothing but the floor.
    let removable = count.total - count.tools - floor;
    let lowest = count.tools + floor;
    for max in [count.total, lowest + removable / 2, lowest] {
        let turn_budget = count.turn_budget(max).expect("the fixed parts fit");
        let budget = CompactionBudget::new(turn_budget).with_protected_recent_turns(protected);
        for name in POLICY_NAMES {
            let policy = policy_named(name, PROMPT, &EstimatorSpec::default())
                .expect("builds")
                .expect("known");
            let plan = policy
                .decide(pt.transcript(), &budget)
                .unwrap_or_else(|e| panic!("{format} / {name} / {max}: refused: {e}"));
            let summaries: BTreeMap<String, String> = plan
                .summarization_requests
                .iter()
                .map(|r| {
                    (
                        r.group_id().to_owned(),
                        summary_text(r.group_id(), r.turn_ids().len()),
                    )
                })
                .collect();
            let out = pt
                .apply(&plan, &summaries)
                .unwrap_or_else(|e| panic!("{format} / {name} / {max}: {e}"));
            crate::compare_text(format, &text, policy.as_ref(), &budget)
                .unwrap_or_else(|e| panic!("{format} / {name} / {max}: text path: {e}"));
            validate(format, &out.document)
                .unwrap_or_else(|v| panic!("{format} / {name} / {max}: {v}"));
            if plan.budget_unmet {
                tally.unmet += 1;
            } else {
                assert!(
                    count.tools + plan.tokens_after_estimate <= max,
                    "{format} / {name}: {} over {max}",
                    count.tools + plan.tokens_after_estimate
                );
            }
            tally.compactions += 1;
        }
    }
}

#[test]
fn tau_bench_runs_replay_call_by_call_in_every_format() {
    let Some(dir) = dir() else {
        eprintln!("skipped: ../shared/realworld/tau-bench is absent");
        return;
    };
    let runs = read(dir.join("gpt-4o-airline.json"));
    let tools = read(dir.join("airline_tools.json"));
    let calls = calls(&runs, &tools);
    assert!(calls.len() > 200, "{} calls", calls.len());
    for format in Format::ALL {
        let mut tally = Tally::default();
        for chat in &calls {
            let document = match format {
                Format::OpenAiChat => chat.clone(),
                Format::OpenAiResponses => to_responses(chat),
                Format::Anthropic => to_anthropic(chat),
            };
            replay(format, document, &mut tally);
        }
        eprintln!(
            "{format}: {} calls, {} compactions, {} budgets reported unmet, {} repairs",
            calls.len(),
            tally.compactions,
            tally.unmet,
            tally.repairs
        );
        assert_eq!(tally.compactions, calls.len() * 3 * POLICY_NAMES.len());
        if format == Format::OpenAiChat {
            // Reused ids are told apart by position: Chat needs no repair.
            assert_eq!(tally.repairs, 0);
        }
    }
}
