//! The compacted view of a request read with its contents left in its text, written as its
//! canonical JSON: each kept content copied from the text, or decoded and written again when
//! it is spelled otherwise than the canonical writer would; each run of kept records that a
//! file spans as they would be written handed over as a range of the file; a long view
//! written in blocks on two threads in turn.

use std::io;
use std::ops::Range;
use std::sync::Mutex;

use cutctx::{Transcript, TranscriptTurn};
use cutctx_json::{Style, Writer, write_turn_with};

use super::{Kept, Located, RequestText};
use crate::input::RequestFile;
use crate::request::Left;
use crate::text::Text;

impl RequestText {
    /// Writes `view`, whose kept contents [`RequestText::locate`] found at `located`, as its
    /// canonical JSON, as `Transcript::write_canonical_in_parts` does, each kept content left
    /// in the text copied from it (or decoded and written again, when it is spelled otherwise
    /// than the canonical writer would): `drain` takes the buffer each time it holds `part`
    /// bytes or more, and at the end, once the text is found unchanged.
    ///
    /// With `copy` and a length, for a text that is a file: each run of turns written exactly
    /// as their records stand in the file, one after another, at least that long (see
    /// [`RequestText::copied_runs`]), is handed to `copy` as the range of the file it spans, once
    /// what comes before it is drained, instead of being read into the buffer.
    ///
    /// # Errors
    ///
    /// The first error of `drain` or `copy`; a text that cannot be read again (a file that
    /// fails or changed) as `read_failed` makes it, and nothing written after the read that
    /// failed is drained.
    #[allow(
        clippy::too_many_arguments,
        reason = "a view, where it lies, three sinks"
    )]
    pub(crate) fn write_view<E>(
        &self,
        view: &Transcript,
        located: &Located,
        buf: &mut String,
        part: usize,
        mut drain: impl FnMut(&mut String) -> Result<(), E>,
        read_failed: impl Fn(io::Error) -> E,
        mut copy: Option<(CopyRun<'_, E>, usize)>,
    ) -> Result<(), E> {
        let turns = view.turns();
        debug_assert_eq!(located.len(), turns.len(), "located in this view");
        let runs = match (&copy, &self.text) {
            (Some((_, shortest)), Text::File(_)) => self.copied_runs(located, *shortest),
            _ => Vec::new(),
        };
        Writer::new(&mut *buf, Style::CANONICAL).raw("[");
        let mut at = 0;
        for run in &runs {
            self.write_turns(
                turns,
                at..run.turns.start,
                located,
                buf,
                part,
                &mut drain,
                &read_failed,
            )?;
            if run.turns.start > 0 {
                Writer::new(&mut *buf, Style::CANONICAL).item_separator();
            }
            drain(buf)?;
            if let (Some((copy, _)), Text::File(file)) = (copy.as_mut(), &self.text) {
                copy(file, run.bytes.clone())?;
            }
            at = run.turns.end;
        }
        self.write_turns(
            turns,
            at..turns.len(),
            located,
            buf,
            part,
            &mut drain,
            &read_failed,
        )?;
        Writer::new(&mut *buf, Style::CANONICAL).raw("]");
        self.text.unchanged().map_err(&read_failed)?;
        drain(buf)
    }

    /// The runs of the view's turns located at `located` that are each written as its
    /// input's record (`Kept::Record`), the records one after another in the text with one
    /// byte between each two (the comma that parts array elements: whitespace would take a
    /// byte more), each at least `shortest` bytes long: such a run is written exactly as the
    /// text spans it, from its first record's opening brace to its last's closing one.
    pub(crate) fn copied_runs(&self, located: &Located, shortest: usize) -> Vec<CopiedRun> {
        let mut runs = Vec::new();
        let mut open: Option<CopiedRun> = None;
        let close = |run: Option<CopiedRun>, runs: &mut Vec<CopiedRun>| {
            if let Some(run) = run.filter(|r| r.bytes.len() >= shortest) {
                runs.push(run);
            }
        };
        for at in 0..located.len() {
            let record = match located.at(at) {
                Some(Kept::Record(k)) => self.left.get(k).and_then(Left::record),
                _ => None,
            };
            match (record, &mut open) {
                (Some(r), Some(run)) if run.bytes.end.checked_add(1) == Some(r.start) => {
                    run.bytes.end = r.end;
                    run.turns.end = at + 1;
                }
                (Some(r), _) => {
                    close(open.take(), &mut runs);
                    open = Some(CopiedRun {
                        turns: at..at + 1,
                        bytes: r,
                    });
                }
                (None, _) => close(open.take(), &mut runs),
            }
        }
        close(open, &mut runs);
        runs
    }

    /// The view's turns at `range` onto `buf`, each after its separator, handing `buf` to
    /// `drain` each time it holds `part` bytes or more: a long range in blocks on two threads
    /// in turn ([`RequestText::write_turns_on_two`]).
    ///
    /// # Errors
    ///
    /// As [`RequestText::write_view`].
    #[allow(
        clippy::too_many_arguments,
        reason = "the view writer's own state, passed down"
    )]
    fn write_turns<E>(
        &self,
        turns: &[TranscriptTurn],
        range: Range<usize>,
        located: &Located,
        buf: &mut String,
        part: usize,
        drain: &mut impl FnMut(&mut String) -> Result<(), E>,
        read_failed: &impl Fn(io::Error) -> E,
    ) -> Result<(), E> {
        if range.len() >= PARALLEL_WRITE_TURNS && cutctx::Parallelism::Automatic.threads() > 1 {
            return self.write_turns_on_two(turns, range, located, buf, part, drain, read_failed);
        }
        let mut decoded = String::new();
        for (at, turn) in turns.iter().enumerate().take(range.end).skip(range.start) {
            self.write_one(buf, at, turn, located.at(at), &mut decoded)
                .map_err(read_failed)?;
            if buf.len() >= part {
                drain(buf)?;
            }
        }
        Ok(())
    }

    /// The view's turn at `at` onto `buf`, after its separator: its input's record copied, or
    /// its fields with its content left in the text (`kept`), or its own.
    ///
    /// # Errors
    ///
    /// A text that cannot be read again (see [`Text::with_str`]).
    fn write_one(
        &self,
        buf: &mut String,
        at: usize,
        turn: &TranscriptTurn,
        kept: Option<Kept>,
        decoded: &mut String,
    ) -> io::Result<()> {
        let mut w = Writer::new(buf, Style::CANONICAL);
        if at > 0 {
            w.item_separator();
        }
        let l = match kept {
            Some(Kept::Record(k)) => {
                let l = &self.left[k];
                if let Some(record) = l.record() {
                    return self.text.with_str(record, |record| w.raw(record));
                }
                debug_assert!(false, "located as a record only when it has one");
                l
            }
            Some(Kept::Content(k)) => &self.left[k],
            // Its own content; `locate` found every placeholder's.
            None => {
                cutctx_json::write_turn(&mut w, turn.json_fields());
                return Ok(());
            }
        };
        if l.is_canonical() {
            let span = l.span();
            // The literal, quotes included.
            self.text.with_str(span.start - 1..span.end + 1, |literal| {
                write_turn_with(&mut w, turn.json_fields(), |w| w.raw(literal));
            })
        } else {
            decoded.clear();
            let ok = self.text.with_str(l.span(), |written| {
                cutctx_json::decode_written(written, decoded)
            })?;
            debug_assert!(ok.is_some(), "checked as decoding checks when it was read");
            write_turn_with(&mut w, turn.json_fields(), |w| w.str(decoded));
            Ok(())
        }
    }

    /// As [`RequestText::write_turns`], blocks of turns written on two threads in turn (see
    /// [`crate::two_threads`]). Writing a view is mostly waiting on memory, each kept content read
    /// from a text long out of the caches: a second thread waits beside the first.
    #[allow(
        clippy::too_many_arguments,
        reason = "the view writer's own state, passed down"
    )]
    pub(super) fn write_turns_on_two<E>(
        &self,
        turns: &[TranscriptTurn],
        range: Range<usize>,
        located: &Located,
        buf: &mut String,
        part: usize,
        drain: &mut impl FnMut(&mut String) -> Result<(), E>,
        read_failed: &impl Fn(io::Error) -> E,
    ) -> Result<(), E> {
        // The first read that failed, on either thread: its block is never drained, nor
        // anything after it.
        let failed: Mutex<Option<io::Error>> = Mutex::new(None);
        let take_failed = || failed.lock().ok().and_then(|mut f| f.take());
        let blocks = range.len().div_ceil(WRITE_BLOCK_TURNS);
        let write_block = |k: usize, out: &mut String, decoded: &mut String| {
            let from = range.start + k * WRITE_BLOCK_TURNS;
            let to = (from + WRITE_BLOCK_TURNS).min(range.end);
            for (at, turn) in turns.iter().enumerate().take(to).skip(from) {
                if let Err(e) = self.write_one(out, at, turn, located.at(at), decoded) {
                    if let Ok(mut f) = failed.lock() {
                        f.get_or_insert(e);
                    }
                    return;
                }
            }
        };
        let mut checked_drain = |buf: &mut String| match take_failed() {
            Some(e) => Err(read_failed(e)),
            None => drain(buf),
        };
        crate::two_threads::on_two(blocks, write_block, buf, part, &mut checked_drain)?;
        // The last blocks' failure, if any, before their bytes are drained.
        take_failed().map_or(Ok(()), |e| Err(read_failed(e)))
    }
}

/// A run of a view's turns written exactly as the text spans them (see
/// [`RequestText::copied_runs`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CopiedRun {
    /// The view's turns, by position.
    turns: Range<usize>,
    /// Where they lie in the text.
    bytes: Range<usize>,
}

/// What [`RequestText::write_view`] hands a run of turns written as the file spans them to: the
/// file and the range.
pub(crate) type CopyRun<'a, E> = &'a mut dyn FnMut(&RequestFile, Range<usize>) -> Result<(), E>;

/// The shortest run of turns the compaction's output copies from the file whole: a copy
/// costs a few system calls, and each run parts the view's other turns into two stretches
/// written on their own.
pub(crate) const COPIED_RUN_BYTES: usize = 1 << 20;

/// The fewest turns in a view whose writing is shared with a second thread.
pub(super) const PARALLEL_WRITE_TURNS: usize = 20_000;

/// How many turns of a view each block written on one thread holds.
pub(super) const WRITE_BLOCK_TURNS: usize = 512;
