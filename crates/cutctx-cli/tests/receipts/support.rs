//! Shared helpers: the conformance sample, scratch folders, request documents, content maps.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

/// `../shared/conformance/receipts/sample`, when present.
pub(crate) fn sample_dir() -> Option<PathBuf> {
    let dir =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/conformance/receipts/sample");
    if dir.is_dir() {
        Some(dir)
    } else {
        eprintln!(
            "SKIP: {} is absent; the arcaeon sample is not checked here",
            dir.display()
        );
        None
    }
}

/// Reads a file that must be readable, as text.
pub(crate) fn read(path: &Path) -> String {
    std::fs::read_to_string(path).expect("a test file is readable")
}

/// A fresh, empty scratch folder for one test.
pub(crate) fn scratch(test: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("receipts")
        .join(test);
    if dir.exists() {
        std::fs::remove_dir_all(&dir).expect("an old scratch folder can be removed");
    }
    std::fs::create_dir_all(&dir).expect("a scratch folder can be created");
    dir
}

/// Writes `text` to `dir/name` and returns the path.
pub(crate) fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("a scratch file can be written");
    path
}

/// A turn as the request spells it, some keys left to their defaults.
fn turn(id: &str, role: &str, content: &str, tokens: u64) -> Value {
    json!({"turn_id": id, "role": role, "content": content, "token_estimate": tokens})
}

/// A request whose default-chain plan masks tool results and summarizes a span, without its
/// summaries (see [`with_summaries`]).
pub(crate) fn mask_and_summary_request() -> Value {
    let mut turns = vec![turn("s1", "system", "rules é", 10)];
    for i in 0..4 {
        turns.push(turn(&format!("u{i}"), "user", &format!("question {i}"), 20));
        let mut call = turn(&format!("a{i}"), "assistant", "calling", 10);
        call["tool_call_id"] = json!(format!("c{i}"));
        turns.push(call);
        let mut result = turn(&format!("t{i}"), "tool", &"log line\n".repeat(150), 300);
        result["tool_call_id"] = json!(format!("c{i}"));
        result["metadata"] = json!({"source": "db", "n": i.to_string()});
        turns.push(result);
    }
    turns.push(turn("a8", "assistant", "done", 10));
    let mut last = turn("u9", "user", "thanks", 10);
    last["pinned"] = json!(true);
    turns.push(last);
    json!({
        "transcript": turns,
        "budget": {"max_tokens": 200, "protected_recent_turns": 2},
        "policy": {"name": "default_chain", "prompt_id": "p.v1", "keep_recent_results": 0},
    })
}

/// The request with a summary for every group its plan asks for.
pub(crate) fn with_summaries(mut request: Value) -> Value {
    let plan: Value = serde_json::from_str(&cutctx_ops::plan(&request.to_string()).expect("plans"))
        .expect("the plan is JSON");
    let mut summaries = serde_json::Map::new();
    for r in plan["summarization_requests"].as_array().expect("a list") {
        summaries.insert(
            r["group_id"].as_str().expect("a group id").to_owned(),
            json!("Earlier: four log reads, nothing new."),
        );
    }
    request["summaries"] = Value::Object(summaries);
    request
}

/// A request turn with the defaults filled in: the seven-key object the receipt digests.
pub(crate) fn seven_keys(turn: &Value) -> Value {
    json!({
        "turn_id": turn["turn_id"],
        "role": turn["role"],
        "content": turn.get("content").cloned().unwrap_or(json!("")),
        "token_estimate": turn["token_estimate"],
        "tool_call_id": turn.get("tool_call_id").cloned().unwrap_or(Value::Null),
        "pinned": turn.get("pinned").cloned().unwrap_or(json!(false)),
        "metadata": turn.get("metadata").cloned().unwrap_or(json!({})),
    })
}

/// The content map of a `compact --ledger` receipt on `line`: the request's turns and the
/// output's transcript.
pub(crate) fn compaction_content(line: usize, request: &Value, output: &str) -> String {
    let out: Value = serde_json::from_str(output).expect("the output is JSON");
    let pre: Vec<Value> = request["transcript"]
        .as_array()
        .expect("a transcript")
        .iter()
        .map(seven_keys)
        .collect();
    json!({ line.to_string(): {"pre": pre, "post": out["transcript"]} }).to_string()
}
