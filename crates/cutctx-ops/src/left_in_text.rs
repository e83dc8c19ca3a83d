//! A request document compacted with its turns' contents left in its text.
//!
//! Most of a large request is contents, and a compaction reads little of them: a dropped
//! turn's content is never read, a masked one is read only to hash it, and a kept one is
//! written out again as it came in. So the request is read with each content that its quick
//! reader takes left where it lies ([`crate::request::parse_leaving`]); the policy decides
//! with digests hashed from the text ([`CompactionPolicy::decide_with_digests`]), a content
//! spelled as the canonical writer spells it hashed as it stands; and the view is written
//! with each kept content copied from the text, or decoded and written again when it is
//! spelled otherwise. A policy that reads contents gets them all decoded first. The bytes are
//! those of the path that decodes every content (tests hold them to it).

use std::io;
use std::ops::Range;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

use cutctx::model::canonical::{sha256_of_str_bytes, sha256_of_written};
use cutctx::model::details;
use cutctx::policies::ContentDigests;
use cutctx::{
    Action, Analysis, CompactionError, CompactionPlan, Parallelism, Role, Transcript,
    TranscriptTurn,
};
use cutctx_json::{Style, Writer, write_turn_with};

use crate::OpsError;
use crate::input::RequestFile;
use crate::request::{Leaving, Left, Request};
use crate::text::Text;
use cutctx::policies::ahead::{Ahead, WithAhead};

/// The text a request was read from, with where its turns' contents were left in it.
pub(crate) struct LeftText {
    text: Text<'static>,
    left: Vec<Left>,
    placeholders: Vec<Arc<str>>,
}

/// Where the kept contents of one view lie among a [`LeftText`]'s left contents, found by
/// [`LeftText::locate`] once the view is made and read by [`LeftText::write_view`].
pub(crate) struct Located {
    /// For each turn of the view, by position: the index of its content among the left
    /// ones and whether the turn is written by copying its input's record whole, or `None`
    /// when it shows its own content.
    found: Vec<Option<(u32, bool)>>,
}

/// How the view's turn at a position is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kept {
    /// Its input's record copied whole: the turn is its input's unchanged, and the record
    /// is written as the canonical writer writes it.
    Record(usize),
    /// Its fields written, the content copied or decoded from the left content at this index.
    Content(usize),
}

impl Located {
    /// How the view's turn at `at` is written from the text; `None` when it shows its own
    /// content.
    fn at(&self, at: usize) -> Option<Kept> {
        let (k, whole) = self.found.get(at).copied().flatten()?;
        let k = usize::try_from(k).ok()?;
        Some(if whole {
            Kept::Record(k)
        } else {
            Kept::Content(k)
        })
    }
}

impl LeftText {
    /// The request `leaving` read from `text`, and the text with where its contents lie.
    pub(crate) fn new(leaving: Leaving, text: String) -> (Request, Self) {
        Self::of(leaving, Text::Whole(text.into()))
    }

    /// The request `leaving` read from `file` where it lies, and the file with where its
    /// contents lie.
    pub(crate) fn in_file(leaving: Leaving, file: RequestFile) -> (Request, Self) {
        Self::of(leaving, Text::File(file))
    }

    /// Whether the text is still what was read (see [`Text::unchanged`]).
    ///
    /// # Errors
    ///
    /// As [`Text::unchanged`].
    pub(crate) fn unchanged(&self) -> io::Result<()> {
        self.text.unchanged()
    }

    fn of(leaving: Leaving, text: Text<'static>) -> (Request, Self) {
        let Leaving {
            request,
            left,
            placeholders,
        } = leaving;
        let text = Self {
            text,
            left,
            placeholders,
        };
        (request, text)
    }

    /// `req`'s plan (see [`plan`]).
    pub(crate) fn plan(&mut self, req: &mut Request) -> Result<CompactionPlan, OpsError> {
        plan(req, &self.text, &mut self.left)
    }

    /// Finds, for every turn of `view` (the compaction of this text's request by `plan`) that
    /// kept a content left in the text, where it lies: [`LeftText::write_view`] then writes
    /// every one from there. (Each decodes: the reading checked it with
    /// `cutctx_json::check_string`, which accepts what decoding accepts.) A view turn shows a
    /// left content only when the plan keeps its turn as it is, and the view keeps turns in
    /// their order: each is the next left content whose turn the plan keeps. One pass, made
    /// once: the writer reads its result instead of walking the view again.
    ///
    /// # Errors
    ///
    /// `INTERNAL_ERROR` for a view turn showing a placeholder that no kept turn of the
    /// request left, or left under another id (the view is not this plan's), never expected.
    pub(crate) fn locate(
        &self,
        plan: &CompactionPlan,
        view: &Transcript,
    ) -> Result<Located, OpsError> {
        let mut next = 0;
        let mut found = Vec::with_capacity(view.turns().len());
        for turn in view.turns() {
            let shows_placeholder = self
                .placeholders
                .iter()
                .any(|p| std::ptr::eq(turn.content(), &**p));
            if !shows_placeholder {
                found.push(None);
                continue;
            }
            let kept = loop {
                let Some(l) = self.left.get(next) else {
                    break None;
                };
                next += 1;
                if let Some(action) = plan.actions.get(l.position())
                    && action.action() == Action::Keep
                {
                    break action.names_id(turn.turn_id_arc()).then_some(next - 1);
                }
            };
            // An index fits 32 bits as the positions do (see `Left`).
            let Some((k, Ok(index))) = kept.map(|k| (k, u32::try_from(k))) else {
                return Err(OpsError {
                    code: crate::INTERNAL_ERROR,
                    message: "a kept turn's content was not found where the request was \
                              read: a defect of cutctx, not of the request"
                        .to_owned(),
                    details: details! { "turn_id" => turn.turn_id() },
                });
            };
            // Kept as it is: its record is the turn's canonical JSON when the record is
            // written as the canonical writer writes it, which holds no metadata.
            let whole = self.left[k].record().is_some() && turn.metadata().is_empty();
            found.push(Some((index, whole)));
        }
        Ok(Located { found })
    }

    /// Writes `view`, whose kept contents [`LeftText::locate`] found at `located`, as its
    /// canonical JSON, as `Transcript::write_canonical_in_parts` does, each kept content left
    /// in the text copied from it (or decoded and written again, when it is spelled otherwise
    /// than the canonical writer would): `drain` takes the buffer each time it holds `part`
    /// bytes or more, and at the end, once the text is found unchanged.
    ///
    /// With `copy` and a length, for a text that is a file: each run of turns written exactly
    /// as their records stand in the file, one after another, at least that long (see
    /// [`LeftText::copied_runs`]), is handed to `copy` as the range of the file it spans, once
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
        debug_assert_eq!(located.found.len(), turns.len(), "located in this view");
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
        for at in 0..located.found.len() {
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
    /// in turn ([`LeftText::write_turns_on_two`]).
    ///
    /// # Errors
    ///
    /// As [`LeftText::write_view`].
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

    /// As [`LeftText::write_turns`], blocks of turns written on two threads in turn (see
    /// [`crate::two_threads`]). Writing a view is mostly waiting on memory, each kept content read
    /// from a text long out of the caches: a second thread waits beside the first.
    #[allow(
        clippy::too_many_arguments,
        reason = "the view writer's own state, passed down"
    )]
    fn write_turns_on_two<E>(
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
/// [`LeftText::copied_runs`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CopiedRun {
    /// The view's turns, by position.
    turns: Range<usize>,
    /// Where they lie in the text.
    bytes: Range<usize>,
}

/// What [`LeftText::write_view`] hands a run of turns written as the file spans them to: the
/// file and the range.
pub(crate) type CopyRun<'a, E> = &'a mut dyn FnMut(&RequestFile, Range<usize>) -> Result<(), E>;

/// The shortest run of turns the compaction's output copies from the file whole: a copy
/// costs a few system calls, and each run parts the view's other turns into two stretches
/// written on their own.
pub(crate) const COPIED_RUN_BYTES: usize = 1 << 20;

/// The fewest turns in a view whose writing is shared with a second thread.
const PARALLEL_WRITE_TURNS: usize = 20_000;

/// How many turns of a view each block written on one thread holds.
const WRITE_BLOCK_TURNS: usize = 512;

/// `req`'s plan, `req` read from `text` with its contents left at `left`, reading only what
/// its policy reads: the masked turns' digests for a policy that decides with digests (for a
/// large transcript, the tool results' digests hashed ahead while the policy decides, see
/// [`crate::ahead`]), every content for any other, decoded into the transcript first (`left`
/// is then emptied: no turn shows a placeholder any more).
///
/// # Errors
///
/// The policy's errors; a text that cannot be read again (an `INPUT_ERROR`).
pub(crate) fn plan(
    req: &mut Request,
    text: &Text<'_>,
    left: &mut Vec<Left>,
) -> Result<CompactionPlan, OpsError> {
    let ahead = left.len() >= AHEAD_FROM_TURNS && Parallelism::Automatic.threads() > 1;
    plan_hashing_ahead(req, text, left, ahead)
}

/// The fewest turns whose digests are hashed ahead: below it, a second thread costs more
/// than it saves.
const AHEAD_FROM_TURNS: usize = 10_000;

/// [`plan`], the tool results' digests hashed ahead on a second thread when `ahead`.
fn plan_hashing_ahead(
    req: &mut Request,
    text: &Text<'_>,
    left: &mut Vec<Left>,
    ahead: bool,
) -> Result<CompactionPlan, OpsError> {
    let failed = Mutex::new(None);
    let contents = Contents {
        text,
        left,
        transcript: &req.transcript,
        failed: &failed,
    };
    let stop = AtomicBool::new(false);
    let decided = std::thread::scope(|scope| {
        let ahead = if ahead {
            hash_tools_ahead(scope, &stop, contents)
        } else {
            Ahead::none(&stop)
        };
        let analysis = Analysis::of(&req.transcript, &req.budget);
        let digests = WithAhead::new(&contents, &ahead);
        let decided = req
            .policy
            .decide_with_digests(&req.transcript, &analysis, &digests);
        // Stopped before the scope ends, even when no digest was asked for.
        ahead.hashed();
        decided
    });
    // A digest that could not be read fails the decision; the read's own error says why.
    if let Some(e) = failed.lock().ok().and_then(|mut f| f.take()) {
        return Err(e);
    }
    if let Some(plan) = decided {
        return Ok(plan?);
    }
    let contents = left
        .iter()
        .map(|l| Ok((l.position(), Arc::from(decoded(text, l)?))))
        .collect::<Result<Vec<_>, OpsError>>()?;
    req.transcript.set_contents(contents)?;
    *left = Vec::new();
    Ok(req.policy.decide(&req.transcript, &req.budget)?)
}

/// Starts hashing, in `scope` until `stop`, the digests of the tool results whose contents
/// are left in `contents`' text, oldest first: the turns observation masking masks, in the
/// order it masks them.
fn hash_tools_ahead<'scope>(
    scope: &'scope std::thread::Scope<'scope, '_>,
    stop: &'scope AtomicBool,
    contents: Contents<'scope>,
) -> Ahead<'scope> {
    let tools = contents
        .left
        .iter()
        .map(Left::position)
        .filter(move |&p| contents.role(p) == Some(Role::Tool));
    // A failure is not noted: the turn may never be asked for. It is hashed (and fails) again
    // if it is.
    Ahead::start(scope, stop, tools, move |p| contents.read_hash(p).ok())
}

/// The content left at `l` in `text`, decoded: it was checked to decode when it was read.
fn decoded(text: &Text<'_>, l: &Left) -> Result<String, OpsError> {
    let mut out = String::with_capacity(l.span().len());
    let ok = text
        .with_str(l.span(), |written| {
            cutctx_json::decode_written(written, &mut out)
        })
        .map_err(|e| read_again_failed(&e, Some(l.span().start)))?;
    ok.ok_or_else(|| {
        OpsError::from(CompactionError::validation(
            "A content read from the request no longer decodes.",
            details! { "position" => l.position() },
        ))
    })?;
    Ok(out)
}

/// The error of a read of the request's text again, at `offset` when it is known, that
/// failed with `e`.
pub(crate) fn read_again_failed(e: &io::Error, offset: Option<usize>) -> OpsError {
    let message = format!("cannot read the request again: {e}");
    match offset {
        Some(offset) => OpsError::input(
            message,
            details! { "document" => "the request", "offset" => offset },
        ),
        None => OpsError::input(message, details! { "document" => "the request" }),
    }
}

/// A transcript's contents, read from the request's text where they were left there.
#[derive(Clone, Copy)]
struct Contents<'a> {
    text: &'a Text<'a>,
    /// By position.
    left: &'a [Left],
    transcript: &'a Transcript,
    /// The first read of `text` that failed, as the error the compaction gives: the digests
    /// can only say that they failed.
    failed: &'a Mutex<Option<OpsError>>,
}

impl Contents<'_> {
    /// The content left for the turn at `position`, if its content was left.
    ///
    /// Positions in `left` are distinct and rising, so the one for `position` sits at an index
    /// no greater than it, and at exactly it when every earlier turn left its content too: the
    /// usual request, where this is one look instead of a search through a list as long as
    /// the transcript (twice for every masked turn, each step a likely cache miss).
    fn left(&self, position: usize) -> Option<&Left> {
        if let Some(l) = self.left.get(position)
            && l.position() == position
        {
            return Some(l);
        }
        let before = self.left.get(..position).unwrap_or(self.left);
        before
            .binary_search_by_key(&position, Left::position)
            .ok()
            .and_then(|k| before.get(k))
    }

    /// The role of the turn at `position`.
    fn role(&self, position: usize) -> Option<Role> {
        self.transcript
            .turns()
            .get(position)
            .map(TranscriptTurn::role)
    }

    /// The SHA-256 of the content of the turn at `position` (see [`ContentDigests::digest`]),
    /// a failure to read it noted as the compaction's error.
    fn hash(&self, position: usize) -> Result<[u8; 32], CompactionError> {
        self.read_hash(position).map_err(|e| {
            let failed = CompactionError::validation(
                "A content of the request could not be read again.",
                details! { "position" => position },
            );
            if let Ok(mut first) = self.failed.lock() {
                first.get_or_insert(e);
            }
            failed
        })
    }

    /// [`Contents::hash`], a failure given as it is, not noted.
    fn read_hash(&self, position: usize) -> Result<[u8; 32], OpsError> {
        match self.left(position) {
            Some(l) if l.is_canonical() => self
                .text
                .with_str(l.span(), sha256_of_written)
                .map_err(|e| read_again_failed(&e, Some(l.span().start))),
            Some(l) => decoded(self.text, l).map(|c| sha256_of_str_bytes(&c)),
            None => {
                let turn = self.transcript.turns().get(position);
                Ok(sha256_of_str_bytes(turn.map_or("", |t| t.content())))
            }
        }
    }

    /// How many bytes [`Contents::hash`] hashes for `position`.
    fn len(&self, position: usize) -> usize {
        match self.left(position) {
            Some(l) => l.span().len(),
            None => self
                .transcript
                .turns()
                .get(position)
                .map_or(0, |t| t.content().len()),
        }
    }
}

impl ContentDigests for Contents<'_> {
    fn digest(&self, position: usize) -> Result<[u8; 32], CompactionError> {
        self.hash(position)
    }

    fn content_len(&self, position: usize) -> usize {
        self.len(position)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use cutctx::{CompactionBudget, CompactionPolicy, DropOldestPolicy};
    use proptest::prelude::*;

    use super::LeftText;
    use crate::request::{Left, parse, parse_leaving};
    use cutctx_json::{Style, Writer, write_turn_with};

    /// Content pieces as a request may spell them: plain, escaped as the canonical writer
    /// escapes, escaped otherwise (`\/`, `\u0041`, upper-case hex, a surrogate pair), and
    /// text that looks like the list's own punctuation.
    const PIECES: [&str; 12] = [
        "log line ",
        r#"\"quoted\" "#,
        r"back\\slash ",
        r"\n\t",
        r"\u001f",
        r"a\/b ",
        r"\u0041",
        r"\u001F",
        r"\uD83D\uDE00",
        "é 😀 ",
        r#"]},{\"turn_id\":\"x\"} "#,
        "",
    ];

    /// One turn record: `kind` picks the spelling (usual, keys reordered with whitespace,
    /// the content key missing, a key spelled with an escape, which only the strict parse
    /// takes).
    fn record(i: usize, role: &str, call: Option<&str>, content: &str, kind: u8) -> String {
        let call = call.map_or_else(|| "null".to_owned(), |c| format!("\"{c}\""));
        // Large enough that a stub is worth it: masking replaces only what it shrinks.
        let estimate = 5 + content.len() * 4;
        // Written as the canonical writer writes the turn (kind 4, 5), or nearly so (6 to 9:
        // a space, metadata, an escaped id, an empty map with a space inside).
        let canonical = |metadata: &str, pinned: bool, id: &str| {
            format!(
                r#"{{"content":"{content}","metadata":{metadata},"pinned":{pinned},"role":"{role}","token_estimate":{estimate},"tool_call_id":{call},"turn_id":"{id}"}}"#
            )
        };
        match kind {
            0 => format!(
                r#"{{"turn_id":"t{i}","role":"{role}","content":"{content}","token_estimate":{estimate},"tool_call_id":{call}}}"#
            ),
            1 => format!(
                r#" {{ "tool_call_id" : {call}, "content" : "{content}" , "token_estimate":{estimate},"metadata":{{"k":"v"}},"role":"{role}","turn_id":"t{i}"}} "#
            ),
            2 => format!(
                r#"{{"turn_id":"t{i}","role":"{role}","token_estimate":{estimate},"tool_call_id":{call}}}"#
            ),
            3 => format!(
                r#"{{"turn\u005fid":"t{i}","role":"{role}","content":"{content}","token_estimate":{estimate},"tool_call_id":{call}}}"#
            ),
            4 => canonical("{}", false, &format!("t{i}")),
            5 => canonical("{}", true, &format!("t{i}")),
            6 => {
                canonical("{}", false, &format!("t{i}")).replacen("\"pinned\":", "\"pinned\": ", 1)
            }
            7 => canonical(r#"{"k":"v"}"#, false, &format!("t{i}")),
            8 => canonical("{}", false, &format!("\\u0074{i}")),
            _ => canonical("{ }", false, &format!("t{i}")),
        }
    }

    /// A request of `contents.len()` turns after a system turn, in repeating assistant-call /
    /// tool-result / user turns, with `policy` and a budget of `share` percent of the turns'
    /// estimates.
    fn request(contents: &[(Vec<usize>, u8)], policy: &str, share: u64, protected: u64) -> String {
        let mut turns = vec![record(0, "system", None, "rules", 0)];
        for (k, (pieces, kind)) in contents.iter().enumerate() {
            let i = k + 1;
            let content: String = pieces.iter().map(|&p| PIECES[p % PIECES.len()]).collect();
            let cycle = k / 3;
            let (role, call) = match k % 3 {
                0 => ("assistant", Some(format!("c{cycle}"))),
                1 => ("tool", Some(format!("c{cycle}"))),
                _ => ("user", None),
            };
            turns.push(record(i, role, call.as_deref(), &content, *kind));
        }
        let total: u64 = turns
            .iter()
            .filter_map(|t| {
                let at = t.find("\"token_estimate\":")? + 17;
                t[at..].split([',', '}']).next()?.trim().parse::<u64>().ok()
            })
            .sum();
        let budget = total * share / 100;
        let summaries: Vec<String> = (0..contents.len())
            .map(|k| format!(r#""g{k}":"summary {k}""#))
            .collect();
        format!(
            r#"{{"transcript":[{}],"budget":{{"max_tokens":{budget},"protected_recent_turns":{protected}}},"policy":{policy},"summaries":{{{}}}}}"#,
            turns.join(","),
            summaries.join(",")
        )
    }

    const POLICIES: [&str; 6] = [
        r#"{"name":"drop_oldest"}"#,
        r#"{"name":"observation_masking","keep_recent_results":0}"#,
        r#"{"name":"observation_masking","keep_recent_results":2}"#,
        r#"{"name":"summarizing","prompt_id":"p.v1"}"#,
        r#"{"name":"default_chain","prompt_id":"p.v1","keep_recent_results":1}"#,
        r#"{"name":"chain","policies":[{"name":"observation_masking","keep_recent_results":0},{"name":"drop_oldest"}]}"#,
    ];

    /// The output, or the error as its JSON line.
    fn outcome(r: Result<String, crate::OpsError>) -> Result<String, String> {
        r.map_err(|e| e.to_json_line())
    }

    /// The compaction of `text` read where it lies in a file, in windows of 64 bytes on
    /// `threads` threads, written out (with `copied`, each run of turns written as the file
    /// spans them and at least that long copied from the file); `None` when it is not read
    /// so (left to the whole).
    fn compacted_from_file(
        text: &str,
        threads: usize,
        copied: Option<usize>,
    ) -> Option<Result<String, String>> {
        let (path, file) = crate::input::temp_request_file("left", text.as_bytes());
        let leaving = crate::request::parse_leaving_file_in(&file, 64, threads);
        let out = leaving.map(|leaving| {
            let compacted = leaving.and_then(|leaving| {
                let (mut req, mut left) = LeftText::in_file(leaving, file);
                let plan = left.plan(&mut req)?;
                crate::compacted_with(req, plan, Some(left))
            });
            let mut written = Vec::new();
            compacted
                .map_err(|e| e.to_json_line())
                .and_then(|c| {
                    match copied {
                        None => crate::CompactedFile(c).write_to(&mut written),
                        Some(shortest) => {
                            crate::CompactedFile(c).write_copying_runs_to(&mut written, shortest)
                        }
                    }
                    .map_err(|e| e.to_string())
                })
                .map(|()| String::from_utf8(written).expect("UTF-8"))
        });
        std::fs::remove_file(&path).expect("removed");
        out
    }

    /// A compaction's output made whole, and written in parts, each as an [`outcome`].
    fn whole_and_in_parts(
        compacted: Result<crate::Compacted, crate::OpsError>,
    ) -> (Result<String, String>, Result<String, String>) {
        let mut written = Vec::new();
        let mut compacted = compacted;
        let in_parts = match &mut compacted {
            Ok(c) => outcome(
                c.write_to(&mut written)
                    .map(|()| String::from_utf8(written).expect("UTF-8"))
                    .map_err(|_| unreachable!("a vector takes every write")),
            ),
            Err(e) => Err(e.to_json_line()),
        };
        (
            outcome(compacted.map(crate::Compacted::into_text)),
            in_parts,
        )
    }

    #[test]
    fn a_view_long_enough_for_two_writers_is_written_as_one_writes_it() {
        // Contents of every spelling, most kept: the view is written in blocks on two threads.
        let n = super::PARALLEL_WRITE_TURNS + 2 * super::WRITE_BLOCK_TURNS + 5;
        let contents: Vec<(Vec<usize>, u8)> = (0..n)
            .map(|k| (vec![k, k / 7, k / 3 + 1], if k % 11 == 5 { 1 } else { 4 }))
            .collect();
        let text = request(
            &contents,
            r#"{"name":"observation_masking","keep_recent_results":2}"#,
            90,
            4,
        );
        let expected = crate::compact(&text).expect("a valid request");
        let (whole, in_parts) = whole_and_in_parts(crate::compact_text(text.clone()));
        assert_eq!(whole.as_deref(), Ok(expected.as_str()));
        assert_eq!(in_parts.as_deref(), Ok(expected.as_str()));
        // The two writers, called directly whatever the machine's cores: drained in parts,
        // and kept whole by a drain that keeps what it is given.
        let c = crate::compact_text(text.clone()).expect("a valid request");
        let (left, located) = c.left.as_ref().expect("contents left in the text");
        let view = &c.out.transcript;
        let transcript = expected
            .rfind("\"transcript\":")
            .and_then(|at| expected.get(at + 13..expected.len() - 2))
            .expect("the output's transcript");
        for part in [1, super::super::WRITE_PART_BYTES, usize::MAX] {
            let mut written = String::new();
            let mut buf = String::from("[");
            let drained = left.write_turns_on_two(
                view.turns(),
                0..view.len(),
                located,
                &mut buf,
                part,
                &mut |b: &mut String| {
                    if part < usize::MAX {
                        written.push_str(b);
                        b.clear();
                    }
                    Ok::<(), ()>(())
                },
                &|_| (),
            );
            assert_eq!(drained, Ok(()));
            written.push_str(&buf);
            written.push(']');
            assert_eq!(written, transcript, "{part}");
        }
        // A writer that fails partway fails the writing, wherever it fails.
        struct Full(usize);
        impl std::io::Write for Full {
            fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
                if self.0 == 0 {
                    return Err(std::io::ErrorKind::StorageFull.into());
                }
                let n = buf.len().min(self.0);
                self.0 -= n;
                Ok(n)
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let mut c = crate::compact_text(text).expect("a valid request");
        for room in [expected.len() / 3, expected.len() - 10] {
            let e = c.write_to(&mut Full(room)).expect_err("the writer fills");
            assert_eq!(e.kind(), std::io::ErrorKind::StorageFull, "{room}");
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        /// Left in the text or decoded, the output's bytes (or the error) are the same, for
        /// every policy and budget, whether written whole or in parts.
        #[test]
        fn contents_left_in_the_text_give_the_bytes_decoded_ones_give(
            contents in prop::collection::vec(
                (prop::collection::vec(0..PIECES.len(), 0..6), prop_oneof![6 => 0_u8..3, 1 => Just(3_u8), 6 => 4_u8..10]),
                0..30,
            ),
            policy in 0..POLICIES.len(),
            share in 1_u64..=100,
            protected in 0_u64..4,
        ) {
            let text = request(&contents, POLICIES[policy], share, protected);
            // Every content the quick reader takes (a usual record's) is left in the text, the
            // system turn's among them: the text path is the one tested. A record only the
            // strict parse takes is built decoded, beside them.
            let usual = 1 + contents.iter().filter(|(_, kind)| !matches!(kind, 2 | 3)).count();
            match parse_leaving(&text).expect("a valid document") {
                Ok(leaving) => prop_assert_eq!(leaving.left.len(), usual),
                Err(e) => prop_assert!(crate::compact(&text).is_err(), "{}", e.to_json_line()),
            }
            let expected = outcome(crate::compact(&text));
            let (whole, in_parts) = whole_and_in_parts(crate::compact_text(text.clone()));
            prop_assert_eq!(&whole, &expected);
            prop_assert_eq!(&in_parts, &expected);
            // With the tool results' digests hashed ahead on a second thread, however far it
            // got before they were asked for: the same.
            let ahead = parse_leaving(&text).expect("a valid document").and_then(|leaving| {
                let (mut req, mut lt) = LeftText::new(leaving, text.clone());
                let plan = super::plan_hashing_ahead(&mut req, &lt.text, &mut lt.left, true)?;
                crate::compacted_with(req, plan, Some(lt))
            });
            prop_assert_eq!(&outcome(ahead.map(crate::Compacted::into_text)), &expected);
            // Read where it lies in a file, in windows of a few elements, on two threads and
            // on one: the same, when the file is read so at all.
            // Written with every run of turns the file spans as they are written copied
            // from the file, or those of a few records or more: the same.
            for (threads, copied) in [(2, None), (1, None), (1, Some(1)), (1, Some(300))] {
                match compacted_from_file(&text, threads, copied) {
                    Some(from_file) => prop_assert_eq!(
                        &from_file, &expected, "{} threads, copied {:?}", threads, copied
                    ),
                    // Read whole by the text's reader, so on one thread by the file's.
                    None => prop_assert!(threads > 1, "a usual request is read on one thread"),
                }
            }
            // `cutctx plan` plans with the contents left too.
            let decoded_plan = parse(&text).and_then(|r| {
                let plan = r.policy.decide(&r.transcript, &r.budget)?;
                Ok(plan.canonical_json() + "\n")
            });
            prop_assert_eq!(outcome(crate::plan(&text)), outcome(decoded_plan));
            // `cutctx apply` leaves the contents in the text too: for the request's own plan,
            // one made for another policy and budget (most break a rule here), and the own
            // plan with its last kept turn dropped (breaking the arithmetic, or a protected
            // turn) or a turn renamed (a mismatch), the same bytes, whole and in parts, or the
            // same error.
            if let Ok(own) = crate::plan(&text) {
                let other = request(&contents, POLICIES[(policy + 1) % POLICIES.len()], share.div_ceil(2), protected);
                let foreign = crate::plan(&other).unwrap_or_else(|_| own.clone());
                let broken = match own.rfind(r#"{"action":"keep""#) {
                    Some(at) => format!("{}{{\"action\":\"drop\"{}", &own[..at], &own[at + 16..]),
                    None => own.clone(),
                };
                let renamed = own.replacen(r#""turn_id":"t0""#, r#""turn_id":"x0""#, 1);
                for stored in [&own, &foreign, &broken, &renamed] {
                    let expected = outcome(crate::apply(&text, stored));
                    let (whole, in_parts) = whole_and_in_parts(crate::apply_text(text.clone(), stored));
                    prop_assert_eq!(&whole, &expected);
                    prop_assert_eq!(&in_parts, &expected);
                }
            }
        }
    }

    /// A policy that reads contents: it notes every content it is given, then drops the
    /// oldest turns.
    struct Reading(Arc<Mutex<Vec<String>>>);

    impl CompactionPolicy for Reading {
        fn name(&self) -> &str {
            "reading"
        }

        fn version(&self) -> &str {
            "1"
        }

        fn decide(
            &self,
            t: &cutctx::Transcript,
            b: &CompactionBudget,
        ) -> Result<cutctx::CompactionPlan, cutctx::CompactionError> {
            if let Ok(mut seen) = self.0.lock() {
                *seen = t.turns().iter().map(|x| x.content().to_owned()).collect();
            }
            DropOldestPolicy.decide(t, b)
        }
    }

    #[test]
    fn a_policy_that_reads_contents_is_given_them_all_decoded() {
        let contents: Vec<(Vec<usize>, u8)> = (0..12).map(|k| ((0..k % 7).collect(), 0)).collect();
        let text = request(&contents, POLICIES[0], 50, 1);
        let whole = parse(&text).expect("a valid request");
        let leaving = parse_leaving(&text).expect("usual records").expect("valid");
        assert!(!leaving.left.is_empty());
        let (mut req, mut left) = LeftText::new(leaving, text.clone());
        assert!(
            req.transcript
                .turns()
                .iter()
                .all(|t| t.content().is_empty())
        );
        let seen = Arc::new(Mutex::new(Vec::new()));
        req.policy = Box::new(Reading(Arc::clone(&seen)));
        let plan = left.plan(&mut req).expect("a plan");
        let decoded: Vec<String> = whole
            .transcript
            .turns()
            .iter()
            .map(|t| t.content().to_owned())
            .collect();
        assert_eq!(req.transcript, whole.transcript);
        assert!(left.left.is_empty(), "no turn shows a placeholder any more");
        let expected = crate::compact(&text).expect("compacted");
        let out = crate::compacted_with(req, plan, Some(left)).expect("applied");
        assert_eq!(out.into_text(), expected);
        assert!(decoded.iter().any(|c| c.contains('"')));
        assert_eq!(*seen.lock().expect("not poisoned"), decoded);
    }

    proptest! {
        /// Whichever turns left their contents (all, none, runs, gaps), the digests find each
        /// turn's left content as a search through the list does, and none for the others.
        #[test]
        fn the_digests_find_each_left_content_by_its_position(
            leaves in prop::collection::vec(prop::bool::weighted(0.8), 0..60),
        ) {
            let n = leaves.len();
            let turns = (0..n.max(1))
                .map(|i| {
                    cutctx::TranscriptTurn::new(format!("t{i}"), cutctx::Role::User, "x", 1)
                        .expect("a turn")
                })
                .collect();
            let transcript = cutctx::Transcript::new(turns).expect("unique ids");
            let left: Vec<Left> = (0..n)
                .filter(|&p| leaves[p])
                .map(|p| Left::of(p, 0, p..p + 1, true, None).expect("small"))
                .collect();
            let text = super::Text::Whole("x".repeat(n + 1).into());
            let failed = std::sync::Mutex::new(None);
            let contents = super::Contents {
                text: &text,
                left: &left,
                transcript: &transcript,
                failed: &failed,
            };
            for p in 0..n + 3 {
                let searched = left.iter().find(|l| l.position() == p);
                prop_assert_eq!(contents.left(p).map(Left::position), searched.map(Left::position));
            }
        }
    }

    #[test]
    fn digests_hashed_ahead_are_those_hashed_when_asked() {
        use std::sync::atomic::AtomicBool;

        use cutctx::model::canonical::sha256_of_str_bytes;

        use super::Contents;
        use cutctx::policies::ContentDigests;
        use cutctx::policies::ahead::{HASHED_AHEAD_BYTES, WithAhead};

        // Every piece in every place: canonical contents and contents spelled otherwise.
        let contents: Vec<(Vec<usize>, u8)> = (0..60)
            .map(|k| (vec![k % 12, (k / 12 + 5) % 12, k % 5], 0))
            .collect();
        let text = request(&contents, POLICIES[0], 50, 1);
        let whole = parse(&text).expect("a valid request");
        let leaving = parse_leaving(&text).expect("usual records").expect("valid");
        let (req, left) = LeftText::new(leaving, text.clone());
        let failed = std::sync::Mutex::new(None);
        let contents = Contents {
            text: &left.text,
            left: &left.left,
            transcript: &req.transcript,
            failed: &failed,
        };
        let tools: Vec<usize> = (0..whole.transcript.len())
            .filter(|&p| whole.transcript.turns()[p].role() == cutctx::Role::Tool)
            .collect();
        assert!(tools.len() >= 20);
        assert!(
            left.left.iter().any(|l| !l.is_canonical()),
            "both spellings"
        );
        let stop = AtomicBool::new(false);
        std::thread::scope(|scope| {
            let ahead = super::hash_tools_ahead(scope, &stop, contents);
            while !ahead.ran_out() {
                std::thread::yield_now();
            }
            assert_eq!(ahead.hashed().len(), tools.len());
            let digests = WithAhead::new(&contents, &ahead);
            for (p, turn) in whole.transcript.turns().iter().enumerate() {
                let expected = sha256_of_str_bytes(turn.content());
                assert_eq!(digests.digest(p).expect("hashed"), expected, "position {p}");
                assert_eq!(contents.hash(p).expect("hashed"), expected, "position {p}");
                let len = if tools.contains(&p) {
                    HASHED_AHEAD_BYTES
                } else {
                    contents.len(p)
                };
                assert_eq!(digests.content_len(p), len, "position {p}");
            }
        });
    }

    #[test]
    fn kept_contents_are_located_where_they_were_left_and_a_view_of_another_plan_is_refused() {
        let contents: Vec<(Vec<usize>, u8)> = (0..40)
            .map(|k| (vec![k % 12, k / 3], [4, 0, 5, 7, 8, 4, 9, 6][k % 8]))
            .collect();
        let policy = r#"{"name":"observation_masking","keep_recent_results":1}"#;
        let text = request(&contents, policy, 60, 2);
        let c = crate::compact_text(text.clone()).expect("a valid request");
        let (left, located) = c.left.as_ref().expect("contents left in the text");
        // The view was applied in place: the input read again to compare.
        let input = &parse(&text).expect("a valid request").transcript;
        let view = &c.out.transcript;
        let (mut kept, mut whole) = (0, 0);
        for (at, turn) in view.turns().iter().enumerate() {
            match located.at(at) {
                // A content left in the text: the input's turn of the same id left it. A
                // record copied whole is the bytes the turn's fields and that content make;
                // a kept turn is written from its fields only when its record is not
                // written as the canonical writer writes it.
                Some(found @ (super::Kept::Record(k) | super::Kept::Content(k))) => {
                    kept += 1;
                    let l = &left.left[k];
                    assert_eq!(input.turns()[l.position()].turn_id(), turn.turn_id());
                    match (found, l.record()) {
                        (super::Kept::Record(_), Some(record)) => {
                            let span = l.span();
                            let read = |range| left.text.with_str(range, str::to_owned);
                            let literal = read(span.start - 1..span.end + 1).expect("in the text");
                            let mut fields = String::new();
                            let w = &mut Writer::new(&mut fields, Style::CANONICAL);
                            write_turn_with(w, turn.json_fields(), |w| w.raw(&literal));
                            assert_eq!(read(record).expect("in the text"), fields);
                            whole += 1;
                        }
                        (super::Kept::Content(_), None) => {}
                        (found, record) => panic!("{found:?} with record {record:?}"),
                    }
                }
                // Its own: no placeholder shown (a stub, a summary).
                None => assert!(
                    left.placeholders
                        .iter()
                        .all(|p| !std::ptr::eq(turn.content(), &**p))
                ),
            }
        }
        assert!(whole > 0 && whole < kept, "{whole} of {kept}");
        assert!(kept > 0 && kept < view.turns().len(), "{kept}");
        // The view located with another plan: one of the same turns under other ids, whose
        // actions name none of the view's turns; one that keeps nothing.
        let renamed = input
            .turns()
            .iter()
            .map(|t| {
                cutctx::TranscriptTurn::new(format!("x{}", t.turn_id()), t.role(), "", 1)
                    .expect("a turn")
            })
            .collect();
        let other = cutctx::Transcript::new(renamed).expect("unique ids");
        let keeps_all = DropOldestPolicy
            .decide(&other, &CompactionBudget::new(1 << 40))
            .expect("a plan");
        // Keeps only the newest turns (and the system and pinned ones): the view keeps others.
        let keeps_newest = DropOldestPolicy
            .decide(
                input,
                &CompactionBudget::new(input.token_estimate() / 4).with_protected_recent_turns(1),
            )
            .expect("a plan");
        for plan in [&keeps_all, &keeps_newest] {
            let e = left.locate(plan, view).err().expect("another plan's view");
            assert_eq!(e.code, crate::INTERNAL_ERROR);
            assert!(e.details.contains_key("turn_id"), "{:?}", e.details);
        }
    }

    #[test]
    fn a_content_past_what_32_bits_hold_is_not_left() {
        let max = u32::MAX as usize;
        assert!(Left::of(1, 0, 0..2, true, None).is_some());
        assert!(Left::of(max + 1, 0, 0..2, true, None).is_none());
        assert!(Left::of(1, max - 1, 0..2, true, None).is_none());
        assert!(Left::of(1, usize::MAX, 1..2, true, None).is_none());
    }
}
