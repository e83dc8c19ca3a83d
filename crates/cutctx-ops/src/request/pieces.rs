//! A request document read a piece at a time, from a text held whole or from a reader, its
//! turns built on every core as the pieces come: only a piece, the turns built so far and the
//! rest of the document around the transcript are ever held.

use std::io::Read;
use std::ops::Range;

use cutctx::{Parallelism, Transcript, TranscriptTurn};

use super::builder::Builder;
use super::split::{Slot, Source, take_split};
use super::wire::{RequestWire, finish, parse_whole, rest_of_document};
use super::{Request, scan};
use crate::error::OpsError;

/// The size from which a request held in memory is read piece by piece, its turns on
/// several threads: below it, starting threads costs more than it saves.
const SPLIT_FROM_BYTES: usize = 1 << 20;

/// How many bytes are read at a time: enough that a piece's turns keep every thread busy,
/// small beside any document worth reading in pieces.
pub(super) const PIECE_BYTES: usize = 4 << 20;

/// The longest element read in pieces: a longer one (a 200 MiB content string) is left to
/// [`parse_whole`], which reads it in one pass, where the pieces would scan it again at
/// each read and look in vain for elements to split on.
pub(super) const LONGEST_ELEMENT_BYTES: usize = 4 * PIECE_BYTES;

/// Parses and validates the request document `reader` holds, reading it piece by piece so
/// that the whole text is never held: only a piece, the turns built so far, and the rest of
/// the document around the transcript. When anything in the document is amiss (or cannot be
/// read), `whole` reads it again whole and [`parse`](super::parse) gives the error it would
/// have given: `reader` must read what `whole` does, a regular file rather than a stream.
///
/// # Errors
///
/// As [`parse`](super::parse), and whatever `whole` returns.
pub fn parse_reader(
    reader: impl Read,
    whole: impl FnOnce() -> Result<String, OpsError>,
) -> Result<Request, OpsError> {
    match read_in_pieces(reader, PIECE_BYTES, Parallelism::Automatic.threads()) {
        Some((turns, wire)) => finish(Transcript::with_packed_ids(turns), wire),
        None => parse_whole(&whole()?),
    }
}

/// `text` read in pieces when it is large enough for that to pay, `None` otherwise (or when
/// anything in it is amiss), for the strict pass.
pub(super) fn read_large(text: &str) -> Option<(Vec<TranscriptTurn>, RequestWire)> {
    if text.len() < SPLIT_FROM_BYTES {
        return None;
    }
    read_in_pieces(
        text.as_bytes(),
        PIECE_BYTES,
        Parallelism::Automatic.threads(),
    )
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
pub(super) fn read_in_pieces(
    mut reader: impl Read,
    piece: usize,
    threads: usize,
) -> Option<(Vec<TranscriptTurn>, RequestWire)> {
    let mut buf = Vec::new();
    let (start, ended) = read_to_array(&mut reader, &mut buf, piece)?;
    let mut rest = Vec::with_capacity(start + 2);
    rest.extend_from_slice(&buf[..start]);
    rest.extend_from_slice(b"[]");
    let mut reading = Reading {
        buf,
        at: start + 1,
        ended,
        want_element: true,
        closed: false,
    };
    let turns = reading.elements(&mut reader, piece, threads)?;
    rest.extend_from_slice(&reading.buf[reading.at..]);
    drop(reading);
    reader.read_to_end(&mut rest).ok()?;
    let rest = std::str::from_utf8(&rest).ok()?;
    Some((turns, rest_of_document(rest)?))
}

/// Reads `reader` onto `buf` up to the transcript array's `[`: where it is, and whether the
/// reader has ended.
fn read_to_array(reader: &mut impl Read, buf: &mut Vec<u8>, piece: usize) -> Option<(usize, bool)> {
    let mut ended = false;
    loop {
        if let Some(start) = scan::array_start(buf) {
            return Some((start, ended));
        }
        if ended {
            return None;
        }
        ended = read_more(reader, buf, piece)?;
    }
}

/// The transcript array of a document read a piece at a time, from just after its `[`.
struct Reading {
    /// What has been read and not yet taken.
    buf: Vec<u8>,
    /// Where in `buf` reading stands.
    at: usize,
    /// Whether the reader has ended.
    ended: bool,
    /// Whether an element is due at `at` (rather than a separator).
    want_element: bool,
    /// Whether the array has closed.
    closed: bool,
}

impl Reading {
    /// Every element's turn, up to the array's `]`: `at` just after it.
    fn elements(
        &mut self,
        reader: &mut impl Read,
        piece: usize,
        threads: usize,
    ) -> Option<Vec<TranscriptTurn>> {
        let mut turns = Vec::new();
        let mut spans = Vec::new();
        // One slot per thread, kept from piece to piece: its buffers are allocated once, not
        // once a piece (a fresh large allocation is fresh pages, each touched for the first
        // time).
        let mut slots = Slot::many(threads, Slot::default);
        loop {
            self.take(&mut slots, &mut turns, &mut spans, threads)?;
            if self.closed {
                return Some(turns);
            }
            if self.ended || self.buf.len() - self.at > LONGEST_ELEMENT_BYTES {
                return None;
            }
            self.buf.drain(..self.at);
            self.at = 0;
            self.ended = read_more(reader, &mut self.buf, piece)?;
        }
    }

    /// The whole elements in the buffer, read in parts on every thread without a scan when an
    /// element is due and the parts confirm each other, or else found by the scan, with the
    /// separators after them.
    fn take(
        &mut self,
        slots: &mut [Slot],
        turns: &mut Vec<TranscriptTurn>,
        spans: &mut Vec<Range<usize>>,
        threads: usize,
    ) -> Option<()> {
        let split = self
            .want_element
            .then(|| {
                take_split(
                    Source::Bytes(&self.buf),
                    self.at,
                    slots,
                    turns,
                    &mut Vec::new(),
                )
            })
            .flatten();
        if let Some(taken) = split {
            self.at = taken.at;
            self.closed = taken.closed;
            return Some(());
        }
        self.scanned(spans)?;
        turns.append(&mut build_all(&self.buf, spans, threads)?);
        spans.clear();
        Some(())
    }

    /// The spans of the whole elements of the buffer from `at`, found by the scan and
    /// appended to `spans`, with the separators after them; `at`, `want_element` and `closed`
    /// say where the array stands after them. `None` when the array is not one of objects.
    fn scanned(&mut self, spans: &mut Vec<Range<usize>>) -> Option<()> {
        let buf = &self.buf;
        loop {
            let i = scan::ws(buf, self.at);
            let Some(&byte) = buf.get(i) else {
                return Some(());
            };
            if self.want_element {
                if byte != b'{' {
                    return None;
                }
                let Some(end) = scan::value_end(buf, i) else {
                    self.at = i;
                    return Some(());
                };
                spans.push(i..end);
                self.at = end;
                self.want_element = false;
            } else {
                match byte {
                    b',' => self.want_element = true,
                    b']' => self.closed = true,
                    _ => return None,
                }
                self.at = i + 1;
                if self.closed {
                    return Some(());
                }
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
pub(super) fn build(buf: &[u8], run: &[Range<usize>]) -> Option<Vec<TranscriptTurn>> {
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
