//! Each rule of each format's validator, with the rule, index, path and id it reports.

use cutctx_formats::{Format, Rule, validate};
use serde_json::{Value, json};

/// `(rule, index, path, id)` of the violation `validate` reports.
fn broken(format: Format, doc: &Value) -> (Rule, Option<usize>, String, Option<String>) {
    let v = validate(format, doc).expect_err("the document breaks a rule");
    assert_eq!(v.format, format);
    (v.rule, v.index, v.path, v.id)
}

fn call(id: &str) -> Value {
    json!({"id": id, "type": "function", "function": {"name": "f", "arguments": "{}"}})
}

#[test]
fn chat_rules() {
    let f = Format::OpenAiChat;
    let user = json!({"role": "user", "content": "hi"});
    let asst = |ids: &[&str]| json!({"role": "assistant", "content": null, "tool_calls": ids.iter().map(|i| call(i)).collect::<Vec<_>>()});
    let tool = |id: &str| json!({"role": "tool", "tool_call_id": id, "content": "r"});

    assert_eq!(broken(f, &json!([])).0, Rule::NoMessages);
    assert_eq!(broken(f, &json!({"model": "x"})).2, "messages");
    assert_eq!(
        broken(f, &json!([user, 3])),
        (Rule::Malformed, Some(1), "messages[1]".into(), None)
    );
    // A role the format does not name is an opaque message, carried as a system one is.
    validate(
        f,
        &json!([{"role": "function", "name": "f", "content": "x"}]),
    )
    .expect("opaque");
    assert_eq!(
        broken(f, &json!([{"role": "user", "content": 7}])).2,
        "messages[0].content"
    );
    // A result with no call before it, or after a user message.
    assert_eq!(
        broken(f, &json!([user, tool("a")])),
        (
            Rule::ResultWithoutCall,
            Some(1),
            "messages[1].tool_call_id".into(),
            Some("a".into())
        )
    );
    assert_eq!(
        broken(f, &json!([user, asst(&["a"]), tool("a"), user, tool("a")])).1,
        Some(4)
    );
    // A call whose result is missing, at the end or before the next message.
    assert_eq!(
        broken(f, &json!([user, asst(&["a", "b"]), tool("b")])),
        (
            Rule::CallWithoutResult,
            Some(1),
            "messages[1].tool_calls[0].id".into(),
            Some("a".into())
        )
    );
    assert_eq!(
        broken(f, &json!([user, asst(&["a"]), user, tool("a")])).0,
        Rule::CallWithoutResult
    );
    // Twice the same result; a result naming another message's call.
    assert_eq!(
        broken(f, &json!([user, asst(&["a"]), tool("a"), tool("a")])).0,
        Rule::DuplicateResult
    );
    assert_eq!(
        broken(
            f,
            &json!([user, asst(&["a"]), tool("a"), asst(&["b"]), tool("a")])
        )
        .0,
        Rule::ResultWithoutCall
    );
    assert_eq!(
        broken(f, &json!([user, asst(&["a", "a"])])).0,
        Rule::DuplicateCallId
    );
    assert_eq!(
        broken(f, &json!([user, {"role": "tool", "content": "x"}])).2,
        "messages[1].tool_call_id"
    );
    // Displaced (reordered) results and reused ids across steps are fine.
    validate(
        f,
        &json!([
            user,
            asst(&["a", "b"]),
            tool("b"),
            tool("a"),
            asst(&["a"]),
            tool("a")
        ]),
    )
    .expect("valid");
}

fn fc(id: &str) -> Value {
    json!({"type": "function_call", "call_id": id, "name": "f", "arguments": "{}"})
}

fn fco(id: &str) -> Value {
    json!({"type": "function_call_output", "call_id": id, "output": "r"})
}

#[test]
fn responses_rules() {
    let f = Format::OpenAiResponses;
    let user = json!({"role": "user", "content": "hi"});
    let rs = json!({"type": "reasoning", "id": "rs_1", "summary": []});
    let answer = json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "ok"}]});

    validate(f, &json!([])).expect("an empty input list is accepted");
    validate(f, &json!({"input": "hi", "instructions": "x"})).expect("string input");
    assert_eq!(broken(f, &json!({"input": 1})).2, "input");
    assert_eq!(
        broken(f, &json!({"input": [], "instructions": 1})).2,
        "instructions"
    );
    assert_eq!(
        broken(f, &json!([{"content": "no role"}])).2,
        "input[0].role"
    );
    // A role the format does not name is an opaque item, carried untouched.
    validate(f, &json!([{"role": "tool", "content": "x"}])).expect("opaque");
    assert_eq!(
        broken(f, &json!([{"type": "function_call", "name": "f"}])).2,
        "input[0].call_id"
    );
    assert_eq!(
        broken(f, &json!([user, fc("a")])),
        (
            Rule::CallWithoutResult,
            Some(1),
            "input[1].call_id".into(),
            Some("a".into())
        )
    );
    assert_eq!(
        broken(f, &json!([user, fc("a"), user, fco("a")])).0,
        Rule::CallWithoutResult
    );
    assert_eq!(
        broken(f, &json!([user, fco("a"), fc("a")])),
        (
            Rule::ResultWithoutCall,
            Some(1),
            "input[1].call_id".into(),
            Some("a".into())
        )
    );
    assert_eq!(
        broken(f, &json!([user, fc("a"), fco("a"), fco("a")])).0,
        Rule::DuplicateResult
    );
    assert_eq!(
        broken(f, &json!([user, fc("a"), fc("a"), fco("a")])).0,
        Rule::DuplicateCallId
    );
    // An output must have the type of its call.
    let custom_out = json!({"type": "custom_tool_call_output", "call_id": "a", "output": "r"});
    assert_eq!(
        broken(f, &json!([user, fc("a"), custom_out])).0,
        Rule::ResultWithoutCall
    );
    // Reasoning needs the item it belongs to right after it.
    assert_eq!(
        broken(f, &json!([user, rs, user])),
        (
            Rule::ReasoningWithoutFollowingItem,
            Some(1),
            "input[1]".into(),
            None
        )
    );
    assert_eq!(
        broken(f, &json!([user, rs])).0,
        Rule::ReasoningWithoutFollowingItem
    );
    assert_eq!(
        broken(f, &json!([user, fc("a"), rs, fco("a")])).0,
        Rule::ReasoningWithoutFollowingItem
    );
    // Displaced outputs, assistant messages between call and output, unknown items: fine.
    validate(
        f,
        &json!([user, rs, fc("a"), fc("b"), answer, fco("b"), {"type": "web_search_call", "id": "ws"}, fco("a"), rs, answer]),
    )
    .expect("valid");
}

fn tool_use(id: &str) -> Value {
    json!({"type": "tool_use", "id": id, "name": "f", "input": {}})
}

fn tool_result(id: &str) -> Value {
    json!({"type": "tool_result", "tool_use_id": id, "content": "r"})
}

#[test]
fn anthropic_rules() {
    let f = Format::Anthropic;
    let user = json!({"role": "user", "content": "hi"});
    let text = json!({"type": "text", "text": "x"});
    let asst = |blocks: Vec<Value>| json!({"role": "assistant", "content": blocks});
    let results = |blocks: Vec<Value>| json!({"role": "user", "content": blocks});

    assert_eq!(broken(f, &json!({"messages": []})).0, Rule::NoMessages);
    assert_eq!(
        broken(f, &json!({"system": 3, "messages": [user]})).2,
        "system"
    );
    assert_eq!(
        broken(
            f,
            &json!({"system": [{"type": "image"}], "messages": [user]})
        )
        .2,
        "system"
    );
    // A mid-conversation system message: never first, never after an assistant message
    // (so never between a tool_use and its tool_result), fine after a user message, tool
    // results or another system message.
    assert_eq!(
        broken(f, &json!([{"role": "system", "content": "x"}])).0,
        Rule::FirstMessageNotUser
    );
    let system = json!({"role": "system", "content": [{"type": "text", "text": "Be brief."}]});
    let answer = json!({"role": "assistant", "content": "ok"});
    assert_eq!(
        broken(f, &json!([user, answer, system])),
        (
            Rule::SystemMessageMisplaced,
            Some(2),
            "messages[2].role".into(),
            None
        )
    );
    let call = json!({"type": "tool_use", "id": "c1", "name": "f", "input": {}});
    let result = json!({"type": "tool_result", "tool_use_id": "c1", "content": "r"});
    assert_eq!(
        broken(
            f,
            &json!([
                user,
                asst(vec![call.clone()]),
                system,
                results(vec![result.clone()])
            ])
        )
        .0,
        Rule::SystemMessageMisplaced
    );
    validate(f, &json!([user, system, system, answer])).expect("after a user message");
    validate(
        f,
        &json!([
            user,
            asst(vec![call]),
            results(vec![result]),
            system,
            answer
        ]),
    )
    .expect("after tool results");
    // A role the format does not name is carried as an opaque message, not refused.
    validate(
        f,
        &json!([user, {"role": "critic", "content": "x"}, answer]),
    )
    .expect("opaque");
    assert_eq!(
        broken(f, &json!([{"role": "assistant", "content": "x"}])),
        (
            Rule::FirstMessageNotUser,
            Some(0),
            "messages[0].role".into(),
            None
        )
    );
    assert_eq!(
        broken(f, &json!([{"role": "user"}])).2,
        "messages[0].content"
    );
    assert_eq!(
        broken(
            f,
            &json!([{"role": "user", "content": [{"text": "no type"}]}])
        )
        .2,
        "messages[0].content[0].type"
    );
    // A tool_use without its result in the next message.
    assert_eq!(
        broken(
            f,
            &json!([
                user,
                asst(vec![tool_use("a"), tool_use("b")]),
                results(vec![tool_result("b")])
            ])
        ),
        (
            Rule::CallWithoutResult,
            Some(1),
            "messages[1]".into(),
            Some("a".into())
        )
    );
    assert_eq!(
        broken(f, &json!([user, asst(vec![tool_use("a")])])).0,
        Rule::CallWithoutResult
    );
    assert_eq!(
        broken(
            f,
            &json!([
                user,
                asst(vec![tool_use("a")]),
                user,
                results(vec![tool_result("a")])
            ])
        )
        .0,
        Rule::CallWithoutResult
    );
    // A result whose tool_use is not in the message right before.
    assert_eq!(
        broken(
            f,
            &json!([
                user,
                asst(vec![text.clone()]),
                results(vec![tool_result("a")])
            ])
        ),
        (
            Rule::ResultWithoutCall,
            Some(2),
            "messages[2].content[0]".into(),
            Some("a".into())
        )
    );
    assert_eq!(
        broken(
            f,
            &json!([user, asst(vec![tool_use("a"), tool_result("a")])])
        )
        .0,
        Rule::ResultWithoutCall
    );
    assert_eq!(
        broken(
            f,
            &json!([
                user,
                asst(vec![tool_use("a")]),
                results(vec![tool_result("a"), tool_result("a")])
            ])
        )
        .0,
        Rule::DuplicateResult
    );
    assert_eq!(
        broken(
            f,
            &json!([
                user,
                asst(vec![tool_use("a")]),
                results(vec![text.clone(), tool_result("a")])
            ])
        ),
        (
            Rule::ToolResultNotFirst,
            Some(2),
            "messages[2].content[1]".into(),
            Some("a".into())
        )
    );
    assert_eq!(
        broken(
            f,
            &json!([
                user,
                asst(vec![tool_use("a"), tool_use("a")]),
                results(vec![tool_result("a")])
            ])
        )
        .0,
        Rule::DuplicateCallId
    );
    assert_eq!(
        broken(f, &json!([results(vec![tool_use("a")])])).2,
        "messages[0].content[0].type"
    );
    // Consecutive messages of one role and text after results are accepted.
    validate(
        f,
        &json!([
            user,
            user,
            asst(vec![tool_use("a"), tool_use("b")]),
            results(vec![tool_result("b"), tool_result("a"), text.clone()]),
            asst(vec![text.clone()]),
            asst(vec![text])
        ]),
    )
    .expect("valid");
}

#[test]
fn violations_read_as_sentences_with_stable_names() {
    let v = validate(
        Format::OpenAiChat,
        &json!([{"role": "tool", "tool_call_id": "c9", "content": "x"}]),
    )
    .expect_err("orphan");
    assert_eq!(
        v.to_string(),
        "openai-chat request breaks rule `result_without_call` at messages[0].tool_call_id (id \"c9\"): every tool result needs its call right before it."
    );
    let d = v.details();
    assert_eq!(d["rule"], "result_without_call");
    assert_eq!(d["index"], 0);
    assert_eq!(d["id"], "c9");
    assert_eq!(d["format"], "openai-chat");
}
