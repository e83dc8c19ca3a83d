//! Where a turn's content was left in the request's text ([`Left`]), and a request read so
//! ([`Leaving`]).

use std::num::NonZeroU32;
use std::ops::Range;
use std::sync::Arc;

use cutctx::formats::left_in_text::LeftSpan;

use super::Request;

/// A turn's content left in the request's text (see [`parse_leaving`](super::parse_leaving)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Left {
    /// The turn's position in the transcript. Positions and offsets take 32 bits: there is
    /// one of these for most turns of a request, and a request too large for them is read
    /// by [`parse`](super::parse) instead.
    position: u32,
    /// Where the content lies in the request, as written between its quotes.
    start: u32,
    end: u32,
    /// Whether the written content is its own canonical JSON spelling (every escape the one
    /// the canonical writer uses), so that it can be copied and hashed as it stands.
    canonical: bool,
    /// Where the turn's whole record ends, when the record is written exactly as the canonical
    /// writer writes the turn (it then starts with [`RECORD_HEAD`], just before the content).
    record_end: Option<NonZeroU32>,
}

/// How a record written as the canonical writer writes a turn opens: its content comes first.
const RECORD_HEAD: &str = "{\"content\":\"";

impl Left {
    /// The content of the turn at `position`, at `span` of a text read from `base`, its whole
    /// record at `record` when it is written as the canonical writer writes the turn; `None`
    /// past what 32 bits hold.
    pub(crate) fn of(
        position: usize,
        base: usize,
        span: Range<usize>,
        canonical: bool,
        record: Option<Range<usize>>,
    ) -> Option<Self> {
        let at = |offset: usize| u32::try_from(base.checked_add(offset)?).ok();
        let record_end = match record {
            Some(r) => {
                // The record reader sets it only for a record that opens with its content.
                debug_assert_eq!(r.start + RECORD_HEAD.len(), span.start, "the content first");
                let head = r.start.checked_add(RECORD_HEAD.len()) == Some(span.start);
                head.then(|| at(r.end).and_then(NonZeroU32::new)).flatten()
            }
            None => None,
        };
        Some(Self {
            position: u32::try_from(position).ok()?,
            start: at(span.start)?,
            end: at(span.end)?,
            canonical,
            record_end,
        })
    }

    /// The same content, its turn `by` positions later (a part's turns joining those before
    /// them); `None` past what 32 bits hold.
    pub(super) fn shifted(mut self, by: usize) -> Option<Self> {
        self.position = self.position.checked_add(u32::try_from(by).ok()?)?;
        Some(self)
    }

    /// Where the turn's whole record lies in the request, braces included, when it is written
    /// exactly as the canonical writer writes the turn: a turn kept unchanged is then written
    /// by copying it.
    #[must_use]
    pub fn record(&self) -> Option<Range<usize>> {
        let end = self.record_end?.get() as usize;
        Some((self.start as usize).checked_sub(RECORD_HEAD.len())?..end)
    }

    /// The turn's position in the transcript.
    #[must_use]
    pub const fn position(&self) -> usize {
        self.position as usize
    }

    /// Where the content lies in the request, as written between its quotes.
    #[must_use]
    pub const fn span(&self) -> Range<usize> {
        self.start as usize..self.end as usize
    }

    /// Whether the written content is its own canonical JSON spelling (every escape the one
    /// the canonical writer uses), so that it can be copied and hashed as it stands.
    #[must_use]
    pub const fn is_canonical(&self) -> bool {
        self.canonical
    }
}

impl LeftSpan for Left {
    fn position(&self) -> usize {
        Self::position(self)
    }

    fn span(&self) -> Range<usize> {
        Self::span(self)
    }

    fn is_canonical(&self) -> bool {
        Self::is_canonical(self)
    }
}

/// A request read with the contents of its turns left in its text.
pub struct Leaving {
    /// The request; each turn of [`Leaving::left`] shows one of [`Leaving::placeholders`] as
    /// its content.
    pub request: Request,
    /// Where the contents were left, by position.
    pub left: Vec<Left>,
    /// The contents the turns left in the text show: a turn of the compacted view with one of
    /// these is a turn of `left`, kept.
    pub placeholders: Vec<Arc<str>>,
}

#[cfg(test)]
mod tests {
    use super::Left;

    #[test]
    fn a_content_past_what_32_bits_hold_is_not_left() {
        let max = u32::MAX as usize;
        assert!(Left::of(1, 0, 0..2, true, None).is_some());
        assert!(Left::of(max + 1, 0, 0..2, true, None).is_none());
        assert!(Left::of(1, max - 1, 0..2, true, None).is_none());
        assert!(Left::of(1, usize::MAX, 1..2, true, None).is_none());
        let left = Left::of(1, 0, 0..2, true, None).expect("small");
        assert_eq!(left.clone().shifted(4).map(|l| l.position()), Some(5));
        assert!(left.shifted(max).is_none());
    }
}
