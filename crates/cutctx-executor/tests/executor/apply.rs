//! Applying a valid plan: the view, the turns the executor writes, and the report.

use std::collections::BTreeMap;
use std::sync::Arc;

use cutctx_executor::{CompactionExecutor, apply};
use cutctx_model::{CompactionReport, Role, Transcript, TranscriptTurn};
use cutctx_policies::{CompactionPolicy, ObservationMaskingPolicy, default_chain};
use sha2::{Digest as _, Sha256};

use crate::{T1_STUB, budget, ids, meta, mixed, summaries, transcript, turn};

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn every_action_is_applied_and_reported_in_transcript_order() {
    let (t, _, plan) = mixed();
    let out = apply(
        &t,
        &plan,
        &summaries(&[("g1", "first summary"), ("g2", "second summary")]),
    )
    .expect("a valid plan with its summaries");
    assert_eq!(
        out.transcript.turn_ids().collect::<Vec<_>>(),
        ["s1", "a1", "t1", "summary:g1", "summary:g2", "u4"]
    );
    assert_eq!(
        out.report,
        CompactionReport {
            budget_unmet: false,
            dropped_turn_ids: ids(&["u1", "u3"]),
            estimator_ratio: Some(4.0),
            kept_turn_ids: ids(&["s1", "a1", "u4"]),
            masked_turn_ids: ids(&["t1"]),
            plan_hash: plan.plan_hash(),
            policy_name: "hand_made".to_owned(),
            policy_version: "9.9.9".to_owned(),
            summarized_turn_ids: ids(&["u2", "a2", "a3", "t3", "u5"]),
            summary_turn_ids: vec!["summary:g1".to_owned(), "summary:g2".to_owned()],
            tokens_after_estimate: 95,
            tokens_before: 705,
            turns_after: 6,
            turns_before: 11,
        }
    );
    // The report's bytes: sorted keys, 4.0 as a float, no whitespace.
    assert_eq!(
        out.report.canonical_json(),
        format!(
            concat!(
                r#"{{"budget_unmet":false,"dropped_turn_ids":["u1","u3"],"estimator_ratio":4.0,"#,
                r#""kept_turn_ids":["s1","a1","u4"],"masked_turn_ids":["t1"],"plan_hash":"{}","#,
                r#""policy_name":"hand_made","policy_version":"9.9.9","#,
                r#""summarized_turn_ids":["u2","a2","a3","t3","u5"],"#,
                r#""summary_turn_ids":["summary:g1","summary:g2"],"tokens_after_estimate":95,"#,
                r#""tokens_before":705,"turns_after":6,"turns_before":11}}"#
            ),
            plan.plan_hash()
        )
    );
    // The view's estimate is the plan's: summaries count at their targets.
    assert_eq!(out.transcript.token_estimate(), 95);
}

#[test]
fn a_summary_turn_stands_at_its_groups_first_member() {
    let (t, _, plan) = mixed();
    let out = apply(
        &t,
        &plan,
        &summaries(&[("g1", "first summary"), ("g2", "second summary")]),
    )
    .expect("a valid plan with its summaries");
    let view = out.transcript.turns();
    let expected_g1 = TranscriptTurn::new("summary:g1", Role::Assistant, "first summary", 7)
        .expect("an id")
        .with_metadata(Arc::new(meta(&[
            ("cutctx.kind", "summary"),
            ("cutctx.summary_group", "g1"),
            ("cutctx.replaced_turn_count", "3"),
        ])));
    let expected_g2 = TranscriptTurn::new("summary:g2", Role::Assistant, "second summary", 9)
        .expect("an id")
        .with_metadata(Arc::new(meta(&[
            ("cutctx.kind", "summary"),
            ("cutctx.summary_group", "g2"),
            ("cutctx.replaced_turn_count", "2"),
        ])));
    assert_eq!(view[3], expected_g1);
    assert_eq!(view[4], expected_g2);
    for summary in &view[3..5] {
        assert_eq!(summary.tool_call_id(), None);
        assert!(!summary.pinned());
    }
}

#[test]
fn a_masked_turn_keeps_everything_but_content_estimate_and_kind() {
    let (t, _, plan) = mixed();
    let out = apply(&t, &plan, &summaries(&[("g1", "x"), ("g2", "y")])).expect("valid");
    let masked = &out.transcript.turns()[2];
    let original = &t.turns()[3];
    // Original metadata stays; cutctx.kind is set to "masked", over any earlier value.
    let expected = original
        .clone()
        .with_content(Arc::from(T1_STUB), 32)
        .with_metadata(Arc::new(meta(&[
            ("origin", "grep"),
            ("cutctx.kind", "masked"),
        ])));
    assert_eq!(masked, &expected);
    assert_eq!(
        (
            masked.turn_id(),
            masked.role(),
            masked.tool_call_id(),
            masked.pinned()
        ),
        ("t1", Role::Tool, Some("c1"), false)
    );
}

#[test]
fn the_input_is_untouched_and_kept_turns_share_their_content() {
    let (t, _, plan) = mixed();
    let before = t.clone();
    let out = apply(&t, &plan, &summaries(&[("g1", "x"), ("g2", "y")])).expect("valid");
    assert_eq!(t, before);
    for id in ["s1", "a1", "u4"] {
        let input = t.turns().iter().find(|x| x.turn_id() == id).expect("input");
        let kept = out
            .transcript
            .turns()
            .iter()
            .find(|x| x.turn_id() == id)
            .expect("kept");
        assert_eq!(kept, input, "{id}");
        assert!(Arc::ptr_eq(kept.content_arc(), input.content_arc()), "{id}");
    }
    // The system turn keeps its own metadata, untouched by the executor.
    assert_eq!(
        **out.transcript.turns()[0].metadata(),
        meta(&[("source", "sys")])
    );
}

#[test]
fn the_executor_value_applies_as_the_function_does() {
    let (t, _, plan) = mixed();
    let s = summaries(&[("g1", "x"), ("g2", "y")]);
    assert_eq!(
        CompactionExecutor.apply(&t, &plan, &s).expect("valid"),
        apply(&t, &plan, &s).expect("valid")
    );
}

#[test]
fn the_report_does_not_depend_on_the_summary_text() {
    let (t, _, plan) = mixed();
    let long = "y".repeat(10_000);
    let reports: Vec<CompactionReport> = [("", ""), ("x", "y"), (long.as_str(), "ü\u{0}\n")]
        .iter()
        .map(|(a, b)| {
            let out = apply(&t, &plan, &summaries(&[("g1", a), ("g2", b)])).expect("valid");
            let g1 = &out.transcript.turns()[3];
            assert_eq!((g1.content(), g1.token_estimate()), (*a, 7));
            out.report
        })
        .collect();
    assert_eq!(reports[0], reports[1]);
    assert_eq!(reports[1], reports[2]);
}

#[test]
fn report_figures_are_copied_from_the_plan() {
    // Masking on tool_heavy-like data at 700: over budget, ratio 4.0.
    let t = transcript(vec![
        turn("s1", Role::System, 10),
        turn("a1", Role::Assistant, 25).with_tool_call_id("c1"),
        TranscriptTurn::new("t1", Role::Tool, "L".repeat(1200), 300)
            .expect("an id")
            .with_tool_call_id("c1"),
        turn("a2", Role::Assistant, 25).with_tool_call_id("c2"),
        turn("t2", Role::Tool, 300).with_tool_call_id("c2"),
        turn("a3", Role::Assistant, 25).with_tool_call_id("c3"),
        turn("t3", Role::Tool, 300).with_tool_call_id("c3"),
    ]);
    let plan = ObservationMaskingPolicy::new(2)
        .expect("valid")
        .decide(&t, &budget(700, 0))
        .expect("satisfiable");
    let out = apply(&t, &plan, &BTreeMap::new()).expect("no requests");
    let r = &out.report;
    assert_eq!(
        (
            r.tokens_before,
            r.tokens_after_estimate,
            r.budget_unmet,
            r.estimator_ratio
        ),
        (985, 717, true, Some(4.0))
    );
    assert_eq!(
        (
            r.tokens_before,
            r.tokens_after_estimate,
            r.budget_unmet,
            r.estimator_ratio
        ),
        (
            plan.tokens_before,
            plan.tokens_after_estimate,
            plan.budget_unmet,
            plan.estimator_ratio
        )
    );
    assert_eq!(
        (r.policy_name.as_str(), r.policy_version.as_str()),
        ("observation_masking", "1.0.0")
    );
    // plan_hash is the SHA-256 of the plan's canonical JSON, without a newline.
    assert_eq!(r.plan_hash, plan.plan_hash());
    assert_eq!(
        r.plan_hash,
        hex(&Sha256::digest(plan.canonical_json().as_bytes()))
    );
    assert_eq!(r.masked_turn_ids, ids(&["t1"]));
    assert_eq!(
        out.transcript.turns()[2]
            .metadata()
            .get("cutctx.kind")
            .map(String::as_str),
        Some("masked")
    );
}

#[test]
fn the_default_chain_report_on_long_chat_at_200_2() {
    let mut turns =
        vec![TranscriptTurn::new("s1", Role::System, "You are careful.", 10).expect("an id")];
    for i in 0..10 {
        let role = if i % 2 == 0 {
            Role::User
        } else {
            Role::Assistant
        };
        turns.push(
            TranscriptTurn::new(format!("m{i}"), role, format!("message {i}"), 50).expect("an id"),
        );
    }
    turns.push(TranscriptTurn::new("u9", Role::User, "Anything else?", 15).expect("an id"));
    let t = transcript(turns);
    let plan = default_chain("compaction.summarize.v1")
        .expect("a prompt id")
        .decide(&t, &budget(200, 2))
        .expect("satisfiable");
    let gid = "span-b2da65fee5a8bd16";
    let out = apply(&t, &plan, &summaries(&[(gid, "a summary")])).expect("fulfilled");
    assert_eq!(
        out.report.canonical_json(),
        format!(
            concat!(
                r#"{{"budget_unmet":false,"dropped_turn_ids":[],"estimator_ratio":null,"#,
                r#""kept_turn_ids":["s1","m9","u9"],"masked_turn_ids":[],"plan_hash":"{}","#,
                r#""policy_name":"chain(observation_masking@1.0.0+summarizing@1.0.0+drop_oldest@1.0.0)","#,
                r#""policy_version":"1.0.0","#,
                r#""summarized_turn_ids":["m0","m1","m2","m3","m4","m5","m6","m7","m8"],"#,
                r#""summary_turn_ids":["summary:span-b2da65fee5a8bd16"],"tokens_after_estimate":165,"#,
                r#""tokens_before":525,"turns_after":4,"turns_before":12}}"#
            ),
            plan.plan_hash()
        )
    );
    let summary = &out.transcript.turns()[1];
    assert_eq!(
        (
            summary.turn_id(),
            summary.content(),
            summary.token_estimate()
        ),
        ("summary:span-b2da65fee5a8bd16", "a summary", 90)
    );
    assert_eq!(
        **summary.metadata(),
        meta(&[
            ("cutctx.kind", "summary"),
            ("cutctx.replaced_turn_count", "9"),
            ("cutctx.summary_group", gid),
        ])
    );
}

#[test]
fn an_empty_plan_applies_to_an_empty_view() {
    let t = Transcript::default();
    let plan = default_chain("p.v1")
        .expect("a prompt id")
        .decide(&t, &budget(0, 4))
        .expect("nothing to fit");
    let out = apply(&t, &plan, &BTreeMap::new()).expect("nothing to apply");
    assert!(out.transcript.is_empty());
    let r = &out.report;
    assert!(r.kept_turn_ids.is_empty() && r.dropped_turn_ids.is_empty());
    assert!(r.summary_turn_ids.is_empty() && r.summarized_turn_ids.is_empty());
    assert_eq!((r.turns_before, r.turns_after), (0, 0));
    assert_eq!(r.plan_hash, plan.plan_hash());
}

#[test]
fn masked_turns_each_carry_their_own_metadata_marked() {
    // Runs of turns sharing one metadata map share one marked copy; a turn with another map
    // must get its own, never its neighbour's.
    let tagged = |id: &str, call: &str, tag: Option<&str>| {
        let t = TranscriptTurn::new(id, Role::Tool, "x".repeat(400), 100)
            .expect("an id")
            .with_tool_call_id(call);
        match tag {
            Some(tag) => t.with_metadata(Arc::new(meta(&[("origin", tag)]))),
            None => t,
        }
    };
    let call = |id: &str, c: &str| {
        TranscriptTurn::new(id, Role::Assistant, "call", 5)
            .expect("an id")
            .with_tool_call_id(c)
    };
    let t = Transcript::new(vec![
        call("a1", "c1"),
        tagged("t1", "c1", None),
        call("a2", "c2"),
        tagged("t2", "c2", None),
        call("a3", "c3"),
        tagged("t3", "c3", Some("grep")),
        call("a4", "c4"),
        tagged("t4", "c4", None),
        call("a5", "c5"),
        tagged("t5", "c5", None),
        TranscriptTurn::new("u", Role::User, "go on", 5).expect("an id"),
    ])
    .expect("unique ids");
    let policy = ObservationMaskingPolicy::new(1).expect("valid");
    let plan = policy.decide(&t, &budget(200, 1)).expect("a plan");
    let out = apply(&t, &plan, &BTreeMap::new()).expect("valid");
    let kinds: Vec<(&str, Vec<(&str, &str)>)> = out
        .transcript
        .turns()
        .iter()
        .filter(|turn| turn.role() == Role::Tool)
        .map(|turn| {
            let pairs = turn
                .metadata()
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .collect();
            (turn.turn_id(), pairs)
        })
        .collect();
    let masked = vec![("cutctx.kind", "masked")];
    assert_eq!(
        kinds,
        [
            ("t1", masked.clone()),
            ("t2", masked.clone()),
            ("t3", vec![("cutctx.kind", "masked"), ("origin", "grep")]),
            ("t4", masked),
            ("t5", vec![]),
        ]
    );
}

/// A plan large enough to be hashed beside the walk gives the same result on one thread.
#[test]
fn a_large_plan_applies_the_same_on_one_thread() {
    use cutctx_model::Parallelism;
    use cutctx_policies::{CompactionPolicy, DropOldestPolicy};
    let turns = (0..20_500)
        .map(|i| turn(&format!("u{i}"), Role::User, 3))
        .collect();
    let t = transcript(turns);
    let plan = DropOldestPolicy
        .decide(&t, &budget(30_000, 4))
        .expect("fits");
    assert!(plan.actions.len() >= 20_000, "past the parallel threshold");
    let automatic =
        cutctx_executor::apply_with(&t, &plan, &BTreeMap::new(), Parallelism::Automatic)
            .expect("valid");
    let sequential =
        cutctx_executor::apply_with(&t, &plan, &BTreeMap::new(), Parallelism::Sequential)
            .expect("valid");
    assert_eq!(automatic, sequential);
    assert_eq!(sequential.report.plan_hash, plan.plan_hash());
}
