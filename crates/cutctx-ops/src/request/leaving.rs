//! A request document held whole, read with each turn's content left where it lies in the
//! text, a window of the transcript at a time on every core.

use std::sync::Arc;

use cutctx::{Parallelism, Transcript, TranscriptTurn};

use super::left::{Leaving, Left};
use super::pieces::PIECE_BYTES;
use super::scan;
use super::split::{Slot, Source, Taken, take_split};
use super::wire::{finish, rest_of_document};
use crate::error::OpsError;

/// Reads the request document `text` as [`parse`](super::parse) does, but leaves each content
/// that its turn record's quick reader takes in `text`: checked as a JSON string, not decoded.
/// Most of a large request is contents, and a compaction that drops or masks a turn never needs
/// its content decoded (a mask's digest is hashed from the text, see [`Leaving`]).
///
/// `None` when anything is unusual (the transcript not taken whole by the quick reader, the
/// rest of the document not parsing): [`parse`](super::parse) then reads it and gives the
/// result or error. `Some` gives the result `parse` gives, but for the contents left.
///
/// ```
/// use cutctx_ops::request::{parse, parse_leaving};
/// let text = r#"{"transcript":[{"turn_id":"u","role":"user","content":"say \"hi\"","token_estimate":3}],
///   "budget":{"max_tokens":10},"policy":{"name":"drop_oldest"}}"#;
/// let leaving = parse_leaving(text).expect("a usual request")?;
/// let left = &leaving.left[0];
/// assert_eq!((left.position(), &text[left.span()], left.is_canonical()), (0, r#"say \"hi\""#, true));
/// assert_eq!(leaving.request.transcript.turns()[0].content(), "");
/// assert_eq!(parse(text)?.transcript.turns()[0].content(), "say \"hi\"");
/// # Ok::<(), cutctx_ops::OpsError>(())
/// ```
#[must_use]
pub fn parse_leaving(text: &str) -> Option<Result<Leaving, OpsError>> {
    let start = scan::array_start(text.as_bytes())?;
    let threads = Parallelism::Automatic.threads().max(1);
    let mut slots = Slot::many(threads, Slot::leaving);
    // Room for as many turns as the text could hold (a turn record takes more than 48 bytes),
    // reserved, not touched: the pages the turns never reach are never the process's, and
    // the list is never moved to grow it.
    let most = text.len() / 48;
    let (mut turns, mut left) = (Vec::with_capacity(most), Vec::with_capacity(most));
    let taken = read_windows(text, start + 1, &mut slots, &mut turns, &mut left)?;
    let mut rest = String::with_capacity(start + 2 + text.len() - taken.at);
    rest.push_str(text.get(..start)?);
    rest.push_str("[]");
    rest.push_str(text.get(taken.at..)?);
    leaving_of(&rest, slots, turns, left)
}

/// The transcript's elements from `at`, just after its `[`, read a window of the text at a
/// time, as the pieces of a file are read: each thread's turns stay few before they join the
/// rest, and a window that holds no whole element grows. Where the array closed; `None` when
/// it does not close, or anything is amiss.
fn read_windows(
    text: &str,
    mut at: usize,
    slots: &mut [Slot],
    turns: &mut Vec<TranscriptTurn>,
    left: &mut Vec<Left>,
) -> Option<Taken> {
    let mut window = PIECE_BYTES * slots.len();
    loop {
        let mut end = (at + window).min(text.len());
        // The text is UTF-8 already: a window ends on a character's boundary, and its parts
        // are not checked again.
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        let window_text = Source::Text(text.get(..end)?);
        // The cuts are guesses, and miss when the transcript is short beside the rest of the
        // document: then the window is read on one thread, from `at` on, without a cut.
        let taken = take_split(window_text, at, slots, turns, left)
            .or_else(|| take_split(window_text, at, &mut slots[..1], turns, left))?;
        if taken.closed {
            return Some(taken);
        }
        if end == text.len() {
            return None;
        }
        if taken.at == at {
            window *= 2;
        }
        at = taken.at;
    }
}

/// The request of the turns read with their contents left (`turns`, the contents at `left`,
/// the placeholders the `slots`' builders made) and of `rest`, the document with `[]` in the
/// transcript's place; `None` when the rest does not parse, for the whole read to report.
pub(super) fn leaving_of(
    rest: &str,
    slots: Vec<Slot>,
    turns: Vec<TranscriptTurn>,
    left: Vec<Left>,
) -> Option<Result<Leaving, OpsError>> {
    let wire = rest_of_document(rest)?;
    let placeholders: Vec<Arc<str>> = slots
        .into_iter()
        .filter_map(|slot| slot.builder.placeholder)
        .collect();
    Some(
        finish(Transcript::with_packed_ids(turns), wire).map(|request| Leaving {
            request,
            left,
            placeholders,
        }),
    )
}
