//! Receipts for cutctx's own compactions: turns as seven-key objects, masks and summaries.

use std::collections::BTreeMap;
use std::sync::Arc;

use cutctx_executor::apply;
use cutctx_model::{CompactedTranscript, CompactionBudget, Role, Transcript, TranscriptTurn};
use cutctx_policies::{CompactionPolicy, default_chain};
use cutctx_receipts::chain::{self, GENESIS};
use cutctx_receipts::digest::{digest_content, digest_item};
use cutctx_receipts::json::{self, Value};
use cutctx_receipts::transcript::{
    PLAN_HASH_KEY, digest_compaction, digest_transcript, receipt_for_compaction, transcript_items,
    turn_value,
};
use cutctx_receipts::{
    AuditOptions, FixedClock, SideContent, SteppingClock, audit_text, verify_receipt,
};

fn transcript() -> Transcript {
    let mut turns =
        vec![TranscriptTurn::new("s1", Role::System, "You are careful.", 10).expect("an id")];
    for i in 0..6 {
        turns.push(
            TranscriptTurn::new(
                format!("u{i}"),
                Role::User,
                format!("question {i} é\u{1}"),
                20,
            )
            .expect("an id"),
        );
        turns.push(
            TranscriptTurn::new(format!("a{i}"), Role::Assistant, format!("calling {i}"), 25)
                .expect("an id")
                .with_tool_call_id(format!("c{i}")),
        );
        turns.push(
            TranscriptTurn::new(
                format!("t{i}"),
                Role::Tool,
                format!("line {i}\n").repeat(300),
                300,
            )
            .expect("an id")
            .with_tool_call_id(format!("c{i}"))
            .with_metadata(Arc::new(BTreeMap::from([
                ("z".to_owned(), "last".to_owned()),
                ("a\"b".to_owned(), "😀".to_owned()),
            ]))),
        );
    }
    turns.push(
        TranscriptTurn::new("u9", Role::User, "Anything else?", 15)
            .expect("an id")
            .with_pinned(true),
    );
    Transcript::new(turns).expect("unique ids")
}

fn compact(t: &Transcript, max: u64) -> CompactedTranscript {
    let budget = CompactionBudget::new(max).with_protected_recent_turns(2);
    let plan = default_chain("compaction.summarize.v1")
        .expect("a prompt id")
        .decide(t, &budget)
        .expect("satisfiable");
    let summaries: BTreeMap<String, String> = plan
        .summarization_requests
        .iter()
        .map(|r| {
            (
                r.group_id().to_owned(),
                "Earlier: six log reads.".to_owned(),
            )
        })
        .collect();
    apply(t, &plan, &summaries).expect("applies")
}

fn get(row: &cutctx_receipts::json::Object, outer: &str, inner: &str) -> Value {
    row.get(outer)
        .and_then(Value::as_object)
        .and_then(|o| o.get(inner))
        .cloned()
        .expect("present")
}

#[test]
fn a_turn_item_is_its_canonical_seven_key_object() {
    let t = transcript();
    for turn in t.turns() {
        let one = Transcript::new(vec![turn.clone()]).expect("one turn");
        let canonical = one.canonical_json();
        let inner = &canonical[1..canonical.len() - 1];
        let value = turn_value(turn);
        assert_eq!(
            String::from_utf8(json::to_c14n(&value).expect("canonical")).expect("utf-8"),
            inner
        );
        let Value::Object(o) = &value else {
            panic!("an object")
        };
        assert_eq!(o.len(), 7);
    }
    // The direct writer and the generic one agree, and so does the shortcut for kept turns.
    assert_eq!(
        digest_transcript(&t),
        digest_content(&transcript_items(&t)).expect("digestible")
    );
    for max in [1000, 1200, 100_000] {
        let out = compact(&t, max);
        let (pre, post) = digest_compaction(&t, &out.transcript);
        assert_eq!(pre, digest_transcript(&t));
        assert_eq!(post, digest_transcript(&out.transcript), "budget {max}");
    }
}

#[test]
fn masked_turns_count_as_dropped_and_their_stubs_as_introduced() {
    let t = transcript();
    let out = compact(&t, 1200);
    assert_eq!(out.report.masked_turn_ids.len(), 4);
    let clock = SteppingClock::starting_at_unix(1_786_752_000);
    let row = receipt_for_compaction(&t, &out, "cutctx-test", &clock).expect("seals");
    assert_eq!(get(&row, "pre", "count"), Value::uint(20));
    assert_eq!(get(&row, "post", "count"), Value::uint(20));
    assert_eq!(get(&row, "dropped", "count"), Value::uint(4));
    assert_eq!(get(&row, "introduced", "count"), Value::uint(4));
    assert_eq!(
        row.get(PLAN_HASH_KEY).and_then(Value::as_str),
        Some(out.report.plan_hash.as_str())
    );
    assert_eq!(
        row.get("method").and_then(Value::as_str),
        Some(
            format!(
                "cutctx:{}@{}",
                out.report.policy_name, out.report.policy_version
            )
            .as_str()
        )
    );
    assert_eq!(
        row.get("opened_at").and_then(Value::as_str),
        Some("2026-08-15T00:00:00Z")
    );
    assert_eq!(
        row.get("ts").and_then(Value::as_str),
        Some("2026-08-15T00:00:01Z")
    );
    // The dropped items are exactly the masked originals, in transcript order.
    let masked: Vec<Value> = t
        .turns()
        .iter()
        .filter(|turn| {
            out.report
                .masked_turn_ids
                .iter()
                .any(|id| &**id == turn.turn_id())
        })
        .map(|turn| {
            Value::str(
                &digest_item(&cutctx_receipts::transcript::turn_item(turn))
                    .expect("digest")
                    .digest,
            )
        })
        .collect();
    assert_eq!(get(&row, "dropped", "items"), Value::Array(masked));

    let pre = digest_content(&transcript_items(&t)).expect("digestible");
    let post = digest_content(&transcript_items(&out.transcript)).expect("digestible");
    let v = verify_receipt(&Value::Object(row), Some(&pre), Some(&post));
    assert!(v.ok, "{:?}", v.notes);
    assert_eq!(v.verified_scope, "full");
}

#[test]
fn summarized_turns_are_dropped_and_the_summary_introduced_and_the_ledger_verifies() {
    let t = transcript();
    let out = compact(&t, 1000);
    assert_eq!(out.report.summary_turn_ids.len(), 1);
    let clock = FixedClock::new("2026-08-15T00:00:00Z");
    let row = receipt_for_compaction(&t, &out, "cutctx-test", &clock).expect("seals");
    let summarized = out.report.summarized_turn_ids.len() as u64;
    assert_eq!(get(&row, "dropped", "count"), Value::uint(summarized));
    assert_eq!(get(&row, "introduced", "count"), Value::uint(1));

    // The ledger's text, as a writer appends the row to an empty ledger.
    let line = chain::chained(chain::stamped(&row, &clock), GENESIS.as_bytes())
        .expect("writable")
        .line;
    let text = format!("{line}\n");
    let content = BTreeMap::from([(
        1,
        SideContent {
            pre: Some(transcript_items(&t)),
            post: Some(transcript_items(&out.transcript)),
        },
    )]);
    let a = audit_text(
        &text,
        AuditOptions {
            content: Some(&content),
            strict: true,
            ..AuditOptions::default()
        },
    );
    assert_eq!(a.verdict(), "VERIFIED", "{:?}", a.failures);
    assert_eq!(
        a.receipts[0].plan_hash.as_deref(),
        Some(out.report.plan_hash.as_str())
    );
    // Content from another compaction does not match.
    let other = compact(&t, 1200);
    let wrong = BTreeMap::from([(
        1,
        SideContent {
            pre: Some(transcript_items(&t)),
            post: Some(transcript_items(&other.transcript)),
        },
    )]);
    let a = audit_text(
        &text,
        AuditOptions {
            content: Some(&wrong),
            ..AuditOptions::default()
        },
    );
    assert_eq!(a.verdict(), "BROKEN");
    assert_eq!(a.failures[0].code, "RECEIPT_CONTENT_MISMATCH");
}
