//! Outputs written so that none is lost quietly, for every front end: a failure to write is an
//! [`OUTPUT_ERROR`] naming the target and the kind of failure, never a quiet success.
//!
//! * Standard output gets the output in one `write_all` and a flush ([`deliver`],
//!   [`deliver_with`]), through a buffer of its own ([`Stdout`], `stdout.rs`). A failure (a
//!   full disk, a device error) is `OUTPUT_ERROR` with `{"target": "stdout", "kind": …}`; part
//!   of the output may have reached the stream before the failure, which the exit status then
//!   disowns. A closed pipe is the reader's choice, not a fault: it is [`Delivery::ReaderGone`],
//!   reported by nothing but the exit status [`CLOSED_PIPE_STATUS`].
//! * A whole file (a report, a state, an errors file) is written to `.NAME.tmp-<pid>` beside it,
//!   flushed and synced, then renamed over it ([`AtomicFile`], `atomic_file.rs`), so the file is
//!   either as it was or entirely the new content. On any failure the temporary file is removed
//!   and the error is `OUTPUT_ERROR` with `{"target": …, "kind": …, "path": …}`.

use std::io::{ErrorKind, Write};
use std::path::Path;

use crate::{OUTPUT_ERROR, OpsError};

mod atomic_file;
mod stdout;

pub use atomic_file::{AtomicFile, write_atomically};
pub use stdout::{CopyFrom, Stdout};

/// The exit status when standard output is a pipe whose reader has gone: 128 + `SIGPIPE` (13),
/// what a shell reports for a program the closed pipe ended.
pub const CLOSED_PIPE_STATUS: u8 = 141;

/// What became of an output on standard output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    /// Written whole and flushed.
    Written,
    /// The reader closed the pipe: nobody wants the rest.
    ReaderGone,
}

/// The stable name of an I/O error's kind, as it appears in `details.kind`: the
/// `std::io::ErrorKind` variant, for example `StorageFull`, `NotFound` or `IsADirectory`.
fn kind_name(kind: ErrorKind) -> String {
    format!("{kind:?}")
}

/// An [`OUTPUT_ERROR`] for writing `target` (`stdout`, `report`), at `path` for a file.
pub(crate) fn output_error(target: &str, path: Option<&Path>, e: &std::io::Error) -> OpsError {
    let mut details = cutctx::model::details! { "target" => target, "kind" => kind_name(e.kind()) };
    let message = match path {
        Some(p) => {
            details.insert(
                "path".to_owned(),
                serde_json::Value::from(p.display().to_string()),
            );
            format!("cannot write the {target} to {}: {e}", p.display())
        }
        None => format!("cannot write to standard output: {e}"),
    };
    OpsError {
        code: OUTPUT_ERROR,
        message,
        details,
    }
}

/// Writes `bytes` to `out` (standard output, in the binary) and flushes it.
///
/// # Errors
///
/// `OUTPUT_ERROR` with `{"target": "stdout", "kind": …}` when the write or the flush fails for
/// any reason but a closed pipe.
pub fn deliver(out: &mut impl Write, bytes: &[u8]) -> Result<Delivery, OpsError> {
    deliver_with(out, |out| out.write_all(bytes).and_then(|()| out.flush()))
}

/// As [`deliver`], the output written and flushed by `write`, for an output written as it
/// is made.
///
/// # Errors
///
/// As [`deliver`].
pub fn deliver_with<W: Write>(
    out: &mut W,
    write: impl FnOnce(&mut W) -> std::io::Result<()>,
) -> Result<Delivery, OpsError> {
    match write(out) {
        Ok(()) => Ok(Delivery::Written),
        Err(e) if e.kind() == ErrorKind::BrokenPipe => Ok(Delivery::ReaderGone),
        // The writer failed on what it read, not on the output: that error, as it is.
        Err(e) => match e
            .get_ref()
            .and_then(|inner| inner.downcast_ref::<OpsError>())
        {
            Some(input) => Err(input.clone()),
            None => Err(output_error("stdout", None, &e)),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A writer that accepts `room` bytes, then fails as a full disk does.
    struct Full {
        room: usize,
        kind: ErrorKind,
    }

    impl Write for Full {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            if self.room == 0 {
                return Err(std::io::Error::from(self.kind));
            }
            let n = buf.len().min(self.room);
            self.room -= n;
            Ok(n)
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_full_stream_is_an_output_error_naming_stdout_and_the_kind() {
        let mut out = Full {
            room: 3,
            kind: ErrorKind::StorageFull,
        };
        let err = deliver(&mut out, b"{\"plan\":{}}\n").expect_err("the stream is full");
        assert_eq!(err.code, OUTPUT_ERROR);
        assert_eq!(err.exit_status(), 6);
        assert_eq!(err.details["target"], "stdout");
        assert_eq!(err.details["kind"], "StorageFull");
        assert!(!err.details.contains_key("path"));
    }

    #[test]
    fn a_closed_pipe_is_the_reader_gone_and_a_good_stream_is_written() {
        let mut gone = Full {
            room: 0,
            kind: ErrorKind::BrokenPipe,
        };
        assert_eq!(deliver(&mut gone, b"x\n"), Ok(Delivery::ReaderGone));
        let mut good = Vec::new();
        assert_eq!(deliver(&mut good, b"x\n"), Ok(Delivery::Written));
        assert_eq!(good, b"x\n");
    }
}
