//! `acceptance/plan_and_apply.py`: the default chain on a system turn, six tool exchanges and a
//! closing question, planned, fulfilled by hand and applied.

use std::collections::BTreeMap;
use std::sync::Arc;

use cutctx::{
    Action, CompactionBudget, CompactionPolicy, ErrorCode, Role, Transcript, TranscriptTurn, apply,
    default_chain,
};

use crate::{assert_view_of, sha256_of};

/// The transcript's documented total.
const TOTAL: u64 = 2095;
/// Each of the six rounds: user 20, assistant call 25, tool result 300.
const ROUND: u64 = 20 + 25 + 300;
/// The closing question.
const CLOSING: u64 = 15;
/// The system turn's estimate: what the documented total leaves.
const SYSTEM: u64 = TOTAL - 6 * ROUND - CLOSING;

const PROMPT: &str = "compaction.summarize.v1";

/// The content of tool result `i`: `f"line {i}\n" * 300`.
fn log(i: usize) -> String {
    format!("line {i}\n").repeat(300)
}

/// s1, then six rounds `u{i}`, `a{i}` (call `c{i}`), `t{i}` (result of `c{i}`), then u9.
fn acceptance_transcript() -> Transcript {
    let mut turns =
        vec![TranscriptTurn::new("s1", Role::System, "You are careful.", SYSTEM).expect("an id")];
    for i in 0..6 {
        turns.push(
            TranscriptTurn::new(format!("u{i}"), Role::User, format!("question {i}"), 20)
                .expect("an id"),
        );
        turns.push(
            TranscriptTurn::new(format!("a{i}"), Role::Assistant, format!("calling {i}"), 25)
                .expect("an id")
                .with_tool_call_id(format!("c{i}")),
        );
        turns.push(
            TranscriptTurn::new(format!("t{i}"), Role::Tool, log(i), 300)
                .expect("an id")
                .with_tool_call_id(format!("c{i}")),
        );
    }
    turns.push(TranscriptTurn::new("u9", Role::User, "Anything else?", CLOSING).expect("an id"));
    Transcript::new(turns).expect("unique ids")
}

fn budget(max: u64) -> CompactionBudget {
    CompactionBudget::new(max).with_protected_recent_turns(2)
}

fn ids(list: &[&str]) -> Vec<Arc<str>> {
    list.iter().map(|s| Arc::from(*s)).collect()
}

#[test]
fn the_transcript_totals_what_the_reference_documents() {
    assert_eq!(SYSTEM, 10);
    let t = acceptance_transcript();
    assert_eq!(t.token_estimate(), TOTAL);
    assert_eq!(t.len(), 20);
}

#[test]
fn at_1200_masking_alone_suffices() {
    let t = acceptance_transcript();
    let before = t.clone();
    let plan = default_chain(PROMPT)
        .expect("a prompt id")
        .decide(&t, &budget(1200))
        .expect("satisfiable");
    // Four stubs of 32 save 4 × 268: 2095 → 1023. t4 and t5 are the two results kept recent.
    assert_eq!(
        (
            plan.tokens_before,
            plan.tokens_after_estimate,
            plan.budget_unmet,
            plan.estimator_ratio
        ),
        (TOTAL, 1023, false, Some(4.0))
    );
    assert!(plan.summarization_requests.is_empty());
    assert!(
        plan.actions
            .iter()
            .all(|a| matches!(a.action(), Action::Keep | Action::Mask))
    );

    let out = apply(&t, &plan, &BTreeMap::new()).expect("no summary requested");
    let report = &out.report;
    assert_eq!(report.masked_turn_ids, ids(&["t0", "t1", "t2", "t3"]));
    assert!(report.summarized_turn_ids.is_empty() && report.dropped_turn_ids.is_empty());
    assert_eq!((report.turns_before, report.turns_after), (20, 20));
    assert_eq!(
        (report.tokens_before, report.tokens_after_estimate),
        (TOTAL, 1023)
    );
    assert_eq!(report.estimator_ratio, Some(4.0));
    assert_eq!(out.transcript.token_estimate(), 1023);
    for i in 0..4 {
        let id = format!("t{i}");
        let stub = out
            .transcript
            .turns()
            .iter()
            .find(|turn| turn.turn_id() == id)
            .expect("a masked turn stays in place");
        assert_eq!(
            stub.content(),
            format!(
                "[tool result masked by cutctx] (original: 300 tokens, sha256:{})",
                sha256_of(&log(i))
            )
        );
        assert_eq!(stub.token_estimate(), 32);
        assert_eq!(stub.tool_call_id(), Some(format!("c{i}").as_str()));
        assert_eq!(
            stub.metadata().get("cutctx.kind").map(String::as_str),
            Some("masked")
        );
    }
    assert_view_of(&t, &before, &out.transcript, &report.kept_turn_ids);
}

#[test]
fn at_1000_one_summary_is_planned_fulfilled_and_applied() {
    let t = acceptance_transcript();
    let before = t.clone();
    let plan = default_chain(PROMPT)
        .expect("a prompt id")
        .decide(&t, &budget(1000))
        .expect("satisfiable");

    // Masking t0..t3 leaves 1023 > 1000. Summarizing then takes u0..u5 (a5 is locked by its
    // protected result t5): 4 × 77 + 345 + 20 = 673 projected tokens, target round(134.6).
    let span: Vec<String> = (0..6)
        .flat_map(|i| {
            let round = [format!("u{i}"), format!("a{i}"), format!("t{i}")];
            round.into_iter().take(if i == 5 { 1 } else { 3 })
        })
        .collect();
    let span_refs: Vec<&str> = span.iter().map(String::as_str).collect();
    let gid = format!("span-{}", &sha256_of(&span_refs.join("\u{0}"))[..16]);
    assert_eq!(plan.summarization_requests.len(), 1);
    let request = &plan.summarization_requests[0];
    assert_eq!(request.group_id(), gid);
    assert_eq!(request.turn_ids(), ids(&span_refs).as_slice());
    assert_eq!(request.target_tokens(), 135);
    assert_eq!(request.prompt_id(), PROMPT);
    assert_eq!(
        (
            plan.tokens_before,
            plan.tokens_after_estimate,
            plan.budget_unmet,
            plan.estimator_ratio
        ),
        (TOTAL, 485, false, Some(4.0))
    );

    // Forgetting to fulfil the request is an error, not a quietly shorter prompt.
    let err = apply(&t, &plan, &BTreeMap::new()).expect_err("the summary is missing");
    assert_eq!(err.code(), ErrorCode::SummaryMissing);
    assert_eq!(err.details()["group_id"], gid.as_str());
    assert_eq!(err.details()["target_tokens"], 135);

    let text = "Earlier: six log reads; the regression is in the cache key.";
    let summaries = BTreeMap::from([(gid.clone(), text.to_owned())]);
    let out = apply(&t, &plan, &summaries).expect("fulfilled");
    let report = &out.report;
    let summary_id = format!("summary:{gid}");
    assert_eq!(
        out.transcript.turn_ids().collect::<Vec<_>>(),
        ["s1", summary_id.as_str(), "a5", "t5", "u9"]
    );
    assert_eq!((report.turns_before, report.turns_after), (20, 5));
    assert_eq!(
        (report.tokens_before, report.tokens_after_estimate),
        (TOTAL, 485)
    );
    assert_eq!(out.transcript.token_estimate(), 485);
    assert_eq!(
        report.summary_turn_ids.as_slice(),
        std::slice::from_ref(&summary_id)
    );
    assert_eq!(report.summarized_turn_ids, ids(&span_refs));
    // The stubs of t0..t3 were discarded when their turns were summarized.
    assert!(report.masked_turn_ids.is_empty() && report.dropped_turn_ids.is_empty());
    assert_eq!(report.kept_turn_ids, ids(&["s1", "a5", "t5", "u9"]));
    assert_eq!(report.estimator_ratio, Some(4.0));
    assert_eq!(report.plan_hash, plan.plan_hash());

    let summary = &out.transcript.turns()[1];
    assert_eq!(
        (summary.role(), summary.content(), summary.token_estimate()),
        (Role::Assistant, text, 135)
    );
    assert_eq!(
        summary
            .metadata()
            .get("cutctx.replaced_turn_count")
            .map(String::as_str),
        Some("16")
    );
    assert_view_of(&t, &before, &out.transcript, &report.kept_turn_ids);
}
