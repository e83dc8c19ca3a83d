//! A run of transcript elements read on several threads from cuts made at a guess: the one
//! driver of every reading in parts, whether of a buffer, a text held whole or a file read where
//! it lies.
//!
//! The run is cut where an element seems to start (`},{"`, which no string can hold whole)
//! after an even share of it; each part's elements are read from its cut beside the others
//! (`cutctx::model::beside`), the first on the calling thread straight into the caller's
//! turns, each other into a slot of its own. The cuts are guesses: a part's reading confirms
//! the next cut only by stopping exactly there, the array still open, and a reading whose
//! cuts are not all confirmed gives nothing, for the caller to read the run otherwise.

use cutctx::TranscriptTurn;

use super::builder::Builder;
use super::left::Left;
use super::scan;

/// What one part's reading appends to: turns, and where their contents were left.
pub(super) type Sink<'a> = (&'a mut Vec<TranscriptTurn>, &'a mut Vec<Left>);

/// How an element's start is found after a guessed cut: the end of one object, the separator
/// and the opening of the next one's first key.
const CUT: &[u8] = b"},{\"";

/// One part of a run: its elements from `from`, where an element is due, to the first element
/// due at or after `to`; the `last` part reads on to the end of what it is given, or of the
/// array.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Part {
    pub(super) from: usize,
    pub(super) to: usize,
    pub(super) last: bool,
}

/// What [`read_parts`] read: where reading stopped (the start of an element not yet whole,
/// or just after the array's `]`) and whether the array closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Taken {
    pub(super) at: usize,
    pub(super) closed: bool,
}

/// What one thread of a reading in parts keeps from reading to reading: its builder and the
/// turns of its part, both emptied before each part and their room kept.
#[derive(Default)]
pub(super) struct Slot {
    pub(super) builder: Builder,
    pub(super) turns: Vec<TranscriptTurn>,
    /// Where the contents of `turns` were left, by position in `turns`.
    pub(super) left: Vec<Left>,
}

impl Slot {
    /// A slot whose builder leaves contents in the text.
    pub(super) fn leaving() -> Self {
        Self {
            builder: Builder::leaving(),
            ..Self::default()
        }
    }

    /// `n` slots made by `make`, one per thread (at least one).
    pub(super) fn many(n: usize, make: impl FnMut() -> Self) -> Vec<Self> {
        std::iter::repeat_with(make).take(n.max(1)).collect()
    }
}

/// Where an element seems to start in `bytes`, just after the first `},` of a `},{"`.
pub(super) fn cut_in(bytes: &[u8]) -> Option<usize> {
    let found = bytes.windows(CUT.len()).position(|w| w == CUT)?;
    Some(found + 2)
}

/// The parts of `from..len` for `threads` threads: the first from `from`, each next from where
/// `find` finds an element's start at or after a guess at an even share of the run (past the
/// cut before it); a part too short to hold a cut is not made. `find` answers `Some(None)` when
/// it finds no start (the parts made so far are all), and `None` to give the reading up.
pub(super) fn guess_parts(
    from: usize,
    len: usize,
    threads: usize,
    mut find: impl FnMut(usize) -> Option<Option<usize>>,
) -> Option<Vec<Part>> {
    let threads = threads.max(1);
    let stride = len.saturating_sub(from) / threads;
    let mut cuts = vec![from];
    for k in 1..threads {
        let after = cuts.last().map_or(from, |c| c + 1);
        let Some(cut) = find((from + k * stride).max(after))? else {
            break;
        };
        cuts.push(cut);
    }
    cuts.push(len);
    let last = cuts.len() - 2;
    let parts = cuts.windows(2).enumerate().map(|(k, w)| Part {
        from: w[0],
        to: w[1],
        last: k == last,
    });
    Some(parts.collect())
}

/// Reads `parts` beside each other by `read` (a part, the builder to read it with, and what
/// to append its turns to): the first on this thread straight into `turns` and `left`, each
/// other into a slot of `slots` (one for each part after the first, emptied first), appended
/// in order once its part is read. Where the last part stopped and whether the array closed;
/// `None`, `turns` and `left` as they were, when a part's reading does not confirm the next
/// cut or anything is amiss.
pub(super) fn read_parts<R>(
    parts: &[Part],
    slots: &mut [Slot],
    turns: &mut Vec<TranscriptTurn>,
    left: &mut Vec<Left>,
    read: R,
) -> Option<Taken>
where
    R: Fn(Part, &mut Builder, Sink<'_>) -> Option<(usize, bool)> + Sync,
{
    let (before, left_before) = (turns.len(), left.len());
    let taken = read_and_join(parts, slots, turns, left, &read);
    if taken.is_none() {
        turns.truncate(before);
        left.truncate(left_before);
    }
    taken
}

/// [`read_parts`], leaving whatever was appended before a failure for it to discard.
fn read_and_join<R>(
    parts: &[Part],
    slots: &mut [Slot],
    turns: &mut Vec<TranscriptTurn>,
    left: &mut Vec<Left>,
    read: &R,
) -> Option<Taken>
where
    R: Fn(Part, &mut Builder, Sink<'_>) -> Option<(usize, bool)> + Sync,
{
    let (first_part, other_parts) = parts.split_first()?;
    let (first_slot, other_slots) = slots.split_first_mut()?;
    let (first, others) = cutctx::model::beside::beside(
        || {
            read(
                *first_part,
                &mut first_slot.builder,
                (&mut *turns, &mut *left),
            )
        },
        other_parts.iter().zip(other_slots.iter_mut()).collect(),
        |(&part, slot): (&Part, &mut Slot)| {
            slot.turns.clear();
            slot.left.clear();
            read(part, &mut slot.builder, (&mut slot.turns, &mut slot.left))
        },
    );
    let mut results = vec![first];
    results.extend(others.into_iter().map(|r| r.ok().flatten()));
    let mut taken = None;
    for (k, (result, part)) in results.into_iter().zip(parts).enumerate() {
        let (stop, closed) = result?;
        if k > 0 {
            join_slot(&mut other_slots[k - 1], turns, left)?;
        }
        if !part.last {
            // A part confirms the next cut only by stopping exactly there, the array open.
            if closed || stop != part.to {
                return None;
            }
        } else {
            taken = Some(Taken { at: stop, closed });
        }
    }
    taken
}

/// Appends `slot`'s turns to `turns`, and where their contents were left to `left`, their
/// positions moved past the turns before them; `None` past what 32 bits hold.
fn join_slot(slot: &mut Slot, turns: &mut Vec<TranscriptTurn>, left: &mut Vec<Left>) -> Option<()> {
    let shift = turns.len();
    for l in slot.left.drain(..) {
        left.push(l.shifted(shift)?);
    }
    turns.append(&mut slot.turns);
    Some(())
}

/// The text [`take_part_into`] reads elements from.
#[derive(Clone, Copy)]
pub(super) enum Source<'a> {
    /// Bytes read so far, not checked: the last part may end inside a character.
    Bytes(&'a [u8]),
    /// A text known to be UTF-8, cut only at characters' boundaries.
    Text(&'a str),
    /// Bytes read from a file at an offset, not checked, as `Bytes`: the spans of the
    /// contents left in them are the file's, the offset added.
    Window(&'a [u8], usize),
}

impl<'a> Source<'a> {
    pub(super) const fn bytes(self) -> &'a [u8] {
        match self {
            Self::Bytes(b) | Self::Window(b, _) => b,
            Self::Text(t) => t.as_bytes(),
        }
    }

    /// Where the request's text these bytes hold starts.
    const fn offset(self) -> usize {
        match self {
            Self::Window(_, offset) => offset,
            Self::Bytes(_) | Self::Text(_) => 0,
        }
    }

    /// The text of `part`: only the last part may end inside a character, cut there by the
    /// read.
    fn text(self, part: Part) -> Option<&'a str> {
        let (from, to) = (part.from, part.to);
        match self {
            // Cut at element starts and the window's end, each a character's boundary.
            Self::Text(whole) => whole.get(from..to),
            Self::Bytes(buf) | Self::Window(buf, _) => match std::str::from_utf8(&buf[from..to]) {
                Ok(text) => Some(text),
                Err(e) if part.last && e.error_len().is_none() => {
                    std::str::from_utf8(&buf[from..from + e.valid_up_to()]).ok()
                }
                Err(_) => None,
            },
        }
    }
}

/// The elements of `src` from `at`, where an element is due, without a scan, their turns
/// appended to `turns` (and where their contents were left to `left`): cut into a part for
/// each of `slots` ([`guess_parts`], the cuts found in the bytes themselves) and read by
/// [`read_parts`]. `None`, `turns` as it was, when a cut is not confirmed or anything is amiss,
/// for the caller to read the buffer by the scan.
pub(super) fn take_split(
    src: Source<'_>,
    at: usize,
    slots: &mut [Slot],
    turns: &mut Vec<TranscriptTurn>,
    left: &mut Vec<Left>,
) -> Option<Taken> {
    let buf = src.bytes();
    let find = |guess: usize| Some(buf.get(guess..).and_then(cut_in).map(|c| guess + c));
    let parts = guess_parts(at, buf.len(), slots.len(), find)?;
    read_parts(&parts, slots, turns, left, |part, builder, sink| {
        take_part_into(src, part, builder, sink)
    })
}

/// The turns of the elements of `part` of `src` (for the `last` part, to the end of the
/// buffer or of the array), appended to `turns` (on `None`, perhaps some of them) by
/// `builder`, and where their contents were left to `left`: where reading stopped, and
/// whether the array closed.
pub(super) fn take_part_into(
    src: Source<'_>,
    part: Part,
    builder: &mut Builder,
    (turns, left): Sink<'_>,
) -> Option<(usize, bool)> {
    // Whatever an earlier run that failed left in it.
    builder.clear();
    builder.base = src.offset().checked_add(part.from)?;
    let text = src.text(part)?;
    let stop = read_elements(text, part, builder)?;
    builder.finish_into(turns, left)?;
    Some((part.from + stop.0, stop.1))
}

/// The elements of `text`, the text of `part`, read by `builder`: where reading stopped in
/// `text`, and whether the array closed.
fn read_elements(text: &str, part: Part, builder: &mut Builder) -> Option<(usize, bool)> {
    let b = text.as_bytes();
    let mut p = 0;
    loop {
        let i = scan::ws(b, p);
        if i == b.len() || (!part.last && part.from + i >= part.to) {
            return Some((p, false));
        }
        let Some(end) = builder.element(text, i) else {
            // An element the text ends inside: the next read completes it.
            if part.last && scan::value_end(b, i).is_none() {
                return Some((p, false));
            }
            return None;
        };
        let j = scan::ws(b, end);
        match b.get(j) {
            Some(b',') => p = j + 1,
            Some(b']') => return Some((j + 1, true)),
            // The separator is not read yet: the element is read again with it.
            None if part.last => {
                builder.unread();
                return Some((p, false));
            }
            _ => return None,
        }
    }
}
