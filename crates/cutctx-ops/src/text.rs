//! The text a request was read from, as the compaction reads it again: held whole, or read
//! where it lies in its file, a window at a time.
//!
//! After planning, a compaction reads the request's text again only where contents were left
//! in it: a masked turn's content to hash it, a kept turn's record or content to copy it.
//! Those reads come in the order of the turns, a block of them on each thread, so a file is
//! read a window at a time into a buffer each thread keeps (a thread-local one: the readers
//! are whichever threads hash and write, the pool's among them, and the digests' reader is
//! called through a trait that carries no buffer). A window's bytes are checked as UTF-8 where
//! they are handed out: the request was checked when it was parsed, so a failure there means
//! that the file changed since.
//!
//! The planner of contents left in a text (`cutctx::formats::left_in_text`) reads it through
//! [`ReadAgain`], a failed read an `INPUT_ERROR` ([`read_again_failed`]).

use std::borrow::Cow;
use std::cell::RefCell;
use std::io;
use std::ops::Range;

use cutctx::CompactionError;
use cutctx::formats::left_in_text::ReadAgain;
use cutctx::model::details;

use crate::OpsError;
use crate::input::{CHANGED, RequestFile};

/// The text a request was read from.
#[derive(Debug)]
pub(crate) enum Text<'a> {
    /// Held whole.
    Whole(Cow<'a, str>),
    /// Left in its file, read again where it is needed.
    File(RequestFile),
}

/// How much of a file a thread reads at a time: about a block of the view's turns (see
/// `request_text::view::WRITE_BLOCK_TURNS`), and small enough to stay in a core's own cache.
const WINDOW_BYTES: usize = 256 << 10;

thread_local! {
    /// This thread's window of the file it read last.
    static WINDOW: RefCell<Window> = const { RefCell::new(Window::new()) };
}

impl Text<'_> {
    /// `f` of the text at `range` (a range the parse found: a content or a record).
    /// `f` must not read the text itself.
    ///
    /// # Errors
    ///
    /// For a file, whatever reading it fails with, or an error saying that it changed while
    /// it was read when the bytes at `range` are not UTF-8 any more; for a text held whole,
    /// a range outside it, never expected.
    pub(crate) fn with_str<R>(
        &self,
        range: Range<usize>,
        f: impl FnOnce(&str) -> R,
    ) -> io::Result<R> {
        match self {
            Self::Whole(text) => text.get(range).map(f).ok_or_else(|| {
                io::Error::new(io::ErrorKind::InvalidInput, "a range outside the request")
            }),
            Self::File(file) => WINDOW.with_borrow_mut(|window| window.read(file, range).map(f)),
        }
    }

    /// Whether the text is still what was read: always, for a text held whole.
    ///
    /// # Errors
    ///
    /// As [`RequestFile::unchanged`].
    pub(crate) fn unchanged(&self) -> io::Result<()> {
        match self {
            Self::Whole(_) => Ok(()),
            Self::File(file) => file.unchanged(),
        }
    }
}

impl ReadAgain for Text<'_> {
    type Error = OpsError;

    fn read<R>(&self, span: Range<usize>, f: impl FnOnce(&str) -> R) -> Result<R, OpsError> {
        let start = span.start;
        self.with_str(span, f)
            .map_err(|e| read_again_failed(&e, Some(start)))
    }

    fn undecodable(&self, position: usize) -> OpsError {
        OpsError::from(CompactionError::validation(
            "A content read from the request no longer decodes.",
            details! { "position" => position },
        ))
    }
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

/// A thread's window of a file: the bytes from `offset`, of the file opened as `file`.
struct Window {
    file: Option<u64>,
    offset: usize,
    bytes: Vec<u8>,
}

impl Window {
    const fn new() -> Self {
        Self {
            file: None,
            offset: 0,
            bytes: Vec::new(),
        }
    }

    /// The text at `range` of `file`, read into the window first unless it is there.
    fn read(&mut self, file: &RequestFile, range: Range<usize>) -> io::Result<&str> {
        let inside = self.file == Some(file.id())
            && range.start >= self.offset
            && range.end <= self.offset + self.bytes.len();
        if !inside {
            let end = file
                .len()
                .min(range.start.saturating_add(WINDOW_BYTES.max(range.len())));
            if range.start > range.end || range.end > end {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "a range past the end of the request",
                ));
            }
            // Marked empty until the read has filled it.
            self.file = None;
            self.bytes.resize(end - range.start, 0);
            file.read_at(&mut self.bytes, range.start)?;
            self.file = Some(file.id());
            self.offset = range.start;
        }
        let bytes = &self.bytes[range.start - self.offset..range.end - self.offset];
        std::str::from_utf8(bytes).map_err(|_| io::Error::other(CHANGED))
    }
}

#[cfg(test)]
mod tests {
    use super::{Text, WINDOW_BYTES};

    /// A large text of short lines, each naming its own number: a range read at the wrong
    /// offset shows.
    fn lines() -> String {
        (0..400_000).map(|i| format!("{i:07}é\n")).collect()
    }

    #[test]
    fn ranges_read_from_a_file_are_those_of_the_text() {
        let text = lines();
        let (path, file) = crate::input::temp_request_file("text-ranges", text.as_bytes());
        let from_file = Text::File(file);
        let whole = Text::Whole(text.clone().into());
        let len = text.len();
        // In order, within a window, across its end, longer than a window, backwards, the
        // last bytes, an empty range.
        let ranges = [
            0..10,
            10..20,
            20..100,
            WINDOW_BYTES - 4..WINDOW_BYTES + 6,
            1000..1000 + 3 * WINDOW_BYTES,
            10..20,
            len - 10..len,
            500..500,
        ];
        for range in ranges {
            let expected = &text[range.clone()];
            for source in [&from_file, &whole] {
                let read = source
                    .with_str(range.clone(), str::to_owned)
                    .expect("reads");
                assert_eq!(read, expected, "{range:?}");
            }
        }
        // Past the end, or inside a character: errors, never bytes.
        assert!(from_file.with_str(len - 2..len + 1, |_| ()).is_err());
        assert!(whole.with_str(len - 2..len + 1, |_| ()).is_err());
        assert!(from_file.with_str(7..8, |_| ()).is_err(), "half of `é`");
        from_file.unchanged().expect("unchanged");
        std::fs::remove_file(&path).expect("removed");
    }

    #[test]
    fn a_file_that_changes_is_found_out() {
        let text = lines();
        let (path, file) = crate::input::temp_request_file("text-changes", text.as_bytes());
        let from_file = Text::File(file);
        from_file.unchanged().expect("unchanged");
        // The same length, other bytes: the second byte of a line's `é` overwritten.
        let line = 2 * WINDOW_BYTES / 10 * 10;
        let mut changed = text.clone().into_bytes();
        changed[line + 8] = b'x';
        std::fs::write(&path, &changed).expect("rewritten");
        let range = line..line + 10;
        let err = from_file
            .with_str(range, |_| ())
            .expect_err("no longer UTF-8");
        assert_eq!(err.to_string(), crate::input::CHANGED);
        assert_eq!(
            from_file.unchanged().expect_err("changed").to_string(),
            crate::input::CHANGED
        );
        std::fs::remove_file(&path).expect("removed");
    }
}
