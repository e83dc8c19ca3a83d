//! Holds the text path's hand-written readers to the value path: on every request, the turns
//! mapped with them, without them, and by the streaming value parse of the whole document
//! ([`each_message`]) are the same, or all three decline.

use std::collections::BTreeMap;

use cutctx_policies::CharRatioEstimator;
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use serde_json::{Value, json};

use crate::hand_read::ReadMessage;
use crate::mapping::Built;
use crate::{Format, Plains, Reading, each_message, list_key, map_messages, read_and_map, text};

/// `built` with the contents it left in `text` read in, each checked to have been left
/// empty and its canonical mark checked against the canonical writer.
fn read_in(mut built: Built, text: &str) -> Built {
    for d in std::mem::take(&mut built.deferred) {
        let written = &text[d.span.clone()];
        let mut content = String::new();
        cutctx_json::decode_written(written, &mut content).expect("decodes");
        let canonical = cutctx_model::canonical::canonical_json_value(&content.as_str().into());
        assert_eq!(
            d.canonical,
            canonical == format!("\"{written}\""),
            "{written}"
        );
        let turn = &mut built.turns[d.position];
        assert_eq!(turn.content(), "", "left empty");
        *turn = turn
            .clone()
            .with_content(content.into(), turn.token_estimate());
    }
    built
}

/// The turns of `text` by the three paths, checked to agree.
fn agreed(format: Format, text: &str) -> Option<Built> {
    let estimator = CharRatioEstimator::default();
    let read = text::read(text, list_key(format));
    let reference = read.as_ref().and_then(|r| {
        each_message(format, &r.shell, &r.layout, text, Some(&estimator))
            .ok()
            .flatten()
    });
    // Each message read from its span, as the reading says.
    let map = |reading| {
        read.as_ref().and_then(|r| {
            let (shell, layout) = (&r.shell, &r.layout);
            map_messages(
                format,
                shell,
                layout,
                text,
                &estimator,
                reading,
                Plains::None,
            )
        })
    };
    let (by_value, quick) = (map(Reading::Values), map(Reading::Hand));
    let deferring = map(Reading::HandDeferring);
    // Read as the scan of the list finds each message, whole and deferring.
    let scanned = read_and_map(format, text, &estimator, Reading::Hand, usize::MAX);
    let scanned_deferring =
        read_and_map(format, text, &estimator, Reading::HandDeferring, usize::MAX);
    // The same, most of the list read ahead on another thread from a guessed start
    // whatever the request's size: right or wrong, the guess changes nothing.
    let ahead = read_and_map(format, text, &estimator, Reading::HandDeferring, 0);
    assert_eq!(by_value, reference, "values: {text}");
    assert_eq!(quick, reference, "quick: {text}");
    assert_eq!(
        deferring.map(|b| read_in(b, text)),
        reference,
        "deferring: {text}"
    );
    for (path, scanned) in [
        ("scanned", scanned),
        ("scanned deferring", scanned_deferring),
        ("read ahead", ahead),
    ] {
        if let Some((r, _)) = &scanned {
            let expected = read.as_ref().map(|r| (&r.shell, &r.layout));
            assert_eq!(Some((&r.shell, &r.layout)), expected, "{path}: {text}");
        }
        let built = scanned.map(|(_, b)| read_in(b, text));
        assert_eq!(built, reference, "{path}: {text}");
    }
    // The hand-written scan of the top level finds what the parser finds, where both read.
    let parsed = text::parsed(text, list_key(format));
    if let (Some(p), Some(top)) = (&parsed, crate::scan::top(text, list_key(format))) {
        let s = text::scanned(text, top).expect("a field the parser read");
        assert_eq!((&s.shell, &s.layout), (&p.shell, &p.layout), "scan: {text}");
    }
    if parsed.is_none() {
        assert!(reference.is_none(), "not JSON, yet mapped: {text}");
    }
    // Where a masked message's fields lie, by hand and by the parser (in a request that is
    // JSON: the hand-written search relies on it).
    if let (Some(r), Some(_)) = (&read, &parsed) {
        for span in &r.layout.items {
            let message = &text[span.clone()];
            for key in ["content", "role", "output", "tool_calls", "none"] {
                if let Some(found) = crate::hand_read::field_span(message, key) {
                    assert_eq!(found, text::field_span_parsed(message, key), "{message}");
                }
            }
        }
    }
    reference
}

/// `text` with every non-ASCII character written as `\u` escapes (surrogate pairs beyond the
/// basic plane): the same JSON, as an ASCII-only writer spells it.
fn ascii_escaped(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_ascii() {
            out.push(c);
        } else {
            let mut units = [0; 2];
            for u in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{u:04x}"));
            }
        }
    }
    out
}

/// How many messages of the Chat request `text` the hand-written reader takes.
fn plain_count(text: &str) -> usize {
    let read = text::read(text, "messages").expect("a request");
    read.layout
        .items
        .iter()
        .filter(|span| crate::openai_chat::Plain::read(&text[(*span).clone()], 0, false).is_some())
        .count()
}

/// The format corpus of `tests/corpus`, built in (this crate reads no files).
const CORPUS: [(Format, &str); 7] = [
    (
        Format::OpenAiChat,
        include_str!("../tests/corpus/openai-chat/bare-parallel-displaced.json"),
    ),
    (
        Format::OpenAiChat,
        include_str!("../tests/corpus/openai-chat/multimodal-unknown-fields.json"),
    ),
    (
        Format::Anthropic,
        include_str!("../tests/corpus/anthropic/bare-parallel-errors.json"),
    ),
    (
        Format::Anthropic,
        include_str!("../tests/corpus/anthropic/server-tools-redacted.json"),
    ),
    (
        Format::OpenAiResponses,
        include_str!("../tests/corpus/openai-responses/displaced-outputs-and-tools.json"),
    ),
    (
        Format::OpenAiResponses,
        include_str!("../tests/corpus/openai-responses/interleaved-parallel.json"),
    ),
    (
        Format::OpenAiResponses,
        include_str!("../tests/corpus/openai-responses/string-input.json"),
    ),
];

#[test]
fn the_format_corpus_maps_alike_by_every_path() {
    let mut mapped = 0;
    for (format, text) in CORPUS {
        let value: Value = serde_json::from_str(text).expect("JSON");
        for text in [
            text.to_owned(),
            value.to_string(),
            ascii_escaped(text),
            serde_json::to_string_pretty(&value).expect("JSON"),
        ] {
            if agreed(format, &text).is_some() {
                mapped += 1;
            }
        }
    }
    // All but the Responses `input` string, which the text path leaves to the value path.
    assert_eq!(mapped, 24);
}

#[test]
fn the_corpus_leaves_contents_in_the_text_in_every_format_canonical_or_not() {
    let estimator = CharRatioEstimator::default();
    let (mut left, mut canonical) = (BTreeMap::new(), 0);
    for (format, text) in CORPUS {
        for text in [text.to_owned(), ascii_escaped(text)] {
            // The Responses `input` string is left to the value path.
            let Some(r) = text::read(&text, list_key(format)) else {
                continue;
            };
            let Some(built) = map_messages(
                format,
                &r.shell,
                &r.layout,
                &text,
                &estimator,
                Reading::HandDeferring,
                Plains::None,
            ) else {
                continue;
            };
            *left.entry(format).or_insert(0) += built.deferred.len();
            canonical += built.deferred.iter().filter(|d| d.canonical).count();
            // Not one turn with content of its own is left: each left one is empty.
            for d in &built.deferred {
                assert_eq!(built.turns[d.position].content(), "");
            }
        }
    }
    assert_eq!(left.len(), 3, "{left:?}");
    let total: usize = left.values().sum();
    assert!(canonical > 0 && canonical < total, "{canonical} of {total}");
}

#[test]
fn nesting_counts_from_the_top_of_the_document_as_the_whole_parse_counts_it() {
    let nested = |depth: usize| format!("{}1{}", "[".repeat(depth), "]".repeat(depth));
    let mut taken = Vec::new();
    for d in 120..=128 {
        let part = nested(d);
        let in_message = format!(r#"{{"messages":[{{"role":"user","content":[{part}]}}]}}"#);
        let bare = format!(r#"[{{"role":"user","content":[{part}]}}]"#);
        let in_field = format!(r#"{{"meta":{part},"messages":[{{"role":"user","content":"x"}}]}}"#);
        taken.push([
            agreed(Format::OpenAiChat, &in_message).is_some(),
            agreed(Format::OpenAiChat, &bare).is_some(),
            agreed(Format::OpenAiChat, &in_field).is_some(),
        ]);
    }
    // The limit falls inside the range for each: both answers were met.
    for k in 0..3 {
        assert!(
            taken.iter().any(|t| t[k]) && taken.iter().any(|t| !t[k]),
            "{k}"
        );
    }
}

#[test]
fn common_chat_shapes_are_read_by_hand_and_others_declined() {
    let taken = [
        r#"{"role":"user","content":"hi"}"#,
        r#"{ "role" : "assistant" , "content" : null , "tool_calls" : [ {"id":"c","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}} ] }"#,
        r#"{"role":"tool","tool_call_id":"c","name":"f","content":"a\nb \u00e9 \ud83d\ude00"}"#,
        r#"{"content":"x","role":"system"}"#,
    ];
    for m in taken {
        assert!(
            crate::openai_chat::Plain::read(m, 0, false).is_some(),
            "{m}"
        );
    }
    let declined = [
        r#"{"role":"user","content":[{"type":"text","text":"hi"}]}"#,
        r#"{"role":"user","role":"user","content":"hi"}"#,
        r#"{"role":"user","content":"hi","extra":1}"#,
        r#"{"ro\u006ce":"user","content":"hi"}"#,
        r#"{"role":"user","content":"\ud83d"}"#,
        r#"{"role":"assistant","tool_calls":[{"id":"c","function":{"name":"f","arguments":{}}}]}"#,
        r#"{"role":"assistant","refusal":"no"}"#,
        r#"{"role":"user","content":"hi"} x"#,
        r#"["role","user"]"#,
    ];
    for m in declined {
        assert!(
            crate::openai_chat::Plain::read(m, 0, false).is_none(),
            "{m}"
        );
    }
}

/// Strings a reader can trip on: escapes, non-ASCII, astral characters, empty.
fn awkward() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        "[a-z]{1,6}",
        "[a-z \"\\\\/\n\t\u{1}\u{1f}\u{e9}\u{2028}\u{1F600}]{0,12}",
        any::<String>(),
    ]
}

/// A content value: mostly a string, sometimes null, absent, a part list or a number.
fn content() -> impl Strategy<Value = Option<Value>> {
    prop_oneof![
        8 => awkward().prop_map(|s| Some(Value::from(s))),
        1 => Just(Some(Value::Null)),
        1 => Just(None),
        1 => awkward().prop_map(|s| Some(json!([{"type": "text", "text": s}]))),
        1 => Just(Some(json!(7))),
    ]
}

/// A call of id `id`: mostly a plain `function` call, sometimes another shape.
fn call(id: String, name: String, args: String, odd: u8) -> Value {
    match odd {
        0 => {
            json!({"id": id, "type": "function", "function": {"name": name, "arguments": {"a": args}}})
        }
        1 => json!({"id": id, "function": {"name": name, "arguments": args}, "extra": true}),
        2 => json!({"type": "function", "function": {"name": name, "arguments": args}}),
        3 => json!({"id": "c0", "type": "function", "function": {"name": name, "arguments": args}}),
        _ => json!({"id": id, "type": "function", "function": {"name": name, "arguments": args}}),
    }
}

/// A step of a conversation: one message, or an assistant message calling tools followed by
/// its results (in order or reversed, one sometimes missing or answering no call).
fn step() -> impl Strategy<Value = Vec<Value>> {
    let role = prop_oneof![
        Just("system"),
        Just("developer"),
        Just("user"),
        Just("assistant"),
        Just("narrator"),
    ];
    let one = (role, content(), proptest::option::of(awkward())).prop_map(|(role, c, name)| {
        let mut m = serde_json::Map::new();
        m.insert("role".into(), Value::from(role));
        if let Some(c) = c {
            m.insert("content".into(), c);
        }
        if let Some(name) = name {
            m.insert("name".into(), Value::from(name));
        }
        vec![Value::Object(m)]
    });
    let calls = proptest::collection::vec((awkward(), awkward(), awkward(), 0..24_u8), 1..4);
    let exchange =
        (calls, content(), any::<bool>(), 0..12_u8).prop_map(|(calls, c, reversed, odd)| {
            let mut assistant = serde_json::Map::new();
            assistant.insert("role".into(), Value::from("assistant"));
            if let Some(c) = c {
                assistant.insert("content".into(), c);
            }
            let mut list = Vec::new();
            let mut results = Vec::new();
            for (k, (name, args, result, odd)) in calls.into_iter().enumerate() {
                let id = format!("c{k}\u{e9}\"");
                list.push(call(id.clone(), name, args, odd));
                results.push(json!({"role": "tool", "tool_call_id": id, "content": result}));
            }
            assistant.insert("tool_calls".into(), Value::from(list));
            match odd {
                0 => drop(results.pop()),
                1 => {
                    results.push(json!({"role": "tool", "tool_call_id": "nobody", "content": "x"}))
                }
                2 => {
                    assistant.insert("refusal".into(), Value::from("no"));
                }
                3 => {
                    assistant.insert("tool_calls".into(), Value::Null);
                }
                _ => {}
            }
            if reversed {
                results.reverse();
            }
            std::iter::once(Value::Object(assistant))
                .chain(results)
                .collect()
        });
    prop_oneof![2 => one, 1 => exchange]
}

proptest! {
    #[test]
    fn generated_chat_requests_map_alike_by_every_path(
        steps in proptest::collection::vec(step(), 0..6),
        spelling in 0..4_u8,
        repeat_role in any::<bool>(),
    ) {
        let messages: Vec<Value> = steps.into_iter().flatten().collect();
        let request = json!({"model": "m", "messages": messages});
        let mut text = match spelling {
            0 => serde_json::to_string_pretty(&request).expect("JSON"),
            1 => ascii_escaped(&request.to_string()),
            2 => Value::from(messages.clone()).to_string(),
            _ => request.to_string(),
        };
        if repeat_role {
            // A key given twice: the value keeps the last.
            text = text.replacen(r#"{"role":"#, r#"{"role":"user","role":"#, 1);
        }
        agreed(Format::OpenAiChat, &text);
    }
}

#[test]
fn generated_requests_are_mostly_valid_and_read_by_hand() {
    // The property above compares turns, not two refusals, only if most requests map, and
    // tests the reader only if it reads them: both are checked here, on a fixed sample.
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let strategy = proptest::collection::vec(step(), 1..6);
    let (mut mapped, mut plain) = (0, 0);
    for _ in 0..200 {
        let steps = strategy.new_tree(&mut runner).expect("a value").current();
        let messages: Vec<Value> = steps.into_iter().flatten().collect();
        let text = json!({"messages": messages}).to_string();
        if agreed(Format::OpenAiChat, &text).is_some() {
            mapped += 1;
        }
        plain += plain_count(&text);
    }
    assert!(mapped >= 60, "{mapped}");
    assert!(plain >= 300, "{plain}");
}

/// How many messages of the Anthropic request `text` the hand-written reader takes.
fn anthropic_plain_count(text: &str) -> usize {
    let read = text::read(text, "messages").expect("a request");
    read.layout
        .items
        .iter()
        .filter(|span| crate::anthropic::Plain::read(&text[(*span).clone()], 0, false).is_some())
        .count()
}

/// A step of an Anthropic conversation: a user message, or an assistant message calling
/// tools followed by the user message of its results (some shapes odd, some results wrong).
fn anthropic_step() -> impl Strategy<Value = Vec<Value>> {
    let user = (awkward(), any::<bool>()).prop_map(|(text, blocks)| {
        let content = if blocks {
            json!([{"type": "text", "text": text}])
        } else {
            Value::from(text)
        };
        vec![json!({"role": "user", "content": content})]
    });
    let calls = proptest::collection::vec((awkward(), awkward(), awkward(), 0..24_u8), 1..4);
    let exchange = (
        calls,
        proptest::option::of(awkward()),
        any::<bool>(),
        0..14_u8,
    )
        .prop_map(|(calls, said, reversed, odd)| {
            let mut uses = Vec::new();
            let mut results = Vec::new();
            if let Some(said) = said {
                uses.push(json!({"type": "text", "text": said}));
            }
            for (k, (name, arg, result, odd)) in calls.into_iter().enumerate() {
                let id = format!("t{k}\u{e9}\"");
                let input = match odd {
                    0 => json!([1, 2.5, -0.0, 1e300, null, true, {"b": {"a": arg}}]),
                    1 => Value::from(arg),
                    _ => json!({"q": arg, "n": k}),
                };
                uses.push(json!({"type": "tool_use", "id": id, "name": name, "input": input}));
                let content = match odd {
                    2 => {
                        json!([{"type": "text", "text": result}, {"type": "text", "text": "more"}])
                    }
                    3 => json!([{"type": "image", "source": {}}]),
                    _ => Value::from(result),
                };
                let mut r = json!({"type": "tool_result", "tool_use_id": id, "content": content});
                if odd == 4 {
                    r["is_error"] = Value::from(true);
                }
                if odd == 5 {
                    r["cache_control"] = json!({"type": "ephemeral"});
                }
                results.push(r);
            }
            match odd {
                0 => drop(results.pop()),
                1 => results.push(json!({"type": "tool_result", "tool_use_id": "nobody"})),
                2 => results.push(json!({"type": "text", "text": "after"})),
                3 => results.insert(0, json!({"type": "text", "text": "before"})),
                _ => {}
            }
            if reversed {
                results.reverse();
            }
            vec![
                json!({"role": "assistant", "content": uses}),
                json!({"role": "user", "content": results}),
            ]
        });
    prop_oneof![1 => user, 2 => exchange]
}

proptest! {
    #[test]
    fn generated_anthropic_requests_map_alike_by_every_path(
        steps in proptest::collection::vec(anthropic_step(), 1..6),
        spelling in 0..4_u8,
    ) {
        let mut messages = vec![json!({"role": "user", "content": "go"})];
        messages.extend(steps.into_iter().flatten());
        let request = json!({"model": "m", "max_tokens": 9, "system": "s", "messages": messages});
        let text = match spelling {
            0 => serde_json::to_string_pretty(&request).expect("JSON"),
            1 => ascii_escaped(&request.to_string()),
            2 => Value::from(messages.clone()).to_string(),
            _ => request.to_string(),
        };
        agreed(Format::Anthropic, &text);
    }
}

#[test]
fn generated_anthropic_requests_are_mostly_valid_and_read_by_hand() {
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let strategy = proptest::collection::vec(anthropic_step(), 1..6);
    let (mut mapped, mut plain) = (0, 0);
    for _ in 0..200 {
        let steps = strategy.new_tree(&mut runner).expect("a value").current();
        let mut messages = vec![json!({"role": "user", "content": "go"})];
        messages.extend(steps.into_iter().flatten());
        let text = json!({"messages": messages}).to_string();
        if agreed(Format::Anthropic, &text).is_some() {
            mapped += 1;
        }
        plain += anthropic_plain_count(&text);
    }
    assert!(mapped >= 60, "{mapped}");
    assert!(plain >= 300, "{plain}");
}

#[test]
fn common_responses_shapes_are_read_by_hand_and_others_declined() {
    use crate::openai_responses::Plain;
    let taken = [
        r#"{"role":"user","content":"hi"}"#,
        r#"{"type":"message","role":"assistant","id":"msg_1","status":"completed","content":[{"type":"output_text","text":"a\nb","annotations":[]}]}"#,
        r#"{"type":"message","role":"developer","content":[{"type":"input_text","text":"\u00e9"},{"type":"input_text","text":""}]}"#,
        r#"{ "type" : "function_call" , "call_id" : "c" , "name" : "f" , "arguments" : "{\"a\":1}" }"#,
        r#"{"type":"function_call_output","call_id":"c","output":"done \ud83d\ude00"}"#,
        r#"{"type":"function_call_output","call_id":"c","output":[{"type":"input_text","text":"x"}]}"#,
    ];
    for m in taken {
        assert!(Plain::read(m, 0, false).is_some(), "{m}");
    }
    let declined = [
        r#"{"role":"narrator","content":"hi"}"#,
        r#"{"type":"message","content":"hi"}"#,
        r#"{"role":"user","content":null}"#,
        r#"{"role":"user","content":[{"type":"input_image","image_url":"u"}]}"#,
        r#"{"role":"user","status":null,"content":"hi"}"#,
        r#"{"type":"function_call","name":"f","arguments":"{}"}"#,
        r#"{"type":"function_call","call_id":"c","arguments":{}}"#,
        r#"{"type":"function_call","call_id":"c","call_id":"d"}"#,
        r#"{"type":"function_call_output","call_id":"c","output":"x","name":"f"}"#,
        r#"{"type":"custom_tool_call","call_id":"c","input":"x"}"#,
        r#"{"type":"reasoning","summary":[]}"#,
        r#"{"role":"user","content":"hi","call_id":"c"}"#,
        r#"{"role":"user","content":"hi"} x"#,
    ];
    for m in declined {
        assert!(Plain::read(m, 0, false).is_none(), "{m}");
    }
}

/// Text content of a Responses message or output: a string, or parts, sometimes odd.
fn responses_text(text: String, odd: u8) -> Value {
    match odd {
        0 => {
            json!([{"type": "input_text", "text": text}, {"type": "output_text", "text": "b", "annotations": []}])
        }
        1 => json!([{"type": "input_image", "image_url": text}]),
        2 => Value::Null,
        3 => json!(7),
        _ => Value::from(text),
    }
}

/// A step of a Responses conversation: a message, or reasoning and function calls followed
/// by their outputs (in order or reversed, one sometimes missing or answering no call).
fn responses_step() -> impl Strategy<Value = Vec<Value>> {
    let role = prop_oneof![
        2 => Just("system"),
        2 => Just("developer"),
        4 => Just("user"),
        4 => Just("assistant"),
        1 => Just("narrator"),
    ];
    let message =
        (role, awkward(), 0..24_u8, any::<bool>()).prop_map(|(role, text, odd, typed)| {
            let mut m = json!({"role": role, "content": responses_text(text, odd)});
            if typed {
                m["type"] = Value::from("message");
            }
            match odd {
                5 => m["status"] = Value::from("completed"),
                6 => m["status"] = Value::Null,
                7 => m["id"] = Value::from("msg_1"),
                _ => {}
            }
            vec![m]
        });
    let calls = proptest::collection::vec((awkward(), awkward(), awkward(), 0..16_u8), 1..4);
    let exchange = (calls, any::<bool>(), any::<bool>(), 0..24_u8).prop_map(
        |(calls, reasoning, reversed, odd)| {
            let mut list = Vec::new();
            if reasoning {
                list.push(json!({"type": "reasoning", "summary": [{"type": "summary_text", "text": "think"}]}));
            }
            let mut outputs = Vec::new();
            for (k, (name, args, result, odd)) in calls.into_iter().enumerate() {
                let id = format!("c{k}\u{e9}\"");
                let mut call = json!({"type": "function_call", "call_id": id, "name": name, "arguments": args});
                match odd {
                    0 => call["arguments"] = json!({"a": 1}),
                    1 => call["status"] = Value::from("completed"),
                    2 => call["extra"] = Value::from(true),
                    _ => {}
                }
                list.push(call);
                outputs.push(json!({"type": "function_call_output", "call_id": id,
                    "output": responses_text(result, odd)}));
            }
            match odd {
                0 => drop(outputs.pop()),
                1 => outputs.push(json!({"type": "function_call_output", "call_id": "nobody", "output": "x"})),
                2 => outputs.insert(0, json!({"role": "user", "content": "between"})),
                _ => {}
            }
            if reversed {
                outputs.reverse();
            }
            list.extend(outputs);
            list
        },
    );
    prop_oneof![1 => message, 2 => exchange]
}

proptest! {
    #[test]
    fn generated_responses_requests_map_alike_by_every_path(
        steps in proptest::collection::vec(responses_step(), 1..6),
        spelling in 0..4_u8,
        instructions in any::<bool>(),
    ) {
        let items: Vec<Value> = steps.into_iter().flatten().collect();
        let mut request = json!({"model": "m", "input": items});
        if instructions {
            request["instructions"] = Value::from("be brief");
        }
        let text = match spelling {
            0 => serde_json::to_string_pretty(&request).expect("JSON"),
            1 => ascii_escaped(&request.to_string()),
            2 => Value::from(items.clone()).to_string(),
            _ => request.to_string(),
        };
        agreed(Format::OpenAiResponses, &text);
    }
}

#[test]
fn generated_responses_requests_are_mostly_valid_and_read_by_hand() {
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let strategy = proptest::collection::vec(responses_step(), 1..6);
    let (mut mapped, mut plain) = (0, 0);
    for _ in 0..200 {
        let steps = strategy.new_tree(&mut runner).expect("a value").current();
        let items: Vec<Value> = steps.into_iter().flatten().collect();
        let text = json!({"input": items}).to_string();
        if agreed(Format::OpenAiResponses, &text).is_some() {
            mapped += 1;
        }
        let read = text::read(&text, "input").expect("a request");
        plain += read
            .layout
            .items
            .iter()
            .filter(|span| {
                crate::openai_responses::Plain::read(&text[(*span).clone()], 0, false).is_some()
            })
            .count();
    }
    assert!(mapped >= 60, "{mapped}");
    assert!(plain >= 300, "{plain}");
}

#[test]
fn requests_broken_around_or_inside_the_list_are_refused_by_every_path() {
    let good = r#"{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"yo"}]}"#;
    assert!(agreed(Format::OpenAiChat, good).is_some());
    let broken = [
        r#"{"model":"m","messages":[{"role":"user","content":"hi"} x {"role":"assistant","content":"yo"}]}"#,
        r#"{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"yo"},]}"#,
        r#"{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"yo"}]} x"#,
        r#"{"model":m,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"yo"}]}"#,
        r#"{"model":"m" "messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"yo"}]}"#,
        r#"{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"yo"]]}"#,
        r#"{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"yo",}]}"#,
        r#"{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"y\qo"}]}"#,
        r#"{"model":"m","model":"n","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"yo"}]}"#,
        r#"{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"yo"}],}"#,
        r#"{"model":[1}],"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"yo"}]}"#,
    ];
    for text in broken {
        assert!(agreed(Format::OpenAiChat, text).is_none(), "{text}");
        let est = CharRatioEstimator::default();
        assert!(
            crate::ProviderTranscript::from_text_with(Format::OpenAiChat, text, &est).is_none(),
            "{text}"
        );
    }
}

proptest! {
    #[test]
    fn requests_with_one_byte_changed_map_alike_by_every_path(
        steps in proptest::collection::vec(step(), 1..4),
        at in any::<proptest::sample::Index>(),
        byte in proptest::sample::select(b",:[]{}\" x0-\\ \n".to_vec()),
        pretty in any::<bool>(),
    ) {
        let messages: Vec<Value> = steps.into_iter().flatten().collect();
        let request = json!({"model": "m", "n": [1, {"a": null}], "messages": messages});
        let text = if pretty {
            serde_json::to_string_pretty(&request).expect("JSON")
        } else {
            request.to_string()
        };
        let mut bytes = text.into_bytes();
        let i = at.index(bytes.len());
        bytes[i] = byte;
        if let Ok(text) = String::from_utf8(bytes) {
            agreed(Format::OpenAiChat, &text);
        }
    }
}
