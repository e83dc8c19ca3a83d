//! `ObservationMaskingPolicy` (BEHAVIOUR.md §7.2): stubs with a digest, oldest results first.

use cutctx_model::Role;
use cutctx_policies::{CompactionPolicy, ObservationMaskingPolicy};
use serde_json::json;

use crate::fixtures::{self, by_name};
use crate::{
    Figures, acts, budget, default_stub, digest, figures, invalid, stub_of, transcript, turn,
    turn_with, unsatisfiable,
};

fn masking(keep: usize) -> ObservationMaskingPolicy {
    ObservationMaskingPolicy::new(keep).expect("any keep_recent_results is valid")
}

const D1FD: &str = "d1fd6a834c71465d6eeb3623b9c5a2ac60c49d069ffc469bc131b4ff506e55a2";

#[test]
fn tool_heavy_masks_the_oldest_result_with_the_reference_stub() {
    let t = fixtures::tool_heavy();
    let mut bytes = Vec::new();
    for (max, protected) in [(700, 0), (400, 2), (200, 0)] {
        let plan = masking(2)
            .decide(&t, &budget(max, protected))
            .expect("satisfiable");
        assert_eq!(
            acts(&plan),
            "s1:K u1:K a1:K t1:M32 a2:K a3:K t2:K a4:K a5:K t3:K u2:K",
            "{max}-{protected}"
        );
        assert_eq!(figures(&plan), (1070, 802, true, Some(4.0)));
        let stub = stub_of(&plan, "t1");
        assert_eq!(
            stub,
            format!("[tool result masked by cutctx] (original: 300 tokens, sha256:{D1FD})")
        );
        assert_eq!(stub.chars().count(), 126);
        assert!(plan.summarization_requests.is_empty());
        assert_eq!(
            (plan.policy_name.as_str(), plan.policy_version.as_str()),
            ("observation_masking", "1.0.0")
        );
        bytes.push(plan.canonical_json());
    }
    // The reference's three goldens for these cases are byte-identical.
    assert_eq!(bytes[0], bytes[1]);
    assert_eq!(bytes[1], bytes[2]);
    assert!(
        bytes[0].contains(r#""estimator_ratio":4.0"#),
        "{}",
        bytes[0]
    );
}

#[test]
fn cases_where_nothing_may_be_masked_keep_everything_and_record_no_ratio() {
    let cases: [(&str, u64, u64, Figures); 12] = [
        ("simple_chat", 200, 2, (125, 125, false, None)),
        ("simple_chat", 60, 1, (125, 125, true, None)),
        // Both results are among the two most recent.
        ("multi_call_exchange", 100, 1, (812, 812, true, None)),
        ("multi_call_exchange", 900, 2, (812, 812, false, None)),
        // The only result is protected.
        ("displaced_result", 240, 1, (335, 335, true, None)),
        ("entirely_pinned", 30, 0, (30, 30, false, None)),
        ("orphaned_result", 45, 1, (540, 540, true, None)),
        ("empty", 0, 4, (0, 0, false, None)),
        ("tool_heavy", 1400, 0, (1070, 1070, false, None)),
        // No tool turn at all: large user and assistant turns are never masked.
        ("long_chat", 400, 0, (525, 525, true, None)),
        ("long_chat", 200, 2, (525, 525, true, None)),
        ("long_chat", 100, 0, (525, 525, true, None)),
    ];
    for (name, max, protected, expected) in cases {
        let t = by_name(name);
        let plan = masking(2)
            .decide(&t, &budget(max, protected))
            .expect("satisfiable");
        let all_keep: Vec<String> = t.turn_ids().map(|id| format!("{id}:K")).collect();
        assert_eq!(acts(&plan), all_keep.join(" "), "{name}-{max}-{protected}");
        assert_eq!(figures(&plan), expected, "{name}-{max}-{protected}");
    }
}

#[test]
fn stub_length_and_estimate_follow_the_digit_count() {
    // Stub = placeholder (30) + " (original: " (12) + digits + " tokens, sha256:" (16) + 64 + ")".
    for (tokens, chars, estimate) in [
        (33, 125, 32),
        (99, 125, 32),
        (100, 126, 32),
        (300, 126, 32),
        (999, 126, 32),
        (1000, 127, 32),
        (99_999, 128, 32),
        (100_000, 129, 33),
    ] {
        let t = transcript(vec![
            turn_with("t", Role::Tool, "x", tokens).with_tool_call_id("c"),
            turn("u", Role::User, 1),
        ]);
        let plan = masking(0).decide(&t, &budget(0, 0)).expect("floor 0");
        let stub = stub_of(&plan, "t");
        assert_eq!(stub, default_stub(tokens, "x"));
        assert_eq!(stub.chars().count(), chars, "{tokens}");
        assert_eq!(acts(&plan), format!("t:M{estimate} u:K"), "{tokens}");
        assert_eq!(figures(&plan), (tokens + 1, estimate + 1, true, Some(4.0)));
    }
}

#[test]
fn a_stub_that_would_not_be_smaller_is_not_used() {
    // Two-digit counts give a 125-character stub, 32 tokens: 31 and 32 stay, 33 shrinks.
    let t = transcript(vec![
        turn("t1", Role::Tool, 31),
        turn("t2", Role::Tool, 32),
        turn("t3", Role::Tool, 33),
        turn("u", Role::User, 5),
    ]);
    let plan = masking(0).decide(&t, &budget(0, 0)).expect("floor 0");
    assert_eq!(acts(&plan), "t1:K t2:K t3:M32 u:K");
    assert_eq!(figures(&plan), (101, 100, true, Some(4.0)));

    // Nothing masked at all: no ratio either.
    let t = transcript(vec![turn("t", Role::Tool, 9), turn("u", Role::User, 5)]);
    let plan = masking(0).decide(&t, &budget(0, 0)).expect("floor 0");
    assert_eq!(acts(&plan), "t:K u:K");
    assert_eq!(figures(&plan), (14, 14, true, None));
}

/// Three 300-token results; the last is pinned or protected depending on the budget.
fn three_results(pin_last: bool) -> cutctx_model::Transcript {
    transcript(vec![
        turn("t1", Role::Tool, 300).with_tool_call_id("c1"),
        turn("t2", Role::Tool, 300).with_tool_call_id("c2"),
        turn("t3", Role::Tool, 300)
            .with_tool_call_id("c3")
            .with_pinned(pin_last),
        turn("u", Role::User, 10),
    ])
}

#[test]
fn keep_recent_results_counts_pinned_and_protected_results() {
    // keep 1: the most recent result is t3 even though it is untouchable anyway, so t2 is
    // maskable. A count that skipped untouchable results would spare t2 instead.
    for (t, b) in [
        (three_results(true), budget(500, 0)),
        (three_results(false), budget(500, 2)),
    ] {
        let plan = masking(1).decide(&t, &b).expect("satisfiable");
        assert_eq!(acts(&plan), "t1:M32 t2:M32 t3:K u:K");
        assert_eq!(figures(&plan), (910, 374, false, Some(4.0)));
        let plan = masking(2).decide(&t, &b).expect("satisfiable");
        assert_eq!(acts(&plan), "t1:M32 t2:K t3:K u:K");
        assert_eq!(figures(&plan), (910, 642, true, Some(4.0)));
    }
}

#[test]
fn masking_stops_once_the_budget_fits() {
    let t = fixtures::tool_heavy();
    let plan = masking(0).decide(&t, &budget(700, 0)).expect("satisfiable");
    assert_eq!(
        acts(&plan),
        "s1:K u1:K a1:K t1:M32 a2:K a3:K t2:M32 a4:K a5:K t3:K u2:K"
    );
    assert_eq!(figures(&plan), (1070, 534, false, Some(4.0)));
    assert_eq!(stub_of(&plan, "t2"), default_stub(300, &"D".repeat(1200)));

    // 1070 - 268 = 802 fits 802 exactly: one stub is enough.
    let plan = masking(0).decide(&t, &budget(802, 0)).expect("satisfiable");
    assert_eq!(
        acts(&plan),
        "s1:K u1:K a1:K t1:M32 a2:K a3:K t2:K a4:K a5:K t3:K u2:K"
    );
    assert_eq!(figures(&plan), (1070, 802, false, Some(4.0)));
}

#[test]
fn untouchable_results_are_never_masked() {
    // Protected: t3 sits in the last two turns.
    let plan = masking(0)
        .decide(&fixtures::tool_heavy(), &budget(400, 2))
        .expect("satisfiable");
    assert_eq!(
        acts(&plan),
        "s1:K u1:K a1:K t1:M32 a2:K a3:K t2:M32 a4:K a5:K t3:K u2:K"
    );
    assert_eq!(figures(&plan), (1070, 534, true, Some(4.0)));

    // Pinned.
    let t = transcript(vec![
        turn("t0", Role::Tool, 500)
            .with_tool_call_id("gone")
            .with_pinned(true),
        turn("u1", Role::User, 20),
        turn("a1", Role::Assistant, 20),
    ]);
    let plan = masking(0).decide(&t, &budget(520, 0)).expect("floor 500");
    assert_eq!(acts(&plan), "t0:K u1:K a1:K");
    assert_eq!(figures(&plan), (540, 540, true, None));
}

#[test]
fn only_tool_turns_are_masked() {
    let t = transcript(vec![
        turn("u", Role::User, 5000),
        turn("a", Role::Assistant, 5000),
        turn("s", Role::System, 10),
        turn("t", Role::Tool, 300),
        turn("v", Role::User, 1),
    ]);
    let plan = masking(0).decide(&t, &budget(100, 0)).expect("floor 10");
    assert_eq!(acts(&plan), "u:K a:K s:K t:M32 v:K");
    assert_eq!(figures(&plan), (10_311, 10_043, true, Some(4.0)));
}

#[test]
fn the_digest_hashes_the_json_literal_of_any_content() {
    let content = "quote \" back \\ nl \n cr \r tab \t nul \u{0} bell \u{7} esc \u{1b} del \u{7f} \
                   ls \u{2028} slash / emoji 😀 cjk 漢 astral \u{10ffff}";
    let t = transcript(vec![
        turn_with("t", Role::Tool, content, 300),
        turn("u", Role::User, 1),
    ]);
    let plan = masking(0).decide(&t, &budget(0, 0)).expect("floor 0");
    let stub = stub_of(&plan, "t");
    assert_eq!(stub, default_stub(300, content));
    assert!(stub.ends_with(&format!("sha256:{})", digest(content))));
}

#[test]
fn a_stub_carries_a_digest_never_an_excerpt() {
    let secret = "api_key=sk-live-51HxQz9 password=hunter2 ssn=078-05-1120";
    let t = transcript(vec![
        turn_with("t", Role::Tool, secret, 300),
        turn("u", Role::User, 1),
    ]);
    let plan = masking(0).decide(&t, &budget(0, 0)).expect("floor 0");
    let stub = stub_of(&plan, "t");
    let chars: Vec<char> = secret.chars().collect();
    for window in chars.windows(8) {
        let window: String = window.iter().collect();
        assert!(!stub.contains(&window), "{window:?} leaked into {stub:?}");
    }
}

#[test]
fn a_custom_placeholder_is_used_unstripped() {
    let policy = masking(0)
        .with_placeholder("  [elided]  ")
        .expect("not blank");
    let t = transcript(vec![
        turn_with("t", Role::Tool, "payload", 300),
        turn("u", Role::User, 1),
    ]);
    let plan = policy.decide(&t, &budget(0, 0)).expect("floor 0");
    let stub = stub_of(&plan, "t");
    let expected = format!(
        "  [elided]   (original: 300 tokens, sha256:{})",
        digest("payload")
    );
    assert_eq!(stub, expected);
    // 108 characters: ceil(108 / 4) = 27.
    assert_eq!(expected.chars().count(), 108);
    assert_eq!(acts(&plan), "t:M27 u:K");
}

#[test]
fn a_blank_placeholder_is_refused_with_its_python_repr() {
    for (placeholder, repr) in [("", "''"), ("   ", "'   '")] {
        let details = invalid(masking(2).with_placeholder(placeholder));
        assert_eq!(details, json!({ "placeholder": repr }));
    }
}

#[test]
fn more_recent_results_kept_than_exist_masks_nothing() {
    let plan = masking(3)
        .decide(&fixtures::tool_heavy(), &budget(200, 0))
        .expect("satisfiable");
    assert!(
        acts(&plan).split(' ').all(|a| a.ends_with(":K")),
        "{}",
        acts(&plan)
    );
    assert_eq!(figures(&plan), (1070, 1070, true, None));
}

#[test]
fn masking_refuses_an_unsatisfiable_budget() {
    let details = unsatisfiable(masking(2).decide(&fixtures::tool_heavy(), &budget(9, 0)));
    assert_eq!(
        details,
        json!({
            "untouchable_tokens": 10,
            "max_tokens": 9,
            "untouchable_turn_count": 1,
            "protected_recent_turns": 0,
        })
    );
}
