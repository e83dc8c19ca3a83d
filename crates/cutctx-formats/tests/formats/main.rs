//! Integration tests of `cutctx-formats`: the three provider formats mapped to transcripts and
//! back, on a corpus of realistic requests (`tests/corpus/` and the samples in `examples/`)
//! and on random ones.
//!
//! * `roundtrip`: every corpus request is valid and comes back identical when the budget fits;
//! * `compaction`: every compacted output of every policy at every budget passes the format's
//!   validator and an independent orphan check, and the mapping's promises hold (masked results
//!   keep their ids, summaries sit where the folded turns were, roles alternate);
//! * `validators`: each rule of each format, with the index and path it names;
//! * `errors`: codes, and details that never carry content;
//! * `properties`: random provider transcripts, budgets and policies;
//! * `realworld`: the tau-bench runs of `../shared/realworld`, replayed call by call;
//! * `reasoning`: signed thinking and reasoning items after a compaction, on the providers'
//!   documented shapes (tool loops, redacted thinking, encrypted reasoning);
//! * `repairs`: whole-prompt counts and `repair`, rule by rule;
//! * `open_validation`: a validation kept open and appended says what `validate` says;
//! * `repair_equivalence`: `repair` equals its definition (`repair_oracle`, the
//!   drop-and-revalidate loop) on random broken histories;
//! * `text`: the text path (`from_text_with`, `apply_text`) maps and renders what the value
//!   path does, keeping the input's bytes where nothing changed;
//! * `deferred`: the text path with contents left in the request (`from_text_deferred`,
//!   `plan`) plans and renders what the text path does;
//! * `bpe` (feature `bpe`): BPE counts against tiktoken-rs's own.

mod compaction;
mod errors;
mod left_in_text;
mod open_validation;
mod properties;
mod realworld;
mod reasoning;
mod repair_equivalence;
mod repair_oracle;
mod repairs;
mod roundtrip;
mod text;
mod today;
mod validators;

#[cfg(feature = "bpe")]
mod bpe;

use std::collections::BTreeMap;
use std::path::Path;

use cutctx_formats::{Compacted, Format, FormatError, ProviderTranscript};
use cutctx_invariants::CompactionPlan;
use cutctx_model::{CompactionBudget, ErrorCode};
use cutctx_policies::{
    CompactionPolicy, DropOldestPolicy, ObservationMaskingPolicy, SummarizingPolicy, default_chain,
};
use serde_json::Value;

/// The prompt id the summarizing policies use.
pub(crate) const PROMPT: &str = "compaction.summarize.v1";

/// One corpus request.
pub(crate) struct Case {
    pub(crate) format: Format,
    pub(crate) name: String,
    pub(crate) document: Value,
}

/// The samples in `examples/` and every file under `tests/corpus/<format>/`.
pub(crate) fn corpus() -> Vec<Case> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut cases = Vec::new();
    for format in Format::ALL {
        let example = root.join(format!("../../examples/{}.json", format.as_str()));
        let mut files = vec![example];
        let dir = root.join("tests/corpus").join(format.as_str());
        let mut listed: Vec<_> = std::fs::read_dir(&dir)
            .expect("the corpus folder exists")
            .map(|e| e.expect("a corpus entry").path())
            .filter(|p| p.extension().is_some_and(|e| e == "json"))
            .collect();
        listed.sort();
        files.extend(listed);
        for file in files {
            let text = std::fs::read_to_string(&file).expect("a corpus file reads");
            let document: Value = serde_json::from_str(&text).expect("a corpus file is JSON");
            cases.push(Case {
                format,
                name: file
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default(),
                document,
            });
        }
    }
    cases
}

/// Asserts that the per-message form of the count adds up to the whole prompt's count:
/// `fixed_tokens + Σ message_tokens + reserve == prompt_count(reserve).total`.
pub(crate) fn assert_count_adds_up(format: Format, document: &Value, what: &str) {
    let estimator = cutctx_policies::CharRatioEstimator::default();
    let pt = ProviderTranscript::parse_with(format, document, &estimator)
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    let mut sum = cutctx_formats::fixed_tokens(format, document, &estimator)
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    for m in cutctx_formats::message_list(format, document) {
        sum += cutctx_formats::message_tokens(format, m, &estimator)
            .unwrap_or_else(|e| panic!("{what}: {e}"));
    }
    assert_eq!(sum + 7, pt.prompt_count(7).total, "{what}");
    // The sums alone are the same sums.
    let count = pt.prompt_count(7);
    assert_eq!(
        pt.prompt_totals(7),
        cutctx_formats::PromptCount {
            turns: Vec::new(),
            ..count
        },
        "{what}"
    );
}

/// Every shipped policy, in a few configurations.
pub(crate) fn policies() -> Vec<(&'static str, Box<dyn CompactionPolicy>)> {
    vec![
        ("drop_oldest", Box::new(DropOldestPolicy)),
        (
            "masking(0)",
            Box::new(ObservationMaskingPolicy::new(0).expect("valid")),
        ),
        (
            "masking(2)",
            Box::new(ObservationMaskingPolicy::new(2).expect("valid")),
        ),
        (
            "summarizing(2)",
            Box::new(
                SummarizingPolicy::new(PROMPT)
                    .expect("valid")
                    .with_min_span_turns(2)
                    .expect("valid"),
            ),
        ),
        (
            "default_chain",
            Box::new(default_chain(PROMPT).expect("valid")),
        ),
    ]
}

/// The summary text the tests supply for a group.
pub(crate) fn summary_text(group: &str, turns: usize) -> String {
    format!("Summary of {turns} earlier turns ({group}).")
}

/// A summary ([`summary_text`]) for every summarization request of `plan`, by group id.
pub(crate) fn summaries_for(plan: &CompactionPlan) -> BTreeMap<String, String> {
    plan.summarization_requests
        .iter()
        .map(|r| {
            let text = summary_text(r.group_id(), r.turn_ids().len());
            (r.group_id().to_owned(), text)
        })
        .collect()
}

/// Plans with `policy`, fulfils every summarization request, applies and renders. `None` when
/// the budget is unsatisfiable.
pub(crate) fn compact(
    pt: &ProviderTranscript,
    policy: &dyn CompactionPolicy,
    budget: &CompactionBudget,
) -> Result<Option<Compacted>, FormatError> {
    let plan = match policy.decide(pt.transcript(), budget) {
        Ok(plan) => plan,
        Err(e) if e.code() == ErrorCode::BudgetUnsatisfiable => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    pt.apply(&plan, &summaries_for(&plan)).map(Some)
}

/// Compacts the request `text` through the text path and through the value path, and says
/// where they differ: the transcripts, the reports, the documents (the text output parsed),
/// and, when the value path gives the input back, the bytes.
pub(crate) fn compare_text(
    format: Format,
    text: &str,
    policy: &dyn CompactionPolicy,
    budget: &CompactionBudget,
) -> Result<(), String> {
    let document: Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
    let pt = ProviderTranscript::parse(format, &document).map_err(|e| e.to_string())?;
    let estimator = cutctx_policies::CharRatioEstimator::default();
    let Some(tp) = ProviderTranscript::from_text_with(format, text, &estimator) else {
        // A Responses `input` string, or an empty list, is the value path's alone.
        let listed = cutctx_formats::message_list(format, &document);
        if listed.is_empty() {
            return Ok(());
        }
        return Err("the text path refused a valid request".into());
    };
    if tp.transcript() != pt.transcript() {
        return Err("the transcripts differ".into());
    }
    if tp.tools_tokens() != pt.tools_tokens() {
        return Err("the tools' estimates differ".into());
    }
    let plan = match policy.decide(pt.transcript(), budget) {
        Ok(plan) => plan,
        Err(e) if e.code() == ErrorCode::BudgetUnsatisfiable => return Ok(()),
        Err(e) => return Err(e.to_string()),
    };
    let summaries = summaries_for(&plan);
    let by_value = pt.apply(&plan, &summaries).map_err(|e| e.to_string())?;
    let by_text = tp
        .apply_text(&plan, &summaries, text)
        .map_err(|e| e.to_string())?;
    if by_text.report != by_value.report {
        return Err("the reports differ".into());
    }
    let parsed: Value = serde_json::from_str(&by_text.text).map_err(|e| e.to_string())?;
    if parsed != by_value.document {
        return Err(format!(
            "the documents differ:\n{}\n{}",
            by_text.text, by_value.document
        ));
    }
    if by_value.document == document && by_text.text != text {
        return Err("a request that fits did not come back byte for byte".into());
    }
    Ok(())
}

/// The message list of a document of `format`.
pub(crate) fn list(format: Format, document: &Value) -> Vec<Value> {
    let key = match format {
        Format::OpenAiResponses => "input",
        _ => "messages",
    };
    match document {
        Value::Array(items) => items.clone(),
        doc => match doc.get(key) {
            Some(Value::Array(items)) => items.clone(),
            Some(s @ Value::String(_)) => vec![serde_json::json!({"role": "user", "content": s})],
            _ => Vec::new(),
        },
    }
}

/// An independent check for orphans, written apart from the crate's validators: every call has
/// its result and every result its call, where the provider looks for them.
pub(crate) fn orphans(format: Format, document: &Value) -> Vec<String> {
    let items = list(format, document);
    let mut problems = Vec::new();
    let s = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).map(str::to_owned);
    match format {
        Format::OpenAiChat => {
            let mut i = 0;
            while i < items.len() {
                let m = &items[i];
                let calls: Vec<String> = m
                    .get("tool_calls")
                    .and_then(Value::as_array)
                    .map(|c| c.iter().filter_map(|c| s(c, "id")).collect())
                    .unwrap_or_default();
                if s(m, "role").as_deref() == Some("tool") {
                    problems.push(format!("tool message {i} follows no call"));
                }
                i += 1;
                if calls.is_empty() {
                    continue;
                }
                let mut answered = Vec::new();
                while i < items.len() && s(&items[i], "role").as_deref() == Some("tool") {
                    answered.push(s(&items[i], "tool_call_id").unwrap_or_default());
                    i += 1;
                }
                let mut a = answered.clone();
                let mut c = calls.clone();
                a.sort();
                c.sort();
                if a != c {
                    problems.push(format!("calls {c:?} answered by {a:?}"));
                }
            }
        }
        Format::OpenAiResponses => {
            let mut open: BTreeMap<String, String> = BTreeMap::new();
            for (i, it) in items.iter().enumerate() {
                let ty = s(it, "type").unwrap_or_default();
                if let Some(base) = ty.strip_suffix("_output") {
                    let id = s(it, "call_id").unwrap_or_default();
                    if open.remove(&id).as_deref() != Some(base) {
                        problems.push(format!("output {i} ({id}) has no call before it"));
                    }
                } else if ty.ends_with("_call") && it.get("call_id").is_some() {
                    open.insert(s(it, "call_id").unwrap_or_default(), ty);
                } else if ty == "reasoning" {
                    let next = items.get(i + 1).map(|n| s(n, "type").unwrap_or_default());
                    if next.is_none_or(|t| t.ends_with("_output") || t.is_empty()) {
                        problems.push(format!("reasoning {i} has no item after it"));
                    }
                }
            }
            for id in open.keys() {
                problems.push(format!("call {id} has no output"));
            }
        }
        Format::Anthropic => {
            let blocks = |m: &Value, ty: &str, key: &str| -> Vec<String> {
                m.get("content")
                    .and_then(Value::as_array)
                    .map(|b| {
                        b.iter()
                            .filter(|b| s(b, "type").as_deref() == Some(ty))
                            .filter_map(|b| s(b, key))
                            .collect()
                    })
                    .unwrap_or_default()
            };
            for (i, m) in items.iter().enumerate() {
                let mut uses = blocks(m, "tool_use", "id");
                let mut results = items
                    .get(i + 1)
                    .map(|n| blocks(n, "tool_result", "tool_use_id"))
                    .unwrap_or_default();
                uses.sort();
                results.sort();
                if !uses.is_empty() && uses != results {
                    problems.push(format!("tool uses {uses:?} of {i} answered by {results:?}"));
                }
                let own = blocks(m, "tool_result", "tool_use_id");
                if !own.is_empty() {
                    let mut before = i
                        .checked_sub(1)
                        .and_then(|p| items.get(p))
                        .map(|p| blocks(p, "tool_use", "id"))
                        .unwrap_or_default();
                    let mut own = own;
                    before.sort();
                    own.sort();
                    if before != own {
                        problems.push(format!("results {own:?} of {i} follow uses {before:?}"));
                    }
                }
            }
        }
    }
    problems
}

/// Each turn's exchange key (`tool_call_id`), by position.
pub(crate) fn call_keys(pt: &cutctx_formats::ProviderTranscript) -> Vec<Option<&str>> {
    pt.transcript()
        .turns()
        .iter()
        .map(|t| t.tool_call_id())
        .collect()
}

/// The role of a message or item (`"message"` items by role, other items by type).
pub(crate) fn role(v: &Value) -> String {
    v.get("role")
        .or_else(|| v.get("type"))
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned()
}

/// The fixed sample the BPE counts are pinned on: prose, code, JSON, logs, several scripts,
/// emoji, whitespace runs and special-token text (counted as ordinary text).
#[cfg(feature = "bpe")]
pub(crate) const BPE_SAMPLES: [&str; 12] = [
    "hello world",
    "tiktoken is great!",
    "The nightly build broke. Find out why.",
    "fn main() {\n    println!(\"{}\", 1 + 2);\n}\n",
    "{\"path\":\"ci/nightly.log\",\"lines\":[1,2,3]}",
    "step 40/40 FAILED: cache key mismatch (computed 9f2c71e0, expected 41ab09d3)",
    "Le cache est invalidé : la clé dépend de Cargo.lock.",
    "缓存键取决于锁文件。",
    "Weather: ☀️ 24 °C, 🌧️ 18 °C 👍🏽",
    "a    b\t\tc\n\n\n   d",
    "<|endoftext|> is text here",
    "",
];
