//! A compaction of a request read where it lies in its file, its output not yet written
//! ([`CompactedFile`]): writing it reads the file again, checked unchanged before the output's
//! first byte, and copies long runs of kept records straight from the file.

use crate::compacted::{Compacted, copy_from_file};
use crate::output;
use crate::request_text::COPIED_RUN_BYTES;
use crate::text::read_again_failed;

/// A compaction of a request read where it lies in its file
/// ([`compact_file`](crate::compact_file)), its output not yet written. Writing it reads the
/// file again, which may fail: it is only written to a writer, whose errors carry that failure
/// as the [`OpsError`](crate::OpsError) it is.
pub struct CompactedFile(pub(crate) Compacted);

impl CompactedFile {
    /// Writes the output to `out` and flushes it, as [`Compacted::write_to`] does.
    ///
    /// # Errors
    ///
    /// The first error writing to `out`; a failure to read the file again, or a file found
    /// changed, as an error carrying the `INPUT_ERROR` [`OpsError`](crate::OpsError) (see
    /// [`output::deliver_with`]): before the first byte for a file that changed since it was
    /// opened, else with part of the output written, never its end.
    pub fn write_to(&mut self, out: &mut impl std::io::Write) -> std::io::Result<()> {
        self.unchanged()?;
        self.0.write_to(out)
    }

    /// As [`CompactedFile::write_to`], each long run of kept turns whose records stand one
    /// after another in the file (at a 50% budget, the newest half of a transcript) written
    /// into `out` straight from the file ([`output::CopyFrom`]): for standard output, by the
    /// kernel where the system allows it (into a file or a device), never read into this
    /// program; the bytes are those of [`CompactedFile::write_to`].
    ///
    /// # Errors
    ///
    /// As [`CompactedFile::write_to`]; a run the file no longer holds whole is a file that
    /// changed.
    pub fn write_copying_to(&mut self, out: &mut impl output::CopyFrom) -> std::io::Result<()> {
        self.write_copying_runs_to(out, COPIED_RUN_BYTES)
    }

    /// [`CompactedFile::write_copying_to`], copying runs of at least `shortest` bytes.
    pub(crate) fn write_copying_runs_to(
        &mut self,
        out: &mut impl output::CopyFrom,
        shortest: usize,
    ) -> std::io::Result<()> {
        self.unchanged()?;
        self.0.write_out(out, Some((copy_from_file, shortest)))
    }

    /// Whether the file is unchanged since it was opened, as an error for the writer.
    fn unchanged(&self) -> std::io::Result<()> {
        // A file that changed since it was opened (while it was planned, say) fails before
        // the first byte: only one changing while the output is written leaves part of it.
        match &self.0.left {
            Some((text, _)) => text
                .unchanged()
                .map_err(|e| std::io::Error::other(read_again_failed(&e, None))),
            None => Ok(()),
        }
    }
}
