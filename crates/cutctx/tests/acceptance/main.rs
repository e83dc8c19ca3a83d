//! Acceptance tests of the `cutctx` facade: the reference's documented examples, end to end
//! (BEHAVIOUR.md §11): the README quick start, and `acceptance/plan_and_apply.py`, which plans
//! with the default chain, fulfils the summary by hand, and applies.
//!
//! Everything is reached through `cutctx`'s re-exports, as a user would.

mod features;
mod plan_and_apply;
mod quick_start;

use std::fmt::Write as _;
use std::sync::Arc;

use cutctx::{Transcript, TranscriptTurn};
use sha2::{Digest as _, Sha256};

/// The reference's `sha256_of(text)`: SHA-256 of the JSON string literal, written here from
/// BEHAVIOUR.md §4 rather than taken from the crate under test.
pub(crate) fn sha256_of(text: &str) -> String {
    let mut literal = String::from("\"");
    for c in text.chars() {
        match c {
            '"' => literal.push_str("\\\""),
            '\\' => literal.push_str("\\\\"),
            '\n' => literal.push_str("\\n"),
            '\r' => literal.push_str("\\r"),
            '\t' => literal.push_str("\\t"),
            '\u{8}' => literal.push_str("\\b"),
            '\u{c}' => literal.push_str("\\f"),
            c if u32::from(c) < 0x20 => {
                write!(literal, "\\u{:04x}", u32::from(c)).expect("writing to a String");
            }
            c => literal.push(c),
        }
    }
    literal.push('"');
    Sha256::digest(literal.as_bytes())
        .iter()
        .fold(String::new(), |mut s, b| {
            write!(s, "{b:02x}").expect("writing to a String");
            s
        })
}

/// Asserts that `input` is unchanged from `before`, and that every turn of `view` with an id
/// from `kept` is the input's turn, sharing its content rather than a copy.
pub(crate) fn assert_view_of(
    input: &Transcript,
    before: &Transcript,
    view: &Transcript,
    kept: &[Arc<str>],
) {
    assert_eq!(input, before, "the input transcript is never modified");
    let find = |t: &Transcript, id: &str| -> TranscriptTurn {
        t.turns()
            .iter()
            .find(|turn| turn.turn_id() == id)
            .cloned()
            .expect("the id is in the transcript")
    };
    for id in kept {
        let (original, kept_turn) = (find(input, id), find(view, id));
        assert_eq!(kept_turn, original, "{id}");
        assert!(
            Arc::ptr_eq(kept_turn.content_arc(), original.content_arc()),
            "{id} shares its content with the input"
        );
    }
}
