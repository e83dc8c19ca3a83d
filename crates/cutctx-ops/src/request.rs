//! The request document of the CLI contract: transcript, budget, policy and summaries.

use std::collections::BTreeMap;
use std::io::Read;
use std::num::NonZeroU32;
use std::ops::Range;
use std::sync::Arc;

use cutctx::model::SharedTurnRecord;
use cutctx::model::wire::{ObjectOnly, UniqueKeys, WireInt, WireText, unique_string_map};
use cutctx::{CompactionBudget, CompactionPolicy, Parallelism, Transcript, TranscriptTurn};
use serde::Deserialize;

use crate::error::{OpsError, parse_json};
use crate::input::RequestFile;

mod record;
mod scan;

/// A parsed, validated request.
pub struct Request {
    /// The transcript.
    pub transcript: Transcript,
    /// The budget.
    pub budget: CompactionBudget,
    /// The policy.
    pub policy: Box<dyn CompactionPolicy>,
    /// The supplied summaries, by group id.
    pub summaries: BTreeMap<String, String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RequestWire {
    transcript: Turns,
    budget: ObjectOnly<BudgetWire>,
    policy: UniqueKeys,
    #[serde(default, deserialize_with = "unique_string_map")]
    summaries: BTreeMap<String, String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct BudgetWire {
    max_tokens: WireInt,
    #[serde(default = "default_protected")]
    protected_recent_turns: WireInt,
}

/// The transcript's turns, each built as soon as its record is read, so that no array of
/// records stands beside the turns. A turn that breaks a rule does not stop the reading: the
/// rest of the document may still not be JSON, or not a request, and those errors come first,
/// as they do when every record is read before any turn is built; of the broken turns, the
/// first is reported.
struct Turns(Result<Vec<TranscriptTurn>, cutctx::CompactionError>);

impl<'de> Deserialize<'de> for Turns {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Turns;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                // What `Vec`'s own visitor says, so the message for a non-array is unchanged.
                f.write_str("a sequence")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<Turns, A::Error> {
                let mut turns = Ok(Vec::new());
                while let Some(ObjectOnly(record)) =
                    seq.next_element::<ObjectOnly<SharedTurnRecord>>()?
                {
                    if let Ok(built) = &mut turns {
                        match TranscriptTurn::try_from(record) {
                            Ok(turn) => built.push(turn),
                            Err(e) => turns = Err(e),
                        }
                    }
                }
                Ok(Turns(turns))
            }
        }
        d.deserialize_seq(V)
    }
}

fn default_protected() -> WireInt {
    WireInt(i128::from(CompactionBudget::DEFAULT_PROTECTED_RECENT_TURNS))
}

/// Parses and validates a request document.
///
/// # Errors
///
/// `INPUT_ERROR` for text that is not JSON, `VALIDATION_ERROR` for a malformed request.
pub fn parse(text: &str) -> Result<Request, OpsError> {
    let split = (text.len() >= SPLIT_FROM_BYTES)
        .then(|| {
            read_in_pieces(
                text.as_bytes(),
                PIECE_BYTES,
                Parallelism::Automatic.threads(),
            )
        })
        .flatten();
    if let Some((turns, wire)) = split {
        return finish(Transcript::with_packed_ids(turns), wire);
    }
    parse_whole(text)
}

/// Parses and validates the request document `reader` holds, reading it piece by piece so
/// that the whole text is never held: only a piece, the turns built so far, and the rest of
/// the document around the transcript. When anything in the document is amiss (or cannot be
/// read), `whole` reads it again whole and [`parse`] gives the error it would have given:
/// `reader` must read what `whole` does, a regular file rather than a stream.
///
/// # Errors
///
/// As [`parse`], and whatever `whole` returns.
pub fn parse_reader(
    reader: impl Read,
    whole: impl FnOnce() -> Result<String, OpsError>,
) -> Result<Request, OpsError> {
    match read_in_pieces(reader, PIECE_BYTES, Parallelism::Automatic.threads()) {
        Some((turns, wire)) => finish(Transcript::with_packed_ids(turns), wire),
        None => parse_whole(&whole()?),
    }
}

/// A turn's content left in the request's text (see [`parse_leaving`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Left {
    /// The turn's position in the transcript. Positions and offsets take 32 bits: there is
    /// one of these for most turns of a request, and a request too large for them is read
    /// by [`parse`] instead.
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

/// Reads the request document `text` as [`parse`] does, but leaves each content that its
/// turn record's quick reader takes in `text`: checked as a JSON string, not decoded. Most of
/// a large request is contents, and a compaction that drops or masks a turn never needs its
/// content decoded (a mask's digest is hashed from the text, see [`Leaving`]).
///
/// `None` when anything is unusual (the transcript not taken whole by the quick reader, the
/// rest of the document not parsing): [`parse`] then reads it and gives the result or error.
/// `Some` gives the result `parse` gives, but for the contents left.
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
    let b = text.as_bytes();
    let start = scan::array_start(b)?;
    let threads = Parallelism::Automatic.threads().max(1);
    let mut slots: Vec<Slot> = std::iter::repeat_with(Slot::leaving)
        .take(threads)
        .collect();
    // Room for as many turns as the text could hold (a turn record takes more than 48 bytes),
    // reserved, not touched: the pages the turns never reach are never the process's, and
    // the list is never moved to grow it.
    let most = b.len() / 48;
    let (mut turns, mut left) = (Vec::with_capacity(most), Vec::with_capacity(most));
    // A window of the text at a time, as the pieces of a file are read: each thread's turns
    // stay few before they join the rest, and a window that holds no whole element grows.
    let mut at = start + 1;
    let mut window = PIECE_BYTES * threads;
    let taken = loop {
        let mut end = (at + window).min(b.len());
        // The text is UTF-8 already: a window ends on a character's boundary, and its parts
        // are not checked again.
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        let window_text = Source::Text(text.get(..end)?);
        // The cuts are guesses, and miss when the transcript is short beside the rest of the
        // document: then the window is read on one thread, from `at` on, without a cut.
        let taken = take_split(window_text, at, &mut slots, &mut turns, &mut left)
            .or_else(|| take_split(window_text, at, &mut slots[..1], &mut turns, &mut left))?;
        if taken.closed {
            break taken;
        }
        if end == b.len() {
            return None;
        }
        if taken.at == at {
            window *= 2;
        }
        at = taken.at;
    };
    let mut rest = String::with_capacity(start + 2 + text.len() - taken.at);
    rest.push_str(text.get(..start)?);
    rest.push_str("[]");
    rest.push_str(text.get(taken.at..)?);
    leaving_of(&rest, slots, turns, left)
}

/// As [`parse_leaving`], reading the request from `file` where it lies, a window at a time,
/// instead of from a text held whole: the transcript is cut into a part for each thread
/// where an element seems to start (as [`parse_leaving`] cuts each of its windows), and each
/// thread reads its part through a window of its own, each window checked as UTF-8 where it
/// is read, the spans of the contents left the file's offsets. Only the windows, the turns
/// and the rest of the document are ever held.
///
/// One part a thread for the whole file, not a part a thread for each window: a thread
/// that waits between windows is put to sleep, and on some machines it takes longer to wake
/// again than a window takes to read. When a cut turns out not to be an element's start,
/// the file is read again on one thread.
///
/// `None` when anything is unusual, as for [`parse_leaving`] (and also when the
/// `transcript` array does not open in the first window): the caller then reads the file
/// whole.
#[must_use]
pub fn parse_leaving_file(file: &RequestFile) -> Option<Result<Leaving, OpsError>> {
    let threads = Parallelism::Automatic.threads().max(1);
    parse_leaving_file_in(file, FILE_PIECE_BYTES, threads).or_else(|| {
        (threads > 1)
            .then(|| parse_leaving_file_in(file, FILE_PIECE_BYTES, 1))
            .flatten()
    })
}

/// How many bytes of a file a thread reads elements from at a time: a window stays in the
/// caches, and its pages are touched once, whatever the size of the file.
const FILE_PIECE_BYTES: usize = 1 << 20;

/// How much of a file is read first, to find where its transcript opens.
const HEAD_BYTES: usize = 64 << 10;

/// How far past a guessed cut the start of an element is looked for.
const CUT_SEARCH_BYTES: usize = 64 << 10;

/// [`parse_leaving_file`] in `threads` parts, each read through windows of `piece` bytes.
pub(crate) fn parse_leaving_file_in(
    file: &RequestFile,
    piece: usize,
    threads: usize,
) -> Option<Result<Leaving, OpsError>> {
    const CUT: &[u8] = b"},{\"";
    let len = file.len();
    let mut head = Window::at(0);
    head.fill(file, piece.max(HEAD_BYTES))?;
    let start = scan::array_start(head.bytes())?;
    let mut rest = Vec::with_capacity(start + 2);
    rest.extend_from_slice(head.bytes().get(..start)?);
    rest.extend_from_slice(b"[]");
    drop(head);
    // The parts: from just after the `[`, each next one where `},{"` is found after an even
    // share of the file (a part too short to hold one is not made).
    let first = start + 1;
    let mut cuts = vec![first];
    let mut near = vec![0; CUT_SEARCH_BYTES];
    for k in 1..threads {
        let guess = (first + k * (len - first) / threads).max(cuts[cuts.len() - 1] + 1);
        let room = near.get_mut(..CUT_SEARCH_BYTES.min(len.saturating_sub(guess)))?;
        file.read_at(room, guess).ok()?;
        match room.windows(CUT.len()).position(|w| w == CUT) {
            Some(found) => cuts.push(guess + found + 2),
            None => break,
        }
    }
    cuts.push(len);
    let parts: Vec<(usize, usize)> = cuts.windows(2).map(|w| (w[0], w[1])).collect();
    let last = parts.len() - 1;
    // Room for as many turns as the file could hold, reserved, not touched (as in
    // `parse_leaving`), in each part's list.
    let most = len / 48;
    let mut slots: Vec<Slot> = std::iter::repeat_with(|| {
        let mut slot = Slot::leaving();
        slot.turns.reserve(most);
        slot
    })
    .take(parts.len())
    .collect();
    let (mut turns, mut left) = (Vec::with_capacity(most), Vec::with_capacity(most));
    let (first_slot, other_slots) = slots.split_first_mut()?;
    let (from, to) = parts[0];
    let (mine, theirs) = cutctx::model::beside::beside(
        || {
            stream_part(
                file,
                (from, to),
                last == 0,
                piece,
                &mut first_slot.builder,
                (&mut turns, &mut left),
            )
        },
        parts[1..]
            .iter()
            .zip(other_slots.iter_mut())
            .enumerate()
            .collect(),
        |(k, (&(from, to), slot)): (usize, (&(usize, usize), &mut Slot))| {
            stream_part(
                file,
                (from, to),
                k + 1 == last,
                piece,
                &mut slot.builder,
                (&mut slot.turns, &mut slot.left),
            )
        },
    );
    let mut results = vec![mine];
    results.extend(theirs.into_iter().map(|r| r.ok().flatten()));
    let mut after = None;
    for (k, result) in results.into_iter().enumerate() {
        let (stop, closed) = result?;
        if k > 0 {
            let slot = &mut other_slots[k - 1];
            let shift = u32::try_from(turns.len()).ok()?;
            for mut l in slot.left.drain(..) {
                l.position = l.position.checked_add(shift)?;
                left.push(l);
            }
            turns.append(&mut slot.turns);
        }
        if k < last {
            // A part confirms the next cut only by stopping exactly there, the array open.
            if closed || stop != parts[k].1 {
                return None;
            }
        } else if closed {
            after = Some(stop);
        }
    }
    let after = after?;
    let mut tail = vec![0; len - after];
    file.read_at(&mut tail, after).ok()?;
    rest.extend_from_slice(&tail);
    let rest = String::from_utf8(rest).ok()?;
    leaving_of(&rest, slots, turns, left)
}

/// The elements of `file` from `from` (where an element is due) to `to` (where the next
/// part's first element starts), or for the `last` part to the array's end, read through
/// windows of `piece` bytes (a larger one for an element longer than a window), their turns
/// appended to `turns` by `builder`, and where their contents were left to `left`: where
/// reading stopped in the file, and whether the array closed. `None` when anything is amiss.
fn stream_part(
    file: &RequestFile,
    (from, to): (usize, usize),
    last: bool,
    piece: usize,
    builder: &mut Builder,
    (turns, left): (&mut Vec<TranscriptTurn>, &mut Vec<Left>),
) -> Option<(usize, bool)> {
    let mut window = Window::at(from);
    let mut want = piece;
    loop {
        window.fill(file, want)?;
        let end = window.base + window.filled;
        // The part ends in this window: read to its end exactly, as a part of a window is.
        let ends_here = !last && to <= end;
        let src = Source::Window(window.bytes(), window.base);
        let (stop, closed) = if ends_here {
            take_part_into(
                src,
                0,
                to - window.base,
                false,
                builder,
                (&mut *turns, &mut *left),
            )?
        } else {
            take_part_into(
                src,
                0,
                window.filled,
                true,
                builder,
                (&mut *turns, &mut *left),
            )?
        };
        if closed || ends_here {
            return Some((window.base + stop, closed));
        }
        if end == file.len() {
            return None;
        }
        if stop == 0 {
            // No whole element in the window: a larger one.
            want = want.checked_mul(2)?;
        }
        window.drain(stop);
    }
}

/// A window of a file [`parse_leaving_file`] reads: its buffer is allocated once (grown only
/// for an element longer than it) and refilled in place.
struct Window {
    buf: Vec<u8>,
    /// How many bytes of `buf` hold the file's.
    filled: usize,
    /// Where in the file `buf` starts.
    base: usize,
}

impl Window {
    const fn at(base: usize) -> Self {
        Self {
            buf: Vec::new(),
            filled: 0,
            base,
        }
    }

    fn bytes(&self) -> &[u8] {
        &self.buf[..self.filled]
    }

    /// Moves the bytes from `at` to the start of the buffer.
    fn drain(&mut self, at: usize) {
        self.buf.copy_within(at..self.filled, 0);
        self.filled -= at;
        self.base += at;
    }

    /// Reads the file on until the window holds `want` bytes or the file ends. `None` when
    /// the read fails.
    fn fill(&mut self, file: &RequestFile, want: usize) -> Option<()> {
        let end = file.len().min(self.base.checked_add(want)?);
        let to = end.checked_sub(self.base)?.max(self.filled);
        if self.buf.len() < to {
            self.buf.resize(to, 0);
        }
        file.read_at(self.buf.get_mut(self.filled..to)?, self.base + self.filled)
            .ok()?;
        self.filled = to;
        Some(())
    }
}

/// The request of the turns read with their contents left (`turns`, the contents at `left`,
/// the placeholders the `slots`' builders made) and of `rest`, the document with `[]` in the
/// transcript's place; `None` when the rest does not parse, for the whole read to report.
fn leaving_of(
    rest: &str,
    slots: Vec<Slot>,
    turns: Vec<TranscriptTurn>,
    left: Vec<Left>,
) -> Option<Result<Leaving, OpsError>> {
    let ObjectOnly(wire): ObjectOnly<RequestWire> = serde_json::from_str(rest).ok()?;
    let placeholders = slots
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

/// The size from which a request held in memory is read piece by piece, its turns on
/// several threads: below it, starting threads costs more than it saves.
const SPLIT_FROM_BYTES: usize = 1 << 20;

/// How many bytes are read at a time: enough that a piece's turns keep every thread busy,
/// small beside any document worth reading in pieces.
const PIECE_BYTES: usize = 4 << 20;

/// The longest element read in pieces: a longer one (a 200 MiB content string) is left to
/// [`parse_whole`], which reads it in one pass, where the pieces would scan it again at
/// each read and look in vain for elements to split on.
const LONGEST_ELEMENT_BYTES: usize = 4 * PIECE_BYTES;

/// The document read in one strict pass: the reference for every result and every error.
fn parse_whole(text: &str) -> Result<Request, OpsError> {
    let ObjectOnly(mut wire): ObjectOnly<RequestWire> = parse_json("the request", text)?;
    let turns = std::mem::replace(&mut wire.transcript, Turns(Ok(Vec::new()))).0?;
    finish(Transcript::new(turns), wire)
}

/// The request in `reader` parsed in parts, `piece` bytes read at a time: each element of the
/// transcript on its own (a piece's elements on up to `threads` threads), and the
/// rest of the document with `[]` in the transcript's place. `None` unless every part is
/// UTF-8 and parses and every turn is built, so that whatever this returns is what
/// [`parse_whole`] builds from the same text, and every error is left to it.
///
/// Why the parts agree with the whole: the scan lexes strings as JSON does, so the place it
/// took for the top-level `transcript` array is that place in the rest of the document,
/// which parses strictly; the separators between elements are checked here and each element
/// is parsed strictly, so the array is JSON and holds exactly these elements, in order.
/// Depth is no concern: a turn record nests two levels, and anything deeper fails its shape.
/// `None` too for an element longer than [`LONGEST_ELEMENT_BYTES`], which the whole parse
/// reads faster.
fn read_in_pieces(
    mut reader: impl Read,
    piece: usize,
    threads: usize,
) -> Option<(Vec<TranscriptTurn>, RequestWire)> {
    let mut buf = Vec::new();
    let mut ended = false;
    // Up to the array's `[`: read until the scan finds it.
    let start = loop {
        if let Some(start) = scan::array_start(&buf) {
            break start;
        }
        if ended {
            return None;
        }
        ended = read_more(&mut reader, &mut buf, piece)?;
    };
    let mut rest = Vec::with_capacity(start + 2);
    rest.extend_from_slice(&buf[..start]);
    rest.extend_from_slice(b"[]");
    let mut turns = Vec::new();
    let mut spans = Vec::new();
    // One slot per thread, kept from piece to piece: its buffers are allocated once, not
    // once a piece (a fresh large allocation is fresh pages, each touched for the first time).
    let mut slots: Vec<Slot> = std::iter::repeat_with(Slot::default)
        .take(threads.max(1))
        .collect();
    let mut at = start + 1;
    let mut want_element = true;
    let mut closed = false;
    loop {
        // The whole elements in the buffer, read in parts on every thread without a scan
        // when an element is due and the parts confirm each other.
        let split = want_element
            .then(|| {
                take_split(
                    Source::Bytes(&buf),
                    at,
                    &mut slots,
                    &mut turns,
                    &mut Vec::new(),
                )
            })
            .flatten();
        if let Some(taken) = split {
            at = taken.at;
            closed = taken.closed;
        } else {
            // Otherwise found by the scan, with the separators after them.
            scanned(&buf, &mut at, &mut want_element, &mut closed, &mut spans)?;
            turns.append(&mut build_all(&buf, &spans, threads)?);
            spans.clear();
        }
        if closed {
            break;
        }
        if ended || buf.len() - at > LONGEST_ELEMENT_BYTES {
            return None;
        }
        buf.drain(..at);
        at = 0;
        ended = read_more(&mut reader, &mut buf, piece)?;
    }
    rest.extend_from_slice(&buf[at..]);
    drop(buf);
    reader.read_to_end(&mut rest).ok()?;
    let rest = std::str::from_utf8(&rest).ok()?;
    let ObjectOnly(wire): ObjectOnly<RequestWire> = serde_json::from_str(rest).ok()?;
    Some((turns, wire))
}

/// The spans of the whole elements of `buf` from `at`, found by the scan and appended to
/// `spans`, with the separators after them; `at`, `want_element` and `closed` say where the
/// array stands after them. `None` when the array is not one of objects.
fn scanned(
    buf: &[u8],
    at: &mut usize,
    want_element: &mut bool,
    closed: &mut bool,
    spans: &mut Vec<Range<usize>>,
) -> Option<()> {
    loop {
        let i = scan::ws(buf, *at);
        let Some(&byte) = buf.get(i) else {
            return Some(());
        };
        if *want_element {
            if byte != b'{' {
                return None;
            }
            let Some(end) = scan::value_end(buf, i) else {
                *at = i;
                return Some(());
            };
            spans.push(i..end);
            *at = end;
            *want_element = false;
        } else {
            match byte {
                b',' => *want_element = true,
                b']' => *closed = true,
                _ => return None,
            }
            *at = i + 1;
            if *closed {
                return Some(());
            }
        }
    }
}

/// Reads at least `piece` bytes more onto `buf` (as many as it holds, when that is more, so
/// that a long value costs reads in proportion to its length); whether the reader has ended.
fn read_more(reader: &mut impl Read, buf: &mut Vec<u8>, piece: usize) -> Option<bool> {
    let want = piece.max(buf.len()) as u64;
    let got = reader.by_ref().take(want).read_to_end(buf).ok()?;
    Some(got == 0)
}

/// The turns of these element spans of `buf`, built on up to `threads` threads (the
/// caller's among them), each thread a contiguous run, joined in order.
fn build_all(buf: &[u8], spans: &[Range<usize>], threads: usize) -> Option<Vec<TranscriptTurn>> {
    let per_thread = spans.len().div_ceil(threads.max(1)).max(1);
    let mut runs = spans.chunks(per_thread);
    let first = runs.next().unwrap_or(&[]);
    let (mut all, others) =
        cutctx::model::beside::beside(|| build(buf, first), runs.collect(), |run| build(buf, run));
    for other in others {
        let mut more = other.ok()??;
        all.as_mut()?.append(&mut more);
    }
    all
}

/// The turns of `run`; `None` at the first element that is not UTF-8, not a turn record, or
/// breaks a turn's rule.
fn build(buf: &[u8], run: &[Range<usize>]) -> Option<Vec<TranscriptTurn>> {
    let mut builder = Builder::default();
    for span in run {
        let text = std::str::from_utf8(&buf[span.clone()]).ok()?;
        if scan::ws(text.as_bytes(), builder.element(text, 0)?) != text.len() {
            return None;
        }
    }
    let mut turns = Vec::with_capacity(run.len());
    // This builder leaves no content in the text.
    builder.finish_into(&mut turns, &mut Vec::new())?;
    Some(turns)
}

/// The turns of a run of elements, built as they are read.
///
/// Each element is read by [`record::record_at`], or strictly when that reader does not take
/// it. The ids of the run's records are made into shared strings last, one after another,
/// so that they sit together apart from the contents (see [`Transcript::with_packed_ids`]).
#[derive(Default)]
struct Builder {
    /// The text of every quickly read record's ids, one after another.
    ids: String,
    /// Room for decoding a string's escapes.
    scratch: String,
    /// The keys of the record read last, in their order.
    keys: record::KeyOrder,
    read: Vec<Element>,
    /// When contents are left in the text: the content every such turn shows, one string
    /// per builder (a shared one would have every thread count references to it).
    placeholder: Option<Arc<str>>,
    /// Where the text this builder reads starts in the request (for [`Left::span`]).
    base: usize,
}

/// An element read quickly, its ids still in [`Builder::ids`], or a turn built strictly.
enum Element {
    Quick(record::Record),
    Strict(TranscriptTurn),
}

impl Builder {
    /// Reads the element of `text` opening at or after `i`; just after it. `None` when the
    /// element is not a turn record, ends before `text` does, or breaks a turn's rule.
    fn element(&mut self, text: &str, i: usize) -> Option<usize> {
        if let Some((r, end)) = record::record_at(
            text,
            i,
            &mut self.ids,
            &mut self.scratch,
            &mut self.keys,
            self.placeholder.as_ref(),
        ) {
            self.read.push(Element::Quick(r));
            return Some(end);
        }
        let i = scan::ws(text.as_bytes(), i);
        let end = scan::value_end(text.as_bytes(), i)?;
        let ObjectOnly(r): ObjectOnly<SharedTurnRecord> =
            serde_json::from_str(&text[i..end]).ok()?;
        self.read
            .push(Element::Strict(TranscriptTurn::try_from(r).ok()?));
        Some(end)
    }

    /// Forgets the element read last.
    fn unread(&mut self) {
        self.read.pop();
    }

    /// Forgets every element read, keeping the room.
    fn clear(&mut self) {
        self.read.clear();
        self.ids.clear();
    }

    /// Appends the turns to `turns`, in the order their elements were read, and where their
    /// contents were left to `left`, and empties the builder for the next run, its buffers
    /// kept. On `None` (a turn that breaks a rule) `turns` may hold some of the run's turns:
    /// the caller discards them.
    fn finish_into(&mut self, turns: &mut Vec<TranscriptTurn>, left: &mut Vec<Left>) -> Option<()> {
        turns.reserve(self.read.len());
        // A result's `tool_call_id` shares its call's string, as `Transcript::new` packs them.
        let mut last_call: Option<Arc<str>> = None;
        let mut built = Some(());
        for r in self.read.drain(..) {
            if built.is_none() {
                // Drained all the same, so the builder is empty for its next run.
                continue;
            }
            let r = match r {
                Element::Quick(r) => r,
                Element::Strict(turn) => {
                    turns.push(turn);
                    continue;
                }
            };
            let turn_id = Arc::from(&self.ids[r.id]);
            let call = r.call.map(|c| {
                let text = &self.ids[c];
                match &last_call {
                    Some(prev) if **prev == *text => Arc::clone(prev),
                    _ => Arc::from(text),
                }
            });
            if call.is_some() {
                last_call.clone_from(&call);
            }
            match TranscriptTurn::try_from(SharedTurnRecord {
                turn_id: WireText(turn_id),
                role: r.role,
                content: WireText(r.content),
                token_estimate: WireInt(i128::from(r.estimate)),
                tool_call_id: call.map(WireText),
                pinned: r.pinned,
                metadata: r.metadata,
            }) {
                Ok(turn) => {
                    if let Some((span, canonical)) = r.left {
                        let Some(l) = Left::of(turns.len(), self.base, span, canonical, r.verbatim)
                        else {
                            built = None;
                            continue;
                        };
                        left.push(l);
                    }
                    turns.push(turn);
                }
                Err(_) => built = None,
            }
        }
        self.ids.clear();
        built
    }
}

/// The text [`take_split`] reads elements from.
#[derive(Clone, Copy)]
enum Source<'a> {
    /// Bytes read so far, not checked: the last part may end inside a character.
    Bytes(&'a [u8]),
    /// A text known to be UTF-8, cut only at characters' boundaries.
    Text(&'a str),
    /// Bytes read from a file at an offset, not checked, as `Bytes`: the spans of the
    /// contents left in them are the file's, the offset added.
    Window(&'a [u8], usize),
}

impl<'a> Source<'a> {
    const fn bytes(self) -> &'a [u8] {
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
}

/// What [`take_split`] read of a buffer.
struct Taken {
    /// Where reading stopped: the start of an element not yet whole, or just after the
    /// array's `]`.
    at: usize,
    /// Whether the array closed.
    closed: bool,
}

/// What one thread of [`take_split`] keeps from piece to piece: its builder and the turns of
/// its part, both emptied after each piece and their room kept.
#[derive(Default)]
struct Slot {
    builder: Builder,
    turns: Vec<TranscriptTurn>,
    /// Where the contents of `turns` were left, by position in `turns`.
    left: Vec<Left>,
}

impl Slot {
    /// A slot whose builder leaves contents in the text.
    fn leaving() -> Self {
        let mut slot = Self::default();
        slot.builder.placeholder = Some(Arc::from(""));
        slot
    }
}

/// The elements of `buf` from `at`, where an element is due, without a scan, their turns
/// appended to `turns`: the buffer is cut at up to `slots.len() - 1` places that look like an
/// element's start (`},{"`, which no string can hold whole), and each part's elements are read
/// from their cut beside the others (`cutctx::model::beside`), the first part on the calling
/// thread straight into `turns`, each other part into its slot. The cuts are guesses; a part's
/// reading confirms them, as it reads on to exactly the next cut. `None`, `turns` as it was, when it does not,
/// or when anything is amiss, for the caller to read the buffer by the scan.
fn take_split(
    src: Source<'_>,
    at: usize,
    slots: &mut [Slot],
    turns: &mut Vec<TranscriptTurn>,
    left: &mut Vec<Left>,
) -> Option<Taken> {
    const CUT: &[u8] = b"},{\"";
    let buf = src.bytes();
    let threads = slots.len().max(1);
    let mut cuts = vec![at];
    let stride = (buf.len() - at) / threads;
    for k in 1..threads {
        let from = (at + k * stride).max(*cuts.last().unwrap_or(&at) + 1);
        let Some(found) = buf
            .get(from..)
            .and_then(|rest| rest.windows(CUT.len()).position(|w| w == CUT))
        else {
            break;
        };
        cuts.push(from + found + 2);
    }
    cuts.push(buf.len());
    let parts: Vec<(usize, usize)> = cuts.windows(2).map(|w| (w[0], w[1])).collect();
    let last = parts.len() - 1;
    let before = turns.len();
    let left_before = left.len();
    let (first_slot, other_slots) = slots.split_first_mut()?;
    let (from, to) = parts[0];
    let (first, others) = cutctx::model::beside::beside(
        || {
            take_part_into(
                src,
                from,
                to,
                last == 0,
                &mut first_slot.builder,
                (turns, left),
            )
        },
        parts[1..]
            .iter()
            .zip(other_slots.iter_mut())
            .enumerate()
            .collect(),
        |(k, (&(from, to), slot)): (usize, (&(usize, usize), &mut Slot))| {
            slot.turns.clear();
            slot.left.clear();
            take_part(src, from, to, k + 1 == last, slot)
        },
    );
    let mut results = vec![first];
    results.extend(others.into_iter().map(|r| r.ok().flatten()));
    let mut taken = None;
    for (k, result) in results.into_iter().enumerate() {
        let Some((stop, closed)) = result else {
            turns.truncate(before);
            left.truncate(left_before);
            return None;
        };
        if k > 0 {
            let slot = &mut other_slots[k - 1];
            let shift = turns.len();
            for mut l in slot.left.drain(..) {
                let Some(position) = u32::try_from(shift)
                    .ok()
                    .and_then(|shift| l.position.checked_add(shift))
                else {
                    turns.truncate(before);
                    left.truncate(left_before);
                    return None;
                };
                l.position = position;
                left.push(l);
            }
            turns.append(&mut slot.turns);
        }
        if k < last {
            // A part confirms the next cut only by stopping exactly there, the array open.
            if closed || stop != parts[k].1 {
                turns.truncate(before);
                left.truncate(left_before);
                return None;
            }
        } else {
            taken = Some(Taken { at: stop, closed });
        }
    }
    taken
}

/// [`take_part_into`] with the slot's builder, into the slot's turns.
fn take_part(
    src: Source<'_>,
    from: usize,
    to: usize,
    last: bool,
    slot: &mut Slot,
) -> Option<(usize, bool)> {
    take_part_into(
        src,
        from,
        to,
        last,
        &mut slot.builder,
        (&mut slot.turns, &mut slot.left),
    )
}

/// The turns of the elements of `buf` from `from`, where an element is due, to the first
/// element due at or after `to` (or, for the `last` part, to the end of the buffer or of the
/// array), appended to `turns` (on `None`, perhaps some of them) by `builder`, and where their
/// contents were left to `left`: where reading stopped, and whether the array closed.
fn take_part_into(
    src: Source<'_>,
    from: usize,
    to: usize,
    last: bool,
    builder: &mut Builder,
    (turns, left): (&mut Vec<TranscriptTurn>, &mut Vec<Left>),
) -> Option<(usize, bool)> {
    // Whatever an earlier run that failed left in it.
    builder.clear();
    builder.base = src.offset().checked_add(from)?;
    let text = match src {
        // Cut at element starts and the window's end, each a character's boundary.
        Source::Text(whole) => whole.get(from..to)?,
        // The part as text: only the last may end inside a character, cut by the read.
        Source::Bytes(buf) | Source::Window(buf, _) => match std::str::from_utf8(&buf[from..to]) {
            Ok(text) => text,
            Err(e) if last && e.error_len().is_none() => {
                std::str::from_utf8(&buf[from..from + e.valid_up_to()]).ok()?
            }
            Err(_) => return None,
        },
    };
    let b = text.as_bytes();
    let mut p = 0;
    let mut closed = false;
    loop {
        let i = scan::ws(b, p);
        if i == b.len() || (!last && from + i >= to) {
            break;
        }
        let Some(end) = builder.element(text, i) else {
            // An element the text ends inside: the next read completes it.
            if last && scan::value_end(b, i).is_none() {
                break;
            }
            return None;
        };
        let j = scan::ws(b, end);
        match b.get(j) {
            Some(b',') => p = j + 1,
            Some(b']') => {
                p = j + 1;
                closed = true;
                break;
            }
            // The separator is not read yet: the element is read again with it.
            None if last => {
                builder.unread();
                break;
            }
            _ => return None,
        }
    }
    builder.finish_into(turns, left)?;
    Some((from + p, closed))
}

/// The request of this transcript (as built from its turns) and the rest of its document
/// (whose own transcript is not read), checked in the reference's order: the transcript,
/// then the budget, then the policy.
fn finish(
    transcript: Result<Transcript, cutctx::CompactionError>,
    wire: RequestWire,
) -> Result<Request, OpsError> {
    let transcript = transcript?;
    let budget = CompactionBudget::from_signed(
        wire.budget.0.max_tokens.0,
        wire.budget.0.protected_recent_turns.0,
    )?;
    let policy = cutctx::policies::registry::from_spec(&wire.policy.0)?;
    Ok(Request {
        transcript,
        budget,
        policy,
        summaries: wire.summaries,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(text: &str) -> &'static str {
        match parse(text) {
            Ok(_) => "OK",
            Err(e) => e.code,
        }
    }

    /// What the strict parse builds of `text`, as canonical bytes: the transcript and budget.
    fn whole(text: &str) -> Result<(String, CompactionBudget), OpsError> {
        parse_whole(text).map(|r| (r.transcript.canonical_json(), r.budget))
    }

    /// What reading `text` in pieces of `piece` bytes builds, when it builds anything.
    fn pieces(text: &str, piece: usize, threads: usize) -> Option<(String, CompactionBudget)> {
        let (turns, wire) = read_in_pieces(text.as_bytes(), piece, threads)?;
        let r = finish(Transcript::with_packed_ids(turns), wire).ok()?;
        Some((r.transcript.canonical_json(), r.budget))
    }

    const TAIL: &str = r#""budget":{"max_tokens":10},"policy":{"name":"drop_oldest"}"#;

    #[test]
    fn pieces_of_any_size_build_what_the_whole_builds() {
        let turns = [
            r#"{"turn_id":"s","role":"system","content":"rules ]},{\"x\":[","token_estimate":3}"#,
            r#"{"metadata":{"k":"v"},"turn_id":"a","role":"assistant","token_estimate":2,"tool_call_id":"c"}"#,
            r#" {"turn_id":"t","role":"tool","content":"é \u00e9 \\","token_estimate":1,"tool_call_id":"c","pinned":true} "#,
        ]
        .join(" ,\n");
        for text in [
            format!(r#"{{"transcript":[{turns}],{TAIL}}}"#),
            format!(r#" {{ {TAIL}, "summaries": {{}}, "transcript" : [ {turns} ] }} "#),
        ] {
            let expected = whole(&text).expect("a valid request");
            for piece in [1, 2, 7, 64, 1 << 20] {
                for threads in [1, 2, 5] {
                    assert_eq!(
                        pieces(&text, piece, threads).as_ref(),
                        Some(&expected),
                        "{piece} {threads}"
                    );
                }
            }
        }
    }

    #[test]
    fn cuts_that_are_not_element_starts_are_caught() {
        // Contents that end in `},{` put a false cut before their closing quote, and a
        // chain's members after the array put one outside it.
        let turns: Vec<String> = (0..60)
            .map(|i| {
                let content = if i % 7 == 3 {
                    "x},{"
                } else {
                    r#"plain \\ \"text\""#
                };
                format!(
                    r#"{{"turn_id":"t{i}","role":"user","content":"{content}","token_estimate":1}}"#
                )
            })
            .collect();
        let text = format!(
            r#"{{"transcript":[{}],"budget":{{"max_tokens":10}},"policy":{{"name":"chain","policies":[{{"name":"drop_oldest"}},{{"name":"drop_oldest"}}]}}}}"#,
            turns.join(",")
        );
        let expected = whole(&text).expect("a valid request");
        for piece in [1, 13, 100, 1 << 20] {
            for threads in [1, 2, 3, 8] {
                assert_eq!(
                    pieces(&text, piece, threads).as_ref(),
                    Some(&expected),
                    "{piece} {threads}"
                );
            }
        }
        // Read without a scan, whatever the cuts, the turns are the whole's or none.
        let b = text.as_bytes();
        let at = scan::array_start(b).expect("an array") + 1;
        let all = parse_whole(&text).expect("valid").transcript.into_turns();
        let mut split = 0;
        for threads in 2..6 {
            // The slots go from attempt to attempt, as from piece to piece, failed or not.
            let mut slots: Vec<Slot> = std::iter::repeat_with(Slot::default)
                .take(threads)
                .collect();
            for n in (at..b.len()).step_by(5) {
                let mut turns = Vec::new();
                if take_split(
                    Source::Bytes(&b[..n]),
                    at,
                    &mut slots,
                    &mut turns,
                    &mut Vec::new(),
                )
                .is_some()
                {
                    assert_eq!(turns, all[..turns.len()], "{n} {threads}");
                    split += 1;
                } else {
                    assert!(turns.is_empty(), "{n} {threads}");
                }
            }
        }
        assert!(split > 100, "{split}");
    }

    /// What reading with the contents left builds, as comparable parts: the request's
    /// transcript and budget, where the contents were left, and whether any placeholder is
    /// shown; or the error's code.
    type LeftParts = Result<(Transcript, CompactionBudget, Vec<Left>, bool), &'static str>;

    fn left_parts(leaving: Option<Result<Leaving, OpsError>>) -> Option<LeftParts> {
        leaving.map(|r| {
            r.map(|l| {
                let shown = !l.placeholders.is_empty();
                (l.request.transcript, l.request.budget, l.left, shown)
            })
            .map_err(|e| e.code)
        })
    }

    #[test]
    fn a_file_read_where_it_lies_in_parts_and_windows_reads_what_the_text_reads() {
        let turns: Vec<String> = (0..90)
            .map(|i| {
                // Contents that end in `},{` put false cuts before their closing quote.
                let content = match i % 7 {
                    3 => "x},{",
                    5 => r#"esc \u00e9 \/ \"q\""#,
                    _ => r#"plain \\ \"text\" é"#,
                };
                let role = ["user", "assistant", "tool"][i % 3];
                let call = if i % 3 == 0 { "" } else { r#","tool_call_id":"c""# };
                format!(
                    r#"{{"content":"{content}","metadata":{{}},"pinned":false,"role":"{role}","token_estimate":{},"tool_call_id":null,"turn_id":"t{i}"}}"#,
                    i % 9 + 1
                )
                .replace(r#","tool_call_id":null"#, call)
            })
            .collect();
        let long = "y".repeat(3000);
        for (name, text) in [
            (
                "usual",
                format!(r#"{{"transcript":[{}],{TAIL}}}"#, turns.join(",")),
            ),
            (
                "spaced",
                format!(
                    r#" {{ {TAIL}, "transcript" : [ {} ] }} "#,
                    turns.join(" , ")
                ),
            ),
            (
                "long",
                format!(
                    r#"{{"transcript":[{{"turn_id":"s","role":"system","content":"{long}","token_estimate":1}},{}],{TAIL}}}"#,
                    turns.join(",")
                ),
            ),
            (
                "budget",
                format!(
                    r#"{{"transcript":[{}],"budget":{{"max_tokens":-1}},"policy":{{"name":"drop_oldest"}}}}"#,
                    turns.join(",")
                ),
            ),
        ] {
            let expected = left_parts(parse_leaving(&text))
                .unwrap_or_else(|| panic!("{name}: {:?}", parse(&text).err()));
            let (path, file) = crate::input::temp_request_file(name, text.as_bytes());
            let mut split = 0;
            for piece in [1, 64, 500, 4096, 1 << 20] {
                for threads in [1, 2, 3, 7] {
                    let read = left_parts(parse_leaving_file_in(&file, piece, threads));
                    if threads == 1 {
                        assert!(read.is_some(), "{name} {piece}: on one thread, always read");
                    } else if read.is_some() {
                        split += 1;
                    }
                    if let Some(read) = read {
                        assert_eq!(read, expected, "{name} {piece} {threads}");
                    }
                }
                assert_eq!(
                    left_parts(parse_leaving_file(&file)),
                    Some(expected.clone()),
                    "{name}"
                );
            }
            // Most cuts fall between elements: read in parts, not only on one thread (a cut
            // is looked for as `},{"`, which spaced separators never spell).
            assert!(
                split >= 6 || name == "spaced",
                "{name}: {split} reads in parts"
            );
            std::fs::remove_file(&path).expect("removed");
        }
    }

    #[test]
    fn a_file_with_anything_amiss_is_left_to_the_whole() {
        let t = r#"{"turn_id":"a","role":"user","token_estimate":1}"#;
        let texts = [
            format!(r#"{{"transcript":[{t},],{TAIL}}}"#),
            format!(r#"{{"transcript":[{t} {t}],{TAIL}}}"#),
            format!(r#"{{"transcript":[{t},1],{TAIL}}}"#),
            format!(r#"{{"transcript":[{t}],{TAIL}}} x"#),
            format!(r#"{{"transcript":[{t}],"transcript":[{t}],{TAIL}}}"#),
            format!(r#"{{"transcript":[{t}],{TAIL}"#),
            format!(r#"{{"transcript":[{t}"#),
            format!(r#"{{"transcript":[{t},{t}"#),
        ];
        // Bytes that are not UTF-8, inside an element or around the array.
        let good = format!(r#"{{"transcript":[{t},{t},{t}],{TAIL}}}"#);
        for at in [good.find("user").expect("a role") + 1, good.len() - 3, 3] {
            let mut bad = good.clone().into_bytes();
            bad[at] = 0xff;
            let (path, file) = crate::input::temp_request_file(&format!("bad-{at}"), &bad);
            for piece in [1, 5, 1 << 20] {
                for threads in [1, 2] {
                    assert!(
                        parse_leaving_file_in(&file, piece, threads).is_none(),
                        "{at}"
                    );
                }
            }
            std::fs::remove_file(&path).expect("removed");
        }
        for (k, text) in texts.iter().enumerate() {
            let (path, file) =
                crate::input::temp_request_file(&format!("amiss-{k}"), text.as_bytes());
            for piece in [1, 5, 1 << 20] {
                for threads in [1, 2] {
                    assert!(
                        parse_leaving_file_in(&file, piece, threads).is_none(),
                        "{piece} {threads} {text}"
                    );
                }
            }
            std::fs::remove_file(&path).expect("removed");
        }
    }

    #[test]
    fn anything_amiss_is_left_to_the_whole() {
        let t = r#"{"turn_id":"a","role":"user","token_estimate":1}"#;
        for text in [
            format!(r#"{{"transcript":[],{TAIL}}}"#),
            format!(r#"{{"transcript":[{t},],{TAIL}}}"#),
            format!(r#"{{"transcript":[{t} {t}],{TAIL}}}"#),
            format!(r#"{{"transcript":[{t},1],{TAIL}}}"#),
            format!(r#"{{"transcript":[{t}],{TAIL}}} x"#),
            format!(r#"{{"transcript":[{t}],"transcript":[{t}],{TAIL}}}"#),
            format!(r#"{{"transcript":[{t}],{TAIL},"extra":1}}"#),
            format!(r#"{{"transcript":[{t}],{TAIL}"#),
            format!(r#"{{"transcript":[{t}"#),
            format!(
                r#"{{"transcript":[{{"turn_id":"a","role":"user","token_estimate":-1}}],{TAIL}}}"#
            ),
            format!(
                r#"{{"transcript":[{{"turn_id":"a","turn_id":"b","role":"user","token_estimate":1}}],{TAIL}}}"#
            ),
            format!(
                r#"{{"transcript":[{{"turn_id":"a","role":"user","token_estimate":18446744073709551616}}],{TAIL}}}"#
            ),
            format!(
                r#"{{"transcript":[{{"turn_id":"\ud800","role":"user","token_estimate":1}}],{TAIL}}}"#
            ),
            format!(
                r#"{{"transcript":[{{"turn_id":"a","role":"user","token_estimate":1,"metadata":{{"k":[[[[]]]]}}}}],{TAIL}}}"#
            ),
        ] {
            for piece in [1, 5, 1 << 20] {
                assert!(pieces(&text, piece, 2).is_none(), "{piece} {text}");
            }
        }
        // Bytes that are not UTF-8, inside an element or around the array.
        let good = format!(r#"{{"transcript":[{t}],{TAIL}}}"#);
        assert!(read_in_pieces(good.as_bytes(), 3, 2).is_some());
        for at in [good.find("user").expect("a role") + 1, good.len() - 3] {
            let mut bad = good.clone().into_bytes();
            bad[at] = 0xff;
            assert!(read_in_pieces(&bad[..], 3, 2).is_none(), "{at}");
        }
    }

    #[test]
    fn an_element_longer_than_the_limit_is_left_to_the_whole_parse() {
        let long = "x".repeat(2 * LONGEST_ELEMENT_BYTES);
        let text = format!(
            r#"{{"transcript":[{{"turn_id":"s","role":"system","content":"{long}","token_estimate":1}},{{"turn_id":"u","role":"user","token_estimate":1}}],{TAIL}}}"#
        );
        // A piece at a time would rescan the long element at every read.
        assert!(read_in_pieces(text.as_bytes(), PIECE_BYTES, 2).is_none());
        // Just under the limit it is still read in pieces.
        let short = "x".repeat(LONGEST_ELEMENT_BYTES - 200);
        let ok = text.replace(&long, &short);
        assert!(read_in_pieces(ok.as_bytes(), PIECE_BYTES, 2).is_some());
        // Either way the request parses, to the same transcript as the strict pass.
        let (Ok(whole), Ok(split)) = (parse_whole(&text), parse(&text)) else {
            panic!("the request parses");
        };
        assert_eq!(split.transcript, whole.transcript);
    }

    #[test]
    fn a_reader_that_fails_asks_for_the_whole_text() {
        let text = format!(
            r#"{{"transcript":[{{"turn_id":"a","role":"user","token_estimate":-1}}],{TAIL}}}"#
        );
        let e = parse_reader(text.as_bytes(), || Ok(text.clone()))
            .err()
            .expect("negative estimate");
        assert_eq!(e.details["turn_id"], "a");
        let e = parse_reader(text.as_bytes(), || {
            Err(OpsError::input("gone", cutctx::model::details! {}))
        })
        .err()
        .expect("unreadable");
        assert_eq!(e.message, "gone");
        let good = text.replace("-1", "1");
        let r = parse_reader(good.as_bytes(), || unreachable!("read in pieces")).ok();
        assert_eq!(r.map(|r| r.transcript.len()), Some(1));
    }

    #[test]
    fn a_broken_turn_waits_for_the_rest_of_the_document() {
        let negative = r#"{"turn_id":"a","role":"user","token_estimate":-1}"#;
        let fine = r#"{"turn_id":"b","role":"user","token_estimate":1}"#;
        let tail = r#""budget":{"max_tokens":10},"policy":{"name":"drop_oldest"}}"#;
        // Alone, the broken turn is the error, with its id.
        let e = parse(&format!(r#"{{"transcript":[{negative},{fine}],{tail}"#))
            .err()
            .expect("negative estimate");
        assert_eq!(e.code, "VALIDATION_ERROR");
        assert_eq!(e.details["turn_id"], "a");
        // Text that is not JSON after it is named first, as when every record was read first.
        assert_eq!(
            code(&format!(r#"{{"transcript":[{negative},{fine}],"budget":"#)),
            "INPUT_ERROR"
        );
        // Of two broken turns, the first is reported.
        let empty = r#"{"turn_id":"","role":"tool","token_estimate":1}"#;
        let e = parse(&format!(r#"{{"transcript":[{negative},{empty}],{tail}"#))
            .err()
            .expect("two broken turns");
        assert_eq!(e.details["turn_id"], "a");
        // A transcript that is not an array says so as before.
        let e = parse(&format!(r#"{{"transcript":{{}},{tail}"#))
            .err()
            .expect("not an array");
        assert!(e.message.contains("expected a sequence"), "{}", e.message);
    }
}
