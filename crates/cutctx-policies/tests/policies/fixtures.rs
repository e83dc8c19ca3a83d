//! The reference's fixtures (BEHAVIOUR.md §10.1), turn for turn.

use cutctx_model::{Role, Transcript};

use crate::{transcript, turn, turn_with};

/// `simple_chat`: five plain turns, 125 tokens.
pub(crate) fn simple_chat() -> Transcript {
    transcript(vec![
        turn_with("s1", Role::System, "You are a careful assistant.", 12),
        turn_with("u1", Role::User, "What changed in the build?", 30),
        turn_with("a1", Role::Assistant, "The cache key changed.", 25),
        turn_with("u2", Role::User, "Why?", 18),
        turn_with("a2", Role::Assistant, "Because the lockfile moved.", 40),
    ])
}

/// `multi_call_exchange`: one three-turn exchange, 812 tokens.
pub(crate) fn multi_call_exchange() -> Transcript {
    transcript(vec![
        turn("s1", Role::System, 12),
        turn("a1", Role::Assistant, 20).with_tool_call_id("c1"),
        turn("t1", Role::Tool, 400).with_tool_call_id("c1"),
        turn("t2", Role::Tool, 350).with_tool_call_id("c1"),
        turn("a2", Role::Assistant, 30),
    ])
}

/// `displaced_result`: a result far from its call, 335 tokens.
pub(crate) fn displaced_result() -> Transcript {
    transcript(vec![
        turn("a1", Role::Assistant, 200).with_tool_call_id("c1"),
        turn("u1", Role::User, 60),
        turn("u2", Role::User, 60),
        turn("t1", Role::Tool, 15).with_tool_call_id("c1"),
    ])
}

/// `entirely_pinned`: three pinned user turns, 30 tokens.
pub(crate) fn entirely_pinned() -> Transcript {
    transcript(vec![
        turn("p1", Role::User, 10).with_pinned(true),
        turn("p2", Role::User, 10).with_pinned(true),
        turn("p3", Role::User, 10).with_pinned(true),
    ])
}

/// `orphaned_result`: a result whose call is gone, 540 tokens.
pub(crate) fn orphaned_result() -> Transcript {
    transcript(vec![
        turn("t0", Role::Tool, 500).with_tool_call_id("gone"),
        turn("u1", Role::User, 20),
        turn("a1", Role::Assistant, 20),
    ])
}

/// `empty`: no turns.
pub(crate) fn empty() -> Transcript {
    transcript(vec![])
}

/// `tool_heavy`: three 300-token results of 1200 characters each, 1070 tokens.
pub(crate) fn tool_heavy() -> Transcript {
    transcript(vec![
        turn_with("s1", Role::System, "You are careful.", 10),
        turn_with("u1", Role::User, "Find the regression.", 20),
        turn_with("a1", Role::Assistant, "Reading the log.", 25).with_tool_call_id("c1"),
        turn_with("t1", Role::Tool, &"L".repeat(1200), 300).with_tool_call_id("c1"),
        turn_with("a2", Role::Assistant, "The cache key changed.", 25),
        turn_with("a3", Role::Assistant, "Checking the diff.", 25).with_tool_call_id("c2"),
        turn_with("t2", Role::Tool, &"D".repeat(1200), 300).with_tool_call_id("c2"),
        turn_with("a4", Role::Assistant, "Confirmed in the lockfile.", 25),
        turn_with("a5", Role::Assistant, "One more look.", 25).with_tool_call_id("c3"),
        turn_with("t3", Role::Tool, &"M".repeat(1200), 300).with_tool_call_id("c3"),
        turn_with("u2", Role::User, "Thanks.", 15),
    ])
}

/// `long_chat`: ten 50-token messages between a system turn and a closing question, 525 tokens.
pub(crate) fn long_chat() -> Transcript {
    let mut turns = vec![turn_with("s1", Role::System, "You are careful.", 10)];
    for i in 0..10 {
        let role = if i % 2 == 0 {
            Role::User
        } else {
            Role::Assistant
        };
        turns.push(turn_with(
            &format!("m{i}"),
            role,
            &format!("message {i}"),
            50,
        ));
    }
    turns.push(turn_with("u9", Role::User, "Anything else?", 15));
    transcript(turns)
}

/// Every fixture by name, phase 1 then phase 2.
pub(crate) fn all() -> Vec<(&'static str, Transcript)> {
    vec![
        ("simple_chat", simple_chat()),
        ("multi_call_exchange", multi_call_exchange()),
        ("displaced_result", displaced_result()),
        ("entirely_pinned", entirely_pinned()),
        ("orphaned_result", orphaned_result()),
        ("empty", empty()),
        ("tool_heavy", tool_heavy()),
        ("long_chat", long_chat()),
    ]
}

/// The reference's `CASES` and `BIG_CASES`: `(fixture, max_tokens, protected_recent_turns)`.
pub(crate) const CASES: [(&str, u64, u64); 15] = [
    ("simple_chat", 200, 2),
    ("simple_chat", 60, 1),
    ("multi_call_exchange", 100, 1),
    ("multi_call_exchange", 900, 2),
    ("displaced_result", 240, 1),
    ("entirely_pinned", 30, 0),
    ("orphaned_result", 45, 1),
    ("empty", 0, 4),
    ("tool_heavy", 1400, 0),
    ("tool_heavy", 700, 0),
    ("tool_heavy", 400, 2),
    ("tool_heavy", 200, 0),
    ("long_chat", 400, 0),
    ("long_chat", 200, 2),
    ("long_chat", 100, 0),
];

/// The fixture called `name`.
pub(crate) fn by_name(name: &str) -> Transcript {
    all()
        .into_iter()
        .find(|(n, _)| *n == name)
        .map(|(_, t)| t)
        .expect("a known fixture")
}

#[test]
fn fixture_totals_are_the_references() {
    let totals: Vec<(&str, u64, usize)> = all()
        .iter()
        .map(|(n, t)| (*n, t.token_estimate(), t.len()))
        .collect();
    assert_eq!(
        totals,
        [
            ("simple_chat", 125, 5),
            ("multi_call_exchange", 812, 5),
            ("displaced_result", 335, 4),
            ("entirely_pinned", 30, 3),
            ("orphaned_result", 540, 3),
            ("empty", 0, 0),
            ("tool_heavy", 1070, 11),
            ("long_chat", 525, 12),
        ]
    );
}
