//! A compaction's output written: whole, as `compact` and `apply` return it, or to a writer a
//! part at a time as the view is made, never held whole, runs of kept turns that a request
//! file spans as they would be written copied straight from the file.

use super::Compacted;
use crate::input::RequestFile;
use crate::output::CopyFrom;
use crate::plan_head;
use crate::request_text::CopyRun;
use crate::text::read_again_failed;

/// How many bytes of the transcript [`Compacted::write_to`] gathers before writing them.
pub(crate) const WRITE_PART_BYTES: usize = 64 << 10;

impl Compacted {
    /// The output whole: what [`compact`](crate::compact) returns.
    #[must_use]
    pub fn into_text(mut self) -> String {
        let mut text = String::new();
        if self.head {
            plan_head::push_head(&self.plan, &mut text);
        } else {
            text.push('{');
        }
        let report = self.report();
        text.reserve(report.len() + self.out.transcript.canonical_len_hint() + 2);
        text.push_str(&report);
        // One part: the text is the buffer, kept whole. The request's text is held whole
        // here, and read again from memory, which cannot fail: only a compaction of a file
        // read where it lies (a `CompactedFile`, which has no `into_text`) reads a file again.
        let whole = self.write_transcript(&mut text, usize::MAX, |_| Ok(()), |e| e, None);
        debug_assert!(
            whole.is_ok(),
            "a text held whole is read again without failing"
        );
        text.push_str("}\n");
        text
    }

    /// The output's `"report":…,"transcript":`: made the first time, once the plan's hash is
    /// known (waiting for the thread hashing it, or hashing it here when none was started or
    /// the thread was lost), and taken from the compaction until given back.
    fn report(&mut self) -> String {
        if let Some(report) = self.report.take() {
            return report;
        }
        let hashed = self.hashing.take().and_then(|h| h.join().ok());
        self.out.report.plan_hash = hashed.unwrap_or_else(|| self.plan.plan_hash());
        let mut report = self
            .report_head
            .take()
            .unwrap_or_else(|| report_head(&self.out.report));
        self.out.report.write_canonical_from_hash(&mut report);
        report.push_str(",\"transcript\":");
        report
    }

    /// Writes the view's canonical JSON onto `buf`, handing it to `drain` each time it holds
    /// `part` bytes or more, and at the end: its kept contents copied from the request's text
    /// where they were left there.
    ///
    /// With `copy` and a length, runs of kept turns written as their records stand in a
    /// request file, at least that long, are handed to it as ranges of the file (see
    /// `RequestText::write_view`).
    fn write_transcript<E>(
        &self,
        buf: &mut String,
        part: usize,
        drain: impl FnMut(&mut String) -> Result<(), E>,
        read_failed: impl Fn(std::io::Error) -> E,
        copy: Option<(CopyRun<'_, E>, usize)>,
    ) -> Result<(), E> {
        let view = &self.out.transcript;
        match &self.left {
            Some((text, located)) => {
                text.write_view(view, located, buf, part, drain, read_failed, copy)
            }
            None => view.write_canonical_in_parts(buf, part, drain),
        }
    }

    /// Writes the output to `out` and flushes it: the bytes of [`Compacted::into_text`], the
    /// transcript written a part at a time as it is made, never held whole.
    ///
    /// # Errors
    ///
    /// The first error writing to `out` returns; part of the output may have been written.
    pub fn write_to(&mut self, out: &mut impl std::io::Write) -> std::io::Result<()> {
        self.write_out(out, None)
    }

    /// [`Compacted::write_to`], each run of kept turns whose records stand one after another
    /// in the request file, at least as long as `copy` says, handed to `copy` with `out`, as
    /// the range of the file it spans.
    pub(crate) fn write_out<W: std::io::Write>(
        &mut self,
        out: &mut W,
        copy: Option<(CopyRange<W>, usize)>,
    ) -> std::io::Result<()> {
        if self.head {
            plan_head::write_head(&self.plan, out)?;
        } else {
            out.write_all(b"{")?;
        }
        let report = self.report();
        let written = out.write_all(report.as_bytes());
        // Kept for a later writing of the same output.
        self.report = Some(report);
        written?;
        let mut buf = String::with_capacity(2 * WRITE_PART_BYTES);
        // Written by the drain and by the copy in turn, never at once.
        let out = std::cell::RefCell::new(out);
        let out_ref = &out;
        let mut copying = copy.map(|(copy, shortest)| {
            let copy = move |file: &RequestFile, range: std::ops::Range<usize>| {
                copy(&mut out_ref.borrow_mut(), file, range)
            };
            (copy, shortest)
        });
        self.write_transcript(
            &mut buf,
            WRITE_PART_BYTES,
            |part| {
                out.borrow_mut().write_all(part.as_bytes())?;
                part.clear();
                Ok::<(), std::io::Error>(())
            },
            // Carried to `output::deliver_with` as the input's error it is.
            |e| std::io::Error::other(read_again_failed(&e, None)),
            copying
                .as_mut()
                .map(|(copy, shortest)| (copy as CopyRun<'_, std::io::Error>, *shortest)),
        )?;
        let out = out.into_inner();
        out.write_all(b"}\n")?;
        out.flush()
    }
}

/// How a range of a request file is written into an output `W` (see [`Compacted::write_out`]).
pub(crate) type CopyRange<W> =
    fn(&mut W, &RequestFile, std::ops::Range<usize>) -> std::io::Result<()>;

/// The output's `"report":` and `report` up to its `plan_hash` value, in a buffer sized for the
/// whole report.
pub(super) fn report_head(report: &cutctx::CompactionReport) -> String {
    let mut head = String::with_capacity(report.canonical_len_hint() + 32);
    head.push_str("\"report\":");
    report.write_canonical_before_hash(&mut head);
    head
}

/// Writes `range` of `file` into `out` straight from the file. A failure is the input's when
/// the file no longer holds the range or changed (an `INPUT_ERROR` carried out, as the view's
/// reads carry theirs), else the output's.
pub(crate) fn copy_from_file<W: CopyFrom>(
    out: &mut W,
    file: &RequestFile,
    range: std::ops::Range<usize>,
) -> std::io::Result<()> {
    file.copy_to(range.clone(), out).map_err(|e| {
        // A copy cut short: the file ends before the range does.
        let short = e.kind() == std::io::ErrorKind::UnexpectedEof;
        match file.unchanged() {
            Ok(()) if !short => e,
            Ok(()) => std::io::Error::other(read_again_failed(&e, Some(range.start))),
            Err(changed) => std::io::Error::other(read_again_failed(&changed, Some(range.start))),
        }
    })
}
