//! The turns in `compact` and `apply` outputs: every turn with all seven keys, masked turns and
//! summary turns marked in their metadata, kept turns unchanged.

use serde_json::{Value, json};

use crate::support::{
    TURN_KEYS, assert_success, mask_and_summary_request, request, run, scratch, write,
};

fn keys(turn: &Value) -> Vec<&str> {
    turn.as_object()
        .expect("a turn is an object")
        .keys()
        .map(String::as_str)
        .collect()
}

/// Plans the mask-and-summary request, and returns it with the summary supplied, its plan's
/// text and the group id.
fn fulfilled() -> (Value, String, String) {
    let mut doc = mask_and_summary_request();
    let plan_text = cutctx_ops::plan(&doc.to_string()).expect("the request plans");
    let plan: Value = serde_json::from_str(&plan_text).expect("a plan is JSON");
    let requests = plan["summarization_requests"].as_array().expect("requests");
    assert_eq!(requests.len(), 1, "one summarization request: {plan_text}");
    assert_eq!(
        requests[0]["turn_ids"],
        json!(["u1", "a1", "t1", "a2", "u2"])
    );
    assert_eq!(requests[0]["target_tokens"], 16);
    assert_eq!(requests[0]["prompt_id"], "p.v1");
    let gid = requests[0]["group_id"]
        .as_str()
        .expect("a group id")
        .to_owned();
    assert!(
        gid.starts_with("span-") && gid.len() == 21,
        "group id {gid}"
    );
    doc["summaries"] =
        json!({ gid.as_str(): "The user asked; the tool answered.", "span-unused": "ignored" });
    (doc, plan_text, gid)
}

fn check_view(transcript: &Value, original: &Value, gid: &str) {
    let turns = transcript.as_array().expect("a transcript is an array");
    let ids: Vec<&str> = turns
        .iter()
        .map(|t| t["turn_id"].as_str().expect("turn_id"))
        .collect();
    let summary_id = format!("summary:{gid}");
    assert_eq!(ids, ["s1", summary_id.as_str(), "a3", "t2", "a4", "u3"]);
    for turn in turns {
        assert_eq!(keys(turn), TURN_KEYS, "every turn carries all seven keys");
    }
    let by_id = |id: &str| {
        original["transcript"]
            .as_array()
            .expect("transcript")
            .iter()
            .find(|t| t["turn_id"] == id)
            .expect("an input turn")
            .clone()
    };
    // Kept turns are the input turns, unchanged.
    for (i, id) in [(0, "s1"), (2, "a3"), (4, "a4"), (5, "u3")] {
        assert_eq!(turns[i], by_id(id), "kept turn {id}");
    }

    let summary = &turns[1];
    assert_eq!(summary["role"], "assistant");
    assert_eq!(summary["content"], "The user asked; the tool answered.");
    assert_eq!(summary["token_estimate"], 16);
    assert_eq!(summary["tool_call_id"], Value::Null);
    assert_eq!(summary["pinned"], false);
    assert_eq!(
        summary["metadata"],
        json!({
            "cutctx.kind": "summary",
            "cutctx.summary_group": gid,
            "cutctx.replaced_turn_count": "5",
        })
    );

    let masked = &turns[3];
    let content = masked["content"].as_str().expect("content");
    let expected_hash = cutctx::model::canonical::sha256_hex(
        serde_json::to_string(&by_id("t2")["content"])
            .expect("a string serializes")
            .as_bytes(),
    );
    assert_eq!(
        content,
        format!("[tool result masked by cutctx] (original: 300 tokens, sha256:{expected_hash})")
    );
    assert_eq!(content.chars().count(), 126);
    assert_eq!(masked["token_estimate"], 32);
    assert_eq!(masked["role"], "tool");
    assert_eq!(masked["tool_call_id"], "c2");
    assert_eq!(masked["pinned"], false);
    assert_eq!(
        masked["metadata"],
        json!({"source": "db", "cutctx.kind": "masked"})
    );
}

#[test]
fn compact_marks_masked_and_summary_turns() {
    let (doc, plan_text, gid) = fulfilled();
    let out = run(&["compact", "-"], Some(doc.to_string().as_bytes()));
    let value = assert_success(&out);
    let plan: Value = serde_json::from_str(&plan_text).expect("a plan is JSON");
    assert_eq!(value["plan"], plan);
    assert_eq!(value["plan"]["estimator_ratio"], 4.0);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("\"estimator_ratio\":4.0,"),
        "the ratio is written as 4.0"
    );
    check_view(&value["transcript"], &doc, &gid);
    let report = &value["report"];
    assert_eq!(report["kept_turn_ids"], json!(["s1", "a3", "a4", "u3"]));
    assert_eq!(report["masked_turn_ids"], json!(["t2"]));
    assert_eq!(
        report["summarized_turn_ids"],
        json!(["u1", "a1", "t1", "a2", "u2"])
    );
    assert_eq!(report["dropped_turn_ids"], json!([]));
    assert_eq!(
        report["summary_turn_ids"],
        json!([format!("summary:{gid}")])
    );
    assert_eq!(report["turns_before"], 10);
    assert_eq!(report["turns_after"], 6);
    assert_eq!(report["tokens_before"], 690);
    assert_eq!(report["tokens_after_estimate"], 88);
    assert_eq!(report["estimator_ratio"], 4.0);
}

#[test]
fn apply_marks_masked_and_summary_turns() {
    let dir = scratch("apply_marks_masked_and_summary_turns");
    let (doc, plan_text, gid) = fulfilled();
    let plan = write(&dir, "plan.json", &plan_text);
    let out = run(
        &[
            std::ffi::OsStr::new("apply"),
            "-".as_ref(),
            "--plan".as_ref(),
            plan.as_os_str(),
        ],
        Some(doc.to_string().as_bytes()),
    );
    let value = assert_success(&out);
    check_view(&value["transcript"], &doc, &gid);
    let compacted: Value =
        serde_json::from_str(&cutctx_ops::compact(&doc.to_string()).expect("compacts"))
            .expect("JSON");
    assert_eq!(value["report"], compacted["report"]);
}

#[test]
fn omitted_turn_keys_come_back_with_their_defaults() {
    let doc = request(
        vec![
            json!({"turn_id": "s", "role": "system", "token_estimate": 3}),
            json!({"turn_id": "u", "role": "user", "token_estimate": 4, "content": "hi"}),
        ],
        100,
        4,
        json!({"name": "drop_oldest"}),
    );
    let out = run(&["compact", "-"], Some(doc.to_string().as_bytes()));
    let value = assert_success(&out);
    assert_eq!(
        value["transcript"],
        json!([
            {"content": "", "metadata": {}, "pinned": false, "role": "system",
             "token_estimate": 3, "tool_call_id": null, "turn_id": "s"},
            {"content": "hi", "metadata": {}, "pinned": false, "role": "user",
             "token_estimate": 4, "tool_call_id": null, "turn_id": "u"},
        ])
    );
}
