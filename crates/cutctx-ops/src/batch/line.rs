//! One request of a batch through the compaction of a provider request, behind a guard: a
//! defect (a panic) fails that request alone, as an `INTERNAL_ERROR`, and never the run.

use cutctx::model::details;

use crate::OpsError;
use crate::formats::{self, Detailed, FormatOptions};

/// `work()`, or, when it panics, the line's failure. A panic is a defect, but it must not
/// stop the run: a worker that died would never answer its line, and the writer, the reader
/// and the other workers would wait on each other for ever.
pub(super) fn guarded<T>(work: impl FnOnce() -> Result<T, OpsError>) -> Result<T, OpsError> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(work)).unwrap_or_else(|_| {
        Err(OpsError {
            code: crate::error::INTERNAL_ERROR,
            message: "compacting the line failed an internal check: a defect of cutctx, not of \
                      the line"
                .to_owned(),
            details: details! {},
        })
    })
}

/// One line through `cutctx compact --format`'s own function.
pub(super) fn compact_line(
    args: &FormatOptions,
    summaries: Option<&str>,
    line: &[u8],
    keep: bool,
) -> Result<Detailed, OpsError> {
    let text = std::str::from_utf8(line).map_err(|e| {
        OpsError::input(
            format!(
                "the line is not UTF-8: invalid byte at offset {}",
                e.valid_up_to()
            ),
            details! { "document" => "the transcript", "offset" => e.valid_up_to() },
        )
    })?;
    // The report's text is not written by a batch (`--report` is refused): not made.
    let keep = formats::Keep {
        compaction: keep,
        report: false,
    };
    formats::compact_detailed(args, text, summaries, keep)
}
