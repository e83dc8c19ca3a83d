//! `docs/recipes/adding-a-format.md`, followed once as far as a test can go without a public
//! [`Format`](crate::Format) variant: a tiny format with its own `validate`, `build` and
//! `render`, written with the crate-private mapping helpers the shipped formats use, and the
//! tests the recipe says to write first.
//!
//! The format: a JSON array of messages, or an object holding one under `messages`; each
//! message is `{"who", "text"}`, `who` one of `system`, `user`, `assistant`, `tool`. An
//! assistant message may make one call (`"call": id`), and the `tool` message right after it
//! answers it (`"result_of": id`).
//!
//! Two steps differ from a real format, because a [`Violation`](crate::Violation) names its
//! `Format` and this format has none: the validator reports the same `(rule, index, path, id)`
//! as a [`Broken`] tuple, and the pipeline of `ProviderTranscript` (validate, build, plan,
//! apply, walk, render, validate again) is spelled out in [`compact`] instead of dispatched.
//! Keep this file and the recipe together.

use std::collections::BTreeMap;
use std::sync::Arc;

use cutctx_model::{CompactionBudget, ErrorCode, Role, Transcript, TranscriptTurn};
use cutctx_policies::{
    CharRatioEstimator, CompactionPolicy, DropOldestPolicy, ObservationMaskingPolicy,
    SummarizingPolicy, TokenEstimator, default_chain,
};
use serde_json::{Map, Value, json};

use crate::content::Text;
use crate::mapping::{Built, Emit, Positions, TurnSource, ViewItem, messages_key, walk};
use crate::validate::Rule;
use crate::{FormatError, LEAD_IN_TEXT};

/// The first rule a document breaks: `(rule, message index, JSON path, call id)`, the fields
/// of a [`Violation`](crate::Violation) without its format.
type Broken = (Rule, Option<usize>, String, Option<String>);

fn broken(rule: Rule, i: Option<usize>, path: String, id: Option<&str>) -> Broken {
    (rule, i, path, id.map(str::to_owned))
}

/// The message list: the document itself, or its `messages`.
fn messages(document: &Value) -> Result<&Vec<Value>, Broken> {
    let (list, path) = messages_key(document, "messages");
    match list {
        Some(Value::Array(items)) => Ok(items),
        _ => Err(broken(Rule::Malformed, None, path, None)),
    }
}

fn path(i: usize) -> String {
    format!("messages[{i}]")
}

fn field<'a>(m: &'a Map<String, Value>, key: &str) -> Option<&'a str> {
    m.get(key).and_then(Value::as_str)
}

/// Step 1: the validator. Shapes first, then the provider's rules, in document order.
fn validate(document: &Value) -> Result<(), Broken> {
    let list = messages(document)?;
    if list.is_empty() {
        return Err(broken(
            Rule::NoMessages,
            None,
            messages_key(document, "messages").1,
            None,
        ));
    }
    // The call the previous message made and that is still unanswered.
    let mut open: Option<(usize, &str)> = None;
    for (i, m) in list.iter().enumerate() {
        let Value::Object(m) = m else {
            return Err(broken(Rule::Malformed, Some(i), path(i), None));
        };
        if !matches!(m.get("text"), Some(Value::String(_))) {
            return Err(broken(
                Rule::Malformed,
                Some(i),
                format!("{}.text", path(i)),
                None,
            ));
        }
        let Some(who) = field(m, "who") else {
            return Err(broken(
                Rule::Malformed,
                Some(i),
                format!("{}.who", path(i)),
                None,
            ));
        };
        if who == "tool" {
            let Some(id) = field(m, "result_of") else {
                return Err(broken(
                    Rule::Malformed,
                    Some(i),
                    format!("{}.result_of", path(i)),
                    None,
                ));
            };
            if open.take().map(|(_, call)| call) != Some(id) {
                return Err(broken(
                    Rule::ResultWithoutCall,
                    Some(i),
                    format!("{}.result_of", path(i)),
                    Some(id),
                ));
            }
            continue;
        }
        if let Some((j, call)) = open.take() {
            return Err(broken(
                Rule::CallWithoutResult,
                Some(j),
                format!("{}.call", path(j)),
                Some(call),
            ));
        }
        match who {
            "system" | "user" => {}
            "assistant" => open = field(m, "call").map(|call| (i, call)),
            _ => {
                return Err(broken(
                    Rule::UnknownRole,
                    Some(i),
                    format!("{}.who", path(i)),
                    None,
                ));
            }
        }
    }
    match open {
        Some((j, call)) => Err(broken(
            Rule::CallWithoutResult,
            Some(j),
            format!("{}.call", path(j)),
            Some(call),
        )),
        None => Ok(()),
    }
}

/// The error of `build` or `render` given a document without a message list, which
/// [`validate`] refuses first: a real format converts its `Violation` instead.
fn not_validated(b: Broken) -> FormatError {
    FormatError::unsupported(
        "This format maps only a document its validator accepts.",
        cutctx_model::details! { "path" => b.2 },
    )
}

/// Step 2: one turn per message, id `m{index}`; a call and its result share the exchange key
/// of the calling message's turn id, so cutctx keeps or removes them together.
fn build(document: &Value, estimator: &dyn TokenEstimator) -> Result<Built, FormatError> {
    let list = messages(document).map_err(not_validated)?;
    let mut built = Built::default();
    let mut keys: BTreeMap<&str, Arc<str>> = BTreeMap::new();
    for (i, m) in list.iter().enumerate() {
        let id = format!("m{i}");
        let mut text = Text::default();
        text.push_content(m.get("text").unwrap_or(&Value::Null));
        let (role, key) = match m.get("who").and_then(Value::as_str) {
            Some("system") => (Role::System, None),
            Some("user") => (Role::User, None),
            Some("tool") => {
                let call = m.get("result_of").and_then(Value::as_str).unwrap_or("");
                (Role::Tool, keys.get(call).cloned())
            }
            _ => {
                let key = m.get("call").and_then(Value::as_str).map(|call| {
                    let key: Arc<str> = Arc::from(id.as_str());
                    keys.insert(call, Arc::clone(&key));
                    key
                });
                (Role::Assistant, key)
            }
        };
        let (content, estimate) = text.finish(estimator);
        let turn = TranscriptTurn::new(id, role, content, estimate)?.with_tool_call_id_opt(key);
        built.push(turn, TurnSource::Message(i));
    }
    Ok(built)
}

/// Step 3: re-emit each kept message as it was, a masked one with the stub as its `text`, a
/// summary as an assistant message; the lead-in when nothing is left.
fn render(
    document: &Value,
    sources: &[TurnSource],
    items: &[ViewItem],
) -> Result<Value, FormatError> {
    let list = messages(document).map_err(not_validated)?;
    let mut out = Vec::with_capacity(items.len());
    for item in items {
        match item {
            ViewItem::Source { position, stub } => {
                let original = match sources.get(*position) {
                    Some(TurnSource::Message(i)) => list.get(*i),
                    _ => None,
                };
                let Some(original) = original else {
                    return Err(crate::mapping::bad_position(*position));
                };
                let mut message = original.clone();
                if let (Some(stub), Value::Object(m)) = (stub, &mut message) {
                    m.insert("text".into(), Value::from(&**stub));
                }
                out.push(message);
            }
            ViewItem::Summary { text } => {
                out.push(json!({"who": "assistant", "text": &**text}));
            }
        }
    }
    if out.is_empty() {
        // `mapping::lead_in_message` writes `role`/`content`: this format's keys differ.
        out.push(json!({"who": "user", "text": LEAD_IN_TEXT}));
    }
    Ok(Emit::replace(document, "messages", out))
}

/// What `ProviderTranscript` does for a real format, spelled out: validate, build, plan with
/// `policy`, fulfil every summary, apply, read the view back, render, and validate the output.
/// `Ok(None)` when the budget is unsatisfiable.
fn compact(
    document: &Value,
    policy: &dyn CompactionPolicy,
    budget: &CompactionBudget,
) -> Result<Option<Value>, String> {
    validate(document).map_err(|b| format!("input: {b:?}"))?;
    let built = build(document, &CharRatioEstimator::default()).map_err(|e| e.to_string())?;
    let transcript = Transcript::new(built.turns).map_err(|e| e.to_string())?;
    let positions = Positions::new();
    let plan = match policy.decide(&transcript, budget) {
        Ok(plan) => plan,
        Err(e) if e.code() == ErrorCode::BudgetUnsatisfiable => return Ok(None),
        Err(e) => return Err(e.to_string()),
    };
    let summaries: BTreeMap<String, String> = plan
        .summarization_requests
        .iter()
        .map(|r| {
            (
                r.group_id().to_owned(),
                format!("Summary of {}.", r.group_id()),
            )
        })
        .collect();
    let out = cutctx_executor::apply(&transcript, &plan, &summaries).map_err(|e| e.to_string())?;
    let items = walk(&positions, &transcript, &out.transcript).map_err(|e| e.to_string())?;
    let rendered = render(document, &built.sources, &items).map_err(|e| e.to_string())?;
    validate(&rendered).map_err(|b| format!("output: {b:?}"))?;
    Ok(Some(rendered))
}

/// Every shipped policy, as the format tests run them.
fn policies() -> Vec<(&'static str, Box<dyn CompactionPolicy>)> {
    let prompt = "compaction.summarize.v1";
    vec![
        ("drop_oldest", Box::new(DropOldestPolicy)),
        (
            "masking(0)",
            Box::new(ObservationMaskingPolicy::new(0).expect("valid")),
        ),
        (
            "summarizing(2)",
            Box::new(
                SummarizingPolicy::new(prompt)
                    .expect("valid")
                    .with_min_span_turns(2)
                    .expect("valid"),
            ),
        ),
        (
            "default_chain",
            Box::new(default_chain(prompt).expect("valid")),
        ),
    ]
}

/// A session with two calls, as a bare array: the first result is long enough to mask, and the
/// second call outweighs its result, so that removing the call alone would often fit.
fn sample() -> Value {
    json!([
        {"who": "system", "text": "You are terse."},
        {"who": "user", "text": "Why did the nightly build fail?"},
        {"who": "assistant", "text": "Reading the log.", "call": "k1", "cache": "keep-me"},
        {"who": "tool", "text": "step 40/40 FAILED: cache key mismatch. ".repeat(30), "result_of": "k1"},
        {"who": "assistant", "text": "Checking the lock file: ".repeat(20), "call": "k2"},
        {"who": "tool", "text": "Cargo.lock changed in 9f2c71e.", "result_of": "k2"},
        {"who": "assistant", "text": "The cache key depends on Cargo.lock, which changed."},
        {"who": "user", "text": "Thanks."}
    ])
}

/// The total estimate of a valid document.
fn total(document: &Value) -> u64 {
    let built = build(document, &CharRatioEstimator::default()).expect("valid");
    built.turns.iter().map(TranscriptTurn::token_estimate).sum()
}

/// An orphan check written apart from [`validate`]: every call is answered by the next
/// message, and every result answers the message before it.
fn orphans(document: &Value) -> Vec<String> {
    let list = messages(document).expect("a message list");
    let s = |m: &Value, k: &str| m.get(k).and_then(Value::as_str).map(str::to_owned);
    let mut problems = Vec::new();
    for (i, m) in list.iter().enumerate() {
        if let Some(call) = s(m, "call")
            && list.get(i + 1).and_then(|n| s(n, "result_of")) != Some(call.clone())
        {
            problems.push(format!("call {call} at {i} has no result after it"));
        }
        if let Some(id) = s(m, "result_of") {
            let before = i.checked_sub(1).and_then(|p| list.get(p));
            if before.and_then(|b| s(b, "call")) != Some(id.clone()) {
                problems.push(format!("result {id} at {i} follows no call"));
            }
        }
    }
    problems
}

// The tests the recipe says to write first, in its order.

#[test]
fn the_validator_names_each_broken_rule_where_it_is_broken() {
    let user = json!({"who": "user", "text": "hi"});
    let call = |id: &str| json!({"who": "assistant", "text": "", "call": id});
    let result = |id: &str| json!({"who": "tool", "text": "r", "result_of": id});
    let at = |rule, i: usize, path: &str, id: Option<&str>| {
        Err(broken(rule, Some(i), path.to_owned(), id))
    };

    assert_eq!(validate(&sample()), Ok(()));
    assert_eq!(validate(&json!({"messages": sample()})), Ok(()));
    // An orphaned result: after a user message, or answering another call.
    assert_eq!(
        validate(&json!([user, result("k")])),
        at(
            Rule::ResultWithoutCall,
            1,
            "messages[1].result_of",
            Some("k")
        )
    );
    assert_eq!(
        validate(&json!([call("k"), result("z")])),
        at(
            Rule::ResultWithoutCall,
            1,
            "messages[1].result_of",
            Some("z")
        )
    );
    // A call left unanswered, mid-list or at the end; it is named at the call.
    assert_eq!(
        validate(&json!([call("k"), user])),
        at(Rule::CallWithoutResult, 0, "messages[0].call", Some("k"))
    );
    assert_eq!(
        validate(&json!([user, call("k")])),
        at(Rule::CallWithoutResult, 1, "messages[1].call", Some("k"))
    );
    // A second result for one call is an orphan too.
    assert_eq!(
        validate(&json!([call("k"), result("k"), result("k")])),
        at(
            Rule::ResultWithoutCall,
            2,
            "messages[2].result_of",
            Some("k")
        )
    );
    // Shapes.
    assert_eq!(
        validate(&json!([])),
        Err(broken(Rule::NoMessages, None, "messages".into(), None))
    );
    assert_eq!(
        validate(&json!({"model": "m"})),
        Err(broken(Rule::Malformed, None, "messages".into(), None))
    );
    assert_eq!(
        validate(&json!([user, 3])),
        at(Rule::Malformed, 1, "messages[1]", None)
    );
    assert_eq!(
        validate(&json!([{"who": "user", "text": 7}])),
        at(Rule::Malformed, 0, "messages[0].text", None)
    );
    assert_eq!(
        validate(&json!([{"text": ""}])),
        at(Rule::Malformed, 0, "messages[0].who", None)
    );
    assert_eq!(
        validate(&json!([{"who": "robot", "text": ""}])),
        at(Rule::UnknownRole, 0, "messages[0].who", None)
    );
}

#[test]
fn a_budget_that_fits_gives_the_input_back_under_every_policy() {
    for document in [sample(), json!({"model": "m", "messages": sample()})] {
        let budget = CompactionBudget::new(total(&document));
        for (name, policy) in policies() {
            let out = compact(&document, policy.as_ref(), &budget)
                .unwrap_or_else(|e| panic!("{name}: {e}"))
                .expect("a budget equal to the total is satisfiable");
            assert_eq!(out, document, "{name}");
        }
    }
    // And the transcript rendered as it is, without a plan.
    let document = sample();
    let built = build(&document, &CharRatioEstimator::default()).expect("valid");
    let t = Transcript::new(built.turns).expect("unique ids");
    let items = walk(&Positions::new(), &t, &t).expect("the transcript's own turns");
    assert_eq!(
        render(&document, &built.sources, &items).expect("renders"),
        document
    );
}

#[test]
fn a_call_and_its_result_share_an_exchange() {
    let built = build(&sample(), &CharRatioEstimator::default()).expect("valid");
    let keys: Vec<Option<&str>> = built.turns.iter().map(|t| t.tool_call_id()).collect();
    assert_eq!(
        keys,
        [
            None,
            None,
            Some("m2"),
            Some("m2"),
            Some("m4"),
            Some("m4"),
            None,
            None
        ]
    );
}

#[test]
fn a_tight_budget_never_separates_a_call_from_its_result() {
    let document = sample();
    let all = total(&document);
    let (mut outputs, mut removed_pairs, mut masked) = (0, 0, 0);
    for (name, policy) in policies() {
        for protected in [0, 1, 2] {
            for step in 0..=20 {
                let budget =
                    CompactionBudget::new(all * step / 20).with_protected_recent_turns(protected);
                let at = format!("{name} / {budget:?}");
                let Some(out) = compact(&document, policy.as_ref(), &budget)
                    .unwrap_or_else(|e| panic!("{at}: {e}"))
                else {
                    continue;
                };
                assert_eq!(orphans(&out), Vec::<String>::new(), "{at}");
                let list = messages(&out).expect("a message list");
                let has = |key: &str, id: &str| list.iter().any(|m| m.get(key) == Some(&json!(id)));
                for call in ["k1", "k2"] {
                    assert_eq!(has("call", call), has("result_of", call), "{at}: {call}");
                }
                removed_pairs += usize::from(!has("call", "k1"));
                let stubbed = list.iter().find(|m| {
                    m.get("result_of") == Some(&json!("k1"))
                        && m["text"].as_str().is_some_and(|t| t.contains("sha256:"))
                });
                if let Some(stub) = stubbed {
                    // A masked result keeps its id and every other field; only `text` changes.
                    assert_eq!(stub["who"], "tool", "{at}");
                    masked += 1;
                }
                outputs += 1;
            }
        }
    }
    assert!(outputs >= 150, "{outputs} outputs");
    assert!(
        removed_pairs >= 20,
        "{removed_pairs} outputs lost the first call"
    );
    assert!(masked >= 10, "{masked} outputs masked its result");
}

#[test]
fn compacting_everything_away_leaves_the_lead_in() {
    let document = json!([
        {"who": "user", "text": "one"},
        {"who": "assistant", "text": "two"}
    ]);
    let out = compact(
        &document,
        &DropOldestPolicy,
        &CompactionBudget::new(0).with_protected_recent_turns(0),
    )
    .expect("compacts")
    .expect("satisfiable");
    assert_eq!(out, json!([{"who": "user", "text": LEAD_IN_TEXT}]));
}
