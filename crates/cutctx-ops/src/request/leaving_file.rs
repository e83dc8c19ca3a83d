//! A request document read where it lies in its file, with each turn's content left there: a
//! part of the transcript for each thread, each read through a window of its own, so that only
//! the windows, the turns and the rest of the document are ever held.

use cutctx::Parallelism;

use super::builder::Builder;
use super::leaving::leaving_of;
use super::left::Leaving;
use super::scan;
use super::split::{Part, Sink, Slot, Source, cut_in, guess_parts, read_parts, take_part_into};
use crate::error::OpsError;
use crate::input::RequestFile;

/// As [`parse_leaving`](super::parse_leaving), reading the request from `file` where it lies,
/// a window at a time, instead of from a text held whole: the transcript is cut into a part for
/// each thread where an element seems to start (as `parse_leaving` cuts each of its windows),
/// and each thread reads its part through a window of its own, each window checked as UTF-8
/// where it is read, the spans of the contents left the file's offsets. Only the windows, the
/// turns and the rest of the document are ever held.
///
/// One part a thread for the whole file, not a part a thread for each window: a thread
/// that waits between windows is put to sleep, and on some machines it takes longer to wake
/// again than a window takes to read. When a cut turns out not to be an element's start,
/// the file is read again on one thread.
///
/// `None` when anything is unusual, as for `parse_leaving` (and also when the `transcript`
/// array does not open in the first window): the caller then reads the file whole.
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
    let len = file.len();
    let mut head = Window::at(0);
    head.fill(file, piece.max(HEAD_BYTES))?;
    let start = scan::array_start(head.bytes())?;
    let mut rest = Vec::with_capacity(start + 2);
    rest.extend_from_slice(head.bytes().get(..start)?);
    rest.extend_from_slice(b"[]");
    drop(head);
    let parts = guess_parts(start + 1, len, threads, cut_finder(file))?;
    // Room for as many turns as the file could hold, reserved, not touched (as in
    // `parse_leaving`), in each part's list.
    let most = len / 48;
    let mut slots = Slot::many(parts.len(), || {
        let mut slot = Slot::leaving();
        slot.turns.reserve(most);
        slot
    });
    let (mut turns, mut left) = (Vec::with_capacity(most), Vec::with_capacity(most));
    let taken = read_parts(
        &parts,
        &mut slots,
        &mut turns,
        &mut left,
        |part, builder, sink| stream_part(file, part, piece, builder, sink),
    )?;
    if !taken.closed {
        return None;
    }
    let mut tail = vec![0; len - taken.at];
    file.read_at(&mut tail, taken.at).ok()?;
    rest.extend_from_slice(&tail);
    let rest = String::from_utf8(rest).ok()?;
    leaving_of(&rest, slots, turns, left)
}

/// What finds an element's start near a guessed cut in `file`: within
/// [`CUT_SEARCH_BYTES`] of it; `None` when that read fails.
fn cut_finder(file: &RequestFile) -> impl FnMut(usize) -> Option<Option<usize>> + '_ {
    let mut near = vec![0; CUT_SEARCH_BYTES];
    move |guess| {
        let room = near.get_mut(..CUT_SEARCH_BYTES.min(file.len().saturating_sub(guess)))?;
        file.read_at(room, guess).ok()?;
        Some(cut_in(room).map(|c| guess + c))
    }
}

/// The elements of `part` of `file` (for the `last` part, to the array's end), read through
/// windows of `piece` bytes (a larger one for an element longer than a window), their turns
/// appended to `turns` by `builder`, and where their contents were left to `left`: where
/// reading stopped in the file, and whether the array closed. `None` when anything is amiss.
fn stream_part(
    file: &RequestFile,
    part: Part,
    piece: usize,
    builder: &mut Builder,
    (turns, left): Sink<'_>,
) -> Option<(usize, bool)> {
    let mut window = Window::at(part.from);
    let mut want = piece;
    loop {
        window.fill(file, want)?;
        let end = window.base + window.filled;
        // The part ends in this window: read to its end exactly, as a part of a window is.
        let ends_here = !part.last && part.to <= end;
        let in_window = Part {
            from: 0,
            to: if ends_here {
                part.to - window.base
            } else {
                window.filled
            },
            last: !ends_here,
        };
        let src = Source::Window(window.bytes(), window.base);
        let (stop, closed) = take_part_into(src, in_window, builder, (&mut *turns, &mut *left))?;
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
