//! Integration tests of `cutctx-policies`: each shipped policy on the reference's fixtures
//! (BEHAVIOUR.md §7, §10.1), the chain's worked examples, custom policies and estimators, and
//! properties over random transcripts, budgets and policies.
//!
//! Shared builders and an independent digest live here; `fixtures` holds the §10.1 transcripts.

mod capabilities;
mod chain;
mod custom;
mod drop_oldest;
mod fixtures;
mod masking;
mod oracle;
mod properties;
mod recipe;
mod summarizing;

use std::fmt::Write as _;

use cutctx_invariants::{CompactionPlan, PlanDraft};
use cutctx_model::{
    Action, CompactionBudget, CompactionError, ErrorCode, Role, Transcript, TranscriptTurn,
};
use sha2::{Digest as _, Sha256};

/// The prompt id every golden uses.
pub(crate) const PROMPT: &str = "compaction.summarize.v1";

/// The name of `default_chain`.
pub(crate) const DEFAULT_CHAIN_NAME: &str =
    "chain(observation_masking@1.0.0+summarizing@1.0.0+drop_oldest@1.0.0)";

/// A turn with content `content of <id>`, as the reference's `conftest.turn` writes it.
pub(crate) fn turn(id: &str, role: Role, tokens: u64) -> TranscriptTurn {
    TranscriptTurn::new(id, role, format!("content of {id}"), tokens).expect("a non-empty turn id")
}

/// A turn with the given content.
pub(crate) fn turn_with(id: &str, role: Role, content: &str, tokens: u64) -> TranscriptTurn {
    TranscriptTurn::new(id, role, content, tokens).expect("a non-empty turn id")
}

/// A transcript of these turns.
pub(crate) fn transcript(turns: Vec<TranscriptTurn>) -> Transcript {
    Transcript::new(turns).expect("unique turn ids")
}

/// A budget of `max` tokens protecting the last `protected` turns.
pub(crate) fn budget(max: u64, protected: u64) -> CompactionBudget {
    CompactionBudget::new(max).with_protected_recent_turns(protected)
}

/// A plan's actions in one line: `id:K`, `id:D`, `id:M<stub estimate>`, `id:S<group>`.
pub(crate) fn acts(plan: &PlanDraft) -> String {
    plan.actions
        .iter()
        .map(|a| match a.action() {
            Action::Keep => format!("{}:K", a.turn_id()),
            Action::Drop => format!("{}:D", a.turn_id()),
            Action::Mask => format!(
                "{}:M{}",
                a.turn_id(),
                a.replacement().expect("a mask has a stub").token_estimate
            ),
            Action::Summarize => format!(
                "{}:S<{}>",
                a.turn_id(),
                a.summary_group().expect("a summarize has a group")
            ),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// `(tokens_before, tokens_after_estimate, budget_unmet, estimator_ratio)`.
pub(crate) type Figures = (u64, u64, bool, Option<f64>);

/// A plan's [`Figures`].
pub(crate) fn figures(plan: &PlanDraft) -> Figures {
    (
        plan.tokens_before,
        plan.tokens_after_estimate,
        plan.budget_unmet,
        plan.estimator_ratio,
    )
}

/// Each request as `(group_id, turn_ids, target_tokens, prompt_id)`.
pub(crate) fn requests(plan: &PlanDraft) -> Vec<(String, Vec<String>, u64, String)> {
    plan.summarization_requests
        .iter()
        .map(|r| {
            (
                r.group_id().to_owned(),
                r.turn_ids().iter().map(|id| id.to_string()).collect(),
                r.target_tokens(),
                r.prompt_id().to_owned(),
            )
        })
        .collect()
}

/// The stub content of the masked turn `id`.
pub(crate) fn stub_of<'p>(plan: &'p PlanDraft, id: &str) -> &'p str {
    let action = plan
        .actions
        .iter()
        .find(|a| a.turn_id() == id)
        .expect("the turn is planned");
    &action.replacement().expect("the turn is masked").content
}

/// The JSON string literal of `text`, written independently of the crate under test from the
/// rules of BEHAVIOUR.md §4: only `"`, `\` and U+0000..U+001F are escaped, controls without a
/// short form as `\u00xx` in lower case; everything else raw.
pub(crate) fn python_json_literal(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if u32::from(c) < 0x20 => {
                write!(out, "\\u{:04x}", u32::from(c)).expect("writing to a String");
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The reference's `sha256_of(text)`: the lower-case SHA-256 hex of the JSON string literal.
pub(crate) fn digest(text: &str) -> String {
    let hash = Sha256::digest(python_json_literal(text).as_bytes());
    hash.iter().fold(String::with_capacity(64), |mut s, b| {
        write!(s, "{b:02x}").expect("writing to a String");
        s
    })
}

/// The reference's group id of a span: `span-` and 16 hex of `sha256_of("\0".join(ids))`.
pub(crate) fn group_id(ids: &[&str]) -> String {
    format!("span-{}", &digest(&ids.join("\u{0}"))[..16])
}

/// The reference's default stub for a turn of `tokens` tokens and this content.
pub(crate) fn default_stub(tokens: u64, content: &str) -> String {
    format!(
        "[tool result masked by cutctx] (original: {tokens} tokens, sha256:{})",
        digest(content)
    )
}

/// Expects a `COMPACTION_BUDGET_UNSATISFIABLE` refusal and returns its details as JSON.
pub(crate) fn unsatisfiable(result: Result<CompactionPlan, CompactionError>) -> serde_json::Value {
    let err = result.expect_err("the budget must be refused");
    assert_eq!(
        err.code(),
        ErrorCode::BudgetUnsatisfiable,
        "{}",
        err.message()
    );
    serde_json::to_value(err.details()).expect("details are JSON")
}

/// Expects a `VALIDATION_ERROR` and returns its details as JSON.
pub(crate) fn invalid<T: std::fmt::Debug>(result: Result<T, CompactionError>) -> serde_json::Value {
    let err = result.expect_err("the argument must be refused");
    assert_eq!(err.code(), ErrorCode::Validation, "{}", err.message());
    serde_json::to_value(err.details()).expect("details are JSON")
}

#[test]
fn the_independent_digest_reproduces_the_reference_vector() {
    // BEHAVIOUR.md §4: sha256_of("L"*1200) hashes the quoted literal.
    assert_eq!(
        digest(&"L".repeat(1200)),
        "d1fd6a834c71465d6eeb3623b9c5a2ac60c49d069ffc469bc131b4ff506e55a2"
    );
    assert_eq!(
        python_json_literal("a\"b\\c\n\r\t\u{8}\u{c}\u{0}\u{1f}\u{7f}/\u{2028}é"),
        "\"a\\\"b\\\\c\\n\\r\\t\\b\\f\\u0000\\u001f\u{7f}/\u{2028}é\""
    );
    assert_eq!(
        group_id(&["m0", "m1", "m2", "m3", "m4", "m5", "m6", "m7", "m8"]),
        "span-b2da65fee5a8bd16"
    );
}
